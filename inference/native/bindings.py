"""ctypes signatures for the ggml functions Captioneer uses (checked against ggml.h of ggml 0.25.3).

Handles are opaque pointers (Python ``int``) except ``ggml_init_params``, passed by value. Read-only views of
the head of ``struct ggml_tensor`` (checked at load time) and of ``struct ggml_type_traits`` live here too.
``lib[name]`` returns a fresh function object, so these argtypes never touch ``llama_cpp``'s own bindings.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

from inference.errors import BackendError
from inference.native.lib import INSTALL_FIX, GgmlLibraries, load_ggml_libraries

P = ctypes.c_void_p
I32 = ctypes.c_int
I64 = ctypes.c_int64
F32 = ctypes.c_float
B = ctypes.c_bool
SZ = ctypes.c_size_t
STR = ctypes.c_char_p
U8 = ctypes.c_uint8


class InitParams(ctypes.Structure):
    _fields_ = [("mem_size", SZ), ("mem_buffer", P), ("no_alloc", B)]


class TensorHead(ctypes.Structure):
    """The leading fields of ``struct ggml_tensor`` (read-only use)."""

    _fields_ = [("type", I32), ("buffer", P), ("ne", I64 * 4), ("nb", SZ * 4)]


GGML_MAX_SRC = 10
GGML_MAX_NAME = 64
GGML_TENSOR_FLAG_INPUT = 1


class TensorNode(ctypes.Structure):
    """``struct ggml_tensor`` up to its name, for the op profiler only (read-only; checked by
    :func:`check_node_layout` before first use, so a changed struct fails loudly instead of misreading)."""

    _fields_ = [
        *TensorHead._fields_,
        ("op", I32),
        ("op_params", I32 * 16),  # GGML_MAX_OP_PARAMS = 64 bytes
        ("flags", I32),
        ("src", P * GGML_MAX_SRC),
        ("view_src", P),
        ("view_offs", SZ),
        ("data", P),
        ("name", ctypes.c_char * GGML_MAX_NAME),
    ]


ToFloat = ctypes.CFUNCTYPE(None, P, P, I64)
# ggml_custom_op_t: void (*)(struct ggml_tensor * dst, int ith, int nth, void * userdata)
CustomOp = ctypes.CFUNCTYPE(None, P, I32, I32, P)


class TypeTraits(ctypes.Structure):
    _fields_ = [
        ("type_name", STR),
        ("blck_size", I64),
        ("blck_size_interleave", I64),
        ("type_size", SZ),
        ("is_quantized", B),
        ("to_float", ToFloat),
        ("from_float_ref", P),
    ]


def _unary(*extra: Any) -> tuple[Any, tuple[Any, ...]]:
    return P, (P, P, *extra)


def _binary(*extra: Any) -> tuple[Any, tuple[Any, ...]]:
    return P, (P, P, P, *extra)


# name -> (restype, argtypes)
REQUIRED: dict[str, tuple[Any, tuple[Any, ...]]] = {
    # contexts and tensors
    "ggml_init": (P, (InitParams,)),
    "ggml_free": (None, (P,)),
    "ggml_tensor_overhead": (SZ, ()),
    "ggml_graph_overhead_custom": (SZ, (SZ, B)),
    "ggml_new_tensor": (P, (P, I32, I32, ctypes.POINTER(I64))),
    "ggml_new_tensor_1d": (P, (P, I32, I64)),
    "ggml_new_tensor_2d": (P, (P, I32, I64, I64)),
    "ggml_new_tensor_3d": (P, (P, I32, I64, I64, I64)),
    "ggml_new_tensor_4d": (P, (P, I32, I64, I64, I64, I64)),
    "ggml_set_name": (P, (P, STR)),
    "ggml_get_name": (STR, (P,)),
    "ggml_set_input": (None, (P,)),
    "ggml_set_output": (None, (P,)),
    "ggml_get_data": (P, (P,)),
    "ggml_custom_4d": (P, (P, I32, I64, I64, I64, I64, ctypes.POINTER(P), I32, CustomOp, I32, P)),
    "ggml_nbytes": (SZ, (P,)),
    "ggml_nelements": (I64, (P,)),
    "ggml_is_contiguous": (B, (P,)),
    "ggml_get_first_tensor": (P, (P,)),
    "ggml_get_next_tensor": (P, (P, P)),
    # type traits
    "ggml_type_size": (SZ, (I32,)),
    "ggml_blck_size": (I64, (I32,)),
    "ggml_row_size": (SZ, (I32, I64)),
    "ggml_type_name": (STR, (I32,)),
    "ggml_is_quantized": (B, (I32,)),
    "ggml_get_type_traits": (ctypes.POINTER(TypeTraits), (I32,)),
    "ggml_quantize_chunk": (SZ, (I32, P, P, I64, I64, I64, P)),
    "ggml_quantize_requires_imatrix": (B, (I32,)),
    # views and layout
    "ggml_view_1d": (P, (P, P, I64, SZ)),
    "ggml_view_2d": (P, (P, P, I64, I64, SZ, SZ)),
    "ggml_view_3d": (P, (P, P, I64, I64, I64, SZ, SZ, SZ)),
    "ggml_view_4d": (P, (P, P, I64, I64, I64, I64, SZ, SZ, SZ, SZ)),
    "ggml_reshape_1d": (P, (P, P, I64)),
    "ggml_reshape_2d": (P, (P, P, I64, I64)),
    "ggml_reshape_3d": (P, (P, P, I64, I64, I64)),
    "ggml_reshape_4d": (P, (P, P, I64, I64, I64, I64)),
    "ggml_permute": (P, (P, P, I32, I32, I32, I32)),
    "ggml_transpose": _unary(),
    "ggml_cont": _unary(),
    "ggml_cpy": _binary(),
    "ggml_cast": _unary(I32),
    "ggml_repeat": _binary(),
    "ggml_concat": _binary(I32),
    "ggml_get_rows": _binary(),
    "ggml_pad": _unary(I32, I32, I32, I32),
    "ggml_pad_ext": _unary(I32, I32, I32, I32, I32, I32, I32, I32),
    # arithmetic
    "ggml_mul_mat": _binary(),
    "ggml_add": _binary(),
    "ggml_sub": _binary(),
    "ggml_mul": _binary(),
    "ggml_div": _binary(),
    "ggml_scale": _unary(F32),
    "ggml_scale_bias": _unary(F32, F32),
    "ggml_sqr": _unary(),
    "ggml_sqrt": _unary(),
    "ggml_exp": _unary(),
    "ggml_log": _unary(),
    "ggml_sum_rows": _unary(),
    "ggml_mean": _unary(),
    "ggml_argmax": _unary(),
    "ggml_clamp": _unary(F32, F32),
    "ggml_norm": _unary(F32),
    "ggml_rms_norm": _unary(F32),
    "ggml_gelu": _unary(),
    "ggml_gelu_erf": _unary(),
    "ggml_silu": _unary(),
    "ggml_relu": _unary(),
    "ggml_sigmoid": _unary(),
    "ggml_tanh": _unary(),
    "ggml_soft_max_ext": _binary(F32, F32),
    "ggml_rope_ext": (P, (P, P, P, P, I32, I32, I32, F32, F32, F32, F32, F32, F32)),
    "ggml_im2col": (P, (P, P, P, I32, I32, I32, I32, I32, I32, B, I32)),
    "ggml_conv_1d_dw": _binary(I32, I32, I32),
    # graphs and allocation
    "ggml_new_graph_custom": (P, (P, SZ, B)),
    "ggml_build_forward_expand": (None, (P, P)),
    "ggml_graph_n_nodes": (I32, (P,)),
    "ggml_graph_node": (P, (P, I32)),
    "ggml_op_desc": (STR, (P,)),
    "ggml_gallocr_new": (P, (P,)),
    "ggml_gallocr_free": (None, (P,)),
    "ggml_gallocr_alloc_graph": (B, (P, P)),
    "ggml_gallocr_get_buffer_size": (SZ, (P, I32)),
    "ggml_backend_alloc_ctx_tensors": (P, (P, P)),
    "ggml_backend_tensor_alloc": (I32, (P, P, P)),
    "ggml_backend_cpu_buffer_from_ptr": (P, (P, SZ)),
    # backends and devices
    "ggml_backend_free": (None, (P,)),
    "ggml_backend_name": (STR, (P,)),
    "ggml_backend_get_default_buffer_type": (P, (P,)),
    "ggml_backend_graph_compute": (I32, (P, P)),
    "ggml_backend_synchronize": (None, (P,)),
    "ggml_backend_supports_op": (B, (P, P)),
    "ggml_backend_tensor_set": (None, (P, P, SZ, SZ)),
    "ggml_backend_tensor_get": (None, (P, P, SZ, SZ)),
    "ggml_backend_buffer_free": (None, (P,)),
    "ggml_backend_buffer_get_size": (SZ, (P,)),
    "ggml_backend_buffer_is_host": (B, (P,)),
    "ggml_backend_buffer_set_usage": (None, (P, I32)),
    "ggml_backend_buffer_name": (STR, (P,)),
    "ggml_backend_buft_name": (STR, (P,)),
    "ggml_backend_dev_count": (SZ, ()),
    "ggml_backend_dev_get": (P, (SZ,)),
    "ggml_backend_dev_by_type": (P, (I32,)),
    "ggml_backend_dev_name": (STR, (P,)),
    "ggml_backend_dev_description": (STR, (P,)),
    "ggml_backend_dev_type": (I32, (P,)),
    "ggml_backend_dev_memory": (None, (P, ctypes.POINTER(SZ), ctypes.POINTER(SZ))),
    "ggml_backend_dev_backend_reg": (P, (P,)),
    "ggml_backend_dev_init": (P, (P, STR)),
    "ggml_backend_reg_name": (STR, (P,)),
    "ggml_backend_reg_count": (SZ, ()),
    "ggml_backend_load_all_from_path": (None, (STR,)),
    "ggml_backend_is_cpu": (B, (P,)),
    "ggml_backend_cpu_set_n_threads": (None, (P, I32)),
}

# Present in this build, but looked up softly so a differently configured build still loads.
OPTIONAL: dict[str, tuple[Any, tuple[Any, ...]]] = {
    "ggml_glu": _unary(I32, B),
    "ggml_glu_split": _binary(I32),
    "ggml_swiglu": _unary(),
    "ggml_swiglu_split": _binary(),
    "ggml_ssm_conv": _binary(),
    "ggml_flash_attn_ext": (P, (P, P, P, P, P, F32, F32, F32)),
    "ggml_prec_set_acc": (B, (P, I32)),
    "ggml_conv_2d_dw_direct": _binary(I32, I32, I32, I32, I32, I32),
    # the op profiler (inference.native.profiler.OpProfiler): one-node graphs computed one at a time
    "ggml_graph_add_node": (None, (P, P)),
    "ggml_graph_clear": (None, (P,)),
}

CPU_FEATURES = (
    "sse3",
    "ssse3",
    "avx",
    "avx_vnni",
    "avx2",
    "bmi2",
    "f16c",
    "fma",
    "avx512",
    "avx512_vbmi",
    "avx512_vnni",
    "avx512_bf16",
    "amx_int8",
    "neon",
    "arm_fma",
    "fp16_va",
    "dotprod",
    "matmul_int8",
    "sve",
    "sme",
    "riscv_v",
    "vsx",
    "wasm_simd",
    "llamafile",
)
for _feature in CPU_FEATURES:
    OPTIONAL[f"ggml_cpu_has_{_feature}"] = (I32, ())


class GgmlApi:
    """Every bound ggml function as an attribute named like the C function (``api.ggml_add``).

    Optional functions that this build lacks are ``None``.
    """

    def __init__(self, libs: GgmlLibraries) -> None:
        self.libs = libs
        for table, required in ((REQUIRED, True), (OPTIONAL, False)):
            for name, (restype, argtypes) in table.items():
                function = _lookup(libs, name)
                if function is None:
                    if required:
                        raise BackendError(
                            f"the ggml library in {libs.lib_dir} lacks {name}", f"reinstall: {INSTALL_FIX}"
                        )
                else:
                    function.restype = restype
                    function.argtypes = argtypes
                setattr(self, name, function)
        self._check_tensor_layout()

    def __getattr__(self, name: str) -> Any:  # only reached for names that were never bound
        raise AttributeError(f"ggml function {name} is not bound; add it to inference/native/bindings.py")

    def has(self, name: str) -> bool:
        return self.__dict__.get(name) is not None

    def _check_tensor_layout(self) -> None:
        """Make sure TensorHead matches the real struct before anything relies on it."""
        ctx = self.ggml_init(InitParams(1 << 16, None, True))
        try:
            tensor = self.ggml_new_tensor_4d(ctx, 0, 3, 5, 7, 11)
            head = TensorHead.from_address(tensor)
            if tuple(head.ne) != (3, 5, 7, 11) or tuple(head.nb) != (4, 12, 60, 420):
                raise BackendError("struct ggml_tensor has an unexpected layout", f"reinstall: {INSTALL_FIX}")
        finally:
            self.ggml_free(ctx)


def check_node_layout(api: GgmlApi) -> None:
    """Make sure :class:`TensorNode` matches ``struct ggml_tensor`` (op, src, view_src, name)."""
    if not (api.has("ggml_graph_add_node") and api.has("ggml_graph_clear")):
        raise BackendError(
            "this ggml build lacks ggml_graph_add_node/ggml_graph_clear (needed by the op profiler)"
        )
    ctx = api.ggml_init(InitParams(1 << 16, None, True))
    try:
        a = api.ggml_new_tensor_2d(ctx, 0, 4, 3)
        b = api.ggml_new_tensor_2d(ctx, 0, 4, 3)
        api.ggml_set_input(a)
        total = api.ggml_add(ctx, a, b)
        api.ggml_set_name(total, b"layout-check")
        view = api.ggml_view_1d(ctx, total, 4, 8)
        node = TensorNode.from_address(total)
        ok = (
            node.src[0] == a
            and node.src[1] == b
            and not node.src[2]
            and node.name == b"layout-check"
            and api.ggml_op_desc(total) == b"ADD"
            and TensorNode.from_address(view).view_src == total
            and TensorNode.from_address(view).view_offs == 8
            and TensorNode.from_address(a).flags & GGML_TENSOR_FLAG_INPUT
        )
        if not ok:
            raise BackendError(
                "struct ggml_tensor has an unexpected layout (op profiler)", f"reinstall: {INSTALL_FIX}"
            )
    finally:
        api.ggml_free(ctx)


def _lookup(libs: GgmlLibraries, name: str) -> Any:
    for lib in libs.search_order():
        try:
            return lib[name]
        except AttributeError:
            continue
    return None


@functools.cache
def load_api() -> GgmlApi:
    """The process-wide bound API (immutable after construction)."""
    return GgmlApi(load_ggml_libraries())
