"""Speaker bleed: the computer's own playback heard again by its microphone (a laptop without a headset).

In meeting mode the microphone is "You" and what the computer plays is "Others". When the microphone also hears
the speakers, the far end's words reach the "You" stream a second time, a few milliseconds late and a few dB
quieter. ``BleedFilter`` removes that copy from the microphone before it is transcribed:

1. **Alignment.** The two captures start at different moments; each block's arrival time (a monotonic clock)
   gives each stream's start, so a microphone sample is matched with the playback captured at the same moment.
2. **Delay search.** Every ``track_every`` blocks, while something plays, ``window`` samples of the microphone
   are cross-correlated (FFT) with the playback over delays from ``min_delay`` to ``max_delay`` (the acoustic
   delay, a few ms on a laptop, plus the difference of the two captures' latencies, which can be seconds and
   drifts). A normalised peak of at least ``min_correlation`` that holds through most of the window sets the
   delay; it is then followed near where it is every search, and the whole range is searched again every
   ``wide_every``-th. Until one is found the microphone is held back, so that the first copy is caught.
3. **Echo estimate.** Around that delay a short filter (``taps`` samples: fractional delays, a little of the
   room) is fitted by least squares over the same window, and the block's echo estimate is subtracted. The
   user's own voice is uncorrelated with the playback, so it stays in the residual when both talk at once.
4. **Suppression.** A block whose residual is at least ``explained_db`` below the microphone's own energy is
   explained by the playback: it is silenced (``floor_gain``, with a ramp, no clicks). Attenuating is not
   enough: the speech models normalise levels, and the demo model still captions the far end at -60 dB. Any
   other block keeps its residual: the user's words, the echo taken out.

Pure numpy, no Qt, no threads: the caller feeds both streams in order (``push_reference``, ``push_microphone``)
and takes the cleaned microphone with ``pull``; ``remove_bleed`` does it for whole arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from inference.contract import SAMPLE_RATE

ALIGN_FOR_S = 2.0  # the stream starts are refined from arrival times for this long, then fixed


@dataclass(frozen=True)
class BleedSettings:
    """Samples at 16 kHz. The defaults cover a laptop (3 ms, -3 dB) to a quiet speaker far away (-20 dB)."""

    block: int = 320  # 20 ms: one suppression decision
    window: int = 8000  # 0.5 s: delay search and filter fit
    # The acoustic delay is a few ms, but the two captures' latencies differ by much more: a sink renders (and
    # its monitor delivers) ahead of what the speakers sound — up to the sink's latency, which PulseAudio sets
    # anywhere up to 2 s — and in the tests' private PulseAudio the virtual microphone ran 0.2-1.6 s ahead of the
    # speakers' monitor. Delays are searched over +-2.5 s; a copy that comes first costs the microphone that wait.
    min_delay: int = -40000  # -2.5 s
    max_delay: int = 40000  # +2.5 s
    taps: int = 32  # 2 ms of echo path around the delay
    track_every: int = 5  # blocks between delay searches (100 ms)
    # Two captures' relative latency drifts (a loaded machine: by 3-160 ms within a minute), so a found delay is
    # followed closely: near it (+-``near``, at the audio being passed on) every search, over the whole range
    # every ``wide_every``-th.
    near: int = 4000  # 0.25 s
    wide_every: int = 10
    min_correlation: float = 0.35  # normalised cross-correlation that founds a delay
    min_active: float = 0.6  # share of the window's blocks with sound for a search to count
    keep_share: float = 0.8  # a new delay needs this share of the current one's standing to replace it
    replace_margin: float = 0.15  # and must beat the current delay's correlation in the same window by this
    explained_db: float = -10.0  # residual this far below the microphone: the block is playback
    floor_gain: float = 0.0  # a block of playback is silenced (see 4. above)
    silence_rms: float = 1e-4  # -80 dBFS: no playback, or nothing heard
    max_wait: int = 56000  # microphone samples held back waiting for the playback before going on without it
    # Until a delay is found the microphone waits for the playback of every delay searched (a copy that comes
    # first can only be found once its playback is in); after this much playback without finding one (a
    # headset), it waits no more.
    give_up: int = 320000  # 20 s of playback

    @property
    def hold_unknown(self) -> int:
        """How far the microphone is held back while no delay is known: the playback of every delay searched, and
        a window more, so that a search sees a whole window of a first copy before any of it is passed on."""
        return max(0, -self.min_delay) + self.taps + self.window

    @property
    def history(self) -> int:
        """Microphone samples kept for the delay search, which looks at the newest window whose playback (over
        every delay searched) is in: up to ``-min_delay`` behind the block being passed on."""
        return self.window + max(0, -self.min_delay) + self.taps + self.track_every * self.block


@dataclass
class BleedReport:
    """What the filter did, for the status line, logs and tests."""

    blocks: int = 0
    blocks_with_playback: int = 0
    blocks_suppressed: int = 0
    delay_samples: int | None = None  # the delay in use (microphone after playback), None until one is found
    correlation: float = 0.0  # the normalised cross-correlation that founded it
    offset_samples: int = 0  # the playback index the arrival times put with microphone sample 0
    delays_found: int = 0  # how often a delay was found (the first, and each that replaced another)
    found: list[tuple[float, int, float]] = field(default_factory=list, repr=False)  # (mic s, delay, corr)
    suppressed_db: list[float] = field(
        default_factory=list, repr=False
    )  # residual/mic of each suppressed block

    @property
    def delay_ms(self) -> float | None:
        return None if self.delay_samples is None else 1000.0 * self.delay_samples / SAMPLE_RATE


class _Timeline:
    """One stream's samples kept from ``start`` (an absolute sample index), and when its sample 0 was captured."""

    def __init__(self) -> None:
        self.samples = np.zeros(0, dtype=np.float32)
        self.start = 0  # absolute index of samples[0]
        self.began_at: float | None = None

    @property
    def end(self) -> int:
        return self.start + self.samples.size

    def append(self, block: np.ndarray, captured_at: float | None, refine: bool) -> None:
        block = np.asarray(block, dtype=np.float32).reshape(-1)
        if captured_at is not None and refine:
            # ``captured_at`` is when the block's last sample arrived; scheduling only ever delays arrival, so
            # the earliest estimate is the best one.
            began = captured_at - (self.end + block.size) / SAMPLE_RATE
            self.began_at = began if self.began_at is None else min(self.began_at, began)
        self.samples = np.concatenate((self.samples, block)) if self.samples.size else block.copy()

    def slice(self, a: int, b: int) -> np.ndarray:
        """Samples [a, b) by absolute index, zeros where the stream has none (not yet, or dropped)."""
        out = np.zeros(max(0, b - a), dtype=np.float32)
        lo, hi = max(a, self.start), min(b, self.end)
        if hi > lo:
            out[lo - a : hi - a] = self.samples[lo - self.start : hi - self.start]
        return out

    def forget_before(self, index: int) -> None:
        if index > self.start:
            cut = min(index - self.start, self.samples.size)
            self.samples = self.samples[cut:]
            self.start += cut


