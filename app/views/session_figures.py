"""The session's figures in the status bar (thin view): caption latency, real-time factor, backlog, worker state."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

from app.live.session import SessionStatus


class SessionFigures(QLabel):
    def __init__(self, parent: QWidget) -> None:
        super().__init__("", parent)
        self.setObjectName("figuresLabel")

    def show_status(self, status: SessionStatus) -> None:
        figures = []
        if status.latency_s is not None:
            figures.append(f"latency {status.latency_s:.2f} s")
        if status.rtf is not None:
            figures.append(f"RTF {status.rtf:.2f}")
        figures.append(f"backlog {status.backlog_s:.1f} s")
        figures.append(f"worker: {status.worker}")
        self.setText("  ·  ".join(figures))
