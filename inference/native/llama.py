"""libllama from Python: load a GGUF model, decode tokens or embedding rows, read logits, truncate
the KV cache and quantize GGUF files.

This drives the libllama that ``llama-cpp-python`` vendors through that package's own low-level
ctypes bindings (``llama_cpp.llama_cpp``), so the process holds exactly one copy of ggml. Every
native object has a Python owner that frees it (``close()`` / context manager).

Only one sequence (id 0) is used: the thinker decodes one prompt at a time and reuses KV prefixes
by truncation instead of by sequence copies.
"""

from __future__ import annotations

import collections
import ctypes
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from inference.errors import BackendError, ModelError, UsageError
from inference.native import backend as native_backend
from inference.native.lib import INSTALL_FIX, load_ggml_libraries

# ggml type ids (ggml.h); the bindings lack some of them (BF16), so keep the few we use here.
KV_CACHE_TYPES: dict[str, int] = {"f32": 0, "f16": 1, "q8_0": 8, "bf16": 30}

# llama_ftype values (llama.h) for the storage types we quantize to.
QUANTIZE_FTYPES: dict[str, int] = {
    "f32": 0,  # LLAMA_FTYPE_ALL_F32
    "f16": 1,  # LLAMA_FTYPE_MOSTLY_F16
    "q8_0": 7,  # LLAMA_FTYPE_MOSTLY_Q8_0
    "q4_k": 15,  # LLAMA_FTYPE_MOSTLY_Q4_K_M: q4_k linears, q6_k for the sensitive ones
    "q4_k_s": 14,  # LLAMA_FTYPE_MOSTLY_Q4_K_S: q4_k nearly everywhere
    "q6_k": 18,  # LLAMA_FTYPE_MOSTLY_Q6_K
    "bf16": 32,  # LLAMA_FTYPE_MOSTLY_BF16
}

_LOG_LEVELS = {  # ggml_log_level (ggml.h) -> logging level; libllama's INFO is chatty: DEBUG here
    0: logging.DEBUG,  # NONE
    1: logging.DEBUG,  # DEBUG
    2: logging.DEBUG,  # INFO
    3: logging.WARNING,  # WARN
    4: logging.ERROR,  # ERROR
}
_LOG_CONT = 5  # continues the previous message at the previous level


def bindings() -> ModuleType:
    """The ``llama_cpp.llama_cpp`` ctypes module, with libllama's backends initialised once."""
    load_ggml_libraries()  # version checks, and ggml mapped once before libllama reuses it
    try:
        import llama_cpp  # noqa: F401  (loads libllama and ggml from llama_cpp/lib)
        from llama_cpp import llama_cpp as ll
    except ImportError as exc:
        raise BackendError(
            f"llama-cpp-python is not installed or failed to load ({exc})", INSTALL_FIX
        ) from exc
    except OSError as exc:
        raise BackendError(f"libllama could not be loaded ({exc})", INSTALL_FIX) from exc
    _init_backend_once(ll)
    return ll


_backend_lock = threading.Lock()
_backend_ready: list[bool] = []  # process-wide fact "llama_backend_init ran", not configuration


def _init_backend_once(ll: ModuleType) -> None:
    with _backend_lock:
        if not _backend_ready:
            ll.llama_backend_init()
            _backend_ready.append(True)


class LlamaLogRouter:
    """Routes libllama/ggml log lines to a Python logger and remembers the latest errors.

    libllama keeps the raw callback pointer forever, so an installed router must stay referenced
    for the rest of the process: ``install_log_router`` keeps it in ``_INSTALLED_ROUTERS``.
    """

    def __init__(self, logger: logging.Logger, keep_errors: int = 8) -> None:
        self.logger = logger
        self.recent_errors: collections.deque[str] = collections.deque(maxlen=keep_errors)
        self._level = logging.DEBUG
        self._partial = ""
        self._lock = threading.Lock()
        self.callback = _callback_type()(self._on_log)

    def _on_log(self, level: int, text: bytes | None, _user_data: object) -> None:
        message = (text or b"").decode("utf-8", errors="replace")
        with self._lock:
            if level != _LOG_CONT:
                self._level = _LOG_LEVELS.get(level, logging.DEBUG)
            self._partial += message
            if not self._partial.endswith("\n"):
                return  # progress dots and continued lines: wait for the end of the line
            line, self._partial = self._partial.rstrip("\n"), ""
            py_level = self._level
        if py_level >= logging.ERROR:
            self.recent_errors.append(line.strip())
        if self.logger.isEnabledFor(py_level):
            self.logger.log(py_level, "%s", line)

    def take_errors(self) -> list[str]:
        errors = list(self.recent_errors)
        self.recent_errors.clear()
        return errors


