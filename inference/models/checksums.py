"""What Captioneer knows of each catalog file's sha256: the catalog's pin, else the digest recorded when the
package was installed (downloads are hashed then; large hub files are checked against the hub's LFS sha256)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference.models.marker import InstallMarker
from inference.models.spec import PackageSpec
from inference.models.store_layout import file_target

SOURCES = {
    "catalog": "pinned by the catalog",
    "installed": "computed when this copy was installed (the catalog pins none)",
    "unpinned": "the catalog pins none; installing the package records it",
    "not_kept": "the catalog pins none, and the installed copy does not keep this file (converted at install)",
    "linked": "the catalog pins none, and the installed copy links the file without hashing it",
}


@dataclass(frozen=True)
class FileChecksum:
    path: str  # the file's path in its repository, as the catalog lists it
    sha256: str | None
    source: str  # a key of SOURCES

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sha256": self.sha256 or "not known",
            "sha256_source": SOURCES[self.source],
        }


def file_checksums(package: PackageSpec, marker: InstallMarker | None) -> list[FileChecksum]:
    """Each catalog file of ``package`` with its best known sha256; ``marker``: the installed copy's, if any."""
    recorded = {entry.path: entry.sha256 for entry in marker.files} if marker is not None else {}
    out = []
    for file in package.files:
        target = file_target(package, file)
        if file.sha256:
            out.append(FileChecksum(file.path, file.sha256, "catalog"))
        elif recorded.get(target):
            out.append(FileChecksum(file.path, recorded[target], "installed"))
        elif marker is None:
            out.append(FileChecksum(file.path, None, "unpinned"))
        else:
            out.append(FileChecksum(file.path, None, "linked" if target in recorded else "not_kept"))
    return out
