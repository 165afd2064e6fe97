"""Typed Parakeet-TDT configuration parsed from ``config.json`` (+ ``processor_config.json``).

Missing keys take transformers 5.23.0's defaults (``ParakeetEncoderConfig`` / ``ParakeetTDTConfig``), since
that is what the reference would run with. Values the engine cannot run are rejected with a ModelError that
names the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inference.errors import ModelError

MODEL_TYPE = "parakeet_tdt"
# Keys of older Phonon conversions; the current audio.cpp loader rejects them with a reconvert error too.
_LEGACY_KEYS = ("batch_norm_variance_floor", "subsampling_input_scale")
_LEGACY_TOP_KEYS = ("audiocpp_matmul_precision", "audiocpp_cpu_matmul_weight_type")


@dataclass(frozen=True)
class FeatureConfig:
    sampling_rate: int = 16000
    feature_size: int = 128
    n_fft: int = 512
    win_length: int = 400
    hop_length: int = 160
    preemphasis: float = 0.97


@dataclass(frozen=True)
class EncoderConfig:
    hidden_size: int = 1024
    num_hidden_layers: int = 24
    num_attention_heads: int = 8
    intermediate_size: int = 4096
    hidden_act: str = "silu"
    attention_bias: bool = True  # transformers' default; the v3 checkpoint sets false
    convolution_bias: bool = True
    conv_kernel_size: int = 9
    subsampling_factor: int = 8
    subsampling_conv_channels: int = 256
    subsampling_conv_kernel_size: int = 3
    subsampling_conv_stride: int = 2
    num_mel_bins: int = 80
    max_position_embeddings: int = 5000
    # transformers multiplies the subsampling output by sqrt(hidden_size) only when this is true (v3: false).
    scale_input: bool = True

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def subsampled_mels(self) -> int:
        return self.num_mel_bins // self.subsampling_factor


@dataclass(frozen=True)
class ParakeetConfig:
    vocab_size: int  # includes blank
    blank_token_id: int
    pad_token_id: int
    decoder_hidden_size: int
    num_decoder_layers: int
    max_symbols_per_step: int
    durations: tuple[int, ...]
    encoder: EncoderConfig
    features: FeatureConfig = field(default_factory=FeatureConfig)
    word_timestamp_mode: str = "default"  # or "token_duration" (Phonon-2)
    punctuation_token_ids: tuple[int, ...] = ()

    @property
    def samples_per_frame(self) -> int:
        return self.features.hop_length * self.encoder.subsampling_factor

    @property
    def joint_size(self) -> int:
        return self.vocab_size + len(self.durations)


def _typed(raw: dict[str, Any], key: str, kind: type, default: Any, source: str) -> Any:
    value = raw.get(key, default)
    ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if not ok:
        raise ModelError(
            f"{source}: {key} must be {kind.__name__}, got {value!r}", "re-export the checkpoint"
        )
    return value


def parse_encoder_config(raw: dict[str, Any], source: str) -> EncoderConfig:
    for key in _LEGACY_KEYS:
        if key in raw:
            raise ModelError(
                f"{source}: encoder_config.{key} comes from an old Phonon/audio.cpp conversion",
                "reconvert the model with the current converter",
            )
    defaults = EncoderConfig()
    values = {}
    for name, default in defaults.__dict__.items():
        values[name] = _typed(raw, name, type(default), default, f"{source} encoder_config")
    enc = EncoderConfig(**values)
    checks = [
        (enc.subsampling_factor == 8, f"subsampling_factor {enc.subsampling_factor} (only 8 is supported)"),
        (
            enc.subsampling_conv_kernel_size == 3,
            f"subsampling_conv_kernel_size {enc.subsampling_conv_kernel_size} (only 3)",
        ),
        (enc.subsampling_conv_stride == 2, f"subsampling_conv_stride {enc.subsampling_conv_stride} (only 2)"),
        (enc.hidden_act == "silu", f"hidden_act {enc.hidden_act!r} (only 'silu')"),
        (
            enc.hidden_size > 0 and enc.num_attention_heads > 0,
            "non-positive hidden_size or num_attention_heads",
        ),
        (
            enc.hidden_size % max(1, enc.num_attention_heads) == 0,
            "hidden_size not divisible by num_attention_heads",
        ),
        (enc.conv_kernel_size % 2 == 1, f"conv_kernel_size {enc.conv_kernel_size} (must be odd)"),
        (
            enc.num_mel_bins % 8 == 0 and enc.num_mel_bins > 0,
            f"num_mel_bins {enc.num_mel_bins} (must be a multiple of 8)",
        ),
        (enc.num_hidden_layers >= 1, "num_hidden_layers must be at least 1"),
    ]
    for ok, what in checks:
        if not ok:
            raise ModelError(
                f"{source}: unsupported encoder_config: {what}",
                "use a Parakeet-TDT checkpoint (FastConformer, dw_striding x8)",
            )
    return enc


def parse_feature_config(raw: dict[str, Any] | None, source: str) -> FeatureConfig:
    if raw is None:
        return FeatureConfig()
    fe = raw.get("feature_extractor", raw)
    if not isinstance(fe, dict):
        raise ModelError(f"{source}: feature_extractor must be an object", "re-export processor_config.json")
    defaults = FeatureConfig()
    values = {
        name: _typed(fe, name, type(d), d, f"{source} feature_extractor")
        for name, d in defaults.__dict__.items()
    }
    cfg = FeatureConfig(**values)
    if cfg.sampling_rate != 16000 or cfg.win_length > cfg.n_fft or cfg.hop_length <= 0:
        raise ModelError(
            f"{source}: unsupported feature extractor (sampling_rate {cfg.sampling_rate}, n_fft {cfg.n_fft}, "
            f"win_length {cfg.win_length}, hop_length {cfg.hop_length})",
            "use the processor_config.json of a Parakeet-TDT checkpoint",
        )
    return cfg


def parse_config(
    raw: dict[str, Any],
    processor: dict[str, Any] | None,
    source: str,
    processor_source: str = "processor_config.json",
) -> ParakeetConfig:
    """``raw`` is config.json, ``processor`` processor_config.json (optional); the sources name the files."""
    if not isinstance(raw, dict):
        raise ModelError(f"{source} is not a JSON object", "re-download the model")
    model_type = raw.get("model_type")
    if model_type != MODEL_TYPE:
        raise ModelError(
            f"{source}: model_type is {model_type!r}, not {MODEL_TYPE!r}",
            "pick the family that matches this checkpoint, or a Parakeet-TDT (HF layout) checkpoint",
        )
    for key in _LEGACY_TOP_KEYS:
        if key in raw:
            raise ModelError(f"{source}: {key} comes from an old audio.cpp conversion", "reconvert the model")
    enc_raw = raw.get("encoder_config", {})
    if not isinstance(enc_raw, dict):
        raise ModelError(f"{source}: encoder_config must be an object", "re-export config.json")
    vocab = _typed(raw, "vocab_size", int, 8193, source)
    blank = _typed(raw, "blank_token_id", int, 8192, source)
    layers = _typed(raw, "num_decoder_layers", int, 2, source)
    if layers != 2:
        raise ModelError(
            f"{source}: num_decoder_layers is {layers}; Parakeet-TDT uses 2 LSTM layers",
            "use a Parakeet-TDT checkpoint",
        )
    if not 0 <= blank < vocab:
        raise ModelError(
            f"{source}: blank_token_id {blank} is outside vocab_size {vocab}", "re-export config.json"
        )
    durations = raw.get("durations", [0, 1, 2, 3, 4])
    if not (
        isinstance(durations, list) and durations and all(isinstance(d, int) and d >= 0 for d in durations)
    ):
        raise ModelError(
            f"{source}: durations must be a non-empty list of non-negative integers", "re-export config.json"
        )
    act = _typed(raw, "hidden_act", str, "relu", source)
    if act != "relu":
        raise ModelError(
            f"{source}: joint hidden_act {act!r} is not supported (only 'relu')",
            "use a Parakeet-TDT checkpoint",
        )
    mode = raw.get("audiocpp_word_timestamp_mode", raw.get("word_timestamp_mode", "default"))
    if mode not in ("default", "token_duration"):
        raise ModelError(
            f"{source}: word timestamp mode {mode!r} is unknown", "use 'default' or 'token_duration'"
        )
    punct = raw.get("audiocpp_punctuation_token_ids", [])
    if mode == "token_duration" and not (
        isinstance(punct, list) and all(isinstance(i, int) for i in punct) and punct == sorted(punct)
    ):
        raise ModelError(
            f"{source}: token_duration timestamps need audiocpp_punctuation_token_ids (a sorted integer list)",
            "reconvert the model",
        )
    return ParakeetConfig(
        vocab_size=vocab,
        blank_token_id=blank,
        pad_token_id=_typed(raw, "pad_token_id", int, 2, source),
        decoder_hidden_size=_typed(raw, "decoder_hidden_size", int, 640, source),
        num_decoder_layers=layers,
        max_symbols_per_step=_typed(raw, "max_symbols_per_step", int, 10, source),
        durations=tuple(durations),
        encoder=parse_encoder_config(enc_raw, source),
        features=parse_feature_config(processor, processor_source),
        word_timestamp_mode=mode,
        punctuation_token_ids=tuple(punct) if isinstance(punct, list) else (),
    )
