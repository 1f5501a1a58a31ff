"""The kubelet CPU manager's static policy: upstream ``policy_static.go`` and ``policy_options.go``.

The static policy gives a container exclusive CPUs when its pod is Guaranteed and the
container's CPU request is a whole number; every other container runs on the shared pool (the
"default cpuset"). The policy keeps:

* RESERVED: CPUs never given exclusively (``reservedSystemCPUs``, or the given number of CPUs
  taken with takeByTopology from the whole machine, lowest cores first);
* the default cpuset: the shared pool, all CPUs at start (minus the reserved ones with
  ``strict-cpu-reservation``), shrinking as exclusive allocations are made;
* assignments: pod UID -> container name -> exclusive CPUs;
* CPUs an init container held, which the next containers of the same pod may reuse
  (upstream ``cpusToReuse``; sidecars keep theirs).

Allocation follows upstream ``allocateCPUs``: the CPUs of the NUMA nodes of the Topology
Manager's hint first (of the hint's sockets with ``align-by-socket``), then the rest from
anywhere, both picked with :func:`~toposched.kubelet.cpu_assignment.take_by_topology` under the
policy's options. ``full-pcpus-only`` refuses requests that are not whole cores with upstream's
:class:`SMTAlignmentError`. Topology hints follow ``generateCPUTopologyHints``.

The policy is a Topology Manager hint provider (``get_topology_hints``,
``get_pod_topology_hints``, ``allocate``); it reads the chosen hint from an ``affinity`` store
with ``get_affinity(pod, container_name)`` such as :class:`~toposched.kubelet.TopologyManager`,
or takes the hint as an argument. Pods are keyed by UID (``namespace/name`` without one).
"""

from __future__ import annotations

import weakref
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from toposched.errors import InputError, ToposchedError
from toposched.kubelet.cpu_assignment import (
    STRATEGY_PACKED,
    STRATEGY_SPREAD,
    CPUAllocationError,
    CPUTopology,
    take_by_topology,
)
from toposched.kubelet.cpu_state import CPUManagerCheckpoint
from toposched.kubelet.hint_arrays import MaskHintArray, position_of, subset_widths
from toposched.kubelet.hints import TopologyHint, iterate_masks
from toposched.kubelet.topology_manager import numa_subsets, subset_arrays_apply, subset_sums, subset_sums_array
from toposched.names import SMT_ALIGNMENT_ERROR
from toposched.topology import CPUSet, Machine

if TYPE_CHECKING:
    from toposched.workload import Container, Pod

__all__ = [
    "CPUState",
    "SMTAlignmentError",
    "StaticCPUPolicy",
    "StaticPolicyOptions",
    "cpu_topology_hints",
    "guaranteed_cpus",
    "parse_static_policy_options",
    "pod_guaranteed_cpus",
]

FULL_PCPUS_ONLY = "full-pcpus-only"
DISTRIBUTE_CPUS_ACROSS_NUMA = "distribute-cpus-across-numa"
ALIGN_BY_SOCKET = "align-by-socket"
DISTRIBUTE_CPUS_ACROSS_CORES = "distribute-cpus-across-cores"
STRICT_CPU_RESERVATION = "strict-cpu-reservation"
PREFER_ALIGN_BY_UNCORE_CACHE = "prefer-align-cpus-by-uncorecache"

_ALPHA_OPTIONS = frozenset({ALIGN_BY_SOCKET, DISTRIBUTE_CPUS_ACROSS_CORES})
_BETA_OPTIONS = frozenset({STRICT_CPU_RESERVATION, DISTRIBUTE_CPUS_ACROSS_NUMA, PREFER_ALIGN_BY_UNCORE_CACHE})
_STABLE_OPTIONS = frozenset({FULL_PCPUS_ONLY})

# strconv.ParseBool
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_NO_CPUS = CPUSet()
_FIELD = "cpuManagerPolicyOptions"


def guaranteed_cpus(pod: Pod, container: Container) -> int:
    """Exclusive CPUs the static policy gives a container (upstream ``guaranteedCPUs``).

    Its CPU request in whole CPUs when the pod is Guaranteed and the request is a whole number,
    else 0. The scheduler reads the same answer (one source of truth for who gets exclusive CPUs).
    """
    if pod.qos_class != "Guaranteed":
        return 0
    return _whole_cpus(container)


def _whole_cpus(container: Container) -> int:
    milli = container.requests.get("cpu", 0)
    if milli % 1000:
        return 0
    return milli // 1000


def pod_guaranteed_cpus(pod: Pod) -> int:
    """Exclusive CPUs the pod needs at its peak (upstream ``podGuaranteedCPUs``, sidecars included)."""
    if pod.qos_class != "Guaranteed":
        return 0  # no container of the pod gets exclusive CPUs
    by_init = 0
    by_sidecars = 0
    for c in pod.init_containers:
        if "cpu" not in c.requests:
            continue
        requested = _whole_cpus(c)
        if c.is_sidecar:
            by_sidecars += requested
        elif by_sidecars + requested > by_init:
            by_init = by_sidecars + requested
    by_apps = sum(_whole_cpus(c) for c in pod.containers if "cpu" in c.requests)
    return max(by_init, by_apps + by_sidecars)


