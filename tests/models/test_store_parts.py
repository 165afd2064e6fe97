"""Each part of the model store on its own: a StoreContext over a temporary models folder and the one part
under test (with the parts it is given), no ModelStore. The store's behaviour as a whole is tested beside this
file (test_store_install, test_store_local, test_store_failures, ...)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections import namedtuple
from pathlib import Path

import pytest

from inference.errors import ModelError, UsageError
from inference.models.assembly import Assembler, Installer
from inference.models.catalog import Catalog
from inference.models.conversion import ConversionContext
from inference.models.downloads import Downloads, PlannedFile
from inference.models.errors import DiskSpaceError
from inference.models.hub import RemoteFile
from inference.models.importing import Importer
from inference.models.maintenance import Maintenance
from inference.models.marker import INSTALL_MARKER, InstallMarker, MarkerFile, read_marker, write_marker
from inference.models.progress import InstallProgress
from inference.models.store_context import StoreContext
from inference.models.store_layout import DAY_S, LOCK_DIR, PARTIAL_DIR
from inference.paths import AppPaths
from tests.models.hub_fixtures import (
    CONFIG_BYTES,
    GGUF_BYTES,
    WEIGHTS_BYTES,
    hub_client,
    importers_without_conversions,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parakeet_tdt"))
from nemo_package import build_nemo  # noqa: E402
from parakeet_fixtures import model_dir  # noqa: E402

Usage = namedtuple("Usage", "total used free")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def context_for(paths: AppPaths, **kwargs) -> StoreContext:  # type: ignore[no-untyped-def]
    kwargs.setdefault("conversions", importers_without_conversions())
    context = StoreContext(paths, Catalog(paths), **kwargs)
    context.root.mkdir(parents=True)
    return context


def hand_made_package(context: StoreContext, package_id: str, data: bytes) -> Path:
    """An installed package written by hand: one file and the marker that records it."""
    directory = context.root / package_id
    directory.mkdir()
    (directory / "model.gguf").write_bytes(data)
    marker = InstallMarker(
        id=package_id,
        family="parakeet_tdt",
        format="gguf",
        name="hand-made",
        model_path="model.gguf",
        source="import",
        installed_at=0.0,
        files=(MarkerFile("model.gguf", len(data), sha256(data)),),
    )
    write_marker(directory, marker)
    return directory


def test_the_context_locks_a_package_checks_space_reports_and_swaps_a_folder_into_place(app_paths):
    context = context_for(app_paths, disk_usage=lambda _path: Usage(10**9, 0, 1000))
    with context.package_lock("pkg", "install"):
        assert context.is_busy("pkg") and not context.is_busy("other")
        with (
            pytest.raises(UsageError, match="cannot remove pkg: another Captioneer"),
            context.package_lock("pkg", "remove"),
        ):
            pass
    assert not context.is_busy("pkg") and not (context.root / LOCK_DIR / "pkg.lock").exists()
    context.require_space(1000, "to test")
    with pytest.raises(
        DiskSpaceError, match="not enough free disk space to test: needs 1.0 KB \\(1001 bytes\\)"
    ):
        context.require_space(1001, "to test")
    (context.root / "pkg").mkdir()
    (context.root / "pkg" / "old").write_text("old")
    tmp = context.new_tmp_dir("pkg")
    (tmp / "new").write_text("new")
    assert context.swap_into_place(tmp, "pkg") == context.root / "pkg"
    assert [p.name for p in (context.root / "pkg").iterdir()] == ["new"]
    assert [p.name for p in context.root.iterdir() if p.name != LOCK_DIR] == ["pkg"]
    reports: list[InstallProgress] = []
    context.tracker("pkg", reports.append).emit("checking", message="asking", force=True)
    assert reports == [InstallProgress("pkg", "checking", message="asking")]


def test_the_catalog_lists_a_package_folder_by_its_marker(app_paths):
    context = context_for(app_paths)
    hand_made_package(context, "mine", b"weights")
    catalog = Catalog(app_paths)
    mine = catalog.get("mine")
    assert (mine.family, mine.name, mine.size_bytes) == ("parakeet_tdt", "hand-made", 7)
    assert catalog.installed_path(mine) == context.root / "mine" / "model.gguf"
    assert catalog.resolve_model("mine") == (context.root / "mine" / "model.gguf", mine)
    assert catalog.installed_path(catalog.get("tiny_gguf")) is None


def test_maintenance_verifies_cleans_up_and_removes_on_its_own(app_paths):
    now = [100 * DAY_S]
    context = context_for(app_paths, clock=lambda: now[0])
    maintenance = Maintenance(context)
    directory = hand_made_package(context, "mine", b"weights")
    assert maintenance.verify("mine").ok
    (directory / "model.gguf").write_bytes(b"WEIGHTS")
    assert maintenance.verify("mine").problems == [
        f"model.gguf: sha256 is {sha256(b'WEIGHTS')}, expected {sha256(b'weights')}"
    ]
    partial = context.root / PARTIAL_DIR / "tiny_gguf"
    partial.mkdir(parents=True)
    (partial / "tiny-q8_0.gguf.part").write_bytes(b"half")
    for path in (partial, partial / "tiny-q8_0.gguf.part"):
        os.utime(path, (99 * DAY_S, 99 * DAY_S))  # written a day before the clock's now
    assert maintenance.partial_bytes("tiny_gguf") == 4
    dead_tmp = context.new_tmp_dir("mine")  # its lock is free: the process that made it has died
    assert maintenance.cleanup() == [dead_tmp]  # a paused download is kept for a week
    now[0] = 107 * DAY_S
    assert maintenance.cleanup() == [partial]
    assert maintenance.remove("mine") == directory
    assert not directory.exists() and "mine" not in [p.id for p in Catalog(app_paths).packages()]
    with pytest.raises(UsageError, match="unknown model package 'mine'"):
        maintenance.remove("mine")


def test_downloads_plan_fetch_and_check_a_package_into_its_partial_folder(app_paths, hub):
    context = context_for(app_paths, hub=hub_client())
    downloads = Downloads(context)
    pkg = context.catalog.get("tiny_st")
    planned = downloads.plan(pkg, None)
    assert [item.target for item in planned] == ["tiny-model/config.json", "tiny-model/model.safetensors"]
    assert downloads.remaining(planned) == len(CONFIG_BYTES) + len(WEIGHTS_BYTES)
    reports: list[InstallProgress] = []
    tracker = context.tracker(pkg.id, reports.append)
    downloads.download_all(pkg, planned, tracker, None)
    downloads.verify_downloads(planned, tracker, None)
    assert [item.partial.read_bytes() for item in planned] == [CONFIG_BYTES, WEIGHTS_BYTES]
    assert [item.sha256 for item in planned] == [sha256(CONFIG_BYTES), sha256(WEIGHTS_BYTES)]
    assert json.loads(planned[1].sidecar.read_text())["sha256"] == sha256(WEIGHTS_BYTES)
    assert downloads.remaining(planned) == 0
    assert {r.phase for r in reports} == {"downloading", "verifying"}
    assert not (context.root / pkg.id).exists()  # installing is the assembler's job


def _planned(context: StoreContext, package_id: str, data: bytes) -> list[PlannedFile]:
    """The one file of a catalog package as if downloaded and verified into its partial folder."""
    pkg = context.catalog.get(package_id)
    spec = pkg.files[0]
    partial = context.root / PARTIAL_DIR / pkg.id / "file.part"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(data)
    remote = RemoteFile(str(pkg.hf_repo), "main", spec.path, "", len(data), None, "c0ffee")
    return [PlannedFile(spec, remote, "tiny-q8_0.gguf", partial, sha256(data), sha256(data))]


def test_the_assembler_installs_verified_files_all_or_nothing(app_paths):
    context = context_for(app_paths)
    assembler = Assembler(context)
    pkg = context.catalog.get("tiny_gguf")
    planned = _planned(context, "tiny_gguf", GGUF_BYTES)
    tracker = context.tracker(pkg.id, None)

    def failing(conversion: ConversionContext) -> None:
        assert (conversion.package_dir / "tiny-q8_0.gguf").read_bytes() == GGUF_BYTES
        raise ModelError("the conversion failed")

    with pytest.raises(ModelError, match="the conversion failed"):
        assembler.assemble(pkg, planned, tracker, None, failing)
    assert planned[0].partial.read_bytes() == GGUF_BYTES  # given back for a retry
    assert sorted(p.name for p in context.root.iterdir()) == [PARTIAL_DIR]
    path = assembler.assemble(pkg, planned, tracker, None, None)
    assert path == context.root / "tiny_gguf" / "tiny-q8_0.gguf" == context.catalog.installed_path(pkg)
    marker = read_marker(context.root / "tiny_gguf")
    assert marker is not None and marker.commit == "c0ffee" and marker.source == "hub"
    assert marker.files == (MarkerFile("tiny-q8_0.gguf", len(GGUF_BYTES), sha256(GGUF_BYTES)),)
    assert not (context.root / PARTIAL_DIR / "tiny_gguf").exists()


def test_the_installer_runs_on_the_parts_it_is_given(app_paths, hub, hub_state):
    context = context_for(app_paths, hub=hub_client())
    maintenance = Maintenance(context)
    installer = Installer(context, Downloads(context), Assembler(context), maintenance)
    path = installer.install("tiny_gguf")
    assert path.read_bytes() == GGUF_BYTES and maintenance.verify("tiny_gguf").ok
    asked = len(hub_state.requests)
    assert installer.install("tiny_gguf") == path and len(hub_state.requests) == asked  # installed: no hub


def importer_for(context: StoreContext) -> tuple[Importer, Maintenance]:
    maintenance = Maintenance(context)
    return Importer(context, Downloads(context), Assembler(context), maintenance), maintenance


def test_the_importer_copies_a_local_folder_into_a_package(app_paths, tmp_path):
    context = context_for(app_paths)
    importer, maintenance = importer_for(context)
    source = tmp_path / "my-model"
    source.mkdir()
    (source / "config.json").write_text(json.dumps({"model_type": "parakeet_tdt"}), encoding="utf-8")
    (source / "model.safetensors").write_bytes(WEIGHTS_BYTES)
    path = importer.import_local(source)
    assert path == context.root / "my-model" and (path / "model.safetensors").read_bytes() == WEIGHTS_BYTES
    assert context.catalog.get("my-model").family == "parakeet_tdt" and maintenance.verify("my-model").ok
    with pytest.raises(UsageError, match="my-model is already installed"):
        importer.import_local(source)


def test_the_importer_hands_a_nemo_to_its_family_which_converts_it_into_a_package(app_paths, tmp_path):
    source = build_nemo(model_dir("tiny_a"), tmp_path / "tiny_a.nemo")
    context = context_for(app_paths)
    importer, maintenance = importer_for(context)
    path = importer.import_local(source, license_text="test licence")
    assert path == context.root / "tiny_a" / "model" and (path / "config.json").is_file()
    marker = read_marker(context.root / "tiny_a")
    assert marker is not None and marker.format == "nemo" and marker.origin == str(source)
    assert json.loads((path / "nemo_import.json").read_text())["license"] == "test licence"
    assert maintenance.verify("tiny_a").ok and (context.root / "tiny_a" / INSTALL_MARKER).is_file()
