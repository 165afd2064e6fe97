"""`captioneer transcribe --mode streaming` ended while its worker is down (past the restart limit, before a
revival) ends like /live: the held audio becomes a gap marker, a note says what happened and the fix, the
transcript of what was heard is printed in the chosen format, and the exit code is 3 (docs/cli.md §6, §7).

The real worker process is SIGKILLed four times (the default policy restarts it three times in 300 s); the
fourth death trips the limit, and a fresh worker would be tried only after 30 s: the input ends before that."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from inference.audio.io import load_audio_file
from inference.cli import EXIT_HEARD_ONLY
from inference.contract import Delta, Timing, Transcript
from inference.formats import render
from inference.heard import heard_with_segments
from tests.conftest import REPO_ROOT
from tests.sound_server import die_with_parent
from tests.worker.test_cli_worker import DEMO, SAMPLE, worker_of

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/self/stat"), reason="finds the worker through /proc"
)

DEADLINE_S = 240.0  # model loads and restarts on busy cores
FIRST = "emma quickly closed the early bottle and sang"
GAP = re.compile(r"\[… ([0-9.]+)–([0-9.]+) s not transcribed …\]")


def kill_workers_past_the_limit(parent: int) -> None:
    """SIGKILL the worker of ``parent`` four times, each new one once it was spawned (a death while it loads
    counts as well): the default policy restarts 3 times in 300 s, so the fourth death trips the limit."""
    killed: set[int] = set()
    for _ in range(4):
        deadline = time.monotonic() + DEADLINE_S
        while (pid := worker_of(parent, DEADLINE_S)) in killed:
            assert time.monotonic() < deadline, "no new worker was started"
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
        killed.add(pid)


class StreamingCli:
    """``captioneer transcribe - --mode streaming`` on raw f32le PCM, its stdout and stderr collected as they
    arrive (text mode prints committed text without a newline, so lines cannot be waited for)."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "inference.cli", "transcribe", "-", "--model", str(DEMO)]
            + ["--mode", "streaming", "--stream-mode", "segmented", "--input-format", "f32le", *args],
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=die_with_parent,  # and Ctrl-C's default action, whatever the suite was started with
        )
        self._changed = threading.Condition()
        self._out = bytearray()
        self._err = bytearray()
        self._readers = [
            threading.Thread(target=self._collect, args=(self.process.stdout, self._out), daemon=True),
            threading.Thread(target=self._collect, args=(self.process.stderr, self._err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _collect(self, pipe: object, into: bytearray) -> None:
        fileno = pipe.fileno()  # type: ignore[attr-defined]
        while data := os.read(fileno, 65536):
            with self._changed:
                into += data
                self._changed.notify_all()

    @property
    def out(self) -> str:
        with self._changed:
            return self._out.decode()

    @property
    def err(self) -> str:
        with self._changed:
            return self._err.decode()

    def send(self, audio: np.ndarray) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(audio.astype("<f4").tobytes())
        self.process.stdin.flush()

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        end = time.monotonic() + DEADLINE_S
        with self._changed:
            while not condition():
                if self.process.poll() is not None and not any(r.is_alive() for r in self._readers):
                    raise AssertionError(f"captioneer exited before {what}: {self._err.decode()}")
                left = end - time.monotonic()
                if left <= 0:
                    self.process.kill()
                    raise AssertionError(f"no {what} within {DEADLINE_S:g} s; stderr: {self._err.decode()}")
                self._changed.wait(min(left, 1.0))

    def end(self) -> int:
        code = self.process.wait(timeout=DEADLINE_S)
        for reader in self._readers:
            reader.join(timeout=60)
        return code

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=60)


def _speech() -> np.ndarray:
    return np.concatenate([load_audio_file(SAMPLE), np.zeros(16000, np.float32)])


def test_the_end_of_input_while_the_worker_is_down_prints_what_was_heard_with_a_gap_and_exits_3() -> None:
    cli = StreamingCli("--format", "jsonl")
    try:
        speech = _speech()
        cli.send(speech)
        cli.wait_for("the first sentence committed", lambda: '"type": "delta"' in cli.out)
        kill_workers_past_the_limit(cli.process.pid)
        cli.wait_for("the restart limit", lambda: '"kind": "worker_failed"' in cli.out)
        cli.send(speech)  # heard while no worker runs: held, then marked as not transcribed
        assert cli.process.stdin is not None
        cli.process.stdin.close()
        assert cli.end() == EXIT_HEARD_ONLY, cli.err
    finally:
        cli.stop()
    events = [json.loads(line) for line in cli.out.splitlines()]
    assert [e["type"] for e in events][-1] == "done" and not [e for e in events if e.get("fatal")]
    done = events[-1]
    deltas = "".join(e["text"] for e in events if e["type"] == "delta")
    assert done["text"] == deltas.strip() and done["text"].startswith(FIRST)  # what was heard, kept
    heard_s = 2 * speech.size / 16000
    last = [e for e in events if e["type"] == "delta"][-1]  # the held audio, to the end of the input
    assert GAP.fullmatch(last["text"].strip()) and last["end_s"] == pytest.approx(heard_s, abs=1e-3)
    assert done["text"].endswith("…]") and done["timing"]["audio_s"] == pytest.approx(heard_s, abs=0.01)
    assert [s["text"] for s in done["segments"]][0] == FIRST and GAP.fullmatch(done["segments"][-1]["text"])
    notes = [e for e in events if e["type"] == "error"]
    assert notes[-1]["kind"] == "worker_failed" and "keeps what was heard" in notes[-1]["message"]
    assert "failed 4 times in 300 s" in notes[-1]["message"] and "run it again" in notes[-1]["fix"]
    assert "the model's worker is down" in cli.err and "exit code 3" in cli.err
    assert "error:" not in cli.err


def test_ctrl_c_while_the_worker_is_down_prints_the_text_heard_and_exits_3() -> None:
    cli = StreamingCli("--format", "text")
    try:
        cli.send(_speech())  # stdin stays open: only the interrupt ends the stream
        cli.wait_for("the first sentence committed", lambda: FIRST in cli.out)
        kill_workers_past_the_limit(cli.process.pid)
        # No worker answers this: the last one is dead, and the client gives up on it (whether before or after
        # the interrupt, the audio is marked as not transcribed).
        cli.send(_speech())
        cli.process.send_signal(signal.SIGINT)
        assert cli.end() == EXIT_HEARD_ONLY, cli.err
    finally:
        cli.stop()
    growing, final = cli.out.splitlines()
    assert final == growing.strip() and final.startswith(FIRST) and GAP.search(final), cli.out
    assert "interrupted; finishing the transcript" in cli.err and "keeps what was heard" in cli.err


def test_what_was_heard_renders_as_subtitles_with_the_gap_as_a_cue_of_its_own() -> None:
    deltas = [
        Delta(FIRST, 1, 1.0, 3.5),
        Delta(" there are", 2, 4.0, 4.6),
        Delta(" twenty", 2, 4.6, 5.0),
        Delta(" [… 5.0–9.0 s not transcribed …]", 3, 5.0, 9.0),
    ]
    heard = heard_with_segments(
        Transcript(text="".join(d.text for d in deltas), timing=Timing(9.0, 1.0)), deltas
    )
    assert [(s.text, s.start_s, s.end_s) for s in heard.segments] == [
        (FIRST, 1.0, 3.5),
        ("there are twenty", 4.0, 5.0),
        ("[… 5.0–9.0 s not transcribed …]", 5.0, 9.0),
    ]
    srt = render(heard, "srt")
    assert "00:00:05,000 --> 00:00:09,000\n[… 5.0–9.0 s not transcribed …]" in srt, srt
