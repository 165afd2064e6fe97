"""The benchmarks' busy-machine verdict (tests/bench/machine.py): their own threads are not "another load"."""

from __future__ import annotations

import subprocess
import sys

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
    """The child burns 0.5 s of CPU *time* (not wall time), so the check holds however busy the machine is: those
    seconds are the benchmark's own, while the child is alive and after it was reaped."""
    start = machine.OutsideCpu._sample()
    burn = "import time\nwhile time.process_time() < 0.5: pass\nprint('done', flush=True)\ntime.sleep(5)"
    child = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "done\n"
    alive = (
        machine.OutsideCpu._sample()
    )  # sampled while the child is alive, as run_workers samples its workers
    child.kill()
    child.wait()
    reaped = machine.OutsideCpu._sample()
    assert start is not None and alive is not None and reaped is not None
    assert alive[3] - start[3] >= 0.45 and reaped[3] - start[3] >= 0.45, (start, alive, reaped)
    end = machine.OutsideCpu().cores()
    header = machine.machine_header(2, interval=0.05, outside=end)
    assert "CPU used outside this benchmark" in header
