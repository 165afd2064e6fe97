"""Read a state dict saved by ``torch.save`` (the zip format) without torch and without running pickle code.

The zip holds ``<name>/data.pkl`` (the pickled dict), one ``<name>/data/<key>`` entry per storage and
``<name>/byteorder``. A checkpoint is an untrusted download, so :class:`_StateDictUnpickler` resolves only the
globals a state dict needs (``collections.OrderedDict``, ``torch._utils._rebuild_tensor_v2`` /
``_rebuild_parameter`` and the typed ``torch.*Storage`` classes), each to a harmless stand-in defined here,
and refuses every other global with :class:`UnsafeCheckpointError`. Tensors stay lazy
(:class:`TensorRef`) until :meth:`TorchStateDict.read` copies one out of its storage entry.

Nothing the file says is trusted (docs/families/parakeet_tdt.md §1.1): the objects the pickle builds refuse a later
BUILD (a pickle could otherwise rewrite a validated stride or offset), and every tensor's shape, stride and offset
is checked again where it is read, against the bytes its entry really holds, before numpy sees them. Entries are
read streamed and only as far as the tensor reaches; a compressed entry must be deflate (the one method that
bounds its expansion) and may not claim more than deflate can produce from its compressed bytes.
"""

from __future__ import annotations

import collections
import io
import math
import pickle
import struct
import zipfile
import zlib
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
_MAX_PICKLE_BYTES = 8 << 20  # names and shapes only: ~150 KB for a 0.6B model; a bigger one is an object bomb
_MAX_BYTEORDER_BYTES = 16
_DEFLATE_MAX_RATIO = 1032  # the most bytes deflate can produce per compressed byte
_READ_BLOCK = 1 << 20
_DAMAGE = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    struct.error,
    OverflowError,
    NotImplementedError,
    RuntimeError,
)  # what zipfile raises for a damaged, foreign or encrypted entry


class UnsafeCheckpointError(ModelError):
    """The checkpoint's pickle asks for something a plain state dict never needs (possibly malicious)."""


def _no_rebuild(obj: object, _state: object) -> None:
    """``__setstate__`` of everything the pickle may build: a BUILD opcode would rewrite a validated object."""
    raise UnsafeCheckpointError(
        f"the checkpoint's pickle rewrites a {type(obj).__name__.lstrip('_')} after building it, which a "
        "state dict never does; nothing from it was used",
        "use a checkpoint from a source you trust (a plain torch.save state dict)",
    )


@dataclass(frozen=True)
class _StorageType:
    name: str
    __setstate__ = _no_rebuild

    @property
    def dtype(self) -> str:
        return STORAGE_DTYPES[self.name]


@dataclass(frozen=True)
class StorageRef:
    key: str  # the entry data/<key>
    dtype: str  # a key of _ITEMSIZE
    numel: int
    __setstate__ = _no_rebuild


@dataclass(frozen=True)
class TensorRef:
    storage: StorageRef
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    __setstate__ = _no_rebuild

    @property
    def dtype(self) -> str:
        return self.storage.dtype

    def span(self) -> int:
        """Elements of the storage this tensor covers, from its offset to its last element (0 when empty)."""
        if 0 in self.shape:
            return 0
        return sum((d - 1) * s for d, s in zip(self.shape, self.stride, strict=True)) + 1


class _StandIn:
    """A global the pickle may call; refuses BUILD like the objects it builds (a function's attributes could
    otherwise be rewritten for every later load in this process)."""

    __slots__ = ("_call",)
    __setstate__ = _no_rebuild

    def __init__(self, call: Any) -> None:
        self._call = call

    def __call__(self, *args: Any) -> Any:
        return self._call(*args)


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, *_rest: Any) -> TensorRef:
    """Stand-in for ``torch._utils._rebuild_tensor_v2`` (requires_grad, hooks and metadata are ignored)."""
    if not isinstance(storage, StorageRef):
        raise UnsafeCheckpointError(
            "a tensor in the checkpoint is not backed by a stored array", "use a plain torch.save state dict"
        )
    if not (isinstance(size, tuple) and isinstance(stride, tuple) and type(offset) is int):
        raise ModelError(
            "a tensor in the checkpoint has a malformed shape or stride", "download the file again"
        )
    if not all(type(v) is int for v in (*size, *stride)):
        raise ModelError(
            "a tensor in the checkpoint has a malformed shape or stride", "download the file again"
        )
    ref = TensorRef(storage, offset, size, stride)
    problem = _geometry_problem(ref)
    if problem is not None:
        raise ModelError(f"a tensor in the checkpoint {problem}", "download the file again")
    return ref


