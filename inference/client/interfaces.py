"""How the client's parts see each other: the few calls a stream or an engine makes on the client, and the
calls the client's router and supervisor make on a stream. Nothing else crosses between them."""

from __future__ import annotations

from typing import Protocol

from inference import protocol as p
from inference.client.jobs import JobClient
from inference.client.policies import WorkerPolicy
from inference.client.requests import PendingRequest
from inference.contract import CancelToken, ProgressCallback, StreamEvent
from inference.errors import CaptioneerError, WorkerError


class SupervisedStream(Protocol):
    """A live stream as the client's router and supervisor drive it (``RemoteStream``)."""

    @property
    def stream_id(self) -> str: ...

    @property
    def engine_id(self) -> str: ...

    @property
    def closed(self) -> bool:
        """Finished or cancelled: no worker needs to hold it any more."""
        ...

    @property
    def was_opened(self) -> bool:
        """A worker opened it once (a stream whose first opening is under way is opened by that request)."""
        ...

    def open_message(self, request_id: int) -> p.OpenStream:
        """The request that opens it in a worker: fresh, or resuming where the last worker left it."""
        ...

    def on_opened(self, kind: str) -> None: ...

    def cancel(self) -> None:
        """Drop it without a result (its model is unloaded)."""
        ...

    def on_pushed(self, message: p.Pushed) -> None: ...

    def on_decoding(self, seq: int) -> None: ...

    def on_worker_events(self, events: list[StreamEvent]) -> None:
        """Events the worker sent outside a push (reader thread)."""
        ...

    def on_failed(self, error: CaptioneerError, kind: str) -> None: ...

    def on_worker_lost(self, reason: str, self_inflicted: bool = False) -> None: ...

    def on_worker_restored(self, took_s: float) -> None: ...

    def on_given_up(self, error: WorkerError, revive_in_s: float | None) -> None:
        """The client stopped restarting its worker; a revival is tried in ``revive_in_s`` (None: never)."""
        ...

    def on_worker_revived(self, down_s: float) -> None:
        """A revived worker is about to reopen the stream after ``down_s`` seconds without one."""
        ...


class StreamHost(Protocol):
    """What a stream needs of its client."""

    @property
    def policy(self) -> WorkerPolicy: ...

    @property
    def gave_up(self) -> WorkerError | None: ...

    @property
    def restarting(self) -> bool: ...

    @property
    def generation(self) -> int: ...

    def next_id(self) -> int: ...

    def send_quietly(self, message: p.Message) -> bool: ...

    def request(
        self,
        message: p.Message,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        timeout: float | None = None,
    ) -> p.Message: ...

    def forget_stream(self, stream: SupervisedStream) -> None: ...


class EngineHost(StreamHost, JobClient, Protocol):
    """What an engine needs of its client: a stream's calls, streamed offline jobs, opening streams and
    unloading."""

    def open_stream(self, stream: SupervisedStream) -> None: ...

    def unload(self, engine_id: str) -> None: ...


class StreamDirectory(Protocol):
    """The client's open streams, by id."""

    def get(self, stream_id: str) -> SupervisedStream | None: ...

    def forget(self, stream_id: str) -> None: ...

    def all(self) -> list[SupervisedStream]: ...

    def take_all(self) -> list[SupervisedStream]:
        """Every stream, forgotten at once."""
        ...


class WorkerRestorer(Protocol):
    """Brings a new worker to where the dead one was."""

    def reload_models(self) -> None:
        """Load every model the client had loaded, under the same engine ids."""
        ...

    def reopen_streams(self) -> None:
        """Reopen every open stream a worker had opened (each resumes from its own state)."""
        ...

    def retry_in_flight(self, in_flight: list[PendingRequest]) -> None:
        """Retry once the loads and stream openings the dead worker had not answered."""
        ...
