"""Config / checkpoint loading: legacy and HF layouts, audio.cpp GGUF packages, clear errors."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import gguf
import numpy as np
import pytest
from audiocpp_packages import safetensors_f32, write_audiocpp_package
from r2t2_fixtures import HF_CHECKPOINT, LEGACY_CHECKPOINT, checkpoint_variant, load_expected_meta
from thinker_checkpoints import write_safetensors

from inference.errors import ModelError
from inference.families.confucius4_r2t2.checkpoint import (
    LM_HEAD,
    canonical_tensor_name,
    expected_tensor_shapes,
    lm_head_name,
    load_checkpoint,
)
from inference.families.confucius4_r2t2.config import HF, LEGACY
from inference.families.confucius4_r2t2.thinker_gguf import ThinkerCheckpoint


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def _copy(source: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(source, tmp_path / source.name))


def test_both_layouts_describe_the_same_model():
    hf, legacy = load_checkpoint(HF_CHECKPOINT), load_checkpoint(LEGACY_CHECKPOINT)
    meta = load_expected_meta()
    assert (hf.layout, legacy.layout) == (HF, LEGACY)
    assert (hf.config.audio.n_window_infer, legacy.config.audio.n_window_infer) == (800, 400)
    # Only the (unused) M-RoPE sections differ: the legacy config states them, HF drops them.
    assert dataclasses.replace(hf.config.text, mrope_section=(4, 2, 2)) == legacy.config.text
    for cfg in (hf.config, legacy.config):
        assert (cfg.audio.d_model, cfg.audio.encoder_layers, cfg.audio.encoder_attention_heads) == (64, 2, 4)
        assert (cfg.audio.downsample_hidden_size, cfg.audio.output_dim, cfg.audio.max_source_positions) == (
            32,
            64,
            1500,
        )
        assert (cfg.text.num_attention_heads, cfg.text.num_key_value_heads, cfg.text.head_dim) == (4, 2, 16)
        assert cfg.text.rope_theta == 1e6 and cfg.tie_word_embeddings
        assert cfg.output_size == cfg.text.vocab_size == meta["vocab_size"]
    assert hf.special == legacy.special
    ids = meta["token_ids"]
    assert hf.special.audio == ids["<|audio_pad|>"]
    assert (hf.special.audio_start, hf.special.audio_end) == (ids["<|audio_start|>"], ids["<|audio_end|>"])
    assert set(hf.special.eos) == set(meta["eos_token_ids"])
    assert legacy.config.support_languages == ("Chinese", "English", "Cantonese", "German", "French")
    assert hf.config.support_languages is None
    assert set(hf.files.tensors) == set(legacy.files.tensors) == set(expected_tensor_shapes(hf.config))
    assert {t.dtype for t in hf.files.tensors.values()} == {"F32"}
    assert {t.dtype for t in legacy.files.tensors.values()} == {"BF16"}
    assert LM_HEAD not in hf.files.tensors


def test_legacy_bf16_values_equal_hf_f32_values():
    hf = {
        canonical_tensor_name(k): v for k, v in safetensors_f32(HF_CHECKPOINT / "model.safetensors").items()
    }
    legacy = safetensors_f32(LEGACY_CHECKPOINT / "model.safetensors")
    assert hf.keys() == legacy.keys()
    for name, value in hf.items():
        np.testing.assert_array_equal(value, legacy[name], err_msg=name)


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("model.audio_tower.conv2d1.weight", "thinker.audio_tower.conv2d1.weight"),
        ("model.multi_modal_projector.linear_1.bias", "thinker.audio_tower.proj1.bias"),
        ("model.multi_modal_projector.linear_2.weight", "thinker.audio_tower.proj2.weight"),
        ("model.language_model.layers.3.mlp.up_proj.weight", "thinker.model.layers.3.mlp.up_proj.weight"),
        ("lm_head.weight", "thinker.lm_head.weight"),
        ("thinker.model.norm.weight", "thinker.model.norm.weight"),
    ],
)
def test_canonical_names(name, canonical):
    assert canonical_tensor_name(name) == canonical


@pytest.mark.parametrize("source", [HF_CHECKPOINT, LEGACY_CHECKPOINT], ids=["hf", "legacy"])
@pytest.mark.parametrize("window", [400, 800])
def test_n_window_infer_variants(tmp_path, source, window):
    variant = checkpoint_variant(source, tmp_path / "variant", window)
    assert load_checkpoint(variant).config.audio.n_window_infer == window


def _audio_config(data: dict) -> dict:
    return data["thinker_config"]["audio_config"] if "thinker_config" in data else data["audio_config"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: _audio_config(d).pop("d_model"), "d_model"),
        (lambda d: _audio_config(d).update(activation_function="relu"), "gelu"),
        (lambda d: _audio_config(d).update(n_window=25), "n_window"),
        (lambda d: _audio_config(d).update(n_window_infer=450), "n_window_infer"),
        (lambda d: _audio_config(d).update(encoder_layers=3), "lacks tensors"),
        (lambda d: _audio_config(d).update(encoder_ffn_dim=96), "shape"),
        (lambda d: d["thinker_config"].pop("audio_token_id"), "audio_token_id"),
        (lambda d: d["thinker_config"].update(audio_token_id=5), "audio_pad"),
        (lambda d: d["thinker_config"]["text_config"].update(hidden_act="gelu"), "silu"),
        (lambda d: d["thinker_config"].pop("text_config"), "text_config"),
    ],
)
def test_config_errors(tmp_path, edit, message):
    model = _copy(LEGACY_CHECKPOINT, tmp_path)
    _edit_json(model / "config.json", edit)
    with pytest.raises(ModelError, match=message):
        load_checkpoint(model)


def test_missing_lm_head_means_tied_embeddings_for_every_reader(tmp_path):
    """One rule (docs/families/confucius4_r2t2.md §1): no LM head in the checkpoint → the embedding is the head, even when the
    config says untied; the engine's checkpoint and the thinker converter agree."""
    model = _copy(LEGACY_CHECKPOINT, tmp_path)
    _edit_json(model / "config.json", lambda d: d.update(tie_word_embeddings=False))
    checkpoint = load_checkpoint(model)
    assert not checkpoint.config.tie_word_embeddings and LM_HEAD not in checkpoint.files.tensors
    assert lm_head_name(checkpoint.files, checkpoint.config) is None
    with ThinkerCheckpoint(model) as thinker:
        assert thinker.tied and thinker.head_name is None
        assert "output.weight" not in dict(thinker.thinker_tensors())


