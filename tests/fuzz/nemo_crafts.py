"""Hostile ``.nemo`` archives and torch zip checkpoints, crafted one property at a time, and the format-aware
mutators the ``.nemo`` fuzz test adds to the harness's generic ones.

The valid starting point is the tiny ``.nemo`` that ``tests/parakeet_tdt/nemo_package.py`` builds from the
``tiny_b`` fixture (no torch). Checkpoints here are written opcode by opcode so a test can put a BUILD, a
broadcast stride or a compressed storage exactly where it wants one.
"""

from __future__ import annotations

import gzip
import io
import pickletools
import random
import struct
import sys
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz.harness import GENERIC, Mutator, named

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parakeet_tdt"))
from nemo_package import TOKENIZER_MEMBER, build_nemo  # noqa: E402
from parakeet_fixtures import model_dir  # noqa: E402

WEIGHTS = "model_weights.ckpt"
CONFIG = "model_config.yaml"
TOKENIZER = TOKENIZER_MEMBER


def tiny_nemo(out: Path) -> Path:
    return build_nemo(model_dir("tiny_b"), out)


# ------------------------------------------------------------------------------------------ torch zip


def _text(value: str) -> bytes:
    raw = value.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _int(value: int) -> bytes:
    if -(2**31) <= value < 2**31:
        return b"J" + struct.pack("<i", value)
    raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw  # LONG1


def _ints(values: tuple[int, ...]) -> bytes:
    return b"(" + b"".join(_int(v) for v in values) + b"t"


def build_op(field: str, value: int | tuple[int, ...]) -> bytes:
    """A BUILD setting ``field`` of the object on top of the stack (the state is a dict)."""
    encoded = _int(value) if isinstance(value, int) else _ints(value)
    return b"}" + _text(field) + encoded + b"sb"


@dataclass(frozen=True)
class Tensor:
    name: str
    key: str  # its storage entry data/<key>
    numel: int  # the storage's element count as the pickle states it
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int = 0
    storage_type: str = "FloatStorage"
    after: bytes = b""  # opcodes right after the tensor is built (e.g. a BUILD)


def state_dict_pickle(tensors: list[Tensor]) -> bytes:
    """What ``torch.save`` pickles for an OrderedDict of these tensors (protocol 2)."""
    out = bytearray(b"\x80\x02ccollections\nOrderedDict\n)R(")
    for t in tensors:
        out += _text(t.name) + b"ctorch._utils\n_rebuild_tensor_v2\n("
        out += b"(" + _text("storage") + f"ctorch\n{t.storage_type}\n".encode() + _text(t.key) + _text("cpu")
        out += _int(t.numel) + b"tQ" + _int(t.offset) + _ints(t.shape) + _ints(t.stride)
        out += b"\x89ccollections\nOrderedDict\n)Rt" + b"R" + t.after
    return bytes(out + b"u.")


def checkpoint(
    tensors: list[Tensor],
    storages: dict[str, bytes],
    compression: dict[str, int] | None = None,
    pickled: bytes | None = None,
) -> bytes:
    """A torch zip checkpoint; ``compression`` gives an entry (``data/<key>``) another zip method."""
    methods = compression or {}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", pickled if pickled is not None else state_dict_pickle(tensors))
        archive.writestr("archive/byteorder", "little")
        for key, blob in storages.items():
            entry = f"data/{key}"
            archive.writestr(f"archive/{entry}", blob, compress_type=methods.get(entry, zipfile.ZIP_STORED))
        archive.writestr("archive/version", "3\n")
    return buffer.getvalue()


def set_declared_size(data: bytes, entry: str, size: int) -> bytes:
    """The zip with ``entry``'s uncompressed size in its central directory record set to ``size`` (zip64
    extra field when it does not fit 32 bits is not written: the value is clipped, as a forger would)."""
    out = bytearray(data)
    at = 0
    while (at := out.find(b"PK\x01\x02", at)) >= 0:
        name_len = struct.unpack_from("<H", out, at + 28)[0]
        if out[at + 46 : at + 46 + name_len].decode() == entry:
            struct.pack_into("<I", out, at + 24, min(size, 0xFFFFFFFE))
            return bytes(out)
        at += 46
    raise KeyError(entry)


