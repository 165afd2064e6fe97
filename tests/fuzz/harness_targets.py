"""Targets for the harness's own test: the input's first word says what the child does."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from inference.errors import ModelError


def act(path: Path, scratch: Path) -> str:
    word = path.read_bytes().split(b" ")[0]
    if word == b"refuse":
        raise ModelError(f"{path.name} is refused", "fix it")
    if word == b"raise":
        raise TypeError("a raw error")
    if word == b"segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if word == b"spin":
        while True:
            pass
    if word == b"allocate":
        return str(len(bytearray(8 << 30)))  # past RLIMIT_AS: MemoryError
    if word == b"touch":
        chunk = b"\0" * 4096  # resident pages, not just address space
        kept = [bytearray(chunk * 1024) for _ in range(64)]  # 256 MiB touched
        return str(len(kept))
    if word == b"write":
        (scratch / "big").write_bytes(b"\0" * (4 << 20))  # past RLIMIT_FSIZE: SIGXFSZ
    if word == b"leave":
        (scratch / "left").write_bytes(b"\0" * (1 << 20))
    return word.decode()
