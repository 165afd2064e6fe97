"""Configuration of a Qwen3-ASR / Confucius4-R2T2 checkpoint (docs/families/confucius4_r2t2.md §1, docs/reference_parity.md §2.1-2.2).

Two layouts: the legacy release (``config.json`` with a ``thinker_config`` object holding ``audio_config`` and
``text_config``) and the Hugging Face layout (the same two objects at the root). Every dimension comes from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inference.errors import ModelError

LEGACY = "legacy"
HF = "hf"
_FIX = "use the config.json that ships with the checkpoint (Qwen3-ASR / Confucius4-R2T2)"


@dataclass(frozen=True)
class AudioConfig:
    num_mel_bins: int
    encoder_layers: int
    encoder_attention_heads: int
    encoder_ffn_dim: int
    d_model: int
    n_window: int
    n_window_infer: int
    downsample_hidden_size: int
    output_dim: int
    max_source_positions: int = 1500
    conv_chunksize: int = 500  # conv batching in the original code; no numerical effect

    @property
    def head_dim(self) -> int:
        return self.d_model // self.encoder_attention_heads

    @property
    def chunk_frames(self) -> int:
        return 2 * self.n_window

    @property
    def window_chunks(self) -> int:
        """Conv chunks per attention window (``n_window_infer / (2*n_window)``)."""
        return self.n_window_infer // self.chunk_frames


@dataclass(frozen=True)
class TextConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 5e6
    attention_bias: bool = False
    mrope_section: tuple[int, ...] = (24, 20, 20)  # parsed, unused: M-RoPE with 1-D positions is plain RoPE


@dataclass(frozen=True)
class ModelConfig:
    layout: str  # LEGACY or HF
    audio: AudioConfig
    text: TextConfig
    audio_token_id: int
    audio_start_token_id: int | None  # legacy config; HF layout takes them from the tokenizer
    audio_end_token_id: int | None
    pad_token_id: int | None
    output_size: int  # classify_num when present, else vocab_size
    tie_word_embeddings: bool
    model_type: str
    support_languages: tuple[str, ...] | None
    timestamp_token_id: int | None


@dataclass(frozen=True)
class GenerationConfig:
    eos_token_ids: tuple[int, ...]
    pad_token_id: int | None
    max_new_tokens: int = 512


@dataclass(frozen=True)
class FeatureConfig:
    sampling_rate: int = 16000
    feature_size: int = 128
    hop_length: int = 160
    n_fft: int = 400


def _object(parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if not isinstance(value, Mapping):
        raise ModelError(f"{where} has no {key!r} object", _FIX)
    return value


def _int(obj: Mapping[str, Any], key: str, where: str, default: int | None = None, *aliases: str) -> int:
    for name in (key, *aliases):
        if name in obj and obj[name] is not None:
            value = obj[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise ModelError(f"{where}: {name} must be an integer, got {value!r}", _FIX)
            return value
    if default is None:
        raise ModelError(f"{where} is missing the required key {key!r}", _FIX)
    return default


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _float(obj: Mapping[str, Any], key: str, default: float) -> float:
    value = obj.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def parse_audio_config(obj: Mapping[str, Any], where: str) -> AudioConfig:
    activation = obj.get("activation_function")
    if activation != "gelu":
        raise ModelError(
            f"{where}: activation_function is {activation!r}; the audio tower needs 'gelu'", _FIX
        )
    config = AudioConfig(
        num_mel_bins=_int(obj, "num_mel_bins", where),
        encoder_layers=_int(obj, "encoder_layers", where, None, "num_hidden_layers"),
        encoder_attention_heads=_int(obj, "encoder_attention_heads", where, None, "num_attention_heads"),
        encoder_ffn_dim=_int(obj, "encoder_ffn_dim", where, None, "intermediate_size"),
        d_model=_int(obj, "d_model", where, None, "hidden_size"),
        n_window=_int(obj, "n_window", where),
        n_window_infer=_int(obj, "n_window_infer", where),
        downsample_hidden_size=_int(obj, "downsample_hidden_size", where),
        output_dim=_int(obj, "output_dim", where),
        max_source_positions=_int(obj, "max_source_positions", where, 1500),
        conv_chunksize=_int(obj, "conv_chunksize", where, 500),
    )
    if config.n_window != 50:
        raise ModelError(
            f"{where}: n_window is {config.n_window}; the audio tower's 13-tokens-per-chunk layout needs 50",
            _FIX,
        )
    if config.n_window_infer <= 0 or config.n_window_infer % config.chunk_frames:
        raise ModelError(
            f"{where}: n_window_infer {config.n_window_infer} is not a multiple of 100 frames", _FIX
        )
    if config.d_model % config.encoder_attention_heads:
        raise ModelError(f"{where}: d_model {config.d_model} is not divisible by the head count", _FIX)
    return config


def parse_text_config(obj: Mapping[str, Any], where: str) -> TextConfig:
    hidden = _int(obj, "hidden_size", where)
    heads = _int(obj, "num_attention_heads", where)
    activation = obj.get("hidden_act", "silu")
    if activation != "silu":
        raise ModelError(f"{where}: hidden_act is {activation!r}; the Qwen3 thinker needs 'silu'", _FIX)
    rope_parameters: Mapping[str, Any] = _mapping(obj.get("rope_parameters"))
    rope_theta = _float(obj, "rope_theta", _float(rope_parameters, "rope_theta", 5e6))
    rope_scaling: Mapping[str, Any] = _mapping(obj.get("rope_scaling"))
    mrope = rope_scaling.get("mrope_section") or [24, 20, 20]
    return TextConfig(
        vocab_size=_int(obj, "vocab_size", where),
        hidden_size=hidden,
        intermediate_size=_int(obj, "intermediate_size", where),
        num_hidden_layers=_int(obj, "num_hidden_layers", where),
        num_attention_heads=heads,
        num_key_value_heads=_int(obj, "num_key_value_heads", where),
        max_position_embeddings=_int(obj, "max_position_embeddings", where),
        head_dim=_int(obj, "head_dim", where, hidden // heads),
        rms_norm_eps=_float(obj, "rms_norm_eps", 1e-6),
        rope_theta=rope_theta,
        attention_bias=bool(obj.get("attention_bias", False)),
        mrope_section=tuple(int(v) for v in mrope),
    )


def parse_model_config(config: Mapping[str, Any], where: str = "config.json") -> ModelConfig:
    """Parse ``config.json`` of either layout."""
    layout = LEGACY if isinstance(config.get("thinker_config"), Mapping) else HF
    thinker = _object(config, "thinker_config", where) if layout == LEGACY else config
    thinker_where = f"{where} thinker_config" if layout == LEGACY else where
    audio = parse_audio_config(
        _object(thinker, "audio_config", thinker_where), f"{thinker_where}.audio_config"
    )
    text_obj = _object(thinker, "text_config", thinker_where)
    text = parse_text_config(text_obj, f"{thinker_where}.text_config")
    if audio.output_dim != text.hidden_size:
        raise ModelError(
            f"{where}: the audio projector's output_dim ({audio.output_dim}) differs from the thinker's "
            f"hidden_size ({text.hidden_size})",
            _FIX,
        )
    tie = config.get("tie_word_embeddings", text_obj.get("tie_word_embeddings", False))
    languages = config.get("support_languages")
    optional = {
        key: thinker.get(key) for key in ("audio_start_token_id", "audio_end_token_id", "pad_token_id")
    }
    timestamp = config.get("timestamp_token_id", thinker.get("timestamp_token_id"))
    return ModelConfig(
        layout=layout,
        audio=audio,
        text=text,
        audio_token_id=_int(thinker, "audio_token_id", thinker_where),
        audio_start_token_id=optional["audio_start_token_id"] if layout == LEGACY else None,
        audio_end_token_id=optional["audio_end_token_id"] if layout == LEGACY else None,
        pad_token_id=optional["pad_token_id"],
        output_size=_int(thinker, "classify_num", thinker_where, text.vocab_size),
        tie_word_embeddings=bool(tie),
        model_type=str(config.get("model_type", "")),
        support_languages=tuple(str(v) for v in languages) if isinstance(languages, list) else None,
        timestamp_token_id=timestamp if isinstance(timestamp, int) else None,
    )


def parse_generation_config(
    config: Mapping[str, Any], where: str = "generation_config.json"
) -> GenerationConfig:
    eos = config.get("eos_token_id")
    if isinstance(eos, int) and not isinstance(eos, bool):
        eos_ids: tuple[Any, ...] = (eos,)
    else:
        eos_ids = tuple(eos) if isinstance(eos, list | tuple) else ()
    if not eos_ids or not all(isinstance(v, int) and not isinstance(v, bool) for v in eos_ids):
        raise ModelError(f"{where} has no usable eos_token_id (got {eos!r})", _FIX)
    pad = config.get("pad_token_id")
    return GenerationConfig(
        eos_token_ids=eos_ids,
        pad_token_id=pad if isinstance(pad, int) else None,
        max_new_tokens=_int(config, "max_new_tokens", where, 512),
    )


def parse_feature_config(config: Mapping[str, Any], audio: AudioConfig, where: str) -> FeatureConfig:
    """``preprocessor_config.json`` or ``processor_config.json`` (its ``feature_extractor`` object if present)."""
    extractor = config.get("feature_extractor")
    obj: Mapping[str, Any] = extractor if isinstance(extractor, Mapping) else config
    features = FeatureConfig(
        sampling_rate=_int(obj, "sampling_rate", where, 16000),
        feature_size=_int(obj, "feature_size", where, audio.num_mel_bins),
        hop_length=_int(obj, "hop_length", where, 160),
        n_fft=_int(obj, "n_fft", where, 400),
    )
    if features.feature_size != audio.num_mel_bins:
        raise ModelError(
            f"{where}: feature_size {features.feature_size} differs from the audio tower's num_mel_bins "
            f"{audio.num_mel_bins}",
            "the preprocessor config does not belong to this checkpoint; re-download it",
        )
    if (features.sampling_rate, features.hop_length, features.n_fft) != (16000, 160, 400):
        raise ModelError(
            f"{where}: sampling_rate/hop_length/n_fft are {features.sampling_rate}/{features.hop_length}/"
            f"{features.n_fft}; the Whisper frontend is defined for 16000/160/400",
            "use the checkpoint's original preprocessor config",
        )
    return features