# ------------------------------------------------------------------------------------------ tar members


def members(nemo: bytes) -> list[tuple[tarfile.TarInfo, bytes]]:
    out = []
    with tarfile.open(fileobj=io.BytesIO(nemo)) as tar:
        for info in tar.getmembers():
            stream = tar.extractfile(info)
            out.append((info, stream.read() if stream is not None else b""))
    return out


def pack(entries: list[tuple[tarfile.TarInfo, bytes]], gzip: bool = False) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if gzip else "w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in entries:
            if info.isreg():
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return buffer.getvalue()


def member_data(nemo: bytes, base: str) -> bytes:
    return next(data for info, data in members(nemo) if Path(info.name).name == base)


def replace_member(nemo: bytes, base: str, data: bytes) -> bytes:
    return pack([(info, data if Path(info.name).name == base else old) for info, old in members(nemo)])


def odd_member(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.devmajor, info.devminor = 1, 3
    return info


def with_header_size(tar: bytes, base: str, size: int) -> bytes:
    """The tar with ``base``'s header claiming ``size`` bytes (base-256 when octal cannot hold it), its
    checksum fixed, its data and everything after it unchanged."""
    out = bytearray(tar)
    at = 0
    while at + 512 <= len(out):
        name = out[at : at + 100].split(b"\0")[0].decode()
        old = int(out[at + 124 : at + 136].split(b"\0")[0].strip() or b"0", 8)
        if Path(name).name == base:
            field = f"{size:011o}".encode() + b"\0" if size < 8**11 else b"\x80" + size.to_bytes(11, "big")
            out[at + 124 : at + 136] = field
            out[at + 148 : at + 156] = b" " * 8
            out[at + 148 : at + 156] = f"{sum(out[at : at + 512]):06o}".encode() + b"\0 "
            return bytes(out)
        at += 512 + (old + 511) // 512 * 512
    raise KeyError(base)


def edit_pickle(nemo: bytes, edit: Callable[[bytes], bytes]) -> bytes:
    """The .nemo with its checkpoint's data.pkl replaced by ``edit(data.pkl)``."""
    return _in_member(WEIGHTS, _in_pickle(lambda data, _rng: edit(data)))(nemo, random.Random(0))


def build_after_first_tensor(data: bytes, build: bytes) -> bytes:
    """``build`` inserted right after the first tensor of a pickle that nemo_package.torch_zip wrote."""
    at = data.index(b")RtR") + 4  # the metadata OrderedDict, the argument tuple, the tensor's REDUCE
    return data[:at] + build + data[at:]


# ------------------------------------------------------------------------------------------ mutators


def _in_member(base: str, mutate: Mutator) -> Mutator:
    def apply(data: bytes, rng: random.Random) -> bytes:
        return replace_member(data, base, mutate(member_data(data, base), rng))

    return apply


def _in_pickle(mutate: Mutator) -> Mutator:
    def apply(ckpt: bytes, rng: random.Random) -> bytes:
        buffer = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(ckpt)) as source, zipfile.ZipFile(buffer, "w") as out:
            for info in source.infolist():
                blob = source.read(info)
                out.writestr(info, mutate(blob, rng) if info.filename.endswith("/data.pkl") else blob)
        return buffer.getvalue()

    return apply


