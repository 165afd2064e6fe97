"""Every container libsndfile knows (FLAC, OGG Vorbis/Opus, MP3, RF64, AIFF, A-law WAV, ...) read block by block.

``soundfile`` (whose wheels bundle libsndfile) is imported lazily, so a missing install only affects these inputs.
A length the header does not state (a FLAC with STREAMINFO total_samples 0, a stream) is ``None``, not the
2**63 - 1 libsndfile reports: the caller then counts what decodes.

Damage in the middle of a file (a flipped byte in a FLAC frame, a bad sector) stops libsndfile for good: its
error is sticky, so every read after it returns nothing, and the rest of the recording would be lost. So after a
decode error a fresh decoder is opened and seeked past the damage (libsndfile seeks by sample, which lands on the
next frame that decodes); the frames skipped become silence, so what follows keeps its time.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from inference.audio.ffmpeg_reader import INSTALL_FFMPEG
from inference.audio.ogg_pages import ends_whole
from inference.audio.problems import FileProblems, falls_short
from inference.audio.wav import CONVERT_FIX
from inference.errors import InputFileError

log = logging.getLogger(__name__)

_DECODE_ERRORS = (RuntimeError, ValueError, TypeError, EOFError)  # LibsndfileError is a RuntimeError
# Frames per read: a read that meets damage fails whole (its frames are skipped), so reads stay small; one FLAC
# frame is 4096 samples as most encoders write it.
_READ_FRAMES = 1 << 12
_UNKNOWN_LENGTH = 1 << 62  # libsndfile's "unknown" is SF_COUNT_MAX; no real file comes near this
# After damage at frame p, decoding resumes at the first frame it can seek to among p + 1024, p + 2048, ...: damage
# costs at most this much good audio beyond it. Steps double every _PROBES_PER_STEP failed probes (a hole of n
# frames costs O(log n) probes; the frame found is then bisected back toward the hole's end).
_RESUME_FRAMES = 1 << 10
_PROBES_PER_STEP = 16
# A bound on the seeks one file may cost in all (each opens a decoder and bisects over frames): past it, the file
# is treated as cut off at the damage.
MAX_PROBES = 2048
# Each resumption costs a few seeks (a fresh decoder, a bisection over frames); past this many in one file the
# work is not worth it (a file damaged all through, or crafted to be): the audio before the last one is used.
MAX_RESUMPTIONS = 256


@dataclass
class Damage:
    """What a read skipped: the stretches of damage and the frames that became silence in their place."""

    stretches: int = 0
    resumptions: int = 0  # more than stretches where decoding failed again right where it resumed
    probes: int = 0  # seeks tried to get past the damage
    silent_frames: int = 0
    first_at_frame: int | None = None


class SoundfileReader:
    """One open libsndfile handle; ``blocks`` yields float32 (frames, channels) and sets ``truncated`` and
    ``damage``. ``handle`` must be seekable (a file or a file's bytes): the damage recovery reopens it."""

    def __init__(self, handle: BinaryIO, name: str, head: bytes) -> None:
        try:
            import soundfile
        except (ImportError, OSError) as exc:  # OSError: the wheel's bundled libsndfile failed to load
            raise InputFileError(
                f"{name} is not a WAV file, and reading other formats needs the `soundfile` package ({exc})",
                f"install it with `pip install soundfile`, or {CONVERT_FIX}",
            ) from exc
        self.name, self._head, self._handle, self._soundfile = name, head, handle, soundfile
        try:
            self._file: Any = self._open()
        except _DECODE_ERRORS as exc:
            raise InputFileError(
                f"{name} is not an audio file Captioneer can read ({self._why(exc)})", unreadable_fix(head)
            ) from exc
        self.rate, self.channels = int(self._file.samplerate), int(self._file.channels)
        frames = int(self._file.frames)
        self.declared_frames: int | None = frames if 0 < frames < _UNKNOWN_LENGTH else None
        self.truncated = False
        self.damage = Damage()
        self.problems = FileProblems()

    def _open(self) -> Any:
        self._handle.seek(0)
        opened = self._soundfile.SoundFile(self._handle)
        # soundfile seeks to "where it read up to" after every read of a seekable file; in a FLAC that states no
        # length that seek fails at the end and the last block is lost. Reads here are sequential, so say it is
        # not seekable: soundfile then just reads.
        opened.seekable = lambda: False
        return opened

    def close(self) -> None:
        self._file.close()

    def blocks(self, block_bytes: int) -> Iterator[np.ndarray]:
        step = max(1, min(_READ_FRAMES, block_bytes // (4 * self.channels)))
        position = 0  # frames yielded, silence for damage included
        decoded = 0
        resumed_at = -1  # where decoding last resumed after damage: an error right there is the same stretch
        while True:
            try:
                block = self._file.read(step, dtype="float32", always_2d=True)
            except _DECODE_ERRORS as exc:
                try:
                    resumed = self._resume(position) if self.damage.resumptions < MAX_RESUMPTIONS else None
                except _OutOfProbes:
                    resumed = None
                if resumed is None:
                    self._stop_at_damage(exc, decoded)
                    return
                self._note_damage(position, resumed - position, same_stretch=position == resumed_at)
                yield from _silence(resumed - position, self.channels, step)
                position = resumed_at = resumed
                continue
            if not len(block):
                break
            decoded += len(block)
            position += len(block)
            yield block
        self._report_damage()
        declared = self.declared_frames
        if declared is not None and falls_short(position, declared):
            self.truncated = True
            if self._file.format == "OGG":
                # An Ogg file's length is its last page's: a cut-off file states less. A shortfall is damage
                # inside, whose pages libogg dropped without a trace of where: later audio comes early.
                self._warn(
                    "%s is damaged: %.2f s of its audio could not be decoded and were dropped, so what follows "
                    "the damage comes up to that much early",
                    self.name,
                    (declared - position) / self.rate,
                )
            else:
                self._warn(
                    "%s is truncated (%d of %d frames decoded); using what is present",
                    self.name,
                    position,
                    declared,
                )
        elif self._file.format == "OGG" and ends_whole(self._handle) is False:
            # What libsndfile states is the last whole page's length, so a cut-off Ogg falls short of nothing.
            self.truncated = True
            self._warn(
                "%s may be cut off: it ends without the page that closes an Ogg stream; using the %.2f s present",
                self.name,
                position / self.rate,
            )

    def _stop_at_damage(self, exc: BaseException, decoded: int) -> None:
        """No decoder could be placed past the damage: keep what decoded (a cut-off stream, e.g. FLAC "lost
        sync", is a truncated file), or refuse a file of which nothing decodes."""
        if not decoded:
            raise InputFileError(
                f"{self.name} is damaged and cannot be decoded ({self._why(exc)})",
                unreadable_fix(self._head),
            ) from exc
        self.truncated = True
        self._report_damage()
        self._warn(
            "%s is damaged or truncated (%s); using the audio decoded before it", self.name, self._why(exc)
        )

    def _resume(self, position: int) -> int | None:
        """After a decode error at frame ``position``: the first frame past it, on the ``_RESUME_FRAMES`` grid,
        that a fresh decoder can seek to (``self._file`` is then that decoder), or None when there is none
        (a length the header does not state cannot be sought in)."""
        end = self.declared_frames
        if end is None:
            return None
        self._file.close()
        failed, good, step, probes = position, position, _RESUME_FRAMES, 0
        while True:  # probes at widening steps until a seek succeeds; the last frame is the last try
            if failed >= end - 1:
                return None
            good = min(good + step, end - 1)
            if self._can_seek_to(good):
                break
            failed, probes = good, probes + 1
            if probes % _PROBES_PER_STEP == 0:  # a long hole: wider steps, so its length costs few probes
                step *= 2
        while (
            good - failed > _RESUME_FRAMES
        ):  # bisect back toward the hole's end: little good audio is skipped
            middle = failed + (good - failed) // 2 // _RESUME_FRAMES * _RESUME_FRAMES
            if self._can_seek_to(middle):
                good = middle
            else:
                failed = middle
        # Decoders share the one file handle, so each probe moved it under the others: decode from a fresh one.
        placed = self._placed_at(good)
        if placed is None:
            return None
        self._file = placed
        return good

    def _can_seek_to(self, frame: int) -> bool:
        self.damage.probes += 1
        if self.damage.probes > MAX_PROBES:
            raise _OutOfProbes
        placed = self._placed_at(frame)
        if placed is not None:
            placed.close()
        return placed is not None

    def _placed_at(self, frame: int) -> Any:
        """A fresh decoder seeked to ``frame``, or None where the file cannot be decoded from there."""
        try:
            opened = self._open()
        except _DECODE_ERRORS:
            return None
        try:
            opened.seek(frame)
        except _DECODE_ERRORS:
            opened.close()
            return None
        return opened

    def _note_damage(self, at_frame: int, silent_frames: int, same_stretch: bool) -> None:
        self.damage.stretches += 0 if same_stretch else 1
        self.damage.resumptions += 1
        self.damage.silent_frames += silent_frames
        if self.damage.first_at_frame is None:
            self.damage.first_at_frame = at_frame

    def _report_damage(self) -> None:
        damage = self.damage
        if damage.stretches and damage.first_at_frame is not None:
            where = f"at {damage.first_at_frame / self.rate:.2f} s"
            if damage.stretches > 1:
                where = f"in {damage.stretches} places, the first {where}"
            self._warn(
                "%s is damaged %s: %.2f s of audio could not be decoded and became silence; the rest keeps its time",
                self.name,
                where,
                damage.silent_frames / self.rate,
            )

    def _warn(self, message: str, *args: object) -> None:
        self.problems.add(log, message % args)

    def _why(self, exc: BaseException) -> str:
        """A decoder's message with the user's file name instead of the file object it names
        (``<_io.BytesIO object at 0x...>``, ``<_io.BufferedReader name='...'>``)."""
        return re.sub(r"<_io\.[^>]*>", self.name, str(exc))


class _OutOfProbes(Exception):
    """The file has cost ``MAX_PROBES`` seeks: no more attempts to get past damage."""


def _silence(frames: int, channels: int, step: int) -> Iterator[np.ndarray]:
    """``frames`` of silence in blocks of at most ``step`` (a long hole never becomes one large block)."""
    while frames > 0:
        size = min(step, frames)
        yield np.zeros((size, channels), np.float32)
        frames -= size


_EBML = b"\x1a\x45\xdf\xa3"  # WebM and Matroska


def unreadable_fix(head: bytes) -> str:
    if head[4:8] == b"ftyp" or head[:4] == _EBML:  # ISO media (M4A/MP4/AAC/MOV), WebM, Matroska
        return f"MP4, M4A, WebM and video files are read through ffmpeg: {INSTALL_FFMPEG}, or {CONVERT_FIX}"
    return (
        "supported are WAV, FLAC, OGG (Vorbis/Opus), MP3, AIFF and RF64, and with ffmpeg installed MP4, M4A, "
        f"WebM and video files; otherwise {CONVERT_FIX}"
    )
