"""The Phonon-2 archive and container as untrusted input: members that are not regular files at safe paths are
refused by name, decompression is bounded, sizes are checked before anything is decoded, and errors name the
user's archive (never the temporary folder it was unpacked into)."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_phonon_import import phonon_archive_dir, sidecars_for

from inference.errors import ModelError
from inference.families.parakeet_tdt import phonon_archive
from inference.families.parakeet_tdt.phonon_archive import extract_archive
from inference.families.parakeet_tdt.phonon_import import FORMAT, convert_phonon2, read_container
from inference.models import tar_members
from inference.models.errors import DiskSpaceError

zstandard = pytest.importorskip("zstandard", reason="reading .tar.zst needs the optional zstandard package")
WANTED = frozenset({"model.fermion", "config.json"})
Member = tuple[str, bytes, Callable[[tarfile.TarInfo], None] | None]


def _regular(name: str, data: bytes = b"x") -> Member:
    return (name, data, None)


def _special(name: str, **attributes: Any) -> Member:
    def shape(info: tarfile.TarInfo) -> None:
        for key, value in attributes.items():
            setattr(info, key, value)

    return (name, b"", shape)


def _archive(path: Path, members: list[Member], compressor: Any = None) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, shape in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if shape is not None:
                shape(info)
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    path.write_bytes((compressor or zstandard.ZstdCompressor()).compress(buffer.getvalue()))
    return path


GOOD = [_regular("phonon-2/model.fermion"), _regular("phonon-2/config.json", b"{}")]


def _refusal(tmp_path: Path, members: list[Member]) -> str:
    archive = _archive(tmp_path / "user.tar.zst", members)
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(ModelError) as err:
        extract_archive(archive, into, WANTED)
    assert "user.tar.zst" in err.value.message and err.value.fix
    return err.value.message


def test_a_plain_archive_extracts_its_wanted_members(tmp_path: Path) -> None:
    into = tmp_path / "into"
    into.mkdir()
    archive = _archive(
        tmp_path / "a.tar.zst", [_special("phonon-2", type=tarfile.DIRTYPE), *GOOD, _regular("README")]
    )
    extract_archive(archive, into, WANTED)
    assert sorted(p.name for p in into.iterdir()) == ["config.json", "model.fermion"]
    assert (into / "config.json").read_bytes() == b"{}"


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (
            _special("phonon-2/link", type=tarfile.SYMTYPE, linkname="/etc/passwd"),
            "its member 'phonon-2/link' is a symbolic link",
        ),
        (_special("phonon-2/hard", type=tarfile.LNKTYPE, linkname="phonon-2/config.json"), "a hard link"),
        (_special("phonon-2/dev", type=tarfile.CHRTYPE), "its member 'phonon-2/dev' is a device"),
        (_special("phonon-2/fifo", type=tarfile.FIFOTYPE), "a FIFO"),
        (_regular("../escape"), "its member '../escape' has an unsafe path"),
        (_regular("/abs/readme"), "its member '/abs/readme' has an unsafe path"),
        (_regular("a\\b"), "its member 'a\\\\b' has an unsafe path"),
    ],
)
def test_a_member_that_is_not_a_regular_file_at_a_safe_path_is_refused(
    tmp_path: Path, member: Member, message: str
) -> None:
    # These were skipped by base-name matching and the import went on.
    assert message in _refusal(tmp_path, [*GOOD, member])


@pytest.mark.parametrize("name", ["../model.fermion", "/phonon-2/model.fermion"])
def test_a_wanted_member_at_an_unsafe_path_is_refused(tmp_path: Path, name: str) -> None:
    # It was accepted by its base name.
    assert "unsafe path" in _refusal(tmp_path, [_regular(name), GOOD[1]])


def test_a_wanted_member_twice_is_refused(tmp_path: Path) -> None:  # the second was silently ignored
    assert "holds model.fermion twice" in _refusal(tmp_path, [*GOOD, _regular("other/model.fermion")])


def test_an_archive_that_decompresses_past_its_bound_is_refused(tmp_path: Path) -> None:
    # ~40 MB of zeros in a few kilobytes: everything was decompressed (and the zeros skipped).
    bomb = [*GOOD, _regular("padding", bytes(40 << 20))]
    assert "decompresses to more than" in _refusal(tmp_path, bomb)


def test_the_size_a_frame_declares_bounds_decompression_within_the_expansion_bound(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "user.tar.zst", [*GOOD, _regular("more", bytes(1 << 20))])
    assert phonon_archive.decompression_limit(archive, 4096) == 4096
    assert phonon_archive.decompression_limit(archive, None) > 1 << 20
    assert phonon_archive.decompression_limit(archive, 1 << 60) == phonon_archive.decompression_limit(
        archive, None
    )


def test_a_config_member_of_more_than_the_config_limit_is_refused(tmp_path: Path) -> None:
    huge = b" " * (phonon_archive.MAX_CONFIG_BYTES + 1)
    assert "its member 'c/config.json' is 16777217 bytes, too large" in _refusal(
        tmp_path, [GOOD[0], _regular("c/config.json", huge)]
    )


def test_a_member_larger_than_the_free_space_is_refused_before_writing(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "user.tar.zst", [_regular("model.fermion", bytes(1000)), GOOD[1]])
    into = tmp_path / "into"
    into.mkdir()
    free = tar_members.DISK_MARGIN + 999
    with pytest.raises(
        DiskSpaceError, match="user.tar.zst: its member 'model.fermion' unpacks to 1000 bytes"
    ):
        extract_archive(archive, into, WANTED, free=lambda _path: free)
    assert list(into.iterdir()) == []


def _container(path: Path, index: Any) -> Path:
    header = json.dumps({"format": FORMAT, "index": index}).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header)
    return path


@pytest.mark.parametrize(
    ("index", "message"),
    [
        (5, "its index is not a list of records"),  # was a TypeError
        # 2**32 x 2**32 values over 0 bytes wrapped np.prod to 0 and failed in numpy's reshape
        (
            [{"n": "w", "k": "fp16", "shape": [1 << 32, 1 << 32], "b": 0}],
            "claims 18446744073709551616 values",
        ),
        ([{"n": "w", "k": "five_value", "shape": [2], "b": 0}], "has shape [2], not 2-D"),
        ([{"n": "w", "k": "bf16", "shape": [2], "b": 0}], "unknown kind 'bf16'"),
    ],
)
def test_a_hostile_index_is_refused_before_decoding(tmp_path: Path, index: Any, message: str) -> None:
    path = _container(tmp_path / "model.fermion", index)
    with pytest.raises(ModelError, match="model.fermion") as err:
        list(read_container(path))
    assert message in err.value.message


def _packed(tmp_path: Path, damage: Callable[[bytes], bytes] = lambda data: data) -> Path:
    folder, _exact = phonon_archive_dir(tmp_path)
    container = (folder / "model.fermion").read_bytes()
    members = [
        _regular("phonon-2/model.fermion", damage(container)),
        _regular("phonon-2/config.json", (folder / "config.json").read_bytes()),
    ]
    return _archive(tmp_path / "phonon-2.bps.tar.zst", members)


def test_a_damaged_container_in_an_archive_is_named_by_the_archive(tmp_path: Path) -> None:
    # The message named the deleted temporary member (…/.phonon2.partial-N/.archive/model.fermion).
    archive = _packed(tmp_path, lambda data: data[:-3])
    with pytest.raises(ModelError) as err:
        convert_phonon2(archive, sidecars_for(tmp_path), tmp_path / "out")
    assert err.value.message.startswith("phonon-2.bps.tar.zst (member model.fermion) is truncated")
    assert ".partial" not in err.value.message and ".archive" not in err.value.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archive", "phonon-2.bps.tar.zst", "sidecars"]


def test_an_archive_config_that_is_not_utf8_is_refused_by_name(
    tmp_path: Path,
) -> None:  # was a UnicodeDecodeError
    folder, _exact = phonon_archive_dir(tmp_path)
    members = [
        _regular("model.fermion", (folder / "model.fermion").read_bytes()),
        _regular("config.json", b"\xff{"),
    ]
    archive = _archive(tmp_path / "phonon-2.bps.tar.zst", members)
    with pytest.raises(ModelError, match=r"phonon-2.bps.tar.zst \(member config.json\) is unreadable"):
        convert_phonon2(archive, sidecars_for(tmp_path), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_header_extension_past_its_bound_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # tarfile holds a pax header's payload in memory: one claiming gigabytes was read up to the expansion bound.
    def long_comment(info: tarfile.TarInfo) -> None:
        info.pax_headers = {"comment": "x" * (tar_members.MAX_HEADER_READ + 1)}

    message = _refusal(tmp_path, [("phonon-2/model.fermion", b"x", long_comment), GOOD[1]])
    assert "user.tar.zst: a tar header asks to read" in message


def test_a_vocabulary_mismatch_names_the_archive_and_the_sidecars(tmp_path: Path) -> None:
    # Found by the fuzz run: the message named neither the archive nor the sidecar folder.
    folder, _exact = phonon_archive_dir(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["joint"]["vocabulary"][0] = "changed"
    members = [
        _regular("model.fermion", (folder / "model.fermion").read_bytes()),
        _regular("config.json", json.dumps(config).encode()),
    ]
    archive = _archive(tmp_path / "phonon-2.bps.tar.zst", members)
    with pytest.raises(ModelError) as err:
        convert_phonon2(archive, sidecars_for(tmp_path), tmp_path / "out")
    assert "sidecars/tokenizer.json does not spell" in err.value.message
    assert "(phonon-2.bps.tar.zst (member config.json))" in err.value.message
