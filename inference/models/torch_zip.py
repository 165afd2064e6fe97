"""Read a state dict saved by ``torch.save`` (the zip format) without torch and without running pickle code.

The zip holds ``<name>/data.pkl`` (the pickled dict), one ``<name>/data/<key>`` entry per storage and
``<name>/byteorder``. A checkpoint is an untrusted download, so :class:`_StateDictUnpickler` resolves only the
globals a state dict needs (``collections.OrderedDict``, ``torch._utils._rebuild_tensor_v2`` /
``_rebuild_parameter`` and the typed ``torch.*Storage`` classes), each to a harmless stand-in defined here,
and refuses every other global with :class:`UnsafeCheckpointError`. Tensors stay lazy
(:class:`TensorRef`) until :meth:`TorchStateDict.read` copies one out of its storage entry.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from inference.errors import ModelError

# torch's typed storage classes → the numpy element type of their bytes (bfloat16 is read as raw uint16).
STORAGE_DTYPES: dict[str, str] = {
    "FloatStorage": "f4",
    "DoubleStorage": "f8",
    "HalfStorage": "f2",
    "BFloat16Storage": "bf16",
    "LongStorage": "i8",
    "IntStorage": "i4",
    "ShortStorage": "i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "b1",
}
_ITEMSIZE = {"f4": 4, "f8": 8, "f2": 2, "bf16": 2, "i8": 8, "i4": 4, "i2": 2, "i1": 1, "u1": 1, "b1": 1}
_MAX_PICKLE_BYTES = 256 << 20  # a state dict's pickle holds names and shapes only


class UnsafeCheckpointError(ModelError):
    """The checkpoint's pickle asks for something a plain state dict never needs (possibly malicious)."""


@dataclass(frozen=True)
class _StorageType:
    name: str

    @property
    def dtype(self) -> str:
        return STORAGE_DTYPES[self.name]


@dataclass(frozen=True)
class StorageRef:
    key: str  # the entry data/<key>
    dtype: str  # a key of _ITEMSIZE
    numel: int


@dataclass(frozen=True)
class TensorRef:
    storage: StorageRef
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]

    @property
    def dtype(self) -> str:
        return self.storage.dtype


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, *_rest: Any) -> TensorRef:
    """Stand-in for ``torch._utils._rebuild_tensor_v2`` (requires_grad, hooks and metadata are ignored)."""
    if not isinstance(storage, StorageRef):
        raise UnsafeCheckpointError(
            "a tensor in the checkpoint is not backed by a stored array", "use a plain torch.save state dict"
        )
    try:
        shape = tuple(int(d) for d in size)
        strides = tuple(int(s) for s in stride)
        start = int(offset)
    except (TypeError, ValueError):
        raise ModelError(
            "a tensor in the checkpoint has a malformed shape or stride", "download the file again"
        ) from None
    if len(shape) != len(strides) or start < 0 or any(d < 0 for d in shape) or any(s < 0 for s in strides):
        raise ModelError(
            f"a tensor in the checkpoint has shape {shape} and stride {strides}", "download the file again"
        )
    if (
        0 not in shape
        and start + sum((d - 1) * s for d, s in zip(shape, strides, strict=True)) >= storage.numel
    ):
        raise ModelError(
            f"a tensor of shape {shape} reaches past its storage data/{storage.key}",
            "download the file again",
        )
    return TensorRef(storage, start, shape, strides)


def _rebuild_parameter(data: Any, *_rest: Any) -> TensorRef:
    """Stand-in for ``torch._utils._rebuild_parameter``: a parameter is its tensor."""
    if not isinstance(data, TensorRef):
        raise UnsafeCheckpointError(
            "a parameter in the checkpoint does not wrap a tensor", "use a plain torch.save state dict"
        )
    return data


def _ordered_dict(*args: Any) -> collections.OrderedDict:
    if args:
        raise UnsafeCheckpointError(
            "the checkpoint builds an OrderedDict from arguments", "use a plain torch.save state dict"
        )
    return collections.OrderedDict()


_ALLOWED: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): _ordered_dict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    **{("torch", name): _StorageType(name) for name in STORAGE_DTYPES},
}


class _StateDictUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, source: str) -> None:
        super().__init__(io.BytesIO(data))
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        allowed = _ALLOWED.get((module, name))
        if allowed is None and module == "torch" and name.endswith("Storage"):
            raise ModelError(
                f"{self.source} stores tensors of type torch.{name}, which this reader does not support",
                "save the weights as float32, float16 or bfloat16",
            )
        if allowed is None:
            raise UnsafeCheckpointError(
                f"{self.source} asks to load {module}.{name}, which a state dict of tensors never needs; "
                "nothing from it was run",
                "use a checkpoint from a source you trust (a plain torch.save state dict)",
            )
        return allowed

    def persistent_load(self, pid: Any) -> StorageRef:
        if not (
            isinstance(pid, tuple)
            and len(pid) == 5
            and pid[0] == "storage"
            and isinstance(pid[1], _StorageType)
        ):
            raise UnsafeCheckpointError(
                f"{self.source} refers to an unknown kind of stored object {pid!r:.80}",
                "use a plain torch.save state dict",
            )
        _, kind, key, _location, numel = pid
        if not isinstance(key, str) or not isinstance(numel, int) or numel < 0:
            raise ModelError(f"{self.source} has a malformed storage reference", "download the file again")
        return StorageRef(key, kind.dtype, numel)


