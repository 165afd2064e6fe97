"""Whisper has no live path of its own: through the worker, live audio is captioned by VAD segments."""

from __future__ import annotations

import numpy as np

from inference.client import WorkerClient, WorkerPolicy
from inference.contract import SAMPLE_RATE, Delta, Snapshot, StreamEvent
from tests.whisper_ct2.whisper_fixtures import MODEL80, clip

POLICY = WorkerPolicy(ping_interval_s=0.2, ping_timeout_s=30.0, hang_timeout_s=30.0)


def test_live_audio_is_captioned_segment_by_segment_through_the_worker() -> None:
    gap = np.zeros(SAMPLE_RATE, np.float32)
    one, two = clip("sample1"), clip("sample2")
    audio = np.concatenate([gap, one, gap, two, gap])
    events: list[StreamEvent] = []
    with WorkerClient(POLICY) as client:
        remote = client.load(MODEL80, session_options={"compute_type": "float32"}, backend="cpu", threads=1)
        assert remote.family == "whisper_ct2" and not remote.capabilities.streaming
        stream = remote.open_stream(
            on_events=events.extend, language="de", task="translate", max_new_tokens=8
        )
        assert stream.kind == "segmented"
        step = int(0.32 * SAMPLE_RATE)
        for start in range(0, audio.size, step):
            stream.push(audio[start : start + step])
        final = stream.finish(timeout=120)
    deltas = [e for e in events if isinstance(e, Delta)]
    assert len(final.segments) == 2 and len(deltas) == 2
    first_end = (gap.size + one.size) / SAMPLE_RATE
    assert final.segments[0].start_s < 1.0 + 0.1 and final.segments[0].end_s <= first_end + 1.0
    assert final.segments[1].start_s >= first_end
    assert all(d.text.strip() for d in deltas)
    assert final.text == stream.committed_text == "".join(d.text for d in deltas)
    assert [s.text for s in final.segments] == [d.text.strip() for d in deltas]
    assert any(isinstance(e, Snapshot) for e in events)  # the open segment is shown while it grows
