"""Install-time conversion hooks: run in the temporary directory, report progress, fail cleanly."""

from __future__ import annotations

import json

import pytest

from inference.models.catalog import INSTALL_MARKER
from inference.models.conversion import ConversionContext, ConversionRegistry, ConversionResult
from inference.models.errors import InstallCancelled
from inference.models.progress import check_cancel
from tests.models.hub_fixtures import WEIGHTS_BYTES, make_store


def _unpack(context: ConversionContext) -> ConversionResult:
    """Stand-in for a real converter: turns the downloaded 'archive' into a loadable layout."""
    assert context.package_dir.name.startswith(".tmp-tiny_archive-")
    archive = context.package_dir / "model.safetensors"
    out = context.package_dir / "converted"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"model_type": "parakeet_tdt"}), encoding="utf-8")
    for step in range(3):
        check_cancel(context.cancel)
        context.progress(step + 1, 3, "unpacking")
    (out / "model.safetensors").write_bytes(archive.read_bytes()[::-1])
    archive.unlink()
    return ConversionResult(model_path="converted")


def test_converter_runs_before_the_marker_and_sets_the_model_path(app_paths, hub):
    registry = ConversionRegistry()
    registry.register("parakeet_tdt", _unpack)
    reports = []
    store = make_store(app_paths, conversions=registry)
    path = store.install("tiny_archive", progress=reports.append)
    assert path == app_paths.models / "tiny_archive" / "converted"
    assert (path / "model.safetensors").read_bytes() == WEIGHTS_BYTES[::-1]
    marker = json.loads((app_paths.models / "tiny_archive" / INSTALL_MARKER).read_text())
    assert marker["model_path"] == "converted"
    # Converter output is recorded with hashes computed at install time.
    assert {f["path"] for f in marker["files"]} == {"converted/config.json", "converted/model.safetensors"}
    assert all(f["sha256"] for f in marker["files"])
    converting = [r for r in reports if r.phase == "converting" and r.total]
    # Reports are throttled for user interfaces, but the last one of a step always gets through.
    assert converting[-1].done == converting[-1].total == 3 and converting[-1].message == "unpacking"
    assert store.verify("tiny_archive").ok


def test_failed_conversion_installs_nothing_and_keeps_the_download(app_paths, hub, hub_state):
    def broken(context: ConversionContext) -> None:
        raise RuntimeError("converter bug")

    registry = ConversionRegistry()
    registry.register("parakeet_tdt", broken)
    store = make_store(app_paths, conversions=registry)
    with pytest.raises(RuntimeError, match="converter bug"):
        store.install("tiny_archive")
    assert not (app_paths.models / "tiny_archive").exists()
    assert not list(app_paths.models.glob(".tmp-*"))
    assert store.partial_bytes("tiny_archive") == len(WEIGHTS_BYTES)

    registry.register("parakeet_tdt", _unpack)
    gets_before = len(hub_state.gets("model.safetensors"))
    assert store.install("tiny_archive").is_dir()
    assert (
        len(hub_state.gets("model.safetensors")) == gets_before
    )  # verified download reused, not fetched again


def test_cancel_during_conversion(app_paths, hub):
    import threading

    cancel = threading.Event()

    def cancel_then_continue(context: ConversionContext) -> ConversionResult:
        cancel.set()
        return _unpack(context)

    registry = ConversionRegistry()
    registry.register("parakeet_tdt", cancel_then_continue)
    with pytest.raises(InstallCancelled):
        make_store(app_paths, conversions=registry).install("tiny_archive", cancel=cancel)
    assert not (app_paths.models / "tiny_archive").exists()


def test_conversion_space_counts_in_the_preflight(app_paths, hub):
    from collections import namedtuple

    from inference.models.errors import DiskSpaceError
    from inference.models.store import DISK_RESERVE_BYTES

    Usage = namedtuple("Usage", "total used free")
    free = len(WEIGHTS_BYTES) + DISK_RESERVE_BYTES + 1000  # enough for the download alone
    registry = ConversionRegistry()
    registry.register("parakeet_tdt", _unpack, extra_space=lambda pkg: 5000)
    store = make_store(app_paths, conversions=registry, disk_usage=lambda path: Usage(0, 0, free))
    with pytest.raises(DiskSpaceError, match="needs"):
        store.install("tiny_archive")
    registry.register("parakeet_tdt", _unpack, extra_space=lambda pkg: 500)
    assert store.install("tiny_archive").is_dir()
