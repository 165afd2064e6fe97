"""Big f32 weight products on OpenBLAS inside ggml graphs (inference/native/blas.py)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from inference.errors import BackendError, UsageError
from inference.native import Backend, Graph, GraphBuilder, load_weights, open_backend
from inference.native.blas import GEMM_ENV, GemmLimits


@pytest.fixture(scope="module", params=[1, 3])
def blas_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    # 3 threads: the output columns split into uneven shares (and one thread may get none).
    backend = open_backend("cpu", threads=request.param, gemm="openblas")
    yield backend
    backend.close()


def graph_ops(graph: Graph) -> list[str]:
    api = graph.api
    return [api.ggml_op_desc(api.ggml_graph_node(graph._cgraph, i)).decode() for i in range(graph.n_nodes)]


def linear_graph(
    backend: Backend,
    weight: np.ndarray,
    x_shape: tuple[int, ...],
    storage: str = "f32",
    transpose_input: bool = False,
    row_invariant: bool = False,
):
    store = load_weights(backend, arrays={"w": weight}, storage=storage)

    def build(g: GraphBuilder) -> None:
        if row_invariant:
            g.keep_products_on_ggml()
        x = g.input("x", x_shape)
        if transpose_input:  # (K, rows) in, a non-contiguous (rows, K) view into the product
            x = g.transpose(x)
        g.output("y", g.linear(x, store["w"]))

    return store, Graph(backend, build)


@pytest.mark.parametrize(
    ("n", "k", "x_shape"),
    [
        (256, 256, (80, 256)),  # above both limits
        (200, 256, (2, 70, 256)),  # batched rows; 200 columns: shares that are not whole 64-column panels
        (1000, 48, (3, 2, 90, 48)),  # 4-D input: every leading axis is rows
    ],
)
def test_big_f32_products_run_on_openblas_and_match_numpy(blas_backend, n, k, x_shape):
    rng = np.random.default_rng(n)
    weight = rng.standard_normal((n, k)).astype(np.float32)
    x = rng.standard_normal(x_shape).astype(np.float32)
    store, graph = linear_graph(blas_backend, weight, x_shape)
    with store, graph:
        assert "CUSTOM" in graph_ops(graph) and "MUL_MAT" not in graph_ops(graph)
        got = graph.run(x=x)["y"]
        again = graph.run(x=x)["y"]
    assert got.shape == (*x_shape[:-1], n)
    np.testing.assert_allclose(got, x @ weight.T, rtol=1e-5, atol=1e-4)
    assert np.array_equal(got, again)


def test_a_non_contiguous_input_is_made_contiguous_first(blas_backend):
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((256, 128)).astype(np.float32)
    xt = rng.standard_normal((128, 200)).astype(np.float32)
    store, graph = linear_graph(blas_backend, weight, xt.shape, transpose_input=True)
    with store, graph:
        assert "CUSTOM" in graph_ops(graph)
        got = graph.run(x=xt)["y"]
    np.testing.assert_allclose(got, xt.T @ weight.T, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    ("case", "weight_shape", "x_shape", "storage"),
    [
        ("few rows", (1024, 1024), (8, 1024), "f32"),  # streaming chunks and decode steps stay on ggml
        ("small product", (32, 32), (100, 32), "f32"),
        ("quantised weight", (256, 256), (128, 256), "q8_0"),  # ggml's int8 kernels
        ("f16 weight", (256, 256), (128, 256), "f16"),
    ],
)
def test_other_products_stay_on_ggml(blas_backend, case, weight_shape, x_shape, storage):
    weight = np.random.default_rng(2).standard_normal(weight_shape).astype(np.float32)
    store, graph = linear_graph(blas_backend, weight, x_shape, storage=storage)
    with store, graph:
        ops = graph_ops(graph)
    assert "MUL_MAT" in ops and "CUSTOM" not in ops, case


def test_row_invariant_graphs_keep_every_product_on_ggml(blas_backend):
    """ggml's f32 rows do not depend on how many rows are batched; OpenBLAS's may (its blocking follows the
    row count), so graphs whose results must not depend on batching opt out."""
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((256, 128)).astype(np.float32)
    x = rng.standard_normal((200, 128)).astype(np.float32)
    outs = []
    for rows in (200, 70, 3):
        store, graph = linear_graph(blas_backend, weight, (rows, 128), row_invariant=True)
        with store, graph:
            assert "CUSTOM" not in graph_ops(graph)
            outs.append(graph.run(x=x[:rows])["y"])
    assert np.array_equal(outs[1], outs[0][:70]) and np.array_equal(outs[2], outs[0][:3])


def test_limits_decide_what_goes_to_openblas(blas_backend, monkeypatch):
    monkeypatch.setattr(blas_backend.gemm, "limits", GemmLimits(min_rows=1, min_macs=1))
    weight = np.random.default_rng(4).standard_normal((8, 4)).astype(np.float32)
    x = np.random.default_rng(5).standard_normal((2, 4)).astype(np.float32)
    store, graph = linear_graph(blas_backend, weight, x.shape)
    with store, graph:
        assert "CUSTOM" in graph_ops(graph)
        np.testing.assert_allclose(graph.run(x=x)["y"], x @ weight.T, rtol=1e-5, atol=1e-5)


def test_a_failing_product_raises_instead_of_returning_garbage(blas_backend, monkeypatch):
    def broken(*_args: object) -> None:
        raise RuntimeError("simulated OpenBLAS failure")

    weight = np.ones((256, 256), np.float32)
    x = np.ones((100, 256), np.float32)
    store, graph = linear_graph(blas_backend, weight, x.shape)
    with store, graph:
        monkeypatch.setattr(blas_backend.gemm, "_sgemm", broken)
        with pytest.raises(BackendError, match="simulated OpenBLAS failure") as info:
            graph.run(x=x)
        assert GEMM_ENV in str(info.value)
        monkeypatch.undo()
        np.testing.assert_allclose(graph.run(x=x)["y"], 256.0)  # usable again


def test_the_choice_comes_from_the_argument_then_the_environment(monkeypatch):
    monkeypatch.setenv(GEMM_ENV, "ggml")
    with open_backend("cpu", threads=1) as backend:
        assert backend.gemm is None and backend.f32_gemm == "ggml"
    with open_backend("cpu", threads=1, gemm="openblas") as backend:
        assert backend.gemm is not None and backend.f32_gemm.startswith("openblas (")
        assert "f32_gemm=openblas" in repr(backend)
    monkeypatch.setenv(GEMM_ENV, "mkl")
    with pytest.raises(UsageError, match=f"unknown f32 GEMM 'mkl' \\(from {GEMM_ENV}\\)"):
        open_backend("cpu", threads=1)
    monkeypatch.delenv(GEMM_ENV)
    with open_backend("cpu", threads=1) as backend:  # auto: OpenBLAS, which is a dependency
        assert backend.gemm is not None


def test_a_missing_openblas_is_a_clear_error_or_a_quiet_fallback(hide_module):
    hide_module("scipy_openblas32")
    with pytest.raises(BackendError, match="scipy-openblas32 is not installed") as info:
        open_backend("cpu", threads=1, gemm="openblas")
    assert "CAPTIONEER_F32_GEMM=ggml" in info.value.fix
    with open_backend("cpu", threads=1, gemm="auto") as backend:
        assert backend.gemm is None


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [
        ((4, 96, 128), (4, 100, 128)),  # attention scores: per head (T, hd) x (T, hd)
        ((2, 96, 128), (6, 80, 128)),  # a broadcast over b's heads (ggml's grouped heads)
        ((2, 3, 70, 128), (2, 3, 90, 128)),  # two batch axes
    ],
)
def test_batched_products_of_activations_run_on_openblas(blas_backend, a_shape, b_shape):
    rng = np.random.default_rng(sum(a_shape))
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)

    def build(g: GraphBuilder) -> None:
        g.output("y", g.mul_mat(g.input("a", a.shape), g.input("b", b.shape)))

    with Graph(blas_backend, build) as graph:
        assert "CUSTOM" in graph_ops(graph)
        got = graph.run(a=a, b=b)["y"]
    repeat = b_shape[-3] // a_shape[-3]
    expected = b @ np.repeat(a, repeat, axis=-3).swapaxes(-1, -2)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_batched_operands_may_be_strided_views(blas_backend):
    """Per-head views of (T, heads, hd) activations: rows hd long but heads*hd apart, matrices hd apart."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((100, 4, 128)).astype(np.float32)
    k = rng.standard_normal((90, 4, 128)).astype(np.float32)

    def build(g: GraphBuilder) -> None:
        qh = g.permute(g.input("q", q.shape), (1, 0, 2))  # (heads, T, hd) view
        kh = g.permute(g.input("k", k.shape), (1, 0, 2))
        g.output("scores", g.mul_mat(kh, qh))

    with Graph(blas_backend, build) as graph:
        assert "CUSTOM" in graph_ops(graph)
        got = graph.run(q=q, k=k)["scores"]
    expected = q.transpose(1, 0, 2) @ k.transpose(1, 2, 0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_a_node_plans_its_products_once_and_the_plan_dies_with_its_graph(blas_backend):
    rng = np.random.default_rng(7)
    plans = blas_backend.gemm.plans
    before = len(plans)
    for round_ in range(
        3
    ):  # later graphs may reuse the freed addresses: their products must not use old plans
        weight = rng.standard_normal((256, 256)).astype(np.float32)
        x = rng.standard_normal((80, 256)).astype(np.float32)
        store, graph = linear_graph(blas_backend, weight, x.shape)
        with store, graph:
            first = graph.run(x=x)["y"]
            assert len(plans) == before + 1  # one product node, planned on its first compute
            x2 = x[::-1].copy()  # new input values through the same plan
            np.testing.assert_allclose(graph.run(x=x2)["y"], x2 @ weight.T, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(first, x @ weight.T, rtol=1e-5, atol=1e-4)
        assert len(plans) == before, f"round {round_}: the closed graph's plan is still kept"
