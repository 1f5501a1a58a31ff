"""NUMAAlignment and a container-scope kubelet that places a pod's containers one after the other.

At container scope the Topology Manager admits each container on its own, and the managers
allocate it before the next is asked for hints: under ``single-numa-node`` (and under
``restricted`` for containers one zone could hold) each container goes to the lowest zone that
holds it, and the next finds that zone less what it took. A regular init container's CPUs and
memory come back to the containers after it, which must stay in its zone while its CPUs are
reusable. Under ``restricted`` its memory also keeps every multi-NUMA memory hint out of that
zone, so a container forced there whose memory no zone could hold has no preferred hint.

Each traced case is refused by the batch filter, its few-rows form and the exact per-node filter
(the replica's trial admission) alike, and its neighbours are admitted by all three; on random
machines, kubelets and fills the vector forms refuse nothing the replica admits.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tests.scheduler.numa_verdicts import filled_container_scope_node, numa_verdicts, static_cpu_node
from tests.scheduler.strategies import NodeShape, node_shapes
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.plugins.numa import AlignedRequest
from toposched.workload import Container, Pod

GI = 2**30
MI = 2**20


def _cluster(numa: int = 2, policy: str = "single-numa-node", memory_manager: str = "Static") -> Cluster:
    """One container-scope node: ``numa`` NUMA nodes of 8 CPUs and 32 GiB (CPU 0 reserved), static CPU manager."""
    return static_cpu_node(numa, policy=policy, memory_manager=memory_manager)


def _pod(name: str, *apps: tuple[int, int], init: tuple[int, int] | None = None, sidecar: bool = False) -> Pod:
    """A Guaranteed pod: app containers of (millicores, memory), maybe one init container (a sidecar if asked)."""
    inits = () if init is None else (Container("init", limits={"cpu": init[0], "memory": init[1]},
                                               restart_policy="Always" if sidecar else None),)
    return Pod(name, uid=name, init_containers=inits,
               containers=tuple(Container(f"c{i}", limits={"cpu": cpu, "memory": memory}) for i, (cpu, memory) in enumerate(apps)))


@pytest.mark.parametrize("memory_manager", ["Static", "None"])
def test_each_container_finds_the_zones_less_what_the_containers_before_it_took(memory_manager: str) -> None:
    cluster = _cluster(memory_manager=memory_manager)  # 7 CPUs free on NUMA 0, 8 on NUMA 1
    # c0 takes 6 of NUMA 0's CPUs, c1 6 of NUMA 1's: each zone has 1 or 2 left, so 3 more fit nowhere,
    # though each container alone fits either zone.
    assert numa_verdicts(cluster, _pod("p", (6000, GI), (6000, GI), (3000, GI))) == (False, False, False)
    assert numa_verdicts(cluster, _pod("q", (6000, GI), (6000, GI), (2000, GI))) == (True, True, True)
    assert numa_verdicts(cluster, _pod("r", (6000, GI), (6000, GI))) == (True, True, True)


def test_memory_goes_in_turn_too_even_for_a_container_without_exclusive_cpus() -> None:
    cluster = _cluster()
    # c0's 20 GiB go to NUMA 0, c1 (500m: shared CPUs, its memory still aligned) to NUMA 1, whose
    # 32 GiB less 20 leave 12: 13 GiB for c2 fit neither zone any more.
    assert AlignedRequest(_pod("x", (1000, 20 * GI), (500, 20 * GI), (1000, 13 * GI))).walk
    assert numa_verdicts(cluster, _pod("p", (1000, 20 * GI), (500, 20 * GI), (1000, 13 * GI))) == (False, False, False)
    assert numa_verdicts(cluster, _pod("q", (1000, 20 * GI), (500, 20 * GI), (1000, 8 * GI))) == (True, True, True)
    # Without the memory manager the memory is not placed, and only CPUs go in turn.
    assert numa_verdicts(_cluster(memory_manager="None"), _pod("p", (1000, 20 * GI), (500, 20 * GI), (1000, 13 * GI))) \
        == (True, True, True)


def test_what_a_regular_init_container_takes_comes_back_but_a_sidecar_keeps_it() -> None:
    cluster = _cluster()
    # The init container's 6 CPUs in NUMA 0 come back to c0, which must stay there while they are
    # reusable: c0 takes 6, c1 then goes to NUMA 1.
    assert numa_verdicts(cluster, _pod("p", (6000, GI), (8000, GI), init=(6000, GI))) == (True, True, True)
    # A sidecar keeps its CPUs: c0 goes to NUMA 1 and leaves c1 no zone with 8 CPUs.
    assert numa_verdicts(cluster, _pod("q", (6000, GI), (8000, GI), init=(6000, GI), sidecar=True)) \
        == (False, False, False)


def test_under_restricted_the_init_containers_memory_keeps_wide_memory_hints_out_of_its_zone() -> None:
    cluster = _cluster(numa=4, policy="restricted")
    # c0 needs two zones' CPUs and two zones' memory: alone it gets a preferred pair of NUMA nodes.
    assert numa_verdicts(cluster, _pod("p", (10000, 40 * GI))) == (True, True, True)
    # After an init container in NUMA 0 its CPU hints must hold NUMA 0 (the reusable CPU is there),
    # while no multi-NUMA memory hint may hold NUMA 0 (a single-NUMA allocation is there): no hint
    # is preferred by both, and restricted refuses (TopologyAffinityError).
    assert numa_verdicts(cluster, _pod("q", (10000, 40 * GI), init=(1000, GI))) == (False, False, False)
    # A sidecar's CPUs are not reusable: c0's hints are free to leave NUMA 0 out.
    assert numa_verdicts(cluster, _pod("r", (10000, 40 * GI), init=(1000, GI), sidecar=True)) == (True, True, True)
    # Memory one zone holds: c0 is then placed in the init container's zone, which holds it.
    assert numa_verdicts(cluster, _pod("s", (4000, 20 * GI), init=(1000, GI))) == (True, True, True)


def test_the_walk_stops_where_the_containers_zone_is_not_known() -> None:
    walk = AlignedRequest(_pod("p", (2000, GI), (3000, GI), (1000, GI), init=(4000, GI))).walk
    # The init container, then c0 and c1 (2 then 5 CPUs taken before them: fewer than 4 only for
    # c0 and c1), then c2, which may or may not find some of the init container's CPUs reusable.
    assert [kind for _, kind in walk] == [0, 2, 2, 3]
    assert AlignedRequest(_pod("one", (2000, GI))).walk == []
    gpu = Pod("g", uid="g", containers=(Container("c0", limits={"cpu": 2000, "memory": GI}),
                                        Container("c1", limits={"cpu": 2000, "memory": GI, "nvidia.com/gpu": 1})))
    assert AlignedRequest(gpu).walk == []  # one step before the device container: nothing to walk


_AMOUNTS = st.tuples(st.sampled_from([500, 1000, 2000, 3000, 4000, 6000, 8000, 10000]),
                     st.sampled_from([GI, 4 * GI, 12 * GI, 20 * GI, 40 * GI]))


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(shape=node_shapes(max_numa=4), policy=st.sampled_from(["restricted", "single-numa-node"]),
       fill=st.lists(_AMOUNTS, max_size=3), apps=st.lists(_AMOUNTS, min_size=2, max_size=3),
       init=st.one_of(st.none(), _AMOUNTS), sidecar=st.booleans())
def test_the_vector_forms_refuse_only_what_the_kubelet_refuses_for_containers_in_turn(
        shape: NodeShape, policy: str, fill: list[tuple[int, int]], apps: list[tuple[int, int]],
        init: tuple[int, int] | None, sidecar: bool) -> None:
    """On container-scope kubelets enforcing alignment with the static CPU manager (every memory
    manager, CPU manager option and machine of the strategies), after bound pods: the batch and
    few-rows forms agree, and refuse only pods the replica refuses."""
    assume(shape.config.cpu_manager_policy == "static")
    cluster = filled_container_scope_node(shape, policy, (_pod(f"f{i}", amounts) for i, amounts in enumerate(fill)))
    batch, few, exact = numa_verdicts(cluster, _pod("p", *apps, init=init, sidecar=sidecar))
    event(f"exact {exact}, batch {batch}")
    assert batch == few
    assert exact <= batch  # a necessary condition: nothing the kubelet admits is refused
