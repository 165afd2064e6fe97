"""The benchmarks' busy-machine verdict (tests/bench/machine.py): their own threads are not "another load"."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.bench import machine


def test_the_load_average_decides_before_a_run_and_outside_cpu_after_it() -> None:
    assert machine.busy_warning(1.9, 2, []) is not None  # before a run: the load is someone else's
    assert machine.busy_warning(1.9, 2, [], outside=(0.02, 0.0)) is None  # after: mostly the bench's own
    warning = machine.busy_warning(0.1, 2, [], outside=(0.6, 0.0))
    assert warning is not None and "0.60 cores used outside" in warning
    assert machine.busy_warning(0.1, 2, [], outside=(0.0, 0.4)) is not None  # another guest took the CPU


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_child_burning_cpu_counts_as_the_benchmark_s_own() -> None:
    outside = machine.OutsideCpu()
    child = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 0.8\nwhile time.time() < end: pass"])
    time.sleep(0.4)  # sampled while the child is alive, as run_workers samples its workers
    mid = outside.cores()
    child.wait()
    end = outside.cores()  # and after it was reaped
    assert mid is not None and end is not None
    assert mid[0] < 0.5 and end[0] < 0.5, (mid, end)
    header = machine.machine_header(2, interval=0.05, outside=end)
    assert "CPU used outside this benchmark" in header
