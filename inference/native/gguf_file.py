"""A small, fast GGUF (v2/v3) parser: metadata, tensor directory and tensor bytes over one memory map.

``gguf.GGUFReader`` builds one numpy object per array element, so the multi-megabyte byte array of an
audio.cpp package's embedded files (``audiocpp.embedded_files.data``, a real tokenizer.json is ~11 MB)
takes minutes and gigabytes. Here numeric arrays are single slices of the map and strings are decoded once.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from inference.errors import ModelError

_MAGIC = b"GGUF"
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_ARRAY_DEPTH = 8  # arrays of arrays: no real package nests; a hostile one would exhaust the stack
_MIN_FIELD_BYTES = 8 + 4 + 1  # key length, value type, the smallest value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # name length, dims, type, offset
_SCALARS: dict[int, np.dtype] = {
    gguf.GGUFValueType.UINT8: np.dtype("<u1"),
    gguf.GGUFValueType.INT8: np.dtype("<i1"),
    gguf.GGUFValueType.UINT16: np.dtype("<u2"),
    gguf.GGUFValueType.INT16: np.dtype("<i2"),
    gguf.GGUFValueType.UINT32: np.dtype("<u4"),
    gguf.GGUFValueType.INT32: np.dtype("<i4"),
    gguf.GGUFValueType.FLOAT32: np.dtype("<f4"),
    gguf.GGUFValueType.BOOL: np.dtype("<u1"),
    gguf.GGUFValueType.UINT64: np.dtype("<u8"),
    gguf.GGUFValueType.INT64: np.dtype("<i8"),
    gguf.GGUFValueType.FLOAT64: np.dtype("<f8"),
}


@dataclass(frozen=True)
class GgufTensor:
    name: str  # the name stored in the file (audio.cpp packages may use ``_audiocpp.<i>``)
    shape: tuple[int, ...]  # numpy order (the file stores ggml's reversed ``ne``)
    type: gguf.GGMLQuantizationType
    offset: int  # absolute byte offset in the file
    nbytes: int

    @property
    def type_name(self) -> str:
        return self.type.name.upper()


class GgufFile:
    """One GGUF file mapped read-only. ``fields``: key → str / int / float / bool / list[str] / numpy array."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            with self.path.open("rb") as handle:
                self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot open GGUF {self.path}: {exc}", "re-download the file") from exc
        self.bytes = np.frombuffer(self._map, dtype=np.uint8)
        self._pos = 0
        try:
            self.fields, self.tensors = self._parse()
        except (struct.error, ValueError, IndexError, KeyError) as exc:
            self.close()
            raise ModelError(
                f"{self.path.name} is not a valid GGUF file ({exc})", "re-download the file"
            ) from exc

    # ----------------------------------------------------------------- parsing
    # Every count read from the file is checked against the bytes left before anything is built from it, so a
    # count of 2**63 is a refusal, not a loop or an allocation.
    def _take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self._pos + size > len(self._map):
            raise ValueError("the header runs past the end of the file")
        value = struct.unpack_from(fmt, self._map, self._pos)
        self._pos += size
        return value[0] if len(value) == 1 else value

    def _count(self, count: int, min_bytes: int, what: str) -> int:
        if count * min_bytes > len(self._map) - self._pos:
            raise ValueError(f"{what} claims {count} entries, more than the file holds")
        return count

    def _string(self, name: bool = False) -> str:
        length = self._take("<Q")
        if self._pos + length > len(self._map):
            raise ValueError("a string runs past the end of the file")
        # Keys and tensor names must be UTF-8 (UnicodeDecodeError is a ValueError); in values, surrogateescape
        # lets a non-UTF-8 payload (legacy embedded files) survive a round trip to bytes.
        errors = "strict" if name else "surrogateescape"
        text = self._map[self._pos : self._pos + length].decode("utf-8", errors=errors)
        self._pos += length
        return text

    def _value(self, kind: int, depth: int = 0) -> Any:
        if kind == gguf.GGUFValueType.STRING:
            return self._string()
        if kind == gguf.GGUFValueType.ARRAY:
            if depth >= _MAX_ARRAY_DEPTH:
                raise ValueError(f"arrays nest deeper than {_MAX_ARRAY_DEPTH} levels")
            item, count = self._take("<I"), self._take("<Q")
            if item == gguf.GGUFValueType.STRING:
                return [self._string() for _ in range(self._count(count, 8, "a string array"))]
            if item == gguf.GGUFValueType.ARRAY:
                nested = self._count(count, 12, "an array of arrays")
                return [self._value(gguf.GGUFValueType.ARRAY, depth + 1) for _ in range(nested)]
            dtype = _SCALARS[item]
            end = self._pos + count * dtype.itemsize
            if end > len(self._map):
                raise ValueError("an array runs past the end of the file")
            array = self.bytes[self._pos : end].view(dtype)  # a view of the map: no per-element objects
            self._pos = end
            return array
        dtype = _SCALARS[kind]
        value = np.frombuffer(self._map, dtype=dtype, count=1, offset=self._pos)[0]
        self._pos += dtype.itemsize
        return bool(value) if kind == gguf.GGUFValueType.BOOL else value.item()

    def _parse(self) -> tuple[dict[str, Any], list[GgufTensor]]:
        if self._map[:4] != _MAGIC:
            raise ValueError("no GGUF magic")
        self._pos = 4
        version = self._take("<I")
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version} is not supported (2 or 3)")
        n_tensors, n_fields = self._take("<Q"), self._take("<Q")
        fields: dict[str, Any] = {}
        for _ in range(self._count(n_fields, _MIN_FIELD_BYTES, "the metadata")):
            key = self._string(name=True)
            if key in fields:
                raise ValueError(f"metadata key {key!r} appears twice")
            fields[key] = self._value(self._take("<I"))
        infos = []
        for _ in range(self._count(n_tensors, _MIN_TENSOR_INFO_BYTES, "the tensor directory")):
            name = self._string(name=True)
            n_dims = self._take("<I")
            if n_dims > _MAX_DIMS:
                raise ValueError(f"tensor {name} has {n_dims} dimensions (ggml allows {_MAX_DIMS})")
            ne = [self._take("<Q") for _ in range(n_dims)]
            infos.append(
                (name, tuple(reversed(ne)), gguf.GGMLQuantizationType(self._take("<I")), self._take("<Q"))
            )
        alignment = _alignment(fields.get("general.alignment", gguf.GGUF_DEFAULT_ALIGNMENT))
        data_start = self._pos + (-self._pos % alignment)
        tensors = [_tensor(info, data_start, alignment, len(self._map)) for info in infos]
        _check_layout(tensors)
        return fields, tensors

    # ----------------------------------------------------------------- access
    @property
    def mapping(self) -> mmap.mmap:
        return self._map

    def raw(self, tensor: GgufTensor) -> np.ndarray:
        """The stored bytes of ``tensor`` (a read-only uint8 view of the map)."""
        return self.bytes[tensor.offset : tensor.offset + tensor.nbytes]

    def close(self) -> None:
        # Numeric fields and ``bytes`` are views of the map: drop ours so that the map can close now.
        self.fields = {}
        self.bytes = np.empty(0, dtype=np.uint8)
        # BufferError: a caller still holds a view; the map closes when that view is dropped.
        with contextlib.suppress(BufferError):
            self._map.close()

    def __enter__(self) -> GgufFile:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _alignment(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value & (value - 1):
        raise ValueError(f"general.alignment {value!r} is not a positive power of two")
    return value


def _tensor(
    info: tuple[str, tuple[int, ...], gguf.GGMLQuantizationType, int],
    data_start: int,
    alignment: int,
    size: int,
) -> GgufTensor:
    """One directory entry checked against the file: element count in exact integers (no int64 wrap-around),
    whole quantization blocks, an aligned offset and bytes that lie inside the file."""
    name, shape, kind, offset = info
    block, type_size = gguf.GGML_QUANT_SIZES[kind]
    if shape and shape[-1] % block:
        raise ValueError(f"tensor {name} has {shape[-1]} columns, not whole {kind.name} blocks of {block}")
    nbytes = math.prod(shape) // block * type_size
    if offset % alignment:
        raise ValueError(
            f"tensor {name} starts at offset {offset}, not a multiple of the alignment {alignment}"
        )
    if data_start + offset + nbytes > size:
        raise ValueError(f"tensor {name} ends past the end of the file (truncated download?)")
    return GgufTensor(name, shape, kind, data_start + offset, nbytes)


def _check_layout(tensors: list[GgufTensor]) -> None:
    """Each name once, and no two tensors sharing bytes (one tensor's data must not be read as another's)."""
    names: set[str] = set()
    for tensor in tensors:
        if tensor.name in names:
            raise ValueError(f"tensor {tensor.name} appears twice")
        names.add(tensor.name)
    by_offset = sorted((t for t in tensors if t.nbytes), key=lambda t: t.offset)
    for before, after in itertools.pairwise(by_offset):
        if before.offset + before.nbytes > after.offset:
            raise ValueError(f"tensors {before.name} and {after.name} overlap")
