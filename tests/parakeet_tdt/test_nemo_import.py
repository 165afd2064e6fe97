"""NeMo ``.nemo`` → dense Parakeet-TDT folder: a tiny .nemo made from the tiny_a fixture (nemo_package.py, no torch)
converts to the same tensors and tokenizer, transcribes token for token like tiny_a at every storage type the
family offers, and damaged, foreign or hostile archives give one clear error and leave nothing behind."""

from __future__ import annotations

import collections
import io
import json
import os
import pickle
import tarfile
import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from nemo_package import build_nemo, read_safetensors, sentencepiece_model
from parakeet_fixtures import CLIPS, audio_path, expected, model_dir

from inference.audio.io import load_audio_file
from inference.engine import load_engine
from inference.errors import ModelError
from inference.families.parakeet_tdt.checkpoint import expected_tensors
from inference.families.parakeet_tdt.config import parse_config
from inference.families.parakeet_tdt.nemo_import import PROVENANCE_FILE, convert_nemo, dense_name
from inference.families.parakeet_tdt.sentencepiece_model import parse_model, tokenizer_json
from inference.models.spec import load_family_spec
from inference.models.torch_zip import UnsafeCheckpointError

TINY = model_dir("tiny_a")
REPO = Path(__file__).resolve().parents[2]
STORAGE_TYPES = load_family_spec("parakeet_tdt", REPO / "model_specs").session_options["weight_type"].choices


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("nemo")
    source = build_nemo(TINY, work / "tiny_a.nemo")
    convert_nemo(source, work / "model", provenance={"source_file": source.name})
    return work / "model"


def nothing_left(out: Path) -> bool:
    return not out.exists() and not [p for p in out.parent.iterdir() if ".partial" in p.name]


@lru_cache(maxsize=64)
def decoded(model: Path, weight_type: str, clip: str) -> tuple[list[tuple[int, int, int]], str]:
    with load_engine(model, session_options={"weight_type": weight_type}, backend="cpu", threads=2) as engine:
        audio = load_audio_file(audio_path(clip))
        result = engine.decode(audio)
        tokens = [(t.token_id, t.frame, t.duration) for span in result.spans for t in span.tokens]
        return tokens, engine.transcribe(audio).text


def test_names_map_as_the_reference_converter_maps_them() -> None:
    assert dense_name("encoder.pre_encode.conv.0.weight") == "encoder.subsampling.layers.0.weight"
    assert dense_name("encoder.pre_encode.out.bias") == "encoder.subsampling.linear.bias"
    assert (
        dense_name("encoder.layers.3.conv.batch_norm.running_var") == "encoder.layers.3.conv.norm.running_var"
    )
    assert (
        dense_name("encoder.layers.0.self_attn.linear_out.weight")
        == "encoder.layers.0.self_attn.o_proj.weight"
    )
    assert (
        dense_name("encoder.layers.0.self_attn.linear_pos.weight")
        == "encoder.layers.0.self_attn.relative_k_proj.weight"
    )
    assert dense_name("encoder.layers.0.self_attn.pos_bias_u") == "encoder.layers.0.self_attn.bias_u"
    assert dense_name("decoder.prediction.dec_rnn.lstm.weight_hh_l1") == "decoder.lstm.weight_hh_l1"
    assert dense_name("joint.joint_net.2.weight") == "joint.head.weight"
    assert dense_name("joint.pred.bias") == "decoder.decoder_projector.bias"
    assert dense_name("joint.enc.weight") == "encoder_projector.weight"
    for dropped in (
        "preprocessor.featurizer.fb",
        "encoder.layers.1.conv.batch_norm.num_batches_tracked",
        "encoder.pos_enc.pe",
    ):
        assert dense_name(dropped) is None


@pytest.mark.parametrize("model", ["tiny_a", "tiny_b"])  # nmt_nfkc (a precompiled charsmap) and identity
def test_a_sentencepiece_model_converts_as_transformers_converted_the_fixture(model: str) -> None:
    reference = json.loads((model_dir(model) / "tokenizer.json").read_text())
    converted = tokenizer_json(
        parse_model(sentencepiece_model(reference), "tokenizer.model"), "tokenizer.model"
    )
    assert json.loads(converted) == reference


