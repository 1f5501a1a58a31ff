"""NUMAAlignment and the Static memory manager's groups, on kubelets enforcing restricted.

Upstream ``calculateHints`` offers a container memory on one NUMA node only where that node is in
no multi-NUMA group, and on several only where none of them holds a single-NUMA allocation (or
they are exactly an existing group). A kubelet enforcing ``restricted`` admits only a preferred
merged hint, so a request one NUMA node's allocatable memory could hold must find one such node
with the memory free. Free memory inside a group does not count for it: the batch filter, its
few-rows form and the replica's trial admission must all refuse the node.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from tests.scheduler.numa_verdicts import numa_verdicts
from tests.scheduler.test_decisions_identical import _bench
from toposched.kubelet import KubeletConfig
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.framework import CycleState, registry
from toposched.scheduler.nodes import NodeSpec
from toposched.scheduler.plugins.numa import _memory_sets_per_scope, aligned_request
from toposched.scheduler.profile_setup import load_profile
from toposched.scheduler.scheduler import Scheduler
from toposched.scheduler.table import NodeTable
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod

GI = 2**30


def _cluster(scope: str) -> Cluster:
    """One node: 3 NUMA nodes of 8 CPUs and 32 GiB, static CPU and Static memory managers, restricted."""
    machine = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": 0, "numa": c // 8} for c in range(24)],
                                     memory_per_numa=32 * GI)
    config = KubeletConfig(topology_manager_policy="restricted", topology_manager_scope=scope, cpu_manager_policy="static",
                           reserved_system_cpus=CPUSet([0]), memory_manager_policy="Static",
                           kube_reserved={"memory": GI}, reserved_memory={0: {"memory": GI + 100 * 2**20}})
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)
    return cluster


def _pod(name: str, cpus: int, memory: int) -> Pod:
    requests = {"cpu": cpus * 1000, "memory": memory}
    return Pod(name, uid=name, containers=(Container("c", requests=requests, limits=requests),))


def _admit(cluster: Cluster, pod: Pod, numa_nodes: set[int]) -> None:
    admission = cluster.nodes["n"].model.admit(pod)
    assert admission.admitted, admission.message
    assert set(admission.containers["c"].hint.numa_nodes) == numa_nodes


def _grouped(scope: str) -> Cluster:
    """NUMA node 0 holds a single-NUMA allocation and little free memory; NUMA nodes 1 and 2 are one group."""
    cluster = _cluster(scope)
    _admit(cluster, _pod("single", 2, 26 * GI), {0})
    # 12 CPUs and 40 GiB: two NUMA nodes for both; node 0 holds memory, so the pair is 1 and 2.
    _admit(cluster, _pod("pair", 12, 40 * GI), {1, 2})
    return cluster


@pytest.mark.parametrize("scope", ["container", "pod"])
def test_free_memory_inside_a_group_does_not_admit_a_one_node_request(scope: str) -> None:
    cluster = _grouped(scope)
    table = NodeTable(cluster)
    table.refresh()
    row = table.index["n"]
    assert table.zone_split()[:3, row].tolist() == [False, True, True]
    assert table.zone_held()[:3, row].tolist() == [True, False, False]
    # 8 GiB fits any NUMA node's allocatable memory, so only one-node hints are preferred: node 0 has
    # too little free, and nodes 1 and 2 (24 GiB free between them) are a group.
    assert numa_verdicts(cluster, _pod("asks", 2, 8 * GI)) == (False, False, False)
    # Memory node 0 still has free is offered there.
    assert numa_verdicts(cluster, _pod("fits", 2, 3 * GI)) == (True, True, True)


def test_a_request_wider_than_any_node_may_use_the_zones_without_single_allocations() -> None:
    cluster = _cluster("container")
    _admit(cluster, _pod("single", 2, 26 * GI), {0})
    # 40 GiB needs two NUMA nodes; 1 and 2 hold nothing: admitted there.
    assert numa_verdicts(cluster, _pod("wide", 12, 40 * GI)) == (True, True, True)
    _admit(cluster, _pod("other", 2, 6 * GI), {1})  # more than node 0 has free
    # Now every NUMA node holds a single-NUMA allocation: no set of two may be offered.
    assert numa_verdicts(cluster, _pod("wide", 12, 40 * GI)) == (False, False, False)


def test_nodes_without_a_static_memory_manager_have_no_groups() -> None:
    cluster = Cluster()
    machine = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": 0, "numa": c // 8} for c in range(16)],
                                     memory_per_numa=32 * GI)
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=KubeletConfig(cpu_manager_policy="static",
                                                                                  reserved_system_cpus=CPUSet([0])))
    table = NodeTable(cluster)
    table.refresh()
    assert not table.zone_split().any() and not table.zone_held().any()


@pytest.mark.parametrize("seed", [1, 2])
def test_on_filled_clusters_every_node_the_rule_refuses_the_kubelet_refuses(seed: int) -> None:
    # 16 nodes of the wide mix's hardware with Static memory managers, filled with the wide mix's pods
    # (up to 60 GiB a container, more than some NUMA nodes hold: under restricted, groups form). For
    # more of its pods, every node the rule refuses (alone, as NUMAAlignment's batch form applies it),
    # the replica's trial admission refuses too, and the few-rows form agrees with the batch form.
    bench = _bench("realistic")
    rnd = random.Random(seed)
    cluster = Cluster()
    for n in range(16):
        machine = bench.wide_machine(*rnd.choice(bench.WIDE_SHAPES))
        config = KubeletConfig(topology_manager_policy="restricted", topology_manager_scope=rnd.choice(("container", "pod")),
                               cpu_manager_policy="static", reserved_system_cpus=CPUSet([0]),
                               memory_manager_policy="Static", kube_reserved={"memory": GI},
                               reserved_memory={0: {"memory": GI + 100 * 2**20}})
        cluster.set_node(NodeSpec(f"n{n}"), machine=machine, kubelet_config=config)
    scheduler = Scheduler(cluster, load_profile("toposched"))
    for i in range(160):
        pod = bench.make_pod_wide(i, rnd)
        if scheduler.schedule(pod, now=float(i)).node is not None:
            scheduler.bound(pod, now=float(i))
    plugin = registry.create("NUMAAlignment")
    table = scheduler.table
    table.refresh()
    rows = np.arange(table.size)
    policies, every = table.view("policy")[rows], table.view("topology")[rows] & table.view("mem_static")[rows]
    by_rule = 0
    for i in range(160, 400):
        pod = bench.make_pod_wide(i, rnd)
        state = CycleState(cluster=cluster)
        batch, _ = plugin.filter_all(state, pod, table, rows)
        few = plugin.filter_few(CycleState(cluster=cluster), pod, table, rows.tolist())
        assert [r is None for r in few] == batch.tolist()
        rule = np.ones(len(rows), dtype=bool)
        _memory_sets_per_scope(table, rows, aligned_request(state, pod), policies, every.copy(), rule)
        for row in np.flatnonzero(~rule).tolist():
            by_rule += 1
            assert not batch[row]
            name = table.names[row]
            assert not plugin.filter(CycleState(cluster=cluster), pod, cluster.nodes[name]).is_success, (name, pod.name)
    assert by_rule, "the rule refused no node: the test checks too little"
