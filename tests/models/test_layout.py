"""Which file is the model: one rule (inference.models.layout.locate_model) for every loader."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from inference.errors import ModelError
from inference.models.layout import locate_model
from inference.registry import FamilyRegistry


def _touch(path: Path, data: bytes = b"x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_gguf_file_is_its_own_package(tmp_path: Path) -> None:
    package = _touch(tmp_path / "m.gguf")
    location = locate_model(package)
    assert (location.kind, location.package, location.root, location.weights) == (
        "gguf",
        package,
        tmp_path,
        (package,),
    )


def test_a_folder_with_one_package_is_that_package_even_beside_safetensors(tmp_path: Path) -> None:
    _touch(tmp_path / "config.json", b"{}")
    _touch(tmp_path / "model.safetensors")
    package = _touch(tmp_path / "r2t2-q8_0.gguf")
    _touch(tmp_path / ".captioneer" / "r2t2-q8_0.thinker-q8_0.gguf")  # an engine cache is never the model
    assert locate_model(tmp_path).package == package
    assert locate_model(tmp_path / "config.json").package == package


def test_several_packages_in_a_folder_are_refused(tmp_path: Path) -> None:
    _touch(tmp_path / "a.gguf")
    _touch(tmp_path / "b.gguf")
    with pytest.raises(ModelError, match=r"holds 2 \.gguf packages \(a\.gguf, b\.gguf\)") as err:
        locate_model(tmp_path)
    assert "pass the .gguf file" in err.value.fix
    assert locate_model(tmp_path / "b.gguf").package == tmp_path / "b.gguf"


def test_safetensors_folder_and_files_in_it(tmp_path: Path) -> None:
    weights = _touch(tmp_path / "model.safetensors")
    _touch(tmp_path / "config.json", b"{}")
    for path in (tmp_path, weights, tmp_path / "config.json"):
        location = locate_model(path)
        assert (location.kind, location.root, location.weights, location.package) == (
            "safetensors",
            tmp_path,
            (weights,),
            None,
        )


def test_sharded_index_lists_the_shards(tmp_path: Path) -> None:
    shards = [_touch(tmp_path / f"model-0000{i}-of-00002.safetensors") for i in (1, 2)]
    _touch(tmp_path / "stray.safetensors")  # not in the index: not part of the model
    index = {"weight_map": {"a": shards[1].name, "b": shards[0].name, "c": shards[1].name}}
    _touch(tmp_path / "model.safetensors.index.json", json.dumps(index).encode())
    assert locate_model(tmp_path).weights == tuple(shards)
    shards[1].unlink()
    with pytest.raises(ModelError, match="lists the shard 'model-00002-of-00002.safetensors'"):
        locate_model(tmp_path)
    _touch(tmp_path / "model.safetensors.index.json", b"{not json")
    with pytest.raises(ModelError, match="not a readable shard index"):
        locate_model(tmp_path)


def test_unsafe_shard_name_is_refused(tmp_path: Path) -> None:
    _touch(
        tmp_path / "model.safetensors.index.json",
        json.dumps({"weight_map": {"a": "../x.safetensors"}}).encode(),
    )
    with pytest.raises(ModelError, match="lists the shard"):
        locate_model(tmp_path)


def test_a_folder_without_weights_is_located_but_refuses_to_give_weights(tmp_path: Path) -> None:
    _touch(tmp_path / "config.json", b"{}")
    location = locate_model(tmp_path)
    assert location.weights == ()
    with pytest.raises(ModelError, match="has no model.safetensors or .gguf weights"):
        location.require_weights()


def test_missing_unsupported_and_nemo(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="model not found"):
        locate_model(tmp_path / "nothing")
    with pytest.raises(ModelError, match="unsupported model file notes.txt"):
        locate_model(_touch(tmp_path / "notes.txt"))
    archive = tmp_path / "nemo" / "parakeet.nemo"
    archive.parent.mkdir()
    with tarfile.open(archive, "w") as tar:
        tar.add(tmp_path / "notes.txt", arcname="model_config.yaml")
    for path in (archive, archive.parent):
        with pytest.raises(ModelError, match="NeMo archive") as err:
            locate_model(path)
        assert "model.safetensors" in err.value.fix


def test_family_detection_follows_the_same_rule(tmp_path: Path) -> None:
    _touch(tmp_path / "config.json", json.dumps({"model_type": "parakeet_tdt"}).encode())
    _touch(tmp_path / "model.safetensors")
    assert FamilyRegistry().detect_family(tmp_path) == "parakeet_tdt"
    _touch(tmp_path / "a.gguf")
    _touch(tmp_path / "b.gguf")
    with pytest.raises(ModelError, match="holds 2 .gguf packages"):  # not silently the first one
        FamilyRegistry().detect_family(tmp_path)
