"""Meeting mode's capture: the microphone ("You") and what the computer plays ("Others"), cleaned of bleed.

``MeetingInput`` holds the two captures; each of its sides (``you``, ``others``) is a capture of its own for one
live stream (the window's ``MeetingPipeline`` and the command line run one stream per side on the same engine).
The system side also feeds the ``BleedFilter`` its playback, and the microphone side hands on the microphone with
that playback taken out, so the far end's words heard through the laptop's speakers are not captioned a second
time as "You" (``inference.audio.bleed``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from inference.audio.bleed import BleedFilter, BleedReport

Sink = Callable[[np.ndarray], None]


class Capture(Protocol):
    """An input delivering 16 kHz mono blocks (``SoundServerCapture``, the app's sources)."""

    name: str

    def start(self, sink: Sink, on_end: Callable[[str | None], None]) -> None: ...

    def stop(self) -> None: ...


class MeetingInput:
    """A microphone and the system audio captured together; ``bleed`` (None: a headset, nothing to remove)
    cleans the microphone of the playback it hears."""

    def __init__(
        self,
        microphone: Capture,
        system: Capture,
        bleed: BleedFilter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.microphone = microphone
        self.system = system
        self.bleed = bleed
        self.clock = clock
        self._lock = threading.Lock()  # the two capture threads share the bleed filter
        self.you = _MicrophoneSide(self)
        self.others = _SystemSide(self)
        self.name = "the microphone (You) and what this computer plays (Others)"

    def name_after_devices(self) -> None:
        """Once both are open, the devices' own names say what is captured."""
        self.name = f"{self.microphone.name} (You) and {self.system.name} (Others)"

    @property
    def bleed_report(self) -> BleedReport | None:
        return self.bleed.report if self.bleed is not None else None

    def reopened(self, reconnect: Callable[[Capture], Capture | None]) -> MeetingInput | None:
        """The same meeting on ``reconnect``'s replacements of both inputs (a device went away), None when
        either has none."""
        microphone, system = reconnect(self.microphone), reconnect(self.system)
        if microphone is None or system is None:
            return None
        bleed = BleedFilter(self.bleed.settings) if self.bleed is not None else None
        return MeetingInput(microphone, system, bleed, self.clock)

    def start(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        """A meeting is started side by side (``MeetingPipeline``), never as one source."""
        raise TypeError("a meeting input is started through MeetingPipeline")

    def stop(self) -> None:
        self.you.stop()
        self.others.stop()

    def wait_until_delivering(self) -> bool:
        """Block until both started captures deliver audio (a sound server's new stream starts up to ~2 s
        late), so "listening" is said once both sides are heard; True when both do. Not on a GUI thread."""
        delivering = True
        for capture in (self.microphone, self.system):  # both were started: the waits overlap
            wait = getattr(capture, "wait_until_delivering", None)
            if wait is not None:
                delivering = bool(wait()) and delivering
        return delivering

    # ------------------------------------------------------------------ capture threads
    def _heard(self, block: np.ndarray) -> np.ndarray:
        """Microphone thread: the microphone without the playback (held back until that playback is in)."""
        if self.bleed is None:
            return block
        with self._lock:
            self.bleed.push_microphone(block, self.clock())
            return self.bleed.pull()

    def _played(self, block: np.ndarray) -> None:
        """System audio thread."""
        if self.bleed is not None:
            with self._lock:
                self.bleed.push_reference(block, self.clock())


class _MicrophoneSide:
    """ "You": the microphone as a capture, cleaned of bleed."""

    def __init__(self, meeting: MeetingInput) -> None:
        self.meeting = meeting
        self.name = meeting.microphone.name
        self._sink: Sink | None = None

    def start(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        def heard(block: np.ndarray) -> None:
            cleaned = self.meeting._heard(block)
            if cleaned.size:
                sink(cleaned)

        self._sink = sink
        self.meeting.microphone.start(heard, on_end)
        self.name = self.meeting.microphone.name  # a device's own name is known once it is open

    def finish(self) -> None:
        """Stop capturing and pass on what the bleed filter still holds back (up to a few seconds while it waits
        for the playback): the last words said before Stop are captioned too."""
        self.meeting.microphone.stop()
        bleed, sink = self.meeting.bleed, self._sink
        if bleed is None or sink is None:
            return
        with self.meeting._lock:
            held = bleed.flush()
        if held.size:
            sink(held)

    def stop(self) -> None:
        self.meeting.microphone.stop()


class _SystemSide:
    """ "Others": what the computer plays, as a capture; each block is also the bleed filter's playback."""

    def __init__(self, meeting: MeetingInput) -> None:
        self.meeting = meeting
        self.name = meeting.system.name

    def start(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        def played(block: np.ndarray) -> None:
            self.meeting._played(block)
            sink(block)

        self.meeting.system.start(played, on_end)
        self.name = self.meeting.system.name

    def stop(self) -> None:
        self.meeting.system.stop()
