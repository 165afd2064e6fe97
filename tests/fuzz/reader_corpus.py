"""Valid tiny inputs for the reader fuzz tests, the format-aware mutators, and each reader's judge.

The slice in ``test_readers_fuzz.py`` and the long run in ``tests/bench/fuzz_readers.py`` share everything here,
so the bench runs exactly the test's cases, only more of them.
"""

from __future__ import annotations

import io
import json
import random
import re
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from tests.fuzz import harness
from tests.fuzz.reader_common import digest

_PARAKEET_TESTS = str(Path(__file__).resolve().parents[1] / "parakeet_tdt")


def _phonon_builders() -> Any:
    """tests/parakeet_tdt/test_phonon_import (its helpers import siblings by bare name, so its folder joins
    sys.path, but only when a Phonon input is built: at collection it could shadow other folders' modules)."""
    if _PARAKEET_TESTS not in sys.path:
        sys.path.insert(0, _PARAKEET_TESTS)
    import test_phonon_import

    return test_phonon_import


Judge = Callable[[harness.Case, harness.Outcome], str | None]

# ------------------------------------------------------------------------------------------ mutators
_EXTREME_JSON = (
    b"0",
    b"-1",
    b"1e308",
    b"-1e308",
    b"4294967296",
    b"9223372036854775808",
    b"18446744073709551616",
    b"NaN",
    b"Infinity",
    b"1.5",
    b"true",
    b"null",
    b'"x"',
    b"[]",
    b"{}",
    b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
)
_JSON_TOKEN = re.compile(rb'-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|"(?:[^"\\]|\\.)*"|\[\]|true|false|null')


def json_value(data: bytes, rng: random.Random) -> bytes:
    """One JSON number, string, ``[]`` or literal replaced by an extreme or a value of another type."""
    tokens = list(_JSON_TOKEN.finditer(data))
    if not tokens:
        return data
    token = rng.choice(tokens)
    return data[: token.start()] + rng.choice(_EXTREME_JSON) + data[token.end() :]


def prefix_only(mutator: harness.Mutator, length: int) -> harness.Mutator:
    """``mutator`` applied to the first ``length`` bytes (a header), the rest kept."""

    def apply(data: bytes, rng: random.Random) -> bytes:
        return mutator(data[:length], rng) + data[length:]

    return harness.named(f"header_{mutator.__name__}", apply)


# ------------------------------------------------------------------------------------------ GGUF


