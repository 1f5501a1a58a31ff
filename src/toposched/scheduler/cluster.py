"""The scheduler's view of the cluster: nodes, their reports, the pods on them, and the ledger.

For a node with topology data the cluster keeps a *replica* of its kubelet
(:class:`~toposched.kubelet.KubeletNode`): every pod bound to the node, by us or by another
scheduler, is admitted into it, so the replica predicts exactly which CPUs, memory and devices
the kubelet will give the next pod. Every placement toposched makes is recorded from Reserve
on; until the node's NodeResourceTopology report reflects it (the report's
``nodeTopologyPodsFingerprint`` matches the pods known on the node, or the report is newer than
the placement by ``reflect_timeout`` seconds) it is subtracted from what the report says is
available. A zone therefore offers the smaller of what the replica and the corrected report
say, and a report that is 60 s old never leads to a double allocation.

Time is passed in (``now``, seconds); nothing here reads a clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toposched.devices import DeviceInventory, DeviceResourceMap
from toposched.devices.share import inventory_gpus, koordlet_resources
from toposched.errors import InputError
from toposched.kubelet import Admission, KubeletConfig, KubeletNode, fast_merge_hints
from toposched.kubelet.cpu_manager import CPUState
from toposched.kubelet.description import (
    ALLOCATIONS_ATTRIBUTE,
    DESCRIPTION_ATTRIBUTE,
    DescribedDevice,
    NodeAllocations,
    NodeDescription,
)
from toposched.kubelet.device_manager import DeviceManagerState
from toposched.names import CPU_MANAGER_POLICY_ATTRIBUTE, FINGERPRINT_ATTRIBUTE, MEMORY_MANAGER_POLICY_ATTRIBUTE
from toposched.scheduler.fingerprint import pods_fingerprint
from toposched.scheduler.intent import node_topology_policy
from toposched.scheduler.nodes import NodeSpec
from toposched.scheduler.placement import ContainerPlacement, Placement
from toposched.scheduler.report_check import check_description_against_zones
from toposched.topology import CPUSet, Machine
from toposched.topology.nrt import NodeResourceTopology, machine_from_nrt, numa_zone_resources
from toposched.workload import Pod, add_resources
from toposched.workload.pod import subtract_resources

__all__ = ["Cluster", "NodeRecord", "PodEntry", "kubelet_config_from_nrt", "placement_of"]

SOURCE_MACHINE, SOURCE_DESCRIPTION, SOURCE_COUNTS = "machine", "description", "counts"
_DESCRIPTION_CACHE = 256  # distinct node descriptions kept decoded (one per hardware model and configuration)


@dataclass
class PodEntry:
    """A pod the cluster knows on a node: its placement, and whether the node's report shows it yet."""

    pod: Pod
    placement: Placement | None
    assumed: bool  # reserved by us, not yet confirmed bound
    since: float  # when it was reserved or first seen
    reflected: bool = False  # the node's last report already counts it
    usage: dict[int, dict[str, int]] = field(default_factory=dict)  # what admitting it took from each zone
    extras: dict[str, Any] = field(default_factory=dict)  # what plugins reserved beyond the replica (GPU shares)


@dataclass(frozen=True, slots=True)
class Departure:
    """A pod that left its node while the node's last report still counts it: what it held per zone, and when."""

    usage: Mapping[int, Mapping[str, int]]
    since: float | None  # None: it left at an unknown time (counted from the next report)


