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
    stream_variant,
)

from inference.cli import STREAM_PUSH_SECONDS, main
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
    code, out = run_cli(
        "transcribe",
        str(wav),
        "--model",
        str(model),
        "--backend",
        "cpu",
        "--threads",
        "1",
        "--format",
        "json",
        *flags,
    )
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


def stream_cli_events(model: Path, audio_arg: str, stdin: bytes = b"", *extra: str) -> list[dict]:
    out = io.StringIO()
    argv = [
        "transcribe",
        audio_arg,
        "--model",
        str(model),
        "--backend",
        "cpu",
        "--mode",
        "streaming",
        "--format",
        "jsonl",
        "--language",
        "English",
        *extra,
    ]
    assert main(argv, out=out, stdin=io.BytesIO(stdin)) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_streaming_from_stdin_pcm_equals_streaming_from_the_file(tmp_path: Path) -> None:
    model = stream_variant(FIXTURE_DIR / "checkpoint_hf", tmp_path / "model", 800)
    pcm = np.round(load_audio()["clip_b"] * 32768.0).astype("<i2")
    wav = tmp_path / "clip_b.wav"
    with wave.open(str(wav), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(16000)
        handle.writeframes(pcm.tobytes())
    from_file = stream_cli_events(model, str(wav))
    from_stdin = stream_cli_events(
        model, "-", pcm.tobytes(), "--input-format", "s16le", "--input-rate", "16000"
    )
    strip = [{k: v for k, v in e.items() if k != "timing"} for e in from_file]
    assert [{k: v for k, v in e.items() if k != "timing"} for e in from_stdin] == strip
    deltas = "".join(e["text"] for e in from_file if e["type"] == "delta")
    assert deltas and from_file[-1]["text"]


def test_streaming_jsonl_prints_lsp_deltas_through_the_worker(tmp_path: Path) -> None:
    """R2T2 streams natively (Longest-Stable-Prefix): the CLI's events equal an in-process stream's."""
    from inference.engine import EngineRequest
    from inference.families.confucius4_r2t2.engine import create_engine

    model = stream_variant(FIXTURE_DIR / "checkpoint_hf", tmp_path / "model", 800)
    audio = load_audio()["clip_a"]
    wav = tmp_path / "clip_a.wav"
    with wave.open(str(wav), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(16000)
        handle.writeframes(np.round(audio * 32768.0).astype("<i2").tobytes())
    code, text = run_cli(
        "transcribe",
        str(wav),
        "--model",
        str(model),
        "--backend",
        "cpu",
        "--mode",
        "streaming",
        "--format",
        "jsonl",
        "--language",
        "English",
    )
    assert code == 0
    events = [json.loads(line) for line in text.splitlines()]
    done = events[-1]
    assert done["type"] == "done" and {e["type"] for e in events[:-1]} == {"delta", "snapshot"}

    engine = create_engine(EngineRequest(model, "confucius4_r2t2", {}, "cpu", 1))
    try:
        stream = engine.open_stream(language="English")
        step = int(STREAM_PUSH_SECONDS * 16000)  # pushed as the CLI pushes a file
        expected = [
            e for start in range(0, audio.size, step) for e in stream.push(audio[start : start + step])
        ]
        transcript = stream.finish()
    finally:
        engine.close()
    assert expected, "the fixture should commit text"
    assert [(e["type"], e["text"], e["segment_id"], e["language"]) for e in events[:-1]] == [
        (e.type, e.text, e.segment_id, e.language) for e in expected
    ]
    assert [e["end_s"] for e in events[:-1]] == [round(e.end_s, 4) for e in expected]
    assert done["text"] == transcript.text and done["language"] == "English"
