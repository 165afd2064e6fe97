"""Input ids, grouping and fallbacks without a sound server: the listing rules and the live feed's reconnects."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import numpy as np
import pytest

from inference.audio.devices import InputDeviceError, fallback_for, render_listing
from inference.audio.devices.feed import feed_until_interrupted
from inference.audio.devices.pulse import PulseSource, PulseState, choices_from, resolve
from inference.cli_signals import finish_on_signals

STATE = PulseState(
    sources=(
        PulseSource(
            "alsa_output.pci.analog-stereo.monitor",
            "Monitor of Built-in Audio",
            "alsa_output.pci.analog-stereo",
        ),
        PulseSource("alsa_input.pci.analog-stereo", "Built-in Audio Analog Stereo", None),
        PulseSource("alsa_input.usb-Headset", "USB Headset Mono", None),
        PulseSource("bluez_output.AA.monitor", "Monitor of Earbuds", "bluez_output.AA"),
    ),
    default_source="alsa_input.usb-Headset",
    default_sink="bluez_output.AA",
    sink_descriptions={"alsa_output.pci.analog-stereo": "Built-in Audio", "bluez_output.AA": "Earbuds"},
)


def test_microphones_and_system_audio_are_grouped_with_the_defaults_marked() -> None:
    listed = [(c.group, c.id, c.label, c.is_default) for c in choices_from(STATE)]
    assert listed == [
        ("Microphones", "pulse:source:alsa_input.pci.analog-stereo", "Built-in Audio Analog Stereo", False),
        ("Microphones", "pulse:source:alsa_input.usb-Headset", "USB Headset Mono", True),
        ("System audio", "system:default", "What this computer plays", True),
        ("System audio", "pulse:source:alsa_output.pci.analog-stereo.monitor", "Built-in Audio", False),
        ("System audio", "pulse:source:bluez_output.AA.monitor", "Earbuds", False),
    ]
    text = render_listing(choices_from(STATE))
    assert text.index("Microphones:") < text.index("USB Headset Mono (default)") < text.index("System audio:")


def test_ids_resolve_to_the_source_to_record_and_a_gone_one_is_refused() -> None:
    assert resolve("system:default", STATE) == (
        "bluez_output.AA.monitor",
        "What this computer plays (Earbuds)",
    )
    assert resolve("mic:default", STATE) == ("alsa_input.usb-Headset", "USB Headset Mono")
    assert resolve("pulse:source:alsa_output.pci.analog-stereo.monitor", STATE)[1] == "Built-in Audio"
    with pytest.raises(InputDeviceError, match="'alsa_input.gone' is not there"):
        resolve("pulse:source:alsa_input.gone", STATE)


def test_a_gone_input_falls_back_to_the_default_of_its_kind() -> None:
    assert fallback_for("pulse:source:bluez_output.AA.monitor") == "system:default"
    assert fallback_for("system:default") == "system:default"
    assert fallback_for("pulse:source:alsa_input.usb-Headset") == "mic:default"
    assert fallback_for("soundcard:loopback:{0.0.0}") == "system:default"


class FakeCapture:
    """A device double: delivers the blocks it is given, then ends with ``reason`` (None: keeps running)."""

    def __init__(self, input_id: str, blocks: list[np.ndarray], reason: str | None, interrupt: bool) -> None:
        self.input_id, self.name, self.blocks, self.reason, self.interrupt = (
            input_id,
            input_id,
            blocks,
            reason,
            interrupt,
        )
        self.stopped = False

    def start(self, sink: Callable[[np.ndarray], None], on_end: Callable[[str | None], None]) -> None:
        for block in self.blocks:
            sink(block)
        if self.reason is not None:
            on_end(self.reason)
        elif self.interrupt:
            sink(
                np.full(960, np.nan, np.float32)
            )  # a chunk of its own, which the push below turns into Ctrl-C

    def stop(self) -> None:
        self.stopped = True


def test_the_feed_continues_on_the_default_after_an_unplug_and_pushes_every_block() -> None:
    opened: list[FakeCapture] = []
    block = np.ones(480, np.float32)

    def open_capture(input_id: str) -> FakeCapture:
        first = not opened
        capture = FakeCapture(
            input_id, [block] * 3, "the input 'USB' was unplugged or removed" if first else None, not first
        )
        opened.append(capture)
        return capture

    pushed: list[np.ndarray] = []

    def push(chunk: np.ndarray) -> None:
        if np.isnan(chunk).any():
            raise KeyboardInterrupt
        pushed.append(chunk)

    notes: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        feed_until_interrupted(
            push, "pulse:source:usb.monitor", 960, notes.append, open_capture, clock=lambda: 0.0
        )  # every block comes at once: no span without audio
    assert [c.input_id for c in opened] == ["pulse:source:usb.monitor", "system:default"]
    assert all(c.stopped for c in opened)
    assert notes[1] == "the input 'USB' was unplugged or removed; now listening on system:default"
    assert sum(chunk.size for chunk in pushed) == 6 * 480  # every block, across the swap


def test_the_span_without_an_input_is_sent_as_silence_and_reported_as_a_gap() -> None:
    block = np.ones(480, np.float32)  # 30 ms
    opened: list[FakeCapture] = []

    def open_capture(input_id: str) -> FakeCapture:
        first = not opened
        reason = "the input 'USB' was unplugged" if first else None
        opened.append(FakeCapture(input_id, [block] * 3, reason, interrupt=not first))
        return opened[-1]

    # When each block arrives: the new input's first block comes 2 s after the old one's last ended.
    arrivals = iter([0.03, 0.06, 0.09, 2.12, 2.15, 2.18, 2.24])
    pushed: list[np.ndarray] = []

    def push(chunk: np.ndarray) -> None:
        if np.isnan(chunk).any():
            raise KeyboardInterrupt
        pushed.append(chunk)

    gaps: list[tuple[float, float, str, float]] = []
    with pytest.raises(KeyboardInterrupt):
        feed_until_interrupted(
            push, "pulse:source:usb", 960, lambda _note: None, open_capture,
            on_gap=lambda *gap: gaps.append(gap), clock=lambda: next(arrivals),
        )  # fmt: skip
    assert gaps == [(pytest.approx(0.09), pytest.approx(2.0), "the input 'USB' was unplugged", 2.0)]
    audio = np.concatenate(pushed)
    assert audio.size == 6 * 480 + 2 * 16000
    assert (
        not audio[3 * 480 : 3 * 480 + 32000].any() and audio[3 * 480 + 32000 :].all()
    )  # silence in its place


def test_the_feed_finishes_when_no_default_can_be_opened() -> None:
    def open_capture(input_id: str) -> FakeCapture:
        if input_id == "mic:default":
            raise InputDeviceError("the sound server has no default microphone", "plug in a microphone")
        return FakeCapture(
            input_id, [np.ones(480, np.float32)], "the input 'USB' was unplugged or removed", False
        )

    pushed: list[np.ndarray] = []
    notes: list[str] = []
    feed_until_interrupted(pushed.append, "pulse:source:usb", 960, notes.append, open_capture)
    assert "no other input could be opened (the sound server has no default microphone)" in notes[-1]
    assert sum(chunk.size for chunk in pushed) == 480  # what was captured is not lost


def test_ctrl_c_during_a_push_ends_the_feed_after_it_and_every_captured_block_is_pushed_once() -> None:
    """A KeyboardInterrupt raised inside a push could stop the worker client between recording a push as sent
    and sending it; `finish` then waited forever for its answer (the CLI hung after Ctrl-C). With the CLI's
    handlers a signal only sets the stop the feed looks at between pushes."""
    block = np.arange(480, dtype=np.float32)
    capture = FakeCapture("mic:default", [block + 480 * i for i in range(8)], None, interrupt=False)
    started: list[int] = []
    pushed: list[np.ndarray] = []

    def push(chunk: np.ndarray) -> None:
        started.append(chunk.size)
        os.kill(os.getpid(), signal.SIGTERM)  # `kill PID` (or Ctrl-C) arrives while the chunk is handed over
        for _ in range(10_000):  # Python runs a signal's handler between these bytecodes
            pass
        pushed.append(chunk)

    before = signal.getsignal(signal.SIGTERM)
    with finish_on_signals() as stop:
        feed_until_interrupted(
            push,
            "mic:default",
            960,
            lambda _note: None,
            lambda _id: capture,
            clock=lambda: 0.0,
            stop=stop.is_set,
        )
    assert stop.is_set() and capture.stopped
    assert len(pushed) == len(started) == 2  # the push under way, then everything captured before the stop
    assert np.array_equal(np.concatenate(pushed), np.arange(8 * 480, dtype=np.float32))
    assert signal.getsignal(signal.SIGTERM) is before  # the signal does what it did before, after the feed


def test_a_keyboard_interrupt_that_ends_the_feeding_is_a_stop_too() -> None:
    """Raised by a push, or off the main thread where no handler is installed: the feeding ends the same way."""
    with finish_on_signals() as stop:
        raise KeyboardInterrupt
    assert stop.is_set()