@dataclass
class NodeRecord:
    """Everything known about one node."""

    spec: NodeSpec
    model: KubeletNode | None = None
    nrt: NodeResourceTopology | None = None
    report_time: float | None = None
    pods: dict[str, PodEntry] = field(default_factory=dict)
    requested: dict[str, int] = field(default_factory=dict)
    broken: str = ""  # why the node's topology data is unusable; the node is then unschedulable
    inventory: DeviceInventory | None = None  # the node's devices with their NUMA and PCIe locality
    # Where the replica came from: "machine" (given directly), "description" (the agent's node
    # description in the report) or "counts" (a report without one: NUMA zones and counts only).
    replica_source: str = ""
    replica_key: str = ""  # the report text the replica was built from; a different one rebuilds it
    degraded: str = ""  # why a report's description could not be used (the node is count-only then)
    external_devices: tuple[DescribedDevice, ...] = ()  # another agent's description of the devices (koordlet)
    departed: dict[str, Departure] = field(default_factory=dict)  # pods gone that the last report still counts
    # Every exclusive CPU the ledger's pods hold, as a mask (the union of their placements' cpu_mask),
    # kept as pods come and go; and the sum of their CPU counts, which equals the mask's count exactly
    # while no CPU is held twice. See add/remove.
    held_cpus: int = field(default=0, init=False)
    held_count: int = field(default=0, init=False)
    # Per zone and resource, what the pods the last report does not count yet took (the sum of their
    # entries' usage), kept as pods come and go; recomputed when a report or a rewritten placement
    # changes which pods it covers or what they took. See add/remove/recount.
    unreflected: dict[int, dict[str, int]] = field(default_factory=dict, init=False)

    def add(self, uid: str, entry: PodEntry) -> None:
        """Put a pod's entry in the ledger; what it holds counts in :attr:`held_cpus` and, while no
        report counts it, in :attr:`unreflected`."""
        self.pods[uid] = entry
        mask = entry.placement.cpu_mask if entry.placement is not None else 0
        if mask:
            self.held_cpus |= mask
            self.held_count += mask.bit_count()
        if not entry.reflected and entry.usage:
            _add_usage(self.unreflected, entry.usage, 1)

    def remove(self, uid: str) -> PodEntry:
        """Take a pod's entry out of the ledger, and what it held out of the kept sums. Its CPUs are
        freed unless another pod holds them too, which only a walk over the pods can tell; it is
        walked only then (the counts show it)."""
        entry = self.pods.pop(uid)
        mask = entry.placement.cpu_mask if entry.placement is not None else 0
        if mask and self.held_cpus.bit_count() == self.held_count:  # no CPU held twice: the mask was this pod's alone
            self.held_cpus &= ~mask
            self.held_count -= mask.bit_count()
        elif mask:
            self.held_cpus, self.held_count = self._held()
        if not entry.reflected and entry.usage:
            _add_usage(self.unreflected, entry.usage, -1)
        return entry

    def recount(self) -> None:
        """Recompute :attr:`held_cpus`, :attr:`held_count` and :attr:`unreflected` from every pod in the
        ledger (after placements or usages were rewritten, or a report changed which pods it counts)."""
        self.held_cpus, self.held_count = self._held()
        self.unreflected = _summed(entry.usage for entry in self.pods.values() if not entry.reflected)

    def _held(self) -> tuple[int, int]:
        held = count = 0
        for entry in self.pods.values():
            mask = entry.placement.cpu_mask if entry.placement is not None else 0
            held |= mask
            count += mask.bit_count()
        return held, count

    @property
    def count_only(self) -> bool:
        """True when the replica knows counts only: its placements name NUMA nodes, not CPU or device ids."""
        return self.replica_source == SOURCE_COUNTS

    @property
    def name(self) -> str:
        """The node's name."""
        return self.spec.name

    @property
    def policy(self) -> str:
        """The node's Topology Manager policy ("none" without topology data)."""
        return self.model.config.topology_manager_policy if self.model else "none"

    @property
    def scope(self) -> str:
        """The node's Topology Manager scope."""
        return self.model.config.topology_manager_scope if self.model else "container"


def kubelet_config_from_nrt(nrt: NodeResourceTopology, machine: Machine, labels: Mapping[str, str]) -> KubeletConfig:
    """The kubelet configuration a report implies, for a replica of that node.

    This is the count-only view of a node whose report has no node description (an NRT published
    by node-feature-discovery): what the report does not say is assumed the way that never lets
    a pod through that the kubelet might refuse. Policy and scope come from the report's
    attributes (else the deprecated ``topologyPolicies``, else the node label
    ``toposched.io/numa-policy``). The CPU manager is taken as ``static`` unless the report says
    ``cpuManagerPolicy: none`` (a NUMA policy is meaningless without it); the memory manager as
    ``Static`` unless the report names another policy or the Topology Manager policy is
    ``none`` (then nothing is aligned and memory is not pinned anyway). CPUs and memory that the
    report shows as capacity but not allocatable are the reserved ones (the lowest CPU ids of
    the zone: which ones are unknown).
    """
    node_policy = node_topology_policy(nrt, labels)
    attrs = nrt.attributes
    cpu_policy = attrs.get(CPU_MANAGER_POLICY_ATTRIBUTE, "static")
    memory_policy = attrs.get(MEMORY_MANAGER_POLICY_ATTRIBUTE) or ("None" if node_policy.policy == "none" else "Static")
    reserved: set[int] = set()
    reserved_memory: dict[int, dict[str, int]] = {}
    zones = numa_zone_resources(nrt)
    for numa_id, resources in zones.items():
        cpu = resources.get("cpu")
        if cpu is not None:
            held = (cpu.capacity - cpu.allocatable) // 1000
            reserved.update(machine.numa(numa_id).cpus.first(held))
        memory = resources.get("memory")
        if memory is not None and memory.capacity > memory.allocatable:
            reserved_memory[numa_id] = {"memory": memory.capacity - memory.allocatable}
    if memory_policy == "Static" and not reserved_memory:
        with_memory = [n for n, r in sorted(zones.items()) if r.get("memory") is not None and r["memory"].capacity]
        if not with_memory:
            memory_policy = "None"  # nothing to pin memory on
        else:
            # The kubelet refuses Static without reserved memory; its default eviction threshold
            # (100Mi), held on the first NUMA node, is the least such a node can reserve.
            reserved_memory[with_memory[0]] = {"memory": 100 * 2**20}
    return KubeletConfig(
        topology_manager_policy=node_policy.policy,
        topology_manager_scope=node_policy.scope,
        cpu_manager_policy=cpu_policy if cpu_policy in ("none", "static") else "static",
        reserved_system_cpus=CPUSet(reserved) if reserved else None,
        memory_manager_policy=memory_policy,
        reserved_memory=reserved_memory if memory_policy == "Static" else {},
        system_reserved={"memory": sum(r["memory"] for r in reserved_memory.values())} if memory_policy == "Static" else {},
        eviction_memory=0 if memory_policy == "Static" else 100 * 2**20,
    )


