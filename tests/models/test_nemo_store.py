"""``captioneer models import PATH.nemo`` end to end: the store converts a tiny .nemo (tests/parakeet_tdt/nemo_package.py,
built from tiny_a without torch) into a package with its provenance, recognises a catalog entry by its digest,
refuses another build unless --sha256 names it, falls back to an installed stock package's sidecars, and a refused
or failed import leaves nothing installed."""

from __future__ import annotations

import hashlib
import io
import json
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from inference.cli import main
from inference.models.catalog import INSTALL_MARKER
from inference.models.spec import PackageFile, load_family_spec

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "parakeet_tdt"))
from nemo_package import build_nemo  # noqa: E402
from parakeet_fixtures import audio_path, expected, model_dir  # noqa: E402

TINY = model_dir("tiny_a")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def last_line(err: str) -> str:
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def nothing_installed(models: Path, package_id: str) -> bool:
    return not (models / package_id).exists() and not list(models.glob(".tmp-*"))


def write_specs(directory: Path, orukeet_sha256: str | None = None) -> None:
    """The shipped catalogs, with the orukeet_r3 digest replaced by the tiny stand-in's when given."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in (REPO / "model_specs").glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        for pkg in data["packages"]:
            if pkg["id"] == "orukeet_r3" and orukeet_sha256 is not None:
                pkg["files"] = [{**f, "sha256": orukeet_sha256} for f in pkg["files"]]
        (directory / path.name).write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture
def catalog_dir(app_paths, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    specs = tmp_path / "real-specs"
    write_specs(specs)
    monkeypatch.setenv("CAPTIONEER_MODEL_SPECS", str(specs))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: imports never need the hub
    return specs


@pytest.fixture(scope="module")
def nemo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_nemo(TINY, tmp_path_factory.mktemp("nemo") / "tiny_a.nemo")


@pytest.fixture(scope="module")
def bare_nemo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fine-tune published without its tokenizer, as Orukeet r3 relies on the stock v3's."""
    return build_nemo(TINY, tmp_path_factory.mktemp("bare") / "orukeet-r3.nemo", with_tokenizer=False)


def transcript_ids(model: Path) -> list[int]:
    from inference.audio.io import load_audio_file
    from inference.engine import load_engine

    with load_engine(model, backend="cpu", threads=2) as engine:
        decoded = engine.decode(load_audio_file(audio_path("short")))
    return [t.token_id for span in decoded.spans for t in span.tokens]


def test_import_a_nemo_installs_a_package_with_its_provenance(catalog_dir, app_paths, nemo_file, capsys):
    code, text = run("models", "import", str(nemo_file), "--license", "Apache-2.0 (test fixture)")
    err = capsys.readouterr().err
    assert code == 0, err
    model = app_paths.models / "tiny_a" / "model"
    assert text == f"imported as tiny_a: {model}\n"
    assert "verifying tiny_a.nemo" in err and "converting" in err
    marker = json.loads((app_paths.models / "tiny_a" / INSTALL_MARKER).read_text())
    assert marker["source"] == "import" and marker["origin"] == str(nemo_file) and marker["format"] == "nemo"
    assert marker["model_path"] == "model"
    assert not (app_paths.models / "tiny_a" / "stock-sidecars").exists()
    provenance = json.loads((model / "nemo_import.json").read_text())
    assert provenance == {
        "source_file": "tiny_a.nemo",
        "origin": str(nemo_file),
        "sha256": sha256(nemo_file),
        "license": "Apache-2.0 (test fixture)",
        "catalog_package": None,
        "nemo_tensors_written": 83,
        "sidecars": "the .nemo archive",
    }
    assert run("models", "verify", "tiny_a")[0] == 0
    assert transcript_ids(model) == expected("tiny_a")["clips"]["short"]["token_ids"]
    code, _ = run("models", "import", str(nemo_file))
    assert code == 2 and "tiny_a is already installed" in last_line(capsys.readouterr().err)


