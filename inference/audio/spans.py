"""Planning which stretches of a clip a model decodes: fixed offline spans (the R2T2 30 s spans), long-form
windows, VAD chunks.

Pure functions over sample counts (16 kHz unless the caller says otherwise); no audio is touched.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from inference.contract import SAMPLE_RATE
from inference.errors import UsageError


@dataclass(frozen=True, order=True)
class Span:
    """Half-open sample range [start, end)."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


class _HasStartEnd(Protocol):
    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


def seconds_to_samples(seconds: float, sample_rate: int = SAMPLE_RATE) -> int:
    """Round half away from zero, like C's llround (the reference converts durations this way)."""
    value = seconds * sample_rate
    return int(math.floor(value + 0.5)) if value >= 0 else -int(math.floor(-value + 0.5))


def _require_positive(value: int, what: str) -> None:
    if value <= 0:
        raise UsageError(f"{what} must be positive, got {value}")


def _require_non_negative(value: int, what: str) -> None:
    if value < 0:
        raise UsageError(f"{what} must not be negative, got {value}")


# --- consecutive non-overlapping spans (Confucius4-R2T2 offline path: 30 s each) -------------------


def plan_fixed_spans(n_samples: int, span_samples: int) -> list[Span]:
    """Consecutive spans of ``span_samples``; the last one is shorter. No audio → no spans."""
    _require_non_negative(n_samples, "audio length")
    _require_positive(span_samples, "span length")
    return [Span(start, min(start + span_samples, n_samples)) for start in range(0, n_samples, span_samples)]


# --- long-form windows (Parakeet-TDT offline_mode=long_form) ---------------------------------------


@dataclass(frozen=True)
class LongFormWindow:
    """One encoder pass: ``window`` is encoded, the frames of ``center`` are decoded.

    ``keep_start``/``keep_end`` index the window's encoder output frames; ``frame_offset`` is the
    number of frames kept by all earlier windows, added to token frame indices so they count
    from the start of the clip.
    """

    center: Span
    window: Span
    keep_start: int
    keep_end: int
    frame_offset: int

    @property
    def kept_frames(self) -> int:
        return self.keep_end - self.keep_start


def encoder_valid_frames(n_samples: int, hop_length: int = 160, subsampling_stages: int = 3) -> int:
    """Valid encoder frames for n samples: floor(n/hop) feature frames, halved (rounding up) per stage."""
    frames = n_samples // hop_length
    for _ in range(subsampling_stages):
        frames = (frames - 1) // 2 + 1 if frames > 0 else 0
    return frames


