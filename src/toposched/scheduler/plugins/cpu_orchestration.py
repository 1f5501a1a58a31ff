"""CPUOrchestration: exact cpusets with CPU bind policies, on nodes where the toposched agent enforces them.

A node is **agent-managed** when the toposched agent, not the kubelet's static CPU manager,
writes the cpusets of its containers. The node says so with the value ``agent`` of
``toposched.io/cpu-enforcement``, read from (first found wins) the top-level attributes of its
latest NodeResourceTopology report, the attributes of the machine the scheduler holds for it,
and its node label. ``kubelet`` (or nothing) means the kubelet decides; any other value makes
the node unusable for pods with exclusive CPUs, with a Status naming the field.

What a pod asks (:func:`~toposched.scheduler.intent.pod_intent`): a bind policy ``FullPCPUs``
(whole physical cores only, never an SMT sibling shared with another pod) or ``SpreadByPCPUs``
(one thread per physical core first), required or preferred, and an exclusivity
``PCPULevel`` (keep other exclusive pods off the same physical cores) or ``NUMANodeLevel``
(off the same NUMA nodes), always a preference. A node may force a policy on every pod with
exclusive CPUs: Koordinator's label ``node.koordinator.sh/cpu-bind-policy`` (``FullPCPUsOnly``,
``SpreadByPCPUs``, ``None``) or the kubelet's ``full-pcpus-only`` option. The semantics are
Koordinator's NodeNUMAResource plugin (``pkg/scheduler/plugins/nodenumaresource``): its Filter
(reasons kept verbatim), ``getCPUBindPolicy``, ``filterCPUsByRequiredCPUBindPolicy`` and the CPU
accumulator ``takeCPUs`` (:func:`take_cpus`, rewritten here with its test tables).

Which containers get exclusive CPUs follows the kubelet (Guaranteed pod, whole-CPU request); the
bind policy says how they are bound. In the cycle:

* **Filter** (``filter`` per node, ``filter_all`` over rows: the same verdict) refuses nodes that
  cannot honour the policy: a conflict between the pod's required policy and the node's, a
  FullPCPUs request that is not a whole number of cores, too few free whole cores (or free
  physical cores for SpreadByPCPUs) on the node or, under ``single-numa-node``, on one NUMA node;
  and a required SpreadByPCPUs on a node whose kubelet picks the CPUs and would certainly give
  some container two threads of one core (:func:`_kubelet_splits_no_core`), instead of finding
  that out at confirm after admitting the pod into the replica.
* **confirm** (after Reserve, which admitted the pod into the node's kubelet replica) checks the
  replica's cpusets. Where they break the policy (a split core, a shared exclusive core), on an
  agent-managed node it computes the cpuset the agent should enforce instead with
  :func:`take_cpus`, first within the container's NUMA nodes, and records the replacement
  :class:`Placement` in the cycle state under :data:`PLACEMENT_OVERRIDE`; on a
  kubelet-managed node a required policy the kubelet would break refuses the node.
* The scheduler applies that replacement to the replica and the ledger before Reserve
  (``Cluster.replace_placement``), so the later confirm hooks, the decision, the next pods' view
  and Unreserve all see the cpuset the agent enforces.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from toposched.errors import InputError, ToposchedError
from toposched.kubelet.cpu_assignment import CPUAllocationError, take_by_topology
from toposched.kubelet.memory_manager import container_requested_memory, pod_requested_memory
from toposched.names import CPU_ENFORCEMENT_LABEL as CPU_ENFORCEMENT
from toposched.names import DEVICE_ENFORCEMENT_LABEL as DEVICE_ENFORCEMENT
from toposched.names import KOORDINATOR_CPU_BIND_POLICY_LABEL
from toposched.scheduler.cluster import Cluster, NodeRecord
from toposched.scheduler.framework import PLACEMENT_OVERRIDE, CycleState, RowReasons, StateKey, registry
from toposched.scheduler.intent import (
    FULL_PCPUS,
    KOORDINATOR_RESOURCE_SPEC,
    NUMA_NODE_LEVEL,
    PCPU_LEVEL,
    SPREAD_BY_PCPUS,
    NodePolicy,
    PodIntent,
    effective_policy,
    node_topology_policy,
    pod_intent,
)
from toposched.scheduler.placement import ContainerPlacement, Placement
from toposched.scheduler.plugin_args import CPUOrchestrationArgs, plugin_args
from toposched.scheduler.plugins.node_cache import NodeCache
from toposched.scheduler.plugins.numa import POD_INTENT
from toposched.scheduler.plugins.row_memo import RowMemo
from toposched.scheduler.plugins.rows import ReasonCodes, filter_rows, refusals_few
from toposched.scheduler.status import Status, reason_of
from toposched.scheduler.table import NodeTable
from toposched.topology import CPUSet, Machine
from toposched.workload import Pod

__all__ = [
    "CPU_ENFORCEMENT",
    "DEVICE_ENFORCEMENT",
    "ENFORCEMENT_AGENT",
    "ENFORCEMENT_KUBELET",
    "KOORDINATOR_CPU_BIND_POLICY_LABEL",
    "LEAST_ALLOCATED",
    "MOST_ALLOCATED",
    "NODE_FULL_PCPUS_ONLY",
    "NODE_SPREAD_BY_PCPUS",
    "PLACEMENT_OVERRIDE",
    "CPUOrchestration",
    "CPUTakeError",
    "FlaggedNodes",
    "cpu_enforcement",
    "device_enforcement",
    "node_cpu_bind_policy",
    "resolve_cpu_bind_policy",
    "take_cpus",
]

ENFORCEMENT_AGENT = "agent"
ENFORCEMENT_KUBELET = "kubelet"
_ENFORCEMENTS = (ENFORCEMENT_AGENT, ENFORCEMENT_KUBELET)

NODE_FULL_PCPUS_ONLY = "FullPCPUsOnly"
NODE_SPREAD_BY_PCPUS = "SpreadByPCPUs"
_NODE_NONE = "None"
_NODE_BIND_POLICIES = (NODE_FULL_PCPUS_ONLY, NODE_SPREAD_BY_PCPUS, _NODE_NONE)
_NODE_TO_POD_POLICY = {NODE_FULL_PCPUS_ONLY: FULL_PCPUS, NODE_SPREAD_BY_PCPUS: SPREAD_BY_PCPUS}

MOST_ALLOCATED = "MostAllocated"
LEAST_ALLOCATED = "LeastAllocated"
_STRATEGIES = (MOST_ALLOCATED, LEAST_ALLOCATED)

# Koordinator's reasons, verbatim, so aggregated reasons read as upstream's.
REASON_INVALID_TOPOLOGY = "node(s) invalid CPU Topology"
REASON_SMT_ALIGNMENT = "node(s) requested cpus not multiple cpus per core"
REASON_BIND_CONFLICT = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
REASON_NOT_INTEGER = "the requested CPUs must be integer"
REASON_NOT_ENOUGH = "not enough cpus available to satisfy request"
REASON_FAILED = "failed to allocate cpus"
REASON_INSUFFICIENT = "insufficient CPUs to satisfy required cpu bind policy"

_FACTS_KEPT = 4096  # distinct node facts interned before the interned ones are forgotten (see _interned)
_FEW_FLAGGED = 2  # up to this many flagged rows, a pod without a bind policy is judged node by node (filter_all)
_UNIT = {FULL_PCPUS: "free whole cores", SPREAD_BY_PCPUS: "free physical cores"}


# ---- the node ------------------------------------------------------------------------------


def cpu_enforcement(record: NodeRecord) -> str:
    """Who enforces the node's cpusets: ``agent`` or ``kubelet`` (the default).

    Read from the latest report's top-level attributes, else the machine's attributes, else the
    node label ``toposched.io/cpu-enforcement``. An unknown value raises InputError naming the
    field and where it was read.
    """
    return _enforcement(record, CPU_ENFORCEMENT, "CPU")


def device_enforcement(record: NodeRecord) -> str:
    """Who chooses the exact device ids of the node's pods: ``agent`` or ``kubelet`` (the default).

    ``agent`` means a node-side agent applies the ids the scheduler writes on the pod (koordlet's
    GPU and RDMA runtime hooks read ``scheduling.koordinator.sh/device-allocated``), so the
    kubelet's device manager only counts. Read like :func:`cpu_enforcement`, from
    ``toposched.io/device-enforcement``.
    """
    return _enforcement(record, DEVICE_ENFORCEMENT, "device")


def _enforcement(record: NodeRecord, name: str, what: str) -> str:
    sources: list[tuple[Mapping[str, str], str, str]] = []
    if record.nrt is not None:
        sources.append((record.nrt.attributes, f"attributes.{name}", record.nrt.origin))
    if record.model is not None:
        sources.append((record.model.machine.attributes, f"attributes.{name}", f"machine of node {record.name}"))
    sources.append((record.spec.labels, f"labels.{name}", f"node {record.name}"))
    for attributes, field, where in sources:
        value = attributes.get(name)
        if value:
            if value not in _ENFORCEMENTS:
                raise InputError(f"{what} enforcement {value!r} is not one of 'agent', 'kubelet'", field=field,
                                 source=where)
            return value
    return ENFORCEMENT_KUBELET


def node_cpu_bind_policy(labels: Mapping[str, str], *, kubelet_full_pcpus_only: bool = False,
                         node_name: str = "") -> str:
    """The bind policy a node forces on pods with exclusive CPUs (Koordinator's ``GetNodeCPUBindPolicy``).

    ``FullPCPUsOnly`` when the label ``node.koordinator.sh/cpu-bind-policy`` says so or the
    kubelet runs the static policy with ``full-pcpus-only``; ``SpreadByPCPUs`` from the label;
    otherwise "" (none). An unknown label value raises InputError naming the label (Koordinator
    would silently read it as none).
    """
    value = labels.get(KOORDINATOR_CPU_BIND_POLICY_LABEL, "")
    if value and value not in _NODE_BIND_POLICIES:
        shown = ", ".join(repr(p) for p in _NODE_BIND_POLICIES)
        raise InputError(f"CPU bind policy {value!r} is not one of {shown}",
                         field=f"labels.{KOORDINATOR_CPU_BIND_POLICY_LABEL}", source=f"node {node_name}".strip())
    if value == NODE_FULL_PCPUS_ONLY or kubelet_full_pcpus_only:
        return NODE_FULL_PCPUS_ONLY
    return NODE_SPREAD_BY_PCPUS if value == NODE_SPREAD_BY_PCPUS else ""


def resolve_cpu_bind_policy(intent: PodIntent, node_policy: str, default: str = "") -> tuple[str, bool, Status | None]:
    """The bind policy to apply to the pod on a node, whether it is required, or a refusal.

    Koordinator's ``getCPUBindPolicy`` with its Filter's conflict check: the pod's required
    policy wins and must equal the node's forced one (else UnschedulableAndUnresolvable, reason
    ``node(s) cpu bind policy conflicts with pod's required cpu bind policy``); a forced node
    policy is required; otherwise the pod's preferred policy, else ``default``, not required.
    """
    forced = _NODE_TO_POD_POLICY.get(node_policy, "")
    required = intent.cpu_bind_policy if intent.cpu_bind_required else ""
    if required and forced and required != forced:
        reason = (f"{REASON_BIND_CONFLICT}: the pod requires {required} ({intent.cpu_bind_source}), "
                  f"the node allows only {forced}")
        return "", False, Status.unresolvable(reason)
    if required:
        return required, True, None
    if forced:
        return forced, True, None
    return intent.cpu_bind_policy or default, False, None


# ---- Koordinator's CPU accumulator ---------------------------------------------------------------


class CPUTakeError(ToposchedError):
    """The accumulator cannot give the CPUs asked for; the text is Koordinator's message."""


@dataclass(frozen=True, eq=False)
class _Topology:
    """Koordinator's ``CPUTopology`` of a machine: per-CPU socket, NUMA node and core, and the average sizes."""

    socket: dict[int, int]
    numa: dict[int, int]
    core: dict[int, int]
    socket_mask: dict[int, int]
    cpus_per_core: int
    cpus_per_node: int
    cpus_per_socket: int


_TOPOLOGIES: weakref.WeakKeyDictionary[Machine, _Topology] = weakref.WeakKeyDictionary()


def _topology(machine: Machine) -> _Topology:
    known = _TOPOLOGIES.get(machine)
    if known is None:
        socket_mask: dict[int, int] = {}
        for c in machine.cpus:
            socket_mask[c.socket_id] = socket_mask.get(c.socket_id, 0) | 1 << c.id
        num = len(machine.cpus)
        nodes = sum(1 for n in machine.numa_nodes if n.cpus)
        known = _TOPOLOGIES[machine] = _Topology(
            socket={c.id: c.socket_id for c in machine.cpus},
            numa={c.id: c.numa_id for c in machine.cpus},
            core={c.id: c.core_id for c in machine.cpus},
            socket_mask=socket_mask,
            # Koordinator's CPUsPerCore/Node/Socket: averages, integer division included.
            cpus_per_core=num // len(machine.cores) if machine.cores else 0,
            cpus_per_node=num // nodes if nodes else 0,
            cpus_per_socket=num // len(machine.sockets) if machine.sockets else 0,
        )
    return known


class _Accumulator:
    """Koordinator's ``cpuAccumulator`` (reference counts of shared CPUs left out: ours are never shared)."""

    def __init__(self, topo: _Topology, available: CPUSet, held: Mapping[int, str], count: int,
                 exclusive_policy: str, strategy: str) -> None:
        self.topo = topo
        self.free: set[int] = set(available)
        self.needed = count
        self.policy = exclusive_policy
        self.exclusive = exclusive_policy in (PCPU_LEVEL, NUMA_NODE_LEVEL)
        self.most = strategy == MOST_ALLOCATED
        self.exclusive_cores = {topo.core[c] for c, p in held.items() if p == PCPU_LEVEL}
        self.exclusive_numas = {topo.numa[c] for c, p in held.items() if p == NUMA_NODE_LEVEL}
        self.result = 0

    def take(self, cpus: Iterable[int]) -> None:
        for cpu in cpus:
            self.result |= 1 << cpu
            self.free.discard(cpu)
            self.needed -= 1
            if self.policy == PCPU_LEVEL:
                self.exclusive_cores.add(self.topo.core[cpu])
            elif self.policy == NUMA_NODE_LEVEL:
                self.exclusive_numas.add(self.topo.numa[cpu])

    def needs(self, n: int) -> bool:
        return self.needed >= n

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > len(self.free)

    def _pcpu_conflict(self, cpu: int) -> bool:
        return self.policy == PCPU_LEVEL and self.topo.core[cpu] in self.exclusive_cores

    def _numa_conflict(self, cpu: int) -> bool:
        return self.policy == NUMA_NODE_LEVEL and self.topo.numa[cpu] in self.exclusive_numas

    def _score(self, value: int) -> int:
        # MostAllocated puts the unit with the fewest free CPUs first; LeastAllocated the most.
        return value if self.most else -value

    def _extract(self, cpus: list[int]) -> list[int]:
        """One CPU per core, the first of each core in the given order."""
        seen: set[int] = set()
        out = []
        for cpu in cpus:
            core = self.topo.core[cpu]
            if core not in seen:
                seen.add(core)
                out.append(cpu)
        return out

    def _cores_sorted(self, cores: list[int], cpus_in_core: Mapping[int, list[int]]) -> list[int]:
        ordered = sorted(cores, key=lambda c: (-len(cpus_in_core[c]), c))
        return [cpu for c in ordered for cpu in sorted(cpus_in_core[c])]

    def free_cores_in_node(self, full_only: bool, filter_exclusive: bool) -> list[list[int]]:
        """The free cores of each NUMA node, nodes in the strategy's order (``freeCoresInNode``)."""
        cpus_in_core: dict[int, list[int]] = {}
        socket_free: Counter[int] = Counter()
        for cpu in self.free:
            if filter_exclusive and self._numa_conflict(cpu):
                continue
            cpus_in_core.setdefault(self.topo.core[cpu], []).append(cpu)
            socket_free[self.topo.socket[cpu]] += 1
        cores_in_node: dict[int, list[int]] = {}
        for core, cpus in cpus_in_core.items():
            if full_only and len(cpus) != self.topo.cpus_per_core:
                continue
            cores_in_node.setdefault(self.topo.numa[cpus[0]], []).append(core)
        lists = {node: self._cores_sorted(cores, cpus_in_core) for node, cores in cores_in_node.items()}
        order = sorted(lists, key=lambda n: (self._score(len(lists[n])),
                                             self._score(socket_free[self.topo.socket[lists[n][0]]]), n))
        return [lists[n] for n in order]

    def free_cores_in_socket(self, full_only: bool) -> list[list[int]]:
        """The free cores of each socket, sockets in the strategy's order (``freeCoresInSocket``)."""
        cpus_in_core: dict[int, list[int]] = {}
        for cpu in self.free:
            cpus_in_core.setdefault(self.topo.core[cpu], []).append(cpu)
        cores_in_socket: dict[int, list[int]] = {}
        for core, cpus in cpus_in_core.items():
            if full_only and len(cpus) != self.topo.cpus_per_core:
                continue
            cores_in_socket.setdefault(self.topo.socket[cpus[0]], []).append(core)
        lists = {s: self._cores_sorted(cores, cpus_in_core) for s, cores in cores_in_socket.items()}
        order = sorted(lists, key=lambda s: (self._score(len(lists[s])), s))
        return [lists[s] for s in order]

    def free_cpus_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        """The free CPUs of each NUMA node (one per core when filtering), nodes in the strategy's order."""
        cpus_in_node: dict[int, list[int]] = {}
        socket_free: Counter[int] = Counter()
        for cpu in self.free:
            if filter_exclusive and (self._pcpu_conflict(cpu) or self._numa_conflict(cpu)):
                continue
            cpus_in_node.setdefault(self.topo.numa[cpu], []).append(cpu)
            socket_free[self.topo.socket[cpu]] += 1
        node_free = {n: len(cpus) for n, cpus in cpus_in_node.items()}
        lists = {}
        for node, cpus in cpus_in_node.items():
            cpus.sort()
            lists[node] = self._extract(cpus) if filter_exclusive else cpus
        order = sorted(lists, key=lambda n: (self._score(node_free[n]),
                                             self._score(socket_free[self.topo.socket[lists[n][0]]]), n))
        return [lists[n] for n in order]

    def free_cpus_in_socket(self, filter_exclusive: bool) -> list[list[int]]:
        """The free CPUs of each socket (one per core when filtering), sockets in the strategy's order."""
        cpus_in_socket: dict[int, list[int]] = {}
        for cpu in self.free:
            if filter_exclusive and self._pcpu_conflict(cpu):
                continue
            cpus_in_socket.setdefault(self.topo.socket[cpu], []).append(cpu)
        lists = {}
        for socket, cpus in cpus_in_socket.items():
            cpus.sort()
            lists[socket] = self._extract(cpus) if filter_exclusive else cpus
        order = sorted(lists, key=lambda s: (self._score(len(lists[s])), s))
        return [lists[s] for s in order]

    def free_cpus(self, filter_exclusive: bool) -> list[int]:
        """Every free CPU, cores ordered as Koordinator's ``freeCPUs`` (sockets the result uses first)."""
        cpus_in_core: dict[int, list[int]] = {}
        node_free: Counter[int] = Counter()
        socket_free: Counter[int] = Counter()
        for cpu in self.free:
            if filter_exclusive and (self._pcpu_conflict(cpu) or self._numa_conflict(cpu)):
                continue
            cpus_in_core.setdefault(self.topo.core[cpu], []).append(cpu)
            node_free[self.topo.numa[cpu]] += 1
            socket_free[self.topo.socket[cpu]] += 1
        colocated = {s: (self.topo.socket_mask[s] & self.result).bit_count() for s in socket_free}

        def key(core: int) -> tuple[int, ...]:
            cpu = cpus_in_core[core][0]
            socket, node = self.topo.socket[cpu], self.topo.numa[cpu]
            return (-colocated[socket], self._score(socket_free[socket]), self._score(node_free[node]),
                    len(cpus_in_core[core]), socket, core)

        return [cpu for core in sorted(cpus_in_core, key=key) for cpu in sorted(cpus_in_core[core])]

    def spread(self, cpus: list[int]) -> list[int]:
        """Reorder so every core gives one CPU before any gives a second (``spreadCPUs``)."""
        if len(cpus) <= self.topo.cpus_per_core:
            return cpus
        out: list[int] = []
        pending = cpus
        while pending:
            seen: set[int] = set()
            later = []
            for cpu in pending:
                core = self.topo.core[cpu]
                if core in seen:
                    later.append(cpu)
                else:
                    seen.add(core)
                    out.append(cpu)
            pending = later
        return out


def take_cpus(
    machine: Machine,
    available: CPUSet,
    count: int,
    *,
    bind_policy: str = "",
    exclusive_policy: str = "",
    held: Mapping[int, str] | None = None,
    strategy: str = MOST_ALLOCATED,
) -> CPUSet:
    """Pick ``count`` CPUs among ``available`` as Koordinator's ``takeCPUs`` does.

    ``bind_policy`` ``FullPCPUs`` takes whole free cores, one NUMA node (then one socket) first,
    in the order ``strategy`` gives (``MostAllocated``: the fullest unit that fits;
    ``LeastAllocated``: the emptiest); anything else (``SpreadByPCPUs``, "") spreads one CPU per
    core first. ``held`` maps CPUs other pods hold to those pods' exclusivity (``PCPULevel`` /
    ``NUMANodeLevel`` / ""); with ``exclusive_policy`` set, CPUs on cores (NUMA nodes) held by
    pods of the same exclusivity are avoided while others remain. When whole cores run out the
    accumulator falls back to single CPUs, as upstream: callers that *require* a policy pass only
    the CPUs that meet it (see :func:`_required_cpus`). Raises :class:`CPUTakeError` with
    Koordinator's message when the CPUs are not there, InputError for bad arguments.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InputError(f"cannot take {count!r} CPUs: the count must be a non-negative integer", field="count")
    if strategy not in _STRATEGIES:
        raise InputError(f"NUMA allocate strategy {strategy!r} is not one of {', '.join(_STRATEGIES)}", field="strategy")
    stray = available - machine.online
    if stray:
        raise InputError(f"the machine has no online CPUs {stray}", field="available")
    topo = _topology(machine)
    acc = _Accumulator(topo, available, held or {}, count, exclusive_policy, strategy)
    if acc.satisfied():
        return CPUSet()
    if acc.failed():
        raise CPUTakeError(REASON_NOT_ENOUGH)
    full = bind_policy == FULL_PCPUS
    per_core = topo.cpus_per_core
    if full or per_core == 1:
        if acc.needed <= topo.cpus_per_node:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cores_in_node(True, filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(cpus[: acc.needed])
                        return CPUSet.from_mask(acc.result)
        if acc.needed <= topo.cpus_per_socket:
            for cpus in acc.free_cores_in_socket(True):
                if len(cpus) >= acc.needed:
                    acc.take(cpus[: acc.needed])
                    return CPUSet.from_mask(acc.result)
        # Too big for one socket, or every socket is partly used: the sockets with the most free
        # cores first, whole; then cores from the fullest sockets that were too big to take whole.
        by_size = sorted(acc.free_cores_in_socket(True), key=len, reverse=True)
        unsatisfied = []
        for cpus in by_size:
            if not acc.needs(len(cpus)):
                unsatisfied.append(cpus)
                continue
            acc.take(cpus)
            if acc.satisfied():
                return CPUSet.from_mask(acc.result)
        if acc.needs(per_core):
            for cpus in sorted(unsatisfied, key=len):
                for i in range(0, len(cpus), per_core):
                    acc.take(cpus[i: i + per_core])
                    if acc.satisfied():
                        return CPUSet.from_mask(acc.result)
                    if not acc.needs(per_core):
                        break
    if not full:
        if acc.needed <= topo.cpus_per_node:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_node(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(acc.spread(cpus)[: acc.needed])
                        return CPUSet.from_mask(acc.result)
        if acc.needed <= topo.cpus_per_socket:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_socket(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(acc.spread(cpus)[: acc.needed])
                        return CPUSet.from_mask(acc.result)
    for filter_exclusive in (True, False):
        for cpu in acc.spread(acc.free_cpus(filter_exclusive)):
            if acc.needs(1):
                acc.take((cpu,))
            if acc.satisfied():
                return CPUSet.from_mask(acc.result)
    raise CPUTakeError(REASON_FAILED)


def _required_cpus(policy: str, available: CPUSet, machine: Machine) -> CPUSet:
    """The CPUs a *required* policy may use (Koordinator's ``filterCPUsByRequiredCPUBindPolicy``).

    FullPCPUs: the CPUs of cores whose every thread is free (a core as big as the average);
    SpreadByPCPUs: the lowest free CPU of every core that has one.
    """
    topo = _topology(machine)
    by_core: dict[int, int] = {}
    for cpu in available:
        core = topo.core[cpu]
        by_core[core] = by_core.get(core, 0) | 1 << cpu
    mask = 0
    if policy == FULL_PCPUS:
        for cpus in by_core.values():
            if cpus.bit_count() == topo.cpus_per_core:
                mask |= cpus
    elif policy == SPREAD_BY_PCPUS:
        for cpus in by_core.values():
            mask |= cpus & -cpus
    else:
        return available
    return CPUSet.from_mask(mask)


def _required_masks(free: int, machine: Machine) -> tuple[int, int]:
    """:func:`_required_cpus` of a free-CPU mask under FullPCPUs and under SpreadByPCPUs, as masks."""
    pairs = _sibling_offset(machine)
    if pairs is not None:  # every core two threads ``offset`` apart: bitwise over all cores at once
        first, offset = pairs
        both = free & (free >> offset) & first  # first threads of the cores with both threads free
        return both | both << offset, (free & first) | ((free >> offset) & ~free & first) << offset
    topo = _topology(machine)
    full = spread = 0
    for core in _core_masks(machine):
        cpus = free & core
        if cpus:
            spread |= cpus & -cpus
            if cpus.bit_count() == topo.cpus_per_core:
                full |= cpus
    return full, spread


_CORE_MASKS: weakref.WeakKeyDictionary[Machine, tuple[list[int], list[int]]] = weakref.WeakKeyDictionary()
_SIBLINGS: weakref.WeakKeyDictionary[Machine, tuple[int, int] | None] = weakref.WeakKeyDictionary()


def _sibling_offset(machine: Machine) -> tuple[int, int] | None:
    """When every core of ``machine`` has two threads and the second is always the first plus the same
    offset (how Linux numbers most two-way SMT machines: all first threads, then all second ones),
    the mask of the first threads and that offset; else None."""
    if machine not in _SIBLINGS:
        first, offsets = 0, set()
        cores = _core_masks(machine)
        for core in cores:
            low = core & -core
            first |= low
            offsets.add(core.bit_length() - low.bit_length() if core.bit_count() == 2 else 0)
        regular = bool(cores) and len(offsets) == 1 and 0 not in offsets and _topology(machine).cpus_per_core == 2
        _SIBLINGS[machine] = (first, offsets.pop()) if regular else None
    return _SIBLINGS[machine]


def _allocatable_mask(node: NodeRecord) -> int:
    """The CPUs pods may hold on a node with a replica: the static CPU manager's allocatable CPUs,
    else the online CPUs less the reserved ones."""
    model = node.model
    assert model is not None
    if model.cpu is not None:
        return model.cpu.allocatable_cpus().mask
    return model.machine.online.mask & ~(model.config.reserved_system_cpus or CPUSet()).mask


_CPU_COUNTS = 8  # the width of _bind_counts_of's answer
_FREE_PER_NUMA = (5, 6)  # its columns holding each NUMA node's free CPUs, one byte each (see _bind_counts_of)
_WHOLE_NUMA = 7  # its column holding the NUMA nodes with a whole free core, as a bitmask
_FEWEST_WHOLE = 4  # its column: the whole-core CPUs of the NUMA node with the fewest, of those with a free CPU
_BYTE = 255
_COUNTED_NUMA = 16  # NUMA nodes the per-NUMA columns cover (the first ones)
# After the CPU counts, a Static memory manager's state (see _memory_counts): per resource of
# _MEMORY_RESOURCES the free bytes of each of the first 16 NUMA nodes, then the NUMA nodes in a
# multi-NUMA group, as a bitmask.
_MEMORY_RESOURCES = ("memory", "hugepages-2Mi", "hugepages-1Gi")
_GROUPED = _CPU_COUNTS + _COUNTED_NUMA * len(_MEMORY_RESOURCES)
_MEMORY_COUNTS = _GROUPED + 1 - _CPU_COUNTS  # the width of _memory_counts' answer


@lru_cache(maxsize=65536)
def _bind_counts_of(free: int, machine: Machine) -> tuple[int, ...]:
    """The CPUs a required FullPCPUs and a required SpreadByPCPUs pod may use among the ``free`` CPUs
    of ``machine``: in all, and on the best NUMA node; the whole-core CPUs of the NUMA node with the
    fewest among those with a free CPU (0 when none has one: a NUMA node without free CPUs gives the
    kubelet none to pack); then each NUMA node's free CPUs (at most 255 counted), one byte per NUMA
    node in NUMA-id order over two integers (the first 16 NUMA nodes), and the NUMA nodes with a whole
    free core as a bitmask, the first 16 too (remembered: most changes of a node leave its free CPUs
    as they were)."""
    full, spread = _required_masks(free, machine)
    numa_masks = _numa_masks(machine)
    if not numa_masks:
        return full.bit_count(), 0, spread.bit_count(), 0, 0, 0, 0, 0
    full_per_numa = [(full & m).bit_count() for m in numa_masks]
    packed = [0, 0]
    for n, m in enumerate(numa_masks[:16]):
        packed[n // 8] |= min((free & m).bit_count(), _BYTE) << 8 * (n % 8)
    whole = sum(1 << n for n, count in enumerate(full_per_numa[:16]) if count)  # an int64 column: 16 NUMA nodes too
    fewest = min((count for count, m in zip(full_per_numa, numa_masks) if free & m), default=0)
    return (full.bit_count(), max(full_per_numa), spread.bit_count(), max((spread & m).bit_count() for m in numa_masks),
            fewest, packed[0], packed[1], whole)


def _smt_need(containers: Sequence[tuple[str, int, bool]]) -> tuple[int, str]:
    """The free whole-core CPUs a static CPU manager with ``full-pcpus-only`` certainly needs to admit
    a pod whose exclusive containers are ``containers`` (name, CPUs, reusable: a regular init
    container's), in admission order, and the container that needs the most.

    Upstream's static policy checks each container's count against the free whole-core CPUs of its
    shared pool (``GetAvailablePhysicalCPUs``) before it allocates, and the CPUs of the pod's
    containers admitted before are not in that pool, reusable ones included. Those hold at least
    the most any regular init container before took (each may reuse the CPUs of the one before),
    and at least the sum of what the other containers before took (none reuses theirs); a
    container therefore needs its own count more than the larger of the two.
    """
    most_reusable = others = 0
    need, name = 0, ""
    for container, count, reusable in containers:
        held = max(most_reusable, others)
        if count + held > need:
            need, name = count + held, container
        if reusable:
            most_reusable = max(most_reusable, count)
        else:
            others += count
    return need, name


def _smt_refusal(request: _Request, have: int) -> str:
    """Why a kubelet with ``full-pcpus-only`` refuses the pod (upstream's SMTAlignmentError) with ``have``
    free whole-core CPUs."""
    need, name = request.smt_need
    count = next(c for n, c, _ in request.containers if n == name)
    return (f"the kubelet's CPU manager (full-pcpus-only) would refuse container {name} with an SMTAlignmentError: its "
            f"{count} CPUs and the {need - count} the containers before it hold need {need} CPUs on free whole cores, "
            f"the node has {have}")


def _kubelet_splits_no_core(verdict: _Verdict, request: _Request, facts: _NodeFacts) -> tuple[str, int] | None:
    """Why the node's kubelet will give one of the pod's containers two threads of one core, breaking
    a required SpreadByPCPUs, whatever NUMA nodes its Topology Manager picks, and how many whole-core
    CPUs the count :func:`_whole_core_column` names must be at least for that; None when it may not
    (another policy, or an agent-managed node: the agent enforces its own cpuset).

    The container judged is the first with enough CPUs (below). The exclusive containers admitted
    before it took some CPUs: each of those breaks at most one whole core, so where the count is at
    least a core's threads more than a core's threads for each of them, a whole core is still free
    where the first container would have found one (1 for the pod's first container).

    It will when its CPU manager packs (static, neither ``distribute-cpus-across-cores`` nor
    ``distribute-cpus-across-numa``, cores with 2 or more threads), the container asks for 2 or more
    CPUs and every NUMA node with a free CPU has a whole free core: upstream's
    ``takeByTopologyNUMAPacked`` takes whole cores (or whole NUMA nodes and sockets) before single
    threads, from the free CPUs of the NUMA nodes the hint names (two or more, then), and from every
    free CPU when those have none (``allocateCPUs``). Under the Topology Manager's ``none`` policy
    there is no hint (the static policy's ``allocateCPUs`` gets a nil affinity) and it takes from
    every free CPU, so one whole free core anywhere on the node is enough. The caller checks the free cores
    (:func:`_whole_core_column` says which count).

    With ``distribute-cpus-across-numa`` (without ``full-pcpus-only``, ``align-by-socket`` or
    ``distribute-cpus-across-cores``) it will when the container asks for at least a core's threads
    times the NUMA nodes: ``takeByTopologyNUMADistributed`` splits the CPUs of the hint's NUMA nodes
    that have free ones (each with a whole free core, so at least that many) evenly over at most all
    of them, and takes each node's share, a core's threads or more, with ``takeByTopologyNUMAPacked``,
    as it does all of them when no split balances.
    """
    if verdict.policy != SPREAD_BY_PCPUS or verdict.agent or not facts.whole_core_from or not request.containers:
        return None
    first = next((i for i, (_, count, _) in enumerate(request.containers) if count >= facts.whole_core_from), None)
    if first is None:
        return None
    name, count, _ = request.containers[first]
    taken = sum(count for _, count, _ in request.containers[:first])
    need = (taken + 1) * facts.per_core if taken else 1
    before = f" even after the {taken} CPU{'s' if taken > 1 else ''} of the containers before it" if taken else ""
    if facts.kubelet_packs and facts.unhinted:
        return (f"the kubelet's CPU manager would give container {name} whole cores (it takes them first, from every "
                f"free CPU as its Topology Manager names no NUMA node, and the node has a free one{before}), which "
                f"break the required {SPREAD_BY_PCPUS}"), need
    if facts.kubelet_packs:
        return (f"the kubelet's CPU manager would give container {name} whole cores (it takes them first, and every "
                f"NUMA node with a free CPU has a free one{before}), which break the required {SPREAD_BY_PCPUS}"), need
    return (f"the kubelet's CPU manager would give container {name} whole cores (it spreads its {count} CPUs over "
            f"the NUMA nodes, a core's threads or more on each, takes whole cores first there, and every NUMA node "
            f"with a free CPU has a free one{before}), which break the required {SPREAD_BY_PCPUS}"), need


_HINTED = ("best-effort", "restricted", "single-numa-node")
_PACKED_SPLIT_FROM = 2  # from two CPUs, packing takes two threads of one core where a whole one is free


def _kubelet_names_a_split_numa_node(verdict: _Verdict, request: _Request, facts: _NodeFacts
                                     ) -> tuple[str, int, tuple[int, ...] | None, bool] | None:
    """Why the node's kubelet will give the pod's first container two threads of one core when the
    lowest NUMA node with enough free CPUs for the hint (and, with a Static memory manager, enough
    free memory) has a whole free core; that count (the CPUs the hint is asked for: the pod's peak at
    pod scope, else the container's); and the memory the hint is asked for (None without a Static
    memory manager), and whether any NUMA node with enough free CPUs will do, each NUMA node with a
    free CPU then needing a whole free core (:func:`_lowest_fit`'s ``every``). None where it does not apply.

    It applies to packing kubelets (:func:`_kubelet_splits_no_core`) whose Topology Manager policy
    is best-effort, restricted or single-numa-node, for a pod without extended resources, and to
    kubelets spreading over NUMA nodes (``distribute-cpus-across-numa``, without
    ``full-pcpus-only`` or ``align-by-socket``) with those policies: handed the CPUs of one NUMA
    node, upstream ``takeByTopologyNUMADistributed`` has one node to spread over (its fewest and
    most NUMA nodes worth trying are both 1, or the fewest exceeds the most) and takes them with
    ``takeByTopologyNUMAPacked`` there, as a packing kubelet does. Without a
    Static memory manager the CPU manager is then the only provider with hints. Its hints (upstream
    ``generateCPUTopologyHints``) are the NUMA sets with enough free CPUs, preferred when as narrow
    as the narrowest set whose CPUs could hold the count (or, with ``align-by-socket``, within as
    few sockets as that needs, which single NUMA nodes are too); when one NUMA node has enough free
    CPUs, the policy takes the narrowest preferred hint, of equally narrow ones the lowest
    (``IsNarrowerThan``; ``prefer-closest-numa-nodes`` ranks only wider sets by distance): the
    lowest such NUMA node. The container's CPUs then come packed from it, whole cores first.

    A Static memory manager hints too. For a request the current free memory decides
    (:func:`_memory_hint`), its preferred hints are the one-node sets of the NUMA nodes outside
    multi-NUMA groups whose free memory and hugepages cover the request
    (:meth:`~toposched.kubelet.memory_manager.StaticMemoryPolicy.one_node_memory`); merged with
    the CPU manager's, the narrowest preferred hint is the lowest NUMA node both offer.

    A kubelet spreading over NUMA nodes under the policy none gets no hint and hands every free CPU
    to ``takeByTopologyNUMADistributed``. For a count up to the CPUs a NUMA node averages (so the
    fewest NUMA nodes worth trying is 1), a NUMA node with that many free CPUs is a combination it
    accepts, of which it takes the best balanced and packs the count there; which one is not known
    here, so every NUMA node with a free CPU must have a whole free core.
    """
    if verdict.policy != SPREAD_BY_PCPUS or verdict.agent or not request.containers:
        return None
    name, count, _ = request.containers[0]
    if facts.spread_one_upto:
        if not _PACKED_SPLIT_FROM <= count <= min(facts.spread_one_upto, _BYTE):
            return None
        return (f"the kubelet's CPU manager would give container {name} whole cores (its Topology Manager names no "
                f"NUMA node, and it takes {count} CPUs from one NUMA node that has them free when one has, whole cores "
                f"first, and every NUMA node with a free CPU has a free one), which break the required "
                f"{SPREAD_BY_PCPUS}"), count, None, True
    if not (facts.lowest_fit or facts.memory_fit) or request.devices:
        return None
    if count < _PACKED_SPLIT_FROM:
        return None
    hinted = request.peak if facts.scope == "pod" else count
    if hinted > _BYTE:  # free counts are kept up to 255 a NUMA node
        return None
    memory = None
    if facts.memory_fit:
        memory = request.memory[1 if facts.scope == "pod" else 0]
        if memory is None:
            return None
    where = f"{hinted} free CPUs" if memory is None else f"{hinted} free CPUs and the memory asked for"
    return (f"the kubelet's CPU manager would give container {name} whole cores (it takes them first, from the "
            f"lowest NUMA node with {where}, which its Topology Manager names, and that NUMA node has a "
            f"free one), which break the required {SPREAD_BY_PCPUS}"), hinted, memory, False


def _lowest_fit(counts: np.ndarray, hinted: int, memory: tuple[int, ...] | None = None, every: bool = False) -> np.ndarray:
    """Per row of :func:`_bind_counts_of` answers (rows x its width; with ``memory``, followed by
    :func:`_memory_counts`'): some NUMA node has ``hinted`` free CPUs (and, with ``memory``, is
    outside any multi-NUMA group with that many bytes free of each of _MEMORY_RESOURCES), and the
    lowest such one has a whole free core (with ``every``: every NUMA node with a free CPU has one,
    the one taken from among them)."""
    # Little-endian whatever the machine: byte k of a column is NUMA node k (of the column's eight).
    free = np.ascontiguousarray(counts[:, _FREE_PER_NUMA[0]:_FREE_PER_NUMA[1] + 1], dtype="<i8").view(np.uint8)
    fits = free >= hinted
    if memory is not None:
        for k, amount in enumerate(memory):
            if amount:
                start = _CPU_COUNTS + k * _COUNTED_NUMA
                fits &= counts[:, start:start + _COUNTED_NUMA] >= amount
        fits &= (counts[:, _GROUPED, None] >> np.arange(_COUNTED_NUMA)) & 1 == 0
    if every:
        return fits.any(axis=1) & (counts[:, _FEWEST_WHOLE] > 0)
    first = fits.argmax(axis=1)
    return fits.any(axis=1) & ((counts[:, _WHOLE_NUMA] >> first) & 1 == 1)


def _memory_hint(pod: Pod, first: str) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """What a Static memory manager hints for (:attr:`_Request.memory`), per resource of
    _MEMORY_RESOURCES: at container scope the request of ``first``, the first container with
    exclusive CPUs, when it is the pod's first container (one admitted before it would take memory
    first); at pod scope the pod's request (upstream ``getPodRequestedResources``). None where
    another hugepage size is asked for, or no memory. InputError for a malformed request."""

    def alone(requested: Mapping[str, int]) -> tuple[int, ...] | None:
        if "memory" not in requested or any(r not in _MEMORY_RESOURCES for r in requested):
            return None
        return tuple(requested.get(r, 0) for r in _MEMORY_RESOURCES)

    containers = pod.all_containers
    container = None
    if containers and containers[0].name == first:
        container = alone(container_requested_memory(containers[0]))
    return container, alone(pod_requested_memory(pod))


def _memory_counts(node: NodeRecord) -> tuple[int, ...]:
    """The Static memory manager's free bytes of each of _MEMORY_RESOURCES on each of the first 16 NUMA
    nodes, then the NUMA nodes (of those) in a multi-NUMA group as a bitmask; zeros on a node without one."""
    memory = node.model.memory if node.model is not None else None
    if memory is None:
        return (0,) * _MEMORY_COUNTS
    free, grouped = memory.one_node_memory(_MEMORY_RESOURCES)
    out = [0] * _MEMORY_COUNTS
    for k, r in enumerate(_MEMORY_RESOURCES):
        for n, amount in free[r].items():
            if n < _COUNTED_NUMA:
                out[k * _COUNTED_NUMA + n] = amount
    out[-1] = grouped & (1 << _COUNTED_NUMA) - 1
    return tuple(out)


def _whole_core_column(facts: _NodeFacts) -> int:
    """Which of :func:`_bind_counts_of`'s counts must be at least what :func:`_kubelet_splits_no_core`
    says for its reason to hold: whole-core CPUs on the whole node (0) for a packing kubelet without a NUMA hint,
    else on the NUMA node with the fewest among those with a free CPU (4). A NUMA node without free
    CPUs gives none: the CPUs come from the hint's NUMA nodes that have free ones (two or more each,
    then), or from every free CPU when they have none; a kubelet distributing over NUMA nodes shares
    the count among NUMA nodes with free CPUs only."""
    return 0 if facts.kubelet_packs and facts.unhinted else _FEWEST_WHOLE


def _core_masks(machine: Machine) -> list[int]:
    """Each core's CPUs as a mask (cores as :func:`_topology` groups CPUs)."""
    known = _CORE_MASKS.get(machine)
    if known is None:
        by_core: dict[int, int] = {}
        for cpu, core in _topology(machine).core.items():
            by_core[core] = by_core.get(core, 0) | 1 << cpu
        known = _CORE_MASKS[machine] = (list(by_core.values()), [n.cpus.mask for n in machine.numa_nodes])
    return known[0]


def _numa_masks(machine: Machine) -> list[int]:
    """Each NUMA node's CPUs as a mask."""
    _core_masks(machine)
    return _CORE_MASKS[machine][1]


def _honours_bind(policy: str, cpus: CPUSet, machine: Machine) -> bool:
    """FullPCPUs: every SMT sibling of every CPU is in the set; SpreadByPCPUs: no two CPUs share a core."""
    if policy == FULL_PCPUS:
        return all(machine.siblings(cpu) <= cpus for cpu in cpus)
    if policy == SPREAD_BY_PCPUS:
        return len({machine.cpu(cpu).core_id for cpu in cpus}) == len(cpus)
    return True


def _honours_exclusive(policy: str, cpus: CPUSet, held: Mapping[int, str], machine: Machine) -> bool:
    """No core (PCPULevel) or NUMA node (NUMANodeLevel) of ``cpus`` holds a CPU of another pod of that exclusivity."""
    if policy == PCPU_LEVEL:
        taken = {machine.cpu(c).core_id for c, p in held.items() if p == PCPU_LEVEL}
        return not any(machine.cpu(c).core_id in taken for c in cpus)
    if policy == NUMA_NODE_LEVEL:
        taken = {machine.cpu(c).numa_id for c, p in held.items() if p == NUMA_NODE_LEVEL}
        return not any(machine.cpu(c).numa_id in taken for c in cpus)
    return True


# ---- keeping a set of nodes current ----------------------------------------------------------


class FlaggedNodes:
    """The names of a cluster's nodes for which ``predicate(record)`` holds, kept current.

    The cluster's change notifications mark nodes for re-evaluation, so reading :meth:`names`
    costs what changed since the last read, not the cluster's size.
    """

    def __init__(self, cluster: Cluster, predicate: Callable[[NodeRecord], bool]) -> None:
        self.cluster = cluster
        self.predicate = predicate
        self._flagged: set[str] = set()
        self._dirty: set[str] = set(cluster.nodes)
        self._changes = 0  # how often the flagged set changed: the rows below are for one count
        # per table: (changes, its size and layout, per row whether it is flagged) as of the last positions()
        self._rows: weakref.WeakKeyDictionary[NodeTable, tuple[int, int, int, np.ndarray]] = weakref.WeakKeyDictionary()
        cluster.subscribe(self._mark)

    def _mark(self, name: str) -> None:
        self._dirty.add(name)

    def names(self) -> set[str]:
        """The flagged node names now."""
        if self._dirty:
            dirty, self._dirty = self._dirty, set()
            for name in dirty:
                record = self.cluster.nodes.get(name)
                if record is not None and self.predicate(record):
                    if name not in self._flagged:
                        self._flagged.add(name)
                        self._changes += 1
                elif name in self._flagged:
                    self._flagged.discard(name)
                    self._changes += 1
        return self._flagged

    def positions(self, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """Indices into ``rows`` of the rows whose node is flagged (their rows kept until the flagged set
        or the table's rows change: most pods change neither, and hundreds of nodes may be flagged)."""
        names = self.names()
        kept = self._rows.get(table)
        if kept is None or kept[:3] != (self._changes, table.size, table.layout):
            flagged = np.zeros(table.size, dtype=bool)
            flagged[[table.index[n] for n in names if n in table.index]] = True
            kept = self._rows[table] = (self._changes, table.size, table.layout, flagged)
        # A lookup per row (np.isin sorted the rows and the flagged ones: 0.28 ms with hundreds flagged).
        return np.flatnonzero(kept[3] if rows is table.all_rows() else kept[3][rows])

    def positions_few(self, table: NodeTable, rows: list[int]) -> list[int]:
        """:meth:`positions` for a few rows, as a list."""
        flagged = self.names()
        if not flagged:
            return []
        return [i for i, row in enumerate(rows) if table.names[row] in flagged]


# ---- the plugin ----------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _exclusive_policy_of(resource_spec: str) -> str:
    """The exclusivity a bound pod's Koordinator resource-spec states; "" when it states none or is malformed."""
    try:
        return pod_intent(Pod("bound", annotations={KOORDINATOR_RESOURCE_SPEC: resource_spec})).cpu_exclusive_policy
    except InputError:
        return ""


def _exclusive_policy(pod: Pod) -> str:
    spec = pod.annotations.get(KOORDINATOR_RESOURCE_SPEC)
    return _exclusive_policy_of(spec) if spec else ""


@dataclass(frozen=True, slots=True)
class _Request:
    """What the plugin needs of a pod, computed once per cycle."""

    intent: PodIntent | None
    containers: tuple[tuple[str, int, bool], ...] = ()  # (name, exclusive CPUs, its CPUs are reused later)
    peak: int = 0  # the pod's exclusive CPUs at its peak
    refusal: Status | None = None
    devices: bool = False  # it asks for an extended resource (one a device plugin may serve)
    # What a Static memory manager hints for at container scope (the first container) and at pod scope,
    # per resource of _MEMORY_RESOURCES: None where the columns kept do not decide that hint (another
    # hugepage size asked for, no memory asked for, or another container is admitted first); see _memory_hint.
    memory: tuple[tuple[int, ...] | None, tuple[int, ...] | None] = (None, None)
    # The free whole-core CPUs a kubelet with full-pcpus-only certainly needs to admit the pod, and the
    # container that needs them (see _smt_need); (0, "") without exclusive containers.
    smt_need: tuple[int, str] = (0, "")

    @property
    def needs(self) -> bool:
        return bool(self.containers)


_REQUEST: StateKey[_Request] = StateKey("request", "CPUOrchestration")


@dataclass(frozen=True, slots=True)
class _NodeInfo:
    """What a node says about CPU binding, or why it cannot be read."""

    agent: bool = False
    forced: str = ""  # the node's forced bind policy (FullPCPUsOnly / SpreadByPCPUs / "")
    error: str = ""


@dataclass(frozen=True, slots=True)
class _NodeFacts:
    """What the node-level checks read of a node: nodes with equal facts get equal verdicts for a pod."""

    has_model: bool
    info: _NodeInfo | None = None
    cpu_none: bool = False
    per_core: int = 0
    node_policy: NodePolicy | None = None
    policy_error: str = ""  # why the node's NUMA policy cannot be read (node_policy is None)
    scope: str = "container"
    # From how many CPUs a container asks for its static CPU manager certainly takes a whole core when
    # every NUMA node has one (0: never known; see _kubelet_splits_no_core), and whether it packs.
    whole_core_from: int = 0
    kubelet_packs: bool = False
    # The Topology Manager policy is none: the CPU manager gets no NUMA hint and takes from every free CPU.
    unhinted: bool = False
    # Its Topology Manager names the lowest NUMA node with enough free CPUs when one has (see _lowest_fit).
    lowest_fit: bool = False
    # As lowest_fit, but among the NUMA nodes whose free memory the Static memory manager offers too.
    memory_fit: bool = False
    # A kubelet spreading over NUMA nodes without a hint tries one NUMA node first up to this many CPUs
    # (0: not such a kubelet; see _kubelet_names_a_split_numa_node).
    spread_one_upto: int = 0
    # Its static CPU manager has full-pcpus-only: each container's CPUs must fit the free whole cores
    # left by the pod's containers admitted before it (see _smt_need).
    full_pcpus_only: bool = False
    # Hashed once: the facts key a RowMemo's classes, looked up for every row that changes.
    _hash: int = dataclasses.field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self) if f.compare)))

    def __hash__(self) -> int:
        return self._hash


@dataclass(frozen=True, slots=True)
class _Verdict:
    """A node's verdict for a pod, with the policy that applies there when it passes."""

    status: Status
    policy: str = ""
    required: bool = False
    agent: bool = False
    numa_policy: str = "none"


def _read_info(record: NodeRecord) -> _NodeInfo:
    """How the node binds CPUs: by the agent or the kubelet, and the bind policy it forces (or why that cannot be read)."""
    try:
        agent = cpu_enforcement(record) == ENFORCEMENT_AGENT
        full_only = bool(record.model and record.model.cpu and record.model.cpu.options.full_pcpus_only)
        return _NodeInfo(agent, node_cpu_bind_policy(record.spec.labels, kubelet_full_pcpus_only=full_only,
                                                     node_name=record.name))
    except InputError as err:
        return _NodeInfo(error=f"cannot tell how the node binds CPUs: {err}")


@registry.register
class CPUOrchestration:
    """Exact cpusets honouring FullPCPUs / SpreadByPCPUs and PCPULevel / NUMANodeLevel; see the module notes.

    Args: ``defaultCPUBindPolicy`` ("" (default), ``FullPCPUs`` or ``SpreadByPCPUs``): the
    preferred policy for pods with exclusive CPUs that state none, on agent-managed nodes, and
    what Koordinator's ``Default`` resolves to (``FullPCPUs`` when unset, as Koordinator);
    ``numaAllocateStrategy`` (``MostAllocated`` (default) or ``LeastAllocated``): which NUMA node
    or socket the accumulator fills first.
    """

    name = "CPUOrchestration"
    exact_placement = True  # it reads and decides cpusets: Reserve must go through the kubelet replica

    def __init__(self, args: CPUOrchestrationArgs | Mapping[str, Any]) -> None:
        args = plugin_args(CPUOrchestrationArgs, args, self.name)
        self.default_policy = args.default_cpu_bind_policy
        self.strategy = args.numa_allocate_strategy
        self._infos: NodeCache[_NodeInfo] = NodeCache()
        self._flags: weakref.WeakKeyDictionary[Cluster, FlaggedNodes] = weakref.WeakKeyDictionary()
        self._memos: weakref.WeakKeyDictionary[NodeTable, RowMemo] = weakref.WeakKeyDictionary()
        # Kept apart, read only for rows the memory manager's hint decides (_kubelet_names_a_split_numa_node).
        self._memory_memos: weakref.WeakKeyDictionary[NodeTable, RowMemo] = weakref.WeakKeyDictionary()
        self._node_facts: NodeCache[_NodeFacts] = NodeCache()
        self._facts_seen: dict[_NodeFacts, _NodeFacts] = {}  # see _interned

    # ---- the pod

    def pre_filter(self, state: CycleState, pod: Pod) -> Status:
        """Read the pod's intent once; a bind policy over a fractional CPU request is refused (Koordinator's PreFilter)."""
        request = self._request(state, pod)
        return request.refusal or Status.success()

    def _request(self, state: CycleState, pod: Pod) -> _Request:
        request = state.get(_REQUEST)
        if request is None:
            request = state[_REQUEST] = self._read(state, pod)
        return request

    def _read(self, state: CycleState, pod: Pod) -> _Request:
        try:
            # NUMAAlignment reads the intent with Koordinator's default, FullPCPUs: reuse it when ours is the same.
            shared = state.get(POD_INTENT) if self.default_policy in ("", FULL_PCPUS) else None
            intent = shared or pod_intent(pod, default_cpu_bind_policy=self.default_policy or FULL_PCPUS)
        except InputError as err:
            return _Request(None, refusal=Status.unresolvable(str(err), plugin=self.name))
        cpu = intent.requests.get("cpu", 0)
        if intent.cpu_bind_policy and cpu % 1000:
            reason = (f"{REASON_NOT_INTEGER}: the pod asks for {intent.cpu_bind_policy} ({intent.cpu_bind_source}) "
                      f"with a CPU request of {cpu}m")
            return _Request(intent, refusal=Status.unresolvable(reason, plugin=self.name))
        containers = []
        for c in pod.all_containers:
            count = intent.exclusive_cpus.get(c.name, 0)
            if count:
                reused = c in pod.init_containers and not c.is_sidecar
                containers.append((c.name, count, reused))
        # Any extended resource may have a device plugin, whose hints the Topology Manager merges too.
        devices = pod.asks_extended
        try:
            memory = _memory_hint(pod, containers[0][0] if containers else "")
        except InputError:  # a malformed memory request: the kubelet model refuses the pod at Reserve
            memory = (None, None)
        return _Request(intent, tuple(containers), intent.pod_exclusive_cpus, devices=devices, memory=memory,
                        smt_need=_smt_need(containers))

    # ---- the node

    def _node_info(self, record: NodeRecord) -> _NodeInfo:
        return self._infos.read(record.name, (record.nrt, record.model, record.spec), lambda: _read_info(record))

    def _flagged(self, cluster: Cluster) -> FlaggedNodes:
        """Nodes that force a bind policy or whose CPU binding cannot be read: the only ones a pod without a policy can fail on."""
        flags = self._flags.get(cluster)
        if flags is None:
            def forcing(record: NodeRecord) -> bool:
                info = self._node_info(record)
                return bool(info.forced or info.error)
            flags = self._flags[cluster] = FlaggedNodes(cluster, forcing)
        return flags

    def _facts(self, node: NodeRecord) -> _NodeFacts:
        """What the node-level checks read of ``node`` (kept until its report, replica or spec changes)."""
        return self._node_facts.read(node.name, (node.nrt, node.model, node.spec), lambda: self._interned(self._read_facts(node)))

    def _interned(self, facts: _NodeFacts) -> _NodeFacts:
        """One object for equal facts, so a RowMemo finds a row's class by identity, not by comparing
        every field (most nodes share a few kinds of facts)."""
        if len(self._facts_seen) >= _FACTS_KEPT:
            self._facts_seen.clear()
        return self._facts_seen.setdefault(facts, facts)

    def _read_facts(self, node: NodeRecord) -> _NodeFacts:
        model = node.model
        if model is None:
            return _NodeFacts(False, scope=node.scope)
        info = self._node_info(node)
        per_core = _topology(model.machine).cpus_per_core
        try:
            node_policy = node_topology_policy(node.nrt, node.spec.labels, node_name=node.name) if node.nrt is not None \
                else NodePolicy(node.policy, node.scope, "kubelet")
            error = ""
        except InputError as err:
            node_policy, error = None, str(err)
        options = model.cpu.options if model.cpu is not None else None
        whole_core_from, packs, spreads = 0, False, False
        if options is not None and per_core >= 2 and not options.distribute_cpus_across_cores:
            if not options.distribute_cpus_across_numa:
                whole_core_from, packs = 2, True
            elif not options.full_pcpus_only and not options.align_by_socket:
                # Spread over at most every NUMA node, each share is at least a core's threads.
                whole_core_from, spreads = per_core * len(model.machine.numa_nodes), True
        tm_policy = model.config.topology_manager_policy
        # A hint naming one NUMA node leaves a spreading CPU manager that one node to take from, which
        # it then packs (see _kubelet_names_a_split_numa_node).
        hinted = (packs or spreads) and tm_policy in _HINTED
        spread_one_upto = 0
        if spreads and tm_policy == "none":  # upstream rangeNUMANodesNeededToSatisfy's fewest is 1 up to this many
            topo = model.cpu.topology  # type: ignore[union-attr]
            spread_one_upto = (topo.num_cpus - 1) // max(topo.num_numa, 1) + 1
        return _NodeFacts(True, info, model.cpu is None, per_core, node_policy, error, node.scope, whole_core_from, packs,
                          tm_policy == "none", hinted and model.memory is None, hinted and model.memory is not None,
                          spread_one_upto, bool(options is not None and options.full_pcpus_only))

    def _verdict(self, state: CycleState, pod: Pod, node: NodeRecord) -> _Verdict:
        """The node-level checks: policy resolution, SMT alignment, enforcement (no free-CPU counting)."""
        request = self._request(state, pod)
        if request.refusal is not None:
            return _Verdict(request.refusal)
        if not request.needs or request.intent is None:
            return _Verdict(Status.success())
        return self._judge(request, self._facts(node))

    def _judge(self, request: _Request, facts: _NodeFacts) -> _Verdict:
        """:meth:`_verdict` for a pod that needs exclusive CPUs, from the node's facts alone."""
        intent = request.intent
        assert intent is not None
        if not facts.has_model:
            if intent.cpu_bind_required:
                reason = (f"{REASON_INVALID_TOPOLOGY}: the node has no topology data to bind the pod's CPUs "
                          f"as {intent.cpu_bind_policy} requires")
                return _Verdict(Status.unresolvable(reason, plugin=self.name))
            return _Verdict(Status.success())
        info = facts.info
        assert info is not None
        if info.error:
            return _Verdict(Status.unresolvable(info.error, plugin=self.name))
        policy, required, refusal = resolve_cpu_bind_policy(intent, info.forced, self.default_policy if info.agent else "")
        if refusal is not None:
            return _Verdict(refusal.with_plugin(self.name))
        if not policy and not (info.agent and facts.cpu_none):
            return _Verdict(Status.success())  # the kubelet's replica decides the CPUs, and nothing constrains them
        per_core = facts.per_core
        if policy == FULL_PCPUS and required and per_core:
            for name, count, _ in request.containers:
                if count % per_core:
                    reason = (f"{REASON_SMT_ALIGNMENT}: container {name} asks for {count} CPUs under FullPCPUs, "
                              f"cores have {per_core} threads")
                    return _Verdict(Status.unresolvable(reason, plugin=self.name))
        if not info.agent and required and facts.cpu_none:
            reason = (f"the pod requires {policy} but the node's kubelet gives no exclusive CPUs (CPU manager "
                      f"policy none) and {CPU_ENFORCEMENT} is not '{ENFORCEMENT_AGENT}'")
            return _Verdict(Status.unresolvable(reason, plugin=self.name))
        if facts.node_policy is None:
            return _Verdict(Status.unresolvable(facts.policy_error, plugin=self.name))
        numa_policy, mismatch = effective_policy(intent, facts.node_policy)
        if mismatch is not None:
            return _Verdict(mismatch.with_plugin(self.name))
        return _Verdict(Status.success(), policy, required, info.agent, numa_policy)

    def _free(self, node: NodeRecord, exclude: str | None = None) -> tuple[CPUSet, dict[int, str]]:
        """CPUs no other pod holds (reserved CPUs excluded), and the held CPUs of pods with an exclusivity."""
        held_mask = 0
        held: dict[int, str] = {}
        for uid, entry in node.pods.items():
            if uid == exclude or entry.placement is None:
                continue
            mask = entry.placement.cpu_mask
            if not mask:
                continue
            held_mask |= mask
            policy = _exclusive_policy(entry.pod)
            if policy:
                for cpu in CPUSet.from_mask(mask):
                    held[cpu] = policy
        return CPUSet.from_mask(_allocatable_mask(node) & ~held_mask), held

    def filter(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        """Whether the node can bind the pod's exclusive CPUs as its policy requires (exact for the node's state)."""
        verdict = self._verdict(state, pod, node)
        if not verdict.status.is_success or not verdict.required:
            return verdict.status
        request = self._request(state, pod)
        machine = node.model.machine  # type: ignore[union-attr]
        free, _ = self._free(node)
        usable = _required_cpus(verdict.policy, free, machine)
        unit = _UNIT[verdict.policy]
        if len(usable) < request.peak:
            reason = f"{REASON_NOT_ENOUGH}: {verdict.policy} needs {request.peak} CPUs on {unit}, the node has {len(usable)}"
            return Status.unschedulable(reason, plugin=self.name)
        facts = self._facts(node)
        if facts.full_pcpus_only and len(usable) < request.smt_need[0]:
            return Status.unschedulable(_smt_refusal(request, len(usable)), plugin=self.name)
        if verdict.numa_policy == "single-numa-node":
            want = request.peak if node.scope == "pod" else max(count for _, count, _ in request.containers)
            best = max((len(usable & n.cpus) for n in machine.numa_nodes), default=0)
            if best < want:
                reason = (f"not enough {unit} on one NUMA node for {verdict.policy}: needs {want} CPUs, "
                          f"the best NUMA node has {best}")
                return Status.unschedulable(reason, plugin=self.name)
        counts = _bind_counts_of(free.mask, machine)
        split = _kubelet_splits_no_core(verdict, request, facts)
        if split is not None and counts[_whole_core_column(facts)] >= split[1]:
            return Status.unschedulable(split[0], plugin=self.name)
        named = _kubelet_names_a_split_numa_node(verdict, request, facts)
        if named is not None:
            if named[2] is not None:  # the memory manager's hint decides too: its counts follow the CPUs'
                counts += _memory_counts(node)
            if _lowest_fit(np.array([counts], dtype=np.int64), *named[1:])[0]:
                return Status.unschedulable(named[0], plugin=self.name)
        return Status.success()

    def filter_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> tuple[np.ndarray, Any]:
        """The per-node verdict for every row: only the rows that can fail are evaluated node by node.
        Each refused row keeps its per-node code (UnschedulableAndUnresolvable where the node can never
        bind the pod's CPUs as asked)."""
        self._infos.forget_departed(table.cluster.nodes)
        self._node_facts.forget_departed(table.cluster.nodes)
        request = self._request(state, pod)
        if request.refusal is not None:
            return np.zeros(len(rows), dtype=bool), reason_of(request.refusal)
        # Both memos, once some pod has needed them, are kept current by every pod, so a pod with a
        # bind policy finds a few changed rows to measure rather than every row changed since the
        # last such pod (its p99 was 4x its mean).
        for memos in (self._memos, self._memory_memos):
            memo = memos.get(table)
            if memo is not None:
                memo.update(table)
        ok = np.ones(len(rows), dtype=bool)
        if not request.needs:
            return ok, ""
        intent = request.intent
        assert intent is not None
        if intent.cpu_bind_policy or self.default_policy:
            return self._filter_every_row(request, table, rows)
        positions = self._flagged(table.cluster).positions(table, rows)
        if len(positions) <= _FEW_FLAGGED:
            return ok, filter_rows(self, state, pod, table, rows, positions, ok)
        # Many nodes force a policy (kubelets with full-pcpus-only): judged as arrays, not node by node
        # (0.15 ms a node in Python: 10 ms a Guaranteed pod with 70 such nodes left after the others).
        flagged_ok, flagged_reasons = self._filter_every_row(request, table, rows[positions])
        ok[positions] = flagged_ok
        if not isinstance(flagged_reasons, RowReasons):
            return ok, ""
        codes = np.zeros(len(rows), dtype=np.int64)
        codes[positions] = flagged_reasons.codes
        return ok, RowReasons(codes, flagged_reasons.texts)

    def _filter_every_row(self, request: _Request, table: NodeTable, rows: np.ndarray) -> tuple[np.ndarray, Any]:
        """:meth:`filter` on every row as array arithmetic: one verdict per class of nodes, and the free-CPU
        counts each row keeps (:class:`RowMemo`, recomputed per change of the node)."""
        memo = self._memos.get(table)
        if memo is None:  # else filter_all brought it up to date
            memo = self._memos[table] = RowMemo(self._facts, self._bind_counts, _CPU_COUNTS)
            memo.update(table)
        cls, counts = memo.cls[rows], memo.values.take(rows, axis=0)  # take: a 2-D gather at a quarter of the cost
        ok = np.ones(len(rows), dtype=bool)
        reasons = ReasonCodes(len(rows))  # each refused row's own reason, as the per-node filter words it
        # The rows of each class at once: one stable sort, each class's positions a slice of it in
        # ascending order (a scan of every row per class cost 7 µs a class, and a pod meets dozens).
        # NumPy sorts 16-bit integers stably by radix: 28 µs over 5,000 rows against 150 for int64.
        order = np.argsort(cls.astype(np.int16) if len(memo.keys) < 2**15 else cls, kind="stable")
        grouped = cls[order]
        cuts = (np.flatnonzero(grouped[1:] != grouped[:-1]) + 1).tolist()
        for start, end in zip([0, *cuts], [*cuts, len(cls)]):
            ident = int(grouped[start]) if end > start else -1
            if ident < 0:
                continue  # a gone node: the per-node filter passes it (or no rows at all)
            facts = memo.keys[ident]
            verdict = self._judge(request, facts)  # type: ignore[arg-type]
            at = order[start:end]
            if not verdict.status.is_success:
                ok[at] = False
                reasons.set(at, reason_of(verdict.status))
                continue
            if not verdict.required:
                continue
            unit = _UNIT[verdict.policy]
            column = 0 if verdict.policy == FULL_PCPUS else 2
            total, best = counts[at, column], counts[at, column + 1]
            short = total < request.peak
            for have in np.unique(total[short]).tolist():
                reasons.set(at[short & (total == have)],
                            f"{REASON_NOT_ENOUGH}: {verdict.policy} needs {request.peak} CPUs on {unit}, the node has {have}")
            ok[at[short]] = False
            if facts.full_pcpus_only and request.smt_need[0] > request.peak:  # type: ignore[attr-defined]
                smt = ~short & (total < request.smt_need[0])
                for have in np.unique(total[smt]).tolist():
                    reasons.set(at[smt & (total == have)], _smt_refusal(request, have))
                ok[at[smt]] = False
                short |= smt
            if verdict.numa_policy == "single-numa-node":
                want = request.peak if facts.scope == "pod" else max(count for _, count, _ in request.containers)  # type: ignore[attr-defined]
                narrow = ~short & (best < want)
                for have in np.unique(best[narrow]).tolist():
                    reasons.set(at[narrow & (best == have)], f"not enough {unit} on one NUMA node for {verdict.policy}: "
                                                             f"needs {want} CPUs, the best NUMA node has {have}")
                ok[at[narrow]] = False
            split = _kubelet_splits_no_core(verdict, request, facts)  # type: ignore[arg-type]
            if split is not None:
                packed = at[ok[at] & (counts[at, _whole_core_column(facts)] >= split[1])]  # type: ignore[arg-type]
                reasons.set(packed, split[0])
                ok[packed] = False
            named = _kubelet_names_a_split_numa_node(verdict, request, facts)  # type: ignore[arg-type]
            if named is not None:
                left = at[ok[at]]
                kept = counts[left]
                if named[2] is not None:  # the memory manager's hint decides too: its counts follow the CPUs'
                    memory = self._memory_memos.get(table)
                    if memory is None:
                        memory = self._memory_memos[table] = RowMemo(self._facts, _memory_counts, _MEMORY_COUNTS)
                    memory.update(table)
                    kept = np.concatenate([kept, memory.values.take(rows[left], axis=0)], axis=1)
                named_rows = left[_lowest_fit(kept, *named[1:])]
                reasons.set(named_rows, named[0])
                ok[named_rows] = False
        return ok, reasons.result()

    def _bind_counts(self, node: NodeRecord) -> tuple[int, ...]:
        """:func:`_bind_counts_of` for ``node`` (as :meth:`filter` counts them); zeros for a node without a replica."""
        model = node.model
        if model is None:
            return (0,) * _CPU_COUNTS
        return _bind_counts_of(self._free_mask(node), model.machine)

    def _free_mask(self, node: NodeRecord) -> int:
        """:meth:`_free`'s CPUs as a mask, without the holders (what :meth:`_bind_counts` needs of a node):
        the ledger keeps the CPUs its pods hold (``NodeRecord.held_cpus``), so no pod is walked."""
        return _allocatable_mask(node) & ~node.held_cpus

    def filter_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[str | None]:
        """:meth:`filter_all` for a few rows (the same reasons): None where a row passes."""
        request = self._request(state, pod)
        if request.refusal is not None:
            return [reason_of(request.refusal)] * len(rows)
        if not request.needs:
            return [None] * len(rows)
        intent = request.intent
        assert intent is not None
        if intent.cpu_bind_policy or self.default_policy:
            positions: Iterable[int] = range(len(rows))
        else:
            positions = self._flagged(table.cluster).positions_few(table, rows)
        return refusals_few(self, state, pod, table, rows, positions)

    # ---- after Reserve

    def confirm(self, state: CycleState, pod: Pod, node: NodeRecord, placement: Placement) -> Status:
        """Check the replica's cpusets against the policy; on an agent-managed node, compute the ones to enforce.

        A replacement placement (only when it differs) is left in ``state[PLACEMENT_OVERRIDE]``
        and applied by the scheduler before Reserve. Unschedulable when the policy is required and no cpuset
        on the node meets it.
        """
        verdict = self._verdict(state, pod, node)
        if not verdict.status.is_success or not (verdict.policy or verdict.agent):
            return verdict.status
        request = self._request(state, pod)
        intent = request.intent
        assert intent is not None and node.model is not None
        machine = node.model.machine
        uid = pod.uid or pod.key
        free, held = self._free(node, exclude=uid)
        blocked = CPUSet()
        containers = dict(placement.containers)
        changed = False
        for name, count, reused in request.containers:
            given = containers.get(name) or ContainerPlacement()
            chosen, status = self._choose(verdict, intent, machine, given, count, free - blocked, held, name)
            if status is not None:
                return status
            if chosen != given.cpuset:
                moved = not (given.memory or given.devices)
                numa = frozenset(machine.numa_of(chosen)) if moved else given.numa_nodes | machine.numa_of(chosen)
                containers[name] = ContainerPlacement(chosen, numa, given.memory, given.devices, given.cpu_millis)
                changed = True
            if not reused:
                blocked = blocked | chosen
        if changed:
            numa_nodes = frozenset().union(*(c.numa_nodes for c in containers.values()))
            state[PLACEMENT_OVERRIDE] = Placement(placement.node, numa_nodes, containers)
        return Status.success()

    def _choose(self, verdict: _Verdict, intent: PodIntent, machine: Machine, given: ContainerPlacement, count: int,
                available: CPUSet, held: Mapping[int, str], name: str) -> tuple[CPUSet, Status | None]:
        """The cpuset one container gets: the replica's when it honours the policy, else the accumulator's."""
        policy, exclusive = verdict.policy, intent.cpu_exclusive_policy

        def quality(cpus: CPUSet) -> tuple[bool, bool]:
            return _honours_bind(policy, cpus, machine), _honours_exclusive(exclusive, cpus, held, machine)

        replica = given.cpuset
        if len(replica) == count and quality(replica) == (True, True):
            return replica, None
        if not verdict.agent:
            if not verdict.required or quality(replica)[0]:
                return replica, None
            reason = (f"the kubelet's CPU manager would give container {name} CPUs {replica}, "
                      f"which break the required {policy}")
            return replica, Status.unschedulable(reason, plugin=self.name)
        pinned = bool(given.memory or given.devices)
        regions = []
        if given.numa_nodes:
            regions.append(machine.cpus_in_numa(given.numa_nodes))
        if not pinned:
            regions.append(machine.online)
        chosen = None
        for region in regions:
            candidates = available & region
            if verdict.required:
                candidates = _required_cpus(policy, candidates, machine)
            try:
                if policy:
                    cpus = take_cpus(machine, candidates, count, bind_policy=policy, exclusive_policy=exclusive,
                                     held=held, strategy=self.strategy)
                else:  # no policy, and no static CPU manager to ask: the agent takes what that manager would
                    cpus = take_by_topology(machine, candidates, count)
            except (CPUTakeError, CPUAllocationError):
                continue
            if verdict.numa_policy == "single-numa-node" and len(machine.numa_of(cpus)) > 1:
                continue
            chosen = cpus
            break
        if chosen is None:
            if verdict.required or len(replica) != count:
                wanted = f"{REASON_INSUFFICIENT} {policy}" if policy else REASON_NOT_ENOUGH
                reason = f"{wanted}: container {name} needs {count} CPUs"
                return replica, Status.unschedulable(reason, plugin=self.name)
            return replica, None
        if len(replica) == count and quality(replica) >= quality(chosen):
            return replica, None
        return chosen, None
