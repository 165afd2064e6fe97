"""Feed a meeting's two sides ("You", "Others") into their streams until Ctrl-C (the command line's meeting).

As in ``feed``, the capture threads only queue blocks and the caller's thread cuts them into pushes, so Ctrl-C
is seen within one short wait. The microphone side reaches the queue already cleaned of the playback it heard
(``MeetingInput``'s bleed filter). A side whose device goes away ends the meeting's capture: what was said is
finished and printed (continuing a meeting on new devices is the window's; see docs/cli.md).
"""

from __future__ import annotations

import functools
import queue
from collections.abc import Callable

import numpy as np

from inference.audio.devices.feed import WAIT_S
from inference.audio.meeting import MeetingInput
from inference.speakers import OTHERS, YOU

Push = Callable[[str, np.ndarray], None]  # push(speaker, chunk)


def feed_meeting_until_interrupted(
    push: Push,
    meeting: MeetingInput,
    chunk_samples: int,
    notify: Callable[[str], object],
    stop: Callable[[], bool] = lambda: False,
) -> None:
    """Capture both sides of ``meeting`` and ``push`` each speaker's chunks of ``chunk_samples`` until ``stop()``
    (looked at between pushes), KeyboardInterrupt or a side's input ends; what is still queued (and what the
    bleed filter holds back) is pushed before returning."""
    blocks: queue.Queue[tuple[str, np.ndarray | str]] = queue.Queue()
    pending: dict[str, list[np.ndarray]] = {YOU: [], OTHERS: []}

    def take(speaker: str, block: np.ndarray) -> None:
        pending[speaker].append(block)
        if sum(piece.size for piece in pending[speaker]) >= chunk_samples:
            chunk = np.concatenate(pending[speaker])
            pending[speaker] = []  # before the push: Ctrl-C inside it must not send it twice
            push(speaker, chunk)

    def queue_block(speaker: str, block: np.ndarray) -> None:
        blocks.put((speaker, block))

    def queue_end(speaker: str, reason: str | None) -> None:
        blocks.put((speaker, reason or "the input ended"))

    try:
        for speaker, side in ((YOU, meeting.you), (OTHERS, meeting.others)):
            side.start(functools.partial(queue_block, speaker), functools.partial(queue_end, speaker))
        meeting.name_after_devices()
        meeting.wait_until_delivering()  # so "listening" is said once both sides are heard
        notify(f"listening on {meeting.name} (Ctrl-C to finish)")
        while not stop():
            try:
                speaker, item = blocks.get(timeout=WAIT_S)
            except queue.Empty:
                continue
            if isinstance(item, str):
                notify(f"{item} ({speaker}); finishing the transcript")
                return
            take(speaker, item)
    finally:
        meeting.you.finish()  # the microphone stops; what the bleed filter held back is queued
        meeting.others.stop()
        while not blocks.empty():
            speaker, item = blocks.get_nowait()
            if not isinstance(item, str):
                pending[speaker].append(item)
        for speaker, pieces in pending.items():
            if pieces:
                push(speaker, np.concatenate(pieces))
