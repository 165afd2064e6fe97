"""int8 weight products on ONNX Runtime's int8 GEMM inside ggml graphs (inference/native/int8.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from inference.errors import BackendError, UsageError
from inference.native import Backend, Graph, GraphBuilder, load_weights, open_backend
from inference.native import backend as backend_module
from inference.native.cpu_features import cpuinfo_flags, has_vnni, read_cpuinfo_flags
from inference.native.dtypes import GgmlType
from inference.native.int8 import (
    MODEL_PATH,
    QMAX_NO_VNNI,
    QMAX_VNNI,
    dequantize_rows,
    quantize_rows,
)
from inference.native.node_plans import weight_panels
from inference.native.tensor import ByteLayout


@pytest.fixture(scope="module", params=[1, 2, 3])
def cpu(request: pytest.FixtureRequest) -> Iterator[Backend]:
    # 2 and 3 threads: weights in column panels where their columns split evenly (native/int8.py), else uneven
    # row shares, and with few rows a thread gets none.
    backend = open_backend("cpu", threads=request.param)
    yield backend
    backend.close()


def graph_ops(graph: Graph) -> list[str]:
    api = graph.api
    return [api.ggml_op_desc(api.ggml_graph_node(graph._cgraph, i)).decode() for i in range(graph.n_nodes)]


def linear_graph(
    backend: Backend,
    weight: np.ndarray,
    x_shape: tuple[int, ...],
    bias: np.ndarray | None = None,
    row_invariant: bool = False,
):
    arrays = {"w": weight} if bias is None else {"w": weight, "b": bias}
    store = load_weights(backend, arrays=arrays, storage="int8")

    def build(g: GraphBuilder) -> None:
        if row_invariant:
            g.keep_products_on_ggml()
        x = g.input("x", x_shape)
        g.output("y", g.linear(x, store["w"], store["b"] if bias is not None else None))

    return store, Graph(backend, build)


def relative_rms(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.sqrt(np.mean((got - want) ** 2) / np.mean(want**2)))


def test_row_quantization_round_trips_within_half_a_step():
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((40, 24)).astype(np.float32) * np.linspace(0.01, 10, 40)[:, None]
    weight[7] = 0.0  # an all-zero row keeps a finite scale
    q, scale = quantize_rows(weight, 127)
    assert q.dtype == np.int8 and q.shape == (1, 24, 40) and q.flags.c_contiguous  # transposed: (1, K, N)
    assert scale.shape == (40,) and np.isfinite(scale).all()
    assert np.abs(q).max() == 127
    back = dequantize_rows(q, scale)
    assert np.all(np.abs(back - weight) <= scale[:, None] / 2 + 1e-7)
    assert not back[7].any()
    assert np.abs(quantize_rows(weight, QMAX_NO_VNNI)[0]).max() == 63
    panelled, same_scale = quantize_rows(weight, 127, panels=4)
    assert panelled.shape == (4, 24, 10) and panelled.flags.c_contiguous
    assert np.array_equal(panelled[1], q[0][:, 10:20])  # panel p: output columns [p·N/P, (p+1)·N/P)
    assert np.array_equal(dequantize_rows(panelled, same_scale), back)
    with pytest.raises(ValueError):
        quantize_rows(weight, 127, panels=3)


def test_weights_split_into_one_panel_per_thread_only_in_whole_simd_panels():
    assert weight_panels(1024, 2) == 2 and weight_panels(4096, 8) == 8
    assert weight_panels(1024, 1) == 1
    assert weight_panels(200, 2) == 1  # 100-column panels are not whole 64-column blocks
    assert weight_panels(384, 3) == 3 and weight_panels(384, 4) == 1


@pytest.mark.parametrize(
    ("n", "k", "x_shape"),
    [
        (256, 128, (80, 128)),
        (200, 96, (2, 35, 96)),  # batched rows
        (48, 64, (3, 2, 5, 64)),  # 4-D input: every leading axis is rows
        (64, 32, (2, 32)),  # fewer rows than threads get shares
        (384, 64, (7, 64)),  # 2 panels on 2 threads, 3 on 3
        (256, 48, (2, 3, 48)),  # panels with batched rows
        (256, 32, (300, 32)),  # many rows: row shares through every panel (int8.ROW_SPLIT_MIN_ROWS)
    ],
)
def test_int8_products_match_the_dequantized_weight(cpu, n, k, x_shape):
    rng = np.random.default_rng(n + k)
    weight = rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    x = rng.standard_normal(x_shape).astype(np.float32)
    store, graph = linear_graph(cpu, weight, x_shape, bias)
    with store, graph:
        assert store["w"].type == GgmlType.I8 and store["b"].type == GgmlType.F32
        ops = graph_ops(graph)
        assert "CUSTOM" in ops and "MUL_MAT" not in ops
        got = graph.run(x=x)["y"]
        again = graph.run(x=x)["y"]
        stored = store.numpy("w")
    assert got.shape == (*x_shape[:-1], n)
    assert np.array_equal(got, again)
    want = x @ stored.T + bias
    # What remains is the activation rounding: u8 with one scale per call's rows (about 1/255 of the range).
    assert relative_rms(got, want) < 1.5e-2
    assert relative_rms(got, x @ weight.T + bias) < 2e-2
    assert np.abs(stored - weight).max() <= np.abs(weight).max() / cpu.int8().qmax


def test_panelled_products_do_not_depend_on_the_thread_count():
    """Weights loaded on 2 threads sit in 2 column panels; 1 thread computes both panels over the same rows (the
    same bits), 4 threads split the rows inside each panel (activation scales per share: close, not equal)."""
    rng = np.random.default_rng(5)
    weight = rng.standard_normal((256, 96)).astype(np.float32)
    x = rng.standard_normal((9, 96)).astype(np.float32)
    backend = open_backend("cpu", threads=2)
    try:
        store, graph = linear_graph(backend, weight, x.shape)
        with store, graph:
            assert store.int8_panels(store["w"]) == 2
            two = graph.run(x=x)["y"]
            backend.set_threads(1)
            one = graph.run(x=x)["y"]
            backend.set_threads(4)
            four = graph.run(x=x)["y"]
            stored = store.numpy("w")
    finally:
        backend.close()
    assert np.array_equal(one, two)
    assert relative_rms(four, two) < 1.5e-2
    assert relative_rms(two, x @ stored.T) < 1.5e-2


def test_the_bias_add_puts_panelled_outputs_back_in_row_order_without_a_copy():
    rng = np.random.default_rng(6)
    weight = rng.standard_normal((256, 64)).astype(np.float32)
    bias = rng.standard_normal(256).astype(np.float32)
    x = rng.standard_normal((2, 5, 64)).astype(np.float32)
    backend = open_backend("cpu", threads=2)
    try:
        store, graph = linear_graph(backend, weight, x.shape, bias)
        with store, graph:
            assert store.int8_panels(store["w"]) == 2
            assert "CONT" not in graph_ops(graph)
            got = graph.run(x=x)["y"]
            want = x @ store.numpy("w").T + bias
        plain, without_bias = linear_graph(backend, weight, x.shape)
        with plain, without_bias:
            assert "CONT" in graph_ops(without_bias)  # nothing else to write the row order
            assert np.allclose(without_bias.run(x=x)["y"] + bias, got, atol=1e-5)
    finally:
        backend.close()
    assert got.shape == (2, 5, 256)
    assert relative_rms(got, want) < 1.5e-2


# /proc/cpuinfo as Linux writes it (flags lists shortened): one block per logical CPU.
ZEN3_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7763 64-Core Processor
flags\t\t: fpu vme sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 vaes vpclmulqdq
bugs\t\t: sysret_ss_attrs spectre_v1 spectre_v2

processor\t: 1
vendor_id\t: AuthenticAMD
flags\t\t: fpu vme sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 vaes vpclmulqdq
"""
ICELAKE_CPUINFO = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
flags\t\t: fpu sse2 avx avx2 avx512f avx512dq avx512bw avx512vl avx512_vbmi avx512_vnni avx512_bitalg
vmx flags\t: vnmi preemption_timer posted_intr invvpid ept_x_only
"""
ALDERLAKE_CPUINFO = """processor\t: 0
model name\t: 12th Gen Intel(R) Core(TM) i7-1260P
flags\t\t: fpu sse2 avx avx2 avx_vnni sha_ni umip pku ospke waitpkg gfni vaes
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer\t: 0x41
"""


def test_cpuinfo_flags_are_the_first_processors_flags_line():
    zen3 = cpuinfo_flags(ZEN3_CPUINFO)
    assert zen3 is not None and {"avx2", "fma", "vpclmulqdq"} <= zen3 and "spectre_v1" not in zen3
    icelake = cpuinfo_flags(ICELAKE_CPUINFO)
    assert icelake is not None and "avx512_vnni" in icelake and "ept_x_only" not in icelake  # not "vmx flags"
    assert "avx_vnni" in (cpuinfo_flags(ALDERLAKE_CPUINFO) or ())
    assert cpuinfo_flags(ARM_CPUINFO) is None and cpuinfo_flags("") is None


def test_read_cpuinfo_flags_reads_the_file_and_tolerates_its_absence(tmp_path):
    sample = tmp_path / "cpuinfo"
    sample.write_text(ICELAKE_CPUINFO)
    assert read_cpuinfo_flags(sample) == cpuinfo_flags(ICELAKE_CPUINFO)
    assert read_cpuinfo_flags(tmp_path / "missing") is None


@pytest.mark.parametrize(
    ("machine", "cpuinfo", "compiled_vnni", "vnni"),
    [
        ("x86_64", ICELAKE_CPUINFO, False, True),  # the running CPU decides, not the build
        ("x86_64", ALDERLAKE_CPUINFO, False, True),
        ("AMD64", ZEN3_CPUINFO, True, False),  # a build for a VNNI CPU running on an AVX2-only one
        ("x86_64", ARM_CPUINFO, True, True),  # no flags listed (not Linux): what ggml was compiled for
        ("x86_64", ARM_CPUINFO, False, False),
        ("aarch64", ARM_CPUINFO, False, True),  # ARM accumulates in 32 bits
        ("arm64", ZEN3_CPUINFO, False, True),
    ],
)
def test_int8_weights_keep_eight_bits_only_where_products_cannot_saturate(
    machine, cpuinfo, compiled_vnni, vnni
):
    assert has_vnni(machine, cpuinfo_flags(cpuinfo), compiled_vnni) is vnni


@pytest.mark.parametrize(("cpuinfo", "qmax"), [(ICELAKE_CPUINFO, QMAX_VNNI), (ZEN3_CPUINFO, QMAX_NO_VNNI)])
def test_a_backend_scales_int8_weights_for_the_cpu_it_reads(monkeypatch, tmp_path, cpuinfo, qmax):
    sample = tmp_path / "cpuinfo"
    sample.write_text(cpuinfo)
    monkeypatch.setattr(backend_module, "read_cpuinfo_flags", lambda: read_cpuinfo_flags(sample))
    monkeypatch.setattr(backend_module.platform, "machine", lambda: "x86_64")
    backend = open_backend("cpu", threads=1)
    try:
        assert backend.int8().qmax == qmax
    finally:
        backend.close()


def test_cpus_without_vnni_get_seven_bit_weights_and_the_same_products(monkeypatch):
    """AVX2's u8 x s8 pair sums saturate 16 bits above 7-bit weights: those CPUs store +-63."""
    monkeypatch.setattr(Backend, "_has_vnni", lambda self: False)
    backend = open_backend("cpu", threads=2)
    try:
        rng = np.random.default_rng(3)
        weight = rng.standard_normal((96, 64)).astype(np.float32)
        x = rng.standard_normal((40, 64)).astype(np.float32)
        store, graph = linear_graph(backend, weight, x.shape)
        with store, graph:
            assert backend.int8().qmax == QMAX_NO_VNNI
            stored = store.numpy("w")
            got = graph.run(x=x)["y"]
        assert np.abs(stored - weight).max() <= np.abs(weight).max() / QMAX_NO_VNNI
        assert relative_rms(got, x @ stored.T) < 1.5e-2
    finally:
        backend.close()


