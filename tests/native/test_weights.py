"""Weight store: safetensors and GGUF files written here, storage conversion, use in a graph."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import quants

from inference.errors import InputFileError, ModelError, UsageError
from inference.native import Graph, load_weights, open_checkpoint


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    return quants.quantize(x, QT.BF16).view(np.uint16).reshape(x.shape)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path: Path, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    """Minimal safetensors writer (the numpy API of the safetensors package has no bf16)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        blob = np.ascontiguousarray(array).tobytes()
        header[name] = {
            "dtype": dtype,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    path.write_bytes(len(encoded).to_bytes(8, "little") + encoded + b"".join(blobs))


@pytest.fixture(scope="module")
def safetensors_file(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    expected = {
        "a.weight": rand(8, 64, seed=1),
        "b.weight": rand(5, 64, seed=2).astype(np.float16).astype(np.float32),
        "c.weight": bf16_bits_to_f32(to_bf16_bits(rand(6, 64, seed=3))),
        "odd.weight": rand(4, 33, seed=4),
        "norm.weight": rand(64, seed=5),
    }
    path = tmp_path_factory.mktemp("st") / "model.safetensors"
    write_safetensors(
        path,
        {
            "a.weight": ("F32", expected["a.weight"]),
            "b.weight": ("F16", expected["b.weight"].astype(np.float16)),
            "c.weight": ("BF16", to_bf16_bits(expected["c.weight"])),
            "odd.weight": ("F32", expected["odd.weight"]),
            "norm.weight": ("F32", expected["norm.weight"]),
        },
    )
    return path, expected


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray], dict[str, str]]:
    path = tmp_path_factory.mktemp("gguf") / "model.gguf"
    writer = gguf.GGUFWriter(str(path), "captioneer-test")
    expected, types = {}, {}
    for seed, (name, qtype) in enumerate(
        [
            ("f32.weight", QT.F32),
            ("f16.weight", QT.F16),
            ("q8.weight", QT.Q8_0),
            ("q4k.weight", QT.Q4_K),
            ("q6k.weight", QT.Q6_K),
        ]
    ):
        values = rand(4, 256, seed=10 + seed)
        if qtype == QT.F32:
            writer.add_tensor(name, values)
            expected[name] = values
        elif qtype == QT.F16:
            writer.add_tensor(name, values.astype(np.float16))
            expected[name] = values.astype(np.float16).astype(np.float32)
        else:
            from inference.native import GgmlType, load_api
            from inference.native.quant import quantize

            raw = quantize(load_api(), values, GgmlType(int(qtype)))
            writer.add_tensor(name, raw, raw_dtype=qtype)
            expected[name] = quants.dequantize(raw, qtype).reshape(values.shape)
        types[name] = qtype.name.lower()
    writer.add_tensor("bias", rand(256, seed=20))
    expected["bias"] = rand(256, seed=20)
    types["bias"] = "f32"
    writer.add_tensor("bias4", rand(4, seed=21))
    expected["bias4"] = rand(4, seed=21)
    types["bias4"] = "f32"
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, expected, types


def test_safetensors_native_storage(cpu_backend, safetensors_file):
    path, expected = safetensors_file
    with open_checkpoint(path) as ckpt:
        assert sorted(ckpt.names()) == sorted(expected)
        for name, values in expected.items():
            np.testing.assert_array_equal(ckpt.numpy(name), values)
        with load_weights(cpu_backend, ckpt) as store:
            assert store["b.weight"].type.name == "F16" and store["c.weight"].type.name == "BF16"
            assert store["norm.weight"].shape == (64,)
            for name, values in expected.items():
                np.testing.assert_array_equal(store.numpy(name), values)
            assert store.bytes_by_type() == {
                "f32": 4 * (8 * 64 + 4 * 33 + 64),
                "f16": 2 * 5 * 64,
                "bf16": 2 * 6 * 64,
            }


@pytest.mark.parametrize("storage", ["f32", "f16", "bf16", "q8_0"])
def test_safetensors_converted_storage(cpu_backend, safetensors_file, storage):
    path, expected = safetensors_file
    with (
        open_checkpoint(path) as ckpt,
        load_weights(cpu_backend, ckpt, storage=storage, overrides={"a.weight": "f32"}) as store,
    ):
        assert store["a.weight"].type.name == "F32"
        assert store["norm.weight"].type.name == "F32"  # vectors stay f32
        assert store["odd.weight"].type.name == (
            "F32" if storage == "q8_0" else storage.upper()
        )  # 33 is no q8_0 row
        assert store["b.weight"].type.name == storage.upper()
        tol = {"f32": 0, "f16": 1e-2, "bf16": 3e-2, "q8_0": 4e-2}[storage]
        for name, values in expected.items():
            np.testing.assert_allclose(store.numpy(name), values, atol=tol * np.abs(values).max())
        assert sum(store.bytes_by_type().values()) <= store.buffer_bytes


def test_gguf_native_keeps_quantized_bytes(cpu_backend, gguf_file):
    path, expected, types = gguf_file
    with open_checkpoint(path) as ckpt:
        for name, values in expected.items():
            assert ckpt.shape(name) == values.shape
            np.testing.assert_allclose(ckpt.numpy(name), values, rtol=1e-6, atol=1e-6)
        with load_weights(cpu_backend, ckpt) as store:
            assert {name: store[name].type.name.lower() for name in expected} == types
            sizes = store.bytes_by_type()
            assert sizes["q8_0"] == 4 * 8 * 34 and sizes["q4_k"] == 4 * 144 and sizes["q6_k"] == 4 * 210
            for name, values in expected.items():
                np.testing.assert_allclose(store.numpy(name), values, rtol=1e-6, atol=1e-6)
        with load_weights(cpu_backend, ckpt, storage="f32") as store:
            assert set(store.bytes_by_type()) == {"f32"}