_OPCODES = [
    b"b",  # BUILD
    b"R",  # REDUCE
    b"s",  # SETITEM
    b"u",  # SETITEMS
    b"0",  # POP
    b"2",  # DUP
    b"(",  # MARK
    b"t",  # TUPLE
    b")",  # EMPTY_TUPLE
    b"}",  # EMPTY_DICT
    b"]",  # EMPTY_LIST
    b"N",  # NONE
    b".",  # STOP
    b"Q",  # BINPERSID
    b"\x88",  # NEWTRUE
    b"J\xff\xff\xff\x7f",  # BININT 2**31-1
    b"J\x00\x00\x00\x80",  # BININT -2**31
    b"\x8a\x09" + b"\xff" * 8 + b"\x7f",  # LONG1 huge
    b"ctorch\nFloatStorage\n",
    b"ctorch._utils\n_rebuild_tensor_v2\n",
    b"cbuiltins\neval\n",
    b"cposix\nsystem\n",
    b"h\x01",  # BINGET 1
    b"q\x01",  # BINPUT 1
]


def _opcodes(data: bytes) -> list[tuple[str, int]]:
    """(opcode, position) of every opcode of the pickle."""
    return [(op.code, int(pos or 0)) for op, _arg, pos in pickletools.genops(data)]


def _next_opcode(data: bytes, at: int) -> int:
    return next((pos for _code, pos in _opcodes(data) if pos > at), len(data))


def pickle_opcode(data: bytes, rng: random.Random) -> bytes:
    """One opcode inserted before, or put in place of, an opcode of the pickle."""
    at = rng.choice(_opcodes(data))[1]
    end = _next_opcode(data, at)
    new = rng.choice(_OPCODES)
    return data[:at] + new + (data[at:] if rng.random() < 0.5 else data[end:])


_FIELDS = ("stride", "offset", "shape", "storage", "numel", "key", "name", "dtype")
_VALUES: list[int | tuple[int, ...]] = [
    0,
    1,
    -1,
    2**31 - 1,
    2**62,
    -(2**62),
    (0,),
    (1 << 40,),
    (-1, 1),
    (3, 0),
    (),
]


def pickle_build(data: bytes, rng: random.Random) -> bytes:
    """A BUILD rewriting a field of whatever the pickle just built (a tensor, a storage, a dict)."""
    at = rng.choice([pos for code, pos in _opcodes(data) if code in ("R", "Q", "c")])
    end = _next_opcode(data, at)
    return data[:end] + build_op(rng.choice(_FIELDS), rng.choice(_VALUES)) + data[end:]


def _zip_headers(mutate: Mutator) -> Mutator:
    """``mutate`` on the zip's structure only: its headers and central directory, not the entries' data."""

    def apply(ckpt: bytes, rng: random.Random) -> bytes:
        with zipfile.ZipFile(io.BytesIO(ckpt)) as archive:
            data_ranges = []
            for info in archive.infolist():
                name_len, extra_len = struct.unpack_from("<HH", ckpt, info.header_offset + 26)
                start = info.header_offset + 30 + name_len + extra_len
                data_ranges.append((start, start + info.compress_size))
        gaps, previous = [], 0
        for start, end in sorted(data_ranges):
            gaps.append((previous, start))
            previous = end
        gaps = [(a, b) for a, b in [*gaps, (previous, len(ckpt))] if b > a]
        start, end = rng.choices(gaps, weights=[b - a for a, b in gaps])[0]
        at = rng.randrange(start, end)
        window = ckpt[at : at + 8]
        return ckpt[:at] + mutate(window, rng)[:8].ljust(len(window), b"\0")[: len(window)] + ckpt[at + 8 :]

    return apply


def recompress(ckpt: bytes, rng: random.Random) -> bytes:
    """The same checkpoint with one entry stored with another zip method (deflate, bzip2 or lzma)."""
    method = rng.choice((zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA))
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(ckpt)) as source, zipfile.ZipFile(buffer, "w") as out:
        infos = source.infolist()
        chosen = rng.randrange(len(infos))
        for i, info in enumerate(infos):
            out.writestr(
                info.filename, source.read(info), compress_type=method if i == chosen else info.compress_type
            )
    return buffer.getvalue()


def _gzipped(mutate: Mutator) -> Mutator:
    """``mutate`` on the gzip-compressed archive (old NeMo versions wrote ``.nemo`` files as tar.gz)."""

    def apply(data: bytes, rng: random.Random) -> bytes:
        return mutate(gzip.compress(data, compresslevel=1, mtime=0), rng)

    return apply


