"""Progress reports for installs: bytes done/total, speed and ETA, throttled for user interfaces."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from inference.models.errors import InstallCancelled


@dataclass(frozen=True)
class InstallProgress:
    """One report. ``phase`` is checking, downloading, verifying, converting, finishing or done.

    ``done``/``total`` count bytes, except while converting: a conversion counts its own steps (tensors,
    percent), so only their ratio means something to a reader.
    """

    package_id: str
    phase: str
    done: int = 0
    total: int | None = None
    file: str = ""
    speed_bps: float | None = None
    eta_s: float | None = None
    message: str = ""

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(1.0, self.done / self.total)


ProgressCallback = Callable[[InstallProgress], None]


def check_cancel(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise InstallCancelled("the install was cancelled", "start it again to resume the download")


class RateMeter:
    """Speed over a sliding window (so a stall shows up quickly) and the ETA it implies."""

    def __init__(self, window_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.clock = clock
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, done: int) -> None:
        now = self.clock()
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[0][0] > self.window_s:
            self._samples.popleft()

    def speed(self) -> float | None:
        if len(self._samples) < 2:
            return None
        (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
        if t1 - t0 <= 0:
            return None
        return max(0.0, (d1 - d0) / (t1 - t0))

    def eta(self, done: int, total: int | None) -> float | None:
        speed = self.speed()
        if total is None or not speed:
            return None
        return max(0.0, (total - done) / speed)

    def reset(self) -> None:
        self._samples.clear()


class ThrottledReporter:
    """Forwards at most ``max_per_s`` byte-progress reports; phase changes always go through."""

    def __init__(
        self,
        callback: ProgressCallback | None,
        max_per_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.callback = callback
        self.min_interval = 1.0 / max_per_s
        self.clock = clock
        self._last_time = -1e9
        self._last_phase = ""

    def __call__(self, report: InstallProgress, force: bool = False) -> None:
        if self.callback is None:
            return
        now = self.clock()
        finished = report.total is not None and report.done >= report.total
        if (
            force
            or finished
            or report.phase != self._last_phase
            or now - self._last_time >= self.min_interval
        ):
            self._last_time = now
            self._last_phase = report.phase
            self.callback(report)


def human_bytes(size: float) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"


def human_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def describe(report: InstallProgress) -> str:
    """One line for a terminal or a status label, e.g. ``downloading x.gguf: 1.2 GB of 2.5 GB, 12.0 MB/s, 1 min 48 s left``."""
    parts = [report.phase + (f" {report.file}" if report.file else "")]
    detail = []
    if report.total and report.phase == "converting":
        detail.append(f"{min(1.0, report.done / report.total) * 100:.0f}%")
    elif report.total:
        detail.append(f"{human_bytes(report.done)} of {human_bytes(report.total)}")
    elif report.done and report.phase != "converting":
        detail.append(human_bytes(report.done))
    if report.speed_bps:
        detail.append(f"{human_bytes(report.speed_bps)}/s")
    if report.eta_s is not None and report.phase == "downloading":
        detail.append(f"{human_duration(report.eta_s)} left")
    if report.message:
        detail.append(report.message)
    text = parts[0]
    return text + (": " + ", ".join(detail) if detail else "")


@dataclass
class ProgressTracker:
    """Turns per-file byte counts into package-wide reports with speed and ETA."""

    package_id: str
    report: ThrottledReporter
    meter: RateMeter = field(default_factory=RateMeter)

    def emit(
        self,
        phase: str,
        done: int = 0,
        total: int | None = None,
        file: str = "",
        message: str = "",
        rate: bool = False,
        force: bool = False,
    ) -> None:
        speed = eta = None
        if rate:
            self.meter.add(done)
            speed, eta = self.meter.speed(), self.meter.eta(done, total)
        self.report(
            InstallProgress(self.package_id, phase, done, total, file, speed, eta, message), force=force
        )


def hash_reporter(
    tracker: ProgressTracker, stage: str, offset: int, total: int | None, name: str
) -> Callable[[int], None]:
    """Progress of hashing one file, counted from ``offset`` bytes into a larger job."""

    def report(done: int) -> None:
        tracker.emit(stage, offset + done, total, name)

    return report
