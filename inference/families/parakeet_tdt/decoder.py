"""TDT prediction network, joint and greedy decoding in numpy (float32).

The loop is docs/families/parakeet_tdt.md §5 (audio.cpp / NeMo), which equals transformers'
``ParakeetForTDT.generate`` on every fixture (docs/reference_parity.md §1.5). ``decode`` keeps its
:class:`DecoderState` between calls, so long-form windows and live streams continue one hypothesis (``frame_offset``
makes token frames absolute); encoder frames are projected once per window, so a step costs one LSTM step (after
tokens) plus one joint matvec.

The predictor step and the joint are a :class:`PredictionStep`: engines run ``decoder_ggml.GgmlPredictionStep`` (on
the CPU; f32, or the session's reduced type); :class:`NumpyPredictionStep` here is the same step in numpy f32.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from inference.families.parakeet_tdt.config import ParakeetConfig


@dataclass(frozen=True)
class TokenStep:
    token_id: int
    frame: int  # absolute encoder frame (80 ms each for the stock model)
    duration: int  # predicted frames; 0 means the next token shares this frame


@dataclass(frozen=True)
class JointStep:
    """One joint evaluation (blanks included): for traces and margin reports."""

    frame: int
    token_id: int
    duration_index: int
    token_margin: float


class TokenBias(Protocol):
    """Biases token selection inside the greedy loop (Phonon-2 hotwords); blank and durations stay unbiased."""

    def select(self, token_logits: np.ndarray, state: int) -> int:
        """The chosen token id given the unbiased logits over ``[0, vocab)`` and the bias state."""
        ...

    def step(self, state: int, token: int) -> int:
        """The bias state after ``token`` was selected (blank included)."""
        ...


@dataclass
class DecoderState:
    h: np.ndarray  # (layers, hidden)
    c: np.ndarray  # (layers, hidden)
    pred: np.ndarray | None = None  # projected predictor output for the last emitted token (or start blank)
    emitted: int = 0  # tokens emitted so far (for budgets carried across windows)
    bias_state: int = 0  # TokenBias automaton state; resets with the decoder

    def copy(self) -> DecoderState:
        """An independent copy, for a look-ahead decode that must not change the committed hypothesis."""
        pred = None if self.pred is None else self.pred.copy()
        return DecoderState(self.h.copy(), self.c.copy(), pred, self.emitted, self.bias_state)


@dataclass
class DecoderWeights:
    embedding: np.ndarray  # (vocab, H)
    w_ih: list[np.ndarray]  # per layer (4H, H), gate order i, f, g, o
    w_hh: list[np.ndarray]
    bias: list[np.ndarray]  # b_ih + b_hh
    pred_w: np.ndarray  # decoder_projector (H, H)
    pred_b: np.ndarray
    enc_w: np.ndarray  # encoder_projector (H, hidden)
    enc_b: np.ndarray
    head_w: np.ndarray  # (vocab + durations, H)
    head_b: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_checkpoint(cls, tensors, config: ParakeetConfig) -> DecoderWeights:
        f32 = lambda name: np.ascontiguousarray(tensors.numpy(name), dtype=np.float32)  # noqa: E731
        layers = range(config.num_decoder_layers)
        return cls(
            embedding=f32("decoder.embedding.weight"),
            w_ih=[f32(f"decoder.lstm.weight_ih_l{i}") for i in layers],
            w_hh=[f32(f"decoder.lstm.weight_hh_l{i}") for i in layers],
            bias=[f32(f"decoder.lstm.bias_ih_l{i}") + f32(f"decoder.lstm.bias_hh_l{i}") for i in layers],
            pred_w=f32("decoder.decoder_projector.weight"),
            pred_b=f32("decoder.decoder_projector.bias"),
            enc_w=f32("encoder_projector.weight"),
            enc_b=f32("encoder_projector.bias"),
            head_w=f32("joint.head.weight"),
            head_b=f32("joint.head.bias"),
        )


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class PredictionStep(Protocol):
    """The per-token work of the greedy loop: the predictor's LSTM step and the joint."""

    def advance(self, state: DecoderState, token: int) -> None:
        """Feed ``token`` to the predictor: updates ``state.h``, ``state.c`` and ``state.pred`` in place."""
        ...

    def joint(self, enc_proj_frame: np.ndarray, pred: np.ndarray) -> np.ndarray:
        """Token then duration logits, (vocab + durations,), for one projected frame and predictor output."""
        ...

    def close(self) -> None: ...


