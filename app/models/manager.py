"""Qt-free state behind the models dialog: table rows, download jobs on worker threads, plain-word errors.

The dialog is a thin view: it renders :meth:`ModelsManager.rows` and forwards button presses. Everything
that touches the disk for long (downloads, conversions, deleting a multi-gigabyte model, cleaning leftovers)
runs as a background operation (``app.operations``), and nothing here ever waits for one: a GUI thread that
calls in never blocks. Job reports (``on_progress`` / ``on_finished``) reach the thread ``deliver`` names: the
dialog's GUI thread, or the job's own thread for Qt-free callers and tests.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.operations import Deliver, Operation, is_cancellation, on_the_worker
from inference.errors import CaptioneerError
from inference.models.catalog import Catalog
from inference.models.conversion import FORMATS_NEEDING_CONVERSION
from inference.models.progress import InstallProgress, describe, human_bytes
from inference.models.spec import PackageSpec
from inference.models.store import ModelStore

log = logging.getLogger("captioneer.app.models")
IMPORT_JOB = "import"  # the job id of a local import (its package id is known only once the file is read)

_HEADLINES = {
    "no network": "No connection to the model hub",
    "hub refused": "The model hub refused the download",
    "checksum mismatch": "The download was damaged (checksum mismatch)",
    "disk full": "Not enough disk space",
    "cancelled": "Download cancelled",
}


@dataclass(frozen=True)
class PackageRow:
    id: str
    name: str
    family: str
    size: str
    quantization: str
    languages: str
    license: str
    state: str
    installed: bool
    default: bool
    bundled: bool
    downloadable: bool
    busy: bool
    folder: Path | None


@dataclass(frozen=True)
class JobOutcome:
    package_id: str
    ok: bool
    cancelled: bool = False
    headline: str = ""
    detail: str = ""


def explain(package_name: str, exc: BaseException) -> tuple[str, str]:
    """(headline, detail) in words a user can act on."""
    if isinstance(exc, CaptioneerError):
        headline = _HEADLINES.get(getattr(exc, "kind", ""))
        detail = exc.message + (f"\nWhat to do: {exc.fix}" if exc.fix else "")
        return headline or f"Could not install {package_name}", detail
    return f"Could not install {package_name}", f"Unexpected error: {type(exc).__name__}: {exc}"


def languages_text(languages: tuple[str, ...], limit: int = 6) -> str:
    if len(languages) <= limit:
        return ", ".join(languages)
    return ", ".join(languages[:limit]) + f" … ({len(languages)} languages)"


def size_text(pkg: PackageSpec) -> str:
    if pkg.format == "bundled":
        return "bundled"
    if pkg.size_bytes <= 0:
        return "?"
    return ("~" if pkg.size_is_estimate else "") + human_bytes(pkg.size_bytes)


def needs_first_run_offer(catalog: Catalog) -> bool:
    """True when only the bundled demo (or nothing) is installed: offer to download a real model."""
    return not any(e.installed and e.package.format != "bundled" for e in catalog.entries())


def suggested_package(catalog: Catalog) -> PackageSpec | None:
    """The smallest downloadable default package: the quickest way to real captions."""
    defaults = [p for p in catalog.packages() if p.default and p.hf_repo and p.format != "bundled"]
    return min(defaults, key=lambda p: p.size_bytes, default=None)


class ModelsManager:
    def __init__(
        self,
        store: ModelStore,
        on_progress: Callable[[str, InstallProgress], None] | None = None,
        on_finished: Callable[[JobOutcome], None] | None = None,
        deliver: Deliver = on_the_worker,
    ) -> None:
        self.store = store
        self.on_progress = on_progress
        self.on_finished = on_finished
        self.deliver = deliver
        self._jobs: dict[str, tuple[threading.Thread, threading.Event]] = {}
        self._deleting: set[str] = set()
        self._last: dict[str, InstallProgress] = {}
        self._lock = threading.Lock()

    # -- rows ----------------------------------------------------------------------------

    def rows(self) -> list[PackageRow]:
        rows = []
        for entry in self.store.catalog.entries():
            pkg = entry.package
            busy = self.is_busy(pkg.id)
            bundled = pkg.format == "bundled"
            unconvertible = (
                pkg.format in FORMATS_NEEDING_CONVERSION and self.store.conversions.for_package(pkg) is None
            )
            rows.append(
                PackageRow(
                    id=pkg.id,
                    name=pkg.name + (" (default)" if pkg.default else ""),
                    family=pkg.family,
                    size=size_text(pkg),
                    quantization=pkg.quantization or "",
                    languages=languages_text(pkg.languages),
                    license=pkg.license,
                    state="needs a converter (not in this build)"
                    if unconvertible and not entry.installed
                    else self._state_text(pkg, entry.installed, busy),
                    installed=entry.installed,
                    default=pkg.default,
                    bundled=bundled,
                    downloadable=bool(pkg.hf_repo and pkg.files) and not bundled and not unconvertible,
                    busy=busy,
                    folder=self.store.catalog.package_dir(pkg) if entry.installed else None,
                )
            )
        return rows

    def _state_text(self, pkg: PackageSpec, installed: bool, busy: bool) -> str:
        if busy and pkg.id in self._deleting:
            return "deleting…"
        if busy:
            report = self._last.get(pkg.id)
            if report is not None and report.fraction is not None:
                return f"{report.phase} {report.fraction * 100:.0f}%"
            return "starting…"
        if pkg.format == "bundled":
            return "bundled" if installed else "missing"
        if installed:
            return "installed"
        partial = self.store.partial_bytes(pkg.id)
        return f"paused ({human_bytes(partial)} downloaded)" if partial else "not installed"

    # -- jobs ----------------------------------------------------------------------------

    def is_busy(self, package_id: str) -> bool:
        with self._lock:
            job = self._jobs.get(package_id)
        return job is not None and job[0].is_alive()

    def any_busy(self) -> bool:
        with self._lock:
            return any(thread.is_alive() for thread, _ in self._jobs.values())

    def download(self, package_id: str) -> bool:
        """Start installing (download, then any conversion) in the background; False if that package is busy."""
        return self._start(package_id, "install", lambda cancel: self._install(package_id, cancel))

    def import_file(self, source: Path) -> bool:
        """Import a local model file (a ``.nemo``, ``.gguf`` or Phonon-2 archive) in the background; False while
        another import runs. The result arrives through ``on_finished`` under the job id :data:`IMPORT_JOB`."""
        return self._start(IMPORT_JOB, "import", lambda cancel: self._import(source, cancel), source.name)

    def delete(self, package_id: str) -> bool:
        """Delete an installed package in the background (a model is gigabytes); False if the package is busy.

        The result arrives through ``on_finished`` like an install's.
        """
        return self._start(package_id, "delete", lambda _cancel: self._remove(package_id))

    def _start(
        self,
        job: str,
        kind: str,
        work: Callable[[threading.Event], JobOutcome],
        subject: str | None = None,
    ) -> bool:
        """Run ``work`` as job ``job`` (one at a time per id); its outcome, or its failure in words (about
        ``subject``, by default the package's name), reaches ``on_finished``."""
        with self._lock:
            running = self._jobs.get(job)
            if running is not None and running[0].is_alive():
                return False
            cancel = threading.Event()
            operation = Operation(lambda: work(cancel), f"{kind}-{job}")
            operation.success(lambda outcome: self._finish(job, cancel, outcome))
            operation.failure(lambda exc: self._finish(job, cancel, self._failed(kind, job, subject, exc)))
            if kind == "delete":
                self._deleting.add(job)
            # Registered before the job can end: its report (on this thread or another) finds it here.
            self._jobs[job] = (operation.run_in_background(self.deliver), cancel)
        return True

    def _install(self, package_id: str, cancel: threading.Event) -> JobOutcome:
        name = self.store.catalog.get(package_id).name
        self.store.install(package_id, progress=lambda r: self._progress(package_id, r), cancel=cancel)
        return JobOutcome(package_id, ok=True, headline=f"{name} is installed")

    def _import(self, source: Path, cancel: threading.Event) -> JobOutcome:
        path = self.store.import_local(
            source, progress=lambda r: self._progress(IMPORT_JOB, r), cancel=cancel
        )
        package_id = path.relative_to(self.store.root).parts[0]
        return JobOutcome(IMPORT_JOB, ok=True, headline=f"{source.name} is installed as {package_id}")

    def _remove(self, package_id: str) -> JobOutcome:
        name = self.store.catalog.get(package_id).name
        self.store.remove(package_id)
        return JobOutcome(package_id, ok=True, headline=f"Deleted {name}")

    def _failed(self, kind: str, job: str, subject: str | None, exc: BaseException) -> JobOutcome:
        """A failed job's outcome in words a user can act on (the failure itself is logged by the operation)."""
        name = subject or self._package_name(job)
        if kind == "delete":
            detail = explain(name, exc)[1] if isinstance(exc, CaptioneerError) else str(exc)
            return JobOutcome(job, ok=False, headline=f"Could not delete {name}", detail=detail)
        # An import is also stopped by a converter's Cancelled; an install only by the store's cancelled kind.
        cancelled = is_cancellation(exc) if kind == "import" else getattr(exc, "kind", "") == "cancelled"
        headline, detail = explain(name, exc)
        if cancelled and kind == "install":
            detail = "The downloaded part is kept; Download resumes it."
        return JobOutcome(job, ok=False, cancelled=cancelled, headline=headline, detail=detail)

    def _package_name(self, package_id: str) -> str:
        try:
            return self.store.catalog.get(package_id).name
        except CaptioneerError:  # an unknown id: the error says so in its own words
            return package_id

    def _finish(self, job: str, cancel: threading.Event, outcome: JobOutcome) -> None:
        with self._lock:
            if self._jobs.get(job, (None, None))[1] is cancel:  # not a newer job under the same id
                del self._jobs[job]
                self._deleting.discard(job)
                self._last.pop(job, None)
        if self.on_finished is not None:
            self.on_finished(outcome)

    def _progress(self, job: str, report: InstallProgress) -> None:
        self._last[job] = report
        on_progress = self.on_progress
        if on_progress is not None:
            self.deliver(lambda: on_progress(job, report))

    def cancel(self, package_id: str) -> None:
        with self._lock:
            job = self._jobs.get(package_id)
        if job is not None:
            job[1].set()

    def cancel_all(self) -> None:
        """Ask every job to stop; returns at once (the jobs report through ``on_finished`` as they end)."""
        with self._lock:
            jobs = list(self._jobs.values())
        for _, cancel in jobs:
            cancel.set()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no job runs (never from the GUI thread: shutdown code and tests); True when idle."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                threads = [thread for thread, _ in self._jobs.values()]
            alive = [thread for thread in threads if thread.is_alive()]
            if not alive:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            alive[0].join(left)

    def cleanup_in_background(self) -> None:
        """Remove old leftovers of interrupted installs without holding up the caller (it may be the GUI)."""
        Operation(self._cleanup, "models-cleanup").run_in_background(self.deliver)

    def _cleanup(self) -> None:
        try:
            self.store.cleanup()
        except OSError:  # a leftover still in use is tried again next time
            log.debug("cleaning the model store failed", exc_info=True)

    @staticmethod
    def status_line(report: InstallProgress) -> str:
        return describe(report)
