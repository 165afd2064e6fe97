"""The long fuzz run of the readers of files from outside (issue 37): the same campaigns, seed and judges as
``tests/fuzz/test_readers_fuzz.py``, many more cases (the test runs cases 0..N-1 of the same sequence).

Run:  nice -n 10 .venv/bin/python tests/bench/fuzz_readers.py [--count 3000] [--seed 37] [--only gguf,journal]

Prints the machine header, then per reader the outcome counts (result = an exact read, refused = a clean
CaptioneerError), per mutator, the peak extra RSS and the problems found (none expected). Exits 1 on a problem.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.machine import machine_header  # noqa: E402
from tests.fuzz import harness, reader_specs  # noqa: E402
from tests.fuzz.test_readers_fuzz import SEED  # noqa: E402

CHUNK = 250  # cases per report: a report keeps every case's input, which for an archive is a megabyte


def run_long(spec: reader_specs.Campaign, seed: int, count: int) -> tuple[harness.Report, str]:
    """Cases 0..count-1 in chunks; the first chunk's report with every chunk's problems, and the totals."""
    kinds: collections.Counter[str] = collections.Counter()
    by_mutator: dict[str, collections.Counter[str]] = {}
    problems: list[str] = []
    peak = 0
    for start in range(0, count, CHUNK):
        report = reader_specs.run(spec, seed, min(CHUNK, count - start), start)
        kinds.update(report.counts())
        for name, counts in report.by_mutator().items():
            by_mutator.setdefault(name, collections.Counter()).update(counts)
        problems += report.problems
        peak = max([peak, *(o.extra_rss_bytes for _, o in report.outcomes)])
    lines = [f"{sum(kinds.values())} cases: {dict(kinds)}"]
    lines += [f"  {name}: {dict(counts)}" for name, counts in sorted(by_mutator.items())]
    lines.append(f"  peak extra RSS {peak >> 20} MiB")
    lines += [f"PROBLEM {p}" for p in problems[:20]]
    return harness.Report(problems=problems), "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000, help="cases per reader")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--only", default="", help="comma-separated readers: " + ", ".join(reader_specs.CAMPAIGNS)
    )
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(reader_specs.CAMPAIGNS)
    print(machine_header(threads=1))
    failed = False
    for name in names:
        started = time.monotonic()
        with reader_specs.campaign(name) as spec:
            report, summary = run_long(spec, args.seed, args.count)
        print(f"\n== {name}: seed {args.seed}, {time.monotonic() - started:.0f} s")
        print(summary)
        failed = failed or bool(report.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
