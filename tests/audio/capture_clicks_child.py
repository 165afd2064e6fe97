"""Child for test_capture_timing: start a capture, play a click track into a sink as soon as the capture says
it delivers (as a person starts talking once told "listening"), and report where the clicks landed.

Run in its own process because soundcard binds libpulse at import, to the server named in the environment.
argv: input id, sink, the click track (WAV), the track's tail of silence in seconds. Prints one JSON object:
``clicks`` (sample offsets in the captured audio), ``delivered`` (samples) and ``live_at_start`` (audio had
come when ``wait_until_delivering()`` returned).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import numpy as np

from inference.audio.devices.capture import SoundServerCapture
from inference.contract import SAMPLE_RATE

CLICK_LEVEL = 0.3  # the clicks are square waves at 0.8; silence and resampling ripple stay far below
CLICK_SAMPLES = 160  # a click (1 ms, ringing after resampling) is far shorter than 10 ms
DEADLINE_S = 120.0  # a bound for a failing run only: the loop waits on the captured audio, not on time


def click_onsets(audio: np.ndarray) -> list[int]:
    """Where each click begins: a loud sample after more than CLICK_SAMPLES of quiet."""
    loud = np.flatnonzero(np.abs(audio) > CLICK_LEVEL)
    return [int(index) for i, index in enumerate(loud) if i == 0 or index - loud[i - 1] > CLICK_SAMPLES]


def main() -> None:
    input_id, sink, track, tail_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    blocks: list[np.ndarray] = []
    changed = threading.Condition()
    ended: list[str | None] = []

    def keep(block: np.ndarray) -> None:
        with changed:
            blocks.append(block)
            changed.notify_all()

    capture = SoundServerCapture(input_id)
    capture.start(keep, ended.append)
    live = capture.wait_until_delivering()
    with changed:
        live_at_start = live and bool(blocks)  # the stream delivers: what is played from now on will come
    subprocess.run(["paplay", f"--device={sink}", track], check=True, timeout=DEADLINE_S)
    tail = int(tail_s * SAMPLE_RATE)

    def captured_the_tail() -> bool:  # the last click and the silence after it have come through
        audio = np.concatenate(blocks) if blocks else np.zeros(0, np.float32)
        onsets = click_onsets(audio)
        return bool(onsets) and audio.size - onsets[-1] >= tail

    with changed:
        changed.wait_for(lambda: captured_the_tail() or bool(ended), timeout=DEADLINE_S)
    capture.stop()
    audio = np.concatenate(blocks)
    print(
        json.dumps(
            {
                "clicks": click_onsets(audio),
                "delivered": int(audio.size),
                "ended": ended,
                "live_at_start": live_at_start,
            }
        )
    )


if __name__ == "__main__":
    main()
