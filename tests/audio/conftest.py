from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sound_server import SoundServer, start_sound_server


@pytest.fixture
def sound_server(tmp_path: Path) -> Iterator[SoundServer]:
    yield from start_sound_server(tmp_path / "sound")
