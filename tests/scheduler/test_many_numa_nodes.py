"""Nodes with more NUMA nodes than the table first had zone slots for (16-NUMA machines, with the
Topology Manager's ``max-allowable-numa-nodes``) are read whole.

The table once kept the first eight NUMA nodes of a node only, so a pod that only a later NUMA
node could hold was refused by the vector forms while the kubelet admitted it. The zone slots now
grow to the node with the most NUMA nodes, also when it joins a cluster already scheduled.
"""

from __future__ import annotations

from tests.scheduler.numa_verdicts import GI, numa_verdicts, static_cpu_node
from toposched.scheduler.profile_setup import load_profile
from toposched.scheduler.scheduler import Scheduler
from toposched.workload import Container, Pod


def _pod(name: str, cpus: int) -> Pod:
    return Pod(name, uid=name, containers=(Container("c", limits={"cpu": cpus * 1000, "memory": GI}),))


def _fill_first_eight(cluster, node: str = "n") -> None:
    """Take every CPU of NUMA nodes 0-7 (8 CPUs each, CPU 0 reserved) with pods of one zone each."""
    for i in range(8):
        cluster.add_bound_pod(_pod(f"{node}-f{i}", 7 if i == 0 else 8), node, now=0.0)


def test_a_pod_only_a_later_numa_node_holds_is_not_refused() -> None:
    cluster = static_cpu_node(16)
    _fill_first_eight(cluster)
    assert cluster.zone_available("n")[7]["cpu"] == 0 and cluster.zone_available("n")[9]["cpu"] == 8000
    assert numa_verdicts(cluster, _pod("p", 4)) == (True, True, True)
    assert numa_verdicts(cluster, _pod("q", 9)) == (False, False, False)  # no NUMA node has 9 CPUs


def test_the_zone_slots_grow_when_a_larger_node_joins() -> None:
    cluster = static_cpu_node(16)
    _fill_first_eight(cluster)
    small = static_cpu_node(4)  # a 4-NUMA node "n", renamed into the first cluster below
    scheduler = Scheduler(small, load_profile("toposched"))
    assert scheduler.schedule(_pod("a", 2), now=0.0).node == "n"
    assert scheduler.table.max_zones == 8
    record = cluster.nodes["n"]
    small.set_node(record.spec.__class__("big"), machine=record.model.machine, kubelet_config=record.model.config)
    for i in range(8):
        small.add_bound_pod(_pod(f"big-f{i}", 7 if i == 0 else 8), "big", now=0.0)
    for i in range(3):  # NUMA nodes 1-3 of the 4-NUMA node; NUMA node 0 keeps 5 CPUs
        small.add_bound_pod(_pod(f"n-f{i}", 8), "n", now=0.0)
    decision = scheduler.schedule(_pod("p", 8), now=1.0)  # only NUMA nodes 8-15 of "big" hold 8 CPUs
    assert scheduler.table.max_zones == 16
    assert decision.node == "big" and min(decision.placement.numa_nodes) >= 8
