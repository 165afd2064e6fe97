"""Phonon-2 end to end: the store installs ``phonon2_source`` from the local stand-in hub (archive from the
Phonon-2 repository, sidecars from nvidia's at the pinned revision) and ``captioneer models import`` converts
an archive or an unpacked folder; damaged input is refused with one clear line and nothing is installed.
The synthetic container is tiny_a's weights in every record kind (tests/parakeet_tdt builders)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
from collections import namedtuple
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip(
    "zstandard", reason="the Phonon-2 archive needs the optional zstandard package (captioneer[phonon])"
)

from safetensors.numpy import load_file  # noqa: E402

from inference.cli import main  # noqa: E402
from inference.errors import ModelError  # noqa: E402
from inference.models.catalog import INSTALL_MARKER, Catalog  # noqa: E402
from inference.models.errors import ChecksumMismatchError  # noqa: E402
from inference.models.spec import PackageFile, parse_family_spec  # noqa: E402
from inference.models.store import PARTIAL_DIR, ModelStore  # noqa: E402
from inference.registry import FamilyRegistry  # noqa: E402
from tests.models.hub_fixtures import FAST_RETRY  # noqa: E402
from tests.models.phonon_fixtures import (  # noqa: E402
    ARCHIVE,
    NVIDIA_REPO,
    NVIDIA_REVISION,
    PHONON_REPO,
    PHONON_REVISION,
    SIDECARS,
    PhononSource,
    build_source,
    dense_reference,
    real_parakeet_spec,
    serve,
    sha256,
    transcript_of,
    write_real_specs,
)

Usage = namedtuple("Usage", "total used free")
SIDECAR_DIR = "nvidia-parakeet-tdt-0.6b-v3"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> PhononSource:
    return build_source(tmp_path_factory.mktemp("phonon"))


@pytest.fixture(scope="module")
def reference(source: PhononSource, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What the dense tiny checkpoint the container was made from transcribes."""
    return transcript_of(dense_reference(tmp_path_factory.mktemp("dense") / "model", source.exact))


def store_for(app_paths, archive_sha256: str | None = None) -> ModelStore:  # type: ignore[no-untyped-def]
    from inference.models.hub import HubClient

    catalog = Catalog(app_paths, {"parakeet_tdt": real_parakeet_spec(archive_sha256)})
    client = HubClient(
        endpoint=os.environ.get("HF_ENDPOINT"), retry=FAST_RETRY, chunk_size=32 * 1024, read_timeout_s=5
    )
    return ModelStore(
        app_paths,
        catalog,
        hub=client,
        conversions=FamilyRegistry().conversions(),
        disk_usage=lambda _path: Usage(10**13, 0, 10**13),
    )


def asked(hub_state, path: str) -> bool:  # type: ignore[no-untyped-def]
    """The store asked the hub for ``path`` (a HEAD for LFS files, whose bytes then come from the CDN URL)."""
    return any(r.path == path for r in hub_state.requests)


def nothing_installed(models: Path, package_id: str) -> bool:
    return not (models / package_id).exists() and not list(models.glob(".tmp-*"))


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def last_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert "Traceback" not in err
    return lines[-1]


# ------------------------------------------------------------------------------------------ hub install


