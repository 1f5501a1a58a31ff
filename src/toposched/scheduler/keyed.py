"""One plugin's answer per row, kept per key of the pod and recomputed only where a node changed."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from toposched.scheduler.table import NodeTable, grown

__all__ = ["KeyedRows"]


class KeyedRows:
    """Per key a plugin gives for a pod (what of the pod its answer reads), an int64 value per row
    of ``table``, computed the first time a row is asked about and again only after the table
    rebuilt that row: pods of one key cost what changed, whatever else their shapes differ in. At
    most ``limit`` keys are kept, least recently used dropped."""

    def __init__(self, table: NodeTable, limit: int = 64) -> None:
        self.table = table
        self.limit = limit
        self._entries: OrderedDict[Hashable, tuple[np.ndarray, np.ndarray, int]] = OrderedDict()

    def values(self, key: Hashable, rows: np.ndarray, compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """The values of ``rows`` for ``key``; ``compute(rows)`` gives the values of the rows not known
        yet (each row's value must depend on that row and the key alone)."""
        table = self.table
        size = table.size
        entry = self._entries.pop(key, None)
        changed = table.changed_since(entry[2]) if entry is not None and len(entry[0]) <= size else None
        if entry is None or changed is None:
            values, known = np.zeros(size, dtype=np.int64), np.zeros(size, dtype=bool)
        else:  # rows of nodes that joined since are new and unknown
            values, known = grown(entry[0], size), grown(entry[1], size, False)
            known[changed] = False
        missing = rows[~known[rows]]
        if len(missing):
            values[missing] = compute(missing)
            known[missing] = True
        self._entries[key] = (values, known, table.stamp)
        if len(self._entries) > self.limit:
            self._entries.popitem(last=False)
        return values[rows]
