from __future__ import annotations

from inference.native.node_plans import NodePlans


def test_plans_are_kept_per_node_and_thread_until_forgotten() -> None:
    plans: NodePlans[str] = NodePlans()
    a, b = plans.new_serial(), plans.new_serial()
    assert a != b
    plans.put(a, 0, 2, "a0")
    plans.put(a, 1, 2, "a1")
    plans.put(b, 0, 2, "b0")
    assert (plans.get(a, 0, 2), plans.get(a, 1, 2), plans.get(b, 0, 2)) == ("a0", "a1", "b0")
    assert plans.get(a, 0, 3) is None  # another thread count is another split
    plans.forget(a)
    assert plans.get(a, 0, 2) is None and plans.get(b, 0, 2) == "b0" and len(plans) == 1


def test_more_nodes_than_the_bound_start_over_instead_of_growing() -> None:
    plans: NodePlans[int] = NodePlans(max_nodes=3)
    serials = [plans.new_serial() for _ in range(4)]
    for serial in serials[:3]:
        plans.put(serial, 0, 1, serial)
    plans.put(serials[0], 1, 1, 0)  # a known node: no reset
    assert len(plans) == 3
    plans.put(serials[3], 0, 1, 3)
    assert len(plans) == 1 and plans.get(serials[3], 0, 1) == 3 and plans.get(serials[0], 0, 1) is None