class SMTAlignmentError(ToposchedError):
    """``full-pcpus-only`` refused a request (upstream ``SMTAlignmentError``; ``reason`` is its type)."""

    reason = SMT_ALIGNMENT_ERROR

    def __init__(self, requested: int, cpus_per_core: int, available_physical: int = 0, caused_by_physical: bool = False):
        if caused_by_physical:
            message = (
                "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = "
                f"{available_physical}, requested CPUs = {requested}, CPUs per core = {cpus_per_core}"
            )
        else:
            message = f"SMT Alignment Error: requested {requested} cpus not multiple cpus per core = {cpus_per_core}"
        super().__init__(message)
        self.message = message
        self.requested = requested
        self.cpus_per_core = cpus_per_core
        self.available_physical = available_physical
        self.caused_by_physical = caused_by_physical


@dataclass(frozen=True, slots=True)
class StaticPolicyOptions:
    """The parsed ``cpuManagerPolicyOptions`` (upstream ``StaticPolicyOptions``)."""

    full_pcpus_only: bool = False
    distribute_cpus_across_numa: bool = False
    align_by_socket: bool = False
    distribute_cpus_across_cores: bool = False
    strict_cpu_reservation: bool = False
    prefer_align_cpus_by_uncorecache: bool = False


_OPTION_FIELDS = {
    FULL_PCPUS_ONLY: "full_pcpus_only",
    DISTRIBUTE_CPUS_ACROSS_NUMA: "distribute_cpus_across_numa",
    ALIGN_BY_SOCKET: "align_by_socket",
    DISTRIBUTE_CPUS_ACROSS_CORES: "distribute_cpus_across_cores",
    STRICT_CPU_RESERVATION: "strict_cpu_reservation",
    PREFER_ALIGN_BY_UNCORE_CACHE: "prefer_align_cpus_by_uncorecache",
}

# Pairs of options upstream refuses together, in the order it checks them.
_EXCLUSIVE = (
    (FULL_PCPUS_ONLY, DISTRIBUTE_CPUS_ACROSS_CORES),
    (DISTRIBUTE_CPUS_ACROSS_NUMA, DISTRIBUTE_CPUS_ACROSS_CORES),
    (PREFER_ALIGN_BY_UNCORE_CACHE, DISTRIBUTE_CPUS_ACROSS_CORES),
    (PREFER_ALIGN_BY_UNCORE_CACHE, DISTRIBUTE_CPUS_ACROSS_NUMA),
)


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    raise InputError(f'bad value for option "{name}": strconv.ParseBool: parsing {str(value)!r}: invalid syntax',
                     field=f"{_FIELD}.{name}")


def parse_static_policy_options(
    options: Mapping[str, Any] | StaticPolicyOptions | None,
    *,
    alpha_options: bool = True,
    beta_options: bool = True,
) -> StaticPolicyOptions:
    """Upstream ``NewStaticPolicyOptions``: names checked, values parsed as Go booleans, conflicts refused.

    ``alpha_options``/``beta_options`` are the ``CPUManagerPolicyAlphaOptions`` and
    ``CPUManagerPolicyBetaOptions`` feature gates (both on here by default; upstream's kubelet
    defaults the alpha gate to off). Raises one :class:`InputError` with upstream's message.
    """
    if isinstance(options, StaticPolicyOptions):
        return options
    if options is None:
        return StaticPolicyOptions()
    if not isinstance(options, Mapping):
        raise InputError(f"expected a mapping of option names to values, got {type(options).__name__}", field=_FIELD)
    values: dict[str, bool] = {}
    for name in sorted(options):
        if name not in _ALPHA_OPTIONS | _BETA_OPTIONS | _STABLE_OPTIONS:
            raise InputError(f'unknown CPU Manager Policy option: "{name}"', field=f"{_FIELD}.{name}")
        if name in _ALPHA_OPTIONS and not alpha_options:
            raise InputError(f'CPU Manager Policy Alpha-level Options not enabled, but option "{name}" provided',
                             field=f"{_FIELD}.{name}")
        if name in _BETA_OPTIONS and not beta_options:
            raise InputError(f'CPU Manager Policy Beta-level Options not enabled, but option "{name}" provided',
                             field=f"{_FIELD}.{name}")
        values[_OPTION_FIELDS[name]] = _parse_bool(name, options[name])
    parsed = StaticPolicyOptions(**values)
    for first, second in _EXCLUSIVE:
        if getattr(parsed, _OPTION_FIELDS[first]) and getattr(parsed, _OPTION_FIELDS[second]):
            raise InputError(f"static policy options {first} and {second} can not be used at the same time",
                             field=_FIELD)
    return parsed


def _validate_options(opts: StaticPolicyOptions, topo: CPUTopology, topology_manager_policy: str) -> None:
    """Upstream ``ValidateStaticPolicyOptions``."""
    if not opts.align_by_socket:
        return
    if topology_manager_policy == "single-numa-node":
        raise InputError(
            f"Topolgy manager single-numa-node policy is incompatible with CPUManager {ALIGN_BY_SOCKET} policy option",
            field=_FIELD)
    if topo.num_sockets > topo.num_numa:
        raise InputError(
            "Align by socket is not compatible with hardware where number of sockets are more than number of NUMA",
            field=_FIELD)


# ---- topology hints ------------------------------------------------------------------------------


def _check_cpus(topo: CPUTopology, cpus: CPUSet, what: str) -> None:
    if not isinstance(cpus, CPUSet):
        raise InputError(f"expected a CPUSet, got {type(cpus).__name__}", field=what)
    stray = cpus.mask & ~topo.all_mask
    if stray:
        raise InputError(f"the machine has no online CPUs {CPUSet.from_mask(stray)}", field=what)


