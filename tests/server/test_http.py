"""``httpx`` against a real server: the JSON form, the details route, limits, the API key and every 4xx."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from inference.errors import UsageError
from inference.server.config import ServerConfig
from inference.server.registry import ModelRegistry
from tests.server.harness import SAMPLE_1, TEXT_1, openai_error, running_server, two_sentences, wav_bytes


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_json_form_with_options_and_timing(http: httpx.Client) -> None:
    body = {
        "model": "demo",
        "audio": _b64(SAMPLE_1.read_bytes()),
        "language": "en",
        "options": {"max_tokens": 200, "audio_chunk_mode": "none"},
    }
    response = http.post("/v1/audio/transcriptions", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["text"] == TEXT_1
    timing = result["timing"]
    assert timing["audio_duration_ms"] == 3970 and timing["wall_ms"] > 0 and timing["rtf"] > 0


def test_json_form_options_are_validated_by_the_family_spec(http: httpx.Client) -> None:
    audio = _b64(SAMPLE_1.read_bytes())
    response = http.post(
        "/v1/audio/transcriptions", json={"model": "demo", "audio": audio, "options": {"beam_size": 4}}
    )
    assert "unknown request option 'beam_size'" in openai_error(response, 400, "invalid_option")
    response = http.post(
        "/v1/audio/transcriptions", json={"model": "demo", "audio": audio, "options": {"hotwords_score": 500}}
    )
    assert "hotwords_score" in openai_error(response, 400, "invalid_option")
    response = http.post("/v1/audio/transcriptions", json={"model": "demo", "audio_path": "/etc/passwd"})
    assert "--audio-dir" in openai_error(response, 400, "unsupported_parameter")
    response = http.post("/v1/audio/transcriptions", json={"model": "demo", "audio": "not base64!"})
    openai_error(response, 400, "invalid_audio")
    response = http.post("/v1/audio/transcriptions", json={"model": "demo"})
    openai_error(response, 400, "missing_audio")
    response = http.post("/v1/audio/transcriptions", json={"model": "demo", "audio": audio, "colour": "red"})
    assert "colour" in openai_error(response, 400, "unknown_parameter")
    response = http.post(
        "/v1/audio/transcriptions", content=b"{not json", headers={"content-type": "application/json"}
    )
    openai_error(response, 400, "invalid_json")


def test_details_gives_samples_and_rejects_stream(http: httpx.Client) -> None:
    files = {"file": ("a.wav", SAMPLE_1.read_bytes(), "audio/wav")}
    response = http.post("/v1/audio/transcriptions/details", files=files, data={"model": "demo"})
    assert response.status_code == 200, response.text
    details = response.json()
    assert details["text"] == TEXT_1 and details["sample_rate"] == 16000 and details["language"] == "en"
    assert [w["word"] for w in details["words"]] == TEXT_1.split()
    starts = [w["start_sample"] for w in details["words"]]
    assert starts == sorted(starts) and all(isinstance(s, int) for s in starts)
    assert all(w["end_sample"] <= 3970 * 16 for w in details["words"])
    response = http.post(
        "/v1/audio/transcriptions/details", files=files, data={"model": "demo", "stream": "true"}
    )
    assert "does not stream" in openai_error(response, 400, "invalid_value")


def test_stream_json_form_over_sse(http: httpx.Client) -> None:
    body = {"model": "demo", "audio": _b64(wav_bytes(two_sentences())), "stream": True}
    with http.stream("POST", "/v1/audio/transcriptions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert events[-1]["type"] == "transcript.text.done" and "ttft_ms" in events[-1]["timing"]
    partials = [e["text"] for e in events if e["type"] == "transcript.text.partial"]
    committed = ""
    for event in events[:-1]:  # every partial is the whole hypothesis: it starts with what is committed
        if event["type"] == "transcript.text.delta":
            committed += event["delta"]
        else:
            assert event["text"].startswith(committed)
    assert committed.strip() and partials


def test_bad_requests_are_openai_errors(http: httpx.Client) -> None:
    wav = SAMPLE_1.read_bytes()
    post = "/v1/audio/transcriptions"
    openai_error(
        http.post(post, data={"model": "demo"}, files={"nofile": ("x", b"1")}), 400, "unknown_parameter"
    )
    openai_error(http.post(post, data={"model": "demo", "language": "en"}), 400, "missing_file")
    assert "empty" in openai_error(
        http.post(post, data={"model": "demo"}, files={"file": ("e.wav", b"")}), 400, "invalid_audio"
    )
    assert "response_format" in openai_error(
        http.post(post, data={"model": "demo", "response_format": "xml"}, files={"file": ("a.wav", wav)}),
        400,
        "invalid_value",
    )
    openai_error(
        http.post(post, data={"model": "demo", "temperature": "hot"}, files={"file": ("a.wav", wav)}),
        400,
        "invalid_value",
    )
    openai_error(
        http.post(post, data={"model": "demo", "stream": "maybe"}, files={"file": ("a.wav", wav)}),
        400,
        "invalid_value",
    )
    openai_error(
        http.post(post, content=wav, headers={"content-type": "audio/wav"}), 415, "unsupported_media_type"
    )
    # Several models: 'model' is required.
    openai_error(http.post(post, files={"file": ("a.wav", wav)}), 400, "missing_model")
    # A prompt goes to the family's context option, which the worker's engine checks (Phonon-2 only).
    message = openai_error(
        http.post(post, data={"model": "demo", "prompt": "Emma"}, files={"file": ("a.wav", wav)}),
        400,
        "invalid_value",
    )
    assert "Phonon-2" in message
    openai_error(http.get("/v1/nothing"), 404, "not_found")
    openai_error(http.get(post), 405, "method_not_allowed")


def test_multipart_forms_carry_family_options_and_hotwords(http: httpx.Client) -> None:
    post, wav = "/v1/audio/transcriptions", {"file": ("a.wav", SAMPLE_1.read_bytes())}
    short = http.post(post, data={"model": "demo", "options": json.dumps({"max_tokens": 2})}, files=wav)
    assert short.status_code == 200, short.text
    assert 0 < len(short.json()["text"]) < len(TEXT_1) and TEXT_1.startswith(short.json()["text"].strip())
    assert "beam_size" in openai_error(
        http.post(post, data={"model": "demo", "options": '{"beam_size": 4}'}, files=wav),
        400,
        "invalid_option",
    )
    openai_error(http.post(post, data={"model": "demo", "options": "[1]"}, files=wav), 400, "invalid_value")
    openai_error(http.post(post, data={"model": "demo", "options": "{nope"}, files=wav), 400, "invalid_value")
    # The hotwords fields reach the family's engine, which checks them (the demo model is no Phonon-2).
    assert "Phonon-2" in openai_error(
        http.post(post, data={"model": "demo", "hotwords": "Emma, Ruth"}, files=wav), 400, "invalid_value"
    )
    openai_error(
        http.post(post, data={"model": "demo", "hotwords_score": "strong"}, files=wav), 400, "invalid_value"
    )
    both = {"model": "demo", "hotwords": "Emma", "options": json.dumps({"hotwords": "Ruth"})}
    assert "both" in openai_error(http.post(post, data=both, files=wav), 400, "invalid_value")


def test_temperature_is_accepted_with_a_note(http: httpx.Client) -> None:
    response = http.post(
        "/v1/audio/transcriptions",
        data={"model": "demo", "temperature": "0.7"},
        files={"file": ("a.wav", SAMPLE_1.read_bytes())},
    )
    assert response.status_code == 200 and response.json()["text"] == TEXT_1
    assert "temperature is accepted and ignored" in response.headers["x-captioneer-notes"]


def test_upload_and_duration_limits(registry: ModelRegistry) -> None:
    config = ServerConfig(max_upload_bytes=200_000, max_audio_s=3.0)
    with running_server(config, registry) as url, httpx.Client(base_url=url, timeout=60) as http:
        big = np.zeros(16000 * 10, np.float32)  # 320 kB as 16-bit WAV
        response = http.post(
            "/v1/audio/transcriptions", data={"model": "demo"}, files={"file": ("big.wav", wav_bytes(big))}
        )
        assert "limit" in openai_error(response, 413, "upload_too_large")
        response = http.post(
            "/v1/audio/transcriptions",
            data={"model": "demo"},
            files={"file": ("a.wav", SAMPLE_1.read_bytes())},
        )
        message = openai_error(response, 413, "audio_too_long")
        assert "lasts 4.0 s" in message and "limit of 3 s" in message
        short = wav_bytes(np.zeros(16000 * 2, np.float32))
        ok = http.post("/v1/audio/transcriptions", data={"model": "demo"}, files={"file": ("s.wav", short)})
        assert ok.status_code == 200, ok.text


def test_api_key(registry: ModelRegistry) -> None:
    with running_server(ServerConfig(api_key="s3cret"), registry) as url:
        response = httpx.get(f"{url}/v1/models")
        assert "missing" in openai_error(response, 401, "invalid_api_key")
        response = httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer wrong"})
        assert "wrong" in openai_error(response, 401, "invalid_api_key")
        response = httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer s3cret"})
        assert response.status_code == 200 and len(response.json()["data"]) == 2


def test_other_addresses_need_an_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="without an API key"):
        ServerConfig(host="0.0.0.0")
    with pytest.raises(UsageError, match="without an API key"):
        ServerConfig(host="my-laptop.local")
    assert ServerConfig(host="::1").api_key is None and ServerConfig(host="localhost").host == "localhost"
    assert ServerConfig(host="0.0.0.0", api_key="k").api_key == "k"
    with pytest.raises(UsageError, match="empty"):
        ServerConfig(api_key=" ")


def test_audio_path_only_inside_the_audio_dir(registry: ModelRegistry, tmp_path: Path) -> None:
    allowed = tmp_path / "audio"
    (allowed / "sub").mkdir(parents=True)
    (allowed / "sub" / "one.wav").write_bytes(SAMPLE_1.read_bytes())
    (tmp_path / "secret.wav").write_bytes(SAMPLE_1.read_bytes())
    (allowed / "link.wav").symlink_to(tmp_path / "secret.wav")
    with running_server(ServerConfig(audio_dir=allowed), registry) as url, httpx.Client(base_url=url) as http:

        def post(**body: object) -> httpx.Response:
            return http.post("/v1/audio/transcriptions", json={"model": "demo", **body}, timeout=60)

        ok = post(audio_path="sub/one.wav")
        assert ok.status_code == 200 and ok.json()["text"] == TEXT_1
        assert post(file=str(allowed / "sub" / "one.wav")).json()["text"] == TEXT_1  # the seeds' other name
        for escape in ("../secret.wav", str(tmp_path / "secret.wav"), "link.wav"):
            openai_error(post(audio_path=escape), 403, "path_not_allowed")
        openai_error(post(audio_path="sub/none.wav"), 400, "file_not_found")
        openai_error(post(audio_path="sub/one.wav", audio=_b64(b"x")), 400, "invalid_value")
    with pytest.raises(UsageError, match="not a directory"):
        ServerConfig(audio_dir=tmp_path / "missing")


def test_translations_are_refused_by_name_for_a_model_without_a_translate_task(http: httpx.Client) -> None:
    response = http.post(
        "/v1/audio/translations", data={"model": "demo"}, files={"file": ("a.wav", SAMPLE_1.read_bytes())}
    )
    message = openai_error(response, 400, "unsupported_task")
    assert "'demo' cannot translate" in message and "Whisper" in message


def damaged_flac() -> bytes:
    """The first demo sample as a FLAC with frame 5 (1.28-1.54 s) damaged."""
    import io

    import soundfile

    from tests.fuzz.audio_corpus import flac_frame_offsets

    audio, rate = soundfile.read(SAMPLE_1, dtype="float32")
    buffer = io.BytesIO()
    soundfile.write(buffer, audio, rate, format="FLAC", subtype="PCM_16")
    data = bytearray(buffer.getvalue())
    offsets = flac_frame_offsets(bytes(data))
    middle = (offsets[5] + offsets[6]) // 2
    data[middle : middle + 4] = bytes(b ^ 0xFF for b in data[middle : middle + 4])
    return bytes(data)


def test_a_damaged_upload_is_transcribed_past_the_damage_and_the_answer_says_so(http: httpx.Client) -> None:
    """One damaged FLAC frame: the text after it still comes (the damage is silence), and X-Captioneer-Notes
    says what was lost, with the client's file name made safe for a header."""
    name = "Vorlesung\u00fc\r\nX-Evil: 1.flac"
    response = http.post(
        "/v1/audio/transcriptions",
        files={"file": (name, damaged_flac(), "audio/flac")},
        data={"model": "demo", "response_format": "verbose_json"},
    )
    assert response.status_code == 200, response.text
    words = [w["word"] for w in response.json()["words"]]
    assert words[-3:] == ["bottle", "and", "sang"]  # after the damaged frame (1.28-1.54 s)
    notes = response.headers["x-captioneer-notes"]
    assert "is damaged at 1.28 s" in notes
    assert "x-evil" not in response.headers and "\r" not in notes and "\n" not in notes
    from inference.server.routes import _header_value

    assert (
        _header_value("talk\r\nX-Evil: 1\u00fc.flac") == "talk??X-Evil: 1\\xfc.flac"
    )  # what a raw client may send
    clean = http.post(
        "/v1/audio/transcriptions", files={"file": ("a.wav", SAMPLE_1.read_bytes())}, data={"model": "demo"}
    )
    assert "x-captioneer-notes" not in clean.headers


def test_a_damaged_upload_streamed_over_sse_gets_a_note_before_the_transcript(http: httpx.Client) -> None:
    files = {"file": ("talk.flac", damaged_flac(), "audio/flac")}
    with http.stream(
        "POST", "/v1/audio/transcriptions", files=files, data={"model": "demo", "stream": "true"}
    ) as r:
        assert r.status_code == 200
        events = [
            json.loads(line.removeprefix("data: "))
            for line in r.iter_lines()
            if line and "[DONE]" not in line
        ]
    notes = [e for e in events if e["type"] == "error"]
    assert [n["error"]["code"] for n in notes] == ["damaged_input"], notes
    assert "talk.flac is damaged at" in notes[0]["error"]["message"]
    assert events[-1]["type"] == "transcript.text.done" and events[-1]["text"].endswith("bottle and sang")