def test_install_from_the_hub_converts_and_transcribes_like_the_dense_model(
    app_paths, hub, hub_state, source, reference
):
    serve(hub_state, source)
    reports = []
    store = store_for(app_paths, source.archive_sha256)
    path = store.install("phonon2_source", progress=reports.append)
    package = app_paths.models / "phonon2_source"
    assert path == package / "phonon-2"
    # The archive from the Phonon-2 repository, the sidecars from nvidia's at the pinned revision.
    assert asked(hub_state, f"/{PHONON_REPO}/resolve/{PHONON_REVISION}/{ARCHIVE}")
    for name in SIDECARS:
        assert asked(hub_state, f"/{NVIDIA_REPO}/resolve/{NVIDIA_REVISION}/{name}")
        assert (package / SIDECAR_DIR / name).read_bytes() == (source.sidecars / name).read_bytes()
    marker = json.loads((package / INSTALL_MARKER).read_text())
    assert marker["model_path"] == "phonon-2" and marker["hf_repo"] == PHONON_REPO
    assert {(s["path"], s["hf_repo"], s["revision"]) for s in marker["other_sources"]} == {
        (f"{SIDECAR_DIR}/{name}", NVIDIA_REPO, NVIDIA_REVISION) for name in SIDECARS
    }
    assert {"phonon-2/model.safetensors", "phonon-2/config.json", ARCHIVE} <= {
        f["path"] for f in marker["files"]
    }
    converting = [r for r in reports if r.phase == "converting" and r.total]
    assert converting and converting[-1].done == converting[-1].total == len(source.exact)
    assert store.verify("phonon2_source").ok
    assert not (app_paths.models / PARTIAL_DIR / "phonon2_source").exists()
    # Installed → loadable by id, and it decodes exactly like the dense checkpoint it was packed from.
    resolved, _pkg = store.catalog.resolve_model("phonon2_source")
    assert resolved == path
    assert transcript_of(path) == reference


def test_unpinned_catalog_entry_refuses_an_archive_other_than_the_published_one(
    app_paths, hub, hub_state, source
):
    serve(hub_state, source)
    store = store_for(app_paths)  # the shipped entry: the published digest fragments are checked
    with pytest.raises(ModelError, match=r"sha256 [0-9a-f]{64}, expected 98125795…5309e"):
        store.install("phonon2_source")
    assert nothing_installed(app_paths.models, "phonon2_source")
    # The verified downloads stay for a retry; nothing of the conversion does.
    assert store.partial_bytes("phonon2_source") > source.archive.stat().st_size


def test_a_corrupt_download_is_refused_before_conversion(app_paths, hub, hub_state, source):
    serve(hub_state, source)
    hub_state.corrupt.add(ARCHIVE)
    with pytest.raises(ChecksumMismatchError, match=f"{ARCHIVE} is corrupt"):
        store_for(app_paths, source.archive_sha256).install("phonon2_source")
    assert nothing_installed(app_paths.models, "phonon2_source")


def test_a_truncated_archive_is_refused_and_nothing_is_installed(app_paths, hub, hub_state, source):
    truncated = source.archive.read_bytes()[:-200]
    serve(hub_state, source, truncated)
    store = store_for(app_paths, sha256(truncated))  # the catalog pins what the hub serves
    with pytest.raises(ModelError, match="damaged or truncated"):
        store.install("phonon2_source")
    assert nothing_installed(app_paths.models, "phonon2_source")


def test_missing_zstandard_is_named_before_anything_is_downloaded(
    app_paths, hub, hub_state, source, monkeypatch
):
    serve(hub_state, source)
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import zstandard now raises ImportError
    with pytest.raises(ModelError, match=r"pip install captioneer\[phonon\]"):
        store_for(app_paths, source.archive_sha256).install("phonon2_source")
    assert not hub_state.requests and nothing_installed(app_paths.models, "phonon2_source")


# ------------------------------------------------------------------------------------------ models import


