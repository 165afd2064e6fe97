"""What machine a benchmark ran on, how busy it was, and which threads each side really used.

Every bench prints :func:`machine_header` above its table: the CPU model and the flags that decide
which kernels run (AVX2, AVX-512, VNNI, BF16, AMX), the cores, the load average and the other
processes using CPU, with a loud warning when the machine is busy (figures taken then are "loaded":
quote shares, not speeds). Figures without this header are not comparable across machines: an
earlier Parakeet comparison (torch 6.25 s vs 0.87 s for the same 10 s clip) differed mostly by load.

Stdlib only: the torch side imports this module too, from the reference interpreter, which is
chosen with ``--reference-python`` or ``$CAPTIONEER_REFERENCE_PYTHON`` (:func:`reference_python`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

REFERENCE_ENV = "CAPTIONEER_REFERENCE_PYTHON"
# Flags that pick ggml's / MKL's / oneDNN's kernels; /proc/cpuinfo spelling.
KERNEL_FLAGS = (
    "avx2",
    "fma",
    "f16c",
    "avx_vnni",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)
BUSY_LOAD_PER_CORE = 0.3  # 1-minute load above this share of the cores: the machine is busy
BUSY_PROCESS_CORES = 0.25  # another process using more than this many cores counts as busy
REFERENCE_SETUP = (
    "python3 -m venv .venv-ref && .venv-ref/bin/pip install torch==2.13.0 transformers==5.23.0 threadpoolctl, "
    f"then pass --reference-python .venv-ref/bin/python or set {REFERENCE_ENV}"
)


def _cpuinfo() -> dict[str, str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    return info


def cpu_name() -> str:
    return _cpuinfo().get("model name") or platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    """The kernel-relevant flags this CPU has (in KERNEL_FLAGS order)."""
    present = set(_cpuinfo().get("flags", "").split())
    return [flag for flag in KERNEL_FLAGS if flag in present]


def cores() -> tuple[int, int]:
    """(logical CPUs this process may run on, logical CPUs of the machine)."""
    total = os.cpu_count() or 1
    try:
        return len(os.sched_getaffinity(0)), total
    except AttributeError:
        return total, total


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _cpu_ticks() -> dict[int, tuple[str, int]]:
    ticks = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                head, tail = stat.rsplit(")", 1)
                fields = tail.split()
                ticks[int(entry.name)] = (head.split("(", 1)[1], int(fields[11]) + int(fields[12]))
            except (OSError, IndexError, ValueError):
                continue
    return ticks


def other_processes(interval: float = 0.5, min_cores: float = 0.05) -> list[tuple[float, int, str]]:
    """(cores used, pid, command) of processes outside this benchmark busy over ``interval`` seconds."""
    if not Path("/proc/self/stat").exists():
        return []
    mine = {os.getpid(), *_descendants(os.getpid())}
    before = _cpu_ticks()
    time.sleep(interval)
    after = _cpu_ticks()
    hz = os.sysconf("SC_CLK_TCK")
    busy = []
    for pid, (name, total) in after.items():
        if pid in mine or pid not in before:
            continue
        used = (total - before[pid][1]) / hz / interval
        if used >= min_cores:
            busy.append((used, pid, name))
    return sorted(busy, reverse=True)


class OutsideCpu:
    """CPU the rest of the machine used while a benchmark ran, from a start to :meth:`cores`: the busy CPU time of
    the whole machine (``/proc/stat``) minus this process's and its descendants' (alive, or reaped), and the time
    the hypervisor gave to other guests (steal). Unlike the load average, the benchmark's own threads do not
    count, so a run that kept its cores busy is not called "busy" for that."""

    def __init__(self) -> None:
        self._start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float, float] | None:
        try:
            fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        except (OSError, ValueError):
            return None
        hz = os.sysconf("SC_CLK_TCK")
        user, nice, system, _idle, _iowait, irq, softirq, steal = fields
        ticks = _cpu_ticks()
        family = {os.getpid(), *_descendants(os.getpid())}
        alive = sum(ticks[pid][1] for pid in family if pid in ticks and pid != os.getpid()) / hz
        own = os.times()
        mine = own.user + own.system + own.children_user + own.children_system + alive
        return time.monotonic(), (user + nice + system + irq + softirq) / hz, steal / hz, mine

    def cores(self) -> tuple[float, float] | None:
        """(cores used outside this benchmark, cores stolen by the hypervisor), averaged since the start."""
        end = self._sample()
        if self._start is None or end is None or end[0] <= self._start[0]:
            return None
        wall = end[0] - self._start[0]
        outside = (end[1] - self._start[1]) - (end[3] - self._start[3])
        return max(0.0, outside / wall), (end[2] - self._start[2]) / wall


def machine_header(
    threads: int | None = None, interval: float = 0.5, outside: tuple[float, float] | None = None
) -> str:
    """The lines every bench prints above its table; ends with a loud warning on a busy machine.

    ``outside``: what :class:`OutsideCpu` measured over the timed runs; given, it decides "busy" instead of the
    1-minute load, which at the end of a run is mostly the benchmark's own."""
    allowed, total = cores()
    load1, load5, load15 = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    others = other_processes(interval)
    lines = [
        f"CPU: {cpu_name()}; flags: {' '.join(cpu_flags()) or 'none of ' + '/'.join(KERNEL_FLAGS[:3])}",
        f"cores: {allowed} usable of {total} logical; threads asked: {threads if threads else 'default'}; "
        f"load average {load1:.2f} / {load5:.2f} / {load15:.2f} (1/5/15 min); python {platform.python_version()}",
    ]
    if others:
        lines.append(
            "other processes using CPU: "
            + ", ".join(f"{n} (pid {p}) {u:.2f} cores" for u, p, n in others[:5])
        )
    forced = {
        name: os.environ[name] for name in ("OPENBLAS_CORETYPE", "CAPTIONEER_F32_GEMM") if name in os.environ
    }
    if (
        forced
    ):  # OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU halves OpenBLAS's f32 products (numpy's and ours)
        lines.append("set in the environment: " + ", ".join(f"{k}={v}" for k, v in forced.items()))
    if outside is not None:
        lines.append(
            f"during the timed runs, CPU used outside this benchmark: {outside[0]:.2f} cores on average; "
            f"stolen by the hypervisor: {outside[1]:.2f} cores"
        )
    warning = busy_warning(load1, allowed, others, outside)
    if warning:
        lines.append(warning)
    return "\n".join(lines)


