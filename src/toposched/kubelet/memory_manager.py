"""The kubelet memory manager's ``Static`` policy, as upstream ``pkg/kubelet/cm/memorymanager``.

For Guaranteed pods the kubelet pins ``memory`` and ``hugepages-<size>`` to NUMA nodes. It keeps
a table per NUMA node and resource (total, system-reserved, allocatable, reserved, free), gives
the Topology Manager a hint for every NUMA set that could hold a container's request, and on
admission books the request on the NUMA set the Topology Manager chose, filling the set's nodes
in ascending order. A NUMA set of several nodes becomes a *group*: a node may serve single-NUMA
allocations or one multi-NUMA group, never both, and a group is only ever reused whole.

Memory that a regular init container held is reused by the containers that follow it in the
same pod (upstream ``initContainersReusableMemory``); a restartable (sidecar) init container's
memory is never reused.

The policy is a plain object: hints and admissions read it, ``allocate`` and release change it,
and an operation that fails leaves it exactly as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from toposched.errors import InputError, ToposchedError
from toposched.kubelet.config import KubeletConfig
from toposched.kubelet.hint_arrays import MaskHintArray, position_of, subset_masks, subset_widths
from toposched.kubelet.hints import TopologyHint, iterate_masks, mask_of, numa_set
from toposched.kubelet.memory_state import (
    Block,
    MachineState,
    MemoryManagerCheckpoint,
    MemoryTable,
    NUMANodeState,
    machine_states_equal,
)
from toposched.kubelet.topology_manager import numa_subsets, subset_arrays_apply, subset_sums, subset_sums_array
from toposched.quantity import format_bytes
from toposched.topology import Machine
from toposched.workload import GUARANTEED, Container, Pod

__all__ = [
    "MEMORY_POLICY_STATIC",
    "AffinityStore",
    "MemoryAllocation",
    "MemoryManagerError",
    "StaticMemoryPolicy",
    "container_requested_memory",
    "hugepage_resource_name",
    "is_memory_resource",
    "pod_requested_memory",
    "validate_reserved_memory",
]

MEMORY_POLICY_STATIC = "Static"
_MEMORY = "memory"
_HUGEPAGES = "hugepages-"
_EMPTY: Mapping[Any, Any] = MappingProxyType({})


class AffinityStore(Protocol):
    """Where the Topology Manager keeps each container's chosen hint (upstream ``topologymanager.Store``)."""

    def get_affinity(self, pod: Pod | str, container_name: str) -> TopologyHint:
        """The hint chosen for the container."""
        ...


class MemoryManagerError(ToposchedError):
    """The memory manager could not allocate; ``message`` is upstream's error text.

    It carries no admission ``reason``: the Topology Manager reports it, as upstream, as an
    :class:`~toposched.kubelet.UnexpectedAdmissionError`.
    """

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def hugepage_resource_name(page_size: int) -> str:
    """The resource name of a hugepage size in bytes, e.g. 2 MiB -> "hugepages-2Mi"."""
    return _HUGEPAGES + format_bytes(page_size)


def is_memory_resource(name: str) -> bool:
    """True for the resources the memory manager handles: ``memory`` and ``hugepages-*``."""
    return name == _MEMORY or name.startswith(_HUGEPAGES)


@dataclass(frozen=True, slots=True)
class MemoryAllocation:
    """What one ``allocate`` call decided for a container.

    ``numa_nodes`` is the NUMA set the blocks are pinned to (None when the container is not
    managed); ``blocks`` are the records the kubelet keeps for the container; ``numa_memory``
    is, per NUMA node and resource, how many bytes this call moved from free to reserved (less
    than the request when init-container memory was reused, empty when already allocated).
    """

    container: str
    numa_nodes: frozenset[int] | None = None
    blocks: tuple[Block, ...] = ()
    numa_memory: Mapping[int, Mapping[str, int]] = field(default_factory=lambda: _EMPTY)


def container_requested_memory(container: Container) -> dict[str, int]:
    """Upstream ``getRequestedResources``: the container's memory and hugepages requests."""
    out = {}
    for name, value in container.requests.items():
        if not is_memory_resource(name):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(f"{value!r} is not a non-negative integer", field=f"{container.name}.requests.{name}")
        out[name] = value
    return out


def pod_requested_memory(pod: Pod) -> dict[str, int]:
    """Upstream ``getPodRequestedResources``: the pod's memory and hugepages for pod-scope hints.

    Per resource, the larger of (app containers + restartable init containers) and the peak
    of a regular init container next to the restartable ones started before it. As upstream,
    only resources some app container requests are counted.
    """
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for c in pod.init_containers:
        for name, qty in container_requested_memory(c).items():
            init_peak.setdefault(name, 0)
            if c.is_sidecar:
                sidecars[name] = sidecars.get(name, 0) + qty
            elif sidecars.get(name, 0) + qty > init_peak[name]:
                init_peak[name] = sidecars.get(name, 0) + qty
    apps: dict[str, int] = {}
    for c in pod.containers:
        for name, qty in container_requested_memory(c).items():
            apps[name] = apps.get(name, 0) + qty
    return {name: max(total + sidecars.get(name, 0), init_peak.get(name, 0)) for name, total in apps.items()}


def validate_reserved_memory(
    numa_ids: Iterable[int],
    node_allocatable_reservation: Mapping[str, int],
    reserved_memory: Mapping[int, Mapping[str, int]],
) -> None:
    """Upstream ``validateReservedMemory``: the per-NUMA reservations must exist and add up.

    Every NUMA node named must exist, and for ``memory`` and each hugepages size the sum over
    NUMA nodes must equal the node-allocatable reservation (system-reserved + kube-reserved +
    hard eviction threshold). Raises :class:`InputError` with upstream's message.
    """
    known = set(numa_ids)
    totals: dict[str, int] = {}
    for numa_id in sorted(reserved_memory):
        if numa_id not in known:
            raise InputError(
                f"the reserved memory configuration references a NUMA node {numa_id} that does not exist on this machine",
                field=f"reservedMemory[{numa_id}]",
            )
        for name, value in reserved_memory[numa_id].items():
            totals[name] = totals.get(name, 0) + value
    names = set(totals) | {n for n in node_allocatable_reservation if is_memory_resource(n)}
    for name in sorted(names):
        expected = node_allocatable_reservation.get(name, 0)
        got = totals.get(name, 0)
        if expected != got:
            raise InputError(
                f'the total amount "{format_bytes(got)}" of type "{name}" is not equal to the value '
                f'"{format_bytes(expected)}" determined by Node Allocatable feature',
                field="reservedMemory",
            )


