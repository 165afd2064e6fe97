"""What this process holds open under a folder: file descriptors and memory maps (Linux /proc).

On Windows either one keeps a file from being deleted, so a closed engine must hold neither.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

needs_proc = pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="needs Linux /proc")


def open_under(folder: Path) -> list[str]:
    """Paths under ``folder`` that a descriptor or a memory map of this process refers to."""
    # No gc.collect(): what only a garbage collection would close stays open for an unknown time.
    root = str(folder.resolve()) + os.sep
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed while listing (the listing's own descriptor)
            continue
        if target.startswith(root):
            found.append(f"fd {fd.name}: {target}")
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith(root):
            found.append(f"map: {fields[5]}")
    return sorted(set(found))
