"""Phonon-2 sources for the store tests, built with the parakeet_tdt tests' synthetic-container builders.

``tests/parakeet_tdt`` keeps its helpers as sibling modules (``parakeet_fixtures``, ``phonon_variant``,
``test_phonon_import``) imported by bare name; its conftest puts the folder on ``sys.path`` only when those
tests are collected, so this module does the same before importing them.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from inference.models.spec import FamilySpec, PackageFile, load_family_spec
from inference.paths import REPO_ROOT

_PARAKEET_TESTS = str(Path(__file__).resolve().parents[1] / "parakeet_tdt")
if _PARAKEET_TESTS not in sys.path:
    sys.path.insert(0, _PARAKEET_TESTS)

from parakeet_fixtures import audio_path, model_dir  # noqa: E402
from phonon_variant import make_phonon_variant  # noqa: E402
from test_phonon_import import phonon_archive_dir, sidecars_for  # noqa: E402

PHONON_REPO = "FermionResearch/Phonon-2"
PHONON_REVISION = "7e153e4054c0a10db6d47d6fff5c062d4c77c154"
NVIDIA_REPO = "nvidia/parakeet-tdt-0.6b-v3"
NVIDIA_REVISION = "541d1f99c6b0c3cd0b11a95167540bb8edefd82b"
ARCHIVE = "phonon-2.bps.tar.zst"
SIDECARS = ("config.json", "tokenizer.json", "processor_config.json")

__all__ = ["audio_path", "model_dir"]


@dataclass(frozen=True)
class PhononSource:
    folder: Path  # model.fermion + config.json (the archive unpacked)
    archive: Path  # the same two files as a zstd-compressed tar
    sidecars: Path  # tiny_a's config/tokenizer/processor files in the role of the nvidia v3 ones
    exact: dict[str, np.ndarray]  # the dense tensors the container stands for

    @property
    def archive_sha256(self) -> str:
        return sha256(self.archive.read_bytes())

    @property
    def container_sha256(self) -> str:
        return sha256((self.folder / "model.fermion").read_bytes())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pack_archive(folder: Path, archive: Path) -> Path:
    import zstandard

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in ("model.fermion", "config.json"):
            tar.add(folder / name, arcname=f"phonon-2/{name}")
    archive.write_bytes(zstandard.ZstdCompressor().compress(buffer.getvalue()))
    return archive


def build_source(directory: Path) -> PhononSource:
    directory.mkdir(parents=True, exist_ok=True)
    folder, exact = phonon_archive_dir(directory)
    archive = pack_archive(folder, directory / ARCHIVE)
    return PhononSource(folder, archive, sidecars_for(directory), exact)


def dense_reference(directory: Path, exact: dict[str, np.ndarray]) -> Path:
    """The dense tiny checkpoint the container was made from, with the Phonon runtime config."""
    from safetensors.numpy import save_file

    out = make_phonon_variant(directory)
    save_file(exact, str(out / "model.safetensors"))
    return out


def real_parakeet_spec(archive_sha256: str | None = None) -> FamilySpec:
    """The shipped parakeet_tdt catalog, optionally with the Phonon-2 archive's digest pinned."""
    spec = load_family_spec("parakeet_tdt", REPO_ROOT / "model_specs")
    if archive_sha256 is None:
        return spec
    packages = []
    for pkg in spec.packages:
        if pkg.id == "phonon2_source":
            files = tuple(replace(f, sha256=archive_sha256) if f.path == ARCHIVE else f for f in pkg.files)
            pkg = replace(pkg, files=files)
        packages.append(pkg)
    return replace(spec, packages=tuple(packages))


def write_real_specs(directory: Path, archive_sha256: str | None = None) -> None:
    """The shipped catalog files into ``directory`` (for the CLI, which reads CAPTIONEER_MODEL_SPECS)."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in (REPO_ROOT / "model_specs").glob("*.json"):
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if archive_sha256 is not None:
            for pkg in data["packages"]:
                for entry in pkg.get("files", ()):
                    if pkg["id"] == "phonon2_source" and entry["path"] == ARCHIVE:
                        entry["sha256"] = archive_sha256
        (directory / path.name).write_text(json.dumps(data), encoding="utf-8")


def serve(hub_state: Any, source: PhononSource, archive_bytes: bytes | None = None) -> None:
    """The archive at the Phonon-2 repository and the sidecars at the nvidia one, as on the real hub."""
    hub_state.revisions |= {PHONON_REVISION, NVIDIA_REVISION}
    hub_state.add(
        PHONON_REPO,
        ARCHIVE,
        archive_bytes if archive_bytes is not None else source.archive.read_bytes(),
        lfs=True,
    )
    for name in SIDECARS:
        hub_state.add(NVIDIA_REPO, name, (source.sidecars / name).read_bytes())


def transcript_of(model: Path, clip: str = "short") -> dict[str, Any]:
    from inference.audio.io import load_audio_file
    from inference.engine import load_engine

    with load_engine(model, backend="cpu", threads=2) as engine:
        result = engine.transcribe(load_audio_file(audio_path(clip))).to_json()
    result.pop("timing")
    return result


def package_file(path: str, **fields: Any) -> PackageFile:
    return PackageFile(path, **fields)
