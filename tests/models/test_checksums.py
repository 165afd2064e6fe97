"""`captioneer models info` shows each file's sha256 as far as it is known, and says where it comes from."""
# ruff: noqa: F811  (test parameters named like the imported fixtures)

from __future__ import annotations

import hashlib
import io
import json
import re

from inference.cli import main
from inference.models.checksums import SOURCES, file_checksums
from inference.models.marker import InstallMarker, MarkerFile
from inference.models.spec import load_all_specs
from inference.models.store_layout import file_target
from tests.models.hub_fixtures import CONFIG_BYTES, WEIGHTS_BYTES, app_paths, hub, hub_state, make_store  # noqa: F401

HEX64 = re.compile(r"^[0-9a-f]{64}$")


def models_info(package_id: str) -> dict:
    out = io.StringIO()
    assert main(["models", "info", package_id], out=out) == 0
    return json.loads(out.getvalue())


def test_info_shows_the_catalog_pin_or_says_none_is_known_before_install(app_paths) -> None:
    files = {f["path"]: f for f in models_info("tiny_st")["files"]}
    assert files["config.json"]["sha256"] == hashlib.sha256(CONFIG_BYTES).hexdigest()
    assert files["config.json"]["sha256_source"] == SOURCES["catalog"]
    assert files["model.safetensors"]["sha256"] == "not known"
    assert files["model.safetensors"]["sha256_source"] == SOURCES["unpinned"]


def test_info_shows_the_sha256_recorded_at_install(app_paths, hub) -> None:
    make_store(app_paths).install("tiny_st")
    files = {f["path"]: f for f in models_info("tiny_st")["files"]}
    assert files["model.safetensors"]["sha256"] == hashlib.sha256(WEIGHTS_BYTES).hexdigest()
    assert files["model.safetensors"]["sha256_source"] == SOURCES["installed"]
    assert files["config.json"]["sha256_source"] == SOURCES["catalog"]  # the pin stays the authority


def test_files_converted_away_or_linked_say_why_they_have_no_sha256() -> None:
    package = next(p for p in load_all_specs()["parakeet_tdt"].packages if p.id == "phonon2_source")
    target = {f.path: file_target(package, f) for f in package.files}
    marker = InstallMarker(
        id=package.id,
        family=package.family,
        format=package.format,
        name=package.name,
        model_path=".",
        source="import",
        installed_at=0.0,
        linked=True,
        files=(
            MarkerFile("model.safetensors", 10, "ab" * 32),
            MarkerFile(target["config.json"], 5, None),
            MarkerFile(target["tokenizer.json"], 5, "cd" * 32),
        ),
    )
    by_path = {c.path: (c.sha256, c.source) for c in file_checksums(package, marker)}
    assert by_path["phonon-2.bps.tar.zst"] == (None, "not_kept")  # converted at install, not kept
    assert by_path["config.json"] == (None, "linked")
    assert by_path["tokenizer.json"] == ("cd" * 32, "installed")


def test_no_catalog_package_shows_a_null_sha256() -> None:
    for spec in load_all_specs().values():
        for package in spec.packages:
            for entry in models_info(package.id)["files"]:
                assert HEX64.match(entry["sha256"]) or entry["sha256"] == "not known", (package.id, entry)
                assert entry["sha256_source"] in SOURCES.values(), (package.id, entry)
