"""Install-time step of the confucius4_r2t2 packages: build the thinker GGUF before the package counts as installed.

The engine would otherwise write it on the first transcription (a multi-gigabyte conversion for the safetensors
packages, a byte copy of the quantized blocks for the GGUF packages). The store runs this in its temporary
install directory; the GGUF lands in the same cache (``.captioneer/`` next to the model) the engine looks in,
with the ``native`` storage the engine uses by default, so the first load finds it up to date.
"""

from __future__ import annotations

from pathlib import Path

from inference.families.confucius4_r2t2.thinker_gguf import ThinkerCheckpoint, ensure_thinker_gguf
from inference.models.conversion import ConversionContext, ConversionResult
from inference.models.progress import check_cancel
from inference.models.spec import PackageSpec
from inference.models.store_layout import default_model_path, file_target

PROGRESS_STEPS = 1000
MESSAGE = "building the thinker GGUF for llama.cpp"


def model_location(package: PackageSpec, package_dir: Path) -> Path:
    """Where the engine will load the package from inside its install directory: the store's own answer
    (the path it writes into the install marker), so the two can never disagree."""
    targets = [file_target(package, file) for file in package.files]
    return package_dir / default_model_path(package, targets)


def build_thinker(context: ConversionContext) -> ConversionResult | None:
    """The conversion hook: write ``<model>/.captioneer/…thinker-<native type>.gguf``; the model path is unchanged."""
    check_cancel(context.cancel)
    checkpoint = ThinkerCheckpoint(model_location(context.package, context.package_dir))
    context.progress(0, PROGRESS_STEPS, MESSAGE)

    def progress(fraction: float) -> None:
        # Raising here (a cancel) unwinds the writer; ensure_thinker_gguf removes its partial file.
        check_cancel(context.cancel)
        context.progress(round(fraction * PROGRESS_STEPS), PROGRESS_STEPS, MESSAGE)

    ensure_thinker_gguf(checkpoint, "native", progress=progress)
    return None


def extra_space(package: PackageSpec) -> int:
    """Disk the thinker GGUF needs on top of the download: never more than the package (the thinker is
    most of it, stored in the same types)."""
    return int(package.size_bytes)