class NumpyPredictionStep:
    """The predictor step and joint in numpy float32: the loop's default, for tests of the loop itself and as the
    comparison for the ggml step (tests/bench/decoder_precision.py)."""

    def __init__(self, weights: DecoderWeights) -> None:
        self.w = weights
        self.hidden = weights.pred_w.shape[0]
        # Stacked [W_ih | W_hh] so one matvec per layer computes all gates.
        self._w_cat = [
            np.ascontiguousarray(np.concatenate([a, b], axis=1))
            for a, b in zip(weights.w_ih, weights.w_hh, strict=True)
        ]

    def advance(self, state: DecoderState, token: int) -> None:
        x = self.w.embedding[token]
        H = self.hidden
        for layer, w in enumerate(self._w_cat):
            gates = w @ np.concatenate([x, state.h[layer]]) + self.w.bias[layer]
            i, f, g, o = (
                _sigmoid(gates[:H]),
                _sigmoid(gates[H : 2 * H]),
                np.tanh(gates[2 * H : 3 * H]),
                _sigmoid(gates[3 * H :]),
            )
            c = f * state.c[layer] + i * g
            h = o * np.tanh(c)
            state.c[layer], state.h[layer] = c, h
            x = h
        state.pred = self.w.pred_w @ x + self.w.pred_b

    def joint(self, enc_proj_frame: np.ndarray, pred: np.ndarray) -> np.ndarray:
        return self.w.head_w @ np.maximum(enc_proj_frame + pred, 0.0) + self.w.head_b

    def close(self) -> None:
        pass


class TdtDecoder:
    def __init__(
        self, weights: DecoderWeights, config: ParakeetConfig, step: PredictionStep | None = None
    ) -> None:
        """``step`` defaults to the numpy step over ``weights``; a given step owns its own copy of the predictor and
        joint matrices, so only the encoder projection is kept from ``weights`` here."""
        self.config = config
        self.hidden = config.decoder_hidden_size
        self.vocab = config.vocab_size
        self.blank = config.blank_token_id
        self.durations = np.asarray(config.durations, dtype=np.int64)
        self.step: PredictionStep = step if step is not None else NumpyPredictionStep(weights)
        self._enc_w, self._enc_b = weights.enc_w, weights.enc_b

    def close(self) -> None:
        self.step.close()

    def new_state(self) -> DecoderState:
        shape = (self.config.num_decoder_layers, self.hidden)
        return DecoderState(np.zeros(shape, np.float32), np.zeros(shape, np.float32))

    def project_encoder(self, encoder_frames: np.ndarray) -> np.ndarray:
        """(T, hidden) encoder output → (T, H) joint-space frames."""
        enc = np.asarray(encoder_frames, dtype=np.float32)
        return enc @ self._enc_w.T + self._enc_b

    def decode(
        self,
        enc_proj: np.ndarray,
        state: DecoderState | None = None,
        *,
        frame_offset: int = 0,
        max_tokens: int | None = None,
        trace: list[JointStep] | None = None,
        bias: TokenBias | None = None,
    ) -> tuple[list[TokenStep], DecoderState]:
        """Greedy TDT over the (valid) projected frames ``enc_proj``; returns the emitted tokens and the state.

        ``max_tokens`` bounds the tokens emitted by this call (default: 10 per frame, docs/families/parakeet_tdt.md §5).
        ``bias`` (hotwords) may change which token wins each step; the duration argmax never sees it.
        """
        state = state or self.new_state()
        step = self.step
        if state.pred is None:
            step.advance(state, self.blank)
        n_frames = enc_proj.shape[0]
        budget = n_frames * self.config.max_symbols_per_step if max_tokens is None else max_tokens
        tokens: list[TokenStep] = []
        fi, last_label_frame, count = 0, -1, 0
        max_symbols = self.config.max_symbols_per_step
        while fi < n_frames and len(tokens) < budget:
            assert state.pred is not None  # set by advance above and after every emitted token
            logits = step.joint(enc_proj[fi], state.pred)
            if bias is None:
                token = int(np.argmax(logits[: self.vocab]))
            else:
                token = bias.select(logits[: self.vocab], state.bias_state)
                state.bias_state = bias.step(state.bias_state, token)
            dur_index = int(np.argmax(logits[self.vocab :]))
            duration = int(self.durations[dur_index])
            if trace is not None:
                top = np.partition(logits[: self.vocab], -2)[-2:]
                trace.append(JointStep(frame_offset + fi, token, dur_index, float(top[1] - top[0])))
            if token == self.blank:
                fi += duration if duration > 0 else 1
                continue
            tokens.append(TokenStep(token, frame_offset + fi, duration))
            state.emitted += 1
            step.advance(state, token)
            if fi == last_label_frame:
                count += 1
            else:
                count, last_label_frame = 1, fi
            fi += duration
            if count >= max_symbols and fi == last_label_frame:
                fi += 1
        return tokens, state