def test_only_matrices_become_int8():
    backend = open_backend("cpu", threads=1)
    try:
        rng = np.random.default_rng(1)
        arrays = {
            "m": rng.standard_normal((8, 16)),
            "v": rng.standard_normal(8),
            "k": rng.standard_normal((4, 3, 5)),
        }
        with load_weights(backend, arrays=arrays, storage="int8", overrides={"v": "f32"}) as store:
            assert store["m"].type == GgmlType.I8 and store.int8_scale(store["m"]) is not None
            assert store["v"].type == GgmlType.F32 and store["k"].type == GgmlType.F32
            assert store.int8_scale(store["k"]) is None
            assert store.bytes_by_type() == {"i8": 128, "f32": 8 * 4 + 60 * 4 + 8 * 4}
        with load_weights(backend, arrays={"m": arrays["m"]}, overrides={"m": "int8"}) as store:
            assert store["m"].type == GgmlType.I8
        with pytest.raises(UsageError, match="matrices only"):
            load_weights(backend, arrays={"k": arrays["k"]}, overrides={"k": "int8"})
    finally:
        backend.close()


def test_int8_weights_need_the_cpu_backend(monkeypatch):
    backend = open_backend("cpu", threads=1)
    try:
        monkeypatch.setattr(backend, "is_cpu", False)  # as a GPU backend reports itself
        with pytest.raises(UsageError, match="CPU backend only") as info:
            load_weights(backend, arrays={"m": np.ones((8, 8), np.float32)}, storage="int8")
        assert "q8_0" in str(info.value)
    finally:
        monkeypatch.undo()
        backend.close()