def busy_warning(
    load1: float,
    allowed: int,
    others: list[tuple[float, int, str]],
    outside: tuple[float, float] | None = None,
) -> str | None:
    heavy = [o for o in others if o[0] >= BUSY_PROCESS_CORES]
    loaded = outside is None and load1 > BUSY_LOAD_PER_CORE * allowed
    crowded = outside is not None and max(outside) >= BUSY_PROCESS_CORES
    if not (loaded or heavy or crowded):
        return None
    why = []
    if loaded:
        why.append(f"1-minute load {load1:.2f} > {BUSY_LOAD_PER_CORE} x {allowed} cores")
    if heavy:
        why.append(f"{len(heavy)} other process(es) using >= {BUSY_PROCESS_CORES} cores")
    if crowded:
        assert outside is not None
        why.append(
            f"{outside[0]:.2f} cores used outside the benchmark and {outside[1]:.2f} stolen during the runs"
        )
    bar = "!" * 100
    return (
        f"{bar}\n!!! WARNING: THE MACHINE IS BUSY ({'; '.join(why)}).\n"
        "!!! Figures below are LOADED: compare shares/ratios within this run only, not speeds across runs.\n"
        f"{bar}"
    )


def print_machine_header(threads: int | None = None, outside: tuple[float, float] | None = None) -> None:
    print(machine_header(threads, outside=outside), flush=True)