def _hint_socket_aligned(topo: CPUTopology, numa_nodes: frozenset[int], min_affinity: int) -> bool:
    """Upstream ``isHintSocketAligned``."""
    per_socket = topo.num_numa // topo.num_sockets if topo.num_sockets else 0
    if per_socket == 0:
        return False
    min_sockets = (min_affinity + per_socket - 1) // per_socket
    return len(topo.sockets_in_numa(numa_nodes)) == min_sockets


def _generate_hints(
    topo: CPUTopology, available: CPUSet, reusable: CPUSet, request: int, align_by_socket: bool
) -> list[TopologyHint]:
    """Upstream ``generateCPUTopologyHints``: every NUMA set that fits, the narrowest preferred."""
    numa_ids = sorted(topo.numa_masks)
    min_affinity = len(numa_ids)
    hints: list[frozenset[int]] = []
    reusable_numas = {topo.cpu_numa[c] for c in reusable}
    for mask in iterate_masks(numa_ids):
        numa_cpus = topo.cpus_in_numa(mask)
        if numa_cpus.bit_count() >= request and len(mask) < min_affinity:
            min_affinity = len(mask)
        if not reusable_numas <= mask:
            continue
        # Upstream counts reusable and available CPUs separately (a CPU in both counts twice).
        matching = len(reusable) + (available.mask & numa_cpus).bit_count()
        if matching < request:
            continue
        hints.append(mask)
    return [
        TopologyHint(
            mask,
            (align_by_socket and _hint_socket_aligned(topo, mask, min_affinity)) or len(mask) == min_affinity,
        )
        for mask in hints
    ]


# ---- the same hints on int masks (KubeletNode's admission path) -----------------------------------

MaskHint = tuple[int, bool]
"""A hint as ``(NUMA mask, preferred)``: bit n of the mask stands for NUMA node n."""


@dataclass(frozen=True, slots=True)
class _NUMASets:
    """What one machine's hints read of its NUMA nodes (those with CPUs), computed once.

    ``ids`` are the nodes in ascending order (their sets come from the shared
    :func:`~toposched.kubelet.topology_manager.numa_subsets` table), ``singles`` the ``(NUMA
    mask, CPU mask, socket mask)`` of each node, ``largest_first`` the running sums of the
    nodes' CPU counts, biggest node first: the narrowest set that could ever hold ``n`` CPUs is
    as wide as the shortest prefix reaching ``n``, which is upstream's ``minAffinitySize``
    without visiting every set.
    """

    ids: tuple[int, ...]
    singles: tuple[tuple[int, int, int], ...]
    largest_first: tuple[int, ...]
    numa_per_socket: int

    def min_affinity(self, request: int) -> int:
        """Upstream's ``minAffinitySize``: the fewest NUMA nodes whose CPUs could hold ``request``."""
        width = len(self.largest_first)
        return min(bisect_left(self.largest_first, request) + 1, width)

    def socket_aligned(self, sockets: int, min_affinity: int) -> bool:
        """Upstream ``isHintSocketAligned`` for a set spanning ``sockets`` sockets."""
        per_socket = self.numa_per_socket
        if per_socket == 0:
            return False
        return sockets == (min_affinity + per_socket - 1) // per_socket


_NUMA_SETS: weakref.WeakKeyDictionary[CPUTopology, _NUMASets] = weakref.WeakKeyDictionary()


def _numa_sets(topo: CPUTopology) -> _NUMASets:
    known = _NUMA_SETS.get(topo)
    if known is None:
        ids = tuple(sorted(topo.numa_masks))
        running, total = [], 0
        for count in sorted((m.bit_count() for m in topo.numa_masks.values()), reverse=True):
            total += count
            running.append(total)
        singles = []
        for n in ids:
            sockets = 0
            for socket in topo.sockets_of_numa.get(n, ()):
                sockets |= 1 << socket
            singles.append((1 << n, topo.numa_masks[n], sockets))
        known = _NUMA_SETS[topo] = _NUMASets(
            ids=ids,
            singles=tuple(singles),
            largest_first=tuple(running),
            numa_per_socket=topo.num_numa // topo.num_sockets if topo.num_sockets else 0,
        )
    return known


def _mask_hints(
    topo: CPUTopology, available: int, reusable: int, request: int, align_by_socket: bool, single_numa_only: bool
) -> list[MaskHint] | MaskHintArray:
    """:func:`_generate_hints` on int masks, with the per-machine work done once.

    The available CPUs of each set are summed from per-node counts for all sets at once. With
    ``single_numa_only`` only the hints upstream's ``filterSingleNumaHints`` keeps are
    returned: preferred ones one NUMA node wide, their flags computed as for the full list.
    """
    sets = _numa_sets(topo)
    if not sets.ids:
        return []
    min_affinity = sets.min_affinity(request)
    need = request - reusable.bit_count()  # reusable CPUs count once each, inside every set they fit
    reusable_numas = 0
    if reusable:
        for numa, cpus, _ in sets.singles:
            if reusable & cpus:
                reusable_numas |= numa
    if single_numa_only:
        return [
            (numa, True)
            for numa, cpus, sockets in sets.singles
            if (min_affinity == 1 or (align_by_socket and sets.socket_aligned(sockets.bit_count(), min_affinity)))
            and not reusable_numas & ~numa
            and (available & cpus).bit_count() >= need
        ]
    counts = [(available & cpus).bit_count() for _, cpus, _ in sets.singles]
    if subset_arrays_apply(sets.ids) and not any(sockets >> 62 for _, _, sockets in sets.singles):
        return _mask_hints_from_arrays(sets, counts, need, reusable_numas, min_affinity, align_by_socket)
    free = subset_sums(counts)
    subsets = numa_subsets(sets.ids)
    if not align_by_socket:
        return [
            (numa, width == min_affinity)
            for positions, numa, width in subsets
            if free[positions] >= need and not reusable_numas & ~numa
        ]
    spanned = [0]  # spanned[positions]: the sockets of that set, as a mask
    for _, _, sockets in sets.singles:
        spanned += [s | sockets for s in spanned]
    return [
        (numa, width == min_affinity or sets.socket_aligned(spanned[positions].bit_count(), min_affinity))
        for positions, numa, width in subsets
        if free[positions] >= need and not reusable_numas & ~numa
    ]


