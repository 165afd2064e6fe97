"""The rolling-window variant of R2T2 streams: endless captions without VAD, at most a window of audio decoded."""

from __future__ import annotations

import numpy as np
import pytest
from fake_decoder import FakeTokenizer
from r2t2_fixtures import HF_CHECKPOINT, load_audio, stream_variant

from inference.contract import Delta
from inference.engine import EngineRequest
from inference.errors import UsageError
from inference.families.confucius4_r2t2.engine import create_engine
from inference.families.confucius4_r2t2.lsp import StreamOptions
from inference.families.confucius4_r2t2.streaming import R2T2Stream

BLOCK = 1600  # one spoken word per 100 ms block; the block's level says which word


def word(i: int) -> str:
    return "w" + chr(97 + i % 26) + chr(97 + i // 26 % 26)


def speech(words: int) -> np.ndarray:
    return np.repeat(np.arange(words, dtype=np.float32) / np.float32(1000.0), BLOCK)


class WordReader(FakeTokenizer):
    """Transcribes every whole block into its word and continues the prefix after its last word."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
        self.calls.append(audio.size)
        levels = audio[: audio.size // BLOCK * BLOCK].reshape(-1, BLOCK)[:, 0]
        words = [word(int(round(float(v) * 1000))) for v in levels]
        said = prefix.split()
        if said and said[-1] in words:
            return "".join(" " + w for w in words[words.index(said[-1]) + 1 :])
        return " ".join(words)


def test_the_window_bounds_the_audio_and_published_text_only_grows():
    decoder = WordReader()
    window = 16 * 16000
    stream = R2T2Stream(decoder, StreamOptions(), "English", rolling_samples=window)
    audio = speech(600)  # 60 s
    deltas = []
    for start in range(0, audio.size, 4000):
        deltas += [e for e in stream.push(audio[start : start + 4000]) if isinstance(e, Delta)]
    transcript = stream.finish()
    assert max(decoder.calls) <= window
    assert len(decoder.calls) == 188  # 187 chunks of 320 ms + the flush: the cost per chunk stays flat
    committed = "".join(d.text for d in deltas)
    expected = " ".join(word(i) for i in range(600))
    assert transcript.text == expected  # each cut dropped exactly the words of the dropped audio
    assert expected.startswith(committed) and len(committed) > len(expected) - 40
    assert deltas[-1].end_s == pytest.approx(187 * 0.32)


def test_without_a_window_the_tower_limit_ends_the_stream():
    stream = R2T2Stream(WordReader(), StreamOptions(chunk_size_ms=2000), "English", max_samples=20 * 16000)
    stream.push(speech(200))
    with pytest.raises(UsageError, match="limit"):
        stream.push(speech(30))


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    path = stream_variant(HF_CHECKPOINT, tmp_path_factory.mktemp("rolling") / "w800", 800)
    made = create_engine(EngineRequest(path, "confucius4_r2t2", {"rolling_window_seconds": 8}, "cpu", 1))
    yield made
    made.close()


def test_a_rolling_engine_stream_outlives_the_tower_limit(engine):
    stream = engine.open_stream(language="English", chunk_size_ms=2000, max_tokens=4)
    clip = load_audio()["clip_long"]
    audio = np.concatenate([clip] * 4)[: 130 * 16000]  # 130 s, past the ~115 s the tower takes at once
    seen: list[int] = []
    for start in range(0, audio.size, 32000):
        stream.push(audio[start : start + 32000])
        seen.append(stream._accum_samples)
    transcript = stream.finish()
    assert max(seen) <= 8 * 16000
    assert transcript.timing is not None and transcript.timing.audio_s == pytest.approx(130.0)


def test_rolling_window_options_are_checked(engine):
    with pytest.raises(UsageError, match="fewer than 4 chunks"):
        engine.open_stream(chunk_size_ms=1000, rolling_window_seconds=3)
    with pytest.raises(UsageError, match="live streams only"):
        engine.transcribe(np.zeros(1600, np.float32), rolling_window_seconds=16)


def test_an_unendpointed_live_stream_never_ends_because_it_is_long(tmp_path_factory: pytest.TempPathFactory):
    """No window, endpointing off: past the tower's ~115 s and the thinker context the stream rolls instead of
    failing, and its published text only grows."""
    path = stream_variant(HF_CHECKPOINT, tmp_path_factory.mktemp("endless") / "w800", 800)
    engine = create_engine(EngineRequest(path, "confucius4_r2t2", {"endpointing": False}, "cpu", 2))
    try:
        stream = engine.open_stream(language="English", chunk_size_ms=2000, max_tokens=4)
        clip = load_audio()["clip_long"]
        audio = np.concatenate([clip] * 12)[: 160 * 16000]  # 160 s, past both limits
        committed = ""
        held: list[int] = []
        for start in range(0, audio.size, 32000):
            committed += "".join(
                e.text for e in stream.push(audio[start : start + 32000]) if isinstance(e, Delta)
            )
            held.append(stream._accum_samples)
        transcript = stream.finish()
    finally:
        engine.close()
    assert max(held) <= 115.4 * 16000 and held[-1] < max(held)  # it rolled
    assert transcript.timing is not None and transcript.timing.audio_s == pytest.approx(160.0)
    assert transcript.text.startswith(committed)