def _find_best_mask(hints: list[MaskHint]) -> TopologyHint:
    """Upstream ``findBestHint`` over ``(mask, preferred)`` pairs: preferred first, then the narrowest
    NUMA set (fewer nodes, or as many with a smaller mask value), the first one on ties."""
    best: MaskHint | None = None
    for mask, preferred in hints:
        if best is None:
            best = (mask, preferred)
        elif preferred != best[1]:
            if preferred:
                best = (mask, preferred)
        elif (mask.bit_count(), mask) < (best[0].bit_count(), best[0]):  # bitmask.IsNarrowerThan
            best = (mask, preferred)
    return TopologyHint(numa_set(best[0]), best[1]) if best is not None else TopologyHint(None, False)


def _table(state: MachineState, node: int, resource: str) -> MemoryTable | None:
    return state[node].table(resource)


def _sum_free(state: MachineState, nodes: Iterable[int], resource: str) -> int:
    return sum(t.free for n in nodes if (t := _table(state, n, resource)) is not None)


def _sum_allocatable(state: MachineState, nodes: Iterable[int], resource: str) -> int:
    return sum(t.allocatable for n in nodes if (t := _table(state, n, resource)) is not None)


def _cells(state: MachineState, node: int) -> tuple[int, ...]:
    return state[node].cells or ()


def _violates_groups(state: MachineState, bits: tuple[int, ...]) -> bool:
    """Upstream ``isAffinityViolatingNUMAAllocations``: a multi-NUMA set may only reuse its own group."""
    if len(bits) == 1:
        return False
    for node in bits:
        if state[node].number_of_assignments == 0:
            continue
        cells = _cells(state, node)
        if len(cells) == 1 or sorted(cells) != list(bits):
            return True
    return False


MaskHint = tuple[int, bool]
"""A hint as ``(NUMA mask, preferred)``: bit n of the mask stands for NUMA node n."""


def _group_rules(state: MachineState, ids: tuple[int, ...]) -> tuple[int, int, frozenset[int]]:
    """What upstream's group checks in ``calculateHints`` allow, as masks.

    Returns ``(split, assigned, groups)``: the nodes that belong to a multi-NUMA group (their
    one-node sets are out), the nodes holding memory, and the multi-NUMA sets that may be
    used although they hold memory (each of their used nodes has exactly that set as group).
    """
    split = assigned = 0
    group_of: dict[int, int] = {}
    for n in ids:
        node = state[n]
        cells = node.cells or ()
        if len(cells) > 1:
            split |= 1 << n
        if node.number_of_assignments > 0:
            assigned |= 1 << n
            distinct = len(set(cells)) == len(cells) and all(c >= 0 for c in cells)
            # sorted(cells) == the set's sorted nodes, for a set of two or more nodes
            group_of[n] = mask_of(cells) if distinct and len(cells) > 1 else -1
    groups = frozenset(
        g for g in set(group_of.values()) if g > 0 and all(group_of[n] == g for n in group_of if g >> n & 1)
    )
    return split, assigned, groups


_Columns = Mapping[str, tuple[list[int], list[int]]]  # resource -> (allocatable, free) per NUMA id
_Extras = Mapping[str, list[tuple[int, int]]]  # resource -> (positions, bytes) the pod may reuse there


def _reusable_positions(reusable: Mapping[int, Mapping[str, int]], ids: tuple[int, ...], resource: str
                        ) -> list[tuple[int, int]]:
    """The memory of ``resource`` the pod may reuse, as ``(positions, bytes)`` over ``ids`` (the
    reusable sets that lie on this machine's nodes; positions as in :func:`numa_subsets`)."""
    if not reusable:
        return []
    position = {n: i for i, n in enumerate(ids)}
    out = []
    for mask, per_resource in reusable.items():
        extra = per_resource.get(resource, 0)
        nodes = [position.get(n) for n in range(mask.bit_length()) if mask >> n & 1]
        if extra and None not in nodes:
            out.append((sum(1 << i for i in nodes), extra))  # type: ignore[misc]
    return out


def _valid_from_lists(ids: tuple[int, ...], requested: Mapping[str, int], columns: _Columns, extras: _Extras,
                      split: int, assigned: int, groups: frozenset[int]) -> list[MaskHint]:
    """``_calculate_masks``' valid hints, walking :func:`numa_subsets` (machines with few NUMA nodes)."""
    allocatable_ok: list[bool] | None = None
    free_ok: list[bool] | None = None
    for r in sorted(requested):
        size = requested[r]
        ok = [total >= size for total in subset_sums(columns[r][0])]
        allocatable_ok = ok if allocatable_ok is None else [a and b for a, b in zip(allocatable_ok, ok)]
        free = subset_sums(columns[r][1])
        for positions, extra in extras[r]:
            free[positions] += extra
        ok = [total >= size for total in free]
        free_ok = ok if free_ok is None else [a and b for a, b in zip(free_ok, ok)]
    assert allocatable_ok is not None and free_ok is not None
    subsets = numa_subsets(ids)
    min_size = next((width for positions, _, width in subsets if allocatable_ok[positions]), len(ids))
    return [
        (mask, width == min_size)
        for positions, mask, width in subsets
        if allocatable_ok[positions]
        and free_ok[positions]
        and (not split & mask if width == 1 else not assigned & mask or mask in groups)
    ]


@lru_cache(maxsize=64)
def _allocatable_sums(values: tuple[int, ...]) -> np.ndarray | None:
    """:func:`subset_sums_array` of the NUMA nodes' allocatable amounts, which change only with the
    machine's reservations: kept per machine and resource (read-only)."""
    sums = subset_sums_array(values)
    if sums is not None:
        sums.setflags(write=False)
    return sums


