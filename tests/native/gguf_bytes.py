"""GGUF files byte by byte, for tests that need headers no well-behaved writer produces (hostile counts, shapes,
offsets, alignments). Layout: docs/gguf_packages.md and the GGUF v3 specification."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import gguf

ARRAY = int(gguf.GGUFValueType.ARRAY)
STRING = int(gguf.GGUFValueType.STRING)
UINT32 = int(gguf.GGUFValueType.UINT32)
F32 = int(gguf.GGMLQuantizationType.F32)


def string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def kv_uint32(key: str, value: int) -> bytes:
    return string(key) + struct.pack("<II", UINT32, value)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    ne: tuple[int, ...]  # ggml order (fastest dimension first)
    kind: int = F32
    offset: int = 0  # relative to the data section

    def encode(self) -> bytes:
        dims = b"".join(struct.pack("<Q", d) for d in self.ne)
        return (
            string(self.name)
            + struct.pack("<I", len(self.ne))
            + dims
            + struct.pack("<IQ", self.kind, self.offset)
        )


def gguf_bytes(kvs: list[bytes], tensors: list[TensorInfo], data: bytes, alignment: int = 32) -> bytes:
    """A GGUF v3 file: header, ``kvs`` (encoded key/values), the tensor directory, padding, ``data``."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    head += b"".join(t.encode() for t in tensors)
    return head + b"\0" * (-len(head) % alignment) + data
