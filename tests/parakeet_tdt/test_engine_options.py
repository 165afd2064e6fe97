"""Session/request option defaults and the offline mode choice (docs/families/parakeet_tdt.md §6.1), without a model."""

from __future__ import annotations

import pytest

from inference.errors import UsageError
from inference.families.parakeet_tdt.options import DecodeMode, RequestSettings, SessionSettings, choose_mode

SECOND = 16000


def test_defaults_come_from_the_model_spec() -> None:
    session = SessionSettings.from_options({})
    assert (
        session.offline_mode,
        session.center_sec,
        session.left_context_sec,
        session.right_context_sec,
    ) == (
        "full_context",
        2.0,
        10.0,
        2.0,
    )
    assert (session.threshold_sec, session.weight_type, session.conv_weight_type) == (
        30.0,
        "native",
        "native",
    )
    request = RequestSettings.from_options({})
    assert (request.max_tokens, request.keep_language_tags, request.audio_chunk_mode) == (0, False, "auto")
    assert request.vad_chunk_sec is None


def test_aliases_and_prefixed_names_are_accepted() -> None:
    session = SessionSettings.from_options(
        {"parakeet_tdt.center_sec": 3, "full_context_max_duration_sec": "12.5"}
    )
    assert (session.center_sec, session.threshold_sec) == (3.0, 12.5)
    # matmul_weight_type sets the encoder and decoder matrices; unset, it inherits weight_type.
    assert SessionSettings.from_options({"matmul_weight_type": "q8_0"}).weight_type == "q8_0"
    assert SessionSettings.from_options({"weight_type": "f16"}).weight_type == "f16"
    assert (
        SessionSettings.from_options({"weight_type": "f16", "matmul_weight_type": "q8_0"}).weight_type
        == "q8_0"
    )
    with pytest.raises(UsageError, match="left_context_sec"):
        SessionSettings.from_options({"left_context_sec": -1})
    with pytest.raises(UsageError, match="audio_chunk_mode"):
        RequestSettings.from_options({"audio_chunk_mode": "quiet_energy"})


@pytest.mark.parametrize(
    ("offline_mode", "chunk_mode", "seconds", "expected"),
    [
        ("full_context", "auto", 100, DecodeMode.FULL_CONTEXT),
        ("long_form", "auto", 1, DecodeMode.LONG_FORM),
        ("auto", "auto", 30, DecodeMode.FULL_CONTEXT),  # not above the threshold
        ("auto", "auto", 30.0001, DecodeMode.LONG_FORM),
        ("full_context", "fixed", 1, DecodeMode.LONG_FORM),
        ("long_form", "none", 100, DecodeMode.FULL_CONTEXT),
        ("auto", "vad", 100, DecodeMode.VAD),
    ],
)
def test_choose_mode(offline_mode: str, chunk_mode: str, seconds: float, expected: DecodeMode) -> None:
    session = SessionSettings.from_options({"offline_mode": offline_mode})
    request = RequestSettings.from_options({"audio_chunk_mode": chunk_mode})
    assert choose_mode(round(seconds * SECOND), session, request) is expected


def test_matmul_weight_type_sets_the_matrices_and_inherits_weight_type() -> None:
    from pathlib import Path

    from inference.audio.io import load_audio_file
    from inference.engine import load_engine

    root = Path(__file__).resolve().parents[1] / "fixtures" / "parakeet_tdt"
    audio = load_audio_file(root / "audio" / "short.wav")

    def matrix_type_and_ids(options: dict) -> tuple[str, list[int]]:
        with load_engine(root / "models" / "tiny_a", session_options=options, threads=2) as engine:  # type: ignore[attr-defined]
            kind = engine.encoder.weights["L0.q_proj.weight"].type.name.lower()
            return kind, list(engine.transcribe(audio).token_ids)

    q8 = matrix_type_and_ids({"weight_type": "q8_0"})
    assert q8[0] == "q8_0"
    assert matrix_type_and_ids({"matmul_weight_type": "q8_0"}) == q8
    assert matrix_type_and_ids({"weight_type": "f16", "matmul_weight_type": "q8_0"}) == q8
    assert matrix_type_and_ids({"weight_type": "f16"})[0] == "f16"