def test_row_invariant_graphs_refuse_int8_weights(cpu):
    weight = np.ones((64, 32), np.float32)
    with pytest.raises(UsageError, match="rows must not depend"):
        linear_graph(cpu, weight, (10, 32), row_invariant=True)


def test_a_failing_product_raises_instead_of_returning_garbage(cpu, monkeypatch):
    weight = np.ones((64, 32), np.float32)
    x = np.ones((16, 32), np.float32)
    store, graph = linear_graph(cpu, weight, x.shape)
    with store, graph:
        broken = type(
            "Broken",
            (),
            {"io_binding": lambda self: (_ for _ in ()).throw(RuntimeError("simulated ORT failure"))},
        )()
        monkeypatch.setattr(cpu.int8(), "_session", broken)
        with pytest.raises(BackendError, match="simulated ORT failure"):
            graph.run(x=x)
        monkeypatch.undo()
        np.testing.assert_allclose(graph.run(x=x)["y"], 32.0, rtol=1e-2)  # usable again


def test_a_missing_onnxruntime_is_a_clear_error(hide_module):
    backend = open_backend("cpu", threads=1)
    try:
        hide_module("onnxruntime")
        with pytest.raises(BackendError, match="ONNX Runtime") as info:
            load_weights(backend, arrays={"m": np.ones((8, 8), np.float32)}, storage="int8")
        assert "q8_0" in str(info.value)
    finally:
        backend.close()


