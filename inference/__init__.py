"""Captioneer inference: audio frontends, model families on ggml/libllama, worker and CLI (no Qt)."""

__version__ = "0.1.0"
