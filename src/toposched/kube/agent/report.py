"""The NodeResourceTopology object the node agent publishes: hardware, kubelet settings and what is taken.

A pure function of what the agent read: the machine (sysfs), the kubelet's configuration, its
two checkpoints and the pods bound to the node. The result is a ``topology.node.k8s.io/v1alpha2``
object shaped as node-feature-discovery's topology updater publishes it (one ``Node`` zone per
NUMA node, same resource names, quantities and attribute names; see docs/kube/agent.md), ready
for server-side apply. It carries no ownerReferences.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

from toposched.errors import InputError
from toposched.kubelet.config import KubeletConfig
from toposched.kubelet.cpu_manager import StaticCPUPolicy
from toposched.kubelet.cpu_state import CPUManagerCheckpoint
from toposched.kubelet.memory_manager import StaticMemoryPolicy, hugepage_resource_name
from toposched.kubelet.memory_state import MemoryManagerCheckpoint
from toposched.kube.agent.kubelet_files import MEMORY_STATE_FILE, exclusive_cpus
from toposched.scheduler.fingerprint import ANNOTATION, ATTRIBUTE, ATTRIBUTE_METHOD, METHOD_ALL, pods_fingerprint
from toposched.scheduler.placement import PLACEMENT_ANNOTATION, Placement
from toposched.topology import CPUSet
from toposched.topology.model import Machine
from toposched.topology.nrt import ZONE_TYPE_NODE, dump_nrt, nrt_from_machine, numa_id_of_zone

__all__ = [
    "CPU_MANAGER_POLICY_ATTRIBUTE",
    "MEMORY_MANAGER_POLICY_ATTRIBUTE",
    "TERMINAL_PHASES",
    "active_pods",
    "node_report",
    "placement_cpus",
    "reserved_cpus",
]

# Read by toposched's scheduler to build its replica of the node (docs/scheduler/design.md).
CPU_MANAGER_POLICY_ATTRIBUTE = "cpuManagerPolicy"
MEMORY_MANAGER_POLICY_ATTRIBUTE = "memoryManagerPolicy"
TERMINAL_PHASES = ("Succeeded", "Failed")


def active_pods(pods: Iterable[Mapping[str, Any]], node_name: str) -> list[Mapping[str, Any]]:
    """The pods bound to ``node_name`` that still hold resources (phase neither Succeeded nor Failed)."""
    out = []
    for pod in pods:
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        if spec.get("nodeName") == node_name and status.get("phase") not in TERMINAL_PHASES:
            out.append(pod)
    return out


def reserved_cpus(machine: Machine, config: KubeletConfig) -> CPUSet:
    """The CPUs the kubelet keeps from pods: ``reservedSystemCPUs``, else (static CPU manager)
    the ceiling of kube-reserved + system-reserved CPU taken by the static policy's own choice."""
    given = config.reserved_system_cpus
    if config.cpu_manager_policy != "static":
        return given or CPUSet()
    millis = len(given) * 1000 if given else config.reserved_cpu_millis
    policy = StaticCPUPolicy(
        machine,
        reserved_cpus=given,
        num_reserved=math.ceil(millis / 1000),
        options=dict(config.cpu_manager_options),
        topology_manager_policy=config.topology_manager_policy,
    )
    return policy.reserved_cpus


def placement_cpus(pods: Iterable[Mapping[str, Any]], node_name: str) -> CPUSet:
    """Every exclusive CPU that readable ``toposched.io/placement`` annotations give pods on ``node_name``.

    Annotations that do not parse, or name another node, are skipped here; the enforcer
    reports them (see :mod:`toposched.kube.agent.cgroups`).
    """
    mask = 0
    for pod in pods:
        text = ((pod.get("metadata") or {}).get("annotations") or {}).get(PLACEMENT_ANNOTATION)
        if not isinstance(text, str):
            continue
        try:
            placement = Placement.from_annotation(text)
        except InputError:
            continue
        if placement.node == node_name:
            mask |= placement.cpuset.mask
    return CPUSet.from_mask(mask)


