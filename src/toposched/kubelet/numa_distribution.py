"""Which NUMA nodes the kubelet's ``distribute-cpus-across-numa`` option spreads a request over.

Upstream ``takeByTopologyNUMADistributed`` tries every combination of ``k`` NUMA nodes (fewest
first), splits the request evenly over each in groups of CPUs, hands the rest out round robin
over every subset of the combination, and keeps the split that leaves the free CPUs of the
machine best balanced (the smallest standard deviation, rounded to three decimals as upstream
rounds it). :func:`best_combination` is that search for one ``k``; ``cpu_assignment`` takes the
CPUs afterwards.

The search is exponential in the NUMA nodes: on a 16-NUMA machine one pod can mean tens of
thousands of splits. ``compiled`` is the ``_numa_distribution`` extension (built from
``_numa_distribution.c`` by ``pip install`` where a C compiler is found) or None; both forms give
the same answer, floating point included (the same operations in the same order; tested against
each other), so the extension changes speed only. Tests set ``compiled`` to None to run this
module's form.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from types import ModuleType

__all__ = ["best_combination", "compiled"]

compiled: ModuleType | None
try:
    from toposched.kubelet import _numa_distribution as compiled
except ImportError:  # built without a C compiler: the Python form runs
    compiled = None

_COMPILED_MOST_NUMAS = 64  # the extension's arrays hold this many NUMA nodes; its socket bits are 64-bit


def best_combination(free: Sequence[int], count: int, group: int, k: int, sockets: Sequence[int] | None
                     ) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    """The ``k`` NUMA nodes to spread ``count`` CPUs over, and those that take the rest, as upstream picks them.

    ``free``: the free CPUs of each available NUMA node, in upstream's order of the NUMA nodes
    (``sortAvailableNUMANodes``); ``count`` a multiple of ``group`` (the CPU group size);
    ``sockets``: with ``align-by-socket``, per NUMA node the sockets holding it as bits (a
    combination within one socket then wins over any other, and the even share is capped by the
    least any of its nodes has), else None. Returns positions in ``free``: the combination and the
    subset of it the remainder goes to round robin (None when the share leaves none), or None when
    no combination of ``k`` nodes can hold the request. ValueError for a ``k`` or ``group`` below 1.
    """
    if k < 1 or group < 1:
        raise ValueError(f"k ({k}) and group ({group}) must be positive")
    if compiled is not None and len(free) <= _COMPILED_MOST_NUMAS and (sockets is None or max(sockets, default=0) < 2**63):
        return compiled.best_combination(list(free), count, group, k, None if sockets is None else list(sockets))
    return _best_combination(list(free), count, group, k, sockets)


def _best_combination(free: list[int], count: int, group: int, k: int, sockets: Sequence[int] | None
                      ) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    align = sockets is not None
    best_balance = math.inf
    best: tuple[tuple[int, ...], tuple[int, ...] | None] | None = None
    best_in_one_socket = False
    for combo in combinations(range(len(free)), k):
        if best_balance == 0 and (not align or best_in_one_socket):
            break
        if sum(free[i] for i in combo) < count:
            continue
        if sum(free[i] // group for i in combo) * group < count:
            continue
        distribution = (count // k // group) * group
        if align:
            distribution = min([distribution] + [free[i] // group * group for i in combo])
        if any(free[i] < distribution for i in combo):
            continue
        after = list(free)
        for i in combo:
            after[i] -= distribution
        remainder = count - distribution * k
        remainder_combo = [i for i in combo if after[i] >= group]
        local_balance = math.inf
        local_remainder: tuple[int, ...] | None = None
        if remainder == 0:
            local_balance = _standard_deviation(after)
        size = len(remainder_combo)
        while remainder > 0 and size >= 1:
            for subset in combinations(remainder_combo, size):
                trial = list(after)
                if sum(trial[i] for i in subset) < remainder:
                    continue
                if not _spread_remainder(trial, subset, remainder, group):
                    continue
                balance = _standard_deviation(trial)
                if balance < local_balance:
                    local_balance = balance
                    local_remainder = subset
            size -= 1
        in_one_socket = False
        if align:
            bits = 0
            for i in combo:
                bits |= sockets[i]  # type: ignore[index]
            in_one_socket = bits.bit_count() <= 1
        better = local_balance < best_balance
        if align and in_one_socket != best_in_one_socket:
            better = in_one_socket
        if better:
            best_balance = local_balance
            best = (combo, local_remainder)
            best_in_one_socket = in_one_socket
    return best


def _go_round(x: float) -> float:
    # Go's math.Round: half away from zero, exact for every float.
    t = math.trunc(x)
    if abs(x - t) >= 0.5:
        t += math.copysign(1, x)
    return float(t)


def _mean(xs: Sequence[int]) -> float:
    return _go_round(sum(float(x) for x in xs) / len(xs) * 1000) / 1000


def _standard_deviation(xs: Sequence[int]) -> float:
    m = _mean(xs)
    total = 0.0
    for x in xs:
        total += (float(x) - m) * (float(x) - m)
    return _go_round(math.sqrt(total / len(xs)) * 1000) / 1000


def _spread_remainder(avail: list[int], subset: Sequence[int], remainder: int, group: int) -> bool:
    """Hand ``remainder`` CPUs out over ``subset`` in groups, round robin; False if it cannot finish.

    Upstream loops forever when no NUMA node of the subset can take another group although the
    subset's total looked big enough; this model gives up on that subset instead.
    """
    while remainder > 0:
        progressed = False
        for numa in subset:
            if remainder == 0:
                break
            if avail[numa] < group:
                continue
            avail[numa] -= group
            remainder -= group
            progressed = True
        if not progressed:
            return False
    return True
