"""The sidecar files (config.json, tokenizer.json ...) embedded in an audio.cpp GGUF package (docs/gguf_packages.md §3).

Two layouts exist:

* current: ``audiocpp.embedded_files.names`` (strings), ``.offsets`` (n + 1 integers, 0 first, the blob size
  last, never decreasing) and ``.data`` (one byte array holding every file back to back);
* legacy: ``names`` and ``contents``, two string arrays of the same length.

Both families read their packages through :func:`embedded_files`, so a damaged or hostile table is refused the
same way everywhere: names must be unique, relative, without ``..`` or backslashes; the offsets must tile the blob.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from inference.errors import ModelError

NAMES = "audiocpp.embedded_files.names"
OFFSETS = "audiocpp.embedded_files.offsets"
DATA = "audiocpp.embedded_files.data"
CONTENTS = "audiocpp.embedded_files.contents"
_FIX = "the package is damaged or was not written by audio.cpp; re-download it"


def embedded_files(fields: Mapping[str, Any], source: str) -> dict[str, bytes]:
    """The embedded files of a package by name, copied out of the map (they are small next to the weights).

    ``fields``: the package's metadata (``GgufFile.fields``); ``source`` names the package in errors.
    A package without an embedded-file table has no files (``{}``).
    """
    names = fields.get(NAMES)
    if names is None:
        if any(key in fields for key in (OFFSETS, DATA, CONTENTS)):
            raise ModelError(f"{source} holds embedded-file data but no {NAMES}", _FIX)
        return {}
    _check_names(names, source)
    offsets, data = fields.get(OFFSETS), fields.get(DATA)
    if offsets is not None or data is not None:
        contents = _blob_contents(names, offsets, data, source)
    else:
        contents = _legacy_contents(names, fields.get(CONTENTS), source)
    return dict(zip(names, contents, strict=True))


def _check_names(names: object, source: str) -> None:
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ModelError(f"{source} has a malformed embedded-file list ({NAMES} is not a string array)", _FIX)
    seen: set[str] = set()
    for name in names:
        pure = PurePosixPath(name)
        if not name or pure.is_absolute() or ".." in pure.parts or "\\" in name:
            raise ModelError(f"{source} embeds a file with an unsafe path {name!r}", "use a trusted package")
        if name in seen:
            raise ModelError(f"{source} embeds {name!r} twice", _FIX)
        seen.add(name)


def _blob_contents(names: list[str], offsets: object, data: object, source: str) -> list[bytes]:
    if not isinstance(offsets, np.ndarray) or offsets.ndim != 1 or offsets.dtype.kind not in "iu":
        raise ModelError(f"{source} has no integer {OFFSETS} array for its embedded files", _FIX)
    if not isinstance(data, np.ndarray) or data.ndim != 1 or data.dtype.itemsize != 1:
        raise ModelError(f"{source} has no byte array {DATA} for its embedded files", _FIX)
    bounds = offsets.astype(np.int64)
    blob = data.view(np.uint8)
    if len(bounds) != len(names) + 1:
        raise ModelError(
            f"{source} has inconsistent embedded-file offsets ({len(bounds)} offsets for {len(names)} files)",
            _FIX,
        )
    if bounds[0] != 0 or bounds[-1] != blob.size or np.any(np.diff(bounds) < 0):
        raise ModelError(
            f"{source} has inconsistent embedded-file offsets (they must run from 0 to the data size "
            f"{blob.size} without going back)",
            _FIX,
        )
    return [blob[bounds[i] : bounds[i + 1]].tobytes() for i in range(len(names))]


def _legacy_contents(names: list[str], contents: object, source: str) -> list[bytes]:
    if not isinstance(contents, list) or not all(isinstance(text, str) for text in contents):
        raise ModelError(f"{source} names embedded files but holds no data for them", _FIX)
    if len(contents) != len(names):
        raise ModelError(f"{source} has {len(names)} embedded-file names but {len(contents)} contents", _FIX)
    # surrogateescape: the reader decoded non-UTF-8 bytes this way, so they come back unchanged.
    return [text.encode("utf-8", "surrogateescape") for text in contents]
