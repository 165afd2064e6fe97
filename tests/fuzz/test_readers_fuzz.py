"""A fixed fuzz slice per reader of files from outside (issue 37): each mutated input must end in an exact read
(checked against the format's own library where one exists) or a clean refusal naming the file, with no signal,
no hang, and memory and disk within bounds. ``tests/bench/fuzz_readers.py`` runs the long version."""

from __future__ import annotations

import sys

import pytest

from tests.fuzz import harness, reader_specs

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the harness forks and waits on pidfds")

SEED = 37
SLICES = {  # cases per reader in CI; every mutator gets its share (case i uses mutator i % len(mutators))
    "gguf": 160,
    "safetensors": 180,
    "phonon-container": 180,
    "extract_phonon_archive": 110,
    "import_phonon_archive": 33,
    "journal": 120,
    "settings": 60,
}


@pytest.mark.parametrize("name", list(SLICES))
def test_a_fixed_slice_of_mutations_ends_in_a_read_or_a_clean_refusal(name: str) -> None:
    with reader_specs.campaign(name) as spec:
        report = reader_specs.run(spec, SEED, SLICES[name])
    assert report.problems == [], report.summary()
    counts = report.counts()
    assert set(counts) <= {harness.RESULT, harness.REFUSED} and sum(counts.values()) == SLICES[name]
    if name not in ("journal", "settings"):  # these two never refuse
        assert counts.get(harness.REFUSED, 0) > 0, report.summary()  # the slice reaches the checks


def test_the_original_inputs_read_exactly() -> None:
    for name in SLICES:
        with (
            reader_specs.campaign(name) as spec,
            harness.Fuzzer(spec.target, spec.input_name, reader_specs.LIMITS) as fuzzer,
        ):
            outcome = fuzzer.run_case(harness.Case(0, "original", spec.original))
        assert outcome.kind == harness.RESULT, (name, outcome.message)
        assert spec.judge(harness.Case(0, "original", spec.original), outcome) is None, name
