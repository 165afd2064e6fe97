"""Feed a live input into a stream until Ctrl-C, continuing on the default when the device goes away.

The capture thread only queues blocks; the caller's thread cuts them into pushes, so Ctrl-C (a ``stop`` the
signal handler sets, or a KeyboardInterrupt) is seen within one short wait however quiet the input is. The span
no input delivered (between the lost device's last block and the new one's first) is sent as silence, so stream
time stays wall time, and reported through ``on_gap`` for a marker in the transcript, as the caption window does.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from inference.audio.devices.choices import InputDeviceError, fallback_for
from inference.audio.devices.opening import open_capture as open_input
from inference.contract import SAMPLE_RATE

WAIT_S = 0.2  # how often the loop looks up from an empty queue (for Ctrl-C), not a pause in the audio
MAX_GAP_FILL_S = 60.0  # a longer span without input is marked but not sent as silence (the model has no use)
# on_gap(start_s, missing_s, reason, filled_s): a gap at start_s seconds of stream time, filled_s of it sent
OnGap = Callable[[float, float, str, float], object]


def feed_until_interrupted(
    push: Callable[[np.ndarray], None],
    input_id: str,
    chunk_samples: int,
    notify: Callable[[str], object],
    open_capture: Callable[[str], Any] | None = None,
    on_gap: OnGap = lambda *_gap: None,
    clock: Callable[[], float] = time.monotonic,
    stop: Callable[[], bool] = lambda: False,
) -> None:
    """Capture ``input_id`` and ``push`` chunks of ``chunk_samples`` until ``stop()`` (looked at between pushes)
    or KeyboardInterrupt; a device that goes away is announced through ``notify``, replaced by the default of
    its kind, and the span without audio reported through ``on_gap``. ``open_capture(id)``: the capture for an
    id (by default through the sound server, or PortAudio where none answers)."""
    opener = open_capture or (lambda wanted: open_input(wanted, notify))
    blocks: queue.Queue[tuple[float, np.ndarray] | str] = queue.Queue()

    def start(capture: Any) -> None:
        capture.start(
            lambda block: blocks.put((clock(), block)), lambda reason: blocks.put(reason or "the input ended")
        )
        wait = getattr(capture, "wait_until_delivering", None)  # a sound server's stream starts late
        if wait is not None:
            wait()  # so "listening on" is said once what is said next will be captured

    capture = opener(input_id)
    start(capture)
    notify(f"listening on {capture.name} (Ctrl-C to finish)")
    pending: list[np.ndarray] = []
    pending_samples = fed_samples = 0
    last_block_at: float | None = None
    lost: tuple[float, str] | None = None  # when the old input's last block came, and why it ended
    try:
        while not stop():
            try:
                item = blocks.get(timeout=WAIT_S)
            except queue.Empty:
                continue
            if isinstance(item, str):
                capture.stop()
                if last_block_at is not None:
                    lost = (last_block_at, item)
                try:
                    capture = opener(fallback_for(capture.input_id))
                    start(capture)
                except InputDeviceError as exc:  # nothing to continue on: finish what was said
                    notify(
                        f"{item}; no other input could be opened ({exc.message}); finishing the transcript"
                    )
                    return
                notify(f"{item}; now listening on {capture.name}")
                continue
            received_at, block = item
            if lost is not None:  # the new input's first block, captured from received_at - its length
                missing_s = max(0.0, received_at - block.size / SAMPLE_RATE - lost[0])
                fill = np.zeros(round(min(missing_s, MAX_GAP_FILL_S) * SAMPLE_RATE), np.float32)
                on_gap(
                    (fed_samples + pending_samples) / SAMPLE_RATE, missing_s, lost[1], fill.size / SAMPLE_RATE
                )
                lost = None
                if fill.size:
                    pending.append(fill)
                    pending_samples += fill.size
            last_block_at = received_at
            pending.append(block)
            pending_samples += block.size
            if pending_samples >= chunk_samples:
                chunk = np.concatenate(pending)
                pending, pending_samples = [], 0  # before the push: Ctrl-C inside it must not send it twice
                fed_samples += chunk.size
                push(chunk)
    finally:
        capture.stop()
        while not blocks.empty():  # captured before the stop: transcribed too
            item = blocks.get_nowait()
            if not isinstance(item, str):
                pending.append(item[1])
        if pending:
            push(np.concatenate(pending))
