"""f32 weights packed once on ONNX Runtime inside ggml graphs (inference/native/packed_f32.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

from inference.errors import BackendError, UsageError
from inference.native import Backend, Graph, GraphBuilder, load_weights, open_backend, open_checkpoint
from inference.native.checkpoint import Checkpoint
from inference.native.packed_f32 import FileMatrix, PackedF32Gemm
from inference.native.tensor import ByteLayout
from inference.native.weights import WeightStore

RNG = np.random.default_rng(7)
# 256 output columns split into two 128-column panels on 2 threads (node_plans.weight_panels); 100 do not.
WEIGHTS = {
    "wide.weight": RNG.standard_normal((256, 96)).astype(np.float32),
    "wide.bias": RNG.standard_normal(256).astype(np.float32),
    "narrow.weight": RNG.standard_normal((100, 40)).astype(np.float32),
    "kernel.weight": RNG.standard_normal((64, 40, 1)).astype(np.float32),  # a 1x1 conv kernel
}
PACKED = ("wide.weight", "narrow.weight", "kernel.weight")


@pytest.fixture(scope="module", params=["safetensors", "gguf"])
def checkpoint_path(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """The same weights in both checkpoint layouts: ONNX Runtime reads each matrix at its offset in the file."""
    path = tmp_path_factory.mktemp("packed") / f"model.{request.param}"
    if request.param == "safetensors":
        save_file(WEIGHTS, str(path))
        return path
    writer = gguf.GGUFWriter(str(path), "captioneer_test")
    for name, array in WEIGHTS.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def checkpoint(checkpoint_path: Path) -> Iterator[Checkpoint]:
    with open_checkpoint(checkpoint_path) as ck:
        yield ck


@pytest.fixture(scope="module", params=[1, 2, 3])
def cpu(request: pytest.FixtureRequest) -> Iterator[Backend]:
    # 3 threads: more threads than panels, so each takes a share of the rows through every panel.
    backend = open_backend("cpu", threads=request.param, gemm="onnxruntime")
    yield backend
    backend.close()


def packed_store(backend: Backend, checkpoint: Checkpoint) -> WeightStore:
    return load_weights(backend, checkpoint, pack_f32=PACKED, as_matrices=["kernel.weight"])


def product(
    backend: Backend, store: WeightStore, name: str, x: np.ndarray, bias: str | None = None
) -> np.ndarray:
    def build(g: GraphBuilder) -> None:
        xs = g.input("x", x.shape)
        g.output("y", g.linear(xs, store[name], store[bias] if bias else None))

    with Graph(backend, build) as graph:
        return graph.run(x=x)["y"]


@pytest.mark.parametrize("rows", [1, 3, 64, 300])
def test_products_equal_numpys(cpu: Backend, checkpoint: Checkpoint, rows: int) -> None:
    with packed_store(cpu, checkpoint) as store:
        assert all(store[name].layout is ByteLayout.PACKED_F32 for name in PACKED)
        for name, bias in (("wide.weight", "wide.bias"), ("wide.weight", None), ("narrow.weight", None)):
            weight = WEIGHTS[name]
            x = RNG.standard_normal((rows, weight.shape[1])).astype(np.float32)
            want = x.astype(np.float64) @ weight.T.astype(np.float64)
            if bias:
                want += WEIGHTS[bias]
            got = product(cpu, store, name, x, bias)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
        kernel = WEIGHTS["kernel.weight"][:, :, 0]
        x = RNG.standard_normal((2, rows, 40)).astype(np.float32)  # leading axes are rows too
        np.testing.assert_allclose(
            product(cpu, store, "kernel.weight", x), x @ kernel.T, rtol=1e-5, atol=1e-4
        )


def test_the_packed_weight_lives_only_in_onnx_runtime(checkpoint: Checkpoint) -> None:
    with (
        open_backend("cpu", threads=2, gemm="onnxruntime") as backend,
        packed_store(backend, checkpoint) as store,
    ):
        assert store.packed_bytes == 4 * (256 * 96 + 100 * 40 + 64 * 40)
        assert store.allocated_bytes < 4096  # the biases only: no ggml copy of a packed matrix
        assert "(none)" not in store.buffer_names()
        # Read back from the file: ONNX Runtime holds the only copy.
        np.testing.assert_array_equal(store.numpy("wide.weight"), WEIGHTS["wide.weight"])
        assert store["kernel.weight"].shape == (64, 40)
        assert backend.f32_gemm.startswith("onnxruntime ")


def test_other_gemm_choices_pack_nothing(checkpoint: Checkpoint) -> None:
    for choice in ("openblas", "ggml"):
        with (
            open_backend("cpu", threads=2, gemm=choice) as backend,
            packed_store(backend, checkpoint) as store,
        ):
            assert store.packed_bytes == 0 and backend.packed_products is None
            assert store["wide.weight"].layout is ByteLayout.GGML
            x = RNG.standard_normal((5, 96)).astype(np.float32)
            np.testing.assert_allclose(
                product(backend, store, "wide.weight", x), x @ WEIGHTS["wide.weight"].T, rtol=1e-5, atol=1e-4
            )


def test_only_products_may_use_a_packed_weight(checkpoint: Checkpoint) -> None:
    with (
        open_backend("cpu", threads=2, gemm="onnxruntime") as backend,
        packed_store(backend, checkpoint) as store,
    ):

        def add(g: GraphBuilder) -> None:
            g.output("y", g.add(g.input("x", (256, 96)), store["wide.weight"]))

        with pytest.raises(UsageError, match="packed on ONNX Runtime"):
            Graph(backend, add)

        def row_invariant(g: GraphBuilder) -> None:
            g.keep_products_on_ggml()
            g.output("y", g.linear(g.input("x", (4, 96)), store["wide.weight"]))

        with pytest.raises(UsageError, match="rows must not depend on their batching"):
            Graph(backend, row_invariant)


def test_a_weight_outside_its_file_is_refused(checkpoint_path: Path) -> None:
    size = checkpoint_path.stat().st_size
    packer = PackedF32Gemm(lambda pointer: pointer)
    with pytest.raises(UsageError, match=checkpoint_path.name):
        packer.pack(FileMatrix(checkpoint_path, size - 100, 10, 10), 1)
    with pytest.raises(UsageError, match="outside the file"):
        FileMatrix(checkpoint_path, -4, 1, 1).check(size)


def test_auto_falls_back_when_onnx_runtime_cannot_pack(
    checkpoint: Checkpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: PackedF32Gemm, source: FileMatrix, panels: int) -> None:
        raise BackendError("this ONNX Runtime cannot pack")

    monkeypatch.setattr(PackedF32Gemm, "pack", refuse)
    with open_backend("cpu", threads=2, gemm="auto") as backend, packed_store(backend, checkpoint) as store:
        assert store.packed_bytes == 0 and store["wide.weight"].layout is ByteLayout.GGML
        x = RNG.standard_normal((3, 96)).astype(np.float32)
        np.testing.assert_allclose(
            product(backend, store, "wide.weight", x), x @ WEIGHTS["wide.weight"].T, rtol=1e-5, atol=1e-4
        )
    with open_backend("cpu", threads=2, gemm="onnxruntime") as backend:
        with pytest.raises(BackendError, match="cannot pack"):
            packed_store(backend, checkpoint)
        assert backend.packed_products is not None and not backend.packed_products._matrices  # nothing left


def test_a_closed_store_fails_its_graph_clearly(checkpoint: Checkpoint) -> None:
    with open_backend("cpu", threads=2, gemm="onnxruntime") as backend:
        store = packed_store(backend, checkpoint)

        def build(g: GraphBuilder) -> None:
            g.output("y", g.linear(g.input("x", (2, 96)), store["wide.weight"]))

        with Graph(backend, build) as graph:
            store.close()
            with pytest.raises(BackendError, match="after its weight store closed"):
                graph.run(x=np.ones((2, 96), np.float32))
