"""Open a Parakeet-TDT checkpoint: the Hugging Face folder or an audio.cpp GGUF package.

* HF layout (``nvidia/parakeet-tdt-0.6b-v3``): ``config.json`` (model_type parakeet_tdt), ``model.safetensors``,
  ``tokenizer.json`` and optionally ``processor_config.json``.
* audio.cpp GGUF (docs/gguf_packages.md): tensors are looked up through ``audiocpp.tensor_names`` (physical names may
  be ``_audiocpp.<i>``), and the sidecar files come from ``audiocpp.embedded_files.*`` (current blob layout or
  the legacy ``names``/``contents`` string arrays).

Both give a :class:`ParakeetCheckpoint`: the typed config, the tokenizer.json text and an
``inference.native.Checkpoint`` whose tensors carry the logical (HF) names.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from inference.errors import InputFileError, ModelError
from inference.families.parakeet_tdt.config import ParakeetConfig, parse_config
from inference.families.parakeet_tdt.speech_gate import SpeechGate, parse_speech_gate
from inference.models.layout import ModelLocation, locate_model
from inference.native.checkpoint import Checkpoint, TensorRecord, open_checkpoint
from inference.native.dtypes import GgmlType
from inference.native.embedded_files import embedded_files
from inference.native.gguf_file import GgufFile
from inference.native.package_tensors import logical_tensors

CONFIG_FILE = "config.json"
PROCESSOR_FILE = "processor_config.json"
TOKENIZER_FILE = "tokenizer.json"
WEIGHTS_FILE = "model.safetensors"


@dataclass
class ParakeetCheckpoint:
    config: ParakeetConfig
    tensors: Checkpoint
    tokenizer_json: str
    source: Path
    format: str  # "safetensors" or "gguf"
    # Set by a model folder's captioneer_model.json for models that invent words in non-speech (the demo):
    # how the Silero VAD's speech keeps non-speech out of the transcript (speech_gate.py).
    speech_gate: SpeechGate | None = None

    def close(self) -> None:
        self.tensors.close()

    def __enter__(self) -> ParakeetCheckpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_parakeet_checkpoint(path: str | Path) -> ParakeetCheckpoint:
    """The checkpoint at ``path`` (a folder, a file in it or a .gguf package; ``locate_model`` decides which)."""
    location = locate_model(path)
    if location.package is not None:
        return _open_gguf(location.package)
    return _open_folder(location)


MODEL_TRAITS_FILE = "captioneer_model.json"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc.strerror}", "check the model folder") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path} is not valid JSON: {exc}", "re-download the model") from exc


def _require(path: Path) -> Path:
    if not path.is_file():
        raise ModelError(
            f"the model folder {path.parent} has no {path.name}",
            f"re-download the model; {path.name} is required",
        )
    return path


def _open_folder(location: ModelLocation) -> ParakeetCheckpoint:
    folder = location.root
    config_path = _require(location.config)
    processor_path = folder / PROCESSOR_FILE
    config = parse_config(
        _read_json(config_path),
        _read_json(processor_path) if processor_path.exists() else None,
        str(config_path),
        str(processor_path),
    )
    tokenizer_json = _require(folder / TOKENIZER_FILE).read_text(encoding="utf-8")
    if not location.weights:
        _require(folder / WEIGHTS_FILE)  # names the file a single-file checkpoint needs
    try:
        tensors = open_checkpoint(location.weights)
    except InputFileError as exc:
        raise ModelError(exc.message, "re-download the model's .safetensors files") from exc
    source = str(location.weights[0]) if len(location.weights) == 1 else str(folder)
    try:
        validate_tensors(tensors, config, source)
    except BaseException:
        tensors.close()
        raise
    try:
        gate = _speech_gate(folder / MODEL_TRAITS_FILE)
    except BaseException:
        tensors.close()
        raise
    return ParakeetCheckpoint(config, tensors, tokenizer_json, folder, "safetensors", gate)


def _speech_gate(path: Path) -> SpeechGate | None:
    """The speech gate a model folder asks for (``{"speech_gate": {"method": "words", ...}}``), or None."""
    if not path.is_file():
        return None
    traits = _read_json(path)
    if not isinstance(traits, dict):
        raise ModelError(f"{path} must hold a JSON object", "fix or remove the file")
    return parse_speech_gate(traits.get("speech_gate"), path)


# --------------------------------------------------------------------------------------------- GGUF


def _field_value(gguf_file: GgufFile, key: str):
    return gguf_file.fields.get(key)


def _open_gguf(path: Path) -> ParakeetCheckpoint:
    source = str(path)
    with contextlib.ExitStack() as on_error:  # the map is closed on every failure below
        reader = on_error.enter_context(GgufFile(path))  # ModelError naming the file on corrupt input
        files = embedded_files(reader.fields, source)
        if CONFIG_FILE not in files:
            arch = _field_value(reader, "general.architecture")
            raise ModelError(
                f"{path} has no embedded config.json (general.architecture={arch!r})",
                "use an audio.cpp Parakeet-TDT GGUF package (not a llama.cpp GGUF)",
            )
        try:
            raw_config = json.loads(files[CONFIG_FILE])
            processor = json.loads(files[PROCESSOR_FILE]) if PROCESSOR_FILE in files else None
        except ValueError as exc:
            raise ModelError(
                f"{path}: an embedded JSON file is invalid: {exc}", "re-create the GGUF package"
            ) from exc
        config = parse_config(raw_config, processor, f"{source}:{CONFIG_FILE}", f"{source}:{PROCESSOR_FILE}")
        if TOKENIZER_FILE not in files:
            raise ModelError(
                f"{path} has no embedded {TOKENIZER_FILE}",
                "re-create the GGUF package with the tokenizer sidecar",
            )
        tensors = Checkpoint(_logical_records(reader, source), [reader])
        validate_tensors(tensors, config, source)
        on_error.pop_all()
    return ParakeetCheckpoint(config, tensors, files[TOKENIZER_FILE].decode("utf-8"), path, "gguf")


def _logical_records(reader: GgufFile, source: str) -> dict[str, TensorRecord]:
    """The package's tensors under their logical (HF) names and shapes (one reader: ``package_tensors``)."""
    table = logical_tensors(reader, source, require_names=False)
    for entry in table:  # every type is checked before any view of the map exists
        if int(entry.tensor.type) not in {int(kind) for kind in GgmlType}:
            raise ModelError(
                f"{source}: tensor {entry.name!r} has unsupported type {entry.tensor.type_name}",
                "use a package from the model catalog",
            )
    return {
        entry.name: TensorRecord(
            entry.name,
            entry.shape,
            GgmlType(int(entry.tensor.type)),
            reader.raw(entry.tensor),
            reader.bytes,
            reader.mapping,
        )
        for entry in table
    }


