"""Weights in backend memory, converted at load time to the requested storage type.

On the CPU backend, tensors kept in their stored type are memory-mapped, not copied (``map_files``).

Storage rule: the requested type (``native``, ``f32``, ``f16``, ``bf16``, ``q8_0``, ``q6_k``, ``q4_k``) applies
to matrices whose rows fit whole blocks of it; K-quant rows that do not fit 256 take q8_0 when they fit 32
(:func:`~inference.native.quant.fitting_type`); other misfits and 1-D tensors stay f32 (ggml's element-wise ops
want f32). A per-name override forces any type. ``int8`` (CPU) applies to 2-D matrices only
(:mod:`inference.native.int8`); other tensors stay f32.

``pack_f32``: on a CPU backend that packs (native/packed_f32.py), the named f32 matrices read as they are from a
checkpoint file are packed once on ONNX Runtime, which reads them from the file itself, and kept there
only (``ByteLayout.PACKED_F32``: their ggml tensors hold no data); products with them run on the packed copy.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from inference.errors import BackendError, UsageError
from inference.native.backend import Backend
from inference.native.bindings import InitParams, TensorHead
from inference.native.checkpoint import Checkpoint, TensorRecord
from inference.native.dtypes import QUANTIZED_TYPES, GgmlType, StorageType, ggml_type_of
from inference.native.int8 import dequantize_rows, quantize_rows
from inference.native.node_plans import weight_panels
from inference.native.owner import NativeOwner
from inference.native.packed_f32 import FileMatrix, PackedMatrix
from inference.native.quant import can_store_rows, dequantize, fitting_type, quantize
from inference.native.tensor import MAX_DIMS, ByteLayout, Tensor, to_ne

GGML_BACKEND_BUFFER_USAGE_WEIGHTS = 1


@dataclass(frozen=True)
class _Pending:
    name: str
    shape: tuple[int, ...]
    target: GgmlType
    source: TensorRecord | np.ndarray
    mapped: bool = False  # use the memory-mapped file bytes in place (CPU backend only)
    layout: ByteLayout = (
        ByteLayout.GGML
    )  # INT8_TRANSPOSED: an int8 matrix (native/int8.py) plus a scale tensor


class WeightStore(NativeOwner):
    """Named weight tensors in one backend buffer; owns the context and the buffer (close it)."""

    def __init__(self, backend: Backend, entries: list[_Pending], pack_f32: Collection[str] = ()) -> None:
        import ctypes

        self.backend = backend
        api = self.api = backend.api
        self._tensors: dict[str, Tensor] = {}
        self._buffer: int | None = None
        self._file_buffers: list[int] = []
        self._mapped_files: list[np.ndarray] = []  # keeps the memory maps alive
        self.mapped_bytes = 0
        self._read_only: set[int] = set()  # tensors living in read-only file mappings
        self._int8_scales: dict[int, Tensor] = {}  # int8 matrix pointer -> its (N,) f32 row scales
        self._int8_panels: dict[int, int] = {}  # int8 matrix pointer -> its column panels (native/int8.py)
        # f32 matrices packed on ONNX Runtime (native/packed_f32.py), by store name; their tensors live in a
        # context of their own that is never allocated.
        self._packed: dict[str, PackedMatrix] = {}
        self._packed_ctx: int | None = None
        self._ctx: int | None = None
        try:
            entries = self._pack_f32(entries, set(pack_f32)) if pack_f32 else entries
        except BaseException:
            self.close()
            raise
        n_tensors = len(entries) + sum(entry.layout is ByteLayout.INT8_TRANSPOSED for entry in entries)
        self._ctx = api.ggml_init(InitParams(api.ggml_tensor_overhead() * max(1, n_tensors), None, True))
        if self._packed:
            self._packed_ctx = api.ggml_init(
                InitParams(api.ggml_tensor_overhead() * len(self._packed), None, True)
            )

        def new_tensor(
            name: str, ggml_type: GgmlType, shape: tuple[int, ...], layout: ByteLayout = ByteLayout.GGML
        ) -> Tensor:
            ne = (ctypes.c_int64 * MAX_DIMS)(*to_ne(shape))
            packed = self._packed.get(name) if layout is ByteLayout.PACKED_F32 else None
            ctx = self._packed_ctx if packed is not None else self._ctx
            ptr = api.ggml_new_tensor(ctx, int(ggml_type), MAX_DIMS, ne)
            api.ggml_set_name(ptr, name.encode()[:63])
            return Tensor(ptr, len(shape), self, layout, packed=packed)

        try:
            for entry in entries:
                tensor = self._tensors[entry.name] = new_tensor(
                    entry.name, entry.target, entry.shape, entry.layout
                )
                if entry.layout is ByteLayout.INT8_TRANSPOSED:
                    self._int8_scales[tensor.ptr] = new_tensor(
                        f"{entry.name}.int8_scale", GgmlType.F32, entry.shape[:1]
                    )
                    self._int8_panels[tensor.ptr] = weight_panels(entry.shape[0], backend.threads)
            self._map_file_tensors([entry for entry in entries if entry.mapped])
            if any(not entry.mapped and entry.layout is not ByteLayout.PACKED_F32 for entry in entries):
                self._buffer = api.ggml_backend_alloc_ctx_tensors(self._ctx, backend.ptr)
                if not self._buffer:
                    raise BackendError(
                        "could not allocate backend memory for the weights",
                        "free memory or pick a smaller storage type (f16, q8_0)",
                    )
                api.ggml_backend_buffer_set_usage(self._buffer, GGML_BACKEND_BUFFER_USAGE_WEIGHTS)
            for entry in entries:
                if not entry.mapped and entry.layout is not ByteLayout.PACKED_F32:
                    self._upload(self._tensors[entry.name], entry)
        except BaseException:
            self.close()
            raise

    def _map_file_tensors(self, entries: list[_Pending]) -> None:
        buffers: dict[int, int] = {}
        for entry in entries:
            record = entry.source
            assert isinstance(record, TensorRecord) and record.file_bytes is not None
            file_bytes = record.file_bytes
            key = file_bytes.ctypes.data
            if key not in buffers:
                buffer = self.api.ggml_backend_cpu_buffer_from_ptr(key, file_bytes.nbytes)
                if not buffer:
                    raise BackendError(f"could not map the checkpoint holding {entry.name!r}")
                self._file_buffers.append(buffer)
                self._mapped_files.append(file_bytes)
                buffers[key] = buffer
            status = self.api.ggml_backend_tensor_alloc(
                buffers[key], self._tensors[entry.name].ptr, record.raw.ctypes.data
            )
            if status != 0:
                raise BackendError(f"could not map weight {entry.name!r} (ggml status {status})")
            self.mapped_bytes += record.nbytes
            self._read_only.add(self._tensors[entry.name].ptr)

    def _pack_f32(self, entries: list[_Pending], names: set[str]) -> list[_Pending]:
        """Pack the f32 matrices among ``names`` read as stored from a checkpoint file on ONNX Runtime (which reads
        them from the file itself); returns the entries with those marked ``PACKED_F32`` (nothing to map or
        upload). Other entries, e.g. matrices converted at load, stay as they are."""
        packer = self.backend.packed_f32()
        if packer is None:
            return entries
        sources: dict[str, FileMatrix] = {}
        for entry in entries:
            record = entry.source
            if (
                entry.name in names
                and entry.target == GgmlType.F32
                and entry.layout is ByteLayout.GGML
                and len(entry.shape) == 2
                and isinstance(record, TensorRecord)
                and record.type == GgmlType.F32
                and record.path is not None
                and record.file_offset is not None
            ):
                n, k = entry.shape
                sources[entry.name] = FileMatrix(record.path.resolve(), record.file_offset, n, k)
        threads = self.backend.threads

        def pack(source: FileMatrix) -> PackedMatrix:
            return packer.pack(source, weight_panels(source.n, threads))

        # ONNX Runtime packs without the GIL: one weight per thread halves the load's wall time.
        with ThreadPoolExecutor(max_workers=threads) as pool:
            futures = {name: pool.submit(pack, source) for name, source in sources.items()}
        failures = [error for future in futures.values() if (error := future.exception()) is not None]
        if failures:
            for future in futures.values():  # drop every matrix that did pack
                if future.exception() is None:
                    packer.drop(future.result())
            if not isinstance(failures[0], BackendError) or self.backend.gemm_choice == "onnxruntime":
                raise failures[0]
            # auto: this ONNX Runtime cannot pack; the store keeps every weight as it would have
            return entries
        self._packed = {name: future.result() for name, future in futures.items()}
        return [
            _Pending(entry.name, entry.shape, entry.target, entry.source, layout=ByteLayout.PACKED_F32)
            if entry.name in self._packed
            else entry
            for entry in entries
        ]

    def _drop_packed(self) -> None:
        packer = self.backend.packed_products
        for matrix in self._packed.values():
            if packer is not None:
                packer.drop(matrix)
        self._packed = {}

    @property
    def packed_bytes(self) -> int:
        """f32 weight bytes this store packed on ONNX Runtime (held there, not in a backend buffer)."""
        return sum(matrix.n * matrix.k * 4 for matrix in self._packed.values())

    def _upload(self, tensor: Tensor, entry: _Pending) -> None:
        if entry.layout is ByteLayout.INT8_TRANSPOSED:
            transposed, scale = quantize_rows(
                _float_values(self.api, entry.source, entry.shape),
                self.backend.int8().qmax,
                self._int8_panels[tensor.ptr],
            )
            self._set(self._int8_scales[tensor.ptr], entry.name, scale)
            raw = transposed.view(np.uint8)
        else:
            raw = _convert(self.api, entry.source, entry.target, entry.shape)
        self._set(tensor, entry.name, raw)
        if isinstance(entry.source, TensorRecord):
            del raw
            entry.source.release_pages()  # keep the load's peak near one copy of the weights

    def _set(self, tensor: Tensor, name: str, raw: np.ndarray) -> None:
        expected = self.api.ggml_nbytes(tensor.ptr)
        if raw.nbytes != expected:
            raise BackendError(f"weight {name!r}: {raw.nbytes} bytes converted, {expected} expected")
        raw = np.ascontiguousarray(raw)
        self.api.ggml_backend_tensor_set(tensor.ptr, raw.ctypes.data, 0, raw.nbytes)

    # ----------------------------------------------------------------- access
    def __getitem__(self, name: str) -> Tensor:
        try:
            return self._tensors[name]
        except KeyError:
            raise UsageError(f"weight {name!r} was not loaded into this store") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tensors

    def int8_scale(self, tensor: Tensor) -> Tensor | None:
        """The row scales of an int8 matrix of this store (None for any other tensor)."""
        return self._int8_scales.get(tensor.ptr)

    def int8_panels(self, tensor: Tensor) -> int:
        """The column panels an int8 matrix of this store is laid out in (native/int8.py; 1 for any other)."""
        return self._int8_panels.get(tensor.ptr, 1)

    def is_read_only(self, tensor: Tensor) -> bool:
        """Whether ``tensor`` lives in a read-only file mapping (graphs must not write into it)."""
        return tensor.ptr in self._read_only

    def names(self) -> list[str]:
        return list(self._tensors)

    def numpy(self, name: str) -> np.ndarray:
        """Read a stored weight back from the backend as float32 (dequantized)."""
        tensor = self[name]
        if tensor.layout is ByteLayout.PACKED_F32:  # only ONNX Runtime holds it: read the file again
            return self._packed[name].source.read()
        raw = np.empty(self.api.ggml_nbytes(tensor.ptr), dtype=np.uint8)
        self.api.ggml_backend_tensor_get(tensor.ptr, raw.ctypes.data, 0, raw.nbytes)
        if tensor.layout is ByteLayout.INT8_TRANSPOSED:
            rows, columns = tensor.shape
            panels = self._int8_panels[tensor.ptr]
            panelled = raw.view(np.int8).reshape(panels, columns, rows // panels)
            return dequantize_rows(panelled, self._floats(self._int8_scales[tensor.ptr]))
        return dequantize(self.api, raw, tensor.type, tensor.shape)

    def _floats(self, tensor: Tensor) -> np.ndarray:
        """A float32 tensor of this store read back (int8 scales have no name of their own)."""
        values = np.empty(tensor.shape, dtype=np.float32)
        self.api.ggml_backend_tensor_get(tensor.ptr, values.ctypes.data, 0, values.nbytes)
        return values

    def bytes_by_type(self) -> dict[str, int]:
        """Backend bytes used per ggml type name, e.g. {'q8_0': 123, 'f32': 45}."""
        totals: dict[str, int] = {}
        for tensor in (*self._tensors.values(), *self._int8_scales.values()):
            key = tensor.type.name.lower()
            totals[key] = totals.get(key, 0) + int(self.api.ggml_nbytes(tensor.ptr))
        return totals

    def buffer_names(self) -> set[str]:
        """Names of the backend buffers the weights live in ("CPU", "CPU_Mapped" on the CPU backend).

        This store allocates with the backend's default buffer type (or maps files into plain CPU
        buffers), never with the CPU backend's extra types ("AMX", "CPU_REPACK"), so its graphs
        never reach the AMX kernels that crash on quantised weights (llama.cpp #20824).
        """
        names: set[str] = set()
        for tensor in self._tensors.values():
            if tensor.layout is ByteLayout.PACKED_F32:
                continue  # held by ONNX Runtime, in no backend buffer
            buffer = TensorHead.from_address(tensor.ptr).buffer
            names.add(self.api.ggml_backend_buffer_name(buffer).decode() if buffer else "(none)")
        return names

    @property
    def allocated_bytes(self) -> int:
        """Size of the backend buffer this store allocated (weights that were copied or converted)."""
        return int(self.api.ggml_backend_buffer_get_size(self._buffer)) if self._buffer else 0

    @property
    def buffer_bytes(self) -> int:
        """Memory the weights occupy: the allocated buffer, file bytes used in place and packed f32 weights."""
        return self.allocated_bytes + self.mapped_bytes + self.packed_bytes

    # ----------------------------------------------------------------- lifetime
    def close(self) -> None:
        self._drop_packed()
        for buffer in self._file_buffers:
            self.api.ggml_backend_buffer_free(buffer)
        self._file_buffers, self._mapped_files = [], []
        if self._buffer is not None:
            self.api.ggml_backend_buffer_free(self._buffer)
            self._buffer = None
        for ctx in (self._ctx, self._packed_ctx):
            if ctx is not None:
                self.api.ggml_free(ctx)
        self._ctx = self._packed_ctx = None
        self._tensors = {}


def load_weights(
    backend: Backend,
    checkpoint: Checkpoint | None = None,
    names: Iterable[str] | Mapping[str, str] | None = None,
    storage: StorageType | str = StorageType.NATIVE,
    overrides: Mapping[str, StorageType | GgmlType | str] | None = None,
    arrays: Mapping[str, np.ndarray] | None = None,
    map_files: bool = True,
    pack_f32: Collection[str] = (),
    as_matrices: Iterable[str] = (),
) -> WeightStore:
    """Upload checkpoint tensors (and/or numpy ``arrays``) into one backend buffer.

    names: which checkpoint tensors (default: all); a mapping renames them ``{store_name: file_name}``.
    storage: type for matrices (see module doc). map_files: on the CPU backend, use the mapped
    file in place for tensors that keep their stored type. overrides: ``{store_name: type}`` per tensor
    (a StorageType value or a ggml type name such as "f32", "q4_k"). arrays: extra tensors computed
    by the family (fused or reshaped weights), stored by the same rules. pack_f32: store names of f32
    weight matrices to pack once on ONNX Runtime where the backend does (module doc), weights only ever used by
    mul_mat/linear. as_matrices: checkpoint tensors to store as (first axis, everything else) matrices, e.g. 1x1
    conv kernels used as linear weights.
    """
    storage = StorageType.parse(storage)
    overrides = dict(overrides or {})
    if names is None:
        mapping = {name: name for name in (checkpoint or [])}
    elif isinstance(names, Mapping):
        mapping = dict(names)
    else:
        mapping = {name: name for name in names}
    if mapping and checkpoint is None:
        raise UsageError("load_weights: tensor names given but no checkpoint")
    matrices = set(as_matrices)
    entries = []
    for store_name, file_name in mapping.items():
        rec = checkpoint.record(file_name)  # type: ignore[union-attr]
        shape = (rec.shape[0], int(np.prod(rec.shape[1:]))) if store_name in matrices else rec.shape
        entries.append(_entry(backend, store_name, shape, rec.type, rec, storage, overrides.get(store_name)))
    for store_name, array in (arrays or {}).items():
        array = np.asarray(array)
        stored = ggml_type_of(array.dtype) if array.dtype != np.float64 else GgmlType.F32
        entries.append(
            _entry(backend, store_name, array.shape, stored, array, storage, overrides.get(store_name))
        )
    if map_files and backend.is_cpu:
        entries = [_with_mapping(entry) for entry in entries]
    unknown = set(overrides) - {e.name for e in entries}
    if unknown:
        raise UsageError(f"storage overrides name tensors that are not loaded: {', '.join(sorted(unknown))}")
    unmatched = matrices - set(mapping)
    if unmatched:
        raise UsageError(f"as_matrices names tensors that are not loaded: {', '.join(sorted(unmatched))}")
    return WeightStore(backend, entries, pack_f32=pack_f32)


def _entry(
    backend: Backend,
    name: str,
    shape: tuple[int, ...],
    stored: GgmlType,
    source: TensorRecord | np.ndarray,
    storage: StorageType,
    override: StorageType | GgmlType | str | None,
) -> _Pending:
    api = backend.api
    shape = tuple(shape) or (1,)
    if stored in (GgmlType.I8, GgmlType.I16, GgmlType.I32, GgmlType.I64):
        return _Pending(name, shape, stored, source)  # integer tables stay as they are
    if override is not None:
        if str(override).lower() == StorageType.INT8.value:
            return _int8_entry(backend, name, shape, stored, source)
        target = _override_type(override, stored)
        if not can_store_rows(api, target, shape[-1]):
            raise UsageError(f"weight {name!r} with rows of {shape[-1]} cannot be stored as {target.name}")
        return _Pending(name, shape, target, source)
    if storage is StorageType.INT8:  # matrices only; vectors and kernels of 3+ axes stay f32
        if len(shape) == 2:
            return _int8_entry(backend, name, shape, stored, source)
        return _Pending(name, shape, GgmlType.F32, source)
    target = storage.ggml_type(stored)
    if target == GgmlType.F64:
        target = GgmlType.F32
    if len(shape) < 2:
        return _Pending(name, shape, GgmlType.F32, source)
    return _Pending(name, shape, fitting_type(api, target, shape[-1]), source)


def _int8_entry(
    backend: Backend, name: str, shape: tuple[int, ...], stored: GgmlType, source: TensorRecord | np.ndarray
) -> _Pending:
    if len(shape) != 2:
        raise UsageError(f"weight {name!r} of shape {shape} cannot be stored as int8 (matrices only)")
    backend.int8()  # fails here, naming the fix, when this backend cannot compute int8 products
    return _Pending(name, shape, GgmlType.I8, source, layout=ByteLayout.INT8_TRANSPOSED)


def _float_values(api: object, source: TensorRecord | np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``source`` as float32 values of ``shape`` (dequantized when the checkpoint stores another type)."""
    if isinstance(source, np.ndarray):
        return np.asarray(source, dtype=np.float32).reshape(shape)
    if source.type == GgmlType.F32:
        return np.ascontiguousarray(source.raw).view(np.float32).reshape(shape)
    return dequantize(api, source.raw, source.type, shape)  # type: ignore[arg-type]


def _with_mapping(entry: _Pending) -> _Pending:
    record = entry.source
    mappable = (
        isinstance(record, TensorRecord)
        and record.file_bytes is not None
        and record.type == entry.target
        and entry.layout is ByteLayout.GGML
        and record.raw.ctypes.data % 32 == 0  # ggml's tensor alignment; GGUF files guarantee it
    )
    return _Pending(entry.name, entry.shape, entry.target, entry.source, mapped=True) if mappable else entry


def _override_type(value: StorageType | GgmlType | str, stored: GgmlType) -> GgmlType:
    if isinstance(value, GgmlType):
        return value
    text = str(value).lower()
    if text in {member.value for member in StorageType}:
        return StorageType(text).ggml_type(stored)
    if text.upper() in GgmlType.__members__:
        return GgmlType[text.upper()]
    raise UsageError(f"unknown storage type {value!r}")


def _convert(
    api: object, source: TensorRecord | np.ndarray, target: GgmlType, shape: tuple[int, ...]
) -> np.ndarray:
    """Raw bytes of ``source`` in ``target`` type."""
    if isinstance(source, TensorRecord):
        if source.type == target:
            return np.ascontiguousarray(source.raw)
        if source.type in (GgmlType.I8, GgmlType.I16, GgmlType.I32, GgmlType.I64):
            raise UsageError(f"integer tensor {source.name!r} cannot be converted to {target.name}")
    elif (source.dtype == np.float16 and target == GgmlType.F16) or source.dtype.kind in "iu":
        return np.ascontiguousarray(source).view(np.uint8)
    if target in QUANTIZED_TYPES or target in (GgmlType.F16, GgmlType.BF16, GgmlType.F32):
        return quantize(api, _float_values(api, source, shape), target)  # type: ignore[arg-type]
    raise UsageError(f"cannot store weights as {target.name}")
