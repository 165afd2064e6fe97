"""Incremental compute of R2T2 streams: the windowed audio tower cache and thinker KV-prefix reuse."""

from __future__ import annotations

import numpy as np
import pytest
from r2t2_fixtures import HF_CHECKPOINT, stream_clip, stream_variant

from inference.engine import EngineRequest
from inference.families.confucius4_r2t2.audio_tower import AudioTower
from inference.families.confucius4_r2t2.chunk_decoder import EngineChunkDecoder, WindowedEncoder
from inference.families.confucius4_r2t2.engine import create_engine
from inference.families.confucius4_r2t2.frontend import audio_token_count, log_mel
from inference.families.confucius4_r2t2.prompt import build_prompt
from inference.families.confucius4_r2t2.stream_frontend import BLOCK, StreamingLogMel

# These tests follow the LSP chunk by chunk: one unendpointed segment.
UNENDPOINTED = {"endpointing": False}
MELS = 4


class RecordingTower:
    """Row t of a clip is (first mel value of the clip, clip length, t): enough to see what was encoded."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, int]] = []

    def encode(self, mel: np.ndarray) -> np.ndarray:
        self.calls.append((float(mel[0, 0]), mel.shape[1]))
        tokens = audio_token_count(mel.shape[1])
        return np.stack([np.full(tokens, mel[0, 0]), np.full(tokens, mel.shape[1]), np.arange(tokens)], 1)


def ramp(frames: int, scale: float = 1.0) -> np.ndarray:
    return np.tile(np.arange(frames, dtype=np.float32) * np.float32(scale), (MELS, 1))


def test_complete_windows_are_encoded_once_while_their_mel_is_unchanged():
    tower = RecordingTower()
    encoder = WindowedEncoder(tower, 400, reuse=True)
    encoder.encode(ramp(350))
    assert tower.calls == [(0.0, 350)]  # no complete window yet: the clip as a whole
    tower.calls.clear()
    out = encoder.encode(ramp(950))
    assert tower.calls == [(0.0, 400), (400.0, 400), (800.0, 150)]
    assert out.shape[0] == audio_token_count(950)
    tower.calls.clear()
    encoder.encode(ramp(1250))
    assert tower.calls == [(800.0, 400), (800.0, 450)]  # the new window, then the short tail behind it


def test_a_tail_under_one_conv_chunk_is_encoded_behind_the_previous_window():
    tower = RecordingTower()
    encoder = WindowedEncoder(tower, 400, reuse=True)
    out = encoder.encode(ramp(830))
    assert tower.calls == [(0.0, 400), (400.0, 400), (400.0, 430)]
    tail = out[audio_token_count(800) :]
    assert tail.shape[0] == audio_token_count(830) - audio_token_count(800)
    # the tail's rows come from the joint call, past the previous window's 52 tokens
    assert tail[0].tolist() == [400.0, 430.0, 52.0]


def test_a_changed_window_is_encoded_again_and_the_others_are_kept():
    tower = RecordingTower()
    encoder = WindowedEncoder(tower, 400, reuse=True)
    mel = ramp(900)
    encoder.encode(mel)
    tower.calls.clear()
    louder = mel.copy()
    louder[1, 10] += 1.0  # window 0 changes (e.g. the global floor moved), window 1 does not
    encoder.encode(louder)
    assert tower.calls == [(0.0, 400), (800.0, 100)]
    assert encoder.encoded_windows == 3


def test_without_reuse_every_window_is_encoded_by_the_same_calls():
    tower = RecordingTower()
    encoder = WindowedEncoder(tower, 400, reuse=False)
    encoder.encode(ramp(900))
    encoder.encode(ramp(900))
    assert tower.calls == [(0.0, 400), (400.0, 400), (800.0, 100)] * 2


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    path = stream_variant(HF_CHECKPOINT, tmp_path_factory.mktemp("cache") / "w400", 400)
    made = create_engine(EngineRequest(path, "confucius4_r2t2", UNENDPOINTED, "cpu", 1))
    yield made
    made.close()


def test_windowed_embeddings_equal_the_whole_clip(engine):
    """Windows never see each other. An f32 tower shows it to 1e-5; a bf16 one's offline graphs round each
    product's inputs to bf16, and their bits follow how many chunks a graph batches (live streams run the
    row-invariant graphs instead)."""
    mel = log_mel(stream_clip("quiet_then_loud"))
    valid = mel.values[:, : mel.valid_frames]
    cfg = engine.checkpoint.config.audio
    with AudioTower(engine.backend, engine.checkpoint.files, cfg, storage="f32") as tower:
        windowed = WindowedEncoder(tower, 400, reuse=False).encode(valid)
        np.testing.assert_allclose(windowed, tower.encode(valid), rtol=0, atol=1e-5)


def run_stream(engine, audio: np.ndarray, cache: bool, chunk_ms: float = 640):
    stream = engine.open_stream(language="English", chunk_size_ms=chunk_ms, max_tokens=16, stream_cache=cache)
    seen: list[np.ndarray] = []
    encoder = stream.recognizer.decoder.encoder
    original = encoder.encode

    def spy(mel):
        out = original(mel)
        seen.append(out.copy())
        return out

    encoder.encode = spy
    step = (
        stream.options.chunk_samples
    )  # a chunk at a time, as live audio comes (a longer push is one decode)
    events = [e for start in range(0, audio.size, step) for e in stream.push(audio[start : start + step])]
    return stream, seen, events, stream.finish()


def test_cache_on_and_off_give_the_same_bits_with_less_work(engine):
    audio = stream_clip("quiet_then_loud")
    on, seen_on, events_on, final_on = run_stream(engine, audio, True)
    off, seen_off, events_off, final_off = run_stream(engine, audio, False)
    assert len(seen_on) == len(seen_off) == 15
    assert all(np.array_equal(a, b) for a, b in zip(seen_on, seen_off, strict=True))
    assert events_on == events_off and final_on.text == final_off.text
    decoder_on, decoder_off = on.recognizer.decoder, off.recognizer.decoder
    assert decoder_on.encoder.encoded_windows < decoder_off.encoder.encoded_windows
    assert decoder_on.prefilled_rows < decoder_off.prefilled_rows


def test_steady_audio_encodes_each_window_once_and_reuses_most_kv_rows(engine):
    # A loud first half second fixes the global log-mel max (the floor is max - 8) and a quieter steady tone
    # follows, so no window is ever rebuilt. (960 ms chunks never end a decode within two frames of a window's
    # end, whose frames would still change with the reflect padding.)
    t = np.arange(12 * 16000) / 16000
    tone = (np.where(t < 0.5, 0.9, 0.3) * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)
    on, seen_on, _, final_on = run_stream(engine, tone, True, chunk_ms=960)
    off, seen_off, _, final_off = run_stream(engine, tone, False, chunk_ms=960)
    assert all(np.array_equal(a, b) for a, b in zip(seen_on, seen_off, strict=True))
    assert final_on.text == final_off.text
    decoder_on, decoder_off = on.recognizer.decoder, off.recognizer.decoder
    assert decoder_on.encoder.encoded_windows == (tone.size // 160) // 400 == 3
    assert decoder_on.prefilled_rows < decoder_off.prefilled_rows / 2


def test_a_louder_segment_rebuilds_the_windows_it_changed(engine):
    audio = stream_clip("quiet_then_loud")
    stream, _, _, _ = run_stream(engine, audio, True)
    complete = (audio.size // 160) // 400  # windows at the end; each encoded once if nothing ever changed
    assert stream.recognizer.decoder.encoder.encoded_windows > complete


def test_another_job_on_the_engine_invalidates_the_kv_prefix(engine):
    stream = engine.open_stream(language="English", chunk_size_ms=1000, max_tokens=4)
    audio = stream_clip("clip_a")
    stream.push(audio[:16000])
    decoder = stream.recognizer.decoder
    assert engine.kv_owner is decoder
    engine.transcribe(audio[:16000], max_tokens=3)
    assert engine.kv_owner is None
    before = decoder.prefilled_rows
    stream.push(audio[16000:32000])
    rows = decoder._rows
    assert rows is not None and decoder.prefilled_rows - before == rows.shape[0]  # a full prefill
    stream.cancel()


# ------------------------------------------------------------------ frontend


@pytest.mark.parametrize("samples", [3000, 8000, 8001, 16000 * 3 + 77, 88428])
def test_the_stream_frontend_equals_the_offline_log_mel(samples: int):
    audio = stream_clip("quiet_then_loud")[:samples]
    reference = log_mel(audio)
    for reuse in (True, False):
        got = StreamingLogMel(128, reuse)(audio)
        np.testing.assert_allclose(got, reference.values[:, : reference.valid_frames], rtol=0, atol=2e-6)


def test_the_stream_frontend_computes_each_final_block_once():
    audio = stream_clip("clip_a")
    on, off = StreamingLogMel(128, True), StreamingLogMel(128, False)
    for end in range(5120, audio.size + 1, 5120):
        assert np.array_equal(on(audio[:end]), off(audio[:end]))
    final_frames = (audio[: (audio.size // 5120) * 5120].size - 200) // 160 + 1
    assert on.computed_blocks == final_frames // BLOCK
    assert off.computed_blocks > 5 * on.computed_blocks


@pytest.fixture(scope="module")
def quantised_engine(tmp_path_factory: pytest.TempPathFactory):
    path = stream_variant(HF_CHECKPOINT, tmp_path_factory.mktemp("cache-q8") / "w400", 400)
    session = {"thinker_weight_type": "q8_0", **UNENDPOINTED}
    made = create_engine(EngineRequest(path, "confucius4_r2t2", session, "cpu", 1))
    yield made
    made.close()


@pytest.fixture(
    scope="module",
    params=[("native", 1), ("q8_0", 1), ("bf16", 1), ("bf16", 2)],
    ids=lambda param: f"{param[0]}-tower-{param[1]}-threads",
)
def quantised_engine_by_tower(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The quantised thinker behind each tower type a stream may get: native, the default package's q8_0, and
    the bf16 that CPUs with AVX512-BF16 take by default; on one thread, and on two as a 2-core laptop runs."""
    tower, threads = request.param
    path = stream_variant(HF_CHECKPOINT, tmp_path_factory.mktemp("cache-q8-tower") / "w400", 400)
    session = {"thinker_weight_type": "q8_0", "tower_weight_type": tower, **UNENDPOINTED}
    made = create_engine(EngineRequest(path, "confucius4_r2t2", session, "cpu", threads))
    yield made
    made.close()


