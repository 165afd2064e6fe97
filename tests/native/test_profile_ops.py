"""The op profiler: node-by-node compute gives the ordinary results and a timing for every node."""

from __future__ import annotations

import numpy as np

from inference.native import Graph, GraphBuilder, load_weights
from inference.native.profiler import OpProfiler


def rand(*shape: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_profiled_compute_is_identical_and_times_every_node(cpu_backend):
    x = rand(24, 64, seed=1)
    weights = {"w": rand(96, 64, seed=2), "w8": rand(32, 96, seed=3)}
    with load_weights(cpu_backend, arrays=weights, overrides={"w8": "q8_0"}) as store:

        def build(g: GraphBuilder) -> None:
            h = g.gelu(g.linear(g.input("x", x.shape), store["w"]))
            scores = g.softmax(g.matmul(h, g.transpose(h)), scale=0.125)  # activation x activation
            g.output("y", g.linear(g.matmul(scores, h), store["w8"]))

        with Graph(cpu_backend, build) as graph:
            plain = graph.run(x=x)["y"]
            profiler = OpProfiler()
            cpu_backend.profiler = profiler
            try:
                profiled = graph.run(x=x)["y"]
            finally:
                cpu_backend.profiler = None
            again = graph.run(x=x)["y"]

    np.testing.assert_array_equal(profiled, plain)
    np.testing.assert_array_equal(again, plain)
    ops = [r.op for r in profiler.records]
    assert ops.count("MUL_MAT") == 4 and "SOFT_MAX" in ops and "GELU_ERF" in ops
    assert not {"VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE", "NONE"} & set(ops)
    assert len(profiler.graph_seconds) == 1
    assert sum(r.seconds for r in profiler.records) <= profiler.graph_seconds[0]
    assert all(r.seconds > 0 for r in profiler.records)
    products = [r for r in profiler.records if r.op == "MUL_MAT"]
    first, *_, last = products
    # ggml order: weight (K=64, N=96) times x (K=64, M=24) -> (96, 24)
    assert first.srcs[0].weight and first.srcs[0].type == "f32" and first.srcs[0].ne[:2] == (64, 96)
    assert not first.srcs[1].weight and first.ne[:2] == (96, 24)
    assert first.flops == 2.0 * 64 * 96 * 24
    assert last.srcs[0].weight and last.srcs[0].type == "q8_0"
    assert not any(s.weight for r in products[1:3] for s in r.srcs)  # attention-style products
    assert all(r.flops == 0 for r in profiler.records if r.op != "MUL_MAT")


def test_profiler_off_records_nothing(cpu_backend):
    x = rand(4, 8, seed=4)
    profiler = OpProfiler()

    def build(g: GraphBuilder) -> None:
        g.output("y", g.relu(g.input("x", x.shape)))

    with Graph(cpu_backend, build) as graph:
        cpu_backend.profiler = profiler
        try:
            graph.run(x=x)
        finally:
            cpu_backend.profiler = None
        assert len(profiler.records) == 1
        graph.run(x=x)
    assert len(profiler.records) == 1 and len(profiler.graph_seconds) == 1
    profiler.clear()
    assert not profiler.records and not profiler.graph_seconds


def test_conv_products_are_traced_to_their_columns(cpu_backend):
    x = rand(1, 8, 6, 6, seed=5)  # K = 8 x 3 x 3 = 72: no zero padding of short products
    with load_weights(cpu_backend, arrays={"k": rand(4, 8, 3, 3, seed=6)}) as store:

        def build(g: GraphBuilder) -> None:
            g.output("y", g.conv2d(g.input("x", x.shape), store["k"], padding=(1, 1)))

        with Graph(cpu_backend, build) as graph:
            profiler = OpProfiler()
            cpu_backend.profiler = profiler
            try:
                graph.run(x=x)
            finally:
                cpu_backend.profiler = None
    (product,) = [r for r in profiler.records if r.op == "MUL_MAT"]
    kernel, columns = product.srcs
    assert (
        kernel.weight and kernel.op == "NONE" and kernel.ne[:2] == (72, 4)
    )  # reshaped weight, still a weight
    assert not columns.weight and columns.op == "IM2COL" and columns.ne[:2] == (72, 36)
