"""A week on a laptop, compressed: ``captioneer serve`` (its own process, the bundled demo model) under a mix of
8 real-time ``/live`` streams, a burst of 32 file requests every minute and 4 slow clients, for N minutes.

* live: each of 8 clients streams a speech clip (two bundled samples, ~10 s) as s16le in 0.1 s chunks at
  real-time pace, again and again; latency = from the end of its upload to ``transcript.text.done``;
* files: at the start of every minute, 32 clients post a 5 s WAV at once (multipart, ``--busy-timeout-ms``);
  latency = request to answer; refusals counted as 429;
* slow: 2 ``/live`` tricklers (2 bytes every 20 s) and 2 slowloris clients (a header line every 5 s), each
  reconnecting when dropped; reported: how long the server let each hold on;
* ``/health`` every 2 s: latency.

Every minute: p50/p95 latency per route, 429 counts, the server's RSS (its process and its workers) and its
open file descriptors. On a shared machine figures are loaded: quote the CPU and the load (printed).

    .venv/bin/python tests/bench/load_server.py [--minutes 10] [--max-concurrent 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from inference.audio.io import load_audio_file  # noqa: E402
from tests.bench.machine import _descendants, print_machine_header  # noqa: E402
from tests.server.harness import SAMPLE_1, s16le, two_sentences, wav_bytes  # noqa: E402
from tests.server.live_client import post_live, split  # noqa: E402

LIVE_STREAMS = 8
BURST = 32
LIVE_CHUNK_S = 0.1


@dataclass
class Tally:
    """What happened, per route, since the last report (and in total)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[str, dict[int, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    held: list[float] = field(default_factory=list)  # seconds a slow client was let hold on
    total_latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    total_statuses: dict[str, dict[int, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int))
    )
    total_held: list[float] = field(default_factory=list)

    def note(self, route: str, status: int, latency_s: float | None = None) -> None:
        with self.lock:
            for statuses in (self.statuses, self.total_statuses):
                statuses[route][status] += 1
            if latency_s is not None:
                self.latencies[route].append(latency_s)
                self.total_latencies[route].append(latency_s)

    def note_held(self, seconds: float) -> None:
        with self.lock:
            self.held.append(seconds)
            self.total_held.append(seconds)

    def take(self) -> tuple[dict[str, list[float]], dict[str, dict[int, int]], list[float]]:
        with self.lock:
            out = (dict(self.latencies), {k: dict(v) for k, v in self.statuses.items()}, list(self.held))
            self.latencies.clear()
            self.statuses.clear()
            self.held.clear()
        return out


def _pct(values: list[float], q: float) -> str:
    return f"{float(np.percentile(values, q)):.2f}" if values else "-"


def _line(latencies: dict[str, list[float]], statuses: dict[str, dict[int, int]], held: list[float]) -> str:
    parts = []
    for route in ("live", "files", "health"):
        got = latencies.get(route, [])
        codes = statuses.get(route, {})
        count = ",".join(f"{code}:{n}" for code, n in sorted(codes.items()))
        parts.append(f"{route} p50 {_pct(got, 50)} s p95 {_pct(got, 95)} s [{count}]")
    slow = (
        f"slow held p50 {_pct(held, 50)} s max {max(held):.1f} s (n={len(held)})" if held else "slow held -"
    )
    return "; ".join(parts) + "; " + slow


def _process_tree(pid: int) -> list[int]:
    return [pid, *sorted(_descendants(pid))]


def _rss_mb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        return int(status.split("VmRSS:")[1].split()[0]) / 1024
    except (OSError, IndexError, ValueError):
        return 0.0


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def live_client(url: str, pieces: list[bytes], tally: Tally, stop: threading.Event) -> None:
    while not stop.is_set():
        started = time.monotonic()
        result = post_live(
            url, {"sample_rate": 16000, "sample_format": "s16le"}, pieces, pace_s=LIVE_CHUNK_S, timeout_s=300
        )
        done = result.of_type("transcript.text.done")
        if result.status == 200 and done and result.upload_done_at is not None:
            tally.note("live", 200, done[0]["_at"] - result.upload_done_at)
        else:
            tally.note("live", result.status if result.status != 200 else 0)
            if result.status == 429:
                stop.wait(1.0)  # as a client honouring Retry-After would
        if time.monotonic() - started < 1:
            stop.wait(1.0)


def file_burst(url: str, wav: bytes, busy_timeout_ms: int, tally: Tally) -> None:
    import httpx

    gate = threading.Barrier(BURST)

    def one() -> None:
        with httpx.Client(base_url=url, timeout=300) as http:
            gate.wait()
            started = time.monotonic()
            try:
                response = http.post(
                    "/v1/audio/transcriptions",
                    files={"file": ("talk.wav", wav)},
                    data={"busy_timeout_ms": str(busy_timeout_ms)},
                )
            except httpx.HTTPError:
                tally.note("files", 0)
                return
            ok = response.status_code == 200
            tally.note("files", response.status_code, time.monotonic() - started if ok else None)

    threads = [threading.Thread(target=one, daemon=True) for _ in range(BURST)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)


def slow_client(url: str, kind: str, tally: Tally, stop: threading.Event) -> None:
    host, port = url.removeprefix("http://").split(":")
    while not stop.is_set():
        try:
            sock = socket.create_connection((host, int(port)), timeout=5)
        except OSError:
            stop.wait(1)
            continue
        started = time.monotonic()
        try:
            if kind == "trickle":
                sock.sendall(
                    b"POST /v1/audio/transcriptions/live?sample_rate=16000 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Transfer-Encoding: chunked\r\nContent-Type: application/octet-stream\r\n\r\n"
                    b"40\r\n" + bytes(64) + b"\r\n"
                )
                every, piece = 20.0, b"2\r\n\x00\x00\r\n"
            else:
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                every, piece = 5.0, b"X-Slow: 1\r\n"
            sock.settimeout(every)
            while not stop.is_set():
                try:
                    if not sock.recv(65536):
                        break  # the server closed it
                except TimeoutError:
                    sock.sendall(piece)
        except OSError:
            pass
        finally:
            sock.close()
        if not stop.is_set():
            tally.note_held(time.monotonic() - started)


def health_probe(url: str, tally: Tally, stop: threading.Event) -> None:
    import httpx

    with httpx.Client(base_url=url, timeout=60) as http:
        while not stop.wait(2.0):
            started = time.monotonic()
            try:
                code = http.get("/health").status_code
            except httpx.HTTPError:
                code = 0
            tally.note("health", code, time.monotonic() - started if code == 200 else None)


def start_server(home: Path, max_concurrent: int, threads: int) -> tuple[subprocess.Popen[str], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "CAPTIONEER_HOME": str(home)}
    env.pop("CAPTIONEER_API_KEY", None)
    command = [sys.executable, "-m", "inference.cli", "serve", "--port", str(port)]
    command += ["--max-concurrent", str(max_concurrent), "--threads", str(threads)]
    process = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        sys.stderr.write(line)
        if "captioneer: serving" in line:
            break
    else:
        raise SystemExit("the server did not start")
    threading.Thread(target=lambda: [None for _ in process.stderr or []], daemon=True).start()
    return process, f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--max-concurrent", type=int, default=4, help="the server's (default: its own, 4)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of the model's worker")
    parser.add_argument(
        "--busy-timeout-ms",
        type=int,
        default=0,
        help="how long file requests wait for a slot (default 0: 429)",
    )
    args = parser.parse_args()
    print_machine_header(args.threads)
    pieces = split(s16le(two_sentences()), int(16000 * LIVE_CHUNK_S) * 2)
    wav = wav_bytes(load_audio_file(SAMPLE_1))
    tally = Tally()
    stop = threading.Event()
    with tempfile.TemporaryDirectory(prefix="captioneer-load-") as home:
        process, url = start_server(Path(home), args.max_concurrent, args.threads)
        try:
            workers = [threading.Thread(target=health_probe, args=(url, tally, stop), daemon=True)]
            workers += [
                threading.Thread(target=slow_client, args=(url, kind, tally, stop), daemon=True)
                for kind in ("trickle", "trickle", "slowloris", "slowloris")
            ]
            workers += [
                threading.Thread(target=live_client, args=(url, pieces, tally, stop), daemon=True)
                for _ in range(LIVE_STREAMS)
            ]
            for worker in workers:
                worker.start()
            began = time.monotonic()
            minute = 0
            print(f"server pid {process.pid} on {url}; {args.minutes:g} minutes", flush=True)
            while time.monotonic() - began < args.minutes * 60:
                burst = threading.Thread(
                    target=file_burst, args=(url, wav, args.busy_timeout_ms, tally), daemon=True
                )
                burst.start()
                next_report = began + (minute + 1) * 60
                while time.monotonic() < min(next_report, began + args.minutes * 60):
                    time.sleep(0.5)
                minute += 1
                tree = _process_tree(process.pid)
                rss = sum(_rss_mb(pid) for pid in tree)
                print(
                    f"min {minute}: {_line(*tally.take())}; RSS {_rss_mb(process.pid):.0f} MB server, "
                    f"{rss:.0f} MB with workers; fds {_fds(process.pid)}",
                    flush=True,
                )
        finally:
            stop.set()
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
    with tally.lock:
        totals = (dict(tally.total_latencies), {k: dict(v) for k, v in tally.total_statuses.items()})
        held = list(tally.total_held)
    print(f"total: {_line(totals[0], totals[1], held)}")


if __name__ == "__main__":
    main()
