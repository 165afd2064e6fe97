"""The models a server offers: one inference worker process per model, each with a bounded number of slots.

A model is named by the ``--model`` value it was given (a package id or a path) and, for a path, also by
the folder or file name. Every request on a model holds one of its slots while it runs; past
``max_concurrent`` the server answers 429 rather than queueing without bound (``slots.py``: waiting requests
are served in arrival order, and may take a slot back from a live upload that fell behind real time).

A worker that dies is restarted by its client; one that keeps dying makes the client give up (its
``max_restarts``). The server then answers 503 naming the failure; after ``revive_after_s`` the client tries a
fresh worker that loads the model again (a revival, repeated after each further ``revive_after_s``), and a
request that arrives past that pause tries at once (a circuit breaker), so a transient fault — memory pressure,
a driver reset — never needs the server restarted by hand. Live streams stay open meanwhile and resume on the
revived worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import random
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference.client import RemoteEngine, WorkerClient, WorkerPolicy
from inference.errors import CaptioneerError, UsageError
from inference.models.spec import FamilySpec
from inference.paths import AppPaths
from inference.server.errors import ApiError
from inference.server.slots import Slot, SlotPool, Yielding

log = logging.getLogger("captioneer.server")
RESTARTED = "the inference worker was restarted"  # WorkerClient's status once a new worker has its models
RESTORE_WAIT_S = 180.0  # a restart respawns the worker and loads the model again
REVIVE_AFTER_S = 30.0  # after the client gave up, the next request past this tries a fresh worker


@dataclass
class ServedModel:
    """One loaded model and its worker."""

    id: str
    path: Path
    family: str
    spec: FamilySpec | None  # None: a custom engine (factory) whose options are not validated
    languages: tuple[str, ...]
    max_concurrent: int
    factory: str | None = None
    session_options: dict[str, Any] = field(default_factory=dict)
    default_request_options: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    created: int = field(default_factory=lambda: int(time.time()))
    policy: WorkerPolicy = field(default_factory=WorkerPolicy)
    revive_after_s: float = REVIVE_AFTER_S
    client: WorkerClient | None = None
    engine: RemoteEngine | None = None
    _slots: SlotPool = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _restored: threading.Event = field(default_factory=threading.Event)
    _revive_lock: threading.Lock = field(default_factory=threading.Lock)
    _gave_up_at: float | None = None
    _typical_s: float = 1.0  # how long a request holds its slot (moving average; a guess until measured)
    _measured: int = 0
    _refused: deque[float] = field(default_factory=deque)  # when recent 429s were sent

    def __post_init__(self) -> None:
        self._slots = SlotPool(self._too_many)

    def start(self, backend: str = "auto", threads: int | None = None) -> None:
        self._restored.set()
        policy = dataclasses.replace(self.policy, revive_after_s=(self.revive_after_s,))
        self.client = WorkerClient(policy, on_status=self._on_status).start()
        try:
            self.engine = self.client.load(
                self.path, self.family, self.session_options, backend, threads, factory=self.factory
            )
        except BaseException:
            self.client.close()
            raise
        self._gave_up_at = None
        # Streams hold their slot; the worker refuses more open streams per engine than this.
        limit = self.engine.capabilities.streams_per_engine
        if self.max_concurrent > limit:
            log.warning(
                "model %s: --max-concurrent %d lowered to %d, the streams one engine serves at once",
                self.id,
                self.max_concurrent,
                limit,
            )
            self.max_concurrent = limit

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    def _on_status(self, text: str) -> None:
        """The client reports a lost worker first and "the inference worker was restarted" once the new one
        has the model again. In between, a request sent to the new worker would find no model there."""
        if text.startswith(RESTARTED):
            self._restored.set()
        elif self.client is not None and self.client.gave_up is not None:
            log.error(
                "model %s: %s; a request after %.0f s will start a fresh worker",
                self.id,
                text,
                self.revive_after_s,
            )
            self._gave_up_at = time.monotonic()
            self._restored.set()  # nothing is coming back by itself: waiters get the failure now
        else:
            log.warning("model %s: %s", self.id, text)
            self._restored.clear()

    async def wait_until_restored(self, timeout_s: float = RESTORE_WAIT_S) -> None:
        """Return at once unless the worker is being restarted; then wait for it (503 past ``timeout_s``).
        A worker the client gave up on is started afresh once ``revive_after_s`` have passed (else 503)."""
        if self.client is not None and self.client.gave_up is not None:
            await asyncio.to_thread(self._revive)
        deadline = time.monotonic() + timeout_s
        while not self._restored.is_set():
            if time.monotonic() > deadline:
                raise ApiError(
                    503,
                    f"the worker of model {self.id!r} is being restarted after a failure and is "
                    "not back yet; retry shortly",
                    "worker_restarting",
                    headers={"Retry-After": "5"},
                )
            await asyncio.sleep(0.05)

    def _revive(self) -> None:
        """Have a client that gave up try a fresh worker now, at most once per ``revive_after_s`` (its own
        revivals keep their schedule); its open streams resume on it."""
        with self._revive_lock:
            client = self.client
            if client is None or client.gave_up is None:
                return  # another request revived it meanwhile
            waited = time.monotonic() - (self._gave_up_at or 0.0)
            if waited < self.revive_after_s:
                retry = max(1, round(self.revive_after_s - waited))
                raise ApiError(
                    503,
                    f"the worker of model {self.id!r} kept failing ({client.gave_up}); a fresh "
                    f"one is tried in {retry} s",
                    "worker_failed",
                    headers={"Retry-After": str(retry)},
                )
            log.warning("model %s: starting a fresh worker after %.0f s", self.id, waited)
            try:
                client.revive()
            except CaptioneerError as exc:
                self._gave_up_at = time.monotonic()  # try again only after another full wait
                raise ApiError(
                    503,
                    f"model {self.id!r} could not be loaded in a fresh worker: {exc}",
                    "worker_failed",
                    headers={"Retry-After": str(round(self.revive_after_s))},
                ) from exc

    @property
    def worker_state(self) -> str:
        """running, restarting (a dead or frozen worker is being replaced), failed (given up on) or stopped."""
        if self.client is None:
            return "stopped"
        if self.client.gave_up is not None:
            return "failed"
        return "restarting" if self.client.restarting else "running"

    @property
    def worker_pid(self) -> int | None:
        return self.client.pid if self.client is not None else None

    @property
    def active(self) -> int:
        return self._slots.active

    def note_duration(self, seconds: float) -> None:
        """A request held its slot this long: the estimate that 429s hand out follows it."""
        with self._lock:
            seconds = max(0.0, seconds)
            self._typical_s = seconds if self._measured == 0 else 0.7 * self._typical_s + 0.3 * seconds
            self._measured += 1

    def _too_many(self, active: int) -> ApiError:
        return ApiError(
            429,
            f"model {self.id!r} is already running {active} requests (the limit is "
            f"{self.max_concurrent}); retry shortly, or start the server with a higher --max-concurrent",
            "too_many_requests",
            headers=self._retry_after(),
        )

    def _retry_after(self) -> dict[str, str]:
        """When a slot is likely free for this client: the clients refused just before it come back first, so
        the wait grows with them; jittered, so they do not all come back at once (the ``openai`` client honours
        retry-after-ms; others Retry-After in whole seconds)."""
        with self._lock:
            now = time.monotonic()
            horizon = max(1.0, 2 * self._typical_s)
            while self._refused and now - self._refused[0] > horizon:
                self._refused.popleft()
            self._refused.append(now)
            # Request times before a slot is free for this one.
            ahead = len(self._refused) / self.max_concurrent
            wait = max(0.2, self._typical_s) * ahead * random.uniform(0.5, 1.5)
        return {
            "Retry-After": str(max(1, math.ceil(wait))),
            "retry-after-ms": str(max(1, round(wait * 1000))),
        }

    @contextlib.asynccontextmanager
    async def slot(self, busy_timeout_s: float = 0.0, holder: Yielding | None = None) -> AsyncIterator[Slot]:
        """One of the model's slots for the block (429 when none frees up within ``busy_timeout_s``); freed
        when the block ends, however it ends, unless the block handed it over (a streamed answer keeps it).
        A ``holder`` (a live upload) may be asked to give the slot back while another request waits for one
        (``slots.py``)."""
        held = await self._slots.take(self.max_concurrent, busy_timeout_s, holder)
        try:
            yield held
        finally:
            if not held.handed_over:
                held.release()

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "model",
            "created": self.created,
            "owned_by": "captioneer",
            "family": self.family,
            "aliases": list(self.aliases),
        }


class ModelRegistry:
    def __init__(self, models: list[ServedModel]) -> None:
        if not models:
            raise UsageError("no model to serve", "pass --model ID|PATH")
        self.models = models
        self._by_name: dict[str, ServedModel] = {}
        for model in models:
            for name in (model.id, *model.aliases):
                if name in self._by_name and self._by_name[name] is not model:
                    raise UsageError(f"two served models are both called {name!r}", "pass each model once")
                self._by_name[name] = model

    def get(self, name: str | None) -> ServedModel:
        if not name:
            if len(self.models) == 1:
                return self.models[0]
            raise ApiError(
                400,
                "the 'model' field is required when the server has several models "
                f"({', '.join(m.id for m in self.models)})",
                "missing_model",
                param="model",
            )
        model = self._by_name.get(name)
        if model is None:
            raise ApiError(
                404,
                f"model {name!r} is not served here; GET /v1/models lists the models of this "
                f"server ({', '.join(m.id for m in self.models)})",
                "model_not_found",
                param="model",
            )
        return model

    def start(self, backend: str = "auto", threads: int | None = None) -> None:
        started: list[ServedModel] = []
        try:
            for model in self.models:
                log.info("loading %s (%s) from %s", model.id, model.family, model.path)
                model.start(backend, threads)
                started.append(model)
        except BaseException:
            for model in started:
                model.close()
            raise

    def close(self) -> None:
        for model in self.models:
            model.close()


def resolve_models(names: list[str], paths: AppPaths, max_concurrent: int) -> list[ServedModel]:
    """``--model`` values (package ids or paths; none: the installed default) → models to serve."""
    from inference.registry import FamilyRegistry

    families = FamilyRegistry.from_environment()
    catalog = families.catalog(paths)
    out: list[ServedModel] = []
    wanted: list[str | None] = list(names) or [None]
    for name in wanted:
        path, package = catalog.resolve_model(name)
        family = package.family if package is not None else families.detect_family(path)
        spec = families.spec(family)
        aliases: tuple[str, ...] = ()
        if package is not None:
            model_id = package.id
            languages = package.languages or spec.languages
        else:
            model_id = name or path.name
            aliases = (path.name,) if path.name != model_id else ()
            languages = spec.languages
        out.append(
            ServedModel(model_id, path, family, spec, tuple(languages), max_concurrent, aliases=aliases)
        )
    return out
