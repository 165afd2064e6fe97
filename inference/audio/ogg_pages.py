"""Whether an Ogg file ends as a whole Ogg stream does: its last page complete and marked end-of-stream.

libsndfile reads a cut-off Ogg (a half-copied or half-downloaded file) as a shorter recording, because the
length it states is its last whole page's: without this check part of a recording would be captioned without a
word to the user. Only the file's last ``MAX_PAGE_BYTES`` are read, and every length is checked against the
bytes present.
"""

from __future__ import annotations

import os
from typing import BinaryIO

CAPTURE = b"OggS"
HEADER_BYTES = 27  # capture, version, flags, granule, serial, sequence, CRC, segment count
MAX_PAGE_BYTES = HEADER_BYTES + 255 + 255 * 255  # 255 segments of at most 255 bytes
END_OF_STREAM = 0x04  # header-type flag of a stream's last page


def ends_whole(handle: BinaryIO) -> bool | None:
    """True: the file's last page is complete and ends its stream. False: it is incomplete, or complete without
    the end-of-stream flag (cut at a page boundary). None: no page starts in the last ``MAX_PAGE_BYTES``, so
    this cannot tell. The handle's position is restored."""
    position = handle.tell()
    try:
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - MAX_PAGE_BYTES)
        handle.seek(start)
        tail = handle.read(size - start)
    finally:
        handle.seek(position)
    return tail_ends_whole(tail)


def tail_ends_whole(tail: bytes) -> bool | None:
    """``ends_whole`` for the last bytes of a file (at least its last page, when it has one)."""
    found = False
    at = tail.rfind(CAPTURE)
    while at >= 0:
        end = _page_end(tail, at)
        if end is not None:
            found = True
            if end == len(tail):
                return bool(tail[at + 5] & END_OF_STREAM)
        at = tail.rfind(CAPTURE, 0, at)
    return False if found else None


def _page_end(data: bytes, at: int) -> int | None:
    """Where the page whose header starts at ``at`` ends (possibly past the data: a cut page), or None when the
    bytes there are not a page header (a capture pattern inside packet data, or a header cut short)."""
    segments_at = at + HEADER_BYTES
    if segments_at > len(data) or data[at + 4] != 0:  # stream structure version 0 is the only one
        return None
    count = data[at + 26]
    if segments_at + count > len(data):
        return segments_at + count  # the segment table itself is cut: the page cannot end inside the data
    return segments_at + count + sum(data[segments_at : segments_at + count])
