"""The README's first-run command: no model installed → the bundled demo transcribes the bundled sample."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from inference.cli import main

SAMPLES = Path(__file__).resolve().parents[2] / "resources" / "samples"


@pytest.mark.parametrize("index", [0, 1])
def test_demo_model_is_the_fallback_and_matches_torch(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    sample = json.loads((SAMPLES / "samples.json").read_text())["samples"][index]
    out = io.StringIO()
    code = main(["transcribe", str(SAMPLES / sample["wav"]), "--format", "json"], out=out)
    assert code == 0
    assert "Demo: synthetic English only" in capsys.readouterr().err
    result = json.loads(out.getvalue())
    # Captioneer's engine reproduces the torch greedy output of the shipped weights exactly.
    assert result["text"] == sample["torch_greedy_text"]
    assert result["text"] and all(w["end"] >= w["start"] for w in result["words"])