def test_untied_lm_head_is_used_and_checked(tmp_path):
    model = _copy(HF_CHECKPOINT, tmp_path)
    _edit_json(model / "config.json", lambda d: d.update(tie_word_embeddings=False))
    tensors = safetensors_f32(model / "model.safetensors")
    embed = tensors["model.language_model.embed_tokens.weight"]
    write_safetensors(model / "model.safetensors", tensors | {"lm_head.weight": embed[:, :-1]})
    with pytest.raises(ModelError, match="lm_head.weight has shape"):
        load_checkpoint(model)
    with pytest.raises(ModelError, match="lm_head.weight has shape"):
        ThinkerCheckpoint(model)
    write_safetensors(model / "model.safetensors", tensors | {"lm_head.weight": embed * 2})
    checkpoint = load_checkpoint(model)
    assert lm_head_name(checkpoint.files, checkpoint.config) == LM_HEAD
    with ThinkerCheckpoint(model) as thinker:
        assert (thinker.tied, thinker.head_name) == (False, LM_HEAD)
        assert dict(thinker.thinker_tensors())["output.weight"] == LM_HEAD


def test_feature_size_must_equal_mel_bins(tmp_path):
    model = _copy(LEGACY_CHECKPOINT, tmp_path)
    _edit_json(model / "preprocessor_config.json", lambda d: d.update(feature_size=80))
    with pytest.raises(ModelError, match="feature_size 80"):
        load_checkpoint(model)
    model = _copy(HF_CHECKPOINT, tmp_path)
    _edit_json(model / "processor_config.json", lambda d: d["feature_extractor"].update(feature_size=80))
    with pytest.raises(ModelError, match="feature_size 80"):
        load_checkpoint(model)


