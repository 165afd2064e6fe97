"""The push-to-talk hotkey as pure logic: key events in, "start"/"stop" decisions out.

Modes:
* ``hold``: recording while the key is down;
* ``toggle``: one press starts, the next press stops;
* ``hybrid``: a press starts; releasing after at least ``hold_threshold_s`` stops (it was push-to-talk),
  releasing sooner keeps recording until the next press (it was a tap: toggle).

Key repeat (the OS sends more presses while a key is held) is ignored. A press while the previous
utterance is still being transcribed starts a new recording: dictations queue, none is dropped. If the
release is never seen (the key went up while another window grabbed the keyboard), ``max_hold_s``
ends the recording, so the microphone never stays open by accident.
"""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("hold", "toggle", "hybrid")


@dataclass(frozen=True)
class HotkeyDecision:
    action: str  # "start" | "stop" | "none"
    reason: str = ""


NONE = HotkeyDecision("none")


class HotkeyStateMachine:
    def __init__(self, mode: str = "hold", hold_threshold_s: float = 0.35, max_hold_s: float = 120.0) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown push-to-talk mode {mode!r}; use one of {', '.join(MODES)}")
        self.mode = mode
        self.hold_threshold_s = hold_threshold_s
        self.max_hold_s = max_hold_s
        self.key_down = False
        self.recording = False
        self._pressed_at = 0.0
        self._started_at = 0.0
        self._started_by_this_press = False

    def press(self, now: float) -> HotkeyDecision:
        if self.key_down:
            return HotkeyDecision("none", "key repeat")
        self.key_down = True
        self._pressed_at = now
        if not self.recording:
            self.recording, self._started_at, self._started_by_this_press = True, now, True
            return HotkeyDecision("start")
        self._started_by_this_press = False
        if self.mode in ("toggle", "hybrid"):  # the second press of a toggle ends it
            self.recording = False
            return HotkeyDecision("stop", "pressed again")
        return NONE  # hold mode: already recording (a press we never saw released)

    def release(self, now: float) -> HotkeyDecision:
        if not self.key_down:
            return NONE
        self.key_down = False
        if not self.recording:
            return NONE
        if self.mode == "hold":
            self.recording = False
            return HotkeyDecision("stop", "released")
        if (
            self.mode == "hybrid"
            and self._started_by_this_press
            and now - self._pressed_at >= self.hold_threshold_s
        ):
            self.recording = False
            return HotkeyDecision("stop", "released after a hold")
        return NONE  # toggle, or a tap in hybrid: keep recording until the next press

    def toggle(self, now: float) -> HotkeyDecision:
        """A desktop shortcut or ``captioneer dictate --toggle``: start or stop, whatever the mode."""
        self.key_down = False
        if self.recording:
            self.recording = False
            return HotkeyDecision("stop", "toggled")
        self.recording, self._started_at, self._started_by_this_press = True, now, False
        return HotkeyDecision("start")

    def tick(self, now: float) -> HotkeyDecision:
        """Call periodically: ends a recording that has run past ``max_hold_s``."""
        if self.recording and now - self._started_at >= self.max_hold_s:
            self.recording = False
            self.key_down = False
            return HotkeyDecision("stop", f"longer than {self.max_hold_s:g} s")
        return NONE

    def cancel(self) -> HotkeyDecision:
        """Abort (Escape, or the app lost the device): no transcription."""
        was = self.recording
        self.recording = self.key_down = False
        return HotkeyDecision("stop", "cancelled") if was else NONE
