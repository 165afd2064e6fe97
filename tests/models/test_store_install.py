"""Installing catalog packages from a local hub server: full download, resume, retries, layout."""

from __future__ import annotations

import hashlib
import json
import threading

import pytest

from inference.models.catalog import INSTALL_MARKER, Catalog
from inference.models.errors import NetworkError
from inference.models.progress import InstallProgress
from inference.models.store import LOCK_DIR, PARTIAL_DIR
from tests.models.hub_fixtures import CONFIG_BYTES, GGUF_BYTES, WEIGHTS_BYTES, make_store


def test_full_download_installs_atomically_with_marker(app_paths, hub):
    reports: list[InstallProgress] = []
    store = make_store(app_paths)
    path = store.install("tiny_gguf", progress=reports.append)

    # strip_prefix removed the repository folder; the model path is the GGUF file itself.
    assert path == app_paths.models / "tiny_gguf" / "tiny-q8_0.gguf"
    assert path.read_bytes() == GGUF_BYTES
    marker = json.loads((app_paths.models / "tiny_gguf" / INSTALL_MARKER).read_text())
    assert marker["model_path"] == "tiny-q8_0.gguf"
    assert marker["commit"] == "0123456789abcdef0123456789abcdef01234567"
    assert marker["files"] == [
        {"path": "tiny-q8_0.gguf", "size": len(GGUF_BYTES), "sha256": hashlib.sha256(GGUF_BYTES).hexdigest()}
    ]
    assert Catalog(app_paths).installed_path(store.catalog.get("tiny_gguf")) == path
    # Nothing left behind: no temporary directory, no partials (the lock directory holds empty lock files).
    assert sorted(p.name for p in app_paths.models.iterdir()) == [LOCK_DIR, PARTIAL_DIR, "tiny_gguf"]
    assert not any((app_paths.models / PARTIAL_DIR).iterdir())

    phases = [r.phase for r in reports]
    assert phases[0] == "checking" and phases[-1] == "done"
    downloads = [r for r in reports if r.phase == "downloading"]
    assert downloads[-1].done == downloads[-1].total == len(GGUF_BYTES)
    assert all(a.done <= b.done for a, b in zip(downloads, downloads[1:], strict=False))
    assert "verifying" in phases


def test_lfs_redirect_is_followed_and_token_not_required(app_paths, hub, hub_state):
    make_store(app_paths).install("tiny_gguf")
    gets = hub_state.gets("tiny-q8_0.gguf")
    assert gets and all(r.path.startswith("/cdn/") for r in gets)  # bytes came from the "CDN" origin


def test_target_dir_layout_and_pinned_revision(app_paths, hub, hub_state):
    path = make_store(app_paths).install("tiny_st")
    assert path == app_paths.models / "tiny_st" / "tiny-model"
    assert (path / "config.json").read_bytes() == CONFIG_BYTES
    assert (path / "model.safetensors").read_bytes() == WEIGHTS_BYTES
    heads = [r.path for r in hub_state.requests if r.method == "HEAD"]
    assert all("/resolve/0123456789abcdef0123456789abcdef01234567/" in p for p in heads)


