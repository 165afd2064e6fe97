"""Per-node plans of the product callbacks (native/blas.py, native/int8.py), worked out once per graph.

A custom-op callback used to redo, on every compute and every thread, what never changes while its graph lives:
read the node's arguments, look up three tensors' data addresses, split the output between the threads and
(int8) bind ONNX Runtime's inputs and outputs. That Python work is a fixed cost of every call, per product node
and thread, whatever the clip length (tests/bench/README.md, "Fixed per-call cost"). A plan keeps it: the
addresses are placed once when the graph is allocated and stay put until the graph is freed, when its builder
forgets its nodes. Nodes are known by a serial number the plans hand out (a struct's address may be reused by a
later graph; a serial is never reused), so a plan can never outlive the node it was made for.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Generic, TypeVar

Plan = TypeVar("Plan")
# Column panels of a weight are whole multiples of this many output columns (full SIMD panels for MLAS's kernels).
PANEL_ALIGN = 64


class NodePlans(Generic[Plan]):
    """Plans by node serial and (thread index, thread count); at most ``max_nodes`` nodes are kept (beyond that
    everything is dropped and made again on the next compute, so a forgotten ``forget`` cannot grow memory)."""

    def __init__(self, max_nodes: int = 16384) -> None:
        self.max_nodes = max_nodes
        self._serials = itertools.count(1)
        self._plans: dict[int, dict[tuple[int, int], Plan]] = {}

    def new_serial(self) -> int:
        return next(self._serials)

    def get(self, serial: int, ith: int, nth: int) -> Plan | None:
        per_thread = self._plans.get(serial)
        return None if per_thread is None else per_thread.get((ith, nth))

    def put(self, serial: int, ith: int, nth: int, plan: Plan) -> None:
        if serial not in self._plans and len(self._plans) >= self.max_nodes:
            self._plans.clear()
        self._plans.setdefault(serial, {})[(ith, nth)] = plan

    def plan_for(
        self, args: Any, dst: int, ith: int, nth: int, make: Callable[[Any, int, int, int], Plan]
    ) -> Plan:
        """Thread ``ith`` of ``nth``'s plan for the node whose arguments ``args`` (a struct with a ``serial``)
        are, made by ``make(args, dst, ith, nth)`` on its first compute."""
        plan = self.get(args.serial, ith, nth)
        if plan is None:
            plan = make(args, dst, ith, nth)
            self.put(args.serial, ith, nth, plan)
        return plan

    def forget(self, serial: int) -> None:
        self._plans.pop(serial, None)

    def __len__(self) -> int:
        return len(self._plans)


def weight_panels(n: int, threads: int) -> int:
    """Column panels for a weight of ``n`` output columns (int8 or packed f32) on a backend of ``threads`` threads:
    one per thread when ``n`` splits into whole ``PANEL_ALIGN``-column panels, else 1."""
    return threads if threads > 1 and n % (threads * PANEL_ALIGN) == 0 else 1


def thread_units(
    rows: int, panels: int, ith: int, nth: int, row_split_from: int | None = None
) -> list[tuple[int, int, int]]:
    """Thread ``ith`` of ``nth``'s share of a product whose weight lies in ``panels`` column panels, as
    (panel, first row, row count) units: whole panels when there are at least as many panels as threads (and
    fewer rows than ``row_split_from``), else a share of the rows through every panel (none: no work)."""
    if nth <= panels and (row_split_from is None or rows < row_split_from):
        return [(panel, 0, rows) for panel in range(ith, panels, nth)]
    share = -(-rows // nth)
    first = ith * share
    count = min(rows, first + share) - first
    return [(panel, first, count) for panel in range(panels)] if count > 0 else []
