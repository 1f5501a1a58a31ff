"""NUMAAlignment under the kubelet's ``restricted`` policy: what one NUMA node could hold must share one.

The kubelet's Topology Manager admits a pod under ``restricted`` only when the merged hint is
preferred. A hint provider prefers the narrowest NUMA sets that could ever hold the request
(upstream's ``minAffinitySize``, counted over the machine's whole capacity): for a request one
NUMA node could hold, only single NUMA nodes. So free capacity spread over two NUMA nodes does
not admit a request that fits one node's capacity, while a request wider than any node is
admitted across nodes. The batch filter, its few-rows form and the exact per-node filter (the
replica's trial admission) must all say so.
"""

from __future__ import annotations

import dataclasses

import pytest

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from tests.scheduler.numa_verdicts import numa_verdicts
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
