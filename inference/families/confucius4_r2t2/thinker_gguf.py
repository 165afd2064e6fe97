"""Convert the Qwen3-ASR / Confucius4-R2T2 thinker (a plain Qwen3 decoder) into a llama.cpp GGUF.

Sources: a legacy or Hugging Face layout directory, or an audio.cpp GGUF package (docs/reference_parity.md §2.2,
docs/families/confucius4_r2t2.md §1, docs/gguf_packages.md). The GGUF uses llama.cpp's ``qwen3`` architecture:
the interleaved M-RoPE degenerates to NeoX RoPE for audio+text. The tokenizer metadata only has to satisfy
llama.cpp (Captioneer tokenizes in Python).

Storage: ``native`` copies quantized package blocks byte for byte (named after the type most matrices have);
``f32``/``f16``/``bf16`` are written directly; ``q8_0``/``q6_k``/``q4_k`` go through ``llama_model_quantize``
from a native intermediate (f32 for a quantized package: libllama does not requantize). Norms stay f32. The
result is cached next to the model with a fingerprint of the source files.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from inference.errors import ModelError, UsageError
from inference.families.confucius4_r2t2.checkpoint import (
    TEXT,
    lm_head_name,
    locate_model_files,
    parse_json_object,
    stop_and_pad_ids,
    thinker_tensor_shapes,
    validate_tensors,
)
from inference.families.confucius4_r2t2.config import TextConfig, parse_generation_config, parse_model_config
from inference.native.gguf_file import GgufFile
from inference.paths import AppPaths

log = logging.getLogger(__name__)

CONVERTER_VERSION = "1"  # bump when the GGUF written for the same source changes
FINGERPRINT_KEY = "captioneer.thinker.source_fingerprint"
STORAGE_TYPES = ("native", "f32", "f16", "bf16", "q8_0", "q6_k", "q4_k")

FLOAT_TYPES = ("f32", "f16", "bf16")
_ST_DTYPES: dict[str, np.dtype] = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
}  # bf16 kept as bits
# Block-quantized types an audio.cpp package may store (q8_0 packages, the community Q4_K_M mix).
_QUANT_DTYPES = {name: gguf.GGMLQuantizationType[name] for name in ("Q8_0", "Q2_K", "Q4_K", "Q6_K")}
_FILE_TYPES = {
    "f32": gguf.LlamaFileType.ALL_F32,
    "f16": gguf.LlamaFileType.MOSTLY_F16,
    "bf16": gguf.LlamaFileType.MOSTLY_BF16,
    "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    "q4_k": gguf.LlamaFileType.MOSTLY_Q4_K_M,
    "q6_k": gguf.LlamaFileType.MOSTLY_Q6_K,
    "q2_k": gguf.LlamaFileType.MOSTLY_Q2_K,
}
_LAYER_TENSORS = {  # HF name below ``layers.N.`` -> llama.cpp name below ``blk.N.``
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


# --------------------------------------------------------------------------------------------
# weights (memory-mapped; bf16 stays as raw bits and quantized blocks as bytes until a consumer converts them)


@dataclass(frozen=True)
class _StoredTensor:
    file: Path
    dtype: str  # F32, F16, BF16, or (GGUF packages) Q8_0, Q2_K, Q4_K, Q6_K
    shape: tuple[int, ...]  # numpy order
    begin: int  # absolute byte offset in the file
    end: int

    @property
    def storage(self) -> str:
        return self.dtype.lower()


class MappedTensors:
    """Tensors by name over read-only memory maps of their files, opened on first use; ``close()`` unmaps."""

    def __init__(self, tensors: dict[str, _StoredTensor] | None = None) -> None:
        self.tensors: dict[str, _StoredTensor] = dict(tensors or {})
        self.files: list[Path] = sorted({stored.file for stored in self.tensors.values()})
        self._maps: dict[Path, mmap.mmap] = {}

    def _bytes(self, file: Path) -> np.ndarray:
        if file not in self._maps:
            with file.open("rb") as handle:  # the map outlives the descriptor
                self._maps[file] = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        return np.frombuffer(self._maps[file], dtype=np.uint8)

    def raw(self, name: str) -> np.ndarray:
        """The tensor as stored, read-only: float32, float16, uint16 bf16 bits, or for block-quantized
        types uint8 rows of ``row_bytes`` (shape ``(*shape[:-1], row_bytes)``). A view of the map: drop it
        before ``close()``."""
        stored = self.tensors[name]
        flat = self._bytes(stored.file)[stored.begin : stored.end]
        if stored.dtype in _QUANT_DTYPES:
            return flat.reshape(gguf.quant_shape_to_byte_shape(stored.shape, _QUANT_DTYPES[stored.dtype]))
        return flat.view(_ST_DTYPES[stored.dtype]).reshape(stored.shape)

    def f32(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        """The tensor (or the given rows of it) converted to float32 (a copy)."""
        raw = self.raw(name)
        data = raw if rows is None else raw[np.asarray(rows, dtype=np.int64)]
        return to_f32(data, self.tensors[name].dtype)

    def close(self) -> None:
        """Unmap every file (so the model can be deleted, also on Windows). A later read maps it again."""
        maps, self._maps = self._maps, {}
        for mapping in maps.values():
            # BufferError: a caller still holds a view from ``raw``; that map closes when the view goes.
            with contextlib.suppress(BufferError):
                mapping.close()


def to_f32(data: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        return (data.astype(np.uint32) << 16).view(np.float32)
    if dtype in _QUANT_DTYPES:
        return gguf.quants.dequantize(np.ascontiguousarray(data), _QUANT_DTYPES[dtype])
    return np.asarray(data, dtype=np.float32)


# --------------------------------------------------------------------------------------------
# checkpoint: the thinker part of what ``checkpoint.py`` reads


class ThinkerCheckpoint:
    """The thinker part of a Qwen3-ASR checkpoint, read through ``checkpoint.py``: the same file
    (``locate_model``), the same parsed configs, canonical tensor names, LM-head rule and eos/pad ids as the
    engine. Only the thinker's tensors are required (the converter never reads the audio tower).
    Holds memory maps of the weights once used: ``close()`` it (or use it as a context manager)."""

    def __init__(self, model_path: str | os.PathLike[str]) -> None:
        files = locate_model_files(Path(model_path))
        self.files = files
        self.package = files.weight_paths[0] if files.kind == "gguf" else None
        self.model_dir = self.package.parent if self.package else files.root
        self.read_file: Callable[[str], bytes | None] = files.read
        config_json = files.read_json("config.json") or {}
        self.model_config = parse_model_config(config_json, f"{self.source}/config.json")
        self.layout = self.model_config.layout
        self.hparams: TextConfig = self.model_config.text
        if self.hparams.attention_bias:
            raise ModelError(
                "thinker attention biases are not supported (attention_bias=true)",
                "use a Qwen3-ASR checkpoint",
            )
        generation = parse_generation_config(
            files.read_json("generation_config.json") or {}, f"{self.source}/generation_config.json"
        )
        eos, self.pad_id = stop_and_pad_ids(self.model_config, generation)
        self.eos_id: int | None = eos[0]
        validate_tensors(files, self.model_config, thinker_tensor_shapes(self.model_config))
        self.head_name = lm_head_name(files, self.model_config)
        self.tied = self.head_name is None
        self.weights = MappedTensors(
            {
                name: _StoredTensor(info.file, info.dtype, info.shape, info.begin, info.end)
                for _, name in self.thinker_tensors()
                for info in (files.tensors[name],)
            }
        )

    def hf_name(self, name: str) -> str:
        """Canonical name of a text-model tensor given below the prefix (``layers.0.…``)."""
        return TEXT + name

    def thinker_tensors(self) -> Iterator[tuple[str, str]]:
        """(llama.cpp name, canonical checkpoint name) for every tensor the GGUF holds, in file order."""
        yield "token_embd.weight", self.hf_name("embed_tokens.weight")
        for i in range(self.hparams.num_hidden_layers):
            for hf, ll in _LAYER_TENSORS.items():
                yield f"blk.{i}.{ll}", self.hf_name(f"layers.{i}.{hf}")
        yield "output_norm.weight", self.hf_name("norm.weight")
        if self.head_name:
            yield "output.weight", self.head_name

    @property
    def source(self) -> Path:
        """The checkpoint directory or the package file (for messages)."""
        return self.package or self.model_dir

    def native_storage_type(self) -> str:
        """The storage type ``native`` means: the dtype of the embedding matrix for a safetensors
        checkpoint; for a package, the type most of its thinker matrices have (q8_0 packages keep the
        embedding in f16; Q4_K_M mixes q4_k with some q6_k)."""
        if self.package is None:
            return self.weights.tensors[self.hf_name("embed_tokens.weight")].storage
        kinds = [
            self.weights.tensors[name].storage
            for _, name in self.thinker_tensors()
            if len(self.weights.tensors[name].shape) == 2
        ]
        return max(sorted(set(kinds)), key=kinds.count)

    def cache_name(self, storage_type: str) -> str:
        """File name of the converted GGUF (packages sharing a folder must not share a cache file)."""
        stem = f"{self.package.stem}." if self.package else ""
        return f"{stem}thinker-{storage_type}.gguf"

    def embedding_rows(self, token_ids: np.ndarray) -> np.ndarray:
        """Input embeddings (n, hidden) in float32, read from the checkpoint's ``embed_tokens``."""
        return self.weights.f32(self.hf_name("embed_tokens.weight"), token_ids)

    def source_files(self) -> list[Path]:
        if self.package is not None:
            return [self.package]
        names = [
            "config.json",
            "generation_config.json",
            "tokenizer.json",
            "vocab.json",
            "merges.txt",
            "tokenizer_config.json",
            "added_tokens.json",
        ]
        return [p for p in (self.model_dir / n for n in names) if p.is_file()] + list(self.files.weight_paths)

    def fingerprint(self, storage_type: str) -> str:
        """Changes when any source file, the storage type or the converter changes."""
        digest = hashlib.sha256(f"{CONVERTER_VERSION}|{storage_type}".encode())
        for path in self.source_files():
            stat = path.stat()
            digest.update(f"|{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
        return digest.hexdigest()

    def close(self) -> None:
        self.weights.close()

    def __enter__(self) -> ThinkerCheckpoint:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _directory_reader(directory: Path) -> Callable[[str], bytes | None]:
    def read(name: str) -> bytes | None:
        path = directory / name
        try:
            return path.read_bytes() if path.is_file() else None
        except OSError as exc:
            raise ModelError(
                f"cannot read {path} ({exc})", "check the file permissions or re-download"
            ) from exc

    return read


# --------------------------------------------------------------------------------------------
# tokenizer metadata


@dataclass(frozen=True)
class GgufVocabulary:
    tokens: list[str]
    types: list[int]
    merges: list[str]


def _looks_special(token: str) -> bool:
    return token.startswith("<|") and token.endswith("|>")


def _json_of(read: Callable[[str], bytes | None], name: str, where: str) -> dict | None:
    raw = read(name)
    return None if raw is None else parse_json_object(raw, name, where)


def read_vocabulary(source: Path | Callable[[str], bytes | None], vocab_size: int) -> GgufVocabulary:
    """Tokens by id, padded to ``vocab_size`` with ``[PAD{i}]`` (UNUSED) as llama.cpp's converter does.

    ``source``: a checkpoint directory, or a reader of file contents by name (a package's embedded files).
    Added tokens are CONTROL when marked special (or shaped ``<|…|>``), otherwise USER_DEFINED.
    """
    read = _directory_reader(source) if isinstance(source, Path) else source
    where = str(source) if isinstance(source, Path) else "the package"
    data = _json_of(read, "tokenizer.json", where)
    merges_raw = read("merges.txt")
    if data is not None:
        model = data.get("model") or {}
        if model.get("type") != "BPE":
            raise ModelError(
                f"tokenizer.json of {where} is not a BPE tokenizer",
                "use the checkpoint's own tokenizer files",
            )
        vocab: dict[str, int] = model["vocab"]
        merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
        added = {int(t["id"]): (t["content"], bool(t.get("special"))) for t in data.get("added_tokens", [])}
    elif (vocab_json := _json_of(read, "vocab.json", where)) is not None and merges_raw is not None:
        vocab = vocab_json
        lines = merges_raw.decode("utf-8").splitlines()
        merges = [line for line in lines if line and not line.startswith("#version")]
        added = _added_tokens_from_config(read, where)
    else:
        raise ModelError(
            f"no tokenizer in {where} (need tokenizer.json or vocab.json + merges.txt)",
            "re-download the model",
        )
    by_id: dict[int, tuple[str, int]] = {i: (tok, int(gguf.TokenType.NORMAL)) for tok, i in vocab.items()}
    for i, (content, special) in added.items():
        added_kind = (
            gguf.TokenType.CONTROL if special or _looks_special(content) else gguf.TokenType.USER_DEFINED
        )
        by_id[i] = (content, int(added_kind))
    if by_id and max(by_id) >= vocab_size:
        raise ModelError(
            f"the tokenizer has ids up to {max(by_id)} but the config's vocab_size is {vocab_size}",
            "the tokenizer does not belong to these weights",
        )
    tokens: list[str] = []
    types: list[int] = []
    for i in range(vocab_size):
        token, kind = by_id.get(i, (f"[PAD{i}]", int(gguf.TokenType.UNUSED)))
        tokens.append(token)
        types.append(int(kind))
    if not merges:
        raise ModelError(f"the tokenizer in {where} has no BPE merges", "re-download the tokenizer files")
    return GgufVocabulary(tokens, types, merges)


def _added_tokens_from_config(read: Callable[[str], bytes | None], where: str) -> dict[int, tuple[str, bool]]:
    added: dict[int, tuple[str, bool]] = {}
    for content, i in (_json_of(read, "added_tokens.json", where) or {}).items():
        added[int(i)] = (content, _looks_special(content))
    decoder = (_json_of(read, "tokenizer_config.json", where) or {}).get("added_tokens_decoder") or {}
    for i, token in decoder.items():
        added[int(i)] = (token["content"], bool(token.get("special")))
    return added


# --------------------------------------------------------------------------------------------
# writing


_GGML_OF_STORAGE: dict[str, tuple[np.dtype, gguf.GGMLQuantizationType]] = {
    "f32": (np.dtype(np.float32), gguf.GGMLQuantizationType.F32),
    "f16": (np.dtype(np.float16), gguf.GGMLQuantizationType.F16),
    "bf16": (np.dtype(np.uint16), gguf.GGMLQuantizationType.BF16),  # raw bits
}


def _target_storage(stored: _StoredTensor, storage_type: str) -> str:
    """The storage of one tensor: 1-D tensors (norms) stay f32; ``native`` keeps the checkpoint dtype."""
    if len(stored.shape) == 1:
        return "f32"
    return stored.storage if storage_type == "native" else storage_type


def _ggml_type(storage: str) -> gguf.GGMLQuantizationType:
    return gguf.GGMLQuantizationType[storage.upper()]


def _tensor_data(checkpoint: ThinkerCheckpoint, hf_name: str, storage_type: str) -> np.ndarray:
    """One tensor converted to its target storage (bf16 as uint16 bits, quantized blocks as bytes).

    A tensor that keeps its type is the memory-mapped source itself: ggml's block layouts are the same in
    both files, so quantized weights are copied byte for byte, never dequantized.
    """
    stored = checkpoint.weights.tensors[hf_name]
    raw = checkpoint.weights.raw(hf_name)
    target = _target_storage(stored, storage_type)
    if target == stored.storage:
        return raw
    data = to_f32(raw, stored.dtype)
    if target == "bf16":
        return gguf.quants.quantize(data, gguf.GGMLQuantizationType.BF16)
    return np.ascontiguousarray(data, dtype=_GGML_OF_STORAGE[target][0])


def write_thinker_gguf(
    checkpoint: ThinkerCheckpoint,
    destination: Path,
    storage_type: str,
    fingerprint: str = "",
    progress: Callable[[float], None] | None = None,
) -> None:
    """Write the thinker as a GGUF in a directly written storage type (native, f32, f16, bf16)."""
    if storage_type not in ("native", *FLOAT_TYPES):
        raise UsageError(
            f"{storage_type} cannot be written directly", "use ensure_thinker_gguf for quantized types"
        )
    h = checkpoint.hparams
    writer = gguf.GGUFWriter(str(destination), "qwen3")
    try:  # the file is closed on every path (a cancel raises from ``progress``)
        writer.add_name(checkpoint.source.stem if checkpoint.package else checkpoint.model_dir.name)
        writer.add_context_length(h.max_position_embeddings)
        writer.add_embedding_length(h.hidden_size)
        writer.add_block_count(h.num_hidden_layers)
        writer.add_feed_forward_length(h.intermediate_size)
        writer.add_head_count(h.num_attention_heads)
        writer.add_head_count_kv(h.num_key_value_heads)
        writer.add_key_length(h.head_dim)
        writer.add_value_length(h.head_dim)
        writer.add_rope_dimension_count(h.head_dim)
        writer.add_rope_freq_base(h.rope_theta)
        writer.add_layer_norm_rms_eps(h.rms_norm_eps)
        concrete = checkpoint.native_storage_type() if storage_type == "native" else storage_type
        if concrete in _FILE_TYPES:
            writer.add_file_type(_FILE_TYPES[concrete])
        writer.add_string(FINGERPRINT_KEY, fingerprint)
        vocabulary = read_vocabulary(checkpoint.read_file, h.vocab_size)
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("qwen2")
        writer.add_token_list(vocabulary.tokens)
        writer.add_token_types(vocabulary.types)
        writer.add_token_merges(vocabulary.merges)
        if checkpoint.eos_id is not None:
            writer.add_eos_token_id(checkpoint.eos_id)
        if checkpoint.pad_id is not None:
            writer.add_pad_token_id(checkpoint.pad_id)
        writer.add_add_bos_token(False)

        # Stream tensors one at a time: the whole model converted to f32 would not fit in memory.
        plan = list(checkpoint.thinker_tensors())
        for ll_name, hf_name in plan:
            stored = checkpoint.weights.tensors[hf_name]
            target = _target_storage(stored, storage_type)
            ggml_type = _ggml_type(target)
            nbytes = _nbytes(stored.shape, ggml_type)
            if target in _GGML_OF_STORAGE:
                writer.add_tensor_info(
                    ll_name, stored.shape, _GGML_OF_STORAGE[target][0], nbytes, raw_dtype=ggml_type
                )
            else:  # the gguf writer takes quantized tensors by their byte shape (rows, row bytes)
                byte_shape = gguf.quant_shape_to_byte_shape(stored.shape, ggml_type)
                writer.add_tensor_info(ll_name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=ggml_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for index, (_ll_name, hf_name) in enumerate(plan):
            writer.write_tensor_data(_tensor_data(checkpoint, hf_name, storage_type))
            if progress:
                progress((index + 1) / len(plan))
    finally:
        writer.close()


def _nbytes(shape: tuple[int, ...], ggml_type: int) -> int:
    block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ggml_type)]
    return int(np.prod(shape)) // block * type_size


