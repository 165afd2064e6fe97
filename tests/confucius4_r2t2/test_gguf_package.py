"""audio.cpp GGUF packages end to end: thinker GGUF written without dequantising, engine parity, fast metadata."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import gguf
import numpy as np
import pytest
from audiocpp_packages import quantized_layout, safetensors_f32, stored_values, write_audiocpp_package
from r2t2_fixtures import HF_CHECKPOINT, load_expected_arrays
from test_engine import MARGIN_GATE, case_input, expected_output, offline_cases
from thinker_checkpoints import write_safetensors

from inference.engine import EngineRequest
from inference.errors import UsageError
from inference.families.confucius4_r2t2 import thinker_gguf as tg
from inference.families.confucius4_r2t2.checkpoint import load_checkpoint
from inference.families.confucius4_r2t2.engine import R2T2Engine, create_engine
from inference.families.confucius4_r2t2.frontend import log_mel
from inference.native.gguf_file import GgufFile

FAMILY = "confucius4_r2t2"


def _engine(path: Path, **options: str) -> R2T2Engine:
    return create_engine(EngineRequest(path, FAMILY, options, "cpu", 2))


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The HF fixture (window 800) as q8_0 and f16 packages in one folder, as a user would keep them."""
    folder = tmp_path_factory.mktemp("packages")
    made = {}
    for kind in ("q8_0", "f16"):
        made[kind] = folder / f"r2t2-{kind}.gguf"
        write_audiocpp_package(made[kind], HF_CHECKPOINT, types=quantized_layout(kind))
    return made


def _tensor(path: Path, name: str) -> tuple[str, np.ndarray]:
    with GgufFile(path) as file:
        tensor = next(t for t in file.tensors if t.name == name)
        return tensor.type_name, file.raw(tensor).copy()


