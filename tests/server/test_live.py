"""``POST /v1/audio/transcriptions/live``: raw PCM in a chunked body, events back while the upload goes on."""

from __future__ import annotations

import json

import numpy as np
import soxr

from inference.server.config import LiveLimits, ServerConfig
from inference.server.registry import ModelRegistry
from tests.server.harness import SAMPLE_1, TEXT_1, running_server, s16le, two_sentences
from tests.server.live_client import post_live, split

CHUNK_S = 0.1
SPEED = 3.0  # the file is fed three times faster than real time (keeps the test short, still paced)


def test_events_arrive_while_the_upload_goes_on(base_url: str) -> None:
    audio = two_sentences()
    pieces = split(s16le(audio), int(16000 * CHUNK_S) * 2)
    result = post_live(base_url, {"model": "demo", "sample_rate": 16000}, pieces, pace_s=CHUNK_S / SPEED)
    assert result.status == 200 and result.headers["content-type"].startswith("text/event-stream")
    assert result.done_marker
    deltas = result.of_type("transcript.text.delta")
    assert deltas, result.events
    assert result.upload_done_at is not None
    assert deltas[0]["_at"] < result.upload_done_at - 0.5  # the first sentence was committed mid-upload
    duration_s = audio.size / 16000
    assert all(0 <= d["start"] <= d["end"] <= duration_s for d in deltas)  # where each lies in the audio
    assert deltas[0]["end"] < 4.5  # the first delta is in the first sentence (sample 1 lasts 3.97 s)
    done = result.events[-1]
    assert done["type"] == "transcript.text.done"
    committed = "".join(d["delta"] for d in deltas).strip()
    assert done["text"].startswith(committed) and committed.startswith(TEXT_1)
    assert "garden" in done["text"]
    assert done["timing"]["audio_duration_ms"] == round(audio.size / 16)


def test_stereo_f32_at_48k_is_converted(base_url: str) -> None:
    from inference.audio.io import load_audio_file

    mono = load_audio_file(SAMPLE_1)
    audio = soxr.resample(mono, 16000, 48000).astype("<f4")
    stereo = np.stack([audio, audio], axis=1).tobytes()
    query = {"model": "demo", "sample_rate": 48000, "channels": 2, "sample_format": "f32le"}
    result = post_live(base_url, query, split(stereo, 19200))  # odd-sized pieces: frames cut across chunks
    assert result.status == 200 and result.done_marker
    assert result.events[-1] == {**result.events[-1], "type": "transcript.text.done", "text": TEXT_1}


def _error(result: object, status: int, code: str) -> str:
    assert result.status == status, result.raw_body  # type: ignore[attr-defined]
    error = json.loads(result.raw_body)["error"]  # type: ignore[attr-defined]
    assert error["code"] == code, error
    return str(error["message"])


def test_requests_that_are_refused_before_the_stream_starts(base_url: str) -> None:
    pcm = s16le(np.sin(np.linspace(0, 400, 16000)).astype(np.float32) * 0.3)
    assert "audio file (WAV)" in _error(
        post_live(base_url, {"model": "demo"}, [SAMPLE_1.read_bytes()]), 400, "invalid_audio"
    )
    for head, kind in (
        (b"\0\0\0\x20ftypM4A ", "(MP4/M4A)"),
        (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81", "WebM"),
    ):
        assert kind in _error(
            post_live(base_url, {"model": "demo"}, [head + bytes(600)]), 400, "invalid_audio"
        )
    floats = (np.sin(np.linspace(0, 400, 16000)) * 0.3).astype("<f4").tobytes()
    assert "sample_format=f32le" in _error(
        post_live(base_url, {"model": "demo"}, [floats]), 400, "sample_format_mismatch"
    )
    assert "sample_format=s16le" in _error(
        post_live(base_url, {"model": "demo", "sample_format": "f32le"}, [pcm]), 400, "sample_format_mismatch"
    )
    _error(post_live(base_url, {"sample_rate": 16000}, [pcm]), 400, "missing_model")
    _error(post_live(base_url, {"model": "nope"}, [pcm]), 404, "model_not_found")
    assert "[1000, 384000]" in _error(
        post_live(base_url, {"model": "demo", "sample_rate": 500}, [pcm]), 400, "invalid_value"
    )
    _error(post_live(base_url, {"model": "demo", "channels": 17}, [pcm]), 400, "invalid_value")
    _error(post_live(base_url, {"model": "demo", "sample_format": "u8"}, [pcm]), 400, "invalid_value")
    _error(post_live(base_url, {"model": "demo", "hotword_lambda": 3}, [pcm]), 400, "unknown_parameter")
    _error(post_live(base_url, {"model": "demo"}, []), 400, "invalid_audio")


def test_a_partial_last_frame_is_dropped_with_a_note_and_the_stream_ends_with_done(base_url: str) -> None:
    pcm = s16le(np.zeros(8000, np.float32)) + b"\x01"
    result = post_live(base_url, {"model": "demo"}, [pcm])
    assert result.status == 200 and result.done_marker
    note, done = result.events[-2:]
    assert note["type"] == "error" and note["error"]["code"] == "partial_frame" and note["fatal"] is False
    assert done["type"] == "transcript.text.done" and done["timing"]["audio_duration_ms"] == 500


def test_a_stalled_upload_is_abandoned(registry: ModelRegistry) -> None:
    config = ServerConfig(live=LiveLimits(idle_timeout_s=0.5))
    pieces = split(s16le(np.zeros(16000, np.float32)), 8000)  # 0.25 s each
    with running_server(config, registry) as url:
        # Past the opening half second the stream has started: the stall ends it with an error event.
        result = post_live(url, {"model": "demo"}, pieces, pause_after={2: 1.5}, finish=False, timeout_s=20)
        # Before it, the stream holds no model slot and has no answer yet: the stall is a plain 408.
        early = post_live(url, {"model": "demo"}, pieces, pause_after={0: 1.5}, finish=False, timeout_s=20)
    assert result.status == 200
    error = result.events[-1]
    assert error["type"] == "error" and error["error"]["code"] == "idle_timeout" and error["fatal"] is True
    assert "no audio arrived" in _error(early, 408, "idle_timeout")
    assert registry.get("demo").active == 0