# ------------------------------------------------------------------------------------------ tensors


def expected_tensors(config: ParakeetConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the engine reads, with its logical (PyTorch) shape."""
    enc = config.encoder
    h, ff, c, k = enc.hidden_size, enc.intermediate_size, enc.subsampling_conv_channels, enc.conv_kernel_size
    dh, vocab = config.decoder_hidden_size, config.vocab_size
    heads, hd = enc.num_attention_heads, enc.head_dim
    shapes: dict[str, tuple[int, ...]] = {}
    sub = "encoder.subsampling."
    shapes[sub + "layers.0.weight"] = (c, 1, 3, 3)
    shapes[sub + "layers.0.bias"] = (c,)
    for dw, pw in ((2, 3), (5, 6)):
        shapes[f"{sub}layers.{dw}.weight"] = (c, 1, 3, 3)
        shapes[f"{sub}layers.{dw}.bias"] = (c,)
        shapes[f"{sub}layers.{pw}.weight"] = (c, c, 1, 1)
        shapes[f"{sub}layers.{pw}.bias"] = (c,)
    shapes[sub + "linear.weight"] = (h, c * enc.subsampled_mels)
    shapes[sub + "linear.bias"] = (h,)
    for i in range(enc.num_hidden_layers):
        p = f"encoder.layers.{i}."
        for norm in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"):
            shapes[f"{p}{norm}.weight"] = (h,)
            shapes[f"{p}{norm}.bias"] = (h,)
        for ffn in ("feed_forward1", "feed_forward2"):
            shapes[f"{p}{ffn}.linear1.weight"] = (ff, h)
            shapes[f"{p}{ffn}.linear2.weight"] = (h, ff)
            if enc.attention_bias:
                shapes[f"{p}{ffn}.linear1.bias"] = (ff,)
                shapes[f"{p}{ffn}.linear2.bias"] = (h,)
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[f"{p}self_attn.{proj}.weight"] = (h, h)
            if enc.attention_bias:
                shapes[f"{p}self_attn.{proj}.bias"] = (h,)
        shapes[f"{p}self_attn.relative_k_proj.weight"] = (h, h)
        shapes[f"{p}self_attn.bias_u"] = (heads, hd)
        shapes[f"{p}self_attn.bias_v"] = (heads, hd)
        shapes[f"{p}conv.pointwise_conv1.weight"] = (2 * h, h, 1)
        shapes[f"{p}conv.depthwise_conv.weight"] = (h, 1, k)
        shapes[f"{p}conv.pointwise_conv2.weight"] = (h, h, 1)
        if enc.convolution_bias:
            shapes[f"{p}conv.pointwise_conv1.bias"] = (2 * h,)
            shapes[f"{p}conv.depthwise_conv.bias"] = (h,)
            shapes[f"{p}conv.pointwise_conv2.bias"] = (h,)
        for stat in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{p}conv.norm.{stat}"] = (h,)
    shapes["decoder.embedding.weight"] = (vocab, dh)
    for layer in range(config.num_decoder_layers):
        shapes[f"decoder.lstm.weight_ih_l{layer}"] = (4 * dh, dh)
        shapes[f"decoder.lstm.weight_hh_l{layer}"] = (4 * dh, dh)
        shapes[f"decoder.lstm.bias_ih_l{layer}"] = (4 * dh,)
        shapes[f"decoder.lstm.bias_hh_l{layer}"] = (4 * dh,)
    shapes["decoder.decoder_projector.weight"] = (dh, dh)
    shapes["decoder.decoder_projector.bias"] = (dh,)
    shapes["encoder_projector.weight"] = (dh, h)
    shapes["encoder_projector.bias"] = (dh,)
    shapes["joint.head.weight"] = (config.joint_size, dh)
    shapes["joint.head.bias"] = (config.joint_size,)
    return shapes


def validate_tensors(tensors: Checkpoint, config: ParakeetConfig, source: str) -> None:
    for name, shape in expected_tensors(config).items():
        if name not in tensors:
            raise ModelError(
                f"{source} has no tensor {name!r}",
                "the checkpoint is incomplete or not Parakeet-TDT; re-download it",
            )
        got = tensors.shape(name)
        if got != shape:
            raise ModelError(
                f"{source}: tensor {name!r} has shape {got}, config.json implies {shape}",
                "config.json and the weights do not belong together; re-download the model",
            )
