"""NUMAAlignment's three forms asked about one node, for tests that hold them to each other."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from toposched.kubelet import KubeletConfig
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.framework import CycleState, registry
from toposched.scheduler.nodes import NodeSpec
from toposched.scheduler.profile_setup import load_profile
from toposched.scheduler.scheduler import Scheduler
from toposched.topology import CPUSet, Machine
from toposched.workload import Pod

GI = 2**30
MI = 2**20


def numa_verdicts(cluster: Cluster, pod: Pod, node: str = "n") -> tuple[bool, bool, bool]:
    """Whether NUMAAlignment passes ``pod`` on ``node``: (batch filter, few-rows filter, exact per-node filter)."""
    scheduler = Scheduler(cluster, load_profile("toposched"))
    table = scheduler.table
    table.refresh()
    plugin = registry.create("NUMAAlignment")
    rows = np.array([table.index[node]])
    batch, _ = plugin.filter_all(CycleState(cluster=cluster), pod, table, rows)
    few = plugin.filter_few(CycleState(cluster=cluster), pod, table, rows.tolist())
    exact = plugin.filter(CycleState(cluster=cluster), pod, cluster.nodes[node])
    return bool(batch[0]), few[0] is None, exact.is_success


def static_cpu_node(numa: int = 2, *, policy: str = "single-numa-node", scope: str = "container",
                    memory_manager: str = "Static", cpu_manager: str = "static") -> Cluster:
    """A cluster of one node "n": ``numa`` NUMA nodes of 8 one-thread cores and 32 GiB (CPU 0
    reserved), the static CPU manager (or ``cpu_manager``), and the given Topology Manager and
    memory manager (``max-allowable-numa-nodes`` set past 8 NUMA nodes, as upstream requires)."""
    machine = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": 0, "numa": c // 8} for c in range(8 * numa)],
                                     memory_per_numa=32 * GI)
    config = KubeletConfig(topology_manager_policy=policy, topology_manager_scope=scope, cpu_manager_policy=cpu_manager,
                           topology_manager_options={"max-allowable-numa-nodes": str(numa)} if numa > 8 else {},
                           reserved_system_cpus=CPUSet([0]) if cpu_manager == "static" else None,
                           kube_reserved={"memory": GI}, system_reserved={"memory": GI},
                           memory_manager_policy=memory_manager,
                           reserved_memory={0: {"memory": 2 * GI + 100 * MI}} if memory_manager == "Static" else {})
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)
    return cluster


def filled_container_scope_node(shape: Any, policy: str, fill: Iterable[Pod], scope: str = "container") -> Cluster:
    """A cluster of one node "n" of ``shape`` (a strategies ``NodeShape``) whose kubelet has the
    Topology Manager ``policy`` at ``scope``, holding each pod of ``fill`` its replica admits."""
    config = dataclasses.replace(shape.config, topology_manager_policy=policy, topology_manager_scope=scope)
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=shape.machine, kubelet_config=config, device_plugins=shape.devices)
    for pod in fill:
        if cluster.nodes["n"].model.admit(pod, trial=True).admitted:
            cluster.nodes["n"].model.unadmit(pod.uid)
            cluster.add_bound_pod(pod, "n", now=0.0)
    return cluster