def _mask_hints_from_arrays(sets: _NUMASets, counts: list[int], need: int, reusable_numas: int, min_affinity: int,
                            align_by_socket: bool) -> MaskHintArray:
    """:func:`_mask_hints`' full list in NumPy, for machines with many NUMA nodes: the same hints,
    held as one flag per subset of the NUMA nodes (read as a list, in the same order)."""
    n = len(sets.ids)
    free = subset_sums_array(counts)  # per position
    assert free is not None  # CPU counts
    valid = free >= need  # not the empty set: need > 0 = its count, unless reusable CPUs pin a node below
    if reusable_numas:
        reusable = position_of(reusable_numas, sets.ids)
        valid &= (np.arange(1 << n, dtype=np.int64) & reusable) == reusable
    widths = subset_widths(n)
    preferred = valid & (widths == min_affinity)
    if align_by_socket:
        spanned = np.zeros(1 << n, dtype=np.int64)  # per position: the sockets of that set, as a mask
        for i, (_, _, sockets) in enumerate(sets.singles):
            spanned[1 << i:2 << i] = spanned[:1 << i] | sockets
        for value in np.unique(spanned[valid]).tolist():
            if sets.socket_aligned(value.bit_count(), min_affinity):
                preferred |= valid & (spanned == value)
    return MaskHintArray(sets.ids, valid, preferred)


def cpu_topology_hints(
    machine: Machine | CPUTopology,
    available: CPUSet,
    count: int,
    *,
    reusable: CPUSet = CPUSet(),
    allocated: CPUSet | None = None,
    options: Mapping[str, Any] | StaticPolicyOptions | None = None,
) -> list[TopologyHint] | None:
    """The static policy's CPU hints for a request of ``count`` CPUs (upstream ``generateCPUTopologyHints``).

    One hint per set of NUMA nodes (those with CPUs) whose ``available`` CPUs plus the
    ``reusable`` ones (an init container's, all inside the set) can hold the request; a hint is
    preferred when its size is the smallest that could ever hold the request on this machine
    (or, with ``align-by-socket``, when it spans the fewest sockets possible). ``allocated`` is
    the CPUs the container already holds (after a kubelet restart): the hints are rebuilt from
    them, or ``[]`` (no possible affinity) when their number differs from ``count``. A count of
    0 gives ``None``: the container has no preference.
    """
    topo = machine if isinstance(machine, CPUTopology) else CPUTopology.of(machine)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InputError(f"{count!r} is not a non-negative CPU count", field="count")
    opts = parse_static_policy_options(options)
    _check_cpus(topo, available, "available")
    _check_cpus(topo, reusable, "reusable")
    if count == 0:
        return None
    if allocated is not None:
        _check_cpus(topo, allocated, "allocated")
        if len(allocated) != count:
            return []
        return _generate_hints(topo, allocated, CPUSet(), count, opts.align_by_socket)
    return _generate_hints(topo, available, reusable, count, opts.align_by_socket)


# ---- state -----------------------------------------------------------------------------------------


def _freeze(assignments: Mapping[str, Mapping[str, CPUSet]]) -> Mapping[str, Mapping[str, CPUSet]]:
    return MappingProxyType(
        {pod: MappingProxyType(dict(containers)) for pod, containers in assignments.items() if containers}
    )


