"""Silero VAD on onnxruntime against the silero-vad package's own wrapper, plus the hysteresis rules."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from inference.audio.vad import (
    FRAME_SAMPLES,
    SileroVad,
    SpeechSegment,
    default_vad_model_path,
    segments_from_probabilities,
    speech_segments,
)
from inference.errors import ModelError, UsageError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "audio" / "silero_vad_expected.npz"
PROB_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def reference() -> dict:
    data = np.load(FIXTURE)
    return {
        "audio": data["audio_int16"].astype(np.float32) / 32768.0,
        "probs": data["probabilities"],
        "params": data["params"].tolist(),
        "segments": json.loads(str(data["segments_json"])),
    }


@pytest.fixture(scope="module")
def vad() -> SileroVad:
    return SileroVad()


def as_pairs(segments: list[SpeechSegment]) -> list[list[int]]:
    return [[s.start, s.end] for s in segments]


# --- model output ----------------------------------------------------------------------------------


def test_bundled_model_is_the_documented_file():
    import hashlib

    digest = hashlib.sha256(default_vad_model_path().read_bytes()).hexdigest()
    provenance = (default_vad_model_path().parent / "PROVENANCE.md").read_text()
    assert digest in provenance
    assert (default_vad_model_path().parent / "LICENSE").read_text().startswith("MIT License")


def test_probabilities_match_the_reference_wrapper(vad, reference):
    probs = vad.frame_probabilities(reference["audio"])
    assert probs.shape == reference["probs"].shape
    assert np.max(np.abs(probs - reference["probs"])) <= PROB_TOLERANCE
    # The clip really contains both speech and silence, so the comparison means something.
    assert probs.max() > 0.9 and probs.min() < 0.05


def test_streaming_push_matches_offline_whatever_the_packet_sizes(vad, reference):
    audio = reference["audio"]
    rng = np.random.default_rng(7)
    vad.reset()
    pieces, position = [], 0
    while position < audio.size:
        size = int(rng.integers(1, 1500))
        pieces.append(vad.push(audio[position : position + size]))
        position += size
    streamed = np.concatenate(pieces)
    complete = audio.size // FRAME_SAMPLES
    assert streamed.size == complete
    np.testing.assert_allclose(streamed, reference["probs"][:complete], atol=PROB_TOLERANCE)


def test_process_continues_state_and_reset_restarts_it(vad, reference):
    frames = reference["audio"][: 20 * FRAME_SAMPLES].reshape(20, FRAME_SAMPLES)
    vad.reset()
    first = [vad.process(frame) for frame in frames]
    vad.reset()
    second = [vad.process(frame) for frame in frames]
    assert first == second
    np.testing.assert_allclose(first, reference["probs"][:20], atol=PROB_TOLERANCE)
    # Without a reset the same frames give different values: the state and context carry over.
    third = [vad.process(frame) for frame in frames]
    assert third != first


def test_wrong_frame_size_is_rejected(vad):
    with pytest.raises(ValueError, match="512"):
        vad.process(np.zeros(480, dtype=np.float32))


def test_session_uses_one_thread(vad):
    assert vad._session.get_session_options().intra_op_num_threads == 1


def test_empty_and_silent_audio(vad):
    assert vad.frame_probabilities(np.zeros(0, dtype=np.float32)).size == 0
    assert speech_segments(np.zeros(0, dtype=np.float32), vad) == []
    silence = np.zeros(16000 * 2, dtype=np.float32)
    assert vad.frame_probabilities(silence).max() < 0.1
    assert speech_segments(silence, vad) == []


def test_missing_or_corrupt_model_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match="not found") as info:
        SileroVad(tmp_path / "missing.onnx")
    assert info.value.fix
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"not an onnx model")
    with pytest.raises(ModelError, match="cannot load"):
        SileroVad(corrupt)


# --- segments ----------------------------------------------------------------------------------------


def test_segments_match_the_reference_for_each_parameter_set(reference):
    for (threshold, min_speech, min_silence, pad), expected in zip(
        reference["params"], reference["segments"], strict=True
    ):
        found = segments_from_probabilities(
            reference["probs"],
            reference["audio"].size,
            threshold=threshold,
            min_speech_ms=min_speech,
            min_silence_ms=min_silence,
            speech_pad_ms=pad,
        )
        assert as_pairs(found) == expected


def test_speech_segments_end_to_end(vad, reference):
    assert as_pairs(speech_segments(reference["audio"], vad)) == reference["segments"][0]


def frames(*runs: tuple[float, int]) -> np.ndarray:
    """Probability runs: (value, number of 512-sample frames)."""
    return np.concatenate([np.full(count, value) for value, count in runs])


def plain(probs: np.ndarray, **kwargs) -> list[list[int]]:
    options = {"threshold": 0.5, "min_speech_ms": 0, "min_silence_ms": 0, "speech_pad_ms": 0} | kwargs
    return as_pairs(segments_from_probabilities(probs, probs.size * FRAME_SAMPLES, **options))


def test_speech_starts_at_threshold_and_ends_below_the_negative_threshold():
    probs = frames((0.1, 3), (0.5, 4), (0.2, 5))
    assert plain(probs) == [[3 * 512, 7 * 512]]


def test_values_between_the_thresholds_keep_speech_going():
    probs = frames((0.1, 2), (0.9, 2), (0.4, 6), (0.1, 3))  # 0.4 >= neg (0.35): still speech
    assert plain(probs) == [[2 * 512, 10 * 512]]
    assert plain(probs, neg_threshold=0.45) == [[2 * 512, 4 * 512]]


def test_short_dips_are_bridged_by_min_silence():
    probs = frames((0.9, 5), (0.0, 3), (0.9, 5), (0.0, 10))
    assert plain(probs, min_silence_ms=100) == [[0, 13 * 512]]  # 3 frames = 96 ms < 100 ms
    assert plain(probs, min_silence_ms=64) == [[0, 5 * 512], [8 * 512, 13 * 512]]


def test_short_bursts_are_dropped_and_trailing_speech_runs_to_the_end():
    probs = frames((0.9, 2), (0.0, 10), (0.9, 20))
    assert plain(probs, min_speech_ms=100) == [[12 * 512, 32 * 512]]  # 2 frames = 64 ms dropped


def test_padding_splits_short_silences_and_clips_at_the_ends():
    probs = frames((0.9, 4), (0.0, 2), (0.9, 4), (0.0, 20), (0.9, 4))
    n = probs.size * 512
    found = as_pairs(
        segments_from_probabilities(
            probs, n, threshold=0.5, min_speech_ms=0, min_silence_ms=0, speech_pad_ms=50
        )
    )
    pad = 800
    # First gap (1024 samples) is shorter than 2 x pad: the silence is split between the two.
    assert found[0] == [0, 4 * 512 + 512]
    assert found[1] == [6 * 512 - 512, 10 * 512 + pad]
    assert found[2] == [30 * 512 - pad, n]


@pytest.mark.parametrize(
    ("threshold", "negative"), [(0.0, None), (1.0, None), (-0.2, None), (0.5, 0.6), (0.5, -0.1)]
)
def test_invalid_thresholds_are_usage_errors(threshold, negative):
    with pytest.raises(UsageError):
        segments_from_probabilities(np.zeros(3), 1536, threshold=threshold, neg_threshold=negative)
