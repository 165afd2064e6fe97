"""The limits a worker client and its streams run under (docs/architecture.md §2.2)."""

from __future__ import annotations

from dataclasses import dataclass

from inference.errors import UsageError

REPLAY_LIMIT_S = 150.0  # audio kept per live stream for a worker restart (an R2T2 window, a long last word)


@dataclass(frozen=True)
class WorkerPolicy:
    """Supervision limits. Times in seconds."""

    start_timeout_s: float = 60.0  # spawn + imports
    ping_interval_s: float = 1.0
    ping_timeout_s: float = 15.0  # no pong for this long: the process is frozen
    hang_timeout_s: float = 120.0  # one push/span busy this long without progress: hung
    load_timeout_s: float = 3600.0  # loads may convert gigabytes; they report progress when they can
    max_restarts: int = 3  # within restart_window_s; one more failure stops the client
    restart_window_s: float = 300.0
    backoff_s: tuple[float, ...] = (0.0, 1.0, 4.0)  # before the 1st, 2nd, 3rd... restart
    # Past the restart limit the client is down; it tries a fresh worker (a revival) after each of these waits,
    # the last repeating (empty: never). Streams stay open meanwhile, holding their newest audio.
    revive_after_s: tuple[float, ...] = (30.0, 60.0, 120.0, 300.0)


@dataclass(frozen=True)
class BacklogPolicy:
    """What a stream does when audio arrives faster than the worker transcribes it."""

    mode: str = "coalesce"  # "coalesce" | "block" | "refuse"
    max_in_flight: int = 2  # pushes handed to the worker and not yet answered
    max_backlog_s: float = 30.0  # audio waiting (in flight + queued) beyond which the mode applies

    def __post_init__(self) -> None:
        if self.mode not in ("coalesce", "block", "refuse"):
            raise UsageError(f"unknown backlog policy {self.mode!r}", "use coalesce, block or refuse")
        if self.max_in_flight < 1 or self.max_backlog_s <= 0:
            raise UsageError("max_in_flight must be >= 1 and max_backlog_s > 0")
