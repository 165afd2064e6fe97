"""Which CPUs get bf16 weights by default: only where ggml's bf16 products run on the CPU's own instruction."""

from __future__ import annotations

import pytest

from inference.native.cpu_features import cpuinfo_flags, has_bf16_dot

ZEN4_CPUINFO = """processor\t: 0
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu sse2 avx avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_vbmi2
"""
ICELAKE_CPUINFO = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
flags\t\t: fpu sse2 avx avx2 avx512f avx512dq avx512bw avx512vl avx512_vbmi avx512_vnni avx512_bitalg
"""
ARM_CPUINFO = """processor\t: 0
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm bf16
"""


@pytest.mark.parametrize(
    ("machine", "cpuinfo", "compiled_bf16", "expected"),
    [
        ("x86_64", ZEN4_CPUINFO, True, True),
        ("AMD64", ZEN4_CPUINFO, False, False),  # ggml built without it: emulated, never measured
        ("x86_64", ICELAKE_CPUINFO, True, False),  # a build for a BF16 CPU running on one without
        ("x86_64", ARM_CPUINFO, True, True),  # no flags listed (not Linux): what ggml was built for
        ("aarch64", ARM_CPUINFO, True, False),  # ARM's bf16 products were not measured
    ],
)
def test_bf16_weights_are_preferred_only_where_the_cpu_has_the_bf16_dot_product(
    machine, cpuinfo, compiled_bf16, expected
):
    assert has_bf16_dot(machine, cpuinfo_flags(cpuinfo), compiled_bf16) is expected
