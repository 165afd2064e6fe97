"""A recording with a damaged stretch, captioned in the window: the words after the damage still come, and the
status says what was lost when the recording ends (the captions have a hole the user should know about)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import soundfile

from app.live.sources import FileSource
from inference.audio.io import load_audio_file
from tests.app.windows import caption_window
from tests.conftest import REPO_ROOT
from tests.fuzz.audio_corpus import flac_frame_offsets

SAMPLES = REPO_ROOT / "resources" / "samples"


def damaged_recording(folder: Path) -> Path:
    """Both demo sentences with a second of silence around them, as a FLAC with one frame damaged in the
    silence between them (frame 17: 4.35-4.61 s)."""
    gap = np.zeros(16000, np.float32)
    one, two = (load_audio_file(SAMPLES / f"demo_sample_{i}.wav") for i in (1, 2))
    buffer = io.BytesIO()
    soundfile.write(buffer, np.concatenate([gap, one, gap, two, gap]), 16000, format="FLAC", subtype="PCM_16")
    data = bytearray(buffer.getvalue())
    offsets = flac_frame_offsets(bytes(data))
    middle = (offsets[17] + offsets[18]) // 2
    data[middle : middle + 4] = bytes(b ^ 0xFF for b in data[middle : middle + 4])
    path = folder / "talk.flac"
    path.write_bytes(bytes(data))
    return path


def test_the_window_captions_past_the_damage_and_says_what_was_lost(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    recording = damaged_recording(tmp_path)
    window = caption_window(qtbot, lambda _device: FileSource(recording, speed=6.0))
    controller = window.controller
    try:
        window.panel.device_combo.addItem("talk.flac", "test")
        window.panel.device_combo.setCurrentIndex(window.panel.device_combo.count() - 1)
        with qtbot.waitSignal(controller.session_finished, timeout=60000):
            window.captions.start()
        text = window.panel.caption_text()
        assert "bottle" in text and "garden" in text  # the sentence after the damage is captioned too
        status = window.panel.status_label.text()
        assert "talk.flac is damaged at 4.35 s" in status, status
    finally:
        window.close()
