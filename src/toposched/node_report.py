"""The NodeResourceTopology object the node agent publishes: the whole node, and what is taken.

A pure function of what the agent read: the machine (sysfs), the kubelet's configuration, its
two checkpoints, the devices its device plugins hand out (the podresources API, else sysfs and
the device-resource map) with what they gave to whom, and the pods bound to the node. The
result is a ``topology.node.k8s.io/v1alpha2`` object shaped as node-feature-discovery's topology
updater publishes it (one ``Node`` zone per NUMA node with ``cpu``, ``memory``,
``hugepages-<size>`` and device counts, same attribute names; every NFD consumer reads it), plus
toposched's two attributes that carry what the zones cannot
(:mod:`toposched.kubelet.description`): the node description and its allocations. The
simulator publishes its nodes' reports with this same code. See docs/kube/agent.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toposched.devices import DeviceInventory, DeviceResourceMap
from toposched.errors import InputError
from toposched.inputs import check_dns_subdomain
from toposched.kubelet.config import KubeletConfig
from toposched.kubelet.cpu_manager import StaticCPUPolicy
from toposched.kubelet.cpu_state import CPUManagerCheckpoint
from toposched.kubelet.description import (
    ALLOCATIONS_ATTRIBUTE,
    DESCRIPTION_ATTRIBUTE,
    ContainerAllocations,
    DescribedDevice,
    NodeAllocations,
    NodeDescription,
)
from toposched.kubelet.memory_manager import StaticMemoryPolicy, hugepage_resource_name
from toposched.kubelet.memory_state import MemoryManagerCheckpoint
from toposched.names import (
    CPU_MANAGER_POLICY_ATTRIBUTE,
    FINGERPRINT_ANNOTATION,
    FINGERPRINT_ATTRIBUTE,
    FINGERPRINT_METHOD_ALL,
    FINGERPRINT_METHOD_ATTRIBUTE,
    MEMORY_MANAGER_POLICY_ATTRIBUTE,
    PLACEMENT_ANNOTATION,
)
from toposched.scheduler.fingerprint import pods_fingerprint
from toposched.scheduler.placement import Placement
from toposched.topology import CPUSet
from toposched.topology.model import Machine
from toposched.topology.nrt import ZONE_TYPE_NODE, dump_nrt, nrt_from_machine, numa_id_of_zone

__all__ = [
    "CPU_MANAGER_POLICY_ATTRIBUTE",
    "MEMORY_MANAGER_POLICY_ATTRIBUTE",
    "TERMINAL_PHASES",
    "active_pods",
    "describe_devices",
    "node_allocations",
    "node_report",
    "reserved_cpus",
]

# Read by schedulers that know no description (NFD-style reports): see docs/scheduler/design.md.
TERMINAL_PHASES = ("Succeeded", "Failed")

DeviceAssignments = Mapping[str, Mapping[str, Mapping[str, Sequence[str]]]]  # pod uid -> container -> resource -> ids


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


def describe_devices(machine: Machine, resource_map: DeviceResourceMap | None = None) -> tuple[DescribedDevice, ...]:
    """The devices of a machine that are extended resources, named by PCI address, with their locality.

    This is what the agent publishes when the kubelet's podresources API cannot be read: the
    ids are the PCI addresses, as the SR-IOV network, AMD and Intel device plugins name their
    devices (docs/kube/podresources.md says what differs for NVIDIA's and RDMA's plugins).
    """
    inventory = DeviceInventory.from_machine(machine, resource_map)
    return tuple(
        DescribedDevice(d.resource, d.id, d.numa_id, d.id, d.pcie_path, d.model, d.memory_bytes, d.kind) for d in inventory
    )


def _pod_uid(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


def _placements(pods: Iterable[Mapping[str, Any]], node_name: str) -> dict[str, Placement]:
    """Readable ``toposched.io/placement`` annotations of the pods on ``node_name``, by pod uid.

    Annotations that do not parse, or name another node, are skipped here; the enforcer
    reports them (see :mod:`toposched.kube.agent.cgroups`).
    """
    out = {}
    for pod in pods:
        text = ((pod.get("metadata") or {}).get("annotations") or {}).get(PLACEMENT_ANNOTATION)
        if not isinstance(text, str):
            continue
        try:
            placement = Placement.from_annotation(text)
        except InputError:
            continue
        if placement.node == node_name:
            out[_pod_uid(pod)] = placement
    return out


def node_allocations(
    pods: Iterable[Mapping[str, Any]],
    node_name: str,
    *,
    cpu_state: CPUManagerCheckpoint | None = None,
    memory_state: MemoryManagerCheckpoint | None = None,
    device_assignments: DeviceAssignments | None = None,
) -> NodeAllocations:
    """What each pod on the node holds, from the sources that own each fact.

    Exclusive CPUs: the CPU manager checkpoint; a pod it does not list yet (bound, not yet
    admitted, or placed on an agent-managed node) holds its placement's cpuset. Memory: the
    memory manager checkpoint's blocks. Devices: ``device_assignments`` (the podresources API),
    else the device ids of the placements. A CPU is therefore counted once even when the
    checkpoint and a placement both name it.
    """
    pods = list(pods)
    placements = _placements(pods, node_name)
    names = {_pod_uid(p): f"{(p.get('metadata') or {}).get('namespace', 'default')}/{(p.get('metadata') or {}).get('name', '')}"
             for p in pods}
    cpus: dict[str, dict[str, CPUSet]] = {}
    if cpu_state is not None:
        for uid, containers in cpu_state.entries.items():
            cpus[uid] = {name: c for name, c in containers.items() if c}
        for uid, pod_cpus in cpu_state.pod_entries.items():
            if pod_cpus:
                cpus.setdefault(uid, {})[""] = pod_cpus
    for uid, placement in placements.items():
        if uid not in cpus:
            cpus[uid] = {name: c.cpuset for name, c in placement.containers.items() if c.cpuset}
    memory: dict[str, dict[str, list[tuple[tuple[int, ...], str, int]]]] = {}
    if memory_state is not None:
        for uid, containers in (memory_state.entries or {}).items():
            for name, blocks in (containers or {}).items():
                for b in blocks or ():
                    if b.size:
                        memory.setdefault(uid, {}).setdefault(name, []).append(
                            (tuple(b.numa_affinity or ()), b.type, b.size))
    if device_assignments is None:
        device_assignments = {uid: {name: dict(c.devices) for name, c in p.containers.items() if c.devices}
                              for uid, p in placements.items()}
    out: dict[str, dict[str, ContainerAllocations]] = {}
    for uid in set(cpus) | set(memory) | set(device_assignments):
        containers = set(cpus.get(uid, {})) | set(memory.get(uid, {})) | set(device_assignments.get(uid, {}))
        entry = {}
        for name in containers:
            devices = {r: tuple(sorted(ids)) for r, ids in device_assignments.get(uid, {}).get(name, {}).items() if ids}
            alloc = ContainerAllocations(cpus.get(uid, {}).get(name, CPUSet()), tuple(memory.get(uid, {}).get(name, ())),
                                         devices)
            if alloc:
                entry[name] = alloc
        if entry:
            out[uid] = entry
    return NodeAllocations(out, {uid: names[uid] for uid in out if uid in names})


def _memory_views(
    machine: Machine, config: KubeletConfig, memory_state: MemoryManagerCheckpoint | None, source: str
) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]:
    """``(allocatable overrides, available)`` per NUMA node for memory and hugepages."""
    allocatable: dict[int, dict[str, int]] = {}
    available: dict[int, dict[str, int]] = {}
    if config.memory_manager_policy == "Static":
        policy = StaticMemoryPolicy.from_config(machine, config)
        if memory_state is not None:
            # Checked as the kubelet checks it at start: the machine state must follow from the
            # blocks it lists, so "free" below is the kubelet's own figure after every block.
            policy.restore(memory_state, source=source)
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
    devices: Sequence[DescribedDevice] | None = None,
    device_assignments: DeviceAssignments | None = None,
    resource_map: DeviceResourceMap | None = None,
    memory_state_source: str = "memory_manager_state",
) -> dict[str, Any]:
    """The node's NodeResourceTopology (v1alpha2) as a dict ready for server-side apply.

    Per NUMA zone: ``cpu`` capacity = its online CPUs, allocatable = those not reserved (see
    :func:`reserved_cpus`), available = allocatable minus the exclusive CPUs of
    :func:`node_allocations`; ``memory``/``hugepages-<size>`` allocatable = capacity minus the
    memory manager's ``reservedMemory`` (``Static`` policy), available = what the memory manager
    has free after its blocks (``Static``), else the zone's memory outside hugepages and its
    hugepages; each device resource: capacity = allocatable = its devices on that NUMA node,
    available = those not allocated. ``devices`` are the devices the kubelet hands out (default:
    :func:`describe_devices` of the machine with ``resource_map``); ``device_assignments`` who
    holds which (default: the placements' device ids). Attributes: ``topologyManagerPolicy``,
    ``topologyManagerScope``, ``cpuManagerPolicy``, ``memoryManagerPolicy``,
    ``nodeTopologyPodsFingerprint`` over the active pods (:func:`active_pods`) with
    ``nodeTopologyPodsFingerprintMethod: all`` (also the ``topology.node.k8s.io/fingerprint``
    annotation), and the description and allocations of :mod:`toposched.kubelet.description`.
    Raises :class:`InputError` when the configuration or a checkpoint does not fit the machine
    (the kubelet would refuse them too).
    """
    check_dns_subdomain(node_name, field="node name")
    pods = active_pods(pods, node_name)
    reserved = reserved_cpus(machine, config)
    if devices is None:
        devices = describe_devices(machine, resource_map)
    allocations = node_allocations(pods, node_name, cpu_state=cpu_state, memory_state=memory_state,
                                   device_assignments=device_assignments)
    held_mask = allocations.cpus().mask
    memory_allocatable, memory_available = _memory_views(machine, config, memory_state, memory_state_source)
    taken_devices = allocations.devices()
    device_counts: dict[str, dict[int, int]] = {}
    device_free: dict[int, dict[str, int]] = {}
    for dev in devices:
        if dev.numa_id is None or not machine.has_numa(dev.numa_id):
            continue
        per = device_counts.setdefault(dev.resource, {})
        per[dev.numa_id] = per.get(dev.numa_id, 0) + 1
        zone = device_free.setdefault(dev.numa_id, {})
        zone[dev.resource] = zone.get(dev.resource, 0) + (dev.id not in taken_devices.get(dev.resource, ()))

    fingerprint = pods_fingerprint(
        ((p.get("metadata") or {}).get("namespace", "default"), (p.get("metadata") or {}).get("name", "")) for p in pods
    )
    description = NodeDescription(machine, config, reserved, tuple(devices))
    shape: dict[str, Any] = dict(
        node_name=node_name,
        policy=config.topology_manager_policy,
        scope=config.topology_manager_scope,
        allocatable=memory_allocatable,
        device_resources=device_counts,
        reserved_cpus=reserved,
        extra_attributes={
            CPU_MANAGER_POLICY_ATTRIBUTE: config.cpu_manager_policy,
            MEMORY_MANAGER_POLICY_ATTRIBUTE: config.memory_manager_policy,
            FINGERPRINT_ATTRIBUTE: fingerprint,
            FINGERPRINT_METHOD_ATTRIBUTE: FINGERPRINT_METHOD_ALL,
            DESCRIPTION_ATTRIBUTE: description.to_json(),
            ALLOCATIONS_ATTRIBUTE: allocations.to_json(),
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
        zone.update(device_free.get(node.id, {}))
        free_cpus = node.cpus.mask & ~reserved.mask & ~held_mask
        zone["cpu"] = free_cpus.bit_count() * 1000
        available[node.id] = {r: v for r, v in zone.items() if r in published.get(node.id, ())}
    nrt = nrt_from_machine(machine, available=available, **shape)
    return dump_nrt(dataclasses.replace(nrt, annotations={FINGERPRINT_ANNOTATION: fingerprint}))
