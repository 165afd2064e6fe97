"""Phonon-2 import: the packed ``model.fermion`` container → the dense Parakeet-TDT layout this project loads.

The archive ``phonon-2.bps.tar.zst`` and the container's record kinds (``five_value``, ``int8``/``int6``,
``fp16``) are described in docs/families/parakeet_tdt.md §7.2. Every tensor is written as float32 under its
transformers name with the nvidia v3 sidecars and the Phonon-2 runtime config. audio.cpp's converter also
compensates for its own loader's quirks, which this loader does not have (docs/families/parakeet_tdt.md §4):
:func:`audiocpp_compensation` computes those transforms so the tests can prove both paths agree.

The output is assembled in a temporary sibling directory and renamed into place when complete, so a failed
or cancelled import leaves nothing that looks installed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from inference.errors import Cancelled, ModelError, UsageError
from inference.families.parakeet_tdt.config import parse_config
from inference.families.parakeet_tdt.phonon_archive import extract_archive

FORMAT = "fermion-five-value-parakeet-v1"
CONTAINER = "model.fermion"
ARCHIVE_CONFIG = "config.json"
SIDECARS = ("config.json", "tokenizer.json", "processor_config.json")
# Published digests as far as the public sources give them (docs/families/parakeet_tdt.md §7.2: only both ends are known).
PUBLISHED_CONTAINER_SHA256 = ("4b6bfa3a", "11468")
PUBLISHED_ARCHIVE_SHA256 = ("98125795", "5309e")
_POINTWISE = re.compile(r"\.conv\.pointwise_conv[12]\.weight$")
_MAX_HEADER = 64 << 20
_MAX_ELEMENTS = 1 << 27  # per record (512 MB as float32); the largest real Parakeet tensor has ~5M
_KINDS = ("five_value", "int8", "int6", "fp16")
_POW3 = np.array([1, 3, 9, 27, 81], dtype=np.uint8)
_SIDECAR_FIX = "download the sidecars of nvidia/parakeet-tdt-0.6b-v3 at the pinned revision again"
Progress = Callable[[int, int | None, str], None]


@dataclass(frozen=True)
class Record:
    name: str  # the record's name in the container (a module name for five_value records)
    kind: str
    shape: tuple[int, ...]
    size: int
    offset: int  # absolute file offset of the record's bytes

    @property
    def tensor_name(self) -> str:
        return self.name + ".weight" if self.kind == "five_value" else self.name

    @property
    def dropped(self) -> bool:
        return self.name.endswith("num_batches_tracked")

    @property
    def dense_shape(self) -> tuple[int, ...]:
        if len(self.shape) == 2 and _POINTWISE.search(self.tensor_name):
            return (*self.shape, 1)
        return self.shape


# ------------------------------------------------------------------------------------------ reading


def read_index(fh: IO[bytes], source: str) -> list[Record]:
    """The record table of a container, checked against the file size (truncation, trailing bytes)."""
    fh.seek(0, os.SEEK_END)
    file_size = fh.tell()
    fh.seek(0)
    head = fh.read(8)
    if len(head) < 8:
        raise ModelError(f"{source} is truncated: it has no container header", "download the archive again")
    header_len = int.from_bytes(head, "little")
    if header_len > min(_MAX_HEADER, file_size - 8):
        raise ModelError(
            f"{source} is truncated or not a Phonon container (header of {header_len} bytes)",
            "download the archive again",
        )
    try:
        header = json.loads(fh.read(header_len))
    except (ValueError, RecursionError) as exc:  # JSON and UTF-8 errors are ValueErrors
        raise ModelError(f"{source} has an unreadable header: {exc}", "download the archive again") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        found = header.get("format") if isinstance(header, dict) else None
        raise ModelError(
            f"{source} is format {found!r}, not {FORMAT!r}", "use the Phonon-2 archive this version supports"
        )
    index = header.get("index") or []
    if not isinstance(index, list):
        raise ModelError(f"{source}: its index is not a list of records", "download the archive again")
    records: list[Record] = []
    offset = 8 + header_len
    for i, entry in enumerate(index):
        try:
            record = Record(
                str(entry["n"]),
                str(entry["k"]),
                tuple(int(d) for d in entry["shape"]),
                int(entry["b"]),
                offset,
            )
        except (KeyError, TypeError, ValueError):
            raise ModelError(
                f"{source}: record {i} of the index is malformed", "download the archive again"
            ) from None
        if record.size < 0 or any(d < 0 for d in record.shape):
            raise ModelError(
                f"{source}: record {record.name!r} has a negative size", "download the archive again"
            )
        _check_record_size(record, source)
        offset += record.size
        records.append(record)
    if not records:
        raise ModelError(f"{source} holds no records", "download the archive again")
    if offset > file_size:
        raise ModelError(
            f"{source} is truncated: its records need {offset} bytes, the file has {file_size}",
            "download the archive again",
        )
    if offset < file_size:
        raise ModelError(
            f"{source} has {file_size - offset} bytes after its last record", "download the archive again"
        )
    return records


def _check_record_size(record: Record, source: str) -> None:
    """The record's size against what its kind and shape need, before any of its bytes are read or decoded."""
    if record.kind not in _KINDS:
        raise ModelError(
            f"{source}: container record {record.name!r} has unknown kind {record.kind!r}",
            "update Captioneer",
        )
    total = math.prod(record.shape)
    if total > _MAX_ELEMENTS:
        raise ModelError(
            f"{source}: container record {record.name!r} claims {total} values (at most {_MAX_ELEMENTS})",
            "download the archive again",
        )
    rows = record.shape[0] if record.shape else 0
    if record.kind == "five_value":
        if len(record.shape) != 2:
            raise ModelError(
                f"{source}: five_value record {record.name!r} has shape {list(record.shape)}, not 2-D",
                "download the archive again",
            )
        least = rows * -(-record.shape[1] // 5) + 4 * rows
        if not least <= record.size <= least + -(-total // 8):
            raise _size_error(record, least, source)
        return
    if record.kind in ("int8", "int6") and rows == 0:
        raise ModelError(
            f"{source}: container record {record.name!r} has no rows", "download the archive again"
        )
    needed = {"int8": total + 2 * rows, "int6": 3 * -(-total // 4) + 2 * rows, "fp16": 2 * total}[record.kind]
    if record.size != needed:
        raise _size_error(record, needed, source)


def _size_error(record: Record, expected: int, source: str = "") -> ModelError:
    where = f"{source}: " if source else ""
    return ModelError(
        f"{where}container record {record.name!r} ({record.kind} {list(record.shape)}) has {record.size} bytes, "
        f"its shape needs {expected}",
        "download the archive again",
    )


def decode_five_value(record: Record, blob: bytes) -> np.ndarray:
    if len(record.shape) != 2:
        raise ModelError(
            f"five_value record {record.name!r} has shape {list(record.shape)}, not 2-D",
            "download the archive again",
        )
    rows, cols = record.shape
    row_bytes = -(-cols // 5)
    code_end = rows * row_bytes
    if len(blob) < code_end + 4 * rows:
        raise _size_error(record, code_end + 4 * rows)
    packed = np.frombuffer(blob, np.uint8, count=code_end).reshape(rows, row_bytes)
    if (packed >= 243).any():  # 3^5: five base-3 digits never exceed 242
        raise ModelError(
            f"container record {record.name!r} holds invalid base-3 codes", "download the archive again"
        )
    digits = (packed[:, :, None] // _POW3) % 3
    codes = digits.reshape(rows, row_bytes * 5)[:, :cols]
    nonzero = codes != 1
    count = int(np.count_nonzero(nonzero))
    flag_end = code_end + -(-count // 8)
    if len(blob) != flag_end + 4 * rows:
        raise _size_error(record, flag_end + 4 * rows)
    flags = np.unpackbits(
        np.frombuffer(blob, np.uint8, count=flag_end - code_end, offset=code_end), bitorder="little"
    )
    high = np.zeros((rows, cols), dtype=bool)
    high[nonzero] = flags[:count].astype(bool)
    levels = np.frombuffer(blob, np.float16, count=2 * rows, offset=flag_end).astype(np.float32)
    low_level, high_level = levels[:rows, None], levels[rows:, None]
    sign = codes.astype(np.float32) - 1.0
    return sign * np.where(high, high_level, low_level)


def decode_int(record: Record, blob: bytes, bits: int) -> np.ndarray:
    if not record.shape or record.shape[0] == 0:
        raise ModelError(f"container record {record.name!r} has no rows", "download the archive again")
    rows = record.shape[0]
    total = math.prod(record.shape)
    body = len(blob) - 2 * rows
    if bits == 8:
        needed = total
    elif bits == 6:
        needed = 3 * -(-total // 4)
    else:
        raise ModelError(f"container record {record.name!r} has unknown kind int{bits}", "update Captioneer")
    if body != needed:
        raise _size_error(record, needed + 2 * rows)
    if bits == 8:
        codes = np.frombuffer(blob, np.int8, count=total).astype(np.float32)
    else:
        triples = np.frombuffer(blob, np.uint8, count=body).reshape(-1, 3).astype(np.uint32)
        word = triples[:, 0] | (triples[:, 1] << 8) | (triples[:, 2] << 16)
        fields = (word[:, None] >> np.array([0, 6, 12, 18], dtype=np.uint32)) & 0x3F
        codes = fields.reshape(-1)[:total].astype(np.float32) - 32.0
    scales = np.frombuffer(blob, np.float16, count=rows, offset=body).astype(np.float32)
    return (codes.reshape(rows, total // rows) * scales[:, None]).reshape(record.shape)


def decode_record(record: Record, blob: bytes) -> np.ndarray:
    """The record as a dense float32 tensor of ``record.dense_shape``."""
    if len(blob) != record.size:
        raise ModelError(f"container record {record.name!r} is truncated", "download the archive again")
    if record.kind == "five_value":
        dense = decode_five_value(record, blob)
    elif record.kind.startswith("int") and record.kind[3:].isdigit():
        dense = decode_int(record, blob, int(record.kind[3:]))
    elif record.kind == "fp16":
        expected = 2 * math.prod(record.shape)
        if len(blob) != expected:
            raise _size_error(record, expected)
        dense = np.frombuffer(blob, np.float16).astype(np.float32).reshape(record.shape)
    else:
        raise ModelError(
            f"container record {record.name!r} has unknown kind {record.kind!r}", "update Captioneer"
        )
    return np.ascontiguousarray(dense, dtype=np.float32).reshape(record.dense_shape)


def read_container(path: Path, source: str | None = None) -> Iterator[tuple[str, np.ndarray]]:
    """(transformers name, float32 tensor) for every kept record, one at a time (bounded memory).

    ``source`` names the container in errors (the user's archive, not a temporary path); default: ``path``.
    """
    source = source or str(path)
    with path.open("rb") as fh:
        for record in read_index(fh, source):
            if record.dropped:
                continue
            fh.seek(record.offset)
            try:
                dense = decode_record(record, fh.read(record.size))
            except ModelError as exc:
                raise ModelError(f"{source}: {exc.message}", exc.fix) from None
            yield record.tensor_name, dense


def audiocpp_compensation(name: str, tensor: np.ndarray, running_var: np.ndarray | None = None) -> np.ndarray:
    """The audio.cpp converter's transforms (a) and (b) (docs/families/parakeet_tdt.md §7.2), for loaders that scale by 32 and
    floor BatchNorm variances. This project's loader needs the plain weights; see the module doc."""
    if name.startswith("encoder.subsampling.linear."):
        scaled = tensor / np.float32(32.0)
        if not np.array_equal(scaled * np.float32(32.0), tensor):
            raise ModelError(f"{name} does not survive the 1/32 compensation exactly", "report this model")
        return scaled
    if name.endswith(".conv.norm.weight"):
        if running_var is None:
            raise UsageError("the BatchNorm gamma fix needs the layer's running_var")
        var = running_var.astype(np.float64)
        return (tensor * np.sqrt((np.maximum(var, 1e-5) + 1e-5) / (var + 1e-5))).astype(np.float32)
    return tensor


# ------------------------------------------------------------------------------------------ writing


def write_safetensors(
    path: Path,
    records: list[Record],
    tensors: Iterator[tuple[str, np.ndarray]],
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
) -> int:
    """Streams float32 tensors into a safetensors file whose header is known from the record table."""
    kept = [r for r in records if not r.dropped]
    header: dict[str, Any] = {}
    offset = 0
    for record in kept:
        size = 4 * math.prod(record.dense_shape)
        header[record.tensor_name] = {
            "dtype": "F32",
            "shape": list(record.dense_shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    if len(header) != len(kept):
        raise ModelError("the container names a tensor twice", "download the archive again")
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(encoded)))
        out.write(encoded)
        for i, (name, tensor) in enumerate(tensors):
            if cancel is not None and cancel.is_set():
                raise Cancelled("the Phonon-2 import was cancelled")
            expected = kept[i]
            if name != expected.tensor_name or tensor.shape != expected.dense_shape:
                raise ModelError(
                    f"container record {name!r} does not match its index entry", "download the archive again"
                )
            out.write(np.ascontiguousarray(tensor, dtype="<f4").tobytes())
            if progress is not None:
                progress(i + 1, len(kept), f"converting {name}")
    return len(kept)


def punctuation_ids(vocabulary: list[str]) -> list[int]:
    """Ids of pieces without an alphanumeric character (Python ``str.isalnum``), sorted."""
    return [i for i, piece in enumerate(vocabulary) if not any(c.isalnum() for c in piece)]


def archive_vocabulary(config: Any, source: str) -> list[str]:
    vocab = config.get("vocabulary") if isinstance(config, dict) else None
    if vocab is None and isinstance(config, dict) and isinstance(config.get("joint"), dict):
        vocab = config["joint"].get("vocabulary")
    if not (isinstance(vocab, list) and vocab and all(isinstance(p, str) for p in vocab)):
        raise ModelError(f"{source} has no vocabulary (joint.vocabulary)", "download the archive again")
    return vocab


def tokenizer_pieces(tokenizer_json: str, count: int, source: Path | None = None) -> list[str]:
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_str(tokenizer_json)
    except Exception as exc:  # tokenizers raises plain Exceptions for malformed JSON
        raise ModelError(f"{source or 'tokenizer.json'} is not a tokenizer: {exc}", _SIDECAR_FIX) from None
    return [tok.id_to_token(i) or "" for i in range(count)]


def _read_sidecars(sidecars: Path) -> tuple[dict[str, Any], str]:
    """The sidecar config (a JSON object) and tokenizer text, refused by name when unreadable."""
    try:
        config = json.loads((sidecars / "config.json").read_text(encoding="utf-8"))
        tokenizer_json = (sidecars / "tokenizer.json").read_text(encoding="utf-8")
    except (OSError, ValueError, RecursionError) as exc:
        raise ModelError(f"the sidecars in {sidecars} are unreadable: {exc}", _SIDECAR_FIX) from None
    if not isinstance(config, dict):
        raise ModelError(f"{sidecars / 'config.json'} is not a JSON object", _SIDECAR_FIX)
    return config, tokenizer_json


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_digest(path: Path, expected: str | tuple[str, str]) -> None:
    """``expected``: a full sha256, or the (head, tail) fragments the public sources give."""
    actual = sha256_of(path)
    ok = (
        actual == expected
        if isinstance(expected, str)
        else actual.startswith(expected[0]) and actual.endswith(expected[1])
    )
    if not ok:
        shown = expected if isinstance(expected, str) else f"{expected[0]}…{expected[1]}"
        raise ModelError(f"{path.name} has sha256 {actual}, expected {shown}", "download the archive again")


def convert_phonon2(
    source: Path,
    sidecars: Path,
    out_dir: Path,
    *,
    expected_sha256: str | tuple[str, str] | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> Path:
    """Writes the dense Phonon-2 checkpoint to ``out_dir`` (which must not exist) and returns it.

    ``source``: the ``.tar.zst`` archive, or a folder with ``model.fermion`` and ``config.json``.
    ``sidecars``: a folder with the nvidia v3 ``config.json``, ``tokenizer.json``, ``processor_config.json``.
    ``expected_sha256``: checked against the archive (or the container when ``source`` is a folder).
    """
    if out_dir.exists():
        raise UsageError(f"{out_dir} already exists", "remove it or pick another folder")
    missing = [name for name in SIDECARS if not (sidecars / name).is_file()]
    if missing:
        raise ModelError(
            f"{sidecars} lacks {', '.join(missing)} (nvidia/parakeet-tdt-0.6b-v3 sidecars)",
            "download them from nvidia/parakeet-tdt-0.6b-v3",
        )
    work = out_dir.with_name(f".{out_dir.name}.partial-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        if source.is_dir():
            unpacked = source
            if expected_sha256 is not None:
                check_digest(source / CONTAINER, expected_sha256)
        else:
            if expected_sha256 is not None:
                check_digest(source, expected_sha256)
            unpacked = work / ".archive"
            unpacked.mkdir()
            extract_archive(source, unpacked, frozenset({CONTAINER, ARCHIVE_CONFIG}))
        container = unpacked / CONTAINER
        # Errors name what the user passed (the archive and its member), never the temporary folder.
        label = f"{source.name} (member {CONTAINER})" if unpacked is not source else str(container)
        config_label = (
            f"{source.name} (member {ARCHIVE_CONFIG})"
            if unpacked is not source
            else str(unpacked / ARCHIVE_CONFIG)
        )
        try:
            archive_config = json.loads((unpacked / ARCHIVE_CONFIG).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:  # JSON and UTF-8 errors are ValueErrors
            raise ModelError(f"{config_label} is unreadable: {exc}", "download the archive again") from None
        vocabulary = archive_vocabulary(archive_config, config_label)
        config, tokenizer_json = _read_sidecars(sidecars)
        if tokenizer_pieces(tokenizer_json, len(vocabulary), sidecars / "tokenizer.json") != vocabulary:
            raise ModelError(
                f"the sidecar {sidecars / 'tokenizer.json'} does not spell the archive's vocabulary ({config_label})",
                "use the sidecars of nvidia/parakeet-tdt-0.6b-v3 at the pinned revision",
            )
        config["audiocpp_word_timestamp_mode"] = "token_duration"
        config["audiocpp_punctuation_token_ids"] = punctuation_ids(vocabulary)
        parse_config(
            config, None, "the converted config.json"
        )  # refuse now what the engine would refuse later
        with container.open("rb") as fh:
            records = read_index(fh, label)
        count = write_safetensors(
            work / "model.safetensors", records, read_container(container, label), cancel, progress
        )
        (work / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        for name in ("tokenizer.json", "processor_config.json"):
            shutil.copyfile(sidecars / name, work / name)
        shutil.rmtree(work / ".archive", ignore_errors=True)
        (work / "phonon2_import.json").write_text(
            json.dumps({"format": FORMAT, "records": len(records), "tensors": count}, indent=2) + "\n",
            encoding="utf-8",
        )
        os.replace(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out_dir
