"""The toy_tones engine: fixed frames of audio, each either silence (a word break) or the tone of one letter,
found as the frame's strongest frequency and matched to the nearest tone of the model's table."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from inference.contract import (
    SAMPLE_RATE,
    CancelToken,
    Capabilities,
    Delta,
    ProgressCallback,
    StreamEvent,
    Transcript,
)
from inference.errors import ModelError
from inference.family import EngineRequest
from inference.models.layout import locate_model
from inference.models.spec import load_family_spec

from .codebook import TONES
from .family import FAMILY, HERE


class ToneDecoder:
    def __init__(self, tones: Mapping[str, float], frame_s: float, min_level: float) -> None:
        self.letters = list(tones)
        self.hertz = np.array([tones[letter] for letter in self.letters], dtype=np.float64)
        self.frame = int(round(frame_s * SAMPLE_RATE))
        self.min_level = min_level

    def letter(self, frame: np.ndarray) -> str | None:
        """The frame's letter, or None for silence."""
        if float(np.sqrt(np.mean(np.square(frame, dtype=np.float64)))) < self.min_level:
            return None
        spectrum = np.abs(np.fft.rfft(frame * np.hanning(len(frame))))
        peak = float(np.fft.rfftfreq(len(frame), 1 / SAMPLE_RATE)[int(np.argmax(spectrum))])
        return self.letters[int(np.argmin(np.abs(self.hertz - peak)))]


class ToneText:
    """Letters and word breaks in, committed text out: a break becomes a space only once a letter follows it."""

    def __init__(self) -> None:
        self.text = ""
        self._break = False

    def add(self, letter: str | None) -> str:
        if letter is None:
            self._break = bool(self.text)
            return ""
        piece = (" " if self._break else "") + letter
        self._break = False
        self.text += piece
        return piece


class ToneStream:
    def __init__(self, decoder: ToneDecoder) -> None:
        self.decoder = decoder
        self.words = ToneText()
        self.pending = np.zeros(0, dtype=np.float32)
        self.done_samples = 0
        self.closed = False

    def push(self, pcm: np.ndarray) -> list[StreamEvent]:
        self.pending = np.concatenate([self.pending, np.asarray(pcm, dtype=np.float32)])
        size = self.decoder.frame
        events: list[StreamEvent] = []
        while len(self.pending) >= size:
            frame, self.pending = self.pending[:size], self.pending[size:]
            start = self.done_samples / SAMPLE_RATE
            self.done_samples += size
            piece = self.words.add(self.decoder.letter(frame))
            if piece:
                events.append(Delta(piece, 0, start, self.done_samples / SAMPLE_RATE))
        return events

    def finish(self) -> Transcript:
        self.closed = True  # a partial last frame is no letter
        return Transcript(self.words.text)

    def cancel(self) -> None:
        self.closed = True


class ToneEngine:
    family = FAMILY.name
    capabilities = Capabilities(streaming=True)

    def __init__(self, request: EngineRequest) -> None:
        spec = load_family_spec(FAMILY.name, HERE)
        session = {**spec.defaults("session"), **spec.validate_session_options(request.session_options)}
        folder = locate_model(request.model_path).root
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            tones = json.loads((folder / TONES).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelError(f"{folder} is not a complete toy_tones model: {exc}", "reinstall it") from exc
        self.decoder = ToneDecoder(tones, float(config["frame_s"]), float(session["min_level"]))

    def transcribe(
        self,
        audio: np.ndarray,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        **request_options: Any,
    ) -> Transcript:
        stream = self.open_stream(**request_options)
        stream.push(audio)
        return stream.finish()

    def open_stream(self, **request_options: Any) -> ToneStream:
        return ToneStream(self.decoder)

    def close(self) -> None:
        pass


def create_engine(request: EngineRequest) -> ToneEngine:
    return ToneEngine(request)
