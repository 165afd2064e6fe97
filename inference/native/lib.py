"""Find and load the ggml shared libraries that ``llama-cpp-python`` vendors.

The libraries are loaded exactly once per process, from the same absolute paths that the
``llama_cpp`` package itself uses (``<site-packages>/llama_cpp/lib``, or ``LLAMA_CPP_LIB_PATH``),
with ``RTLD_GLOBAL``. Because the dynamic loader identifies libraries by SONAME, libllama (loaded
later by ``llama_cpp``) then reuses these mappings instead of mapping a second copy of ggml, so
tensors and buffers can be shared between our graphs and libllama.

A portable build (``installers/build_llama_portable.sh``) has no ``libggml-cpu``; it ships one CPU
backend module per instruction-set level (``libggml-cpu-haswell.so`` ...) and ggml loads the best
one this CPU runs (:func:`_register_backend_modules`).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import importlib.util
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from inference.errors import BackendError
from inference.native_stderr import GGML_LINES, native_output_logged

log = logging.getLogger(__name__)
PINNED_LLAMA_CPP_VERSION = "0.3.36"
PINNED_GGML_VERSION = "0.25.3"
INSTALL_FIX = f"pip install llama-cpp-python=={PINNED_LLAMA_CPP_VERSION}"


@dataclass(frozen=True)
class GgmlLibraries:
    """The loaded ggml libraries. Immutable; obtain it from :func:`load_ggml_libraries`."""

    lib_dir: Path
    base: ctypes.CDLL
    cpu: ctypes.CDLL | None  # None when the CPU backend is built into libggml itself
    ggml: ctypes.CDLL
    package_version: str
    ggml_version: str
    ggml_commit: str
    # "single": one CPU backend (libggml-cpu); else the variant module ggml picked ("haswell")
    cpu_variant: str = "single"

    def search_order(self) -> tuple[ctypes.CDLL, ...]:
        """Libraries to look a symbol up in, most specific first."""
        return tuple(lib for lib in (self.ggml, self.cpu, self.base) if lib is not None)


def llama_cpp_lib_dir() -> Path:
    """The directory llama_cpp loads its shared libraries from (without importing llama_cpp)."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        return Path(override).resolve()
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise BackendError(
            "llama-cpp-python is not installed, so the ggml libraries are missing", INSTALL_FIX
        )
    # llama_cpp uses os.path.abspath(os.path.dirname(__file__)) / "lib"; match it exactly.
    return Path(os.path.abspath(os.path.dirname(spec.origin))) / "lib"


def _library_candidates(lib_dir: Path, base_name: str) -> list[Path]:
    if sys.platform == "win32":
        return [lib_dir / f"{base_name}.dll", lib_dir / f"lib{base_name}.dll"]
    if sys.platform == "darwin":
        return [lib_dir / f"lib{base_name}.so", lib_dir / f"lib{base_name}.dylib"]
    return [lib_dir / f"lib{base_name}.so"]


def _find_library(lib_dir: Path, base_name: str) -> Path | None:
    return next((path for path in _library_candidates(lib_dir, base_name) if path.exists()), None)


def _load(path: Path) -> ctypes.CDLL:
    mode = ctypes.RTLD_GLOBAL
    try:
        if sys.platform == "win32":
            os.add_dll_directory(str(path.parent))
            return ctypes.CDLL(str(path), winmode=mode)
        return ctypes.CDLL(str(path), mode=mode)
    except OSError as exc:
        raise BackendError(f"could not load {path}: {exc}", INSTALL_FIX) from exc


def _installed_package_version() -> str:
    try:
        return importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError as exc:
        raise BackendError("llama-cpp-python is not installed", INSTALL_FIX) from exc


# libgomp's spins at a barrier before a thread sleeps (~0.3-0.8 ms of PAUSE loops, CPU-dependent).
BARRIER_SPIN_COUNT = 20000


def _prefer_passive_openmp_waits() -> None:
    """Make libgomp wait passively after a short bounded spin and keep its thread count fixed, unless the user
    set these.

    Unbounded active waiting spins idle threads between graph runs, and on a busy machine a preempted spinner
    stalls every run by a scheduler slice; ``OMP_DYNAMIC`` shrinks each parallel region by the load average, so a
    2-core machine with background load ran graphs on one thread. Sleeping at once, though, costs a wake-up at
    each of ggml's per-node barriers: a short spin first (``GOMP_SPINCOUNT``, which libgomp honours over the
    passive policy) took a 2 s Parakeet f32 call from 0.25-0.27 to 0.19-0.21 s on a quiet machine, and cost no
    wall time with two busy loops on the cores (figures: tests/bench/README.md, "Figures behind code comments").
    libgomp reads these when it is loaded, so this must run before ggml is loaded.
    """
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = str(BARRIER_SPIN_COUNT)
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    os.environ.setdefault("OMP_DYNAMIC", "false")


