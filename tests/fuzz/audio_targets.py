"""Fuzz targets for the audio readers: an upload read the way the server and
the CLI read it (``FileBlocks`` over the file's bytes: ``WavReader`` or libsndfile, downmix, soxr), summarised as
a picklable dict; refusals are the readers' ``InputFileError``.

For a WAV that ``WavReader`` reads, the target also asks libsndfile to decode the same bytes, so the judge can
compare two independent decoders sample for sample.
"""

from __future__ import annotations

import hashlib
import io
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import soundfile

from inference.audio.decoding import BLOCK_BYTES, FileBlocks, open_audio
from inference.audio.limits import AudioLimits
from inference.audio.wav import WavReader

LIMITS = AudioLimits(600.0, "split it")  # the server's default bound is of this order; a fuzzed file is tiny


def read_upload(path: Path, scratch: Path) -> dict[str, Any]:
    # An upload read through ffmpeg goes through a temporary file: here, where the harness sees what is left.
    tempfile.tempdir = str(scratch)
    data = path.read_bytes()
    source = FileBlocks(data, LIMITS, path.name)
    hasher = hashlib.sha256()
    samples = 0
    finite = True
    peak = 0.0
    for block in source():
        if block.dtype != np.float32 or block.ndim != 1:
            raise TypeError(f"a block of {block.dtype} {block.shape}")
        finite = finite and bool(np.isfinite(block).all())
        if block.size:
            peak = max(peak, float(np.abs(block).max()))
        hasher.update(block.tobytes())
        samples += block.size
    return {
        "samples": samples,
        "expected": source.expected_samples,
        "digest": hasher.hexdigest()[:16],
        "finite": finite,
        "peak": peak,
        "libsndfile": _libsndfile_agrees(data, path.name),
    }


def _libsndfile_agrees(data: bytes, name: str) -> str | None:
    """For a file ``WavReader`` reads: None when libsndfile reads it the same, else what differs ("refused"
    when libsndfile cannot read it at all). Not asked for other formats (libsndfile is their only decoder)."""
    with open_audio(data, name) as reader:
        if not isinstance(reader, WavReader):
            return None
        ours = [block for block in reader.blocks(BLOCK_BYTES)]
        rate, channels = reader.rate, reader.channels
    mine = np.concatenate(ours) if ours else np.zeros((0, channels), np.float32)
    try:
        theirs, their_rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except Exception as exc:  # libsndfile refuses what WavReader read: reported, the judge decides
        return f"refused: {type(exc).__name__}: {str(exc)[:200]}"
    if (their_rate, theirs.shape[1]) != (rate, channels):
        return f"layout: ours {rate} Hz x {channels}, libsndfile {their_rate} Hz x {theirs.shape[1]}"
    if theirs.shape != mine.shape:
        return f"frames: ours {mine.shape[0]}, libsndfile {theirs.shape[0]}"
    if not np.array_equal(theirs, mine, equal_nan=True):
        worst = float(np.nanmax(np.abs(theirs.astype(np.float64) - mine)))
        return f"samples differ (max {worst:.3g})"
    return None
