"""The TDT predictor step and joint on ggml (decoder_ggml.py): the same function as the numpy reference step.

With f32 storage the graphs must reproduce transformers' greedy decode exactly (every joint step of every
fixture clip); with a reduced type they must stay within that type's rounding of the numpy step; and an engine
picks the ggml step for reduced weight types only.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest
from decoder_parts import decoder_config, random_decoder_weights
from parakeet_fixtures import CLIPS, MODELS, expected, expected_arrays, model_dir

from inference.engine import load_engine
from inference.families.parakeet_tdt.checkpoint import open_parakeet_checkpoint
from inference.families.parakeet_tdt.config import ParakeetConfig
from inference.families.parakeet_tdt.decoder import (
    DecoderState,
    DecoderWeights,
    JointStep,
    NumpyPredictionStep,
    TdtDecoder,
)
from inference.families.parakeet_tdt.decoder_ggml import (
    DECODER_STORAGE,
    GgmlPredictionStep,
    make_decoder,
)
from inference.native import Backend, open_backend


@pytest.fixture(scope="module")
def backend():  # type: ignore[no-untyped-def]
    with open_backend("cpu", threads=2) as opened:
        yield opened


def _weights(model: str) -> tuple[DecoderWeights, ParakeetConfig]:
    with open_parakeet_checkpoint(model_dir(model)) as ckpt:
        return DecoderWeights.from_checkpoint(ckpt.tensors, ckpt.config), ckpt.config


@pytest.mark.parametrize("model", MODELS)
def test_f32_graphs_decode_every_fixture_clip_as_the_reference(backend, model: str) -> None:  # type: ignore[no-untyped-def]
    weights, config = _weights(model)
    with GgmlPredictionStep(backend, weights, "f32") as step:
        assert set(step.storage_types()) == {"f32"}
        decoder = TdtDecoder(weights, config, step)
        for clip in CLIPS:
            ref = expected(model)["clips"][clip]
            enc = expected_arrays(model)[f"{clip}/encoder_output"][: ref["valid_frames"]]
            trace: list[JointStep] = []
            tokens, _ = decoder.decode(decoder.project_encoder(enc), trace=trace)
            assert [s.token_id for s in trace] == ref["steps"]["token"], clip
            assert [s.duration_index for s in trace] == ref["steps"]["duration"], clip
            assert [(t.token_id, t.frame, t.duration) for t in tokens] == list(
                zip(ref["token_ids"], ref["token_frames"], ref["token_durations"], strict=True)
            ), clip


def _random_weights(hidden: int, vocab: int, seed: int = 3) -> DecoderWeights:
    rng = np.random.default_rng(seed)
    return random_decoder_weights(rng, vocab, hidden, 2 * hidden, scale=0.1, embedding_scale=1.0)


# Largest |difference| from the numpy step over 20 tokens (hidden 128, weights ~0.1, logits of order 1; a wrong
# kernel or gate order is off by order 1). Measured (Zen 4): f32 4.3e-7, f16 1.1e-3 (ggml rounds the activations to
# f16 too), bf16 9.9e-3, q8_0 2.5e-2; bounds about 2.5x.
STEP_BOUNDS = {"f32": 1e-6, "f16": 3e-3, "bf16": 2.5e-2, "q8_0": 6e-2}


@pytest.mark.parametrize("storage", sorted(STEP_BOUNDS))
def test_reduced_types_stay_within_their_rounding_of_the_numpy_step(backend, storage: str) -> None:  # type: ignore[no-untyped-def]
    weights = _random_weights(hidden=128, vocab=300)
    reference = NumpyPredictionStep(weights)
    shape = (2, 128)
    frames = np.random.default_rng(4).standard_normal((20, 128)).astype(np.float32)
    with GgmlPredictionStep(backend, weights, storage) as step:
        assert storage in step.storage_types()  # 128-wide rows fit every type's blocks
        ours = DecoderState(np.zeros(shape, np.float32), np.zeros(shape, np.float32))
        theirs = ours.copy()
        worst = 0.0
        for n, token in enumerate([0, 7, 299, 42, 5] * 4):
            step.advance(ours, token)
            reference.advance(theirs, token)
            assert ours.pred is not None and theirs.pred is not None
            logits = step.joint(frames[n], ours.pred)
            expected_logits = reference.joint(frames[n], theirs.pred)
            assert logits.shape == (305,)
            worst = max(
                worst,
                float(np.abs(ours.h - theirs.h).max()),
                float(np.abs(ours.c - theirs.c).max()),
                float(np.abs(logits - expected_logits).max()),
            )
            # Each side continues from its own state: the rounding must not compound into divergence.
        assert worst < STEP_BOUNDS[storage], f"{storage}: {worst}"


def test_a_copied_state_is_independent_of_the_original(backend) -> None:  # type: ignore[no-untyped-def]
    weights = _random_weights(hidden=64, vocab=50)
    with GgmlPredictionStep(backend, weights, "q8_0") as step:
        decoder = TdtDecoder(weights, _config(64, 50), step)
        state = decoder.new_state()
        step.advance(state, 3)
        before = (state.h.copy(), state.c.copy(), state.pred.copy() if state.pred is not None else None)
        look_ahead = state.copy()
        step.advance(look_ahead, 9)
        assert np.array_equal(state.h, before[0]) and np.array_equal(state.c, before[1])
        assert before[2] is not None and np.array_equal(state.pred, before[2])
        assert not np.array_equal(look_ahead.h, state.h)


def _config(hidden: int, vocab: int) -> ParakeetConfig:
    return decoder_config(vocab, hidden, 2 * hidden)


def test_the_step_follows_the_session_weight_type(backend) -> None:  # type: ignore[no-untyped-def]
    assert DECODER_STORAGE == {
        "native": "f32",  # the checkpoint's values, as the numpy step has them
        "f32": "f32",
        "f16": "f16",
        "bf16": "bf16",
        "q8_0": "q8_0",
        "q6_k": "q8_0",  # never below 8 bits
        "q4_k": "q8_0",
        "int8": "q8_0",  # ONNX Runtime's int8 GEMM would repack the whole weight per one-row product
    }
    weights = _random_weights(hidden=32, vocab=20)
    decoder = make_decoder(weights, _config(32, 20), backend, "int8")
    assert isinstance(decoder.step, GgmlPredictionStep)
    assert "q8_0" in decoder.step.storage_types()
    decoder.close()
    decoder.close()  # idempotent
    assert decoder.step.storage_types() == {}
    assert backend.handle is not None  # the engine's backend is the engine's to close


def test_beside_a_gpu_encoder_the_step_gets_a_cpu_backend_of_its_own(backend) -> None:  # type: ignore[no-untyped-def]
    gpu = cast(Backend, SimpleNamespace(is_cpu=False, threads=2, api=backend.api))  # what make_decoder reads
    weights = _random_weights(hidden=32, vocab=20)
    decoder = make_decoder(weights, _config(32, 20), gpu, "q8_0")
    step = decoder.step
    assert isinstance(step, GgmlPredictionStep)
    own = step._owned_backend
    assert own is not None and own.is_cpu and own.threads == 2
    reference = NumpyPredictionStep(weights)
    ours, theirs = decoder.new_state(), decoder.new_state()
    step.advance(ours, 3)
    reference.advance(theirs, 3)
    assert ours.pred is not None and theirs.pred is not None
    assert np.abs(ours.pred - theirs.pred).max() < STEP_BOUNDS["q8_0"]
    decoder.close()
    assert own.handle is None  # closed with the step


@pytest.mark.parametrize(("weight_type", "storage"), [("int8", "q8_0"), ("f16", "f16"), ("native", "f32")])
def test_an_engine_decodes_with_the_step_of_its_weight_type(weight_type: str, storage: str) -> None:
    options = {"weight_type": weight_type}
    if weight_type == "int8":
        options["conv_weight_type"] = "int8"
    with load_engine(model_dir("tiny_a"), session_options=options, backend="cpu") as engine:
        step = engine.decoder.step
        assert isinstance(step, GgmlPredictionStep)
        assert storage in step.storage_types()  # tiny_a's 32-wide rows fit q8_0's blocks
        audio = np.zeros(16000, np.float32)
        audio[4000:12000] = 0.1 * np.sin(np.arange(8000) * 0.05)
        result = engine.transcribe(audio)
        assert isinstance(result.text, str)
    assert step.storage_types() == {}  # closed with the engine


def test_every_weight_type_the_spec_accepts_has_a_decoder_storage() -> None:
    spec = json.loads((Path(__file__).resolve().parents[2] / "model_specs" / "parakeet_tdt.json").read_text())
    options = spec["session_options"]
    assert set(options["weight_type"]["choices"]) == set(DECODER_STORAGE)
    assert set(options["matmul_weight_type"]["choices"]) == set(DECODER_STORAGE)


@pytest.mark.parametrize("storage", ["f32", "q8_0"])
def test_the_step_gives_the_same_bits_on_any_thread_count(storage: str) -> None:
    """Each output of a one-row product is one thread's dot product, so the thread count cannot change a token."""
    weights = _random_weights(hidden=64, vocab=100)
    frame = np.random.default_rng(5).standard_normal(64).astype(np.float32)
    results = []
    for threads in (1, 2, 3):
        with open_backend("cpu", threads=threads) as cpu, GgmlPredictionStep(cpu, weights, storage) as step:
            state = DecoderState(np.zeros((2, 64), np.float32), np.zeros((2, 64), np.float32))
            for token in (0, 5, 99):
                step.advance(state, token)
            assert state.pred is not None
            results.append((state.h.tobytes(), state.c.tobytes(), step.joint(frame, state.pred).tobytes()))
    assert results[0] == results[1] == results[2]
