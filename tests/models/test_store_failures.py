"""Failures explained in plain words: checksums, disk space, cancel, hub refusals."""

from __future__ import annotations

import threading
from collections import namedtuple

import pytest

from inference.errors import NotImplementedFamilyError, UsageError
from inference.models.errors import ChecksumMismatchError, DiskSpaceError, HubRefusedError, InstallCancelled
from inference.models.hub import HubClient
from inference.models.store import PARTIAL_DIR
from tests.models.hub_fixtures import GGUF_BYTES, make_store, write_specs

Usage = namedtuple("Usage", "total used free")


def _installed(store, package_id: str) -> bool:
    return store.catalog.installed_path(store.catalog.get(package_id)) is not None


def test_checksum_mismatch_after_download_discards_the_file(app_paths, hub, tmp_path, monkeypatch):
    write_specs(tmp_path / "specs", wrong_sha_for="config")  # config.json is a plain git file: no sha256 ETag
    store = make_store(app_paths)
    with pytest.raises(ChecksumMismatchError) as info:
        store.install("tiny_st")
    assert "config.json is corrupt" in info.value.message and "0" * 64 in info.value.message
    assert "install again" in info.value.fix
    assert not _installed(store, "tiny_st")
    assert not (app_paths.models / "tiny_st").exists()
    assert not (app_paths.models / PARTIAL_DIR / "tiny_st" / "config.json.part").exists()


def test_corruption_in_transit_is_caught_by_the_hub_sha256(app_paths, hub, hub_state):
    hub_state.corrupt.add("model.safetensors")  # the catalog has no hash for it; the hub's ETag does
    with pytest.raises(ChecksumMismatchError) as info:
        make_store(app_paths).install("tiny_st")
    assert "model.safetensors is corrupt" in info.value.message


def test_catalog_hash_differing_from_hub_fails_before_downloading(app_paths, hub, hub_state, tmp_path):
    write_specs(tmp_path / "specs", wrong_sha_for="gguf")
    with pytest.raises(ChecksumMismatchError) as info:
        make_store(app_paths).install("tiny_gguf")
    assert "catalog expects" in info.value.message
    assert hub_state.gets("tiny-q8_0.gguf") == []


