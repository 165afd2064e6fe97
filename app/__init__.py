"""Captioneer desktop app (PySide6): caption window, overlay, dictation. Talks to inference/ via the client."""