def _geometry_problem(ref: TensorRef) -> str | None:
    """Why ``ref``'s shape, stride and offset cannot be read from its storage, or None."""
    shape, strides, start = ref.shape, ref.stride, ref.offset
    if len(shape) != len(strides) or len(shape) > 64 or start < 0 or min((*shape, *strides), default=0) < 0:
        return f"has shape {str(shape)[:80]} and stride {str(strides)[:80]}"
    if start + ref.span() > ref.storage.numel:
        return f"of shape {shape} reaches past its storage data/{ref.storage.key}"
    if math.prod(shape) > max(ref.span(), 1):
        return f"of shape {shape} and stride {strides} repeats storage elements (a broadcast view)"
    return None


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
    ("collections", "OrderedDict"): _StandIn(_ordered_dict),
    ("torch._utils", "_rebuild_tensor_v2"): _StandIn(_rebuild_tensor),
    ("torch._utils", "_rebuild_parameter"): _StandIn(_rebuild_parameter),
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
                f"{self.source} refers to an unknown kind of stored object ({type(pid).__name__})",
                "use a plain torch.save state dict",
            )
        _, kind, key, _location, numel = pid
        if type(key) is not str or type(numel) is not int or numel < 0 or "/" in key or len(key) > 200:
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
        """The tensor as a C-contiguous array (bfloat16 widened to float32; others keep their type).

        The tensor's geometry is checked again here, against the bytes its entry holds, and only the stretch
        of the entry it covers is read (streamed, so a compressed entry is never inflated past it)."""
        ref = self.tensors[name]
        entry = f"{self._prefix}data/{ref.storage.key}"
        problem = _geometry_problem(ref)
        if problem is not None:
            raise ModelError(f"{self.source}: tensor {name!r} {problem}", "download the file again")
        itemsize = _ITEMSIZE[ref.dtype]
        order = ">" if self._big_endian else "<"
        stored = "u2" if ref.dtype == "bf16" else ("?" if ref.dtype == "b1" else ref.dtype)
        dtype = np.dtype(order + stored) if itemsize > 1 else np.dtype(stored)
        if 0 in ref.shape:
            empty = np.zeros(ref.shape, dtype=dtype.newbyteorder("="))
            return empty.astype(np.float32) if ref.dtype == "bf16" else empty
        raw = self._read_span(entry, name, ref.offset * itemsize, ref.span() * itemsize)
        flat = np.frombuffer(raw, dtype=dtype, count=ref.span())
        view = np.lib.stride_tricks.as_strided(
            flat, shape=ref.shape, strides=tuple(s * itemsize for s in ref.stride), writeable=False
        )
        if ref.dtype == "bf16":
            return (view.astype(np.uint32) << 16).view(np.float32)
        return np.array(view, dtype=view.dtype.newbyteorder("="), order="C")  # a copy; keeps 0-d shapes

    def _read_span(self, entry: str, name: str, start: int, length: int) -> bytes:
        """Bytes ``start`` .. ``start + length`` of ``entry``, after checking the entry can hold them."""
        where = f"{self.source}: {entry} (tensor {name!r})"
        try:
            info = self._zip.getinfo(entry)
        except KeyError:
            raise ModelError(
                f"{self.source} lacks {entry} (tensor {name!r})", "download the file again"
            ) from None
        if info.file_size < start + length:
            raise ModelError(
                f"{where} has {info.file_size} bytes, the tensor needs {start + length}",
                "download the file again",
            )
        out = bytearray()
        skipped = 0
        try:
            with self._zip.open(info) as stream:
                while skipped < start:  # read and drop: a compressed stream cannot seek
                    block = stream.read(min(_READ_BLOCK, start - skipped))
                    if not block:
                        break
                    skipped += len(block)
                while skipped == start and len(out) < length:
                    block = stream.read(min(_READ_BLOCK, length - len(out)))
                    if not block:
                        break
                    out += block
        except _DAMAGE as exc:
            raise ModelError(f"{where} is damaged: {_plain(exc)}", "download the file again") from None
        if len(out) < length:
            raise ModelError(
                f"{where} ends after {skipped + len(out)} bytes, the tensor needs {start + length}",
                "download the file again",
            )
        return bytes(out)


def _plain(exc: BaseException) -> str:
    """An exception as a short phrase for a message (its text, else its kind)."""
    text = " ".join(str(exc).split())  # one line: a message never spans several
    return text[:200] if text else type(exc).__name__


