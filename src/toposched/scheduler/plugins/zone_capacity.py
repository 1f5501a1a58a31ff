"""ZoneCapacity: the real CPU capacity of a NUMA zone on an oversold host caps what the zone takes.

The cassini case: a host runs online VMs beside offline pods, and the CPUs the offline side can
really use in a NUMA zone vary with the online load. A controller (not the node, which cannot
see it) writes that capacity into the zone's NodeResourceTopology attributes::

    zones:
    - name: node-1
      type: Node
      attributes:
      - {name: toposched.io/cpu-capacity, value: "11500m"}

``toposched.io/cpu-capacity`` is a Kubernetes CPU quantity ("12", "11500m", "11.5"), at most
8192 CPUs. The node's latest report is authoritative: a zone whose report carries no attribute
is uncapped, even if an earlier report (from which the scheduler built the node's machine) had
one. Only a node known without any report reads the attribute from ``NUMANode.attributes`` of its
machine. Zones without CPUs are not capped.

A zone's **load** is the CPU its pods take, as their placements record: each exclusive CPU counts
1000m in its zone; a container on the shared pool counts its request (``cpu_millis``) split
evenly over its NUMA nodes, or over every zone with CPUs when it has none (the shared pool spans
them), the lowest zone ids taking the remainder. Regular init containers are not counted: they
run before the containers that hold the pod's CPUs. A pod the node's replica could not place
counts its whole CPU request on the shared pool.

* **Filter**: the pod's shared-pool request, split the same way, must fit every capped zone
  (when the split is known: always, except for pods with devices and Guaranteed pods on nodes
  whose memory manager pins them, whose shared part follows those NUMA nodes); its exclusive
  CPUs (and a pinned shared part) must fit what the capped zones have left, unless an uncapped
  zone exists; under ``single-numa-node`` its exclusive CPUs must
  fit one zone. A necessary condition: **confirm** checks the exact placement after Reserve
  (the scheduler passes the one CPUOrchestration put under ``placement-override``) and refuses
  the node when a zone the pod uses would carry more than its capacity.
* **Score**: 100 for nodes without capped zones; otherwise the share of the capped zones'
  capacity that stays free if the pod's whole CPU request landed there (0..100).

A value that is not a CPU quantity, negative or absurd makes the node unschedulable for pods
that request CPU, with a Status naming the zone, the attribute and where it was read.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from toposched.errors import InputError
from toposched.kubelet.cpu_manager import guaranteed_cpus, pod_guaranteed_cpus
from toposched.names import CPU_CAPACITY_ATTRIBUTE
from toposched.quantity import canonical_units, format_cpu
from toposched.scheduler.cluster import Cluster, NodeRecord
from toposched.scheduler.framework import MAX_NODE_SCORE, CycleState, StateKey, registry
from toposched.scheduler.intent import NodePolicy, effective_policy, node_topology_policy, pod_intent
from toposched.scheduler.placement import Placement
from toposched.scheduler.plugins.cpu_orchestration import FlaggedNodes
from toposched.scheduler.plugins.node_cache import NodeCache
from toposched.scheduler.plugins.numa import POD_INTENT
from toposched.scheduler.plugins.rows import filter_rows, refusals_few
from toposched.scheduler.status import Status
from toposched.scheduler.table import NodeTable
from toposched.topology import Machine
from toposched.topology.nrt import zone_name
from toposched.workload import GUARANTEED, Pod

__all__ = ["CPU_CAPACITY_ATTRIBUTE", "MAX_ZONE_CPUS", "ZoneCapacity", "placement_zone_load", "zone_capacities",
           "zone_load"]

MAX_ZONE_CPUS = 8192  # the kernel's largest NR_CPUS; a zone claiming more is not a real one


def zone_capacities(record: NodeRecord) -> dict[int, int]:
    """The capped NUMA zones of a node: zone id -> capacity in millicores.

    Read from the latest report's zone attributes, or from the machine's NUMA node attributes
    when the node has no report. Raises InputError naming the zone, the attribute and the
    report (or node) for a value that is not a CPU quantity between 0 and 8192 CPUs.
    """
    if record.model is None:
        return {}
    out = {}
    zones = {z.name: z for z in record.nrt.zones} if record.nrt is not None else {}
    for node in record.model.machine.numa_nodes:
        if not node.cpus:
            continue
        if record.nrt is not None:
            zone = zones.get(zone_name(node.id))
            attributes = zone.attributes if zone is not None else {}
            where = record.nrt.origin
        else:
            attributes, where = node.attributes, f"node {record.name}"
        value = attributes.get(CPU_CAPACITY_ATTRIBUTE)
        if value is None:
            continue
        field = f"zones.{zone_name(node.id)}.attributes.{CPU_CAPACITY_ATTRIBUTE}"
        try:
            millis = canonical_units("cpu", value, field=field)
        except InputError as err:
            raise InputError(f"{value!r} is not a CPU quantity: {err.message}", field=field, source=where) from None
        if millis > MAX_ZONE_CPUS * 1000:
            raise InputError(f"{value!r} is more than {MAX_ZONE_CPUS} CPUs", field=field, source=where)
        out[node.id] = millis
    return out


def _cpu_zones(machine: Machine) -> list[int]:
    return [n.id for n in machine.numa_nodes if n.cpus]


def _split(millis: int, zones: list[int], into: dict[int, int]) -> None:
    """Add ``millis`` to ``zones`` evenly, the lowest ids taking the remainder (as Placement's Koordinator view)."""
    if not zones or not millis:
        return
    share, extra = divmod(millis, len(zones))
    for i, zone in enumerate(sorted(zones)):
        into[zone] = into.get(zone, 0) + share + (1 if i < extra else 0)


def placement_zone_load(pod: Pod, placement: Placement | None, machine: Machine) -> dict[int, int]:
    """The CPU (millicores) a pod with this placement takes from each NUMA zone; see the module notes."""
    load: dict[int, int] = {}
    zones = _cpu_zones(machine)
    if placement is None or not placement.containers:
        _split(pod.effective_requests().get("cpu", 0), zones, load)
        return load
    for cpu in placement.cpuset:
        zone = machine.cpu(cpu).numa_id
        load[zone] = load.get(zone, 0) + 1000
    regular_init = {c.name for c in pod.init_containers if not c.is_sidecar}
    for name, c in placement.containers.items():
        if c.cpuset or name in regular_init:
            continue
        numa = [n for n in c.numa_nodes if n in zones]
        _split(c.cpu_millis, numa or zones, load)
    return load


def zone_load(record: NodeRecord, *, exclude: str | None = None) -> dict[int, int]:
    """The CPU load of each NUMA zone of a node from the pods on it (``exclude``: a pod uid left out)."""
    load: dict[int, int] = {}
    if record.model is None:
        return load
    machine = record.model.machine
    for uid, entry in record.pods.items():
        if uid == exclude:
            continue
        for zone, millis in placement_zone_load(entry.pod, entry.placement, machine).items():
            load[zone] = load.get(zone, 0) + millis
    return load


@dataclass(frozen=True, slots=True)
class _Demand:
    """What a pod will take: exclusive CPUs (millicores, pod peak and largest container) and its shared-pool part."""

    exclusive: int
    largest: int
    shared: int
    guaranteed: bool
    devices: bool

    @property
    def total(self) -> int:
        return self.exclusive + self.shared


_DEMAND: StateKey[_Demand] = StateKey("demand", "ZoneCapacity")


def _read_capacities(record: NodeRecord) -> dict[int, int] | str:
    """The node's capped zones, or the reason they cannot be read."""
    try:
        return zone_capacities(record)
    except InputError as err:
        return f"unusable NUMA zone CPU capacity: {err}"


@registry.register
class ZoneCapacity:
    """A NUMA zone's ``toposched.io/cpu-capacity`` attribute caps the CPU its pods take; see the module notes."""

    name = "ZoneCapacity"
    exact_placement = True  # it reads and decides cpusets: Reserve must go through the kubelet replica

    def __init__(self, args: Mapping[str, Any]) -> None:
        if args:
            raise InputError(f"takes no arguments, got {sorted(args)}", field=f"{self.name}.args")
        self._caps: NodeCache[dict[int, int] | str] = NodeCache()
        self._flags: weakref.WeakKeyDictionary[Cluster, FlaggedNodes] = weakref.WeakKeyDictionary()

    # ---- reading

    def _demand(self, state: CycleState, pod: Pod) -> _Demand:
        demand = state.get(_DEMAND)
        if demand is None:
            # The kubelet's rule for exclusive CPUs, as NUMAAlignment's PreFilter already read it this cycle.
            intent = state.get(POD_INTENT)
            if intent is not None:
                counts, peak = intent.exclusive_cpus, intent.pod_exclusive_cpus
            else:
                counts, peak = {c.name: guaranteed_cpus(pod, c) for c in pod.all_containers}, pod_guaranteed_cpus(pod)
            running = (*pod.containers, *(c for c in pod.init_containers if c.is_sidecar))
            shared = sum(c.request("cpu") for c in running if not counts.get(c.name))
            # Where a Guaranteed pod's memory or any pod's devices are pinned, its shared-pool CPU
            # follows them to NUMA nodes known only after Reserve.
            devices = any("/" in resource for resource in pod.effective_requests())
            demand = state[_DEMAND] = _Demand(peak * 1000, max(counts.values(), default=0) * 1000, shared,
                                          pod.qos_class == GUARANTEED, devices)
        return demand

    def _capacities(self, record: NodeRecord) -> dict[int, int] | str:
        """The node's capped zones, or the reason they cannot be read (kept until the node's data changes)."""
        return self._caps.read(record.name, (record.nrt, record.model), lambda: _read_capacities(record))

    def _flagged(self, cluster: Cluster) -> FlaggedNodes:
        """Nodes with a capped zone or an unreadable capacity: the only ones this plugin judges."""
        flags = self._flags.get(cluster)
        if flags is None:
            flags = self._flags[cluster] = FlaggedNodes(cluster, lambda record: bool(self._capacities(record)))
        return flags

    # ---- filter

    def filter(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        """Whether the pod's CPU can fit the node's capped zones (a necessary condition; confirm is exact)."""
        demand = self._demand(state, pod)
        if not demand.total:
            return Status.success()
        caps = self._capacities(node)
        if isinstance(caps, str):
            return Status.unresolvable(caps, plugin=self.name)
        if not caps:
            return Status.success()
        machine = node.model.machine  # type: ignore[union-attr]
        load = zone_load(node)
        room = {zone: cap - load.get(zone, 0) for zone, cap in caps.items()}
        pinned = demand.devices or (demand.guaranteed and node.model.memory is not None)  # type: ignore[union-attr]
        rest = demand.exclusive
        if pinned:
            rest += demand.shared
        else:
            shares: dict[int, int] = {}
            _split(demand.shared, _cpu_zones(machine), shares)
            for zone in sorted(caps):
                share = shares.get(zone, 0)
                if share and share > room[zone]:  # a zone the pod adds nothing to is not its problem
                    return Status.unschedulable(self._over(zone, share, room[zone], caps[zone]), plugin=self.name)
                room[zone] -= share
        uncapped = any(zone not in caps for zone in _cpu_zones(machine))
        if rest and not uncapped:
            left = sum(max(0, r) for r in room.values())
            if left < rest:
                reason = (f"the NUMA zones' CPU capacity ({CPU_CAPACITY_ATTRIBUTE}) leaves {format_cpu(left)} CPU, "
                          f"the pod needs {format_cpu(rest)}")
                return Status.unschedulable(reason, plugin=self.name)
        if demand.largest and not uncapped and self._single_numa(pod, node):
            want = demand.exclusive if node.scope == "pod" else demand.largest
            best = max(room.values())
            if best < want:
                reason = (f"no NUMA zone has {format_cpu(want)} CPU left under its capacity ({CPU_CAPACITY_ATTRIBUTE}) "
                          f"for the pod's exclusive CPUs; the most is {format_cpu(max(0, best))}")
                return Status.unschedulable(reason, plugin=self.name)
        return Status.success()

    @staticmethod
    def _over(zone: int, want: int, room: int, cap: int) -> str:
        return (f"NUMA zone {zone} has {format_cpu(max(0, room))} CPU left under its capacity {format_cpu(cap)} "
                f"({CPU_CAPACITY_ATTRIBUTE}), the pod would add {format_cpu(want)}")

    @staticmethod
    def _single_numa(pod: Pod, node: NodeRecord) -> bool:
        """Whether the pod's exclusive CPUs must sit on one zone (a malformed policy is someone else's refusal)."""
        try:
            policy = node_topology_policy(node.nrt, node.spec.labels, node_name=node.name) if node.nrt is not None \
                else NodePolicy(node.policy, node.scope, "kubelet")
            effective, _ = effective_policy(pod_intent(pod), policy)
        except InputError:
            return False
        return effective == "single-numa-node"

    def filter_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> tuple[np.ndarray, Any]:
        """The per-node verdict for every row; only rows whose node has capped zones are evaluated
        (each refused row keeps its per-node code: an unusable capacity is UnschedulableAndUnresolvable)."""
        ok = np.ones(len(rows), dtype=bool)
        self._caps.forget_departed(table.cluster.nodes)
        positions = self._flagged(table.cluster).positions(table, rows)
        if not len(positions) or not self._demand(state, pod).total:
            return ok, ""
        return ok, filter_rows(self, state, pod, table, rows, positions, ok)

    def filter_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[str | None]:
        """:meth:`filter_all` for a few rows (the same reasons): None where a row passes."""
        positions = self._flagged(table.cluster).positions_few(table, rows)
        if not positions or not self._demand(state, pod).total:
            return [None] * len(rows)
        return refusals_few(self, state, pod, table, rows, positions)

    # ---- after Reserve

    def confirm(self, state: CycleState, pod: Pod, node: NodeRecord, placement: Placement) -> Status:
        """Exact: no zone the pod's placement uses carries more than its capacity (other pods included)."""
        caps = self._capacities(node)
        if isinstance(caps, str):
            return Status.unresolvable(caps, plugin=self.name)
        if not caps or node.model is None:
            return Status.success()
        load = zone_load(node, exclude=pod.uid or pod.key)
        for zone, millis in sorted(placement_zone_load(pod, placement, node.model.machine).items()):
            if zone in caps and millis and load.get(zone, 0) + millis > caps[zone]:
                return Status.unschedulable(self._over(zone, millis, caps[zone] - load.get(zone, 0), caps[zone]),
                                            plugin=self.name)
        return Status.success()

    # ---- score

    def score(self, state: CycleState, pod: Pod, node: NodeRecord, table: NodeTable) -> int:
        """100 without capped zones; else the share of the capped capacity left if the pod's CPU landed there."""
        caps = self._capacities(node)
        if isinstance(caps, str):
            return 0  # the filter refuses the node; never rank it
        if not caps:
            return MAX_NODE_SCORE
        load = zone_load(node)
        total = sum(caps.values())
        if not total:
            return 0
        left = sum(max(0, cap - load.get(zone, 0)) for zone, cap in caps.items()) - self._demand(state, pod).total
        return max(0, left) * MAX_NODE_SCORE // total

    def score_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """:meth:`score` for every row; rows whose node has no capped zone score 100 without a look."""
        out = np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64)
        for i in self._flagged(table.cluster).positions(table, rows):
            record = table.cluster.nodes.get(table.names[rows[i]])
            if record is not None:
                out[i] = self.score(state, pod, record, table)
        return out

    def score_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[int]:
        """:meth:`score_all` for a few rows."""
        out = [MAX_NODE_SCORE] * len(rows)
        for i in self._flagged(table.cluster).positions_few(table, rows):
            record = table.cluster.nodes.get(table.names[rows[i]])
            if record is not None:
                out[i] = self.score(state, pod, record, table)
        return out
