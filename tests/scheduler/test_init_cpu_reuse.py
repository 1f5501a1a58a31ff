"""NUMAAlignment and an init container's reusable CPUs under container-scope ``single-numa-node``.

The static CPU manager lets the containers after a regular init container reuse its exclusive
CPUs, and then offers them only NUMA sets that hold every reusable CPU (upstream
``generateCPUTopologyHints``). Under ``single-numa-node`` at container scope the next container
must therefore fit the zone the init container was given: the lowest zone that holds the init
container. A pod whose app container fits only another zone is refused by the kubelet with a
TopologyAffinityError, and the batch filter, its few-rows form and the exact per-node filter
(the replica's trial admission) must all say so.
"""

from __future__ import annotations

import pytest

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from tests.scheduler.numa_verdicts import numa_verdicts
from toposched.kubelet import KubeletConfig
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.nodes import NodeSpec
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod

GI = 2**30
MI = 2**20


def _cluster(memory_manager: str = "Static", scope: str = "container", policy: str = "single-numa-node") -> Cluster:
    """One node: 2 NUMA nodes of 8 CPUs and 32 GiB (CPU 0 reserved), static CPU manager."""
    machine = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": 0, "numa": c // 8} for c in range(16)],
                                     memory_per_numa=32 * GI)
    config = KubeletConfig(topology_manager_policy=policy, topology_manager_scope=scope, cpu_manager_policy="static",
                           reserved_system_cpus=CPUSet([0]), kube_reserved={"memory": GI}, system_reserved={"memory": GI},
                           memory_manager_policy=memory_manager,
                           reserved_memory={0: {"memory": 2 * GI + 100 * MI}} if memory_manager == "Static" else {})
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)
    return cluster


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


def test_the_reuse_checks_follow_the_init_containers_cpus() -> None:
    from toposched.scheduler.plugins.numa import AlignedRequest

    request = AlignedRequest(_chain("p", 6, (2, 3, 2, 1)))
    names, _ = request.stacked
    cpu = names.index("cpu")
    # c0 and c1 certainly reuse (0 then 2 CPUs taken before them); c2 too (5 < 6); c3 no longer (7).
    assert [(row, used[cpu]) for row, used in request.reuse_checks] == [(2, 0), (3, 2000), (4, 5000)]
    assert AlignedRequest(_guaranteed("s", 2, GI, init=(1, GI), sidecar=True)).reuse_checks == []
