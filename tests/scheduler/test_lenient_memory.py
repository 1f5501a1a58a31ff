"""NUMAAlignment and the Static memory manager on kubelets that enforce no alignment.

Under the Topology Manager policies ``none`` and ``best-effort`` the kubelet admits any merged
hint, but the Static memory manager must still place each container's memory on a valid set of
NUMA nodes: one zone outside any multi-NUMA group, or several zones none of which holds a
single-NUMA allocation (upstream ``calculateHints``). Where it finds none the kubelet refuses the
pod with an UnexpectedAdmissionError. Containers are allocated one after the other, each on its
best hint (the lowest zone that holds it), so a later container may find no valid set left. The
batch filter, its few-rows form and the exact per-node filter (the replica's trial admission)
refuse such pods alike; on random kubelets and fills the vector forms refuse nothing the replica
admits.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tests.scheduler.numa_verdicts import GI, filled_container_scope_node, numa_verdicts, static_cpu_node
from tests.scheduler.strategies import NodeShape, node_shapes
from toposched.workload import Container, Pod


def _pod(name: str, *memory: int, cpu: int = 1000) -> Pod:
    """A Guaranteed pod of one container per amount of memory (``cpu`` millicores each)."""
    return Pod(name, uid=name, containers=tuple(Container(f"c{i}", limits={"cpu": cpu, "memory": amount})
                                                for i, amount in enumerate(memory)))


@pytest.mark.parametrize(("policy", "scope", "cpu_manager"), [("none", "container", "static"), ("none", "pod", "static"),
                                                              ("best-effort", "container", "none")])
def test_a_later_container_finds_no_valid_memory_set(policy: str, scope: str, cpu_manager: str) -> None:
    cluster = static_cpu_node(policy=policy, scope=scope, cpu_manager=cpu_manager)
    # c0's 20 GiB take NUMA 0 (about 30 GiB allocatable), c1's 20 GiB NUMA 1 (32): both now hold
    # single-NUMA allocations, so 13 GiB for c2 fit no zone and no multi-NUMA set.
    assert numa_verdicts(cluster, _pod("p", 20 * GI, 20 * GI, 13 * GI)) == (False, False, False)
    assert numa_verdicts(cluster, _pod("q", 20 * GI, 20 * GI, 8 * GI)) == (True, True, True)


def test_the_first_container_finds_no_valid_memory_set() -> None:
    cluster = static_cpu_node(policy="best-effort", cpu_manager="static")
    cluster.add_bound_pod(_pod("a", 20 * GI, 20 * GI), "n", now=0.0)  # one container on each NUMA node
    # 13 GiB fit neither zone, and both hold single-NUMA allocations: no set is valid, whatever the
    # CPU manager's hints merge into.
    assert numa_verdicts(cluster, _pod("p", 13 * GI)) == (False, False, False)
    assert numa_verdicts(cluster, _pod("q", 8 * GI)) == (True, True, True)


def test_pod_scope_under_best_effort_is_left_to_the_replica() -> None:
    # Each container is allocated on the pod's merged hint (here one wide enough for all three),
    # which the vector forms do not read.
    cluster = static_cpu_node(policy="best-effort", scope="pod", cpu_manager="none")
    assert numa_verdicts(cluster, _pod("p", 20 * GI, 20 * GI, 13 * GI)) == (True, True, True)


_MEMORY = st.sampled_from([GI, 4 * GI, 8 * GI, 12 * GI, 20 * GI, 28 * GI, 40 * GI])


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(shape=node_shapes(max_numa=4), policy=st.sampled_from(["none", "best-effort"]), scope=st.sampled_from(["container", "pod"]),
       fill=st.lists(st.lists(_MEMORY, min_size=1, max_size=2), max_size=3), memory=st.lists(_MEMORY, min_size=1, max_size=3),
       init=st.booleans())
def test_the_vector_forms_refuse_only_what_the_kubelet_refuses_without_enforced_alignment(
        shape: NodeShape, policy: str, scope: str, fill: list[list[int]], memory: list[int], init: bool) -> None:
    """On kubelets with the Static memory manager whose Topology Manager is ``none`` or
    ``best-effort`` (every machine and CPU manager of the strategies), after bound pods: the batch and
    few-rows forms agree, and refuse only pods the replica refuses."""
    assume(shape.config.memory_manager_policy == "Static")
    cluster = filled_container_scope_node(shape, policy, (_pod(f"f{i}", *amounts) for i, amounts in enumerate(fill)),
                                          scope=scope)
    pod = _pod("p", *memory)
    if init:
        pod = Pod("p", uid="p", containers=pod.containers,
                  init_containers=(Container("init", limits={"cpu": 1000, "memory": memory[0]}),))
    batch, few, exact = numa_verdicts(cluster, pod)
    event(f"exact {exact}, batch {batch}")
    assert batch == few
    assert exact <= batch  # a necessary condition: nothing the kubelet admits is refused
