"""A private Xvfb screen for real-window tests and the screenshot script."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def start_xvfb(first: int = 90, size: str = "1280x800x24") -> tuple[subprocess.Popen, str]:
    """(the server process, its DISPLAY) on the first free display number from ``first``."""
    for number in range(first, first + 50):
        if not Path(f"/tmp/.X11-unix/X{number}").exists() and not Path(f"/tmp/.X{number}-lock").exists():
            break
    server = subprocess.Popen(
        ["Xvfb", f":{number}", "-screen", "0", size, "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while not Path(f"/tmp/.X11-unix/X{number}").exists():
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise RuntimeError(f"Xvfb :{number} did not start (is it installed? apt-get install xvfb)")
        time.sleep(0.05)
    return server, f":{number}"
