"""The JSON header of a safetensors file, checked as the safetensors library checks it, before anything is mapped.

Every entry must be ``{"dtype", "shape", "data_offsets"}`` with a known dtype, non-negative integer dims and
offsets, ``shape x dtype size == end - begin`` and the bytes inside the file; the tensors tile the data (no
shared bytes, no gaps, nothing after the last) and ``__metadata__`` maps strings to strings. A header that
breaks a rule is refused with an InputFileError naming the file and the tensor.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any, TypeGuard

from inference.errors import InputFileError

METADATA = "__metadata__"
MAX_HEADER_BYTES = 100 << 20  # the safetensors library's own limit
DTYPE_SIZES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
_FIX = "re-download the model or check the path"


class _Malformed(ValueError):
    pass


class _Truncated(_Malformed):
    pass


def read_safetensors_header(path: Path) -> tuple[int, dict[str, dict[str, Any]]]:
    """Where the data starts and the header (``__metadata__`` included when present), every entry checked.

    Raises InputFileError naming the file (and the tensor) when the header is unreadable or breaks a rule, so
    a damaged or hostile file never surfaces later as a shape error or a read outside the file.
    """
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            (header_len,) = struct.unpack("<Q", handle.read(8))
            if header_len > MAX_HEADER_BYTES:
                raise _Malformed(f"its header claims {header_len} bytes (at most {MAX_HEADER_BYTES})")
            if 8 + header_len > size:
                raise _Malformed(f"header length {header_len} runs past the end of the file")
            header = json.loads(handle.read(header_len))
    except RecursionError:
        raise InputFileError(
            f"{path} is not a valid safetensors file: its header nests too deeply", _FIX
        ) from None
    except (OSError, struct.error, ValueError) as exc:
        raise InputFileError(f"{path} is not a valid safetensors file: {exc}", _FIX) from None
    data_start = 8 + header_len
    if not isinstance(header, dict):
        raise InputFileError(f"{path} is not a valid safetensors file: the header is not a JSON object", _FIX)
    try:
        _check_entries(header, size - data_start)
    except _Truncated as exc:
        raise InputFileError(f"{path} is truncated ({exc})", "re-download the model") from None
    except _Malformed as exc:
        raise InputFileError(f"{path} is not a valid safetensors file: {exc}", _FIX) from None
    return data_start, header


def _check_entries(header: dict[str, Any], data_size: int) -> None:
    metadata = header.get(METADATA, {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _Malformed(f"{METADATA} is not an object of strings")
    spans = sorted((*_span(name, info, data_size), name) for name, info in header.items() if name != METADATA)
    # As the library requires: the tensors tile the data from its first byte to the end of the file.
    covered = 0
    for begin, end, name in spans:
        if begin < covered:
            raise _Malformed(f"tensor {name!r} shares bytes with the tensor before it")
        if begin > covered:
            raise _Malformed(f"{begin - covered} bytes before tensor {name!r} belong to no tensor")
        covered = end
    if covered != data_size:
        raise _Malformed(f"{data_size - covered} bytes after the last tensor belong to no tensor")


def _span(name: str, info: object, data_size: int) -> tuple[int, int]:
    if not isinstance(info, dict):
        raise _Malformed(f"tensor {name!r} is not described by an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
        raise _Malformed(f"tensor {name!r} has unknown dtype {dtype!r}")
    if not _naturals(shape):
        raise _Malformed(f"tensor {name!r} has shape {shape!r}, not a list of non-negative integers")
    if not _naturals(offsets) or len(offsets) != 2 or offsets[0] > offsets[1]:
        raise _Malformed(f"tensor {name!r} has data_offsets {offsets!r}, not [begin, end]")
    begin, end = offsets
    if end > data_size:
        raise _Truncated(f"tensor {name!r} ends past the end of the file")
    needed = math.prod(shape) * DTYPE_SIZES[dtype]
    if end - begin != needed:
        raise _Malformed(
            f"tensor {name!r} ({dtype} {shape}) needs {needed} bytes, its offsets span {end - begin}"
        )
    return begin, end


def _naturals(value: object) -> TypeGuard[list[int]]:
    """A list of non-negative ints (JSON ``true`` is a bool, not a dim)."""
    return isinstance(value, list) and all(type(v) is int and v >= 0 for v in value)
