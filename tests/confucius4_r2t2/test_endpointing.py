"""Endpointed R2T2 streams (docs/families/confucius4_r2t2.md §7.5) with a fake VAD and a decoder that counts speech."""

from __future__ import annotations

import numpy as np
import pytest
from fake_decoder import FakeTokenizer

from inference.contract import Delta, Snapshot, SpeechEnd
from inference.families.confucius4_r2t2.endpointing import (
    FRAME,
    EndpointedStream,
    EndpointOptions,
    SpeechDetector,
)
from inference.families.confucius4_r2t2.lsp import StreamOptions
from inference.families.confucius4_r2t2.postprocess import ASR_TEXT_TAG

SPEECH = np.float32(0.1)


def word(i: int) -> str:
    return "w" + chr(97 + i % 26) + chr(97 + i // 26)


class SpeechCountingDecoder(FakeTokenizer):
    """Its transcript is one word per 1600 non-zero samples; it continues whatever prefix it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []
        self.budgets: list[int] = []  # max_tokens of each call

    def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
        self.calls.append(audio.size)
        self.budgets.append(max_tokens)
        full = " ".join(word(i) for i in range(int(np.count_nonzero(audio)) // 1600))
        return full[len(prefix) :] if full.startswith(prefix) else full


class LevelVad:
    """Speech probability 0.9 for a frame holding any non-zero sample, else 0."""

    def process(self, frame: np.ndarray) -> float:
        assert frame.size == FRAME
        return 0.9 if np.any(frame) else 0.0

    def snapshot(self) -> str:
        return ""  # no memory

    def restore(self, snapshot: str) -> None:
        pass


def frames(*runs: tuple[int, bool]) -> np.ndarray:
    return np.concatenate([np.full(n * FRAME, SPEECH if speech else 0.0, np.float32) for n, speech in runs])


def push_live(stream: EndpointedStream, audio: np.ndarray) -> list:
    """Push as a live source does, a chunk at a time (a longer push is a backlog, decoded once: catch-up)."""
    step = stream.options.chunk_samples
    return [
        event for start in range(0, audio.size, step) for event in stream.push(audio[start : start + step])
    ]


def make(endpoints: EndpointOptions | None = None) -> tuple[EndpointedStream, list[SpeechCountingDecoder]]:
    made: list[SpeechCountingDecoder] = []

    def factory() -> SpeechCountingDecoder:
        made.append(SpeechCountingDecoder())
        return made[-1]

    stream = EndpointedStream(factory, StreamOptions(), endpoints or EndpointOptions(), LevelVad(), "English")
    return stream, made


def test_the_detector_pads_speech_and_waits_for_the_silence():
    detector = SpeechDetector(EndpointOptions(threshold=0.4, min_silence_ms=200, speech_pad_ms=50))
    assert detector.frame(0.1, 0) == (False, None)
    assert detector.frame(0.9, 512) == (True, None)
    assert detector.frame(0.3, 1024) == (False, None)  # between the thresholds: still speech
    silence_from = 2048  # the end of the first frame below 0.25
    assert detector.frame(0.1, 1536) == (False, None)
    results = [detector.frame(0.0, start) for start in range(2048, 2048 + 10 * 512, 512)]
    ends = [span for _, span in results if span]
    assert ends == [(0, silence_from + 800)]  # padded by 50 ms both sides (the start clamps at 0)
    first_end = next(i for i, (_, span) in enumerate(results) if span)
    assert 2048 + (first_end + 1) * 512 - silence_from >= 3200 > 2048 + first_end * 512 - silence_from


def test_two_utterances_make_two_segments_with_seeds_speech_ends_and_a_joined_text():
    stream, decoders = make()
    audio = frames((31, False), (63, True), (37, False), (31, True), (19, False))
    events = push_live(stream, audio)
    events += stream.flush()  # the second segment ended in a push that had decoded: its flush waited
    transcript = stream.finish()
    ends = [e for e in events if isinstance(e, SpeechEnd)]
    # segment 0: the 31 silent frames are its seed; it ends 8 frames after the speech (200 ms of silence)
    first = " ".join(word(i) for i in range(63 * FRAME // 1600))
    second = " ".join(word(i) for i in range(31 * FRAME // 1600))
    assert [(e.segment_id, e.start_s, e.end_s, e.text, e.language) for e in ends] == [
        (0, 0.0, 102 * FRAME / 16000, first, "English"),
        (1, 102 * FRAME / 16000, 170 * FRAME / 16000, second, "English"),
    ]
    deltas = [e for e in events if isinstance(e, Delta)]
    assert {d.segment_id for d in deltas} == {0, 1}
    assert [d.text[0] == " " for d in deltas if d.segment_id == 1][0]  # a new segment's first delta
    committed = "".join(d.text for d in deltas)
    # Each flush commits its segment's last words too (a chunk's delta stops 5 words short): the deltas add up
    # to the final text across the utterance boundary, as the CLI's and /live's outputs need.
    flushes = [events[i - 1] for i, e in enumerate(events) if isinstance(e, SpeechEnd)]
    assert all(isinstance(d, Delta) and len(d.text.split()) >= 5 for d in flushes)
    assert committed.split(" " + word(0))[0] == first
    snapshots = [e for e in events if isinstance(e, Snapshot)]
    assert {e.segment_id for e in snapshots} == {0, 1}
    # after earlier committed text, a segment's provisional words start with the joining space
    assert all(e.text.startswith(" ") for e in snapshots if e.segment_id == 1 and e.text)
    last_of_first = max(i for i, e in enumerate(events) if isinstance(e, Snapshot) and e.segment_id == 0)
    assert isinstance(events[last_of_first + 1], Delta | SpeechEnd)  # the flush sends no snapshot
    assert transcript.text == first + " " + second == committed
    assert [(s.text, s.start_s) for s in transcript.segments] == [(first, 0.0), (second, 102 * FRAME / 16000)]
    # each segment has its own decoder; the trailing silence (a seed) was decoded once at finish
    assert len(decoders) == 4 and decoders[2].calls and not decoders[3].calls
    assert decoders[2].calls == [11 * FRAME]


def test_a_segment_first_decodes_its_lead_in_with_a_chunk_of_speech_then_one_decode_per_chunk():
    """The lead-in seed arrives at once when speech starts; the segment's first decode waits for a whole chunk
    of speech after it and reads everything (lead-in and speech: one decode, not one for the lead-in and its
    first frame of speech, which would cost a push a decode for no words); then one decode per chunk."""
    stream, decoders = make()
    chunk = StreamOptions().chunk_samples
    seed = min(70 * FRAME, 2 * 16000)  # the seed keeps the last 2 s of the silence
    stream.push(frames((70, False), (1, True)))
    assert decoders[0].calls == []
    speech_frames = -(-chunk // FRAME)  # the frame that completes a chunk of speech
    push_live(stream, frames((speech_frames - 2, True)))
    assert decoders[0].calls == []
    push_live(stream, frames((1, True)))
    assert decoders[0].calls == [seed + speech_frames * FRAME]
    push_live(stream, frames((40, True)))
    assert [b - a for a, b in zip(decoders[0].calls, decoders[0].calls[1:], strict=False)] == [chunk] * (
        len(decoders[0].calls) - 1
    )
    assert len(decoders[0].calls) == 1 + 40 * FRAME // chunk


@pytest.mark.parametrize("chunk_ms", [320.0, 640.0, 1000.0])
def test_live_pushes_run_one_decode_each_across_quick_restarts_and_cuts(chunk_ms):
    """Pushes of one chunk never pay for two decodes: a speech end's flush waits for the next push when the push
    decoded, and the next segment's first decode waits for a chunk past its lead-in and two past that end (a
    quick restart after 9-12 silent frames and a cut at ``max_segment_seconds`` gave 2-3 pushes of two decodes
    per chunk size before). The events are those of frame-by-frame pushes."""
    audio = frames((31, False), (63, True), (9, False), (70, True), (12, False), (300, True), (40, False))
    made: list[SpeechCountingDecoder] = []

    def factory() -> SpeechCountingDecoder:
        made.append(SpeechCountingDecoder())
        return made[-1]

    def stream() -> EndpointedStream:
        options = StreamOptions(chunk_size_ms=chunk_ms)
        return EndpointedStream(
            factory, options, EndpointOptions(max_segment_seconds=4.0), LevelVad(), "English"
        )

    by_frame = stream()
    expected = [
        e for start in range(0, audio.size, FRAME) for e in by_frame.push(audio[start : start + FRAME])
    ]
    expected += by_frame.flush()
    live, step = stream(), StreamOptions(chunk_size_ms=chunk_ms).chunk_samples
    got, per_push = [], []
    for start in range(0, audio.size, step):
        before = sum(len(d.calls) for d in made)
        got += live.push(audio[start : start + step])
        per_push.append(sum(len(d.calls) for d in made) - before)
    got += live.flush()
    assert max(per_push) == 1
    assert sum(isinstance(e, SpeechEnd) for e in got) == 5  # two pauses, two cuts in the long run, its end
    assert got == expected and live.finish().text == by_frame.finish().text


def test_a_tag_the_model_emits_is_never_published_by_a_flush():
    """A forced-language model may emit ``<asr_text>`` itself (docs/families/confucius4_r2t2.md §8 item 2): the
    flush's deltas, the speech end's text and the final text carry none, and the deltas add up to the text."""

    class TaggingDecoder(SpeechCountingDecoder):
        def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
            words = super().generate(audio, prefix.replace(ASR_TEXT_TAG, ""), max_tokens)
            return words if ASR_TEXT_TAG in prefix else ASR_TEXT_TAG + words

    stream = EndpointedStream(TaggingDecoder, StreamOptions(), EndpointOptions(), LevelVad(), "English")
    events = push_live(stream, frames((31, False), (63, True), (37, False), (31, True), (19, False)))
    events += stream.flush()
    text = stream.finish().text
    published = [e.text for e in events if isinstance(e, Delta | SpeechEnd)] + [text]
    assert text and not any(ASR_TEXT_TAG in t for t in published)
    assert "".join(e.text for e in events if isinstance(e, Delta)) == text


def test_max_segment_seconds_cuts_continuous_speech():
    stream, _ = make(EndpointOptions(max_segment_seconds=1.0))
    events = stream.push(frames((94, True)))
    events += stream.flush()
    transcript = stream.finish()
    ends = [(e.segment_id, e.start_s, e.end_s) for e in events if isinstance(e, SpeechEnd)]
    assert ends == [(0, 0.0, 1.0), (1, 1.0, 2.0), (2, 2.0, 3.0)]
    assert len(transcript.segments) == 3  # the last 128 samples hold no word
    assert transcript.text == " ".join([" ".join(word(i) for i in range(10))] * 3)


def talk_with_short_pauses(blocks: int) -> np.ndarray:
    """A second of quiet, then ``blocks`` x (1.92 s of speech, a 192 ms pause): pauses too short for
    ``min_silence_ms`` (200 ms ends speech 8 frames into a pause) but not for ``split_silence_ms`` (64 ms: 3)."""
    return np.concatenate(
        [frames((31, False))] + [frames((60, True), (6, False))] * blocks + [frames((31, False))]
    )


def test_a_long_segment_ends_at_the_first_short_pause_after_segment_split_seconds():
    audio = talk_with_short_pauses(6)  # 12.6 s of talk: under max_segment_seconds
    stream, decoders = make()  # the defaults: split after 8 s at a 64 ms pause
    events = push_live(stream, audio) + stream.flush()
    transcript = stream.finish()
    ends = [(e.segment_id, e.start_s, e.end_s) for e in events if isinstance(e, SpeechEnd)]
    # The pauses start at frames 91, 157, 223, 289, 355, 421. The one at 223 ends a dip of 64 ms at frame 225,
    # when the segment (its seed included) is 7.2 s long: too short. The one at 289 ends it at frame 291.
    assert ends[0] == (0, 0.0, 292 * FRAME / 16000)
    assert len(ends) == 2 and ends[1][0] == 1
    # four blocks of speech, then the last two: every word is in one segment, none cut in two
    assert [s.text.count(" ") + 1 for s in transcript.segments] == [
        4 * 60 * FRAME // 1600,
        2 * 60 * FRAME // 1600,
    ]
    assert "".join(e.text for e in events if isinstance(e, Delta)) == transcript.text
    assert max(size for d in decoders for size in d.calls) <= 292 * FRAME  # no decode read past the split

    unsplit, _ = make(EndpointOptions(split_after_seconds=0.0))
    events = push_live(unsplit, audio) + unsplit.flush()
    unsplit.finish()
    # without the rule the short pauses never end it: one segment, ended by the final second of quiet
    assert [e.segment_id for e in events if isinstance(e, SpeechEnd)] == [0]


def test_the_split_pause_never_lengthens_the_silence_that_ends_speech():
    detector = SpeechDetector(EndpointOptions(min_silence_ms=32, split_silence_ms=64))
    detector.frame(0.9, 0, split=True)
    results = [detector.frame(0.0, start, split=True) for start in range(512, 512 * 6, 512)]
    # 32 ms: the dip from 512 ends at the frame starting 512 samples later
    assert [i for i, (_, span) in enumerate(results) if span] == [1]


def test_a_short_burst_is_absorbed_and_silence_alone_gives_no_text():
    stream, decoders = make(EndpointOptions(min_speech_ms=500))
    events = stream.push(frames((20, False), (3, True), (40, False)))
    assert not [e for e in events if isinstance(e, SpeechEnd)]  # 96 ms of speech: no segment end
    transcript = stream.finish()
    assert transcript.text == "" and transcript.segments == []
    stream, decoders = make()
    stream.push(frames((70, False)))
    assert stream.finish().text == ""
    assert [d.calls for d in decoders] == [[32000], []]  # the last 2 s (the seed), once, at finish


def test_pushes_of_at_most_a_chunk_give_the_events_of_frame_by_frame_pushes():
    audio = frames((31, False), (63, True), (37, False), (31, True), (19, False))
    by_frame, _ = make()
    expected = [
        event
        for start in range(0, audio.size, FRAME)
        for event in by_frame.push(audio[start : start + FRAME])
    ]
    expected += by_frame.flush()
    expected_text = by_frame.finish().text
    pieces, _ = make()
    got = []
    rng = np.random.default_rng(1)
    start = 0
    while start < audio.size:
        size = int(rng.integers(1, StreamOptions().chunk_samples + 1))
        got += pieces.push(audio[start : start + size])
        start += size
    got += pieces.flush()
    assert got == expected and pieces.finish().text == expected_text


def test_misuse_is_rejected():
    stream, _ = make()
    with pytest.raises(Exception, match="float32"):
        stream.push(np.zeros(10, np.float64))
    stream.finish()
    with pytest.raises(Exception, match="push after finish"):
        stream.push(np.zeros(10, np.float32))


def test_a_ten_minute_stream_keeps_its_state_and_work_per_chunk_bounded():
    # 4 s of speech then 1 s of silence, 120 times; speech runs past max_segment_seconds once in a while
    endpoints = EndpointOptions(max_segment_seconds=3.0)
    stream, decoders = make(endpoints)
    utterance = frames((125, True), (31, False))  # 4.0 s + 0.99 s
    ends = 0
    committed = ""
    for _ in range(120):
        for start in range(0, utterance.size, 5120):
            events = stream.push(utterance[start : start + 5120])
            ends += sum(isinstance(e, SpeechEnd) for e in events)
            committed += "".join(e.text for e in events if isinstance(e, Delta))
            # nothing the stream holds grows with the length of the stream
            assert stream._accum.size + stream._buffer.size <= 3 * 16000
            assert stream._seed.size <= endpoints.gap_keep_ms * 16
    transcript = stream.finish()
    assert ends == 240  # every utterance is cut once at 3 s and ends once at the silence
    assert committed == transcript.text  # append-only across all 240 segment boundaries
    calls = [size for d in decoders for size in d.calls]
    assert max(calls) <= 3 * 16000  # each decode sees at most one segment's audio
    # one decode per 320 ms of segment audio (each utterance with its seed is at most 5 s) + two flushes
    assert len(calls) <= 120 * (5.0 / 0.32 + 2)
    assert len(transcript.segments) == 240 and transcript.timing.audio_s == pytest.approx(
        120 * 156 * FRAME / 16000
    )


def test_a_segment_that_ends_in_a_push_that_decoded_is_flushed_by_the_next_push():
    """The flush of a segment ending in a push that decoded a chunk waits for the next push (the silence after
    it decodes nothing), so that no push pays for two decodes there; its events keep their order."""
    options = StreamOptions(chunk_size_ms=1000.0)
    made: list[SpeechCountingDecoder] = []

    def factory() -> SpeechCountingDecoder:
        made.append(SpeechCountingDecoder())
        return made[-1]

    stream = EndpointedStream(factory, options, EndpointOptions(), LevelVad(), "English")
    audio = frames((94, True), (63, False))  # the end (8 frames into the silence) falls in the 4th push
    calls_per_push, ends_per_push = [], []
    for start in range(0, audio.size, 16000):
        before = sum(len(d.calls) for d in made)
        events = stream.push(audio[start : start + 16000])
        calls_per_push.append(sum(len(d.calls) for d in made) - before)
        ends_per_push.append(sum(isinstance(e, SpeechEnd) for e in events))
    # chunks decode in pushes 1-3 (push 0 holds 31 whole VAD frames: 496 samples short of a chunk); the speech
    # ends in push 3, after its chunk; push 4 runs the flush
    assert calls_per_push == [0, 1, 1, 1, 1, 0]
    assert ends_per_push == [0, 0, 0, 0, 1, 0]
    # the flush decodes the segment: its speech and the silence that ended it, not the audio pushed after
    assert made[0].calls[-1] == (94 + 8) * FRAME
    assert stream.flush() == [] and stream.finish().text == " ".join(
        word(i) for i in range(94 * FRAME // 1600)
    )
