"""Float32 arrays inside a resume point's JSON state (docs/architecture.md §4), bit for bit: a replacement stream
in another process must continue from exactly the values the dead one had (a VAD's recurrent state, a decoder's).
Each reader checks the size it needs and refuses a wrong one in its own words."""

from __future__ import annotations

import base64

import numpy as np


def floats_to_text(values: np.ndarray) -> str:
    """The values as little-endian float32 bytes in base64."""
    return base64.b64encode(np.ascontiguousarray(values, dtype="<f4").tobytes()).decode("ascii")


def text_to_floats(text: str) -> np.ndarray:
    """The flat float32 array ``floats_to_text`` wrote (a writable copy)."""
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)