def _callback_type() -> type:
    return bindings().llama_log_callback


# Installed routers live as long as the process: libllama may call the pointer at any time.
_INSTALLED_ROUTERS: list[LlamaLogRouter] = []


def install_log_router(logger: logging.Logger | None = None) -> LlamaLogRouter:
    """Send libllama's and ggml's log output to ``logger`` (default ``captioneer.llama``).

    Installing is idempotent per logger; the latest router receives all messages. The logger's
    level decides what is kept, so ``logging.getLogger("captioneer.llama").setLevel(logging.ERROR)``
    silences everything below errors (errors are still remembered for error messages).
    """
    logger = logger or logging.getLogger("captioneer.llama")
    ll = bindings()
    for router in _INSTALLED_ROUTERS:
        if router.logger is logger:
            ll.llama_log_set(router.callback, ctypes.c_void_p(0))
            return router
    router = LlamaLogRouter(logger)
    _INSTALLED_ROUTERS.append(router)
    ll.llama_log_set(router.callback, ctypes.c_void_p(0))
    return router


def _router() -> LlamaLogRouter:
    return _INSTALLED_ROUTERS[-1] if _INSTALLED_ROUTERS else install_log_router()


def _native_reason(default: str) -> str:
    errors = _router().take_errors()
    return "; ".join(errors[-3:]) if errors else default


def default_threads() -> int:
    """The same default as the ggml graphs: physical cores (see ``inference.native.backend``)."""
    return native_backend.physical_cores()


def _cpu_has_amx() -> bool:
    return "amx_int8" in native_backend.cpu_features()


