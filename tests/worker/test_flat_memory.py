"""``captioneer transcribe FILE`` in memory flat in the file's length (issue 43 item 5): a 30-minute recording
(20 s of speech every 100 s, digital silence between, so the model's work stays small) peaks within a few MB of
a 13-minute one of the same pattern, in the client and in the worker. The shorter file is not shorter still
because the engine's own working set (its graph cache holds up to 3 window lengths) settles only after several
windows, with the whole clip as with blocks. Holding the clip would add 64 MB of float32 in the worker (and
three times that in the client, whose ``transcribe`` message copied it twice), so the bounds below fail then.
Wall-clock free: only peaks (VmHWM) are compared."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.bench.bench_long_files import transcribe, write_wav
from tests.long_speech import espeak_available, recording

PERIOD_S = 100


@pytest.mark.skipif(not espeak_available(), reason="needs espeak-ng for speech")
def test_a_long_file_peaks_as_a_short_one(tmp_path: Path) -> None:
    talk = recording(20.0, seed=45)
    period = np.zeros(PERIOD_S * 16000, np.float32)
    period[16000 : 16000 + talk.audio.size] = talk.audio
    short, long = tmp_path / "short.wav", tmp_path / "long.wav"
    write_wav(short, period, 8 * PERIOD_S)
    write_wav(long, period, 18 * PERIOD_S)
    small = transcribe(short, None, 2)
    large = transcribe(long, None, 2)
    words = len(json.loads(short.with_suffix(".json").read_text())["text"].split())
    assert words > 8 * 20 and 8 * large["words"] == 18 * words  # every period's speech was transcribed
    assert large["client_mb"] - small["client_mb"] < 30, (small, large)
    assert large["worker_mb"] - small["worker_mb"] < 30, (small, large)
