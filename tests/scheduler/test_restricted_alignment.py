"""NUMAAlignment under the kubelet's ``restricted`` policy: what one NUMA node could hold must share one.

The kubelet's Topology Manager admits a pod under ``restricted`` only when the merged hint is
preferred. A hint provider prefers the narrowest NUMA sets that could ever hold the request
(upstream's ``minAffinitySize``, counted over the machine's whole capacity): for a request one
NUMA node could hold, only single NUMA nodes. So free capacity spread over two NUMA nodes does
not admit a request that fits one node's capacity, while a request wider than any node is
admitted across nodes. Two providers preferring sets of different widths (CPUs that need three
NUMA nodes, memory that needs two) have no preferred set in common, so the pod is never admitted.
The batch filter, its few-rows form and the exact per-node filter (the replica's trial admission)
must all say so; on random machines and kubelets the vector forms refuse nothing the replica admits.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from tests.scheduler.numa_verdicts import numa_verdicts
from tests.scheduler.strategies import NodeShape, node_shapes
from toposched.kubelet import KubeletConfig
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.nodes import NodeSpec
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod

GI = 2**30


def _cluster(scope: str) -> Cluster:
    """One node: 2 NUMA nodes of 8 CPUs (CPU 0 reserved), static CPU manager, ``restricted``."""
    machine = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": 0, "numa": c // 8} for c in range(16)],
                                     memory_per_numa=32 * GI)
    config = KubeletConfig(topology_manager_policy="restricted", topology_manager_scope=scope, cpu_manager_policy="static",
                           reserved_system_cpus=CPUSet([0]), kube_reserved={"memory": GI})
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)
    return cluster


def _pod(name: str, cpus: int) -> Pod:
    return Pod(name, uid=name, containers=(Container("app", limits={"cpu": cpus * 1000, "memory": GI}),))


@pytest.mark.parametrize("scope", ["pod", "container"])
def test_free_cpus_split_over_two_numa_nodes_refuse_a_request_one_node_could_hold(scope: str) -> None:
    cluster = _cluster(scope)
    cluster.add_bound_pod(_pod("a", 6), "n", now=0.0)  # NUMA 0 (7 allocatable CPUs): 1 left
    cluster.add_bound_pod(_pod("b", 6), "n", now=0.0)  # NUMA 1: 2 left
    zones = cluster.zone_available("n")
    assert (zones[0]["cpu"], zones[1]["cpu"]) == (1000, 2000)
    # 3 CPUs are free in all, but a NUMA node has 8: only one-node hints are preferred, and none fits.
    assert numa_verdicts(cluster, _pod("c", 3)) == (False, False, False)
    assert numa_verdicts(cluster, _pod("d", 2)) == (True, True, True)


@pytest.mark.parametrize("scope", ["pod", "container"])
def test_a_request_wider_than_any_numa_node_may_spread(scope: str) -> None:
    cluster = _cluster(scope)
    # 10 CPUs: no NUMA node has that many, so the two-node set is the preferred hint.
    assert numa_verdicts(cluster, _pod("wide", 10)) == (True, True, True)
    cluster.add_bound_pod(_pod("a", 6), "n", now=0.0)
    assert numa_verdicts(cluster, _pod("too-wide", 10)) == (False, False, False)  # 9 CPUs left in all


def _gpu_cluster() -> Cluster:
    """One ``gpu-8x`` node (2 NUMA nodes, 4 GPUs and 2 HCAs on each) whose kubelet enforces ``restricted``."""
    from toposched.sim.hardware import load_hardware_profile

    gpu = load_hardware_profile("gpu-8x")
    config = dataclasses.replace(gpu.kubelet, topology_manager_policy="restricted", topology_manager_scope="pod")
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=gpu.machine, kubelet_config=config,
                     device_plugins={r: list(d) for r, d in (gpu.device_plugins or {}).items()})
    return cluster


def _gpu_pod(name: str, cpus: int, gpus: int) -> Pod:
    limits = {"cpu": cpus * 1000, "memory": 8 * GI, "nvidia.com/gpu": gpus}
    return Pod(name, uid=name, containers=(Container("train", limits=limits),))


def test_a_request_mixing_one_node_and_two_node_resources_is_never_admitted() -> None:
    # 8 GPUs need both NUMA nodes; 8 CPUs fit one. Upstream marks a merged hint preferred only
    # when every provider's hint is the same NUMA set, so even the empty node refuses the pod.
    cluster = _gpu_cluster()
    assert numa_verdicts(cluster, _gpu_pod("mixed", 8, 8)) == (False, False, False)
    # Both fit one NUMA node: admitted there.
    assert numa_verdicts(cluster, _gpu_pod("narrow", 8, 4)) == (True, True, True)


MI = 2**20


def _memory_cluster(scope: str, options: dict[str, str] | None = None) -> Cluster:
    """One node: 4 NUMA nodes of 8 CPUs and 16 GiB, one socket each pair, static CPU manager, Static
    memory manager, ``restricted``."""
    machine = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": c // 16, "numa": c // 8} for c in range(32)],
                                     memory_per_numa=16 * GI)
    config = KubeletConfig(topology_manager_policy="restricted", topology_manager_scope=scope, cpu_manager_policy="static",
                           cpu_manager_options=options or {}, reserved_system_cpus=CPUSet([0]),
                           system_reserved={"memory": GI}, memory_manager_policy="Static",
                           reserved_memory={0: {"memory": GI + 100 * MI}})
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)
    return cluster


def _sized(name: str, cpus: int, memory_gib: int) -> Pod:
    return Pod(name, uid=name, containers=(Container("app", limits={"cpu": cpus * 1000, "memory": memory_gib * GI}),))


@pytest.mark.parametrize("scope", ["pod", "container"])
def test_cpus_and_memory_preferred_at_different_widths_are_never_admitted(scope: str) -> None:
    cluster = _memory_cluster(scope)
    # 20 CPUs need three NUMA nodes (8 each); 20 GiB need two: no set is preferred by both.
    assert numa_verdicts(cluster, _sized("p", 20, 20)) == (False, False, False)
    # 12 CPUs and 20 GiB both need two NUMA nodes: admitted on an empty node.
    assert numa_verdicts(cluster, _sized("q", 12, 20)) == (True, True, True)
    # 20 CPUs and 40 GiB both need three.
    assert numa_verdicts(cluster, _sized("r", 20, 40)) == (True, True, True)


@pytest.mark.parametrize("scope", ["pod", "container"])
def test_with_align_by_socket_only_memory_narrower_than_the_cpus_is_judged(scope: str) -> None:
    cluster = _memory_cluster(scope, {"align-by-socket": "true"})
    # No CPU hint is narrower than the fewest NUMA nodes whose CPUs hold the request, socket-aligned
    # or not: 20 CPUs need three, 9 need two, while 20 GiB (or 10) are preferred on two (or one).
    assert numa_verdicts(cluster, _sized("p", 20, 20)) == (False, False, False)
    assert numa_verdicts(cluster, _sized("q", 9, 10)) == (False, False, False)
    assert numa_verdicts(cluster, _sized("r", 9, 20)) == (True, True, True)
    # Memory wider than the CPUs: align-by-socket may prefer a wider CPU set too (if it is
    # socket-aligned), so the vector forms leave it to the replica, which refuses this one.
    assert numa_verdicts(cluster, _sized("s", 12, 40)) == (True, True, False)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(shape=node_shapes(max_numa=6), scope=st.sampled_from(["pod", "container"]),
       fill=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 8)), max_size=3),
       sizes=st.lists(st.tuples(st.integers(1, 24), st.integers(1, 48)), min_size=1, max_size=2),
       by_socket=st.booleans())
def test_the_vector_forms_refuse_only_what_a_restricted_kubelet_refuses(
        shape: NodeShape, scope: str, fill: list[tuple[int, int]], sizes: list[tuple[int, int]], by_socket: bool) -> None:
    """Kubelets made to enforce restricted (every CPU and memory manager, option and machine of the
    strategies, and ``align-by-socket`` in place of the options for half the static CPU managers),
    after bound pods, asked for pods of one or two containers whose CPUs (1-24) and memory
    (0.5-24 GiB) may each need several NUMA nodes: the batch and few-rows forms agree, and refuse
    only pods the replica refuses."""
    config = dataclasses.replace(shape.config, topology_manager_policy="restricted", topology_manager_scope=scope)
    if by_socket and config.cpu_manager_policy == "static":
        config = dataclasses.replace(config, cpu_manager_options={"align-by-socket": "true"})
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=shape.machine, kubelet_config=config, device_plugins=shape.devices)
    for i, (cpus, half_gib) in enumerate(fill):
        pod = Pod(f"f{i}", uid=f"f{i}", containers=(Container("app", limits={"cpu": cpus * 1000,
                                                                             "memory": half_gib * GI // 2}),))
        if cluster.nodes["n"].model.admit(pod, trial=True).admitted:
            cluster.nodes["n"].model.unadmit(pod.uid)
            cluster.add_bound_pod(pod, "n", now=0.0)
    pod = Pod("p", uid="p", containers=tuple(Container(f"c{i}", limits={"cpu": cpus * 1000, "memory": half_gib * GI // 2})
                                             for i, (cpus, half_gib) in enumerate(sizes)))
    batch, few, exact = numa_verdicts(cluster, pod)
    event(f"exact {exact}, batch {batch}, memory {shape.config.memory_manager_policy}, "
          f"{'align-by-socket' if config.cpu_manager_options else 'no socket alignment'}")
    assert batch == few
    assert exact <= batch  # a necessary condition: nothing the kubelet admits is refused
