"""The one reader of audio.cpp embedded files: both layouts, and clear errors for every damaged table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from inference.errors import ModelError
from inference.native.embedded_files import CONTENTS, DATA, NAMES, OFFSETS, embedded_files
from inference.native.gguf_file import GgufFile

FILES = {"config.json": b'{"a": 1}', "tokenizer.json": b"\x00\xffbytes", "empty.txt": b""}


def _write(path: Path, fields: dict[str, Any]) -> Path:
    """A GGUF holding one small tensor and the given embedded-file fields, as audio.cpp writes them."""
    writer = gguf.GGUFWriter(str(path), "audiocpp")
    for key, value in fields.items():
        if key == OFFSETS:
            writer.add_key_value(
                key, list(value), gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.UINT64
            )
        elif key == DATA:
            writer.add_key_value(
                key, list(value), gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.UINT8
            )
        else:
            writer.add_array(key, value)
    writer.add_tensor("w", np.zeros((2, 2), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _blob_fields(files: dict[str, bytes]) -> dict[str, Any]:
    offsets = np.cumsum([0] + [len(v) for v in files.values()]).tolist()
    return {NAMES: list(files), OFFSETS: offsets, DATA: b"".join(files.values())}


def _read(path: Path) -> dict[str, bytes]:
    with GgufFile(path) as package:
        return embedded_files(package.fields, path.name)


def test_blob_layout_round_trips(tmp_path: Path) -> None:
    assert _read(_write(tmp_path / "p.gguf", _blob_fields(FILES))) == FILES


def test_legacy_string_layout_round_trips(tmp_path: Path) -> None:
    files = {"config.json": b"{}", "vocab.txt": "h\u00e9llo".encode()}
    path = _write(tmp_path / "p.gguf", {NAMES: list(files), CONTENTS: [v.decode() for v in files.values()]})
    assert _read(path) == files


def test_no_table_means_no_files(tmp_path: Path) -> None:
    assert _read(_write(tmp_path / "p.gguf", {})) == {}


def test_truncated_package_is_refused_before_any_file_is_read(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.gguf", _blob_fields(FILES))
    data = path.read_bytes()
    path.write_bytes(data[:120])  # inside the metadata
    with pytest.raises(ModelError, match="not a valid GGUF file.*past the end"):
        _read(path)


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        ([0, 8, 15], r"3 offsets for 3 files"),
        ([0, 8, 15, 16], r"from 0 to the data size 15"),  # ends past the blob
        ([1, 8, 15, 15], r"from 0 to the data size"),  # does not start at 0
        ([0, 12, 8, 15], r"without going back"),
    ],
)
def test_bad_offsets_are_refused(tmp_path: Path, offsets: list[int], message: str) -> None:
    fields = _blob_fields(FILES)
    assert len(fields[DATA]) == 15
    fields[OFFSETS] = offsets
    with pytest.raises(ModelError, match=message) as err:
        _read(_write(tmp_path / "p.gguf", fields))
    assert "p.gguf" in err.value.message and err.value.fix


def test_duplicate_names_are_refused(tmp_path: Path) -> None:
    fields = {NAMES: ["config.json", "config.json"], OFFSETS: [0, 1, 2], DATA: b"ab"}
    with pytest.raises(ModelError, match="embeds 'config.json' twice"):
        _read(_write(tmp_path / "p.gguf", fields))


@pytest.mark.parametrize("name", ["../config.json", "/etc/passwd", "a\\b.json", "", "x/../../y"])
def test_unsafe_names_are_refused(tmp_path: Path, name: str) -> None:
    fields = {NAMES: [name], OFFSETS: [0, 1], DATA: b"a"}
    with pytest.raises(ModelError, match="unsafe path"):
        _read(_write(tmp_path / "p.gguf", fields))


def test_data_without_names_and_names_without_data_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no audiocpp.embedded_files.names"):
        _read(_write(tmp_path / "a.gguf", {OFFSETS: [0, 1], DATA: b"a"}))
    with pytest.raises(ModelError, match="holds no data"):
        _read(_write(tmp_path / "b.gguf", {NAMES: ["config.json"]}))
    with pytest.raises(ModelError, match="1 embedded-file names but 2 contents"):
        _read(_write(tmp_path / "c.gguf", {NAMES: ["config.json"], CONTENTS: ["{}", "{}"]}))
    with pytest.raises(ModelError, match="no byte array"):
        _read(_write(tmp_path / "d.gguf", {NAMES: ["config.json"], OFFSETS: [0, 1]}))


def test_names_must_be_strings() -> None:
    with pytest.raises(ModelError, match="malformed embedded-file list"):
        embedded_files({NAMES: np.arange(3)}, "p.gguf")
