"""The long ``.nemo`` / torch zip fuzz run: the CI slice (tests/fuzz/test_fuzz_nemo.py) continued for as many
mutations as asked, each imported through the store in a limited child (tests/fuzz/harness.py).

    .venv/bin/python tests/bench/fuzz_long.py --count 3000            # seed 37, cases 0..2999
    .venv/bin/python tests/bench/fuzz_long.py --seed 5 --start 3000 --count 1000

Prints the machine, the outcome counts overall and per mutator, the peak extra RSS, and every problem (a crash,
a hang, memory or disk past the bounds, a raw exception, an import of bytes the file does not hold, a refusal that
names a temporary path or leaves something behind). Exits 1 when there is a problem.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "bench"))

from machine import machine_header  # noqa: E402

from tests.fuzz import harness  # noqa: E402
from tests.fuzz.nemo_fuzz import run_slice  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=3000)
    args = parser.parse_args()
    print(machine_header(threads=1))
    started = time.monotonic()

    def progress(report: harness.Report) -> None:
        took = time.monotonic() - started
        print(f"  {len(report.outcomes)} cases, {took:.0f} s: {report.counts()}", flush=True)

    report = run_slice(args.seed, args.count, args.start, progress)
    print(
        f"seed {args.seed}, cases {args.start}..{args.start + args.count - 1}, {time.monotonic() - started:.0f} s"
    )
    print(report.summary())
    for problem in report.problems[20:]:
        print(f"PROBLEM {problem}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