def gguf_file() -> bytes:
    """An audio.cpp-style package: logical tensor table, embedded files, F32/F16/Q8_0 tensors."""
    from inference.native.package_tensors import NAMES, RANKS, SHAPES

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "package.gguf"
        writer = gguf.GGUFWriter(str(path), "audiocpp")
        writer.add_string("audiocpp.model_spec.family", "parakeet_tdt")
        writer.add_array(NAMES, ["encoder.w", "encoder.b", "joint.q"])
        writer.add_key_value(RANKS, [2, 1, 2], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
        writer.add_key_value(
            SHAPES, [4, 3, 2, 2, 32], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT64
        )
        blob = b'{"a": 1}' + b"tok"
        writer.add_array("audiocpp.embedded_files.names", ["config.json", "vocab.txt"])
        writer.add_key_value(
            "audiocpp.embedded_files.offsets",
            [0, 8, 11],
            gguf.GGUFValueType.ARRAY,
            sub_type=gguf.GGUFValueType.UINT64,
        )
        writer.add_key_value(
            "audiocpp.embedded_files.data",
            list(blob),
            gguf.GGUFValueType.ARRAY,
            sub_type=gguf.GGUFValueType.UINT8,
        )
        writer.add_bool("flag", True)
        writer.add_float32("scale", 0.5)
        writer.add_tensor("_audiocpp.0", np.arange(12, dtype=np.float32).reshape(4, 3))
        writer.add_tensor("_audiocpp.1", np.array([1.5, -2.0], np.float16))
        quantized = gguf.quants.quantize(
            np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32), gguf.GGMLQuantizationType.Q8_0
        )
        writer.add_tensor("_audiocpp.2", quantized, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return path.read_bytes()


def gguf_header_length(data: bytes) -> int:
    from inference.native.gguf_file import GgufFile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "package.gguf"
        path.write_bytes(data)
        with GgufFile(path) as package:
            return min(t.offset for t in package.tensors)


def gguf_judge(case: harness.Case, outcome: harness.Outcome) -> str | None:
    """A result must agree with the gguf package's own reader, tensor by tensor (names, dims, bytes)."""
    if outcome.kind == harness.REFUSED:
        return (
            None
            if "package.gguf" in outcome.message
            else f"a refusal without the file name: {outcome.message}"
        )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "package.gguf"
        path.write_bytes(case.data)
        try:
            reader = gguf.GGUFReader(path)
        except Exception as exc:  # the oracle refuses what ours accepted
            return f"accepted, but gguf.GGUFReader refuses it: {type(exc).__name__}: {exc}"
        theirs = {t.name: (tuple(int(d) for d in t.shape), digest(t.data.tobytes())) for t in reader.tensors}
    for _name, physical, _logical, shape, _type, read in outcome.value["tensors"]:
        if theirs.get(physical) != (tuple(reversed(shape)), read):
            return f"tensor {physical}: read {shape} {read}, gguf.GGUFReader {theirs.get(physical)}"
    return None


# ------------------------------------------------------------------------------------------ safetensors


def safetensors_file() -> bytes:
    from safetensors.numpy import save

    return save(
        {
            "a": np.arange(6, dtype=np.float32).reshape(2, 3),
            "b": np.array([1.5, 2.5, -1, 0], np.float16),
            "c": np.array([7, -7], np.int64),
            "scalar": np.array(3.0, np.float32),
        },
        metadata={"format": "np"},
    )


def safetensors_judge(case: harness.Case, outcome: harness.Outcome) -> str | None:
    """A result must agree with the safetensors library's reader (shapes and bytes of every tensor)."""
    if outcome.kind == harness.REFUSED:
        ok = "model.safetensors" in outcome.message
        return None if ok else f"a refusal without the file name: {outcome.message}"
    from safetensors.numpy import load

    try:
        theirs = load(case.data)
    except Exception as exc:
        return f"accepted, but the safetensors library refuses it: {type(exc).__name__}: {exc}"
    for name, (shape, _type, read) in outcome.value.items():
        expected = theirs.get(name)
        if expected is None or (tuple(expected.shape) or (1,)) != shape or digest(expected.tobytes()) != read:
            return f"tensor {name}: read {shape} {read}, the library {None if expected is None else expected.shape}"
    return None


# ------------------------------------------------------------------------------------------ Phonon-2


def container_file() -> bytes:
    builders = _phonon_builders()
    with tempfile.TemporaryDirectory() as folder:
        return builders.write_container(
            Path(folder) / "model.fermion", builders.small_container_records()
        ).read_bytes()


def named_in_refusal(name: str, *, leave_nothing: bool = False) -> Judge:
    """Refusals name the user's file and never a temporary folder; with ``leave_nothing``, no run leaves bytes."""

    def judge(case: harness.Case, outcome: harness.Outcome) -> str | None:
        if leave_nothing and outcome.disk_left_bytes:
            return f"left {outcome.disk_left_bytes} bytes behind"
        if outcome.kind != harness.REFUSED:
            return None
        if name not in outcome.message:
            return f"a refusal without {name}: {outcome.message}"
        if ".partial" in outcome.message or "/unpacked" in outcome.message or ".archive" in outcome.message:
            return f"a refusal naming a temporary path: {outcome.message}"
        return None

    return judge


@dataclass(frozen=True)
class PhononArchive:
    data: bytes
    sidecars: Path


def phonon_archive(folder: Path) -> PhononArchive:
    """tiny_a's weights as a Phonon container in a zstd tar (as published), and the sidecars to import it."""
    import zstandard

    builders = _phonon_builders()
    unpacked, _exact = builders.phonon_archive_dir(folder)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        tar.add(unpacked, arcname="phonon-2", recursive=False, filter=_reproducible)
        for name in ("model.fermion", "config.json"):
            tar.add(unpacked / name, arcname=f"phonon-2/{name}", filter=_reproducible)
    return PhononArchive(
        zstandard.ZstdCompressor().compress(buffer.getvalue()), builders.sidecars_for(folder)
    )


def _reproducible(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Fixed times and owners, so the archive (and so every mutation of it) is the same on every run."""
    info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", info.mode & 0o755
    return info


def _tar_headers(tar_bytes: bytes) -> list[int]:
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as tar:
        return [member.offset for member in tar.getmembers()]


def _with_checksum(tar_bytes: bytearray, at: int) -> bytes:
    tar_bytes[at + 148 : at + 156] = b" " * 8
    tar_bytes[at + 148 : at + 156] = b"%06o\0 " % sum(tar_bytes[at : at + 512])
    return bytes(tar_bytes)


def member_type(tar_bytes: bytes, rng: random.Random) -> bytes:
    """A member turned into a link, hard link, device, FIFO, sparse file or unknown type (checksum kept valid)."""
    at = rng.choice(_tar_headers(tar_bytes))
    out = bytearray(tar_bytes)
    out[at + 156] = rng.choice(b"1234567SKLx")
    out[at + 157 : at + 257] = b"/etc/passwd".ljust(100, b"\0")  # the link target
    return _with_checksum(out, at)


def member_path(tar_bytes: bytes, rng: random.Random) -> bytes:
    """A member moved to an absolute, ``..``, backslash or empty path (checksum kept valid)."""
    at = rng.choice(_tar_headers(tar_bytes))
    out = bytearray(tar_bytes)
    name = rng.choice(
        (b"../model.fermion", b"/model.fermion", b"a/../../config.json", b"x\\config.json", b"")
    )
    out[at : at + 100] = name.ljust(100, b"\0")
    out[at + 345 : at + 500] = b"\0" * 155  # the ustar prefix, so the name is exactly this
    return _with_checksum(out, at)


def member_size(tar_bytes: bytes, rng: random.Random) -> bytes:
    """A member's size field set to an extreme (octal or base-256), checksum kept valid."""
    at = rng.choice(_tar_headers(tar_bytes))
    out = bytearray(tar_bytes)
    size = rng.choice((0, 1, 511, 513, 1 << 33, (1 << 63) - 1))
    field = b"%011o\0" % size if size < 8**11 else b"\x80" + size.to_bytes(11, "big")
    out[at + 124 : at + 136] = field
    return _with_checksum(out, at)


def in_tar(mutator: harness.Mutator) -> harness.Mutator:
    """``mutator`` applied to the tar inside the zstd frame, which is then compressed again (so the mutation
    reaches the tar reader instead of ending at zstd)."""
    import zstandard

    def apply(data: bytes, rng: random.Random) -> bytes:
        tar_bytes = zstandard.ZstdDecompressor().decompress(data)
        return zstandard.ZstdCompressor().compress(mutator(tar_bytes, rng))

    return harness.named(f"tar_{mutator.__name__}", apply)


ARCHIVE_MUTATORS: tuple[harness.Mutator, ...] = (
    *harness.GENERIC,
    in_tar(member_type),
    in_tar(member_path),
    in_tar(member_size),
    in_tar(harness.flip_bytes),
    in_tar(harness.extreme_field),
    in_tar(harness.truncate),
    in_tar(harness.splice),
)

# ------------------------------------------------------------------------------------------ journal


def _journal_lines() -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"type": "session", "version": 1, "started": 1764589923.1, "model": "Demo", "source": "Microphone"}
    ]
    for segment, text in enumerate(("hello there", " how are you", " fine thanks")):
        lines.append(
            {
                "type": "delta",
                "segment_id": segment,
                "text": text,
                "start_s": segment,
                "end_s": segment + 0.9,
                "at": 1.0,
            }
        )
        lines.append(
            {
                "type": "speech_end",
                "segment_id": segment,
                "text": text,
                "start_s": segment,
                "end_s": segment + 1,
                "at": 2,
            }
        )
    return lines


