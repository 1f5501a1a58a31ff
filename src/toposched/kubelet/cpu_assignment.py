"""Which CPUs the kubelet's static CPU manager takes: upstream ``cpu_assignment.go``, line for line.

The kubelet picks exclusive CPUs with a ``cpuAccumulator``: it walks the machine's hierarchy from
the biggest unit down and takes whole units while the request still needs at least a unit's
worth of CPUs:

1. whole NUMA nodes and whole sockets: whichever of the two is bigger goes first (NUMA nodes
   first when a NUMA node holds one or more sockets, i.e. ``sockets >= NUMA nodes``);
2. with ``prefer-align-cpus-by-uncorecache``: whole uncore (last-level) caches, then the part of
   one cache that fits the rest of the request;
3. whole cores (skipped by the ``spread`` CPU sorting strategy of
   ``distribute-cpus-across-cores``);
4. single CPUs, in the order that fills partly used cores first.

Every list of candidates is sorted as upstream: by the number of free CPUs the unit holds
(ascending, so the fullest units are used first and big free units stay whole), then by id;
lower levels are sorted within the order of the levels above them. ``distribute=True`` is
``takeByTopologyNUMADistributed`` (the ``distribute-cpus-across-numa`` option): the request is
split evenly, in groups of ``cpu_group_size`` CPUs, over the smallest set of NUMA nodes that
leaves the free CPUs of the machine best balanced.

Where upstream reads the average unit size (``CPUsPerCore = NumCPUs / NumCores``,
``CPUsPerSocket``, ``CPUsPerUncore``), so does this model, integer division included: a core or
socket smaller than the average is never "free". A CPU whose last-level cache is unknown is
placed in a cache per socket, as upstream's topology discovery does.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from toposched.errors import InputError, ToposchedError
from toposched.kubelet.numa_distribution import best_combination
from toposched.topology import CPUSet, Machine

__all__ = [
    "CPUAllocationError",
    "CPUTopology",
    "STRATEGY_PACKED",
    "STRATEGY_SPREAD",
    "take_by_topology",
]

STRATEGY_PACKED = "packed"
STRATEGY_SPREAD = "spread"
_STRATEGIES = (STRATEGY_PACKED, STRATEGY_SPREAD)


class CPUAllocationError(ToposchedError):
    """The accumulator cannot give the CPUs asked for; the text is upstream's error message."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


# Machines are immutable; many nodes share one Machine object, so its topology is computed once.
_TOPOLOGIES: weakref.WeakKeyDictionary[Machine, CPUTopology] = weakref.WeakKeyDictionary()


def _popcount(mask: int) -> int:
    return mask.bit_count()