def test_the_import_holds_the_original_tensors_tokenizer_and_config(imported: Path) -> None:
    original = read_safetensors(TINY / "model.safetensors")
    converted = read_safetensors(imported / "model.safetensors")
    config = parse_config(json.loads((TINY / "config.json").read_text()), None, "tiny_a")
    assert converted.keys() == expected_tensors(config).keys()
    for name, tensor in converted.items():
        assert tensor.dtype == np.float32 and tensor.tobytes() == original[name].tobytes(), name
    assert json.loads((imported / "tokenizer.json").read_text()) == json.loads(
        (TINY / "tokenizer.json").read_text()
    )
    assert parse_config(json.loads((imported / "config.json").read_text()), None, "imported") == config
    processor = json.loads((imported / "processor_config.json").read_text())["feature_extractor"]
    reference = json.loads((TINY / "processor_config.json").read_text())["feature_extractor"]
    assert {k: processor[k] for k in reference if k in processor} == {
        k: reference[k] for k in processor if k in reference
    }
    record = json.loads((imported / PROVENANCE_FILE).read_text())
    assert record["source_file"] == "tiny_a.nemo" and record["sidecars"] == "the .nemo archive"


@pytest.mark.parametrize("clip", CLIPS)
def test_the_import_transcribes_the_clips_like_the_reference(imported: Path, clip: str) -> None:
    tokens, _ = decoded(imported, "native", clip)
    assert [t[0] for t in tokens] == expected("tiny_a")["clips"][clip]["token_ids"]
    assert decoded(imported, "native", clip) == decoded(TINY, "native", clip)


@pytest.mark.parametrize("weight_type", STORAGE_TYPES)
def test_the_import_transcribes_like_the_original_at_every_storage_type(
    imported: Path, weight_type: str
) -> None:
    for clip in ("short", "noisy"):
        assert decoded(imported, weight_type, clip) == decoded(TINY, weight_type, clip), (weight_type, clip)


def test_a_gzipped_archive_converts_too(tmp_path: Path, imported: Path) -> None:
    source = build_nemo(TINY, tmp_path / "gz.nemo", gzip=True)
    convert_nemo(source, tmp_path / "model")
    assert (tmp_path / "model" / "model.safetensors").read_bytes() == (
        imported / "model.safetensors"
    ).read_bytes()


def test_stock_sidecars_stand_in_for_a_missing_tokenizer_after_checking_them(
    tmp_path: Path, imported: Path
) -> None:
    source = build_nemo(TINY, tmp_path / "bare.nemo", with_tokenizer=False)
    with pytest.raises(ModelError, match="lacks a complete tokenizer") as caught:
        convert_nemo(source, tmp_path / "model")
    assert "--sidecars" in (caught.value.fix or "")
    assert nothing_left(tmp_path / "model")
    result = convert_nemo(source, tmp_path / "model", fallback_sidecars=lambda: (TINY, "the stock package"))
    assert result.sidecars == "the stock package"
    assert (tmp_path / "model" / "tokenizer.json").read_text() == (TINY / "tokenizer.json").read_text()
    assert (tmp_path / "model" / "model.safetensors").read_bytes() == (
        imported / "model.safetensors"
    ).read_bytes()


def _fuse_batch_norm(tensors: dict[str, np.ndarray]) -> None:
    """What NeMo's FusedBatchNorm1d stores: the eval BatchNorm as a per-channel scale (weight) and shift (bias)."""
    for key in [k for k in tensors if k.endswith(".conv.batch_norm.running_var")]:
        prefix = key.removesuffix("running_var")
        var = tensors.pop(prefix + "running_var").astype(np.float64)
        mean = tensors.pop(prefix + "running_mean").astype(np.float64)
        tensors.pop(prefix + "num_batches_tracked")
        scale = tensors[prefix + "weight"].astype(np.float64) / np.sqrt(var + 1e-5)
        tensors[prefix + "bias"] = (tensors[prefix + "bias"].astype(np.float64) - mean * scale).astype(
            np.float32
        )
        tensors[prefix + "weight"] = scale.astype(np.float32)


