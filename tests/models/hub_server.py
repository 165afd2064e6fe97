"""A local stand-in for the Hugging Face Hub, enough for ``huggingface_hub`` file metadata and downloads.

Serves ``HEAD/GET /{repo}/resolve/{revision}/{path}`` with ``X-Repo-Commit``, ``ETag`` and
``Content-Length`` and honours ``Range``. Files marked ``lfs`` behave like LFS files on the real hub:
the resolve URL answers ``302`` to a CDN URL on another origin (``localhost`` instead of
``127.0.0.1``) with ``X-Linked-Etag`` (the sha256) and ``X-Linked-Size``. Faults can be injected:
drop the connection once after N body bytes, answer a status code N times, require a token, slow
the body down.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HubFile:
    data: bytes
    lfs: bool = False

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def git_sha1(self) -> str:
        return hashlib.sha1(b"blob %d\0" % len(self.data) + self.data).hexdigest()


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    authorization: str | None


@dataclass
class HubState:
    repos: dict[str, dict[str, HubFile]] = field(default_factory=dict)  # repo → path → file
    revisions: set[str] = field(default_factory=lambda: {"main", COMMIT})
    drop_after: dict[str, int] = field(default_factory=dict)  # path → bytes sent before closing (once)
    fail_status: dict[str, list[int]] = field(default_factory=dict)  # path → statuses to answer first
    required_token: str | None = None
    gated: set[str] = field(default_factory=set)
    corrupt: set[str] = field(default_factory=set)
    ignore_range: bool = False  # answer 200 with the whole body, as some proxies do  # paths whose body has one byte flipped (headers stay right)
    bytes_per_second: float | None = None
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, repo: str, path: str, data: bytes, lfs: bool = False) -> HubFile:
        hub_file = HubFile(data, lfs)
        self.repos.setdefault(repo, {})[path] = hub_file
        return hub_file

    def gets(self, path_suffix: str) -> list[Request]:
        return [r for r in self.requests if r.method == "GET" and r.path.endswith(path_suffix)]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HubServer

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _error(self, status: int, code: str | None = None, message: str | None = None) -> None:
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        if message:
            self.send_header("X-Error-Message", message)
        payload = b'{"error": "' + (code or "error").encode() + b'"}'
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _serve(self, body: bool) -> None:
        state = self.server.state
        path = unquote(urlsplit(self.path).path)
        with state.lock:
            state.requests.append(
                Request(self.command, path, self.headers.get("Range"), self.headers.get("Authorization"))
            )
        if path.startswith("/cdn/"):
            _, _, repo_and_file = path.partition("/cdn/")
            repo, _, file_path = repo_and_file.partition("::")
            hub_file = state.repos.get(repo, {}).get(file_path)
            if hub_file is None:
                return self._error(404)
            return self._send_file(file_path, hub_file, body, cdn=True)
        repo, sep, rest = path.lstrip("/").partition("/resolve/")
        if not sep:
            return self._error(404, "RepoNotFound")
        revision, _, file_path = rest.partition("/")
        queued = state.fail_status.get(file_path)
        if queued:
            with state.lock:
                status = queued.pop(0)
            return self._error(status)
        if state.required_token and self.headers.get("Authorization") != f"Bearer {state.required_token}":
            if repo in state.gated:
                return self._error(403 if self.headers.get("Authorization") else 401, "GatedRepo")
            return self._error(401, "RepoNotFound")
        if repo not in state.repos:
            return self._error(404, "RepoNotFound")
        if revision not in state.revisions:
            return self._error(404, "RevisionNotFound")
        hub_file = state.repos[repo].get(file_path)
        if hub_file is None:
            return self._error(404, "EntryNotFound")
        if hub_file.lfs:
            host, port = self.server.server_address[:2]
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{port}/cdn/{repo}::{file_path}")
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("X-Linked-Etag", f'"{hub_file.sha256}"')
            self.send_header("X-Linked-Size", str(len(hub_file.data)))
            self.send_header("ETag", f'"{hub_file.git_sha1}"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return self._send_file(file_path, hub_file, body, cdn=False)

    def _send_file(self, file_path: str, hub_file: HubFile, body: bool, cdn: bool) -> None:
        state = self.server.state
        data = hub_file.data
        if file_path in state.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = 0
        status = 200
        range_header = self.headers.get("Range")
        if range_header and range_header.startswith("bytes=") and not state.ignore_range:
            first = range_header[len("bytes=") :].split("-", 1)[0]
            start = int(first)
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        chunk = data[start:]
        self.send_response(status)
        if not cdn:
            self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{hub_file.sha256 if hub_file.lfs else hub_file.git_sha1}"')
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(chunk)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if not body:
            return
        drop = state.drop_after.pop(file_path, None) if body else None
        sent = 0
        step = 16 * 1024
        while sent < len(chunk):
            piece = chunk[sent : sent + step]
            if drop is not None and sent + len(piece) > drop:
                self.wfile.write(piece[: drop - sent])
                self.wfile.flush()
                self.close_connection = True
                return  # the client sees a body shorter than Content-Length
            try:
                self.wfile.write(piece)
            except (BrokenPipeError, ConnectionResetError):
                return
            sent += len(piece)
            if state.bytes_per_second:
                time.sleep(len(piece) / state.bytes_per_second)


class _HubServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, state: HubState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # clients that cancel or time out reset their connections; that is expected here


class HubServer:
    """Context manager: ``with HubServer(state) as hub: hub.endpoint``."""

    def __init__(self, state: HubState | None = None) -> None:
        self.state = state or HubState()
        self._server = _HubServer(self.state)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
