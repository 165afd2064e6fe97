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
        assert (tmp_path / f"{name}.png").stat().st_size > 1000, name
    app_page = (REPO_ROOT / "docs" / "app.md").read_text()
    assert all(f"(screenshots/{name}.png)" in app_page for name in EXPECTED)
    assert "(docs/screenshots/main_window.png)" in (REPO_ROOT / "README.md").read_text()
