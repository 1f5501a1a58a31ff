"""Every table row's GPUs as arrays, so GPUShare judges and scores all rows in a few NumPy passes.

GPUShare reads a node's GPUs through per-node objects (:class:`NodeGPUState`, the kubelet's
whole-GPU holdings); doing that row by row for every share or whole-GPU pod cost ~3 ms a pod on
5,000 nodes. :class:`GPURows` keeps what those objects say as arrays over the table's rows (one
column per GPU slot), rebuilt only at the rows the table says changed since it last looked, and
answers the filter's counts and the packing policies' :class:`NodeBatch` from them.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from toposched.devices.fgd import MILLI, NodeBatch
from toposched.devices.share import GPURequest
from toposched.scheduler.table import NodeTable, grown_in_place

__all__ = ["UNKNOWN", "GPURows", "RowGPUs"]

UNKNOWN = 2**40  # free devices on NUMA nodes beyond the table's zone slots: no bound known


@dataclass(frozen=True)
class RowGPUs:
    """One node's GPUs as GPUShare reads them.

    Per GPU, in the node's device order: its memory, the compute and memory its shares use,
    whether the kubelet gave it whole (``busy``) and its free share in milli-GPU for the policies
    (0 where busy). ``whole``: per device-plugin GPU resource the node serves, how many such GPUs
    the kubelet could hand out, how many of those hold no shares, and what it hands out under a
    one-NUMA-node hint (:func:`~toposched.scheduler.plugins.gpu_share.aligned_picks`: the most GPUs
    one NUMA node has; per NUMA node in id order, bit ``n`` set where its pick of ``n`` holds no
    shares). ``devices``: on a kubelet that aligns devices to one NUMA node, per device resource it
    serves and NUMA node in id order, the free devices a hint naming that node counts
    (:func:`~toposched.scheduler.plugins.gpu_share.free_by_numa`); empty elsewhere.
    """

    model: str
    memory: Sequence[int]
    used_core: Sequence[int]
    used_memory: Sequence[int]
    busy: Sequence[bool]
    free_milli: Sequence[int]
    whole: Mapping[str, tuple[int, int, int, tuple[int, ...]]]
    devices: Mapping[str, tuple[int, ...]]


class GPURows:
    """:class:`RowGPUs` of every row of one table, as arrays (rows first; GPU slots second).

    What is kept per NUMA node is zone-major, in the table's zone slots (NUMA nodes in id order,
    :attr:`NodeTable.max_zones` of them) plus one last slot for the NUMA nodes beyond: there the
    picks are those NUMA nodes' together, and the free devices are unknown (:data:`UNKNOWN`).
    """

    def __init__(self) -> None:
        self.model_names: list[str] = [""]  # every model seen, "" (no GPUs) first; never shrinks
        self._model_codes: dict[str, int] = {"": 0}
        self._stamp = -1
        self._width = 0
        self.slots = 0
        self._allocate(0, 0)

    def _allocate(self, size: int, width: int) -> None:
        self.count = np.zeros(size, dtype=np.int64)
        self.smallest = np.zeros(size, dtype=np.int64)  # the smallest GPU memory (0 without GPUs)
        self.model_code = np.zeros(size, dtype=np.int64)  # per row, its GPU model's position in model_names
        self.memory = np.zeros((size, width), dtype=np.int64)
        self.used_core = np.zeros((size, width), dtype=np.int64)
        self.used_memory = np.zeros((size, width), dtype=np.int64)
        self.busy = np.zeros((size, width), dtype=bool)
        self.free_milli = np.zeros((size, width), dtype=np.int64)
        # resource -> (serves, free, clean, the most GPUs on one NUMA node, per zone slot the clean
        # one-node picks as bits (slots + 1 x rows))
        self.whole: dict[str, tuple[np.ndarray, ...]] = {}
        # resource -> per zone slot the free devices a one-node hint counts (slots + 1 x rows)
        self.devices: dict[str, np.ndarray] = {}
        self._facts: list[RowGPUs | None] = [None] * size  # what each row was written from
        self._width = width

    def update(self, table: NodeTable, read: Callable[[int], RowGPUs | None]) -> GPURows:
        """Bring the arrays up to date with ``table`` (as of its last refresh), reading each changed
        row with ``read`` (None for a row whose node is gone; rows of nodes that joined are among the
        changed ones); every row when the table renumbered its rows, the widest node gained GPUs or a
        new whole-GPU resource appeared."""
        rows = table.changed_since(self._stamp) if len(self.count) <= table.size else None
        stamp = table.stamp
        if rows is None:
            self._rebuild(table, read, self._width)
        else:
            if len(self.count) < table.size:  # nodes joined: their rows are among the changed ones
                self._extend(table.size)
            facts = [(row, read(row)) for row in rows.tolist()]
            widest = max((len(f.memory) for _, f in facts if f is not None), default=0)
            new = any(r not in self.whole for _, f in facts if f is not None for r in f.whole) or any(
                r not in self.devices for _, f in facts if f is not None for r in f.devices)
            if widest > self._width or new:
                self._rebuild(table, read, max(widest, self._width))
            else:
                for row, fact in facts:
                    self._write(row, fact)
        self._stamp = stamp
        return self

    def _extend(self, size: int) -> None:
        """Rows added up to ``size``, empty (no node) until written."""
        added = size - len(self._facts)
        for name in ("count", "smallest", "model_code", "memory", "used_core", "used_memory", "busy", "free_milli"):
            setattr(self, name, grown_in_place(getattr(self, name), size, axis=0))  # rows first here
        for resource, arrays in self.whole.items():
            self.whole[resource] = tuple(grown_in_place(a, size) for a in arrays)  # type: ignore[assignment]
        for resource, array in self.devices.items():
            self.devices[resource] = grown_in_place(array, size)
        self._facts += [None] * added

    def _rebuild(self, table: NodeTable, read: Callable[[int], RowGPUs | None], width: int) -> None:
        facts = [read(row) for row in range(table.size)]
        width = max([width] + [len(f.memory) for f in facts if f is not None])
        resources = sorted({r for f in facts if f is not None for r in f.whole})
        self._allocate(table.size, width)
        self.slots = table.max_zones
        for resource in resources:
            self.whole[resource] = (np.zeros(table.size, dtype=bool),
                                    *(np.zeros(table.size, dtype=np.int64) for _ in range(3)),
                                    np.zeros((self.slots + 1, table.size), dtype=np.int64))
        for resource in sorted({r for f in facts if f is not None for r in f.devices}):
            self.devices[resource] = np.zeros((self.slots + 1, table.size), dtype=np.int64)
        for row, fact in enumerate(facts):
            self._write(row, fact)

    def _write(self, row: int, fact: RowGPUs | None) -> None:
        if fact is not None and fact is self._facts[row]:
            return  # a reader that hands back the same object says nothing changed
        self._facts[row] = fact
        for array in (self.memory, self.used_core, self.used_memory, self.busy, self.free_milli):
            array[row] = 0
        for arrays in self.whole.values():
            for array in arrays:
                array[..., row] = 0
        for array in self.devices.values():
            array[:, row] = 0
        if fact is None:
            self.count[row] = self.smallest[row] = self.model_code[row] = 0
            return
        n = len(fact.memory)
        self.count[row] = n
        self.smallest[row] = min(fact.memory) if n else 0
        code = self._model_codes.get(fact.model)
        if code is None:
            code = self._model_codes[fact.model] = len(self.model_names)
            self.model_names.append(fact.model)
        self.model_code[row] = code
        if n:
            self.memory[row, :n] = fact.memory
            self.used_core[row, :n] = fact.used_core
            self.used_memory[row, :n] = fact.used_memory
            self.busy[row, :n] = fact.busy
            self.free_milli[row, :n] = fact.free_milli
        slots = self.slots
        for resource, (free, clean, most, by_numa) in fact.whole.items():
            serves, free_column, clean_column, most_column, picks = self.whole[resource]
            serves[row], free_column[row], clean_column[row], most_column[row] = True, free, clean, most
            picks[:min(len(by_numa), slots), row] = by_numa[:slots]
            picks[slots, row] = functools.reduce(operator.or_, by_numa[slots:], 0)
        for resource, counts in fact.devices.items():
            array = self.devices[resource]
            array[:min(len(counts), slots), row] = counts[:slots]
            array[slots, row] = UNKNOWN if len(counts) > slots else 0

    def fitting(self, request: GPURequest, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row: how many of its GPUs not held whole by the kubelet fit ``request`` (as
        :meth:`NodeGPUState.count_fitting` counts them), and how many GPUs are not held whole."""
        slots = np.arange(self._width)[None, :] < self.count[rows][:, None]
        # take along the rows: fancy indexing a 2-D array costs ~4x as much (see table.take_rows)
        candidates = slots & ~self.busy.take(rows, axis=0)
        core, memory = self.used_core.take(rows, axis=0), self.used_memory.take(rows, axis=0)
        if request.whole:
            fits = (core == 0) & (memory == 0)
        else:
            capacity = self.memory.take(rows, axis=0)
            wanted = request.memory_bytes if request.memory_bytes is not None else capacity * request.memory_ratio // MILLI
            fits = (MILLI - core >= (request.core or 0)) & (capacity - memory >= wanted)
        return (fits & candidates).sum(axis=1), candidates.sum(axis=1)

    def batch(self, table: NodeTable, rows: np.ndarray) -> NodeBatch:
        """The rows as the packing policies see them (what :meth:`NodeBatch.from_views` makes of their
        views): the host part is what the node's pods leave of its allocatable CPU and memory (0 where
        the node is gone)."""
        count = self.count.take(rows)
        width = int(count.max()) if len(rows) else 0
        live = table.pick(table.view("live"), rows)
        # The batch's models in first-seen order, and each row's position among them: a pass per model
        # present (a few), where np.unique would sort the rows.
        codes = self.model_code.take(rows)
        names = self.model_names
        present = np.flatnonzero(np.bincount(codes, minlength=len(names))).tolist()
        seen = [code for _, code in sorted((int(np.argmax(codes == code)), code) for code in present)]
        position = np.zeros(len(names), dtype=np.intp)
        position[seen] = np.arange(len(seen))
        return NodeBatch.from_checked(
            cpu_free=np.maximum(table.pick(table.free("cpu"), rows), 0) * live,
            memory_free=np.maximum(table.pick(table.free("memory"), rows), 0) * live,
            gpu_free=np.ascontiguousarray(self.free_milli.take(rows, axis=0)[:, :width]), gpu_count=count,
            gpu_model=tuple(names[code] for code in codes.tolist()),
            models=tuple(names[code] for code in seen), model_index=position.take(codes))
