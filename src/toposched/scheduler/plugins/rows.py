"""Running a plugin's exact per-node filter over chosen rows of the node table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from toposched.scheduler.framework import CycleState, RowReasons
from toposched.scheduler.status import Code, code_of, reason_of
from toposched.scheduler.table import NodeTable
from toposched.workload import Pod

__all__ = ["ReasonCodes", "filter_rows", "refusals", "refusals_few"]


def refusals(plugin: Any, state: CycleState, pod: Pod, table: NodeTable, rows: Sequence[int],
             positions: Iterable[int]) -> dict[int, str]:
    """Apply ``plugin.filter`` to ``rows[positions]``: the reason of every position it refuses (its
    message, a :class:`~toposched.scheduler.status.Refusal` when the code is not Unschedulable;
    gone nodes pass)."""
    refused: dict[int, str] = {}
    for i in positions:
        record = table.cluster.nodes.get(table.names[rows[i]])
        if record is None:
            continue
        status = plugin.filter(state, pod, record)
        if not status.is_success:
            refused[int(i)] = reason_of(status)
    return refused


def filter_rows(plugin: Any, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray,
                positions: np.ndarray, ok: np.ndarray) -> Any:
    """Apply ``plugin.filter`` to ``rows[positions]``; clear ``ok`` where it refuses; return the batch
    form's reason: each refused row's own per-node reason, with its code."""
    reasons = ReasonCodes(len(rows))
    for i, reason in refusals(plugin, state, pod, table, rows, positions).items():
        ok[i] = False
        reasons.set(i, reason)
    return reasons.result()


def refusals_few(plugin: Any, state: CycleState, pod: Pod, table: NodeTable, rows: Sequence[int],
                 positions: Iterable[int]) -> list[str | None]:
    """:func:`filter_rows` for a few rows: None where a row passes, else its own reason and code."""
    refused = refusals(plugin, state, pod, table, rows, positions)
    return [refused.get(i) for i in range(len(rows))]


class ReasonCodes:
    """A batch form's per-row reasons as :class:`~toposched.scheduler.framework.RowReasons`: each
    reason (a text, or a :class:`~toposched.scheduler.status.Refusal` carrying another code)
    interned once, so a row's reason is its own whatever other rows are judged with it."""

    def __init__(self, size: int) -> None:
        self.codes = np.zeros(size, dtype=np.int64)  # 0: no reason (the row passes)
        self.texts: list[str] = [""]
        self._index: dict[tuple[str, Code], int] = {}

    def set(self, at: Any, reason: str) -> None:
        """``reason`` for the rows ``at`` (a position, or positions)."""
        key = (str(reason), code_of(reason))
        index = self._index.get(key)
        if index is None:
            index = self._index[key] = len(self.texts)
            self.texts.append(reason)
        self.codes[at] = index

    def result(self) -> Any:
        """The reasons as the batch form returns them ("" when no row was refused)."""
        return RowReasons(self.codes, self.texts) if len(self.texts) > 1 else ""
