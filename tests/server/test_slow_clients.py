"""Slow and vanishing clients against `captioneer serve`: half-sent requests, trickled bodies, too many
connections from one address, a client that leaves while its file is transcribed. The server must keep
answering everyone else, close what it will never finish, and free model slots.

Clients other than the one checking the server connect from other loopback addresses (127.0.0.2, ...), as
clients on other machines would: the per-address limit is then what it is in production."""

from __future__ import annotations

import base64
import contextlib
import json
import resource
import select
import socket
import threading
import time
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest

from inference.audio.io import load_audio_file
from inference.protocol import OpenJob, Transcribe
from inference.server.body_rate import BodyRate, BodyRateLimit
from inference.server.config import ServerConfig
from inference.server.connections import ClientCounts
from inference.server.registry import ModelRegistry
from tests.server.harness import SAMPLE_1, TEXT_1, running_server, s16le, two_sentences, wav_bytes
from tests.server.live_client import LiveResult, post_live, split

DEADLINE_S = 120.0  # generous: the machine may be busy; nothing here waits on time, only on conditions


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _connect(url: str, source: str) -> socket.socket:
    try:
        return socket.create_connection(_address(url), timeout=DEADLINE_S, source_address=(source, 0))
    except OSError as exc:
        pytest.skip(f"cannot connect from {source} ({exc}): the test needs the whole 127.0.0.0/8 on loopback")


