"""Feed a live input into a stream until Ctrl-C, continuing on the default when the device goes away.

The capture thread only queues blocks; the caller's thread cuts them into pushes, so Ctrl-C (delivered to
the main thread) is seen within one short wait however quiet the input is.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import Any

import numpy as np

from inference.audio.devices.choices import InputDeviceError, fallback_for
from inference.audio.devices.opening import open_capture as open_input

WAIT_S = 0.2  # how often the loop looks up from an empty queue (for Ctrl-C), not a pause in the audio


def feed_until_interrupted(
    push: Callable[[np.ndarray], None],
    input_id: str,
    chunk_samples: int,
    notify: Callable[[str], object],
    open_capture: Callable[[str], Any] | None = None,
) -> None:
    """Capture ``input_id`` and ``push`` chunks of ``chunk_samples`` until KeyboardInterrupt; a device that
    goes away is announced through ``notify`` and replaced by the default of its kind. ``open_capture(id)``:
    the capture for an id (by default through the sound server, or PortAudio where none answers)."""
    opener = open_capture or (lambda wanted: open_input(wanted, notify))
    blocks: queue.Queue[np.ndarray | str] = queue.Queue()
    capture = opener(input_id)
    capture.start(blocks.put, lambda reason: blocks.put(reason or "the input ended"))
    notify(f"listening on {capture.name} (Ctrl-C to finish)")
    pending: list[np.ndarray] = []
    pending_samples = 0
    try:
        while True:
            try:
                item = blocks.get(timeout=WAIT_S)
            except queue.Empty:
                continue
            if isinstance(item, str):
                capture.stop()
                try:
                    capture = opener(fallback_for(capture.input_id))
                    capture.start(blocks.put, lambda reason: blocks.put(reason or "the input ended"))
                except InputDeviceError as exc:  # nothing to continue on: finish what was said
                    notify(
                        f"{item}; no other input could be opened ({exc.message}); finishing the transcript"
                    )
                    return
                notify(f"{item}; now listening on {capture.name}")
                continue
            pending.append(item)
            pending_samples += item.size
            if pending_samples >= chunk_samples:
                chunk = np.concatenate(pending)
                pending, pending_samples = [], 0  # before the push: Ctrl-C inside it must not send it twice
                push(chunk)
    finally:
        capture.stop()
        if pending:
            push(np.concatenate(pending))
