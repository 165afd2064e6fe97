"""Print the token agreement of f16 / bf16 / q8_0 storage with the f32 reference on the tiny Parakeet fixtures.

    nice -n 10 .venv/bin/python tests/bench/parakeet_storage_agreement.py

Columns: token agreement (1 - Levenshtein / reference tokens, over all clips), clips with identical ids, frames
and durations, then per clip: edits/reference tokens, the smallest reference token margin, and the reference
margin around the first flipped token ("-" when nothing flipped). See tests/parakeet_tdt/storage_agreement.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parakeet_tdt"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.text_metrics

from storage_agreement import format_table, measure_all  # noqa: E402


def main() -> None:
    print(format_table(measure_all()))


if __name__ == "__main__":
    main()
