"""Which NUMA nodes the kubelet's ``distribute-cpus-across-numa`` option spreads a request over.

Upstream ``takeByTopologyNUMADistributed`` tries every combination of ``k`` NUMA nodes (fewest
first), splits the request evenly over each in groups of CPUs, hands the rest out round robin
over every subset of the combination, and keeps the split that leaves the free CPUs of the
machine best balanced (the smallest standard deviation, rounded to three decimals as upstream
rounds it). :func:`best_combination` is that search for one ``k``; ``cpu_assignment`` takes the
CPUs afterwards.

What the kubelet then takes from is not always the combination it found best: upstream's
``iterateCombinations`` builds each combination with ``append(accum, n[i])``, so combinations
share a Go backing array wherever the slice had spare capacity, and the search keeps the best as
that slice, uncopied. Later combinations with the same leading nodes overwrite its tail
(:func:`_as_kept`). :func:`best_combination` returns the combination as the kubelet keeps it.

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
    subset of it the remainder goes to round robin (None when the share leaves none), both as the
    kubelet keeps them (:func:`_as_kept`), or None when no combination of ``k`` nodes can hold the
    request. ValueError for a ``k`` or ``group`` below 1.
    """
    if k < 1 or group < 1:
        raise ValueError(f"k ({k}) and group ({group}) must be positive")
    if compiled is not None and len(free) <= _COMPILED_MOST_NUMAS and (sockets is None or max(sockets, default=0) < 2**63):
        best = compiled.best_combination(list(free), count, group, k, None if sockets is None else list(sockets))
    else:
        best = _best_combination(list(free), count, group, k, sockets)
    return None if best is None else _as_kept(list(free), count, group, sockets, *best)


def _best_combination(free: list[int], count: int, group: int, k: int, sockets: Sequence[int] | None
                      ) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    align = sockets is not None
    best_balance = math.inf
    best: tuple[tuple[int, ...], tuple[int, ...] | None] | None = None
    best_in_one_socket = False
    for combo in combinations(range(len(free)), k):
        if best_balance == 0 and (not align or best_in_one_socket):
            break
        judged = _judge(free, count, group, sockets, combo)
        if judged is None:
            continue
        local_balance, local_remainder, in_one_socket = judged
        better = local_balance < best_balance
        if align and in_one_socket != best_in_one_socket:
            better = in_one_socket
        if better:
            best_balance = local_balance
            best = (combo, local_remainder)
            best_in_one_socket = in_one_socket
    return best


def _judge(free: list[int], count: int, group: int, sockets: Sequence[int] | None, combo: tuple[int, ...]
           ) -> tuple[float, tuple[int, ...] | None, bool] | None:
    """One combination as upstream's search weighs it: its balance, the subset its remainder goes to
    and whether it lies in one socket (with ``align-by-socket``); None where it cannot hold the request."""
    k = len(combo)
    if sum(free[i] for i in combo) < count:
        return None
    if sum(free[i] // group for i in combo) * group < count:
        return None
    distribution = _share(free, count, group, sockets, combo)
    if any(free[i] < distribution for i in combo):
        return None
    after = _left_after(free, combo, distribution)
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
    in_one_socket = sockets is not None and _socket_bits_of(sockets, combo).bit_count() <= 1
    return local_balance, local_remainder, in_one_socket


def _share(free: list[int], count: int, group: int, sockets: Sequence[int] | None, combo: tuple[int, ...]) -> int:
    """The even share of ``count`` each node of ``combo`` gives, in whole groups (with ``align-by-socket``
    capped by the least any of them has)."""
    distribution = (count // len(combo) // group) * group
    if sockets is not None:
        distribution = min([distribution] + [free[i] // group * group for i in combo])
    return distribution


def _left_after(free: list[int], combo: tuple[int, ...], distribution: int) -> list[int]:
    """The free CPUs of every NUMA node once each node of ``combo`` gave ``distribution``."""
    after = list(free)
    for i in combo:
        after[i] -= distribution
    return after


def _as_kept(free: list[int], count: int, group: int, sockets: Sequence[int] | None, combo: tuple[int, ...],
             remainder: tuple[int, ...] | None) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The best ``combo`` and its ``remainder`` subset as upstream's search leaves them in its slices.

    Go's ``append`` grows a slice's backing array to 1, 2, 4, 8, ... elements, so the element at
    index i of a combination is written in place into an array shared with every other
    combination that has the same first F+1 elements, F the largest of 0, 1, 2, 4, ... not above
    i. The kept combination then holds, after index F, what the last such combination the search
    generated wrote there. For the nodes: the combination after the best one when the search
    stopped early on a perfect balance, else the last of all; for the remainder subset, whose
    search always runs to its end, the last subset of its size (positions in the nodes that could
    take the remainder)."""
    n, k = len(free), len(combo)
    # The search stopped early when the best balanced perfectly (in one socket, with align-by-socket):
    # its balance is the one spreading the remainder over ``remainder`` gave (no second search).
    distribution = _share(free, count, group, sockets, combo)
    after = _left_after(free, combo, distribution)
    left = count - distribution * k
    balanced = not left or (remainder is not None and _spread_remainder(after, remainder, left, group))
    in_one_socket = sockets is None or _socket_bits_of(sockets, combo).bit_count() <= 1
    stopped = balanced and _standard_deviation(after) == 0 and in_one_socket
    kept = _overwritten(combo, _following(combo, n) if stopped else None, n)
    if remainder is not None:
        takers = [i for i in combo if free[i] - distribution >= group]  # upstream's remainderCombo
        at = tuple(takers.index(i) for i in remainder)
        remainder = tuple(takers[j] for j in _overwritten(at, None, len(takers)))
    return kept, remainder


def _socket_bits_of(sockets: Sequence[int], combo: tuple[int, ...]) -> int:
    """The sockets the NUMA nodes of ``combo`` lie in, as bits."""
    bits = 0
    for i in combo:
        bits |= sockets[i]
    return bits


def _overwritten(chosen: tuple[int, ...], last: tuple[int, ...] | None, n: int) -> tuple[int, ...]:
    """``chosen`` (a combination of ``range(n)``) once the combinations generated after it have
    written into the backing array it shares with them; ``last`` is the last generated, None when
    the generation ran to its end."""
    k = len(chosen)
    fresh = 0 if k == 1 else 1 << ((k - 1).bit_length() - 1)  # the last index written into a new array
    if fresh == k - 1:
        return chosen
    prefix = chosen[:fresh + 1]
    if last is not None and last[:fresh + 1] == prefix:
        return prefix + last[fresh + 1:]
    return prefix + tuple(range(n - (k - fresh - 1), n))  # the last combination starting with prefix


def _following(combo: tuple[int, ...], n: int) -> tuple[int, ...] | None:
    """The combination of ``range(n)`` after ``combo`` in lexicographic order; None after the last."""
    k = len(combo)
    for i in range(k - 1, -1, -1):
        if combo[i] < n - k + i:
            start = combo[i] + 1
            return combo[:i] + tuple(range(start, start + k - i))
    return None


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
