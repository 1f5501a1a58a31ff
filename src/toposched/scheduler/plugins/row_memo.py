"""Per-row facts a plugin derives from node records, kept current with the node table's change log."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np

from toposched.scheduler.cluster import NodeRecord
from toposched.scheduler.table import NodeTable, grown_in_place

__all__ = ["RowMemo"]


class RowMemo:
    """For every row of one :class:`NodeTable`: a class id (rows whose nodes have equal ``classify``
    keys share one) and ``width`` integers from ``measure``. Rows of gone nodes have class -1.

    :meth:`update` recomputes only the rows the table rebuilt since the last update, so a
    plugin's per-pod work over every row is array arithmetic on these columns, and the Python
    work per node happens once per change of the node.
    """

    def __init__(self, classify: Callable[[NodeRecord], Hashable], measure: Callable[[NodeRecord], Sequence[int]],
                 width: int) -> None:
        self._classify = classify
        self._measure = measure
        self.width = width
        self.keys: list[Hashable] = []  # class id -> key
        self._ids: dict[Hashable, int] = {}
        self.cls = np.full(0, -1, dtype=np.int64)
        self.values = np.zeros((0, width), dtype=np.int64)
        self._stamp: int | None = None

    def update(self, table: NodeTable) -> None:
        """Bring every row up to date with the table (as of its last refresh)."""
        size = table.size
        rows = table.changed_since(self._stamp) if self._stamp is not None else None
        if rows is None:  # every row is read again (also after the table renumbered its rows)
            self.cls = np.full(size, -1, dtype=np.int64)
            self.values = np.zeros((size, self.width), dtype=np.int64)
        elif len(self.cls) < size:  # nodes joined: their rows are among the changed ones
            self.cls, self.values = grown_in_place(self.cls, size, -1), grown_in_place(self.values, size, axis=0)
        todo = range(size) if rows is None else rows.tolist()
        nodes = table.cluster.nodes
        for row in todo:
            record = nodes.get(table.names[row])
            if record is None:
                self.cls[row] = -1
                continue
            key = self._classify(record)
            ident = self._ids.get(key)
            if ident is None:
                ident = self._ids[key] = len(self.keys)
                self.keys.append(key)
            self.cls[row] = ident
            self.values[row] = self._measure(record)
        self._stamp = table.stamp
