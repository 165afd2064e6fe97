"""Buffered live streaming of stock Parakeet-TDT (docs/families/parakeet_tdt.md §6.4) against the offline long-form path."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from parakeet_fixtures import MODELS, audio_path, expected, model_dir

from inference.audio.io import load_audio_file
from inference.audio.spans import plan_long_form_windows
from inference.contract import Delta, Snapshot, Stream, StreamEvent, Transcript
from inference.engine import load_engine
from inference.errors import UsageError
from inference.families.parakeet_tdt.engine import ParakeetEngine
from inference.families.parakeet_tdt.streaming import BufferedStream, center_window

LOW_LATENCY = {"audio_chunk_duration_sec": 1.0, "left_context_sec": 4.0, "right_context_sec": 1.0}


@pytest.fixture(scope="module", params=MODELS)
def engine(request: pytest.FixtureRequest) -> Iterator[tuple[str, ParakeetEngine]]:
    eng = load_engine(model_dir(request.param), backend="cpu", threads=2)
    assert isinstance(eng, ParakeetEngine)
    yield request.param, eng
    eng.close()


def _audio(clip: str) -> np.ndarray:
    return load_audio_file(audio_path(clip))


def stream_all(stream: Stream, audio: np.ndarray, chunk: int) -> tuple[list[StreamEvent], Transcript]:
    events: list[StreamEvent] = []
    for start in range(0, audio.size, chunk):
        events.extend(stream.push(audio[start : start + chunk]))
    return events, stream.finish()


def check_event_contract(events: list[StreamEvent], final: Transcript, audio_s: float) -> None:
    """Deltas are append-only and add up to a prefix of the final text; snapshots follow the committed text."""
    committed = ""
    last_end = 0.0
    for event in events:
        assert isinstance(event, Delta | Snapshot) and event.segment_id == 0
        if isinstance(event, Delta):
            assert event.text and (not committed or event.text.startswith(" "))
            committed += event.text
            assert event.start_s is not None and event.end_s is not None
            assert last_end - 1e-9 <= event.start_s <= event.end_s <= audio_s
            last_end = event.end_s
        else:
            assert event.end_s is not None and event.end_s <= audio_s + 1e-9
            assert not committed or not event.text or event.text.startswith(" ")
            assert event.start_s is None or event.start_s >= last_end - 1e-9
    assert final.text.startswith(committed)


def test_capabilities(engine) -> None:  # type: ignore[no-untyped-def]
    _model, eng = engine
    assert eng.capabilities.streaming and eng.capabilities.snapshots and not eng.capabilities.hotwords
    stream = eng.open_stream()
    assert isinstance(stream, Stream) and isinstance(stream, BufferedStream)
    stream.cancel()


@pytest.mark.parametrize("chunk", [32000, 4999, 800])
def test_a_streamed_file_equals_the_long_form_reference(engine, chunk: int) -> None:  # type: ignore[no-untyped-def]
    model, eng = engine
    ref = expected(model)["long_form"]  # transformers 5.23, windows 2/10/2 s (the session defaults)
    audio = _audio("long")
    events, final = stream_all(eng.open_stream(), audio, chunk)
    assert final.token_ids == ref["token_ids"]
    assert final.text == ref["text"]
    offline = eng.transcribe(audio, audio_chunk_mode="fixed")
    assert (final.text, final.words, final.token_ids) == (offline.text, offline.words, offline.token_ids)
    assert final.timing is not None and final.timing.audio_s == pytest.approx(audio.size / 16000)
    check_event_contract(events, final, audio.size / 16000)
    assert any(isinstance(e, Delta) for e in events) and any(isinstance(e, Snapshot) for e in events)


@pytest.mark.parametrize("clip", ["short", "medium", "noisy"])
def test_other_windows_and_clips_equal_offline_long_form(clip: str) -> None:
    audio = _audio(clip)
    with load_engine(model_dir("tiny_b"), backend="cpu", threads=2, session_options=LOW_LATENCY) as eng:
        offline = eng.transcribe(audio, audio_chunk_mode="fixed")
        events, final = stream_all(eng.open_stream(), audio, 3200)
        assert (final.text, final.words, final.token_ids) == (offline.text, offline.words, offline.token_ids)
        check_event_contract(events, final, audio.size / 16000)
        # Each push of the preferred chunk (the center) settles at most one window.
        assert len([e for e in events if isinstance(e, Snapshot)]) <= -(-audio.size // 16000)


def test_token_budget_is_carried_across_centers(engine) -> None:  # type: ignore[no-untyped-def]
    model, eng = engine
    ref = expected(model)["long_form"]["token_ids"]
    budget = len(ref) // 2
    _events, final = stream_all(eng.open_stream(max_tokens=budget), _audio("long"), 16000)
    assert final.token_ids == ref[:budget]


def test_digital_silence_is_skipped_like_offline(engine) -> None:  # type: ignore[no-untyped-def]
    _model, eng = engine
    silence = np.zeros(16000 * 16, np.float32)  # longer than a whole window (14 s)
    audio = np.concatenate([_audio("short"), silence, _audio("quiet")])
    offline = eng.transcribe(audio, audio_chunk_mode="fixed")
    _events, final = stream_all(eng.open_stream(), audio, 8000)
    assert (final.text, final.words, final.token_ids) == (offline.text, offline.words, offline.token_ids)
    events, final = stream_all(eng.open_stream(), silence, 8000)
    assert (final.text, final.token_ids, events) == ("", [], [])
    empty = eng.open_stream().finish()
    assert (empty.text, empty.words, empty.token_ids) == ("", [], [])


def test_windows_match_the_long_form_plan() -> None:
    for n in (1, 31999, 32000, 47000, 160000, 480023):
        for center, left, right in ((32000, 160000, 32000), (16000, 64000, 16000), (20000, 0, 0)):
            plan = plan_long_form_windows(n, center, left, right)
            got, offset, cs = [], 0, 0
            while cs < n:
                window = center_window(cs, n, center, left, right, offset)
                got.append(window)
                offset += window.kept_frames
                cs = window.center.end
            assert got == plan


def test_old_audio_is_dropped(engine) -> None:  # type: ignore[no-untyped-def]
    _model, eng = engine
    stream = eng.open_stream()
    assert isinstance(stream, BufferedStream)
    audio = np.tile(_audio("medium"), 3)
    for start in range(0, audio.size, 16000):
        stream.push(audio[start : start + 16000])
        assert stream._buffer.size <= 16000 * (10 + 2 + 2) + 16000
    assert stream.received_samples == audio.size
    stream.cancel()


def test_misuse_errors(engine) -> None:  # type: ignore[no-untyped-def]
    _model, eng = engine
    stream = eng.open_stream()
    chunk = np.zeros(1600, np.float32)
    with pytest.raises(UsageError, match="16000 Hz"):
        stream.push(chunk, sample_rate=48000)
    with pytest.raises(UsageError, match="float32"):
        stream.push(chunk.astype(np.float64))
    with pytest.raises(UsageError, match="1-D"):
        stream.push(np.zeros((800, 2), np.float32))
    with pytest.raises(UsageError, match="NaN"):
        stream.push(np.full(10, np.nan, np.float32))
    assert stream.push(chunk, start_sample=0) == []
    with pytest.raises(UsageError, match="a gap"):
        stream.push(chunk, start_sample=3200)
    with pytest.raises(UsageError, match="an overlap"):
        stream.push(chunk, start_sample=0)
    stream.push(chunk, start_sample=1600)
    stream.finish()
    with pytest.raises(UsageError, match="already finished"):
        stream.push(chunk)
    with pytest.raises(UsageError, match="already finished"):
        stream.finish()
    cancelled = eng.open_stream()
    cancelled.cancel()
    cancelled.cancel()
    with pytest.raises(UsageError, match="already finished or cancelled"):
        cancelled.push(chunk)
    with pytest.raises(UsageError, match="audio_chunk_mode=vad"):
        eng.open_stream(audio_chunk_mode="vad")
    with pytest.raises(UsageError, match="Phonon-2"):
        eng.open_stream(hotwords="captioneer")


def _whole_stream_events(tok, tokens: list[int], split: int, committed: str, keep: bool) -> tuple[str, str]:
    """(delta text, snapshot tail) as decoding every token of the stream gives them."""
    whole = tok.decode(tokens[:split], keep_language_tags=keep)
    full = tok.decode(tokens, keep_language_tags=keep)
    return whole[len(committed) :], full[len(whole) :] if full.startswith(whole) else ""


@pytest.mark.parametrize("keep_tags", [False, True])
def test_window_text_decoded_from_the_last_commit_points_equals_decoding_the_whole_stream(
    engine, keep_tags: bool
) -> None:  # type: ignore[no-untyped-def]
    """A window's delta and snapshot decode only the tokens since the commit point before the last (so their cost
    stays flat on an endless stream); random token runs, byte pieces, tags and special ids included, they equal
    what decoding all of the stream's tokens gives."""
    from inference.audio.spans import LongFormWindow, Span
    from inference.families.parakeet_tdt.decoder import TokenStep
    from inference.families.parakeet_tdt.streaming import _Window

    _, eng = engine
    tok = eng.tokenizer
    stream = eng.open_stream(keep_language_tags=keep_tags)
    assert isinstance(stream, BufferedStream)
    window = _Window(LongFormWindow(Span(0, 1), Span(0, 1), 0, 0, 0), None)  # no look-ahead frames
    rng = np.random.default_rng(7)
    vocab = tok.vocab_size if hasattr(tok, "vocab_size") else eng.config.vocab_size
    ids: list[int] = []
    committed = ""
    for step in range(300):
        # Mostly short runs; now and then a long word (no word start for a while) or none at all.
        for _ in range(int(rng.integers(0, 12 if step % 17 else 40))):
            ids.append(int(rng.integers(0, vocab)))
        stream._tokens = [TokenStep(t, i, 1) for i, t in enumerate(ids)]
        split = stream._word_start(stream._tokens)
        delta, tail = _whole_stream_events(tok, ids, split, committed, keep_tags)
        events = stream._events(window)
        assert "".join(e.text for e in events if isinstance(e, Delta)) == delta
        committed += delta
        assert stream._snapshot == tail
