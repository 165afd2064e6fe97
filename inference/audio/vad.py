"""Silero VAD (v5/v6 ONNX model) on onnxruntime: streaming frame probabilities and offline speech segments.

The model contract (from the silero-vad package's ONNX wrapper): each call takes a [1, 64 + 512]
float32 window — the last 64 samples of the previous window followed by the new 512-sample frame
at 16 kHz — plus a recurrent ``state`` [2, 1, 128] and ``sr`` (int64 scalar), and returns the
speech probability [1, 1] and the next state. The torch-based package itself is never imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from inference.audio.speech_tracker import (
    FRAME_SAMPLES,
    FrameSplitter,
    SpeechEnded,
    SpeechTracker,
    TrackerRules,
)
from inference.contract import SAMPLE_RATE
from inference.errors import ModelError, UsageError
from inference.paths import resources_dir
from inference.resume_state import floats_to_text, text_to_floats

VAD_SAMPLE_RATE = SAMPLE_RATE  # Silero also runs at 8 kHz; Captioneer feeds it the engines' rate
CONTEXT_SAMPLES = 64
_STATE_SHAPE = (2, 1, 128)
_EXPECTED_INPUTS = {"input", "state", "sr"}


def default_vad_model_path() -> Path:
    return resources_dir() / "vad" / "silero_vad.onnx"


@dataclass(frozen=True)
class SpeechSegment:
    """Speech in samples at 16 kHz, half-open [start, end)."""

    start: int
    end: int

    @property
    def duration_samples(self) -> int:
        return self.end - self.start


class SileroVad:
    """One Silero VAD stream. Not thread-safe: give each audio stream its own instance."""

    def __init__(self, model_path: Path | None = None, *, threads: int = 1) -> None:
        import onnxruntime

        path = Path(model_path) if model_path is not None else default_vad_model_path()
        if not path.is_file():
            raise ModelError(
                f"Silero VAD model not found: {path}",
                "reinstall Captioneer, or point vad_model_path at a silero_vad.onnx file (v5 or v6)",
            )
        options = onnxruntime.SessionOptions()
        # It runs beside the GUI and the speech model: one thread is plenty for a 32 ms frame.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            self._session = onnxruntime.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own exception types for corrupt files
            raise ModelError(
                f"cannot load the Silero VAD model {path}: {exc}", "replace it with silero_vad.onnx"
            ) from exc
        names = {i.name for i in self._session.get_inputs()}
        if names != _EXPECTED_INPUTS:
            raise ModelError(
                f"{path} is not a Silero VAD v5/v6 model (inputs {sorted(names)})",
                "use silero_vad.onnx from the silero-vad 5.x/6.x package",
            )
        self._rate = np.array(VAD_SAMPLE_RATE, dtype=np.int64)
        self._window = np.zeros((1, CONTEXT_SAMPLES + FRAME_SAMPLES), dtype=np.float32)
        self._state = np.zeros(_STATE_SHAPE, dtype=np.float32)
        self._frames = FrameSplitter()

    def reset(self) -> None:
        """Forget the recurrent state, the 64-sample context and any buffered partial frame."""
        self._window[:] = 0.0
        self._state = np.zeros(_STATE_SHAPE, dtype=np.float32)
        self._frames = FrameSplitter()

    def snapshot(self) -> str:
        """The recurrent state and the 64-sample context, as text (a live stream's resume point carries it)."""
        return floats_to_text(np.concatenate([self._state.reshape(-1), self._window[0, :CONTEXT_SAMPLES]]))

    def restore(self, snapshot: str) -> None:
        """Continue exactly where a ``snapshot`` was taken (of this model, perhaps in another process)."""
        values = text_to_floats(snapshot)
        size = int(np.prod(_STATE_SHAPE))
        if values.size != size + CONTEXT_SAMPLES:
            raise ValueError(
                f"a Silero VAD snapshot holds {size + CONTEXT_SAMPLES} values, got {values.size}"
            )
        self._state = values[:size].reshape(_STATE_SHAPE)
        self._window[0, :CONTEXT_SAMPLES] = values[size:]
        self._frames = FrameSplitter()

    def process(self, frame: np.ndarray) -> float:
        """Speech probability of one 512-sample, 16 kHz frame, continuing the stream."""
        frame = np.asarray(frame, dtype=np.float32).reshape(-1)
        if frame.size != FRAME_SAMPLES:
            raise ValueError(f"Silero VAD frames are {FRAME_SAMPLES} samples at 16 kHz, got {frame.size}")
        # The window's first 64 samples still hold the tail of the previous frame.
        self._window[0, CONTEXT_SAMPLES:] = frame
        prob, self._state = self._session.run(
            None, {"input": self._window, "state": self._state, "sr": self._rate}
        )
        self._window[0, :CONTEXT_SAMPLES] = self._window[0, -CONTEXT_SAMPLES:]
        return float(prob.reshape(-1)[0])

    def push(self, samples: np.ndarray) -> np.ndarray:
        """Feed any number of 16 kHz samples; return the probabilities of the frames they completed.

        Frames stay aligned to the start of the stream however the packets are cut.
        """
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        return np.array([self.process(frame) for frame in self._frames.frames(samples)], dtype=np.float32)

    def frame_probabilities(self, audio: np.ndarray) -> np.ndarray:
        """Probabilities for a whole clip from a fresh state; the last partial frame is zero-padded.

        Resets the stream before and after, so it can be used between live sessions.
        """
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        frames = -(-audio.size // FRAME_SAMPLES)
        padded = np.zeros(frames * FRAME_SAMPLES, dtype=np.float32)
        padded[: audio.size] = audio
        self.reset()
        try:
            return np.array(
                [self.process(padded[i * FRAME_SAMPLES : (i + 1) * FRAME_SAMPLES]) for i in range(frames)],
                dtype=np.float32,
            )
        finally:
            self.reset()


def speech_segments(
    audio: np.ndarray,
    vad: SileroVad,
    *,
    threshold: float = 0.5,
    min_speech_ms: float = 250,
    min_silence_ms: float = 100,
    speech_pad_ms: float = 30,
    neg_threshold: float | None = None,
) -> list[SpeechSegment]:
    """Speech segments of a 16 kHz mono clip (Silero's offline hysteresis, no maximum segment length)."""
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    _validate_thresholds(threshold, neg_threshold)
    probs = vad.frame_probabilities(audio)
    return segments_from_probabilities(
        probs,
        audio.size,
        threshold=threshold,
        min_speech_ms=min_speech_ms,
        min_silence_ms=min_silence_ms,
        speech_pad_ms=speech_pad_ms,
        neg_threshold=neg_threshold,
    )


def _validate_thresholds(threshold: float, neg_threshold: float | None) -> None:
    if not 0.0 < threshold < 1.0:
        raise UsageError(f"VAD threshold must be between 0 and 1 (exclusive), got {threshold}")
    if neg_threshold is not None and not 0.0 <= neg_threshold <= threshold:
        raise UsageError(f"VAD negative threshold must be in [0, threshold={threshold}], got {neg_threshold}")


@dataclass(frozen=True)
class SpeechRules:
    """The numbers of Silero's offline speech segments (``get_speech_timestamps``); the defaults are what
    ``speech_segments`` uses, the speech gate's VAD pass included."""

    threshold: float = 0.5
    min_speech_ms: float = 250
    min_silence_ms: float = 100
    speech_pad_ms: float = 30
    neg_threshold: float | None = None  # threshold - 0.15 (at least 0.01) when not given

    def __post_init__(self) -> None:
        _validate_thresholds(self.threshold, self.neg_threshold)

    @property
    def min_speech(self) -> float:
        """Samples a segment must exceed to be kept."""
        return VAD_SAMPLE_RATE / 1000 * self.min_speech_ms

    @property
    def pad(self) -> float:
        return VAD_SAMPLE_RATE / 1000 * self.speech_pad_ms

    def tracker_rules(self) -> TrackerRules:
        negative = max(self.threshold - 0.15, 0.01) if self.neg_threshold is None else self.neg_threshold
        min_silence = VAD_SAMPLE_RATE / 1000 * self.min_silence_ms
        return TrackerRules(self.threshold, negative, min_silence, self.threshold, end_below=negative)


def segments_from_probabilities(
    probs: Sequence[float] | np.ndarray,
    n_samples: int,
    *,
    threshold: float = 0.5,
    min_speech_ms: float = 250,
    min_silence_ms: float = 100,
    speech_pad_ms: float = 30,
    neg_threshold: float | None = None,
) -> list[SpeechSegment]:
    """Turn per-frame probabilities into padded speech segments.

    Speech starts at the first frame with p >= threshold. It ends at the first frame with
    p < neg_threshold (default threshold - 0.15, at least 0.01) once the dip has lasted
    min_silence_ms without p climbing back to the threshold. Segments not longer than
    min_speech_ms are dropped. Padding grows each segment by speech_pad_ms, but two
    neighbours closer than twice the pad split the silence between them instead.
    """
    rules = SpeechRules(threshold, min_speech_ms, min_silence_ms, speech_pad_ms, neg_threshold)
    tracker = SpeechTracker(rules.tracker_rules())
    raw: list[list[int]] = []
    for index, prob in enumerate(np.asarray(probs, dtype=np.float64)):
        ended = tracker.step(float(prob), index * FRAME_SAMPLES)
        if isinstance(ended, SpeechEnded) and ended.end - ended.start > rules.min_speech:
            raw.append([ended.start, ended.end])
    if tracker.in_speech and n_samples - tracker.start > rules.min_speech:
        raw.append([tracker.start, n_samples])
    return pad_speech(raw, n_samples, rules.pad)


def pad_speech(
    raw: list[list[int]], n_samples: int, pad: float, before_end: int | None = None
) -> list[SpeechSegment]:
    """Grow each [start, end) by ``pad`` samples, splitting the silence between neighbours closer than twice
    that. ``before_end``: the unpadded end of a segment before these (a live plan continued), else none."""
    raw = [list(segment) for segment in raw]
    if raw and before_end is not None:
        silence = raw[0][0] - before_end
        raw[0][0] = int(max(0, raw[0][0] - (silence // 2 if silence < 2 * pad else pad)))
    for i, segment in enumerate(raw):
        if i == 0 and before_end is None:
            segment[0] = int(max(0, segment[0] - pad))
        if i + 1 < len(raw):
            following = raw[i + 1]
            silence = following[0] - segment[1]
            if silence < 2 * pad:
                segment[1] += silence // 2
                following[0] = int(max(0, following[0] - silence // 2))
            else:
                segment[1] = int(min(n_samples, segment[1] + pad))
                following[0] = int(max(0, following[0] - pad))
        else:
            segment[1] = int(min(n_samples, segment[1] + pad))
    return [SpeechSegment(start, end) for start, end in raw]


def speech_stretches(audio: np.ndarray, vad: SileroVad | None = None) -> list[tuple[float, float]]:
    """Voiced stretches of a 16 kHz mono clip in seconds (the bundled Silero VAD unless ``vad`` is given)."""
    found = speech_segments(audio, vad or SileroVad())
    return [(segment.start / SAMPLE_RATE, segment.end / SAMPLE_RATE) for segment in found]


def needs_speech_stretches(transcript_words: int, fmt: str) -> bool:
    """Subtitles of text without word times follow the speech (``Transcript.speech``); nothing else needs it."""
    return fmt in ("srt", "vtt") and transcript_words == 0
