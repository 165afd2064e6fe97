"""The local sources ``captioneer models import`` converts into parakeet_tdt packages: Phonon-2 (a ``.tar.zst``
archive, or the folder it unpacks to) and NeMo ``.nemo`` checkpoints. Their steps are imported when one runs."""

from __future__ import annotations

from pathlib import Path

from inference.models.source_import import ConvertingStore, SourceImport


class Phonon2Importer:
    label = "Phonon-2 sources"
    example = "a .tar.zst archive or a folder holding model.fermion"
    options = frozenset({"sidecars", "sha256"})

    def claims(self, source: Path) -> bool:
        from inference.families.parakeet_tdt.phonon_source import is_phonon2_source

        return is_phonon2_source(source)

    def import_source(self, store: ConvertingStore, request: SourceImport) -> Path:
        from inference.families.parakeet_tdt.phonon_store_import import import_phonon2

        return import_phonon2(store, request)


class NemoImporter:
    label = ".nemo checkpoints"
    example = "a .nemo file"
    options = frozenset({"sidecars", "sha256", "license_text"})

    def claims(self, source: Path) -> bool:
        from inference.families.parakeet_tdt.nemo_source import is_nemo_source

        return is_nemo_source(source)

    def import_source(self, store: ConvertingStore, request: SourceImport) -> Path:
        from inference.families.parakeet_tdt.nemo_store_import import import_nemo

        return import_nemo(store, request)