@pytest.fixture
def real_catalog(app_paths, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """The CLI reads the shipped catalog (its phonon2_source entry says where the sidecars come from)."""
    specs = tmp_path / "real-specs"
    write_real_specs(specs)
    monkeypatch.setenv("CAPTIONEER_MODEL_SPECS", str(specs))
    return app_paths


def test_import_an_archive_downloads_the_sidecars_and_converts(
    real_catalog, hub, hub_state, source, reference, capsys
):
    serve(hub_state, source)
    code, text = run("models", "import", str(source.archive), "--sha256", source.archive_sha256.upper())
    err = capsys.readouterr().err
    assert code == 0, err
    model = real_catalog.models / "phonon2_source" / "phonon-2"
    assert text == f"imported as phonon2_source: {model}\n"
    assert "verifying phonon-2.bps.tar.zst" in err and "converting: 100%" in err  # progress on stderr
    assert not [
        r for r in hub_state.requests if r.path.endswith(ARCHIVE)
    ]  # only the sidecars came from the hub
    assert all(asked(hub_state, f"/{NVIDIA_REPO}/resolve/{NVIDIA_REVISION}/{name}") for name in SIDECARS)
    marker = json.loads((real_catalog.models / "phonon2_source" / INSTALL_MARKER).read_text())
    assert (
        marker["source"] == "import" and marker["origin"] == str(source.archive) and marker["hf_repo"] is None
    )
    rows = {row["id"]: row for row in json.loads(run("models", "list", "--json")[1])}
    assert rows["phonon2_source"]["installed"] is True
    assert run("models", "verify", "phonon2_source")[0] == 0
    assert transcript_of(model) == reference
    # A second import under the same id is refused.
    code, _ = run("models", "import", str(source.archive), "--sha256", source.archive_sha256)
    assert code == 2 and "phonon2_source is already installed" in last_line(capsys.readouterr().err)


def test_import_a_folder_offline_with_local_sidecars(real_catalog, source, monkeypatch, capsys):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: the hub must not be needed
    code, text = run(
        "models",
        "import",
        str(source.folder),
        "--id",
        "my_phonon",
        "--sidecars",
        str(source.sidecars),
        "--sha256",
        source.container_sha256,
    )
    assert code == 0, capsys.readouterr().err
    model = real_catalog.models / "my_phonon" / "phonon-2"
    assert text == f"imported as my_phonon: {model}\n"
    converted = load_file(str(model / "model.safetensors"))
    assert converted.keys() == source.exact.keys()
    assert all((converted[k] == source.exact[k]).all() for k in source.exact)
    config = json.loads((model / "config.json").read_text())
    assert config["audiocpp_word_timestamp_mode"] == "token_duration"
    rows = {row["id"]: row for row in json.loads(run("models", "list", "--json")[1])}
    assert rows["my_phonon"]["installed"] and rows["my_phonon"]["family"] == "parakeet_tdt"
    assert not rows["phonon2_source"]["installed"]


def hostile_archive(source: PhononSource, archive: Path, what: str) -> Path:
    """The source's two files as a zstd tar with a symbolic link beside them, or the container at ``../``."""
    import tarfile

    import zstandard

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        prefix = "../" if what == "unsafe path" else "phonon-2/"
        tar.add(source.folder / "model.fermion", arcname=prefix + "model.fermion")
        tar.add(source.folder / "config.json", arcname="phonon-2/config.json")
        if what == "symlink member":
            link = tarfile.TarInfo("phonon-2/evil")
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(link)
    archive.write_bytes(zstandard.ZstdCompressor().compress(buffer.getvalue()))
    return archive


def damaged_folder(source: PhononSource, tmp_path: Path, what: str) -> Path:
    folder = tmp_path / "damaged"
    shutil.copytree(source.folder, folder)
    container = folder / "model.fermion"
    if what == "truncated container":
        container.write_bytes(container.read_bytes()[:-7])
    elif what == "no config.json":
        (folder / "config.json").unlink()
    return folder


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            "archive: published digest",
            r"has sha256 [0-9a-f]{64}, expected 98125795…5309e .*pass --sha256 [0-9a-f]{64}",
        ),
        ("archive: wrong --sha256", r"has sha256 [0-9a-f]{64}, expected 0{64}"),
        ("archive: truncated", "is damaged or truncated"),
        ("archive: symlink member", r"its member 'phonon-2/evil' is a symbolic link, not a regular file"),
        ("archive: unsafe path", r"its member '\.\./model\.fermion' has an unsafe path"),
        ("folder: published digest", r"model.fermion has sha256 [0-9a-f]{64}, expected 4b6bfa3a…11468"),
        ("folder: truncated container", "is truncated: its records need"),
        ("folder: no config.json", "config.json is unreadable"),
        ("archive: --link", "cannot be linked"),
        ("archive: bad --sha256", "--sha256 must be 64 hexadecimal digits"),
        ("archive: no zstandard", r"pip install captioneer\[phonon\]"),
    ],
)
def test_damaged_or_unusable_input_is_one_clear_line_and_installs_nothing(
    real_catalog, source, tmp_path, monkeypatch, capsys, case, message
):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    kind, _, what = case.partition(": ")
    args = ["models", "import", "--sidecars", str(source.sidecars)]
    if kind == "archive":
        archive = source.archive
        digest = source.archive_sha256
        if what == "truncated":
            archive = tmp_path / ARCHIVE
            archive.write_bytes(source.archive.read_bytes()[:-200])
            digest = sha256(archive.read_bytes())
        elif what in ("symlink member", "unsafe path"):
            archive = hostile_archive(source, tmp_path / ARCHIVE, what)
            digest = sha256(archive.read_bytes())
        args.append(str(archive))
        extra = {
            "published digest": [],
            "wrong --sha256": ["--sha256", "0" * 64],
            "--link": ["--link"],
            "bad --sha256": ["--sha256", "xyz"],
        }.get(what, ["--sha256", digest])
        args += extra
        if what == "no zstandard":
            monkeypatch.setitem(sys.modules, "zstandard", None)
    else:
        folder = damaged_folder(source, tmp_path, what)
        args.append(str(folder))
        if what != "published digest":
            args += ["--sha256", sha256((folder / "model.fermion").read_bytes())]
    code, text = run(*args)
    line = last_line(capsys.readouterr().err)
    assert code == 2 and text == ""
    assert line.startswith("captioneer: error: ") and re.search(message, line), line
    assert nothing_installed(real_catalog.models, "phonon2_source")
    assert not [p for p in source.folder.parent.iterdir() if ".partial" in p.name]


