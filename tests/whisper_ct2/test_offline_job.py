"""A clip fed in blocks (``WhisperEngine.open_offline_job``: one pass, each 30 s window decoded once full) gives
``transcribe``'s transcript, with word times, whatever the block size; digital silence around it included."""

from __future__ import annotations

from typing import Any

import numpy as np

from inference.offline_jobs import open_offline_job
from tests.whisper_ct2.whisper_fixtures import clip


def test_a_clip_in_blocks_gives_the_whole_clip_transcript(engine: Any) -> None:
    silence = np.zeros(16000 * 31, np.float32)
    audio = np.concatenate([clip("long40"), silence, clip("long40")[: 16000 * 12]])
    options = {"word_timestamps": True}
    whole = engine.transcribe(audio, **options).to_json()
    whole.pop("timing")
    assert whole["text"] and whole["words"]
    for size in (4001, 16000 * 30, 16000 * 47):
        job = open_offline_job(engine, **options)
        assert job.passes == 1
        for start in range(0, audio.size, size):
            job.feed(audio[start : start + size])
        job.end_pass()
        got = job.finish().to_json()
        got.pop("timing")
        assert got == whole, size
