"""safetensors headers against hostile entries: each is checked (dtype, shape x dtype size == offsets span,
offsets inside the file, no shared bytes) before the file is mapped, and refused naming the file and tensor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from inference.errors import InputFileError
from inference.native.checkpoint import open_checkpoint
from inference.native.safetensors_header import read_safetensors_header


def _file(path: Path, header: Any, data: bytes) -> Path:
    encoded = json.dumps(header).encode()
    path.write_bytes(len(encoded).to_bytes(8, "little") + encoded + data)
    return path


def _refusal(tmp_path: Path, header: Any, data: bytes = bytes(16)) -> str:
    path = _file(tmp_path / "hostile.safetensors", header, data)
    with pytest.raises(InputFileError) as err:
        open_checkpoint(path).close()
    assert "hostile.safetensors" in err.value.message and err.value.fix
    return err.value.message


def _entry(dtype: str = "F32", shape: Any = (2,), offsets: Any = (0, 8)) -> dict[str, Any]:
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


def test_a_file_the_library_wrote_reads_exactly(tmp_path: Path) -> None:
    path = tmp_path / "ok.safetensors"
    save_file({"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(2, np.int64)}, str(path))
    with open_checkpoint(path) as checkpoint:
        assert checkpoint.numpy("a").tolist() == [[0, 1, 2], [3, 4, 5]]
        assert checkpoint.shape("b") == (2,)


def test_a_shape_larger_than_its_bytes_is_refused(tmp_path: Path) -> None:
    # (1000, 1000) F32 over 8 bytes was mapped as an 8-byte tensor with a million-element shape.
    message = _refusal(tmp_path, {"w": _entry(shape=(1000, 1000))})
    assert "tensor 'w' (F32 [1000, 1000]) needs 4000000 bytes, its offsets span 8" in message


def test_tensors_sharing_bytes_are_refused(tmp_path: Path) -> None:
    message = _refusal(tmp_path, {"a": _entry(), "b": _entry(offsets=(4, 12))})
    assert "tensor 'b' shares bytes with the tensor before it" in message


@pytest.mark.parametrize(
    ("header", "size", "message"),
    [
        ({"a": _entry(), "b": _entry(offsets=(12, 20))}, 20, "4 bytes before tensor 'b' belong to no tensor"),
        ({"a": _entry()}, 16, "8 bytes after the last tensor belong to no tensor"),
        ({"a": _entry(), "__metadata__": {"k": 1}}, 8, "__metadata__ is not an object of strings"),
    ],
)
def test_the_tensors_must_tile_the_data_as_the_library_requires(
    tmp_path: Path, header: dict[str, Any], size: int, message: str
) -> None:
    assert message in _refusal(tmp_path, header, bytes(size))


def test_reversed_offsets_are_refused(tmp_path: Path) -> None:
    assert "data_offsets [8, 0]" in _refusal(tmp_path, {"w": _entry(shape=(0,), offsets=(8, 0))})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("not an object", "tensor 'w' is not described by an object"),  # was a TypeError
        ({"dtype": "F32", "shape": [2]}, "data_offsets None"),  # was a KeyError
        (_entry(shape=("2",)), "has shape ['2']"),
        (_entry(shape=(-2,)), "has shape [-2]"),
        (_entry(shape=(True, 2)), "has shape [True, 2]"),
        (_entry(dtype="F31"), "unknown dtype 'F31'"),
        (_entry(offsets=(0, 8, 9)), "data_offsets [0, 8, 9]"),
    ],
)
def test_malformed_entries_are_refused_by_name(tmp_path: Path, entry: Any, message: str) -> None:
    assert message in _refusal(tmp_path, {"w": entry})


def test_a_deeply_nested_header_is_refused(tmp_path: Path) -> None:  # was a RecursionError
    path = tmp_path / "deep.safetensors"
    nested = b"[" * 100_000 + b"]" * 100_000
    path.write_bytes(len(nested).to_bytes(8, "little") + nested)
    with pytest.raises(InputFileError, match="deep.safetensors is not a valid safetensors file"):
        read_safetensors_header(path)


def test_a_header_over_the_library_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.safetensors"
    with path.open("wb") as handle:  # sparse: claims 200 MB of header, holds it too
        handle.write((200 << 20).to_bytes(8, "little"))
        handle.truncate(8 + (200 << 20))
    with pytest.raises(InputFileError, match="header claims 209715200 bytes"):
        read_safetensors_header(path)


def test_a_deeply_nested_shard_index_is_refused_by_name(tmp_path: Path) -> None:  # was a RecursionError
    from inference.errors import ModelError
    from inference.models.layout import locate_model

    (tmp_path / "model.safetensors.index.json").write_text("[" * 100_000)
    with pytest.raises(ModelError, match="model.safetensors.index.json is not a readable shard index"):
        locate_model(tmp_path)
