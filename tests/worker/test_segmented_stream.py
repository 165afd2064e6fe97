"""VAD-segmented live streams over an offline engine, and the incremental PCM decoder for stdin/devices."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from inference.audio.io import PcmStreamDecoder, decode_raw_pcm, to_mono_16k
from inference.audio.vad import SileroVad
from inference.contract import SAMPLE_RATE, Capabilities, Delta, Snapshot, SpeechEnd, Transcript, Word
from inference.errors import UsageError
from inference.streaming import SegmentedStream, SegmenterSettings


class RecordingEngine:
    """Returns the length of each segment it is asked to transcribe, with one word spanning it."""

    family = "recording"
    capabilities = Capabilities()

    def __init__(self) -> None:
        self.calls: list[np.ndarray] = []

    def transcribe(self, audio: np.ndarray, **options: Any) -> Transcript:
        self.calls.append(audio)
        seconds = audio.size / SAMPLE_RATE
        return Transcript(
            text=f"seg{len(self.calls)}",
            language="xx",
            words=[Word(f"seg{len(self.calls)}", 0.1, seconds - 0.1)],
        )


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    from pathlib import Path

    from inference.audio.io import load_audio_file

    return load_audio_file(
        Path(__file__).resolve().parents[2] / "resources" / "samples" / "demo_sample_1.wav"
    )


def feed(stream: SegmentedStream, audio: np.ndarray, step: int = 5120) -> list[Any]:
    events: list[Any] = []
    for start in range(0, audio.size, step):
        events += stream.push(audio[start : start + step])
    return events


FINAL_ONLY = SegmenterSettings(snapshot_every_s=0)


def test_each_pause_commits_one_segment_with_stream_times(speech: np.ndarray) -> None:
    engine = RecordingEngine()
    stream = SegmentedStream(engine, SileroVad(), settings=FINAL_ONLY)
    silence = np.zeros(SAMPLE_RATE, np.float32)
    events = feed(stream, np.concatenate([silence, speech, silence, speech, silence]))
    deltas = [e for e in events if isinstance(e, Delta)]
    ends = [e for e in events if isinstance(e, SpeechEnd)]
    assert [d.text for d in deltas] == ["seg1", " seg2"] and [e.segment_id for e in ends] == [0, 1]
    first, second = ends
    speech_s = speech.size / SAMPLE_RATE
    assert 0.6 < first.start_s < 1.0 and first.end_s < 1.0 + speech_s + 0.7  # pre-roll and closing silence
    assert second.start_s > first.end_s and second.start_s < 2 + speech_s
    final = stream.finish()
    assert final.text == "seg1 seg2" and final.language == "xx" and len(engine.calls) == 2
    assert final.words[1].start_s == pytest.approx(second.start_s + 0.1)  # word times in stream time
    assert [s.start_s for s in final.segments] == [first.start_s, second.start_s]
    assert final.timing is not None and final.timing.audio_s == pytest.approx(3 + 2 * speech_s, abs=1e-3)


def test_finish_commits_the_open_segment_and_silence_costs_no_model_call(speech: np.ndarray) -> None:
    engine = RecordingEngine()
    stream = SegmentedStream(engine, SileroVad(), settings=FINAL_ONLY)
    assert feed(stream, np.zeros(3 * SAMPLE_RATE, np.float32)) == [] and engine.calls == []
    feed(stream, speech[: speech.size // 2])
    assert stream.finish().text == "seg1"


def test_flush_gives_the_last_segment_its_delta_and_speech_end(speech: np.ndarray) -> None:
    engine = RecordingEngine()
    stream = SegmentedStream(engine, SileroVad(), settings=FINAL_ONLY)
    first = feed(
        stream, np.concatenate([speech, np.zeros(SAMPLE_RATE, np.float32), speech[: speech.size // 2]])
    )
    last = stream.flush()  # the second utterance is still open: the end of the input closes it
    assert [type(e) for e in last] == [Delta, SpeechEnd] and last[0].text == " seg2"
    assert last[1].text == "seg2" and last[1].segment_id == 1
    deltas = "".join(e.text for e in first + last if isinstance(e, Delta))
    assert stream.finish().text == deltas == "seg1 seg2" and len(engine.calls) == 2  # no second decode


def test_the_open_segment_is_shown_as_snapshots_about_once_a_second(speech: np.ndarray) -> None:
    engine = RecordingEngine()
    now = [0.0]

    def clock() -> float:  # read before and after each model call: each call "takes" 0.05 s
        now[0] += 0.05
        return now[0]

    stream = SegmentedStream(engine, SileroVad(), clock=clock)
    silence = np.zeros(SAMPLE_RATE, np.float32)
    events = feed(stream, np.concatenate([silence, speech, silence]))
    snapshots = [e for e in events if isinstance(e, Snapshot)]
    delta = next(e for e in events if isinstance(e, Delta))
    voiced_s = delta.end_s - delta.start_s  # type: ignore[operator]
    assert 2 <= len(snapshots) <= voiced_s + 1  # about one per second of the growing segment
    assert events.index(snapshots[-1]) < events.index(delta) and {e.segment_id for e in snapshots} == {0}
    assert delta.text == f"seg{len(snapshots) + 1}"  # the closed segment is still decoded once more, whole
    assert [e.end_s for e in snapshots] == sorted(e.end_s for e in snapshots)


def test_a_snapshot_after_committed_text_reads_after_it_with_a_space(speech: np.ndarray) -> None:
    now = [0.0]

    def clock() -> float:  # each model call "takes" 0.05 s
        now[0] += 0.05
        return now[0]

    stream = SegmentedStream(RecordingEngine(), SileroVad(), clock=clock)
    events = feed(stream, np.concatenate([speech, np.zeros(SAMPLE_RATE, np.float32), speech]))
    first = next(e for e in events if isinstance(e, Delta))
    later = [e for e in events if isinstance(e, Snapshot) and e.segment_id == 1]
    assert later and all(e.text.startswith(" seg") for e in later)  # committed + snapshot: "seg3 seg4"
    assert not [e for e in events[: events.index(first)] if isinstance(e, Snapshot) and e.text[0] == " "]


def test_a_slow_model_is_asked_for_snapshots_less_often(speech: np.ndarray) -> None:
    now = [0.0]

    def clock() -> (
        float
    ):  # each model call "takes" 1.5 s: after the first, snapshots at most every 3 s of audio
        now[0] += 1.5
        return now[0]

    engine = RecordingEngine()
    stream = SegmentedStream(engine, SileroVad(), clock=clock)
    events = feed(stream, np.concatenate([speech, np.zeros(SAMPLE_RATE, np.float32)]))
    assert len([e for e in events if isinstance(e, Snapshot)]) == 1  # a ~3.5 s segment


def test_long_speech_is_cut_at_max_segment_length(speech: np.ndarray) -> None:
    engine = RecordingEngine()
    stream = SegmentedStream(
        engine, SileroVad(), settings=SegmenterSettings(max_segment_s=1.5, end_silence_s=2.0)
    )
    feed(stream, np.concatenate([speech] * 3))
    stream.finish()
    assert len(engine.calls) >= 3
    assert all(call.size <= 1.5 * SAMPLE_RATE + 512 for call in engine.calls)
    assert max(call.size for call in engine.calls) >= 1.5 * SAMPLE_RATE  # cut by the cap, not by a pause


def test_long_talk_is_split_at_a_short_pause_not_cut_mid_word(speech: np.ndarray) -> None:
    """Sentences 150 ms apart never pause for end_silence_s; once a segment has run split_after_s, such a pause
    ends it (with the rule off the talk is one segment)."""
    loud = np.flatnonzero(np.abs(speech) > 0.05)
    speech = speech[loud[0] : loud[-1] + 1]  # the sample's own quiet start and end would lengthen the pauses
    gap = np.zeros(int(0.15 * SAMPLE_RATE), np.float32)
    lead = np.zeros(SAMPLE_RATE, np.float32)
    audio = np.concatenate([lead, *[np.concatenate([speech, gap]) for _ in range(4)], lead])
    gaps = [(lead.size + k * (speech.size + gap.size) + speech.size) / SAMPLE_RATE for k in range(4)]

    def segments(split_after_s: float) -> list[tuple[float, float]]:
        engine = RecordingEngine()
        settings = SegmenterSettings(snapshot_every_s=0, split_after_s=split_after_s)
        stream = SegmentedStream(engine, SileroVad(), settings=settings)
        ends = [e for e in feed(stream, audio) if isinstance(e, SpeechEnd)]
        stream.finish()
        return [
            (e.start_s, e.start_s + call.size / SAMPLE_RATE)
            for e, call in zip(ends, engine.calls, strict=True)
        ]

    assert len(segments(0.0)) == 1  # the rule off: one segment, ended by the second of quiet at the end
    split = segments(speech.size / SAMPLE_RATE * 0.9)
    assert len(split) == 4  # each pause ends a segment, the last one is ended by the quiet
    for (_, cut), gap_start in zip(split[:3], gaps[:3], strict=True):
        assert gap_start < cut <= gap_start + gap.size / SAMPLE_RATE  # inside the pause


def test_misuse_is_refused() -> None:
    # Bad samples are refused where they enter (protocol.audio_payload, tests/worker/test_protocol.py); the
    # worker's stream takes what crossed the boundary as it is.
    stream = SegmentedStream(RecordingEngine(), SileroVad())
    stream.finish()
    with pytest.raises(UsageError, match="push after finish"):
        stream.push(np.zeros(10, np.float32))
    with pytest.raises(UsageError, match="unknown segmenter option"):
        SegmenterSettings.from_options({"silence": 1})
    with pytest.raises(UsageError, match="thresholds"):
        SegmenterSettings.from_options({"threshold": 0.3, "release": 0.5})


@pytest.mark.parametrize(
    ("fmt", "rate", "channels"), [("s16le", 16000, 1), ("s16le", 44100, 2), ("f32le", 48000, 1)]
)
def test_pcm_decoded_in_odd_pieces_equals_decoding_it_whole(fmt: str, rate: int, channels: int) -> None:
    rng = np.random.default_rng(3)
    frames = rng.uniform(-0.5, 0.5, (rate // 2, channels)).astype(np.float32)
    data = (np.round(frames * 32767).astype("<i2") if fmt == "s16le" else frames.astype("<f4")).tobytes()
    whole = to_mono_16k(decode_raw_pcm(data, fmt, channels), rate)
    decoder = PcmStreamDecoder(fmt, rate, channels)
    pieces, cuts = [], [0, 1, 777, 4097, 20001, len(data)]
    for start, end in zip(cuts, cuts[1:], strict=False):
        pieces.append(decoder.feed(data[start:end]))
    pieces.append(decoder.feed(b"", last=True))
    streamed = np.concatenate(pieces)
    assert abs(streamed.size - whole.size) <= 1
    n = min(streamed.size, whole.size)
    tolerance = 0 if rate == 16000 else 2e-3  # soxr's stream and one-shot filters differ only at the edges
    assert np.max(np.abs(streamed[100 : n - 100] - whole[100 : n - 100])) <= tolerance
