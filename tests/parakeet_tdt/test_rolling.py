"""Phonon-2's rolling live policy (families.md §3) on the Phonon-style tiny fixture."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from parakeet_fixtures import audio_path
from phonon_variant import make_phonon_variant

from inference.audio.io import load_audio_file
from inference.contract import Delta, Snapshot, SpeechEnd, Stream, StreamEvent, Transcript
from inference.engine import load_engine
from inference.errors import UsageError
from inference.families.parakeet_tdt.engine import ParakeetEngine
from inference.families.parakeet_tdt.rolling import RollingStream

BLOCK = 800


@pytest.fixture(scope="module")
def phonon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ParakeetEngine]:
    eng = load_engine(make_phonon_variant(tmp_path_factory.mktemp("phonon") / "tiny_phonon"), backend="cpu", threads=2)
    assert isinstance(eng, ParakeetEngine)
    yield eng
    eng.close()


@pytest.fixture
def decodes(phonon: ParakeetEngine, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length (samples) of every segment the stream decodes, in order."""
    lengths: list[int] = []
    original = phonon.decode_full_context

    def spy(samples, span, budget, bias=None):  # type: ignore[no-untyped-def]
        lengths.append(span.length)
        return original(samples, span, budget, bias)

    monkeypatch.setattr(phonon, "decode_full_context", spy)
    return lengths


def blocks(*levels: tuple[float, int], seed: int = 0) -> np.ndarray:
    """Noise blocks with a given RMS: (rms, number of 50 ms blocks), in order."""
    rng = np.random.default_rng(seed)
    parts = []
    for rms, count in levels:
        noise = rng.normal(0.0, 1.0, count * BLOCK)
        if rms == 0:
            parts.append(np.zeros(count * BLOCK))
            continue
        for b in range(count):  # exact RMS per block, so the gate decisions are known
            block = noise[b * BLOCK : (b + 1) * BLOCK]
            noise[b * BLOCK : (b + 1) * BLOCK] = block * rms / np.sqrt(np.mean(block**2))
        parts.append(noise)
    return np.concatenate(parts).astype(np.float32)


def stream_all(stream: Stream, audio: np.ndarray, chunk: int) -> tuple[list[StreamEvent], Transcript]:
    events: list[StreamEvent] = []
    for start in range(0, audio.size, chunk):
        events.extend(stream.push(audio[start : start + chunk]))
    return events, stream.finish()


def test_opens_a_rolling_stream(phonon: ParakeetEngine) -> None:
    stream = phonon.open_stream()
    assert isinstance(stream, RollingStream) and isinstance(stream, Stream)
    stream.cancel()


def test_snapshot_and_commit_schedule(phonon: ParakeetEngine, decodes: list[int]) -> None:
    # 10 silent blocks, 40 voiced, then quiet blocks below 18 % of the peak.
    audio = blocks((0.0, 10), (0.1, 40), (0.015, 20))
    stream_all(phonon.open_stream(), audio, 1600)
    # The segment includes the leading silence: voiced at 8800 samples (>= 5600: a snapshot at once), then
    # every 8000 while the segment is voiced (also in the pause); the last voiced block ends at 40000 and the
    # commit comes 11200 later. The 6 quiet blocks left form a new segment whose peak is their own level, so
    # they count as voiced there, and finish commits them.
    assert decodes == [8800, 16800, 24800, 32800, 40800, 48800, 51200, 4800]


def test_the_gate_follows_the_segment_peak(phonon: ParakeetEngine, decodes: list[int]) -> None:
    audio = blocks((0.1, 20), (0.02, 40))  # 0.02 > 0.18 x 0.1: still voiced, no commit
    stream_all(phonon.open_stream(), audio, 800)
    assert decodes == [5600, 13600, 21600, 29600, 37600, 45600] + [48000]  # the last one: finish commits
    decodes.clear()
    audio = blocks((0.003, 30), (0.0039, 30))  # under the 0.004 floor: never voiced, never decoded
    stream_all(phonon.open_stream(), audio, 800)
    assert decodes == []


def test_a_phrase_is_capped_at_30_s(phonon: ParakeetEngine, decodes: list[int]) -> None:
    audio = blocks((0.05, 600), (0.05, 10))
    events, final = stream_all(phonon.open_stream(), audio, 16000)
    assert 480000 in decodes  # the commit at the cap
    assert decodes[decodes.index(480000) + 1 :][-1] == 8000  # finish commits the 10 blocks after it
    ends = [e for e in events if isinstance(e, SpeechEnd)]
    assert ends and ends[0].end_s == pytest.approx(30.0)