# --------------------------------------------------------------------------------------------
# cache


def cache_directory(model_dir: Path) -> Path:
    """``<model>/.captioneer`` when writable, otherwise a per-model folder in the app cache."""
    preferred = model_dir / ".captioneer"
    try:
        preferred.mkdir(exist_ok=True)
        if os.access(preferred, os.W_OK):
            return preferred
    except OSError:
        pass
    key = hashlib.sha256(str(model_dir.resolve()).encode()).hexdigest()[:16]
    fallback = AppPaths.from_environment().cache / "thinker" / key
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


def stored_fingerprint(path: Path) -> str | None:
    """The source fingerprint recorded in a converted GGUF (None if absent or unreadable)."""
    try:
        with GgufFile(path) as converted:
            value = converted.fields.get(FINGERPRINT_KEY)
    except ModelError:
        return None
    return value if isinstance(value, str) else None


def resolve_storage_type(checkpoint: ThinkerCheckpoint, storage_type: str) -> str:
    """The concrete storage type of a request (``native`` becomes the checkpoint's dtype)."""
    if storage_type not in STORAGE_TYPES:
        raise UsageError(
            f"unknown thinker_weight_type {storage_type!r}", f"use one of: {', '.join(STORAGE_TYPES)}"
        )
    return checkpoint.native_storage_type() if storage_type == "native" else storage_type


