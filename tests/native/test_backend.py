"""Backend selection, threads, describe(), and loading of the vendored ggml libraries."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

from inference.errors import BackendError, UsageError
from inference.native import describe, list_devices, load_ggml_libraries, open_backend, physical_cores
from inference.native import lib as native_lib

GPU_REGISTRIES = {"cuda": "CUDA", "metal": "Metal", "vulkan": "Vulkan"}


def test_describe_lists_versions_features_and_devices():
    info = describe()
    assert info["llama_cpp_python"] == "0.3.36" and info["ggml_version"] == native_lib.PINNED_GGML_VERSION
    assert isinstance(info["cpu_features"], list)
    assert any(device["kind"] == "cpu" for device in info["devices"])
    assert 1 <= info["default_threads"] <= (os.cpu_count() or 1)


@pytest.mark.parametrize("name", sorted(GPU_REGISTRIES))
def test_missing_gpu_backend_gives_reinstall_command(name):
    if any(d.registry == GPU_REGISTRIES[name] for d in list_devices()):
        pytest.skip(f"this build has {name}")
    with pytest.raises(BackendError) as caught:
        open_backend(name)
    assert f'CMAKE_ARGS="-DGGML_{name.upper()}=on"' in caught.value.fix
    assert "llama-cpp-python==0.3.36" in caught.value.fix


def test_unknown_backend_and_bad_threads():
    with pytest.raises(UsageError, match="unknown backend"):
        open_backend("tpu")
    with pytest.raises(UsageError, match="at least 1"):
        open_backend("cpu", threads=0)


def test_auto_and_threads():
    with open_backend("auto") as backend:
        has_gpu = any(d.kind in ("gpu", "igpu") for d in list_devices())
        assert backend.kind != "cpu" if has_gpu else backend.kind == "cpu"
        assert backend.threads == physical_cores()
        if backend.is_cpu:
            backend.set_threads(1)
            assert backend.threads == 1
    with pytest.raises(UsageError, match="closed"):
        _ = backend.ptr


def test_libraries_come_from_llama_cpp_and_ggml_is_mapped_once():
    libs = load_ggml_libraries()
    assert libs is load_ggml_libraries()  # cached, immutable handle
    import llama_cpp  # loads libllama, which must reuse our ggml

    assert libs.lib_dir == Path(llama_cpp.__file__).resolve().parent / "lib"
    with open("/proc/self/maps") as handle:
        mapped = {line.split()[-1] for line in handle if "libggml-base" in line}
    assert len({os.path.realpath(path) for path in mapped}) == 1, mapped


def test_version_mismatch_and_missing_package(monkeypatch, tmp_path):
    monkeypatch.setattr(native_lib.importlib.metadata, "version", lambda _name: "0.3.1")
    with pytest.raises(BackendError) as caught:
        load_ggml_libraries.__wrapped__()
    assert "0.3.1" in caught.value.message and caught.value.fix == "pip install llama-cpp-python==0.3.36"

    def not_installed(_name):
        raise importlib.metadata.PackageNotFoundError("llama_cpp_python")

    monkeypatch.setattr(native_lib.importlib.metadata, "version", not_installed)
    with pytest.raises(BackendError, match="not installed"):
        load_ggml_libraries.__wrapped__()
    monkeypatch.undo()
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(tmp_path))
    with pytest.raises(BackendError, match="libggml-base is missing"):
        load_ggml_libraries.__wrapped__()
    monkeypatch.delenv("LLAMA_CPP_LIB_PATH")
    monkeypatch.setattr(native_lib.importlib.util, "find_spec", lambda _name: None)
    with pytest.raises(BackendError, match="not installed"):
        native_lib.llama_cpp_lib_dir()
