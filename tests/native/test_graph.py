"""Graph layer: reuse, shape-bucket cache, release of native memory, and input/output checks."""

from __future__ import annotations

import os

import numpy as np
import pytest

from inference.errors import UsageError
from inference.native import Graph, GraphBudgetError, GraphCache


def rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def mlp(g, rows: int) -> None:
    x = g.input("x", (rows, 256))
    w = g.input("w", (512, 256))
    g.output("y", g.gelu(g.linear(x, w)))


def test_graph_runs_repeatedly_with_stable_memory(cpu_backend):
    x = np.ones((8, 256), np.float32)
    w = np.full((512, 256), 0.01, np.float32)
    with Graph(cpu_backend, mlp, 8) as graph:
        out = np.empty((8, 512), np.float32)
        for _ in range(50):
            graph.run(x=x, w=w)
        grown = []
        for _ in range(3):
            before = rss_bytes()
            for _ in range(500):
                graph.set_input("x", x)
                graph.set_input("w", w)
                graph.compute()
                graph.get_output("y", out)
            grown.append(rss_bytes() - before)
    # A leak of 4 KB a run grows every batch by 2 MB (checked with one). RSS is the whole process's: in a full
    # test run another thread's allocation once lifted a single batch of 1000 runs by 8 MB, so one batch alone
    # proves nothing.
    assert min(grown) < 1 << 20, grown
    np.testing.assert_allclose(out, np.full((8, 512), 2.56 * 0.5 * (1 + 0.9895), np.float32), rtol=1e-3)


def test_building_and_closing_graphs_releases_native_memory(cpu_backend):
    x = np.ones((64, 256), np.float32)
    w = np.zeros((512, 256), np.float32)

    def cycle() -> None:
        with Graph(cpu_backend, mlp, 64) as graph:  # ~0.7 MB of inputs + compute buffer
            graph.run(x=x, w=w)

    for _ in range(20):
        cycle()
    before = rss_bytes()
    for _ in range(300):
        cycle()
    grown = rss_bytes() - before
    assert grown < 16 << 20, grown  # a leak would be ~200 MB


def test_cache_builds_once_per_bucket_and_evicts(cpu_backend):
    built = []

    def build(g, rows):
        built.append(rows)
        mlp(g, rows)

    w = np.zeros((512, 256), np.float32)
    with GraphCache(cpu_backend, build, max_graphs=2) as cache:
        for rows in (16, 16, 32, 16, 32, 16):
            out = cache.run(rows, x=np.ones((rows, 256), np.float32), w=w)
            assert out["y"].shape == (rows, 512)
        assert built == [16, 32] and cache.builds == 2
        evicted = cache.get(16)
        cache.get(32)
        cache.get(64)  # evicts 16, the least recently used
        assert len(cache) == 2 and built == [16, 32, 64]
        with pytest.raises(UsageError, match="closed"):
            evicted.compute()
        cache.get(16)
        assert built[-1] == 16


def test_cache_keeps_its_graphs_within_the_compute_memory_limit(cpu_backend):
    w = np.zeros((512, 256), np.float32)
    with Graph(cpu_backend, mlp, 64) as probe:
        per_64_rows = probe.compute_buffer_bytes
    assert per_64_rows > 0
    # room for one 64-row graph and a bit more, not for two
    with GraphCache(cpu_backend, mlp, max_graphs=4, max_buffer_bytes=per_64_rows * 3 // 2) as cache:
        first = cache.get(64)
        cache.get(63)  # fits alone, but not together with the first: the older one goes
        assert len(cache) == 1 and cache.buffer_bytes <= per_64_rows * 3 // 2
        with pytest.raises(UsageError, match="closed"):
            first.compute()
        with pytest.raises(GraphBudgetError, match="MiB of compute memory") as caught:
            cache.get(256)
        assert caught.value.needed_bytes > caught.value.limit_bytes
        assert (
            len(cache) == 1 and cache.builds == 3
        )  # the graph that did not fit was freed, the cached one kept
        out = cache.run(63, x=np.ones((63, 256), np.float32), w=w)
        assert out["y"].shape == (63, 512)
    with pytest.raises(UsageError, match="positive"):
        GraphCache(cpu_backend, mlp, max_buffer_bytes=0)


def test_input_and_output_checks(cpu_backend):
    with Graph(cpu_backend, mlp, 4) as graph:
        assert graph.input_shapes == {"x": (4, 256), "w": (512, 256)}
        assert graph.output_shapes == {"y": (4, 512)}
        assert graph.n_nodes >= 2 and graph.compute_buffer_bytes > 0
        with pytest.raises(UsageError, match="expects shape"):
            graph.run(x=np.ones((5, 256), np.float32), w=np.ones((512, 256), np.float32))
        with pytest.raises(UsageError, match="missing \\['w'\\]"):
            graph.run(x=np.ones((4, 256), np.float32))
        with pytest.raises(UsageError, match="contiguous float32"):
            graph.get_output("y", np.empty((4, 512), np.float64))
        # inputs are converted to the declared dtype
        y = graph.run(x=np.ones((4, 256), np.float64), w=np.zeros((512, 256), np.float16))["y"]
        assert y.dtype == np.float32 and not y.any()


def test_build_errors_are_python_errors(cpu_backend):
    def unused_input(g):
        g.input("unused", (3,))
        g.output("y", g.relu(g.input("x", (3,))))

    with pytest.raises(UsageError, match="'unused' is not used"):
        Graph(cpu_backend, unused_input)
    with pytest.raises(UsageError, match="at least one output"):
        Graph(cpu_backend, lambda g: g.input("x", (3,)))

    def too_big(g):
        x = g.input("x", (3,))
        for _ in range(40):
            x = g.relu(x)
        g.output("y", x)

    with pytest.raises(UsageError, match="max_nodes"):
        Graph(cpu_backend, too_big, max_nodes=16)
    with Graph(cpu_backend, too_big, max_nodes=64) as graph:
        assert graph.run(x=np.array([-1, 0, 2], np.float32))["y"].tolist() == [0, 0, 2]


def test_persistent_state_through_store_into_and_cpy(cpu_backend):
    from inference.native import load_weights

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    with load_weights(cpu_backend, arrays={"state": np.zeros((2, 4), np.float32)}) as store:

        def build(g):
            inp = g.input("x", (2, 4))
            g.output("y", inp + store["state"])
            g.store_into(store["state"], g.scale(inp, 2.0))

        with Graph(cpu_backend, build) as graph:
            np.testing.assert_array_equal(graph.run(x=x)["y"], x)
            np.testing.assert_array_equal(store.numpy("state"), 2 * x)
            np.testing.assert_array_equal(graph.run(x=x)["y"], 3 * x)

        def copy(g):
            g.output("copied", g.cpy(g.input("x", (2, 4)), store["state"]))

        with Graph(cpu_backend, copy) as graph:
            np.testing.assert_array_equal(graph.run(x=-x)["copied"], -x)
        np.testing.assert_array_equal(store.numpy("state"), -x)


def test_ops_a_gpu_backend_lacks_are_reported_before_running(monkeypatch):
    from inference.errors import BackendError
    from inference.native import open_backend

    with open_backend("cpu", threads=1) as backend:
        monkeypatch.setattr(backend, "is_cpu", False)  # pretend: a device backend without these ops
        monkeypatch.setattr(backend.api, "ggml_backend_supports_op", lambda _backend, _node: False)
        with pytest.raises(BackendError, match="cannot run: RELU"):
            Graph(backend, lambda g: g.output("y", g.relu(g.input("x", (3,)))))