def tar_header(data: bytes, rng: random.Random) -> bytes:
    """A generic mutation inside one of the outer tar's 512-byte header blocks."""
    starts = []
    at = 0
    while at + 512 <= len(data) and data[at : at + 512].strip(b"\0"):
        starts.append(at)
        size = int(data[at + 124 : at + 136].split(b"\0")[0].strip() or b"0", 8)
        at += 512 + (size + 511) // 512 * 512
    at = rng.choice(starts)
    block = rng.choice((GENERIC[0], GENERIC[1]))(data[at : at + 512], rng)
    return data[:at] + block[:512].ljust(512, b"\0") + data[at + 512 :]


_KINDS = (
    tarfile.SYMTYPE,
    tarfile.LNKTYPE,
    tarfile.CHRTYPE,
    tarfile.BLKTYPE,
    tarfile.FIFOTYPE,
    tarfile.DIRTYPE,
)


def tar_member(data: bytes, rng: random.Random) -> bytes:
    """One member changed in kind or path, or duplicated, or an odd member added."""
    entries = members(data)
    i = rng.randrange(len(entries))
    info, blob = entries[i]
    choice = rng.randrange(6)
    if choice == 0:  # a needed or extra member becomes a link, device, FIFO or directory
        entries[i] = (odd_member(info.name, rng.choice(_KINDS), linkname="/etc/passwd"), b"")
    elif choice == 1:  # an unsafe path
        prefix = rng.choice(("/", "../", "./../../", "C:", "a\\..\\", "sub/../../"))
        info.name = prefix + Path(info.name).name
    elif choice == 2:  # the same member twice
        entries.insert(i, (tarfile.TarInfo(info.name), blob))
    elif choice == 3:  # an extra odd member
        kind = rng.choice(_KINDS)
        entries.insert(i, (odd_member(rng.choice(("./extra", "/abs", "../up")), kind, "../../x"), b""))
    elif choice == 4:  # a nested but safe path
        info.name = "./nested/dir/" + Path(info.name).name
    else:  # a huge claimed size on an existing member
        return with_header_size(pack(entries), Path(info.name).name, rng.choice((2**33, 2**40, 2**62)))
    return pack(entries)


def nemo_mutators() -> list[Mutator]:
    """Everything the .nemo fuzz slice cycles through: generic mutations of the whole file (also gzipped), of the
    pickle, the config and the tokenizer; pickle opcodes and BUILDs; zip structure and methods; tar headers and tar member
    kinds, paths and sizes."""
    inside_pickle = _in_member(WEIGHTS, _in_pickle(pickle_opcode))
    builds = _in_member(WEIGHTS, _in_pickle(pickle_build))
    return [
        *(named(f"file_{m.__name__}", m) for m in GENERIC),
        named("pickle_opcode", inside_pickle),
        named("pickle_build", builds),
        *(named(f"pickle_{m.__name__}", _in_member(WEIGHTS, _in_pickle(m))) for m in GENERIC),
        *(named(f"zip_{m.__name__}", _in_member(WEIGHTS, _zip_headers(m))) for m in GENERIC[:2]),
        named("zip_truncate", _in_member(WEIGHTS, GENERIC[2])),
        named("zip_recompress", _in_member(WEIGHTS, recompress)),
        named("tar_header", tar_header),
        named("tar_member", tar_member),
        named("config_flip", _in_member(CONFIG, GENERIC[0])),
        named("config_splice", _in_member(CONFIG, GENERIC[3])),
        named("gzip_flip_bytes", _gzipped(GENERIC[0])),
        named("gzip_truncate", _gzipped(GENERIC[2])),
        named("tokenizer_flip", _in_member(TOKENIZER, GENERIC[0])),
        named("tokenizer_extreme_field", _in_member(TOKENIZER, GENERIC[1])),
    ]
