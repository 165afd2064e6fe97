"""The input level meter: ballistics on a fake clock, and what the painted bar shows."""

from __future__ import annotations

import pytest

from app.live.level import FLOOR_DBFS, LevelBallistics
from app.views.level_meter import LevelMeter


def test_the_level_rises_at_once_and_falls_at_the_decay_rate() -> None:
    meter = LevelBallistics(decay_db_per_s=20.0, peak_hold_s=1.0)
    meter.measure(-12.0, now=10.0)
    assert meter.level == -12.0 and meter.peak == -12.0
    meter.measure(-40.0, now=10.5)  # quieter block: the bar falls by 10 dB, not to -40 at once
    assert meter.level == pytest.approx(-22.0)
    assert meter.peak == -12.0  # held
    meter.advance(now=11.6)  # hold over: the peak falls too
    assert meter.peak < -12.0
    meter.advance(now=20.0)
    assert meter.at_rest and meter.level == FLOOR_DBFS


def test_out_of_range_levels_are_clamped_and_clipping_is_flagged() -> None:
    meter = LevelBallistics()
    meter.measure(-100.0, now=0.0)  # digital silence
    assert meter.at_rest and not meter.clipping
    meter.measure(3.0, now=0.1)
    assert meter.level == 0.0 and meter.clipping
    assert meter.fraction(-60.0) == 0.0 and meter.fraction(0.0) == 1.0 and meter.fraction(-30.0) == 0.5


def coloured_columns(widget: LevelMeter) -> list[str]:
    """The zone colour (or '') of each pixel column along the bar's middle row."""
    image = widget.grab().toImage()
    row = image.height() // 2
    names = {(0x3F, 0xAE, 0x49): "green", (0xE0, 0xB0, 0x20): "amber", (0xD9, 0x36, 0x2B): "red"}
    columns = []
    for x in range(image.width()):
        colour = image.pixelColor(x, row)
        columns.append(names.get((colour.red(), colour.green(), colour.blue()), ""))
    return columns


def test_the_bar_shows_the_zones_up_to_the_level(qtbot) -> None:  # type: ignore[no-untyped-def]
    now = [0.0]
    widget = LevelMeter(clock=lambda: now[0])
    qtbot.addWidget(widget)
    widget.resize(widget.sizeHint())
    assert set(coloured_columns(widget)) == {""}  # at rest: an empty bar
    assert "no sound" in widget.toolTip()
    widget.show_level(-10.0)
    columns = coloured_columns(widget)
    assert "green" in columns and "amber" in columns and "red" not in columns
    lit = [x for x, name in enumerate(columns) if name]
    assert lit[-1] / len(columns) == pytest.approx(50 / 60, abs=0.06)  # -10 dBFS is 5/6 of the way
    assert "-10 dBFS" in widget.toolTip()
    widget.show_level(-0.5)
    assert "red" in coloured_columns(widget) and "clipping" in widget.toolTip()
    widget.clear()
    assert set(coloured_columns(widget)) == {""}


def test_the_bar_falls_back_to_rest_on_its_own(qtbot) -> None:  # type: ignore[no-untyped-def]
    now = [0.0]
    widget = LevelMeter(clock=lambda: now[0])
    qtbot.addWidget(widget)
    widget.show_level(-20.0)
    now[0] = 5.0  # no more audio: the timer lets it fall
    qtbot.waitUntil(lambda: widget.ballistics.at_rest, timeout=3000)
    assert not widget._timer.isActive()
