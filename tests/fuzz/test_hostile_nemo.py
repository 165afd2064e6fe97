"""The hostile ``.nemo`` and torch zip files of issue 37, one property each, run in a child process under memory,
file-size and CPU limits (tests/fuzz/harness.py): each is refused by name, or read exactly, and none crashes,
reads the importer's own memory, inflates a bomb or fills the disk."""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from collections.abc import Iterator

import numpy as np
import pytest

from tests.fuzz import harness
from tests.fuzz.nemo_crafts import (
    TOKENIZER,
    WEIGHTS,
    Tensor,
    build_op,
    checkpoint,
    members,
    odd_member,
    pack,
    replace_member,
    set_declared_size,
    tiny_nemo,
    with_header_size,
)

LIMITS = harness.Limits(memory_bytes=768 << 20, rss_bytes=200 << 20, file_bytes=64 << 20, seconds=300)
VALUES = np.arange(6, dtype="<f4")
PLAIN = Tensor("w", "0", numel=6, shape=(2, 3), stride=(3, 1))


@pytest.fixture(scope="module")
def reader() -> Iterator[harness.Fuzzer]:
    with harness.Fuzzer("tests.fuzz.nemo_target:read_checkpoint", "weights.ckpt", LIMITS) as fuzzer:
        yield fuzzer


@pytest.fixture(scope="module")
def converter() -> Iterator[harness.Fuzzer]:
    with harness.Fuzzer("tests.fuzz.nemo_target:convert", "model.nemo", LIMITS) as fuzzer:
        yield fuzzer


