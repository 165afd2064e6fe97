"""Child processes that report in JSON lines, read as they run: ``captioneer transcribe --input ID --mode
streaming --format jsonl`` (LiveCli) and the caption window driven over stdin (tests/app/sound_window_child.py)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.sound_server import die_with_parent

REPO_ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = 240.0  # generous: model load and transcription on two busy cores


def words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def share_of_words(sentence: str, text: str) -> float:
    expected = set(words(sentence))
    return len(expected & set(words(text))) / len(expected)


class JsonLinesChild:
    """``argv`` run with JSON objects a line on stdout (``events``) and sentences on stderr (``notes``)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=die_with_parent,
        )
        self.events: list[dict[str, object]] = []
        self.notes: list[str] = []
        self._changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read_events, daemon=True),
            threading.Thread(target=self._read_notes, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_events(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            event["_at"] = time.monotonic()  # when it arrived (latency benchmarks)
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()

    def _read_notes(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._changed:
                self.notes.append(line.rstrip("\n"))
                self._changed.notify_all()

    def send(self, command: dict[str, object]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def wait_for(self, what: str, condition: Callable[[], bool], deadline_s: float = DEADLINE_S) -> None:
        end = time.monotonic() + deadline_s
        with self._changed:
            while not condition():
                if self.process.poll() is not None and not any(r.is_alive() for r in self._readers):
                    raise AssertionError(f"captioneer exited before {what}: {self.notes}")
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {what} within {deadline_s:g} s; notes: {self.notes}")
                self._changed.wait(min(left, 1.0))

    def wait_note(self, fragment: str) -> str:
        self.wait_for(repr(fragment), lambda: any(fragment in note for note in self.notes))
        return next(note for note in self.notes if fragment in note)

    def wait_event(self, condition: Callable[[dict[str, object]], bool], what: str) -> dict[str, object]:
        """The first event (since the start) that meets ``condition``."""
        found: list[dict[str, object]] = []

        def seen() -> bool:
            found[:] = [event for event in self.events if condition(event)][:1]
            return bool(found)

        self.wait_for(what, seen)
        return found[0]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=60)


class LiveCli(JsonLinesChild):
    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        super().__init__([sys.executable, "-m", "inference.cli", *args], env)

    def committed(self) -> str:
        with self._changed:
            return "".join(str(e.get("text", "")) for e in self.events if e.get("type") == "delta")

    def wait_words(self, sentence: str, share: float) -> None:
        """Until the committed text holds ``share`` of the sentence's words (a speech model is not exact)."""
        self.wait_for(
            f"committed text with {share:.0%} of {sentence!r} (so far: {self.committed()!r})",
            lambda: share_of_words(sentence, self.committed()) >= share,
        )

    def interrupt(self, how: signal.Signals = signal.SIGINT) -> dict[str, object]:
        """Ctrl-C (or ``kill``): the final transcript (the ``done`` event)."""
        self.process.send_signal(how)
        self.process.wait(timeout=DEADLINE_S)
        for reader in self._readers:
            reader.join(timeout=60)
        done = [e for e in self.events if e.get("type") == "done"]
        assert done, f"no final transcript after Ctrl-C: {self.notes}"
        return done[-1]
