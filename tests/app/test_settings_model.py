"""Settings as an evented model: parts hear the changes they subscribed to, a batch is one change, and
``SettingsAutosave`` is the one place the file is written."""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import fields

import pytest

from app.settings import Settings, SettingsAutosave, SettingsStore
from inference.paths import AppPaths


def _store() -> SettingsStore:
    return SettingsStore(AppPaths.from_environment().ensure())  # a fresh home per test (tests/conftest.py)


def test_a_listener_hears_the_fields_it_follows_and_only_real_changes() -> None:
    settings = Settings()
    heard: list[frozenset[str]] = []
    everything: list[frozenset[str]] = []
    settings.subscribe(heard.append, "caption_theme", "caption_font_size")
    unsubscribe = settings.subscribe(everything.append)
    settings.caption_theme = "dark"
    settings.caption_theme = "dark"  # the same value: no change
    settings.overlay_lines = 3  # not followed by the first listener
    assert heard == [frozenset({"caption_theme"})]
    assert everything == [frozenset({"caption_theme"}), frozenset({"overlay_lines"})]
    unsubscribe()
    settings.caption_font_size = 20
    assert heard[-1] == frozenset({"caption_font_size"}) and len(everything) == 2


def test_a_batch_is_heard_once_with_every_name_after_all_values_are_set() -> None:
    settings = Settings()
    seen: list[tuple[frozenset[str], int, str]] = []
    settings.subscribe(lambda names: seen.append((names, settings.overlay_lines, settings.caption_theme)))
    with settings.batch():
        settings.overlay_lines = 4
        with settings.batch():  # nested: still one change, when the outer block ends
            settings.caption_theme = "dark"
        assert seen == []
    settings.update({"push_to_talk_mode": "toggle", "dictation_output": "copy"})
    with settings.batch():
        settings.overlay_lines = 4  # unchanged: nothing to hear
    assert seen == [
        (frozenset({"overlay_lines", "caption_theme"}), 4, "dark"),
        (frozenset({"push_to_talk_mode", "dictation_output"}), 4, "dark"),
    ]


def test_unknown_names_are_refused() -> None:
    settings = Settings()
    with pytest.raises(ValueError, match="no such setting: caption_colour"):
        settings.subscribe(lambda _names: None, "caption_colour")
    with pytest.raises(ValueError, match="no such setting"):
        settings.update({"caption_colour": "red"})


def test_a_copy_is_a_draft_with_the_values_and_no_listeners() -> None:
    settings = Settings(overlay_custom_positions={"screen": [1, 2]})
    heard: list[frozenset[str]] = []
    settings.subscribe(heard.append)
    for draft in (settings.copy(), copy.deepcopy(settings)):
        assert draft == settings and draft is not settings
        draft.overlay_lines = 5
        draft.overlay_custom_positions["screen"][0] = 99  # unshared: the settings keep theirs
    assert heard == [] and settings.overlay_custom_positions == {"screen": [1, 2]}
    assert "subscriber" not in json.dumps(settings.to_dict())
    assert set(vars(settings)) == {f.name for f in fields(Settings)}  # what readers of a dataclass expect


def test_autosave_writes_each_change_once_and_a_last_time_at_close(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = _store()
    settings = store.load()
    writes: list[dict[str, object]] = []
    real_save = store.save
    monkeypatch.setattr(store, "save", lambda s: (writes.append(s.to_dict()), real_save(s)))
    autosave = SettingsAutosave(settings, store)
    settings.caption_font_size = 18
    assert json.loads(store.path.read_text())["caption_font_size"] == 18
    settings.update({"overlay_lines": 3, "overlay_opacity": 0.5, "overlay_position": "top"})
    assert len(writes) == 2 and store.load() == settings
    autosave.close()
    assert len(writes) == 3  # the quit's write
    settings.caption_font_size = 20  # no longer followed
    assert len(writes) == 3 and store.load().caption_font_size == 18


def test_a_write_that_fails_is_logged_and_the_next_change_writes(caplog) -> None:  # type: ignore[no-untyped-def]
    store = _store()
    settings = Settings()
    SettingsAutosave(settings, store)
    store.path.mkdir()  # a folder where the file goes: the write fails
    with caplog.at_level(logging.WARNING):
        settings.caption_theme = "dark"  # the window goes on
    assert "cannot save the settings" in caplog.text
    store.path.rmdir()
    settings.caption_font_size = 16
    assert store.load() == settings
