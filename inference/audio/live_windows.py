"""The speech gate's window plan, made live: ``plan_speech_windows(speech_segments(audio))`` frame by frame.

A live stream over a model whose speech gate decodes speech windows (docs/models.md §4) must decode each window
on exactly the samples the offline pass decodes, so that its text is the offline text. :class:`LiveSpeechWindows`
takes the VAD's frame probabilities in order (the same probabilities as the offline pass: Silero runs from a
fresh state on frames aligned to the start of the stream) and hands out each window of the offline plan as soon
as no later frame can change it:

* a group is final once a later group has begun (the next speech is long enough to be kept and does not join
  it), or once so much silence has passed that any later speech would start too far away to join it, to
  narrow its padding or to move its zone's end onto a word of it (the longer of ``merge_gap`` and twice the
  padding and the word reach, plus the VAD's own pad);
* speech longer than a group's cap is cut into pieces of that length, and every piece but the last is final
  as soon as the speech has run past it.

``finish(n_samples)`` gives the rest of the offline plan of the whole stream. Positions are stream samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.audio.spans import Span, SpeechWindow, SpeechWindowPlan, plan_speech_windows
from inference.audio.speech_tracker import FRAME_SAMPLES, SpeechEnded, SpeechTracker
from inference.audio.vad import SpeechRules, SpeechSegment, pad_speech

_OPEN_END = 1 << 62  # the stream's length while it runs: no window is cut by it


@dataclass(frozen=True)
class SpeechWindowGate:
    """What a live stream needs to plan a model's speech windows as its offline pass does."""

    plan: SpeechWindowPlan
    vad_model: Path | None = None  # the Silero model of the offline pass (None: the bundled one)


@dataclass
class _Context:
    """What the plan needs of the windows it already gave: their speech segments are forgotten."""

    before_end: int | None = None  # the unpadded end of the last forgotten speech segment
    after: int | None = None  # the end of the last forgotten group
    given_until: int | None = None  # the speech end of the last window handed out
    given_window_end: int = 0  # its window's end: no later window starts before it


