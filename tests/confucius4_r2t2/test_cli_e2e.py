"""``captioneer transcribe clip.wav --model DIR [--language] [--context] --format json`` on a fixture checkpoint."""

from __future__ import annotations

import io
import json
import wave
from pathlib import Path

import numpy as np
import pytest
from r2t2_fixtures import (
    FIXTURE_DIR,
    checkpoint_variant,
    load_audio,
    load_expected_arrays,
    load_expected_meta,
)

from inference.cli import main
from inference.families.confucius4_r2t2.postprocess import parse_asr_output, truncate_at_pipe


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cli")
    model = checkpoint_variant(FIXTURE_DIR / "checkpoint_hf", root / "model", 800)  # max_new_tokens 20
    pcm = np.round(load_audio()["clip_a"] * 32768.0).astype("<i2")  # the stored int16 samples, exactly
    wav = root / "clip_a.wav"
    with wave.open(str(wav), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(16000)
        handle.writeframes(pcm.tobytes())
    return model, wav


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPTIONEER_HOME", str(tmp_path / "home"))


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out, stdin=io.BytesIO(b"")), out.getvalue()


def expected(case: str) -> tuple[list[int], str]:
    meta = load_expected_meta()
    info = meta["cases"][case]
    ids = [
        i
        for i in load_expected_arrays()[f"case/{case}/generated_ids"].tolist()
        if i not in meta["eos_token_ids"]
    ]
    return ids, truncate_at_pipe(parse_asr_output(info["text"], info["language"] or "").text)


@pytest.mark.parametrize(
    ("flags", "case"),
    [
        ((), "clip_a/w800/auto"),
        (("--language", "English"), "clip_a/w800/forced"),
        (("--context", "Names: Alice, Bob. Terms: harbour, report."), "clip_a/w800/context"),
    ],
)
def test_transcribe_json_matches_the_reference(setup, flags: tuple[str, ...], case: str) -> None:
    model, wav = setup
    code, out = run_cli("transcribe", str(wav), "--model", str(model), "--backend", "cpu", "--threads", "1",
                        "--format", "json", *flags)  # fmt: skip
    assert code == 0, out
    result = json.loads(out)
    ids, text = expected(case)
    assert result["token_ids"] == ids
    assert result["text"] == text
    assert result["language"] == ("English" if "--language" in flags else None)
    assert result["timing"]["audio_s"] == pytest.approx(load_audio()["clip_a"].size / 16000, abs=1e-3)


def test_bad_language_exits_2_with_the_fix(setup, capsys: pytest.CaptureFixture[str]) -> None:
    model, wav = setup
    code, _ = run_cli(
        "transcribe", str(wav), "--model", str(model), "--backend", "cpu", "--language", "Klingon"
    )
    assert code == 2
    assert "Klingon" in capsys.readouterr().err


def test_streaming_jsonl_commits_vad_segments_through_the_worker(setup, tmp_path: Path) -> None:
    """R2T2's own LSP path is not built yet: the worker captions it segment by segment (Silero VAD)."""
    model, _ = setup
    clip = load_audio()["clip_a"]
    audio = np.concatenate([clip, np.zeros(16000, np.float32), clip])  # a pause closes the first segment
    wav = tmp_path / "two.wav"
    with wave.open(str(wav), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(16000)
        handle.writeframes(np.round(audio * 32768.0).astype("<i2").tobytes())
    code, text = run_cli(
        "transcribe", str(wav), "--model", str(model), "--backend", "cpu", "--mode", "streaming", "--format", "jsonl"
    )
    assert code == 0
    events = [json.loads(line) for line in text.splitlines()]
    done = events[-1]
    assert done["type"] == "done" and all(e["type"] != "done" for e in events[:-1])
    ends = [e for e in events if e["type"] == "speech_end"]
    assert len(ends) >= 1 and ends[0]["segment_id"] == 0 and 0 <= ends[0]["start_s"] < ends[0]["end_s"] < 6.6
    committed = "".join(e["text"] for e in events if e["type"] == "delta")
    assert committed and done["text"].startswith(committed.strip())  # finish may commit a last segment
    assert len(done["segments"]) == 2 and done["segments"][1]["start"] > ends[0]["end_s"]
