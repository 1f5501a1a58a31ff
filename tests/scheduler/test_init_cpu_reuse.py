"""NUMAAlignment and an init container's reusable CPUs on container-scope kubelets that enforce alignment.

The static CPU manager lets the containers after a regular init container reuse its exclusive
CPUs, and then offers them only NUMA sets that hold every reusable CPU (upstream
``generateCPUTopologyHints``). Under ``single-numa-node`` at container scope the next container
must therefore fit the zone the init container was given: the lowest zone that holds the init
container. Under ``restricted``, an init container wider than any zone leaves a later container
that one zone could hold no preferred hint while more of its CPUs than a zone has stay reusable.
A pod the kubelet refuses so (a TopologyAffinityError) must be refused by the batch filter, its
few-rows form and the exact per-node filter (the replica's trial admission) alike; and on random
machines and kubelets the vector forms refuse nothing the replica admits.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from tests.scheduler.numa_verdicts import filled_container_scope_node, numa_verdicts, static_cpu_node
from tests.scheduler.strategies import NodeShape, node_shapes
from toposched.kubelet import KubeletConfig
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.nodes import NodeSpec
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod

GI = 2**30
MI = 2**20


def _cluster(memory_manager: str = "Static", scope: str = "container", policy: str = "single-numa-node") -> Cluster:
    """One node: 2 NUMA nodes of 8 CPUs and 32 GiB (CPU 0 reserved), static CPU manager."""
    return static_cpu_node(policy=policy, scope=scope, memory_manager=memory_manager)


def _guaranteed(name: str, cpus: int, memory: int, *, init: tuple[int, int] | None = None, sidecar: bool = False) -> Pod:
    inits = ()
    if init is not None:
        inits = (Container("init", limits={"cpu": init[0] * 1000, "memory": init[1]},
                           restart_policy="Always" if sidecar else None),)
    return Pod(name, uid=name, containers=(Container("app", limits={"cpu": cpus * 1000, "memory": memory}),),
               init_containers=inits)


def test_an_app_container_that_fits_only_another_zone_than_the_init_container_is_refused() -> None:
    cluster = _cluster()
    cluster.add_bound_pod(_guaranteed("a", 2, 20 * GI), "n", now=0.0)  # NUMA 0: 5 CPUs, ~9 GiB left
    zones = cluster.zone_available("n")
    assert zones[0]["cpu"] == 5000 and zones[0]["memory"] < 12 * GI < zones[1]["memory"]
    # The init container fits NUMA 0 (the lowest zone), the app container's 12 GiB only NUMA 1:
    # its CPU hints hold NUMA 0 only, its memory hints NUMA 1 only.
    assert numa_verdicts(cluster, _guaranteed("p", 2, 12 * GI, init=(1, GI))) == (False, False, False)
    # Without the init container, or with an app container that fits NUMA 0 too, it is admitted.
    assert numa_verdicts(cluster, _guaranteed("q", 2, 12 * GI)) == (True, True, True)
    assert numa_verdicts(cluster, _guaranteed("r", 2, 4 * GI, init=(1, GI))) == (True, True, True)


def test_the_app_container_may_use_what_the_init_container_holds() -> None:
    cluster = _cluster()
    cluster.add_bound_pod(_guaranteed("a", 4, 20 * GI), "n", now=0.0)  # NUMA 0: 3 CPUs left
    # The init container takes 2 of NUMA 0's 3 free CPUs; the app container reuses them: 3 in all.
    assert numa_verdicts(cluster, _guaranteed("p", 3, GI, init=(2, GI))) == (True, True, True)
    # 4 CPUs do not fit NUMA 0, where the init container goes, though NUMA 1 would hold both.
    assert numa_verdicts(cluster, _guaranteed("q", 4, GI, init=(2, GI))) == (False, False, False)
    assert numa_verdicts(cluster, _guaranteed("s", 4, GI, init=(4, GI))) == (True, True, True)  # NUMA 1 for both


@pytest.mark.parametrize("memory_manager", ["Static", "None"])
def test_the_init_containers_zone_bounds_the_app_containers_cpus(memory_manager: str) -> None:
    cluster = _cluster(memory_manager)
    cluster.add_bound_pod(_guaranteed("a", 4, GI), "n", now=0.0)  # NUMA 0: 3 CPUs left, NUMA 1: 8
    # The app container's 5 CPUs fit NUMA 1 only, but the init container's CPU is on NUMA 0.
    assert numa_verdicts(cluster, _guaranteed("p", 5, GI, init=(1, GI))) == (False, False, False)


@pytest.mark.parametrize(("scope", "policy", "sidecar"), [("pod", "single-numa-node", False),
                                                         ("container", "single-numa-node", True),
                                                         ("container", "best-effort", False)])
def test_no_such_constraint_at_pod_scope_for_sidecars_or_without_single_numa_node(scope: str, policy: str,
                                                                                sidecar: bool) -> None:
    cluster = _cluster(scope=scope, policy=policy)
    cluster.add_bound_pod(_guaranteed("a", 4, GI), "n", now=0.0)
    pod = _guaranteed("p", 5, GI, init=(1, GI), sidecar=sidecar)
    batch, few, exact = numa_verdicts(cluster, pod)
    assert batch == few and (exact <= batch)  # the vector forms stay a necessary condition
    if not sidecar:
        assert exact  # pod scope: one hint for the pod; best-effort: not enforced


def _chain(name: str, init: int, apps: tuple[int, ...]) -> Pod:
    return Pod(name, uid=name, init_containers=(Container("init", limits={"cpu": init * 1000, "memory": GI}),),
               containers=tuple(Container(f"c{i}", limits={"cpu": cpus * 1000, "memory": GI}) for i, cpus in enumerate(apps)))


def test_later_containers_stay_in_the_init_containers_zone_while_its_cpus_are_reusable() -> None:
    cluster = _cluster()
    # The init container's 6 CPUs go to NUMA 0 (7 allocatable). c0 takes 2 there; 4 or more of the
    # init container's CPUs are still reusable, so c1 must fit NUMA 0 as well: 5 CPUs are left there.
    assert numa_verdicts(cluster, _chain("p", 6, (2, 6))) == (False, False, False)
    assert numa_verdicts(cluster, _chain("q", 6, (2, 5))) == (True, True, True)
    # Once the containers before it took the init container's 6 CPUs, a container may go elsewhere.
    assert numa_verdicts(cluster, _chain("r", 6, (6, 1))) == (True, True, True)


def test_the_forced_containers_follow_the_init_containers_cpus() -> None:
    from toposched.scheduler.plugins.numa import AlignedRequest

    request = AlignedRequest(_chain("p", 6, (2, 3, 2, 1)))
    # c0 and c1 certainly reuse (0 then 2 CPUs taken before them); c2 too (5 < 6); c3 no longer (7).
    assert [kind for _, kind in request.walk] == [0, 2, 2, 2, 3]
    assert request.reuse_spans == [(6000, 2000), (4000, 3000), (1000, 2000)]
    assert AlignedRequest(_guaranteed("s", 2, GI, init=(1, GI), sidecar=True)).reuse_spans == []


def test_under_restricted_reusable_cpus_wider_than_a_zone_leave_a_narrow_container_no_preferred_hint() -> None:
    # Without a memory manager: with the Static one, the init container's memory (one zone) and CPUs
    # (two) already have no preferred hint in common, and the pod is refused for the init container.
    cluster = _cluster("None", policy="restricted")
    # The init container's 10 CPUs cannot fit one NUMA node (8 CPUs each), so they span both. While
    # they are reusable, every CPU hint of a later container holds both NUMA nodes: for 2 CPUs, whose
    # minAffinitySize is 1, no hint is preferred, and restricted refuses (TopologyAffinityError).
    assert numa_verdicts(cluster, _chain("p", 10, (2,))) == (False, False, False)
    assert numa_verdicts(cluster, _chain("q", 10, (9,))) == (True, True, True)  # needs both NUMA nodes anyway
    assert numa_verdicts(cluster, _chain("r", 4, (2,))) == (True, True, True)  # the init container fits one
    # Once the containers before it may have taken all but a zone's worth, the vector forms let it be.
    batch, few, exact = numa_verdicts(cluster, _chain("s", 10, (9, 2)))
    assert batch and few and exact <= batch


@pytest.mark.parametrize(("scope", "options"), [("pod", {}), ("container", {"align-by-socket": "true"})])
def test_reusable_cpus_spanning_zones_refuse_nothing_at_pod_scope_or_when_sockets_align(
        scope: str, options: dict[str, str]) -> None:
    machine = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": c // 8, "numa": c // 8} for c in range(16)],
                                     memory_per_numa=32 * GI)
    config = KubeletConfig(topology_manager_policy="restricted", topology_manager_scope=scope,
                           cpu_manager_policy="static", cpu_manager_options=options, reserved_system_cpus=CPUSet([0]),
                           kube_reserved={"memory": GI}, system_reserved={"memory": GI})
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)
    batch, few, exact = numa_verdicts(cluster, _chain("p", 10, (2,)))
    assert batch == few and exact <= batch
    assert batch  # the new rule holds for container-scope kubelets whose zones bound the preferred width only


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(shape=node_shapes(max_numa=4), policy=st.sampled_from(["restricted", "single-numa-node"]),
       fill=st.lists(st.integers(1, 6), max_size=3), init=st.integers(1, 12), apps=st.lists(st.integers(1, 12), min_size=1,
                                                                                           max_size=3))
def test_the_vector_forms_refuse_only_what_the_kubelet_refuses_after_an_init_container(
        shape: NodeShape, policy: str, fill: list[int], init: int, apps: list[int]) -> None:
    """On container-scope kubelets enforcing alignment with the static CPU manager (every memory
    manager, CPU manager option and machine of the strategies), after bound pods: the batch and
    few-rows forms agree, and refuse only pods the replica refuses."""
    assume(shape.config.cpu_manager_policy == "static")
    cluster = filled_container_scope_node(shape, policy, (
        Pod(f"f{i}", uid=f"f{i}", containers=(Container("app", limits={"cpu": cpus * 1000, "memory": GI}),))
        for i, cpus in enumerate(fill)))
    batch, few, exact = numa_verdicts(cluster, _chain("p", init, tuple(apps)))
    event(f"exact {exact}, batch {batch}")
    assert batch == few
    assert exact <= batch  # a necessary condition: nothing the kubelet admits is refused
