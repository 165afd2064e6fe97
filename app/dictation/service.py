"""Push-to-talk dictation (Qt-free): hotkey decisions → utterance capture → the worker → text out.

Audio comes from the same source as live captions (or a source of its own when captions are off); the
utterance is transcribed offline by the dictation model, which may differ from the captions model, in the
same worker process; when that process dies under an utterance, the restarted one transcribes it again (once).
Utterances are transcribed one after the other, in the order they were spoken, on a thread of their own, so a
new recording can start while the previous one is still being transcribed.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.dictation.capture import CaptureSettings, Utterance, UtteranceRecorder
from app.dictation.hotkey import HotkeyDecision, HotkeyStateMachine
from inference.client import RemoteEngine
from inference.contract import SAMPLE_RATE
from inference.errors import CaptioneerError, WorkerError

log = logging.getLogger("captioneer.app.dictation")


@dataclass(frozen=True)
class DictationResult:
    text: str
    audio_s: float
    latency_s: float  # key release → text ready (before it is inserted)
    error: str = ""


class DictationService:
    def __init__(
        self,
        engine: Callable[[], RemoteEngine],
        hotkey: HotkeyStateMachine,
        capture: CaptureSettings,
        on_state: Callable[[str, str], None],
        on_result: Callable[[DictationResult], None],
        request_options: dict[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self.hotkey = hotkey
        self.clock = clock
        self.on_state = on_state
        self.on_result = on_result
        self.request_options = dict(request_options or {})
        self.recorder = UtteranceRecorder(capture, self._queue_utterance)
        self._jobs: queue.Queue[Utterance | None] = queue.Queue()
        self._worker = threading.Thread(
            target=self._transcribe_loop, name="captioneer-dictation", daemon=True
        )
        self._worker.start()

    # ------------------------------------------------------------------ inputs (any thread)
    def feed(self, block) -> None:  # type: ignore[no-untyped-def]
        self.recorder.feed(block)

    def key_pressed(self) -> None:
        self._decide(self.hotkey.press(self.clock()))

    def key_released(self) -> None:
        self._decide(self.hotkey.release(self.clock()))

    def toggle(self) -> None:
        self._decide(self.hotkey.toggle(self.clock()))

    def tick(self) -> None:
        self._decide(self.hotkey.tick(self.clock()))

    def cancel(self) -> None:
        self.hotkey.cancel()
        self.recorder.cancel()
        self.on_state("idle", "dictation cancelled")

    def close(self) -> None:
        self.recorder.cancel()
        self._jobs.put(None)

    def _decide(self, decision: HotkeyDecision) -> None:
        if decision.action == "start":
            self.recorder.start()
            self.on_state("listening", "listening…")
        elif decision.action == "stop":
            if decision.reason == "cancelled":
                self.recorder.cancel()
                return
            self.recorder.stop(self.clock())
            self.on_state("transcribing", "transcribing…")

    # ------------------------------------------------------------------ transcription thread
    def _queue_utterance(self, utterance: Utterance) -> None:
        self._jobs.put(utterance)

    def _transcribe_loop(self) -> None:
        while True:
            utterance = self._jobs.get()
            if utterance is None:
                return
            audio_s = utterance.audio.size / SAMPLE_RATE
            try:
                text = self._transcribe(utterance)
            except CaptioneerError as exc:
                self.on_result(DictationResult("", audio_s, self.clock() - utterance.released_at, str(exc)))
                self.on_state("failed", str(exc))
                continue
            latency = self.clock() - utterance.released_at
            # Not "done" here: the text is not in yet. Whoever inserts it (``on_result``) reports the outcome.
            self.on_result(DictationResult(text, audio_s, latency))

    def _transcribe(self, utterance: Utterance) -> str:
        """The utterance's text. The recording is still here when the worker dies under it (a crash, a kill):
        it is transcribed again, once, by the restarted worker; audio that kills that one too is given up."""
        try:
            return self._engine().transcribe(utterance.audio, **self.request_options).text.strip()
        except WorkerError as exc:
            log.warning("dictation lost to the worker (%s); transcribing it again", exc)
            self.on_state("transcribing", "the inference worker restarted; transcribing again…")
        return self._engine().transcribe(utterance.audio, **self.request_options).text.strip()