@pytest.fixture(scope="module")
def nemo(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return tiny_nemo(tmp_path_factory.mktemp("nemo") / "model.nemo").read_bytes()


def run(fuzzer: harness.Fuzzer, data: bytes) -> harness.Outcome:
    outcome = fuzzer.run_case(harness.Case(0, "crafted", data))
    problem = fuzzer.check(outcome)
    assert problem is None, problem
    return outcome


def refused(fuzzer: harness.Fuzzer, data: bytes, *phrases: str) -> str:
    """The refusal's message, after checking it names the user's file, each phrase, and no temporary path."""
    outcome = run(fuzzer, data)
    assert outcome.kind == harness.REFUSED, outcome
    assert outcome.exit_code in (1, 2) and fuzzer.input_name in outcome.message, outcome.message
    for phrase in phrases:
        assert phrase in outcome.message, outcome.message
    assert (
        ".partial" not in outcome.message
        and "member-" not in outcome.message
        and "/tmp" not in outcome.message
    )
    assert outcome.disk_left_bytes == 0 and not [p for p in outcome.left if ".partial" in p], outcome.left
    return outcome.message


# ------------------------------------------------------------------------------------------ torch zip


def test_the_plain_checkpoint_reads_exactly(reader: harness.Fuzzer) -> None:
    outcome = run(reader, checkpoint([PLAIN], {"0": VALUES.tobytes()}))
    assert outcome.kind == harness.RESULT
    assert outcome.value == {"w": ("<f4", (2, 3), VALUES.tobytes())}


@pytest.mark.parametrize(
    "build",
    [
        build_op("stride", (1 << 40, 1)),  # the old reader: SIGSEGV
        build_op("stride", (3, 4000)),  # the old reader: heap bytes as weights
        build_op("offset", 1 << 20),
        build_op("shape", (1 << 20, 3)),
    ],
    ids=["huge stride", "heap stride", "offset", "shape"],
)
def test_a_build_rewriting_a_validated_tensor_is_refused(reader: harness.Fuzzer, build: bytes) -> None:
    crafted = Tensor("w", "0", numel=6, shape=(2, 3), stride=(3, 1), after=build)
    refused(
        reader,
        checkpoint([crafted], {"0": VALUES.tobytes()}),
        "rewrites a TensorRef",
        "nothing from it was used",
    )


def test_a_broadcast_view_over_a_tiny_storage_is_refused_before_allocating(reader: harness.Fuzzer) -> None:
    crafted = Tensor("w", "0", numel=1, shape=(1 << 28,), stride=(0,))  # 1 GiB of float32 from 4 bytes
    refused(reader, checkpoint([crafted], {"0": VALUES[:1].tobytes()}), "broadcast")


def test_a_compressed_storage_bomb_is_read_only_as_far_as_the_tensor_reaches(reader: harness.Fuzzer) -> None:
    numel = 64 << 20  # the entry inflates to 256 MiB; the tensor needs 16 bytes of it
    crafted = Tensor("w", "0", numel=numel, shape=(4,), stride=(1,))
    bomb = checkpoint([crafted], {"0": bytes(4 * numel)}, compression={"data/0": zipfile.ZIP_DEFLATED})
    assert len(bomb) < 1 << 20
    outcome = run(reader, bomb)  # the old reader inflated it whole: past the RSS bound
    assert outcome.kind == harness.RESULT and outcome.value == {"w": ("<f4", (4,), bytes(16))}


def test_an_entry_claiming_more_than_its_compression_can_hold_is_refused(reader: harness.Fuzzer) -> None:
    crafted = Tensor("w", "0", numel=6, shape=(2, 3), stride=(3, 1))
    deflated = checkpoint([crafted], {"0": VALUES.tobytes()}, compression={"data/0": zipfile.ZIP_DEFLATED})
    refused(
        reader, set_declared_size(deflated, "archive/data/0", 1 << 31), "more than its compression can hold"
    )


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_a_storage_compressed_without_a_bounded_ratio_is_refused_by_name(
    reader: harness.Fuzzer, method: int
) -> None:
    data = checkpoint([PLAIN], {"0": VALUES.tobytes()}, compression={"data/0": method})
    refused(reader, data, "'archive/data/0'", "compression method")


def test_a_storage_entry_shorter_than_its_tensor_is_refused_naming_the_tensor(reader: harness.Fuzzer) -> None:
    refused(reader, checkpoint([PLAIN], {"0": VALUES[:4].tobytes()}), "'w'")


# ------------------------------------------------------------------------------------------ tar members


def test_the_tiny_nemo_converts(converter: harness.Fuzzer, nemo: bytes) -> None:
    outcome = run(converter, nemo)
    assert outcome.kind == harness.RESULT and len(outcome.value) > 100


def _with_extra(nemo: bytes, info: tarfile.TarInfo, data: bytes = b"") -> bytes:
    entries = members(nemo)
    entries.insert(1, (info, data))
    return pack(entries)


@pytest.mark.parametrize(
    ("kind", "what"),
    [
        (tarfile.SYMTYPE, "a symbolic link"),
        (tarfile.LNKTYPE, "a hard link"),
        (tarfile.CHRTYPE, "a device"),
        (tarfile.BLKTYPE, "a device"),
        (tarfile.FIFOTYPE, "a FIFO"),
    ],
)
@pytest.mark.parametrize("role", ["extra", "needed"])
def test_a_member_that_is_not_a_regular_file_is_refused_by_name(
    converter: harness.Fuzzer, nemo: bytes, kind: bytes, what: str, role: str
) -> None:
    if role == "extra":  # the old reader skipped these and imported
        data = _with_extra(nemo, odd_member("./notes.txt", kind, linkname="/etc/passwd"))
        refused(converter, data, "'./notes.txt'", what)
    else:
        entries = [(i, d) for i, d in members(nemo) if not i.name.endswith("model_config.yaml")]
        entries.insert(0, (odd_member("./model_config.yaml", kind, linkname="/etc/passwd"), b""))
        refused(converter, pack(entries), "'./model_config.yaml'", what)


@pytest.mark.parametrize("path", ["/notes.txt", "../notes.txt", "./sub/../../notes.txt", "C:notes.txt"])
def test_a_member_at_an_unsafe_path_is_refused_by_name(
    converter: harness.Fuzzer, nemo: bytes, path: str
) -> None:
    info = tarfile.TarInfo(path)
    refused(converter, _with_extra(nemo, info, b"hello"), repr(path), "unsafe path")


def test_a_needed_member_at_an_unsafe_path_is_refused(converter: harness.Fuzzer, nemo: bytes) -> None:
    entries = members(nemo)
    for info, _ in entries:
        if info.name.endswith(WEIGHTS):
            info.name = "../" + WEIGHTS  # the old reader matched the base name and used it
    refused(converter, pack(entries), f"'../{WEIGHTS}'", "unsafe path")


def test_a_member_stored_twice_is_refused(converter: harness.Fuzzer, nemo: bytes) -> None:
    entries = members(nemo)
    config = next((i, d) for i, d in entries if i.name.endswith("model_config.yaml"))
    entries.append((tarfile.TarInfo(config[0].name), b"encoder: {}\n"))  # the old reader kept the first
    refused(converter, pack(entries), "'model_config.yaml' twice")


def test_a_sparse_member_claiming_a_terabyte_is_refused_before_a_byte_is_written(
    converter: harness.Fuzzer, nemo: bytes
) -> None:
    size = 1 << 40
    data = (b"1\n%d\n512\n" % (size - 512)).ljust(512, b"\0") + b"\1" * 512
    info = tarfile.TarInfo(f"./{WEIGHTS}")
    info.size = len(data)
    info.pax_headers = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": f"./{WEIGHTS}",
        "GNU.sparse.realsize": str(size),
    }
    entries = [(i, d) for i, d in members(nemo) if not i.name.endswith(WEIGHTS)]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for old, blob in entries:
            tar.addfile(old, io.BytesIO(blob))
        tar.addfile(info, io.BytesIO(data))  # the old reader wrote zeros until the file size limit stopped it
    refused(converter, buffer.getvalue(), f"'./{WEIGHTS}'", "a sparse file")


