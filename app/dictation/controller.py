"""Dictation for the window (Qt side): the global key, the microphone, the indicator's state, the output.

Key and audio callbacks arrive on foreign threads; they reach the service directly (it is thread-safe)
and reach widgets only through queued signals. Inserting text happens on the GUI thread, because the
clipboard is a GUI object.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal, Slot
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from app.dictation.capture import CaptureSettings
from app.dictation.global_hotkey import HotkeyBackend, choose_backend, make_hotkey, session_kind
from app.dictation.hotkey import HotkeyStateMachine
from app.dictation.output import LEFT_ON_CLIPBOARD, TextOutput, TextStyle, style_text
from app.dictation.service import DictationResult, DictationService
from app.live.sources import AudioSource
from inference.client import RemoteEngine

log = logging.getLogger("captioneer.app.dictation")
INSERTING = {"paste": "pasting", "type": "typing", "copy": "copying"}  # output mode → state until it is in


def command_server_name() -> str:
    import getpass

    return f"captioneer-dictation-{getpass.getuser()}"


def send_toggle(timeout_ms: int = 2000) -> bool:
    """``captioneer dictate --toggle``: ask the running app to start or stop dictating."""
    socket = QLocalSocket()
    socket.connectToServer(command_server_name())
    if not socket.waitForConnected(timeout_ms):
        return False
    socket.write(b"toggle\n")
    socket.flush()
    socket.waitForBytesWritten(timeout_ms)
    socket.disconnectFromServer()
    return True


class DictationController(QObject):
    # listening / transcribing / inserting (until the outcome is known) / done / copied / nothing / failed / idle
    state_changed = Signal(str, str)  # state, detail
    result_ready = Signal(object)  # DictationResult, after the text was inserted
    _result = Signal(object)

    def __init__(
        self,
        engine: Callable[[], RemoteEngine],
        source: AudioSource,
        output: TextOutput,
        *,
        mode: str = "hold",
        hotkey: str | None = "<ctrl>+<alt>+<space>",
        capture: CaptureSettings | None = None,
        style: TextStyle | None = None,
        request_options: dict[str, object] | None = None,
        listen_for_commands: bool = True,
        backend: HotkeyBackend | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.output = output
        self.style = style or TextStyle()
        self.source = source
        self.history: deque[DictationResult] = deque(maxlen=20)
        self.service = DictationService(
            engine,
            HotkeyStateMachine(mode),
            capture or CaptureSettings(),
            self.state_changed.emit,
            self._result.emit,
            request_options,
        )
        self._result.connect(self._insert)
        self.backend: HotkeyBackend = backend or choose_backend(
            session_kind(), hotkey or "<ctrl>+<alt>+<space>"
        )
        self.backend_note = self.backend.note
        self.hotkey = (
            make_hotkey(hotkey, self.service.key_pressed, self.service.key_released, self.backend)
            if hotkey
            else None
        )
        self._ticker = QTimer(self)
        self._ticker.setInterval(500)
        self._ticker.timeout.connect(self.service.tick)
        self._server: QLocalServer | None = None
        if listen_for_commands:
            self._listen()

    def start(self) -> None:
        self._source_alive = True
        self.source.start(self.service.feed, self._source_ended)
        if self.hotkey is not None:
            self.hotkey.start()
            self.backend_note = getattr(self.hotkey, "note", "") or self.backend_note  # evdev: grabbed or not
        self._ticker.start()
        self.state_changed.emit("idle", self.backend_note)

    def stop(self) -> None:
        self._ticker.stop()
        if self.hotkey is not None:
            self.hotkey.stop()
        self.source.stop()
        self.service.close()
        if self._server is not None:
            self._server.close()

    def toggle(self) -> None:
        """Start or stop regardless of the hotkey mode (the desktop shortcut / ``dictate --toggle``)."""
        self.service.toggle()
        if not self._source_alive:  # no more audio will come: do not wait for the trailing capture
            self.service.recorder.finish_now(self.service.clock())

    def _source_ended(self, reason: str | None) -> None:
        self._source_alive = False
        self.service.recorder.finish_now(self.service.clock())  # what was said is still transcribed
        self.state_changed.emit("failed", reason or "the audio input ended")

    @Slot(object)
    def _insert(self, result: DictationResult) -> None:
        text = style_text(result.text, self.style)
        if result.error or not text:
            self._delivered(result, "", "")
            return
        self._show(INSERTING[self.output.mode], f"{len(text.split())} words")
        self.output.deliver(text, lambda how, error: self._delivered(result, how, error))

    def _delivered(self, result: DictationResult, how: str, error: str) -> None:
        """The text is in (or could not be inserted: the text is kept in the history, with the reason)."""
        if error:
            result = DictationResult(result.text, result.audio_s, result.latency_s, error)
        self.history.appendleft(result)
        self.result_ready.emit(result)
        if how == LEFT_ON_CLIPBOARD:
            self._show(
                "copied",
                "the window did not take the paste; the text is on the clipboard: "
                "paste it yourself (Ctrl+Shift+V in a terminal, Ctrl+V elsewhere)",
            )
        elif how and not error:
            self._show("done", f"{how} · {result.latency_s * 1000:.0f} ms after release")
        elif error and result.text:
            self._show("failed", error)
        elif not result.error and not result.text.strip():
            self._show("nothing", "no speech heard")

    def _show(self, state: str, detail: str) -> None:
        """An outcome of an earlier dictation does not cover "listening" while the next one is recorded."""
        if not self.service.recorder.recording:
            self.state_changed.emit(state, detail)

    def _listen(self) -> None:
        server = QLocalServer(self)
        QLocalServer.removeServer(command_server_name())  # a stale socket from a crashed run
        if not server.listen(command_server_name()):
            log.warning("dictation command socket unavailable: %s", server.errorString())
            return
        server.newConnection.connect(self._on_command)
        self._server = server

    def _on_command(self) -> None:
        assert self._server is not None
        connection = self._server.nextPendingConnection()
        if connection is None:
            return
        # Read when the line arrives (signals), never waiting for it on the GUI thread.
        connection.readyRead.connect(lambda: self._read_command(connection))
        connection.disconnected.connect(connection.deleteLater)
        self._read_command(connection)  # it may be here already

    def _read_command(self, connection: QLocalSocket) -> None:
        if not connection.canReadLine():
            return
        if bytes(connection.readLine().data()).strip() == b"toggle":
            self.toggle()
        connection.disconnectFromServer()
