"""A test-only engine that fails on command: a real segfault, a hang, an out-of-memory, an exit.

Loaded into the real worker through ``WorkerClient.load(..., factory="tests.worker.faulty_engine:create_engine")``.
It "transcribes" deterministically: the text of a push is ``w<N>`` for the N-th push, so tests know exactly
which committed words to expect.

Stream/transcribe options:
    fault: "segv" | "hang" | "oom" | "exit" | "error" (default: none)
    fault_at: the push (stream) or 1-second step (offline) at which the fault fires (default 1)
    fault_once: a file path; the fault fires only while the file does not exist, and creates it first,
                so a restarted worker does not fail again
    delay_s: seconds of "inference" per push / per audio second (default 0)
    snapshots: also publish a snapshot of the provisional word (default false)
    poison: a sample value; a push whose audio starts with it fires the fault, whatever its number
    started_log: a file path; each push appends a line to it as it begins (so a test knows it is decoding)
    log_warning: a text the stream logs as a warning when it opens (in the worker: no file of its own)
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from inference.contract import (
    SAMPLE_RATE,
    CancelToken,
    Capabilities,
    Delta,
    JobControl,
    ProgressCallback,
    Snapshot,
    StreamEvent,
    Transcript,
)
from inference.engine import EngineRequest
from inference.errors import UsageError


def fire(options: dict[str, Any], step: int) -> None:
    fault = options.get("fault")
    if not fault or int(options.get("fault_at", 1)) != step:
        return
    marker = options.get("fault_once")
    if marker:
        if Path(marker).exists():
            return
        Path(marker).write_text("fired")
    if fault == "segv":
        ctypes.string_at(0)  # a real SIGSEGV in native code
    elif fault == "hang":
        while True:
            time.sleep(3600)
    elif fault == "oom":
        raise MemoryError()
    elif fault == "exit":
        os._exit(3)
    elif fault == "error":
        raise UsageError("the faulty engine refused this push", "it was asked to")


class FaultyStream:
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self.pushes = 0
        self.samples = 0
        self.committed: list[str] = []
        self.closed = False

    def push(self, pcm: np.ndarray) -> list[StreamEvent]:
        if self.closed:
            raise UsageError("push after finish")
        self.pushes += 1
        if "started_log" in self.options:
            with open(self.options["started_log"], "a") as log:
                log.write(f"push {self.pushes}\n")
        if "poison" in self.options:
            if pcm.size and pcm[0] == np.float32(self.options["poison"]):
                fire({**self.options, "fault_at": 1}, 1)
        else:
            fire(self.options, self.pushes)
        time.sleep(float(self.options.get("delay_s", 0.0)))
        start = self.samples / SAMPLE_RATE
        self.samples += pcm.size
        word = (" " if self.committed else "") + f"w{self.pushes}"
        self.committed.append(word)
        events: list[StreamEvent] = [Delta(word, self.pushes, start, self.samples / SAMPLE_RATE)]
        if self.options.get("snapshots"):
            events.append(Snapshot(f"w{self.pushes + 1}?", self.pushes + 1, self.samples / SAMPLE_RATE))
        return events

    def finish(self) -> Transcript:
        self.closed = True
        return Transcript(text="".join(self.committed))

    def cancel(self) -> None:
        self.closed = True


class FaultyEngine:
    family = "faulty"

    def __init__(self, request: EngineRequest) -> None:
        self.options = dict(request.session_options)
        self.capabilities = Capabilities(streaming=True, snapshots=True, streams_per_engine=4)
        steps = int(self.options.get("load_steps", 0))
        for step in range(steps):  # a slow load (a conversion) that reports progress and can be cancelled
            request.control.step(step, steps, "converting")
            time.sleep(float(self.options.get("load_delay_s", 0.0)))
        fire({"fault": self.options.get("load_fault"), "fault_once": self.options.get("fault_once")}, 1)

    def transcribe(
        self,
        audio: np.ndarray,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        **options: Any,
    ) -> Transcript:
        control = JobControl(progress, cancel)
        seconds = int(np.ceil(audio.size / SAMPLE_RATE))
        for step in range(1, seconds + 1):
            control.step(step - 1, seconds)
            fire(options, step)
            time.sleep(float(options.get("delay_s", 0.0)))
        control.step(seconds, seconds)
        checksum = float(np.sum(audio, dtype=np.float64))
        return Transcript(text=f"{audio.size} samples, sum {checksum:.6f}")

    def open_stream(self, **options: Any) -> FaultyStream:
        if "log_warning" in options:
            logging.getLogger(__name__).warning("%s", options["log_warning"])
        return FaultyStream(options)

    def close(self) -> None:
        pass


def create_engine(request: EngineRequest) -> FaultyEngine:
    return FaultyEngine(request)
