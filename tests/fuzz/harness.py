"""A small fuzz harness for readers of untrusted files: every mutated input runs in its own child process
under ``resource.setrlimit`` limits, and each run must end in an exact result or a clean refusal.

How it runs
    :class:`Fuzzer` starts one *zygote* process (multiprocessing "spawn", so nothing of the test process is
    inherited) that imports the target once; each case is then a ``fork`` of the zygote, so a case costs a few
    milliseconds rather than an interpreter start. In the forked child, before the target runs, the limits are
    set: ``RLIMIT_AS`` (the child's address space at fork plus :attr:`Limits.memory_bytes`), ``RLIMIT_FSIZE``
    (no file may grow past :attr:`Limits.file_bytes`; past it the kernel stops the child with SIGXFSZ) and
    ``RLIMIT_CPU``. The zygote waits on a pidfd with a deadline (:attr:`Limits.seconds`) and kills a child that
    passes it; ``wait4`` gives its peak RSS.

The target
    ``"package.module:function"``, called as ``function(input_path, scratch_dir)`` in the child, with the
    mutated bytes at ``scratch_dir / input_name`` and ``scratch_dir`` as the working directory. It returns a
    picklable summary of what it read (compared by the test's ``judge``) or raises a
    :class:`inference.errors.CaptioneerError` to refuse. Anything else (another exception, a signal, a
    timeout, memory or disk past the limits) is a finding. The scratch folder is measured after the run
    (``disk_left_bytes``: what the target left there besides the input) and removed.

Mutations
    A :data:`Mutator` is ``(data, rng) -> bytes``; a :class:`Case` is made deterministically from
    ``(seed, index)``: case ``i`` uses mutator ``i % len(mutators)`` with ``random.Random(f"{seed}:{i}")``, so a
    fixed slice (seed, count) always runs the same inputs and every mutator gets its share. Generic mutators
    here: :func:`flip_bytes`, :func:`extreme_field` (1/2/4/8 bytes set to 0, max, min or sign-bit values in
    either byte order), :func:`truncate`, :func:`splice` (a run of bytes repeated or dropped). Format-aware
    ones (pickle opcodes, tar member types and paths) come from each reader's test, and :func:`named` labels
    them.

Use::

    fuzzer = Fuzzer("tests.fuzz.nemo_target:import_nemo", input_name="model.nemo", limits=Limits())
    with fuzzer:
        report = fuzzer.run(original, cases(seed=37, count=200, mutators=[...]), judge)
    assert report.problems == [], report.summary()

``judge(case, outcome) -> str | None`` returns a problem (e.g. a refusal that names a temporary path, a result
that differs from what the file holds) or None. Linux only (``os.pidfd_open``, ``os.fork``).
"""

from __future__ import annotations

import collections
import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import pickle
import random
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

Mutator = Callable[[bytes, random.Random], bytes]

# What a child's run ended in. "result" and "refused" are the acceptable ones.
RESULT, REFUSED, ERROR, SIGNAL, TIMEOUT, EXIT = "result", "refused", "error", "signal", "timeout", "exit"
_MESSAGE_CHARS = 4000  # a message or traceback is cut here so the pipe never fills


@dataclasses.dataclass(frozen=True)
class Limits:
    memory_bytes: int = 768 << 20  # address space a case may add to the zygote's
    rss_bytes: int = 512 << 20  # peak RSS a case may add to the zygote's
    file_bytes: int = 64 << 20  # the largest file a case may write (RLIMIT_FSIZE)
    disk_left_bytes: int = 64 << 20  # what a case may leave in its scratch folder besides the input
    cpu_seconds: int = 120  # RLIMIT_CPU: a spinning child is stopped even if the deadline is generous
    seconds: float = 120.0  # a hang detector, not a speed bound: far above any honest run on a busy machine


@dataclasses.dataclass(frozen=True)
class Case:
    index: int
    mutator: str
    data: bytes