def _bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass(frozen=True, eq=False)
class CPUTopology:
    """The kubelet's ``CPUTopology`` of a machine: per-unit CPU masks and the average unit sizes.

    Built once from a :class:`Machine` with :meth:`of`; read-only afterwards. Only NUMA nodes
    that hold CPUs take part, as in upstream's ``CPUDetails``.
    """

    all_mask: int
    numa_masks: dict[int, int]
    socket_masks: dict[int, int]
    core_masks: dict[int, int]
    cache_masks: dict[int, int]
    cpu_numa: dict[int, int]
    cpu_core: dict[int, int]
    num_cpus: int
    num_cores: int
    num_sockets: int
    num_numa: int
    num_caches: int
    # Static relations between units (which sockets meet which NUMA node, and so on).
    sockets_of_numa: dict[int, tuple[int, ...]] = field(repr=False)
    numas_of_socket: dict[int, tuple[int, ...]] = field(repr=False)
    cores_of_socket: dict[int, tuple[int, ...]] = field(repr=False)
    cores_of_numa: dict[int, tuple[int, ...]] = field(repr=False)
    caches_of_numa: dict[int, tuple[int, ...]] = field(repr=False)
    cores_of_cache: dict[int, tuple[int, ...]] = field(repr=False)
    # CPUs of the smallest NUMA node, socket, core and uncore cache.
    smallest_numa: int = field(default=0, repr=False)
    smallest_socket: int = field(default=0, repr=False)
    smallest_core: int = field(default=0, repr=False)
    smallest_cache: int = field(default=0, repr=False)

    @classmethod
    def of(cls, machine: Machine) -> CPUTopology:
        """The topology of ``machine``'s online CPUs (computed once per machine object, which is immutable)."""
        known = _TOPOLOGIES.get(machine)
        if known is None:
            known = _TOPOLOGIES[machine] = cls._build(machine)
        return known

    @classmethod
    def _build(cls, machine: Machine) -> CPUTopology:
        numa: dict[int, int] = {}
        socket: dict[int, int] = {}
        core: dict[int, int] = {}
        cache: dict[int, int] = {}
        cpu_numa: dict[int, int] = {}
        cpu_core: dict[int, int] = {}
        pairs: dict[str, set[tuple[int, int]]] = {k: set() for k in ("sn", "cs", "cn", "un", "cu")}
        all_mask = 0
        for c in machine.cpus:
            bit = 1 << c.id
            cache_id = c.cache_id if c.cache_id is not None else c.socket_id
            all_mask |= bit
            numa[c.numa_id] = numa.get(c.numa_id, 0) | bit
            socket[c.socket_id] = socket.get(c.socket_id, 0) | bit
            core[c.core_id] = core.get(c.core_id, 0) | bit
            cache[cache_id] = cache.get(cache_id, 0) | bit
            cpu_numa[c.id] = c.numa_id
            cpu_core[c.id] = c.core_id
            pairs["sn"].add((c.numa_id, c.socket_id))
            pairs["cs"].add((c.socket_id, c.core_id))
            pairs["cn"].add((c.numa_id, c.core_id))
            pairs["un"].add((c.numa_id, cache_id))
            pairs["cu"].add((cache_id, c.core_id))

        def relation(key: str, flip: bool = False) -> dict[int, tuple[int, ...]]:
            out: dict[int, list[int]] = {}
            for a, b in pairs[key]:
                if flip:
                    a, b = b, a
                out.setdefault(a, []).append(b)
            return {k: tuple(sorted(v)) for k, v in out.items()}

        return cls(
            all_mask=all_mask,
            numa_masks=numa,
            socket_masks=socket,
            core_masks=core,
            cache_masks=cache,
            cpu_numa=cpu_numa,
            cpu_core=cpu_core,
            num_cpus=_popcount(all_mask),
            num_cores=len(core),
            num_sockets=len(socket),
            num_numa=len(numa),
            num_caches=len(cache),
            sockets_of_numa=relation("sn"),
            numas_of_socket=relation("sn", flip=True),
            cores_of_socket=relation("cs"),
            cores_of_numa=relation("cn"),
            caches_of_numa=relation("un"),
            cores_of_cache=relation("cu"),
            smallest_numa=min(map(_popcount, numa.values()), default=0),
            smallest_socket=min(map(_popcount, socket.values()), default=0),
            smallest_core=min(map(_popcount, core.values()), default=0),
            smallest_cache=min(map(_popcount, cache.values()), default=0),
        )

    @property
    def cpus_per_core(self) -> int:
        """Upstream ``CPUsPerCore``: the average number of CPUs per core (integer division)."""
        return self.num_cpus // self.num_cores if self.num_cores else 0

    @property
    def cpus_per_socket(self) -> int:
        """Upstream ``CPUsPerSocket``: the average number of CPUs per socket."""
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    @property
    def cpus_per_uncore(self) -> int:
        """Upstream ``CPUsPerUncore``: the average number of CPUs per last-level cache."""
        return self.num_cpus // self.num_caches if self.num_caches else 0

    def cpus_in_numa(self, numa_ids: Iterable[int]) -> int:
        """The mask of the CPUs of these NUMA nodes."""
        mask = 0
        for n in numa_ids:
            mask |= self.numa_masks.get(n, 0)
        return mask

    def sockets_in_numa(self, numa_ids: Iterable[int]) -> set[int]:
        """Sockets that hold CPUs of these NUMA nodes (upstream ``SocketsInNUMANodes``)."""
        out: set[int] = set()
        for n in numa_ids:
            out.update(self.sockets_of_numa.get(n, ()))
        return out


