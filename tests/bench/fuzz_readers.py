"""The long fuzz run of the readers of files from outside (issue 37): the same campaigns, seed and judges as
``tests/fuzz/test_readers_fuzz.py``, many more cases (the test runs cases 0..N-1 of the same sequence).

Run:  nice -n 10 .venv/bin/python tests/bench/fuzz_readers.py [--count 3000] [--seed 37] [--only gguf,journal]

Prints the machine header, then per reader the outcome counts (result = an exact read, refused = a clean
CaptioneerError), per mutator, the peak extra RSS and the problems found (none expected). Exits 1 on a problem.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.machine import machine_header  # noqa: E402
from tests.fuzz import reader_specs  # noqa: E402
from tests.fuzz.test_readers_fuzz import SEED  # noqa: E402


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
            report = reader_specs.run(spec, args.seed, args.count)
        print(f"\n== {name}: seed {args.seed}, {time.monotonic() - started:.0f} s")
        print(report.summary())
        failed = failed or bool(report.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
