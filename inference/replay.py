"""The audio a live stream would need again if its worker died: everything sent since its last resume point.

A resumable stream (``contract.Resumable``) reports after every push where a replacement could take over
(``ResumePoint``, in the worker stream's samples). ``ReplayBuffer`` keeps the audio sent since that point,
bounded by ``limit_samples`` (older audio past the bound is counted as lost, never silently), and on a
worker's death says what to replay: which samples prime the new stream, which are pushed again, and which
span, if any, is gone. Positions here are absolute samples of the whole client stream.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inference.contract import ResumePoint

# Workers that crashed this often while decoding the same replay, none answering a push: give the audio up.
POISON_DEATHS = 2


@dataclass(frozen=True)
class Replay:
    """What a restarted worker gets: ``resume`` (the stream's resume state; None: a plain new stream) with
    ``context`` audio, then ``audio`` pushed as usual; ``start`` is where the new stream's sample 0 lies;
    ``lost`` a span given up."""

    start: int
    context: np.ndarray
    audio: np.ndarray
    resume: dict[str, Any] | None = None
    continues_segment: bool = False
    overlap_text: str = ""
    lost: tuple[int, int] | None = None


@dataclass
class ReplayBuffer:
    limit_samples: int
    _chunks: deque[np.ndarray] = field(default_factory=deque)
    _start: int = 0  # absolute sample of _chunks[0][0]
    _sent_end: int = 0  # absolute sample just after the last audio sent
    _base: int = 0  # absolute sample of the current worker stream's sample 0
    _point: ResumePoint = field(
        default_factory=lambda: ResumePoint(0)
    )  # in the current worker stream's samples
    _answered_end: int = 0  # absolute end of the audio the worker answered for
    _resumable: bool | None = None  # unknown until the first answered push
    _deaths: int = 0  # deaths while decoding this audio since a push was last answered

    @property
    def answered_end(self) -> int:
        return self._answered_end

    @property
    def held_samples(self) -> int:
        return self._sent_end - self._start

    def sent(self, chunk: np.ndarray) -> None:
        self._chunks.append(chunk)
        self._sent_end += chunk.size
        self._trim(max(self._resume_start(), self._sent_end - self.limit_samples))

    def answered(self, samples: int, resume: dict[str, Any] | None) -> None:
        """The worker answered a push of ``samples``; ``resume`` is its ResumePoint (None: not resumable)."""
        self._answered_end += samples
        self._deaths = 0
        self._resumable = resume is not None
        if resume is not None:
            self._point = ResumePoint.from_json(resume)
        self._trim(self._resume_start())

    def worker_died(self, on_this_audio: bool = True) -> Replay:
        """What to give the next worker; afterwards the buffer counts from the new stream's start.

        ``on_this_audio``: the worker crashed while decoding audio held here. Only such deaths count towards
        giving it up: a worker killed from outside, or during a restart, says nothing about the audio."""
        if on_this_audio:
            self._deaths += 1
        point = self._point
        if self._resumable is False:  # re-send only what was not answered
            point = ResumePoint(self._answered_end - self._base)
        start = self._base + point.start_sample
        lost: tuple[int, int] | None = None
        if self._deaths > POISON_DEATHS:  # this audio may be what kills the model
            lost, start, point = (start, self._sent_end), self._sent_end, ResumePoint(0)
        elif start < self._start:  # past the bound: what is still held is all there is
            lost, start, point = (start, self._start), self._start, ResumePoint(0)
        held = self._joined()
        replayed = held[start - self._start :]
        context = replayed[: point.context_samples]
        stateful = bool(point.state) or point.continues_segment
        replay = Replay(
            start,
            context,
            replayed[context.size :],
            dict(point.state) if stateful else None,
            point.continues_segment,
            point.overlap_text,
            lost,
        )
        # The new stream starts at `start`; until it answers, a further death replays the same way.
        self._base = start
        self._point = dataclasses.replace(point, start_sample=0)
        self._answered_end = start + context.size
        # The context travels with the new stream's opening; the rest is sent (and recorded) again by pushes.
        self._chunks = deque([context]) if context.size else deque()
        self._start, self._sent_end = start, start + context.size
        return replay

    def restart_at(self, start: int) -> None:
        """A fresh worker stream (no resume state) starts at absolute sample ``start``: nothing before it is held
        or will be replayed (a worker revived after the client stopped restarting; the span before it was
        marked as lost)."""
        self._chunks = deque()
        self._start = self._sent_end = self._base = self._answered_end = start
        self._point = ResumePoint(0)
        self._resumable = None
        self._deaths = 0

    def _resume_start(self) -> int:
        if self._resumable is False:
            return self._answered_end
        return self._base + self._point.start_sample

    def _trim(self, keep_from: int) -> None:
        """Forget audio before ``keep_from`` (absolute)."""
        while self._chunks and self._start + self._chunks[0].size <= keep_from:
            self._start += self._chunks.popleft().size
        if self._chunks and self._start < keep_from:
            cut = keep_from - self._start
            self._chunks[0] = self._chunks[0][cut:]
            self._start = keep_from

    def _joined(self) -> np.ndarray:
        if not self._chunks:
            return np.zeros(0, np.float32)
        if len(self._chunks) > 1:
            self._chunks = deque([np.concatenate(self._chunks)])
        return self._chunks[0]
