"""A closed engine holds nothing open in its model folder (no descriptor, no memory map), and neither does a
load that failed: on Windows either would keep an installed model from being deleted while the app runs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from inference.contract import CancelToken, JobControl
from inference.engine import load_engine
from inference.errors import CaptioneerError
from tests.confucius4_r2t2.audiocpp_packages import write_audiocpp_package
from tests.lifetimes.open_files import needs_proc, open_under
from tests.parakeet_tdt.gguf_package import write_audiocpp_gguf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PARAKEET = FIXTURES / "parakeet_tdt" / "models" / "tiny_a"
R2T2 = FIXTURES / "confucius4_r2t2" / "checkpoint_hf"
SAMPLES = np.random.default_rng(0).uniform(-0.3, 0.3, 16000).astype(np.float32)

pytestmark = needs_proc


def _parakeet_folder(tmp: Path) -> Path:
    return Path(shutil.copytree(PARAKEET, tmp / "parakeet"))


def _parakeet_package(tmp: Path) -> Path:
    (tmp / "pk").mkdir()
    write_audiocpp_gguf(PARAKEET, tmp / "pk" / "parakeet.gguf")
    return tmp / "pk" / "parakeet.gguf"


def _r2t2_folder(tmp: Path) -> Path:
    return Path(shutil.copytree(R2T2, tmp / "r2t2", ignore=shutil.ignore_patterns(".captioneer")))


def _r2t2_package(tmp: Path) -> Path:
    (tmp / "rp").mkdir()
    write_audiocpp_package(tmp / "rp" / "r2t2-f32.gguf", R2T2)
    return tmp / "rp" / "r2t2-f32.gguf"


MODELS: dict[str, Callable[[Path], Path]] = {
    "parakeet-safetensors": _parakeet_folder,
    "parakeet-gguf": _parakeet_package,
    "r2t2-safetensors": _r2t2_folder,
    "r2t2-gguf": _r2t2_package,
}


def _folder(model: Path) -> Path:
    return model if model.is_dir() else model.parent


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_closed_engine_holds_nothing_in_the_model_folder(tmp_path: Path, kind: str) -> None:
    model = MODELS[kind](tmp_path)
    engine = load_engine(model, backend="cpu", threads=1)
    try:
        transcript = engine.transcribe(SAMPLES)
        assert transcript.timing is not None
        if kind.startswith("r2t2"):
            # Proof that the check sees maps: the thinker runs from a GGUF mapped under the model folder.
            assert any(".captioneer" in entry for entry in open_under(_folder(model))), open_under(
                _folder(model)
            )
    finally:
        engine.close()
    assert open_under(_folder(model)) == []  # the app may keep the closed engine object: close() must suffice
    shutil.rmtree(_folder(model))  # what the store does on `models remove`


def _load_error(model: Path, control: JobControl | None = None) -> CaptioneerError:
    """Load ``model`` expecting a CaptioneerError and return it. The caller keeps it (an app showing the error
    does), and with it the traceback's frames and their locals: the files must be closed even so."""
    try:
        engine = load_engine(model, backend="cpu", threads=1, control=control)
    except CaptioneerError as exc:
        return exc
    engine.close()
    raise AssertionError(f"{model} loaded")


def test_parakeet_load_failing_on_a_bad_tensor_closes_its_map(tmp_path: Path) -> None:
    model = _parakeet_folder(tmp_path)
    tensors = load_file(str(model / "model.safetensors"))
    tensors["joint.head.bias"] = np.zeros(3, np.float32)  # mapped, then refused by the shape check
    save_file(tensors, str(model / "model.safetensors"))
    error = _load_error(model)
    assert "joint.head.bias" in str(error)
    assert open_under(model) == []


def test_parakeet_package_without_a_tokenizer_closes_its_map(tmp_path: Path) -> None:
    source = _parakeet_folder(tmp_path)
    (source / "tokenizer.json").unlink()
    (tmp_path / "pk").mkdir()
    package = tmp_path / "pk" / "parakeet.gguf"
    write_audiocpp_gguf(source, package)
    error = _load_error(package)
    assert "no embedded tokenizer.json" in str(error)
    assert open_under(package.parent) == []


@pytest.mark.parametrize("kind", ["r2t2-safetensors", "r2t2-gguf"])
def test_r2t2_load_cancelled_while_converting_closes_everything(tmp_path: Path, kind: str) -> None:
    model = MODELS[kind](tmp_path)
    cancel = CancelToken()
    calls: list[float] = []

    def progress(update: object) -> None:  # cancel half way through writing the thinker GGUF
        calls.append(0)
        if len(calls) == 3:
            cancel.cancel()

    error = _load_error(model, JobControl(progress, cancel, stage="load"))
    assert "cancelled" in str(error)
    assert len(calls) >= 3  # the conversion had started: the source was mapped and the writer open
    assert open_under(_folder(model)) == []
    assert not [p for p in _folder(model).rglob("*.partial")]


def test_r2t2_broken_config_closes_everything(tmp_path: Path) -> None:
    model = _r2t2_folder(tmp_path)
    config = json.loads((model / "config.json").read_text())
    config["thinker_config" if "thinker_config" in config else "text_config"]["head_dim"] = 7
    (model / "config.json").write_text(json.dumps(config))
    error = _load_error(model)
    assert "shape" in str(error)
    assert open_under(model) == []
