"""User settings (Qt-free): an evented model, and a JSON file in the config directory, written atomically.

``Settings`` is the model the window's parts share: a part assigns a field, and every part subscribed to that
field hears of it (napari's evented models); ``SettingsAutosave`` is the one subscriber that writes the file.

A damaged file is kept aside as ``settings.json.bad`` and defaults are used, so a bad edit never
stops the app from starting and nothing the user wrote is silently destroyed. Keys this version does
not know are preserved on save (a newer version's settings survive a downgrade).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from app.settings_rules import RULES
from inference.audio.limits import DEFAULT_FILE_SECONDS
from inference.paths import AppPaths

log = logging.getLogger(__name__)
SETTINGS_FILE = "settings.json"
MAX_SETTINGS_BYTES = 1 << 20  # a real file is ~2 KB
_OPTIONAL_TYPES: dict[str, tuple[type, ...]] = {"threads": (int,)}  # None-default settings that are not str

#: Hears the names of the settings that changed: once per assignment that changes a value, once per batch.
SettingsListener = Callable[[frozenset[str]], None]


class _Subscribers:
    """Who hears of changed settings, and the names held back while a batch is open."""

    def __init__(self) -> None:
        self.entries: list[tuple[SettingsListener, frozenset[str] | None]] = []
        self.held: set[str] | None = None  # inside ``Settings.batch()``

    def notify(self, names: frozenset[str]) -> None:
        if self.held is not None:
            self.held.update(names)
            return
        for listener, wanted in list(self.entries):
            if wanted is None or wanted & names:
                listener(names)


@dataclass
class Settings:
    """What the user chose. Assigning a field tells the subscribers (``subscribe``); ``batch()`` makes several
    assignments one change (a dialog's OK), heard once and saved once."""

    # The subscribers live in a slot, not a field: never saved, copied or compared, and not in ``vars()``.
    __slots__ = ("__dict__", "_subscriber_list")

    model: str | None = None  # package id or path; None = the catalog's default installed model
    backend: str = "auto"
    threads: int | None = None
    language: str | None = None
    input_device: str | None = (
        None  # an input id (pulse:source:NAME, system:default, ...); None = the default mic
    )
    caption_font_size: int = 14
    caption_theme: str = "system"  # system | dark | high_contrast
    show_timestamps: bool = False
    translate_captions: bool = False  # into English, with models that translate (Whisper)
    caption_mode: str = "auto"  # auto (the model's live path) | segmented (final text at each pause)
    overlay_enabled: bool = False
    overlay_opacity: float = 0.85
    overlay_lines: int = 2
    overlay_click_through: bool = False
    overlay_font_family: str = ""  # "" = the system's UI font
    overlay_font_size: int = 24
    overlay_text_color: str = "#ffffff"
    overlay_provisional_color: str = "#b0b0b0"
    overlay_background: str = "#000000"
    overlay_hold_s: float = 6.0  # captions fade this long after the last new text
    overlay_after_fade: str = "new"  # back after a fade: new (what follows) | last_line (and the line before)
    overlay_position: str = "bottom"  # bottom | top | custom
    overlay_custom_positions: dict[str, list[int]] = field(default_factory=dict)  # screen name -> [x, y]
    push_to_talk_hotkey: str = "<ctrl>+<alt>+<space>"
    push_to_talk_mode: str = "hold"  # hold | toggle | hybrid
    trailing_silence_ms: int = 300  # real audio kept after the key is released
    dictation_enabled: bool = False
    dictation_padding_ms: int = 300  # zero samples appended after the trailing audio
    dictation_pre_roll_ms: int = 500
    dictation_output: str = "paste"  # paste | type | copy
    dictation_capitalize: bool = True
    dictation_trailing: str = "space"  # space | newline | none
    dictation_model: str | None = None  # None = the captions model
    # Parakeet-TDT weights: "native" (the checkpoint's own, f32) or "int8" (on the CPU backend: the fastest type,
    # ~1.7x f32 and WER-equal on held-out speech; docs/models.md §6). Applies from the next model load.
    parakeet_weights: str = "native"
    max_file_audio_s: float = (
        DEFAULT_FILE_SECONDS  # longest recording opened in the window (decoded mono: 64 KB/s)
    )
    model_offer_dismissed: bool = False  # the first-run banner ("download a real model") was dismissed
    extra: dict[str, Any] = field(default_factory=dict)  # keys from other versions, kept verbatim

    def __post_init__(self) -> None:
        object.__setattr__(self, "_subscriber_list", _Subscribers())

    def __setattr__(self, name: str, value: Any) -> None:
        subscribers: _Subscribers | None = getattr(self, "_subscriber_list", None)  # None while __init__ runs
        changed = subscribers is not None and name in _FIELD_NAMES and getattr(self, name) != value
        super().__setattr__(name, value)
        if subscribers is not None and changed:
            subscribers.notify(frozenset((name,)))

    def subscribe(self, listener: SettingsListener, *names: str) -> Callable[[], None]:
        """Call ``listener(changed names)`` after a change to any of ``names`` (no names: to any setting).
        Returns the function that unsubscribes it. A field changed in place (a dict's item) is no change:
        assign a new value."""
        unknown = set(names) - _FIELD_NAMES
        if unknown:
            raise ValueError(f"no such setting: {', '.join(sorted(unknown))}")
        entry = (listener, frozenset(names) or None)
        entries = self._subscribers.entries
        entries.append(entry)
        return lambda: entries.remove(entry)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Assignments inside are heard as one change when the block ends (nested blocks: the outermost)."""
        subscribers = self._subscribers
        if subscribers.held is not None:
            yield
            return
        subscribers.held = set()
        try:
            yield
        finally:
            names, subscribers.held = frozenset(subscribers.held), None
            if names:
                subscribers.notify(names)

    def update(self, values: dict[str, Any]) -> None:
        """Assign several settings as one change."""
        unknown = set(values) - _FIELD_NAMES
        if unknown:
            raise ValueError(f"no such setting: {', '.join(sorted(unknown))}")
        with self.batch():
            for name, value in values.items():
                setattr(self, name, value)

    def copy(self) -> Settings:
        """The same values, unshared, with no subscribers: a draft that a dialog edits until OK."""
        return replace(self, **{f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)})

    def __deepcopy__(self, _memo: dict[int, Any]) -> Settings:
        return self.copy()

    @property
    def _subscribers(self) -> _Subscribers:
        subscribers: _Subscribers = object.__getattribute__(self, "_subscriber_list")
        return subscribers

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Settings:
        if data.get("hf_token"):  # older versions kept it here in plain text; never log its value
            log.warning(
                "settings.json held a Hugging Face token; it is no longer stored there and is removed on the "
                "next save: set HF_TOKEN or log in with `hf auth login` instead"
            )
        data = {k: v for k, v in data.items() if k != "hf_token"}
        known = {f.name for f in fields(cls)} - {"extra"}
        defaults = cls()
        values: dict[str, Any] = {}
        for name in known:
            if name in data:
                value = _checked(name, data[name], getattr(defaults, name))
                if value is not _INVALID:
                    values[name] = value
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**values, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        extra = data.pop("extra")
        return {**extra, **data}


_FIELD_NAMES = frozenset(f.name for f in fields(Settings))
_INVALID = object()


def _checked(name: str, value: Any, default: Any) -> Any:
    """``value`` when it has the setting's type (an int for a float is widened) and keeps its rule, else
    ``_INVALID`` with a warning: a wrong value falls back to the default instead of crashing later in the UI."""
    if isinstance(default, float) and type(value) is int:
        value = float(value)
    if default is None:  # optional settings: None or their type (str unless listed); JSON true is no int
        typed = value is None or type(value) in _OPTIONAL_TYPES.get(name, (str,))
    else:
        typed = type(value) is type(default)
    rule = RULES.get(name)
    if typed and (rule is None or rule(value)):
        return value
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:80] + "…"
    log.warning("ignoring setting %s=%s (not a valid %s); using the default", name, shown, name)
    return _INVALID


class SettingsStore:
    def __init__(self, paths: AppPaths) -> None:
        self.path = paths.config / SETTINGS_FILE

    def load(self) -> Settings:
        """The saved settings; defaults (with a logged warning) for a file that cannot be used, never a crash."""
        try:
            with self.path.open("rb") as handle:
                raw = handle.read(MAX_SETTINGS_BYTES + 1)
        except FileNotFoundError:
            return Settings()
        except OSError as exc:  # a folder in its place, no permission: leave it be
            log.warning("cannot read the settings file %s (%s); using defaults", self.path, exc)
            return Settings()
        try:
            if len(raw) > MAX_SETTINGS_BYTES:
                raise ValueError(f"larger than {MAX_SETTINGS_BYTES} bytes")
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict):
                raise ValueError("top level is not an object")
        except (ValueError, RecursionError) as exc:  # JSON and UTF-8 errors are ValueErrors
            self._keep_aside(exc)
            return Settings()
        return Settings.from_dict(data)

    def _keep_aside(self, exc: BaseException) -> None:
        backup = self.path.with_suffix(".json.bad")
        try:
            self.path.replace(backup)
        except OSError as move_error:
            log.warning("settings file %s is damaged (%s), using defaults; %s", self.path, exc, move_error)
            return
        log.warning("settings file %s is damaged (%s); kept as %s, using defaults", self.path, exc, backup)

    def save(self, settings: Settings) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".settings-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(settings.to_dict(), handle, indent=2, ensure_ascii=False)
                handle.flush()
                os.fsync(handle.fileno())
            Path(tmp).replace(self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class SettingsAutosave:
    """The one place the settings are written: right after every change (a batch is one write), atomically
    (``SettingsStore.save``), and a last time when the window closes."""

    def __init__(self, settings: Settings, store: SettingsStore) -> None:
        self.settings = settings
        self.store = store
        self._unsubscribe = settings.subscribe(self._changed)

    def _changed(self, _names: frozenset[str]) -> None:
        self.save()

    def save(self) -> None:
        try:
            self.store.save(self.settings)
        except (
            OSError
        ) as exc:  # a full disk, a read-only folder: the window goes on, the next change tries again
            log.warning(
                "cannot save the settings to %s (%s); they are saved at the next change", self.store.path, exc
            )

    def close(self) -> None:
        self._unsubscribe()
        self.save()
