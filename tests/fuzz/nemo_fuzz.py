"""The ``.nemo`` fuzz run shared by the CI slice (test_fuzz_nemo.py) and the long bench (tests/bench/fuzz_long.py):
mutations of the tiny ``.nemo`` imported through the store in a limited child, each judged exact or a clean
refusal that names the user's file and leaves nothing behind."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from tests.fuzz import harness
from tests.fuzz.nemo_crafts import nemo_mutators, tiny_nemo

TARGET = "tests.fuzz.nemo_target:store_import"
INPUT = "model.nemo"
LIMITS = harness.Limits(memory_bytes=768 << 20, rss_bytes=256 << 20, file_bytes=64 << 20, seconds=300)
_TEMPORARY = (".partial", "member-", ".tmp-", "/tmp/", "fuzz-")


def original_nemo() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        return tiny_nemo(Path(folder) / INPUT).read_bytes()


class NemoJudge:
    """An import must install exactly the tensors the file holds; a refusal must be a one-line CaptioneerError
    naming model.nemo, no temporary path, exit code 2 (1 only for a disk-space refusal), and nothing left."""

    def __init__(self, original: dict[str, bytes]) -> None:
        self.original = original

    def __call__(self, case: harness.Case, outcome: harness.Outcome) -> str | None:
        locks = [p for p in outcome.left if p.endswith(".lock")]
        temporary = [p for p in outcome.left if ".tmp-" in p or ".partial" in p]
        if locks or temporary:
            return f"left {locks + temporary}"
        if outcome.kind == harness.REFUSED:
            return self._refusal(outcome)
        tensors: dict[str, bytes] = outcome.value
        if set(tensors) != set(self.original):
            return f"installed other tensors: {sorted(set(tensors) ^ set(self.original))[:5]}"
        foreign = [n for n, blob in tensors.items() if blob != self.original[n] and blob not in case.data]
        if foreign:
            return f"installed bytes the file does not hold as {foreign[:5]}"
        return None

    @staticmethod
    def _refusal(outcome: harness.Outcome) -> str | None:
        message = outcome.message
        if INPUT not in message:
            return f"the refusal does not name {INPUT}: {message[:300]}"
        if any(mark in message for mark in _TEMPORARY):
            return f"the refusal names a temporary path: {message[:300]}"
        if "Traceback" in message or "\n" in message:
            return f"the refusal is not one line: {message[:300]}"
        if outcome.exit_code != 2 and not (
            outcome.error_type == "DiskSpaceError" and "unpacks to" in message
        ):
            return f"exit code {outcome.exit_code} ({outcome.error_type}): {message[:300]}"
        if any(p.startswith("home/models/fuzzed") for p in outcome.left):
            return f"a refused import installed something: {outcome.left[:5]}"
        return None


def run_slice(
    seed: int, count: int, start: int = 0, progress: Callable[[harness.Report], None] | None = None
) -> harness.Report:
    """Cases ``start`` .. ``start + count - 1``; ``progress`` sees the report after every 250 cases."""
    original = original_nemo()
    report = harness.Report()
    with harness.Fuzzer(TARGET, INPUT, LIMITS) as fuzzer:
        baseline = fuzzer.run_case(harness.Case(-1, "original", original))
        if baseline.kind != harness.RESULT:
            raise RuntimeError(f"the unmutated .nemo does not import: {baseline}")
        judge = NemoJudge(baseline.value)
        for first in range(start, start + count, 250):
            size = min(250, start + count - first)
            part = fuzzer.run(harness.cases(seed, size, original, nemo_mutators(), first), judge)
            report.outcomes += part.outcomes
            report.problems += part.problems
            if progress is not None:
                progress(report)
    return report
