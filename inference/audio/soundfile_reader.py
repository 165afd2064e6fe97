"""Every container libsndfile knows (FLAC, OGG Vorbis/Opus, MP3, RF64, AIFF, A-law WAV, ...) read block by block.

``soundfile`` (whose wheels bundle libsndfile) is imported lazily, so a missing install only affects these inputs.
A length the header does not state (a FLAC with STREAMINFO total_samples 0, a stream) is ``None``, not the
2**63 - 1 libsndfile reports: the caller then counts what decodes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np

from inference.audio.wav import CONVERT_FIX
from inference.errors import InputFileError

log = logging.getLogger(__name__)

_DECODE_ERRORS = (RuntimeError, ValueError, TypeError, EOFError)  # LibsndfileError is a RuntimeError
# Frames per read: a read that hits damage fails whole, so small reads keep more of a cut-off file.
_READ_FRAMES = 1 << 14
_UNKNOWN_LENGTH = 1 << 62  # libsndfile's "unknown" is SF_COUNT_MAX; no real file comes near this


class SoundfileReader:
    """One open libsndfile handle; ``blocks`` yields float32 (frames, channels) and sets ``truncated``."""

    def __init__(self, handle: BinaryIO, name: str, head: bytes) -> None:
        try:
            import soundfile
        except (ImportError, OSError) as exc:  # OSError: the wheel's bundled libsndfile failed to load
            raise InputFileError(
                f"{name} is not a WAV file, and reading other formats needs the `soundfile` package ({exc})",
                f"install it with `pip install soundfile`, or {CONVERT_FIX}",
            ) from exc
        self.name, self._head = name, head
        try:
            self._file: Any = soundfile.SoundFile(handle)
        except _DECODE_ERRORS as exc:
            raise InputFileError(
                f"{name} is not an audio file Captioneer can read ({self._why(exc)})", unreadable_fix(head)
            ) from exc
        # soundfile seeks to "where it read up to" after every read of a seekable file; in a FLAC that states no
        # length that seek fails at the end and the last block is lost. Reads here are sequential, so say it is
        # not seekable: soundfile then just reads.
        self._file.seekable = lambda: False
        self.rate, self.channels = int(self._file.samplerate), int(self._file.channels)
        frames = int(self._file.frames)
        self.declared_frames: int | None = frames if 0 < frames < _UNKNOWN_LENGTH else None
        self.truncated = False

    def close(self) -> None:
        self._file.close()

    def blocks(self, block_bytes: int) -> Iterator[np.ndarray]:
        step = max(1, min(_READ_FRAMES, block_bytes // (4 * self.channels)))
        decoded = 0
        while True:
            try:
                block = self._file.read(step, dtype="float32", always_2d=True)
            except _DECODE_ERRORS as exc:
                # A cut-off stream (e.g. FLAC "lost sync"): keep what decoded cleanly, like a truncated WAV.
                if not decoded:
                    raise InputFileError(
                        f"{self.name} is damaged and cannot be decoded ({self._why(exc)})",
                        unreadable_fix(self._head),
                    ) from exc
                self.truncated = True
                log.warning(
                    "%s is damaged or truncated (%s); using the audio decoded before it",
                    self.name,
                    self._why(exc),
                )
                return
            if not len(block):
                break
            decoded += len(block)
            yield block
        # MP3 lengths can be estimates, so only a clear shortfall counts as truncation.
        declared = self.declared_frames
        if declared is not None and decoded < 0.99 * declared:
            self.truncated = True
            log.warning(
                "%s is truncated (%d of %d frames decoded); using what is present",
                self.name,
                decoded,
                declared,
            )

    def _why(self, exc: BaseException) -> str:
        """A decoder's message with the user's file name instead of the file object it names
        (``<_io.BytesIO object at 0x...>``, ``<_io.BufferedReader name='...'>``)."""
        return re.sub(r"<_io\.[^>]*>", self.name, str(exc))


def unreadable_fix(head: bytes) -> str:
    if head[4:8] == b"ftyp":  # ISO media (M4A/MP4/AAC): libsndfile has no AAC decoder
        return f"M4A/MP4/AAC audio is not supported; {CONVERT_FIX}"
    return f"supported are WAV, FLAC, OGG (Vorbis/Opus), MP3, AIFF and RF64; otherwise {CONVERT_FIX}"
