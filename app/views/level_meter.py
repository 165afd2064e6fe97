"""The input level meter: a painted bar with green/amber/red zones, a held peak and the level in its tooltip."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QRectF, QSize, QTimer, Slot
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.live.level import LevelBallistics

# Zone edges in dBFS: speech into a microphone usually sits between -40 and -12 RMS.
ZONES = ((-18.0, QColor("#3fae49")), (-6.0, QColor("#e0b020")), (0.0, QColor("#d9362b")))
QUIET_DBFS = -50.0


class LevelMeter(QWidget):
    def __init__(self, parent: QWidget | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        self.setObjectName("levelMeter")
        self.ballistics = LevelBallistics()
        self._clock = clock
        self._timer = QTimer(self)
        self._timer.setInterval(33)  # ~30 frames/s while the level moves; stopped at rest
        self._timer.timeout.connect(self._tick)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.setAccessibleName("Input level")
        self._describe()

    def sizeHint(self) -> QSize:
        return QSize(96, 14)

    @Slot(float)
    def show_level(self, dbfs: float) -> None:
        self.ballistics.measure(dbfs, self._clock())
        self._describe()
        if not self._timer.isActive():
            self._timer.start()
        self.update()

    @Slot()
    def clear(self) -> None:
        self._timer.stop()
        self.ballistics.reset()
        self._describe()
        self.update()

    def _tick(self) -> None:
        self.ballistics.advance(self._clock())
        if self.ballistics.at_rest:
            self._timer.stop()
        self.update()

    def _describe(self) -> None:
        level = self.ballistics.level
        if self.ballistics.at_rest:
            text = "Input level: no sound"
        elif self.ballistics.clipping:
            text = (
                f"Input level: {level:.0f} dBFS — too loud, the input is clipping (turn the input gain down)"
            )
        elif level < QUIET_DBFS:
            text = f"Input level: {level:.0f} dBFS — very quiet (speak closer or turn the input gain up)"
        else:
            text = f"Input level: {level:.0f} dBFS"
        self.setToolTip(text)
        self.setAccessibleDescription(text)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        painter = QPainter(self)
        frame = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        painter.setPen(self.palette().mid().color())
        painter.setBrush(self.palette().base())
        painter.drawRoundedRect(frame, 2, 2)
        inner = frame.adjusted(2, 2, -2, -2)
        meter = self.ballistics
        shown_to = inner.left() + inner.width() * meter.fraction(meter.level)
        low = meter.fraction(-60.0)
        painter.setPen(QColor(0, 0, 0, 0))
        for edge_dbfs, colour in ZONES:
            left = inner.left() + inner.width() * low
            right = min(shown_to, inner.left() + inner.width() * meter.fraction(edge_dbfs))
            if right > left:
                painter.fillRect(QRectF(left, inner.top(), right - left, inner.height()), colour)
            low = meter.fraction(edge_dbfs)
        if meter.peak > meter.level:
            x = inner.left() + inner.width() * meter.fraction(meter.peak)
            colour = ZONES[-1][1] if meter.clipping else self.palette().text().color()
            painter.fillRect(QRectF(x - 1, inner.top(), 2, inner.height()), colour)
        painter.end()
