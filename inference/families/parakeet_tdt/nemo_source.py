"""What a NeMo ``.nemo`` import needs besides the store: which catalog entry a file is, which digest it must have,
where stock sidecars come from, and the conversion step that turns it into an installed package.

The archive reader and converter are :mod:`inference.families.parakeet_tdt.nemo_import`, imported only when a
conversion runs; the import's steps are :mod:`inference.families.parakeet_tdt.nemo_store_import`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from inference.errors import ModelError
from inference.models.conversion import ConversionContext, ConversionResult, Converter
from inference.models.spec import PackageSpec

FORMAT = "nemo"
FAMILY = "parakeet_tdt"
SUFFIX = ".nemo"
MODEL_DIR = "model"
SIDECAR_DIR = "stock-sidecars"
SIDECAR_FILES = ("config.json", "tokenizer.json", "processor_config.json")
# Installed packages whose sidecars are the stock parakeet-tdt-0.6b-v3 ones (a fine-tune's .nemo may lack its own).
STOCK_V3_PACKAGES = ("parakeet_tdt", "parakeet_tdt_q8_0", "parakeet_tdt_f16")


def is_nemo_source(path: Path) -> bool:
    return path.is_file() and path.name.lower().endswith(SUFFIX)


def pinned_digest(package: PackageSpec) -> str | None:
    return next((f.sha256 for f in package.files if f.path.lower().endswith(SUFFIX) and f.sha256), None)


def catalog_package(
    packages: list[PackageSpec], source: Path, digest: str, package_id: str | None
) -> PackageSpec | None:
    """The catalog's ``.nemo`` entry this file is meant to be: the one pinning its digest, else the one named by
    ``--id``, else the one whose file has the same name."""
    entries = [p for p in packages if p.format == FORMAT and p.family == FAMILY]
    for pkg in entries:
        if pinned_digest(pkg) == digest:
            return pkg
    for pkg in entries:
        if package_id is not None and pkg.id == package_id:
            return pkg
    for pkg in entries:
        if package_id is None and any(Path(f.path).name == source.name for f in pkg.files):
            return pkg
    return None


def check_digest(source: Path, actual: str, package: PackageSpec | None, override: str | None) -> None:
    """Refuse a file that is not the build the catalog (or ``--sha256``) names."""
    if override is not None:
        if actual != override:
            raise ModelError(
                f"{source.name} has sha256 {actual}, not the {override} given with --sha256",
                "check the file or the digest",
            )
        return
    pinned = pinned_digest(package) if package is not None else None
    if package is not None and pinned is not None and actual != pinned:
        raise ModelError(
            f"{source.name} has sha256 {actual}, but {package.id} ({package.name}) is published as {pinned}",
            f"copy the file again if it is incomplete; to import this other build on purpose, pass --sha256 {actual} "
            "(or choose another --id)",
        )


def installed_stock_sidecars(installed: Callable[[str], Path | None]) -> tuple[str, Path] | None:
    """(package id, model path) of the first installed stock v3 package."""
    for package_id in STOCK_V3_PACKAGES:
        path = installed(package_id)
        if path is not None:
            return package_id, path
    return None


def copy_sidecars(model: Path, into: Path) -> Path:
    """The stock sidecars of an installed package (a folder, or a GGUF package's embedded files) into ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    if model.is_dir():
        for name in SIDECAR_FILES:
            if not (model / name).is_file():
                raise ModelError(f"the installed model {model} has no {name}", "reinstall it")
            (into / name).write_bytes((model / name).read_bytes())
        return into
    from inference.native.embedded_files import embedded_files
    from inference.native.gguf_file import GgufFile

    reader = GgufFile(model)
    try:
        files = embedded_files(reader.fields, str(model))
    finally:
        reader.close()
    missing = [name for name in SIDECAR_FILES if name not in files]
    if missing:
        raise ModelError(
            f"the installed package {model.name} embeds no {', '.join(missing)}",
            "install the safetensors package parakeet_tdt, or pass --sidecars DIR",
        )
    for name in SIDECAR_FILES:
        (into / name).write_bytes(files[name])
    return into


def import_converter(
    source: Path, sidecars: Path | None, stock: tuple[str, Path] | None, provenance: dict[str, Any]
) -> Converter:
    """A conversion step writing ``<package>/model`` from ``source``. Sidecars: the folder ``sidecars`` when given;
    else the archive's own when complete; else those of the installed stock package ``stock`` (id, model path)."""

    def convert(context: ConversionContext) -> ConversionResult:
        from inference.families.parakeet_tdt.nemo_import import convert_nemo

        copied = context.package_dir / SIDECAR_DIR

        def fallback() -> tuple[Path, str] | None:
            if stock is None:
                return None
            return copy_sidecars(stock[1], copied), f"the installed package {stock[0]}"

        result = convert_nemo(
            source,
            context.package_dir / MODEL_DIR,
            sidecars=sidecars,
            fallback_sidecars=fallback,
            provenance=provenance,
            progress=context.progress,
            cancel=context.cancel,
        )
        if copied.is_dir():  # the model folder holds its own copies now
            for name in SIDECAR_FILES:
                (copied / name).unlink(missing_ok=True)
            copied.rmdir()
        return ConversionResult(
            model_path=MODEL_DIR, notes=f"converted from {source.name} ({result.tensors} tensors)"
        )

    return convert