def open_torch_state_dict(path: Path, source: str | None = None) -> TorchStateDict:
    """Open ``path`` (a torch zip checkpoint) and read its tensor table; nothing in the pickle is executed.

    ``source`` names the file in messages (e.g. ``model.nemo:model_weights.ckpt`` for a member unpacked to a
    temporary path); the default is ``path`` itself."""
    source = source or str(path)
    try:
        archive = zipfile.ZipFile(path)
    except _DAMAGE as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise ModelError(f"cannot read {source}: {exc.strerror}", "check the file") from None
        raise ModelError(
            f"{source} is not a torch zip checkpoint (the legacy or a damaged file)",
            "re-save it with torch.save from torch 1.6 or later, or download it again",
        ) from None
    try:
        prefix, pickled = _check_entries(archive, source, path.stat().st_size)
        big_endian = False
        if f"{prefix}byteorder" in archive.NameToInfo:
            raw = _read_small(archive, f"{prefix}byteorder", _MAX_BYTEORDER_BYTES, source)
            order = raw.decode("ascii", "replace").strip()
            if order not in ("little", "big"):
                raise ModelError(f"{source} has byte order {order[:20]!r}", "download the file again")
            big_endian = order == "big"
        data = _read_small(archive, pickled, _MAX_PICKLE_BYTES, source)
        try:
            loaded = _StateDictUnpickler(data, source).load()
        except ModelError as exc:  # a stand-in's refusal: say which file
            raise type(exc)(
                f"{source}: {exc.message}" if source not in exc.message else exc.message, exc.fix
            ) from None
        except (
            pickle.UnpicklingError,
            EOFError,
            ValueError,
            TypeError,
            AttributeError,
            IndexError,
            KeyError,
            OverflowError,
            RecursionError,
            MemoryError,
        ) as exc:
            raise ModelError(
                f"{source}: its data.pkl is not a plain state dict ({type(exc).__name__}: {_plain(exc)[:120]})",
                "download the file again",
            ) from None
        tensors = _tensor_table(loaded, source)
    except BaseException:
        archive.close()
        raise
    return TorchStateDict(archive, prefix, tensors, big_endian, source)


def _check_entries(archive: zipfile.ZipFile, source: str, file_bytes: int) -> tuple[str, str]:
    """The prefix and pickle entry of a checkpoint whose entries are each stored once, unencrypted, inside the
    file, stored or deflated, and claiming no more than their compressed bytes can hold."""
    infos = archive.infolist()
    names = [info.filename for info in infos]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ModelError(f"{source} holds the entry {twice[:120]!r} twice", "download the file again")
    pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise ModelError(
            f"{source} has {len(pickles)} data.pkl entries, expected one", "download the file again"
        )
    for info in infos:
        name = info.filename[:120]
        if info.flag_bits & 0x1:
            raise ModelError(
                f"{source}: its entry {name!r} is encrypted", "use a plain torch.save checkpoint"
            )
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ModelError(
                f"{source}: its entry {name!r} uses compression method {info.compress_type}, which torch never "
                "writes",
                "re-save it with torch.save",
            )
        if info.header_offset + info.compress_size > file_bytes:
            raise ModelError(
                f"{source}: its entry {name!r} claims {info.compress_size} bytes past the end of the file",
                "download the file again",
            )
        stored = info.compress_type == zipfile.ZIP_STORED
        if (stored and info.file_size != info.compress_size) or (
            not stored and info.file_size > _DEFLATE_MAX_RATIO * info.compress_size + 1024
        ):
            raise ModelError(
                f"{source}: its entry {name!r} claims {info.file_size} bytes from {info.compress_size} "
                "compressed ones, more than its compression can hold",
                "download the file again",
            )
    return pickles[0][: -len("data.pkl")], pickles[0]


def _read_small(archive: zipfile.ZipFile, entry: str, limit: int, source: str) -> bytes:
    """A small entry whole, streamed and refused past ``limit`` bytes whatever its header says."""
    try:
        with archive.open(entry) as stream:
            data = stream.read(limit + 1)
    except _DAMAGE as exc:
        raise ModelError(f"{source}: {entry} is damaged: {_plain(exc)}", "download the file again") from None
    if len(data) > limit:
        raise ModelError(
            f"{source}: {entry} holds more than {limit} bytes, too large for a state dict",
            "use a plain torch.save state dict",
        )
    return data


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
            label = repr(name[:120]) if isinstance(name, str) else f"of type {type(name).__name__}"
            raise ModelError(
                f"{source}: state dict entry {label} is not a tensor", "use a plain torch.save state dict"
            )
        tensors[name] = value
    return tensors
