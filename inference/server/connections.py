"""The connection layer of ``captioneer serve``: uvicorn's h11 protocol with what a server left running for
weeks needs and uvicorn lacks. uvicorn has a keep-alive timeout (idle between requests) but none while a
request's headers arrive, and no limit per client, so a few hundred half-sent requests hold the server's file
descriptors forever. Here every connection must finish its request headers within ``header_timeout_s`` of
the first byte (or of being opened), and one remote address may hold at most ``max_per_client`` connections.
Answers (408, 429 and unreadable requests' 400) are OpenAI-shaped JSON, then the connection is closed."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from inference.server.errors import ApiError

_REASONS = {400: b"Bad Request", 408: b"Request Timeout", 429: b"Too Many Requests"}


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float = (
        10.0  # from a connection's first byte (or its opening) to its whole request head
    )
    max_per_client: int = 64  # open connections from one remote address


class ClientCounts:
    """Open connections per remote address, for one server (touched only on its event loop)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, int] = {}

    def enter(self, address: str) -> bool:
        """Count a new connection from ``address``; False (not counted) when it already has ``limit``."""
        count = self._open.get(address, 0)
        if count >= self.limit:
            return False
        self._open[address] = count + 1
        return True

    def leave(self, address: str) -> None:
        count = self._open.get(address, 0) - 1
        if count > 0:
            self._open[address] = count
        else:
            self._open.pop(address, None)

    def open_from(self, address: str) -> int:
        return self._open.get(address, 0)


def raw_error(error: ApiError) -> bytes:
    """A whole HTTP/1.1 answer with ``error`` as its JSON body and ``Connection: close``, for the moments no
    request has been parsed (h11 sends responses only to requests)."""
    body = json.dumps(error.body()).encode()
    head = (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d\r\n"
        % (error.status, _REASONS.get(error.status, b"Error"), len(body))
    )
    extra = b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in error.headers.items())
    return head + extra + b"\r\n" + body


def guarded_protocol(limits: ConnectionLimits) -> type:
    """uvicorn's h11 protocol class with the header timeout, the per-client limit and JSON errors; each call
    makes a class with its own connection counts (one per server)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    counts = ClientCounts(limits.max_per_client)
    unreadable = raw_error(
        ApiError(
            400,
            "the request could not be read as HTTP/1.1: malformed, or its headers are larger than 16 KB",
            "malformed_request",
        )
    )
    too_slow = raw_error(
        ApiError(
            408,
            f"the request's headers did not arrive within {limits.header_timeout_s:g} s; the connection "
            "was closed",
            "header_timeout",
        )
    )
    too_many = raw_error(
        ApiError(
            429,
            f"this client already has {limits.max_per_client} connections open to the server (its limit "
            "per address); close idle ones or reuse them",
            "too_many_connections",
            headers={"Retry-After": "1"},
        )
    )

    class GuardedH11(H11Protocol):
        _address: str | None = None
        _header_timer: asyncio.TimerHandle | None = None
        _linger_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            address = self.client[0] if self.client else ""
            if not counts.enter(address):
                self._close_with(too_many)
                return
            self._address = address
            self._arm_header_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_header_timer()
            if self._linger_timer is not None:
                self._linger_timer.cancel()
                self._linger_timer = None
            if self._address is not None:
                counts.leave(self._address)
                self._address = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            # A new request begins (first byte of a connection, or after a kept-alive one): its head is timed.
            if self.conn.their_state is h11.IDLE:
                self._arm_header_timer()
            super().data_received(data)
            if self.conn.their_state is h11.IDLE:  # the next request (kept alive, or pipelined) is timed too
                self._arm_header_timer()
            else:
                self._disarm_header_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # Answered before its body ended (a 408, 413, or a live stream cut off): the rest is never read,
            # and a trickle would hold the connection forever (each byte resets uvicorn's keep-alive timer).
            # The client gets the keep-alive time to finish or stop, then the connection is closed.
            if self.conn.their_state is h11.SEND_BODY and self._linger_timer is None:
                self._linger_timer = self.loop.call_later(self.timeout_keep_alive, self._close_unfinished)

        def _close_unfinished(self) -> None:
            self._linger_timer = None
            if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
                self.transport.close()

        def send_400_response(self, msg: str) -> None:
            self._close_with(unreadable)

        def _arm_header_timer(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(limits.header_timeout_s, self._headers_too_slow)

        def _disarm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if self.conn.their_state is h11.IDLE:
                # No byte of a next request: an idle connection, closed without an answer.
                self._close_with(too_slow if self.conn.trailing_data[0] else b"")

        def _close_with(self, answer: bytes) -> None:
            if not self.transport.is_closing():
                if answer:
                    self.transport.write(answer)
                self.transport.close()

    return GuardedH11
