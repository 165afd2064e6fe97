"""The model picker: the installed models in the list, the options each model's family takes, the models dialog
and the first-run banner that offers a real model."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QWidget

from app.model_choices import AppState, ModelChoice, installed_models
from app.models.manager import size_text
from app.settings import Settings
from app.views.caption_panel import CaptionPanel
from inference.errors import CaptioneerError
from inference.registry import FamilyRegistry


class ModelPicker:
    def __init__(self, parent: QWidget, state: AppState, settings: Settings, panel: CaptionPanel) -> None:
        self.parent = parent
        self.state = state
        self.settings = settings
        self.panel = panel
        self.combo = panel.model_combo
        self.dialog: Any = None  # the models dialog, while open
        self._suggested: str | None = None  # the package the first-run banner offers
        banner = panel.model_banner
        banner.download_button.clicked.connect(lambda: self.open_dialog(select=self._suggested))
        banner.choose_button.clicked.connect(lambda: self.open_dialog())
        banner.dismiss_button.clicked.connect(self._dismiss_offer)
        self.combo.currentIndexChanged.connect(lambda _index: panel.show_family_options(self.family_takes))
        self.fill()
        settings.subscribe(lambda _changed: self.fill(), "parakeet_weights")  # the models' load options

    def current(self) -> ModelChoice | None:
        return self.combo.currentData()

    def choices(self) -> list[ModelChoice]:
        return [
            self.combo.itemData(i) for i in range(self.combo.count()) if self.combo.itemData(i) is not None
        ]

    def fill(self) -> None:
        """Every installed model, under the current weights setting; the remembered one chosen."""
        self.combo.clear()
        try:
            choices = installed_models(self.state.paths, self.settings)
        except CaptioneerError as exc:
            self.combo.addItem(f"(no model: {exc.message})", None)
            return
        for choice in choices:
            self.combo.addItem(choice.label, choice)
        wanted = self.settings.model
        for index in range(self.combo.count()):
            choice = self.combo.itemData(index)
            if choice is not None and wanted in (choice.label, str(choice.path)):
                self.combo.setCurrentIndex(index)

    def can_translate(self) -> bool:
        """The chosen model's family offers the ``translate`` task (Whisper)."""
        choice = self.current()
        if choice is None or choice.family is None:
            return False
        try:
            task = FamilyRegistry.from_environment().spec(choice.family).request_option("task")
        except CaptioneerError:
            return False
        return task is not None and "translate" in task.choices

    def family_takes(self, option: str) -> bool:
        """The chosen model's family takes request option ``option`` (language, context)."""
        choice = self.current()
        if choice is None or choice.family is None:
            return False
        try:
            return option in FamilyRegistry.from_environment().spec(choice.family).request_options
        except CaptioneerError:
            return False

    def open_dialog(self, select: str | None = None) -> None:
        from app.models.dialog import open_models_dialog

        self.dialog = open_models_dialog(self.parent, self.state.paths, select=select)
        self.dialog.finished.connect(self.refresh)

    def offer_on_first_run(self) -> None:
        """Without a real model, a banner above the captions offers one; it blocks nothing and, once dismissed,
        stays away."""
        from app.models.dialog import first_run_suggestion

        needed, suggestion = first_run_suggestion(self.state.paths)
        if needed and not self.settings.model_offer_dismissed:
            self._suggested = suggestion.id if suggestion is not None else None
            self.panel.model_banner.offer(
                f"{suggestion.name} ({size_text(suggestion)})" if suggestion else None
            )

    def _dismiss_offer(self) -> None:
        self.panel.model_banner.hide()
        self.settings.model_offer_dismissed = True

    def refresh(self) -> None:
        """After the models dialog: the model line, the list, and the banner gone once a real model is installed."""
        from app.models.dialog import first_run_suggestion

        self.state = AppState.load(self.state.paths)
        self.panel.model_label.setText(self.state.model_summary)
        self.fill()
        if not first_run_suggestion(self.state.paths)[0]:
            self.panel.model_banner.hide()
