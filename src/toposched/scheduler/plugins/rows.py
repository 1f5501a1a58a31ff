"""Running a plugin's exact per-node filter over chosen rows of the node table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from toposched.scheduler.framework import CycleState
from toposched.scheduler.table import NodeTable
from toposched.workload import Pod

__all__ = ["filter_rows", "refusals"]


def refusals(plugin: Any, state: CycleState, pod: Pod, table: NodeTable, rows: Sequence[int],
             positions: Iterable[int]) -> dict[int, str]:
    """Apply ``plugin.filter`` to ``rows[positions]``: the message of every position it refuses (gone nodes pass)."""
    refused: dict[int, str] = {}
    for i in positions:
        record = table.cluster.nodes.get(table.names[rows[i]])
        if record is None:
            continue
        status = plugin.filter(state, pod, record)
        if not status.is_success:
            refused[int(i)] = status.message
    return refused


def filter_rows(plugin: Any, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray,
                positions: np.ndarray, ok: np.ndarray) -> set[str]:
    """Apply ``plugin.filter`` to ``rows[positions]``; clear ``ok`` where it refuses; return the reasons given."""
    refused = refusals(plugin, state, pod, table, rows, positions)
    for i in refused:
        ok[i] = False
    return set(refused.values())