def test_a_fused_batch_norm_converts_and_transcribes_like_the_plain_one(tmp_path: Path) -> None:
    source = build_nemo(
        TINY,
        tmp_path / "fused.nemo",
        config_edit=_set("encoder.conv_norm_type", "fused_batch_norm"),
        tensors_edit=_fuse_batch_norm,
    )
    convert_nemo(source, tmp_path / "model")
    converted = read_safetensors(tmp_path / "model" / "model.safetensors")
    assert not converted["encoder.layers.1.conv.norm.running_mean"].any()
    assert (converted["encoder.layers.1.conv.norm.running_var"] == np.float32(1 - 1e-5)).all()
    for clip in CLIPS:
        assert decoded(tmp_path / "model", "native", clip) == decoded(TINY, "native", clip), clip


def test_a_fused_batch_norm_with_running_statistics_is_refused(tmp_path: Path) -> None:
    source = build_nemo(
        TINY, tmp_path / "mixed.nemo", config_edit=_set("encoder.conv_norm_type", "fused_batch_norm")
    )
    with pytest.raises(
        ModelError,
        match=r"'encoder\.layers\.\d\.conv\.batch_norm\.running_(mean|var)' is a BatchNorm statistic",
    ):
        convert_nemo(source, tmp_path / "model")
    assert nothing_left(tmp_path / "model")


def _other_vocabulary(folder: Path, tmp_path: Path) -> Path:
    sidecars = tmp_path / "sidecars"
    sidecars.mkdir()
    for name in ("config.json", "processor_config.json"):
        (sidecars / name).write_text((folder / name).read_text())
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    first, second = list(vocab)[10:12]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    (sidecars / "tokenizer.json").write_text(json.dumps(tokenizer))
    return sidecars


def _scaled(folder: Path, tmp_path: Path) -> Path:
    """Sidecars whose config multiplies the subsampling output by sqrt(hidden) (NeMo's xscaling)."""
    sidecars = tmp_path / "scaled"
    sidecars.mkdir()
    for name in ("tokenizer.json", "processor_config.json"):
        (sidecars / name).write_text((folder / name).read_text())
    config = json.loads((folder / "config.json").read_text())
    config["encoder_config"]["scale_input"] = True
    (sidecars / "config.json").write_text(json.dumps(config))
    return sidecars


def _other_features(folder: Path, tmp_path: Path) -> Path:
    sidecars = tmp_path / "features"
    sidecars.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (sidecars / name).write_text((folder / name).read_text())
    processor = json.loads((folder / "processor_config.json").read_text())
    processor["feature_extractor"]["hop_length"] = 128
    (sidecars / "processor_config.json").write_text(json.dumps(processor))
    return sidecars


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: model_dir("tiny_b"), r"encoder_config\.hidden_size: \.nemo 64, sidecar"),
        (lambda tmp: _other_vocabulary(TINY, tmp), r"vocabulary: piece 10 is"),
        (lambda tmp: _other_features(TINY, tmp), r"feature_extractor\.hop_length: \.nemo 160, sidecar 128"),
        (lambda tmp: _scaled(TINY, tmp), r"encoder_config\.scale_input: \.nemo False, sidecar True"),
    ],
)
def test_sidecars_that_do_not_belong_are_refused_naming_the_difference(
    tmp_path: Path, make, message: str
) -> None:
    source = build_nemo(TINY, tmp_path / "bare.nemo", with_tokenizer=False)
    with pytest.raises(ModelError, match=message):
        convert_nemo(source, tmp_path / "model", sidecars=make(tmp_path))
    assert nothing_left(tmp_path / "model")


def _set(path: str, value: object):  # type: ignore[no-untyped-def]
    def edit(config: dict) -> None:
        *parents, key = path.split(".")
        for parent in parents:
            config = config[parent]
        config[key] = value

    return edit