def placement_of(node: str, admission: Admission, pod: Pod) -> Placement:
    """The Placement that a replica's admission amounts to."""
    containers = {}
    for c in pod.all_containers:
        got = admission.containers.get(c.name)
        if got is None:
            continue
        numa = set(got.memory)
        if got.cpuset or got.memory or got.devices:
            numa.update(got.hint.numa_nodes or ())
        containers[c.name] = ContainerPlacement(
            cpuset=got.cpuset,
            numa_nodes=frozenset(numa),
            memory=got.memory,
            devices={r: tuple(sorted(ids)) for r, ids in got.devices.items()},
            cpu_millis=c.request("cpu"),
        )
    return Placement(node, admission.numa_nodes(), containers)


class Cluster:
    """Nodes, reports, pods and in-flight placements; the single source the scheduler reads.

    ``on_change`` is called with a node name after anything about that node changed (the
    scheduler's vector table uses it to refresh one row). ``reflect_timeout`` is how long
    after a placement a report is taken to include it when no pods fingerprint says so.
    ``resource_map`` says which extended resource each device of a known machine is (default:
    :meth:`DeviceResourceMap.default`); a node added with ``machine`` and no ``device_plugins``
    gets its device plugins from it.
    """

    def __init__(self, *, reflect_timeout: float = 120.0, on_change: Callable[[str], None] | None = None,
                 resource_map: DeviceResourceMap | None = None):
        self.resource_map = resource_map or DeviceResourceMap.default()
        self.nodes: dict[str, NodeRecord] = {}
        self.pod_node: dict[str, str] = {}
        self.reflect_timeout = reflect_timeout
        self._descriptions: dict[str, NodeDescription] = {}  # description text -> decoded, oldest first
        self._reported: dict[str, tuple[NodeResourceTopology, dict[int, dict[str, int]]]] = {}  # see _zones_reported
        self._listeners: list[Callable[[str], None]] = [on_change] if on_change else []
        # Bumped whenever a node leaves or a node's replica is replaced (a new node gets one): what
        # is read from the set of replicas holds while it stays the same.
        self.replicas_version = 0

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(node_name)`` after every change to a node (also for added and removed nodes)."""
        self._listeners.append(listener)

    def _changed(self, name: str) -> None:
        for listener in self._listeners:
            listener(name)

    # ---- nodes -----------------------------------------------------------------------------------

    def set_node(
        self,
        spec: NodeSpec,
        *,
        machine: Machine | None = None,
        kubelet_config: KubeletConfig | None = None,
        device_plugins: Mapping[str, Iterable[tuple[str, Iterable[int] | None]]] | None = None,
    ) -> NodeRecord:
        """Add or update a node. With ``machine`` the node's hardware and kubelet are known directly.

        Updating a node keeps its pods and replica unless new hardware is given.
        """
        record = self.nodes.get(spec.name)
        if record is None:
            record = self.nodes[spec.name] = NodeRecord(spec)
        else:
            record.spec = spec
        if machine is not None:
            record.inventory = DeviceInventory.from_machine(machine, self.resource_map)
            if device_plugins is None:
                device_plugins = record.inventory.device_plugins()
            # GPUs are also offered in shares, as koordlet reports them (see GPUShare).
            shares = koordlet_resources(inventory_gpus(record.inventory))
            record.model = KubeletNode(machine, kubelet_config, device_plugins=device_plugins, extended_resources=shares,
                                       name=spec.name, merge=fast_merge_hints)
            record.replica_source, record.replica_key = SOURCE_MACHINE, ""
            self._replay(record)
        self._changed(spec.name)
        return record

    def remove_node(self, name: str) -> None:
        """Forget a node and the pods on it."""
        record = self.nodes.pop(name, None)
        self._reported.pop(name, None)
        if record is not None:
            self.replicas_version += 1
            for uid in record.pods:
                self.pod_node.pop(uid, None)
            self._changed(name)

    def update_report(self, nrt: NodeResourceTopology, now: float) -> None:
        """Take a node's new NodeResourceTopology report.

        A report with the agent's node description (:mod:`toposched.kubelet.description`)
        builds the replica from it: exact CPU ids and siblings, reserved CPUs, policies and
        options, devices with ids and PCIe locality. A report without one builds a count-only
        replica from its zones (:func:`machine_from_nrt`, :func:`kubelet_config_from_nrt`), unless
        the node's hardware was given directly (:meth:`set_node` with a machine). The replica is
        rebuilt when the description (or, count-only, the zones' capacities and the attributes)
        changes; the node's pods, in-flight reservations included, are admitted into the new one.
        A description that cannot be used makes the node count-only (``degraded`` says why); a
        report that describes no machine at all marks the node broken (unschedulable, reason
        kept). No other node is touched.
        """
        record = self.nodes.get(nrt.name)
        if record is None:
            record = self.nodes[nrt.name] = NodeRecord(NodeSpec(nrt.name))
        record.nrt, record.report_time, record.broken = nrt, now, ""
        text = nrt.attributes.get(DESCRIPTION_ATTRIBUTE)
        if text is not None:
            if record.replica_source != SOURCE_DESCRIPTION or record.replica_key != text:
                try:
                    self._replica_from_description(record, nrt, text)
                except InputError as err:
                    record.degraded = str(err)
                    text = None
            if text is not None:
                record.degraded = ""
        if text is None and record.replica_source != SOURCE_MACHINE:
            key = _counts_key(nrt)
            if record.replica_source != SOURCE_COUNTS or record.replica_key != key or record.model is None:
                self._count_only_replica(record, nrt, key)
        fingerprint = nrt.attributes.get(FINGERPRINT_ATTRIBUTE)
        if fingerprint is not None and fingerprint == self.pods_fingerprint(record.name):
            for entry in record.pods.values():
                entry.reflected = not entry.assumed
        for entry in record.pods.values():
            if not entry.assumed and now - entry.since >= self.reflect_timeout:
                entry.reflected = True
        if record.departed:
            if fingerprint is not None and fingerprint == self.pods_fingerprint(record.name):
                record.departed.clear()  # the report counts exactly the pods still here
            else:
                record.departed = {uid: d if d.since is not None else Departure(d.usage, now)
                                   for uid, d in record.departed.items()
                                   if d.since is None or now - d.since < self.reflect_timeout}
        allocations = nrt.attributes.get(ALLOCATIONS_ATTRIBUTE)
        if allocations is not None and record.replica_source == SOURCE_DESCRIPTION:
            try:
                self._adopt_allocations(record, NodeAllocations.from_json(allocations, source=nrt.origin))
            except InputError as err:
                record.degraded = f"allocations not used: {err}"
        record.recount()  # pods the report now counts, the placements and usages its allocations moved
        self._changed(record.name)

    def _adopt_allocations(self, record: NodeRecord, allocations: NodeAllocations) -> None:
        """The replica takes the CPU and device ids the node reports for the pods the report reflects.

        The kubelet may have given a pod other ids than the replica guessed (it admitted pods in
        another order, or restarted); for every pod the report counts (reflected, not assumed)
        whose reported exclusive CPUs or devices differ from the replica's in ids but not in
        number, the replica's CPU manager and device manager states, the pod's placement and
        its per-zone usage take the reported ids. All of it or nothing: a report that would give
        a CPU or device to two holders, a reserved CPU, or an id the node lacks changes nothing.
        """
        model = record.model
        assert model is not None
        moved: dict[str, dict[str, ContainerPlacement]] = {}
        for uid, reported in allocations.pods.items():
            entry = record.pods.get(uid)
            if entry is None or entry.assumed or not entry.reflected or entry.placement is None:
                continue
            for name, c in entry.placement.containers.items():
                got = reported.get(name)
                if got is None:
                    continue
                new = c
                if model.cpu is not None and c.cpuset and got.cpus != c.cpuset and len(got.cpus) == len(c.cpuset):
                    new = dataclasses.replace(new, cpuset=got.cpus)
                devices = {r: ids for r, ids in got.devices.items()
                           if r in c.devices and len(ids) == len(c.devices[r]) and set(ids) != set(c.devices[r])}
                if devices:
                    new = dataclasses.replace(new, devices={**c.devices, **devices})
                if new is not c:
                    moved.setdefault(uid, {})[name] = new
        if not moved:
            return
        cpu_state = _cpu_state_with(model, moved)
        device_state = _device_state_with(model, moved)
        if cpu_state is None or device_state is None:
            return
        if model.cpu is not None:
            model.cpu.restore(cpu_state)
        model.devices.restore(device_state)
        machine = model.machine
        for uid, containers in moved.items():
            entry = record.pods[uid]
            for name, new in containers.items():
                old = entry.placement.containers[name]  # type: ignore[union-attr]
                for cpus, sign in ((old.cpuset, -1), (new.cpuset, 1)):
                    for cpu_id in cpus:
                        zone = entry.usage.setdefault(machine.cpu(cpu_id).numa_id, {})
                        zone["cpu"] = zone.get("cpu", 0) + sign * 1000
                for resource in new.devices:
                    for ids, sign in ((old.devices.get(resource, ()), -1), (new.devices[resource], 1)):
                        for device_id in ids:
                            device = record.inventory.get(device_id) if record.inventory is not None else None
                            if device is not None and device.numa_id is not None:
                                zone = entry.usage.setdefault(device.numa_id, {})
                                zone[resource] = zone.get(resource, 0) + sign
            entry.usage = _pruned(entry.usage)
            placement = entry.placement
            assert placement is not None
            entry.placement = dataclasses.replace(placement, containers={**placement.containers, **containers})

    def _count_only_replica(self, record: NodeRecord, nrt: NodeResourceTopology, key: str) -> None:
        """Build ``record``'s count-only replica from the report's zones (and koordlet's devices, when known).

        A report that describes no machine marks the node broken, keeping the reason.
        """
        try:
            machine = machine_from_nrt(nrt)
            if record.external_devices:
                # koordlet's Device object names this node's devices: they replace the ones the
                # zones only count (same resources), with ids, NUMA nodes, PCIe switches, memory.
                named = {d.resource for d in record.external_devices}
                kept = [d for d in machine.devices if d.attributes.get("resource") not in named]
                unknown = [d for d in record.external_devices if d.numa_id is not None and not machine.has_numa(d.numa_id)]
                if unknown:
                    raise InputError(f"device {unknown[0].id} is on NUMA node {unknown[0].numa_id}, which the report "
                                     "lacks", field="devices", source=f"Device {record.name}")
                machine = machine.with_devices([*kept, *(d.to_device() for d in record.external_devices)])
                inventory = DeviceInventory.from_machine(machine, self.resource_map)
                shares = koordlet_resources(inventory_gpus(inventory))
                plugins = inventory.device_plugins()
            else:
                inventory, shares, plugins = DeviceInventory.from_nrt(nrt, self.resource_map), {}, _device_plugins(machine)
            config = kubelet_config_from_nrt(nrt, machine, record.spec.labels)
            model = KubeletNode(machine, config, device_plugins=plugins, extended_resources=shares, name=nrt.name,
                                merge=fast_merge_hints)
        except InputError as err:
            record.model, record.broken, record.replica_source = None, str(err), ""
            self.replicas_version += 1
            return
        record.model, record.inventory = model, inventory
        record.replica_source, record.replica_key = SOURCE_COUNTS, key
        self._replay(record)

    def set_node_devices(self, name: str, devices: Iterable[DescribedDevice] | None) -> None:
        """Another agent's description of a node's devices (koordlet's ``Device`` object); None forgets it.

        Used where the node's report carries no node description: the count-only replica then
        knows the devices' ids, NUMA nodes, PCIe switches and GPU memory. A report with a
        description keeps its own devices.
        """
        record = self.nodes.get(name)
        if record is None:
            record = self.nodes[name] = NodeRecord(NodeSpec(name))
        record.external_devices = tuple(devices or ())
        if record.nrt is not None and record.replica_source in (SOURCE_COUNTS, ""):
            self._count_only_replica(record, record.nrt, _counts_key(record.nrt))
        self._changed(name)

    def _replica_from_description(self, record: NodeRecord, nrt: NodeResourceTopology, text: str) -> None:
        """Build ``record``'s replica from the report's node description; InputError leaves the record as it was."""
        description = self._descriptions.get(text)
        if description is None:
            description = NodeDescription.from_json(text, source=nrt.origin)
            # Nodes of one hardware model and configuration publish the same text: they share
            # one decoded machine (memory and time on clusters of thousands of alike nodes).
            self._descriptions[text] = description
            if len(self._descriptions) > _DESCRIPTION_CACHE:
                self._descriptions.pop(next(iter(self._descriptions)))
        check_description_against_zones(description, nrt)
        machine = description.machine_with_devices()
        inventory = DeviceInventory.from_machine(machine, self.resource_map)
        shares = koordlet_resources(inventory_gpus(inventory))
        try:
            model = KubeletNode(machine, description.config, device_plugins=description.device_plugins(),
                                extended_resources=shares, name=nrt.name, merge=fast_merge_hints)
        except InputError as err:
            raise InputError(err.message, field=f"{DESCRIPTION_ATTRIBUTE}.kubelet.{err.field or ''}".rstrip("."),
                             source=nrt.origin) from None
        kept = model.cpu.reserved_cpus if model.cpu is not None else CPUSet()
        if kept != description.reserved_cpus:
            raise InputError(f"reservedCPUs {description.reserved_cpus or '(none)'} are not the CPUs this kubelet "
                             f"configuration reserves ({kept or 'none'})", field=f"{DESCRIPTION_ATTRIBUTE}.reservedCPUs",
                             source=nrt.origin)
        record.model, record.inventory = model, inventory
        record.replica_source, record.replica_key = SOURCE_DESCRIPTION, text
        self._replay(record)

    def drop_report(self, name: str) -> None:
        """The node's report was deleted: the replica (hardware and pods) stays, the report's limits go."""
        record = self.nodes.get(name)
        self._reported.pop(name, None)  # the parsed zones of a report that is gone
        if record is not None:
            record.nrt, record.report_time = None, None
            record.departed.clear()
            self._changed(name)

    def mark_broken(self, name: str, reason: str) -> None:
        """A report of ``name`` could not be read: the node becomes unschedulable with ``reason``; no other node changes."""
        record = self.nodes.get(name)
        if record is None:
            record = self.nodes[name] = NodeRecord(NodeSpec(name))
        record.broken = reason
        self._changed(name)

    def pods_fingerprint(self, node: str) -> str:
        """The pods fingerprint node-feature-discovery would publish for the pods known on ``node``."""
        record = self.nodes[node]
        return pods_fingerprint((e.pod.namespace, e.pod.name) for e in record.pods.values() if not e.assumed)

    def _replay(self, record: NodeRecord) -> None:
        """Re-admit the node's known pods into a fresh replica, oldest first."""
        self.replicas_version += 1
        model = record.model
        assert model is not None
        for entry in sorted(record.pods.values(), key=lambda e: e.since):
            before = model.available()
            admission = model.admit(entry.pod)
            if admission.admitted:
                entry.placement = placement_of(record.name, admission, entry.pod)
                entry.usage = _taken(before, model.available())  # the new replica may place it on other zones
        record.recount()

    # ---- pods ------------------------------------------------------------------------------------

    def assume(self, pod: Pod, node: str, now: float, *, exact: bool = True) -> tuple[Admission | None, Placement | None]:
        """Reserve: put ``pod`` on ``node`` in the ledger and the replica; returns the replica's answer.

        Without topology data, or with ``exact=False`` (a scheduler that does not predict the
        kubelet), the pod is recorded at node level only: a placement with no NUMA share. A
        replica that refuses the pod changes nothing; its admission is returned.
        """
        record = self._record(node)
        uid = _uid(pod)
        if uid in self.pod_node:
            raise InputError(f"pod is already on node {self.pod_node[uid]}", field="pod", source=f"pod {pod.key}")
        model = record.model
        if exact and model is not None:
            pins = not model.pins_nothing(pod)  # else what the zones hold stays as it is: nothing to diff
            before = model.available() if pins else None
            admission = model.admit(pod, trial=True)
            if not admission.admitted:
                return admission, None
            placement = placement_of(node, admission, pod)
            usage = _taken(before, model.available()) if before is not None else {}
        else:
            admission, placement, usage = None, Placement(node), {}
        record.add(uid, PodEntry(pod, placement, assumed=True, since=now, usage=usage))
        self.pod_node[uid] = node
        add_resources(record.requested, pod.effective_requests())
        record.requested["pods"] = record.requested.get("pods", 0) + 1
        self._changed(node)
        return admission, placement

    def confirm(self, pod: Pod | str, now: float) -> None:
        """The pod's binding succeeded: from now on the next report may reflect it."""
        uid = pod if isinstance(pod, str) else _uid(pod)
        node = self.pod_node.get(uid)
        if node is not None:
            entry = self.nodes[node].pods[uid]
            entry.assumed, entry.since = False, now

    def forget(self, pod: Pod | str, now: float | None = None) -> None:
        """Unreserve or delete: the pod leaves its node; its node returns to the exact prior state.

        A pod the node's last report counted (reflected) is remembered as a *departure* until a
        report shows it gone (the pods fingerprint matches, or the report is ``reflect_timeout``
        newer than ``now``, the departure's time; without ``now``, newer than the next report):
        until then the zones it left are credited with what it held, so the capacity it frees is
        offered at once instead of after the next report.
        """
        uid = pod if isinstance(pod, str) else _uid(pod)
        node = self.pod_node.pop(uid, None)
        if node is None:
            return
        record = self.nodes[node]
        entry = record.remove(uid)
        if entry.reflected and entry.usage and record.nrt is not None:
            record.departed[uid] = Departure(entry.usage, now)
        if record.model is not None:
            if entry.assumed:
                record.model.unadmit(uid)  # never reached the kubelet: as if it had never been admitted
            else:
                record.model.release(uid)
        record.requested["pods"] -= 1
        record.requested = subtract_resources(record.requested, entry.pod.effective_requests())
        self._changed(node)

    def replace_placement(self, pod: Pod, placement: Placement) -> None:
        """Make ``placement`` the placement of a pod already on its node (agent-enforced cpusets, device ids).

        The replica's CPU manager state takes the new exclusive cpusets (the shared pool gets the
        old CPUs back and gives up the new ones), its device manager the new device ids
        (:meth:`~toposched.kubelet.device_manager.DeviceManager.reassign`: same counts, free
        healthy ids, else InputError and nothing changes), the ledger entry's per-zone usage
        moves with them, and the node's row is refreshed; Unreserve still restores the state
        from before the pod was admitted.
        """
        uid = _uid(pod)
        node = self.pod_node.get(uid)
        if node is None or node != placement.node:
            raise InputError(f"pod is not on node {placement.node}", field="pod", source=f"pod {pod.key}")
        record = self.nodes[node]
        entry = record.pods[uid]
        if record.model is not None:
            self._reassign_devices(record, entry, uid, placement)
        old = entry.placement.cpuset if entry.placement is not None else CPUSet()
        cpu = record.model.cpu if record.model is not None else None
        if cpu is not None:
            state = cpu.state
            for name in list(state.assignments.get(uid, {})):
                state = state.without(uid, name)
            for name, c in placement.containers.items():
                if c.cpuset:
                    state = state.with_assignment(uid, name, c.cpuset)
            cpu.restore(state.with_default((state.default_cpuset | old) - placement.cpuset))
            machine = record.model.machine  # type: ignore[union-attr]
            for cpus, sign in ((old, -1), (placement.cpuset, 1)):
                for cpu_id in cpus:
                    zone = entry.usage.setdefault(machine.cpu(cpu_id).numa_id, {})
                    zone["cpu"] = zone.get("cpu", 0) + sign * 1000
            entry.usage = _pruned(entry.usage)
        entry.placement = placement
        record.recount()  # the pod's CPUs, devices and usage moved
        self._changed(node)

    @staticmethod
    def _reassign_devices(record: NodeRecord, entry: PodEntry, uid: str, placement: Placement) -> None:
        """The device-plugin ids of ``placement`` into the replica, the ledger's zone usage moved with them."""
        devices = record.model.devices  # type: ignore[union-attr]
        managed = set(devices.resources)
        held = devices.pod_devices(uid)
        changes = {}
        for name, c in placement.containers.items():
            wanted = {r: frozenset(ids) for r, ids in c.devices.items() if r in managed}
            if any(wanted[r] != held.get(name, {}).get(r, frozenset()) for r in wanted):
                changes[name] = wanted
        if not changes:
            return
        before = record.model.available()  # type: ignore[union-attr]
        state = devices.state
        try:
            for name, wanted in changes.items():
                devices.reassign(uid, name, wanted)
        except InputError:
            devices.restore(state)
            raise
        after = record.model.available()  # type: ignore[union-attr]
        for numa_id in set(before) | set(after):
            was, now = before.get(numa_id, {}), after.get(numa_id, {})
            for resource in set(was) | set(now):
                moved = was.get(resource, 0) - now.get(resource, 0)
                if moved:
                    zone = entry.usage.setdefault(numa_id, {})
                    zone[resource] = zone.get(resource, 0) + moved
        entry.usage = _pruned(entry.usage)

    def add_bound_pod(self, pod: Pod, node: str, now: float) -> Placement | None:
        """A pod already bound to ``node`` (by us before a restart, or by another scheduler).

        It is admitted into the replica like the kubelet admitted it, and counted as reflected
        by reports once ``reflect_timeout`` has passed.
        """
        uid = _uid(pod)
        if self.pod_node.get(uid) == node:
            return self.nodes[node].pods[uid].placement
        self.forget(uid)
        record = self._record(node)
        placement: Placement | None = Placement(node)
        usage: dict[int, dict[str, int]] = {}
        if record.model is not None:
            before = record.model.available()
            admission = record.model.admit(pod)
            placement = placement_of(node, admission, pod) if admission.admitted else None
            usage = _taken(before, record.model.available())
        record.add(uid, PodEntry(pod, placement, assumed=False, since=now, usage=usage))
        self.pod_node[uid] = node
        add_resources(record.requested, pod.effective_requests())
        record.requested["pods"] = record.requested.get("pods", 0) + 1
        self._changed(node)
        return placement

    def _record(self, node: str) -> NodeRecord:
        try:
            return self.nodes[node]
        except KeyError:
            raise InputError(f"no node named {node!r}", field="node") from None

    # ---- what a node can still give ------------------------------------------------------------

    def zone_available(self, node: str) -> dict[int, dict[str, int]]:
        """Per NUMA zone and resource, what the node can still give (the smaller of replica and report)."""
        record = self.nodes[node]
        if record.model is None:
            return {}
        available = record.model.available()
        if record.nrt is None:
            return available
        reported = self._zones_reported(record)
        pending = record.unreflected
        credited = _summed(d.usage for d in record.departed.values()) if record.departed else {}
        for numa_id, resources in available.items():
            report = reported.get(numa_id)
            if report is None:
                continue
            owed, back = pending.get(numa_id), credited.get(numa_id)
            for name, value in resources.items():
                seen = report.get(name)
                if seen is None:
                    continue
                if owed:
                    seen -= owed.get(name, 0)
                if back:
                    seen += back.get(name, 0)
                if seen < value or value < 0:  # else the replica's value stands
                    resources[name] = max(0, min(value, seen))
        return available

    def _zones_reported(self, record: NodeRecord) -> dict[int, dict[str, int]]:
        """Per NUMA zone and resource, what the node's last report says is available (read-only).

        Read once per report (reports are immutable and replaced whole): every row refresh of the
        node asks, and parsing the zones again took ~15 µs of each."""
        known = self._reported.get(record.name)
        if known is not None and known[0] is record.nrt:
            return known[1]
        assert record.nrt is not None
        reported = {n: {k: r.available for k, r in res.items()} for n, res in numa_zone_resources(record.nrt).items()}
        self._reported[record.name] = (record.nrt, reported)
        return reported



def _taken(before: Mapping[int, Mapping[str, int]], after: Mapping[int, Mapping[str, int]]) -> dict[int, dict[str, int]]:
    """Per zone and resource, how much less is available after than before (an admission's real take)."""
    out: dict[int, dict[str, int]] = {}
    if before == after:  # a pod that pins nothing
        return out
    for numa_id, resources in before.items():
        now = after.get(numa_id, {})
        taken = {name: value - now.get(name, 0) for name, value in resources.items() if value > now.get(name, 0)}
        if taken:
            out[numa_id] = taken
    return out


def _pruned(usage: Mapping[int, Mapping[str, int]]) -> dict[int, dict[str, int]]:
    """Per-zone usage without the amounts that came back to 0 (and the zones left empty)."""
    out = {n: {k: v for k, v in z.items() if v} for n, z in usage.items()}
    return {n: z for n, z in out.items() if z}


def _uid(pod: Pod) -> str:
    return pod.uid or pod.key


def _device_plugins(machine: Machine) -> dict[str, list[tuple[str, list[int] | None]]]:
    """Device resources of a machine built from a report: each device carries its resource name."""
    out: dict[str, list[tuple[str, list[int] | None]]] = {}
    for d in machine.devices:
        resource = d.attributes.get("resource")
        if resource:
            out.setdefault(resource, []).append((d.address, None if d.numa_id is None else [d.numa_id]))
    return out


def _counts_key(nrt: NodeResourceTopology) -> str:
    """What a count-only replica depends on: the zones' capacities and allocatables, and the attributes
    other than the pods fingerprint (``available`` changes with every pod and rebuilds nothing)."""
    zones = [(z.name, z.type, z.parent, sorted(z.costs.items()), sorted(z.attributes.items()),
              [(r.name, r.capacity, r.allocatable) for r in z.resources]) for z in nrt.zones]
    attributes = sorted((k, v) for k, v in nrt.attributes.items() if k not in (FINGERPRINT_ATTRIBUTE, ALLOCATIONS_ATTRIBUTE))
    return repr((zones, attributes, nrt.top_level_policies))


def _cpu_state_with(model: KubeletNode, moved: Mapping[str, Mapping[str, ContainerPlacement]]) -> CPUState | None:
    """The replica's CPU manager state with the moved containers' cpusets; None when that would be inconsistent."""
    if model.cpu is None:
        return CPUState()
    state = model.cpu.state
    assignments = {uid: dict(containers) for uid, containers in state.assignments.items()}
    for uid, containers in moved.items():
        for name, c in containers.items():
            if name in assignments.get(uid, {}):
                assignments[uid][name] = c.cpuset
    seen = 0
    for containers in assignments.values():
        for cpus in containers.values():
            if seen & cpus.mask:
                return None  # two holders of one CPU
            seen |= cpus.mask
    everything = state.default_cpuset | state.assigned()
    held = CPUSet.from_mask(seen)
    if held - everything or held & model.cpu.reserved_cpus:
        return None
    return CPUState(everything - held, assignments)


def _device_state_with(model: KubeletNode, moved: Mapping[str, Mapping[str, ContainerPlacement]]
                       ) -> DeviceManagerState | None:
    """The replica's device manager state with the moved containers' device ids; None when inconsistent."""
    state = model.devices.state
    allocations = {uid: {name: dict(r) for name, r in containers.items()} for uid, containers in state.allocations.items()}
    for uid, containers in moved.items():
        for name, c in containers.items():
            held = allocations.get(uid, {}).get(name)
            if held is None:
                continue
            for resource, ids in c.devices.items():
                if resource in held:
                    held[resource] = frozenset(ids)
    for resource in state.devices:
        seen: set[str] = set()
        for containers in allocations.values():
            for held in containers.values():
                ids = held.get(resource, frozenset())
                if seen & ids or ids - state.healthy.get(resource, frozenset()):
                    return None
                seen |= ids
    return DeviceManagerState(state.numa_nodes, state.devices, state.healthy, allocations, state.reusable)


def _add_usage(total: dict[int, dict[str, int]], usage: Mapping[int, Mapping[str, int]], sign: int) -> None:
    """Add (``sign`` 1) or take away (-1) one per-zone usage in ``total``, dropping what comes to 0."""
    for numa_id, resources in usage.items():
        zone = total.setdefault(numa_id, {})
        for name, value in resources.items():
            left = zone.get(name, 0) + sign * value
            if left:
                zone[name] = left
            else:
                zone.pop(name, None)
        if not zone:
            del total[numa_id]


def _summed(usages: Iterable[Mapping[int, Mapping[str, int]]]) -> dict[int, dict[str, int]]:
    """Per zone and resource, the sum of the given per-zone usages."""
    out: dict[int, dict[str, int]] = {}
    for usage in usages:
        for numa_id, resources in usage.items():
            zone = out.setdefault(numa_id, {})
            for name, value in resources.items():
                zone[name] = zone.get(name, 0) + value
    return out