def plan_long_form_windows(
    n_samples: int,
    center_samples: int,
    left_samples: int,
    right_samples: int,
    *,
    hop_length: int = 160,
    subsampling_stages: int = 3,
) -> list[LongFormWindow]:
    """Centers [cs, ce) tile the clip; each window adds left/right context, clipped to the clip."""
    _require_non_negative(n_samples, "audio length")
    _require_positive(center_samples, "center (audio_chunk_duration_sec)")
    _require_non_negative(left_samples, "left context")
    _require_non_negative(right_samples, "right context")
    samples_per_frame = hop_length * (1 << subsampling_stages)
    windows: list[LongFormWindow] = []
    offset = 0
    for cs in range(0, n_samples, center_samples):
        ce = min(cs + center_samples, n_samples)
        ws, we = max(0, cs - left_samples), min(n_samples, ce + right_samples)
        valid = encoder_valid_frames(we - ws, hop_length, subsampling_stages)
        keep_start = (cs - ws) // samples_per_frame
        keep_end = min(valid, -(-(ce - ws) // samples_per_frame))
        keep_end = max(keep_start, keep_end)  # a sub-hop tail can leave nothing to keep
        windows.append(LongFormWindow(Span(cs, ce), Span(ws, we), keep_start, keep_end, offset))
        offset += keep_end - keep_start
    return windows


# --- VAD chunks (Parakeet-TDT audio_chunk_mode=vad) ------------------------------------------------


@dataclass
class _Chunk:
    start: int
    end: int
    speech_end: int  # end of the last speech (unpadded) inside the chunk; start if none yet


def plan_vad_chunks(
    speech: Iterable[_HasStartEnd],
    n_samples: int,
    max_chunk_samples: int,
    *,
    merge_gap_samples: int = 8000,
    padding_samples: int = 4000,
) -> list[Span]:
    """Group speech segments into decode chunks of at most ``max_chunk_samples``.

    Each segment is padded (clipped to the clip), then segments are taken in order of their
    padded start. A segment joins the current chunk when the gap to it is at most the merge gap
    and the chunk stays within capacity; one that overlaps the chunk extends it up to capacity.
    When an overlapping segment does not fit, the chunk is cut at that segment's speech start if
    that lies after the chunk's own speech (so no word is split), otherwise at capacity, and the
    rest continues in new chunks. Chunks never overlap: where the reference restarts a chunk at
    a padded start inside the previous full chunk (decoding that audio twice), we start at the
    previous chunk's end.
    """
    _require_non_negative(n_samples, "audio length")
    _require_positive(max_chunk_samples, "max VAD chunk length")
    _require_non_negative(merge_gap_samples, "VAD merge gap")
    _require_non_negative(padding_samples, "VAD padding")
    items: list[tuple[Span, Span]] = []
    for segment in speech:
        if not 0 <= segment.start < segment.end <= n_samples:
            raise UsageError(
                f"speech segment [{segment.start}, {segment.end}) lies outside the audio (0..{n_samples})"
            )
        padded = Span(max(0, segment.start - padding_samples), min(n_samples, segment.end + padding_samples))
        items.append((padded, Span(segment.start, segment.end)))
    items.sort()
    chunks: list[_Chunk] = []
    for padded, voiced in items:
        _place_segment(chunks, padded.start, padded.end, voiced, max_chunk_samples, merge_gap_samples)
    return [Span(chunk.start, chunk.end) for chunk in chunks]


def _place_segment(
    chunks: list[_Chunk], start: int, end: int, voiced: Span, capacity: int, merge_gap: int
) -> None:
    """Add the padded range [start, end) of one segment to the chunk list, opening chunks as needed."""
    while start < end:
        if chunks:
            current = chunks[-1]
            if end <= current.end:  # already covered
                current.speech_end = max(current.speech_end, voiced.end)
                return
            if start <= current.end:  # overlaps or touches the current chunk
                limit = current.start + capacity
                if end <= limit:
                    current.end = end
                    current.speech_end = max(current.speech_end, voiced.end)
                    return
                if current.start < current.speech_end < voiced.start:
                    # Cut before this segment's speech so it starts a chunk of its own.
                    boundary = min(current.end, voiced.start)
                    current.end = boundary
                    start = boundary
                elif current.end < limit:
                    current.end = limit
                    if limit > voiced.start:
                        current.speech_end = max(current.speech_end, min(voiced.end, limit))
                    start = limit
                    continue
                else:
                    start = current.end  # full: continue after it rather than overlap it
            elif start - current.end <= merge_gap and end - current.start <= capacity:
                current.end = end
                current.speech_end = max(current.speech_end, voiced.end)
                return
        chunk_end = min(end, start + capacity)
        speech_end = min(voiced.end, chunk_end) if chunk_end > voiced.start else start
        chunks.append(_Chunk(start, chunk_end, speech_end))
        start = chunk_end


# --- padded speech windows (Parakeet-TDT speech gate, method "windows") -----------------------------


@dataclass(frozen=True)
class SpeechWindow:
    """One decode of a group of speech segments: ``window`` (the group padded on both sides, within its zone) is
    decoded, and a word of it is kept when its midpoint lies in ``zone`` and it comes within the margin of
    ``speech``. Zones tile the clip, meeting halfway between groups, so windows never overlap.
    """

    window: Span
    zone: Span
    speech: Span


@dataclass(frozen=True)
class SpeechWindowPlan:
    """The numbers of ``plan_speech_windows`` for one model (its speech gate), in samples."""

    max_group_samples: int
    merge_gap_samples: int
    padding_samples: int
    word_reach: int = 0  # samples a kept word's midpoint can lie past the audio it was decoded from


def plan_speech_windows(
    speech: Iterable[_HasStartEnd],
    n_samples: int,
    max_group_samples: int,
    *,
    merge_gap_samples: int,
    padding_samples: int,
    after: int | None = None,
) -> list[SpeechWindow]:
    """Group speech segments (in order) while the gap to the next one is at most ``merge_gap_samples`` and the
    group stays within ``max_group_samples``; a longer segment is cut into pieces of that length. Each group is
    decoded with up to ``padding_samples`` of audio on each side (not past its zone), so onsets and ends the VAD
    cut off are heard. ``after``: the end of a group before these segments that none of them joins (a live
    plan continued after the windows it gave already), which the first zone starts halfway from."""
    _require_non_negative(n_samples, "audio length")
    _require_positive(max_group_samples, "max speech group length")
    _require_non_negative(merge_gap_samples, "speech merge gap")
    _require_non_negative(padding_samples, "speech padding")
    groups: list[list[int]] = []
    for segment in sorted((s.start, s.end) for s in speech):
        start, end = segment
        if not 0 <= start < end <= n_samples:
            raise UsageError(f"speech segment [{start}, {end}) lies outside the audio (0..{n_samples})")
        if groups and start <= groups[-1][1]:  # overlaps the group before: part of it
            start = groups[-1][1]
            if end <= start:
                continue
            if end - groups[-1][0] <= max_group_samples:
                groups[-1][1] = end
                continue
        elif (
            groups and start - groups[-1][1] <= merge_gap_samples and end - groups[-1][0] <= max_group_samples
        ):
            groups[-1][1] = end
            continue
        for piece in range(start, end, max_group_samples):
            groups.append([piece, min(piece + max_group_samples, end)])
    windows: list[SpeechWindow] = []
    for i, (start, end) in enumerate(groups):
        before = groups[i - 1][1] if i else after
        zone_start = 0 if before is None else (before + start) // 2
        zone_end = n_samples if i + 1 == len(groups) else (end + groups[i + 1][0]) // 2
        # Padding stops at the zone: a window never holds a neighbour's speech, whose words would disturb the
        # decoder's start (measured: tests/bench/bench_speech_gate.py, long recordings).
        window = Span(max(zone_start, start - padding_samples), min(zone_end, end + padding_samples))
        windows.append(SpeechWindow(window, Span(zone_start, zone_end), Span(start, end)))
    return windows