@pytest.mark.parametrize("chunk_ms", [320, 640])
def test_a_quantised_thinker_gives_the_same_text_with_the_cache_on_and_off(
    quantised_engine_by_tower, chunk_ms: int
):
    """Reduced weight types run an f16 KV cache, where ggml computes the rows of a batch under 64 positions
    slightly differently: the cached path prefills at least that many, and keeps no rows a shorter prefill
    computed, so on and off agree exactly (with a q8_0 tower the first 320 ms decodes' short prompts made
    the difference before)."""
    engine = quantised_engine_by_tower
    thinker = engine.thinker
    assert thinker.context.options.kv_type == "f16" and thinker.min_prefill_rows == 64
    audio = stream_clip("quiet_then_loud")
    runs = []
    for cache in (True, False):
        stream = engine.open_stream(
            language="English", chunk_size_ms=chunk_ms, max_tokens=16, stream_cache=cache
        )
        decoder = stream.recognizer.decoder
        answers: list[str] = []
        original = decoder.generate

        def spy(clip, prefix, max_tokens, original=original, answers=answers):  # type: ignore[no-untyped-def]
            answers.append(original(clip, prefix, max_tokens))
            return answers[-1]

        decoder.generate = spy
        events = [e for start in range(0, audio.size, 4000) for e in stream.push(audio[start : start + 4000])]
        runs.append((answers, events, stream.finish().text, decoder.prefilled_rows))
    (answers_on, events_on, text_on, rows_on), (answers_off, events_off, text_off, rows_off) = runs
    assert len(answers_on) > 5 and answers_on == answers_off  # every decode's answer, bit for bit the same
    assert events_on == events_off and text_on == text_off
    assert rows_on < rows_off