@dataclasses.dataclass(frozen=True)
class Outcome:
    kind: str  # RESULT, REFUSED, ERROR, SIGNAL, TIMEOUT or EXIT
    value: Any = None  # the target's result (RESULT)
    error_type: str = ""  # the exception's class name (REFUSED, ERROR)
    message: str = ""  # str() of the exception, the traceback (ERROR), or what stopped the child
    exit_code: int | None = None  # a refusal's CaptioneerError.exit_code
    extra_rss_bytes: int = 0  # the child's peak RSS above its RSS at fork
    disk_left_bytes: int = 0
    left: tuple[str, ...] = ()  # what the case left in its scratch folder besides the input (up to 50 paths)
    seconds: float = 0.0


@dataclasses.dataclass
class Report:
    outcomes: list[tuple[Case, Outcome]] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return dict(collections.Counter(outcome.kind for _, outcome in self.outcomes))

    def by_mutator(self) -> dict[str, dict[str, int]]:
        table: dict[str, collections.Counter[str]] = {}
        for case, outcome in self.outcomes:
            table.setdefault(case.mutator, collections.Counter())[outcome.kind] += 1
        return {name: dict(counter) for name, counter in sorted(table.items())}

    def summary(self) -> str:
        lines = [f"{len(self.outcomes)} cases: {self.counts()}"]
        lines += [f"  {name}: {counts}" for name, counts in self.by_mutator().items()]
        peak = max((o.extra_rss_bytes for _, o in self.outcomes), default=0)
        lines.append(f"  peak extra RSS {peak >> 20} MiB")
        lines += [f"PROBLEM {p}" for p in self.problems[:20]]
        return "\n".join(lines)


Judge = Callable[[Case, Outcome], str | None]

# ------------------------------------------------------------------------------------------ mutations


def named(name: str, mutator: Mutator) -> Mutator:
    """``mutator`` reported as ``name`` in cases and summaries."""

    def apply(data: bytes, rng: random.Random) -> bytes:
        return mutator(data, rng)

    apply.__name__ = name
    return apply


