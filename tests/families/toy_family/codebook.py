"""The install step: the published codebook (``codebook.tsv``: a letter and its tone in Hz per line) becomes the
``tones.json`` the engine reads."""

from __future__ import annotations

import json
from pathlib import Path

from inference.errors import ModelError
from inference.models.conversion import ConversionContext, ConversionResult

SOURCE = "codebook.tsv"
TONES = "tones.json"


def read_codebook(path: Path) -> dict[str, float]:
    tones: dict[str, float] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        letter, _, hertz = line.partition("\t")
        if len(letter) != 1 or not hertz.strip():
            raise ModelError(f"{path.name}:{number} is not 'letter<TAB>hertz'", "re-download the package")
        tones[letter] = float(hertz)
    return tones


def build_codebook(context: ConversionContext) -> ConversionResult:
    source = context.package_dir / SOURCE
    if not source.is_file():
        raise ModelError(f"{context.package.name} has no {SOURCE}", "check the package's file list")
    tones = read_codebook(source)
    context.progress(0, len(tones), "writing the tone table")
    (context.package_dir / TONES).write_text(json.dumps(tones, sort_keys=True), encoding="utf-8")
    context.progress(len(tones), len(tones), "written")
    return ConversionResult(notes=f"{len(tones)} tones from {SOURCE}")
