"""A fast Topology Manager merge with exactly the upstream result, for the scheduler.

The kubelet's merge (:func:`toposched.kubelet.topology_manager.merge_hints`) walks the cross
product of the providers' hint lists: with the CPU manager's hints (every NUMA mask that can
hold the request, 2^N - 1 of them on N NUMA nodes) and four providers that is (2^N)^4
permutations. Upstream's choice among the merged hints is, however, a fixed order, so the
answer can be found without walking the permutations (see docs/kubelet/topology-manager.md):

1. **Preferred merges are a set intersection.** A merged hint is preferred only when every hint
   of the permutation is preferred and all their non-nil masks are equal. So the preferred
   merged masks are the masks ``m`` that every list offers as a preferred hint (a list that
   offers a preferred nil hint accepts any ``m``), plus the whole machine when every list offers
   a preferred nil hint. If there is one, the best of them under upstream's mask order (fewest
   NUMA nodes, then smallest average distance with prefer-closest, then smallest mask value)
   is the answer: upstream never lets a non-preferred hint beat a preferred one.
2. **Otherwise only the reachable AND-masks matter.** Every permutation is then non-preferred
   and upstream keeps the one whose width is the target width (the widest of the lists'
   narrowest hints), else the widest below it, else the narrowest above it, ties broken by the
   same mask order. That needs the masks reachable as an AND of one hint per list, not the
   permutations that reach them. First every mask is cut down to the NUMA nodes that every list
   can contain (no other node can survive the AND), which also merges duplicate hints.
3. **The target width first.** When there are few masks of the target width, each is checked:
   it is reachable when every list has a mask containing it and what those masks hold beyond it
   can AND to nothing. The best reachable one, if any, is the answer.
4. **Otherwise every reachable mask, by width.** The set is built list by list, keeping only
   distinct partial masks (a per-node index skips masks that share no node with a partial one);
   widths are then visited in upstream's order and the first reachable width decides: nothing
   later in that order can beat it.

The work is bounded by the number of distinct partial masks (at most 2^N, in practice the
distinct intersections of the hints) times the list lengths, never by their product.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from math import comb
from typing import Any

import numpy as np

from toposched.kubelet.hint_arrays import MaskHintArray, distance_sums, positions_of, subset_masks, subset_widths
from toposched.kubelet.hints import TopologyHint
from toposched.kubelet.topology_manager import (
    POLICY_NONE,
    Hint,
    MergeProblem,
    PolicyOptions,
    finish_merge,
    max_of_min_mask_counts,
    prepare_merge,
)

__all__ = ["fast_merge_hints"]

# Above this many masks of the target width, build the whole reachable set instead of trying each.
_CANDIDATE_BUDGET = 4096
# With this many surviving NUMA nodes (machines beyond the kubelet's default limit of 8), every
# reachable mask is found with subset transforms (2**16 entries at most) instead of pair by pair.
_TRANSFORMS_FROM = 9
_TRANSFORMS_UP_TO = 16
_ARRAY_MASK_BITS = 62  # NUMA ids below this fit an int64 mask


def _mask_key(problem: MergeProblem) -> Any:
    """Upstream's order among equally ranked masks: narrower, then (prefer-closest) nearer, then smaller."""
    if problem.prefer_closest:
        return lambda m: (m.bit_count(), problem.distance_sum(m), m)
    return lambda m: (m.bit_count(), m)


def _best_preferred(problem: MergeProblem) -> int | None:
    """The best mask some permutation merges into a preferred hint, or None if there is none."""
    union: set[int] = set()
    common: set[int] | None = None
    every_list_wildcard = True
    for hints in problem.lists:
        offered = {m for m, p in hints if p}
        if None in offered:  # a preferred nil hint
            offered.discard(None)
            union |= offered
            continue
        every_list_wildcard = False
        common = offered if common is None else common & offered
        if not common:
            return None
    if every_list_wildcard:
        # Either all hints nil (the whole machine) or one list's mask with nil everywhere else.
        candidates = union | {problem.default}
    else:
        assert common is not None
        candidates = common
    candidates.discard(0)
    if not candidates:
        return None
    return min(candidates, key=_mask_key(problem))


def _reduce(problem: MergeProblem) -> tuple[int, list[set[int]]] | None:
    """The nodes that can survive the AND and each list's distinct masks cut down to them.

    A node some list can never contain cannot survive; cutting it out of every mask changes no
    AND and merges hints that differ only there. None when some list can only merge to empty.
    """
    default = problem.default
    survivors = default
    for hints in problem.lists:
        covered = 0
        for m, _ in hints:
            covered |= default if m is None else m
        survivors &= covered
    if survivors == 0:
        return None
    reduced = []
    for hints in problem.lists:
        masks = {(default if m is None else m) & survivors for m, _ in hints}
        masks.discard(0)
        if not masks:
            return None
        reduced.append(masks)
    reduced.sort(key=len)
    return survivors, reduced