def test_resume_after_dropped_connection(app_paths, hub, hub_state):
    hub_state.drop_after["Sub-GGUF/tiny-q8_0.gguf"] = 250_000
    path = make_store(app_paths).install("tiny_gguf")
    assert path.read_bytes() == GGUF_BYTES
    gets = hub_state.gets("tiny-q8_0.gguf")
    assert len(gets) == 2
    assert gets[0].range is None
    resumed_from = int(gets[1].range.removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_from <= 250_000


def test_resume_across_runs_uses_the_partial_file(app_paths, hub, hub_state):
    cancel = threading.Event()
    hub_state.bytes_per_second = 2_000_000

    def stop_midway(report: InstallProgress) -> None:
        if report.phase == "downloading" and report.done > 100_000:
            cancel.set()

    store = make_store(app_paths)
    with pytest.raises(Exception) as info:
        store.install("tiny_gguf", progress=stop_midway, cancel=cancel)
    assert type(info.value).__name__ == "InstallCancelled"
    kept = store.partial_bytes("tiny_gguf")
    assert 100_000 <= kept < len(GGUF_BYTES)
    assert store.catalog.installed_path(store.catalog.get("tiny_gguf")) is None

    hub_state.bytes_per_second = None
    path = make_store(app_paths).install("tiny_gguf")
    assert path.read_bytes() == GGUF_BYTES
    assert hub_state.gets("tiny-q8_0.gguf")[-1].range == f"bytes={kept}-"


def test_server_errors_are_retried(app_paths, hub, hub_state):
    hub_state.fail_status["config.json"] = [503, 500]
    path = make_store(app_paths).install("tiny_st")
    assert (path / "config.json").read_bytes() == CONFIG_BYTES


def test_persistent_server_errors_give_up_with_plain_words(app_paths, hub, hub_state):
    hub_state.fail_status["config.json"] = [503] * 10
    with pytest.raises(NetworkError) as info:
        make_store(app_paths).install("tiny_st")
    assert "config.json" in info.value.message and "internet connection" in info.value.fix


def test_no_network_is_explained(app_paths):
    store = make_store(app_paths, endpoint="http://127.0.0.1:9")  # discard port: nothing listens
    with pytest.raises(NetworkError) as info:
        store.install("tiny_gguf")
    assert "cannot connect" in str(info.value)
    assert info.value.exit_code == 1


def test_installing_twice_is_a_no_op_and_force_reinstalls(app_paths, hub, hub_state):
    store = make_store(app_paths)
    first = store.install("tiny_gguf")
    count = len(hub_state.requests)
    assert store.install("tiny_gguf") == first
    assert len(hub_state.requests) == count
    assert store.install("tiny_gguf", force=True) == first
    assert len(hub_state.requests) > count
    assert first.read_bytes() == GGUF_BYTES


def _interrupted_partial(app_paths, hub_state) -> int:
    hub_state.drop_after["Sub-GGUF/tiny-q8_0.gguf"] = 200_000
    hub_state.fail_status["Sub-GGUF/tiny-q8_0.gguf"] = []
    cancel = threading.Event()

    def stop(report: InstallProgress) -> None:
        if report.phase == "downloading" and report.done >= 190_000:
            cancel.set()

    store = make_store(app_paths)
    with pytest.raises(Exception, match="cancelled"):
        store.install("tiny_gguf", progress=stop, cancel=cancel)
    return store.partial_bytes("tiny_gguf")


def test_server_ignoring_range_restarts_the_file(app_paths, hub, hub_state):
    assert _interrupted_partial(app_paths, hub_state) > 0
    hub_state.ignore_range = True
    assert make_store(app_paths).install("tiny_gguf").read_bytes() == GGUF_BYTES
    assert hub_state.gets("tiny-q8_0.gguf")[-1].range is not None  # asked to resume, got the whole file


def test_partial_of_a_changed_remote_file_is_discarded(app_paths, hub, hub_state):
    assert _interrupted_partial(app_paths, hub_state) > 0
    new_bytes = GGUF_BYTES[::-1]
    hub_state.add("test-org/tiny-gguf", "Sub-GGUF/tiny-q8_0.gguf", new_bytes, lfs=True)
    spec_file = next(iter((app_paths.models.parent.parent / "specs").glob("*.json")))
    spec = json.loads(spec_file.read_text())
    spec["packages"][0]["files"][0]["sha256"] = hashlib.sha256(new_bytes).hexdigest()
    spec_file.write_text(json.dumps(spec))
    assert make_store(app_paths).install("tiny_gguf").read_bytes() == new_bytes
    assert hub_state.gets("tiny-q8_0.gguf")[-1].range is None  # started over instead of splicing two files
