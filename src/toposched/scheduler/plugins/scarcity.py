"""ScarcityScore: keep pods off capacity that the workload's demanding pods can use nowhere else.

MostAllocated packing fills the nodes that are already busy; on a mixed cluster those are often
the few machines with 1 GiB hugepages and large NUMA nodes, and Burstable pods that would fit any
small VM end up there, so the Guaranteed pods that only those machines can take wait. This score
is the NUMA and hugepage counterpart of the FGD paper's GPU fragmentation score: it judges a
placement by what it leaves usable for the *typical demanding pods*, learned from the pods seen.

**Only where something is rare.** On a cluster whose nodes all have the same hardware (NUMA
zones, reserved CPUs) no capacity is rarer on one node than on another: nothing is learned, the
score has no opinion, and it costs nothing. The weights below (demand over supply) then make
capacity that few nodes have count most.

**Learned target.** Every pod that is reserved, or that finds no node (PostFilter), is observed
once. A *demanding* pod is a Guaranteed pod with exclusive CPUs: its aligned request (exclusive
CPUs, memory and hugepages the kubelet pins to one NUMA set) is one demand shape. The last
``window`` demanding pods make the target: its ``shapes`` most frequent shapes, each weighted by
how often it was asked for over how much of it the cluster could host (demand over supply, so
capacity that few nodes have counts more). The target is recomputed every ``epoch`` observations;
its members change only when one falls out of the ``2 * shapes`` most frequent (so a steady
workload keeps its target). A row's raw score is computed for the target in force when the row
last changed: a new target is not worth re-scoring every cached row and pod shape at once (on
5,000 nodes that cost more than the score itself), and rows catch up as pods come and go.

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

import weakref
from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from toposched.kubelet.memory_manager import hugepage_resource_name
from toposched.scheduler import rowloops
from toposched.scheduler.cluster import Cluster, NodeRecord
from toposched.scheduler.framework import MAX_NODE_SCORE, CycleState, registry
from toposched.scheduler.plugin_args import ScarcityScoreArgs, plugin_args
from toposched.scheduler.plugins.node_cache import NodeCache
from toposched.scheduler.plugins.numa import aligned_request
from toposched.scheduler.status import Status
from toposched.scheduler.table import NodeTable, grown, take_rows
from toposched.workload import GUARANTEED, Pod

__all__ = ["ScarcityScore"]

_ZONE_RESOURCES = ("cpu", "memory")
_NO_LIMIT = np.iinfo(np.int64).max  # a column a target shape does not need limits nothing
_SEEN_LIMIT = 4096  # pod uids remembered so a retried pod is observed once
_SCALAR_DIVISION_ROWS = 64  # from this many rows, dividing by each need in turn beats one broadcast division


@registry.register
class ScarcityScore:
    """Prefer the node where the pod takes the least capacity the workload's demanding pods need (module notes)."""

    name = "ScarcityScore"

    def __init__(self, args: ScarcityScoreArgs | Mapping[str, Any]) -> None:
        args = plugin_args(ScarcityScoreArgs, args, self.name)
        self.window, self.epoch, self.shapes = args.window, args.epoch, args.shapes
        self._window = _DemandWindow(self.window)
        self._seen: dict[str, None] = {}
        self._since_epoch = 0
        self._target: tuple[tuple[tuple[tuple[str, int], ...], int], ...] = ()  # (shape, count)
        self._weights: np.ndarray | None = None  # per target shape, computed against the cluster once per version
        self.shape_version = 0
        self._planned: tuple[int, list[list[int]], list[np.ndarray]] | None = None
        self._rows: dict[int, tuple[Any, int, Any]] = {}  # row -> (its RowValues, target version, what it holds)
        self._vector: tuple[int, int, np.ndarray, np.ndarray, np.ndarray] | None = None  # see _held_all
        self._hardware: NodeCache[list[dict[str, int]]] = NodeCache()  # per node: its replica's empty zones
        self._alike_known: tuple[weakref.ref[Cluster], int, bool] | None = None  # (cluster, its replicas' version, alike?)
        self._plain: tuple[Any, list[tuple[list[int], list[int], float]], list[int]] | None = None  # score_few's plan
        self._losses: tuple[np.ndarray, np.ndarray] | None = None  # see _values
        self._stacked: tuple[int, list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None  # see _stacked_plan

    # ---- learning ------------------------------------------------------------------------------

    def _observe(self, state: CycleState, pod: Pod) -> None:
        uid = pod.uid or pod.key
        if uid in self._seen:
            return
        self._seen[uid] = None
        if len(self._seen) > _SEEN_LIMIT:
            self._seen.pop(next(iter(self._seen)))
        if pod.qos_class != GUARANTEED:
            return
        request = aligned_request(state, pod).pod  # the cycle's, computed once
        if "cpu" not in request:
            return
        if state.cluster is not None and self._alike(state.cluster):
            return  # every node offers the same: no capacity is rarer anywhere
        self._window.add(tuple(sorted((r, v) for r, v in request.items() if "/" not in r)))
        self._since_epoch += 1
        if self._since_epoch >= self.epoch or not self._target:
            self._since_epoch = 0
            self._retarget()

    def _retarget(self) -> None:
        """Renew the target from the window, changing it (and the version) only when its members must change.

        A member stays while it ranks among the ``2 * shapes`` most frequent shapes; a free place
        goes to the most frequent non-member. Near-ties between shapes of a steady workload
        therefore do not change the target at every epoch (each change makes the scheduler
        recompute its cached scores).
        """
        window = self._window
        ranked = window.ranked()
        counts = dict(ranked)
        members = [window.number(shape) for shape, _ in self._target]
        top = {number for number, _ in ranked[:2 * self.shapes]}
        kept = [number for number in members if number in top]
        for number, _ in ranked:
            if len(kept) >= self.shapes:
                break
            if number not in kept:
                kept.append(number)
        if set(kept) != set(members):
            self._target = tuple((window.shape(number), counts[number]) for number in kept)
            window.keep(set(kept))
            self._weights = None
            self.shape_version += 1

    def reserve(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        """Observe the placed pod (it reserves nothing)."""
        self._observe(state, pod)
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node: NodeRecord) -> None:
        """Nothing to give back."""

    def post_filter(self, state: CycleState, pod: Pod, reasons: Mapping[str, int]) -> tuple[None, Status]:
        """Observe a pod no node could take (the demanding pods that wait are the ones to learn); nominates nothing."""
        self._observe(state, pod)
        return None, Status.unschedulable("", plugin=self.name)

    # ---- scoring -------------------------------------------------------------------------------

    def _plan(self, table: NodeTable) -> tuple[list[list[int]], list[np.ndarray]]:
        """Per target shape: its zone columns (cpu, memory, then the others) and its needs there; kept per version."""
        if self._planned is not None and self._planned[0] == self.shape_version:
            return self._planned[1], self._planned[2]
        cols, needs = [], []
        for shape, _ in self._target:
            wanted = dict(shape)
            names = list(_ZONE_RESOURCES) + sorted(r for r in wanted if r not in _ZONE_RESOURCES)
            cols.append([table.zone_column(r) for r in names])
            needs.append(np.array([max(1, wanted.get(r, 0)) if r in _ZONE_RESOURCES else wanted[r] for r in names],
                                  dtype=np.int64))
        self._planned = (self.shape_version, cols, needs)
        return cols, needs

    def score_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """Per row, the value the pod would take away from the target (raw; see :meth:`normalize_scores`)."""
        if not self._target or pod.asks_extended:
            # No target yet; or a pod asking for devices or GPU shares, whose packing GPUShare and
            # DeviceLocality judge (the FGD paper's measure): no opinion.
            return np.zeros(len(rows), dtype=np.int64)
        wants = pod.effective_requests()
        take = [wants.get(r, 0) for r in _ZONE_RESOURCES]
        request = aligned_request(state, pod).pod
        if not any(take) and not request:
            return np.zeros(len(rows), dtype=np.int64)  # takes nothing any target shape needs (BestEffort)
        cols, needs = self._plan(table)  # may add zone columns: read the arrays afterwards
        totals_all, before_all, free_all = self._held_all(table, cols, needs)
        weights = self._weights
        assert weights is not None
        # Rows that cannot hold demanding pods lose nothing. When most rows are asked about, every row
        # is computed (whole arrays, no gathers) and the asked ones picked at the end. The arrays are
        # shape-major (shapes x rows): every operation runs along the rows.
        full = 2 * len(rows) >= table.size
        at = slice(0, table.size) if full else rows
        able = self._able(table, at)
        totals, before, free = (take_rows(a, at) for a in (totals_all, before_all, free_all))
        after_totals = totals
        zone_request = {r: v for r, v in request.items() if r in table.zone_resources}
        if zone_request:
            # Zones x rows (zone-major): the zones that hold the aligned request, the first of them
            # per row, and there the target shapes' columns before and after the pod.
            firsts = rowloops.first_zone_holding(table.zone_valid(), [table.zone_free(r) for r in zone_request],
                                                 list(zone_request.values()), None if full else rows)
            after_totals = after_zone_totals(table, totals, cols, needs, self._stacked_plan(cols, needs)[:3], zone_request,
                                             firsts, able, None if full else rows)
        out = row_losses(before, free, self._stacked_plan(cols, needs)[-1], np.array(take, dtype=np.int64), after_totals,
                         self._values(needs, weights), able)
        return table.pick(out, rows) if full else out

    def _stacked_plan(self, cols: list[list[int]], needs: list[np.ndarray]
                      ) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
        """Every target shape's needs over one set of zone columns: the columns, the needs (shapes x
        columns; 1 where a shape does not need a column), where a shape ignores a column, and each
        shape's CPU and memory need (2 x shapes); kept per target version."""
        if self._stacked is None or self._stacked[0] != self.shape_version:
            union = sorted({c for shape_cols in cols for c in shape_cols})
            need = np.ones((len(cols), len(union)), dtype=np.int64)
            ignored = np.ones((len(cols), len(union)), dtype=bool)
            for k, (shape_cols, shape_needs) in enumerate(zip(cols, needs)):
                for c, n in zip(shape_cols, shape_needs.tolist()):
                    need[k, union.index(c)], ignored[k, union.index(c)] = n, False
            self._stacked = (self.shape_version, union, need, ignored,
                             np.array([[n[0] for n in needs], [n[1] for n in needs]], dtype=np.int64))
        return self._stacked[1:]  # type: ignore[return-value]

    def _values(self, needs: list[np.ndarray], weights: np.ndarray) -> np.ndarray:
        """Per target shape, the value of one such pod (weight times CPUs); kept while the weights stand."""
        if self._losses is None or self._losses[0] is not weights:
            self._losses = (weights, weights * np.array([n[0] for n in needs], dtype=np.float64))
        return self._losses[1]

    @staticmethod
    def _holds(totals: np.ndarray, free: np.ndarray, need_cm: np.ndarray) -> np.ndarray:
        """For ``free`` CPU and memory (2 x rows): per shape the pods of the shape the rows hold, their
        zones' ``totals`` (shapes x rows) capped by what the free CPU and memory allow (``free`` //
        ``need_cm``, 2 x shapes)."""
        return np.minimum(totals, np.minimum(_quotients(free[0], need_cm[0]), _quotients(free[1], need_cm[1])))

    @staticmethod
    def _able(table: NodeTable, at: slice | np.ndarray = slice(None)) -> np.ndarray:
        """Rows (``at``) that can hold demanding pods: with topology data, the static CPU manager, and a live node."""
        return table.view("topology")[at] & table.view("cpu_static")[at] & table.view("live")[at]

    def _held_all(self, table: NodeTable, cols: list[list[int]], needs: list[np.ndarray]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For every row: per target shape the pods its zones hold (shapes x rows); per shape the pods
        the row holds now (those totals capped by its free CPU and memory; shapes x rows); and its free
        CPU and memory (2 x rows, at least 0). Kept per target version and brought up to date for the
        rows changed since; a new target computes every row again (one pass of the compiled loop:
        about half the time NumPy took to compute only the shapes the old target lacked)."""
        size = table.size
        cached = self._vector
        rows: np.ndarray | None = None
        if cached is not None and cached[0] == self.shape_version and cached[2].shape[1] <= size:
            rows = table.changed_since(cached[1])  # nodes that joined are among the changed rows
            if rows is not None and cached[2].shape[1] < size:
                cached = (*cached[:2], *(grown(a, size) for a in cached[2:]))
        if rows is None:
            rows = np.arange(size)
            shapes = len(self._target)
            totals = np.zeros((shapes, size), dtype=np.int64)
            free = np.zeros((2, size), dtype=np.int64)
            holds = np.zeros((shapes, size), dtype=np.int64)
        else:
            assert cached is not None
            totals, free, holds = cached[2], cached[3], cached[4]
        if len(rows):
            union, need, ignored, need_cm = self._stacked_plan(cols, needs)
            held_rows(rows, table.view("zfree"), table.view("zvalid"), self._able(table, rows), table.view("free"),
                      np.array(union, dtype=np.int64),
                      np.array([table.resource_column(r) for r in _ZONE_RESOURCES], dtype=np.int64),
                      need, ignored, need_cm, (totals, free, holds))
        if self._weights is None:  # demand over supply: what every row holds of each shape now
            demand = np.array([count for _, count in self._target], dtype=np.float64)
            self._weights = demand / demand.sum() / np.maximum(holds.sum(axis=1).astype(np.float64), 1.0)
        self._vector = (self.shape_version, table.stamp, totals, free, holds)
        return totals, holds, free

    def _alike(self, cluster: Cluster) -> bool:
        """Whether every node that pins CPUs has the same hardware (NUMA zones, reserved CPUs): then no
        capacity is rarer on one node than on another. Known until a node leaves or a replica is replaced."""
        known = self._alike_known
        if known is not None and known[0]() is cluster and known[1] == cluster.replicas_version:
            return known[2]
        self._hardware.forget_departed(cluster.nodes)
        kinds = set()
        for record in cluster.nodes.values():
            model = record.model
            if model is None or model.cpu is None:
                continue
            zones = self._hardware.read(record.name, (model,), lambda model=model: _empty_zones(model))
            kinds.add(tuple(tuple(sorted(z.items())) for z in zones))
            if len(kinds) > 1:
                break
        self._alike_known = (weakref.ref(cluster), cluster.replicas_version, len(kinds) <= 1)
        return self._alike_known[2]

    def score_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[int]:
        """:meth:`score_all` for a few rows, in plain Python (the same arithmetic).

        What a row holds for each target shape depends on the row and the target only: it is
        kept per row until either changes, so a pod costs one pass over its own request.
        """
        if not self._target or pod.asks_extended:
            return [0] * len(rows)
        if self._weights is None:
            return self.score_all(state, pod, table, np.array(rows, dtype=np.int64)).tolist()
        cols, needs = self._plan(table)
        if self._plain is None or self._plain[0] is not self._weights:
            self._plain = (self._weights, [(c, n.tolist(), float(w)) for c, n, w in zip(cols, needs, self._weights.tolist())],
                           [table.resource_column(r) for r in _ZONE_RESOURCES])
        _, plan, node_cols = self._plain
        request = aligned_request(state, pod).pod
        zone_request = [(table.zone_column(r), v) for r, v in request.items() if r in table.zone_resources]
        wants = pod.effective_requests()
        take = [wants.get(r, 0) for r in _ZONE_RESOURCES]
        out = []
        for row in rows:
            held = self._held(table, row, plan, node_cols)
            if held is None:
                out.append(0)
                continue
            zones, per_zone, totals, free = held
            after_totals = totals
            if zone_request:
                for z, zone in enumerate(zones):
                    if all(zone[c] >= v for c, v in zone_request):
                        changed = list(zone)
                        for c, v in zone_request:
                            changed[c] -= v
                        after_totals = [t - per_zone[k][z] + min(changed[c] // n for c, n in zip(kcols, need))
                                        for k, (t, (kcols, need, _)) in enumerate(zip(totals, plan))]
                        break
            after_free = [max(0, f - t) for f, t in zip(free, take)]
            loss = 0.0
            for k, (_, need, weight) in enumerate(plan):
                before = min(totals[k], free[0] // need[0], free[1] // need[1])
                after = min(after_totals[k], after_free[0] // need[0], after_free[1] // need[1])
                loss += weight * need[0] * (before - after)
            out.append(round(max(loss, 0.0) * 1e6))
        return out

    def _held(self, table: NodeTable, row: int, plan: list[tuple[list[int], list[int], float]], node_cols: list[int]
              ) -> tuple[list[list[int]], list[list[int]], list[int], list[int]] | None:
        """A row's valid zones, per shape and zone the pods of that shape the zone holds, their totals per
        shape, and the row's free CPU and memory; None for a row that holds no demanding pod. Cached."""
        values = table.row_values(row)
        cached = self._rows.get(row)
        if cached is not None and cached[0] is values and cached[1] == self.shape_version:
            return cached[2]
        if not (values.topology and values.cpu_static and values.live):
            held = None
        else:
            zones = [z for z, ok in zip(values.zfree, values.zvalid) if ok]
            per_zone = [[min(zone[c] // n for c, n in zip(kcols, need)) for zone in zones] for kcols, need, _ in plan]
            free = [values.alloc[c] - values.used[c] for c in node_cols]
            held = (zones, per_zone, [sum(p) for p in per_zone], free)
        self._rows[row] = (values, self.shape_version, held)
        return held

    def normalizes(self, state: CycleState, pod: Pod) -> bool:
        """Whether this pod's scores need normalizing: not while nothing is learned, nor for device pods
        (their raw scores are all 0, which normalizing would only turn into 100 everywhere)."""
        return bool(self._target) and not pod.asks_extended

    def normalize_scores(self, state: CycleState, pod: Pod, raw: np.ndarray) -> np.ndarray:
        """The smallest loss among the feasible nodes scores 100, the largest 0, linearly between."""
        raw = np.asarray(raw, dtype=np.int64)
        if not len(raw):
            return raw
        if rowloops.compiled is not None:  # the same integers in one pass over the rows
            out = np.empty(len(raw), dtype=np.int64)
            rowloops.compiled.minmax_scores(raw, MAX_NODE_SCORE, out)
            return out
        low, high = int(raw.min()), int(raw.max())
        if high == low:
            return np.full(len(raw), MAX_NODE_SCORE, dtype=np.int64)
        return (MAX_NODE_SCORE - (raw - low) * MAX_NODE_SCORE // (high - low)).astype(np.int64)


class _DemandWindow:
    """The shapes of the last ``size`` demanding pods, each known by a number while it is in the
    window or kept (a target member).

    Counting numbers costs a tenth of hashing the shapes (tuples of pairs, hashed anew each time,
    their objects mostly out of the CPU caches by then), and a shape is forgotten the moment its
    last pod leaves the window, so no pass over the known shapes is ever needed.
    """

    def __init__(self, size: int) -> None:
        self.recent: deque[int] = deque(maxlen=size)
        self._numbers: dict[tuple[tuple[str, int], ...], int] = {}
        self._shapes: dict[int, tuple[tuple[str, int], ...]] = {}
        self._in_window: dict[int, int] = {}  # number -> its pods in the window
        self._kept: set[int] = set()
        self._next = 0

    def add(self, shape: tuple[tuple[str, int], ...]) -> None:
        """Append a pod's shape, the oldest leaving a full window."""
        if len(self.recent) == self.recent.maxlen:
            leaving = self.recent[0]
            left = self._in_window[leaving] - 1
            if left:
                self._in_window[leaving] = left
            else:
                del self._in_window[leaving]
                if leaving not in self._kept:
                    del self._numbers[self._shapes.pop(leaving)]
        number = self._numbers.get(shape)
        if number is None:
            number = self._numbers[shape] = self._next
            self._shapes[number] = shape
            self._next += 1
        self._in_window[number] = self._in_window.get(number, 0) + 1
        self.recent.append(number)

    def ranked(self) -> list[tuple[int, int]]:
        """(number, pods in the window), most first; ties in the order of first sight in the window."""
        return Counter(self.recent).most_common()

    def number(self, shape: tuple[tuple[str, int], ...]) -> int:
        """A known shape's number."""
        return self._numbers[shape]

    def shape(self, number: int) -> tuple[tuple[str, int], ...]:
        """A known number's shape."""
        return self._shapes[number]

    def keep(self, numbers: set[int]) -> None:
        """Know these numbers' shapes while out of the window too (the target's), and no longer the
        kept ones before them."""
        for number in self._kept - numbers:
            if number not in self._in_window:
                del self._numbers[self._shapes.pop(number)]
        self._kept = numbers


def after_zone_totals(table: NodeTable, totals: np.ndarray, cols: list[list[int]], needs: list[np.ndarray],
                      stacked: tuple[list[int], np.ndarray, np.ndarray], zone_request: Mapping[str, int],
                      firsts: np.ndarray, able: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """Per target shape and asked row (``rows``, None for every row): the pods of the shape the row's
    zones hold once the pod's aligned request ``zone_request`` is taken from the first zone holding it
    (``firsts``; the zone count where none does): ``totals`` less what that zone then holds fewer.
    Rows not ``able`` or where no zone holds the request keep their totals.

    ``cols``/``needs``: each shape's zone columns and needs; ``stacked``: the same over their union
    (:meth:`ScarcityScore._stacked_plan`). The compiled loop when built, else NumPy: the same integers."""
    union, need, ignored = stacked
    if rowloops.compiled is not None:
        taken = np.array([zone_request.get(table.zone_resources[c], 0) for c in union], dtype=np.int64)
        out = np.empty(totals.shape, dtype=np.int64)
        rowloops.compiled.scarcity_zone_totals(totals, table.view("zfree"), np.array(union, dtype=np.int64), need,
                                               ignored, taken, firsts, able, out, rows)
        return out
    picked = np.flatnonzero((firsts < len(table.zone_valid())) & able)
    if not len(picked):
        return totals
    first = firsts[picked]
    chosen = picked if rows is None else rows[picked]
    before_zone, after_zone = {}, {}
    for c in union:  # every target shape's columns
        name = table.zone_resources[c]
        before_zone[c] = table.zone_free_at(name, first, chosen)
        after_zone[c] = before_zone[c] - zone_request[name] if name in zone_request else before_zone[c]
    lowered = np.zeros((len(cols), len(picked)), dtype=np.int64)  # shapes x picked rows
    for k in range(len(cols)):
        held_before = held_after = None
        for c, shape_need in zip(cols[k], needs[k].tolist()):
            b, a = before_zone[c] // shape_need, after_zone[c] // shape_need
            held_before = b if held_before is None else np.minimum(held_before, b)
            held_after = a if held_after is None else np.minimum(held_after, a)
        np.subtract(held_before, held_after, out=lowered[k])
    # One scatter of every shape's rows into zeros, then one subtraction over whole rows:
    # cheaper than a read-modify-write of the picked rows shape by shape.
    after_totals = np.zeros(totals.shape, dtype=np.int64)
    after_totals[:, picked] = lowered
    return np.subtract(totals, after_totals, out=after_totals)


def held_rows(rows: np.ndarray, zfree: np.ndarray, zvalid: np.ndarray, able: np.ndarray, free: np.ndarray,
              union: np.ndarray, cm: np.ndarray, need: np.ndarray, ignored: np.ndarray, need_cm: np.ndarray,
              kept: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """Write :meth:`ScarcityScore._held_all`'s kept arrays at ``rows`` (``able``: one flag per row given).

    ``kept`` is (totals, free CPU and memory, holds); at each row: per target shape the pods its zones
    hold (per valid zone, the fewest over the shape's columns ``union`` of the zone's free amount
    ``zfree`` over the shape's ``need``, where ``ignored`` is False; summed over the zones; 0 where
    the row is not able), the row's free CPU and memory (``free`` at columns ``cm``, at least 0), and
    what the row holds (the totals capped by those amounts over each shape's ``need_cm``). The
    compiled loop when built, else NumPy: the same integers."""
    totals, free_cm, holds = kept
    if rowloops.compiled is not None:
        rowloops.compiled.scarcity_rows(rows, zfree, zvalid, able, free, union, cm, need, ignored, need_cm,
                                        totals, free_cm, holds)
        return
    valid = take_rows(zvalid, rows).T & able[:, None]
    # rows x zones x shapes x columns: how many pods of the shape each zone's column allows.
    allowed = take_rows(zfree, rows)[union].transpose(2, 1, 0)[:, :, None, :] // need
    per_zone = np.where(valid[:, :, None], np.where(ignored, _NO_LIMIT, allowed).min(axis=3), 0)
    totals[:, rows] = changed_totals = per_zone.sum(axis=1).T
    free_cm[:, rows] = changed_free = np.maximum(take_rows(free, rows)[cm], 0)
    holds[:, rows] = ScarcityScore._holds(changed_totals, changed_free, need_cm)


def row_losses(before: np.ndarray, free: np.ndarray, need_cm: np.ndarray, take: np.ndarray, after_totals: np.ndarray,
               value: np.ndarray, able: np.ndarray) -> np.ndarray:
    """Per row, the raw score: the value the pod takes from the target, in fixed point (int64).

    ``before``: per shape the pods each row holds now (shapes x rows); ``free``: the row's free CPU and
    memory (2 x rows, at least 0); ``need_cm``: each shape's CPU and memory need (2 x shapes, at
    least 1); ``take``: the pod's CPU and memory request (2); ``after_totals``: per shape the pods the
    row's zones hold after the pod; ``value``: one pod of each shape (float64); ``able``: rows that
    can hold demanding pods (the others score 0). The compiled loop
    (:mod:`toposched.scheduler.rowloops`) when built, else NumPy: the same integers."""
    if rowloops.compiled is not None:
        out = np.empty(before.shape[1], dtype=np.int64)
        rowloops.compiled.scarcity_loss(before, free, need_cm, take, after_totals, value, able, out)
        return out
    # The shapes the free CPU and memory hold after the pod, (free - take) // need: negative where the
    # pod takes more than is free, and the clamp at 0 is taken once, after the minimum over CPU,
    # memory and the zones' totals (which are never negative).
    left = free - take[:, None]
    held_after = np.minimum(_quotients(left[0], need_cm[0]), _quotients(left[1], need_cm[1]))
    np.minimum(after_totals, held_after, out=held_after)
    np.maximum(held_after, 0, out=held_after)
    lost = np.subtract(before, held_after, out=held_after)
    loss = lost[0] * value[0]  # summed shape by shape, in order: the fixed point below must not move
    for k in range(1, len(value)):
        loss += lost[k] * value[k]
    np.maximum(loss, 0.0, out=loss)
    loss *= 1e6
    out = np.round(loss, out=loss).astype(np.int64)  # fixed point: normalization needs the order
    out *= able
    return out


def _quotients(amount: np.ndarray, needs: np.ndarray) -> np.ndarray:
    """``amount // need`` (floored) for each of ``needs``: shapes x rows. NumPy divides by a scalar with
    a precomputed multiplier and by an array element by element (640 µs for 2 x 4 x 5,000 against
    110 µs this way), so from a few dozen rows each need divides the row in turn."""
    if len(amount) < _SCALAR_DIVISION_ROWS:
        return amount[None, :] // needs[:, None]
    out = np.empty((len(needs), len(amount)), dtype=np.int64)
    for k, n in enumerate(needs.tolist()):
        np.floor_divide(amount, n, out=out[k])
    return out


def _empty_zones(model: Any) -> list[dict[str, int]]:
    """What each NUMA zone of a kubelet replica offers when no pod runs: CPUs it may pin, memory, hugepages."""
    reserved = model.cpu.reserved_cpus
    out = []
    for node in model.machine.numa_nodes:
        zone = {"cpu": len(node.cpus - reserved) * 1000, "memory": node.memory_bytes}
        for size, count in node.hugepages.items():
            zone[hugepage_resource_name(size)] = size * count
        out.append(zone)
    return out