def _index(masks: Iterable[int]) -> dict[int, list[int]]:
    """Masks by node (as its one-bit mask): every mask containing that node."""
    by_node: dict[int, list[int]] = {}
    for m in masks:
        rest = m
        while rest:
            low = rest & -rest
            by_node.setdefault(low, []).append(m)
            rest ^= low
    return by_node


def _and_step(partial: set[int], masks: set[int]) -> set[int]:
    """Every ``p & m`` for a partial ``p`` and a mask ``m``, the empty mask included.

    For a narrow ``p`` only the masks sharing a node with it can give a non-empty result, so
    they are found through a per-node index instead of trying every mask.
    """
    if len(partial) * len(masks) <= 4096:
        return {p & m for p in partial for m in masks}
    everything = list(masks)
    by_node = _index(everything)
    out: set[int] = set()
    for p in partial:
        buckets = []
        seen = 0
        rest = p
        while rest and seen < len(everything):
            low = rest & -rest
            bucket = by_node.get(low)
            if bucket:
                buckets.append(bucket)
                seen += len(bucket)
            rest ^= low
        if seen >= len(everything):
            out.update([p & m for m in everything])
        else:
            out.add(0)  # p misses the other masks entirely
            for bucket in buckets:
                out.update([p & m for m in bucket])
    return out


def _reachable_masks(survivors: int, reduced: list[set[int]]) -> set[int]:
    """Every non-empty mask that the AND of one mask per list can produce."""
    partial = {survivors}
    for masks in reduced:
        partial = _and_step(partial, masks)
        partial.discard(0)
        if not partial:
            break
    return partial


