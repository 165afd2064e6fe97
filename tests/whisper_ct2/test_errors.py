"""Bad models and bad requests fail with a message naming the problem and the fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference.engine import load_engine
from inference.errors import BackendError, ModelError, NotImplementedFamilyError, UsageError
from inference.registry import FamilyRegistry
from tests.whisper_ct2.whisper_fixtures import MODEL80, clip


def copy_model(tmp_path: Path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(MODEL80, target)
    return target


def english_only(tmp_path: Path) -> Path:
    """The fixture without the empty text token, which CTranslate2 reads as an English-only vocabulary."""
    folder = copy_model(tmp_path)
    vocabulary = json.loads((folder / "vocabulary.json").read_text(encoding="utf-8"))
    vocabulary[vocabulary.index("")] = "<unused50256>"
    (folder / "vocabulary.json").write_text(json.dumps(vocabulary), encoding="utf-8")
    return folder


def test_a_ctranslate2_whisper_folder_is_detected() -> None:
    assert FamilyRegistry().detect_family(MODEL80) == "whisper_ct2"
    assert FamilyRegistry().detect_family(MODEL80 / "model.bin") == "whisper_ct2"


def test_a_transformers_whisper_checkpoint_is_refused_with_the_conversion(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "whisper"}), encoding="utf-8")
    with pytest.raises(ModelError, match="Transformers Whisper") as caught:
        FamilyRegistry().detect_family(tmp_path)
    assert "ct2-transformers-converter" in str(caught.value.fix)
    with pytest.raises(ModelError, match="not a CTranslate2 one"):
        load_engine(tmp_path, family="whisper_ct2", backend="cpu")


@pytest.mark.parametrize("missing", ["model.bin", "tokenizer.json", "config.json"])
def test_a_missing_file_is_named(tmp_path: Path, missing: str) -> None:
    folder = copy_model(tmp_path)
    (folder / missing).unlink()
    with pytest.raises(ModelError, match=missing.replace(".", r"\.")):
        load_engine(folder, family="whisper_ct2", backend="cpu")


def test_a_missing_vocabulary_is_named(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)
    (folder / "vocabulary.json").unlink()
    with pytest.raises(ModelError, match="vocabulary"):
        load_engine(folder, backend="cpu")


def test_a_corrupt_model_bin_is_a_model_error(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)
    (folder / "model.bin").write_bytes(b"not a model")
    with pytest.raises(ModelError, match="CTranslate2 cannot load"):
        load_engine(folder, backend="cpu")


def test_mel_bins_that_disagree_with_the_model_are_refused(tmp_path: Path) -> None:
    folder = copy_model(tmp_path)
    config = json.loads((folder / "preprocessor_config.json").read_text(encoding="utf-8"))
    config["feature_size"] = 128
    (folder / "preprocessor_config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ModelError, match="80 mel bins"):
        load_engine(folder, backend="cpu")


def test_backends_ctranslate2_lacks_are_refused() -> None:
    with pytest.raises(BackendError, match="no vulkan backend"):
        load_engine(MODEL80, backend="vulkan")


def test_an_unsupported_compute_type_names_the_supported_ones() -> None:
    import ctranslate2

    if "float16" in ctranslate2.get_supported_compute_types("cpu"):
        pytest.skip("this CPU runs float16")
    with pytest.raises(BackendError, match="compute_type=float16") as caught:
        load_engine(MODEL80, backend="cpu", session_options={"compute_type": "float16"})
    assert "float32" in str(caught.value.fix)


def test_an_int8_model_loads_and_decodes() -> None:
    with load_engine(MODEL80, backend="cpu", session_options={"compute_type": "int8"}) as engine:  # type: ignore[attr-defined]
        assert engine.transcribe(clip("short"), language="en", max_new_tokens=5).token_ids


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"language": "xx"}, "does not know the language 'xx'"),
        ({"task": "summarise"}, "task"),
        ({"beam_size": 0}, "beam_size"),
        ({"temperature": 1.0}, "unknown request option"),
    ],
)
def test_bad_requests_are_usage_errors(engine: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        engine.transcribe(clip("short"), **options)


def test_bad_audio_is_refused(engine: Any) -> None:
    with pytest.raises(UsageError, match="mono"):
        engine.transcribe(np.zeros((2, 1600), np.float32))
    with pytest.raises(UsageError, match="NaN"):
        engine.transcribe(np.full(1600, np.nan, np.float32))


def test_whisper_has_no_native_stream(engine: Any) -> None:
    assert not engine.capabilities.streaming
    with pytest.raises(NotImplementedFamilyError, match="segmented"):
        engine.open_stream()


def test_an_english_only_model_neither_translates_nor_takes_other_languages(tmp_path: Path) -> None:
    with load_engine(english_only(tmp_path), backend="cpu") as engine:  # type: ignore[attr-defined]
        assert not engine.capabilities.language_detection
        with pytest.raises(UsageError, match="cannot translate"):
            engine.transcribe(clip("short"), task="translate")
        with pytest.raises(UsageError, match="English-only"):
            engine.transcribe(clip("short"), language="de")
        transcript = engine.transcribe(clip("short"), max_new_tokens=5)
        assert transcript.language == "en" and transcript.token_ids


def test_cancel_and_progress_between_windows(engine: Any) -> None:
    from inference.contract import CancelToken
    from inference.errors import Cancelled

    seen: list[float] = []
    token = CancelToken()

    def progress(event: Any) -> None:
        seen.append(event.done)
        if event.done >= 30.0:
            token.cancel()

    with pytest.raises(Cancelled):
        engine.transcribe(clip("long40"), language="en", max_new_tokens=3, progress=progress, cancel=token)
    assert seen == [0.0, 30.0]
