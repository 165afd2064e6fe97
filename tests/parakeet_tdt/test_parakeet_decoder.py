"""Greedy TDT decoding against transformers' ParakeetForTDT.generate, fed the stored encoder outputs."""

from __future__ import annotations

import numpy as np
import pytest
from parakeet_fixtures import CLIPS, MODELS, expected, expected_arrays, model_dir

from inference.families.parakeet_tdt.checkpoint import open_parakeet_checkpoint
from inference.families.parakeet_tdt.decoder import (
    DecoderWeights,
    JointStep,
    NumpyPredictionStep,
    TdtDecoder,
)


def _decoder(model: str) -> TdtDecoder:
    with open_parakeet_checkpoint(model_dir(model)) as ckpt:
        return TdtDecoder(DecoderWeights.from_checkpoint(ckpt.tensors, ckpt.config), ckpt.config)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("clip", CLIPS)
def test_full_context_decoding_matches_reference(model: str, clip: str) -> None:
    ref = expected(model)["clips"][clip]
    decoder = _decoder(model)
    enc = expected_arrays(model)[f"{clip}/encoder_output"][: ref["valid_frames"]]
    trace: list[JointStep] = []
    tokens, _state = decoder.decode(decoder.project_encoder(enc), trace=trace)
    steps = ref["steps"]
    assert [s.token_id for s in trace] == steps["token"]  # every joint step, blanks included
    assert [s.duration_index for s in trace] == steps["duration"]
    assert [s.frame for s in trace] == steps["frame"]
    assert [t.token_id for t in tokens] == ref["token_ids"]
    assert [t.frame for t in tokens] == ref["token_frames"]
    assert [t.duration for t in tokens] == ref["token_durations"]
    # HF's own output: sequence = [start blank, step tokens...]; blank with duration 0 reported as 1.
    assert [s.token_id for s in trace] == ref["hf_sequences"][1:]
    hf_durations = [
        1 if (s.token_id == decoder.blank and s.duration_index == 0) else s.duration_index for s in trace
    ]
    assert hf_durations == ref["hf_durations"][1:]


def test_long_form_windows_carry_state() -> None:
    model = "tiny_b"  # the fixture that stores the long-form encoder frames
    ref = expected(model)["long_form"]
    frames = expected_arrays(model)["long/long_form/encoder_kept_frames"]
    decoder = _decoder(model)
    state, tokens, start = None, [], 0
    for window in ref["windows"]:
        count = window["hi"] - window["lo"]
        proj = decoder.project_encoder(frames[start : start + count])
        start += count
        got, state = decoder.decode(proj, state, frame_offset=window["offset"])
        tokens.extend(got)
    assert start == frames.shape[0]
    assert [t.token_id for t in tokens] == ref["token_ids"]
    assert [t.frame for t in tokens] == ref["token_frames"]
    assert [t.duration for t in tokens] == ref["token_durations"]
    # A fresh state per window would lose the predictor context and decode differently.
    fresh = []
    start = 0
    for window in ref["windows"]:
        count = window["hi"] - window["lo"]
        got, _ = decoder.decode(
            decoder.project_encoder(frames[start : start + count]), frame_offset=window["offset"]
        )
        start += count
        fresh.extend(t.token_id for t in got)
    assert fresh != ref["token_ids"]


def _forced_decoder(token: int, duration_index: int) -> TdtDecoder:
    """A decoder whose joint always prefers ``token`` with ``duration_index`` (to test the loop's guards)."""
    decoder = _decoder("tiny_a")
    assert isinstance(decoder.step, NumpyPredictionStep)
    w = decoder.step.w
    w.head_w = np.zeros_like(w.head_w)
    w.head_b = np.zeros_like(w.head_b)
    w.head_b[token] = 5.0
    w.head_b[decoder.vocab + duration_index] = 5.0
    return decoder


def test_max_symbols_guard_advances_the_frame() -> None:
    decoder = _forced_decoder(token=10, duration_index=0)  # a token of duration 0 on every step
    tokens, _ = decoder.decode(np.zeros((3, decoder.hidden), np.float32))
    per_frame = [sum(t.frame == f for t in tokens) for f in range(3)]
    assert per_frame == [decoder.config.max_symbols_per_step] * 3


def test_token_budget_and_blank_duration_zero() -> None:
    decoder = _forced_decoder(token=10, duration_index=1)
    tokens, state = decoder.decode(np.zeros((50, decoder.hidden), np.float32), max_tokens=7)
    assert len(tokens) == 7 and state.emitted == 7
    blank = _forced_decoder(token=decoder.blank, duration_index=0)  # blank + 0 still advances one frame
    trace: list[JointStep] = []
    tokens, _ = blank.decode(np.zeros((4, blank.hidden), np.float32), trace=trace)
    assert tokens == [] and [s.frame for s in trace] == [0, 1, 2, 3]
