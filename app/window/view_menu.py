"""The View menu: the overlay, the caption text's size, theme and timestamps, the caption mode and Parakeet's
weights. Each choice is a setting: the views that show it follow it (the mode and weights apply from the next
start), and the menu's check marks follow the settings, whoever changed them."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow

from app.settings import Settings
from app.views.overlay import CaptionOverlay, wayland_note
from app.window.captions import LiveCaptions

WEIGHTS = (("native", "Full precision (f32)"), ("int8", "int8 on the CPU — fastest without a GPU"))
TEXT_SIZES = (("&Larger", 2, "Ctrl++"), ("&Smaller", -2, "Ctrl+-"), ("&Reset", 0, "Ctrl+0"))
TRANSLATE_LABEL = "&Translate captions into English"
THEMES = (("system", "&System"), ("dark", "&Dark"), ("high_contrast", "&High contrast"))
SHOWN = (  # the settings this menu's check marks show
    "overlay_enabled",
    "overlay_click_through",
    "caption_mode",
    "translate_captions",
    "parakeet_weights",
    "show_timestamps",
    "caption_theme",
)


class ViewMenu:
    def __init__(
        self,
        window: QMainWindow,
        settings: Settings,
        overlay: CaptionOverlay,
        captions: LiveCaptions,
        can_translate: Callable[[], bool],
    ) -> None:
        """``can_translate``: whether the chosen model translates (``update_translate`` follows a new choice)."""
        self.window = window
        self.settings = settings
        self.overlay = overlay
        self.captions = captions
        self.can_translate = can_translate
        menu = window.menuBar().addMenu("&View")
        self.overlay_action = QAction("Caption &overlay", window, checkable=True)
        self.overlay_action.setChecked(settings.overlay_enabled)
        self.overlay_action.toggled.connect(self.set_overlay_visible)
        menu.addAction(self.overlay_action)
        self.overlay_settings_action = QAction("Overlay &settings…", window)
        self.overlay_settings_action.triggered.connect(self.open_overlay_settings)
        menu.addAction(self.overlay_settings_action)
        self.click_through_action = QAction("Overlay &click-through", window, checkable=True)
        self.click_through_action.setChecked(settings.overlay_click_through)
        self.click_through_action.toggled.connect(self._set_click_through)
        menu.addAction(self.click_through_action)
        self.segmented_action = QAction("Final text at each &pause (no revisions)", window, checkable=True)
        self.segmented_action.setChecked(settings.caption_mode == "segmented")
        self.segmented_action.toggled.connect(self._set_segmented)
        menu.addAction(self.segmented_action)
        self.translate_action = QAction(TRANSLATE_LABEL, window, checkable=True)
        self.translate_action.setChecked(settings.translate_captions)
        self.translate_action.toggled.connect(self._set_translate)
        menu.addAction(self.translate_action)
        self.update_translate()
        weights_menu = menu.addMenu("Parakeet &weights")
        self.weights_actions: dict[str, QAction] = {}
        for value, label in WEIGHTS:
            action = weights_menu.addAction(label)
            action.setCheckable(True)
            action.setChecked(settings.parakeet_weights == value)
            action.triggered.connect(lambda _checked=False, v=value: self._set_parakeet_weights(v))
            self.weights_actions[value] = action
        self.timestamps_action = QAction("&Timestamps", window, checkable=True)
        self.timestamps_action.setChecked(settings.show_timestamps)
        self.timestamps_action.toggled.connect(self._set_timestamps)
        menu.addAction(self.timestamps_action)
        size_menu = menu.addMenu("Caption text &size")
        for label, step, keys in TEXT_SIZES:
            action = size_menu.addAction(label)
            action.setShortcut(QKeySequence(keys))
            action.triggered.connect(lambda _checked=False, d=step: self.change_font_size(d))
        theme_menu = menu.addMenu("Caption t&heme")
        self.theme_actions: dict[str, QAction] = {}
        for value, label in THEMES:
            action = theme_menu.addAction(label)
            action.setCheckable(True)
            action.setChecked(settings.caption_theme == value)
            action.triggered.connect(lambda _checked=False, v=value: self.set_caption_theme(v))
            self.theme_actions[value] = action
        note = wayland_note()  # what the desktop does not let the overlay do
        if note:
            wayland = QAction(note, window)
            wayland.setEnabled(False)
            menu.addAction(wayland)
        settings.subscribe(lambda _changed: self._show_settings(), *SHOWN)

    def _show_settings(self) -> None:
        """The check marks say what the settings hold (an unchanged mark emits nothing, so nothing loops)."""
        s = self.settings
        self.overlay_action.setChecked(s.overlay_enabled)
        self.click_through_action.setChecked(s.overlay_click_through)
        self.segmented_action.setChecked(s.caption_mode == "segmented")
        self.translate_action.setChecked(s.translate_captions)
        self.timestamps_action.setChecked(s.show_timestamps)
        for value, action in self.weights_actions.items():
            action.setChecked(value == s.parakeet_weights)
        for value, action in self.theme_actions.items():
            action.setChecked(value == s.caption_theme)

    # ------------------------------------------------------------------ overlay
    def set_overlay_visible(self, visible: bool) -> None:
        self.settings.overlay_enabled = visible
        if visible:
            if self.captions.session is not None:
                self.overlay.bind(self.captions.session)
            self.overlay.show_captions()
        else:
            self.overlay.hide_captions()

    def open_overlay_settings(self) -> None:
        from app.views.overlay_settings import OverlaySettingsDialog

        self.overlay_settings = OverlaySettingsDialog(self.settings, self.overlay.apply_settings, self.window)
        self.overlay_settings.show()

    def _set_click_through(self, enabled: bool) -> None:
        self.settings.overlay_click_through = enabled  # the overlay follows

    # ------------------------------------------------------------------ captions
    def _set_segmented(self, enabled: bool) -> None:
        self.settings.caption_mode = "segmented" if enabled else "auto"  # applies from the next start

    def _set_translate(self, enabled: bool) -> None:
        self.settings.translate_captions = enabled  # applies from the next start

    def update_translate(self) -> None:
        """Enabled for models that translate; otherwise the menu says why it is not."""
        able = self.can_translate()
        self.translate_action.setEnabled(able)
        self.translate_action.setText(TRANSLATE_LABEL if able else f"{TRANSLATE_LABEL} (Whisper models only)")
        self.translate_action.setStatusTip(
            "Captions in English, whatever language is spoken (from the next start)"
            if able
            else "The chosen model does not translate; choose a Whisper model (File → Models…)"
        )

    def _set_parakeet_weights(self, value: str) -> None:
        """Applies from the next start: the model list follows with the new load options."""
        self.settings.parakeet_weights = value
        self._show_settings()  # a triggered mark toggles itself: unchanged settings put it back

    def change_font_size(self, step: int) -> None:
        size = 14 if step == 0 else max(8, min(72, self.settings.caption_font_size + step))
        self.settings.caption_font_size = size  # the caption text follows

    def set_caption_theme(self, theme: str) -> None:
        self.settings.caption_theme = theme  # the caption text follows
        self._show_settings()  # a triggered mark toggles itself: unchanged settings put it back

    def _set_timestamps(self, enabled: bool) -> None:
        self.settings.show_timestamps = enabled  # the caption text follows
