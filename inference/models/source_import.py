"""Converting a local source file into a package (``captioneer models import`` of a file no engine loads as it
is): the store's side of the deal.

A family that knows such a source gives a :class:`SourceImporter` in its descriptor (``inference/family.py``);
the store asks each one whether it claims the path and hands the import over with a :class:`SourceImport`.
The importer runs the family's steps with the store's all-or-nothing machinery (:class:`ConvertingStore`):
the package lock, planned downloads, the free-space check and the assembly of a converted package.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from inference.models.progress import ProgressCallback, ProgressTracker

if TYPE_CHECKING:
    from inference.models.catalog import Catalog
    from inference.models.hub import HubClient
    from inference.models.spec import PackageSpec

# The options of ``import_local`` that only a source importer takes (its ``options`` names which it does).
SOURCE_OPTIONS = {"sidecars": "--sidecars", "sha256": "--sha256", "license_text": "--license"}


@dataclass(frozen=True)
class SourceImport:
    """One ``import_local`` call, as an importer receives it."""

    source: Path  # resolved, existing
    package_id: str | None
    sidecars: Path | None
    sha256: str | None
    license_text: str | None
    progress: ProgressCallback | None
    cancel: threading.Event | None


# A file the store plans to download (``downloads.PlannedFile``): importers only hand them back to the store.
Planned = Any


class ConvertingStore(Protocol):
    """What a source importer may use of the store: its catalog, folder and hub, the package lock, the cleanup of
    what a killed import left, the free-space check, planned downloads and the assembly of a converted package
    (which reports it done)."""

    @property
    def catalog(self) -> Catalog: ...

    @property
    def root(self) -> Path: ...

    @property
    def hub(self) -> HubClient: ...

    def package_lock(self, package_id: str, action: str) -> AbstractContextManager[None]: ...

    def cleanup(self, keep: str) -> None: ...

    def require_space(self, needed: int, purpose: str) -> None: ...

    def plan(self, pkg: PackageSpec, cancel: threading.Event | None) -> list[Planned]: ...

    def remaining(self, planned: list[Planned]) -> int: ...

    def download_all(
        self,
        pkg: PackageSpec,
        planned: list[Planned],
        tracker: ProgressTracker,
        cancel: threading.Event | None,
    ) -> None: ...

    def verify_downloads(
        self, planned: list[Planned], tracker: ProgressTracker, cancel: threading.Event | None
    ) -> None: ...

    def assemble_converted(
        self,
        pkg: PackageSpec,
        planned: list[Planned],
        tracker: ProgressTracker,
        cancel: threading.Event | None,
        converter: Any,
        source: Path,
        sidecars: Path | None,
    ) -> Path: ...


class SourceImporter(Protocol):
    """A kind of local source a family converts into a package (a NeMo checkpoint, a packed archive)."""

    # How messages name these sources, in the plural (".nemo checkpoints").
    label: str
    # How to point at one (".nemo file"), for a fix naming every kind of source.
    example: str
    # Which of ``SOURCE_OPTIONS`` it takes.
    options: frozenset[str]

    def claims(self, source: Path) -> bool: ...

    def import_source(self, store: ConvertingStore, request: SourceImport) -> Path: ...


def claiming(importers: Iterable[SourceImporter], source: Path) -> SourceImporter | None:
    """The first importer that claims ``source``."""
    return next((importer for importer in importers if importer.claims(source)), None)
