"""Catch-up decoding (docs/families/confucius4_r2t2.md §7.6): a push longer than a chunk is a backlog the client
coalesced while the worker was busy, and it costs one decode, not one per chunk; pushes of at most a chunk decode
exactly as the spec's chunk-by-chunk loop does. Scripted decoders throughout: nothing here depends on time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fake_decoder import ScriptedDecoder
from test_endpointing import LevelVad, SpeechCountingDecoder, frames, make, word
from test_rolling_window import WordReader, speech
from test_rolling_window import word as spoken_word

from inference.continuity import StreamContinuity
from inference.contract import SAMPLE_RATE, Delta, Snapshot, SpeechEnd, StreamEvent
from inference.families.confucius4_r2t2.endpointing import FRAME, EndpointedStream, EndpointOptions
from inference.families.confucius4_r2t2.lsp import LspRecognizer, StreamOptions
from inference.families.confucius4_r2t2.streaming import R2T2Stream

CHUNK = StreamOptions().chunk_samples  # 320 ms
# Answers that commit, shrink and regrow, so a skipped or extra decode would change the deltas.
ANSWERS = [
    " one",
    " one two",
    " one two three four five six seven",
    " one two three four five six seven eight nine",
    " one two three for five six seven eight nine ten eleven",
    " one two three for five six seven eight nine ten eleven twelve thirteen fourteen",
    " one two three for five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen",
    " one two three for five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen end",
]


def pieces(total: int, largest: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    out, start = [], 0
    while start < total:
        size = int(rng.integers(1, largest + 1))
        out.append((start, min(total, start + size)))
        start += size
    return out


# ------------------------------------------------------------------ plain streams


def test_a_push_of_k_chunks_costs_one_decode_over_all_of_them():
    decoder = ScriptedDecoder(ANSWERS[2:])
    stream = R2T2Stream(decoder, StreamOptions(), "English")
    stream.push(np.zeros(CHUNK, np.float32))
    stream.push(np.zeros(4 * CHUNK + 100, np.float32))  # a backlog of four chunks and a bit
    assert [size for size, _, _ in decoder.calls] == [CHUNK, 5 * CHUNK]
    stream.push(np.zeros(CHUNK - 100, np.float32))  # the bit completes the next chunk: one decode as usual
    assert [size for size, _, _ in decoder.calls] == [CHUNK, 5 * CHUNK, 6 * CHUNK]
    assert stream.decode_calls == 3
    # the backlog's decode may generate max_tokens per chunk it adds, so a backlog's words are not cut off
    assert [budget for _, _, budget in decoder.calls] == [32, 4 * 32, 32]
    # LSP counts decodes: the first unfixed_chunk_num decodes go without a prefix, however much audio they read
    assert [prefix for _, prefix, _ in decoder.calls][:2] == ["", ""] and decoder.calls[2][1]


def reference_loop(samples: int) -> tuple[list[str], str, list[tuple[int, str, int]]]:
    """The spec's loop: decode after every whole chunk, then the final flush of the tail."""
    decoder = ScriptedDecoder(ANSWERS)
    recognizer = LspRecognizer(decoder, StreamOptions(), "English")
    audio = np.zeros(samples, np.float32)
    deltas = [recognizer.decode_chunk(audio[: end * CHUNK]).delta for end in range(1, samples // CHUNK + 1)]
    if samples % CHUNK:
        recognizer.decode_chunk(audio, final=True)
    return [d for d in deltas if d], recognizer.text, decoder.calls


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pushes_of_at_most_a_chunk_decode_exactly_as_the_chunk_by_chunk_loop(seed: int):
    samples = 7 * CHUNK + 777
    want_deltas, want_text, want_calls = reference_loop(samples)
    decoder = ScriptedDecoder(ANSWERS)
    stream = R2T2Stream(decoder, StreamOptions(), "English")
    events: list[StreamEvent] = []
    for start, end in pieces(samples, CHUNK, seed):
        events += stream.push(np.zeros(end - start, np.float32))
    final = stream.finish()
    assert decoder.calls == want_calls
    assert [e.text for e in events if isinstance(e, Delta)] == want_deltas
    assert final.text == want_text
    assert final.text.startswith("".join(want_deltas))  # deltas add up to a prefix of the final text


def test_backlogged_pushes_still_commit_only_what_the_final_text_keeps():
    decoder = ScriptedDecoder(ANSWERS)
    stream = R2T2Stream(decoder, StreamOptions(), "English")
    events: list[StreamEvent] = []
    for size in (CHUNK, 3 * CHUNK, CHUNK // 2, 2 * CHUNK + CHUNK // 2, 5 * CHUNK + 9):
        events += stream.push(np.zeros(size, np.float32))
    final = stream.finish()
    assert stream.decode_calls == 5  # four pushes that completed chunks + the flush of the 9-sample tail
    committed = "".join(e.text for e in events if isinstance(e, Delta))
    assert committed and final.text.startswith(committed)
    assert any(isinstance(e, Snapshot) and e.text for e in events)  # provisional words between the deltas


def test_a_backlog_fills_a_rolling_window_chunk_by_chunk_and_keeps_every_word():
    decoder = WordReader()
    window = 16 * SAMPLE_RATE
    stream = R2T2Stream(
        decoder, StreamOptions(), "English", rolling_samples=window, decoder_factory=WordReader
    )
    audio = speech(600)  # 60 s, one word per 100 ms
    committed, start = "", 0
    for size in (4000, 4000, 97000, 5120, 180000, 5120, 40000, 4000):  # backlogs of 6 s, 11 s and 2.5 s
        committed += "".join(e.text for e in stream.push(audio[start : start + size]) if isinstance(e, Delta))
        start += size
        assert stream._accum_samples <= window
    while start < audio.size:
        committed += "".join(e.text for e in stream.push(audio[start : start + 5120]) if isinstance(e, Delta))
        start += 5120
    final = stream.finish()
    assert final.text == " ".join(spoken_word(i) for i in range(600))
    assert final.text.startswith(committed) and len(committed.split()) > 550


# ------------------------------------------------------------------ endpointed streams


def test_an_endpointed_backlog_flushes_the_segments_that_end_in_it_then_decodes_once():
    stream, decoders = make()
    speech_then_open = frames((31, False), (63, True), (37, False), (40, True))
    events = stream.push(speech_then_open)
    # segment 0 ends inside the push: its flush is its only decode; segment 1 is open: one decode at the end
    assert [len(d.calls) for d in decoders] == [1, 1]
    seg1_audio = decoders[1].calls[0]
    # a segment's first decode reads all it holds (lead-in and speech), not only whole chunks of it
    assert seg1_audio == stream._accum.size > CHUNK and stream._buffer.size == 0
    # each decode may generate max_tokens per chunk it reads first (a segment's first decode, per chunk past its
    # lead-in: segment 1's 40 frames of speech): a backlog's words are not cut off
    assert [d.budgets for d in decoders] == [
        [32 * (decoders[0].calls[0] // CHUNK)],
        [32 * (40 * FRAME // CHUNK)],
    ]
    ends = [e for e in events if isinstance(e, SpeechEnd)]
    assert [e.text for e in ends] == [" ".join(word(i) for i in range(63 * FRAME // 1600))]
    events += stream.push(frames((5, True)))  # keeping up again: one chunk at a time
    events += stream.push(frames((60, False)))  # a backlog holding the speech end
    transcript = stream.finish()
    committed = "".join(e.text for e in events if isinstance(e, Delta))
    assert committed == transcript.text  # the deltas add up to the final text, across the flushes
    by_frame, _ = make()
    audio = np.concatenate([speech_then_open, frames((5, True)), frames((60, False))])
    for start in range(0, audio.size, FRAME):
        by_frame.push(audio[start : start + FRAME])
    assert transcript.text == by_frame.finish().text


def test_endpointed_pushes_of_at_most_a_chunk_decode_as_frame_by_frame_pushes():
    audio = frames((80, False), (63, True), (37, False), (200, True), (19, False), (5, True), (30, False))
    by_frame, frame_decoders = make(EndpointOptions(max_segment_seconds=3.0))
    want = [e for start in range(0, audio.size, FRAME) for e in by_frame.push(audio[start : start + FRAME])]
    want_text = by_frame.finish().text
    for seed in (0, 1):
        stream, decoders = make(EndpointOptions(max_segment_seconds=3.0))
        got = [e for start, end in pieces(audio.size, CHUNK, seed) for e in stream.push(audio[start:end])]
        assert got == want and stream.finish().text == want_text
        assert [d.calls for d in decoders] == [d.calls for d in frame_decoders]


# ------------------------------------------------------------------ a worker killed while it is behind


def replay_backlog(
    make_stream: Callable[[], Any], audio: np.ndarray, kill_at: int, backlog_end: int
) -> tuple[str, str]:
    """Push a chunk at a time to ``kill_at``; a backlog push up to ``backlog_end`` dies unanswered with its
    worker; the new stream resumes from the last answered resume point and gets the lost audio plus the audio
    that queued meanwhile as ONE push (what the client sends); then a chunk at a time again."""
    continuity = StreamContinuity()
    events: list[StreamEvent] = []
    stream = make_stream()
    for start in range(0, kill_at, CHUNK):
        events += [continuity.adopt(e) for e in stream.push(audio[start : min(kill_at, start + CHUNK)])]
    point = stream.resume_point()
    stream.push(audio[kill_at:backlog_end])  # answered by no one: the worker dies
    continuity.worker_replaced(point.start_sample / SAMPLE_RATE, point.continues_segment, point.overlap_text)
    stream = make_stream()
    start = point.start_sample
    stream.resume(audio[start : start + point.context_samples], point.state)
    behind = min(audio.size, backlog_end + 3 * CHUNK)  # the backlog grew while the new worker started
    events += [continuity.adopt(e) for e in stream.push(audio[start + point.context_samples : behind])]
    for at in range(behind, audio.size, CHUNK):
        events += [continuity.adopt(e) for e in stream.push(audio[at : at + CHUNK])]
    final = continuity.final(stream.finish())
    return "".join(e.text for e in events if isinstance(e, Delta)), final.text


@pytest.mark.parametrize("kill_at", [10 * CHUNK, 20 * CHUNK + 100])
def test_a_plain_stream_killed_mid_backlog_loses_and_repeats_nothing(kill_at: int):
    audio = speech(120)  # 12 s

    def make_stream() -> R2T2Stream:
        return R2T2Stream(WordReader(), StreamOptions(), "English", decoder_factory=WordReader)

    committed, final = replay_backlog(make_stream, audio, kill_at, kill_at + 5 * CHUNK)
    assert final == " ".join(spoken_word(i) for i in range(120))
    assert final.startswith(committed) and len(committed.split()) > 100


@pytest.mark.parametrize("kill_frame", [40, 100, 180])
def test_an_endpointed_stream_killed_mid_backlog_loses_and_repeats_nothing(kill_frame: int):
    audio = frames((31, False), (63, True), (37, False), (90, True), (40, False))

    def make_stream() -> EndpointedStream:
        return EndpointedStream(
            SpeechCountingDecoder, StreamOptions(), EndpointOptions(), LevelVad(), "English"
        )

    committed, final = replay_backlog(make_stream, audio, kill_frame * FRAME, kill_frame * FRAME + 4 * CHUNK)
    undisturbed = make_stream()
    for start in range(0, audio.size, FRAME):
        undisturbed.push(audio[start : start + FRAME])
    assert final == undisturbed.finish().text
    assert committed == final  # endpointed deltas add up to the final text, across the worker's death