def test_disk_full_preflight_names_needed_and_free_bytes(app_paths, hub, hub_state):
    store = make_store(app_paths, disk_usage=lambda path: Usage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(DiskSpaceError) as info:
        store.install("tiny_gguf")
    message = info.value.message
    assert "not enough free disk space" in message and "(1000 bytes) free" in message
    needed = int(message.split("needs ")[1].split("(")[1].split(" bytes")[0])
    assert needed >= len(GGUF_BYTES)
    assert "CAPTIONEER_MODELS_DIR" in info.value.fix
    assert hub_state.gets("tiny-q8_0.gguf") == []  # nothing downloaded


def test_preflight_counts_only_the_missing_bytes(app_paths, hub, hub_state):
    cancel = threading.Event()
    hub_state.drop_after["Sub-GGUF/tiny-q8_0.gguf"] = 300_000
    store = make_store(app_paths)

    def cancel_on_second_get(report):
        if report.phase == "downloading" and report.done >= 290_000:
            cancel.set()

    with pytest.raises(InstallCancelled):
        store.install("tiny_gguf", progress=cancel_on_second_get, cancel=cancel)
    kept = store.partial_bytes("tiny_gguf")
    assert kept > 0
    from inference.models import store as store_module

    free = len(GGUF_BYTES) - kept + store_module.DISK_RESERVE_BYTES + 10
    tight = make_store(app_paths, disk_usage=lambda path: Usage(10**9, 0, free))
    assert tight.install("tiny_gguf").read_bytes() == GGUF_BYTES


def test_disk_filling_up_mid_download_is_reported(app_paths, hub, monkeypatch):
    import errno

    from inference.models import hub as hub_module

    real_open = hub_module.Path.open

    def failing_open(self, mode="r", *args, **kwargs):
        handle = real_open(self, mode, *args, **kwargs)
        if self.suffix == ".part" and "b" in mode and ("a" in mode or "w" in mode):

            class Full:
                def __enter__(self_inner):
                    return self_inner

                def __exit__(self_inner, *exc):
                    handle.close()

                def write(self_inner, data):
                    raise OSError(errno.ENOSPC, "No space left on device")

            return Full()
        return handle

    monkeypatch.setattr(hub_module.Path, "open", failing_open)
    with pytest.raises(DiskSpaceError) as info:
        make_store(app_paths).install("tiny_gguf")
    assert "disk filled up" in info.value.message


def test_cancel_stops_between_chunks_and_nothing_is_installed(app_paths, hub, hub_state):
    hub_state.bytes_per_second = 1_000_000
    cancel = threading.Event()
    seen = []

    def on_progress(report):
        seen.append(report.done)
        if report.phase == "downloading" and report.done > 50_000:
            cancel.set()

    store = make_store(app_paths)
    with pytest.raises(InstallCancelled) as info:
        store.install("tiny_gguf", progress=on_progress, cancel=cancel)
    assert info.value.exit_code == 130
    assert store.partial_bytes("tiny_gguf") < len(GGUF_BYTES)
    assert not _installed(store, "tiny_gguf")
    assert not [p for p in app_paths.models.iterdir() if p.name.startswith(".tmp-")]


def test_missing_repository_is_explained(app_paths, hub):
    with pytest.raises(HubRefusedError) as info:
        make_store(app_paths).install("tiny_missing")
    assert "does not exist or is private" in info.value.message and "404" in info.value.message
    assert "HF_TOKEN" in info.value.fix


def test_missing_file_is_explained(app_paths, hub, hub_state):
    del hub_state.repos["test-org/tiny-st"]["config.json"]
    with pytest.raises(HubRefusedError) as info:
        make_store(app_paths).install("tiny_st")
    assert "config.json is not in test-org/tiny-st" in info.value.message
    assert "out of date" in info.value.fix


def test_unauthorised_then_token_accepted(app_paths, hub, hub_state):
    hub_state.required_token = "hf_secret"
    with pytest.raises(HubRefusedError) as info:
        make_store(app_paths).install("tiny_gguf")
    assert "401" in info.value.message and "HF_TOKEN" in info.value.fix
    assert "hf auth login" in info.value.fix and "setting" not in info.value.fix  # no token setting exists
    path = make_store(app_paths, token="hf_secret").install("tiny_gguf")
    assert path.read_bytes() == GGUF_BYTES
    # The token went to the hub; the CDN origin got it too, as huggingface_hub does for LFS files.
    assert all(r.authorization == "Bearer hf_secret" for r in hub_state.requests[-2:])


def test_the_hub_client_takes_endpoint_and_token_from_the_environment():
    client = HubClient.from_environment({"HF_ENDPOINT": "http://127.0.0.1:9/", "HF_TOKEN": "hf_env"})
    assert (client.endpoint, client.token) == ("http://127.0.0.1:9", "hf_env")
    assert (
        HubClient.from_environment({"HF_TOKEN": ""}).token is None
    )  # huggingface_hub then uses a CLI login's


def test_gated_repository_is_explained(app_paths, hub, hub_state):
    hub_state.required_token = "hf_secret"
    hub_state.gated.add("test-org/tiny-gguf")
    with pytest.raises(HubRefusedError) as info:
        make_store(app_paths, token="hf_wrong").install("tiny_gguf")
    assert "gated" in info.value.message and "accept the model's terms" in info.value.fix


def test_bundled_and_unconvertible_packages_are_refused(app_paths, hub):
    store = make_store(app_paths)
    with pytest.raises(UsageError, match="bundled"):
        store.install("demo_bundled")
    with pytest.raises(NotImplementedFamilyError, match="conversion"):
        store.install("tiny_archive")
    with pytest.raises(UsageError, match="unknown model package"):
        store.install("no_such_package")
