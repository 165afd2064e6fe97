"""Import of local models, remove, verify and cleanup of leftovers."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from inference.errors import ModelError, UsageError
from inference.models.catalog import INSTALL_MARKER, Catalog
from inference.models.errors import CorruptPackageError
from inference.models.store import PARTIAL_DIR, ModelStore
from inference.registry import FamilyRegistry
from tests.models.hub_fixtures import GGUF_BYTES, make_store


def _hf_folder(root: Path) -> Path:
    folder = root / "my-parakeet"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "parakeet_tdt"}), encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"\x01" * 5000)
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: main")
    return folder


def _gguf_file(root: Path) -> Path:
    import gguf

    path = root / "custom-r2t2.gguf"
    writer = gguf.GGUFWriter(str(path), "audiocpp")
    writer.add_string("audiocpp.model_spec.family", "confucius4_r2t2")
    writer.add_tensor("w", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_import_folder_copies_validates_and_lists(app_paths, tmp_path):
    source = _hf_folder(tmp_path / "src")
    store = ModelStore(app_paths, conversions=FamilyRegistry().conversions())
    path = store.import_local(source)
    assert path == app_paths.models / "my-parakeet"
    assert (path / "model.safetensors").read_bytes() == b"\x01" * 5000
    assert not (path / ".git").exists()
    marker = json.loads((path / INSTALL_MARKER).read_text())
    assert marker["family"] == "parakeet_tdt" and marker["source"] == "import"
    assert {f["path"] for f in marker["files"]} == {"config.json", "model.safetensors"}
    assert all(len(f["sha256"]) == 64 for f in marker["files"])
    # An imported package is a package like any other: listed, resolvable by id, verifiable.
    catalog = Catalog(app_paths)
    assert "my-parakeet" in [p.id for p in catalog.packages()]
    assert catalog.resolve_model("my-parakeet")[0] == path
    assert store.verify("my-parakeet").ok


def test_import_gguf_file_under_a_chosen_id(app_paths, tmp_path):
    source = _gguf_file(tmp_path)
    path = ModelStore(app_paths, conversions=FamilyRegistry().conversions()).import_local(
        source, package_id="mine"
    )
    assert path == app_paths.models / "mine" / "custom-r2t2.gguf"
    assert path.read_bytes() == source.read_bytes()
    pkg = next(p for p in Catalog(app_paths).packages() if p.id == "mine")
    assert pkg.family == "confucius4_r2t2" and pkg.format == "gguf"


def test_import_by_link_keeps_the_source_when_removed(app_paths, tmp_path):
    source = _hf_folder(tmp_path / "src")
    store = ModelStore(app_paths, conversions=FamilyRegistry().conversions())
    path = store.import_local(source, package_id="linked", link=True)
    assert path.is_symlink() and (path / "config.json").is_file()
    report = store.verify("linked")
    assert report.ok and any("size only" in f.problem for f in report.files)
    store.remove("linked")
    assert not (app_paths.models / "linked").exists()
    assert (source / "model.safetensors").is_file()


def test_import_rejects_what_no_family_loads(app_paths, tmp_path):
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("hello")
    with pytest.raises(ModelError, match="neither config.json nor a .gguf"):
        ModelStore(app_paths, conversions=FamilyRegistry().conversions()).import_local(junk)
    with pytest.raises(UsageError, match="nothing to import"):
        ModelStore(app_paths, conversions=FamilyRegistry().conversions()).import_local(tmp_path / "absent")
    assert not [p for p in app_paths.models.glob(".tmp-*")]


def test_import_under_a_catalog_id_of_another_family_is_refused(app_paths, tmp_path):
    source = _gguf_file(tmp_path)  # a confucius4_r2t2 model
    with pytest.raises(UsageError, match="is a parakeet_tdt package"):
        ModelStore(app_paths, conversions=FamilyRegistry().conversions()).import_local(
            source, package_id="tiny_gguf"
        )


def test_import_twice_under_one_id_is_refused(app_paths, tmp_path):
    source = _hf_folder(tmp_path / "src")
    store = ModelStore(app_paths, conversions=FamilyRegistry().conversions())
    store.import_local(source)
    with pytest.raises(UsageError, match="already installed"):
        store.import_local(source)


def test_remove_installed_package_and_its_partials(app_paths, hub):
    store = make_store(app_paths)
    store.install("tiny_gguf")
    (app_paths.models / PARTIAL_DIR / "tiny_gguf").mkdir(parents=True, exist_ok=True)
    (app_paths.models / PARTIAL_DIR / "tiny_gguf" / "x.part").write_bytes(b"123")
    removed = store.remove("tiny_gguf")
    assert removed == app_paths.models / "tiny_gguf"
    assert not removed.exists()
    assert not (app_paths.models / PARTIAL_DIR / "tiny_gguf").exists()
    assert store.catalog.installed_path(store.catalog.get("tiny_gguf")) is None
    with pytest.raises(UsageError, match="not installed"):
        store.remove("tiny_gguf")
    with pytest.raises(UsageError, match="bundled"):
        store.remove("demo_bundled")
    with pytest.raises(UsageError, match="not a package id"):
        store.remove("../etc")


def test_verify_detects_tampering(app_paths, hub):
    store = make_store(app_paths)
    path = store.install("tiny_gguf")
    assert store.verify("tiny_gguf").ok
    data = bytearray(path.read_bytes())
    data[1000] ^= 0x01
    path.write_bytes(bytes(data))
    report = store.verify("tiny_gguf")
    assert not report.ok
    assert "sha256 is" in report.problems[0]
    path.write_bytes(GGUF_BYTES[:100])
    assert "size is 100 bytes" in store.verify("tiny_gguf").problems[0]
    path.unlink()
    assert any("missing" in p for p in store.verify("tiny_gguf").problems)
    assert issubclass(CorruptPackageError, ModelError)
    with pytest.raises(UsageError, match="not installed"):
        store.verify("tiny_st")


def test_cleanup_removes_dead_temporary_folders_and_only_old_partial_downloads(app_paths):
    store = ModelStore(app_paths, conversions=FamilyRegistry().conversions())
    models = app_paths.models
    old_tmp, fresh_tmp = models / ".tmp-a-1234", models / ".tmp-b-5678"
    paused, abandoned, resuming = (
        models / PARTIAL_DIR / name for name in ("paused", "abandoned", "resuming")
    )
    for directory in (old_tmp, fresh_tmp, paused, abandoned, resuming):
        directory.mkdir(parents=True)
        (directory / "f.part").write_bytes(b"x")

    def age(directory: Path, days: float) -> None:
        stamp = time.time() - days * 24 * 3600
        for path in (directory, directory / "f.part"):
            os.utime(path, (stamp, stamp))

    age(old_tmp, 2)
    age(paused, 2)  # a paused download survives a couple of days
    age(abandoned, 8)
    age(resuming, 8)
    removed = store.cleanup(keep="resuming")
    assert set(removed) == {old_tmp, fresh_tmp, abandoned}  # no process holds a/b's lock: their writers died
    assert paused.exists() and resuming.exists()
    assert set(store.cleanup(everything=True)) == {paused, resuming}


def test_a_directory_without_marker_is_not_installed(app_paths):
    half = app_paths.models / "tiny_gguf"
    half.mkdir(parents=True)
    (half / "tiny-q8_0.gguf").write_bytes(b"partial")
    catalog = Catalog(app_paths)
    assert catalog.installed_path(catalog.get("tiny_gguf")) is None


def _hold_lock_in_another_process(lock_path: Path):  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, filelock; lock = filelock.FileLock(sys.argv[1]); lock.acquire(); "
            "print('held', flush=True); sys.stdin.read()",
            str(lock_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_package_busy_in_another_process_is_left_alone(app_paths, hub):
    store = make_store(app_paths)
    app_paths.models.mkdir(parents=True, exist_ok=True)
    partial = app_paths.models / PARTIAL_DIR / "tiny_gguf"
    partial.mkdir(parents=True)
    (partial / "tiny-q8_0.gguf.part").write_bytes(b"half")
    stale_tmp = app_paths.models / ".tmp-tiny_gguf-0123abcd"
    stale_tmp.mkdir()
    assert not store.is_busy("tiny_gguf")
    holder = _hold_lock_in_another_process(store.context.lock_for("tiny_gguf").lock_file)
    try:
        assert store.is_busy("tiny_gguf") and not store.is_busy("tiny_st")
        with pytest.raises(
            UsageError, match="cannot install tiny_gguf: another Captioneer process"
        ) as caught:
            store.install("tiny_gguf")
        assert "try again" in caught.value.fix
        with pytest.raises(UsageError, match="cannot remove tiny_gguf"):
            store.remove("tiny_gguf")
        assert store.cleanup(everything=True) == []  # the other process's partial and tmp dir survive
        assert partial.exists() and stale_tmp.exists()
        store.install("tiny_st")  # other packages are not blocked
    finally:
        holder.communicate("")
    assert store.install("tiny_gguf").read_bytes() == GGUF_BYTES
    assert (
        not stale_tmp.exists()
    )  # no longer busy: the install (holding the lock) took its dead predecessor's
