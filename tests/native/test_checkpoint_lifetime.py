"""open_checkpoint / GgufFile close their memory maps on every path, even while the caller keeps the error."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

from inference.errors import CaptioneerError, ModelError
from inference.native.checkpoint import open_checkpoint
from inference.native.gguf_file import GgufFile
from tests.lifetimes.open_files import needs_proc, open_under

pytestmark = needs_proc


def _gguf(path: Path) -> Path:
    writer = gguf.GGUFWriter(str(path), "audiocpp")
    writer.add_array("numbers", [1, 2, 3])  # an array field: a view of the map
    writer.add_tensor("g", np.ones((2, 2), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _bool_safetensors(path: Path) -> Path:
    header = json.dumps({"flags": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\x01\x00")
    return path


def _failure(paths: list[Path]) -> CaptioneerError:
    try:
        checkpoint = open_checkpoint(paths)
    except CaptioneerError as exc:
        return exc  # kept by the caller, traceback and all
    checkpoint.close()
    raise AssertionError("opened")


def test_a_later_bad_file_closes_the_earlier_maps(tmp_path: Path) -> None:
    save_file({"a": np.zeros(4, np.float32)}, str(tmp_path / "a.safetensors"))
    _gguf(tmp_path / "b.gguf")
    error = _failure(
        [tmp_path / "a.safetensors", tmp_path / "b.gguf", _bool_safetensors(tmp_path / "c.safetensors")]
    )
    assert "unsupported dtype BOOL" in str(error)
    assert open_under(tmp_path) == []


def test_duplicate_tensors_close_both_maps(tmp_path: Path) -> None:
    save_file({"a": np.zeros(4, np.float32)}, str(tmp_path / "one.safetensors"))
    save_file({"a": np.ones(4, np.float32)}, str(tmp_path / "two.safetensors"))
    error = _failure([tmp_path / "one.safetensors", tmp_path / "two.safetensors"])
    assert isinstance(error, ModelError) and "more than one checkpoint file" in str(error)
    assert open_under(tmp_path) == []


def test_a_successful_checkpoint_holds_its_files_until_closed(tmp_path: Path) -> None:
    save_file({"a": np.zeros(4, np.float32)}, str(tmp_path / "a.safetensors"))
    with open_checkpoint([tmp_path / "a.safetensors", _gguf(tmp_path / "b.gguf")]) as checkpoint:
        assert checkpoint.numpy("g").sum() == 4
        assert len(open_under(tmp_path)) >= 2
    assert open_under(tmp_path) == []


def test_gguf_file_closes_although_its_fields_were_read(tmp_path: Path) -> None:
    path = _gguf(tmp_path / "b.gguf")
    package = GgufFile(path)
    assert package.fields["numbers"].tolist() == [1, 2, 3]
    package.close()  # the object lives on, as in a kept traceback
    assert open_under(tmp_path) == []
    with pytest.raises(KeyError):
        package.fields["numbers"]