def _memory_views(
    machine: Machine, config: KubeletConfig, memory_state: MemoryManagerCheckpoint | None
) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]:
    """``(allocatable overrides, available)`` per NUMA node for memory and hugepages."""
    allocatable: dict[int, dict[str, int]] = {}
    available: dict[int, dict[str, int]] = {}
    if config.memory_manager_policy == "Static":
        policy = StaticMemoryPolicy.from_config(machine, config)
        if memory_state is not None:
            # Checked as the kubelet checks it at start: the machine state must follow from the
            # blocks it lists, so "free" below is the kubelet's own figure after every block.
            policy.restore(memory_state, source=MEMORY_STATE_FILE)
        free = policy.available()
        for node in machine.numa_nodes:
            held = policy.system_reserved.get(node.id, {})
            # Allocatable keeps the hugepages in (capacity minus the reservation), so that
            # capacity - allocatable is exactly the kubelet's reservedMemory for that node.
            zone = {"memory": node.memory_bytes - held.get("memory", 0)} if node.memory_bytes else {}
            for size, count in node.hugepages.items():
                name = hugepage_resource_name(size)
                zone[name] = size * count - held.get(name, 0)
            allocatable[node.id] = zone
            available[node.id] = {r: min(v, free.get(node.id, {}).get(r, 0)) for r, v in zone.items()}
        return allocatable, available
    for node in machine.numa_nodes:
        hugepage_bytes = {hugepage_resource_name(size): size * count for size, count in node.hugepages.items()}
        zone = dict(hugepage_bytes)
        if node.memory_bytes:
            zone["memory"] = node.memory_bytes - sum(hugepage_bytes.values())
        available[node.id] = zone
    return allocatable, available


def node_report(
    machine: Machine,
    config: KubeletConfig,
    *,
    node_name: str,
    cpu_state: CPUManagerCheckpoint | None = None,
    memory_state: MemoryManagerCheckpoint | None = None,
    pods: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The node's NodeResourceTopology (v1alpha2) as a dict ready for server-side apply.

    Per NUMA zone: ``cpu`` capacity = its online CPUs, allocatable = those not reserved (see
    :func:`reserved_cpus`), available = allocatable minus CPUs held exclusively (the CPU
    manager checkpoint's assignments of any pod, and the cpusets of toposched placements on
    this node); ``memory``/``hugepages-<size>`` allocatable = capacity minus the memory
    manager's ``reservedMemory`` (``Static`` policy), available = what the memory manager has
    free after its blocks (``Static``), else the zone's memory outside hugepages and its
    hugepages. Device resources are not published (the agent cannot see device assignments).
    Attributes: ``topologyManagerPolicy``, ``topologyManagerScope``, ``cpuManagerPolicy``,
    ``memoryManagerPolicy``, ``nodeTopologyPodsFingerprint`` over the active pods bound to the
    node (:func:`active_pods`) with ``nodeTopologyPodsFingerprintMethod: all``; the fingerprint
    is also the ``topology.node.k8s.io/fingerprint`` annotation. Raises :class:`InputError`
    when the configuration or a checkpoint does not fit the machine (the kubelet would refuse
    them too).
    """
    pods = active_pods(pods, node_name)
    reserved = reserved_cpus(machine, config)
    held_mask = placement_cpus(pods, node_name).mask
    for containers in exclusive_cpus(cpu_state).values():
        for cpus in containers.values():
            held_mask |= cpus.mask
    memory_allocatable, memory_available = _memory_views(machine, config, memory_state)

    fingerprint = pods_fingerprint(
        ((p.get("metadata") or {}).get("namespace", "default"), (p.get("metadata") or {}).get("name", "")) for p in pods
    )
    shape: dict[str, Any] = dict(
        node_name=node_name,
        policy=config.topology_manager_policy,
        scope=config.topology_manager_scope,
        allocatable=memory_allocatable,
        device_resources={},
        reserved_cpus=reserved,
        extra_attributes={
            CPU_MANAGER_POLICY_ATTRIBUTE: config.cpu_manager_policy,
            MEMORY_MANAGER_POLICY_ATTRIBUTE: config.memory_manager_policy,
            ATTRIBUTE: fingerprint,
            ATTRIBUTE_METHOD: METHOD_ALL,
        },
    )
    # The writer leaves some resources out (cpu of a zone whose CPUs are all reserved); ask it
    # which ones a zone publishes, then give availability for exactly those.
    published = {
        numa_id_of_zone(z.name): {r.name for r in z.resources}
        for z in nrt_from_machine(machine, **shape).zones
        if z.type == ZONE_TYPE_NODE
    }
    available: dict[int, dict[str, int]] = {}
    for node in machine.numa_nodes:
        zone = dict(memory_available.get(node.id, {}))
        free_cpus = node.cpus.mask & ~reserved.mask & ~held_mask
        zone["cpu"] = free_cpus.bit_count() * 1000
        available[node.id] = {r: v for r, v in zone.items() if r in published.get(node.id, ())}
    nrt = nrt_from_machine(machine, available=available, **shape)
    return dump_nrt(dataclasses.replace(nrt, annotations={ANNOTATION: fingerprint}))
