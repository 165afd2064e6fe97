"""The family registry: every family's factory imports, and a broken one names what is missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from inference.contract import Capabilities
from inference.engine import FAMILY_FACTORIES, import_factory, load_engine
from inference.errors import BackendError, UsageError


@pytest.mark.parametrize("family", sorted(FAMILY_FACTORIES))
def test_every_registered_family_has_a_factory(family: str) -> None:
    assert callable(import_factory(FAMILY_FACTORIES[family], family))


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
        import_factory("inference.engine:KNOWN_FAMILIES", "parakeet_tdt")


def test_unknown_family_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown family 'whisper'"):
        load_engine(tmp_path, family="whisper")


def test_capabilities_round_trip_through_json() -> None:
    caps = Capabilities(streaming=True, snapshots=True, hotwords=True, streams_per_engine=2)
    assert Capabilities.from_json(caps.to_json()) == caps
