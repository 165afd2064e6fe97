"""A clip longer than the encoder holds at once is transcribed by default (long-form windows), not refused:
the demo model with its position table cut to 256 positions (about 20 s) stands in for the v3's 5000 (400 s)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from inference.engine import load_engine
from inference.errors import UsageError
from tests.conftest import REPO_ROOT
from tests.long_speech import espeak_available, recording


@pytest.mark.skipif(not espeak_available(), reason="needs espeak-ng for speech")
def test_a_clip_past_the_position_table_uses_long_form_windows_by_default(tmp_path: Path) -> None:
    model = Path(shutil.copytree(REPO_ROOT / "resources" / "demo_model", tmp_path / "short_positions"))
    config = json.loads((model / "config.json").read_text())
    config["encoder_config"]["max_position_embeddings"] = 256
    (model / "config.json").write_text(json.dumps(config))
    (model / "captioneer_model.json").unlink()  # the demo's speech gate would choose VAD spans instead
    talk = recording(30.0, seed=41)
    with load_engine(model, threads=2) as engine:  # type: ignore[attr-defined]
        limit = engine.encoder.full_context_samples()
        assert 19 * 16000 < limit < 21 * 16000 < talk.audio.size
        by_default = engine.transcribe(talk.audio)
        windows = engine.transcribe(talk.audio, audio_chunk_mode="fixed")
        assert by_default.text == windows.text and len(by_default.text.split()) > 40
        short = talk.audio[: limit - 16000]  # fits: still one full-context pass, as the reference does
        assert engine.transcribe(short).text == engine.transcribe(short, audio_chunk_mode="none").text
        with pytest.raises(UsageError) as refused:
            engine.transcribe(talk.audio, audio_chunk_mode="none")
    assert "full-context mode" in refused.value.message and "audio_chunk_mode at auto" in str(
        refused.value.fix
    )
