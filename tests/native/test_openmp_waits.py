"""How ggml's OpenMP threads wait (inference/native/lib.py): passive after a bounded spin, unless the user chose."""

from __future__ import annotations

import pytest

from inference.native import lib


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_DYNAMIC"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_threads_spin_briefly_then_sleep(clean_env: pytest.MonkeyPatch) -> None:
    import os

    lib._prefer_passive_openmp_waits()
    assert os.environ["GOMP_SPINCOUNT"] == str(lib.BARRIER_SPIN_COUNT)
    assert os.environ["OMP_WAIT_POLICY"] == "passive" and os.environ["OMP_DYNAMIC"] == "false"


@pytest.mark.parametrize("chosen", [{"OMP_WAIT_POLICY": "active"}, {"GOMP_SPINCOUNT": "0"}])
def test_a_users_choice_is_kept(clean_env: pytest.MonkeyPatch, chosen: dict[str, str]) -> None:
    import os

    for name, value in chosen.items():
        clean_env.setenv(name, value)
    lib._prefer_passive_openmp_waits()
    for name, value in chosen.items():
        assert os.environ[name] == value
    if "OMP_WAIT_POLICY" in chosen:  # a wait policy of the user's: no spin count of ours overrides it
        assert "GOMP_SPINCOUNT" not in os.environ
