"""The one reader of an audio.cpp package's logical tensor table (names, ranks, shapes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from inference.errors import ModelError
from inference.native.gguf_file import GgufFile
from inference.native.package_tensors import NAMES, RANKS, SHAPES, logical_tensors

ARRAYS = {
    "_audiocpp.0": np.zeros((4, 1, 3), np.float32),
    "b": np.zeros(2, np.float32),
    "s": np.zeros(1, np.float32),
}


def _write(path: Path, fields: dict[str, Any]) -> Path:
    writer = gguf.GGUFWriter(str(path), "audiocpp")
    for key, value in fields.items():
        sub = gguf.GGUFValueType.INT32 if key == RANKS else gguf.GGUFValueType.INT64
        if key == NAMES:
            writer.add_array(key, value)
        else:
            writer.add_key_value(key, value, gguf.GGUFValueType.ARRAY, sub_type=sub)
    for name, array in ARRAYS.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


GOOD = {NAMES: ["encoder.conv.weight", "b", "scale"], RANKS: [2, 1, 0], SHAPES: [4, 3, 2, 1]}


def _table(path: Path, require_names: bool = True) -> list[tuple[str, str, tuple[int, ...]]]:
    with GgufFile(path) as package:
        return [
            (t.name, t.tensor.name, t.shape)
            for t in logical_tensors(package, path.name, require_names=require_names)
        ]


def test_logical_names_and_shapes(tmp_path: Path) -> None:
    assert _table(_write(tmp_path / "p.gguf", GOOD)) == [
        (
            "encoder.conv.weight",
            "_audiocpp.0",
            (4, 3),
        ),  # logical shape, same element count as stored (4, 1, 3)
        ("b", "b", (2,)),
        ("scale", "s", (1,)),  # a rank-0 scalar
    ]


def test_without_shapes_the_stored_shapes_stand(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.gguf", {NAMES: GOOD[NAMES]})
    assert [shape for *_, shape in _table(path)] == [(4, 1, 3), (2,), (1,)]


def test_without_names(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.gguf", {})
    assert [name for name, *_ in _table(path, require_names=False)] == list(ARRAYS)
    with pytest.raises(ModelError, match="has no audiocpp.tensor_names"):
        _table(path)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({NAMES: ["a", "b"]}, "lists 2 names for 3 tensors"),
        ({NAMES: ["a", "b", "a"]}, "names a more than once"),
        ({**GOOD, SHAPES: [4, 3, 3, 1]}, r"tensor 'b' shape \(3,\) does not match its data \(2,\)"),
        ({**GOOD, SHAPES: [4, 3, 2]}, "ends before tensor 'scale'"),
        ({**GOOD, SHAPES: [4, 3, 2, 1, 7]}, "1 dims more than its tensors use"),
        ({**GOOD, RANKS: [2, 1]}, "do not describe its 3 tensors"),
        ({NAMES: GOOD[NAMES], RANKS: GOOD[RANKS]}, "do not describe"),
    ],
)
def test_damaged_tables_are_refused_by_name(tmp_path: Path, fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelError, match=message) as err:
        _table(_write(tmp_path / "p.gguf", fields))
    assert "p.gguf" in err.value.message and "re-download" in err.value.fix
