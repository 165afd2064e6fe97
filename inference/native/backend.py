"""Backend choice (``auto|cpu|cuda|metal|vulkan``), thread count and a description of the build.

Devices come from ggml's device registry (``ggml_backend_dev_*``), so GPU backends compiled into
llama-cpp-python work without code changes here.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.contract import BACKEND_NAMES
from inference.errors import BackendError, UsageError
from inference.native.bindings import CPU_FEATURES, GgmlApi, load_api
from inference.native.blas import PACKING_CHOICES, OpenBlasGemm, open_gemm, requested_gemm
from inference.native.cpu_features import has_bf16_dot, has_vnni, read_cpuinfo_flags
from inference.native.int8 import Int8Gemm
from inference.native.lib import PINNED_LLAMA_CPP_VERSION
from inference.native.owner import NativeOwner
from inference.native.packed_f32 import PackedF32Gemm, open_packed
from inference.native.profiler import OpProfiler

# ggml registry names of the GPU backends, and the CMake switch that builds each one in.
_REGISTRY_NAME = {"cuda": "CUDA", "metal": "Metal", "vulkan": "Vulkan"}
_CMAKE_FLAG = {"cuda": "-DGGML_CUDA=on", "metal": "-DGGML_METAL=on", "vulkan": "-DGGML_VULKAN=on"}
_DEV_TYPE_NAMES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel", 4: "meta"}
_DEV_TYPE_CPU, _DEV_TYPE_GPU, _DEV_TYPE_IGPU = 0, 1, 2


def physical_cores() -> int:
    """Physical cores available to this process (hyper-threads share a core's FPUs, so count cores)."""
    try:
        allowed = os.sched_getaffinity(0)
    except AttributeError:  # not on Linux
        allowed = set(range(os.cpu_count() or 1))
    cores = set()
    for cpu in allowed:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(
                (topology / "physical_package_id").read_text().strip()
                + ":"
                + (topology / "core_id").read_text().strip()
            )
        except OSError:
            return max(1, (os.cpu_count() or 2) // 2)
    return max(1, len(cores))


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    description: str
    kind: str  # cpu | gpu | igpu | accel
    registry: str  # ggml backend registry name: CPU, CUDA, Metal, Vulkan, BLAS ...
    memory_free: int
    memory_total: int


def list_devices(api: GgmlApi | None = None) -> list[DeviceInfo]:
    api = api or load_api()
    _ensure_devices_registered(api)
    devices = []
    for index in range(api.ggml_backend_dev_count()):
        dev = api.ggml_backend_dev_get(index)
        devices.append(_device_info(api, index, dev))
    return devices


def _device_info(api: GgmlApi, index: int, dev: int) -> DeviceInfo:
    import ctypes

    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    api.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
    reg = api.ggml_backend_dev_backend_reg(dev)
    return DeviceInfo(
        index=index,
        name=api.ggml_backend_dev_name(dev).decode(),
        description=api.ggml_backend_dev_description(dev).decode(),
        kind=_DEV_TYPE_NAMES.get(api.ggml_backend_dev_type(dev), "other"),
        registry=api.ggml_backend_reg_name(reg).decode() if reg else "?",
        memory_free=free.value,
        memory_total=total.value,
    )


def _ensure_devices_registered(api: GgmlApi) -> None:
    # Builds made with GGML_BACKEND_DL register nothing until the backend modules are loaded.
    if api.ggml_backend_dev_count() == 0:
        api.ggml_backend_load_all_from_path(str(api.libs.lib_dir).encode())


def cpu_features(api: GgmlApi | None = None) -> list[str]:
    api = api or load_api()
    return [
        name
        for name in CPU_FEATURES
        if api.has(f"ggml_cpu_has_{name}") and getattr(api, f"ggml_cpu_has_{name}")()
    ]


def describe(api: GgmlApi | None = None) -> dict[str, Any]:
    """What this build offers: versions, CPU features, devices, default thread count."""
    api = api or load_api()
    return {
        "llama_cpp_python": api.libs.package_version,
        "ggml_version": api.libs.ggml_version,
        "ggml_commit": api.libs.ggml_commit,
        "lib_dir": str(api.libs.lib_dir),
        "cpu_features": cpu_features(api),
        "devices": [device.__dict__ for device in list_devices(api)],
        "default_threads": physical_cores(),
    }


class Backend(NativeOwner):
    """An initialised ggml backend; owns the native handle (close it, or use ``with``)."""

    def __init__(
        self, api: GgmlApi, handle: int, kind: str, device: DeviceInfo, threads: int, gemm: str = "ggml"
    ) -> None:
        self.api = api
        self.handle: int | None = handle
        self.kind = kind
        self.device = device
        self.threads = threads
        self.is_cpu = bool(api.ggml_backend_is_cpu(handle))
        self.buffer_type = api.ggml_backend_get_default_buffer_type(handle)
        # Set to an OpProfiler to time every graph node computed on this backend (tests/bench/profile_ops.py).
        self.profiler: OpProfiler | None = None
        if self.is_cpu:
            api.ggml_backend_cpu_set_n_threads(handle, threads)
        self._int8: Int8Gemm | None = None  # opened by the first int8 weight (int8())
        self.gemm_choice = gemm
        self._packed: PackedF32Gemm | None = None  # opened by the first store that packs f32 weights
        self._packed_tried = False
        # Big f32 products on OpenBLAS (None: ggml computes every product); see native/blas.py.
        try:
            self.gemm: OpenBlasGemm | None = open_gemm(gemm, self.is_cpu, api.ggml_get_data)
        except BaseException:
            self.close()  # the handle is ours from the first line: free it once, here
            raise

    def int8(self) -> Int8Gemm:
        """What computes int8 weight products (native/int8.py), opened on first use: CPU backends only."""
        if not self.is_cpu:
            raise UsageError(
                f"int8 weights run on the CPU backend only, not on {self.kind}",
                "pick weight_type q8_0 (or bf16) for this backend, or use --backend cpu",
            )
        if self._int8 is None:
            self._int8 = Int8Gemm(self.api.ggml_get_data, has_vnni=self._has_vnni())
        return self._int8

    def packed_f32(self) -> PackedF32Gemm | None:
        """What packs f32 weight matrices once and computes their products (native/packed_f32.py), opened by the
        first store that asks; None where this backend does not pack (not the CPU, ``gemm`` ggml or openblas, or
        ``auto`` without ONNX Runtime; ``onnxruntime`` then fails naming the fix)."""
        if not self.is_cpu or self.gemm_choice not in PACKING_CHOICES:
            return None
        if not self._packed_tried:
            self._packed_tried = True
            self._packed = open_packed(self.api.ggml_get_data, required=self.gemm_choice == "onnxruntime")
        return self._packed

    @property
    def packed_products(self) -> PackedF32Gemm | None:
        """The packed-weight product engine when a weight store has opened it (graphs route packed weights to it)."""
        return self._packed

    @property
    def int8_products(self) -> Int8Gemm | None:
        """The int8 product engine when a weight store has opened it (graphs route I8 weights to it)."""
        return self._int8

    def _has_vnni(self) -> bool:
        """Whether this CPU's int8 products may use 8-bit weights (native/cpu_features.py decides)."""
        compiled_vnni = bool({"avx512_vnni", "avx_vnni"} & set(cpu_features(self.api)))
        return has_vnni(platform.machine(), read_cpuinfo_flags(), compiled_vnni)

    def has_bf16_dot(self) -> bool:
        """Whether bf16 weight products run on this CPU's own bf16 instruction (False on other backends)."""
        compiled_bf16 = "avx512_bf16" in cpu_features(self.api)
        return self.is_cpu and has_bf16_dot(platform.machine(), read_cpuinfo_flags(), compiled_bf16)

    @property
    def f32_gemm(self) -> str:
        """Which library computes big f32 products: "openblas (SkylakeX)" (OpenBLAS's kernel set) or "ggml", after
        "onnxruntime 1.x (packed weights) + " once a store packed its weights (native/packed_f32.py)."""
        rest = f"openblas ({self.gemm.core})" if self.gemm is not None else "ggml"
        packed = self._packed
        return f"onnxruntime {packed.version} (packed weights) + {rest}" if packed is not None else rest

    @property
    def name(self) -> str:
        return self.api.ggml_backend_name(self.ptr).decode()

    @property
    def ptr(self) -> int:
        if self.handle is None:
            raise UsageError("this backend has been closed")
        return self.handle

    def set_threads(self, threads: int) -> None:
        if threads < 1:
            raise UsageError(f"thread count must be at least 1, got {threads}")
        self.threads = threads
        if self.is_cpu:
            self.api.ggml_backend_cpu_set_n_threads(self.ptr, threads)

    def close(self) -> None:
        if self.handle is not None:
            self.api.ggml_backend_free(self.handle)
            self.handle = None

    def __repr__(self) -> str:
        return f"Backend({self.kind}, device={self.device.name!r}, threads={self.threads}, f32_gemm={self.f32_gemm})"


def open_backend(
    name: str = "auto", threads: int | None = None, api: GgmlApi | None = None, gemm: str | None = None
) -> Backend:
    """Initialise the requested backend. ``auto`` prefers a GPU, then the CPU.

    gemm: who computes big f32 products on the CPU backend, ``auto`` (weights packed once on ONNX Runtime, the
    rest on OpenBLAS, each where it loads), ``onnxruntime``, ``openblas`` or ``ggml``; default
    ``$CAPTIONEER_F32_GEMM``, else ``auto`` (see native/blas.py and native/packed_f32.py).
    """
    api = api or load_api()
    gemm = requested_gemm(gemm)
    name = name.lower()
    if name not in BACKEND_NAMES:
        raise UsageError(f"unknown backend {name!r}", f"choose one of: {', '.join(BACKEND_NAMES)}")
    if threads is not None and threads < 1:
        raise UsageError(f"thread count must be at least 1, got {threads}")
    threads = threads or physical_cores()
    devices = list_devices(api)
    device = _pick_device(devices, name)
    if device is None:
        available = ", ".join(sorted({d.registry for d in devices})) or "none"
        raise BackendError(
            f"this llama-cpp-python build has no {name} backend (available: {available})",
            f'reinstall with CMAKE_ARGS="{_CMAKE_FLAG[name]}" pip install --force-reinstall --no-cache-dir '
            f"llama-cpp-python=={PINNED_LLAMA_CPP_VERSION}",
        )
    handle = api.ggml_backend_dev_init(api.ggml_backend_dev_get(device.index), None)
    if not handle:
        raise BackendError(
            f"could not initialise the {device.registry} device {device.name}",
            "check the driver installation",
        )
    kind = "cpu" if device.kind == "cpu" else device.registry.lower()
    return Backend(api, handle, kind, device, threads, gemm)


def _pick_device(devices: list[DeviceInfo], name: str) -> DeviceInfo | None:
    if name == "cpu":
        return next((d for d in devices if d.kind == "cpu"), None)
    if name == "auto":
        gpus = [d for d in devices if d.kind == "gpu"] or [d for d in devices if d.kind == "igpu"]
        return gpus[0] if gpus else _pick_device(devices, "cpu")
    wanted = _REGISTRY_NAME[name].lower()
    return next((d for d in devices if d.registry.lower() == wanted and d.kind in ("gpu", "igpu")), None)
