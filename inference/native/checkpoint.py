"""Read tensors from safetensors and GGUF files without copying them (memory-mapped).

Each tensor comes back as a :class:`TensorRecord`: numpy-order shape, ggml type, and the raw
stored bytes (a read-only memmap slice). ``numpy(name)`` gives a float32 copy for small tensors
(norms, biases) that family code wants to handle in numpy.
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from inference.errors import InputFileError, ModelError
from inference.native.bindings import GgmlApi, load_api
from inference.native.dtypes import GgmlType
from inference.native.gguf_file import GgufFile
from inference.native.quant import dequantize
from inference.native.safetensors_header import METADATA, read_safetensors_header

_SAFETENSORS_TYPES = {
    "F32": GgmlType.F32,
    "F16": GgmlType.F16,
    "BF16": GgmlType.BF16,
    "F64": GgmlType.F64,
    "I8": GgmlType.I8,
    "I16": GgmlType.I16,
    "I32": GgmlType.I32,
    "I64": GgmlType.I64,
}
_GGML_TYPE_VALUES = frozenset(int(kind) for kind in GgmlType)


@dataclass(frozen=True)
class TensorRecord:
    name: str
    shape: tuple[int, ...]  # numpy order
    type: GgmlType
    raw: np.ndarray  # uint8 view of the stored bytes
    file_bytes: np.ndarray | None = None  # the whole memory-mapped file that ``raw`` lies in
    mapping: mmap.mmap | None = None  # the memory map itself, for releasing pages
    path: Path | None = None  # the file ``raw`` lies in (ONNX Runtime reads packed weights from it itself)

    @property
    def file_offset(self) -> int | None:
        """Where ``raw`` starts in its file (None for a tensor not read from a mapped file)."""
        if self.file_bytes is None:
            return None
        return int(self.raw.ctypes.data - self.file_bytes.ctypes.data)

    @property
    def nbytes(self) -> int:
        return int(self.raw.nbytes)

    def release_pages(self) -> None:
        """Drop this tensor's file pages from the resident set once they have been copied.

        They are clean file-backed pages, so a later read simply faults them back in; without this a
        load that copies every tensor holds the whole file *and* the copy resident at its peak.
        """
        if self.mapping is None or self.file_bytes is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        offset = self.raw.ctypes.data - self.file_bytes.ctypes.data
        start = offset - offset % mmap.PAGESIZE
        end = min(offset + self.nbytes, len(self.mapping))
        if end > start:
            self.mapping.madvise(mmap.MADV_DONTNEED, start, end - start)


class Checkpoint:
    """Tensors of one or more safetensors/GGUF files, looked up by name."""

    def __init__(
        self, records: dict[str, TensorRecord], files: list[object], api: GgmlApi | None = None
    ) -> None:
        self._records = records
        self._files = files  # memory maps / readers kept open while records are in use
        self.api = api or load_api()

    def __contains__(self, name: object) -> bool:
        return name in self._records

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def names(self) -> list[str]:
        return list(self._records)

    def record(self, name: str) -> TensorRecord:
        try:
            return self._records[name]
        except KeyError:
            raise ModelError(
                f"the checkpoint has no tensor {name!r}", "check the model files and family"
            ) from None

    def shape(self, name: str) -> tuple[int, ...]:
        return self.record(name).shape

    def numpy(self, name: str) -> np.ndarray:
        """The tensor as a float32 numpy array (dequantized if needed)."""
        rec = self.record(name)
        if rec.type in (GgmlType.I8, GgmlType.I16, GgmlType.I32, GgmlType.I64, GgmlType.F64):
            dtype = {
                GgmlType.I8: np.int8,
                GgmlType.I16: np.int16,
                GgmlType.I32: np.int32,
                GgmlType.I64: np.int64,
                GgmlType.F64: np.float64,
            }[rec.type]
            return rec.raw.view(dtype).reshape(rec.shape).astype(np.float32)
        return dequantize(self.api, rec.raw, rec.type, rec.shape)

    def close(self) -> None:
        self._records = {}
        for handle in self._files:
            close = getattr(handle, "close", None)
            if close is not None:
                # BufferError: a caller still holds a view; the map closes when that is dropped.
                with contextlib.suppress(BufferError):
                    close()
        self._files = []

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_checkpoint(paths: str | Path | Iterable[str | Path], api: GgmlApi | None = None) -> Checkpoint:
    """Open safetensors (``.safetensors``) and/or GGUF (``.gguf``) files as one checkpoint."""
    if isinstance(paths, str | Path):
        paths = [paths]
    records: dict[str, TensorRecord] = {}
    files: list[object] = []
    found: dict[str, TensorRecord] | None = None
    rec: TensorRecord | None = None
    try:
        for path in (Path(p) for p in paths):
            if not path.is_file():
                raise InputFileError(f"checkpoint file not found: {path}")
            if path.suffix == ".gguf":
                reader, found = _read_gguf(path)
            else:
                reader, found = _read_safetensors(path)
            files.append(reader)
            for name, rec in found.items():
                if name in records:
                    raise ModelError(
                        f"tensor {name!r} appears in more than one checkpoint file",
                        f"remove the duplicate ({path})",
                    )
                records[name] = rec
    except BaseException:
        # Close what was opened even while the caller keeps this error (its traceback holds these locals):
        # the views of the maps go first, or a map cannot close.
        found = rec = None
        records.clear()
        Checkpoint({}, files, api).close()
        raise
    return Checkpoint(records, files, api)


def _read_safetensors(path: Path) -> tuple[mmap.mmap, dict[str, TensorRecord]]:
    data_start, header = read_safetensors_header(path)
    tensors = {name: info for name, info in header.items() if name != METADATA}
    for name, info in tensors.items():  # every dtype is checked before the file is mapped
        if info["dtype"] not in _SAFETENSORS_TYPES:
            raise ModelError(f"{path}: tensor {name!r} has unsupported dtype {info['dtype']}")
    with path.open("rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    whole = np.frombuffer(mapped, dtype=np.uint8)
    data = whole[data_start:]
    records: dict[str, TensorRecord] = {}
    for name, info in tensors.items():
        begin, end = info["data_offsets"]
        shape = tuple(int(d) for d in info["shape"]) or (1,)
        records[name] = TensorRecord(
            name, shape, _SAFETENSORS_TYPES[info["dtype"]], data[begin:end], whole, mapped, path
        )
    return mapped, records


def _read_gguf(path: Path) -> tuple[object, dict[str, TensorRecord]]:
    try:
        gguf_file = GgufFile(path)
    except ModelError as exc:  # same error class as a damaged safetensors file
        raise InputFileError(exc.message, exc.fix) from exc
    for tensor in gguf_file.tensors:  # every type is checked before any view of the map exists
        if int(tensor.type) not in _GGML_TYPE_VALUES:
            gguf_file.close()
            raise ModelError(f"{path}: tensor {tensor.name!r} has unsupported type {tensor.type_name}")
    records: dict[str, TensorRecord] = {}
    for tensor in gguf_file.tensors:
        records[tensor.name] = TensorRecord(
            tensor.name,
            tensor.shape,
            GgmlType(int(tensor.type)),
            gguf_file.raw(tensor),
            gguf_file.bytes,
            gguf_file.mapping,
            path,
        )
    return gguf_file, records
