"""Test-wide settings: headless Qt, no real input devices, and an isolated Captioneer home per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sound_server import SoundServer, start_sound_server

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYNPUT_BACKEND", "dummy")

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "captioneer-home"
    monkeypatch.setenv("CAPTIONEER_HOME", str(home))
    monkeypatch.delenv("CAPTIONEER_MODELS_DIR", raising=False)
    monkeypatch.delenv("CAPTIONEER_MODEL_SPECS", raising=False)
    return home


@pytest.fixture
def sound_server(tmp_path: Path) -> Iterator[SoundServer]:
    """A private PulseAudio with speakers and a virtual microphone (tests/sound_server.py)."""
    yield from start_sound_server(tmp_path / "sound")