def _valid_arrays(ids: tuple[int, ...], requested: Mapping[str, int], columns: _Columns, extras: _Extras,
                  split: int, assigned: int, groups: frozenset[int]) -> MaskHintArray | None:
    """:func:`_valid_from_lists` in NumPy, for machines with many NUMA nodes: the same hints, held
    as one flag per subset (read as a list, in the same order); None where it does not apply (too
    few nodes, or amounts an int64 cannot hold)."""
    if not subset_arrays_apply(ids):
        return None
    size = 1 << len(ids)
    allocatable_ok = np.ones(size, dtype=bool)
    free_ok = np.ones(size, dtype=bool)
    for r in sorted(requested):
        need = requested[r]
        allocatable, free = _allocatable_sums(tuple(columns[r][0])), subset_sums_array(columns[r][1])
        if allocatable is None or free is None or (need | sum(extra for _, extra in extras[r])) >> 61:
            return None
        for at, extra in extras[r]:
            free[at] += extra
        allocatable_ok &= allocatable >= need
        free_ok &= free >= need
    allocatable_ok[0] = False  # the empty set is no NUMA set
    widths = subset_widths(len(ids))
    min_size = int(widths[allocatable_ok].min()) if allocatable_ok.any() else len(ids)
    masks = subset_masks(ids)
    wider = (masks & assigned) == 0
    wider[[position_of(group, ids) for group in groups if group & ~masks[-1] == 0]] = True  # groups on these nodes
    valid = allocatable_ok & free_ok & np.where(widths == 1, (masks & split) == 0, wider)
    return MaskHintArray(ids, valid, valid & (widths == min_size))


def _any_valid(valid: list[MaskHint] | MaskHintArray) -> bool:
    """Whether :meth:`StaticMemoryPolicy._valid` found any valid set."""
    return len(valid) > 0


def _best_holding(valid: list[MaskHint] | MaskHintArray, need: int) -> TopologyHint | None:
    """:func:`_find_best_mask` over the valid hints whose mask holds ``need``; None when there is none.

    On arrays the narrowest such set (then the smallest mask) is taken at once: a valid set is
    preferred exactly when it is as narrow as any set could be, so preferring the preferred ones
    first changes nothing."""
    if isinstance(valid, list):
        candidates = [h for h in valid if h[0] & need == need] if need else valid
        return _find_best_mask(candidates) if candidates else None
    masks = subset_masks(valid.ids)
    holding = valid.positions[(masks[valid.positions] & need) == need]
    if not len(holding):
        return None
    widths = subset_widths(len(valid.ids))[holding]
    narrowest = holding[widths == widths.min()]
    best = int(narrowest[masks[narrowest].argmin()])
    return TopologyHint(numa_set(int(masks[best])), bool(valid.preferred[best]))


def _satisfies(state: MachineState, nodes: frozenset[int], requested: Mapping[str, int]) -> bool:
    """Upstream ``isAffinitySatisfyRequest``: the set's free memory covers every request."""
    return all(_sum_free(state, sorted(nodes), r) >= size for r, size in requested.items())