def test_the_catalog_entry_is_recognised_by_its_digest_and_uses_the_installed_stock_sidecars(
    catalog_dir, app_paths, bare_nemo, tmp_path, capsys
):
    write_specs(catalog_dir, orukeet_sha256=sha256(bare_nemo))
    stock = tmp_path / "stock"  # stands in for the installed stock v3 folder package
    stock.mkdir()
    for name in ("config.json", "tokenizer.json", "processor_config.json", "model.safetensors"):
        (stock / name).write_bytes((TINY / name).read_bytes())
    assert run("models", "import", str(stock), "--id", "parakeet_tdt")[0] == 0
    renamed = tmp_path / "downloaded-under-another-name.nemo"
    renamed.write_bytes(bare_nemo.read_bytes())
    code, text = run("models", "import", str(renamed))
    assert code == 0, capsys.readouterr().err
    assert text.startswith("imported as orukeet_r3: ")
    model = app_paths.models / "orukeet_r3" / "model"
    provenance = json.loads((model / "nemo_import.json").read_text())
    spec = {p.id: p for p in load_family_spec("parakeet_tdt", REPO / "model_specs").packages}
    assert provenance["license"] == spec["orukeet_r3"].license and "CC-BY-SA-4.0" in provenance["license"]
    assert "NVIDIA" in provenance["license"] and provenance["catalog_package"] == "orukeet_r3"
    assert provenance["sidecars"] == "the installed package parakeet_tdt"
    assert (model / "tokenizer.json").read_bytes() == (TINY / "tokenizer.json").read_bytes()
    rows = {row["id"]: row for row in json.loads(run("models", "list", "--json")[1])}
    assert rows["orukeet_r3"]["installed"] is True
    assert transcript_ids(model) == expected("tiny_a")["clips"]["short"]["token_ids"]


def test_another_build_of_a_catalog_entry_is_refused_unless_sha256_names_it(
    catalog_dir, app_paths, bare_nemo, nemo_file, capsys
):
    # The shipped digest is the real Orukeet r3's: the tiny stand-in is "another build".
    code, _ = run("models", "import", str(bare_nemo), "--sidecars", str(TINY))
    line = last_line(capsys.readouterr().err)
    assert code == 2 and re.search(
        r"orukeet-r3\.nemo has sha256 [0-9a-f]{64}, but orukeet_r3 .* is published as 031c8dda", line
    )
    assert f"--sha256 {sha256(bare_nemo)}" in line
    assert nothing_installed(app_paths.models, "orukeet_r3")
    code, _ = run("models", "import", str(nemo_file), "--id", "orukeet_r3")
    assert code == 2 and "published as 031c8dda" in last_line(capsys.readouterr().err)
    code, _ = run("models", "import", str(bare_nemo), "--sidecars", str(TINY), "--sha256", "0" * 64)
    assert code == 2 and "not the 0000" in last_line(capsys.readouterr().err)
    code, text = run(
        "models", "import", str(bare_nemo), "--sidecars", str(TINY), "--sha256", sha256(bare_nemo)
    )
    assert code == 0, capsys.readouterr().err
    assert text.startswith("imported as orukeet_r3: ")


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            "no tokenizer, no stock package",
            r"lacks a complete tokenizer .*`captioneer models install parakeet_tdt`",
        ),
        ("truncated", r"damaged or truncated|truncated inside"),
        ("wrong architecture", r"encoder\.subsampling 'striding' is not supported"),
        ("--link", r"cannot be linked"),
        ("--license for a folder", r"--license applies to \.nemo checkpoints only"),
    ],
)
def test_refused_imports_are_one_clear_line_and_install_nothing(
    catalog_dir, app_paths, bare_nemo, nemo_file, tmp_path, capsys, case, message
):
    args = ["models", "import"]
    if case.startswith("no tokenizer"):
        args += [str(bare_nemo), "--id", "bare", "--sha256", sha256(bare_nemo)]
    elif case == "truncated":
        cut = tmp_path / "cut.nemo"
        cut.write_bytes(nemo_file.read_bytes()[:-4000])
        args.append(str(cut))
    elif case == "wrong architecture":

        def edit(config: dict) -> None:
            config["encoder"]["subsampling"] = "striding"

        args.append(str(build_nemo(TINY, tmp_path / "striding.nemo", config_edit=edit)))
    elif case == "--link":
        args += [str(nemo_file), "--link"]
    else:
        args += [str(TINY), "--license", "MIT"]
    code, text = run(*args)
    line = last_line(capsys.readouterr().err)
    assert code == 2 and text == ""
    assert line.startswith("captioneer: error: ") and re.search(message, line), line
    leftovers = (
        [p.name for p in app_paths.models.glob("*") if p.name != ".locks"]
        if app_paths.models.exists()
        else []
    )
    assert leftovers == []


def test_the_catalog_entry_installs_only_from_a_local_copy(catalog_dir, capsys):
    code, _ = run("models", "install", "orukeet_r3")
    line = last_line(capsys.readouterr().err)
    assert code == 2 and "has no download source" in line and "import it from a local copy" in line


def test_pinned_digest_is_the_published_one() -> None:
    spec = {p.id: p for p in load_family_spec("parakeet_tdt", REPO / "model_specs").packages}
    entry = spec["orukeet_r3"]
    assert entry.format == "nemo" and entry.hf_repo is None
    assert entry.files == (
        PackageFile(
            "orukeet-r3.nemo", sha256="031c8ddab4845aeced904a7cde8e8aa57993b2e344716cf83a545b079c473b56"
        ),
    )
    assert replace(entry, files=()).license.startswith("CC-BY-SA-4.0")
