"""What ``captioneer --version`` prints: the app version and the native build it runs on."""

from __future__ import annotations

import sys

from inference import __version__
from inference.errors import CaptioneerError


def version_text() -> str:
    """Lines naming the app, llama-cpp-python/ggml and the CPU backend variant ggml loaded."""
    lines = [f"captioneer {__version__} (Python {sys.version.split()[0]})"]
    try:
        from inference.native.lib import load_ggml_libraries

        libs = load_ggml_libraries()
    except CaptioneerError as exc:  # --version must still answer when the backend is broken
        lines.append(f"native backend: unavailable: {exc}")
        return "\n".join(lines) + "\n"
    lines.append(f"llama-cpp-python {libs.package_version}, ggml {libs.ggml_version} ({libs.ggml_commit})")
    variant = "libggml-cpu (a single build)" if libs.cpu_variant == "single" else libs.cpu_variant
    lines.append(f"ggml CPU backend: {variant} ({libs.lib_dir})")
    return "\n".join(lines) + "\n"
