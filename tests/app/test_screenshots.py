"""The screenshot script still runs: every window it shows opens under Xvfb and is saved, and docs/app.md shows
them all (the README shows the caption window)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

EXPECTED = (
    "main_window",
    "overlay",
    "dictation_listening",
    "dictation_done",
    "models_dialog",
    "overlay_settings",
    "dictation_settings",
)


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="needs Xvfb (installed by .ci/run)")
def test_the_screenshot_script_renders_every_window(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("DISPLAY", "QT_QPA_PLATFORM")}
    done = subprocess.run(
        [sys.executable, "docs/screenshots/make_screenshots.py", "--out", str(tmp_path)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for name in EXPECTED:
        assert _colours(tmp_path / f"{name}.png") > 2, name  # something drawn, not a blank grab
    app_page = (REPO_ROOT / "docs" / "app.md").read_text()
    assert all(f"(screenshots/{name}.png)" in app_page for name in EXPECTED)
    assert "(docs/screenshots/main_window.png)" in (REPO_ROOT / "README.md").read_text()


def _colours(path: Path) -> int:
    """How many distinct colours the image has (at most 64 are counted)."""
    from PySide6.QtGui import QImage

    image = QImage(str(path))
    assert not image.isNull(), path
    seen: set[int] = set()
    for y in range(0, image.height(), max(1, image.height() // 40)):
        for x in range(0, image.width(), max(1, image.width() // 80)):
            seen.add(image.pixel(x, y))
            if len(seen) >= 64:
                return len(seen)
    return len(seen)