@pytest.mark.parametrize(
    ("config_edit", "tensors_edit", "message"),
    [
        (_set("encoder.subsampling", "striding"), None, r"encoder\.subsampling 'striding' is not supported"),
        (_set("encoder.att_context_size", [70, 13]), None, r"att_context_size \[70, 13\]"),
        (_set("encoder.self_attention_model", "abs_pos"), None, r"self_attention_model 'abs_pos'"),
        (_set("preprocessor.normalize", "all_features"), None, r"preprocessor\.normalize 'all_features'"),
        (_set("decoding.durations", [0, 1, 2]), None, r"TDT durations disagree"),
        (_set("joint.jointnet.joint_hidden", 48), None, r"joint_hidden 48"),
        (
            _set("encoder.d_model", 96),
            None,
            r"has shape \[[\d, ]*64[\d, ]*\], the config implies \[[\d, ]*96",
        ),
        (
            None,
            lambda t: t.pop("joint.joint_net.2.bias"),
            r"lacks 1 tensor\(s\) the engine needs, e\.g\. 'joint\.head\.bias'",
        ),
        (
            None,
            lambda t: t.__setitem__("encoder.layers.0.extra.weight", np.zeros(2, np.float32)),
            r"'encoder\.layers\.0\.extra\.weight' .* is not part of a Parakeet-TDT model",
        ),
        (
            None,
            lambda t: t.__setitem__("joint.enc.weight", np.zeros((32, 65), np.float32)),
            r"'joint\.enc\.weight' has shape \[32, 65\], the config implies \[32, 64\]",
        ),
    ],
)
def test_a_wrong_architecture_is_refused_naming_what_differs(
    tmp_path: Path, config_edit, tensors_edit, message: str
) -> None:
    source = build_nemo(TINY, tmp_path / "wrong.nemo", config_edit=config_edit, tensors_edit=tensors_edit)
    with pytest.raises(ModelError, match=message):
        convert_nemo(source, tmp_path / "model")
    assert nothing_left(tmp_path / "model")


def test_an_rnnt_or_ctc_nemo_is_refused(tmp_path: Path) -> None:
    def strip(config: dict) -> None:
        config.pop("model_defaults")
        config["decoding"].pop("durations")

    source = build_nemo(TINY, tmp_path / "rnnt.nemo", config_edit=strip)
    with pytest.raises(ModelError, match="names no TDT durations"):
        convert_nemo(source, tmp_path / "model")


@pytest.mark.parametrize("damage", ["random bytes", "truncated", "truncated gzip", "no weights"])
def test_corrupt_and_truncated_archives_are_refused_and_leave_nothing(tmp_path: Path, damage: str) -> None:
    good = build_nemo(TINY, tmp_path / "good.nemo", gzip=damage == "truncated gzip").read_bytes()
    source = tmp_path / "bad.nemo"
    if damage == "random bytes":
        source.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    elif damage.startswith("truncated"):
        source.write_bytes(good[: len(good) // 2])
    else:
        with tarfile.open(source, "w") as tar:
            data = b"encoder: {}\n"
            info = tarfile.TarInfo("./model_config.yaml")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(
        ModelError, match=r"damaged or truncated|has no model_weights\.ckpt|truncated inside"
    ) as caught:
        convert_nemo(source, tmp_path / "model")
    assert "again" in (caught.value.fix or "") or "check" in (caught.value.fix or "")
    assert nothing_left(tmp_path / "model")


class _RunsShell:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_nemo_whose_weights_would_run_code_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    source = build_nemo(TINY, tmp_path / "hostile.nemo")
    payload = pickle.dumps(collections.OrderedDict([("joint.enc.weight", _RunsShell(marker))]), protocol=2)
    weights = io.BytesIO()
    with zipfile.ZipFile(weights, "w") as archive:
        archive.writestr("model_weights/data.pkl", payload)
        archive.writestr("model_weights/byteorder", "little")
    members = {}
    with tarfile.open(source) as tar:
        for member in tar.getmembers():
            stream = tar.extractfile(member)
            assert stream is not None
            members[member.name] = (
                weights.getvalue() if member.name.endswith("model_weights.ckpt") else stream.read()
            )
    with tarfile.open(source, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(UnsafeCheckpointError, match=r"(posix|os)\.system"):
        convert_nemo(source, tmp_path / "model")
    assert not marker.exists()
    assert nothing_left(tmp_path / "model")
