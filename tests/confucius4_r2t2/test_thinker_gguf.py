"""Thinker checkpoint → llama.cpp GGUF conversion: hparams, tokenizer metadata, storage types, cache."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest
import thinker_checkpoints as tc  # on sys.path via this folder's conftest

from inference.errors import ModelError, UsageError
from inference.families.confucius4_r2t2 import thinker_gguf as tg

ref = tc.ref
CFG = ref.TinyQwen3(vocab_size=272, rope_theta=1_000_000.0)


def reader_fields(path: Path) -> tuple[gguf.GGUFReader, dict[str, object]]:
    reader = gguf.GGUFReader(str(path))
    return reader, {name: field.contents() for name, field in reader.fields.items()}


def tensor_types(reader: gguf.GGUFReader) -> dict[str, str]:
    return {t.name: t.tensor_type.name for t in reader.tensors}


@pytest.fixture
def legacy_dir(tmp_path: Path) -> Path:
    return tc.write_checkpoint(tmp_path / "legacy", CFG, ref.random_weights(CFG, seed=3), "legacy")


def test_legacy_layout_hparams_tokenizer_and_tied_head(legacy_dir: Path, tmp_path: Path) -> None:
    checkpoint = tg.ThinkerCheckpoint(legacy_dir)
    assert (checkpoint.layout, checkpoint.tied, checkpoint.native_storage_type()) == ("legacy", True, "f32")
    path = tg.ensure_thinker_gguf(checkpoint, "native", cache_dir=tmp_path / "cache")
    assert path.name == "thinker-f32.gguf"
    reader, fields = reader_fields(path)
    assert fields["general.architecture"] == "qwen3"
    assert fields["qwen3.embedding_length"] == CFG.hidden_size
    assert fields["qwen3.block_count"] == CFG.num_hidden_layers
    assert fields["qwen3.feed_forward_length"] == CFG.intermediate_size
    assert fields["qwen3.attention.head_count"] == CFG.num_attention_heads
    assert fields["qwen3.attention.head_count_kv"] == CFG.num_key_value_heads
    assert fields["qwen3.attention.key_length"] == fields["qwen3.attention.value_length"] == CFG.head_dim
    assert fields["qwen3.rope.freq_base"] == pytest.approx(1e6)
    assert fields["qwen3.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-6)
    assert fields["tokenizer.ggml.model"] == "gpt2" and fields["tokenizer.ggml.pre"] == "qwen2"
    assert fields["tokenizer.ggml.eos_token_id"] == tc.EOS_IDS[0]
    tokens, kinds = fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.token_type"]
    assert len(tokens) == len(kinds) == CFG.vocab_size
    assert tokens[tc.TOKEN_IDS["<|im_end|>"]] == "<|im_end|>"
    assert kinds[tc.TOKEN_IDS["<|audio_pad|>"]] == gguf.TokenType.CONTROL
    assert kinds[tc.TOKEN_IDS["<asr_text>"]] == gguf.TokenType.USER_DEFINED
    assert kinds[100] == gguf.TokenType.NORMAL
    assert tokens[265:] == [f"[PAD{i}]" for i in range(265, CFG.vocab_size)]
    assert set(kinds[265:]) == {gguf.TokenType.UNUSED}
    assert fields["tokenizer.ggml.merges"] == ["Ġ t", "h e"]
    types = tensor_types(reader)
    assert "output.weight" not in types  # tied: llama.cpp reuses token_embd
    assert not any("audio" in name for name in types)
    assert len(types) == 2 + 11 * CFG.num_hidden_layers
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    np.testing.assert_array_equal(
        np.asarray(embd.data), checkpoint.weights.f32("thinker.model.embed_tokens.weight")
    )


def test_hf_layout_untied_head_and_rope_parameters(tmp_path: Path) -> None:
    cfg = ref.TinyQwen3(vocab_size=272, tie_word_embeddings=False, rope_theta=5000.0)
    weights = ref.random_weights(cfg, seed=4)
    directory = tc.write_checkpoint(tmp_path / "hf", cfg, weights, "hf")
    checkpoint = tg.ThinkerCheckpoint(directory)
    assert (checkpoint.layout, checkpoint.tied, checkpoint.head_name) == (
        "hf",
        False,
        "thinker.lm_head.weight",
    )
    reader, fields = reader_fields(tg.ensure_thinker_gguf(checkpoint, "f32", cache_dir=tmp_path / "cache"))
    assert fields["qwen3.rope.freq_base"] == pytest.approx(5000.0)
    head = next(t for t in reader.tensors if t.name == "output.weight")
    np.testing.assert_array_equal(np.asarray(head.data), weights["lm_head.weight"])


def test_vocab_and_merges_files_give_the_same_vocabulary(tmp_path: Path) -> None:
    weights = ref.random_weights(CFG, seed=5)
    from_json = tc.write_checkpoint(tmp_path / "a", CFG, weights, "legacy")
    from_files = tc.write_checkpoint(tmp_path / "b", CFG, weights, "legacy", tokenizer_files="vocab+merges")
    assert not (from_files / "tokenizer.json").exists()
    assert tg.read_vocabulary(from_json, CFG.vocab_size) == tg.read_vocabulary(from_files, CFG.vocab_size)


@pytest.mark.parametrize(
    ("storage", "expected_2d", "bf16_source"),
    [
        ("f16", "F16", False),
        ("bf16", "BF16", False),
        ("native", "BF16", True),
        ("f32", "F32", True),
        ("q8_0", "Q8_0", False),
    ],
)
def test_storage_types(tmp_path: Path, storage: str, expected_2d: str, bf16_source: bool) -> None:
    directory = tc.write_checkpoint(
        tmp_path / "m", CFG, ref.random_weights(CFG, seed=6), "legacy", bf16=bf16_source
    )
    checkpoint = tg.ThinkerCheckpoint(directory)
    reader, fields = reader_fields(tg.ensure_thinker_gguf(checkpoint, storage, cache_dir=tmp_path / "c"))
    types = tensor_types(reader)
    assert types["blk.0.attn_q.weight"] == expected_2d
    assert types["blk.1.ffn_down.weight"] == expected_2d
    assert types["blk.0.attn_norm.weight"] == types["blk.0.attn_q_norm.weight"] == "F32"
    if storage == "bf16" or (storage == "native" and bf16_source):
        # bf16 → bf16 is a bit copy; f32 → bf16 rounds to nearest even like torch
        tensor = next(t for t in reader.tensors if t.name == "blk.0.attn_q.weight")
        bits = np.asarray(tensor.data).view(np.uint16).reshape(-1)
        expected = tc.bf16_round(
            {"w": checkpoint.weights.f32("thinker.model.layers.0.self_attn.q_proj.weight")}
        )["w"]
        np.testing.assert_array_equal((bits.astype(np.uint32) << 16).view(np.float32), expected.reshape(-1))


def test_q4_k_uses_k_quants_where_rows_allow(tmp_path: Path) -> None:
    cfg = ref.TinyQwen3(
        vocab_size=272,
        hidden_size=256,
        intermediate_size=512,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        num_hidden_layers=1,
    )
    directory = tc.write_checkpoint(tmp_path / "m", cfg, ref.random_weights(cfg, seed=8), "hf")
    reader, fields = reader_fields(
        tg.ensure_thinker_gguf(tg.ThinkerCheckpoint(directory), "q4_k", cache_dir=tmp_path / "c", n_threads=1)
    )
    types = tensor_types(reader)
    assert types["blk.0.attn_q.weight"] == "Q4_K"
    assert set(types.values()) <= {"Q4_K", "Q6_K", "F32"}
    assert fields[tg.FINGERPRINT_KEY]  # survives llama_model_quantize


def test_cache_is_reused_and_refreshed_when_the_checkpoint_changes(legacy_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    checkpoint = tg.ThinkerCheckpoint(legacy_dir)
    first = tg.ensure_thinker_gguf(checkpoint, "f16", cache_dir=cache)
    stamp = first.stat().st_mtime_ns
    assert (
        tg.ensure_thinker_gguf(tg.ThinkerCheckpoint(legacy_dir), "f16", cache_dir=cache).stat().st_mtime_ns
        == stamp
    )
    new_weights = ref.random_weights(CFG, seed=99)
    tc.write_checkpoint(legacy_dir, CFG, new_weights, "legacy")
    second = tg.ensure_thinker_gguf(tg.ThinkerCheckpoint(legacy_dir), "f16", cache_dir=cache)
    assert second == first and second.stat().st_mtime_ns != stamp
    reader, _ = reader_fields(second)
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    np.testing.assert_array_equal(
        np.asarray(embd.data), new_weights["embed_tokens.weight"].astype(np.float16)
    )
    assert sorted(p.name for p in cache.iterdir()) == ["thinker-f16.gguf"]  # no partial files left


def test_default_cache_lives_next_to_the_model(legacy_dir: Path) -> None:
    path = tg.ensure_thinker_gguf(tg.ThinkerCheckpoint(legacy_dir), "f32")
    assert path.parent == legacy_dir / ".captioneer"


def test_checkpoint_errors(tmp_path: Path, legacy_dir: Path) -> None:
    with pytest.raises(ModelError, match="not found"):
        tg.ThinkerCheckpoint(tmp_path / "absent")
    with pytest.raises(UsageError, match="thinker_weight_type"):
        tg.ensure_thinker_gguf(tg.ThinkerCheckpoint(legacy_dir), "q3_k")

    config = json.loads((legacy_dir / "config.json").read_text())
    config["thinker_config"]["text_config"]["head_dim"] = 8
    (legacy_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match="shape"):
        tg.ThinkerCheckpoint(legacy_dir)

    partial = tc.write_checkpoint(tmp_path / "partial", CFG, ref.random_weights(CFG), "legacy")
    weights = ref.random_weights(CFG)
    del weights["layers.1.mlp.up_proj.weight"]
    tc.write_checkpoint(partial, CFG, weights, "legacy")
    with pytest.raises(ModelError, match=r"lacks tensors: thinker\.model\.layers\.1\.mlp\.up_proj\.weight"):
        tg.ThinkerCheckpoint(partial)

    small = ref.TinyQwen3(vocab_size=260)
    tokenizer_too_big = tc.write_checkpoint(tmp_path / "vocab", small, ref.random_weights(small), "legacy")
    with pytest.raises(ModelError, match="vocab_size"):
        tg.ensure_thinker_gguf(tg.ThinkerCheckpoint(tokenizer_too_big), "f32", cache_dir=tmp_path / "c")

    truncated = tc.write_checkpoint(tmp_path / "trunc", CFG, ref.random_weights(CFG), "legacy")
    data = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match=r"model\.safetensors is truncated"):
        tg.ThinkerCheckpoint(truncated)