def _raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            pytest.skip(f"needs {needed} open files; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def _half_open(url: str, count: int, per_address: int) -> list[socket.socket]:
    """``count`` connections that send the start of a request head and never finish it."""
    sockets = []
    for index in range(count):
        sock = _connect(url, f"127.0.0.{2 + index // per_address}")
        sock.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
        sockets.append(sock)
    return sockets


def _readable(sock: socket.socket, timeout_s: float) -> bool:
    """Whether ``sock`` has data or its end (poll, not select: these descriptors pass select's 1024)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


def _read_until_closed(sock: socket.socket, deadline: float) -> bytes | None:
    """What the server sent before closing the connection; None if it was still open at ``deadline``."""
    received = b""
    while time.monotonic() < deadline:
        if _readable(sock, max(0.0, min(1.0, deadline - time.monotonic()))):
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return received
            if not chunk:
                return received
            received += chunk
    return None


class Trickler:
    """A live upload that sends ``opening`` (a first piece), then 2 bytes every ``every_s``: it keeps "sending"
    forever, far below real time."""

    def __init__(self, url: str, source: str, every_s: float, opening: bytes = bytes(64)) -> None:
        self.sock = _connect(url, source)
        self.every_s = every_s
        self.opening = opening
        self.answer = b""
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Trickler:
        head = (
            "POST /v1/audio/transcriptions/live?model=demo&sample_rate=16000 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Transfer-Encoding: chunked\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        self.sock.sendall(head.encode() + b"%x\r\n" % len(self.opening) + self.opening + b"\r\n")
        self.thread.start()
        return self

    def _run(self) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and b"[DONE]" not in self.answer and not self.stopped.is_set():
            if _readable(self.sock, self.every_s):
                chunk = self.sock.recv(65536)
                if not chunk:
                    return
                self.answer += chunk
                continue
            try:
                self.sock.sendall(b"2\r\n\x00\x00\r\n")
            except OSError:
                return

    @property
    def sending(self) -> bool:
        """Still trickling: the server has neither answered it in full nor closed it."""
        return self.thread.is_alive()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(DEADLINE_S)
        self.sock.close()


def test_1000_half_open_sockets_and_4_tricklers_leave_health_a_transcription_and_a_live_stream_answered(
    registry: ModelRegistry,
) -> None:
    """Two tricklers send a first piece and then 2 bytes every 0.5 s; two more send 0.6 s of audio first, enough
    to take the demo model's two slots, then trickle. The header timeout and the body-rate window are an hour
    here, so nothing that frees them by time can have happened when the requests are answered: the requests
    get their slots because a trickle never holds one against a request that waits for it."""
    _raise_fd_limit(4096)  # both ends of every connection live in this process
    demo = registry.get("demo")
    config = ServerConfig(header_timeout_s=3600, min_body_bytes_per_s=1024, body_window_s=3600)
    opening = s16le(np.zeros(int(16000 * 0.6), np.float32))
    with running_server(config, registry) as url, httpx.Client(base_url=url, timeout=DEADLINE_S) as http:
        held = _half_open(url, 1000, per_address=50)  # 20 addresses, under the per-client limit
        tricklers = [Trickler(url, "127.0.0.30", every_s=0.5).start() for _ in range(2)]
        takers = [Trickler(url, "127.0.0.31", every_s=0.5, opening=opening).start() for _ in range(2)]
        try:
            deadline = time.monotonic() + DEADLINE_S
            while demo.active < 2:  # the two that sent audio hold both slots
                assert time.monotonic() < deadline, "the tricklers that sent audio never took the slots"
                time.sleep(0.01)
            health = http.get("/health")
            assert health.status_code == 200 and health.json()["models"]["demo"]["active"] == 2
            # A real-time live stream waits for a slot: it takes one back from a trickler ...
            audio = two_sentences()
            lives: list[LiveResult] = []
            query = {"model": "demo", "busy_timeout_ms": 600000}
            pieces = split(s16le(audio), 3200)  # 0.1 s each, sent in real time: ~9.5 s
            streaming = threading.Thread(
                target=lambda: lives.append(post_live(url, query, pieces, pace_s=0.1))
            )
            streaming.start()
            while not any(b"[DONE]" in t.answer for t in takers):
                assert time.monotonic() < deadline, "no trickler gave its slot to the live stream"
                time.sleep(0.01)
            # ... and so does a transcription, while that stream keeps the other slot busy in real time.
            wav = base64.b64encode(wav_bytes(load_audio_file(SAMPLE_1))).decode()
            answer = http.post(
                "/v1/audio/transcriptions", json={"model": "demo", "audio": wav, "busy_timeout_ms": 600000}
            )
            assert answer.status_code == 200 and answer.json()["text"].startswith(TEXT_1)
            streaming.join(DEADLINE_S)
            live = lives[0]
            assert live.status == 200 and live.done_marker, live.raw_body
            assert live.events[-1]["type"] == "transcript.text.done"
            assert live.events[-1]["text"].startswith(TEXT_1)
            # Answered while every half-open socket and both byte tricklers were held, unanswered.
            still_open = [s for s in held if not _readable(s, 0)]
            assert len(still_open) == 1000
            assert all(t.sending and t.answer == b"" for t in tricklers), [t.answer for t in tricklers]
        finally:
            for trickler in tricklers + takers:
                trickler.close()
            for sock in held:
                sock.close()
    for taker in takers:  # gave its slot back: ended in good order, with its transcript
        assert b'"code": "stream_too_slow"' in taker.answer, taker.answer
        assert b'"transcript.text.done"' in taker.answer and b"[DONE]" in taker.answer
    assert not any(b"body_too_slow" in t.answer for t in tricklers + takers)  # the rate cut nobody off
    assert demo.active == 0


def test_half_sent_and_silent_connections_are_closed_after_the_header_timeout(
    registry: ModelRegistry,
) -> None:
    _raise_fd_limit(4096)
    with running_server(ServerConfig(header_timeout_s=1), registry) as url:
        held = _half_open(url, 1000, per_address=50)
        silent = [_connect(url, "127.0.0.40") for _ in range(10)]  # never send a byte
        try:
            deadline = time.monotonic() + DEADLINE_S
            answers = [_read_until_closed(sock, deadline) for sock in held]
            assert all(a is not None for a in answers), "some half-sent requests were never closed"
            head, _, body = (answers[0] or b"").partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408") and json.loads(body)["error"]["code"] == "header_timeout"
            assert all(a == answers[0] for a in answers)
            assert all(_read_until_closed(sock, deadline) == b"" for sock in silent)
            with httpx.Client(base_url=url, timeout=DEADLINE_S) as http:
                assert http.get("/health").status_code == 200
        finally:
            for sock in held + silent:
                sock.close()


def test_one_address_may_hold_only_its_connection_limit(registry: ModelRegistry) -> None:
    config = ServerConfig(max_connections_per_client=8, header_timeout_s=3600)
    with running_server(config, registry) as url, httpx.Client(base_url=url, timeout=DEADLINE_S) as http:
        held = [_connect(url, "127.0.0.50") for _ in range(8)]
        extra = _connect(url, "127.0.0.50")
        try:
            answer = _read_until_closed(extra, time.monotonic() + DEADLINE_S)
            assert answer is not None
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 429") and b"retry-after: 1" in head.lower()
            assert json.loads(body)["error"]["code"] == "too_many_connections"
            assert http.get("/health").status_code == 200  # other addresses are not affected
            held.pop().close()
            deadline = time.monotonic() + DEADLINE_S
            while True:  # the freed place is taken again once the server has seen the close
                again = _connect(url, "127.0.0.50")
                again.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                reply = _read_until_closed(again, deadline) or b""
                again.close()
                if reply.startswith(b"HTTP/1.1 200") or time.monotonic() > deadline:
                    break
            assert reply.startswith(b"HTTP/1.1 200"), reply
        finally:
            for sock in held:
                sock.close()
            extra.close()


def test_a_trickled_file_upload_is_abandoned_with_a_408(registry: ModelRegistry) -> None:
    with running_server(ServerConfig(min_body_bytes_per_s=1024, body_window_s=1), registry) as url:
        sock = _connect(url, "127.0.0.60")
        sock.sendall(
            b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
        )
        received = b""
        deadline = time.monotonic() + DEADLINE_S
        with contextlib.closing(sock):
            while b"\r\n\r\n" not in received and time.monotonic() < deadline:
                if _readable(sock, 0.2):
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    received += chunk
                else:
                    sock.sendall(b" " * 10)
            # The answer's body may arrive after its head: read on until the server closes (it said close).
            received += _read_until_closed(sock, deadline) or b""
        head, _, body = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408") and b"connection: close" in head.lower()
        assert b"body_too_slow" in body


def test_a_client_that_leaves_frees_its_slot_and_the_worker(base_url: str, registry: ModelRegistry) -> None:
    faulty = registry.get("faulty")
    # 60 s of audio at 5 s of "inference" per second: 300 s unless the request is cancelled.
    slow = {
        "model": "faulty",
        "audio": base64.b64encode(wav_bytes(np.full(16000 * 60, 0.01, np.float32))).decode(),
        "options": {"delay_s": 5.0},
    }
    body = json.dumps(slow).encode()
    sock = socket.create_connection(_address(base_url), timeout=DEADLINE_S)
    sock.sendall(
        b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    client = faulty.client
    assert client is not None

    def transcribing() -> bool:  # the job has reached the worker
        return any(isinstance(job.message, Transcribe | OpenJob) for job in list(client._pending.values()))

    deadline = time.monotonic() + DEADLINE_S
    while not transcribing():
        assert time.monotonic() < deadline, "the request never reached the worker"
        time.sleep(0.01)
    sock.close()
    deadline = time.monotonic() + 30  # far less than the 300 s the abandoned request would run
    while faulty.active:
        assert time.monotonic() < deadline, "the slot of a client that left was not freed"
        time.sleep(0.01)
    while transcribing():  # the worker answered the abandoned job (Cancelled): it was told to stop
        assert time.monotonic() < deadline, "the abandoned job still runs in the worker"
        time.sleep(0.01)
    quick = {"model": "faulty", "audio": base64.b64encode(wav_bytes(np.zeros(16000, np.float32))).decode()}
    with httpx.Client(base_url=base_url, timeout=60) as http:  # the worker stopped the abandoned job
        response = http.post("/v1/audio/transcriptions", json={**quick, "options": {"delay_s": 0.0}})
    assert response.status_code == 200, response.text


def test_the_body_rate_counts_bytes_over_a_window_of_waiting() -> None:
    rate = BodyRate(BodyRateLimit(min_bytes_per_s=100, window_s=10))
    assert rate.allowance_s() == 10  # the first window is granted in full
    rate.waited_s = 4
    rate.record(1000)  # the window's whole quota, at 4 s
    assert rate.allowance_s() == 10  # those bytes carry the rate until 4 + 10 = 14 s
    rate.waited_s = 12
    assert rate.allowance_s() == 2  # the 1000 bytes at 4 s carry the rate until 14 s
    rate.record(2)  # a trickle does not
    assert rate.allowance_s() == 2
    rate.waited_s = 14
    rate.record(2)
    assert rate.allowance_s() <= 0


def test_client_counts_refuse_past_the_limit_and_forget_closed_connections() -> None:
    counts = ClientCounts(2)
    assert counts.enter("a") and counts.enter("a") and not counts.enter("a")
    assert counts.enter("b")
    counts.leave("a")
    assert counts.enter("a") and counts.open_from("a") == 2
    counts.leave("b")
    assert counts.open_from("b") == 0
