"""Choosing how the kubelet model's hint providers list NUMA subsets, so tests run both ways."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from toposched.kubelet import topology_manager


@contextmanager
def subset_arrays_from(numa: int | None) -> Iterator[None]:
    """Within the block, hint providers list subsets with NumPy from ``numa`` NUMA nodes on (None:
    the default threshold); the default is back afterwards."""
    default = topology_manager.ARRAY_SUBSETS_FROM
    topology_manager.ARRAY_SUBSETS_FROM = default if numa is None else numa
    try:
        yield
    finally:
        topology_manager.ARRAY_SUBSETS_FROM = default