def test_native_thinker_copies_quantized_blocks_byte_for_byte(packages: dict[str, Path]) -> None:
    package = packages["q8_0"]
    checkpoint = tg.ThinkerCheckpoint(package)
    assert checkpoint.native_storage_type() == "q8_0" and checkpoint.tied
    converted = tg.ensure_thinker_gguf(checkpoint, "native")
    assert converted == package.parent / ".captioneer" / "r2t2-q8_0.thinker-q8_0.gguf"
    files = load_checkpoint(package).files
    with GgufFile(converted) as out:
        types = {t.name: t.type_name for t in out.tensors}
        fields = out.fields
        shapes = {t.name: t.shape for t in out.tensors}
    assert types["token_embd.weight"] == "F16"  # the tied f16 embedding serves as the output head too
    assert "output.weight" not in types
    assert {types[f"blk.{i}.{part}.weight"] for i in (0, 1) for part in ("attn_q", "attn_k", "ffn_down")} == {
        "Q8_0"
    }
    assert types["blk.0.attn_norm.weight"] == types["output_norm.weight"] == "F32"
    assert (
        fields["general.architecture"] == "qwen3"
        and fields["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q8_0
    )
    pairs = [
        ("blk.1.ffn_down.weight", "thinker.model.layers.1.mlp.down_proj.weight"),
        ("blk.0.attn_q.weight", "thinker.model.layers.0.self_attn.q_proj.weight"),
        ("token_embd.weight", "thinker.model.embed_tokens.weight"),
    ]
    for ll_name, canonical in pairs:
        stored = files.tensors[canonical]
        assert shapes[ll_name] == stored.shape  # numpy order on both sides (ne reversed in the files)
        assert _tensor(converted, ll_name)[1].tobytes() == _tensor(package, stored.stored_name)[1].tobytes()
    # Tokenizer metadata from the embedded files equals the one written from the directory.
    assert tg.read_vocabulary(checkpoint.read_file, checkpoint.hparams.vocab_size) == tg.read_vocabulary(
        HF_CHECKPOINT, checkpoint.hparams.vocab_size
    )
    assert tg.ensure_thinker_gguf(tg.ThinkerCheckpoint(package), "q8_0") == converted  # its own type: a copy


def test_float_types_from_a_quantized_package_are_dequantized(
    packages: dict[str, Path], tmp_path: Path
) -> None:
    checkpoint = tg.ThinkerCheckpoint(packages["q8_0"])
    converted = tg.ensure_thinker_gguf(checkpoint, "f32", cache_dir=tmp_path)
    kind, raw = _tensor(converted, "blk.0.ffn_up.weight")
    assert kind == "F32"
    original = safetensors_f32(HF_CHECKPOINT / "model.safetensors")[
        "model.language_model.layers.0.mlp.up_proj.weight"
    ]
    np.testing.assert_array_equal(
        raw.view(np.float32).reshape(original.shape), stored_values(original, "q8_0")
    )
    rows = checkpoint.embedding_rows(np.array([3, 300]))
    embed = safetensors_f32(HF_CHECKPOINT / "model.safetensors")["model.language_model.embed_tokens.weight"]
    np.testing.assert_array_equal(rows, embed[[3, 300]].astype(np.float16).astype(np.float32))


def _rounded_checkpoint(destination: Path, kind: str) -> Path:
    """The HF fixture with every value rounded the way ``quantized_layout(kind)`` stores it, kept as f32."""
    shutil.copytree(HF_CHECKPOINT, destination)
    rule = quantized_layout(kind)
    tensors = {
        name: stored_values(value, rule(name, value))
        for name, value in safetensors_f32(HF_CHECKPOINT / "model.safetensors").items()
    }
    write_safetensors(destination / "model.safetensors", tensors)
    return destination


def test_f16_package_equals_the_safetensors_checkpoint_stored_the_same_way(packages, tmp_path: Path) -> None:
    """Same values, same storage (tower and thinker matrices f16): identical tower output and greedy ids."""
    rounded = _rounded_checkpoint(tmp_path / "rounded", "f16")
    with (
        _engine(packages["f16"], tower_weight_type="native") as package,  # as stored (not a CPU default)
        _engine(rounded, tower_weight_type="f16", thinker_weight_type="f16") as directory,
    ):
        assert package.thinker.storage_type == directory.thinker.storage_type == "f16"
        assert set(package.tower.stored_types()) == set(directory.tower.stored_types()) == {"f32", "f16"}
        for case in offline_cases(800):
            samples, options = case_input(case)
            assert (
                package.transcribe(samples, max_tokens=20, **options).token_ids
                == directory.transcribe(samples, max_tokens=20, **options).token_ids
            ), case
        samples, _ = case_input("clip_a/w800/auto")
        features = log_mel(samples, 128)
        valid = features.values[:, : features.valid_frames]
        np.testing.assert_array_equal(package.tower.encode(valid), directory.tower.encode(valid))


@pytest.mark.parametrize("tower", ["native", "bf16"])
def test_q8_0_package_agrees_with_the_reference_while_margins_are_clear(
    packages: dict[str, Path], tower: str
) -> None:
    """As stored, and with the bf16 tower a CPU with AVX512-BF16 takes by default (q8_0 values as bf16)."""
    with _engine(packages["q8_0"], tower_weight_type=tower) as engine:
        assert engine.thinker.storage_type == "q8_0"
        assert set(engine.tower.stored_types()) == {"f32", "q8_0" if tower == "native" else "bf16"}
        for case in offline_cases(800):
            samples, options = case_input(case)
            got = engine.transcribe(samples, max_tokens=20, **options)
            ids, text = expected_output(case)
            margins = load_expected_arrays()[f"case/{case}/margins"]
            clear = next((i for i, m in enumerate(margins) if m < MARGIN_GATE), len(margins))
            assert got.token_ids[:clear] == ids[:clear], case
            if clear == len(margins):
                assert got.text == text, case


def test_tower_weight_type_option(packages: dict[str, Path]) -> None:
    with _engine(packages["q8_0"], tower_weight_type="f32", thinker_weight_type="f16") as engine:
        assert set(engine.tower.stored_types()) == {"f32"}  # q8_0 blocks dequantized for the tower
        assert engine.thinker.storage_type == "f16"
    with pytest.raises(UsageError, match="tower_weight_type"):
        _engine(packages["q8_0"], tower_weight_type="q5_1")


def test_large_embedded_files_are_read_quickly(tmp_path: Path) -> None:
    """A real tokenizer.json is ~11 MB; gguf.GGUFReader needs ~8 s per MB for it (one object per byte)."""
    blob = np.random.default_rng(0).integers(0, 256, 1 << 20, dtype=np.uint8).tobytes()
    files = {
        p.name: p.read_bytes() for p in HF_CHECKPOINT.iterdir() if p.is_file() and p.suffix != ".safetensors"
    }
    package = tmp_path / "big.gguf"
    write_audiocpp_package(package, HF_CHECKPOINT, embed={**files, "blob.bin": blob})
    started = time.perf_counter()
    loaded = load_checkpoint(package)
    elapsed = time.perf_counter() - started
    assert loaded.files.read("blob.bin") == blob
    assert loaded.files.read("tokenizer.json") == files["tokenizer.json"]
    assert elapsed < 2.0, f"loading took {elapsed:.1f} s"


@pytest.mark.parametrize("kind", ["Q8_0", "Q2_K", "Q4_K", "Q6_K"])
def test_quantized_embedding_rows_match_ggml(tmp_path: Path, kind: str) -> None:
    """Input rows of a quantized embedding (the community Q4_K_M package) dequantize as ggml does."""
    from inference.native import GgmlType, load_api
    from inference.native.quant import dequantize, quantize

    api = load_api()
    values = np.random.default_rng(1).standard_normal((6, 512)).astype(np.float32)
    blob = quantize(api, values, GgmlType[kind])
    path = tmp_path / "blocks.bin"
    path.write_bytes(b"\0" * 32 + blob.tobytes())
    weights = tg.MappedTensors()
    weights.tensors["embed"] = tg._StoredTensor(path, kind, values.shape, 32, 32 + blob.nbytes)
    assert weights.raw("embed").shape == (6, blob.shape[1])
    rows = weights.f32("embed", np.array([4, 1]))
    np.testing.assert_array_equal(rows, dequantize(api, blob, GgmlType[kind], values.shape)[[4, 1]])
    assert np.abs(rows - values[[4, 1]]).max() < 1.0  # really the values, coarsely
