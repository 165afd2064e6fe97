"""Fixtures for the model store tests live in hub_fixtures.py (shared with the dialog test)."""

from tests.models.hub_fixtures import app_paths, hub, hub_state  # noqa: F401  (pytest fixtures)
