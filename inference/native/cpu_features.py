"""The running CPU's features, for the kernel choices ggml does not make for us (int8 weight products)."""

from __future__ import annotations

from pathlib import Path

X86_MACHINES = ("x86_64", "amd64", "i386", "i686", "x86")
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni"})
CPUINFO = Path("/proc/cpuinfo")


def cpuinfo_flags(text: str) -> frozenset[str] | None:
    """The first processor's ``flags`` in /proc/cpuinfo text; None when there is none (ARM lists ``Features``)."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return frozenset(value.split())
    return None


def read_cpuinfo_flags(path: Path = CPUINFO) -> frozenset[str] | None:
    """The running CPU's flags where the OS lists them (Linux), else None."""
    try:
        return cpuinfo_flags(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def has_vnni(machine: str, flags: frozenset[str] | None, compiled_vnni: bool) -> bool:
    """Whether int8 products may use 8-bit weights without 16-bit saturation (native/int8.py).

    ARM's dot-product kernels accumulate in 32 bits. On x86 the running CPU's flags decide where known; else
    what ggml was compiled for (a native build's CPU).
    """
    if machine.lower() not in X86_MACHINES:
        return True
    if flags is not None:
        return bool(VNNI_FLAGS & flags)
    return compiled_vnni
