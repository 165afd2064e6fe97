"""A fixed slice of the ``.nemo`` fuzz run (tests/fuzz/nemo_fuzz.py): seed 37, the first 132 mutations, six for
each mutator (generic ones on the whole file, gzipped or not, and on the checkpoint's pickle, pickle opcodes and BUILDs, zip
structure and methods, tar headers, member kinds and paths, config edits). The long run is
``tests/bench/fuzz_long.py``."""

from __future__ import annotations

from tests.fuzz import harness
from tests.fuzz.nemo_crafts import nemo_mutators
from tests.fuzz.nemo_fuzz import run_slice

SEED = 37
COUNT = 6 * len(nemo_mutators())


def test_a_fixed_slice_of_mutated_nemo_files_imports_exactly_or_is_refused_cleanly() -> None:
    report = run_slice(SEED, COUNT)
    assert len(report.outcomes) == COUNT
    assert report.problems == [], report.summary()
    counts = report.counts()
    assert counts.get(harness.REFUSED, 0) > COUNT // 3, report.summary()  # the mutations do reach the checks
    assert counts.get(harness.RESULT, 0) > 0, report.summary()
