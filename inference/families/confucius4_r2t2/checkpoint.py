"""Locate and validate a Qwen3-ASR / Confucius4-R2T2 checkpoint: files, configs, tokenizer, tensors.

Three containers (docs/families/confucius4_r2t2.md §1, docs/gguf_packages.md):

* a directory in the **legacy** release layout (``thinker.audio_tower.*``, ``thinker.model.*``, tied LM head absent);
* a directory in the **Hugging Face** layout (``model.audio_tower.*``, ``model.multi_modal_projector.linear_{1,2}``,
  ``model.language_model.*``, ``lm_head``);
* an **audio.cpp GGUF package** (``general.architecture = audiocpp``): logical tensor names in
  ``audiocpp.tensor_names`` and the sidecar files (config, tokenizer...) embedded in the file.

Which file is the model is decided by ``inference.models.layout.locate_model`` (a directory holding one
``.gguf`` uses it in preference to ``.safetensors``). Tensor names are canonicalised to the
legacy names, so the rest of the family uses one naming whatever the container.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.errors import InputFileError, ModelError
from inference.families.confucius4_r2t2.config import (
    FeatureConfig,
    GenerationConfig,
    ModelConfig,
    parse_feature_config,
    parse_generation_config,
    parse_model_config,
)
from inference.families.confucius4_r2t2.tokenizer import R2T2Tokenizer, load_tokenizer
from inference.models.layout import locate_model
from inference.native import Checkpoint, open_checkpoint
from inference.native.embedded_files import embedded_files
from inference.native.gguf_file import GgufFile
from inference.native.package_tensors import logical_tensors
from inference.native.safetensors_header import read_safetensors_header

AUDIO = "thinker.audio_tower."
TEXT = "thinker.model."
LM_HEAD = "thinker.lm_head.weight"
# Storage types a ``.weight`` tensor may have (docs/families/confucius4_r2t2.md §1; k-quants for the community Q4_K_M package).
ALLOWED_WEIGHT_TYPES = frozenset({"F32", "F16", "BF16", "Q8_0", "Q2_K", "Q4_K", "Q6_K"})


def canonical_tensor_name(name: str) -> str:
    """Map an HF-layout tensor name to the legacy release name (docs/reference_parity.md §2.2); legacy names pass."""
    if name.startswith("thinker."):
        return name
    if name == "lm_head.weight":
        return LM_HEAD
    for index in ("1", "2"):
        head = f"model.multi_modal_projector.linear_{index}."
        if name.startswith(head):
            return f"{AUDIO}proj{index}.{name[len(head) :]}"
    if name.startswith("model.language_model."):
        return TEXT + name[len("model.language_model.") :]
    if name.startswith("model.audio_tower."):
        return "thinker." + name[len("model.") :]
    return name


def expected_tensor_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the family needs, by canonical name, with its numpy-order shape (LM head excluded)."""
    a, t = config.audio, config.text
    hidden = a.downsample_hidden_size
    freq = ((((a.num_mel_bins + 1) // 2) + 1) // 2 + 1) // 2
    shapes: dict[str, tuple[int, ...]] = {
        f"{AUDIO}conv2d1.weight": (hidden, 1, 3, 3),
        f"{AUDIO}conv2d1.bias": (hidden,),
        f"{AUDIO}conv2d2.weight": (hidden, hidden, 3, 3),
        f"{AUDIO}conv2d2.bias": (hidden,),
        f"{AUDIO}conv2d3.weight": (hidden, hidden, 3, 3),
        f"{AUDIO}conv2d3.bias": (hidden,),
        f"{AUDIO}conv_out.weight": (a.d_model, hidden * freq),
        f"{AUDIO}ln_post.weight": (a.d_model,),
        f"{AUDIO}ln_post.bias": (a.d_model,),
        f"{AUDIO}proj1.weight": (a.d_model, a.d_model),
        f"{AUDIO}proj1.bias": (a.d_model,),
        f"{AUDIO}proj2.weight": (a.output_dim, a.d_model),
        f"{AUDIO}proj2.bias": (a.output_dim,),
        f"{TEXT}embed_tokens.weight": (t.vocab_size, t.hidden_size),
        f"{TEXT}norm.weight": (t.hidden_size,),
    }
    for i in range(a.encoder_layers):
        p = f"{AUDIO}layers.{i}."
        for norm in ("self_attn_layer_norm", "final_layer_norm"):
            shapes[f"{p}{norm}.weight"] = shapes[f"{p}{norm}.bias"] = (a.d_model,)
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            shapes[f"{p}self_attn.{proj}.weight"] = (a.d_model, a.d_model)
            shapes[f"{p}self_attn.{proj}.bias"] = (a.d_model,)
        shapes[f"{p}fc1.weight"], shapes[f"{p}fc1.bias"] = (
            (a.encoder_ffn_dim, a.d_model),
            (a.encoder_ffn_dim,),
        )
        shapes[f"{p}fc2.weight"], shapes[f"{p}fc2.bias"] = (a.d_model, a.encoder_ffn_dim), (a.d_model,)
    q_out, kv_out = t.num_attention_heads * t.head_dim, t.num_key_value_heads * t.head_dim
    for i in range(t.num_hidden_layers):
        p = f"{TEXT}layers.{i}."
        shapes[f"{p}input_layernorm.weight"] = shapes[f"{p}post_attention_layernorm.weight"] = (
            t.hidden_size,
        )
        shapes[f"{p}self_attn.q_proj.weight"] = (q_out, t.hidden_size)
        shapes[f"{p}self_attn.k_proj.weight"] = shapes[f"{p}self_attn.v_proj.weight"] = (
            kv_out,
            t.hidden_size,
        )
        shapes[f"{p}self_attn.o_proj.weight"] = (t.hidden_size, q_out)
        shapes[f"{p}self_attn.q_norm.weight"] = shapes[f"{p}self_attn.k_norm.weight"] = (t.head_dim,)
        shapes[f"{p}mlp.gate_proj.weight"] = shapes[f"{p}mlp.up_proj.weight"] = (
            t.intermediate_size,
            t.hidden_size,
        )
        shapes[f"{p}mlp.down_proj.weight"] = (t.hidden_size, t.intermediate_size)
        if t.attention_bias:
            shapes[f"{p}self_attn.q_proj.bias"] = (q_out,)
            shapes[f"{p}self_attn.k_proj.bias"] = shapes[f"{p}self_attn.v_proj.bias"] = (kv_out,)
    return shapes


# ------------------------------------------------------------------------------------------ containers


@dataclass(frozen=True)
class TensorInfo:
    name: str  # canonical (legacy) name
    stored_name: str  # name inside the container
    shape: tuple[int, ...]  # numpy order
    dtype: str  # upper-case type name: F32, F16, BF16, Q8_0, ...
    file: Path  # the weight file holding it
    begin: int  # absolute byte range of its stored bytes in ``file``
    end: int


@dataclass
class ModelFiles:
    """Where the weights and sidecar files of one checkpoint are."""

    root: Path
    kind: str  # "safetensors" or "gguf"
    weight_paths: list[Path]
    read: Callable[[str], bytes | None]
    tensors: dict[str, TensorInfo]  # canonical name → info

    def read_json(self, name: str, required: bool = True) -> dict[str, Any] | None:
        raw = self.read(name)
        if raw is None:
            if required:
                raise ModelError(
                    f"{self.root} has no {name}", "copy the checkpoint's config files next to the weights"
                )
            return None
        return parse_json_object(raw, name, self.root)

    def open_weights(self) -> Checkpoint:
        """The weights as a native checkpoint keyed by stored names, memory-mapped (no copies); close it."""
        try:
            return open_checkpoint(self.weight_paths)
        except InputFileError as exc:
            raise ModelError(exc.message, exc.fix or "re-download the model") from exc


def parse_json_object(raw: bytes, name: str, where: object) -> dict[str, Any]:
    """A checkpoint's JSON file (``name`` of ``where``) as a dict; ModelError naming it when it is not one."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"cannot read {name} of {where}: {exc}", "re-download the model") from exc
    if not isinstance(value, dict):
        raise ModelError(f"{name} of {where} is not a JSON object", "re-download the model")
    return value


def locate_model_files(path: Path) -> ModelFiles:
    """The files of the checkpoint at ``path`` (``inference.models.layout.locate_model`` decides which)."""
    location = locate_model(path)
    if location.package is not None:
        return _gguf_files(location.package)
    weights = list(location.require_weights())
    root = location.root

    def read(name: str) -> bytes | None:
        file = root / name
        return file.read_bytes() if file.is_file() else None

    tensors: dict[str, TensorInfo] = {}
    for weight in weights:
        for info in _safetensors_tensors(weight):
            tensors[info.name] = info
    return ModelFiles(root, "safetensors", weights, read, tensors)


def _safetensors_tensors(path: Path) -> list[TensorInfo]:
    try:
        start, header = read_safetensors_header(path)  # checks the header against the file size
    except InputFileError as exc:
        raise ModelError(exc.message, exc.fix) from exc
    found = []
    for stored, info in header.items():
        if stored == "__metadata__":
            continue
        begin, end = (start + int(offset) for offset in info["data_offsets"])
        shape = tuple(int(d) for d in info["shape"])
        found.append(
            TensorInfo(
                canonical_tensor_name(stored), stored, shape, str(info["dtype"]).upper(), path, begin, end
            )
        )
    return found


def _gguf_files(path: Path) -> ModelFiles:
    with GgufFile(path) as package:
        fields = package.fields
        if fields.get("general.architecture") != "audiocpp" or "audiocpp.tensor_names" not in fields:
            raise ModelError(
                f"{path.name} is not an audio.cpp GGUF package (general.architecture must be 'audiocpp')",
                "use a package from the model catalog; llama.cpp/mmproj GGUFs of Qwen3-ASR are not loadable",
            )
        tensors = {}
        for entry in logical_tensors(package, path.name):
            tensor, canonical = entry.tensor, canonical_tensor_name(entry.name)
            tensors[canonical] = TensorInfo(
                canonical,
                tensor.name,
                entry.shape,
                tensor.type_name,
                path,
                tensor.offset,
                tensor.offset + tensor.nbytes,
            )
        embedded = embedded_files(fields, path.name)

    def read(name: str) -> bytes | None:
        return embedded.get(name)

    return ModelFiles(path, "gguf", [path], read, tensors)


# --------------------------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class SpecialTokens:
    audio: int
    audio_start: int
    audio_end: int
    eos: tuple[int, ...]
    pad: int | None


@dataclass
class R2T2Checkpoint:
    files: ModelFiles
    config: ModelConfig
    generation: GenerationConfig
    features: FeatureConfig
    tokenizer: R2T2Tokenizer
    special: SpecialTokens

    @property
    def layout(self) -> str:
        return self.config.layout


def load_checkpoint(path: Path) -> R2T2Checkpoint:
    """Read and cross-check configs, tokenizer and tensor inventory (no weights are loaded here)."""
    files = locate_model_files(Path(path))
    config = parse_model_config(files.read_json("config.json") or {}, f"{files.root}/config.json")
    generation = parse_generation_config(
        files.read_json("generation_config.json") or {}, f"{files.root}/generation_config.json"
    )
    preprocessor = files.read_json("preprocessor_config.json", required=False)
    name = "preprocessor_config.json"
    if preprocessor is None:
        preprocessor, name = (
            files.read_json("processor_config.json", required=False) or {},
            "processor_config.json",
        )
    features = parse_feature_config(preprocessor, config.audio, f"{files.root}/{name}")
    tokenizer = load_tokenizer(files.root, files=None if files.kind == "safetensors" else _reader_map(files))
    special = _special_tokens(config, generation, tokenizer, files.root)
    validate_tensors(files, config)
    return R2T2Checkpoint(files, config, generation, features, tokenizer, special)


class _reader_map(dict):
    """A mapping view over ``ModelFiles.read`` for the tokenizer loader."""

    def __init__(self, files: ModelFiles) -> None:
        super().__init__()
        self._files = files

    def get(self, key: str, default: bytes | None = None) -> bytes | None:  # type: ignore[override]
        value = self._files.read(key)
        return default if value is None else value


def _special_tokens(
    config: ModelConfig, generation: GenerationConfig, tokenizer: R2T2Tokenizer, root: Path
) -> SpecialTokens:
    pad_id = tokenizer.token_id("<|audio_pad|>")
    if pad_id is not None and pad_id != config.audio_token_id:
        raise ModelError(
            f"{root}: config audio_token_id {config.audio_token_id} is not the tokenizer's <|audio_pad|> ({pad_id})",
            "the tokenizer and config.json come from different checkpoints; re-download them",
        )
    start = config.audio_start_token_id
    end = config.audio_end_token_id
    if start is None:
        start = tokenizer.require_id("<|audio_start|>")
    if end is None:
        end = tokenizer.require_id("<|audio_end|>")
    for label, token_id in (("eos_token_id", generation.eos_token_ids), ("audio ids", (start, end))):
        for value in token_id:
            if not 0 <= value < tokenizer.size:
                raise ModelError(
                    f"{root}: {label} {value} is outside the tokenizer ({tokenizer.size} tokens)",
                    "the configs and tokenizer do not belong together",
                )
    eos, pad = stop_and_pad_ids(config, generation)
    return SpecialTokens(config.audio_token_id, start, end, eos, pad)


def lm_head_name(files: ModelFiles, config: ModelConfig) -> str | None:
    """The canonical name of an untied LM head, or None when the embedding matrix is the head.

    One rule for every reader (docs/families/confucius4_r2t2.md §1): the head is the embedding when the config ties them, and
    when the checkpoint holds no LM head at all (the legacy release ships none and reuses the embedding).
    """
    if config.tie_word_embeddings or LM_HEAD not in files.tensors:
        return None
    return LM_HEAD


def thinker_tensor_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """The text decoder's tensors (the thinker), by canonical name, LM head excluded."""
    return {name: shape for name, shape in expected_tensor_shapes(config).items() if name.startswith(TEXT)}


def stop_and_pad_ids(config: ModelConfig, generation: GenerationConfig) -> tuple[tuple[int, ...], int | None]:
    """(eos ids, pad id): eos from generation_config.json; pad from there, else from config.json."""
    pad = generation.pad_token_id if generation.pad_token_id is not None else config.pad_token_id
    return generation.eos_token_ids, pad


def validate_tensors(
    files: ModelFiles, config: ModelConfig, expected: dict[str, tuple[int, ...]] | None = None
) -> None:
    """Every needed tensor (default: the whole model) present with the config's shape and an allowed storage
    type; an untied LM head (see :func:`lm_head_name`) is checked too."""
    expected = dict(expected_tensor_shapes(config) if expected is None else expected)
    head = lm_head_name(files, config)
    if head is not None:
        expected[head] = (config.output_size, config.text.hidden_size)
    missing = [name for name in expected if name not in files.tensors]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ModelError(
            f"{files.root} lacks tensors: {shown}", "the weights are incomplete or not Qwen3-ASR"
        )
    for name, shape in expected.items():
        info = files.tensors[name]
        if info.shape != shape:
            raise ModelError(
                f"{files.root}: tensor {info.stored_name} has shape {info.shape}, config.json implies {shape}",
                "config.json and the weights do not belong together",
            )
        if name.endswith(".weight") and info.dtype not in ALLOWED_WEIGHT_TYPES:
            raise ModelError(
                f"{files.root}: tensor {info.stored_name} is stored as {info.dtype}",
                f"use a package whose weights are one of {', '.join(sorted(ALLOWED_WEIGHT_TYPES))}",
            )
