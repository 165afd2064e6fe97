"""The one check of audio samples: mono float32 at ``SAMPLE_RATE`` as a 1-D array, every sample finite.

Samples from outside (a caller's array: the app's microphone, the server's decoded body, a file) are checked
where they enter the inference layer: ``protocol.audio_payload`` before they cross to the worker (so a bad push
is refused at once, in the caller's thread), and each engine's and native stream's public entry for in-process
callers (the contract, docs/architecture.md §3.1). Past the worker boundary the wire format carries 1-D float32
and the sender checked the values: the worker and ``SegmentedStream`` take the samples as they are.
"""

from __future__ import annotations

import numpy as np

from inference.contract import SAMPLE_RATE
from inference.errors import UsageError


def checked_samples(pcm: np.ndarray, what: str = "a stream", *, convert: bool = False) -> np.ndarray:
    """``pcm`` as a 1-D float32 array (else a UsageError naming ``what``); with ``convert``, other float
    types are converted rather than refused. NaN or infinite samples are refused."""
    samples = np.asarray(pcm)
    if convert and samples.dtype != np.float32 and np.issubdtype(samples.dtype, np.floating):
        samples = samples.astype(np.float32)
    if samples.ndim != 1 or samples.dtype != np.float32:
        raise UsageError(
            f"{what} takes mono {SAMPLE_RATE} Hz audio as 1-D float32 samples, got {samples.dtype} with "
            f"shape {samples.shape}",
            "downmix, convert and resample first (inference.audio.io.to_mono_16k; integer PCM: "
            "inference.audio.io.decode_raw_pcm)",
        )
    if not np.isfinite(samples).all():
        raise UsageError("the audio holds NaN or infinite samples", "check the audio source or the decoder")
    return samples