class TorchStateDict:
    """The tensors of a torch zip checkpoint by name; open with :func:`open_torch_state_dict`."""

    def __init__(
        self,
        archive: zipfile.ZipFile,
        prefix: str,
        tensors: dict[str, TensorRef],
        big_endian: bool,
        source: str,
    ):
        self._zip = archive
        self._prefix = prefix
        self.tensors = tensors
        self._big_endian = big_endian
        self.source = source

    def __enter__(self) -> TorchStateDict:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()

    def read(self, name: str) -> np.ndarray:
        """The tensor as a C-contiguous array (bfloat16 widened to float32; others keep their type)."""
        ref = self.tensors[name]
        entry = f"{self._prefix}data/{ref.storage.key}"
        try:
            raw = self._zip.read(entry)
        except KeyError:
            raise ModelError(
                f"{self.source} lacks {entry} (tensor {name!r})", "download the file again"
            ) from None
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise ModelError(f"{self.source}: {entry} is damaged: {exc}", "download the file again") from None
        itemsize = _ITEMSIZE[ref.dtype]
        if len(raw) < ref.storage.numel * itemsize:
            raise ModelError(
                f"{self.source}: {entry} has {len(raw)} bytes, tensor {name!r} needs "
                f"{ref.storage.numel * itemsize}",
                "download the file again",
            )
        order = ">" if self._big_endian else "<"
        stored = "u2" if ref.dtype == "bf16" else ("?" if ref.dtype == "b1" else ref.dtype)
        flat = np.frombuffer(
            raw, dtype=np.dtype(order + stored) if itemsize > 1 else np.dtype(stored), count=ref.storage.numel
        )
        view = (
            np.lib.stride_tricks.as_strided(
                flat[ref.offset :],
                shape=ref.shape,
                strides=tuple(s * itemsize for s in ref.stride),
                writeable=False,
            )
            if 0 not in ref.shape
            else np.zeros(ref.shape, dtype=flat.dtype)
        )
        if ref.dtype == "bf16":
            return (view.astype(np.uint32) << 16).view(np.float32)
        return np.array(view, dtype=view.dtype.newbyteorder("="), order="C")  # a copy; keeps 0-d shapes


def open_torch_state_dict(path: Path) -> TorchStateDict:
    """Open ``path`` (a torch zip checkpoint) and read its tensor table; nothing in the pickle is executed."""
    source = str(path)
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise ModelError(
            f"{source} is not a torch zip checkpoint (the legacy or a damaged file)",
            "re-save it with torch.save from torch 1.6 or later, or download it again",
        ) from None
    except OSError as exc:
        raise ModelError(f"cannot read {source}: {exc}", "check the file") from None
    try:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise ModelError(
                f"{source} has {len(pickles)} data.pkl entries, expected one", "download the file again"
            )
        prefix = pickles[0][: -len("data.pkl")]
        info = archive.getinfo(pickles[0])
        if info.file_size > _MAX_PICKLE_BYTES:
            raise ModelError(
                f"{source}: data.pkl is {info.file_size} bytes, too large for a state dict",
                "use a plain torch.save state dict",
            )
        big_endian = False
        if f"{prefix}byteorder" in archive.namelist():
            order = archive.read(f"{prefix}byteorder").decode("ascii", "replace").strip()
            if order not in ("little", "big"):
                raise ModelError(f"{source} has byte order {order!r}", "download the file again")
            big_endian = order == "big"
        data = archive.read(pickles[0])
        try:
            loaded = _StateDictUnpickler(data, source).load()
        except (
            pickle.UnpicklingError,
            EOFError,
            ValueError,
            TypeError,
            AttributeError,
            IndexError,
            KeyError,
        ) as exc:
            raise ModelError(
                f"{source}: its data.pkl cannot be read as a state dict: {exc}", "download the file again"
            ) from None
        tensors = _tensor_table(loaded, source)
    except BaseException:
        archive.close()
        raise
    return TorchStateDict(archive, prefix, tensors, big_endian, source)


def _tensor_table(loaded: Any, source: str) -> dict[str, TensorRef]:
    state = loaded.get("state_dict", loaded) if isinstance(loaded, dict) else loaded
    if not isinstance(state, dict):
        raise ModelError(
            f"{source} does not hold a state dict (found {type(state).__name__})",
            "use a plain torch.save state dict",
        )
    tensors: dict[str, TensorRef] = {}
    for name, value in state.items():
        if not isinstance(name, str) or not isinstance(value, TensorRef):
            raise ModelError(
                f"{source}: state dict entry {name!r} is not a tensor", "use a plain torch.save state dict"
            )
        tensors[name] = value
    return tensors