class LlamaModel:
    """A GGUF model loaded into libllama. Use as a context manager or call ``close()``.

    ``use_extra_bufts`` lets libllama place weights in the CPU backend's "extra" buffer types (AMX, and
    CPU_REPACK for AVX2/AVX-512/NEON kernels). Off by default: the AMX kernels crash on quantised weights
    (llama.cpp #20824), so it is refused where ggml reports AMX; CPU_REPACK slows the prefill that dominates
    speech requests more than it speeds decoding (figures: tests/bench/README.md, "Figures behind code comments").
    """

    def __init__(
        self, path: str | os.PathLike[str], n_gpu_layers: int = 0, use_extra_bufts: bool = False
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelError(
                f"GGUF model file not found: {self.path}",
                "check the model directory, or reinstall/reconvert the model",
            )
        ll = bindings()
        _router()
        params = ll.llama_model_default_params()
        params.n_gpu_layers = int(n_gpu_layers)  # -1 = all layers on the GPU backend, 0 = CPU only
        if use_extra_bufts and _cpu_has_amx():
            raise UsageError(
                "libllama's extra buffer types include the AMX kernels, which crash on quantised weights on "
                "this CPU (llama.cpp #20824)",
                "leave use_extra_bufts off",
            )
        # Off by default: AMX crashes, CPU_REPACK is slower for prefill-heavy speech (see the class docstring).
        self.use_extra_bufts = bool(use_extra_bufts)
        params.use_extra_bufts = self.use_extra_bufts
        handle = ll.llama_model_load_from_file(os.fsencode(self.path), params)
        if not handle:
            reason = _native_reason("libllama could not read it")
            raise ModelError(
                f"cannot load GGUF model {self.path}: {reason}",
                "the file is missing, truncated or not a llama.cpp model; delete it so it is converted again",
            )
        self._ll = ll
        self._handle = handle
        self._vocab = ll.llama_model_get_vocab(handle)
        self.n_embd = int(ll.llama_model_n_embd(handle))
        self.n_vocab = int(ll.llama_vocab_n_tokens(self._vocab))
        self.n_layer = int(ll.llama_model_n_layer(handle))
        self.n_ctx_train = int(ll.llama_model_n_ctx_train(handle))

    @property
    def handle(self) -> ctypes.c_void_p:
        if self._handle is None:
            raise UsageError("the llama model was already closed", "load it again")
        return self._handle

    def metadata(self, key: str) -> str | None:
        """A GGUF metadata value as text (None when absent)."""
        buf = ctypes.create_string_buffer(4096)
        n = self._ll.llama_model_meta_val_str(self.handle, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", errors="replace") if n >= 0 else None

    def close(self) -> None:
        if self._handle is not None:
            self._ll.llama_model_free(self._handle)
            self._handle = None

    def __enter__(self) -> LlamaModel:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a forgotten close() must not leak gigabytes of weights
        if getattr(self, "_handle", None) is not None:
            self.close()


@dataclass(frozen=True)
class ContextOptions:
    n_ctx: int = 4096
    n_batch: int = 512
    n_ubatch: int = 512
    n_threads: int | None = None  # None = default_threads()
    kv_type: str = "f16"  # one of KV_CACHE_TYPES; use "f32" for an f32 end-to-end path
    flash_attn: bool | None = False  # None = libllama decides


# With an f16 KV cache, ggml's CPU flash attention rounds a row differently in batches below this size, so
# batches are kept at least this big (figures: tests/bench/README.md, "Figures behind code comments").
TILED_ATTENTION_MIN_ROWS = 64

# A one-row decode whose query attends to 512 KV cells or more takes another path in ggml's CPU flash attention
# (the cells split across threads, the parts merged in another order) than the same row in a batch; libllama
# attends to the used cells padded to a multiple of 256 (at least 256), so a one-row step at a position of 256 or
# more can differ from that row decoded in a batch (up to 0.1 in the logits with two threads, measured).
# Positions below this give a one-row step the bits of a batch row.
ONE_ROW_STEP_BATCH_EXACT_POSITIONS = 256


def balanced_ubatches(n: int, capacity: int) -> list[tuple[int, int]]:
    """(start, stop) of the batches that decode ``n`` positions, as equal as the capacity allows: 530 rows go
    as 265 + 265, not 512 + 18, so no batch of a long prompt falls under ``TILED_ATTENTION_MIN_ROWS`` and a
    prompt decodes to the same bits however its prefix was cached."""
    if n <= 0:
        return []
    parts = -(-n // capacity)
    size = -(-n // parts)
    return [(start, min(n, start + size)) for start in range(0, n, size)]


class _Batch:
    """One reusable ``llama_batch`` (tokens or embedding rows) for sequence 0."""

    def __init__(self, ll: ModuleType, capacity: int, n_embd: int) -> None:
        self._ll = ll
        self.capacity = capacity
        self.n_embd = n_embd
        self.native = ll.llama_batch_init(capacity, n_embd, 1)
        self.pos = np.ctypeslib.as_array(self.native.pos, shape=(capacity,))
        self.flags = np.ctypeslib.as_array(self.native.logits, shape=(capacity,))
        n_seq = np.ctypeslib.as_array(self.native.n_seq_id, shape=(capacity,))
        n_seq[:] = 1
        for i in range(capacity):
            self.native.seq_id[i][0] = 0
        if n_embd:
            self.rows = np.ctypeslib.as_array(self.native.embd, shape=(capacity, n_embd))
        else:
            self.tokens = np.ctypeslib.as_array(self.native.token, shape=(capacity,))

    def free(self) -> None:
        if self.native is not None:
            self._ll.llama_batch_free(self.native)
            self.native = None


def _output_rows(n: int, logits: str | Sequence[int]) -> np.ndarray:
    """Which input rows produce logits: "last", "all", "none" or explicit indices."""
    if isinstance(logits, str):
        if logits == "last":
            return np.array([n - 1], dtype=np.int64)
        if logits == "all":
            return np.arange(n, dtype=np.int64)
        if logits == "none":
            return np.zeros(0, dtype=np.int64)
        raise UsageError(
            f"unknown logits selection {logits!r}", 'use "last", "all", "none" or a list of row indices'
        )
    rows = np.unique(np.asarray(list(logits), dtype=np.int64))
    if rows.size and (rows[0] < 0 or rows[-1] >= n):
        raise UsageError(f"logit rows {rows.tolist()} out of range for {n} inputs", "pass indices in [0, n)")
    return rows


class LlamaContext:
    """A decoding context (KV cache) over a ``LlamaModel`` for one sequence.

    ``n_past`` counts the positions held in the KV cache; every decode continues from it.
    """

    def __init__(self, model: LlamaModel, options: ContextOptions | None = None) -> None:
        options = options or ContextOptions()
        if options.kv_type not in KV_CACHE_TYPES:
            raise UsageError(
                f"unknown KV cache type {options.kv_type!r}", f"use one of {', '.join(KV_CACHE_TYPES)}"
            )
        ll = model._ll
        params = ll.llama_context_default_params()
        threads = options.n_threads or default_threads()
        params.n_ctx = options.n_ctx
        params.n_batch = options.n_batch
        params.n_ubatch = min(options.n_ubatch, options.n_batch)
        params.n_seq_max = 1
        params.n_threads = threads
        params.n_threads_batch = threads
        params.type_k = KV_CACHE_TYPES[options.kv_type]
        params.type_v = KV_CACHE_TYPES[options.kv_type]
        params.flash_attn_type = {None: -1, False: 0, True: 1}[options.flash_attn]
        params.no_perf = True
        handle = ll.llama_init_from_model(model.handle, params)
        if not handle:
            reason = _native_reason("libllama refused the context parameters")
            raise BackendError(
                f"cannot create a llama context (n_ctx={options.n_ctx}, kv={options.kv_type}): {reason}",
                "lower the context size, or free memory",
            )
        self._ll = ll
        self._handle = handle
        self.model = model
        self.options = options
        self.n_ctx = int(ll.llama_n_ctx(handle))
        self.n_batch = int(ll.llama_n_batch(handle))
        self.n_vocab = model.n_vocab
        self.n_past = 0
        self._memory = ll.llama_get_memory(handle)
        self._token_batch: _Batch | None = None
        self._embd_batch: _Batch | None = None

    @property
    def handle(self) -> ctypes.c_void_p:
        if self._handle is None:
            raise UsageError("the llama context was already closed", "create a new context")
        return self._handle

    def decode_tokens(
        self, token_ids: Sequence[int] | np.ndarray, logits: str | Sequence[int] = "last"
    ) -> np.ndarray:
        """Append token ids at positions ``n_past…``; returns logits (rows selected by ``logits``, n_vocab)."""
        ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.n_vocab):
            raise UsageError(
                f"token id out of range for a vocabulary of {self.n_vocab}", "check the tokenizer"
            )
        if self._token_batch is None:
            self._token_batch = _Batch(self._ll, self.n_batch, 0)
        return self._decode(self._token_batch, ids, logits)

    def decode_embeddings(self, rows: np.ndarray, logits: str | Sequence[int] = "last") -> np.ndarray:
        """Append input embedding rows (n, n_embd) at positions ``n_past…``; returns the selected logits."""
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[1] != self.model.n_embd:
            raise UsageError(
                f"embedding rows must have shape (n, {self.model.n_embd}), got {rows.shape}",
                "pass one row per position in the model's hidden size",
            )
        if self._embd_batch is None:
            self._embd_batch = _Batch(self._ll, self.n_batch, self.model.n_embd)
        return self._decode(self._embd_batch, rows, logits)

    def _decode(self, batch: _Batch, inputs: np.ndarray, logits: str | Sequence[int]) -> np.ndarray:
        n = int(inputs.shape[0])
        wanted = _output_rows(n, logits)
        if n == 0:
            return np.zeros((0, self.n_vocab), dtype=np.float32)
        if self.n_past + n > self.n_ctx:
            raise UsageError(
                f"{self.n_past + n} positions exceed the context size {self.n_ctx}",
                "create the context with a larger n_ctx, or truncate the KV cache first",
            )
        out = np.empty((wanted.size, self.n_vocab), dtype=np.float32)
        filled = 0
        for start, stop in balanced_ubatches(n, batch.capacity):
            count = stop - start
            if batch.n_embd:
                batch.rows[:count] = inputs[start:stop]
            else:
                batch.tokens[:count] = inputs[start:stop]
            batch.pos[:count] = np.arange(self.n_past, self.n_past + count, dtype=np.int32)
            chunk_rows = wanted[(wanted >= start) & (wanted < stop)] - start
            batch.flags[:count] = 0
            batch.flags[chunk_rows] = 1
            batch.native.n_tokens = count
            status = self._ll.llama_decode(self.handle, batch.native)
            if status != 0:
                reason = _native_reason(f"llama_decode returned {status}")
                # A failed decode may leave part of the batch in the cache: keep n_past truthful.
                self.n_past = int(self._ll.llama_memory_seq_pos_max(self._memory, 0)) + 1
                raise BackendError(f"decoding {count} positions failed: {reason}", "see the log for details")
            self.n_past += count
            for row in chunk_rows:
                pointer = self._ll.llama_get_logits_ith(self.handle, int(row))
                if not pointer:
                    raise BackendError(
                        "libllama returned no logits for a requested row", "report this as a bug"
                    )
                out[filled] = np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))
                filled += 1
        return out

    def truncate(self, n_keep: int) -> None:
        """Keep the first ``n_keep`` positions of the KV cache and drop the rest."""
        if not 0 <= n_keep <= self.n_past:
            raise UsageError(
                f"cannot keep {n_keep} of {self.n_past} cached positions", "pass 0 <= n_keep <= n_past"
            )
        if n_keep == self.n_past:
            return
        if not self._ll.llama_memory_seq_rm(self._memory, 0, n_keep, -1):
            raise BackendError(
                "libllama could not truncate the KV cache", "clear it and decode the prompt again"
            )
        self.n_past = n_keep

    def clear(self) -> None:
        self._ll.llama_memory_clear(self._memory, True)
        self.n_past = 0

    def set_threads(self, n_threads: int) -> None:
        self._ll.llama_set_n_threads(self.handle, n_threads, n_threads)

    def close(self) -> None:
        for batch in (self._token_batch, self._embd_batch):
            if batch is not None:
                batch.free()
        self._token_batch = self._embd_batch = None
        if self._handle is not None:
            self._ll.llama_free(self._handle)
            self._handle = None

    def __enter__(self) -> LlamaContext:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()


def quantize_gguf(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    storage_type: str,
    n_threads: int | None = None,
) -> None:
    """Write ``destination`` as ``source`` quantized to ``storage_type`` (see ``QUANTIZE_FTYPES``).

    1-D tensors (norms) stay f32 as libllama decides; the source should be f32 or f16.
    """
    if storage_type not in QUANTIZE_FTYPES:
        raise UsageError(
            f"unknown quantization type {storage_type!r}", f"use one of {', '.join(QUANTIZE_FTYPES)}"
        )
    source, destination = Path(source), Path(destination)
    if not source.is_file():
        raise ModelError(f"GGUF file to quantize not found: {source}", "convert the model first")
    ll = bindings()
    _router()
    params = ll.llama_model_quantize_default_params()
    params.nthread = n_threads or default_threads()
    params.ftype = QUANTIZE_FTYPES[storage_type]
    status = ll.llama_model_quantize(os.fsencode(source), os.fsencode(destination), ctypes.byref(params))
    if status != 0:
        reason = _native_reason(f"llama_model_quantize returned {status}")
        raise ModelError(
            f"quantizing {source.name} to {storage_type} failed: {reason}", "reconvert from the checkpoint"
        )
