"""A minimal HTTP/1.1 client for the live route: it sends a chunked body at a chosen pace on one thread while
it reads the server-sent events on another, so a test sees events arrive before the upload ends (httpx
sends the whole body before it reads the answer)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit


@dataclass
class LiveResult:
    status: int
    headers: dict[str, str]
    events: list[dict[str, Any]] = field(default_factory=list)  # each with "_at": seconds since the start
    raw_body: bytes = b""
    done_marker: bool = False
    upload_done_at: float | None = None
    started_at: float = 0.0  # time.monotonic() when the request began; "_at" and upload_done_at count from it

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)

    def line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            if not self._fill():
                raise ConnectionError("the server closed the connection")
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not self._fill():
                raise ConnectionError("the server closed the connection")
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data


def post_live(
    base_url: str,
    query: dict[str, Any],
    pieces: Iterable[bytes],
    *,
    pace_s: float = 0.0,
    pause_after: dict[int, float] | None = None,
    finish: bool = True,
    timeout_s: float = 60.0,
) -> LiveResult:
    """POST ``pieces`` as HTTP chunks (``pace_s`` apart; ``pause_after``: extra sleep after piece i; ``finish``
    False: never send the terminating zero chunk) and collect the answer's events with their arrival times."""
    url = urlsplit(base_url)
    sock = socket.create_connection((url.hostname, url.port), timeout=timeout_s)
    started = time.monotonic()
    path = "/v1/audio/transcriptions/live?" + urlencode(query)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {url.hostname}:{url.port}\r\nTransfer-Encoding: chunked\r\n"
        "Content-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
    )
    sock.sendall(head.encode())
    upload_done: list[float] = []

    def send() -> None:
        try:
            for index, piece in enumerate(pieces):
                sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                time.sleep(pace_s + (pause_after or {}).get(index, 0.0))
            if finish:
                sock.sendall(b"0\r\n\r\n")
            upload_done.append(time.monotonic() - started)
        except OSError:
            pass  # the server answered early (an error) and closed

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    reader = _Reader(sock)
    try:
        status_line = reader.line().decode()
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while line := reader.line():
            key, _, value = line.decode().partition(":")
            headers[key.strip().lower()] = value.strip()
        result = LiveResult(status, headers, started_at=started)
        if headers.get("transfer-encoding") == "chunked":
            text = b""
            while True:
                size = int(reader.line().split(b";")[0], 16)
                if size == 0:
                    break
                data = reader.exactly(size)
                reader.exactly(2)
                result.raw_body += data
                text += data
                while b"\n\n" in text:
                    frame, _, text = text.partition(b"\n\n")
                    payload = frame.decode().removeprefix("data: ")
                    if payload == "[DONE]":
                        result.done_marker = True
                    else:
                        event = json.loads(payload)
                        event["_at"] = time.monotonic() - started
                        result.events.append(event)
        else:
            length = int(headers.get("content-length", "0"))
            result.raw_body = reader.exactly(length)
    finally:
        sock.close()
        sender.join(timeout_s)
    result.upload_done_at = upload_done[0] if upload_done else None
    return result


def split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]