def flip_bytes(data: bytes, rng: random.Random) -> bytes:
    """One to eight bytes XORed with a random non-zero value."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if out:
            out[rng.randrange(len(out))] ^= rng.randint(1, 255)
    return bytes(out)


_EXTREMES = (0, 1, -1, 0x7F, 0x80, 0x7FFF, 0x8000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 2**63 - 1, 2**63)


def extreme_field(data: bytes, rng: random.Random) -> bytes:
    """A 1, 2, 4 or 8 byte field at a random place set to an extreme value (either byte order): what a length,
    count or offset field set to its limits looks like."""
    width = rng.choice((1, 2, 4, 8))
    if len(data) < width:
        return data
    value = rng.choice(_EXTREMES) % (1 << (8 * width))
    raw = value.to_bytes(width, rng.choice(("little", "big")))
    at = rng.randrange(len(data) - width + 1)
    return data[:at] + raw + data[at + width :]


def truncate(data: bytes, rng: random.Random) -> bytes:
    """The first n bytes only (n anywhere from 0 to one byte short)."""
    return data[: rng.randrange(len(data))] if data else data


def splice(data: bytes, rng: random.Random) -> bytes:
    """A run of up to 64 bytes dropped or repeated, shifting everything after it."""
    if not data:
        return data
    at = rng.randrange(len(data))
    run = data[at : at + rng.randint(1, 64)]
    return data[:at] + data[at + len(run) :] if rng.random() < 0.5 else data[:at] + run + data[at:]


GENERIC: tuple[Mutator, ...] = (flip_bytes, extreme_field, truncate, splice)


def cases(
    seed: int, count: int, original: bytes, mutators: Sequence[Mutator], start: int = 0
) -> Iterator[Case]:
    """Cases ``start`` .. ``start + count - 1`` of the deterministic sequence for ``seed``."""
    for index in range(start, start + count):
        mutator = mutators[index % len(mutators)]
        rng = random.Random(f"{seed}:{index}")
        yield Case(index, mutator.__name__, mutator(original, rng))


# ------------------------------------------------------------------------------------------ the parent side


class Fuzzer:
    """Runs cases against ``target`` in forks of one zygote process; a context manager."""

    def __init__(self, target: str, input_name: str, limits: Limits | None = None) -> None:
        self.target = target
        self.input_name = input_name
        self.limits = limits or Limits()
        self._conn: multiprocessing.connection.Connection | None = None
        self._process: Any = None

    def __enter__(self) -> Fuzzer:
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self._process = context.Process(
            target=_zygote, args=(self.target, self.input_name, self.limits, child), daemon=True
        )
        self._process.start()
        child.close()
        self._conn = parent
        try:
            ready = parent.recv()  # the zygote imported the target (or says why it could not)
        except EOFError:
            ready = "the zygote process ended before it was ready"
        if ready != "ready":
            self.close()
            raise RuntimeError(f"the fuzz target {self.target} did not load: {ready}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            self._process.join(timeout=30)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
            self._process = None

    def run_case(self, case: Case) -> Outcome:
        assert self._conn is not None, "use the Fuzzer as a context manager"
        self._conn.send_bytes(case.data)
        outcome: Outcome = self._conn.recv()
        return outcome

    def run(self, cases_: Iterable[Case], judge: Judge | None = None) -> Report:
        """Every case, each checked against the limits and then by ``judge``."""
        report = Report()
        for case in cases_:
            outcome = self.run_case(case)
            report.outcomes.append((case, outcome))
            problem = self.check(outcome) or (judge(case, outcome) if judge is not None else None)
            if problem is not None:
                report.problems.append(f"case {case.index} ({case.mutator}): {problem}")
        return report

    def check(self, outcome: Outcome) -> str | None:
        """The limit every case must keep, whatever the reader: no signal, no hang, memory and disk bounded,
        and an exact result or a clean refusal."""
        if outcome.kind not in (RESULT, REFUSED):
            shown = (
                outcome.message[-800:] if outcome.kind == ERROR else outcome.message[:600]
            )  # a traceback's end
            return f"{outcome.kind}: {outcome.error_type} {shown}"
        if outcome.extra_rss_bytes > self.limits.rss_bytes:
            return f"peak RSS grew by {outcome.extra_rss_bytes} bytes (bound {self.limits.rss_bytes})"
        if outcome.disk_left_bytes > self.limits.disk_left_bytes:
            return f"left {outcome.disk_left_bytes} bytes on disk (bound {self.limits.disk_left_bytes})"
        return None


# ------------------------------------------------------------------------------------------ the zygote


def _load_target(spec: str) -> Callable[[Path, Path], Any]:
    module_name, _, function = spec.partition(":")
    __import__(module_name)
    target: Callable[[Path, Path], Any] = getattr(sys.modules[module_name], function)
    return target


def _zygote(spec: str, input_name: str, limits: Limits, conn: multiprocessing.connection.Connection) -> None:
    try:
        target = _load_target(spec)
    except BaseException as exc:  # the parent reports it; a zygote that cannot load is a broken test
        conn.send(f"{type(exc).__name__}: {exc}")
        return
    conn.send("ready")
    base = Path(tempfile.mkdtemp(prefix="fuzz-"))
    own_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    try:
        while True:
            try:
                data = conn.recv_bytes()
            except EOFError:
                return
            scratch = base / "case"
            scratch.mkdir()
            try:
                (scratch / input_name).write_bytes(data)
                conn.send(_run_child(target, scratch, input_name, limits, own_rss))
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run_child(
    target: Callable[[Path, Path], Any], scratch: Path, input_name: str, limits: Limits, own_rss: int
) -> Outcome:
    read_end, write_end = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: limits, run, report, exit without running the zygote's cleanup
        os.close(read_end)
        _child(target, scratch, input_name, limits, write_end)
    os.close(write_end)
    pidfd = os.pidfd_open(pid)
    chunks: list[bytes] = []
    timed_out = False
    try:
        deadline = started + limits.seconds
        open_fds = [pidfd, read_end]
        while pidfd in open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select(open_fds, [], [], remaining)
            if read_end in ready:
                chunk = os.read(read_end, 1 << 16)
                chunks.append(chunk)
                if not chunk:
                    open_fds.remove(read_end)
            if pidfd in ready:
                open_fds.remove(pidfd)
        _, status, usage = os.wait4(pid, 0)
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(pidfd)
        os.close(read_end)
    seconds = time.monotonic() - started
    extra_rss = max(0, usage.ru_maxrss * 1024 - own_rss)  # a rough bound, for a child that reported nothing
    entries = sorted(p for p in scratch.rglob("*") if p != scratch / input_name)
    left_bytes = sum(p.lstat().st_size for p in entries if p.is_file() and not p.is_symlink())
    left = tuple(p.relative_to(scratch).as_posix() for p in entries[:50])

    def measured(outcome: Outcome, rss: int = extra_rss) -> Outcome:
        return dataclasses.replace(
            outcome, extra_rss_bytes=rss, disk_left_bytes=left_bytes, left=left, seconds=seconds
        )

    if timed_out:
        return measured(Outcome(TIMEOUT, message=f"still running after {limits.seconds} s"))
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        name = signal.Signals(number).name
        why = {signal.SIGXFSZ: " (a file grew past the file size limit)", signal.SIGXCPU: " (CPU limit)"}
        return measured(Outcome(SIGNAL, message=f"{name}{why.get(signal.Signals(number), '')}"))
    payload = b"".join(chunks)
    if os.WEXITSTATUS(status) != 0 or not payload:
        return measured(Outcome(EXIT, message=f"exit status {os.WEXITSTATUS(status)}, no report"))
    reported: Outcome = pickle.loads(payload)
    return measured(reported, reported.extra_rss_bytes)


def _child(
    target: Callable[[Path, Path], Any], scratch: Path, input_name: str, limits: Limits, report_fd: int
) -> None:
    code = 0
    try:
        os.chdir(scratch)
        signal.signal(
            signal.SIGXFSZ, signal.SIG_DFL
        )  # Python ignores it; a file past the limit must stop the child
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # the target's prints and warnings stay out of the test's output
        os.dup2(devnull, 2)
        page = os.sysconf("SC_PAGE_SIZE")
        with open("/proc/self/statm", encoding="ascii") as statm:
            address_space = int(statm.read().split()[0]) * page
        memory = address_space + limits.memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))  # SIGXCPU first
        resident = _status_bytes("VmRSS")
        outcome = _outcome(target, scratch / input_name, scratch)
        # VmHWM of a forked child starts at its RSS at fork, so the difference is what this case added.
        outcome = dataclasses.replace(outcome, extra_rss_bytes=max(0, _status_bytes("VmHWM") - resident))
        try:
            payload = pickle.dumps(outcome)
        except Exception as exc:  # an unpicklable result is the test's bug; say so rather than crash
            payload = pickle.dumps(Outcome(ERROR, error_type=type(exc).__name__, message=f"result: {exc}"))
        view = memoryview(payload)
        while view:
            view = view[os.write(report_fd, view) :]
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def _status_bytes(field: str) -> int:
    """A ``kB`` field of /proc/self/status in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)


def _outcome(target: Callable[[Path, Path], Any], path: Path, scratch: Path) -> Outcome:
    from inference.errors import CaptioneerError

    try:
        value = target(path, scratch)
    except CaptioneerError as exc:
        return Outcome(
            REFUSED, error_type=type(exc).__name__, message=str(exc)[:_MESSAGE_CHARS], exit_code=exc.exit_code
        )
    except BaseException as exc:
        text = "".join(traceback.format_exception(exc))[-_MESSAGE_CHARS:]
        return Outcome(ERROR, error_type=type(exc).__name__, message=text)
    return Outcome(RESULT, value=value)
