"""PulseAudio (and PipeWire's pipewire-pulse) through pulsectl: the sources, the defaults, and change events.

pulsectl binds libpulse's own client API with ctypes, so listing and hot-plug events need no protocol code
of ours; each call opens its own short connection (no process-wide client state).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inference.audio.devices.choices import (
    MIC_DEFAULT,
    MICROPHONES,
    PULSE_SOURCE,
    SYSTEM_AUDIO,
    SYSTEM_DEFAULT,
    SYSTEM_DEFAULT_LABEL,
    InputChoice,
    InputDeviceError,
    NoSoundServerError,
)

log = logging.getLogger("captioneer.audio.pulse")
CLIENT_NAME = "Captioneer"
NO_SERVER_FIX = (
    "start the sound server (PulseAudio, or PipeWire with pipewire-pulse), "
    "or install libpulse0 (`sudo apt-get install libpulse0`)"
)


@dataclass(frozen=True)
class PulseSource:
    name: str
    description: str
    monitor_of: str | None  # the output's sink name for a monitor source, else None


@dataclass(frozen=True)
class PulseState:
    sources: tuple[PulseSource, ...]
    default_source: str
    default_sink: str
    sink_descriptions: dict[str, str]

    def monitor_of_default_output(self) -> str | None:
        return next((s.name for s in self.sources if s.monitor_of == self.default_sink), None)


def _pulsectl() -> Any:
    try:
        import pulsectl
    except (ImportError, OSError) as exc:  # not installed, or libpulse itself is missing
        raise NoSoundServerError(f"cannot use the sound server: {exc}", NO_SERVER_FIX) from exc
    return pulsectl


def connect(purpose: str) -> Any:
    """A new pulsectl connection; refuses with a sentence when no sound server answers."""
    pulsectl = _pulsectl()
    try:
        return pulsectl.Pulse(f"{CLIENT_NAME} {purpose}", connect=True)
    except Exception as exc:  # PulseError: no server, or a refused connection
        raise NoSoundServerError(f"no sound server answered ({exc})", NO_SERVER_FIX) from exc


def read_state() -> PulseState:
    with connect("device list") as pulse:
        try:
            info = pulse.server_info()
            sinks = {sink.index: sink for sink in pulse.sink_list()}
            sources = tuple(
                PulseSource(
                    str(source.name),
                    str(source.description),
                    str(sinks[source.monitor_of_sink].name) if source.monitor_of_sink in sinks else None,
                )
                for source in pulse.source_list()
            )
        except Exception as exc:  # the server went away between calls
            raise InputDeviceError(f"the sound server stopped answering ({exc})", NO_SERVER_FIX) from exc
    return PulseState(
        sources,
        str(info.default_source_name or ""),
        str(info.default_sink_name or ""),
        {str(sink.name): str(sink.description) for sink in sinks.values()},
    )


def choices_from(state: PulseState) -> list[InputChoice]:
    """Microphones by their description (the default marked), then system audio: the default output's monitor
    as "What this computer plays", then each output by its own name."""
    microphones = [
        InputChoice(PULSE_SOURCE + s.name, s.description, MICROPHONES, s.name == state.default_source)
        for s in state.sources
        if s.monitor_of is None
    ]
    system = (
        [InputChoice(SYSTEM_DEFAULT, SYSTEM_DEFAULT_LABEL, SYSTEM_AUDIO, True)] if state.default_sink else []
    )
    system += [
        InputChoice(
            PULSE_SOURCE + s.name, state.sink_descriptions.get(s.monitor_of, s.description), SYSTEM_AUDIO
        )
        for s in state.sources
        if s.monitor_of is not None
    ]
    return microphones + system


def resolve(input_id: str, state: PulseState) -> tuple[str, str]:
    """The source to record for ``input_id``: (source name, what to call it); refuses an id that is gone."""
    if input_id == SYSTEM_DEFAULT:
        name = state.monitor_of_default_output()
        if name is None:
            raise InputDeviceError(
                "the sound server has no default output to capture", "plug in or choose an output device"
            )
        return name, f"{SYSTEM_DEFAULT_LABEL} ({state.sink_descriptions.get(state.default_sink, name)})"
    if input_id == MIC_DEFAULT:
        source = next((s for s in state.sources if s.name == state.default_source), None)
        if source is None:
            raise InputDeviceError("the sound server has no default microphone", "plug in a microphone")
        return source.name, source.description
    name = input_id[len(PULSE_SOURCE) :]
    source = next((s for s in state.sources if s.name == name), None)
    if source is None:
        raise InputDeviceError(f"the input {name!r} is not there (unplugged?)", "choose another input")
    if source.monitor_of is not None:
        return name, state.sink_descriptions.get(source.monitor_of, source.description)
    return name, source.description


def server_answers() -> bool:
    """Whether a sound server takes a connection now (one short connection)."""
    try:
        connect("probe").close()
    except NoSoundServerError:
        return False
    return True


class PulseWatcher:
    """Tells ``on_change(state)`` whenever a source comes or goes or a default changes, on its own thread."""

    def __init__(self, on_change: Callable[[PulseState], None]) -> None:
        self.on_change = on_change
        self._stop = threading.Event()
        self._pulse: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        pulsectl = _pulsectl()
        self._pulse = connect("device watch")
        self._pulse.event_mask_set("source", "sink", "server")

        def stop_listening(_event: Any) -> None:
            raise pulsectl.PulseLoopStop  # nothing may call the server inside the callback: read it after

        self._pulse.event_callback_set(stop_listening)
        self._thread = threading.Thread(target=self._run, name="captioneer-pulse-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._pulse.event_listen()
                if self._stop.is_set():
                    return
                self.on_change(read_state())
        except Exception:  # the server went away: the capture notices on its own
            log.debug("the sound server watch ended", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        if self._pulse is not None:
            self._pulse.event_listen_stop()  # thread-safe: wakes event_listen
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self._pulse is not None:
            self._pulse.close()
            self._pulse = None
