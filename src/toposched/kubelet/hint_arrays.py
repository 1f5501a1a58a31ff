"""Hint lists held as NumPy arrays, for machines with many NUMA nodes.

On a 16-NUMA machine the CPU and memory managers each offer up to 65,535 hints per resource.
As a Python list of ``(mask, preferred)`` tuples such a list costs milliseconds to build, and
the merge then rebuilds it as sets (measured on the wide benchmark mix: 12 ms per admission on
a 16-NUMA machine, most of it in these conversions). :class:`MaskHintArray` keeps the hints as
the providers compute them, one flag per subset, and reads as the list it stands for, so any
code that walks hint lists (the exhaustive merge, the tests) works unchanged while the fast
merge reads the arrays.

Subsets of a machine's NUMA ids are addressed by *positions* as in
:func:`~toposched.kubelet.topology_manager.numa_subsets`: bit ``i`` of a position stands for
the ``i``-th id, so the subsets of ``n`` ids are the integers below ``2**n`` and a list of hints
becomes an index into arrays of that size.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, overload

import numpy as np

__all__ = ["MaskHintArray", "distance_sums", "position_of", "positions_of", "subset_masks", "subset_order", "subset_widths"]


class MaskHintArray(Sequence[tuple[int, bool]]):
    """A provider's hint list ``[(mask, preferred), ...]`` held densely over the subsets of ``ids``.

    ``valid[p]`` says whether the subset at position ``p`` is a hint and ``preferred[p]`` whether
    that hint is preferred (both boolean arrays of ``2**len(ids)``; position 0, the empty set, is
    never a hint). It compares equal to the list of tuples it stands for, in upstream's order of
    the subsets (:func:`subset_order`), iterates and indexes as that list (built on first need),
    and is never changed.
    """

    __slots__ = ("_items", "_positions", "ids", "preferred", "valid")

    def __init__(self, ids: tuple[int, ...], valid: np.ndarray, preferred: np.ndarray) -> None:
        self.ids = ids
        self.valid = valid
        self.preferred = preferred
        self._positions: np.ndarray | None = None
        self._items: list[tuple[int, bool]] | None = None

    @property
    def positions(self) -> np.ndarray:
        """The hints' positions, ascending (not upstream's order)."""
        if self._positions is None:
            self._positions = np.flatnonzero(self.valid)
        return self._positions

    @property
    def masks(self) -> np.ndarray:
        """The hints' NUMA bitmasks, in the order of :attr:`positions`."""
        return subset_masks(self.ids)[self.positions]

    def _list(self) -> list[tuple[int, bool]]:
        if self._items is None:
            order = subset_order(len(self.ids))
            listed = order[self.valid[order]]
            self._items = list(zip(subset_masks(self.ids)[listed].tolist(), self.preferred[listed].tolist()))
        return self._items

    def __len__(self) -> int:
        return len(self.positions)

    def __iter__(self) -> Iterator[tuple[int, bool]]:
        return iter(self._list())

    @overload
    def __getitem__(self, index: int) -> tuple[int, bool]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, bool]]: ...
    def __getitem__(self, index: Any) -> Any:
        return self._list()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MaskHintArray):
            return self._list() == other._list()
        if isinstance(other, (list, tuple)):
            return self._list() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MaskHintArray({self._list()!r})"


@lru_cache(maxsize=32)
def subset_order(n: int) -> np.ndarray:
    """The positions of the non-empty subsets of ``n`` ids in upstream's ``IterateBitMasks`` order,
    as :func:`~toposched.kubelet.topology_manager.numa_subsets` lists them: by width, then
    lexicographically by the ids (read-only)."""
    positions = np.arange(1, 1 << n, dtype=np.int64)
    # Among subsets of one width, combinations(range(n), width) comes in the descending order of
    # the positions with their bits reversed (the first id as the highest bit).
    reversed_bits = np.zeros(len(positions), dtype=np.int64)
    for i in range(n):
        reversed_bits |= ((positions >> i) & 1) << (n - 1 - i)
    order = positions[np.lexsort((-reversed_bits, subset_widths(n)[1:]))]
    order.setflags(write=False)
    return order


def position_of(mask: int, ids: tuple[int, ...]) -> int:
    """The position over ``ids`` of one NUMA bitmask (bits of other ids are dropped)."""
    return sum(1 << j for j, numa in enumerate(ids) if mask >> numa & 1)


@lru_cache(maxsize=32)
def subset_widths(n: int) -> np.ndarray:
    """Per position below ``2**n``: how many ids the subset holds (read-only)."""
    widths = np.zeros(1 << n, dtype=np.int64)
    for j in range(n):
        widths[1 << j: 2 << j] = widths[: 1 << j] + 1
    widths.setflags(write=False)
    return widths


@lru_cache(maxsize=32)
def subset_masks(ids: tuple[int, ...]) -> np.ndarray:
    """Per position below ``2**len(ids)``: the subset as a NUMA bitmask (read-only)."""
    masks = np.zeros(1 << len(ids), dtype=np.int64)
    for j, numa in enumerate(ids):
        masks[1 << j: 2 << j] = masks[: 1 << j] | (1 << numa)
    masks.setflags(write=False)
    return masks


def positions_of(masks: np.ndarray, ids: tuple[int, ...]) -> np.ndarray:
    """The positions over ``ids`` of NUMA bitmasks that name only those ids."""
    if ids == tuple(range(len(ids))):
        return masks
    out = np.zeros(len(masks), dtype=np.int64)
    for j, numa in enumerate(ids):
        out |= ((masks >> numa) & 1) << j
    return out


_DISTANCE_SUMS: dict[Any, np.ndarray] = {}
_DISTANCE_SUMS_KEPT = 32


def distance_sums(ids: tuple[int, ...], distances: Mapping[int, Mapping[int, int]]) -> np.ndarray:
    """Per position below ``2**len(ids)``: the sum of the distances between every ordered pair of
    the subset's nodes (upstream compares ``sum / count**2`` between equally wide masks), as
    :meth:`~toposched.kubelet.topology_manager.MergeProblem.distance_sum` gives it for one mask.

    Built in ``2**n`` steps: adding node ``j`` to a subset of the nodes before it adds its
    distances to and from each of them and to itself. Kept per machine.
    """
    key = (ids, tuple(tuple(distances[a][b] for b in ids) for a in ids))
    sums = _DISTANCE_SUMS.get(key)
    if sums is not None:
        return sums
    n = len(ids)
    sums = np.zeros(1 << n, dtype=np.int64)
    for j, b in enumerate(ids):
        # to_j[s]: for a subset s of the first j nodes, the distances between node j and s's nodes.
        to_j = np.zeros(1 << j, dtype=np.int64)
        for i, a in enumerate(ids[:j]):
            to_j[1 << i: 2 << i] = to_j[: 1 << i] + distances[a][b] + distances[b][a]
        sums[1 << j: 2 << j] = sums[: 1 << j] + to_j + distances[b][b]
    sums.setflags(write=False)
    if len(_DISTANCE_SUMS) >= _DISTANCE_SUMS_KEPT:
        _DISTANCE_SUMS.pop(next(iter(_DISTANCE_SUMS)))
    _DISTANCE_SUMS[key] = sums
    return sums
