"""The family registry: every family's factory imports, and a broken one names what is missing."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from inference.contract import Capabilities
from inference.engine import import_factory, load_engine
from inference.errors import BackendError, ModelError, UsageError
from inference.registry import BUILTIN_FAMILIES, FamilyRegistry


@pytest.mark.parametrize("family", [f.name for f in BUILTIN_FAMILIES])
def test_every_registered_family_has_a_factory(family: str) -> None:
    assert callable(import_factory(FamilyRegistry().get(family).engine_factory, family))


def test_a_missing_dependency_is_named_not_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "family_with_missing_dep.py").write_text("import threadpoolctl_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BackendError) as info:
        import_factory("family_with_missing_dep:create_engine", "parakeet_tdt")
    assert "parakeet_tdt engine cannot be loaded" in str(info.value)
    assert "'threadpoolctl_not_installed' is missing" in str(info.value)
    assert "not implemented" not in str(info.value)
    sys.modules.pop("family_with_missing_dep", None)


def test_a_factory_that_is_not_callable_is_refused() -> None:
    with pytest.raises(BackendError, match="not an engine factory"):
        import_factory("inference.registry:BUILTIN_FAMILIES", "parakeet_tdt")


def test_unknown_family_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown family 'whisper'"):
        load_engine(tmp_path, family="whisper")


def test_capabilities_round_trip_through_json() -> None:
    caps = Capabilities(streaming=True, snapshots=True, hotwords=True, streams_per_engine=2)
    assert Capabilities.from_json(caps.to_json()) == caps


def test_the_builtin_families_are_listed_in_detection_order() -> None:
    assert FamilyRegistry().names() == ("parakeet_tdt", "confucius4_r2t2", "whisper_ct2")


def test_two_families_of_one_name_are_refused() -> None:
    with pytest.raises(ModelError, match="two model families are called 'whisper_ct2'"):
        FamilyRegistry(BUILTIN_FAMILIES + BUILTIN_FAMILIES[-1:])


def test_a_family_path_entry_that_is_no_family_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "not_a_family").mkdir()
    with pytest.raises(ModelError, match="not_a_family is not a model family folder") as info:
        FamilyRegistry.from_environment({"CAPTIONEER_FAMILY_PATH": str(tmp_path / "not_a_family")})
    assert "CAPTIONEER_FAMILY_PATH" in (info.value.fix or "")


def test_the_live_defaults_come_from_the_descriptors() -> None:
    families = FamilyRegistry()
    assert families.get("confucius4_r2t2").live.session_options == (("endpointing", True),)
    assert families.get("parakeet_tdt").live.weight_variants["int8"].backend == "cpu"
    assert families.get("whisper_ct2").live.session_options == ()


def _family_folder(root: Path, body: str) -> Path:
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "family.py").write_text(body)
    return root


def test_a_family_folder_without_a_descriptor_is_named(tmp_path: Path) -> None:
    folder = _family_folder(tmp_path / "empty_family", "NAME = 'nothing'\n")
    with pytest.raises(ModelError, match="exports no FAMILY"):
        FamilyRegistry.from_environment({"CAPTIONEER_FAMILY_PATH": str(folder)})


def test_family_folders_of_one_name_in_two_places_stay_apart(tmp_path: Path) -> None:
    body = (
        "from inference.family import ModelFamily\n"
        "FAMILY = ModelFamily(name={name!r}, display_name='x', engine_factory='x:y', detect=lambda f, c: False)\n"
    )
    first = _family_folder(tmp_path / "a" / "plugin", body.format(name="first"))
    second = _family_folder(tmp_path / "b" / "plugin", body.format(name="second"))
    path = f"{first}{os.pathsep}{second}"
    assert FamilyRegistry.from_environment({"CAPTIONEER_FAMILY_PATH": path}).names()[-2:] == (
        "first",
        "second",
    )
