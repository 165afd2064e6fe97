"""libllama helpers on a tiny Qwen3 GGUF written by the test, against a float64 numpy Qwen3."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from inference.errors import ModelError, UsageError
from inference.native import llama
from tests.native import qwen3_numpy as ref

CFG = ref.TinyQwen3()
PROMPT = np.array([5, 17, 200, 33, 99, 100, 7, 8, 258, 259, 12], dtype=np.int64)


@pytest.fixture(scope="module")
def weights() -> dict[str, np.ndarray]:
    return ref.random_weights(CFG, seed=1)


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory: pytest.TempPathFactory, weights: dict[str, np.ndarray]) -> Path:
    return ref.write_qwen3_gguf(tmp_path_factory.mktemp("llama") / "tiny-f32.gguf", weights, CFG)


@pytest.fixture(scope="module")
def model(gguf_path: Path):
    with llama.LlamaModel(gguf_path) as loaded:
        yield loaded


def f32_context(model: llama.LlamaModel, **overrides: object) -> llama.LlamaContext:
    options = {"n_ctx": 256, "n_batch": 64, "n_threads": 1, "kv_type": "f32", **overrides}
    return llama.LlamaContext(model, llama.ContextOptions(**options))


def test_model_reports_its_shape(model: llama.LlamaModel) -> None:
    assert (model.n_embd, model.n_vocab, model.n_layer) == (
        CFG.hidden_size,
        CFG.vocab_size,
        CFG.num_hidden_layers,
    )
    assert model.metadata("general.architecture") == "qwen3"
    assert model.metadata("no.such.key") is None


def test_f32_logits_match_numpy_qwen3(model: llama.LlamaModel, weights: dict[str, np.ndarray]) -> None:
    expected = ref.qwen3_logits(weights, CFG, weights["embed_tokens.weight"][PROMPT])
    with f32_context(model) as ctx:
        logits = ctx.decode_tokens(PROMPT, logits="all")
    assert logits.shape == (PROMPT.size, CFG.vocab_size)
    assert ref.relative_error(logits, expected) < 1e-4


def test_untied_head_matches_numpy(tmp_path: Path) -> None:
    cfg = ref.TinyQwen3(tie_word_embeddings=False, num_hidden_layers=1)
    weights = ref.random_weights(cfg, seed=2)
    path = ref.write_qwen3_gguf(tmp_path / "untied.gguf", weights, cfg)
    expected = ref.qwen3_logits(weights, cfg, weights["embed_tokens.weight"][PROMPT])
    with llama.LlamaModel(path) as untied, f32_context(untied) as ctx:
        logits = ctx.decode_tokens(PROMPT, logits="all")
    assert ref.relative_error(logits, expected) < 1e-4
    # a tied head would give different logits: the test can tell the two apart
    tied = ref.qwen3_logits(
        {k: v for k, v in weights.items() if k != "lm_head.weight"},
        cfg,
        weights["embed_tokens.weight"][PROMPT],
    )
    assert ref.relative_error(logits, tied) > 1e-2


def test_embedding_rows_give_the_same_logits_as_tokens(
    model: llama.LlamaModel, weights: dict[str, np.ndarray]
) -> None:
    with f32_context(model) as ctx:
        by_token = ctx.decode_tokens(PROMPT, logits="all")
        ctx.clear()
        by_row = ctx.decode_embeddings(weights["embed_tokens.weight"][PROMPT], logits="all")
    np.testing.assert_allclose(by_row, by_token, rtol=0, atol=1e-5)


def test_mixed_inputs_and_batch_splitting(model: llama.LlamaModel, weights: dict[str, np.ndarray]) -> None:
    """Rows then tokens continue one sequence; inputs longer than n_batch are split."""
    with f32_context(model) as ctx:
        whole = ctx.decode_tokens(PROMPT, logits=[3, PROMPT.size - 1])
    with f32_context(model, n_batch=4, n_ubatch=4) as ctx:
        first = ctx.decode_embeddings(weights["embed_tokens.weight"][PROMPT[:6]], logits=[3])
        rest = ctx.decode_tokens(PROMPT[6:])
        assert ctx.n_past == PROMPT.size
    np.testing.assert_allclose(first[0], whole[0], atol=1e-5)
    np.testing.assert_allclose(rest[0], whole[1], atol=1e-5)


def test_kv_truncation_then_redecode_matches_fresh_decode(model: llama.LlamaModel) -> None:
    other_tail = np.array([40, 41, 42, 43], dtype=np.int64)
    with f32_context(model) as ctx:
        ctx.decode_tokens(PROMPT, logits="none")
        ctx.truncate(7)
        assert ctx.n_past == 7
        reused = ctx.decode_tokens(other_tail, logits="all")
    with f32_context(model) as ctx:
        fresh = ctx.decode_tokens(np.concatenate([PROMPT[:7], other_tail]), logits="all")[7:]
    np.testing.assert_allclose(reused, fresh, rtol=0, atol=1e-5)
    # the truncated tail really was dropped: keeping it gives different logits
    with f32_context(model) as ctx:
        stale = ctx.decode_tokens(np.concatenate([PROMPT, other_tail]), logits="all")[-4:]
    assert np.max(np.abs(stale - fresh)) > 1e-3


def test_quantize_q8_0_keeps_logits_close(gguf_path: Path, model: llama.LlamaModel, tmp_path: Path) -> None:
    quantized = tmp_path / "tiny-q8_0.gguf"
    llama.quantize_gguf(gguf_path, quantized, "q8_0", n_threads=1)
    assert quantized.stat().st_size < 0.5 * gguf_path.stat().st_size
    with f32_context(model) as ctx:
        exact = ctx.decode_tokens(PROMPT, logits="all")
    with llama.LlamaModel(quantized) as q8, f32_context(q8, kv_type="f16") as ctx:
        approx = ctx.decode_tokens(PROMPT, logits="all")
    error = ref.relative_error(approx, exact)
    assert 0 < error < 3e-2
    assert np.mean(np.argmax(approx, axis=1) == np.argmax(exact, axis=1)) >= 0.9


def test_missing_and_corrupt_gguf_are_model_errors(tmp_path: Path, gguf_path: Path) -> None:
    with pytest.raises(ModelError, match="not found"):
        llama.LlamaModel(tmp_path / "absent.gguf")
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises(ModelError, match="cannot load GGUF model") as info:
        llama.LlamaModel(garbage)
    assert info.value.fix
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(gguf_path.read_bytes()[: gguf_path.stat().st_size // 2])
    with pytest.raises(ModelError, match="cannot load GGUF model"):
        llama.LlamaModel(truncated)
    with pytest.raises(ModelError):
        llama.quantize_gguf(tmp_path / "absent.gguf", tmp_path / "out.gguf", "q8_0")


def test_usage_errors(model: llama.LlamaModel) -> None:
    with f32_context(model, n_ctx=256) as ctx:
        with pytest.raises(UsageError, match="shape"):
            ctx.decode_embeddings(np.zeros((2, CFG.hidden_size + 1), dtype=np.float32))
        with pytest.raises(UsageError, match="out of range"):
            ctx.decode_tokens([CFG.vocab_size])
        with pytest.raises(UsageError, match="context size"):
            ctx.decode_tokens(np.zeros(ctx.n_ctx + 1, dtype=np.int64))
        with pytest.raises(UsageError):
            ctx.truncate(1)  # nothing cached yet
    with pytest.raises(UsageError, match="KV cache type"):
        llama.LlamaContext(model, llama.ContextOptions(kv_type="q3"))
    with pytest.raises(UsageError, match="quantization type"):
        llama.quantize_gguf("a.gguf", "b.gguf", "q7")


def test_log_router_sends_native_lines_to_python_logging(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("captioneer.llama")
    router = llama.install_log_router(logger)
    assert llama.install_log_router(logger) is router
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 64)
    with caplog.at_level(logging.DEBUG, logger="captioneer.llama"), pytest.raises(ModelError) as info:
        llama.LlamaModel(bad)
    assert any(
        record.name == "captioneer.llama" and record.levelno >= logging.ERROR for record in caplog.records
    )
    assert "cannot load GGUF model" in str(info.value)


def test_long_prompts_decode_in_balanced_batches() -> None:
    from inference.native.llama import TILED_ATTENTION_MIN_ROWS, balanced_ubatches

    assert balanced_ubatches(0, 512) == []
    assert balanced_ubatches(5, 512) == [(0, 5)]
    assert balanced_ubatches(512, 512) == [(0, 512)]
    assert balanced_ubatches(530, 512) == [(0, 265), (265, 530)]  # not 512 + 18
    assert balanced_ubatches(1025, 512) == [(0, 342), (342, 684), (684, 1025)]
    for n in range(TILED_ATTENTION_MIN_ROWS, 3000, 7):
        bounds = balanced_ubatches(n, 512)
        assert bounds[0][0] == 0 and bounds[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))
        assert all(TILED_ATTENTION_MIN_ROWS <= stop - start <= 512 for start, stop in bounds)
