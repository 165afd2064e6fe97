"""``captioneer models import`` of hostile ``.nemo`` files: exit code 2 and one line naming the user's file and the
member, no temporary path; no temporary folder or ``.locks/<id>.lock`` left after a refusal or a success; and what
an importer killed with SIGKILL leaves is cleaned up by the next start (the app's cleanup) or the next import."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from inference.cli import main
from inference.models.store import ModelStore
from inference.paths import AppPaths
from tests.fuzz.nemo_crafts import (
    build_after_first_tensor,
    build_op,
    edit_pickle,
    members,
    odd_member,
    pack,
    tiny_nemo,
)

REPO = Path(__file__).resolve().parents[2]
KILLED = "killed"
# Blocks inside the conversion (a tensor written, the temporary folder and the lock in place) until killed.
_IMPORTER = """
import sys
from pathlib import Path
from inference.models.store import ModelStore
from inference.paths import AppPaths
from inference.registry import FamilyRegistry

ready = Path(sys.argv[2])

def progress(report):
    if report.phase == "converting" and report.done and not ready.exists():
        ready.write_text("converting")
        sys.stdin.read()

store = ModelStore(AppPaths.from_environment(), conversions=FamilyRegistry().conversions())
store.import_local(Path(sys.argv[1]), package_id=sys.argv[3], progress=progress)
"""


@pytest.fixture(scope="module")
def nemo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_nemo(tmp_path_factory.mktemp("nemo") / "model.nemo")


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def leftovers(models: Path) -> list[str]:
    """Everything in the model folder but installed packages: temporary folders, partials, lock files."""
    if not models.exists():
        return []
    found = [p.name for p in models.iterdir() if p.name.startswith(".") and p.name != ".locks"]
    locks = models / ".locks"
    return found + ([f".locks/{p.name}" for p in locks.iterdir()] if locks.exists() else [])


def _hostile(nemo: Path, tmp_path: Path, case: str) -> Path:
    data = nemo.read_bytes()
    if case == "symlink member":
        entries = members(data)
        entries.insert(1, (odd_member("./notes.txt", tarfile.SYMTYPE, "/etc/passwd"), b""))
        data = pack(entries)
    elif case == "pickle BUILD":
        data = edit_pickle(
            data, lambda pickled: build_after_first_tensor(pickled, build_op("stride", (1 << 40, 1)))
        )
    else:  # "unsafe path"
        entries = members(data)
        entries.insert(1, (tarfile.TarInfo("../../escape.txt"), b"x"))
        data = pack(entries)
    path = tmp_path / "model.nemo"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("symlink member", r"model\.nemo: its member './notes\.txt' is a symbolic link"),
        ("pickle BUILD", r"model\.nemo:model_weights\.ckpt: the checkpoint's pickle rewrites a TensorRef"),
        ("unsafe path", r"model\.nemo: its member '\.\./\.\./escape\.txt' has an unsafe path"),
    ],
)
def test_a_hostile_nemo_exits_2_with_one_line_naming_the_file_and_leaves_nothing(
    app_paths: AppPaths,
    nemo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    message: str,
) -> None:
    code, text = run("models", "import", str(_hostile(nemo, tmp_path, case)), "--id", "hostile")
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert code == 2 and text == ""
    assert line.startswith("captioneer: error: ") and re.search(message, line), line
    assert ".tmp-" not in line and ".partial" not in line and "member-" not in line
    assert leftovers(app_paths.models) == []
    assert not (app_paths.models / "hostile").exists()


def test_a_successful_import_leaves_no_lock_file(app_paths: AppPaths, nemo: Path) -> None:
    code, _ = run("models", "import", str(nemo), "--id", "fine", "--license", "test")
    assert code == 0 and (app_paths.models / "fine").is_dir()
    assert leftovers(app_paths.models) == []


def _kill_an_import_midway(app_paths: AppPaths, nemo: Path, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    child = subprocess.Popen(
        [sys.executable, "-c", _IMPORTER, str(nemo), str(ready), KILLED],
        stdin=subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        deadline = time.monotonic() + 300  # generous: a loaded machine; the condition ends the wait
        while not ready.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), f"the importer never reached the conversion (exit {child.poll()})"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
        if child.stdin is not None:
            child.stdin.close()
    assert child.returncode == -signal.SIGKILL
    left = leftovers(app_paths.models)
    assert any(name.startswith(f".tmp-{KILLED}-") for name in left) and f".locks/{KILLED}.lock" in left, left


def test_what_a_sigkilled_import_leaves_is_removed_at_the_next_start(
    app_paths: AppPaths, nemo: Path, tmp_path: Path
) -> None:
    _kill_an_import_midway(app_paths, nemo, tmp_path)
    removed = ModelStore(
        app_paths
    ).cleanup()  # what the app runs at start (ModelsManager.cleanup_in_background)
    assert [p.name for p in removed if p.name.startswith(f".tmp-{KILLED}-")]
    assert leftovers(app_paths.models) == []


def test_what_a_sigkilled_import_leaves_is_removed_by_the_next_import(
    app_paths: AppPaths, nemo: Path, tmp_path: Path
) -> None:
    _kill_an_import_midway(app_paths, nemo, tmp_path)
    code, _ = run("models", "import", str(nemo), "--id", KILLED, "--license", "test")
    assert code == 0 and (app_paths.models / KILLED).is_dir()
    assert leftovers(app_paths.models) == []
