"""Requests sent to the worker and not yet answered, by request id."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from inference import protocol as p
from inference.contract import ProgressCallback


@dataclass
class PendingRequest:
    future: Future[p.Message]
    message: p.Message
    progress: ProgressCallback | None = None
    started: float = field(default_factory=time.monotonic)


class PendingRequests:
    """Thread-safe table of the requests in flight; whoever takes an entry out settles its future."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[int, PendingRequest] = {}

    def add(self, request_id: int, pending: PendingRequest) -> None:
        with self._lock:
            self._items[request_id] = pending

    def get(self, request_id: int) -> PendingRequest | None:
        with self._lock:
            return self._items.get(request_id)

    def pop(self, request_id: int) -> PendingRequest | None:
        with self._lock:
            return self._items.pop(request_id, None)

    def take_all(self) -> list[PendingRequest]:
        with self._lock:
            items = list(self._items.values())
            self._items.clear()
            return items

    def values(self) -> list[PendingRequest]:
        """A snapshot of the requests in flight."""
        with self._lock:
            return list(self._items.values())

    def loading(self) -> bool:
        """A model load is among them (loads may run far longer than any other operation)."""
        return any(isinstance(item.message, p.LoadModel) for item in self.values())