class BleedFilter:
    """Streaming bleed removal; one caller (or a lock) feeds both streams, in order."""

    def __init__(self, settings: BleedSettings | None = None, offset: int | None = None) -> None:
        """``offset``: the playback index captured with microphone sample 0, when known (arrays, tests); without
        it, the arrival times given to the ``push_`` methods set it."""
        self.settings = settings or BleedSettings()
        self.report = BleedReport()
        self._mic = _Timeline()
        self._ref = _Timeline()
        self._fixed_offset = offset
        self._done = 0  # next microphone sample to process
        self._gain = 1.0
        self._offset_used = 0
        self._delay: int | None = None
        self._confidence = 0.0  # the current delay's correlation, fading slowly so that a moved path can win
        self._weights: np.ndarray | None = None  # the echo filter's taps, refitted as the delay is tracked
        self._since_search = 0
        self._unmatched = 0  # playback samples searched without finding a delay
        self._searched_to = 0  # the end of the last microphone window searched
        self._searches = 0

    # ------------------------------------------------------------------ feeding
    def push_reference(self, block: np.ndarray, captured_at: float | None = None) -> None:
        """What the computer played (the system audio capture), in order."""
        self._ref.append(block, captured_at, self._ref.end < ALIGN_FOR_S * SAMPLE_RATE)

    def push_microphone(self, block: np.ndarray, captured_at: float | None = None) -> None:
        self._mic.append(block, captured_at, self._mic.end < ALIGN_FOR_S * SAMPLE_RATE)

    @property
    def offset(self) -> int:
        """The playback index captured at the same moment as microphone sample 0."""
        if self._fixed_offset is not None:
            return self._fixed_offset
        if self._mic.began_at is None or self._ref.began_at is None:
            return 0
        return round((self._mic.began_at - self._ref.began_at) * SAMPLE_RATE)

    def pull(self) -> np.ndarray:
        """The cleaned microphone for every whole block whose playback is in (or that waited ``max_wait``).

        Once a delay is known a block waits for the playback at that delay (when the microphone's copy comes
        first, that long, and ``near`` more for the search that follows the delay); until then ``hold_unknown``,
        so that a first copy is found before it passes."""
        s = self.settings
        out: list[np.ndarray] = []
        while self._mic.end - self._done >= s.block:
            if self._delay is not None:
                ahead = max(0, -self._delay) + s.taps + s.near
            else:
                ahead = s.hold_unknown if self._unmatched < s.give_up else 0
            ready = self._ref.end >= self._done + s.block + self.offset + ahead
            if not ready and self._mic.end - self._done < s.max_wait:
                break
            out.append(self._process_block())
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)

    def flush(self) -> np.ndarray:
        """Everything held back, the last partial block included, with the playback there is (the stream ends:
        nothing may be pushed after it)."""
        held = self._mic.end - self._done
        pad = -held % self.settings.block
        if pad:
            self._mic.append(np.zeros(pad, dtype=np.float32), None, False)
        out = [self._process_block() for _ in range((held + pad) // self.settings.block)]
        return np.concatenate(out)[:held] if out else np.zeros(0, dtype=np.float32)

    # ------------------------------------------------------------------ one block
    def _process_block(self) -> np.ndarray:
        s = self.settings
        offset = self.offset
        if offset != self._offset_used and self._delay is not None:
            # A better alignment moved the playback's index, not the room: the same echo is that much later.
            self._delay += offset - self._offset_used
            self._weights = None
        self._offset_used = self.report.offset_samples = offset
        end = self._done + s.block
        self._done = end
        self.report.blocks += 1
        self._since_search += 1
        if self._delay is None or self._since_search >= s.track_every:
            self._search_delay(end, offset)
        self._forget(end, offset)
        mic_block = self._mic.slice(end - s.block, end)
        if self._delay is None:
            return self._ramped(mic_block, 1.0)
        # Tap k pairs microphone sample i with playback sample i + offset - delay - taps/2 + k.
        lead = offset - self._delay - s.taps // 2
        playback = self._ref.slice(end - s.window + lead, end + lead + s.taps - 1)
        if _rms(playback[-(s.block + s.taps - 1) :]) < s.silence_rms:
            return self._ramped(mic_block, 1.0)  # nothing played that this block can hold
        self.report.blocks_with_playback += 1
        if _rms(mic_block) < s.silence_rms:
            return self._ramped(mic_block, 1.0)
        columns = sliding_window_view(playback, s.window)  # (taps, window)
        if self._weights is None or self._since_search == 0:
            self._weights = _fit(np.ascontiguousarray(columns), self._mic.slice(end - s.window, end))
        residual = mic_block - np.asarray(self._weights @ columns[:, -s.block :], dtype=np.float32)
        ratio_db = _db(_energy(residual) / max(_energy(mic_block), 1e-20))
        if ratio_db <= s.explained_db:
            self.report.blocks_suppressed += 1
            self.report.suppressed_db.append(ratio_db)
            return self._ramped(residual, s.floor_gain)
        return self._ramped(residual, 1.0)

    def _search_delay(self, end: int, offset: int) -> None:
        """Cross-correlate the newest microphone window whose playback (over every delay searched) is in with
        that playback; the best normalised peak becomes the delay if it beats the current one's standing. Every
        delay is looked at each time, so a chance likeness found first never hides the real copy."""
        s = self.settings
        self._since_search = 0
        self._searches += 1
        known = self._delay is not None
        if self._delay is not None and self._searches % s.wide_every:
            lo, hi = self._delay - s.near, self._delay + s.near  # following the delay, at the audio passed on
        else:
            lo, hi = s.min_delay, s.max_delay
        # Until a delay is known, windows are searched in turn a window ahead of the block being passed on (the
        # microphone is held back further than that): a first copy is found before any of it passes.
        wanted = max(self._searched_to + s.track_every * s.block, end + (0 if known else s.window))
        ahead = s.near if known else s.hold_unknown
        newest = min(wanted, end + ahead, self._mic.end, self._ref.end - offset + lo - s.taps)
        self._searched_to = max(self._searched_to, newest)
        if newest - s.window < max(self._mic.start, 0):
            return
        mic_window = self._mic.slice(newest - s.window, newest)
        w = mic_window.size
        if _active_share(mic_window, s) < s.min_active:
            # Sound in a small part of the window lines up with some stretch of seconds of playback by chance.
            return
        playback = self._ref.slice(newest - w + offset - hi, newest + offset - lo)
        n = 1 << int(math.ceil(math.log2(playback.size + w)))
        # float64: a float32 transform's rounding, next to a quiet stretch's energy, would look like a match
        wide_mic, wide_playback = mic_window.astype(np.float64), playback.astype(np.float64)
        corr = np.fft.irfft(np.conj(np.fft.rfft(wide_mic, n)) * np.fft.rfft(wide_playback, n), n)
        lags = playback.size - w + 1  # lag L pairs mic[i] with playback[i + L]: delay = hi - L
        power = np.concatenate(([0.0], np.cumsum(np.square(playback, dtype=np.float64))))
        ref_energy = power[w : w + lags] - power[:lags]
        # Where the playback is (nearly) silent a tiny energy would make any product look like a match.
        audible = ref_energy > max(w * s.silence_rms**2, 1e-6 * float(ref_energy.max()))
        if not audible.any():
            return
        if self._delay is None:
            self._unmatched += s.track_every * s.block
        self._confidence *= 0.98  # about halves in 7 s of playback without confirmation
        norm = np.zeros(lags)
        norm[audible] = np.abs(corr[:lags][audible]) / np.sqrt(_energy(mic_window) * ref_energy[audible])
        best = int(np.argmax(norm))
        delay, peak = (
            hi - best,
            min(float(norm[best]), _steady(mic_window, playback[best : best + w], s)),
        )
        if self._delay is not None and abs(delay - self._delay) <= s.taps // 2:
            self._confidence = max(self._confidence, peak)  # the same path, confirmed
            return
        if self._delay is not None:
            # Where both talk, the copy at the delay in use still correlates; a new delay must do clearly better.
            here = hi - self._delay
            current = float(norm[max(0, here - s.taps // 2) : here + s.taps // 2 + 1].max(initial=0.0))
            if peak < current + s.replace_margin:
                return
        if peak >= max(s.min_correlation, s.keep_share * self._confidence):
            self._delay, self._confidence, self._weights = delay, peak, None
            self.report.delay_samples, self.report.correlation = delay, peak
            self.report.delays_found += 1
            self.report.found.append((newest / SAMPLE_RATE, delay, peak))

    def _ramped(self, block: np.ndarray, gain: float) -> np.ndarray:
        """``block`` times ``gain``, ramped from the previous block's gain so a decision never clicks."""
        ramp = np.linspace(self._gain, gain, block.size, dtype=np.float32)
        self._gain = gain
        return np.asarray(block * ramp, dtype=np.float32)

    def _forget(self, end: int, offset: int) -> None:
        s = self.settings
        keep_from = end - s.history
        self._mic.forget_before(keep_from)
        self._ref.forget_before(keep_from + offset - s.max_delay - s.taps)


def _active_share(window: np.ndarray, s: BleedSettings) -> float:
    """The share of ``window``'s blocks with sound (above silence, and within 26 dB of the window's level)."""
    blocks = window[: window.size // s.block * s.block].reshape(-1, s.block).astype(np.float64)
    levels = np.sqrt(np.mean(np.square(blocks), axis=1))
    floor = max(s.silence_rms, 0.05 * float(np.sqrt(np.mean(np.square(levels)))))
    return float(np.mean(levels > floor))


def _steady(mic: np.ndarray, playback: np.ndarray, s: BleedSettings, parts: int = 4) -> float:
    """The median correlation of the parts of a window where both sides have sound: a copy of the playback
    holds all through the window, while a chance likeness (two voices' onsets) holds only in a part of it; most
    parts must have sound on both sides."""
    values = []
    for a, b in zip(np.array_split(mic, parts), np.array_split(playback, parts), strict=True):
        ea, eb = _energy(a), _energy(b)
        if min(ea, eb) > a.size * s.silence_rms**2:
            values.append(abs(float(np.dot(a.astype(np.float64), b.astype(np.float64)))) / math.sqrt(ea * eb))
    return float(np.median(values)) if len(values) > parts // 2 else 0.0


def _fit(columns: np.ndarray, mic_window: np.ndarray) -> np.ndarray:
    """Least-squares taps for ``mic_window`` from the playback ``columns`` (a little ridge: silence is stable)."""
    gram = columns @ columns.T
    ridge = 1e-3 * float(np.trace(gram)) / columns.shape[0] + 1e-9
    return np.linalg.solve(gram + ridge * np.eye(columns.shape[0]), columns @ mic_window)


def remove_bleed(
    microphone: np.ndarray, playback: np.ndarray, settings: BleedSettings | None = None, offset: int = 0
) -> tuple[np.ndarray, BleedReport]:
    """The microphone without the playback it heard (whole arrays; ``offset`` as for ``BleedFilter``)."""
    bleed = BleedFilter(settings, offset)
    bleed.push_reference(playback)
    bleed.push_microphone(microphone)
    cleaned = bleed.flush()
    return cleaned[: microphone.size], bleed.report


def _energy(x: np.ndarray) -> float:
    return float(np.dot(x.astype(np.float64), x.astype(np.float64)))


def _rms(x: np.ndarray) -> float:
    return math.sqrt(_energy(x) / x.size) if x.size else 0.0


def _db(ratio: float) -> float:
    return 10.0 * math.log10(max(ratio, 1e-20))
