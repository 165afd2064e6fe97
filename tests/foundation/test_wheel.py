"""A wheel (``pip install .`` without ``-e``) carries everything the app looks up: the model catalog, the
Silero VAD, the demo model and the samples. Built from a copy of the checkout, installed into a fresh venv
that borrows the test venv's dependencies (no network, no second llama-cpp-python build), and run from
a directory far from the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SOURCES = ("pyproject.toml", "README.md", "app", "inference", "model_specs", "resources")


@pytest.mark.slow
def test_the_wheel_transcribes_the_bundled_sample_outside_the_checkout(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in SOURCES:
        origin = REPO_ROOT / name
        if origin.is_dir():
            shutil.copytree(
                origin, source / name, ignore=shutil.ignore_patterns("__pycache__", ".captioneer")
            )
        else:
            shutil.copy2(origin, source / name)
    dist = tmp_path / "dist"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next(dist.glob("captioneer-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in (
        "model_specs/parakeet_tdt.json",
        "resources/vad/silero_vad.onnx",
        "resources/demo_model/model.safetensors",
        "resources/samples/demo_sample_1.wav",
    ):
        assert any(n.endswith("data/share/captioneer/" + needed) for n in names), needed
    assert "inference/native/dynamic_quantize_matmul.onnx" in names  # the int8 weight type's product model

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # Dependencies come from the test venv: appended after the new venv's own site-packages.
    Path(site, "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sample = tmp_path / "sample.wav"
    shutil.copy2(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav", sample)
    env = {"CAPTIONEER_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [str(python), "-m", "app.launcher", "transcribe", str(sample)],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "emma quickly closed the early bottle and sang"
    int8 = subprocess.run(
        [
            str(python),
            "-m",
            "app.launcher",
            "transcribe",
            str(sample),
            "--session-option",
            "weight_type=int8",
            "--backend",
            "cpu",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert int8.returncode == 0, int8.stderr[-3000:]
    assert int8.stdout.strip() == done.stdout.strip()
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import inference, inference.paths as p; print(inference.__file__);print(p.data_root())",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    module_file, data_root = where.stdout.split()
    assert module_file.startswith(str(env_dir))  # the installed copy, not the checkout
    assert data_root == str(env_dir / "share" / "captioneer")
