"""User settings (Qt-free): a JSON file in the config directory, written atomically.

A damaged file is kept aside as ``settings.json.bad`` and defaults are used, so a bad edit never
stops the app from starting and nothing the user wrote is silently destroyed. Keys this version does
not know are preserved on save (a newer version's settings survive a downgrade).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from inference.audio.limits import DEFAULT_FILE_SECONDS
from inference.paths import AppPaths

log = logging.getLogger(__name__)
SETTINGS_FILE = "settings.json"


@dataclass
class Settings:
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
                default = getattr(defaults, name)
                value = data[name]
                # Reject values of the wrong type instead of crashing later in the UI.
                if default is None or value is None or isinstance(value, type(default)):
                    values[name] = value
                elif isinstance(default, float) and isinstance(value, int):
                    values[name] = float(value)
                else:
                    log.warning("ignoring setting %s=%r (expected %s)", name, value, type(default).__name__)
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**values, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        extra = data.pop("extra")
        return {**extra, **data}


class SettingsStore:
    def __init__(self, paths: AppPaths) -> None:
        self.path = paths.config / SETTINGS_FILE

    def load(self) -> Settings:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return Settings()
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("top level is not an object")
        except ValueError as exc:
            backup = self.path.with_suffix(".json.bad")
            self.path.replace(backup)
            log.warning(
                "settings file %s is damaged (%s); kept as %s, using defaults", self.path, exc, backup
            )
            return Settings()
        return Settings.from_dict(data)

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