def test_missing_files_are_named(tmp_path):
    model = _copy(LEGACY_CHECKPOINT, tmp_path)
    (model / "generation_config.json").unlink()
    with pytest.raises(ModelError, match="generation_config.json"):
        load_checkpoint(model)
    model = _copy(HF_CHECKPOINT, tmp_path / "b")
    (model / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="no tokenizer"):
        load_checkpoint(model)
    model = _copy(HF_CHECKPOINT, tmp_path / "c")
    (model / "model.safetensors").unlink()
    with pytest.raises(ModelError, match="weights"):
        load_checkpoint(model)


def test_missing_eos_is_reported(tmp_path):
    model = _copy(HF_CHECKPOINT, tmp_path)
    _edit_json(model / "generation_config.json", lambda d: d.pop("eos_token_id"))
    with pytest.raises(ModelError, match="eos_token_id"):
        load_checkpoint(model)


def test_added_tokens_json_fallback(tmp_path):
    model = _copy(LEGACY_CHECKPOINT, tmp_path)
    meta = load_expected_meta()
    _edit_json(model / "tokenizer_config.json", lambda d: d.pop("added_tokens_decoder"))
    (model / "added_tokens.json").write_text(json.dumps(meta["token_ids"]), encoding="utf-8")
    checkpoint = load_checkpoint(model)
    tag = meta["token_ids"]["<asr_text>"]
    assert tag not in checkpoint.tokenizer.special_ids
    assert meta["token_ids"]["<|im_end|>"] in checkpoint.tokenizer.special_ids


# --------------------------------------------------------------------------------- audio.cpp GGUF package


@pytest.mark.parametrize("source", [LEGACY_CHECKPOINT, HF_CHECKPOINT], ids=["legacy", "hf"])
def test_audiocpp_gguf_package_loads(tmp_path, source):
    package = tmp_path / "r2t2-f32.gguf"
    write_audiocpp_package(package, source)
    loaded = load_checkpoint(package)
    directory = load_checkpoint(source)
    assert loaded.files.kind == "gguf"
    assert loaded.config == directory.config
    assert loaded.special == directory.special
    assert set(loaded.files.tensors) == set(directory.files.tensors)
    for name, info in loaded.files.tensors.items():
        assert info.shape == directory.files.tensors[name].shape
        assert info.dtype == "F32"
    assert any(info.stored_name.startswith("_audiocpp.") for info in loaded.files.tensors.values())
    assert loaded.tokenizer.encode("language English<asr_text>hi") == directory.tokenizer.encode(
        "language English<asr_text>hi"
    )


def test_directory_prefers_gguf_over_safetensors(tmp_path):
    model = _copy(LEGACY_CHECKPOINT, tmp_path)
    write_audiocpp_package(model / "r2t2-f32.gguf", LEGACY_CHECKPOINT)
    assert load_checkpoint(model).files.kind == "gguf"


def test_gguf_with_unsafe_embedded_path_is_rejected(tmp_path):
    package = tmp_path / "bad.gguf"
    write_audiocpp_package(package, LEGACY_CHECKPOINT, embed={"../config.json": b"{}"})
    with pytest.raises(ModelError, match="unsafe path"):
        load_checkpoint(package)


def test_gguf_with_string_array_contents_loads(tmp_path):
    package = tmp_path / "old-layout.gguf"
    write_audiocpp_package(package, HF_CHECKPOINT, string_contents=True)
    loaded = load_checkpoint(package)
    assert loaded.files.read("tokenizer.json") == (HF_CHECKPOINT / "tokenizer.json").read_bytes()
    assert loaded.config == load_checkpoint(HF_CHECKPOINT).config


def test_truncated_gguf_is_reported(tmp_path):
    package = tmp_path / "cut.gguf"
    write_audiocpp_package(package, HF_CHECKPOINT)
    data = package.read_bytes()
    package.write_bytes(data[: len(data) - 1000])
    with pytest.raises(ModelError, match="past the end"):
        load_checkpoint(package)
    package.write_bytes(b"GGUF" + data[4:200])
    with pytest.raises(ModelError, match="not a valid GGUF"):
        load_checkpoint(package)


def test_non_audiocpp_gguf_is_rejected(tmp_path):
    package = tmp_path / "llama.gguf"
    writer = gguf.GGUFWriter(str(package), "qwen3")
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelError, match="audiocpp"):
        load_checkpoint(package)
