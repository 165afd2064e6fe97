"""Fuzz targets for the readers of files from outside (GGUF, safetensors, Phonon-2 container and archive, session
journal, settings): each reads the input the way the app does and returns a picklable summary of what it read
(digests of the bytes, shapes, texts), or raises the reader's CaptioneerError to refuse.

They run in the harness's forked children (tests/fuzz/harness.py): module imports, the native library and the
Phonon sidecars are loaded once in the zygote.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import Any

from app.live.journal import read_session
from app.settings import SettingsStore
from inference.families.parakeet_tdt.phonon_archive import extract_archive
from inference.families.parakeet_tdt.phonon_import import (
    ARCHIVE_CONFIG,
    CONTAINER,
    convert_phonon2,
    read_container,
)
from inference.native.bindings import load_api
from inference.native.checkpoint import open_checkpoint
from inference.native.embedded_files import embedded_files
from inference.native.gguf_file import GgufFile
from inference.native.package_tensors import logical_tensors
from inference.paths import AppPaths
from tests.fuzz.reader_common import SIDECARS_ENV
from tests.fuzz.reader_common import digest as _digest

_API = load_api()  # once, in the zygote


def read_gguf(path: Path, scratch: Path) -> dict[str, Any]:
    with GgufFile(path) as package:
        tensors = [
            (
                t.name,
                t.tensor.name,
                t.shape,
                t.tensor.shape,
                t.tensor.type_name,
                _digest(package.raw(t.tensor)),
            )
            for t in logical_tensors(package, path.name, require_names=False)
        ]
        files = {name: _digest(data) for name, data in embedded_files(package.fields, path.name).items()}
    return {"tensors": tensors, "files": files}


def read_safetensors(path: Path, scratch: Path) -> dict[str, Any]:
    with open_checkpoint(path, api=_API) as checkpoint:
        return {
            name: (
                checkpoint.shape(name),
                checkpoint.record(name).type.name,
                _digest(checkpoint.record(name).raw),
            )
            for name in checkpoint.names()
        }


def read_container_file(path: Path, scratch: Path) -> dict[str, Any]:
    return {name: (tensor.shape, _digest(tensor.tobytes())) for name, tensor in read_container(path)}


def extract_phonon_archive(path: Path, scratch: Path) -> dict[str, Any]:
    """The archive's members as the import takes them out, then the container read from them."""
    into = scratch / "unpacked"
    into.mkdir()
    try:
        extract_archive(path, into, frozenset({CONTAINER, ARCHIVE_CONFIG}))
        label = f"{path.name} (member {CONTAINER})"  # as the import names it
        summary: dict[str, Any] = {
            name: (t.shape, _digest(t.tobytes())) for name, t in read_container(into / CONTAINER, label)
        }
        summary[ARCHIVE_CONFIG] = _digest((into / ARCHIVE_CONFIG).read_bytes())
        return summary
    finally:
        shutil.rmtree(into)


def import_phonon_archive(path: Path, scratch: Path) -> dict[str, Any]:
    """The whole import of an archive (extraction, conversion, cleanup on refusal), as ``models import`` runs it."""
    out = convert_phonon2(path, Path(os.environ[SIDECARS_ENV]), scratch / "phonon-2")
    result = {p.name: _digest(p.read_bytes()) for p in sorted(out.iterdir())}
    shutil.rmtree(out)
    return result


def read_journal(path: Path, scratch: Path) -> dict[str, Any]:
    saved, model = read_session(path)
    return {
        "title": saved.title,
        "text": saved.text,
        "closed": saved.closed,
        "segments": [(s.segment_id, s.text, s.closed) for s in model.segments],
    }


def load_settings(path: Path, scratch: Path) -> dict[str, Any]:
    settings = SettingsStore(AppPaths(scratch, scratch, scratch, scratch, scratch)).load()
    values = settings.to_dict()
    # NaN never equals itself: report it so the judge sees it rather than a spurious difference
    return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in values.items()}