@dataclass(frozen=True, slots=True)
class CPUState:
    """The CPU manager's state: the shared pool (default cpuset) and the exclusive assignments.

    ``assignments`` maps pod UID -> container name -> CPUs. Equal snapshots mean equal state.
    """

    default_cpuset: CPUSet = CPUSet()
    assignments: Mapping[str, Mapping[str, CPUSet]] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not isinstance(self.default_cpuset, CPUSet):
            raise InputError("the default cpuset must be a CPUSet", field="defaultCpuSet")
        for pod, containers in self.assignments.items():
            for name, cpus in containers.items():
                if not isinstance(cpus, CPUSet):
                    raise InputError("an assignment must be a CPUSet", field=f"entries.{pod}.{name}")
        object.__setattr__(self, "assignments", _freeze(self.assignments))

    def get(self, pod_uid: str, container: str) -> CPUSet | None:
        """The container's exclusive CPUs, ``None`` when it has none."""
        return self.assignments.get(pod_uid, _EMPTY).get(container)

    def assigned(self) -> CPUSet:
        """Every CPU some container holds exclusively."""
        mask = 0
        for containers in self.assignments.values():
            for cpus in containers.values():
                mask |= cpus.mask
        return CPUSet.from_mask(mask)

    @classmethod
    def _of(cls, default: CPUSet, assignments: Mapping[str, Mapping[str, CPUSet]]) -> CPUState:
        # A state from parts that are already checked and frozen (no pod without containers):
        # the derived states below share what did not change instead of copying every pod.
        state = object.__new__(cls)
        object.__setattr__(state, "default_cpuset", default)
        object.__setattr__(state, "assignments", assignments)
        return state

    def with_default(self, default: CPUSet) -> CPUState:
        """This state with another shared pool."""
        if not isinstance(default, CPUSet):
            raise InputError("the default cpuset must be a CPUSet", field="defaultCpuSet")
        return CPUState._of(default, self.assignments)

    def with_assignment(self, pod_uid: str, container: str, cpus: CPUSet) -> CPUState:
        """This state with the container holding ``cpus``."""
        if not isinstance(cpus, CPUSet):
            raise InputError("an assignment must be a CPUSet", field=f"entries.{pod_uid}.{container}")
        containers = dict(self.assignments.get(pod_uid, _EMPTY))
        containers[container] = cpus
        assignments = dict(self.assignments)
        assignments[pod_uid] = MappingProxyType(containers)
        return CPUState._of(self.default_cpuset, MappingProxyType(assignments))

    def without(self, pod_uid: str, container: str) -> CPUState:
        """This state without the container's assignment."""
        containers = self.assignments.get(pod_uid, _EMPTY)
        if container not in containers:
            return self
        rest = dict(containers)
        del rest[container]
        assignments = dict(self.assignments)
        if rest:
            assignments[pod_uid] = MappingProxyType(rest)
        else:
            del assignments[pod_uid]
        return CPUState._of(self.default_cpuset, MappingProxyType(assignments))

    def to_checkpoint(self, policy_name: str = "static") -> CPUManagerCheckpoint:
        """The ``cpu_manager_state`` content the kubelet would write for this state."""
        return CPUManagerCheckpoint(policy_name, self.default_cpuset, self.assignments)

    @classmethod
    def from_checkpoint(cls, checkpoint: CPUManagerCheckpoint) -> CPUState:
        """The state recorded in a ``cpu_manager_state`` checkpoint."""
        return cls(checkpoint.default_cpuset, checkpoint.entries)


# ---- the policy -----------------------------------------------------------------------------------


class AffinityStore(Protocol):
    """Where the chosen Topology Manager hint of a container is kept (upstream ``topologymanager.Store``)."""

    def get_affinity(self, pod: Pod | str, container_name: str) -> TopologyHint:
        """The hint chosen for the container."""
        ...


def _pod_uid(pod: Pod | str) -> str:
    if isinstance(pod, str):
        return pod
    return pod.uid or pod.key


def _parse_cpuset(text: str, what: str) -> CPUSet:
    try:
        return CPUSet.parse(text)
    except InputError as err:
        raise InputError(err.message, field=what) from None


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# The hints of a container come from (available CPUs, reusable CPUs, request), or there is no affinity.
_NO_AFFINITY = ()
_HintInputs = tuple[CPUSet, CPUSet, int] | tuple[()]


