"""A 20-minute live stream through the server ends with its whole transcript: the offline one, block by block.

``/live`` has no duration limit by default (``LiveLimits.max_stream_s`` counts audio seconds, so the limit, or
its absence, is the same at any pace): the test sends 20 minutes of speech as fast as the model takes it
(the upload waits on the model), which stands for a real-time-paced stream in a fraction of its time. The
audio is one two-minute espeak recording (ending in a pause) said ten times, so its offline transcript is
that recording's in every two-minute block; every committed word must arrive as a delta before ``done``.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from tests.long_speech import espeak_available, recording
from tests.server.harness import s16le, wav_bytes
from tests.server.live_client import post_live, split
from tests.text_metrics import word_edits

BLOCK_S, BLOCKS = 120.0, 10  # 20 minutes


@pytest.mark.skipif(not espeak_available(), reason="needs espeak-ng for speech")
def test_a_20_minute_stream_ends_with_every_word_of_the_offline_transcript(base_url: str) -> None:
    block = recording(BLOCK_S, seed=21).audio
    with httpx.Client(base_url=base_url, timeout=300) as http:
        offline = http.post(
            "/v1/audio/transcriptions", data={"model": "demo"}, files={"file": wav_bytes(block)}
        ).json()["text"]
    audio = np.tile(block, BLOCKS)
    result = post_live(
        base_url, {"model": "demo", "sample_rate": 16000}, split(s16le(audio), 32000), timeout_s=900
    )
    assert result.status == 200 and result.done_marker, result.raw_body[-500:]
    done = result.events[-1]
    assert done["type"] == "transcript.text.done", result.events[-3:]
    assert done["timing"]["audio_duration_ms"] == round(audio.size / 16)  # all 20 minutes, none cut
    assert not result.of_type("error")
    deltas = "".join(e["delta"] for e in result.of_type("transcript.text.delta"))
    assert deltas == done["text"]  # every committed word arrived as a delta, the last ones too
    # Each block's words by where its deltas lie in the audio: the last block as whole as the first.
    block_s = block.size / 16000
    said = ["" for _ in range(BLOCKS)]
    for delta in result.of_type("transcript.text.delta"):
        said[min(int(delta["start"] // block_s), BLOCKS - 1)] += delta["delta"]
    edits = [word_edits(text, offline) for text in said]
    print("words per block", len(offline.split()), "edits against offline", edits)
    # Live segments are VAD cuts decoded one by one and offline decodes the recording whole, so words next to
    # a cut may differ (the demo model: 5 to 15 of 243 per block); a block that lost a stretch would not
    # come close, and the last block is held to the same bound as the first.
    assert max(edits) <= len(offline.split()) // 10, edits
