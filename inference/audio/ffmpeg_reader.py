"""Containers libsndfile cannot read — MP4/M4A/AAC (phone recordings), WebM and Matroska (browser recordings), the
audio track of a video file — through the ``ffmpeg`` command-line tool, where it is installed.

ffmpeg runs as a child process: a demuxer or decoder that crashes on a hostile file ends that process, not the
server or the app. ``ffprobe`` first gives the first audio stream's rate, channel count and duration (so the
limits are checked before anything is decoded, as for every reader), then ``ffmpeg`` streams that stream as
float32 at its own rate and channel count through a pipe: memory holds one block, and the downmix and the
resampler are the ones every other reader goes through. An upload (bytes) is written to a private temporary file
first (an MP4 whose index comes last cannot be read from a pipe) and removed when the reader closes.

``CAPTIONEER_FFMPEG`` names the ffmpeg to use where it is not on ``PATH`` (``ffprobe`` is looked for beside it).
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from inference.audio.problems import FileProblems, falls_short
from inference.errors import InputFileError

log = logging.getLogger(__name__)

FFMPEG_ENV = "CAPTIONEER_FFMPEG"
INSTALL_FFMPEG = (
    "install ffmpeg (`sudo apt install ffmpeg`, `brew install ffmpeg`, `winget install ffmpeg`) and try again"
)
_PROBE_TIMEOUT_S = 60.0  # ffprobe reads headers only; a file it cannot size in a minute is refused
_PROBE_OUTPUT_BYTES = 1 << 16  # the JSON of one stream and the format: a few hundred bytes
_STDERR_LINES = 20  # ffmpeg's last lines, kept for the message when it fails
# ffmpeg's address space when decoding audio is ~300 MB (mostly its libraries): a bound well above that.
CHILD_ADDRESS_SPACE = 2 << 30


@dataclass(frozen=True)
class Ffmpeg:
    ffmpeg: str
    ffprobe: str


def find_ffmpeg(environ: Mapping[str, str] | None = None) -> Ffmpeg | None:
    """ffmpeg and ffprobe from ``CAPTIONEER_FFMPEG`` (when set) or ``PATH``; None when either is missing."""
    environ = os.environ if environ is None else environ
    chosen = environ.get(FFMPEG_ENV)
    ffmpeg = shutil.which(chosen) if chosen else shutil.which("ffmpeg", path=environ.get("PATH"))
    if ffmpeg is None:
        return None
    beside = Path(ffmpeg).with_name("ffprobe" + Path(ffmpeg).suffix)
    ffprobe = shutil.which(str(beside)) or shutil.which("ffprobe", path=environ.get("PATH"))
    return Ffmpeg(ffmpeg, ffprobe) if ffprobe else None


class FfmpegReader:
    """The first audio stream of ``source`` (a path, or a file's bytes) as float32 (frames, channels) blocks."""

    def __init__(self, source: Path | bytes, name: str, tools: Ffmpeg) -> None:
        self.name, self._tools = name, tools
        self._temporary: Path | None = None
        if isinstance(source, bytes):
            source = self._stored(source)
        # "file:" so that a name starting with "-" is no option and one with a colon no protocol
        self._path, self._url = source, f"file:{Path(source).absolute()}"
        self._process: subprocess.Popen[bytes] | None = None
        try:
            self.rate, self.channels, duration = self._probe()
        except BaseException:
            self.close()
            raise
        self.declared_frames: int | None = math.floor(duration * self.rate) if duration else None
        self.truncated = False
        self.problems = FileProblems()

    def _probe(self) -> tuple[int, int, float | None]:
        command = [
            self._tools.ffprobe,
            "-v",
            "error",
            "-select_streams",
            "a:0",
            "-show_entries",
            "stream=codec_name,sample_rate,channels,duration:format=duration",
            "-of",
            "json",
            self._url,
        ]
        try:
            probe = _spawn(command)
        except OSError as exc:
            raise InputFileError(
                f"ffprobe could not be run to read {self.name} ({exc})", INSTALL_FFMPEG
            ) from None
        with probe:
            try:
                output, errors = probe.communicate(timeout=_PROBE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                probe.kill()
                probe.communicate()
                raise InputFileError(f"{self.name} could not be read within {_PROBE_TIMEOUT_S:g} s") from None
        try:
            found = json.loads(output[:_PROBE_OUTPUT_BYTES] or b"{}")
            streams = found.get("streams") or []
            stream = streams[0] if streams else None
        except (ValueError, AttributeError, TypeError):
            stream = None
        if probe.returncode != 0 or not isinstance(stream, dict):
            why = self._named(_last_line(errors)) or "no audio stream"
            raise InputFileError(f"{self.name} is not an audio file Captioneer can read ({why})")
        if stream.get("codec_name") in (None, "", "none"):
            raise InputFileError(
                f"{self.name} is not an audio file Captioneer can read (no decoder for its audio)"
            )
        rate, channels = _integer(stream.get("sample_rate")), _integer(stream.get("channels"))
        if rate is None or channels is None:
            raise InputFileError(f"{self.name} has an audio stream without a sample rate or channel count")
        duration = _seconds(stream.get("duration")) or _seconds((found.get("format") or {}).get("duration"))
        return rate, channels, duration

    def blocks(self, block_bytes: int) -> Iterator[np.ndarray]:
        frame_bytes = 4 * self.channels
        step = max(1, block_bytes // frame_bytes) * frame_bytes
        command = [
            self._tools.ffmpeg,
            "-nostdin",
            "-v",
            "error",
            "-i",
            self._url,
            "-map",
            "0:a:0",
            "-vn",
            # Silence where damage or a timestamp gap left no samples, so the audio after it keeps its time (as
            # for FLAC: docs/audio_input.md §1); bit-identical output for an undamaged file.
            "-af",
            "aresample=async=1",
            "-f",
            "f32le",
            "-acodec",
            "pcm_f32le",
            "-ac",
            str(self.channels),
            "-ar",
            str(self.rate),
            "pipe:1",
        ]
        try:
            process = _spawn(command)
        except OSError as exc:
            raise InputFileError(
                f"ffmpeg could not be run to read {self.name} ({exc})", INSTALL_FFMPEG
            ) from None
        self._process = process
        assert process.stdout is not None and process.stderr is not None
        errors: collections.deque[bytes] = collections.deque(maxlen=_STDERR_LINES)
        drain = threading.Thread(target=lambda: errors.extend(process.stderr or ()), daemon=True)
        drain.start()  # a file with many damaged packets must not fill the pipe and stall ffmpeg
        decoded = 0
        carry = b""
        while chunk := process.stdout.read(step):
            chunk = carry + chunk
            whole = len(chunk) - len(chunk) % frame_bytes
            carry = chunk[whole:]
            if whole:
                decoded += whole // frame_bytes
                yield np.frombuffer(chunk[:whole], dtype="<f4").reshape(-1, self.channels).copy()
        code = process.wait()
        drain.join()
        process.stdout.close()
        process.stderr.close()
        self._process = None
        why = self._named(_last_line(b"".join(errors)))
        if code != 0 and not decoded:
            raise InputFileError(f"{self.name} cannot be decoded ({why or f'ffmpeg exit status {code}'})")
        if code != 0 or falls_short(decoded, self.declared_frames):
            self.truncated = True
            self.problems.add(
                log,
                f"{self.name} is damaged or truncated ({why or f'{decoded} of {self.declared_frames} frames'}); "
                "using the audio decoded before it",
            )
        elif why:  # ffmpeg skipped damaged packets and went on: say so, the audio has a hole
            self.problems.add(log, f"{self.name} has damaged parts that were skipped ({why})")

    def close(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()  # a read abandoned part way (a length limit, a stopped session)
            process.wait()
        if process is not None:
            with contextlib.suppress(OSError):
                for pipe in (process.stdout, process.stderr):
                    if pipe is not None:
                        pipe.close()
        if self._temporary is not None:
            self._temporary.unlink(missing_ok=True)
            self._temporary = None

    def _stored(self, data: bytes) -> Path:
        """An upload in a private temporary file (removed by ``close``)."""
        handle, temporary = tempfile.mkstemp(prefix="captioneer-upload-")
        self._temporary = Path(temporary)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
        except OSError as exc:
            self.close()
            raise InputFileError(
                f"{self.name} could not be stored to be read ({exc.strerror})", "free some disk space"
            ) from None
        return self._temporary

    def _named(self, message: str) -> str:
        """ffmpeg's message with the user's file name in place of the path it was given (an upload's is a
        temporary file the user never saw)."""
        return message.replace(self._url, self.name).replace(str(self._path), self.name)


def _spawn(command: list[str]) -> subprocess.Popen[bytes]:
    """ffmpeg or ffprobe with pipes for its output, its address space bounded (Linux): a hostile file that makes
    it allocate without end fails that process, not the machine. Set just after it starts, before it has read
    the file (it is still loading its libraries)."""
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    if sys.platform.startswith("linux"):
        import resource

        with contextlib.suppress(OSError):  # it may have ended already
            resource.prlimit(process.pid, resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))
    return process


def _integer(value: object) -> int | None:
    try:
        number = int(str(value))
    except ValueError:
        return None
    return number if number > 0 else None


def _seconds(value: object) -> float | None:
    try:
        seconds = float(str(value))
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def _last_line(output: bytes) -> str:
    lines = [line.strip() for line in output.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
