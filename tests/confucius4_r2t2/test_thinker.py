"""The thinker on libllama against the float64 numpy Qwen3 and against the stored reference fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import thinker_checkpoints as tc  # on sys.path via this folder's conftest

from inference.errors import UsageError
from inference.families.confucius4_r2t2.thinker import (
    DRAFT_BATCH_ROWS,
    STEP_EXACT_TYPES,
    Thinker,
    ThinkerOptions,
    placeholder_positions,
)
from inference.native.llama import ONE_ROW_STEP_BATCH_EXACT_POSITIONS

ref = tc.ref
CFG = ref.TinyQwen3(vocab_size=272, rope_theta=1_000_000.0)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "confucius4_r2t2"


def prompt_with_audio(n_audio: int) -> np.ndarray:
    ids = tc.TOKEN_IDS
    head = [
        ids["<|im_start|>"],
        115,
        121,
        115,
        ids["<|im_end|>"],
        ids["<|im_start|>"],
        117,
        ids["<|audio_start|>"],
    ]
    tail = [ids["<|audio_end|>"], ids["<|im_end|>"], ids["<|im_start|>"], 97, 115]
    return np.array(head + [tc.AUDIO_PAD] * n_audio + tail, dtype=np.int64)


@pytest.fixture(scope="module")
def weights() -> dict[str, np.ndarray]:
    return ref.random_weights(CFG, seed=11, embed_std=0.05, residual_gain=3.0)


@pytest.fixture(scope="module")
def audio() -> np.ndarray:
    return (0.05 * np.random.default_rng(12).standard_normal((6, CFG.hidden_size))).astype(np.float32)


def reference_rows(weights: dict[str, np.ndarray], ids: np.ndarray, audio: np.ndarray) -> np.ndarray:
    rows = weights["embed_tokens.weight"][ids].astype(np.float64)
    rows[ids == tc.AUDIO_PAD] = audio
    return rows


@pytest.fixture(scope="module", params=["legacy", "hf"])
def thinker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, weights):
    directory = tc.write_checkpoint(tmp_path_factory.mktemp(request.param), CFG, weights, request.param)
    with Thinker(directory, ThinkerOptions(n_ctx=256, n_threads=1)) as loaded:
        yield loaded


def test_f32_prefill_and_greedy_match_numpy(thinker: Thinker, weights, audio: np.ndarray) -> None:
    assert thinker.storage_type == "f32" and thinker.context.options.kv_type == "f32"
    ids = prompt_with_audio(len(audio))
    rows = reference_rows(weights, ids, audio)
    thinker.truncate(0)
    logits = thinker.prefill(ids, audio, placeholder_positions(ids, tc.AUDIO_PAD))
    assert thinker.n_past == ids.size
    assert ref.relative_error(logits, ref.qwen3_logits(weights, CFG, rows)[-1]) < 1e-4
    result = thinker.decode_greedy(12, eos_ids=[], record_margins=True)
    assert result.token_ids == ref.greedy_ids(weights, CFG, rows, 12)
    assert len(set(result.token_ids)) >= 3  # a model stuck on one token would prove little
    assert result.eos_id is None and len(result.margins) == 12 and min(result.margins) > 0


def test_eos_stops_decoding(thinker: Thinker, audio: np.ndarray) -> None:
    ids = prompt_with_audio(len(audio))
    thinker.truncate(0)
    thinker.prefill(ids, audio, placeholder_positions(ids, tc.AUDIO_PAD))
    free_run = thinker.decode_greedy(10, eos_ids=[]).token_ids
    stop_at = next(k for k in range(1, 10) if free_run[k] not in free_run[:k])
    thinker.truncate(0)
    thinker.prefill(ids, audio, placeholder_positions(ids, tc.AUDIO_PAD))
    result = thinker.decode_greedy(10, eos_ids=[free_run[stop_at], 10_000])
    assert (result.token_ids, result.eos_id) == (free_run[:stop_at], free_run[stop_at])


def test_continuing_a_decode_equals_one_long_decode(thinker: Thinker, audio: np.ndarray) -> None:
    ids = prompt_with_audio(len(audio))
    thinker.truncate(0)
    thinker.prefill(ids, audio, placeholder_positions(ids, tc.AUDIO_PAD))
    whole = thinker.decode_greedy(9, eos_ids=[]).token_ids
    thinker.truncate(0)
    thinker.prefill(ids, audio, placeholder_positions(ids, tc.AUDIO_PAD))
    parts = thinker.decode_greedy(4, eos_ids=[]).token_ids + thinker.decode_greedy(5, eos_ids=[]).token_ids
    assert parts == whole


def test_kv_prefix_reuse_matches_a_fresh_prefill(thinker: Thinker, weights, audio: np.ndarray) -> None:
    ids = prompt_with_audio(len(audio))
    positions = placeholder_positions(ids, tc.AUDIO_PAD)
    thinker.truncate(0)
    thinker.prefill(ids, audio, positions)
    thinker.decode_greedy(5, eos_ids=[])
    keep = int(positions[-1]) + 2  # keep the audio, replace the assistant turn
    thinker.truncate(keep)
    suffix = np.array([tc.TOKEN_IDS["<|im_start|>"], 104, 101, 108], dtype=np.int64)
    reused = thinker.prefill(suffix)
    reused_ids = thinker.decode_greedy(6, eos_ids=[]).token_ids
    full = np.concatenate([ids[:keep], suffix])
    thinker.truncate(0)
    fresh = thinker.prefill(full, audio, placeholder_positions(full, tc.AUDIO_PAD))
    np.testing.assert_allclose(reused, fresh, rtol=0, atol=1e-5)
    assert thinker.decode_greedy(6, eos_ids=[]).token_ids == reused_ids
    expected = ref.qwen3_logits(weights, CFG, reference_rows(weights, full, audio))[-1]
    assert ref.relative_error(reused, expected) < 1e-4


def test_input_validation(thinker: Thinker, audio: np.ndarray) -> None:
    ids = prompt_with_audio(len(audio))
    positions = placeholder_positions(ids, tc.AUDIO_PAD)
    with pytest.raises(UsageError, match="placeholder"):
        thinker.input_rows(ids, audio[:-1], positions)
    with pytest.raises(UsageError, match="shape"):
        thinker.input_rows(ids, audio[:, :-1], positions)
    with pytest.raises(UsageError, match="out of range"):
        thinker.input_rows([CFG.vocab_size])
    with pytest.raises(UsageError, match="empty"):
        thinker.prefill([])


@pytest.mark.parametrize(("storage", "tolerance"), [("f16", 5e-3), ("q8_0", 5e-2)])
def test_reduced_precision_stays_close(
    tmp_path: Path, weights, audio: np.ndarray, storage: str, tolerance: float
):
    directory = tc.write_checkpoint(tmp_path / "m", CFG, weights, "hf")
    ids = prompt_with_audio(len(audio))
    expected = ref.qwen3_logits(weights, CFG, reference_rows(weights, ids, audio))[-1]
    with Thinker(directory, ThinkerOptions(storage_type=storage, n_ctx=256, n_threads=1)) as thinker:
        assert thinker.context.options.kv_type == "f16"
        logits = thinker.prefill(ids, audio, placeholder_positions(ids, tc.AUDIO_PAD))
    error = ref.relative_error(logits, expected)
    assert 0 < error < tolerance


# ---- stored reference fixtures (transformers 5.23.0 Qwen3ASRForConditionalGeneration) ----------


def _fixture_cases() -> list[tuple[str, str]]:
    meta_path = FIXTURES / "expected.json"
    if not meta_path.is_file():
        return []
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    window_of = meta.get("checkpoints", {})
    cases = []
    pad = meta["token_ids"]["<|audio_pad|>"]
    with np.load(FIXTURES / "expected.npz") as arrays:
        for checkpoint, window in window_of.items():
            for name, case in meta["cases"].items():
                key = f"projected/{case['clip']}/w{window}"
                if case.get("window") != window or key not in arrays.files:
                    continue
                # Cases on a 30 s span of the long clip have no per-span embeddings (the fixture stores the
                # whole clip's); test_engine.py covers them end to end through the audio tower.
                if len(arrays[key]) == int(np.sum(arrays[f"case/{name}/prompt_ids"] == pad)):
                    cases.append((checkpoint, name))
    return cases


@pytest.fixture(scope="module")
def fixture_thinkers(tmp_path_factory: pytest.TempPathFactory):
    loaded: dict[str, Thinker] = {}
    cache = tmp_path_factory.mktemp("thinker-cache")
    yield lambda name: loaded.setdefault(
        name,
        Thinker(
            FIXTURES / name,
            ThinkerOptions(storage_type="f32", n_ctx=1024, n_threads=1, cache_dir=cache / name),
        ),
    )
    for thinker in loaded.values():
        thinker.close()


@pytest.mark.parametrize(
    ("checkpoint", "case"), _fixture_cases() or [pytest.param("", "", marks=pytest.mark.skip)]
)
def test_reference_fixture_greedy_ids(fixture_thinkers, checkpoint: str, case: str) -> None:
    """Prompt ids + the reference's audio embeddings → the reference's first logits and greedy ids (f32)."""
    meta = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
    info = meta["cases"][case]
    with np.load(FIXTURES / "expected.npz") as arrays:
        prompt = arrays[f"case/{case}/prompt_ids"]
        expected_ids = arrays[f"case/{case}/generated_ids"].tolist()
        first_logits = arrays[f"case/{case}/first_logits"]
        audio = arrays.get(f"projected/{info['clip']}/w{info['window']}")
    positions = placeholder_positions(prompt, meta["token_ids"]["<|audio_pad|>"])
    assert audio is not None and len(audio) == len(positions)
    thinker = fixture_thinkers(checkpoint)
    thinker.truncate(0)
    logits = thinker.prefill(prompt, audio, positions)
    assert ref.relative_error(logits, first_logits) < 1e-4
    result = thinker.decode_greedy(meta["max_new_tokens"], meta["eos_token_ids"])
    generated = result.token_ids + ([result.eos_id] if result.eos_id is not None else [])
    assert generated == expected_ids


@pytest.mark.parametrize("wrong_at", [None, 0, 3])
def test_a_verified_draft_gives_the_greedy_ids_and_takes_only_what_greedy_picks(
    thinker: Thinker, audio: np.ndarray, wrong_at: int | None
) -> None:
    ids = prompt_with_audio(len(audio))
    positions = placeholder_positions(ids, tc.AUDIO_PAD)
    thinker.truncate(0)
    thinker.prefill(ids, audio, positions)
    plain = thinker.decode_greedy(10, eos_ids=[], record_margins=True)
    draft = list(plain.token_ids[:8])
    if wrong_at is not None:  # a draft that parts from greedy decoding at this index
        draft[wrong_at] = next(t for t in range(CFG.vocab_size) if t != draft[wrong_at])
    thinker.truncate(0)
    thinker.prefill(ids, audio, positions)
    drafted = thinker.decode_greedy(10, eos_ids=[], record_margins=True, draft=draft)
    assert drafted.token_ids == plain.token_ids
    assert drafted.margins == pytest.approx(plain.margins, abs=1e-5)
    # The draft's first token is checked by the prefill's logits, the rest in batches of DRAFT_BATCH_ROWS - 1
    # guesses behind the token they follow (a last lone guess is a plain step), cut at the first miss.
    assert DRAFT_BATCH_ROWS == 7
    expected = {None: (6, 6), 0: (0, 0), 3: (6, 2)}[wrong_at]
    assert (drafted.drafted, drafted.accepted) == expected
    # The rejected rows left the KV cache: decoding on equals decoding on from the plain run.
    assert thinker.n_past in (ids.size + 9, ids.size + 10)  # the last token fed lazily or in the batch
    follow = thinker.decode_greedy(3, eos_ids=[]).token_ids
    thinker.truncate(0)
    thinker.prefill(ids, audio, positions)
    assert thinker.decode_greedy(13, eos_ids=[]).token_ids[10:] == follow


def test_a_draft_stops_at_eos_and_at_the_budget(thinker: Thinker, audio: np.ndarray) -> None:
    ids = prompt_with_audio(len(audio))
    positions = placeholder_positions(ids, tc.AUDIO_PAD)
    thinker.truncate(0)
    thinker.prefill(ids, audio, positions)
    free_run = thinker.decode_greedy(10, eos_ids=[]).token_ids
    stop_at = next(k for k in range(1, 10) if free_run[k] not in free_run[:k])
    thinker.truncate(0)
    thinker.prefill(ids, audio, positions)
    stopped = thinker.decode_greedy(10, eos_ids=[free_run[stop_at]], draft=free_run)
    assert (stopped.token_ids, stopped.eos_id) == (free_run[:stop_at], free_run[stop_at])
    thinker.truncate(0)
    thinker.prefill(ids, audio, positions)
    short = thinker.decode_greedy(4, eos_ids=[], draft=free_run)
    assert short.token_ids == free_run[:4] and short.accepted == 3


def wide_quantized_thinker(tmp_path: Path, storage: str) -> Thinker:
    """A thinker 256 wide, so that k-quant matrices really are k-quants (narrower ones fall back to q5_0/q8_0),
    with room for prompts past the draft position limit, on two threads."""
    cfg = ref.TinyQwen3(vocab_size=272, hidden_size=256, intermediate_size=512, head_dim=64, rope_theta=1e6)
    weights = ref.random_weights(cfg, seed=11, embed_std=0.05, residual_gain=3.0)
    directory = tc.write_checkpoint(tmp_path / "hf", cfg, weights, "hf")
    return Thinker(directory, ThinkerOptions(storage_type=storage, n_ctx=1024, n_threads=2))


@pytest.mark.parametrize("prompt_length", [40, ONE_ROW_STEP_BATCH_EXACT_POSITIONS - DRAFT_BATCH_ROWS])
@pytest.mark.parametrize("storage", sorted(STEP_EXACT_TYPES))
def test_quantized_weights_give_a_batch_row_the_bits_of_a_single_step(
    tmp_path: Path, storage: str, prompt_length: int
) -> None:
    """What drafting relies on (``verifies_drafts_exactly``): the logits of up to DRAFT_BATCH_ROWS token rows
    decoded together equal those of the same tokens decoded one per step, bit for bit, with two threads, up to
    the last position below the draft position limit."""
    rng = np.random.default_rng(5)
    prompt = [int(t) for t in rng.integers(0, 250, prompt_length)]
    tokens = [int(t) for t in rng.integers(0, 250, DRAFT_BATCH_ROWS)]
    with wide_quantized_thinker(tmp_path, storage) as quantized:
        assert quantized.verifies_drafts_exactly
        assert prompt_length + DRAFT_BATCH_ROWS <= quantized.draft_position_limit
        quantized.prefill(prompt)
        steps = np.stack([quantized.context.decode_tokens([token])[0] for token in tokens])
        for rows in range(2, DRAFT_BATCH_ROWS + 1):
            quantized.truncate(len(prompt))
            batch = quantized.context.decode_tokens(tokens[:rows], logits="all")
            assert np.array_equal(batch, steps[:rows]), f"{rows} rows"


@pytest.mark.parametrize("storage", sorted(STEP_EXACT_TYPES))
def test_a_draft_across_the_position_limit_leaves_every_logit_as_greedy_steps_give_it(
    tmp_path: Path, storage: str
) -> None:
    """From the draft position limit on, a one-row step attends through another flash-attention path than a
    batch row (the rows differ by up to 0.1 with two threads): a draft that reaches past it must not be verified
    in a batch there. The margins (top-1 minus top-2 logit of every step) of a drafted run equal those of plain
    greedy steps bit for bit, on a prompt whose answer crosses the limit."""
    limit = ONE_ROW_STEP_BATCH_EXACT_POSITIONS
    rng = np.random.default_rng(9)
    prompt = [int(t) for t in rng.integers(0, 250, limit - 10)]
    with wide_quantized_thinker(tmp_path, storage) as quantized:
        assert quantized.draft_position_limit == limit
        quantized.prefill(prompt)
        plain = quantized.decode_greedy(24, eos_ids=[], record_margins=True)
        quantized.truncate(0)
        quantized.prefill(prompt)
        drafted = quantized.decode_greedy(24, eos_ids=[], record_margins=True, draft=plain.token_ids)
    assert drafted.token_ids == plain.token_ids
    assert drafted.margins == plain.margins
    assert drafted.accepted == drafted.drafted > 0  # below the limit the draft was verified in batches
    assert drafted.drafted < 23  # ... and set aside from the limit on
