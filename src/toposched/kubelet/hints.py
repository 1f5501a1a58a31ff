"""Topology hints: the common currency between the kubelet's resource managers.

A hint says "this resource could be allocated from these NUMA nodes", and whether that
allocation would be the preferred (narrowest possible) one. ``numa_nodes=None`` is upstream's
nil affinity ("any NUMA node", no preference); ``frozenset()`` is a non-nil, empty mask.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import combinations

__all__ = ["TopologyHint", "iterate_masks", "mask_of", "numa_set"]


@dataclass(frozen=True, slots=True)
class TopologyHint:
    """A NUMA affinity and whether it is preferred (upstream ``topologymanager.TopologyHint``)."""

    numa_nodes: frozenset[int] | None
    preferred: bool

    def __post_init__(self) -> None:
        if self.numa_nodes is not None and not isinstance(self.numa_nodes, frozenset):
            object.__setattr__(self, "numa_nodes", frozenset(self.numa_nodes))

    def __repr__(self) -> str:
        nodes = "any" if self.numa_nodes is None else sorted(self.numa_nodes)
        return f"TopologyHint({nodes}, preferred={self.preferred})"


def mask_of(numa_nodes: Iterable[int]) -> int:
    """The NUMA set as an int bitmask (bit i for NUMA node i)."""
    mask = 0
    for n in numa_nodes:
        mask |= 1 << n
    return mask


def numa_set(mask: int) -> frozenset[int]:
    """The NUMA ids of an int bitmask."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return frozenset(out)


def iterate_masks(numa_ids: Iterable[int]) -> Iterator[frozenset[int]]:
    """Every non-empty subset of ``numa_ids``, smallest first, in upstream's order.

    Matches the kubelet's ``bitmask.IterateBitMasks``: for k = 1..n, the k-subsets in
    lexicographic order of the sorted ids.
    """
    ids = sorted(numa_ids)
    for k in range(1, len(ids) + 1):
        for combo in combinations(ids, k):
            yield frozenset(combo)