def test_phonon_only_options_are_refused_for_other_models(real_catalog, tmp_path, capsys):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "parakeet_tdt"}))
    code, _ = run("models", "import", str(folder), "--sha256", "0" * 64)
    assert code == 2 and "--sha256 applies to .nemo checkpoints and Phonon-2 sources only" in last_line(
        capsys.readouterr().err
    )


# ------------------------------------------------------------------------------------------ catalog schema


def _spec_with_files(files: list[dict]) -> dict:
    return {
        "schema_version": 1,
        "family": "parakeet_tdt",
        "name": "t",
        "session_options": {},
        "request_options": {},
        "packages": [
            {"id": "p", "format": "safetensors", "hf_repo": "org/own", "revision": "r1", "files": files}
        ],
    }


def test_a_file_of_another_repository_needs_a_pinned_revision() -> None:
    with pytest.raises(ModelError, match="needs a pinned revision"):
        parse_family_spec(_spec_with_files([{"path": "a.json", "hf_repo": "org/other"}]))
    with pytest.raises(ModelError, match="without a path"):
        parse_family_spec(_spec_with_files([{"sha256": "0" * 64}]))
    spec = parse_family_spec(
        _spec_with_files(
            [
                {"path": "m.bin", "sha256": "AB" * 32},
                {"path": "a.json", "hf_repo": "org/other", "revision": "r2", "target_dir": "side"},
                {"path": "b.json", "revision": "r3"},
            ]
        )
    )
    own, other, pinned = spec.packages[0].files
    pkg = spec.packages[0]
    assert own.sha256 == "ab" * 32
    assert [pkg.source_of(f) for f in (own, other, pinned)] == [
        ("org/own", "r1"),
        ("org/other", "r2"),
        ("org/own", "r3"),
    ]
    assert [pkg.is_foreign(f) for f in (own, other, pinned)] == [False, True, False]


def test_two_files_at_one_place_are_refused(app_paths, hub, hub_state) -> None:
    hub_state.add("test-org/tiny-st", "side/config.json", b"{}")
    hub_state.add("test-org/other", "config.json", b"{}")
    spec = real_parakeet_spec()
    files = (
        PackageFile("side/config.json"),
        PackageFile("config.json", hf_repo="test-org/other", revision="main", target_dir="side"),
    )
    stock = next(p for p in spec.packages if p.id == "parakeet_tdt")
    clash = replace(stock, id="clash", hf_repo="test-org/tiny-st", target_dir=None, files=files)
    store = store_for(app_paths)
    store.context.catalog = Catalog(app_paths, {"parakeet_tdt": replace(spec, packages=(clash,))})
    with pytest.raises(ModelError, match="puts two files at side/config.json"):
        store.install("clash")
    assert nothing_installed(app_paths.models, "clash")