def test_unvoiced_audio_is_trimmed_at_the_cap(phonon: ParakeetEngine, decodes: list[int]) -> None:
    audio = np.concatenate([blocks((0.001, 610)), blocks((0.2, 20))])
    events, final = stream_all(phonon.open_stream(), audio, 8000)
    # At 30 s the unvoiced segment keeps its last second; 10 more quiet blocks follow, then speech.
    assert decodes[0] == 16000 + 10 * BLOCK + BLOCK
    starts = [e.start_s for e in events if isinstance(e, Snapshot | Delta | SpeechEnd)]
    assert starts and all(s == pytest.approx(29.0) for s in starts)
    assert final.segments and final.segments[0].start_s == pytest.approx(29.0)


def test_events_obey_their_contract_and_commits_equal_offline(phonon: ParakeetEngine) -> None:
    pause = np.zeros(16000, np.float32)
    medium, short = load_audio_file(audio_path("medium")), load_audio_file(audio_path("short"))
    audio = np.concatenate([pause, medium, pause, short, pause])
    events, final = stream_all(phonon.open_stream(), audio, 1600)
    assert final.language == "en"
    committed = "".join(e.text for e in events if isinstance(e, Delta))
    assert committed == final.text and final.text
    assert " ".join(s.text for s in final.segments) == final.text
    open_id, snapshots_seen, ended = 0, 0, set()
    for event in events:
        assert isinstance(event, Snapshot | Delta | SpeechEnd)
        assert event.segment_id == open_id and event.segment_id not in ended
        if isinstance(event, Snapshot):
            snapshots_seen += 1
            assert not event.text or event.text.startswith(" ") == (event.segment_id > 0 and bool(committed))
        if isinstance(event, SpeechEnd):
            ended.add(open_id)
            open_id += 1
    assert snapshots_seen >= 3 and len(final.segments) >= 2
    for segment in final.segments:  # each commit is the offline full-context decode of its samples
        start, end = round(segment.start_s * 16000), round(segment.end_s * 16000)
        assert phonon.transcribe(audio[start:end], audio_chunk_mode="none").text == segment.text
        assert all(segment.start_s - 1e-9 <= w.start_s <= w.end_s <= segment.end_s + 1e-9 for w in segment.words)
    assert [w for s in final.segments for w in s.words] == final.words


def test_hotwords_and_budget_in_the_stream(phonon: ParakeetEngine) -> None:
    audio = np.concatenate([load_audio_file(audio_path("medium")), np.zeros(16000, np.float32)])
    _events, plain = stream_all(phonon.open_stream(), audio, 1600)
    events, biased = stream_all(phonon.open_stream(hotwords="umbrella"), audio, 1600)
    assert biased.text != plain.text and "umbrella" in biased.text
    assert any("umbrella" in e.text for e in events if isinstance(e, Snapshot))
    _events, capped = stream_all(phonon.open_stream(max_tokens=5), audio, 1600)
    assert 0 < len(capped.token_ids) <= 5


def test_finish_commits_the_tail_and_misuse_errors(phonon: ParakeetEngine) -> None:
    stream = phonon.open_stream()
    audio = load_audio_file(audio_path("short"))[:20150]  # speech to the end, not a whole number of blocks
    events = stream.push(audio)
    assert not any(isinstance(e, Delta) for e in events)  # no 700 ms pause yet
    final = stream.finish()
    assert final.text and final.segments[0].end_s == pytest.approx(20150 / 16000)
    with pytest.raises(UsageError, match="already finished"):
        stream.finish()
    with pytest.raises(UsageError, match="already finished"):
        stream.push(audio)
    fresh = phonon.open_stream()
    with pytest.raises(UsageError, match="NaN"):
        fresh.push(np.array([0.0, np.inf], np.float32))
    with pytest.raises(UsageError, match="16000 Hz"):
        fresh.push(audio, sample_rate=8000)
    with pytest.raises(UsageError, match="a gap"):
        fresh.push(audio, start_sample=10)
    empty = phonon.open_stream().finish()
    assert (empty.text, empty.words, empty.language) == ("", [], "en")


def test_the_stream_keeps_its_own_copy_of_pushed_audio(phonon: ParakeetEngine) -> None:
    audio = np.concatenate([load_audio_file(audio_path("short")), np.zeros(16000, np.float32)])
    _events, expected = stream_all(phonon.open_stream(), audio, 1600)
    stream = phonon.open_stream()
    reused = np.empty(1600, np.float32)  # a capture loop that refills one buffer
    for start in range(0, audio.size, 1600):
        piece = audio[start : start + 1600]
        reused[: piece.size] = piece
        stream.push(reused[: piece.size])
        reused[:] = 0.5
    assert stream.finish().token_ids == expected.token_ids