def journal_file() -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in _journal_lines())


_BAD_LINES = (
    b"[1, 2, 3]",
    b"42",
    b'"just text"',
    b"[" * 50_000,
    b"\xff\xfe\x00garbage",
    b'{"type": "delta", "segment_id": "0", "text": "injected"}',
    b'{"type": "delta", "segment_id": 0, "text": ["a"]}',
    b'{"type": "speech_end", "segment_id": 1, "start_s": null, "end_s": 1, "text": "injected"}',
    b'{"type": "delta", "segment_id": 0.5, "text": "injected"}',
    b'{"type": "delta", "text": "injected"}',
    b'{"type": "session", "started": 1e400, "model": 5}',
    b'{"type": "delta", "segment_id": 0, "text": "' + b"x" * (2 << 20) + b'"}',
)


def bad_line(data: bytes, rng: random.Random) -> bytes:
    """One line (not the header) replaced by a damaged or hostile one that is no valid event."""
    lines = data.split(b"\n")
    at = rng.randrange(1, len(lines) - 1)
    lines[at] = rng.choice(_BAD_LINES)
    return b"\n".join(lines)


JOURNAL_MUTATORS: tuple[harness.Mutator, ...] = (*harness.GENERIC, json_value, bad_line)


def journal_judge(original_text: str) -> Judge:
    """A journal is never refused; where one line is damaged, every segment's text still comes back (each
    segment's delta and speech end carry the same text, so either one restores it)."""

    def judge(case: harness.Case, outcome: harness.Outcome) -> str | None:
        if outcome.kind != harness.RESULT:
            return f"the journal was refused: {outcome.message}"
        if case.mutator == "bad_line" and outcome.value["text"] != original_text:
            return f"text lost to one damaged line: {outcome.value['text']!r}"
        return None

    return judge


# ------------------------------------------------------------------------------------------ settings


def settings_file() -> bytes:
    values = {
        "model": "parakeet",
        "threads": 4,
        "caption_font_size": 18,
        "caption_theme": "dark",
        "overlay_opacity": 0.5,
        "overlay_lines": 3,
        "overlay_text_color": "#ffcc00",
        "overlay_custom_positions": {"HDMI-1": [10, 20]},
        "dictation_padding_ms": 250,
        "push_to_talk_mode": "toggle",
        "future_key": {"kept": [1, 2]},
    }
    return json.dumps(values, indent=2).encode()


def settings_judge(case: harness.Case, outcome: harness.Outcome) -> str | None:
    """Settings always load, and every value the app will use has its type and keeps its rule."""
    from app.settings import Settings
    from app.settings_rules import RULES

    if outcome.kind != harness.RESULT:
        return f"the settings were refused: {outcome.message}"
    defaults = Settings()
    for name, rule in RULES.items():
        value = outcome.value.get(name)
        if not rule(value):
            return f"{name}={value!r} breaks its rule"
    for name, default in vars(defaults).items():
        value = outcome.value.get(name)
        if default is not None and name != "extra" and type(value) is not type(default):
            return f"{name}={value!r} is not a {type(default).__name__}"
    return None