class StaticCPUPolicy:
    """The static CPU manager policy of one node; see the module notes.

    ``reserved_cpus`` is ``reservedSystemCPUs`` (a CPUSet or its list syntax; an int is read as
    ``num_reserved``); without it ``num_reserved`` CPUs are taken with takeByTopology from the
    whole machine (upstream's ``kube-reserved + system-reserved`` rounded up). When both are
    given their sizes must agree, as upstream checks. ``options`` are ``cpuManagerPolicyOptions``;
    ``topology_manager_policy`` is checked against ``align-by-socket``. ``state`` restores a
    previous state (e.g. from a checkpoint); it is validated as upstream's ``Start`` does unless
    ``validate_state=False``. Every operation either completes or raises and leaves the state as
    it was.
    """

    name = "static"

    def __init__(
        self,
        machine: Machine,
        *,
        reserved_cpus: CPUSet | int | str | None = None,
        num_reserved: int | None = None,
        options: Mapping[str, Any] | StaticPolicyOptions | None = None,
        topology_manager_policy: str = "none",
        affinity: AffinityStore | None = None,
        state: CPUState | None = None,
        validate_state: bool = True,
        alpha_options: bool = True,
        beta_options: bool = True,
    ) -> None:
        if not isinstance(machine, Machine):
            raise InputError(f"expected a Machine, got {type(machine).__name__}", field="machine")
        self.machine = machine
        self.topology = CPUTopology.of(machine)
        self.options = parse_static_policy_options(options, alpha_options=alpha_options, beta_options=beta_options)
        _validate_options(self.options, self.topology, topology_manager_policy)
        self.cpu_group_size = self.topology.cpus_per_core or 1  # a machine without CPUs has no cores
        self.affinity = affinity
        self._cpus_to_reuse: dict[str, CPUSet] = {}
        self._last_pod: Pod | None = None
        self._last_guaranteed = False

        all_cpus = CPUSet.from_mask(self.topology.all_mask)
        if isinstance(reserved_cpus, int) and not isinstance(reserved_cpus, bool):
            if num_reserved is not None and num_reserved != reserved_cpus:
                raise InputError(f"reserved_cpus={reserved_cpus} and num_reserved={num_reserved} disagree",
                                 field="num_reserved")
            reserved_cpus, num_reserved = None, reserved_cpus
        elif isinstance(reserved_cpus, str):
            reserved_cpus = _parse_cpuset(reserved_cpus, "reservedSystemCPUs")
        if reserved_cpus is not None:
            _check_cpus(self.topology, reserved_cpus, "reservedSystemCPUs")
        if num_reserved is None:
            num_reserved = len(reserved_cpus) if reserved_cpus is not None else 0
        if isinstance(num_reserved, bool) or not isinstance(num_reserved, int) or num_reserved < 0:
            raise InputError(f"{num_reserved!r} is not a non-negative CPU count", field="num_reserved")
        if reserved_cpus:
            reserved = reserved_cpus
        else:
            try:
                reserved = self._take(all_cpus, num_reserved)
            except CPUAllocationError:
                reserved = CPUSet()
        if len(reserved) != num_reserved:
            raise InputError(
                f"[cpumanager] unable to reserve the required amount of CPUs (size of {reserved} did not equal "
                f"{num_reserved})", field="reservedSystemCPUs")
        physical = 0
        for cpu in reserved:
            physical |= self.topology.core_masks[self.topology.cpu_core[cpu]]
        self.reserved_cpus = reserved
        self.reserved_physical_cpus = CPUSet.from_mask(physical)
        self._state = CPUState()
        self.start(state if state is not None else CPUState(), validate=validate_state)

    # ---- state

    @property
    def state(self) -> CPUState:
        """A snapshot of the whole state."""
        return self._state

    @property
    def default_cpuset(self) -> CPUSet:
        """The shared pool: where every non-exclusive container runs."""
        return self._state.default_cpuset

    shared_pool = default_cpuset

    def start(self, state: CPUState, *, validate: bool = True) -> None:
        """Adopt ``state`` as upstream ``Start`` does: an empty state becomes the initial one.

        With ``validate`` the state is checked as upstream ``validateState`` (reserved CPUs in
        the shared pool, no assignment overlapping it, every CPU of the machine accounted for)
        and an :class:`InputError` with upstream's message leaves the policy unchanged.
        """
        if not isinstance(state, CPUState):
            raise InputError(f"expected a CPUState, got {type(state).__name__}", field="state")
        if validate:
            state = self._validated(state)
        self._state = state

    def restore(self, state: CPUState) -> None:
        """Put back a snapshot taken from :attr:`state` (no validation)."""
        self.start(state, validate=False)

    def _validated(self, state: CPUState) -> CPUState:
        all_cpus = CPUSet.from_mask(self.topology.all_mask)
        if self.options.strict_cpu_reservation:
            all_cpus = all_cpus - self.reserved_cpus
        default = state.default_cpuset
        if not default:
            if state.assignments:
                raise InputError("default cpuset cannot be empty", field="defaultCpuSet")
            return CPUState(all_cpus)
        if self.options.strict_cpu_reservation:
            overlap = self.reserved_cpus & default
            if overlap:
                raise InputError(f"some of strictly reserved cpus: {_go_quote(str(overlap))} are present in "
                                 f"defaultCpuSet: {_go_quote(str(default))}", field="defaultCpuSet")
        elif self.reserved_cpus & default != self.reserved_cpus:
            raise InputError(f"not all reserved cpus: {_go_quote(str(self.reserved_cpus))} are present in "
                             f"defaultCpuSet: {_go_quote(str(default))}", field="defaultCpuSet")
        for pod in sorted(state.assignments):
            for name in sorted(state.assignments[pod]):
                cpus = state.assignments[pod][name]
                if default & cpus:
                    raise InputError(f"pod: {pod}, container: {name} cpuset: {_go_quote(str(cpus))} overlaps with "
                                     f"default cpuset {_go_quote(str(default))}", field=f"entries.{pod}.{name}")
        known = default | state.assigned()
        if known != all_cpus:
            raise InputError(f"current set of available CPUs {_go_quote(str(all_cpus))} doesn't match with CPUs in "
                             f"state {_go_quote(str(known))}", field="entries")
        return state

    def available_cpus(self) -> CPUSet:
        """Free CPUs exclusive allocations may take: the shared pool minus the reserved CPUs."""
        return self._state.default_cpuset - self.reserved_cpus

    def allocatable_cpus(self) -> CPUSet:
        """Every CPU that may ever be allocated exclusively: the machine minus the reserved CPUs."""
        return CPUSet.from_mask(self.topology.all_mask) - self.reserved_cpus

    def available_physical_cpus(self) -> CPUSet:
        """The shared pool minus every core holding a reserved CPU (what ``full-pcpus-only`` counts)."""
        return self._state.default_cpuset - self.reserved_physical_cpus

    def cpus_to_reuse(self, pod: Pod | str) -> CPUSet:
        """CPUs of the pod's init containers its next containers may take again."""
        return self._cpus_to_reuse.get(_pod_uid(pod), _NO_CPUS)

    def container_cpuset(self, pod: Pod | str, container: Container | str) -> CPUSet:
        """The CPUs the container runs on: its exclusive CPUs, otherwise the shared pool."""
        name = container if isinstance(container, str) else container.name
        cpus = self._state.get(_pod_uid(pod), name)
        return cpus if cpus is not None else self._state.default_cpuset

    def to_checkpoint(self) -> CPUManagerCheckpoint:
        """The ``cpu_manager_state`` the kubelet would write now."""
        return self._state.to_checkpoint(self.name)

    # ---- which containers get exclusive CPUs

    def guaranteed_cpus(self, pod: Pod, container: Container) -> int:
        """Exclusive CPUs the container gets: its CPU request when the pod is Guaranteed and it is whole, else 0."""
        # An admission asks for every container of one pod several times; pods are immutable,
        # so the QoS class of the last pod asked about is kept.
        if pod is not self._last_pod:
            self._last_pod, self._last_guaranteed = pod, pod.qos_class == "Guaranteed"
        return _whole_cpus(container) if self._last_guaranteed else 0

    def pod_guaranteed_cpus(self, pod: Pod) -> int:
        """Exclusive CPUs the pod needs at its peak (upstream ``podGuaranteedCPUs``, sidecars included)."""
        return pod_guaranteed_cpus(pod)

    # ---- hints

    def _hints(self, inputs: _HintInputs) -> list[TopologyHint]:
        if not inputs:
            return []
        available, reusable, request = inputs
        return _generate_hints(self.topology, available, reusable, request, self.options.align_by_socket)

    def _masks(self, inputs: _HintInputs, single_numa_only: bool) -> list[MaskHint]:
        if not inputs:
            return []
        available, reusable, request = inputs
        return _mask_hints(
            self.topology, available.mask, reusable.mask, request, self.options.align_by_socket, single_numa_only
        )

    def _container_hint_inputs(self, pod: Pod, container: Container) -> _HintInputs | None:
        """What upstream ``GetTopologyHints`` generates hints from: None (shared), no affinity, or the CPUs."""
        requested = self.guaranteed_cpus(pod, container)
        if requested == 0:
            return None
        allocated = self._state.get(_pod_uid(pod), container.name)
        if allocated is not None:
            if len(allocated) != requested:
                return _NO_AFFINITY
            return allocated, CPUSet(), requested
        return self.available_cpus(), self.cpus_to_reuse(pod), requested

    def _pod_hint_inputs(self, pod: Pod) -> _HintInputs | None:
        """What upstream ``GetPodTopologyHints`` generates hints from."""
        requested = self.pod_guaranteed_cpus(pod)
        if requested == 0:
            return None
        uid = _pod_uid(pod)
        assigned = 0
        for c in pod.all_containers:
            allocated = self._state.get(uid, c.name)
            if allocated is None:
                continue
            if len(allocated) != self.guaranteed_cpus(pod, c):
                return _NO_AFFINITY
            assigned |= allocated.mask
        assigned_cpus = CPUSet.from_mask(assigned)
        if len(assigned_cpus) == requested:
            return assigned_cpus, CPUSet(), requested
        return self.available_cpus(), self.cpus_to_reuse(uid) | assigned_cpus, requested

    def get_topology_hints(self, pod: Pod, container: Container) -> dict[str, list[TopologyHint]] | None:
        """Upstream ``GetTopologyHints``: ``None`` for a shared container, else ``{"cpu": hints}``."""
        inputs = self._container_hint_inputs(pod, container)
        return None if inputs is None else {"cpu": self._hints(inputs)}

    def get_pod_topology_hints(self, pod: Pod) -> dict[str, list[TopologyHint]] | None:
        """Upstream ``GetPodTopologyHints``: hints for the pod's peak exclusive CPUs (pod scope)."""
        inputs = self._pod_hint_inputs(pod)
        return None if inputs is None else {"cpu": self._hints(inputs)}

    def topology_masks(
        self, pod: Pod, container: Container, *, single_numa_only: bool = False
    ) -> dict[str, Sequence[MaskHint]] | None:
        """:meth:`get_topology_hints` as ``(NUMA mask, preferred)`` pairs, computed without visiting CPU sets.

        The same hints in the same order. With ``single_numa_only`` only those upstream's
        single-numa-node policy keeps (preferred, one NUMA node wide) are listed, so a merge
        under that policy decides exactly as on the full list.
        """
        inputs = self._container_hint_inputs(pod, container)
        return None if inputs is None else {"cpu": self._masks(inputs, single_numa_only)}

    def pod_topology_masks(self, pod: Pod, *, single_numa_only: bool = False) -> dict[str, Sequence[MaskHint]] | None:
        """:meth:`get_pod_topology_hints` as ``(NUMA mask, preferred)`` pairs (see :meth:`topology_masks`)."""
        inputs = self._pod_hint_inputs(pod)
        return None if inputs is None else {"cpu": self._masks(inputs, single_numa_only)}

    # ---- allocation and release

    def _take(self, available: CPUSet, count: int) -> CPUSet:
        """Upstream ``staticPolicy.takeByTopology``: the options decide the algorithm."""
        strategy = STRATEGY_SPREAD if self.options.distribute_cpus_across_cores else STRATEGY_PACKED
        if self.options.distribute_cpus_across_numa:
            group = self.cpu_group_size if self.options.full_pcpus_only else 1
            return take_by_topology(self.topology, available, count, strategy=strategy, distribute=True,
                                    cpu_group_size=group, align_by_socket=self.options.align_by_socket)
        return take_by_topology(self.topology, available, count, strategy=strategy,
                                prefer_uncore_cache=self.options.prefer_align_cpus_by_uncorecache)

    def _enforce_smt_alignment(self, count: int) -> None:
        if not self.options.full_pcpus_only:
            return
        if count % self.cpu_group_size:
            raise SMTAlignmentError(count, self.cpu_group_size)
        physical = len(self.available_physical_cpus())
        if count > physical:
            raise SMTAlignmentError(count, self.cpu_group_size, physical, caused_by_physical=True)

    def _aligned_cpus(self, numa_nodes: frozenset[int], allocatable: CPUSet) -> CPUSet:
        """Upstream ``getAlignedCPUs``: the hint's NUMA nodes, or their whole sockets with align-by-socket."""
        topo = self.topology
        mask = 0
        if self.options.align_by_socket:
            for socket in topo.sockets_in_numa(numa_nodes):
                mask |= topo.socket_masks[socket]
        else:
            mask = topo.cpus_in_numa(numa_nodes)
        return CPUSet.from_mask(allocatable.mask & mask)

    def allocate_cpus(self, count: int, numa_nodes: Iterable[int] | None, reusable: CPUSet = CPUSet()) -> CPUSet:
        """Upstream ``allocateCPUs``: take ``count`` CPUs, the hint's NUMA nodes first, and shrink the shared pool.

        ``numa_nodes`` ``None`` is a hint without affinity. Raises
        :class:`~toposched.kubelet.cpu_assignment.CPUAllocationError` (state unchanged) when the
        CPUs are not there.
        """
        allocatable = self.available_cpus() | reusable
        result = CPUSet()
        if numa_nodes is not None:
            aligned = self._aligned_cpus(self._check_numa(numa_nodes), allocatable)
            result = self._take(aligned, min(count, len(aligned)))
        if len(result) != count:  # taking no more CPUs always gives the empty set
            result = result | self._take(allocatable - result, count - len(result))
        self._state = self._state.with_default(self._state.default_cpuset - result)
        return result

    def _check_numa(self, numa_nodes: Iterable[int]) -> frozenset[int]:
        nodes = frozenset(numa_nodes)
        missing = sorted(n for n in nodes if not self.machine.has_numa(n))
        if missing:
            raise InputError(f"the hint names NUMA nodes {missing} the machine lacks", field="hint")
        return nodes

    def _update_cpus_to_reuse(self, pod: Pod, container: Container, cpus: CPUSet) -> None:
        uid = _pod_uid(pod)
        for other in [u for u in self._cpus_to_reuse if u != uid]:
            del self._cpus_to_reuse[other]
        reuse = self._cpus_to_reuse.get(uid, _NO_CPUS)
        for init in pod.init_containers:
            if init.name == container.name:
                if not init.is_sidecar:
                    self._cpus_to_reuse[uid] = reuse | cpus
                    return
                break
        self._cpus_to_reuse[uid] = reuse - cpus

    def allocate(self, pod: Pod, container: Container | str, hint: TopologyHint | None = None) -> CPUSet:
        """Upstream ``Allocate``: give the container its exclusive CPUs and return them.

        Returns an empty set for a container that runs on the shared pool. ``hint`` is the
        Topology Manager's choice; without it the ``affinity`` store is asked, and without a
        store the hint has no affinity. A container that already holds CPUs keeps them.
        Raises :class:`SMTAlignmentError` under ``full-pcpus-only``,
        :class:`~toposched.kubelet.cpu_assignment.CPUAllocationError` when the CPUs are not
        there and :class:`InputError` for a hint naming NUMA nodes the machine lacks; the state
        is then unchanged.
        """
        if isinstance(container, str):
            try:
                container = pod.container(container)
            except KeyError:
                raise InputError(f"the pod has no container {container!r}", field="container",
                                 source=f"pod {pod.key}") from None
        count = self.guaranteed_cpus(pod, container)
        if count == 0:
            return CPUSet()
        self._enforce_smt_alignment(count)
        uid = _pod_uid(pod)
        held = self._state.get(uid, container.name)
        if held is not None:
            self._update_cpus_to_reuse(pod, container, held)
            return held
        if hint is None:
            hint = self.affinity.get_affinity(pod, container.name) if self.affinity else TopologyHint(None, False)
        cpus = self.allocate_cpus(count, hint.numa_nodes, self.cpus_to_reuse(uid))
        self._state = self._state.with_assignment(uid, container.name, cpus)
        self._update_cpus_to_reuse(pod, container, cpus)
        return cpus

    def release_container(self, pod: Pod | str, container: Container | str) -> CPUSet:
        """Upstream ``RemoveContainer``: return the container's CPUs to the shared pool.

        CPUs still held by another container of the same pod (reused init-container CPUs) stay
        out of the pool. Returns the CPUs given back; nothing happens for an unknown container.
        """
        uid = _pod_uid(pod)
        name = container if isinstance(container, str) else container.name
        held = self._state.get(uid, name)
        if held is None:
            return CPUSet()
        state = self._state.without(uid, name)
        in_use = 0
        for cpus in state.assignments.get(uid, _EMPTY).values():
            in_use |= cpus.mask
        released = held - CPUSet.from_mask(in_use)
        self._state = state.with_default(state.default_cpuset | released)
        return released

    def release(self, pod: Pod | str, container: Container | str | None = None) -> CPUSet:
        """Release one container (:meth:`release_container`) or, without one, the whole pod (:meth:`release_pod`)."""
        if container is None:
            return self.release_pod(pod)
        return self.release_container(pod, container)

    def release_pod(self, pod: Pod | str) -> CPUSet:
        """Release every container of the pod and forget its reusable CPUs; returns the CPUs given back.

        The kubelet forgets a finished pod's reusable CPUs when the next pod allocates; doing
        it now changes no later decision.
        """
        uid = _pod_uid(pod)
        released = 0
        for name in sorted(self._state.assignments.get(uid, _EMPTY)):
            released |= self.release_container(uid, name).mask
        self._cpus_to_reuse.pop(uid, None)
        return CPUSet.from_mask(released)

