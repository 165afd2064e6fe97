"""A 20-minute live stream through the server ends with the offline transcript of the same audio, word for word.

``/live`` has no duration limit by default (``LiveLimits.max_stream_s`` counts audio seconds, so the limit, or
its absence, is the same at any pace). The live text of the demo model does not depend on the pace either: its
stream decodes the windows its offline pass decodes, each on the same samples, once no later audio can change
them (``inference/streaming_windows.py``), so the test sends the 20 minutes as fast as the model takes them
(the upload waits on the model) and that stands for a real-time-paced stream in a fraction of its time. The
audio is a two-minute espeak recording said ten times; the offline transcript is the server's file route's.
"""

from __future__ import annotations

import io

import httpx
import numpy as np
import pytest
import soundfile

from tests.long_speech import espeak_available, recording
from tests.server.harness import s16le
from tests.server.live_client import post_live, split
from tests.text_metrics import word_edits

BLOCK_S, BLOCKS = 120.0, 10  # 20 minutes


@pytest.mark.skipif(not espeak_available(), reason="needs espeak-ng for speech")
def test_a_20_minute_stream_ends_with_the_offline_transcript_word_for_word(base_url: str) -> None:
    block = recording(BLOCK_S, seed=21).audio
    audio = np.tile(block, BLOCKS)
    pcm = s16le(audio)
    wav = io.BytesIO()  # the same 16-bit samples as a file: both routes hear exactly the same audio
    soundfile.write(wav, np.frombuffer(pcm, "<i2"), 16000, format="WAV", subtype="PCM_16")
    with httpx.Client(base_url=base_url, timeout=900) as http:
        response = http.post(
            "/v1/audio/transcriptions", data={"model": "demo"}, files={"file": wav.getvalue()}
        )
    assert response.status_code == 200, response.text[:500]
    offline = response.json()["text"]
    result = post_live(base_url, {"model": "demo", "sample_rate": 16000}, split(pcm, 32000), timeout_s=900)
    assert result.status == 200 and result.done_marker, result.raw_body[-500:]
    done = result.events[-1]
    assert done["type"] == "transcript.text.done", result.events[-3:]
    assert done["timing"]["audio_duration_ms"] == round(audio.size / 16)  # all 20 minutes, none cut
    assert not result.of_type("error")
    deltas = "".join(e["delta"] for e in result.of_type("transcript.text.delta"))
    assert deltas == done["text"]  # every committed word arrived as a delta, the last ones too
    assert len(offline.split()) > BLOCKS * 200
    if done["text"].split() != offline.split():  # say where: each block's live words against its offline ones
        block_s = block.size / 16000
        said = ["" for _ in range(BLOCKS)]
        for delta in result.of_type("transcript.text.delta"):
            said[min(int(delta["start"] // block_s), BLOCKS - 1)] += delta["delta"]
        words = len(offline.split()) // BLOCKS
        edits = [
            word_edits(text, " ".join(offline.split()[i * words : (i + 1) * words]))
            for i, text in enumerate(said)
        ]
        pytest.fail(
            f"live differs from offline: {word_edits(done['text'], offline)} word edits; by block {edits}"
        )
