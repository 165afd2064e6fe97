"""Putting dictated text into the focused application: paste, type, or copy.

* ``paste``: the clipboard is saved (every format it holds), set to the text, Ctrl+V (Cmd+V on macOS) is
  sent to the focused app, and only after the paste was consumed is the old clipboard put back;
* ``type``: the text is typed key by key (works where pasting is blocked; slower);
* ``copy``: the text is only copied, for the user to paste.

The Qt clipboard and the key sender are passed in, so the logic is tested without a desktop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

OUTPUT_MODES = ("paste", "type", "copy")


@dataclass(frozen=True)
class TextStyle:
    capitalize: bool = True
    trailing: str = " "  # "", " " or "\n"


def style_text(text: str, style: TextStyle) -> str:
    text = text.strip()
    if not text:
        return ""
    if style.capitalize:
        text = text[0].upper() + text[1:]
    return text + style.trailing


class Keys(Protocol):
    def paste(self) -> None: ...

    def type(self, text: str) -> None: ...


class PynputKeys:
    """Synthetic key presses through pynput (X11, Windows, macOS with the accessibility permission)."""

    def __init__(self) -> None:
        from pynput.keyboard import Controller

        self._keyboard = Controller()

    def paste(self) -> None:
        import sys

        from pynput.keyboard import Key

        modifier = Key.cmd if sys.platform == "darwin" else Key.ctrl
        with self._keyboard.pressed(modifier):
            self._keyboard.press("v")
            self._keyboard.release("v")

    def type(self, text: str) -> None:
        self._keyboard.type(text)


class ClipboardLike(Protocol):
    def mimeData(self) -> Any: ...  # noqa: N802 - Qt naming

    def setMimeData(self, data: Any) -> None: ...  # noqa: N802

    def setText(self, text: str) -> None: ...  # noqa: N802


def snapshot_clipboard(clipboard: ClipboardLike) -> Any:
    """A copy of every format the clipboard holds (text, HTML, images, files...)."""
    from PySide6.QtCore import QMimeData

    saved = QMimeData()
    current = clipboard.mimeData()
    if current is not None:
        for fmt in current.formats():
            saved.setData(fmt, current.data(fmt))
    return saved


class TextOutput:
    def __init__(self, mode: str, clipboard: ClipboardLike | None, keys: Keys | None,
                 paste_settle_s: float = 0.25, sleep: Callable[[float], None] = time.sleep) -> None:  # fmt: skip
        if mode not in OUTPUT_MODES:
            raise ValueError(f"unknown output mode {mode!r}; use one of {', '.join(OUTPUT_MODES)}")
        self.mode = mode
        self.clipboard = clipboard
        self.keys = keys
        self.paste_settle_s = paste_settle_s
        self.sleep = sleep

    def deliver(self, text: str) -> str:
        """Insert ``text``; returns how (for the indicator)."""
        if not text:
            return "nothing to insert"
        if self.mode == "type":
            assert self.keys is not None
            self.keys.type(text)
            return "typed"
        assert self.clipboard is not None
        if self.mode == "copy":
            self.clipboard.setText(text)
            return "copied"
        assert self.keys is not None
        saved = snapshot_clipboard(self.clipboard)
        self.clipboard.setText(text)
        self.keys.paste()
        # The focused app reads the clipboard when it handles Ctrl+V, after our key events: give it time
        # before the user's own clipboard comes back, or it would paste that instead.
        self.sleep(self.paste_settle_s)
        self.clipboard.setMimeData(saved)
        return "pasted"
