"""A browser with the server's port in reach: pages of other sites are refused (403) with the headers browsers
really send, loopback pages and allow-listed origins are not, Host is parsed strictly, and each route takes
only its own Content-Type (a page may send text/plain without asking first)."""

from __future__ import annotations

import base64

import httpx
import pytest

from inference.audio.io import load_audio_file
from inference.errors import UsageError
from inference.server.config import ServerConfig, normalized_origin, split_host
from inference.server.registry import ModelRegistry
from tests.server.harness import SAMPLE_1, TEXT_1, openai_error, running_server, s16le, wav_bytes

# What Chrome sends for a form post from https://evil.example to the server.
CROSS_SITE = {
    "origin": "https://evil.example",
    "sec-fetch-site": "cross-site",
    "sec-fetch-mode": "no-cors",
    "sec-fetch-dest": "empty",
    "user-agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/131.0 Safari/537.36",
}


def _sample_form() -> dict[str, tuple[str, bytes, str]]:
    return {"file": ("talk.wav", wav_bytes(load_audio_file(SAMPLE_1)), "audio/wav")}


def test_a_cross_site_form_post_is_refused(http: httpx.Client) -> None:
    response = http.post(
        "/v1/audio/transcriptions", files=_sample_form(), data={"model": "demo"}, headers=CROSS_SITE
    )
    message = openai_error(response, 403, "cross_site_request")
    assert "evil.example" in message and "--allow-origin" in message


def test_cross_site_without_an_origin_and_null_origins_are_refused(http: httpx.Client) -> None:
    only_fetch_site = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}
    openai_error(http.get("/v1/models", headers=only_fetch_site), 403, "cross_site_request")
    sandboxed = {"origin": "null", "sec-fetch-site": "cross-site"}  # a sandboxed frame or a file:// page
    openai_error(http.get("/v1/models", headers=sandboxed), 403, "cross_site_request")


def test_a_cross_site_live_upload_is_refused(http: httpx.Client) -> None:
    response = http.post(
        "/v1/audio/transcriptions/live?model=demo",
        content=s16le(load_audio_file(SAMPLE_1)[:16000]),
        headers={**CROSS_SITE, "content-type": "text/plain"},
    )
    openai_error(response, 403, "cross_site_request")


def test_loopback_pages_and_programs_are_answered(http: httpx.Client, base_url: str) -> None:
    port = base_url.rsplit(":", 1)[1]
    for origin in (f"http://127.0.0.1:{port}", "http://localhost:3000", "http://[::1]:8080"):
        headers = {"origin": origin, "sec-fetch-site": "same-site"}
        assert http.get("/v1/models", headers=headers).status_code == 200, origin
    assert http.get("/v1/models", headers={"sec-fetch-site": "none"}).status_code == 200  # typed in the bar
    assert http.get("/v1/models").status_code == 200  # curl, the openai client: no browser headers


def test_an_allowed_origin_may_call_and_read_the_answers(registry: ModelRegistry) -> None:
    ui = "https://captions.example:8443"
    with (
        running_server(ServerConfig(allow_origins=(ui,)), registry) as url,
        httpx.Client(base_url=url, timeout=60) as http,
    ):
        preflight = http.options(
            "/v1/audio/transcriptions",
            headers={
                "origin": ui,
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == ui
        wav = base64.b64encode(wav_bytes(load_audio_file(SAMPLE_1))).decode()
        answer = http.post(
            "/v1/audio/transcriptions",
            json={"model": "demo", "audio": wav},
            headers={"origin": ui, "sec-fetch-site": "cross-site"},
        )
        assert answer.status_code == 200 and answer.json()["text"].startswith(TEXT_1)
        assert answer.headers["access-control-allow-origin"] == ui
        other = http.get("/v1/models", headers={"origin": "https://captions.example"})  # another port
        openai_error(other, 403, "cross_site_request")


def test_with_an_api_key_origins_are_left_to_the_key(registry: ModelRegistry) -> None:
    with running_server(ServerConfig(api_key="k3y"), registry) as url, httpx.Client(base_url=url) as http:
        headers = {**CROSS_SITE, "authorization": "Bearer k3y"}
        assert http.get("/v1/models", headers=headers).status_code == 200
        openai_error(http.get("/v1/models", headers=CROSS_SITE), 401, "invalid_api_key")


@pytest.mark.parametrize(
    "host", ["localhost:evil.com", "[::1]evil.com", "127.0.0.1:80:80", "localhost:", "[::1", "127.0.0.1 x"]
)
def test_host_values_that_only_start_like_loopback_are_refused(http: httpx.Client, host: str) -> None:
    openai_error(http.get("/v1/models", headers={"host": host}), 421, "invalid_host")


def test_host_and_origin_parsing() -> None:
    assert split_host("LOCALHOST:8488") == ("localhost", "8488")
    assert split_host("[::1]:1") == ("[::1]", "1")
    assert split_host("[::1]") == ("[::1]", None)
    for bad in ("localhost:evil.com", "[::1]evil.com", "[evil.com]", "a b", "x:123456", "é.example"):
        assert split_host(bad) is None, bad
    assert normalized_origin("HTTP://LocalHost:80") == "http://localhost"
    assert normalized_origin("https://ui.example:443") == "https://ui.example"
    for bad in ("null", "ftp://x", "http://x/path", "http://user@x", "http://x:port"):
        assert normalized_origin(bad) is None, bad
    with pytest.raises(UsageError, match="not a web origin"):
        ServerConfig(allow_origins=("localhost:3000",))


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "audio/wav"])
def test_live_takes_only_raw_pcm_types(http: httpx.Client, content_type: str) -> None:
    response = http.post(
        "/v1/audio/transcriptions/live?model=demo",
        content=s16le(load_audio_file(SAMPLE_1)[:16000]),
        headers={"content-type": content_type},
    )
    assert "raw PCM" in openai_error(response, 415, "unsupported_media_type")


def test_live_accepts_octet_stream_and_no_content_type(http: httpx.Client) -> None:
    pcm = s16le(load_audio_file(SAMPLE_1))
    for headers in ({"content-type": "application/octet-stream"}, {}):
        response = http.post("/v1/audio/transcriptions/live?model=demo", content=pcm, headers=headers)
        assert response.status_code == 200 and TEXT_1 in response.text, headers


def test_file_routes_refuse_text_plain(http: httpx.Client) -> None:
    for route in ("/v1/audio/transcriptions", "/v1/audio/translations", "/v1/audio/transcriptions/details"):
        response = http.post(route, content=b'{"model": "demo"}', headers={"content-type": "text/plain"})
        openai_error(response, 415, "unsupported_media_type")


def test_serve_flags_for_origins_and_slow_clients_are_checked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from inference.cli import main

    monkeypatch.delenv("CAPTIONEER_API_KEY", raising=False)
    assert main(["serve", "--allow-origin", "localhost:3000"]) == 2
    assert "not a web origin" in capsys.readouterr().err
    for flag in ("--min-body-rate", "--header-timeout-s", "--body-window-s", "--send-timeout-s"):
        assert main(["serve", flag, "0"]) == 2
        assert "positive finite" in capsys.readouterr().err
    assert main(["serve", "--max-connections-per-client", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err
