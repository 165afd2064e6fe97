"""Every way a live stream ends in good order gives its final transcript and ``[DONE]``, and every committed
word arrives as a ``delta`` before ``done``, the last segment's too, on every streaming route."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

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


KILLS = (
    6,
    8,
    10,
    12,
)  # the pieces at which the worker is SIGKILLed: the fourth death trips the restart limit


def _live_through_a_restart_limit(revive_after_s: float, wait_for_revival: bool, log: Path) -> LiveResult:
    """3 s of /live upload (0.1 s pieces) to a model whose worker may fail three times in its window: it is
    SIGKILLed as pieces 6, 8 and 10 are sent (each time once it has begun decoding the stream's audio; the upload
    waits for the restart) and as piece 12 is sent (the upload goes on once the client gave up); with
    ``wait_for_revival`` pieces 20 on are sent once a revived worker has the stream again."""
    from inference.client import WorkerPolicy
    from tests.server.harness import fragile_model

    policy = WorkerPolicy(ping_interval_s=0.2, max_restarts=3, backoff_s=(0.0,))
    fragile = fragile_model(policy, revive_after_s=revive_after_s)
    fragile.default_request_options["started_log"] = str(log)  # a line per push the worker begins
    models = ModelRegistry([fragile])
    models.start(threads=1)
    pieces = split(s16le(np.full(16000 * 3, 0.01, np.float32)), 3200)  # 0.1 s pieces, 30 of them

    def wait_for(condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 60
        while not condition():
            assert time.monotonic() < deadline, what
            time.sleep(0.02)

    def pushes_begun() -> int:
        return len(log.read_text().splitlines()) if log.exists() else 0

    def killing() -> Iterator[bytes]:
        begun = 0
        for index, piece in enumerate(pieces):
            if index in KILLS:
                # The stream is open in this worker: it began decoding a push since the last kill.
                wait_for(lambda: pushes_begun() > begun, "no push reached the worker")  # noqa: B023
                begun = pushes_begun()
                old = fragile.worker_pid
                os.kill(old or 0, signal.SIGKILL)
                if index == KILLS[-1]:
                    wait_for(
                        lambda: fragile.client is not None and fragile.client.gave_up is not None, "gave up"
                    )
                else:
                    wait_for(
                        lambda: fragile.worker_pid != old and fragile.worker_state == "running",  # noqa: B023
                        "no restart",
                    )
            if index == 20 and wait_for_revival:
                wait_for(lambda: fragile.worker_state == "running", "the worker was not revived")
            yield piece

    try:
        with running_server(ServerConfig(), models) as url:
            return post_live(url, {"model": "fragile"}, killing(), pace_s=0.02)
    finally:
        models.close()


def _gaps(text: str) -> list[tuple[float, float]]:
    return [
        (float(a), float(b)) for a, b in re.findall(r"\[… ([0-9.]+)–([0-9.]+) s not transcribed …\]", text)
    ]


def _committed_before_the_limit(result: LiveResult) -> str:
    """The deltas that arrived before the note that the restart limit tripped."""
    text = ""
    for event in result.events:
        if event["type"] == "error" and event["error"]["code"] == "worker_failed":
            return text
        if event["type"] == "transcript.text.delta":
            text += str(event["delta"])
    raise AssertionError("no worker_failed note")


def _assert_every_second_accounted_for(result: LiveResult) -> None:
    """The deltas (words and gap markers) cover the upload from 0 to 3 s end to end: no audio lost silently,
    none transcribed twice."""
    spans = sorted((e["start"], e["end"]) for e in result.of_type("transcript.text.delta"))
    assert spans[0][0] == 0.0 and spans[-1][1] == 3.0, spans
    assert all(abs(b[0] - a[1]) < 0.002 for a, b in zip(spans, spans[1:], strict=False)), spans


def test_past_the_restart_limit_a_stream_ended_before_a_revival_ends_with_what_was_heard_and_done(
    tmp_path: Path,
) -> None:
    result = _live_through_a_restart_limit(3600.0, wait_for_revival=False, log=tmp_path / "pushes")
    done = _ended_with_done(result)
    assert done["text"] == _deltas(result.events).strip()  # gap markers arrive as deltas too
    assert done["text"].startswith(_committed_before_the_limit(result).strip())
    assert done["timing"]["audio_duration_ms"] == 3000  # the whole upload was taken
    assert not [e for e in result.of_type("error") if e["fatal"]]
    notes = [e["error"] for e in result.of_type("error")]
    assert [n["code"] for n in notes] == ["worker_restarted"] * 4 + ["worker_failed"] * 2, notes
    assert "stays open" in notes[-2]["message"] and "failed 4 times in 300 s" in notes[-2]["message"]
    assert "ends with what was transcribed before" in notes[-1]["message"]
    # The audio no worker transcribed runs to the end of the upload: the unanswered audio at the last kill (when
    # the kill left some: a race) and what was held afterwards.
    _assert_every_second_accounted_for(result)
    assert _gaps(done["text"])[-1][1] == 3.0 and done["text"].endswith("…]"), done["text"]


def test_past_the_restart_limit_a_live_stream_resumes_when_the_worker_is_revived(tmp_path: Path) -> None:
    result = _live_through_a_restart_limit(1.0, wait_for_revival=True, log=tmp_path / "pushes")
    done = _ended_with_done(result)
    assert done["text"] == _deltas(result.events).strip()
    assert done["text"].startswith(_committed_before_the_limit(result).strip())  # committed text intact
    assert not [e for e in result.of_type("error") if e["fatal"]]
    notes = [e["error"] for e in result.of_type("error")]
    assert [n["code"] for n in notes] == ["worker_restarted"] * 4 + ["worker_failed"], notes
    assert "stays open" in notes[-1]["message"] and "tried in 1 s" in notes[-1]["message"]
    # The only audio lost is what the last killed worker left unanswered (before 1.2 s): what arrived while no
    # worker ran was held and transcribed by the revived one, to the end of the upload.
    assert all(end <= 1.2 for _, end in _gaps(done["text"])), done["text"]
    _assert_every_second_accounted_for(result)
