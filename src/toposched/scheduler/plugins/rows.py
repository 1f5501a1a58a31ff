"""Running a plugin's exact per-node filter over chosen rows of the node table."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from toposched.scheduler.framework import CycleState
from toposched.scheduler.status import Code, Refusal, code_of, reason_of
from toposched.scheduler.table import NodeTable
from toposched.workload import Pod

__all__ = ["filter_rows", "refusals", "refusals_few"]


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
                positions: np.ndarray, ok: np.ndarray, summary: Callable[[set[str]], str]) -> Any:
    """Apply ``plugin.filter`` to ``rows[positions]``; clear ``ok`` where it refuses; return the batch
    form's reason: ``summary`` of the texts given, for every refused row, with each row's own code
    (one reason when every refusal has one code, else one per row)."""
    refused = refusals(plugin, state, pod, table, rows, positions)
    for i in refused:
        ok[i] = False
    text = str(summary({str(r) for r in refused.values()}))
    kinds = {code_of(r) for r in refused.values()}
    if len(kinds) <= 1:
        return _coded(text, kinds.pop() if kinds else Code.UNSCHEDULABLE)
    out = [""] * len(rows)
    for i, reason in refused.items():
        out[i] = _coded(text, code_of(reason))
    return out


def refusals_few(plugin: Any, state: CycleState, pod: Pod, table: NodeTable, rows: Sequence[int],
                 positions: Iterable[int], summary: Callable[[set[str]], str]) -> list[str | None]:
    """:func:`filter_rows` for a few rows: None where a row passes, else the summary with its own code."""
    refused = refusals(plugin, state, pod, table, rows, positions)
    text = str(summary({str(r) for r in refused.values()}))
    return [_coded(text, code_of(refused[i])) if i in refused else None for i in range(len(rows))]


def _coded(text: str, code: Code) -> str:
    return text if code == Code.UNSCHEDULABLE else Refusal(text, code)
