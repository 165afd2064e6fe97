"""Hand-built RIFF/WAVE files for the audio input tests (stdlib ``wave`` cannot write float or odd layouts)."""

from __future__ import annotations

import struct

import numpy as np

PCM = 0x0001
IEEE_FLOAT = 0x0003
EXTENSIBLE = 0xFFFE
GUID_TAIL = bytes.fromhex("000000001000800000aa00389b71")


def chunk(chunk_id: bytes, body: bytes, declared_size: int | None = None) -> bytes:
    size = len(body) if declared_size is None else declared_size
    return chunk_id + struct.pack("<I", size) + body + (b"\0" if len(body) % 2 else b"")


def fmt_body(tag: int, channels: int, rate: int, bits: int, *, extensible_tag: int | None = None) -> bytes:
    align = channels * ((bits + 7) // 8)
    body = struct.pack("<HHIIHH", tag, channels, rate, rate * align, align, bits)
    if tag == EXTENSIBLE:
        sub = extensible_tag if extensible_tag is not None else PCM
        body += struct.pack("<HHI", 22, bits, (1 << channels) - 1) + struct.pack("<H", sub) + GUID_TAIL
    return body


def riff(*chunks: bytes) -> bytes:
    payload = b"WAVE" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(payload)) + payload


def encode(samples: np.ndarray, bits: int, *, as_float: bool) -> bytes:
    """Interleave float samples in [-1, 1] (frames, channels) into little-endian sample bytes."""
    flat = np.asarray(samples, dtype=np.float64).reshape(-1)
    if as_float:
        return flat.astype("<f4" if bits == 32 else "<f8").tobytes()
    if bits == 8:
        return np.clip(np.round(flat * 128 + 128), 0, 255).astype(np.uint8).tobytes()
    scale = float(1 << (bits - 1))
    ints = np.clip(np.round(flat * scale), -scale, scale - 1).astype(np.int64)
    if bits == 16:
        return ints.astype("<i2").tobytes()
    if bits == 32:
        return ints.astype("<i4").tobytes()
    as_u32 = (ints & 0xFFFFFF).astype("<u4")  # 24-bit: low three bytes of each value
    return as_u32.view(np.uint8).reshape(-1, 4)[:, :3].tobytes()


def wav_bytes(
    samples: np.ndarray,
    rate: int,
    bits: int = 16,
    *,
    as_float: bool = False,
    extensible: bool = False,
    before_fmt: bytes = b"",
) -> bytes:
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim == 1:
        samples = samples[:, None]
    channels = samples.shape[1]
    base_tag = IEEE_FLOAT if as_float else PCM
    fmt = (
        fmt_body(EXTENSIBLE, channels, rate, bits, extensible_tag=base_tag)
        if extensible
        else fmt_body(base_tag, channels, rate, bits)
    )
    return riff(before_fmt, chunk(b"fmt ", fmt), chunk(b"data", encode(samples, bits, as_float=as_float)))


def sine(seconds: float, rate: int, freq: float = 440.0, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(round(seconds * rate))) / rate
    return amplitude * np.sin(2 * np.pi * freq * t)


def dominant_frequency(audio: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(audio * np.hanning(audio.size)))
    return float(np.fft.rfftfreq(audio.size, 1.0 / rate)[int(np.argmax(spectrum))])