def test_rows_a_prefill_under_64_rows_computed_are_not_kept(quantised_engine):
    """A stream's first decodes have short prompts (under 64 rows, one small batch); once its prompt is longer,
    a decode must prefill all of it, as a stream without the cache would, not keep the short batch's rows."""
    audio = stream_clip("clip_a")
    rows: dict[bool, list[int]] = {}
    for cache in (True, False):  # one decoder after the other: the engine's KV cache holds one prefill
        decoder = EngineChunkDecoder(quantised_engine, "", "English", cache)
        rows[cache] = []
        for seconds in (1, 5, 6):
            decoder.generate(audio[: seconds * 16000], "", 1)
            rows[cache].append(decoder.prefilled_rows - sum(rows[cache]))
    short, long, longer = rows[False]
    assert short < quantised_engine.thinker.min_prefill_rows <= long
    assert rows[True][:2] == [short, long]  # nothing kept from the short batch
    assert rows[True][2] < longer  # from then on the prompt's unchanged rows are kept


def test_the_stem_cache_gives_the_same_bits_and_runs_only_new_chunks(engine):
    from inference.families.confucius4_r2t2.audio_tower import StemCache

    tower = engine.tower
    mel = log_mel(stream_clip("quiet_then_loud")).values
    cache = StemCache()
    chunk = engine.checkpoint.config.audio.chunk_frames
    growing = [mel[:, :frames] for frames in range(2 * chunk + 37, 4 * chunk + 1, chunk // 2)]
    # Live streams ask for row-invariant products (OpenBLAS's rows depend on how many there are; ggml's do not).
    for part in growing:  # a window that grows by half a chunk per call, like the open window of a stream
        assert np.array_equal(
            tower.encode(part, cache, row_invariant=True), tower.encode(part, row_invariant=True)
        )
    chunks_seen = sum(-(-part.shape[1] // chunk) for part in growing)
    # 237, 287, 337, 387 frames: all 3 chunks, then the growing third, then the completed third plus the new
    # fourth, then the growing fourth — 7 stem runs for 14 chunks encoded.
    assert cache.computed_chunks == 3 + 1 + 2 + 1 and chunks_seen == 14
    louder = growing[-1] + np.float32(0.5)  # a moved log-mel floor changes every chunk: all run again
    before = cache.computed_chunks
    assert np.array_equal(
        tower.encode(louder, cache, row_invariant=True), tower.encode(louder, row_invariant=True)
    )
    assert cache.computed_chunks - before == -(-louder.shape[1] // chunk)


def answers_of(engine, audio: np.ndarray, chunk_ms: int, draft: bool):
    """Every decode's answer, the events and the final text of a cached stream, drafting on or off."""
    stream = engine.open_stream(language="English", chunk_size_ms=chunk_ms, max_tokens=16)
    decoders = []
    original_factory = stream._decoder_factory

    def watched(decoder):
        decoders.append(decoder)
        if not draft:
            decoder._draft = lambda after_audio, prefix: []
        original = decoder.generate

        def spy(clip, prefix, max_tokens):  # type: ignore[no-untyped-def]
            answers.append(original(clip, prefix, max_tokens))
            return answers[-1]

        decoder.generate = spy
        return decoder

    answers: list[str] = []
    stream.recognizer.decoder = watched(stream.recognizer.decoder)
    stream._decoder_factory = lambda: watched(original_factory())
    events = [e for start in range(0, audio.size, 4000) for e in stream.push(audio[start : start + 4000])]
    text = stream.finish().text
    return answers, events, text, sum(d.drafted for d in decoders), sum(d.accepted for d in decoders)


@pytest.mark.parametrize("chunk_ms", [320, 640])
def test_drafting_from_the_previous_answer_changes_no_answer(quantised_engine, chunk_ms):
    """The previous answer verified in one batch (an f16 KV cache, q8_0 weights): every decode's answer, every
    event and the final text are those of plain greedy decoding, and the draft saves steps."""
    audio = stream_clip("quiet_then_loud")
    answers_on, events_on, text_on, drafted, accepted = answers_of(quantised_engine, audio, chunk_ms, True)
    answers_off, events_off, text_off, drafted_off, _ = answers_of(quantised_engine, audio, chunk_ms, False)
    assert len(answers_on) > 5 and answers_on == answers_off
    assert events_on == events_off and text_on == text_off
    assert drafted_off == 0 and accepted > 0 and drafted >= accepted


def test_a_new_utterance_drafts_the_previous_one_s_opening(quantised_engine):
    """A new utterance's first answer (automatic language) usually repeats the language header the previous one
    answered: the previous prompt tail and header, given as ``opening``, are verified in one batch, and the answer
    is the one decoding without them gives."""
    audio = stream_clip("quiet_then_loud")[: 2 * 16000]
    first = EngineChunkDecoder(quantised_engine, "", "")
    answer = first.generate(audio, "", 8)
    produced = first._answer_ids  # the prompt past the audio, then the answer's ids
    prompt = build_prompt(first.tokenizer, quantised_engine.checkpoint.special.audio, 1)
    tail = prompt.ids[prompt.audio_start + prompt.audio_count :]
    assert produced[: len(tail)] == list(tail)
    # The random fixture never says "language English<asr_text>": its own first three tokens stand in for it.
    opening = produced[: len(tail) + 3]
    assert len(produced) >= len(opening) + 1
    second = EngineChunkDecoder(quantised_engine, "", "", opening=opening)
    assert second.generate(audio, "", 8) == answer
    assert second.drafted == 2 and second.accepted == 2
    plain = EngineChunkDecoder(quantised_engine, "", "")
    assert plain.generate(audio, "", 8) == answer and plain.drafted == 0


def test_the_opening_ends_at_the_language_header(quantised_engine):
    decoder = EngineChunkDecoder(quantised_engine, "", "")
    tag = decoder.tokenizer.encode("<asr_text>")
    header = decoder.tokenizer.encode("language English") + tag
    decoder._answer_ids = [7, 8, *header, *decoder.tokenizer.encode(" some words")]
    assert decoder.opening() == [7, 8, *header]
    assert decoder.successor().opening() == [7, 8, *header]  # a successor that never decoded passes it on
    decoder._answer_ids = [7, 8, *decoder.tokenizer.encode("language None")]  # no header yet
    assert decoder.opening() == [] and decoder.successor()._answer_ids == []


def test_a_stream_s_next_decoder_opens_with_its_last_decoder_s_header(quantised_engine):
    """The decoder factory a stream gets (a new endpointed segment, a rolled window) hands each new decoder the
    opening of the one made before it."""
    stream = quantised_engine.open_stream(chunk_size_ms=640, max_tokens=8)
    first = stream.recognizer.decoder
    header = first.tokenizer.encode("language English<asr_text>")
    first._answer_ids = [5, *header, *first.tokenizer.encode(" words")]
    second = stream._decoder_factory()
    assert second is not first and second._answer_ids == [5, *header]
    second._answer_ids = [5, *first.tokenizer.encode("language French<asr_text>")]
    assert stream._decoder_factory()._answer_ids == second._answer_ids


def test_float_weights_never_draft(engine):
    """f32 products take another kernel for one row than for several: a verified draft could differ in the last
    bits from greedy steps, so float thinkers decode step by step."""
    assert not engine.thinker.verifies_drafts_exactly
    _, _, _, drafted, _ = answers_of(engine, stream_clip("quiet_then_loud"), 640, True)
    assert drafted == 0


@pytest.mark.parametrize("which", ["f32", "q8_0"])
def test_a_new_stream_decoder_reuses_the_kv_rows_before_the_audio(engine, quantised_engine, which):
    """A new segment, a rolled window or another stream starts with the same system turn and context: those
    KV rows are kept from whichever stream decoder prefilled last, and the answer is the one a fresh prefill gives."""
    chosen = engine if which == "f32" else quantised_engine
    context = "Names: " + "Ada Lovelace, Grace Hopper, Alan Turing. " * 6
    audio = stream_clip("quiet_then_loud")

    def first_decode(fresh: bool):
        stream = chosen.open_stream(language="English", chunk_size_ms=1000, max_tokens=8, context=context)
        if fresh:
            chosen.kv_owner = None
        events = stream.push(audio[16000:32000])
        decoder = stream.recognizer.decoder
        stream.cancel()
        return events, decoder.prefilled_rows, decoder._rows

    chosen.open_stream(language="English", chunk_size_ms=1000, max_tokens=8, context=context).push(
        audio[:16000]
    )
    events, prefilled, rows = first_decode(fresh=False)
    events_fresh, prefilled_fresh, _ = first_decode(fresh=True)
    assert events == events_fresh
    assert prefilled_fresh == rows.shape[0]
    tokenizer, audio_id = chosen.checkpoint.tokenizer, chosen.checkpoint.special.audio
    head = build_prompt(tokenizer, audio_id, 1, context, "English").audio_start  # rows before the audio
    least = chosen.thinker.min_prefill_rows
    assert head > 2 * least  # the context is longer than what must be prefilled
    assert prefilled == rows.shape[0] - min(head, rows.shape[0] - least)
