"""The fuzz harness itself: each way a reader can misbehave in a child is caught and named, and mutations are
deterministic."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fuzz import harness

TARGET = "tests.fuzz.harness_targets:act"
LIMITS = harness.Limits(
    memory_bytes=1 << 30,
    rss_bytes=128 << 20,
    file_bytes=1 << 20,
    disk_left_bytes=1 << 19,
    seconds=300,
    cpu_seconds=2,
)


@pytest.fixture(scope="module")
def fuzzer() -> Iterator[harness.Fuzzer]:
    with harness.Fuzzer(TARGET, "input.bin", LIMITS) as running:
        yield running


def outcome(fuzzer: harness.Fuzzer, word: bytes) -> harness.Outcome:
    return fuzzer.run_case(harness.Case(0, "fixed", word))


def test_a_result_and_a_refusal_are_accepted(fuzzer: harness.Fuzzer) -> None:
    ok = outcome(fuzzer, b"fine")
    assert (ok.kind, ok.value) == (harness.RESULT, "fine") and fuzzer.check(ok) is None
    refused = outcome(fuzzer, b"refuse")
    assert refused.kind == harness.REFUSED and refused.error_type == "ModelError"
    assert refused.message.startswith("input.bin is refused") and refused.exit_code == 2
    assert fuzzer.check(refused) is None


@pytest.mark.parametrize(
    ("word", "kind", "text"),
    [
        (b"raise", harness.ERROR, "TypeError"),
        (b"segv", harness.SIGNAL, "SIGSEGV"),
        (b"spin", harness.SIGNAL, "SIGXCPU"),
        (b"allocate", harness.ERROR, "MemoryError"),
        (b"write", harness.SIGNAL, "SIGXFSZ"),
    ],
)
def test_each_misbehaviour_is_a_finding(fuzzer: harness.Fuzzer, word: bytes, kind: str, text: str) -> None:
    seen = outcome(fuzzer, word)
    assert seen.kind == kind
    problem = fuzzer.check(seen)
    assert problem is not None and text in problem


def test_memory_and_disk_past_their_bounds_are_findings(fuzzer: harness.Fuzzer) -> None:
    touched = outcome(fuzzer, b"touch")
    assert touched.kind == harness.RESULT and touched.extra_rss_bytes > 200 << 20
    assert "peak RSS" in (fuzzer.check(touched) or "")
    left = outcome(fuzzer, b"leave")
    assert (
        left.disk_left_bytes == 1 << 20 and left.left == ("left",) and "on disk" in (fuzzer.check(left) or "")
    )


def test_a_hang_is_stopped_at_the_deadline() -> None:
    limits = harness.Limits(seconds=1, cpu_seconds=600)
    with harness.Fuzzer(TARGET, "input.bin", limits) as short:
        seen = short.run_case(harness.Case(0, "fixed", b"spin"))
    assert seen.kind == harness.TIMEOUT


def test_cases_are_deterministic_and_share_the_mutators() -> None:
    original = bytes(range(256)) * 4
    first = list(harness.cases(7, 40, original, harness.GENERIC))
    again = list(harness.cases(7, 40, original, harness.GENERIC))
    assert first == again
    assert [c.mutator for c in first[:4]] == ["flip_bytes", "extreme_field", "truncate", "splice"]
    assert all(c.data != original for c in first if c.mutator != "extreme_field")
    assert list(harness.cases(8, 40, original, harness.GENERIC)) != first
    assert harness.named("custom", harness.truncate).__name__ == "custom"
