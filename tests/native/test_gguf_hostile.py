"""The GGUF reader against hostile headers: every count, shape, offset and alignment is checked against the file
before anything is built from it, and each refusal is a ModelError naming the file (and the tensor)."""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

from inference.errors import ModelError
from inference.native.gguf_file import GgufFile
from inference.native.package_tensors import NAMES, RANKS, SHAPES, logical_tensors
from tests.native.gguf_bytes import ARRAY, UINT32, TensorInfo, gguf_bytes, kv_uint32, string

Q8_0 = int(gguf.GGMLQuantizationType.Q8_0)


def _refusal(tmp_path: Path, content: bytes) -> ModelError:
    path = tmp_path / "hostile.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelError) as err:
        GgufFile(path).close()
    assert "hostile.gguf" in err.value.message and err.value.fix
    return err.value


def test_a_valid_hand_built_file_reads(tmp_path: Path) -> None:
    path = tmp_path / "ok.gguf"
    path.write_bytes(
        gguf_bytes([kv_uint32("k", 7)], [TensorInfo("t", (2, 3))], np.arange(6, dtype="<f4").tobytes())
    )
    with GgufFile(path) as package:
        assert package.fields == {"k": 7}
        [tensor] = package.tensors
        assert (tensor.name, tensor.shape, tensor.nbytes) == ("t", (3, 2), 24)
        assert package.raw(tensor).view("<f4").tolist() == list(range(6))


def test_a_shape_whose_element_count_wraps_int64_is_refused(tmp_path: Path) -> None:
    # 2**32 x 2**32 elements wrapped to 0 bytes in int64 and was accepted as an empty tensor with a huge shape.
    error = _refusal(tmp_path, gguf_bytes([], [TensorInfo("huge", (1 << 32, 1 << 32))], b""))
    assert "tensor huge ends past the end of the file" in error.message


def test_a_zero_alignment_is_refused(tmp_path: Path) -> None:  # was a ZeroDivisionError
    error = _refusal(tmp_path, gguf_bytes([kv_uint32("general.alignment", 0)], [], b""))
    assert "general.alignment 0 is not a positive power of two" in error.message


def test_deeply_nested_arrays_are_refused(tmp_path: Path) -> None:  # was a RecursionError
    nested = string("deep") + struct.pack("<I", ARRAY) + struct.pack("<IQ", ARRAY, 1) * 5000
    nested += struct.pack("<IQ", UINT32, 0)
    error = _refusal(tmp_path, gguf_bytes([nested], [], b""))
    assert "nest deeper" in error.message


def test_a_count_larger_than_the_file_is_refused_before_reading(tmp_path: Path) -> None:
    content = bytearray(gguf_bytes([], [], b""))
    content[16:24] = struct.pack("<Q", 1 << 62)  # the metadata count
    assert "the metadata claims 4611686018427387904 entries" in _refusal(tmp_path, bytes(content)).message


def test_overlapping_tensors_are_refused(tmp_path: Path) -> None:
    tensors = [TensorInfo("a", (4,)), TensorInfo("b", (4,), offset=0)]
    assert "tensors a and b overlap" in _refusal(tmp_path, gguf_bytes([], tensors, bytes(16))).message


def test_a_tensor_named_twice_is_refused(tmp_path: Path) -> None:
    tensors = [TensorInfo("a", (4,)), TensorInfo("a", (4,), offset=32)]
    assert "tensor a appears twice" in _refusal(tmp_path, gguf_bytes([], tensors, bytes(48))).message


def test_more_than_four_dimensions_are_refused(tmp_path: Path) -> None:
    error = _refusal(tmp_path, gguf_bytes([], [TensorInfo("t5", (1, 1, 1, 1, 1))], bytes(4)))
    assert "tensor t5 has 5 dimensions" in error.message


def test_a_quantized_row_of_partial_blocks_is_refused(tmp_path: Path) -> None:
    # 33 Q8_0 columns were taken as one 32-column block: the last column read nothing.
    error = _refusal(tmp_path, gguf_bytes([], [TensorInfo("q", (33, 1), Q8_0)], bytes(68)))
    assert "tensor q has 33 columns, not whole Q8_0 blocks of 32" in error.message


def test_an_unaligned_tensor_offset_is_refused(tmp_path: Path) -> None:
    error = _refusal(tmp_path, gguf_bytes([], [TensorInfo("t", (1,), offset=4)], bytes(8)))
    assert "tensor t starts at offset 4" in error.message


def test_a_string_array_in_place_of_the_ranks_is_refused_by_name(tmp_path: Path) -> None:
    # int("x") escaped as a raw ValueError.
    path = tmp_path / "p.gguf"
    writer = gguf.GGUFWriter(str(path), "audiocpp")
    writer.add_array(NAMES, ["w"])
    writer.add_array(RANKS, ["x"])
    writer.add_array(SHAPES, ["y"])
    writer.add_tensor("w", np.zeros(2, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with GgufFile(path) as package, pytest.raises(ModelError, match="do not describe its 1 tensors"):
        logical_tensors(package, path.name)
