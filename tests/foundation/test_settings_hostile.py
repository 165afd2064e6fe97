"""A hostile or damaged settings file never crashes the app: each bad value falls back to its default with a
logged warning, a file that cannot be used gives the defaults."""

from __future__ import annotations

import json
import logging
from dataclasses import fields
from typing import Any

import pytest

from app.settings import MAX_SETTINGS_BYTES, Settings, SettingsStore
from app.settings_rules import RULES
from inference.paths import AppPaths


def _store() -> SettingsStore:
    store = SettingsStore(AppPaths.from_environment().ensure())
    store.path.parent.mkdir(parents=True, exist_ok=True)
    return store


def test_the_defaults_keep_every_rule() -> None:
    defaults = Settings()
    assert set(RULES) <= {f.name for f in fields(Settings)}
    assert all(rule(getattr(defaults, name)) for name, rule in RULES.items())


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("caption_font_size", True),  # JSON true passed as an int
        ("caption_font_size", None),  # None passed for any setting
        ("overlay_opacity", float("nan")),
        ("overlay_lines", 10**6),
        ("dictation_padding_ms", 5000),  # the capture refuses it: dictation could not start
        ("caption_theme", "neon"),
        ("overlay_text_color", "red; } QWidget { background: url(x)"),  # into a style sheet
        ("overlay_custom_positions", {"screen": "x"}),
        ("overlay_custom_positions", {"screen": [1.5, True]}),
        ("threads", 0),
        ("threads", True),
        ("model", 5),
        ("push_to_talk_mode", ["hold"]),
    ],
)
def test_a_hostile_value_falls_back_to_its_default_with_a_warning(
    name: str, value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = _store()
    store.path.write_text(
        json.dumps({name: value, "overlay_lines": 3} if name != "overlay_lines" else {name: value})
    )
    with caplog.at_level(logging.WARNING):
        settings = store.load()
    assert getattr(settings, name) == getattr(Settings(), name)
    assert f"ignoring setting {name}=" in caplog.text
    if name != "overlay_lines":
        assert settings.overlay_lines == 3  # the other settings still count


def test_good_values_are_kept() -> None:
    store = _store()
    good = {
        "threads": 4,
        "model": "whisper",
        "overlay_opacity": 1,
        "overlay_custom_positions": {"s": [-5, 20]},
    }
    store.path.write_text(json.dumps(good | {"overlay_text_color": "#ff00aa", "dictation_padding_ms": 2000}))
    settings = store.load()
    assert (settings.threads, settings.model, settings.overlay_opacity) == (4, "whisper", 1.0)
    assert settings.overlay_custom_positions == {"s": [-5, 20]} and settings.dictation_padding_ms == 2000


@pytest.mark.parametrize(
    "content",
    [
        b'{"model": "caf\xe9"}',  # not UTF-8: was a UnicodeDecodeError at start-up
        b"[" * 100_000,  # was a RecursionError
        b'{"extra": "' + b"x" * MAX_SETTINGS_BYTES + b'"}',
    ],
)
def test_an_unusable_file_gives_the_defaults_and_is_kept_aside(content: bytes) -> None:
    store = _store()
    store.path.write_bytes(content)
    assert store.load() == Settings()
    assert store.path.with_suffix(".json.bad").read_bytes() == content and not store.path.exists()


def test_a_folder_in_place_of_the_file_gives_the_defaults(caplog: pytest.LogCaptureFixture) -> None:
    store = _store()
    store.path.mkdir()  # was an IsADirectoryError at start-up
    assert store.load() == Settings() and "cannot read the settings file" in caplog.text
    assert store.path.is_dir()
