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
        # key -> (values, known, stamp, whether every row was known at that stamp)
        self._entries: OrderedDict[Hashable, tuple[np.ndarray, np.ndarray, int, bool]] = OrderedDict()

    def values(self, key: Hashable, rows: np.ndarray, compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """The values of ``rows`` for ``key`` (read-only); ``compute(rows)`` gives the values of the rows
        not known yet (each row's value must depend on that row and the key alone).

        Asked for every row (:meth:`NodeTable.all_rows`) with every row known before, the rows to
        compute are exactly the ones changed since, and the kept array itself is the answer: no pass
        over the rows, which the table's 5,000 rows would cost ~20 µs per key and pod."""
        table = self.table
        size = table.size
        every = rows is table.all_rows()
        entry = self._entries.pop(key, None)
        changed = table.changed_since(entry[2]) if entry is not None and len(entry[0]) <= size else None
        if entry is None or changed is None:
            values, known, complete = np.zeros(size, dtype=np.int64), np.zeros(size, dtype=bool), False
        else:  # rows of nodes that joined since are new and unknown, and among the changed ones
            values, known, complete = grown(entry[0], size), grown(entry[1], size, False), entry[3]
            known[changed] = False
        missing = changed if every and complete else rows[~known[rows]]
        if len(missing):
            values[missing] = compute(missing)
            known[missing] = True
        # Every row is known now if every row was asked, or if every row was known before and the
        # changed ones were all among those asked.
        complete = every or (complete and changed is not None and bool(known[changed].all()))
        self._entries[key] = (values, known, table.stamp, complete)
        if len(self._entries) > self.limit:
            self._entries.popitem(last=False)
        if every:
            out = values.view()
            out.flags.writeable = False
            return out
        return values[rows]
