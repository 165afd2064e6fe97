"""Portable builds (installers/build_llama_portable.sh): ggml picks a CPU backend module at run time,
and the variant it picked is what ``captioneer --version`` reports."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from inference.cli import main as cli_main
from inference.native import lib as native_lib
from inference.native.bindings import load_api


def test_variant_modules_are_the_per_cpu_backends_only(tmp_path: Path):
    prefix, suffix = ("", ".dll") if sys.platform == "win32" else ("lib", ".so")
    for name in ("ggml-cpu", "ggml-cpu-haswell", "ggml-cpu-x64", "ggml-base", "ggml"):
        (tmp_path / f"{prefix}{name}{suffix}").touch()
    found = [path.name for path in native_lib._cpu_variant_modules(tmp_path)]
    assert found == [f"{prefix}ggml-cpu-haswell{suffix}", f"{prefix}ggml-cpu-x64{suffix}"]


def test_loaded_cpu_backend_is_the_variant_ggml_picked():
    libs = native_lib.load_ggml_libraries()
    modules = native_lib._cpu_variant_modules(libs.lib_dir)
    if not modules:
        assert libs.cpu_variant == "single"
        pytest.skip("the installed llama-cpp-python has one CPU backend (no per-CPU variant modules)")
    assert libs.cpu is not None
    assert libs.cpu_variant in {path.stem.split("ggml-cpu-", 1)[1] for path in modules}
    assert [path for path in modules if native_lib._is_loaded(path)] == [
        next(path for path in modules if path.stem.endswith(f"ggml-cpu-{libs.cpu_variant}"))
    ]
    api = load_api()
    assert api.ggml_backend_cpu_set_n_threads is not None and api.ggml_backend_reg_count() >= 1


def test_version_names_the_app_the_build_and_the_cpu_backend():
    out = io.StringIO()
    assert cli_main(["--version"], out=out) == 0
    libs = native_lib.load_ggml_libraries()
    text = out.getvalue()
    assert text.startswith("captioneer 0.1.0")
    assert f"llama-cpp-python {libs.package_version}, ggml {libs.ggml_version}" in text
    expected = libs.cpu_variant if libs.cpu_variant != "single" else "libggml-cpu (a single build)"
    assert f"ggml CPU backend: {expected} ({libs.lib_dir})" in text
