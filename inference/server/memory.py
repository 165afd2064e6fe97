"""Giving the memory of finished requests back to the system, so a server left running stays at its idle size.

glibc serves large blocks with mmap (freed at once), but after the first such block is freed it raises that
threshold to the block's size (up to 32 MB): later uploads and decoded audio then come from per-thread heaps
that fragment and keep their pages (600-900 MB after a few large requests). Fixing the threshold turns the
adjustment off: every block of ``MMAP_THRESHOLD`` or more is its own mapping and returns to the system when
freed. Elsewhere (musl, macOS, Windows) this is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform

log = logging.getLogger(__name__)

MMAP_THRESHOLD = 1 << 20
_M_MMAP_THRESHOLD = -3  # glibc's <malloc.h>


def return_large_blocks_when_freed() -> bool:
    """Set glibc's mmap threshold for this process; True when it took effect."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        done = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError) as exc:
        log.debug("mallopt is not available: %s", exc)
        return False
    log.debug("glibc mmap threshold fixed at %d bytes: %s", MMAP_THRESHOLD, done)
    return done
