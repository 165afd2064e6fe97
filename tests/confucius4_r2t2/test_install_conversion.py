"""The thinker GGUF is built at install time through the model store (local hub server, tiny checkpoints)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from audiocpp_packages import quantized_layout, write_audiocpp_package
from r2t2_fixtures import HF_CHECKPOINT

from inference.families.confucius4_r2t2 import thinker_gguf as tg
from inference.models.catalog import INSTALL_MARKER
from inference.models.errors import DiskSpaceError, InstallCancelled
from inference.models.spec import load_family_spec
from inference.registry import FamilyRegistry
from tests.models.hub_fixtures import app_paths, hub, hub_state, make_store  # noqa: F401  (pytest fixtures)
from tests.models.hub_server import HubState

REPO_ROOT = Path(__file__).resolve().parents[2]
ST_REPO, GGUF_REPO = "test-org/tiny-r2t2", "test-org/tiny-r2t2-gguf"
ST_FILES = sorted(p.name for p in HF_CHECKPOINT.iterdir() if p.is_file())


@pytest.fixture
def r2t2_hub(app_paths, hub_state: HubState, hub, tmp_path: Path):  # noqa: F811
    """A catalog whose confucius4_r2t2 packages are the tiny HF fixture, as safetensors and as a q8_0 package."""
    for name in ST_FILES:
        hub_state.add(ST_REPO, name, (HF_CHECKPOINT / name).read_bytes(), lfs=name.endswith(".safetensors"))
    package = tmp_path / "tiny-r2t2-q8_0.gguf"
    write_audiocpp_package(package, HF_CHECKPOINT, types=quantized_layout("q8_0"))
    hub_state.add(GGUF_REPO, package.name, package.read_bytes(), lfs=True)
    spec = json.loads((REPO_ROOT / "model_specs" / "confucius4_r2t2.json").read_text(encoding="utf-8"))
    size = sum((HF_CHECKPOINT / name).stat().st_size for name in ST_FILES)
    spec["packages"] = [
        {
            "id": "tiny_r2t2_st",
            "name": "Tiny R2T2 (safetensors)",
            "format": "safetensors",
            "quantization": "f32",
            "hf_repo": ST_REPO,
            "revision": "main",
            "files": [{"path": name} for name in ST_FILES],
            "size_bytes": size,
        },
        {
            "id": "tiny_r2t2_q8_0",
            "name": "Tiny R2T2 (GGUF q8_0)",
            "format": "gguf",
            "quantization": "q8_0",
            "hf_repo": GGUF_REPO,
            "revision": "main",
            "files": [{"path": package.name}],
            "size_bytes": package.stat().st_size,
        },
    ]
    specs = Path(os.environ["CAPTIONEER_MODEL_SPECS"])
    (specs / "confucius4_r2t2.json").write_text(json.dumps(spec), encoding="utf-8")
    return app_paths


def test_safetensors_install_builds_the_thinker_gguf_with_progress(r2t2_hub) -> None:
    reports = []
    store = make_store(r2t2_hub, conversions=FamilyRegistry().conversions())
    path = store.install("tiny_r2t2_st", progress=reports.append)
    assert path == r2t2_hub.models / "tiny_r2t2_st"
    converted = path / ".captioneer" / "thinker-f32.gguf"  # native storage of an f32 checkpoint
    assert converted.is_file()
    converting = [r for r in reports if r.phase == "converting" and r.total]
    assert converting[-1].done == converting[-1].total and "thinker" in converting[-1].message
    marker = json.loads((path / INSTALL_MARKER).read_text(encoding="utf-8"))
    assert ".captioneer/thinker-f32.gguf" in {f["path"] for f in marker["files"]}
    # The engine's first load finds the cache up to date (installed files keep their mtimes): no rewrite.
    stamp = converted.stat().st_mtime_ns
    assert tg.ensure_thinker_gguf(tg.ThinkerCheckpoint(path), "native") == converted
    assert converted.stat().st_mtime_ns == stamp
    assert store.verify("tiny_r2t2_st").ok


def test_gguf_package_install_copies_the_thinker(r2t2_hub) -> None:
    path = make_store(r2t2_hub, conversions=FamilyRegistry().conversions()).install("tiny_r2t2_q8_0")
    converted = path.parent / ".captioneer" / "tiny-r2t2-q8_0.thinker-q8_0.gguf"
    assert path.suffix == ".gguf" and converted.is_file()
    stamp = converted.stat().st_mtime_ns
    assert tg.ensure_thinker_gguf(tg.ThinkerCheckpoint(path), "native") == converted
    assert converted.stat().st_mtime_ns == stamp


def test_cancel_during_the_thinker_conversion_installs_nothing(
    r2t2_hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    cancel = threading.Event()
    real = tg.write_thinker_gguf

    def cancel_while_writing(*args, **kwargs):
        cancel.set()  # the first per-tensor progress report sees it
        return real(*args, **kwargs)

    monkeypatch.setattr(tg, "write_thinker_gguf", cancel_while_writing)
    with pytest.raises(InstallCancelled):
        make_store(r2t2_hub, conversions=FamilyRegistry().conversions()).install(
            "tiny_r2t2_st", cancel=cancel
        )
    assert not (r2t2_hub.models / "tiny_r2t2_st").exists()
    assert not list(r2t2_hub.models.glob(".tmp-*"))


def test_the_conversion_counts_in_the_disk_preflight(r2t2_hub) -> None:
    from collections import namedtuple

    from inference.models.store import DISK_RESERVE_BYTES

    pkg = next(p for p in load_family_spec("confucius4_r2t2").packages if p.id == "tiny_r2t2_st")
    assert FamilyRegistry().conversions().extra_space(pkg) == pkg.size_bytes
    usage = namedtuple("Usage", "total used free")
    free = pkg.size_bytes + DISK_RESERVE_BYTES + 1000  # the download fits, the thinker GGUF does not
    with pytest.raises(DiskSpaceError):
        make_store(
            r2t2_hub, conversions=FamilyRegistry().conversions(), disk_usage=lambda _: usage(0, 0, free)
        ).install("tiny_r2t2_st")


def test_verify_tolerates_a_rebuilt_derived_cache_but_not_damaged_downloads(r2t2_hub) -> None:
    """A converter upgrade rewrites .captioneer/ caches: not corruption. A changed download is."""
    store = make_store(r2t2_hub, conversions=FamilyRegistry().conversions())
    path = store.install("tiny_r2t2_st")
    cache = path / ".captioneer" / "thinker-f32.gguf"
    cache.write_bytes(cache.read_bytes() + b"rebuilt by a newer converter")
    assert store.verify("tiny_r2t2_st").ok
    weights = path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    report = store.verify("tiny_r2t2_st")
    assert not report.ok
    assert any(check.path == "model.safetensors" and not check.ok for check in report.files)