@functools.cache
def load_ggml_libraries() -> GgmlLibraries:
    """Load libggml-base, libggml-cpu (if separate) and libggml once; check the pinned versions."""
    _prefer_passive_openmp_waits()
    version = _installed_package_version()
    if version != PINNED_LLAMA_CPP_VERSION:
        raise BackendError(
            f"llama-cpp-python {version} is installed but Captioneer needs exactly {PINNED_LLAMA_CPP_VERSION}",
            INSTALL_FIX,
        )
    lib_dir = llama_cpp_lib_dir()
    paths = {name: _find_library(lib_dir, name) for name in ("ggml-base", "ggml-cpu", "ggml")}
    for required in ("ggml-base", "ggml"):
        if paths[required] is None:
            raise BackendError(f"lib{required} is missing from {lib_dir}", f"reinstall: {INSTALL_FIX}")
    # Dependencies first, so each library finds the ones it needs already mapped.
    base = _load(paths["ggml-base"])  # type: ignore[arg-type]
    cpu = _load(paths["ggml-cpu"]) if paths["ggml-cpu"] is not None else None
    ggml = _load(paths["ggml"])  # type: ignore[arg-type]
    ggml_version, ggml_commit = _ggml_build_info(base)
    if ggml_version != PINNED_GGML_VERSION:
        raise BackendError(
            f"the ggml in {lib_dir} is version {ggml_version}, expected {PINNED_GGML_VERSION}",
            f"reinstall: {INSTALL_FIX} --force-reinstall --no-cache-dir",
        )
    _register_backend_modules(ggml, lib_dir)
    cpu_variant = "single"
    if cpu is None and _cpu_variant_modules(lib_dir):
        cpu, cpu_variant = _open_cpu_variant(lib_dir)
    log.info("ggml %s from %s, CPU backend: %s", ggml_version, lib_dir, cpu_variant)
    return GgmlLibraries(lib_dir, base, cpu, ggml, version, ggml_version, ggml_commit, cpu_variant)


def _cpu_variant_modules(lib_dir: Path) -> list[Path]:
    """The CPU backend modules of a GGML_CPU_ALL_VARIANTS build (none in a default build)."""
    pattern = "ggml-cpu-*.dll" if sys.platform == "win32" else "libggml-cpu-*.so"  # ggml's names, macOS too
    return sorted(path for path in lib_dir.glob(pattern) if path.is_file())


def _register_backend_modules(ggml: ctypes.CDLL, lib_dir: Path) -> None:
    """A GGML_BACKEND_DL build registers no backend by itself; libllama would then search only the
    executable's folder and the working directory. Register the modules in ``lib_dir`` instead: ggml
    scores the CPU variants and keeps the best this CPU supports."""
    count = ggml["ggml_backend_reg_count"]
    count.restype, count.argtypes = ctypes.c_size_t, []
    if count() == 0:
        load_all = ggml["ggml_backend_load_all_from_path"]
        load_all.restype, load_all.argtypes = None, [ctypes.c_char_p]
        with native_output_logged(GGML_LINES):  # "load_backend: loaded CPU backend from ..."
            load_all(os.fsencode(lib_dir))


def _open_cpu_variant(lib_dir: Path) -> tuple[ctypes.CDLL, str]:
    """The CPU variant module ggml loaded, opened so the CPU functions can be bound from it."""
    loaded = [path for path in _cpu_variant_modules(lib_dir) if _is_loaded(path)]
    if len(loaded) != 1:
        raise BackendError(
            f"ggml loaded {len(loaded)} of the CPU backend modules in {lib_dir} (expected one); "
            "this CPU may be older than the oldest variant built",
            "rebuild with installers/build_llama_portable.sh, or install the default build: " + INSTALL_FIX,
        )
    variant = loaded[0].stem.split("ggml-cpu-", 1)[1]
    return _load(loaded[0]), variant


def _is_loaded(path: Path) -> bool:
    if sys.platform == "win32":
        get_module = ctypes.WinDLL("kernel32", use_last_error=True).GetModuleHandleW
        get_module.restype, get_module.argtypes = ctypes.c_void_p, [ctypes.c_wchar_p]
        return bool(get_module(str(path)))
    try:
        ctypes.CDLL(str(path), mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
    except OSError:
        return False
    return True


def _ggml_build_info(base: ctypes.CDLL) -> tuple[str, str]:
    try:
        version_fn, commit_fn = base["ggml_version"], base["ggml_commit"]
    except AttributeError:
        return "unknown (no ggml_version symbol)", "unknown"
    version_fn.restype = commit_fn.restype = ctypes.c_char_p
    version_fn.argtypes = commit_fn.argtypes = []
    return version_fn().decode(), commit_fn().decode()
