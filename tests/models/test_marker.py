"""The typed install marker: a round trip through JSON, and old, damaged or foreign markers."""
# ruff: noqa: F811  (test parameters named like the imported fixtures)

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference.models.catalog import Catalog
from inference.models.marker import (
    INSTALL_MARKER,
    MARKER_SCHEMA,
    InstallMarker,
    InvalidMarkerError,
    MarkerFile,
    OtherSource,
    read_marker,
    write_marker,
)
from tests.models.hub_fixtures import app_paths, hub, hub_state, make_store  # noqa: F401

MARKER = InstallMarker(
    id="tiny_gguf",
    family="parakeet_tdt",
    format="gguf",
    name="Tiny GGUF",
    model_path="tiny-q8_0.gguf",
    source="hub",
    installed_at=1700000000.5,
    files=(MarkerFile("tiny-q8_0.gguf", 10, "ab" * 32), MarkerFile(".captioneer/x.gguf", 5, None)),
    quantization="q8_0",
    hf_repo="org/repo",
    revision="main",
    commit="c" * 40,
    other_sources=(OtherSource("config.json", "nvidia/x", "v1", None),),
)


def test_round_trip_through_json(tmp_path: Path) -> None:
    data = MARKER.to_json()
    assert data["schema"] == MARKER_SCHEMA and data["size_bytes"] == 15
    assert data["files"][0] == {"path": "tiny-q8_0.gguf", "size": 10, "sha256": "ab" * 32}
    assert InstallMarker.from_json(json.loads(json.dumps(data)), "x") == MARKER
    write_marker(tmp_path, MARKER)
    assert read_marker(tmp_path) == MARKER
    assert not (tmp_path / (INSTALL_MARKER + ".tmp")).exists()


def test_no_marker_means_not_installed(tmp_path: Path) -> None:
    assert read_marker(tmp_path) is None


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda d: d.update(schema=0), "schema 0, this Captioneer reads schema 1"),
        (lambda d: d.pop("schema"), "schema None"),
        (lambda d: d.update(schema=2), "schema 2"),
        (lambda d: d.pop("family"), "a field is missing or malformed"),
        (lambda d: d.update(files=[{"path": "a"}]), "a field is missing or malformed"),
        (lambda d: d.update(installed_at="yesterday"), "a field is missing or malformed"),
        (lambda d: d.update(name=""), "name must be a non-empty string"),
        (lambda d: d.update(source="ftp"), "its source is 'ftp'"),
        (lambda d: d.update(model_path="../elsewhere"), "leaves the package folder"),
    ],
)
def test_old_or_malformed_markers_are_refused_by_name(tmp_path: Path, edit, problem: str) -> None:
    data = MARKER.to_json()
    edit(data)
    (tmp_path / INSTALL_MARKER).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InvalidMarkerError, match=problem) as err:
        read_marker(tmp_path)
    assert str(tmp_path / INSTALL_MARKER) in err.value.message and "reinstall" in err.value.fix


def test_invalid_json_and_non_objects(tmp_path: Path) -> None:
    (tmp_path / INSTALL_MARKER).write_text('{"schema": 1, "id": ', encoding="utf-8")
    with pytest.raises(InvalidMarkerError, match="not valid JSON"):
        read_marker(tmp_path)
    (tmp_path / INSTALL_MARKER).write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(InvalidMarkerError, match="not a JSON object"):
        read_marker(tmp_path)


def test_a_damaged_marker_counts_as_not_installed_and_verify_says_why(app_paths, hub, caplog) -> None:
    store = make_store(app_paths)
    path = store.install("tiny_gguf")
    catalog = Catalog(app_paths)
    assert catalog.installed_path(catalog.get("tiny_gguf")) == path
    marker_file = app_paths.models / "tiny_gguf" / INSTALL_MARKER
    data = json.loads(marker_file.read_text(encoding="utf-8"))
    marker_file.write_text(json.dumps({**data, "schema": 0}), encoding="utf-8")  # an older Captioneer's
    assert catalog.installed_path(catalog.get("tiny_gguf")) is None
    assert "schema 0" in caplog.text
    with pytest.raises(InvalidMarkerError, match="cannot be read: it has schema 0"):
        store.verify("tiny_gguf")
    assert store.install("tiny_gguf") == path  # installing again repairs it
    assert read_marker(app_paths.models / "tiny_gguf") is not None
    assert store.verify("tiny_gguf").ok


def test_an_imported_package_with_a_bad_marker_is_not_listed(app_paths, tmp_path: Path) -> None:
    store = make_store(app_paths)
    source = tmp_path / "model.gguf"
    source.write_bytes(b"GGUF" + b"\0" * 60)
    (app_paths.models / "mine").mkdir(parents=True)
    write_marker(
        app_paths.models / "mine",
        InstallMarker(
            id="mine",
            family="parakeet_tdt",
            format="gguf",
            name="Mine",
            model_path="model.gguf",
            source="import",
            installed_at=1.0,
            files=(MarkerFile("model.gguf", 64, None),),
            origin=str(source),
        ),
    )
    (app_paths.models / "mine" / "model.gguf").write_bytes(source.read_bytes())
    assert "mine" in {p.id for p in store.catalog.packages()}
    (app_paths.models / "mine" / INSTALL_MARKER).write_text("garbage", encoding="utf-8")
    assert "mine" not in {p.id for p in Catalog(app_paths).packages()}
