"""What the store runs of the model families: install-time conversions, one optional hook per family, the
importers of local sources (``source_import.py``) and the detection of an imported folder's family.

A hook runs inside the temporary install directory after every download is verified and before the
package is marked installed, so a failed or cancelled conversion never leaves an installed-looking
package. The families' descriptors name their hooks; ``inference.registry`` builds one registry from them
(``FamilyRegistry.conversions()``), so nothing here knows a family.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from inference.errors import ModelError
from inference.models.source_import import SourceImporter
from inference.models.spec import FORMATS_NEEDING_CONVERSION, PackageSpec

__all__ = [
    "FORMATS_NEEDING_CONVERSION",  # where the app and the store looked for it before it joined the schema
    "ConversionContext",
    "ConversionRegistry",
    "ConversionResult",
    "Converter",
    "FamilyDetector",
    "Preflight",
    "SpaceEstimate",
]


@dataclass(frozen=True)
class ConversionContext:
    package: PackageSpec
    package_dir: Path  # the temporary install directory holding the downloaded files
    progress: Callable[[int, int | None, str], None]  # (done, total, message)
    cancel: threading.Event | None = None


@dataclass(frozen=True)
class ConversionResult:
    """What the hook changed: a new model path (relative to the package dir) and files it wrote."""

    model_path: str | None = None
    notes: str = ""


Converter = Callable[[ConversionContext], ConversionResult | None]


# Extra disk space a conversion needs on top of the download (for the free-space preflight).
SpaceEstimate = Callable[[PackageSpec], int]

# Checked before anything is downloaded: raises, naming the fix, when the conversion cannot run here
# (e.g. an optional dependency is missing).
Preflight = Callable[[PackageSpec], None]


# The family of a local model folder or file (``FamilyRegistry.detect_family``).
FamilyDetector = Callable[[Path], str]


def _no_family(path: Path) -> str:
    raise ModelError(f"no model family is known to detect {path}", "build the store from the family registry")


@dataclass
class ConversionRegistry:
    """family → converter, the source importers and the family detector. Build one per store (no module-level
    registry); an empty one converts nothing and detects no family."""

    converters: dict[str, Converter] = field(default_factory=dict)
    space_estimates: dict[str, SpaceEstimate] = field(default_factory=dict)
    preflights: dict[str, Preflight] = field(default_factory=dict)
    source_importers: list[SourceImporter] = field(default_factory=list)
    detect_family: FamilyDetector = _no_family

    def register(
        self,
        family: str,
        converter: Converter,
        extra_space: SpaceEstimate | None = None,
        preflight: Preflight | None = None,
    ) -> None:
        self.converters[family] = converter
        self.space_estimates.pop(family, None)
        self.preflights.pop(family, None)
        if extra_space is not None:
            self.space_estimates[family] = extra_space
        if preflight is not None:
            self.preflights[family] = preflight

    def for_package(self, package: PackageSpec) -> Converter | None:
        return self.converters.get(package.family)

    def extra_space(self, package: PackageSpec) -> int:
        estimate = self.space_estimates.get(package.family)
        return int(estimate(package)) if estimate is not None and package.family in self.converters else 0

    def preflight(self, package: PackageSpec) -> None:
        check = self.preflights.get(package.family)
        if check is not None and package.family in self.converters:
            check(package)