def test_a_member_claiming_more_than_the_archive_holds_is_refused(
    converter: harness.Fuzzer, nemo: bytes
) -> None:
    refused(
        converter, with_header_size(nemo, WEIGHTS, 1 << 40), f"'./{WEIGHTS}'", "claims 1099511627776 bytes"
    )


def test_a_compressed_member_claiming_more_than_the_free_disk_is_refused_before_writing(
    converter: harness.Fuzzer, nemo: bytes
) -> None:
    entries = [(i, d) for i, d in members(nemo) if not i.name.endswith(WEIGHTS)]
    plain = pack(entries)
    with tarfile.open(fileobj=io.BytesIO(plain)) as tar:
        tar.getmembers()
        plain = plain[: tar.offset]  # without the end-of-archive blocks: the weights member follows
    head = tarfile.TarInfo(f"./{WEIGHTS}")
    head.size = 80 << 20
    header = head.tobuf(format=tarfile.GNU_FORMAT)
    body = plain + with_header_size(header + bytes(512), WEIGHTS, 1 << 50)[:512] + bytes(80 << 20)
    # The old reader wrote the 80 MiB that follow the header before noticing the archive ends: past the file limit.
    message = refused(
        converter, gzip.compress(body, compresslevel=1), f"'./{WEIGHTS}'", "unpacks to 1125899906842624"
    )
    assert "free" in message or "spare" in message


def _field(number: int, payload: bytes) -> bytes:
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_a_tokenizer_piece_that_is_not_utf8_is_refused_naming_the_member(
    converter: harness.Fuzzer, nemo: bytes
) -> None:
    model = _field(
        1, _field(1, b"\xff\xfe")
    )  # one piece whose text is not UTF-8 (the old reader: UnicodeDecodeError)
    refused(
        converter, replace_member(nemo, TOKENIZER, model), f"model.nemo:{TOKENIZER}", "piece 0 is not UTF-8"
    )


def test_a_refusal_quoting_the_pickle_stays_one_line(reader: harness.Fuzzer) -> None:
    pickled = b"\x80\x02ctorch\nFloatStorage\nFloatStorage\nF1.0\n."  # FLOAT reads a bad line (found by the fuzz run)
    message = refused(reader, checkpoint([PLAIN], {"0": VALUES.tobytes()}, pickled=pickled), "data.pkl")
    assert "\n" not in message
