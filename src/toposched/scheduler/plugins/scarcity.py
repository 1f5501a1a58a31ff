"""ScarcityScore: keep pods off capacity that the workload's demanding pods can use nowhere else.

MostAllocated packing fills the nodes that are already busy; on a mixed cluster those are often
the few machines with 1 GiB hugepages and large NUMA nodes, and Burstable pods that would fit any
small VM end up there, so the Guaranteed pods that only those machines can take wait. This score
is the NUMA and hugepage counterpart of the FGD paper's GPU fragmentation score: it judges a
placement by what it leaves usable for the *typical demanding pods*, learned from the pods seen.

**Learned target.** Every pod that is reserved, or that finds no node (PostFilter), is observed
once. A *demanding* pod is a Guaranteed pod with exclusive CPUs: its aligned request (exclusive
CPUs, memory and hugepages the kubelet pins to one NUMA set) is one demand shape. The last
``window`` demanding pods make the target: its ``shapes`` most frequent shapes, each weighted by
how often it was asked for over how much of it the cluster could host (demand over supply, so
capacity that few nodes have counts more). The target is recomputed every ``epoch`` observations;
its version is part of the scheduler's pod-shape key, so cached scores never outlive it.

**Value of a node** for the target: per shape, how many such pods its NUMA zones can still hold
(per zone, the fewest of each resource's free amount over the shape's need; summed over zones;
capped by what the node's free CPU and memory allow), times the shape's CPUs and weight, summed
over shapes. Nodes without topology data or whose kubelet does not pin CPUs hold no demanding
pod (their value is 0).

**Score.** Pods asking for devices or GPU shares are left to GPUShare and DeviceLocality (no
opinion here). For the others, the loss of value the pod causes on the node: the pod's aligned request taken from the
first zone that holds it (the kubelet's choice among equally narrow NUMA sets), its CPU and
memory requests from the node's free amounts. NormalizeScore maps the smallest loss among the
feasible nodes to 100 and the largest to 0; with no target, or where every node loses the same,
it has no opinion (100 everywhere) and the other scores decide.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from toposched.errors import InputError
from toposched.scheduler.cluster import NodeRecord
from toposched.scheduler.framework import MAX_NODE_SCORE, CycleState, registry
from toposched.scheduler.plugins.numa import aligned_request
from toposched.scheduler.status import Status
from toposched.scheduler.table import NodeTable
from toposched.workload import GUARANTEED, Pod

__all__ = ["ScarcityScore"]

_ZONE_RESOURCES = ("cpu", "memory")
_SEEN_LIMIT = 4096  # pod uids remembered so a retried pod is observed once


@registry.register
class ScarcityScore:
    """Prefer the node where the pod takes the least capacity the workload's demanding pods need (module notes)."""

    name = "ScarcityScore"

    def __init__(self, args: Mapping[str, Any]) -> None:
        unknown = set(args) - {"window", "epoch", "shapes"}
        if unknown:
            raise InputError(f"unknown argument {sorted(unknown)[0]!r} (window, epoch, shapes)", field="args",
                             source=f"plugin {self.name}")
        self.window = _positive(args.get("window", 200), "window")
        self.epoch = _positive(args.get("epoch", 25), "epoch")
        self.shapes = _positive(args.get("shapes", 8), "shapes")
        self._recent: deque[tuple[tuple[str, int], ...]] = deque(maxlen=self.window)
        self._seen: dict[str, None] = {}
        self._since_epoch = 0
        self._target: tuple[tuple[tuple[tuple[str, int], ...], int], ...] = ()  # (shape, count)
        self._weights: np.ndarray | None = None  # per target shape, computed against the cluster once per version
        self.shape_version = 0

    # ---- learning ------------------------------------------------------------------------------

    def _observe(self, pod: Pod) -> None:
        uid = pod.uid or pod.key
        if uid in self._seen:
            return
        self._seen[uid] = None
        if len(self._seen) > _SEEN_LIMIT:
            self._seen.pop(next(iter(self._seen)))
        if pod.qos_class != GUARANTEED:
            return
        request = aligned_request(CycleState(), pod).pod
        if "cpu" not in request:
            return
        self._recent.append(tuple(sorted((r, v) for r, v in request.items() if "/" not in r)))
        self._since_epoch += 1
        if self._since_epoch >= self.epoch or not self._target:
            self._since_epoch = 0
            target = tuple(Counter(self._recent).most_common(self.shapes))
            if target != self._target:
                self._target, self._weights = target, None
                self.shape_version += 1

    def reserve(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        """Observe the placed pod (it reserves nothing)."""
        self._observe(pod)
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node: NodeRecord) -> None:
        """Nothing to give back."""

    def post_filter(self, state: CycleState, pod: Pod, reasons: Mapping[str, int]) -> tuple[None, Status]:
        """Observe a pod no node could take (the demanding pods that wait are the ones to learn); nominates nothing."""
        self._observe(pod)
        return None, Status.unschedulable("", plugin=self.name)

    # ---- scoring -------------------------------------------------------------------------------

    def _value(self, table: NodeTable, zfree: np.ndarray, free: np.ndarray, cols: list[list[int]],
               needs: list[np.ndarray], valid: np.ndarray) -> np.ndarray:
        """Per row, the CPU-weighted number of pods of each target shape the rows' zones can still hold."""
        weights = self._weights
        assert weights is not None
        value = np.zeros(len(zfree), dtype=np.float64)
        for k, (shape, _) in enumerate(self._target):
            need = needs[k]
            per_zone = (zfree[:, :, cols[k]] // need).min(axis=2)
            held = np.where(valid, per_zone, 0).sum(axis=1)
            node_cap = (free // np.maximum(need[:2], 1)).min(axis=1)
            value += weights[k] * need[0] * np.minimum(held, node_cap)
        return value

    def _plan(self, table: NodeTable) -> tuple[list[list[int]], list[np.ndarray]]:
        cols, needs = [], []
        for shape, _ in self._target:
            wanted = dict(shape)
            names = list(_ZONE_RESOURCES) + sorted(r for r in wanted if r not in _ZONE_RESOURCES)
            cols.append([table.zone_column(r) for r in names])
            needs.append(np.array([max(1, wanted.get(r, 0)) if r in _ZONE_RESOURCES else wanted[r] for r in names],
                                  dtype=np.int64))
        return cols, needs

    def score_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """Per row, the value the pod would take away from the target (raw; see :meth:`normalize_scores`)."""
        if not self._target or any("/" in r for c in pod.all_containers for r in c.limits_or_requests):
            # No target yet; or a pod asking for devices or GPU shares, whose packing GPUShare and
            # DeviceLocality judge (the FGD paper's measure): no opinion.
            return np.zeros(len(rows), dtype=np.int64)
        cols, needs = self._plan(table)  # may add zone columns: read the arrays afterwards
        node_cols = [table.resource_column(r) for r in _ZONE_RESOURCES]
        able = table.view("topology") & table.view("cpu_static") & table.view("live")
        if self._weights is None:
            everything = np.flatnonzero(able)
            supply = self._supply(table, everything, cols, needs, node_cols)
            demand = np.array([count for _, count in self._target], dtype=np.float64)
            self._weights = demand / demand.sum() / np.maximum(supply, 1.0)
        zfree = table.view("zfree")[rows]
        valid = table.view("zvalid")[rows] & able[rows][:, None]
        free = table.view("alloc")[rows][:, node_cols] - table.view("used")[rows][:, node_cols]
        before = self._value(table, zfree, free, cols, needs, valid)
        after_zones = zfree.copy()
        request = aligned_request(state, pod).pod
        zone_request = {r: v for r, v in request.items() if r in table.zone_resources}
        if zone_request:
            req_cols = [table.zone_column(r) for r in zone_request]
            want = np.array(list(zone_request.values()), dtype=np.int64)
            fits = (zfree[:, :, req_cols] >= want).all(axis=2) & valid
            has = fits.any(axis=1)
            first = fits.argmax(axis=1)
            picked = np.flatnonzero(has)
            for j, col in enumerate(req_cols):
                after_zones[picked, first[picked], col] -= want[j]
        wants = pod.effective_requests()
        after_free = free - np.array([wants.get(r, 0) for r in _ZONE_RESOURCES], dtype=np.int64)
        after = self._value(table, after_zones, np.maximum(after_free, 0), cols, needs, valid)
        loss = np.maximum(before - after, 0.0)
        return np.round(loss * 1e6).astype(np.int64)  # fixed point: the normalization needs only the order and ratios

    def _supply(self, table: NodeTable, rows: np.ndarray, cols: list[list[int]], needs: list[np.ndarray],
                node_cols: list[int]) -> np.ndarray:
        """Per target shape, how many such pods the whole cluster could hold now."""
        zfree = table.view("zfree")[rows]
        valid = table.view("zvalid")[rows]
        free = table.view("alloc")[rows][:, node_cols] - table.view("used")[rows][:, node_cols]
        out = []
        for k in range(len(self._target)):
            per_zone = (zfree[:, :, cols[k]] // needs[k]).min(axis=2)
            held = np.where(valid, per_zone, 0).sum(axis=1)
            node_cap = (free // np.maximum(needs[k][:2], 1)).min(axis=1)
            out.append(float(np.minimum(held, np.maximum(node_cap, 0)).sum()))
        return np.array(out, dtype=np.float64)

    def score(self, state: CycleState, pod: Pod, node: NodeRecord, table: NodeTable) -> int:
        """:meth:`score_all` for one node (raw)."""
        return int(self.score_all(state, pod, table, np.array([table.index[node.name]]))[0])

    def normalize_scores(self, state: CycleState, pod: Pod, raw: np.ndarray) -> np.ndarray:
        """The smallest loss among the feasible nodes scores 100, the largest 0, linearly between."""
        raw = np.asarray(raw, dtype=np.int64)
        if not len(raw):
            return raw
        low, high = int(raw.min()), int(raw.max())
        if high == low:
            return np.full(len(raw), MAX_NODE_SCORE, dtype=np.int64)
        return (MAX_NODE_SCORE - (raw - low) * MAX_NODE_SCORE // (high - low)).astype(np.int64)


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 100_000:
        raise InputError(f"{value!r} must be a positive integer", field=f"args.{name}", source="plugin ScarcityScore")
    return value