def test_the_shipped_product_model_is_what_the_generator_writes():
    onnx = pytest.importorskip("onnx")  # the reference extras
    del onnx
    import importlib.util

    script = Path(__file__).with_name("make_int8_product_model.py")
    spec = importlib.util.spec_from_file_location("make_int8_product_model", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert MODEL_PATH.read_bytes() == module.build_model_bytes()


def test_the_shipped_product_model_has_the_expected_signature():
    import onnxruntime as ort

    session = ort.InferenceSession(str(MODEL_PATH), providers=["CPUExecutionProvider"])
    inputs = {i.name: (i.type, len(i.shape)) for i in session.get_inputs()}
    assert inputs == {"x": ("tensor(float)", 2), "w": ("tensor(int8)", 2), "w_scale": ("tensor(float)", 1)}
    assert [(o.name, o.type) for o in session.get_outputs()] == [("y", "tensor(float)")]


def test_the_store_marks_int8_matrices_with_their_byte_layout():
    backend = open_backend("cpu", threads=1)
    try:
        arrays = {"m": np.ones((8, 16), np.float32), "v": np.ones(8, np.float32)}
        with load_weights(backend, arrays=arrays, storage="int8") as store:
            assert store["m"].layout is ByteLayout.INT8_TRANSPOSED
            assert store["v"].layout is ByteLayout.GGML
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("op", "use"),
    [
        ("add", lambda g, w, x: g.add(w, w)),
        ("scale", lambda g, w, x: g.scale(w, 2.0)),
        ("mul", lambda g, w, x: x * w),  # operators go through the same ops
        ("reshape", lambda g, w, x: g.reshape(w, (16, 8))),
        ("transpose", lambda g, w, x: g.transpose(w)),
        ("cast", lambda g, w, x: g.cast(w, "f32")),
        ("output", lambda g, w, x: g.output("w", w)),
        ("matmul", lambda g, w, x: g.matmul(w, g.transpose(x))),
        ("mul_mat", lambda g, w, x: g.mul_mat(x, w)),  # as the activations, not the weight
    ],
)
def test_ops_other_than_mul_mat_refuse_int8_weights(op, use):
    backend = open_backend("cpu", threads=1)
    try:
        with load_weights(backend, arrays={"w": np.ones((8, 16), np.float32)}, storage="int8") as store:

            def build(g: GraphBuilder) -> None:
                x = g.input("x", (8, 16))
                g.output("y", use(g, store["w"], x))

            with pytest.raises(UsageError, match=f"^{op}.*only mul_mat can read") as info:
                Graph(backend, build)
            assert "q8_0" in str(info.value)
    finally:
        backend.close()