@pytest.mark.parametrize("name", ["f32.weight", "f16.weight", "q8.weight", "q4k.weight", "q6k.weight"])
def test_quantized_weights_in_a_graph(cpu_backend, gguf_file, name):
    path, expected, _ = gguf_file
    x = rand(3, 256, seed=30)
    with (
        open_checkpoint(path) as ckpt,
        load_weights(cpu_backend, ckpt, names={"w": name, "b": "bias4"}) as store,
    ):

        def build(g):
            g.output("y", g.linear(g.input("x", x.shape), store["w"], store["b"]))

        with Graph(cpu_backend, build) as graph:
            y = graph.run(x=x)["y"]
    reference = x @ expected[name].T + expected["bias4"]
    # ggml quantizes activations to q8 for quantized weights (and f16 for f16 weights)
    np.testing.assert_allclose(y, reference, atol=0.02 * np.abs(reference).max())


def test_arrays_and_errors(cpu_backend, safetensors_file, tmp_path):
    path, _ = safetensors_file
    extra = {"fused": rand(4, 32, seed=40), "ids": np.arange(5, dtype=np.int32)}
    with open_checkpoint(path) as ckpt:
        with load_weights(cpu_backend, ckpt, names=["norm.weight"], storage="q8_0", arrays=extra) as store:
            assert store["fused"].type.name == "Q8_0" and store["ids"].type.name == "I32"
            np.testing.assert_array_equal(store.numpy("norm.weight"), ckpt.numpy("norm.weight"))
        with pytest.raises(ModelError, match="no tensor 'missing'"):
            load_weights(cpu_backend, ckpt, names=["missing"])
        with pytest.raises(UsageError, match="not loaded"):
            load_weights(cpu_backend, ckpt, names=["a.weight"], overrides={"b.weight": "f16"})
        with pytest.raises(UsageError, match="storage type"):
            load_weights(cpu_backend, ckpt, storage="q3_weird")
        with pytest.raises(UsageError, match="cannot be stored as Q8_0"):
            load_weights(cpu_backend, ckpt, names=["odd.weight"], overrides={"odd.weight": "q8_0"})
    with pytest.raises(InputFileError):
        open_checkpoint(tmp_path / "absent.safetensors")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file at all")
    with pytest.raises(InputFileError):
        open_checkpoint(broken)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_damaged_safetensors_name_the_file(safetensors_file, tmp_path, damage):
    path, _ = safetensors_file
    damaged = tmp_path / "model.safetensors"
    whole = path.read_bytes()
    damaged.write_bytes(
        {"truncated": whole[: len(whole) - 100], "garbage": b"\xff" * 64, "empty": b""}[damage]
    )
    with pytest.raises(InputFileError, match=r"model\.safetensors") as caught:
        open_checkpoint(damaged)
    assert "re-download" in caught.value.fix


def test_cpu_store_uses_the_mapped_file_in_place(cpu_backend, gguf_file):
    path, expected, _ = gguf_file
    ckpt = open_checkpoint(path)
    store = load_weights(cpu_backend, ckpt)
    copied = load_weights(cpu_backend, ckpt, map_files=False)
    ckpt.close()  # the store keeps the mapping alive
    try:
        total = sum(store.bytes_by_type().values())
        assert store.mapped_bytes == total == store.buffer_bytes and store.allocated_bytes == 0
        assert copied.mapped_bytes == 0 and copied.allocated_bytes == copied.buffer_bytes >= total
        x = rand(2, 256, seed=50)
        for source in (store, copied):

            def build(g, source=source):
                g.output("y", g.linear(g.input("x", x.shape), source["q4k.weight"]))

            with Graph(cpu_backend, build) as graph:
                y = graph.run(x=x)["y"]
            reference = x @ expected["q4k.weight"].T
            np.testing.assert_allclose(y, reference, atol=0.02 * np.abs(reference).max())
        np.testing.assert_array_equal(store.numpy("f16.weight"), expected["f16.weight"])
        with pytest.raises(UsageError, match="read-only"):
            Graph(cpu_backend, lambda g: g.store_into(store["bias"], g.input("b", (256,))))
    finally:
        store.close()
        copied.close()


@pytest.mark.parametrize("storage", ["native", "f16", "q8_0", "q4_k"])
def test_weights_never_land_in_the_cpu_extra_buffer_types(cpu_backend, tmp_path, storage):
    """Captioneer's own graphs must not meet the AMX kernels that crash on quantised weights
    (llama.cpp #20824): the store uses plain CPU buffers, mapped or allocated, for every type."""
    path = tmp_path / "wide.safetensors"
    write_safetensors(path, {"w": ("F32", rand(512, 256, seed=7)), "n": ("F32", rand(256, seed=8))})
    overrides = {"w": storage} if storage == "q4_k" else None
    with (
        open_checkpoint(path) as ckpt,
        load_weights(
            cpu_backend, ckpt, storage="native" if storage == "q4_k" else storage, overrides=overrides
        ) as store,
    ):
        assert store["w"].type.name == ("F32" if storage == "native" else storage.upper())
        names = store.buffer_names()
        assert names and names <= {"CPU", "CPU_Mapped"}, names  # plain host buffers, mapped or allocated
