"""Speaker bleed: the computer's own playback heard again by its microphone (a laptop without a headset).

In meeting mode the microphone is "You" and what the computer plays is "Others". When the microphone also hears
the speakers, the far end's words reach the "You" stream a second time, a few milliseconds late and a few dB
quieter. ``BleedFilter`` removes that copy from the microphone before it is transcribed:

1. **Alignment.** The two captures start at different moments; each block's arrival time (a monotonic clock)
   gives each stream's start, so a microphone sample is matched with the playback captured at the same moment.
2. **Delay search.** Every ``track_every`` blocks, while something plays, the microphone's last ``window``
   samples are cross-correlated (FFT) with the playback over delays from ``min_delay`` to ``max_delay`` (the
   acoustic delay, a few ms on a laptop, plus what the alignment misses). A normalised peak of at least
   ``min_correlation`` sets the delay; it stays until a better-founded one replaces it.
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
    min_delay: int = -1600  # -100 ms: the alignment may put the microphone early
    max_delay: int = 3200  # 200 ms: acoustic delay plus alignment error
    taps: int = 32  # 2 ms of echo path around the delay
    track_every: int = 5  # blocks between delay searches (100 ms)
    min_correlation: float = 0.3  # normalised cross-correlation that founds a delay
    explained_db: float = -10.0  # residual this far below the microphone: the block is playback
    floor_gain: float = 0.0  # a block of playback is silenced (see 4. above)
    silence_rms: float = 1e-4  # -80 dBFS: no playback, or nothing heard
    max_wait: int = 8000  # microphone samples held back waiting for the playback before going on without it

    @property
    def reach_back(self) -> int:
        """Playback samples needed before a microphone sample (largest delay plus half the filter)."""
        return self.max_delay + self.taps

    @property
    def reach_ahead(self) -> int:
        """Playback samples needed after a microphone sample (negative delays plus half the filter)."""
        return max(0, -self.min_delay) + self.taps


@dataclass
class BleedReport:
    """What the filter did, for the status line, logs and tests."""

    blocks: int = 0
    blocks_with_playback: int = 0
    blocks_suppressed: int = 0
    delay_samples: int | None = None  # the delay in use (microphone after playback), None until one is found
    correlation: float = 0.0  # the normalised cross-correlation that founded it
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
        self._weights: np.ndarray | None = None  # the echo filter's taps, refitted as the delay is tracked

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
        """The cleaned microphone for every whole block whose playback is in (or that waited ``max_wait``)."""
        s = self.settings
        out: list[np.ndarray] = []
        while self._mic.end - self._done >= s.block:
            ready = self._ref.end >= self._done + s.block + self.offset + s.reach_ahead
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
        self._offset_used = offset
        m = self._done
        self._done += s.block
        mic_block = self._mic.slice(m, m + s.block)
        self.report.blocks += 1
        end = m + s.block
        begin = end - s.window
        mic_window = self._mic.slice(begin, end)
        playback = self._ref.slice(begin + offset - s.max_delay, end + offset - s.min_delay)
        self._forget(begin, offset)
        if _rms(playback[-(s.block + s.max_delay - s.min_delay) :]) < s.silence_rms:
            return self._ramped(mic_block, 1.0)  # nothing played: nothing to take out
        self.report.blocks_with_playback += 1
        due = self._delay is None or self.report.blocks_with_playback % s.track_every == 0
        if due:
            self._track_delay(mic_window, playback)
        if self._delay is None or _rms(mic_block) < s.silence_rms:
            return self._ramped(mic_block, 1.0)
        residual = mic_block - self._echo(mic_window, playback, refit=due)
        ratio_db = _db(_energy(residual) / max(_energy(mic_block), 1e-20))
        if ratio_db <= s.explained_db:
            self.report.blocks_suppressed += 1
            self.report.suppressed_db.append(ratio_db)
            return self._ramped(residual, s.floor_gain)
        return self._ramped(residual, 1.0)

    def _track_delay(self, mic_window: np.ndarray, playback: np.ndarray) -> None:
        """The delay (in samples, microphone after playback) with the highest normalised cross-correlation."""
        s = self.settings
        w = mic_window.size
        n = 1 << int(math.ceil(math.log2(playback.size + w)))
        corr = np.fft.irfft(np.conj(np.fft.rfft(mic_window, n)) * np.fft.rfft(playback, n), n)
        lags = playback.size - w + 1  # lag L pairs mic[i] with playback[i + L]: delay = max_delay - L
        power = np.concatenate(([0.0], np.cumsum(np.square(playback, dtype=np.float64))))
        ref_energy = power[w : w + lags] - power[:lags]
        norm = corr[:lags] / np.sqrt(_energy(mic_window) * ref_energy + 1e-20)
        best = int(np.argmax(np.abs(norm)))
        if abs(norm[best]) >= s.min_correlation:
            if self._delay != s.max_delay - best:
                self._weights = None
            self._delay = s.max_delay - best
            self.report.delay_samples, self.report.correlation = self._delay, float(abs(norm[best]))

    def _echo(self, mic_window: np.ndarray, playback: np.ndarray, refit: bool) -> np.ndarray:
        """The block's echo: the playback through ``taps`` around the delay, their weights fitted by least
        squares over ``mic_window`` (again every ``track_every`` blocks: the echo path changes slowly)."""
        s = self.settings
        assert self._delay is not None
        w = mic_window.size
        # Tap k pairs mic[i] with playback[i + first + k]; the taps are centred on the delay's lag.
        first = min(max(0, s.max_delay - self._delay - s.taps // 2), playback.size - w - s.taps + 1)
        if refit or self._weights is None:
            columns = np.ascontiguousarray(sliding_window_view(playback[first : first + w + s.taps - 1], w))
            gram = columns @ columns.T
            ridge = 1e-3 * float(np.trace(gram)) / s.taps + 1e-9
            self._weights = np.linalg.solve(gram + ridge * np.eye(s.taps), columns @ mic_window)
        tail = playback[first + w - s.block : first + w + s.taps - 1]
        return np.asarray(self._weights @ sliding_window_view(tail, s.block), dtype=np.float32)

    def _ramped(self, block: np.ndarray, gain: float) -> np.ndarray:
        """``block`` times ``gain``, ramped from the previous block's gain so a decision never clicks."""
        ramp = np.linspace(self._gain, gain, block.size, dtype=np.float32)
        self._gain = gain
        return np.asarray(block * ramp, dtype=np.float32)

    def _forget(self, mic_begin: int, offset: int) -> None:
        s = self.settings
        self._mic.forget_before(mic_begin)
        # Kept a little longer than the next block needs: a refined alignment may reach back further.
        self._ref.forget_before(mic_begin + offset - s.reach_back - s.window)


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
