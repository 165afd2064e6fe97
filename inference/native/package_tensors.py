"""The logical tensor table of an audio.cpp GGUF package (docs/gguf_packages.md §2), read the same way by every family.

``audiocpp.tensor_names`` gives each GGUF tensor, in file order, its logical name (physical names may be
``_audiocpp.<i>``); ``audiocpp.tensor_ranks`` and ``audiocpp.tensor_shapes`` give its logical shape in PyTorch
order, a rank-0 scalar being one element. Lookups must go through the logical names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np

from inference.errors import ModelError
from inference.native.gguf_file import GgufFile, GgufTensor

NAMES = "audiocpp.tensor_names"
RANKS = "audiocpp.tensor_ranks"
SHAPES = "audiocpp.tensor_shapes"
_FIX = "the package is damaged or was not written by audio.cpp; re-download it"


@dataclass(frozen=True)
class LogicalTensor:
    name: str  # logical name (what the family looks up)
    tensor: GgufTensor  # where its bytes are
    shape: tuple[int, ...]  # logical shape, numpy/PyTorch order; (1,) for a scalar


def logical_tensors(package: GgufFile, source: str, *, require_names: bool = True) -> list[LogicalTensor]:
    """Every tensor of ``package`` under its logical name and shape, checked against the stored data.

    Without ``audiocpp.tensor_names`` the physical names stand (when ``require_names`` is false).
    """
    tensors = package.tensors
    names = package.fields.get(NAMES)
    if names is None:
        if require_names:
            raise ModelError(
                f"{source} has no {NAMES}", "use an audio.cpp GGUF package (not a llama.cpp GGUF)"
            )
        names = [tensor.name for tensor in tensors]
    if not isinstance(names, list) or not all(isinstance(name, str) and name for name in names):
        raise ModelError(f"{source}: {NAMES} is not an array of names", _FIX)
    if len(names) != len(tensors):
        raise ModelError(f"{source}: {NAMES} lists {len(names)} names for {len(tensors)} tensors", _FIX)
    if len(set(names)) != len(names):
        twice = sorted({name for name in names if names.count(name) > 1})
        raise ModelError(f"{source}: {NAMES} names {', '.join(twice[:3])} more than once", _FIX)
    shapes = _logical_shapes(package, source, names)
    return [
        LogicalTensor(name, tensor, shape) for name, tensor, shape in zip(names, tensors, shapes, strict=True)
    ]


def _logical_shapes(package: GgufFile, source: str, names: list[str]) -> list[tuple[int, ...]]:
    ranks, dims = package.fields.get(RANKS), package.fields.get(SHAPES)
    if ranks is None and dims is None:
        return [tensor.shape for tensor in package.tensors]
    if not (_integer_array(ranks) and _integer_array(dims)) or len(ranks) != len(names):
        raise ModelError(f"{source}: {RANKS} and {SHAPES} do not describe its {len(names)} tensors", _FIX)
    shapes: list[tuple[int, ...]] = []
    pos = 0
    for name, rank, tensor in zip(names, (int(r) for r in ranks), package.tensors, strict=True):
        count = max(rank, 1)  # a rank-0 scalar still has one dim stored
        logical = tuple(int(d) for d in dims[pos : pos + count])
        pos += count
        if rank < 0 or len(logical) != count:
            raise ModelError(f"{source}: {SHAPES} ends before tensor {name!r}", _FIX)
        if any(d < 0 for d in logical) or math.prod(logical) != math.prod(tensor.shape):
            raise ModelError(
                f"{source}: tensor {name!r} shape {logical} does not match its data {tensor.shape}", _FIX
            )
        shapes.append(logical if rank > 0 else (1,))
    if pos != len(dims):
        raise ModelError(f"{source}: {SHAPES} holds {len(dims) - pos} dims more than its tensors use", _FIX)
    return shapes


def _integer_array(value: object) -> TypeGuard[np.ndarray]:
    """A numeric GGUF array (a string array or a scalar in its place is a damaged table, not a crash)."""
    return isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "iu"
