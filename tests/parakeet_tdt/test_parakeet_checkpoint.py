"""Loading tiny HF checkpoints and audio.cpp GGUF packages, and the errors for everything else."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from gguf_package import write_audiocpp_gguf
from parakeet_fixtures import model_dir
from safetensors.numpy import load_file, save_file

from inference.errors import ModelError
from inference.families.parakeet_tdt.checkpoint import expected_tensors, open_parakeet_checkpoint


def test_hf_folder_loads_typed_config() -> None:
    with open_parakeet_checkpoint(model_dir("tiny_a")) as ckpt:
        cfg = ckpt.config
        assert (cfg.encoder.hidden_size, cfg.encoder.num_attention_heads, cfg.encoder.num_hidden_layers) == (
            64,
            4,
            2,
        )
        assert (
            cfg.encoder.conv_kernel_size == 9
            and not cfg.encoder.scale_input
            and not cfg.encoder.attention_bias
        )
        assert cfg.blank_token_id == cfg.vocab_size - 1 and cfg.pad_token_id == 2
        assert cfg.durations == (0, 1, 2, 3, 4) and cfg.samples_per_frame == 1280
        assert cfg.features.feature_size == 128 and cfg.features.preemphasis == pytest.approx(0.97)
        assert ckpt.format == "safetensors" and '"Metaspace"' in ckpt.tokenizer_json
        assert ckpt.tensors.shape("joint.head.weight") == (cfg.vocab_size + 5, 32)
    with open_parakeet_checkpoint(model_dir("tiny_b") / "config.json") as ckpt:
        enc = ckpt.config.encoder
        assert (enc.hidden_size, enc.num_attention_heads, enc.num_hidden_layers, enc.conv_kernel_size) == (
            48,
            6,
            3,
            5,
        )
        assert enc.scale_input and enc.attention_bias and enc.convolution_bias


def _copy(tmp_path: Path, name: str = "tiny_a") -> Path:
    dst = tmp_path / name
    shutil.copytree(model_dir(name), dst)
    return dst


def _edit_config(folder: Path, **changes) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    for key, value in changes.items():
        if key.startswith("encoder_"):
            cfg["encoder_config"][key.removeprefix("encoder_")] = value
        else:
            cfg[key] = value
    (folder / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model_type": "parakeet_ctc"}, "model_type is 'parakeet_ctc'"),
        ({"num_decoder_layers": 1}, "num_decoder_layers is 1"),
        ({"encoder_subsampling_factor": 4}, "subsampling_factor 4"),
        ({"encoder_batch_norm_variance_floor": 0.0}, "old Phonon"),
    ],
)
def test_bad_config_names_the_file(tmp_path: Path, changes: dict, message: str) -> None:
    folder = _copy(tmp_path)
    _edit_config(folder, **changes)
    with pytest.raises(ModelError, match=message) as err:
        open_parakeet_checkpoint(folder)
    assert str(folder / "config.json") in err.value.message and err.value.fix


def test_missing_tensor_and_files(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    tensors = load_file(str(folder / "model.safetensors"))
    del tensors["encoder.layers.1.self_attn.bias_v"]
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(
        ModelError, match=r"model.safetensors has no tensor 'encoder.layers.1.self_attn.bias_v'"
    ):
        open_parakeet_checkpoint(folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(ModelError, match="has no model.safetensors"):
        open_parakeet_checkpoint(folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="has no tokenizer.json"):
        open_parakeet_checkpoint(folder)


def test_nemo_archive_is_rejected(tmp_path: Path) -> None:
    archive = tmp_path / "parakeet-tdt-0.6b-v3.nemo"
    with tarfile.open(archive, "w") as tar:
        tar.add(model_dir("tiny_a") / "config.json", arcname="model_config.yaml")
    with pytest.raises(ModelError, match="NeMo archive") as err:
        open_parakeet_checkpoint(archive)
    assert "model.safetensors" in err.value.fix
    folder = tmp_path / "only_nemo"
    folder.mkdir()
    shutil.copy(archive, folder)
    with pytest.raises(ModelError, match="NeMo archive"):
        open_parakeet_checkpoint(folder)


@pytest.mark.parametrize("legacy", [False, True])
def test_audiocpp_gguf_package_loads_same_model(tmp_path: Path, legacy: bool) -> None:
    package = tmp_path / "parakeet.gguf"
    physical = write_audiocpp_gguf(model_dir("tiny_b"), package, legacy_sidecars=legacy)
    assert any(name.startswith("_audiocpp.") for name in physical)  # lookups must go through tensor_names
    with open_parakeet_checkpoint(model_dir("tiny_b")) as hf, open_parakeet_checkpoint(package) as gg:
        assert gg.format == "gguf" and gg.config == hf.config
        assert gg.tokenizer_json == hf.tokenizer_json
        for name in expected_tensors(hf.config):
            assert gg.tensors.shape(name) == hf.tensors.shape(name), name
            np.testing.assert_array_equal(gg.tensors.numpy(name), hf.tensors.numpy(name))


def test_gguf_without_sidecars_is_rejected(tmp_path: Path) -> None:
    import gguf

    path = tmp_path / "llama.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("w", np.zeros((2, 2), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelError, match="no embedded config.json"):
        open_parakeet_checkpoint(path)
