"""The package catalog: every package of every family spec, with its installed state on disk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inference.errors import ModelError, UsageError
from inference.models.marker import INSTALL_MARKER, installed_marker
from inference.models.spec import FamilySpec, PackageSpec, load_all_specs
from inference.paths import AppPaths, data_root

__all__ = ["INSTALL_MARKER", "Catalog", "CatalogEntry"]


@dataclass(frozen=True)
class CatalogEntry:
    package: PackageSpec
    installed_path: Path | None

    @property
    def installed(self) -> bool:
        return self.installed_path is not None


class Catalog:
    def __init__(self, paths: AppPaths, specs: dict[str, FamilySpec] | None = None) -> None:
        self.paths = paths
        self.specs = specs if specs is not None else load_all_specs()

    def packages(self) -> list[PackageSpec]:
        """Catalog packages, then packages imported under ids of their own (``captioneer models import``)."""
        listed = [pkg for spec in self.specs.values() for pkg in spec.packages]
        return listed + self.imported_packages({pkg.id for pkg in listed})

    def imported_packages(self, catalog_ids: set[str]) -> list[PackageSpec]:
        found: list[PackageSpec] = []
        try:
            markers = sorted(self.paths.models.glob(f"*/{INSTALL_MARKER}"))
        except OSError:
            return found
        for marker_path in markers:
            directory = marker_path.parent
            if directory.name.startswith(".") or directory.name in catalog_ids:
                continue
            marker = installed_marker(directory)
            if marker is None or marker.id != directory.name:
                continue
            found.append(
                PackageSpec(
                    id=directory.name,
                    family=marker.family,
                    name=marker.name,
                    format=marker.format,
                    files=(),
                    size_bytes=marker.size_bytes,
                    quantization=marker.quantization,
                    license="see the imported model",
                    notes=f"imported from {marker.origin or 'a local path'}",
                )
            )
        return found

    def get(self, package_id: str) -> PackageSpec:
        for pkg in self.packages():
            if pkg.id == package_id:
                return pkg
        known = ", ".join(p.id for p in self.packages())
        raise UsageError(f"unknown model package {package_id!r}", f"known packages: {known}")

    def package_dir(self, pkg: PackageSpec) -> Path:
        if pkg.format == "bundled" and pkg.bundled_path:
            return data_root() / pkg.bundled_path
        return self.paths.models / pkg.id

    def installed_path(self, pkg: PackageSpec) -> Path | None:
        """Where the package's model lives if it is completely installed, else None."""
        directory = self.package_dir(pkg)
        if pkg.format == "bundled":
            return directory if (directory / "config.json").is_file() else None
        marker = installed_marker(
            directory
        )  # None also for a damaged or foreign marker: reinstalling repairs it
        if marker is None:
            return None
        model_path = directory / marker.model_path
        return model_path if model_path.exists() else None

    def entries(self) -> list[CatalogEntry]:
        return [CatalogEntry(pkg, self.installed_path(pkg)) for pkg in self.packages()]

    def resolve_model(self, model: str | None) -> tuple[Path, PackageSpec | None]:
        """Turn ``--model`` (a path or a package id, or nothing) into a model path on disk."""
        if model:
            candidate = Path(model).expanduser()
            if candidate.exists():
                return candidate, None
            if any(p.id == model for p in self.packages()):
                pkg = self.get(model)
                path = self.installed_path(pkg)
                if path is None:
                    raise ModelError(
                        f"model package {model!r} is not installed",
                        f"run `captioneer models install {model}` or pass --model PATH",
                    )
                return path, pkg
            raise ModelError(
                f"model {model!r} is neither an existing path nor a known package id",
                "pass a model directory/.gguf file or an id from `captioneer models list`",
            )
        # No --model: a real installed default first, then any installed package, then the bundled demo.
        entries = self.entries()
        for wanted in (
            lambda e: e.installed and e.package.default and e.package.format != "bundled",
            lambda e: e.installed and e.package.format != "bundled",
            lambda e: e.installed,
        ):
            for entry in entries:
                if wanted(entry):
                    assert entry.installed_path is not None
                    return entry.installed_path, entry.package
        raise ModelError(
            "no model is installed",
            "install one with `captioneer models install ID` (see `captioneer models list`) or pass --model PATH",
        )