def ensure_thinker_gguf(
    checkpoint: ThinkerCheckpoint,
    storage_type: str = "native",
    cache_dir: Path | None = None,
    n_threads: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> Path:
    """The cached thinker GGUF for ``storage_type``, converting (atomically) when missing or stale."""
    concrete = resolve_storage_type(checkpoint, storage_type)
    native = checkpoint.native_storage_type()
    directory = cache_dir or cache_directory(checkpoint.model_dir)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / checkpoint.cache_name(concrete)
    fingerprint = checkpoint.fingerprint(concrete)
    if target.is_file() and stored_fingerprint(target) == fingerprint:
        return target
    log.info("converting the thinker of %s to %s", checkpoint.source, target)
    partial = directory / f".{target.name}.{os.getpid()}.partial"
    intermediate = directory / f".{target.stem}.{os.getpid()}.source.gguf"
    try:
        if concrete in FLOAT_TYPES or storage_type == "native" or concrete == native:
            # A package asked for its own quantized type is copied as stored, like ``native``.
            direct = concrete if concrete in FLOAT_TYPES and storage_type != "native" else "native"
            write_thinker_gguf(checkpoint, partial, direct, fingerprint, progress)
        else:
            from inference.native.llama import quantize_gguf  # libllama only when quantizing

            # llama_model_quantize does not requantize: a quantized package goes through f32.
            source = "native" if native in FLOAT_TYPES else "f32"
            # The fingerprint travels through llama_model_quantize, which copies all metadata.
            write_thinker_gguf(
                checkpoint,
                intermediate,
                source,
                fingerprint,
                (lambda f: progress(0.5 * f)) if progress else None,
            )
            quantize_gguf(intermediate, partial, concrete, n_threads=n_threads)
        os.replace(partial, target)
    except OSError as exc:
        raise ModelError(
            f"could not write the converted thinker to {directory} ({exc})",
            "free disk space or make the model directory writable",
        ) from exc
    finally:
        # The conversion read every tensor: unmap them (also when it failed or was cancelled, so nothing keeps the
        # model open); the engine's few embedding rows map the file again on first use.
        checkpoint.weights.close()
        for leftover in (partial, intermediate):
            leftover.unlink(missing_ok=True)
    if progress:
        progress(1.0)
    return target