class LiveSpeechWindows:
    """Windows of the offline speech plan, each as soon as it is final. Not thread-safe."""

    def __init__(self, plan: SpeechWindowPlan, rules: SpeechRules | None = None) -> None:
        self.plan = plan
        self.rules = rules or SpeechRules()
        self._tracker = SpeechTracker(self.rules.tracker_rules())
        self._pad_ceil = math.ceil(self.rules.pad)
        self._frames = 0  # frames tracked since the start of the stream
        self._raw: list[list[int]] = []  # closed speech segments (unpadded) of windows not all handed out
        self._context = _Context()
        self._kept_start: int | None = None  # the start of the open speech once it is long enough to keep
        # The plan may give more once _recheck_at is reached by the open speech's least end (_recheck_on_end),
        # else by the least start of speech not closed yet.
        self._recheck_at = _OPEN_END
        self._recheck_on_end = False

    # ------------------------------------------------------------------ frames
    @property
    def position(self) -> int:
        """The stream sample after the last tracked frame."""
        return self._frames * FRAME_SAMPLES

    def step(self, probability: float) -> list[SpeechWindow]:
        """Track the next frame's speech probability; return the windows that became final."""
        changed = self._track(probability)
        if self._open_is_kept() and self._kept_start != self._tracker.start:
            self._kept_start, changed = self._tracker.start, True  # the next group's start is known now
        probe = self._lower_end() if self._recheck_on_end else self._next_start_bound()
        if changed or probe >= self._recheck_at:
            return self._final_windows()
        return []

    def finish(self, n_samples: int, tail_probability: float | None = None) -> list[SpeechWindow]:
        """The windows not handed out yet of the offline plan of the whole stream, ``n_samples`` long: its
        whole frames tracked, then the probability of the samples short of a frame, zero-padded as the offline
        pass pads them (no window may be handed out on that frame: it reaches past the stream)."""
        if tail_probability is not None:
            self._track(tail_probability)
        raw = [list(segment) for segment in self._raw]
        if self._tracker.in_speech and n_samples - self._tracker.start > self.rules.min_speech:
            raw.append([self._tracker.start, n_samples])
        self._tracker.close()
        windows = self._windows(raw, n_samples)
        return self._give(windows)

    def _track(self, probability: float) -> bool:
        """Track one frame; whether speech ended on it (a segment long enough is kept)."""
        event = self._tracker.step(probability, self.position)
        self._frames += 1
        if not isinstance(event, SpeechEnded):
            return False
        if event.end - event.start > self.rules.min_speech:
            self._raw.append([event.start, event.end])
        return True

    # ------------------------------------------------------------------ the open group
    def _first_pending_start(self) -> int | None:
        """Where the first speech not all in windows handed out starts (unpadded), if there is any."""
        if self._raw:
            return self._raw[0][0]
        return self._tracker.start if self._tracker.in_speech else None

    def pending_speech(self) -> Span | None:
        """The speech not yet in a window handed out (from its padded start to the last frame), if any."""
        first = self._first_pending_start()
        if first is None:
            return None
        start = max(self._context.given_until or 0, first - self._pad_ceil, 0)
        return Span(start, max(start + 1, self.position))

    def hearing_speech(self) -> bool:
        """The last frame was speech (no dip pending)."""
        return self._tracker.in_speech and self._tracker.dip_from is None

    def given(self) -> tuple[int | None, int]:
        """The speech end and the window end of the last window handed out (for ``restore``)."""
        return self._context.given_until, self._context.given_window_end

    def keep_from(self) -> int:
        """The earliest sample a window still to come can start at."""
        first = self._first_pending_start()
        next_start = (first if first is not None else self.position) - self._pad_ceil
        return max(self._context.given_window_end, next_start - self.plan.padding_samples, 0)

    # ------------------------------------------------------------------ resuming
    def state(self) -> dict[str, Any]:
        context = self._context
        return {
            "frames": self._frames,
            "tracker": self._tracker.state(),
            "raw": [list(segment) for segment in self._raw],
            "context": [context.before_end, context.after, context.given_until, context.given_window_end],
        }

    def restore(self, state: dict[str, Any], given_until: int | None, given_window_end: int) -> None:
        """Continue from ``state`` (taken at an earlier frame) without handing out again the windows that were
        handed out since (up to ``given_until``)."""
        self._frames = int(state["frames"])
        self._tracker.restore(list(state["tracker"]))
        self._raw = [[int(a), int(b)] for a, b in state["raw"]]
        before_end, after, _, _ = state["context"]
        self._context = _Context(before_end, after, given_until, given_window_end)
        self._kept_start = self._tracker.start if self._open_is_kept() else None
        self._recheck_at, self._recheck_on_end = 0, False  # look again at the next frame

    # ------------------------------------------------------------------ planning
    def _lower_end(self) -> int:
        """The least end the open speech can still get: its pending dip's start, else the next frame."""
        tracker = self._tracker
        return tracker.dip_from if tracker.dip_from is not None else self.position

    def _open_is_kept(self) -> bool:
        """The open speech is already long enough to be kept, however it ends."""
        tracker = self._tracker
        return tracker.in_speech and self._lower_end() - tracker.start > self.rules.min_speech

    def _next_start_bound(self) -> int:
        """The least start speech not yet closed can have."""
        return self._tracker.start if self._tracker.in_speech else self.position

    def _windows(self, raw: list[list[int]], n_samples: int) -> list[SpeechWindow]:
        context = self._context
        segments = pad_speech(raw, n_samples, self.rules.pad, context.before_end)
        return plan_speech_windows(
            segments,
            n_samples,
            self.plan.max_group_samples,
            merge_gap_samples=self.plan.merge_gap_samples,
            padding_samples=self.plan.padding_samples,
            after=context.after,
        )

    def _final_windows(self) -> list[SpeechWindow]:
        """The windows of the plan that no later frame can change; and when to look again."""
        tracker = self._tracker
        raw = [list(segment) for segment in self._raw]
        lower = self._lower_end()
        open_end = lower - self._pad_ceil  # its padded end is then at most ``lower``, its least end
        kept_open = self._open_is_kept() and open_end > tracker.start
        if kept_open:
            # The open speech as if it ended there: a group it does not join, and the pieces of it that are not
            # its last, stay as they are however long it lasts.
            raw.append([tracker.start, open_end])
        windows = self._windows(raw, _OPEN_END)
        final = windows[:-1]
        self._recheck_at, self._recheck_on_end = _OPEN_END, False
        if windows and kept_open:
            last = windows[-1]
            if last.speech.end >= open_end:  # the open speech is in the last group: more once it outgrows it
                self._recheck_at, self._recheck_on_end = (
                    last.speech.start + self.plan.max_group_samples + 1,
                    True,
                )
            else:
                self._recheck_at, self._recheck_on_end = lower + 1, True
        elif windows:
            # The last group is final once later speech could neither join it, nor narrow its padding, nor
            # bring its zone's end (halfway to that speech) onto a word its window can give.
            last = windows[-1]
            plan = self.plan
            quiet = max(plan.merge_gap_samples + 1, 2 * (plan.padding_samples + plan.word_reach) + 2)
            final_from = last.speech.end + self._pad_ceil + quiet
            if self._next_start_bound() >= final_from:
                final.append(last)  # its zone is left open at the end: no word of it reaches that far
            else:
                self._recheck_at = final_from
        given = self._give(final)
        self._forget(raw)
        return given

    def _give(self, windows: list[SpeechWindow]) -> list[SpeechWindow]:
        context = self._context
        fresh = [w for w in windows if context.given_until is None or w.speech.start >= context.given_until]
        if fresh:
            context.given_until = fresh[-1].speech.end
            context.given_window_end = fresh[-1].window.end
        return fresh

    def _forget(self, planned: list[list[int]]) -> None:
        """Drop the closed segments whose windows were all handed out (whole groups only); ``planned``: the
        segments just planned (the closed ones first)."""
        context = self._context
        if context.given_until is None or not self._raw:
            return
        padded: list[SpeechSegment] = pad_speech(planned, _OPEN_END, self.rules.pad, context.before_end)
        done = 0
        while done < len(self._raw) and padded[done].end <= context.given_until:
            done += 1
        if done:
            context.before_end = self._raw[done - 1][1]
            context.after = padded[done - 1].end
            del self._raw[:done]
