"""The install marker ``<models>/<id>/captioneer-package.json``: written last, so its presence means installed.

One typed record, :class:`InstallMarker`, is the only reader and writer of the file. JSON keys (schema 1):
``schema``, ``id``, ``family``, ``format``, ``name``, ``quantization``, ``model_path`` (relative to the package
dir), ``source`` ("hub" or "import"), ``hf_repo``, ``revision``, ``commit``, ``other_sources`` (files from
other repositories), ``origin`` (import source path), ``linked`` (import by link), ``sidecars_origin``,
``installed_at`` (unix time), ``size_bytes``, and ``files``: ``[{"path", "size", "sha256"}]`` with the hashes
computed at install time (``sha256`` may be null for linked imports).

A marker of another schema, or one that is not valid JSON or lacks a field, is an :class:`InvalidMarkerError`:
the catalog then treats the package as not installed (a reinstall writes a good marker), and ``verify`` reports
it in words.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from inference.errors import ModelError

log = logging.getLogger(__name__)

INSTALL_MARKER = "captioneer-package.json"
MARKER_SCHEMA = 1
SOURCES = ("hub", "import")


class InvalidMarkerError(ModelError):
    """An install marker that cannot be read: damaged, incomplete or from another Captioneer version."""


@dataclass(frozen=True)
class MarkerFile:
    path: str  # relative to the package directory, POSIX separators
    size: int
    sha256: str | None


@dataclass(frozen=True)
class OtherSource:
    """A file that came from another repository than the package's (e.g. nvidia's sidecars of Phonon-2)."""

    path: str
    hf_repo: str | None
    revision: str | None
    commit: str | None


@dataclass(frozen=True)
class InstallMarker:
    id: str
    family: str
    format: str
    name: str
    model_path: str
    source: str  # "hub" or "import"
    installed_at: float
    files: tuple[MarkerFile, ...]
    quantization: str | None = None
    hf_repo: str | None = None
    revision: str | None = None
    commit: str | None = None
    other_sources: tuple[OtherSource, ...] = ()
    origin: str | None = None
    linked: bool = False
    sidecars_origin: str | None = None
    version: int = field(default=MARKER_SCHEMA)

    @property
    def size_bytes(self) -> int:
        return sum(file.size for file in self.files)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        version = data.pop("version")
        return {"schema": version, **data, "size_bytes": self.size_bytes}

    @classmethod
    def from_json(cls, data: object, where: str) -> InstallMarker:
        """The marker in ``data`` (parsed JSON); InvalidMarkerError naming ``where`` and the problem."""
        if not isinstance(data, dict):
            raise _invalid(where, "it is not a JSON object")
        schema = data.get("schema")
        if schema != MARKER_SCHEMA:
            raise _invalid(where, f"it has schema {schema!r}, this Captioneer reads schema {MARKER_SCHEMA}")
        try:
            files = tuple(
                MarkerFile(str(f["path"]), int(f["size"]), _optional_str(f.get("sha256")))
                for f in data["files"]
            )
            others = tuple(
                OtherSource(
                    str(s["path"]),
                    _optional_str(s.get("hf_repo")),
                    _optional_str(s.get("revision")),
                    _optional_str(s.get("commit")),
                )
                for s in data.get("other_sources") or ()
            )
            marker = cls(
                id=_required_str(data, "id"),
                family=_required_str(data, "family"),
                format=_required_str(data, "format"),
                name=_required_str(data, "name"),
                model_path=_required_str(data, "model_path"),
                source=_required_str(data, "source"),
                installed_at=float(data["installed_at"]),
                files=files,
                quantization=_optional_str(data.get("quantization")),
                hf_repo=_optional_str(data.get("hf_repo")),
                revision=_optional_str(data.get("revision")),
                commit=_optional_str(data.get("commit")),
                other_sources=others,
                origin=_optional_str(data.get("origin")),
                linked=bool(data.get("linked")),
                sidecars_origin=_optional_str(data.get("sidecars_origin")),
                version=schema,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _invalid(where, f"a field is missing or malformed ({type(exc).__name__}: {exc})") from exc
        if marker.source not in SOURCES:
            raise _invalid(where, f"its source is {marker.source!r}, not one of {', '.join(SOURCES)}")
        if Path(marker.model_path).is_absolute() or ".." in Path(marker.model_path).parts:
            raise _invalid(where, f"its model path {marker.model_path!r} leaves the package folder")
        return marker


def _invalid(where: str, problem: str) -> InvalidMarkerError:
    return InvalidMarkerError(
        f"the install record {where} cannot be read: {problem}",
        "reinstall or re-import the model (its files stay where they are until then)",
    )


def _required_str(data: dict[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string, got {value!r}")
    return value


def _optional_str(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"expected a string or null, got {value!r}")
    return value


def read_marker(package_dir: Path) -> InstallMarker | None:
    """The marker of ``package_dir``; None when there is none (not installed); InvalidMarkerError when it
    exists but cannot be read."""
    path = package_dir / INSTALL_MARKER
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _invalid(str(path), exc.strerror or str(exc)) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _invalid(str(path), f"it is not valid JSON ({exc})") from exc
    return InstallMarker.from_json(data, str(path))


def installed_marker(package_dir: Path) -> InstallMarker | None:
    """The marker when the package is installed and its marker readable, else None (a bad marker is logged:
    the package counts as not installed, so installing it again repairs it)."""
    try:
        return read_marker(package_dir)
    except InvalidMarkerError as exc:
        log.warning("%s", exc)
        return None


def write_marker(package_dir: Path, marker: InstallMarker) -> None:
    """Write through a temporary name and rename, so a crash never leaves half a marker."""
    tmp = package_dir / (INSTALL_MARKER + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(marker.to_json(), handle, indent=2, ensure_ascii=False)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, package_dir / INSTALL_MARKER)


def converted_import_fields(source: Path, sidecars: Path | None) -> dict[str, Any]:
    """The marker fields of a package converted from a local file (a Phonon-2 source, a NeMo .nemo)."""
    return {
        "source": "import",
        "origin": str(source),
        "linked": False,
        "hf_repo": None,
        "revision": None,
        "commit": None,
        "sidecars_origin": str(sidecars) if sidecars is not None else None,
    }