def process_cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (cpu/wall of a run shows the threads really busy)."""
    times = os.times()
    return times.user + times.system


def product_worker_env() -> dict[str, str]:
    """What Captioneer's own worker process starts with beyond the user's environment (a user's setting wins):
    its bench workers run as the product's do."""
    from inference.client.connection import OPENBLAS_THREAD_TIMEOUT

    return {"OPENBLAS_THREAD_TIMEOUT": os.environ.get("OPENBLAS_THREAD_TIMEOUT", OPENBLAS_THREAD_TIMEOUT)}


def thread_env(threads: int) -> dict[str, str]:
    """Environment for a worker process: every threading runtime limited to ``threads`` from the start."""
    value = str(threads)
    names = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS")
    return dict(os.environ, **{name: value for name in names})


def blas_threads() -> list[dict[str, Any]]:
    """threadpoolctl's view of the loaded BLAS/OpenMP runtimes (empty when threadpoolctl is missing)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [
        {
            "api": i.get("internal_api"),
            "lib": Path(i.get("filepath", "")).name,
            "threads": i.get("num_threads"),
        }
        for i in threadpool_info()
    ]


def pin_torch_threads(threads: int) -> dict[str, Any]:
    """In the torch worker: torch and every BLAS/OpenMP pool limited to ``threads``; returns what is in effect."""
    import torch

    torch.set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads)  # applied now; stays applied (no context exit)
    except ImportError:
        pass
    return {
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "torch": torch.__version__,
        "capability": torch.backends.cpu.get_cpu_capability(),
        "mkl": torch.backends.mkl.is_available(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "omp_wait_policy": omp_wait_policy(),
        "pools": blas_threads(),
    }


def omp_wait_policy() -> str:
    """OpenMP's wait policy in this process: on a busy machine active (spinning) waits cost torch 2-6x
    (README); Captioneer sets passive after a bounded spin (GOMP_SPINCOUNT) for ggml when it loads the libraries."""
    policy = os.environ.get("OMP_WAIT_POLICY", "unset (libgomp spins, then sleeps)")
    spins = os.environ.get("GOMP_SPINCOUNT")
    return policy if spins is None else f"{policy}, GOMP_SPINCOUNT={spins}"


def check_threads(side: str, wanted: int, effective: dict[str, Any]) -> str:
    """One line naming the threads a side really uses; raises when a pool differs from ``wanted``."""
    counts = {
        key: value
        for key, value in effective.items()
        if key.endswith("threads") and key != "torch_interop_threads"
    }
    # Captioneer's own OpenBLAS (scipy-openblas32: libscipy_openblas.*) runs one thread inside each ggml thread.
    pools = [
        p for p in effective.get("pools", []) if not str(p.get("lib", "")).startswith("libscipy_openblas.")
    ]
    counts.update({f"{p['api']}:{p['lib']}": p["threads"] for p in pools if p.get("threads")})
    wrong = {key: value for key, value in counts.items() if value != wanted}
    if wrong:
        raise SystemExit(f"{side}: thread counts differ from the {wanted} asked for: {wrong}")
    rest = {key: value for key, value in effective.items() if key not in counts and key != "pools"}
    return f"{side}: threads {counts}" + (f"; {rest}" if rest else "")


def add_reference_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reference-python",
        "--ref-python",
        dest="reference_python",
        default=None,
        help=f"python with torch + transformers for the reference side (default: ${REFERENCE_ENV}, else this python)",
    )


def reference_python(option: str | None) -> str:
    """The reference interpreter (option, else $CAPTIONEER_REFERENCE_PYTHON, else this python), checked to import torch."""
    chosen = option or os.environ.get(REFERENCE_ENV) or sys.executable
    probe = "import torch, transformers; print(torch.__version__, transformers.__version__)"
    try:
        done = subprocess.run([chosen, "-c", probe], capture_output=True, text=True, timeout=300)
    except OSError as exc:
        raise SystemExit(f"reference python {chosen!r} cannot be run ({exc}); {REFERENCE_SETUP}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise SystemExit(f"torch/transformers are not importable with {chosen} ({last}); {REFERENCE_SETUP}")
    print(
        f"reference python: {chosen} (torch {done.stdout.split()[0]}, transformers {done.stdout.split()[1]})"
    )
    return chosen


# Pause before every timed run: thread pools spin for a while after a call (ONNX Runtime's intra-op pool, OpenBLAS,
# libgomp's bounded spin), and without a pause that spinning lands on the next worker's call, whichever side it is.
SETTLE_S = 0.5


def run_interleaved(
    workers: Mapping[str, Any], clips: Mapping[float, Any], rounds: int, settle_s: float = SETTLE_S
) -> dict[tuple[str, float], list[dict]]:
    """Per clip: one untimed run of every worker (graph builds, arenas, page cache), then ``rounds`` rounds whose
    order alternates (A B C, C B A, ...) so that drift in the machine's load falls on every side alike; each timed
    run starts ``settle_s`` after the previous one ended, as a dictated utterance does."""
    kinds = list(workers)
    results: dict[tuple[str, float], list[dict]] = {}
    for seconds, clip in clips.items():
        for kind in kinds:
            workers[kind].run(clip)
        for round_index in range(rounds):
            for kind in kinds if round_index % 2 == 0 else kinds[::-1]:
                time.sleep(settle_s)
                results.setdefault((kind, seconds), []).append(workers[kind].run(clip))
    return results


def parakeet_weight_options(spec: str) -> dict[str, str]:
    """Parakeet session options for a bench's weight-type spec: ``q6_k`` = matrices in q6_k, ``q6_k/q6_k`` = the
    conformer's pointwise conv kernels too (``conv_weight_type``; default ``native``). An ``@GEMM`` suffix
    (``f32@ggml``) is not a session option: see :func:`gemm_of`."""
    weight_type, _, conv_type = spec.partition("@")[0].partition("/")
    return {"weight_type": weight_type, "conv_weight_type": conv_type or "native"}


@contextlib.contextmanager
def gemm_of(spec: str) -> Iterator[None]:
    """While a backend opens: ``TYPE@ggml`` / ``TYPE@openblas`` picks who computes the big f32 weight products
    (``CAPTIONEER_F32_GEMM``, inference/native/blas.py, read when the backend opens); without a suffix the
    default stays. The environment is as before afterwards."""
    gemm = spec.partition("@")[2]
    saved = os.environ.get("CAPTIONEER_F32_GEMM")
    if gemm:
        os.environ["CAPTIONEER_F32_GEMM"] = gemm
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("CAPTIONEER_F32_GEMM", None)
        else:
            os.environ["CAPTIONEER_F32_GEMM"] = saved


def run_workers(
    starters: Mapping[str, Callable[[], Any]], clips: Mapping[float, Any], rounds: int, threads: int
) -> dict[tuple[str, float], list[dict]]:
    """Start every worker (``starters[kind]()``), run them with ``run_interleaved``, close them all — also those
    already started when a later one fails to start — and print the machine header as it is at the end."""
    workers: dict[str, Any] = {}
    try:
        for kind, start in starters.items():
            workers[kind] = start()
        outside = OutsideCpu()
        results = run_interleaved(workers, clips, rounds)
        used_outside = outside.cores()  # while the workers are alive: their CPU time is the benchmark's
    finally:
        for worker in workers.values():
            worker.close()
    print()
    print_machine_header(threads, used_outside)  # the machine as it was during the timed runs
    return results


def serve_timed_runs(
    effective: dict[str, Any], load: Callable[[str], Any], run: Callable[[Any], list[int]]
) -> None:
    """A benchmark worker's loop: say it is ready (with the thread counts in effect), then for every clip path
    read from stdin, time ``run(load(path))`` and answer one JSON line: wall and CPU seconds, the token ids and
    the process's peak RSS so far."""
    import resource

    print(json.dumps({"ready": True, "threads": effective}), flush=True)
    for line in sys.stdin:
        audio = load(line.strip())
        start, cpu_start = time.perf_counter(), process_cpu_seconds()
        tokens = run(audio)
        wall = time.perf_counter() - start
        cpu = process_cpu_seconds() - cpu_start
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(
            json.dumps({"wall": wall, "cpu": cpu, "tokens": tokens, "peak_rss_mb": peak_kb / 1024}),
            flush=True,
        )


def rss_mib() -> float:
    """This process's resident memory in MiB (Linux; NaN elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class WorkerProcess:
    """One side of a benchmark in its own process, speaking the bench worker protocol: a ready line with the
    threads it really uses, then one JSON result line per clip path written to its stdin."""

    close_timeout_s = 60.0

    def _start(
        self, kind: str, command: list[str], threads: int, extra_env: dict[str, str] | None = None
    ) -> None:
        """Start a worker process with pinned threads and check what it reports it uses."""
        self.kind = kind
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=thread_env(threads) | (extra_env or {}),
        )
        ready = self._read()
        if not ready.get("ready"):
            raise RuntimeError(f"worker {kind} failed to start")
        print(check_threads(kind, threads, ready["threads"]), flush=True)

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.kind} died (exit {self.proc.wait()})")
        return json.loads(line)  # type: ignore[no-any-return]

    def run(self, clip: Path) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{clip}\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=self.close_timeout_s)
