"""A family added as nothing but a folder (``toy_family/``, found through ``CAPTIONEER_FAMILY_PATH``) is detected,
loaded in-process and in the worker, listed, installed (its own conversion runs), imported and streamed.

Its engine decodes tone-alphabet audio (one tone per letter, silence between words) with the codebook in
``toy_family/model``; the audio here is synthesised from that codebook, so the text comes from the signal."""

from __future__ import annotations

import io
import json
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from inference.cli import main
from inference.client import WorkerClient
from inference.contract import SAMPLE_RATE
from inference.engine import load_engine
from inference.errors import ModelError
from inference.models.catalog import INSTALL_MARKER
from inference.registry import FamilyRegistry
from tests.models.hub_server import HubServer, HubState

TOY = Path(__file__).resolve().parent / "toy_family"
MODEL = TOY / "model"
REPO = "toy-org/toy-tones"
FRAME_S = 0.1
SPOKEN = "hello tones world"


def tone_audio(text: str) -> np.ndarray:
    """One frame per character: the letter's tone, or silence for a space; silence around it all."""
    tones = json.loads((MODEL / "tones.json").read_text(encoding="utf-8"))
    frame = int(FRAME_S * SAMPLE_RATE)
    t = np.arange(frame) / SAMPLE_RATE
    pieces = [np.zeros(frame * 2, dtype=np.float32)]
    for char in text:
        level = 0.0 if char == " " else 0.3
        pieces.append((level * np.sin(2 * np.pi * tones.get(char, 0.0) * t)).astype(np.float32))
    pieces.append(np.zeros(frame * 2, dtype=np.float32))
    return np.concatenate(pieces)


def write_wav(path: Path, audio: np.ndarray) -> Path:
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(SAMPLE_RATE)
        handle.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    return path


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAPTIONEER_HOME", str(tmp_path / "home"))
    for name in ("CAPTIONEER_MODELS_DIR", "CAPTIONEER_MODEL_SPECS", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    monkeypatch.setenv("CAPTIONEER_FAMILY_PATH", str(TOY))
    return tmp_path / "home"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    state = HubState()
    for name in (
        "config.json",
        "codebook.tsv",
    ):  # the published package: no tones.json, the install builds it
        state.add(REPO, name, (MODEL / name).read_bytes())
    with HubServer(state) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server


def test_without_the_family_path_the_folder_is_no_model() -> None:
    with pytest.raises(ModelError, match="model_type 'toy_tones', which no Captioneer family handles"):
        FamilyRegistry.from_environment({}).detect_family(MODEL)


def test_the_folder_is_detected_and_its_engine_decodes_the_tones() -> None:
    families = FamilyRegistry.from_environment({"CAPTIONEER_FAMILY_PATH": str(TOY)})
    assert families.names()[-1] == "toy_tones"
    assert families.detect_family(MODEL) == "toy_tones"
    engine = load_engine(MODEL, families=families)
    assert engine.transcribe(tone_audio(SPOKEN)).text == SPOKEN
    assert engine.transcribe(tone_audio("abc xyz")).text == "abc xyz"


def test_the_family_and_its_package_are_listed(home: Path) -> None:
    code, text = run("models", "list")
    assert code == 0
    row = next(line for line in text.splitlines() if line.startswith("toy_tones_az"))
    assert row.split()[:2] == ["toy_tones_az", "toy_tones"] and row.endswith("Toy tones a-z")


def test_install_runs_the_familys_conversion(home: Path, hub: HubServer) -> None:
    code, text = run("models", "install", "toy_tones_az")
    assert code == 0, text
    installed = home / "models" / "toy_tones_az"
    built = json.loads((installed / "tones.json").read_text(encoding="utf-8"))
    assert built == json.loads((MODEL / "tones.json").read_text(encoding="utf-8"))
    marker = json.loads((installed / INSTALL_MARKER).read_text(encoding="utf-8"))
    assert marker["family"] == "toy_tones"


def test_the_worker_loads_transcribes_and_streams_it(home: Path, hub: HubServer, tmp_path: Path) -> None:
    assert run("models", "install", "toy_tones_az")[0] == 0
    audio = write_wav(tmp_path / "spoken.wav", tone_audio(SPOKEN))
    code, text = run("transcribe", "--model", "toy_tones_az", str(audio))
    assert (code, text.strip()) == (0, SPOKEN)
    code, text = run(
        "transcribe", "--model", "toy_tones_az", "--mode", "streaming", "--format", "jsonl", str(audio)
    )
    events = [json.loads(line) for line in text.splitlines()]
    deltas = [e["text"] for e in events if e["type"] == "delta"]
    assert code == 0 and len(deltas) > 1 and "".join(deltas) == SPOKEN
    assert events[-1]["type"] == "done" and events[-1]["text"] == SPOKEN


def test_the_worker_detects_the_family_itself(home: Path) -> None:
    """No family given: the spawned worker finds it through the CAPTIONEER_FAMILY_PATH it inherited."""
    with WorkerClient() as client:
        engine = client.load(MODEL)
        assert engine.family == "toy_tones" and engine.capabilities.streaming
        stream = engine.open_stream()
        audio = tone_audio(SPOKEN)
        for start in range(0, len(audio), 1000):  # pieces that do not line up with the frames
            stream.push(audio[start : start + 1000])
        assert stream.finish().text == SPOKEN


def test_a_folder_of_the_family_is_imported(home: Path) -> None:
    code, text = run("models", "import", str(MODEL), "--id", "my_tones")
    assert code == 0, text
    marker = json.loads((home / "models" / "my_tones" / INSTALL_MARKER).read_text(encoding="utf-8"))
    assert marker["family"] == "toy_tones"
    code, text = run("models", "list")
    assert any(line.split()[:2] == ["my_tones", "toy_tones"] for line in text.splitlines())
