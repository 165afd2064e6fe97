"""A fixed fuzz slice per reader of files from outside (issue 37): each mutated input must end in an exact read
(checked against the format's own library where one exists) or a clean refusal naming the file, with no signal,
no hang, and memory and disk within bounds. ``tests/bench/fuzz_readers.py`` runs the long version."""

from __future__ import annotations

import shutil
import sys

import pytest

from tests.fuzz import harness, reader_specs

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the harness forks and waits on pidfds")

SEED = 37
SLICES = {  # cases per reader in CI; case i uses mutator i % len(mutators), so each gets an equal share
    "gguf": 120,  # 8 mutators
    "safetensors": 135,  # 9
    "phonon-container": 135,  # 9
    "extract_phonon_archive": 88,  # 11
    "import_phonon_archive": 22,  # 11, the slowest: a whole import per case
    "journal": 90,  # 6
    "settings": 50,  # 5
    "audio-wav-pcm16": 80,  # 8
    "audio-wav-float": 80,  # 8
    "audio-wav-extensible": 80,  # 8
    "audio-wav-ulaw": 80,  # 8
    "audio-flac": 96,  # 8
    "audio-ogg-vorbis": 100,  # 10
    "audio-ogg-opus": 100,  # 10
    "audio-mp3": 80,  # 8
    "audio-m4a": 40,  # 8; each case runs ffprobe and ffmpeg
    "audio-webm": 40,  # 8
}
NEEDS_FFMPEG = {"audio-m4a", "audio-webm"}


@pytest.mark.parametrize("name", list(SLICES))
def test_a_fixed_slice_of_mutations_ends_in_a_read_or_a_clean_refusal(name: str) -> None:
    if name in NEEDS_FFMPEG and shutil.which("ffmpeg") is None:
        pytest.skip("needs ffmpeg (.ci/run installs it)")
    with (
        reader_specs.campaign(name) as spec,
        harness.Fuzzer(spec.target, spec.input_name, reader_specs.LIMITS) as fuzzer,
    ):
        original = harness.Case(-1, "original", spec.original)
        outcome = fuzzer.run_case(original)  # the valid file reads exactly
        assert outcome.kind == harness.RESULT and spec.judge(original, outcome) is None, outcome.message
        report = fuzzer.run(harness.cases(SEED, SLICES[name], spec.original, spec.mutators), spec.judge)
    assert report.problems == [], report.summary()
    counts = report.counts()
    assert set(counts) <= {harness.RESULT, harness.REFUSED} and sum(counts.values()) == SLICES[name]
    if name not in ("journal", "settings"):  # these two never refuse
        assert counts.get(harness.REFUSED, 0) > 0, report.summary()  # the slice reaches the checks
