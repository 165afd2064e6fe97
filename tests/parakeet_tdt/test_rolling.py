"""Phonon-2's rolling live policy (docs/families/parakeet_tdt.md §7.4) on the Phonon-style tiny fixture."""

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
    eng = load_engine(
        make_phonon_variant(tmp_path_factory.mktemp("phonon") / "tiny_phonon"), backend="cpu", threads=2
    )
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
        assert all(
            segment.start_s - 1e-9 <= w.start_s <= w.end_s <= segment.end_s + 1e-9 for w in segment.words
        )
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


# ------------------------------------------------------------------ bounded snapshots (snapshot_window_sec)


class ScriptedEngine:
    """Stands in for the engine where the stitching is the subject: every 80 ms frame of audio carries one
    token id in its amplitude (id = amplitude x 100; even ids begin a word). A decode that does not start at
    the phrase start garbles its first ``blind`` frames, as a decode without left context would."""

    samples_per_frame = 1280
    blind = 10

    def __init__(self) -> None:
        self.decoded_lengths: list[int] = []
        self.tokenizer = self

    # tokenizer side
    def starts_word(self, token_id: int) -> bool:
        return token_id % 2 == 0

    def decode(self, ids: list[int], keep_language_tags: bool = False) -> str:
        return "".join((" w" if self.starts_word(i) else "-") + str(i) for i in ids).strip()

    # engine side
    def decode_full_context(self, samples, span, budget, bias=None):  # type: ignore[no-untyped-def]
        from inference.families.parakeet_tdt.decoder import TokenStep
        from inference.families.parakeet_tdt.engine import SpanDecode

        audio = samples[span.start : span.end]
        self.decoded_lengths.append(audio.size)
        tokens = []
        for frame in range(audio.size // self.samples_per_frame):
            token = round(float(audio[frame * self.samples_per_frame]) * 100)
            if frame < self.blind and audio.size < self.phrase_len:
                token = 99  # no left context: garbage
            tokens.append(TokenStep(token, frame, 1))
        return SpanDecode(span, tokens[:budget] if budget is not None else tokens)

    def render(self, decoded, keep_language_tags):  # type: ignore[no-untyped-def]
        return self.decode([t.token_id for t in decoded.tokens]), []


def scripted_phrase(frames: int) -> np.ndarray:
    ids = [20 + (i * 7) % 25 for i in range(frames)]  # ids 20..44: amplitudes 0.20..0.44, always voiced
    return np.repeat(np.array(ids, np.float32) / 100, 1280)


def snapshots_of(engine: ScriptedEngine, audio: np.ndarray, window: float) -> list[str]:
    from inference.families.parakeet_tdt.options import RequestSettings

    stream = RollingStream(engine, RequestSettings.from_options({"snapshot_window_sec": window}), None)  # type: ignore[arg-type]
    texts = []
    for start in range(0, audio.size, 800):
        engine.phrase_len = start + 800  # the open phrase so far: a decode shorter than it lacks context
        texts += [e.text for e in stream.push(audio[start : start + 800]) if isinstance(e, Snapshot)]
    return texts


def test_bounded_snapshots_cost_a_window_and_stitch_without_losing_words() -> None:
    audio = scripted_phrase(250)  # 20 s of one unbroken phrase
    exact, bounded = ScriptedEngine(), ScriptedEngine()
    full = snapshots_of(exact, audio, 0.0)
    windowed = snapshots_of(bounded, audio, 4.0)
    # The reference policy re-decodes the whole phrase every 500 ms; bounded snapshots never decode more
    # than the 4 s window (64000 samples; its start is frame-aligned, so up to one 80 ms frame more).
    assert max(exact.decoded_lengths) > 300_000
    assert len(bounded.decoded_lengths) == len(exact.decoded_lengths) > 30
    assert max(bounded.decoded_lengths) < 64000 + 1280
    assert sum(bounded.decoded_lengths) < sum(exact.decoded_lengths) / 2  # 20 s: 2.3 M samples vs 6.5 M
    # Stitching loses, repeats and garbles nothing: the left-context half of each window (where the scripted
    # decoder garbles 10 frames) is never used, so every bounded snapshot equals the whole-phrase one.
    assert windowed == full and "99" not in " ".join(windowed)


def test_bounded_snapshots_keep_the_token_budget() -> None:
    from inference.families.parakeet_tdt.options import RequestSettings

    audio = scripted_phrase(150)
    texts = []
    for window in (0.0, 4.0):
        engine = ScriptedEngine()
        stream = RollingStream(
            engine, RequestSettings.from_options({"snapshot_window_sec": window, "max_tokens": 70}), None
        )  # type: ignore[arg-type]
        snapshots = []
        for start in range(0, audio.size, 800):
            engine.phrase_len = start + 800
            snapshots += [e.text for e in stream.push(audio[start : start + 800]) if isinstance(e, Snapshot)]
        texts.append(snapshots)
    token_counts = [len(text.replace("-", " ").split()) for text in texts[1]]
    assert max(token_counts) == 70 and texts[1][-1] == texts[0][-1]  # never past the budget; same last text


def test_bounded_snapshots_on_the_model_leave_commits_unchanged(
    phonon: ParakeetEngine, decodes: list[int]
) -> None:
    speech = load_audio_file(audio_path("medium"))
    # Low noise under the speech keeps every block above the gate: one phrase, committed at finish.
    peak = max(float(np.sqrt(np.mean(b**2))) for b in np.array_split(speech, speech.size // BLOCK))
    noise = np.random.default_rng(1).normal(0, 1, 3 * speech.size).astype(np.float32)
    audio = np.tile(speech, 3) + 0.3 * peak * noise
    _events, reference = stream_all(phonon.open_stream(snapshot_window_sec=0), audio, 1600)
    whole = list(decodes)
    decodes.clear()
    events, bounded = stream_all(phonon.open_stream(snapshot_window_sec=2.0), audio, 1600)
    assert bounded.text == reference.text and bounded.token_ids == reference.token_ids
    window = 2.0 * 16000 // 1280 * 1280
    assert max(whole[:-1]) > 2 * window and max(decodes[:-1]) < window + 1280  # snapshots; the last: commit
    assert decodes[-1] == whole[-1] == audio.size
    assert any(isinstance(e, Snapshot) and e.text for e in events)


@pytest.mark.parametrize(
    "cuts", [[12 * BLOCK], [30 * BLOCK, 31 * BLOCK], [45 * BLOCK, 70 * BLOCK, 95 * BLOCK]]
)
def test_a_replaced_rolling_stream_commits_what_an_undisturbed_one_does(phonon: ParakeetEngine, cuts) -> None:
    """After a worker death the client reopens the stream at the open phrase's first sample (phrases before it
    are committed): the phrases come out as they would have."""
    from tests.stream_handover import run_with_handovers

    audio = blocks((0.0, 6), (0.1, 30), (0.0, 20), (0.08, 25), (0.0, 20), (0.12, 15), (0.0, 16), seed=3)

    def make() -> RollingStream:
        stream = phonon.open_stream()
        assert isinstance(stream, RollingStream)
        return stream

    undisturbed = run_with_handovers(make, audio, [], 3 * BLOCK + 100)
    run = run_with_handovers(make, audio, cuts, 3 * BLOCK + 100)
    assert len(undisturbed.speech_ends) == 3 and undisturbed.committed.strip()  # three phrases, with text
    assert run.committed == undisturbed.committed
    assert run.final.text == undisturbed.final.text
    assert [(round(e.start_s, 3), e.text) for e in run.speech_ends] == [
        (round(e.start_s, 3), e.text) for e in undisturbed.speech_ends
    ]
