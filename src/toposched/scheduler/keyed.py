"""One plugin's answer for every row, kept per key of the pod and brought up to date row by row."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from toposched.scheduler.table import NodeTable

__all__ = ["KeyedRows"]


class KeyedRows:
    """Per key a plugin gives for a pod (what of the pod its answer reads), an int64 value for every
    row of ``table``: recomputed only at the rows the table rebuilt since, so pods of one key cost
    what changed, whatever else their shapes differ in. At most ``limit`` keys are kept, least
    recently used dropped."""

    def __init__(self, table: NodeTable, limit: int = 64) -> None:
        self.table = table
        self.limit = limit
        self._entries: OrderedDict[Hashable, tuple[np.ndarray, int]] = OrderedDict()

    def values(self, key: Hashable, compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Every row's value for ``key``; ``compute(rows)`` gives the values of the rows it is asked
        about (each row's value must depend on that row and the key alone)."""
        table = self.table
        size = table.size
        entry = self._entries.pop(key, None)
        changed = table.changed_since(entry[1]) if entry is not None and len(entry[0]) == size else None
        if entry is None or changed is None:
            values = compute(np.arange(size, dtype=np.int64))
        else:
            values = entry[0]
            if len(changed):
                values[changed] = compute(changed)
        self._entries[key] = (values, table.stamp)
        if len(self._entries) > self.limit:
            self._entries.popitem(last=False)
        return values
