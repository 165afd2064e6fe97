"""Putting dictated text into the focused application: paste, type, or copy (docs/dictation.md §1).

``paste`` saves the clipboard, sets the text, sends Ctrl+V (Cmd+V) and restores the old clipboard only after the
focused app has read the text: the text sits in a ``QMimeData`` subclass whose ``retrieveData()`` reports each read
(docs/dictation.md §1.1). Unread after ``timeout_s``, the text stays on the clipboard (``LEFT_ON_CLIPBOARD``).
Waiting uses timers and typing a background operation, so the GUI thread is not blocked; the clipboard and the key
sender are passed in, so the logic is tested without a desktop.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from PySide6.QtCore import QMimeData, QObject, QTimer, Slot

from app.gui_thread import GuiThread
from app.operations import Operation
from inference.errors import UsageError

log = logging.getLogger("captioneer.app.dictation")

OUTPUT_MODES = ("paste", "type", "copy")

#: ``on_done(how, error)``: how the text went in ("pasted", "typed", "copied"; ``LEFT_ON_CLIPBOARD`` when a paste
#: was not taken; "" on failure), error or "".
DoneCallback = Callable[[str, str], None]
LEFT_ON_CLIPBOARD = "left on the clipboard"


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


def x11_session(environ: dict[str, str] | None = None) -> bool:
    import os
    import sys

    env = os.environ if environ is None else environ
    return sys.platform.startswith("linux") and bool(env.get("DISPLAY")) and not env.get("WAYLAND_DISPLAY")


class XTestPaste:
    """Shift+Insert through the XTest extension (X11). XTest events are real key events to every client, where
    pynput's XSendEvent for letters is ignored by xterm and others; Shift+Insert pastes in terminals (the PRIMARY
    selection) and in Qt, GTK and browser fields (the clipboard), so the text goes into both."""

    uses_selection = True

    def __init__(self) -> None:
        from Xlib import XK
        from Xlib import display as xdisplay

        self._display = xdisplay.Display()
        self._shift = self._display.keysym_to_keycode(XK.XK_Shift_L)
        self._insert = self._display.keysym_to_keycode(XK.XK_Insert)
        if not self._shift or not self._insert or not self._display.has_extension("XTEST"):
            raise RuntimeError("the X server has no XTEST extension or no Shift/Insert keys")

    def press(self) -> None:
        from Xlib import X
        from Xlib.ext import xtest

        for kind, code in (
            (X.KeyPress, self._shift),
            (X.KeyPress, self._insert),
            (X.KeyRelease, self._insert),
            (X.KeyRelease, self._shift),
        ):
            xtest.fake_input(self._display, kind, code)
        self._display.sync()


class XTestTyping:
    """Types text through XTest, key by key (X11): real key events, which terminals accept. Characters that no
    key produces are typed through spare keycodes mapped to them for the whole text, as xdotool does."""

    # Clients look a keycode up lazily, when they handle the key event: unmapping too soon after the last press
    # makes a busy client read the emptied keycode and drop the character.
    RELEASE_GRACE_S = 0.3

    def __init__(self) -> None:
        from Xlib import display as xdisplay

        self._display = xdisplay.Display()
        if not self._display.has_extension("XTEST"):
            raise RuntimeError("the X server has no XTEST extension")
        self._shift = self._display.keysym_to_keycode(0xFFE1)  # Shift_L

    def type(self, text: str) -> None:
        spares = self._map_spare_keycodes({_keysym(char) for char in text})
        try:
            for char in text:
                self._press(_keysym(char), spares)
            self._display.sync()
        finally:
            if spares:
                time.sleep(self.RELEASE_GRACE_S)
                for keycode in spares.values():
                    self._display.change_keyboard_mapping(keycode, [(0, 0)])
                self._display.sync()

    def _press(self, keysym: int, spares: dict[int, int]) -> None:
        from Xlib import X
        from Xlib.ext import xtest

        keycode, shifted = (spares[keysym], False) if keysym in spares else self._key_for(keysym)
        if shifted:
            xtest.fake_input(self._display, X.KeyPress, self._shift)
        xtest.fake_input(self._display, X.KeyPress, keycode)
        xtest.fake_input(self._display, X.KeyRelease, keycode)
        if shifted:
            xtest.fake_input(self._display, X.KeyRelease, self._shift)

    def _key_for(self, keysym: int) -> tuple[int, bool]:
        """The keycode that gives ``keysym`` plain or with Shift (0 when none does: AltGr levels are not pressed)."""
        keycode = self._display.keysym_to_keycode(keysym)
        for shifted in (False, True):
            if keycode and self._display.keycode_to_keysym(keycode, int(shifted)) == keysym:
                return keycode, shifted
        return 0, False

    def _map_spare_keycodes(self, keysyms: set[int]) -> dict[int, int]:
        """Maps each keysym no key produces to a free keycode (from the top: the least likely to be in use)."""
        missing = sorted(keysym for keysym in keysyms if not self._key_for(keysym)[0])
        if not missing:
            return {}
        first = self._display.display.info.min_keycode
        count = self._display.display.info.max_keycode - first + 1
        mapping = self._display.get_keyboard_mapping(first, count)
        free = [first + offset for offset in range(count - 1, -1, -1) if not any(mapping[offset])]
        if len(free) < len(missing):
            raise RuntimeError(
                f"{len(missing)} characters need a spare keycode and only {len(free)} are free"
            )
        spares = dict(zip(missing, free[: len(missing)], strict=True))
        for keysym, keycode in spares.items():
            self._display.change_keyboard_mapping(keycode, [(keysym, keysym)])
        self._display.sync()
        return spares


def _keysym(char: str) -> int:
    special = {"\n": 0xFF0D, "\t": 0xFF09}.get(char)
    return special or (ord(char) if ord(char) < 0x100 else 0x01000000 + ord(char))


class PynputKeys:
    """Synthetic key presses through pynput (X11, Windows, macOS with the accessibility permission); on X11 the
    paste goes through XTest (``XTestPaste``)."""

    def __init__(self) -> None:
        try:
            from pynput.keyboard import Controller

            self._keyboard = Controller()
        except ImportError as exc:  # e.g. a Wayland session without an X display: no way to send keys
            raise UsageError(
                f"this session does not let Captioneer send key presses ({exc})".split("\n")[0],
                "choose Dictation → Insert text by → Copying only, and paste with Ctrl+V yourself",
            ) from exc
        self._xtest: XTestPaste | None = None
        self._xtyping: XTestTyping | None = None
        if x11_session():
            try:
                self._xtest, self._xtyping = XTestPaste(), XTestTyping()
            except Exception as exc:  # no XTEST: pynput's keys, which terminals ignore
                log.warning("XTest is not available (%s); pasting with Ctrl+V and typing through pynput", exc)

    @property
    def uses_selection(self) -> bool:
        """The paste keys read the PRIMARY selection in some windows (terminals): put the text there too."""
        return self._xtest is not None

    def paste(self) -> None:
        import sys

        if self._xtest is not None:
            self._xtest.press()
            return
        from pynput.keyboard import Key

        modifier = Key.cmd if sys.platform == "darwin" else Key.ctrl
        with self._keyboard.pressed(modifier):
            self._keyboard.press("v")
            self._keyboard.release("v")

    def type(self, text: str) -> None:
        if self._xtyping is not None:
            self._xtyping.type(text)
            return
        self._keyboard.type(text)


class ClipboardLike(Protocol):
    dataChanged: Any  # noqa: N815 - Qt naming (a signal)

    def mimeData(self) -> Any: ...  # noqa: N802 - Qt naming

    def setMimeData(self, data: Any) -> None: ...  # noqa: N802

    def setText(self, text: str) -> None: ...  # noqa: N802


class MimeSource(Protocol):
    def mimeData(self) -> Any: ...  # noqa: N802 - Qt naming


def snapshot_clipboard(clipboard: MimeSource) -> QMimeData:
    """A copy of every format the clipboard holds (text, HTML, images, files...)."""
    saved = QMimeData()
    current = clipboard.mimeData()
    if current is not None:
        for fmt in current.formats():
            saved.setData(fmt, current.data(fmt))
    return saved


class _SelectionView:
    """The PRIMARY selection seen through the clipboard interface (for ``snapshot_clipboard``)."""

    def __init__(self, clipboard: ClipboardLike) -> None:
        self._clipboard = clipboard

    def mimeData(self) -> Any:  # noqa: N802 - Qt naming
        from PySide6.QtGui import QClipboard

        return self._clipboard.mimeData(QClipboard.Mode.Selection)  # type: ignore[call-arg]


class WatchedMimeData(QMimeData):
    """Clipboard data that reports every time someone reads one of its formats."""

    def __init__(self, text: str, on_read: Callable[[str], None]) -> None:
        super().__init__()
        self.setText(text)
        self._offered = {fmt.split(";")[0] for fmt in self.formats()}
        self._on_read = on_read

    def retrieveData(self, mimetype: str, preferred_type: Any) -> Any:  # noqa: N802 - Qt override
        if mimetype.split(";")[0] in self._offered:
            self._on_read(mimetype)
        return super().retrieveData(mimetype, preferred_type)


@dataclass
class _Paste:
    text: str
    on_done: DoneCallback
    saved: QMimeData
    saved_selection: QMimeData | None = None
    phase: str = "settling"  # settling → pasting → finished
    reads_after_keys: int = 0
    keys_sent_at: float = 0.0


class TextOutput(QObject):
    """Inserts texts one after the other; ``deliver`` returns at once and ``on_done`` reports the outcome
    on the GUI thread."""

    def __init__(
        self,
        mode: str,
        clipboard: ClipboardLike | None,
        keys: Keys | None,
        *,
        settle_s: float = 0.05,
        grace_s: float = 0.15,
        timeout_s: float = 3.0,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        if mode not in OUTPUT_MODES:
            raise ValueError(f"unknown output mode {mode!r}; use one of {', '.join(OUTPUT_MODES)}")
        self.mode = mode
        self.clipboard = clipboard
        self.keys = keys
        self.settle_s, self.grace_s, self.timeout_s = settle_s, grace_s, timeout_s
        self.last_paste: dict[str, Any] = {}  # how the last paste ended (for tests and logs)
        self._queue: deque[tuple[str, DoneCallback]] = deque()
        self._busy = False
        self._paste: _Paste | None = None
        self._setting_clipboard = False
        self._settle = self._timer(self._send_paste_keys)
        self._grace = self._timer(lambda: self._restore("read"))
        self._fallback = self._timer(lambda: self._restore("timeout"))
        self._gui = GuiThread(self)  # where typing's outcome is handled
        if clipboard is not None and mode == "paste":
            clipboard.dataChanged.connect(self._clipboard_changed)

    def _timer(self, slot: Callable[[], None]) -> QTimer:
        timer = QTimer(self)
        timer.setSingleShot(True)
        timer.timeout.connect(slot)
        return timer

    @property
    def busy(self) -> bool:
        return self._busy

    def deliver(self, text: str, on_done: DoneCallback | None = None) -> None:
        """Insert ``text`` (GUI thread); ``on_done(how, error)`` follows when it is in."""
        self._queue.append((text, on_done or (lambda _how, _error: None)))
        if not self._busy:
            self._next()

    def _next(self) -> None:
        while self._queue and not self._busy:
            text, on_done = self._queue.popleft()
            if not text:
                on_done("nothing to insert", "")
                continue
            self._busy = True
            try:
                self._start(text, on_done)
            except Exception as exc:  # a desktop without a clipboard or key injection: say so
                log.exception("inserting dictated text failed")
                self._paste = None
                self._settle.stop()
                self._finish(on_done, "", f"could not insert the text: {exc}")

    def _start(self, text: str, on_done: DoneCallback) -> None:
        if self.mode == "type":
            if self.keys is None:
                raise RuntimeError("no key sender")
            keys = self.keys
            typing = Operation(lambda: keys.type(text), "captioneer-typing")
            typing.success(lambda _none: self._finish(on_done, "typed", ""))
            typing.failure(lambda exc: self._finish(on_done, "", f"could not type the text: {exc}"))
            typing.run_in_background(self._gui.post)
            return
        if self.clipboard is None:
            raise RuntimeError("no clipboard")
        if self.mode == "copy":
            self.clipboard.setText(text)
            self._finish(on_done, "copied", "")
            return
        if self.keys is None:
            raise RuntimeError("no key sender")
        selection = bool(getattr(self.keys, "uses_selection", False)) and self._has_selection()
        self._paste = _Paste(
            text,
            on_done,
            snapshot_clipboard(self.clipboard),
            snapshot_clipboard(_SelectionView(self.clipboard)) if selection else None,
        )
        self._set_clipboard(WatchedMimeData(text, self._read))
        if selection:
            self._set_clipboard(WatchedMimeData(text, self._read), selection=True)
        self._settle.start(round(self.settle_s * 1000))

    def _has_selection(self) -> bool:
        supports = getattr(self.clipboard, "supportsSelection", None)
        return bool(supports()) if callable(supports) else False

    def _finish(self, on_done: DoneCallback, how: str, error: str) -> None:
        self._busy = False
        try:
            on_done(how, error)
        finally:
            self._next()

    # ------------------------------------------------------------------ paste
    def _set_clipboard(self, data: QMimeData, selection: bool = False) -> None:
        assert self.clipboard is not None
        self._setting_clipboard = True  # Qt reports our own change synchronously; it is not someone else's
        try:
            if selection:
                from PySide6.QtGui import QClipboard

                self.clipboard.setMimeData(data, QClipboard.Mode.Selection)  # type: ignore[call-arg]
            else:
                self.clipboard.setMimeData(data)  # Qt owns (and later deletes) ``data`` from here on
        finally:
            self._setting_clipboard = False

    def _send_paste_keys(self) -> None:
        paste = self._paste
        if paste is None or paste.phase != "settling":
            return
        paste.phase = "pasting"  # from now on a read is the focused app pasting (even one inside keys.paste)
        paste.keys_sent_at = time.monotonic()
        self._fallback.start(round(self.timeout_s * 1000))
        assert self.keys is not None
        try:
            self.keys.paste()
        except Exception as exc:
            log.exception("sending the paste keys failed")
            self._restore("failed", f"could not send the paste keys: {exc}")

    def _read(self, _mimetype: str) -> None:
        paste = self._paste
        if paste is None or paste.phase != "pasting":
            return  # before the keys: a clipboard manager noticing the change
        paste.reads_after_keys += 1
        self._grace.start(round(self.grace_s * 1000))  # restarted by each read: several formats in a row

    def _restore(self, reason: str, error: str = "") -> None:
        paste = self._paste
        if paste is None or paste.phase == "finished":
            return
        self._settle.stop()
        self._grace.stop()
        self._fallback.stop()
        paste.phase = "finished"
        self._paste = None
        if reason not in ("replaced", "timeout"):
            self._set_clipboard(paste.saved)
            if paste.saved_selection is not None:
                self._set_clipboard(paste.saved_selection, selection=True)
        elif reason == "replaced" and not paste.keys_sent_at:
            error = "another application set the clipboard before the paste; nothing was pasted"
        self.last_paste = {
            "reason": reason,
            "reads": paste.reads_after_keys,
            "restored_after_s": time.monotonic() - paste.keys_sent_at if paste.keys_sent_at else 0.0,
        }
        if reason == "timeout":
            # Nothing took it (a terminal pastes with other keys, or the window ignores synthetic keys): the text
            # stays on the clipboard for the user to paste, and nobody is told it was pasted.
            log.info(
                "nobody read the dictated text within %.1f s of the paste keys; it stays on the clipboard",
                self.timeout_s,
            )
            self._finish(paste.on_done, LEFT_ON_CLIPBOARD, "")
            return
        self._finish(paste.on_done, "" if error else "pasted", error)

    @Slot()
    def _clipboard_changed(self) -> None:
        if self._setting_clipboard or self._paste is None:
            return
        log.info("the clipboard was set by someone else during a dictation paste; it is left as it is")
        self._restore("replaced")