def _reachable_by_transforms(survivors: int, reduced: list[set[int]]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_reachable_masks` as an array, with each mask's width, computed over the ``2**n``
    subsets of the ``n`` surviving nodes instead of pair by pair.

    With the masks of a set as a 0/1 array over the subsets, the number of pairs ``(p, m)`` with
    ``p & m == x`` is the superset Moebius transform of the product of the two arrays' superset
    zeta transforms (a pair holds ``x`` exactly when both hold it). Each list costs ``n * 2**n``
    array additions whatever its length (on a 16-NUMA machine a list can offer 65,535 masks, and
    pairs of partial masks and masks run into billions): see :func:`_reached`.
    """
    nodes = tuple(i for i in range(survivors.bit_length()) if survivors >> i & 1)
    indicators = []
    for masks in reduced:
        indicator = np.zeros(1 << len(nodes), dtype=np.uint32)
        indicator[positions_of(np.fromiter(masks, dtype=np.int64, count=len(masks)), nodes)] = 1
        indicators.append(indicator)
    reached = _reached(indicators, range(len(nodes)), len(nodes))
    return subset_masks(nodes)[reached], subset_widths(len(nodes))[reached]


def _reached(indicators: list[np.ndarray], bits: Iterable[int], n: int) -> np.ndarray:
    """The non-empty subsets (positions over ``2**n``) that the AND of one subset per list reaches,
    each list given as a 0/1 uint32 array over the subsets that is 0 at the empty set, all of
    them within ``bits`` (the arrays are changed).

    The first list's subsets are the ANDs of one subset. Then per list the number of pairs
    ``(p, m)`` with ``p & m == x`` is the superset Moebius transform of the product of the two
    arrays' superset zeta transforms. Counts fit uint32: a transformed 0/1 array holds at most
    ``2**16 - 1`` (16 bits at most), so a product is below ``2**32``, and the Moebius transform's
    wrapped subtractions still end on the exact, non-negative counts.
    """
    bits = list(bits)
    partial = indicators[0]
    for indicator in indicators[1:]:
        product = np.multiply(_superset_transform(partial, bits, n, moebius=False),
                              _superset_transform(indicator, bits, n, moebius=False))
        partial = (_superset_transform(product, bits, n, moebius=True) > 0).astype(np.uint32)
        partial[0] = 0  # an empty AND is no merge
    return np.flatnonzero(partial)


def _superset_transform(f: np.ndarray, bits: Iterable[int], n: int, *, moebius: bool) -> np.ndarray:
    """The superset zeta transform of ``f`` over the ``2**n`` subsets along ``bits`` (each subset
    without a bit gets its superset with it added), or with ``moebius`` its inverse (subtracted).

    Along bits 1 to n/2 - 1 a pass reads pairs of runs a few elements long, which NumPy walks
    element by element (up to 10x the time of a pass along a high bit); those bits are taken on
    a transposed copy, where they are high bits. ``f`` may be changed; the result is returned.
    """
    op = np.subtract if moebius else np.add
    half = n // 2
    bits = list(bits)
    low = [j for j in bits if 0 < j < half]
    for j in bits:
        if j not in low:
            view = f.reshape(-1, 2, 1 << j)
            op(view[:, 0, :], view[:, 1, :], out=view[:, 0, :])
    if low:
        # Index hi * 2**half + lo becomes lo * 2**(n - half) + hi: bit j of lo is now bit j + n - half.
        g = np.ascontiguousarray(f.reshape(1 << (n - half), 1 << half).T).reshape(-1)
        for j in low:
            view = g.reshape(-1, 2, 1 << (j + n - half))
            op(view[:, 0, :], view[:, 1, :], out=view[:, 0, :])
        f = np.ascontiguousarray(g.reshape(1 << half, 1 << (n - half)).T).reshape(-1)
    return f


def _exactly_reachable(f: int, reduced: list[set[int]], outside: list[int], survivors: int,
                       indexes: dict[int, dict[int, list[int]]]) -> bool:
    """Whether one mask per list can AND to exactly ``f`` (``outside``: the surviving nodes not in
    ``f``, as one-bit masks; ``indexes``: lists' masks by node, each built on first need).

    Only masks containing ``f`` can take part; what they hold beyond ``f`` (their residue) must
    AND to nothing. Two shortcuts settle most candidates by set lookups, without scanning a list
    (a 16-NUMA machine offers up to 65,535 masks per list): once every list has a mask containing
    ``f``, it is reachable when some list offers ``f`` itself, or two lists offer ``f`` plus one
    node each, not the same node. Otherwise the residues are built and ANDed.
    """
    anchor = f & -f
    exact = False
    plus_one: set[int] = set()  # the nodes x some list offers as f | x
    lists_plus_one = 0
    for i, masks in enumerate(reduced):
        if f in masks:
            exact = True
            continue
        found = [x for x in outside if f | x in masks]
        if found:
            plus_one.update(found)
            lists_plus_one += 1
        elif survivors not in masks and not any(m & f == f for m in _bucket(i, anchor, reduced, indexes)):
            return False  # no mask of this list contains f (every mask holds at most the survivors)
    if exact or (lists_plus_one >= 2 and len(plus_one) >= 2):
        return True
    not_f = ~f
    residues = sorted(({m & not_f for m in _bucket(i, anchor, reduced, indexes) if m & f == f} for i in range(len(reduced))),
                      key=len)
    partial = residues[0]
    for res in residues[1:]:
        partial = _and_step(partial, res)
        if 0 in partial:
            return True
    return False


def _bucket(i: int, node: int, reduced: list[set[int]], indexes: dict[int, dict[int, list[int]]]) -> list[int]:
    """The masks of list ``i`` that contain ``node`` (a one-bit mask), through its index built once."""
    index = indexes.get(i)
    if index is None:
        index = indexes[i] = _index(reduced[i])
    return index.get(node, [])


def _reachable_at_width(survivors: int, reduced: list[set[int]], width: int) -> list[int] | None:
    """Every reachable mask of exactly ``width`` nodes, tried candidate by candidate.

    None when there are more than ``_CANDIDATE_BUDGET`` candidates (then the set of all
    reachable masks is built instead).
    """
    nodes = [1 << i for i in range(survivors.bit_length()) if survivors >> i & 1]
    if width > len(nodes) or comb(len(nodes), width) > _CANDIDATE_BUDGET:
        return None
    indexes: dict[int, dict[int, list[int]]] = {}  # per list, built by the first candidate that needs it
    found = []
    for combo in combinations(nodes, width):
        f = sum(combo)
        if _exactly_reachable(f, reduced, [n for n in nodes if not n & f], survivors, indexes):
            found.append(f)
    return found


def _best_non_preferred(problem: MergeProblem) -> int | None:
    """Upstream's pick among non-preferred merged masks, or None if every merge is empty."""
    cut = _reduce(problem)
    if cut is None:
        return None
    survivors, reduced = cut
    target = max_of_min_mask_counts(problem.lists)
    key = _mask_key(problem)
    if _TRANSFORMS_FROM <= survivors.bit_count() <= _TRANSFORMS_UP_TO:
        # Lists of thousands of masks: every reachable mask at once (see _reachable_by_transforms).
        everything, widths = _reachable_by_transforms(survivors, reduced)
        if not len(everything):
            return None
        present = set(np.unique(widths).tolist())
        width = next(w for w in _width_order(target, max(present)) if w in present)
        return min(everything[widths == width].tolist(), key=key)
    if target >= 1:
        # The target width beats every other: when few masks have it, try them one by one.
        at_target = _reachable_at_width(survivors, reduced, target)
        if at_target:
            return min(at_target, key=key)
    reachable = _reachable_masks(survivors, reduced)
    if not reachable:
        return None
    by_width: dict[int, list[int]] = {}
    for m in reachable:
        by_width.setdefault(m.bit_count(), []).append(m)
    for width in _width_order(target, max(by_width)):
        if width in by_width:
            return min(by_width[width], key=key)
    raise AssertionError("a reachable width is always in the search order")


def _width_order(target: int, widest: int) -> list[int]:
    """Upstream's order of widths among non-preferred merges: the target, then narrower down to 1,
    then wider up to ``widest`` (a reachable width is always in it)."""
    return [target, *range(target - 1, 0, -1), *range(target + 1, widest + 1)]


def _fast_best(problem: MergeProblem) -> Hint:
    if any(len(hints) == 0 for hints in problem.lists):
        # No permutation at all (single-numa-node filtered a list empty): upstream's default.
        return (problem.default, False)
    if _on_arrays(problem):
        return _array_best(problem)
    mask = _best_preferred(problem)
    if mask is not None:
        return (mask, True)
    mask = _best_non_preferred(problem)
    return (problem.default, False) if mask is None else (mask, False)


def fast_preferred(problem: MergeProblem) -> int | None:
    """The mask of upstream's best merged hint if that hint is preferred; None when no permutation
    merges into a preferred hint (:func:`_fast_best` then searches the non-preferred ones).

    A policy that admits only a preferred hint (``restricted``, ``single-numa-node``) refuses the pod
    whenever this is None, whichever non-preferred hint would be best: on a 16-NUMA machine that
    search costs three times a whole admission (``benchmarks/kubelet_admission.py --numa 16``)."""
    if any(len(hints) == 0 for hints in problem.lists):
        return None
    if _on_arrays(problem):
        size = 1 << len(problem.numa_ids)
        return _array_best_preferred(problem, [_Positions(hints, problem.numa_ids) for hints in problem.lists], size)
    return _best_preferred(problem)


def _on_arrays(problem: MergeProblem) -> bool:
    """Whether the merge runs on arrays over the subsets (:func:`_array_best`): some provider handed
    over a :class:`MaskHintArray`, and the machine's NUMA ids fit the subset arrays."""
    return (any(isinstance(hints, MaskHintArray) for hints in problem.lists)
            and len(problem.numa_ids) <= _TRANSFORMS_UP_TO and problem.numa_ids[-1] < _ARRAY_MASK_BITS)


# ---- the same merge over arrays, when providers hand over MaskHintArray lists -----------------------


class _Positions:
    """One hint list over the problem's NUMA ids: its non-nil hints' positions, its preferred ones,
    and whether it offers a nil hint (preferred or not)."""

    __slots__ = ("_dense", "_preferred", "nil", "nil_preferred", "positions")

    def __init__(self, hints: Sequence[Hint], ids: tuple[int, ...]) -> None:
        self._dense: np.ndarray | None = None  # the preferred flag per position, when the list has it
        self.nil = self.nil_preferred = False
        if isinstance(hints, MaskHintArray) and hints.ids == ids:
            self.positions, self._dense = hints.positions, hints.preferred
            self._preferred = np.empty(0, dtype=np.int64)
        elif isinstance(hints, MaskHintArray):  # counted over other ids (the CPU manager's: the nodes with CPUs)
            self.positions = positions_of(hints.masks, ids)
            self._preferred = positions_of(subset_masks(hints.ids)[np.flatnonzero(hints.preferred)], ids)
        else:
            masks = [m for m, _ in hints if m is not None]
            self.positions = positions_of(np.array(masks, dtype=np.int64), ids)
            self._preferred = self.positions[np.array([p for m, p in hints if m is not None], dtype=bool)]
            nil_flags = [p for m, p in hints if m is None]
            self.nil = bool(nil_flags)
            self.nil_preferred = any(nil_flags)

    def offered(self, size: int) -> np.ndarray:
        """A new boolean array over the ``size`` positions: the subsets the list offers as preferred hints."""
        if self._dense is not None:
            return self._dense.copy()
        out = np.zeros(size, dtype=bool)
        out[self._preferred] = True
        return out


def _array_best(problem: MergeProblem) -> Hint:
    """:func:`_fast_best` with the lists as arrays over the ``2**n`` subsets of the machine's ``n``
    NUMA ids (n at most 16): the same answer, without building a Python object per hint."""
    ids = problem.numa_ids
    size = 1 << len(ids)
    whole = size - 1  # the default mask's position
    lists = [_Positions(hints, ids) for hints in problem.lists]
    best = _array_best_preferred(problem, lists, size)
    if best is not None:
        return (best, True)
    best = _array_best_non_preferred(problem, lists, size, whole)
    return (problem.default, False) if best is None else (best, False)


def _array_pick(problem: MergeProblem, candidates: np.ndarray) -> int:
    """The mask of the best of the ``candidates`` (positions) under upstream's mask order
    (:func:`_mask_key`): fewest nodes, then (prefer-closest) smallest distance sum, then smallest mask."""
    widths = subset_widths(len(problem.numa_ids))[candidates]
    candidates = candidates[widths == widths.min()]
    if problem.prefer_closest and len(candidates) > 1:
        assert problem.distances is not None
        sums = distance_sums(problem.numa_ids, problem.distances)[candidates]
        candidates = candidates[sums == sums.min()]
    masks = subset_masks(problem.numa_ids)[candidates]
    return int(masks.min())


def _array_best_preferred(problem: MergeProblem, lists: list[_Positions], size: int) -> int | None:
    """:func:`_best_preferred` on arrays. Some list holds no nil hint (a MaskHintArray never does),
    so the candidates are the masks every such list prefers."""
    common: np.ndarray | None = None
    for hints in lists:
        if hints.nil_preferred:
            continue  # accepts any mask
        offered = hints.offered(size)
        common = offered if common is None else np.logical_and(common, offered, out=common)
        if not common.any():
            return None
    assert common is not None  # (and common[0] is False: a MaskHintArray never offers the empty set)
    found = np.flatnonzero(common)
    return _array_pick(problem, found) if len(found) else None


def _array_best_non_preferred(problem: MergeProblem, lists: list[_Positions], size: int, whole: int) -> int | None:
    """:func:`_best_non_preferred` on arrays: the reachable ANDs from subset transforms over the
    surviving nodes (see :func:`_reachable_by_transforms`)."""
    survivors = whole
    for hints in lists:
        covered = whole if hints.nil else int(np.bitwise_or.reduce(hints.positions)) if len(hints.positions) else 0
        survivors &= covered
    if survivors == 0:
        return None
    widths = subset_widths(len(problem.numa_ids))
    target = 0
    indicators = []
    for hints in lists:
        if len(hints.positions):
            target = max(target, int(widths[hints.positions].min()))
        indicator = np.zeros(size, dtype=np.uint32)
        indicator[hints.positions & survivors] = 1
        if hints.nil:
            indicator[survivors] = 1
        indicator[0] = 0  # an empty AND is no merge
        indicators.append(indicator)
    # Only the surviving nodes' bits: every subset here lies within the survivors. Every surviving
    # node lies in some mask of every list, so the ANDs reach a mask holding it: never none.
    bits = [j for j in range(len(problem.numa_ids)) if survivors >> j & 1]
    reached = _reached(indicators, bits, len(problem.numa_ids))
    reached_widths = widths[reached]
    present = set(np.unique(reached_widths).tolist())
    width = next(w for w in _width_order(target, max(present)) if w in present)
    return _array_pick(problem, reached[reached_widths == width])


def fast_merge_hints(
    policy: str,
    numa_nodes: Iterable[int],
    providers: Any,
    *,
    options: Mapping[str, Any] | PolicyOptions | None = None,
    distances: Any = None,
    feature_gates: Mapping[str, bool] | None = None,
    enforce_numa_limit: bool = False,
) -> tuple[TopologyHint, bool]:
    """Same inputs and result as :func:`~toposched.kubelet.topology_manager.merge_hints`, fast.

    Returns exactly upstream's ``(hint, admit)`` without walking the cross product of the hint
    lists (see the module docstring). Inputs are validated exactly as for ``merge_hints``; the
    one difference is that the kubelet's refusal of machines with more NUMA nodes than
    ``max-allowable-numa-nodes`` is only applied when ``enforce_numa_limit`` is true, so the
    scheduler can reason about larger machines with the same rules.
    """
    problem = prepare_merge(
        policy,
        numa_nodes,
        providers,
        options=options,
        distances=distances,
        enforce_numa_limit=enforce_numa_limit,
        feature_gates=feature_gates,
    )
    if policy == POLICY_NONE:
        return TopologyHint(None, False), True
    mask, preferred = _fast_best(problem)
    return finish_merge(problem, mask, preferred)
