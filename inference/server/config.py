"""Settings of ``captioneer serve`` and the check that keeps it off the network unless protected."""

from __future__ import annotations

import ipaddress
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from inference.errors import UsageError
from inference.server.live_pace import LivePaceLimit

API_KEY_ENV = "CAPTIONEER_API_KEY"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8488


@dataclass(frozen=True)
class LiveLimits:
    """Limits of one ``/v1/audio/transcriptions/live`` upload (seconds and bytes)."""

    idle_timeout_s: float = 30.0  # no body bytes for this long: the upload is abandoned
    # A stream ends (with its final transcript) after this many seconds of audio; None: it may go on for as
    # long as the client sends (a lecture, a meeting). Counted in audio, so it holds whatever the pace.
    max_stream_s: float | None = None
    max_body_bytes: int = 512 * 1024 * 1024
    max_chunk_bytes: int = 8 * 1024 * 1024
    # A stream that delivers less than this share of real time over the window (seconds waited on the client)
    # may have its model slot taken back by a request waiting for one (docs/server_limits.md §2).
    pace: LivePaceLimit = field(default_factory=LivePaceLimit)


@dataclass(frozen=True)
class ServerConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    api_key: str | None = None
    max_upload_bytes: int = 100 * 1024 * 1024  # a file upload (multipart or JSON body)
    max_audio_s: float = 3600.0  # decoded duration of one file
    max_concurrent: int = 4  # requests (files, streams, live) running at once on one model
    request_timeout_s: float = 600.0  # one file transcription
    live: LiveLimits = field(default_factory=LiveLimits)
    audio_dir: Path | None = None  # the JSON form's audio_path may name files under it (off when None)
    grace_s: float = 10.0  # on shutdown, how long requests in flight may still finish
    header_timeout_s: float = 10.0  # a request's head must arrive within this of its first byte
    max_connections_per_client: int = 64  # open connections from one remote address
    min_body_bytes_per_s: float = 1024.0  # a body slower than this over body_window_s is abandoned (408)
    body_window_s: float = 20.0
    send_timeout_s: float = 30.0  # one write to a client that reads nothing of its answer may wait this long
    allow_origins: tuple[str, ...] = ()  # web origins besides loopback ones that may call the server (CORS)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise UsageError(f"--port must be in [0, 65535], got {self.port}")
        if self.max_concurrent < 1:
            raise UsageError(f"--max-concurrent must be at least 1, got {self.max_concurrent}")
        if self.max_upload_bytes < 1 or not (
            0 < self.max_audio_s < math.inf and 0 < self.request_timeout_s < math.inf
        ):
            raise UsageError(
                "upload, duration and timeout limits must be positive finite numbers",
                "e.g. --max-audio-s 3600 --request-timeout-s 600",
            )
        if not (
            0 < self.header_timeout_s < math.inf
            and 0 < self.body_window_s < math.inf
            and 0 < self.min_body_bytes_per_s < math.inf
            and 0 < self.send_timeout_s < math.inf
        ):
            raise UsageError(
                "the header and send timeouts, body rate and body window must be positive finite numbers",
                "e.g. --header-timeout-s 10 --send-timeout-s 30 --min-body-rate 1024 --body-window-s 20",
            )
        if self.max_connections_per_client < 1:
            raise UsageError(
                f"--max-connections-per-client must be at least 1, got {self.max_connections_per_client}"
            )
        for origin in self.allow_origins:
            if normalized_origin(origin) is None:
                raise UsageError(
                    f"--allow-origin {origin!r} is not a web origin",
                    "write it as a browser sends it: scheme://host[:port], e.g. http://localhost:3000",
                )
        if self.live.max_stream_s is not None and not 0 < self.live.max_stream_s < math.inf:
            raise UsageError(
                f"--live-max-s must be a positive number of seconds, got {self.live.max_stream_s}",
                "leave it out for no limit",
            )
        if not (0 < self.live.pace.min_realtime < math.inf and 0 < self.live.pace.window_s < math.inf):
            raise UsageError(
                "the live pace (share of real time and its window) must be positive finite numbers",
                "e.g. LivePaceLimit(min_realtime=0.5, window_s=10)",
            )
        if not 0 <= self.grace_s < math.inf:
            raise UsageError(f"--grace-s must be a finite number of seconds >= 0, got {self.grace_s}")
        if self.api_key is not None and not self.api_key.strip():
            raise UsageError("the API key is empty", f"pass a non-empty --api-key or unset {API_KEY_ENV}")
        if self.api_key is not None and not (self.api_key.isascii() and self.api_key.isprintable()):
            raise UsageError(
                "the API key must be printable ASCII: HTTP clients send it in a header, so any other "
                "character could never match",
                "choose a key of letters, digits and punctuation",
            )
        if self.audio_dir is not None and not self.audio_dir.is_dir():
            raise UsageError(f"--audio-dir {self.audio_dir} is not a directory", "pass an existing directory")
        if self.api_key is None and not is_loopback(self.host):
            raise UsageError(
                f"refusing to serve on {self.host} without an API key: anyone who can reach it could use it",
                f"pass --api-key KEY (or set {API_KEY_ENV}), or keep the default --host {DEFAULT_HOST}",
            )


def normalized_origin(origin: str) -> str | None:
    """``scheme://host[:port]`` in lower case with the scheme's default port left out, as browsers send
    ``Origin``; None for anything else (a path, credentials, "null")."""
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in ("http", "https") or not rest or any(c in rest for c in "/?#@ \\"):
        return None
    parsed = split_host(rest)
    if parsed is None:
        return None
    name, port = parsed
    default = "80" if scheme == "http" else "443"
    return f"{scheme}://{name}" + (f":{port}" if port is not None and port != default else "")


def split_host(value: str) -> tuple[str, str | None] | None:
    """A Host header (or an origin's authority) as (name, port), strictly: ``name``, ``name:digits``,
    ``[v6]`` or ``[v6]:digits``; None for anything else (``localhost:evil.com``, ``[::1]evil.com``)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
        try:
            ipaddress.IPv6Address(name[1:-1])
        except ValueError:
            return None
    else:
        name, colon, port_text = value.partition(":")
        rest = colon + port_text
        if not name or not all(c.isalnum() or c in "-." for c in name) or not name.isascii():
            return None
    if not rest:
        return name, None
    port = rest[1:]
    if not rest.startswith(":") or not (port.isascii() and port.isdigit()) or len(port) > 5:
        return None
    return name, port


def bracketed(host: str) -> str:
    """An IPv6 address in brackets, as URLs and Host headers write it; other hosts as they are."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def api_key_from(flag: str | None) -> str | None:
    """``--api-key`` wins; otherwise the environment variable; None when neither is set."""
    if flag is not None:
        return flag
    return os.environ.get(API_KEY_ENV) or None
