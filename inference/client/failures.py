"""How the client words what went wrong in the worker: a ``failed`` answer as an error, a process exit in
plain words, and whether a death was the worker's own doing."""

from __future__ import annotations

import signal

from inference import protocol as p
from inference.errors import CaptioneerError, WorkerError, error_class


class BacklogFull(CaptioneerError):
    """A push was refused because the stream's backlog is at its limit; the chunk was not taken."""

    exit_code = 1


def error_from_failure(failed: p.Failed) -> CaptioneerError:
    if failed.kind == "out_of_memory":
        return WorkerError(f"out of memory: {failed.message}", failed.fix)
    return error_class(failed.kind)(failed.message, failed.fix)


# Deaths the worker brings on itself: what it was decoding may be the cause. SIGKILL, SIGTERM and a frozen
# process come from outside (the user, the OOM killer, a supervisor on a starved machine), never from audio.
_SELF_INFLICTED = {signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGABRT, signal.SIGFPE, signal.SIGSYS}


def died_of_itself(exitcode: int | None) -> bool:
    """Whether a worker that ended with ``exitcode`` crashed (native fault, abort, error exit) rather than
    being stopped from outside."""
    if exitcode is None or exitcode == 0:
        return False
    if exitcode > 0:
        return True
    try:
        return signal.Signals(-exitcode) in _SELF_INFLICTED
    except ValueError:
        return False


def describe_exit(exitcode: int | None, rss_bytes: int = 0) -> str:
    """Plain words for how the worker process ended (``rss_bytes``: its memory when last heard of)."""
    if exitcode is None:
        return "the inference worker stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        meaning = {
            "SIGSEGV": "a crash in native model code",
            "SIGBUS": "a crash in native model code",
            "SIGILL": "the native library uses instructions this CPU lacks",
            "SIGABRT": "the native library aborted",
            "SIGKILL": "killed from outside: by the system's out-of-memory killer or by another program",
            "SIGTERM": "terminated from outside",
        }.get(name, "a signal")
        memory = f"; it was using {rss_bytes / 2**20:.0f} MB" if rss_bytes and name == "SIGKILL" else ""
        return f"the inference worker died ({name}: {meaning}{memory})"
    return f"the inference worker exited with code {exitcode}"
