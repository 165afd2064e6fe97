"""Every way a live stream ends in good order gives its final transcript and ``[DONE]``, and every committed
word arrives as a ``delta`` before ``done``, the last segment's too, on every streaming route."""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from collections.abc import Iterator

import httpx
import numpy as np

from inference.audio.io import load_audio_file
from inference.contract import ErrorEvent, Snapshot
from inference.server.config import LiveLimits, ServerConfig
from inference.server.events import EventTranslator
from inference.server.registry import ModelRegistry
from tests.server.harness import SAMPLE_1, TEXT_1, running_server, s16le, wav_bytes
from tests.server.live_client import LiveResult, post_live, split

LIVE = {"model": "demo", "sample_rate": 16000, "sample_format": "s16le"}


def _ends_in_speech() -> np.ndarray:
    """Sample 1 cut right after its last loud sample: the VAD segment is still open at the end of the body."""
    audio = load_audio_file(SAMPLE_1)
    return audio[: int(np.nonzero(np.abs(audio) > 0.05)[0][-1]) + 160]


def _deltas(events: list[dict[str, object]]) -> str:
    return "".join(str(e["delta"]) for e in events if e["type"] == "transcript.text.delta")


def _ended_with_done(result: LiveResult) -> dict[str, object]:
    assert result.status == 200 and result.done_marker, result.raw_body[-500:]
    done = result.events[-1]
    assert done["type"] == "transcript.text.done", result.events
    return done


def test_a_single_utterance_arrives_as_a_delta_before_done_on_live(base_url: str) -> None:
    result = post_live(base_url, LIVE, split(s16le(_ends_in_speech()), 3200))
    done = _ended_with_done(result)
    assert done["text"] == TEXT_1 and _deltas(result.events) == TEXT_1
    assert not result.of_type("error")


def test_a_single_utterance_arrives_as_a_delta_before_done_on_sse(base_url: str) -> None:
    body = {"model": "demo", "audio": base64.b64encode(wav_bytes(_ends_in_speech())).decode(), "stream": True}
    with httpx.Client(base_url=base_url, timeout=60) as http:
        lines = [line for line in http.post("/v1/audio/transcriptions", json=body).text.splitlines() if line]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert events[-1]["type"] == "transcript.text.done" and events[-1]["text"] == TEXT_1
    assert _deltas(events) == TEXT_1


def test_a_body_ending_in_half_a_sample_drops_it_with_a_note_and_ends_with_done(base_url: str) -> None:
    result = post_live(base_url, LIVE, split(s16le(_ends_in_speech()) + b"\x01", 3200))
    done = _ended_with_done(result)
    assert done["text"] == TEXT_1 and _deltas(result.events) == TEXT_1
    (note,) = result.of_type("error")
    assert note["fatal"] is False and note["error"]["code"] == "partial_frame"
    assert "1 byte(s) were dropped" in note["error"]["message"]


def test_the_live_limit_is_off_by_default_and_ends_a_stream_with_its_transcript(
    registry: ModelRegistry,
) -> None:
    assert LiveLimits().max_stream_s is None
    audio = np.concatenate([_ends_in_speech(), np.zeros(16000, np.float32), load_audio_file(SAMPLE_1)])
    config = ServerConfig(live=LiveLimits(max_stream_s=4.5))  # the first sentence and its pause
    with running_server(config, registry) as url:
        result = post_live(url, LIVE, split(s16le(audio), 3200))
    done = _ended_with_done(result)
    assert done["text"] == TEXT_1 == _deltas(result.events).strip()
    assert done["timing"]["audio_duration_ms"] == 4500
    (note,) = result.of_type("error")
    assert note["fatal"] is False and note["error"]["code"] == "stream_limit"
    assert "--live-max-s" in note["error"]["message"]


def test_notes_carry_the_type_of_who_caused_them() -> None:
    translate = EventTranslator().translate
    shutdown = translate(ErrorEvent("server_shutting_down", "the server is shutting down", None, fatal=False))
    assert shutdown is not None and shutdown["error"]["type"] == "server_error" and shutdown["fatal"] is False
    partial = translate(ErrorEvent("partial_frame", "half a sample", "send whole frames", fatal=False))
    assert partial is not None and partial["error"]["type"] == "invalid_request_error"
    assert translate(Snapshot("x", 0)) == {"type": "transcript.text.partial", "text": "x"}


def test_a_prompt_the_model_cannot_use_is_refused_before_the_stream_starts(base_url: str) -> None:
    result = post_live(base_url, {**LIVE, "prompt": "Kubernetes"}, [s16le(_ends_in_speech())])
    assert result.status == 400, result.raw_body
    error = json.loads(result.raw_body)["error"]
    assert (
        error["param"] == "prompt"
        and error["code"] == "unsupported_parameter"
        and "'demo'" in error["message"]
    )


def test_past_the_restart_limit_a_stream_ends_with_what_was_heard_and_done() -> None:
    from inference.client import WorkerPolicy
    from tests.server.harness import fragile_model

    fragile = fragile_model(WorkerPolicy(ping_interval_s=0.2, max_restarts=0))  # the first death trips it
    models = ModelRegistry([fragile])
    models.start(threads=1)
    pieces = split(s16le(np.full(16000 * 3, 0.01, np.float32)), 3200)  # 0.1 s pieces, 30 of them

    def killing_at_10() -> Iterator[bytes]:
        for index, piece in enumerate(pieces):
            if index == 10:
                os.kill(fragile.worker_pid or 0, signal.SIGKILL)
                deadline = time.monotonic() + 30
                while fragile.client is None or fragile.client.gave_up is None:
                    assert time.monotonic() < deadline, "the client did not give up"
                    time.sleep(0.02)
            yield piece

    try:
        with running_server(ServerConfig(), models) as url:
            result = post_live(url, {"model": "fragile"}, killing_at_10(), pace_s=0.02)
    finally:
        models.close()
    done = _ended_with_done(result)
    assert done["text"].startswith("w1")
    assert done["text"] == _deltas(result.events).strip()  # a gap marker arrives as a delta too
    assert not [e for e in result.of_type("error") if e["fatal"]]
    last = result.of_type("error")[-1]["error"]
    assert last["code"] == "worker_failed" and "ends with what was transcribed before" in last["message"]
    # Whether the killed worker left pushed audio unanswered is a race with the kill: if it did, that span is a
    # gap marker in the text; if it had answered every push, the text ends there and the note says the rest of
    # the upload was not taken. Either way the text is one of the two, never a silent hole.
    words = [w for w in done["text"].split() if w.startswith("w")]
    assert words == [f"w{i}" for i in range(1, len(words) + 1)], done["text"]
