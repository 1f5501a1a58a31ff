"""Hint lists held as NumPy arrays, for machines with many NUMA nodes.

On a 16-NUMA machine the CPU and memory managers each offer up to 65,535 hints per resource.
As a Python list of ``(mask, preferred)`` tuples such a list costs milliseconds to build, and
the merge then rebuilds it as sets (measured on the wide benchmark mix: 12 ms per admission on
a 16-NUMA machine, most of it in these conversions). :class:`MaskHintArray` keeps the hints as
the arrays the providers computed them in, and reads as the list it stands for, so any code
that walks hint lists (the exhaustive merge, the tests) works unchanged while the fast merge
reads the arrays.

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

__all__ = ["MaskHintArray", "distance_sums", "positions_of", "subset_masks", "subset_widths"]


class MaskHintArray(Sequence[tuple[int, bool]]):
    """A provider's hint list ``[(mask, preferred), ...]`` held as arrays.

    ``ids`` are the NUMA ids the ``positions`` refer to; ``masks`` are the same subsets as
    NUMA bitmasks and ``preferred`` their flags, all in the list's order. It compares equal to
    the list of tuples it stands for, iterates and indexes as that list (built on first need),
    and is never changed.
    """

    __slots__ = ("_items", "ids", "masks", "positions", "preferred")

    def __init__(self, ids: tuple[int, ...], positions: np.ndarray, masks: np.ndarray, preferred: np.ndarray) -> None:
        self.ids = ids
        self.positions = positions
        self.masks = masks
        self.preferred = preferred
        self._items: list[tuple[int, bool]] | None = None

    def _list(self) -> list[tuple[int, bool]]:
        if self._items is None:
            self._items = list(zip(self.masks.tolist(), self.preferred.tolist()))
        return self._items

    def __len__(self) -> int:
        return len(self.masks)

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