class _Accumulator:
    """Upstream's ``cpuAccumulator``: the free CPUs (``details``), the result and what is still needed."""

    def __init__(self, topo: CPUTopology, available: int, num_cpus: int, strategy: str):
        self.topo = topo
        self.details = available & topo.all_mask
        self.needed = num_cpus
        self.result = 0
        self.numa_first = topo.num_sockets >= topo.num_numa
        self.strategy = strategy

    # ---- counting and sorting over the free CPUs

    def _free(self, mask: int) -> int:
        return _popcount(self.details & mask)

    def _sorted(self, ids: Iterable[int], masks: dict[int, int]) -> list[int]:
        # Upstream's sort(): ascending by free CPUs in the unit, then by id.
        details = self.details
        return sorted(ids, key=lambda i: ((details & masks[i]).bit_count(), i))

    def _present(self, ids: Iterable[int], masks: dict[int, int], within: int) -> list[int]:
        free = self.details & within
        return [i for i in ids if free & masks[i]]

    def sort_numas(self) -> list[int]:
        """Upstream ``sortAvailableNUMANodes``."""
        topo = self.topo
        if self.numa_first:
            return self._sorted(self._present(topo.numa_masks, topo.numa_masks, -1), topo.numa_masks)
        result: list[int] = []
        for socket in self.sort_sockets():
            numas = self._present(topo.numas_of_socket[socket], topo.numa_masks, topo.socket_masks[socket])
            result.extend(self._sorted(numas, topo.numa_masks))
        return result

    def sort_sockets(self) -> list[int]:
        """Upstream ``sortAvailableSockets``."""
        topo = self.topo
        if not self.numa_first:
            return self._sorted(self._present(topo.socket_masks, topo.socket_masks, -1), topo.socket_masks)
        result: list[int] = []
        for numa in self.sort_numas():
            sockets = self._present(topo.sockets_of_numa[numa], topo.socket_masks, topo.numa_masks[numa])
            result.extend(self._sorted(sockets, topo.socket_masks))
        return result

    def sort_cores(self) -> list[int]:
        """Upstream ``sortAvailableCores``: within sockets (NUMA first) or within NUMA nodes."""
        topo = self.topo
        result: list[int] = []
        if self.numa_first:
            for socket in self.sort_sockets():
                cores = self._present(topo.cores_of_socket[socket], topo.core_masks, topo.socket_masks[socket])
                result.extend(self._sorted(cores, topo.core_masks))
        else:
            for numa in self.sort_numas():
                cores = self._present(topo.cores_of_numa[numa], topo.core_masks, topo.numa_masks[numa])
                result.extend(self._sorted(cores, topo.core_masks))
        return result

    def sort_caches(self) -> list[int]:
        """Upstream ``sortAvailableUncoreCaches``: within the sorted NUMA nodes."""
        topo = self.topo
        result: list[int] = []
        for numa in self.sort_numas():
            caches = self._present(topo.caches_of_numa[numa], topo.cache_masks, topo.numa_masks[numa])
            result.extend(self._sorted(caches, topo.cache_masks))
        return result

    def sort_cpus_packed(self) -> list[int]:
        """Upstream ``sortAvailableCPUsPacked``: core by core, each core's CPUs ascending."""
        result: list[int] = []
        for core in self.sort_cores():
            result.extend(_bits(self.details & self.topo.core_masks[core]))
        return result

    def sort_cpus_spread(self) -> list[int]:
        """Upstream ``sortAvailableCPUsSpread``: socket by socket, each socket's CPUs ascending."""
        result: list[int] = []
        for socket in self.sort_sockets():
            result.extend(_bits(self.details & self.topo.socket_masks[socket]))
        return result

    # ---- which units are wholly free

    def free_numas(self) -> list[int]:
        """NUMA nodes all of whose CPUs are free, in sorted order."""
        masks, details = self.topo.numa_masks, self.details
        return [n for n in self.sort_numas() if details & masks[n] == masks[n]]

    def free_sockets(self) -> list[int]:
        """Sockets whose free CPUs number the average socket size, in sorted order."""
        per, masks, details = self.topo.cpus_per_socket, self.topo.socket_masks, self.details
        return [s for s in self.sort_sockets() if (details & masks[s]).bit_count() == per]

    def free_cores(self) -> list[int]:
        """Cores whose free CPUs number the average core size, in sorted order.

        :meth:`sort_cores` filtered, without sorting: within a socket (NUMA node) it orders the
        cores by free CPUs, then id, and these cores all have the same number free, so they come
        in id order, as the topology lists them.
        """
        topo, details = self.topo, self.details
        per, masks = topo.cpus_per_core, topo.core_masks
        if self.numa_first:
            units, unit_masks, cores_of = self.sort_sockets(), topo.socket_masks, topo.cores_of_socket
        else:
            units, unit_masks, cores_of = self.sort_numas(), topo.numa_masks, topo.cores_of_numa
        result: list[int] = []
        for unit in units:
            free = details & unit_masks[unit]
            result.extend(c for c in cores_of[unit] if free & masks[c] and (details & masks[c]).bit_count() == per)
        return result

    def free_caches(self) -> list[int]:
        """Uncore caches all of whose CPUs are free, in sorted order."""
        masks, details = self.topo.cache_masks, self.details
        return [u for u in self.sort_caches() if details & masks[u] == masks[u]]

    # ---- taking

    def needs(self, n: int) -> bool:
        return self.needed >= n

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > _popcount(self.details)

    def take(self, mask: int) -> None:
        self.result |= mask
        self.details &= ~self.result
        self.needed -= _popcount(mask)

    def _take_whole(self, units: Callable[[], list[int]], masks: dict[int, int], smallest: int) -> None:
        # A unit is taken only while the request needs at least its size; when it needs less
        # than the level's smallest unit, listing and sorting the free units is skipped.
        if self.needed < smallest:
            return
        for unit in units():
            mask = masks[unit]
            if self.needed >= mask.bit_count():
                self.take(mask)
            elif self.needed < smallest:
                return  # no later unit can be taken either

    def take_full_numas(self) -> None:
        self._take_whole(self.free_numas, self.topo.numa_masks, self.topo.smallest_numa)

    def take_full_sockets(self) -> None:
        self._take_whole(self.free_sockets, self.topo.socket_masks, self.topo.smallest_socket)

    def take_full_cores(self) -> None:
        self._take_whole(self.free_cores, self.topo.core_masks, self.topo.smallest_core)

    def take_first_level(self) -> None:
        if self.numa_first:
            self.take_full_numas()
        else:
            self.take_full_sockets()

    def take_second_level(self) -> None:
        if self.numa_first:
            self.take_full_sockets()
        else:
            self.take_full_numas()

    def take_partial_uncore(self, cache: int) -> None:
        # Upstream takePartialUncore: the first cores (lowest ids) of this cache that still have
        # free CPUs, as many as the request needs at the average core size; with an odd request
        # on SMT the last of their CPUs is dropped. They are claimed only when exactly the
        # number needed is left: on uneven machines (average core size 1, cores of 2 free
        # CPUs) nothing is claimed and the later steps choose.
        per_core = self.topo.cpus_per_core
        cores_needed = -(-self.needed // per_core)
        cores = [c for c in self.topo.cores_of_cache[cache] if self.details & self.topo.core_masks[c]]
        mask = 0
        for c in cores[:cores_needed]:
            mask |= self.details & self.topo.core_masks[c]
        if self.needed % 2 and per_core > 1 and _popcount(mask) > self.needed:
            mask &= ~(1 << (mask.bit_length() - 1))
        if _popcount(mask) == self.needed:
            self.take(mask)

    def take_uncore_cache(self) -> None:
        per_uncore = self.topo.cpus_per_uncore
        for cache in self.sort_caches():
            if self.needs(per_uncore):
                self._take_whole(self.free_caches, self.topo.cache_masks, self.topo.smallest_cache)
            if self.satisfied():
                return
            self.take_partial_uncore(cache)
            if self.satisfied():
                return

    def take_remaining_cpus(self) -> None:
        order = self.sort_cpus_packed() if self.strategy == STRATEGY_PACKED else self.sort_cpus_spread()
        for cpu in order:
            self.take(1 << cpu)
            if self.satisfied():
                return

    def range_numas_needed(self, group: int) -> tuple[int, int]:
        """Upstream ``rangeNUMANodesNeededToSatisfy``: fewest and most NUMA nodes worth trying."""
        num_numa = self.topo.num_numa
        available_numas = sum(1 for m in self.topo.numa_masks.values() if self.details & m)
        groups = (self.topo.num_cpus - 1) // group + 1
        groups_per_numa = (groups - 1) // num_numa + 1
        groups_needed = (self.needed - 1) // group + 1
        return (groups_needed - 1) // groups_per_numa + 1, min(groups_needed, available_numas)


def _not_enough(requested: int, available: CPUSet) -> CPUAllocationError:
    return CPUAllocationError(
        f"not enough cpus available to satisfy request: requested={requested}, available={len(available)}"
    )


def _take_packed(topo: CPUTopology, available: CPUSet, count: int, strategy: str, uncore: bool) -> CPUSet:
    """Upstream ``takeByTopologyNUMAPacked``."""
    acc = _Accumulator(topo, available.mask, count, strategy)
    if acc.satisfied():
        return CPUSet()
    if acc.failed():
        raise _not_enough(count, available)
    steps: list[Callable[[], None]] = [acc.take_first_level, acc.take_second_level]
    if uncore:
        steps.append(acc.take_uncore_cache)
    if strategy != STRATEGY_SPREAD:
        steps.append(acc.take_full_cores)
    steps.append(acc.take_remaining_cpus)
    for step in steps:
        step()
        if acc.satisfied():
            return CPUSet.from_mask(acc.result)
    raise CPUAllocationError("failed to allocate cpus")


def _socket_bits(topo: CPUTopology, numas: Sequence[int]) -> list[int]:
    """Per NUMA node of ``numas``, the sockets holding its CPUs as bits (bit i: the i-th socket id)."""
    held = [topo.sockets_of_numa.get(n, ()) for n in numas]
    bit = {socket: 1 << i for i, socket in enumerate(sorted({s for sockets in held for s in sockets}))}
    return [sum(bit[s] for s in set(sockets)) for sockets in held]


def _take_distributed(topo: CPUTopology, available: CPUSet, count: int, group: int, strategy: str,
                      align_by_socket: bool = False) -> CPUSet:
    """Upstream ``takeByTopologyNUMADistributed``.

    With ``align_by_socket`` (v1.37 passes ``align-by-socket`` in) a combination of NUMA nodes
    within one socket beats any that spans sockets, whatever the balance, and the even share is
    capped by the least any node of the combination has free.
    """
    if count % group != 0:
        return _take_packed(topo, available, count, strategy, False)
    acc = _Accumulator(topo, available.mask, count, strategy)
    if acc.satisfied():
        return CPUSet()
    if acc.failed():
        raise _not_enough(count, available)

    numas = acc.sort_numas()
    free = [acc._free(topo.numa_masks[n]) for n in numas]
    sockets = _socket_bits(topo, numas) if align_by_socket else None
    min_numas, max_numas = acc.range_numas_needed(group)
    for k in range(min_numas, max_numas + 1):
        best = best_combination(free, count, group, k, sockets)
        if best is None:
            continue
        best_combo = tuple(numas[i] for i in best[0])
        best_remainder = None if best[1] is None else tuple(numas[i] for i in best[1])

        distribution = (count // len(best_combo) // group) * group
        distribution = min([distribution] + [acc._free(topo.numa_masks[n]) // group * group for n in best_combo])
        for n in best_combo:
            pool = CPUSet.from_mask(acc.details & topo.numa_masks[n])
            acc.take(_take_quiet(topo, pool, distribution, strategy).mask)
        remainder = count - distribution * len(best_combo)
        while remainder > 0:
            progressed = False
            for n in best_remainder or ():
                if remainder == 0:
                    break
                pool = CPUSet.from_mask(acc.details & topo.numa_masks[n])
                if len(pool) < group:
                    continue
                acc.take(_take_quiet(topo, pool, group, strategy).mask)
                remainder -= group
                progressed = True
            if not progressed:
                break
        if acc.needed > 0:
            raise CPUAllocationError(f"accounting error, not enough CPUs allocated, remaining: {acc.needed}")
        if acc.needed < 0:
            raise CPUAllocationError(f"accounting error, too many CPUs allocated, remaining: {acc.needed}")
        return CPUSet.from_mask(acc.result)

    return _take_packed(topo, available, count, strategy, False)


def _take_quiet(topo: CPUTopology, pool: CPUSet, count: int, strategy: str) -> CPUSet:
    # Upstream ignores the error of these inner calls and takes the empty result.
    try:
        return _take_packed(topo, pool, count, strategy, False)
    except CPUAllocationError:
        return CPUSet()


def take_by_topology(
    machine: Machine | CPUTopology,
    available: CPUSet,
    count: int,
    *,
    strategy: str = STRATEGY_PACKED,
    distribute: bool = False,
    cpu_group_size: int = 1,
    prefer_uncore_cache: bool = False,
    align_by_socket: bool = False,
) -> CPUSet:
    """Pick ``count`` CPUs among ``available`` exactly as the kubelet's static policy does.

    ``strategy`` is upstream's CPU sorting strategy (``"packed"``, or ``"spread"`` for
    ``distribute-cpus-across-cores``); ``distribute`` selects ``takeByTopologyNUMADistributed``
    (``distribute-cpus-across-numa``) with CPUs handed out in groups of ``cpu_group_size``;
    ``prefer_uncore_cache`` is ``prefer-align-cpus-by-uncorecache`` (packed only, as upstream);
    ``align_by_socket`` is ``align-by-socket`` (distributed only, as upstream).
    ``machine`` may be a prepared :class:`CPUTopology` to save rebuilding it.

    Returns the chosen CPUs (empty for ``count == 0``). Raises :class:`CPUAllocationError`
    carrying upstream's message (``not enough cpus available to satisfy request: requested=5,
    available=4``) when the CPUs cannot be found, and :class:`InputError` for bad arguments (a
    negative count, an unknown strategy, a group size below 1, CPUs the machine lacks).
    """
    topo = machine if isinstance(machine, CPUTopology) else CPUTopology.of(machine)
    if not isinstance(available, CPUSet):
        raise InputError(f"available must be a CPUSet, got {type(available).__name__}", field="available")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InputError(f"cannot take {count!r} CPUs: the count must be a non-negative integer", field="count")
    if strategy not in _STRATEGIES:
        raise InputError(f"unknown CPU sorting strategy {strategy!r} (expected packed or spread)", field="strategy")
    if isinstance(cpu_group_size, bool) or not isinstance(cpu_group_size, int) or cpu_group_size < 1:
        raise InputError(f"cpu_group_size {cpu_group_size!r} must be a positive integer", field="cpu_group_size")
    stray = available.mask & ~topo.all_mask
    if stray:
        raise InputError(f"the machine has no online CPUs {CPUSet.from_mask(stray)}", field="available")
    if distribute:
        return _take_distributed(topo, available, count, cpu_group_size, strategy, align_by_socket)
    return _take_packed(topo, available, count, strategy, prefer_uncore_cache)