class StaticMemoryPolicy:
    """The memory manager with ``--memory-manager-policy=Static`` on one machine.

    ``reserved_memory`` is the kubelet's ``reservedMemory``: NUMA id -> {resource: bytes}. When
    ``node_allocatable_reservation`` (system-reserved + kube-reserved + hard eviction, per
    resource) is given, the reservations must add up to it, as the kubelet checks at start;
    :meth:`from_config` derives it from a :class:`~toposched.kubelet.config.KubeletConfig`.
    ``affinity`` is where :meth:`allocate` reads the Topology Manager's choice when no hint is
    passed (e.g. a :class:`~toposched.kubelet.TopologyManager`, which makes this policy one of
    its hint providers). The policy starts from the empty machine state (upstream's default).
    """

    name = MEMORY_POLICY_STATIC

    def __init__(
        self,
        machine: Machine,
        reserved_memory: Mapping[int, Mapping[str, int]],
        *,
        node_allocatable_reservation: Mapping[str, int] | None = None,
        affinity: AffinityStore | None = None,
    ):
        if not isinstance(machine, Machine):
            raise InputError(f"expected a Machine, got {type(machine).__name__}", field="machine")
        self._machine = machine
        self.affinity = affinity
        reserved = self._checked_reservations(machine, reserved_memory)
        if node_allocatable_reservation is not None:
            for name, value in node_allocatable_reservation.items():
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise InputError(
                        f"{value!r} is not a non-negative integer", field=f"nodeAllocatableReservation.{name}"
                    )
            validate_reserved_memory(machine.numa_ids, node_allocatable_reservation, reserved)
        if sum(r.get(_MEMORY, 0) for r in reserved.values()) <= 0:
            raise InputError("[memorymanager] you should specify the system reserved memory", field="reservedMemory")
        self._system_reserved = {n: dict(reserved.get(n, {})) for n in machine.numa_ids}
        self._default_state = self._build_default_state()
        self._state: dict[int, NUMANodeState] = dict(self._default_state)
        self._assignments: dict[str, dict[str, tuple[Block, ...]]] = {}
        # pod UID -> NUMA mask -> resource -> bytes that regular init containers left for reuse.
        self._reusable: dict[str, dict[int, dict[str, int]]] = {}

    @classmethod
    def from_config(
        cls, machine: Machine, config: KubeletConfig, *, affinity: AffinityStore | None = None
    ) -> StaticMemoryPolicy:
        """The policy a kubelet with this configuration runs, checked like the kubelet checks it.

        The node-allocatable reservation is system-reserved + kube-reserved, plus the
        ``memory.available`` hard eviction threshold for ``memory``.
        """
        if config.memory_manager_policy != MEMORY_POLICY_STATIC:
            raise InputError(
                f"memoryManagerPolicy is {config.memory_manager_policy!r}, not {MEMORY_POLICY_STATIC!r}",
                field="memoryManagerPolicy",
            )
        reservation: dict[str, int] = {}
        for source in (config.system_reserved, config.kube_reserved, {_MEMORY: config.eviction_memory}):
            for name, value in source.items():
                reservation[name] = reservation.get(name, 0) + value
        return cls(machine, config.reserved_memory, node_allocatable_reservation=reservation, affinity=affinity)

    # ---- construction helpers ---------------------------------------------------------------

    @staticmethod
    def _checked_reservations(
        machine: Machine, reserved_memory: Mapping[int, Mapping[str, int]]
    ) -> dict[int, dict[str, int]]:
        if not isinstance(reserved_memory, Mapping):
            raise InputError("expected a mapping of NUMA id to {resource: bytes}", field="reservedMemory")
        out: dict[int, dict[str, int]] = {}
        for numa_id in sorted(reserved_memory):
            if not machine.has_numa(numa_id):
                raise InputError(
                    f"the reserved memory configuration references a NUMA node {numa_id} that does not exist on this machine",
                    field=f"reservedMemory[{numa_id}]",
                )
            node = machine.numa(numa_id)
            sizes = {hugepage_resource_name(size) for size in node.hugepages}
            entry: dict[str, int] = {}
            for name, value in reserved_memory[numa_id].items():
                where = f"reservedMemory[{numa_id}].{name}"
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise InputError(f"{value!r} is not a non-negative integer", field=where)
                if not is_memory_resource(name):
                    raise InputError(
                        f"unknown resource {name!r}: only memory and hugepages-<size> are reserved per NUMA node",
                        field=where,
                    )
                if name != _MEMORY and name not in sizes and value:
                    raise InputError(f"NUMA node {numa_id} has no {name} pages to reserve", field=where)
                entry[name] = value
            out[numa_id] = entry
        return out

    def _build_default_state(self) -> dict[int, NUMANodeState]:
        """Upstream ``getDefaultMachineState``: every table full, every node its own group."""
        state = {}
        for node in self._machine.numa_nodes:
            reserved = self._system_reserved[node.id]
            tables: dict[str, MemoryTable] = {}
            hugepages_total = 0
            for size, count in sorted(node.hugepages.items()):
                name = hugepage_resource_name(size)
                total = size * count
                held = reserved.get(name, 0)
                if held > total:
                    raise InputError(
                        f"reserves {format_bytes(held)} of {name} but NUMA node {node.id} has {format_bytes(total)}",
                        field=f"reservedMemory[{node.id}].{name}",
                    )
                tables[name] = MemoryTable(total, held, total - held, 0, total - held)
                hugepages_total += total
            held = reserved.get(_MEMORY, 0)
            allocatable = node.memory_bytes - held - hugepages_total
            if allocatable < 0:
                raise InputError(
                    f"reserves {format_bytes(held)} of memory but NUMA node {node.id} has {format_bytes(node.memory_bytes)} "
                    f"of which {format_bytes(hugepages_total)} are hugepages",
                    field=f"reservedMemory[{node.id}].memory",
                )
            tables[_MEMORY] = MemoryTable(node.memory_bytes, held, allocatable, 0, allocatable)
            state[node.id] = NUMANodeState(0, tables, (node.id,))
        return state

    # ---- views -------------------------------------------------------------------------------

    @property
    def machine(self) -> Machine:
        """The machine this policy manages."""
        return self._machine

    @property
    def system_reserved(self) -> Mapping[int, Mapping[str, int]]:
        """Reserved bytes per NUMA node and resource (upstream ``convertReserved``), every node listed."""
        return MappingProxyType({n: MappingProxyType(dict(r)) for n, r in self._system_reserved.items()})

    @property
    def machine_state(self) -> MachineState:
        """The current per-NUMA memory tables, assignment counts and groups."""
        return MappingProxyType(dict(self._state))

    @property
    def default_machine_state(self) -> MachineState:
        """The machine state with nothing allocated."""
        return MappingProxyType(dict(self._default_state))

    @property
    def assignments(self) -> Mapping[str, Mapping[str, tuple[Block, ...]]]:
        """Memory blocks per pod UID and container name."""
        return MappingProxyType({p: MappingProxyType(dict(c)) for p, c in self._assignments.items()})

    def memory_blocks(self, pod_uid: str, container_name: str) -> tuple[Block, ...] | None:
        """The blocks recorded for a container, or None when it has none."""
        return self._assignments.get(pod_uid, {}).get(container_name)

    def memory_numa_nodes(self, pod: Pod, container: Container | str) -> frozenset[int] | None:
        """Upstream ``GetMemoryNUMANodes``: the NUMA nodes a container's memory is pinned to."""
        name = container if isinstance(container, str) else container.name
        nodes = {n for b in self.memory_blocks(self.pod_uid(pod), name) or () for n in b.numa_affinity or ()}
        return frozenset(nodes) if nodes else None

    def available(self) -> dict[int, dict[str, int]]:
        """Free bytes per NUMA node and resource."""
        return {n: {r: t.free for r, t in sorted((s.memory_map or {}).items())} for n, s in sorted(self._state.items())}

    def one_node_memory(self, resources: Iterable[str]) -> tuple[dict[str, dict[int, int]], int]:
        """What decides the one-NUMA-node hints of a new pod asking for some of ``resources``: per
        resource the free bytes per NUMA node (0 where the node has none of it), and the NUMA nodes
        (bit n = node n) that belong to a multi-NUMA group. The policy offers such a pod the one-node
        set of node n, preferred, exactly when n is not in a group and its free bytes cover every
        resource asked for (free never exceeds allocatable, so the set's minimal size is then one;
        :meth:`_single_node_masks`)."""
        free: dict[str, dict[int, int]] = {r: {} for r in resources}
        grouped = 0
        for n, node in self._state.items():
            tables = node.memory_map or _EMPTY
            for r, per_node in free.items():
                table = tables.get(r)
                per_node[n] = table.free if table is not None else 0
            if len(node.cells or ()) > 1:  # as _group_rules' split
                grouped |= 1 << n
        return free, grouped

    def allocatable(self) -> dict[int, dict[str, int]]:
        """Upstream ``GetAllocatableMemory``: allocatable bytes per NUMA node and resource, zeros left out."""
        out: dict[int, dict[str, int]] = {}
        for n, s in sorted(self._state.items()):
            tables = {r: t.allocatable for r, t in sorted((s.memory_map or {}).items()) if t.allocatable}
            if tables:
                out[n] = tables
        return out

    def checkpoint(self) -> MemoryManagerCheckpoint:
        """The current state as the kubelet would checkpoint it."""
        return MemoryManagerCheckpoint(self.name, self._state, self._assignments)

    def _save(self, pod_uid: str) -> tuple[dict[int, NUMANodeState], dict[str, tuple[Block, ...]] | None]:
        """What an admission of ``pod_uid`` can change: the machine state (replaced, never
        changed in place) and that pod's blocks; see :meth:`_undo`."""
        blocks = self._assignments.get(pod_uid)
        return self._state, None if blocks is None else dict(blocks)

    def _undo(self, pod_uid: str, saved: tuple[dict[int, NUMANodeState], dict[str, tuple[Block, ...]] | None]) -> None:
        """Put back what :meth:`_save` kept, and forget reusable memory, as :meth:`restore` would."""
        state, blocks = saved
        self._state = state
        if blocks is None:
            self._assignments.pop(pod_uid, None)
        else:
            self._assignments[pod_uid] = dict(blocks)
        self._reusable = {}

    # ---- state restore (upstream Start / validateState) -------------------------------------

    def restore(self, checkpoint: MemoryManagerCheckpoint, *, validate: bool = True, source: str | None = None) -> None:
        """Adopt a checkpointed state, checked as the kubelet checks it at start.

        With ``validate`` the policy name must be ``Static`` and the machine state must equal
        (in upstream's sense, see :func:`machine_states_equal`) the state rebuilt from this
        machine, its reservations and the checkpoint's blocks; an empty machine state is
        replaced by the default one. ``validate=False`` adopts the state as given, as
        upstream's own tests do. Raises :class:`InputError` and keeps the old state on failure.
        """
        entries = {
            pod: {name: tuple(blocks or ()) for name, blocks in (containers or {}).items()}
            for pod, containers in (checkpoint.entries or {}).items()
        }
        state = dict(checkpoint.machine_state or {})
        try:
            if validate:
                if checkpoint.policy_name != self.name:
                    raise InputError(
                        f'[memorymanager] configured policy "{self.name}" differs from state checkpoint policy '
                        f'"{checkpoint.policy_name}"',
                        field="policyName",
                    )
                state = self._validated_state(state, entries)
        except InputError as err:
            raise err.with_source(source or "memory_manager_state") from None
        self._state = state
        self._assignments = entries
        self._reusable = {}

    def _validated_state(
        self, state: dict[int, NUMANodeState], entries: dict[str, dict[str, tuple[Block, ...]]]
    ) -> dict[int, NUMANodeState]:
        if not state:
            if any(entries.values()):
                raise InputError(
                    "[memorymanager] machine state can not be empty when it has memory assignments",
                    field="machineState",
                )
            return dict(self._default_state)
        expected = dict(self._default_state)
        for pod, containers in sorted(entries.items()):
            for name, blocks in sorted(containers.items()):
                for block in blocks:
                    bits = tuple(block.numa_affinity or ())
                    remaining = block.size
                    for node_id in bits:
                        if node_id not in expected:
                            raise InputError(
                                f"[memorymanager] (pod: {pod}, container: {name}) the memory assignment uses the NUMA "
                                "that does not exist",
                                field=f"entries.{pod}.{name}",
                            )
                        node = replace(
                            expected[node_id],
                            number_of_assignments=expected[node_id].number_of_assignments + 1,
                            cells=bits,
                        )
                        table = node.table(block.type)
                        if table is None:
                            raise InputError(
                                f"[memorymanager] (pod: {pod}, container: {name}) the memory assignment uses memory "
                                "resource that does not exist",
                                field=f"entries.{pod}.{name}",
                            )
                        take = min(table.free, remaining)
                        if take:
                            node = node.with_table(
                                block.type, replace(table, reserved=table.reserved + take, free=table.free - take)
                            )
                            remaining -= take
                        expected[node_id] = node
        if not machine_states_equal(state, expected):
            raise InputError(
                "[memorymanager] the expected machine state is different from the real one", field="machineState"
            )
        return state

    # ---- which pods, and what they ask for ---------------------------------------------------

    @staticmethod
    def pod_uid(pod: Pod) -> str:
        """The key the policy files a pod under: its UID, or ``namespace/name`` when it has none."""
        return pod.uid or pod.key

    @staticmethod
    def manages(pod: Pod) -> bool:
        """True when the policy pins this pod's memory: Guaranteed pods only, as upstream."""
        return pod.qos_class == GUARANTEED

    def _container(self, pod: Pod, container: Container | str) -> Container:
        if isinstance(container, Container):
            return container
        try:
            return pod.container(container)
        except KeyError:
            raise InputError(f"pod {pod.key} has no container {container!r}", field="container") from None

    def _check_known(self, requested: Mapping[str, int], where: str) -> None:
        for name in requested:
            if not any(name in (s.memory_map or {}) for s in self._state.values()):
                raise InputError(f"unknown resource {name!r}: the machine has no such memory", field=f"{where}.{name}")

    def requested_resources(self, pod: Pod, container: Container | str) -> dict[str, int]:
        """The memory and hugepages a container requests; InputError for sizes the machine lacks."""
        c = self._container(pod, container)
        try:
            requested = container_requested_memory(c)
            self._check_known(requested, f"{c.name}.requests")
        except InputError as err:
            raise err.with_source(f"pod {pod.key}") from None
        return requested

    def pod_requested_resources(self, pod: Pod) -> dict[str, int]:
        """The pod-scope request (see :func:`pod_requested_memory`); every container checked."""
        for c in pod.all_containers:
            self.requested_resources(pod, c)
        return pod_requested_memory(pod)

    # ---- hints -------------------------------------------------------------------------------

    def _reusable_for(self, pod_uid: str, nodes: frozenset[int], resource: str) -> int:
        return self._reusable.get(pod_uid, {}).get(mask_of(nodes), {}).get(resource, 0)

    def _calculate_hints(
        self, state: MachineState, pod_uid: str, requested: Mapping[str, int]
    ) -> dict[str, list[TopologyHint]]:
        """Upstream ``calculateHints``: every valid NUMA set, preferred when it is of minimal size.

        A set is valid when its allocatable memory covers the request, it respects the groups
        (a single node already in a multi-NUMA group is out; a multi-NUMA set must be untouched
        nodes or exactly an existing group) and its free memory, plus what the pod's init
        containers left for reuse, covers the request. The minimal size counts every set whose
        allocatable memory suffices, used or not.
        """
        min_size = len(state)
        valid: list[frozenset[int]] = []
        for mask in iterate_masks(state):
            bits = tuple(sorted(mask))
            if any(_sum_allocatable(state, bits, r) < size for r, size in requested.items()):
                continue
            min_size = min(min_size, len(bits))
            if len(bits) == 1 and len(_cells(state, bits[0])) > 1:
                continue
            if len(bits) > 1 and any(
                state[n].number_of_assignments > 0
                and (len(_cells(state, n)) == 1 or sorted(_cells(state, n)) != list(bits))
                for n in bits
            ):
                continue
            if any(
                _sum_free(state, bits, r) + self._reusable_for(pod_uid, mask, r) < size for r, size in requested.items()
            ):
                continue
            valid.append(mask)
        if not valid:
            return {}
        return {r: [TopologyHint(m, len(m) == min_size) for m in valid] for r in sorted(requested)}

    def _calculate_masks(
        self, state: MachineState, pod_uid: str, requested: Mapping[str, int], single_numa_only: bool
    ) -> dict[str, Sequence[MaskHint]]:
        """:meth:`_calculate_hints` on int masks: the same hints, in the same order, without visiting NUMA sets.

        Sums over NUMA sets are built once per call for every set; the group rules become
        three masks (see :func:`_group_rules`). With ``single_numa_only`` only the hints upstream's
        ``filterSingleNumaHints`` keeps are listed (preferred, one node wide), unless there is
        none: then every resource gets an empty list when some wider set is valid (the merge
        under single-numa-node sees the same empty lists) and the answer stays ``{}`` otherwise.
        """
        if not requested:
            return {}
        resources = sorted(requested)
        if single_numa_only:
            singles = self._single_node_masks(state, pod_uid, requested)
            if singles:
                return {r: list(singles) for r in resources}
            # Every valid set is wider or not preferred: single-numa-node drops them all, so only
            # whether there is one matters ({} would mean "no preference").
            return {r: [] for r in resources} if _any_valid(self._valid(state, pod_uid, requested)) else {}
        valid = self._valid(state, pod_uid, requested)
        if not valid:
            return {}
        if isinstance(valid, MaskHintArray):
            return dict.fromkeys(resources, valid)  # one list for every resource: it is never changed
        return {r: list(valid) for r in resources}

    def _single_node_masks(self, state: MachineState, pod_uid: str, requested: Mapping[str, int]) -> list[MaskHint]:
        """The valid one-node sets, each preferred: a one-node set whose allocatable memory suffices
        makes minAffinitySize one, so every valid one-node set is then a preferred hint."""
        ids = tuple(sorted(state))
        reusable = self._reusable.get(pod_uid, {})
        split = _group_rules(state, ids)[0]

        def column(n: int, r: str, free: bool) -> int:
            table = _table(state, n, r)
            return 0 if table is None else (table.free if free else table.allocatable)

        singles: list[MaskHint] = []
        for n in ids:
            bit = 1 << n
            if split & bit or any(column(n, r, False) < size for r, size in requested.items()):
                continue
            extra = reusable.get(bit, _EMPTY)
            if all(column(n, r, True) + extra.get(r, 0) >= size for r, size in requested.items()):
                singles.append((bit, True))
        return singles

    def _valid(self, state: MachineState, pod_uid: str, requested: Mapping[str, int]
               ) -> list[MaskHint] | MaskHintArray:
        """Every valid NUMA set for ``requested`` with its preferred flag, in upstream's order: as
        NumPy arrays on machines with many NUMA nodes, as a list otherwise."""
        ids = tuple(sorted(state))
        reusable = self._reusable.get(pod_uid, {})
        split, assigned, groups = _group_rules(state, ids)
        columns = {}
        for r in requested:
            tables = [_table(state, n, r) for n in ids]
            columns[r] = ([0 if t is None else t.allocatable for t in tables], [0 if t is None else t.free for t in tables])
        extras = {r: _reusable_positions(reusable, ids, r) for r in requested}
        valid = _valid_arrays(ids, requested, columns, extras, split, assigned, groups)
        return valid if valid is not None else _valid_from_lists(ids, requested, columns, extras, split, assigned, groups)

    @staticmethod
    def _regenerate_masks(blocks: tuple[Block, ...], requested: Mapping[str, int]) -> dict[str, Sequence[MaskHint]] | None:
        """:meth:`_regenerate_hints` on int masks."""
        hints: dict[str, list[MaskHint]] = {r: [] for r in sorted(requested)}
        if len(blocks) != len(requested):
            return None
        for b in blocks:
            if b.type not in requested or b.size != requested[b.type]:
                return None
            hints[b.type].append((mask_of(b.numa_affinity or ()), True))
        return hints

    @staticmethod
    def _regenerate_hints(
        blocks: tuple[Block, ...], requested: Mapping[str, int]
    ) -> dict[str, list[TopologyHint]] | None:
        """Upstream ``regenerateHints``: the recorded NUMA set as the only, preferred hint."""
        hints: dict[str, list[TopologyHint]] = {r: [] for r in sorted(requested)}
        if len(blocks) != len(requested):
            return None
        for b in blocks:
            if b.type not in requested or b.size != requested[b.type]:
                return None
            hints[b.type].append(TopologyHint(frozenset(b.numa_affinity or ()), True))
        return hints

    def get_topology_hints(self, pod: Pod, container: Container | str) -> dict[str, list[TopologyHint]] | None:
        """Upstream ``GetTopologyHints`` for one container.

        None (no preference) for pods that are not Guaranteed or whose recorded blocks no
        longer match the request; the recorded NUMA set when the container already holds
        memory; otherwise the calculated hints per resource (``{}`` when no set fits).
        """
        if not self.manages(pod):
            return None
        c = self._container(pod, container)
        requested = self.requested_resources(pod, c)
        blocks = self.memory_blocks(self.pod_uid(pod), c.name)
        if blocks is not None:
            return self._regenerate_hints(blocks, requested)
        return self._calculate_hints(self._state, self.pod_uid(pod), requested)

    def get_pod_topology_hints(self, pod: Pod) -> dict[str, list[TopologyHint]] | None:
        """Upstream ``GetPodTopologyHints``: hints for the whole pod's request (pod scope)."""
        if not self.manages(pod):
            return None
        requested = self.pod_requested_resources(pod)
        uid, blocks = self._held_blocks(pod)
        if blocks is not None:
            return self._regenerate_hints(blocks, requested)
        return self._calculate_hints(self._state, uid, requested)

    def topology_masks(
        self, pod: Pod, container: Container | str, *, single_numa_only: bool = False
    ) -> dict[str, Sequence[MaskHint]] | None:
        """:meth:`get_topology_hints` as ``(NUMA mask, preferred)`` pairs (bit n = NUMA node n), fast.

        The same hints in the same order. With ``single_numa_only`` only those upstream's
        single-numa-node policy keeps are listed, so a merge under that policy decides exactly
        as on the full lists (see :meth:`_calculate_masks`).
        """
        if not self.manages(pod):
            return None
        c = self._container(pod, container)
        requested = self.requested_resources(pod, c)
        blocks = self.memory_blocks(self.pod_uid(pod), c.name)
        if blocks is not None:
            return self._regenerate_masks(blocks, requested)
        return self._calculate_masks(self._state, self.pod_uid(pod), requested, single_numa_only)

    def pod_topology_masks(self, pod: Pod, *, single_numa_only: bool = False) -> dict[str, Sequence[MaskHint]] | None:
        """:meth:`get_pod_topology_hints` as ``(NUMA mask, preferred)`` pairs (see :meth:`topology_masks`)."""
        if not self.manages(pod):
            return None
        requested = self.pod_requested_resources(pod)
        uid, blocks = self._held_blocks(pod)
        if blocks is not None:
            return self._regenerate_masks(blocks, requested)
        return self._calculate_masks(self._state, uid, requested, single_numa_only)

    def _held_blocks(self, pod: Pod) -> tuple[str, tuple[Block, ...] | None]:
        """The pod's UID and the blocks its first container that holds memory has (None if none does)."""
        uid = self.pod_uid(pod)
        for c in pod.all_containers:
            blocks = self.memory_blocks(uid, c.name)
            if blocks is not None:
                return uid, blocks
        return uid, None

    # ---- allocation --------------------------------------------------------------------------

    def _default_hint(self, state: MachineState, pod_uid: str, requested: Mapping[str, int]) -> TopologyHint:
        # On int masks (the same hints in the same order as _calculate_hints): a 16-NUMA machine has
        # 65,535 sets, too many to visit as frozensets on every allocation without an affinity.
        if not requested or not _any_valid(valid := self._valid(state, pod_uid, requested)):
            raise MemoryManagerError(
                "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available"
            )
        best = _best_holding(valid, 0) if _MEMORY in requested else None
        return best if best is not None else TopologyHint(None, False)

    def _extended_hint(
        self, state: MachineState, pod_uid: str, requested: Mapping[str, int], nodes: frozenset[int]
    ) -> TopologyHint:
        best = _best_holding(self._valid(state, pod_uid, requested), mask_of(nodes)) if _MEMORY in requested else None
        if best is None:
            raise MemoryManagerError("[memorymanager] failed to find NUMA nodes to extend the current topology hint")
        return best

    def _check_hint(self, hint: TopologyHint) -> None:
        if hint.numa_nodes is None:
            return
        missing = sorted(n for n in hint.numa_nodes if not self._machine.has_numa(n))
        if missing:
            raise InputError(f"the hint names NUMA nodes {missing} that the machine lacks", field="hint.numa_nodes")

    def allocate(self, pod: Pod, container: Container | str, hint: TopologyHint | None = None) -> MemoryAllocation:
        """Upstream ``Allocate``: book a container's memory on the Topology Manager's hint.

        ``hint`` is the merged affinity; without one the ``affinity`` store is asked, and
        without a store the hint has no affinity. With no affinity the policy picks its own
        best hint, as under the Topology Manager policy ``none``. A hint too narrow for the
        request is widened to the best valid set containing it. Raises
        :class:`MemoryManagerError` with upstream's reason when the request cannot be placed
        and :class:`InputError` for bad input; either way the state is unchanged. Calling it
        again for a container that already holds memory changes nothing.
        """
        c = self._container(pod, container)
        if hint is None:
            hint = self.affinity.get_affinity(pod, c.name) if self.affinity else TopologyHint(None, False)
        self._check_hint(hint)
        if not self.manages(pod):
            return MemoryAllocation(c.name)
        uid = self.pod_uid(pod)
        existing = self.memory_blocks(uid, c.name)
        if existing is not None:
            self._update_reusable(pod, c, existing)
            nodes = frozenset(n for b in existing for n in b.numa_affinity or ())
            return MemoryAllocation(c.name, nodes, existing)
        requested = self.requested_resources(pod, c)
        state = self._state
        best = hint
        if hint.numa_nodes is None:
            default = self._default_hint(state, uid, requested)
            if not default.preferred and best.preferred:
                raise MemoryManagerError("[memorymanager] failed to find the default preferred hint")
            best = default
        if best.numa_nodes is None:
            raise MemoryManagerError(
                "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available"
            )
        if not _satisfies(state, best.numa_nodes, requested):
            extended = self._extended_hint(state, uid, requested, best.numa_nodes)
            if not extended.preferred and best.preferred:
                raise MemoryManagerError("[memorymanager] failed to find the extended preferred hint")
            best = extended
        nodes = best.numa_nodes or frozenset()
        bits = tuple(sorted(nodes))
        if _violates_groups(state, bits):
            raise MemoryManagerError("[memorymanager] preferred hint violates NUMA node allocation")

        work = dict(state)
        taken: dict[int, dict[str, int]] = {}
        blocks = []
        for resource, size in sorted(requested.items()):
            blocks.append(Block(bits, resource, size))
            reusable = self._reusable_for(uid, nodes, resource)
            self._book(work, bits, resource, 0 if reusable >= size else size - reusable, taken)
        blocks_t = tuple(blocks)
        self._update_reusable(pod, c, blocks_t)
        self._state = work
        self._assignments.setdefault(uid, {})[c.name] = blocks_t
        self._shrink_init_blocks(pod, c, blocks_t)
        return MemoryAllocation(
            c.name, nodes, blocks_t, MappingProxyType({n: MappingProxyType(r) for n, r in sorted(taken.items())})
        )

    @staticmethod
    def _book(
        work: dict[int, NUMANodeState],
        bits: tuple[int, ...],
        resource: str,
        size: int,
        taken: dict[int, dict[str, int]],
    ) -> None:
        """Upstream ``updateMachineState``: count the block on every node, fill nodes in order."""
        for node_id in bits:
            before = work[node_id]  # records built directly: dataclasses.replace reads the fields' list each call
            node = NUMANodeState(before.number_of_assignments + 1, before.memory_map, bits)
            table = node.table(resource)
            if size and table is not None and table.free > 0:
                take = min(table.free, size)
                node = node.with_table(resource, MemoryTable(table.total, table.system_reserved, table.allocatable,
                                                             table.reserved + take, table.free - take))
                size -= take
                taken.setdefault(node_id, {})[resource] = take
            work[node_id] = node

    @staticmethod
    def _is_regular_init(pod: Pod, name: str) -> bool:
        return any(c.name == name and not c.is_sidecar for c in pod.init_containers)

    def _update_reusable(self, pod: Pod, container: Container, blocks: tuple[Block, ...]) -> None:
        """Upstream ``updatePodReusableMemory``: remember or consume init-container memory."""
        uid = self.pod_uid(pod)
        for other in [u for u in self._reusable if u != uid]:
            del self._reusable[other]
        if self._is_regular_init(pod, container.name):
            pod_reusable = self._reusable.setdefault(uid, {})
            for b in blocks:
                per_mask = pod_reusable.setdefault(mask_of(b.numa_affinity or ()), {})
                if b.size > per_mask.get(b.type, 0):
                    per_mask[b.type] = b.size
            return
        for b in blocks:
            key = mask_of(b.numa_affinity or ())
            reusable = self._reusable.get(uid, {}).get(key, {}).get(b.type, 0)
            if reusable:
                self._reusable[uid][key][b.type] = 0 if b.size >= reusable else reusable - b.size

    def _shrink_init_blocks(self, pod: Pod, container: Container, blocks: tuple[Block, ...]) -> None:
        """Upstream ``updateInitContainersMemoryBlocks``: charge reused memory to the new container.

        The blocks of the regular init containers before this one shrink by what this
        container reuses, so the pod's blocks add up to the memory it really holds.
        """
        uid = self.pod_uid(pod)
        for block in blocks:
            remaining = block.size
            for init in pod.init_containers:
                if init.name == container.name or remaining == 0:
                    break
                if init.is_sidecar:
                    continue
                init_blocks = self.memory_blocks(uid, init.name)
                if not init_blocks:
                    continue
                updated = []
                for ib in init_blocks:
                    if (
                        ib.size
                        and ib.type == block.type
                        and set(ib.numa_affinity or ()) == set(block.numa_affinity or ())
                    ):
                        if ib.size > remaining:
                            ib = replace(ib, size=ib.size - remaining)
                            remaining = 0
                        else:
                            remaining -= ib.size
                            ib = replace(ib, size=0)
                    updated.append(ib)
                self._assignments[uid][init.name] = tuple(updated)

    # ---- release -----------------------------------------------------------------------------

    def remove_container(self, pod: Pod | str, container: Container | str) -> None:
        """Upstream ``RemoveContainer``: give a container's blocks back; nothing if it has none.

        ``pod`` is a pod or its UID. Each block's bytes go back to the reserved memory of its
        NUMA nodes in ascending order; a node whose last block leaves becomes its own group.
        """
        pod_uid = pod if isinstance(pod, str) else self.pod_uid(pod)
        container_name = container if isinstance(container, str) else container.name
        blocks = self.memory_blocks(pod_uid, container_name)
        if blocks is None:
            return
        containers = self._assignments[pod_uid]
        del containers[container_name]
        if not containers:
            del self._assignments[pod_uid]
        work = dict(self._state)
        for block in blocks:
            released = block.size
            for node_id in block.numa_affinity or ():
                if node_id not in work:
                    continue
                node = work[node_id]
                count = node.number_of_assignments - 1
                node = NUMANodeState(count, node.memory_map, (node_id,) if count == 0 else node.cells)
                table = node.table(block.type)
                if released and table is not None and table.reserved:
                    give = min(table.reserved, released)
                    node = node.with_table(block.type, MemoryTable(table.total, table.system_reserved, table.allocatable,
                                                                   table.reserved - give, table.free + give))
                    released -= give
                work[node_id] = node
        self._state = work

    def holds(self, uid: str) -> bool:
        """Whether the pod with this UID holds memory blocks here (its containers' or reusable ones)."""
        return uid in self._assignments or uid in self._reusable

    def release(self, pod: Pod | str) -> None:
        """Remove every container of a pod (a :class:`Pod` or its UID), init containers first.

        The pod's leftover init-container memory is forgotten too: upstream only drops it when
        another pod allocates, which is the same for real (never reused) UIDs, but a pod filed
        under ``namespace/name`` may come back under the same key.
        """
        uid = pod if isinstance(pod, str) else self.pod_uid(pod)
        order = [] if isinstance(pod, str) else [c.name for c in pod.all_containers]
        for name in order + sorted(set(self._assignments.get(uid, {})) - set(order)):
            self.remove_container(uid, name)
        self._assignments.pop(uid, None)
        self._reusable.pop(uid, None)
