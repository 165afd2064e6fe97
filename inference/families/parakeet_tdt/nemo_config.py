"""A NeMo ``model_config.yaml`` (already parsed) → this family's ``config.json`` and ``processor_config.json``.

Key names and their meaning follow transformers' ``convert_nemo_to_hf.py`` (docs/reference_parity.md §1.1–1.3):
``encoder.d_model`` → ``hidden_size``, ``n_heads``, ``n_layers``, ``feat_in`` → ``num_mel_bins``,
``ff_expansion_factor`` × d_model → ``intermediate_size``, ``xscaling`` → ``scale_input``, ``use_bias`` →
``attention_bias`` and ``convolution_bias``; ``labels`` (or ``joint.vocabulary``) plus one blank give
``vocab_size``; ``decoding.durations`` (or ``model_defaults.tdt_durations``) the TDT durations. Anything the
engine cannot run (another subsampling, attention or normalisation, limited attention context, another joint
or preprocessor) is a :class:`ModelError` that names the key and its value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference.errors import ModelError
from inference.families.parakeet_tdt.config import MODEL_TYPE, parse_config

_FIX = "import a Parakeet-TDT .nemo (FastConformer encoder, TDT decoder)"
FEATURE_KEYS = ("sampling_rate", "feature_size", "n_fft", "win_length", "hop_length", "preemphasis")
# fused_batch_norm: NeMo's FusedBatchNorm1d, the eval BatchNorm folded into a per-channel scale and shift.
NORM_TYPES = ("batch_norm", "fused_batch_norm")


@dataclass(frozen=True)
class NemoModelConfig:
    config: dict[str, Any]  # config.json
    processor: dict[str, Any] | None  # processor_config.json; None when the .nemo has no preprocessor section
    labels: list[str] | None  # the vocabulary without blank, when the .nemo lists it
    tokenizer_model: str | None  # the archive member named by tokenizer.model_path, when there is one
    fused_batch_norm: bool = (
        False  # the conv modules' BatchNorm is stored folded (weight = scale, bias = shift)
    )


def _section(raw: dict[str, Any], key: str, source: str) -> dict[str, Any]:
    value = raw.get(key)
    if not isinstance(value, dict):
        raise ModelError(f"{source} has no {key} section; it is not a NeMo ASR model config", _FIX)
    return value


def _subsection(section: dict[str, Any], key: str) -> dict[str, Any]:
    value = section.get(key)
    return value if isinstance(value, dict) else {}


def _require(ok: bool, source: str, what: str) -> None:
    if not ok:
        raise ModelError(f"{source}: {what} is not supported by this engine", _FIX)


def labels_of(raw: dict[str, Any]) -> list[str] | None:
    for labels in (raw.get("labels"), _subsection(raw, "joint").get("vocabulary")):
        if isinstance(labels, list) and labels and all(isinstance(p, str) for p in labels):
            return labels
    return None


def durations_of(raw: dict[str, Any], source: str) -> list[int]:
    found: dict[str, Any] = {}
    if isinstance(raw.get("decoding"), dict) and "durations" in raw["decoding"]:
        found["decoding.durations"] = raw["decoding"]["durations"]
    if isinstance(raw.get("model_defaults"), dict) and "tdt_durations" in raw["model_defaults"]:
        found["model_defaults.tdt_durations"] = raw["model_defaults"]["tdt_durations"]
    if not found:
        raise ModelError(
            f"{source} names no TDT durations (decoding.durations); it is not a TDT model",
            "RNN-T and CTC .nemo checkpoints are not supported; " + _FIX,
        )
    values = list(found.values())
    if any(v != values[0] for v in values):
        raise ModelError(
            f"{source}: the TDT durations disagree: {found}", "fix the .nemo's model_config.yaml"
        )
    durations = values[0]
    if not (
        isinstance(durations, list) and durations and all(isinstance(d, int) and d >= 0 for d in durations)
    ):
        raise ModelError(
            f"{source}: TDT durations {durations!r} are not a list of non-negative integers", _FIX
        )
    return durations


def encoder_config(enc: dict[str, Any], source: str) -> dict[str, Any]:
    """The HF ``encoder_config`` of a FastConformer ``encoder`` section (unsupported variants refused)."""
    _require(
        enc.get("subsampling", "dw_striding") == "dw_striding",
        source,
        f"encoder.subsampling {enc.get('subsampling')!r}",
    )
    _require(
        enc.get("self_attention_model", "rel_pos") == "rel_pos",
        source,
        f"encoder.self_attention_model {enc.get('self_attention_model')!r}",
    )
    _require(
        enc.get("conv_norm_type", "batch_norm") in NORM_TYPES,
        source,
        f"encoder.conv_norm_type {enc.get('conv_norm_type')!r}",
    )
    _require(not enc.get("causal_downsampling", False), source, "encoder.causal_downsampling true")
    _require(enc.get("untie_biases", True) is True, source, "encoder.untie_biases false")
    context = enc.get("att_context_size", [-1, -1])
    _require(
        context in ([-1, -1], None),
        source,
        f"encoder.att_context_size {context!r} (only full attention, [-1, -1])",
    )
    _require(enc.get("reduction") in (None, "null"), source, f"encoder.reduction {enc.get('reduction')!r}")
    _require(enc.get("feat_out", -1) in (-1, None), source, f"encoder.feat_out {enc.get('feat_out')!r}")
    hidden = enc.get("d_model")
    expansion = enc.get("ff_expansion_factor", 4)
    if not isinstance(hidden, int) or not isinstance(expansion, int):
        raise ModelError(
            f"{source}: encoder.d_model {hidden!r} or ff_expansion_factor {expansion!r} is not an integer",
            _FIX,
        )
    use_bias = enc.get("use_bias", True)
    out: dict[str, Any] = {
        "model_type": "parakeet_encoder",
        "hidden_size": hidden,
        "intermediate_size": hidden * expansion,
        "num_hidden_layers": enc.get("n_layers"),
        "num_attention_heads": enc.get("n_heads"),
        "num_key_value_heads": enc.get("n_heads"),
        "num_mel_bins": enc.get("feat_in"),
        "conv_kernel_size": enc.get("conv_kernel_size", 31),
        "subsampling_factor": enc.get("subsampling_factor", 4),
        "subsampling_conv_channels": enc.get("subsampling_conv_channels", -1),
        "subsampling_conv_kernel_size": 3,
        "subsampling_conv_stride": 2,
        "max_position_embeddings": enc.get("pos_emb_max_len", 5000),
        "scale_input": enc.get("xscaling", True),
        "attention_bias": use_bias,
        "convolution_bias": use_bias,
        "hidden_act": "silu",
    }
    if out["subsampling_conv_channels"] == -1:  # NeMo's "same as d_model"
        out["subsampling_conv_channels"] = hidden
    return out


def processor_config(pre: dict[str, Any], source: str) -> dict[str, Any]:
    """``processor_config.json`` of an ``AudioToMelSpectrogramPreprocessor`` section."""
    _require(
        pre.get("normalize", "per_feature") == "per_feature",
        source,
        f"preprocessor.normalize {pre.get('normalize')!r}",
    )
    _require(pre.get("window", "hann") == "hann", source, f"preprocessor.window {pre.get('window')!r}")
    _require(pre.get("log", True) is True, source, "preprocessor.log false")
    _require(
        pre.get("frame_splicing", 1) == 1,
        source,
        f"preprocessor.frame_splicing {pre.get('frame_splicing')!r}",
    )
    _require(pre.get("mag_power", 2.0) == 2.0, source, f"preprocessor.mag_power {pre.get('mag_power')!r}")
    _require(pre.get("lowfreq", 0) in (0, None), source, f"preprocessor.lowfreq {pre.get('lowfreq')!r}")
    _require(pre.get("highfreq") in (None, 8000), source, f"preprocessor.highfreq {pre.get('highfreq')!r}")
    rate = pre.get("sample_rate", 16000)
    window, stride = pre.get("window_size", 0.02), pre.get("window_stride", 0.01)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (rate, window, stride)):
        raise ModelError(
            f"{source}: preprocessor sample_rate/window_size/window_stride must be numbers", _FIX
        )
    features = {
        "feature_extractor_type": "ParakeetFeatureExtractor",
        "sampling_rate": rate,
        "feature_size": pre.get("features", 64),
        "n_fft": pre.get("n_fft", 512),
        "win_length": round(window * rate),
        "hop_length": round(stride * rate),
        "preemphasis": pre.get("preemph", pre.get("preemphasis", 0.97)),
        "padding_value": pre.get("pad_value", 0.0),
        "return_attention_mask": True,
        "padding_side": "right",
    }
    return {
        "feature_extractor": features,
        "blank_token": "<blank>",
        "decoder_type": "tdt",
        "processor_class": "ParakeetProcessor",
    }


def convert_config(raw: Any, source: str) -> NemoModelConfig:
    """The HF config (checked by ``parse_config``, as the engine will) and what the sidecars need."""
    if not isinstance(raw, dict):
        raise ModelError(f"{source} is not a NeMo model config (not a mapping)", _FIX)
    encoder = _section(raw, "encoder", source)
    decoder = _section(raw, "decoder", source)
    joint = _section(raw, "joint", source)
    durations = durations_of(raw, source)
    prednet = _subsection(decoder, "prednet")
    jointnet = _subsection(joint, "jointnet")
    pred_hidden = prednet.get("pred_hidden", 640)
    _require(
        jointnet.get("joint_hidden", pred_hidden) == pred_hidden,
        source,
        f"joint.jointnet.joint_hidden {jointnet.get('joint_hidden')!r} differing from pred_hidden {pred_hidden!r}",
    )
    _require(
        jointnet.get("activation", "relu") == "relu",
        source,
        f"joint.jointnet.activation {jointnet.get('activation')!r}",
    )
    _require(decoder.get("blank_as_pad", True) is True, source, "decoder.blank_as_pad false")
    extra = joint.get("num_extra_outputs", len(durations))
    _require(
        extra == len(durations), source, f"joint.num_extra_outputs {extra!r} with {len(durations)} durations"
    )
    labels = labels_of(raw)
    vocab = decoder.get("vocab_size", joint.get("num_classes"))
    if labels is not None and isinstance(vocab, int) and vocab != len(labels):
        raise ModelError(
            f"{source}: decoder.vocab_size {vocab} differs from the {len(labels)} labels",
            "fix the .nemo's model_config.yaml",
        )
    if labels is not None:
        vocab = len(labels)
    if not isinstance(vocab, int) or vocab <= 0:
        raise ModelError(
            f"{source} gives neither labels nor decoder.vocab_size",
            "the .nemo's model_config.yaml is incomplete",
        )
    pad = labels.index("<pad>") if labels is not None and "<pad>" in labels else vocab
    config = {
        "architectures": ["ParakeetForTDT"],
        "model_type": MODEL_TYPE,
        "vocab_size": vocab + 1,
        "blank_token_id": vocab,
        "pad_token_id": pad,
        "decoder_hidden_size": pred_hidden,
        "num_decoder_layers": prednet.get("pred_rnn_layers", 2),
        "durations": durations,
        "hidden_act": "relu",
        "max_symbols_per_step": 10,
        "is_encoder_decoder": True,
        "encoder_config": encoder_config(encoder, source),
    }
    pre = raw.get("preprocessor")
    processor = processor_config(pre, source) if isinstance(pre, dict) else None
    parse_config(config, processor, source, source)  # refuse now what the engine would refuse when loading
    model_path = _subsection(raw, "tokenizer").get("model_path")
    member = (
        model_path.split("nemo:", 1)[-1].rsplit("/", 1)[-1]
        if isinstance(model_path, str) and model_path
        else None
    )
    fused = encoder.get("conv_norm_type") == "fused_batch_norm"
    return NemoModelConfig(config, processor, labels, member, fused)


# Fields of config.json that decide the tensor shapes, the encoder's arithmetic and the decoding.
ARCHITECTURE_KEYS = (
    "vocab_size",
    "blank_token_id",
    "pad_token_id",
    "decoder_hidden_size",
    "num_decoder_layers",
    "durations",
)
ENCODER_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_mel_bins",
    "conv_kernel_size",
    "subsampling_factor",
    "subsampling_conv_channels",
    "attention_bias",
    "convolution_bias",
    "scale_input",
)


def config_differences(derived: dict[str, Any], stock: dict[str, Any]) -> list[str]:
    """What a stock config.json says differently from the .nemo's, e.g. ``encoder_config.hidden_size 1024 ≠ 512``."""
    parsed = parse_config(stock, None, "the sidecar config.json")
    have = {
        **{k: getattr(parsed, k) for k in ARCHITECTURE_KEYS},
        **{f"encoder_config.{k}": getattr(parsed.encoder, k) for k in ENCODER_KEYS},
    }
    mine = parse_config(derived, None, "the .nemo config")
    want = {
        **{k: getattr(mine, k) for k in ARCHITECTURE_KEYS},
        **{f"encoder_config.{k}": getattr(mine.encoder, k) for k in ENCODER_KEYS},
    }
    return [f"{k}: .nemo {want[k]!r}, sidecar {have[k]!r}" for k in want if want[k] != have[k]]


def feature_differences(derived: dict[str, Any] | None, stock: dict[str, Any] | None) -> list[str]:
    if derived is None:
        return []
    if stock is None:
        return ["the sidecars have no processor_config.json"]
    mine, theirs = derived["feature_extractor"], stock.get("feature_extractor", stock)
    return [
        f"feature_extractor.{k}: .nemo {mine.get(k)!r}, sidecar {theirs.get(k)!r}"
        for k in FEATURE_KEYS
        if mine.get(k) != theirs.get(k)
    ]
