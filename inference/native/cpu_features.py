"""The running CPU's features, for the kernel choices ggml does not make for us (int8 weight products, bf16
storage)."""

from __future__ import annotations

from pathlib import Path

X86_MACHINES = ("x86_64", "amd64", "i386", "i686", "x86")
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni"})
BF16_DOT_FLAG = "avx512_bf16"
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


def has_bf16_dot(machine: str, flags: frozenset[str] | None, compiled_bf16: bool) -> bool:
    """Whether ggml's bf16 products run on the CPU's own bf16 dot-product instruction (AVX512-BF16), so that bf16
    weights are faster than q8_0 ones (tests/bench/README.md, "A bf16 tower by default"). Elsewhere ggml emulates
    it, which was never measured: x86 only, and only where ggml was built with it and the CPU (where the OS says)
    has it."""
    if machine.lower() not in X86_MACHINES or not compiled_bf16:
        return False
    return flags is None or BF16_DOT_FLAG in flags
