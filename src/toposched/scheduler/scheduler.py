"""The scheduling cycle: PreFilter, Filter over every node, Score, then Reserve with exact placement.

Filters and scores run over the whole :class:`NodeTable` at once where a plugin has a vector
form, node by node otherwise. The best-scored feasible nodes are then confirmed exactly, best
first: Reserve admits the pod into the node's kubelet replica (which decides the exact CPUs,
memory per NUMA node and devices) and plugins with a ``confirm`` hook check the result. The
first node that takes the pod is the decision; a node that refuses is counted with its reason.

Nothing here binds: the caller (simulator, extender, standalone scheduler) performs the
:class:`Decision` and then calls :meth:`Scheduler.bound` or :meth:`Scheduler.unreserve`.

The extension points themselves run through the profile's :class:`~toposched.scheduler.runner.Runner`
(``Scheduler.runner``), built once; this module adds the evaluation over every row with its
per-shape cache, the choice of a node, and ``explain``.
"""

from __future__ import annotations

import random
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toposched.errors import InputError
from toposched.names import KOORDINATOR_SCHEDULING_PREFIX, TOPOSCHED_PREFIX
from toposched.scheduler import rowloops
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.framework import CycleState, Profile, RowReasons
from toposched.scheduler.keyed import KeyedRows
from toposched.scheduler.placement import Placement
from toposched.scheduler.runner import Runner
from toposched.scheduler.sampling import NodeTree, num_feasible_nodes_to_find, zone_key
from toposched.scheduler.status import Code, Status, code_of, reason_of
from toposched.scheduler.table import NodeTable, grown
from toposched.workload import Pod

__all__ = ["Decision", "Scheduler"]

_NO_ROWS = np.zeros(0, dtype=np.int64)
_FEASIBLE = -1
_NO_SCORE = np.iinfo(np.int64).min
_GONE = "node is gone"  # the verdict of a row whose node was removed
# Pod annotations the plugins read: part of a pod's shape for caching.
_SHAPE_ANNOTATIONS = (TOPOSCHED_PREFIX, KOORDINATOR_SCHEDULING_PREFIX)
_DOORKEEPER_SIZE = 4096  # pod shapes seen once that are remembered (see Scheduler._seen_before)


@dataclass(frozen=True)
class Decision:
    """The outcome of one scheduling cycle for one pod."""

    pod: str
    node: str | None
    placement: Placement | None
    status: Status
    # reason -> nodes it turned away: for a scheduled pod, the better-scored nodes whose exact
    # placement refused it; when no node fits, every filter's count as well
    reasons: dict[str, int] = field(default_factory=dict)
    nodes: int = 0
    nominated: str | None = None  # a PostFilter plugin's nominated node (preemption), if any

    @property
    def message(self) -> str:
        """kube-scheduler's FitError wording: "0/5000 nodes are available: 4990 Insufficient cpu, ...".

        Reasons are listed by node count, largest first, then alphabetically.
        """
        if self.node is not None:
            return f"scheduled on {self.node}"
        if self.status.code == Code.ERROR or not self.reasons:
            return self.status.message or f"0/{self.nodes} nodes are available"
        parts = ", ".join(f"{n} {r}" for r, n in sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        return f"0/{self.nodes} nodes are available: {parts}."


class Scheduler:
    """One profile scheduling pods onto a :class:`Cluster`."""

    def __init__(self, cluster: Cluster, profile: Profile, *, max_exact_attempts: int = 64, cache_size: int = 512,
                 few_rows: int = 8, seed: int | None = None) -> None:
        self.cluster = cluster
        # Ties between equally scored nodes: the lowest row (seed None), else a draw among them
        # from random.Random(seed), as kube-scheduler's selectHost draws (see reseed).
        self._ties: random.Random | None = None
        self.reseed(seed)
        self.profile = profile
        self.table = NodeTable(cluster)
        self.max_exact_attempts = max_exact_attempts
        self.cache_size = cache_size
        # Up to this many stale rows are judged in plain Python (filter_few/score_few), where
        # NumPy's fixed cost per call would dominate; the verdicts and scores are the same.
        self.few_rows = few_rows
        # pod shape -> (verdict, total, candidates, raw scores of normalizing plugins, table stamp): see _evaluate
        self._cache: OrderedDict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, np.ndarray], int]] = OrderedDict()
        # The pod shapes seen once and not cached (see _seen_before), oldest first; at most _DOORKEEPER_SIZE.
        self._seen_once: OrderedDict[tuple, None] = OrderedDict()
        # Filter reasons by index, each with its Status code (see _reason_index).
        self._reasons: list[str] = []
        self._reason_codes: list[Code] = []
        self._reason_ids: dict[Any, int] = {}
        self.runner = Runner(cluster, profile, self.table, cache_size=cache_size)
        # Per keyed filter and score (by position): its answer for every row, per key of the pod.
        self._keyed_filters = [KeyedRows(self.table) for _ in self.runner.filters]
        self._keyed_scores = [KeyedRows(self.table) for _ in self.runner.scores]
        percentage = profile.percentage_of_nodes_to_score
        if isinstance(percentage, bool) or not isinstance(percentage, int) or not 0 <= percentage <= 100:
            raise InputError(f"{percentage!r} is not a percentage from 0 to 100", field="percentageOfNodesToScore",
                             source=f"profile {profile.name}")
        self._percentage = percentage  # read once: the node tree below is kept only for a share under 100
        # Where the next search starts in the node tree's order (upstream nextStartNodeIndex); used
        # only when the profile looks at fewer than every node (see toposched.scheduler.sampling).
        self.next_start_node_index = 0
        # kube-scheduler's node tree, kept as its informers keep it: the nodes there now, in the
        # order they came, then every node that comes, changes zone or leaves (_node_changed).
        self._tree = NodeTree()
        self._tree_rows: tuple[list[str], int, np.ndarray] | None = None  # the tree's names as rows (see _search_order)
        if percentage != 100:
            for name, record in cluster.nodes.items():
                self._tree.add(name, zone_key(record.spec.labels))
            cluster.subscribe(self._node_changed)

    def schedule(self, pod: Pod, now: float) -> Decision:
        """Find a node for ``pod`` and reserve its exact placement there, or say why none fits.

        A malformed pod gets an UnschedulableAndUnresolvable decision naming the field; so does a
        pod already on a node (unreserve or forget it first). The cluster is unchanged either way,
        and other pods keep being scheduled.
        """
        placed = self.cluster.pod_node.get(pod.uid or pod.key)
        if placed is not None:
            status = Status.unresolvable(f"pod {pod.key}: pod: already on node {placed}; unreserve it before "
                                         "scheduling it again", plugin="Scheduler")
            return Decision(pod.key, None, None, status, {}, self.table.live_count)
        self.runner.advance(now)
        key = self.shape(pod)
        keep = key is not None and self._seen_before(key)
        state, status = self.runner.pre_filter(pod, key if keep else None)
        self.table.refresh()
        live = self.table.live_count
        if not status.is_success:
            return Decision(pod.key, None, None, status, {status.message: live}, live)
        to_find = num_feasible_nodes_to_find(self._percentage, live)
        if to_find < live:
            verdict, candidates = self._search(state, pod, to_find, key)
            base = candidates
            unkept = None
        else:
            verdict, total, base, raws = self._evaluate(state, pod, key, keep=keep)
            # A shape seen once, not cached: what to cache should a node refuse the pod (below).
            unkept = None if keep or key is None else (key, (verdict, total, base, raws, self.table.stamp))
            # A working copy: the cached candidates change only where a node refuses (below).
            candidates = self._normalized(state, pod, verdict, base, raws) if raws else base.copy()
        refusals: Counter[str] = Counter()  # the better-scored nodes whose exact placement refused the pod
        attempts = self.max_exact_attempts if len(candidates) else 0  # an empty cluster has no row to try
        for _ in range(attempts):
            row = self._best(candidates)  # the best score; among equals the lowest row or a seeded draw
            if candidates[row] == _NO_SCORE:
                break
            candidates[row] = _NO_SCORE
            name = self.table.names[row]
            refused = self.runner.reserve(state, pod, name, now)
            if refused is None:
                record = self.cluster.nodes[name]
                placement = record.pods[pod.uid or pod.key].placement
                if record.count_only and placement is not None:
                    placement = placement.without_ids()  # ids of a count-only replica are not the node's
                return Decision(pod.key, name, placement, Status.success(), dict(refusals), live)
            # The refusal holds for pods of this shape until the node changes (which recomputes
            # its row): recorded as the row's cached verdict, no later pod of the shape tries it again.
            refusals[refused] += 1
            verdict[row], base[row] = self._reason_index(refused), _NO_SCORE
            if unkept is not None:  # the refusal is remembered for the shape, as for a cached one
                self._store(*unkept)
                unkept = None
        counts = np.bincount(verdict[verdict >= 0], minlength=len(self._reasons))
        reasons: Counter[str] = Counter()
        for i, n in enumerate(counts.tolist()):
            if n:  # one text may have several indices, one per code
                reasons[self._reasons[i]] += n
        # Rows of removed nodes are not nodes: the reasons count the live nodes only, as kube-scheduler's
        # "0/N nodes are available" does, whether or not the table has dropped those rows yet.
        reasons.pop(_GONE, None)
        nominated, status = self.runner.post_filter(state, pod, dict(reasons))
        if status is None:
            status = Status.unschedulable("no node fits", plugin="Scheduler")
        return Decision(pod.key, None, None, status, dict(reasons), live, nominated)

    def _search(self, state: CycleState, pod: Pod, to_find: int, shape: tuple | None) -> tuple[np.ndarray, np.ndarray]:
        """kube-scheduler's search for ``to_find`` feasible nodes (``findNodesThatPassFilters``): the
        nodes in the node tree's order from :attr:`next_start_node_index`, filtered until that many
        pass, then those scored and normalized together. Per row: the verdict (_FEASIBLE for rows
        not looked at) and the candidate score (_NO_SCORE where not feasible or not looked at).

        Rows are filtered in chunks, in row order within each, so the batch forms run as usual. As
        upstream with one worker (``parallelism: 1``), the search goes on after the ``to_find``-th
        feasible node and stops at the next one that passes, which is neither kept nor counted;
        the nodes that refused before it count as looked at, and move the next search's start on
        (``nextStartNodeIndex``).

        A search looks at other rows each cycle, so there is no verdict per pod shape to keep for
        every row as :meth:`_evaluate` keeps one; instead, with the pod's ``shape`` (None: no
        caching), the per-node answers of plugins without a batch form are kept per shape and row
        (see :meth:`_filter_rows`)."""
        order = self._search_order()
        count = len(order)
        start = self.next_start_node_index % count
        size = self.table.size
        verdict = np.full(size, _FEASIBLE, dtype=np.int64)
        candidates = np.full(size, _NO_SCORE, dtype=np.int64)
        found: list[np.ndarray] = []
        processed = feasible = 0
        while processed < count:
            if feasible < to_find:
                # Enough rows for the nodes still wanted at the share found feasible so far (the
                # first chunk guesses three in four), and a margin for the nodes looked at after them.
                share = feasible / processed if processed else 0.75
                step = int((to_find - feasible) / max(share, 0.05) * 1.2) + 16
            else:
                step = 64  # the last one wanted was the last row of a chunk: how many nodes that refuse follow it
            positions = np.arange(processed, min(count, processed + step)) + start
            positions[positions >= count] -= count
            rows = order[positions]
            ascending = np.argsort(rows)
            chunk = np.empty(len(rows), dtype=np.int64)
            chunk[ascending] = self._filter_rows(state, pod, rows[ascending], shape)[0]
            passed = np.flatnonzero(chunk == _FEASIBLE)
            wanted = passed[: to_find - feasible]
            found.append(rows[wanted])
            feasible += len(wanted)
            # One node passing beyond those wanted ends the search before it (upstream's one worker
            # cancels there): the nodes that refused in between were looked at.
            done = len(passed) > len(wanted)
            if done:
                stop = int(passed[len(wanted)])
                rows, chunk = rows[:stop], chunk[:stop]
            verdict[rows] = chunk
            processed += len(rows)
            if done:
                break
        self.next_start_node_index = (start + processed) % count
        if not feasible:
            return verdict, candidates
        rows = np.sort(np.concatenate(found))
        normalizing = self.runner.normalizing(state, pod)
        refused, summed, raws = self._score_rows(state, pod, rows, normalizing, shape)
        if refused is not None:
            verdict[rows] = refused
            return verdict, candidates
        total = summed if summed is not None else np.zeros(len(rows), dtype=np.int64)
        if raws:
            total = self._normalized(state, pod, np.full(len(rows), _FEASIBLE, dtype=np.int64), total, raws)
        candidates[rows] = total
        return verdict, candidates

    def _node_changed(self, name: str) -> None:
        """A node came, changed or left: the node tree follows (a node keeps its place unless its zone changed)."""
        record = self.cluster.nodes.get(name)
        if record is None:
            self._tree.remove(name)
        else:
            self._tree.add(name, zone_key(record.spec.labels))

    def _search_order(self) -> np.ndarray:
        """The live rows in the node tree's order (:class:`NodeTree`); the same array while the tree
        is unchanged and the table has not renumbered its rows."""
        table = self.table
        names = self._tree.names()
        kept = self._tree_rows
        if kept is None or kept[0] is not names or table.changed_since(kept[1]) is None:
            kept = (names, table.stamp, np.array([table.index[name] for name in names], dtype=np.int64))
        self._tree_rows = (names, table.stamp, kept[2])
        return kept[2]

    def reseed(self, seed: int | None) -> None:
        """How ties between equally scored nodes are broken from now on: ``None`` takes the lowest
        row (the node added first), an int draws uniformly among them from ``random.Random(seed)``
        as kube-scheduler does (``selectHost``), so the same seed and the same pods give the same
        placements. The generator advances only when there is a tie to break."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise InputError(f"{seed!r} is not an integer seed", field="seed", source="scheduler")
        self.seed = seed
        self._ties = None if seed is None else random.Random(seed)

    def _best(self, candidates: np.ndarray) -> int:
        """The row with the best candidate score; among several, the lowest or a seeded draw."""
        row = int(np.argmax(candidates))
        if self._ties is None or candidates[row] == _NO_SCORE:
            return row
        ties = np.flatnonzero(candidates == candidates[row])
        return row if len(ties) == 1 else int(ties[self._ties.randrange(len(ties))])

    def _normalized(self, state: CycleState, pod: Pod, verdict: np.ndarray, base: np.ndarray,
                    raws: dict[int, np.ndarray]) -> np.ndarray:
        """``base`` (a new array) plus each normalizing plugin's weighted scores, normalized over the feasible rows."""
        out = base.copy()
        feasible = np.flatnonzero(verdict == _FEASIBLE)
        if len(feasible):
            for i, raw in raws.items():
                out[feasible] += self.runner.scores[i][1] * self.runner.normalize(i, state, pod, raw[feasible])
        return out

    def evaluate(self, state: CycleState, pod: Pod, key: tuple | None, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the given rows: the index of the first filter reason that refuses each (negative where
        feasible; the texts are in ``reasons``) and its total score.

        Normalizing plugins normalize over the feasible rows among ``rows``, as kube-scheduler
        normalizes over the nodes it scores. With a pod-shape ``key`` the per-shape cache is used
        (and kept up to date); without one exactly ``rows`` are evaluated.
        """
        if key is not None:
            verdict, total, _, raws = self._evaluate(state, pod, key)
            verdict, total = verdict[rows], total[rows]
            raws = {i: raw[rows] for i, raw in raws.items()}
        else:
            verdict, total, raws = self._evaluate_rows(state, pod, rows, self.runner.normalizing(state, pod))
        if raws:
            total = self._normalized(state, pod, verdict, total, raws)
        return verdict, total

    @property
    def reasons(self) -> list[str]:
        """Filter reasons by the index :meth:`evaluate` gives."""
        return self._reasons

    def refusal(self, index: int) -> Status:
        """The Status of reason ``index`` (an index :meth:`evaluate` gives): its code
        (Unschedulable, or UnschedulableAndUnresolvable where the plugin's per-node ``filter``
        would say so) and its text."""
        return Status(self._reason_codes[index], (self._reasons[index],))

    def _seen_before(self, key: tuple) -> bool:
        """Whether results for pods of shape ``key`` are worth keeping: it is cached, or a pod of it
        came before (among the last _DOORKEEPER_SIZE shapes seen once). A shape seen for the first
        time is remembered here, and its results are not kept.

        On a workload where nearly every pod has a shape of its own, keeping each one's results
        (four or more arrays as long as the table, and its PreFilter state) and dropping the
        oldest cost a pod more than the cache ever saves; a shape that comes twice is cached from
        its second pod on. Cached or not, the answers are the same, but for ScarcityScore's raw
        scores, which a cached row keeps from the target in force when it was scored
        (docs/scheduler/scarcity.md).
        """
        if key in self._cache:
            return True
        seen = self._seen_once
        if key in seen:
            del seen[key]
            return True
        seen[key] = None
        if len(seen) > _DOORKEEPER_SIZE:
            seen.popitem(last=False)
        return False

    def _store(self, key: tuple, entry: tuple) -> None:
        """Keep ``entry`` as the cached results of shape ``key`` (the most recent; the oldest beyond ``cache_size`` dropped)."""
        self._cache[key] = entry
        self._cache.move_to_end(key)
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _evaluate(self, state: CycleState, pod: Pod, key: tuple | None,
                  keep: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """Per row: the index of the first filter reason that rejects it (or _FEASIBLE), its total
        score without the normalizing plugins, its candidate score (that total where feasible,
        else _NO_SCORE), and per normalizing plugin its raw scores (0 where not feasible).

        Results are kept per pod shape; rows whose node changed since are the only ones recomputed.
        With ``keep`` False the results of a shape not cached are not kept (:meth:`schedule` keeps
        them once a node refuses the pod).
        """
        size = self.table.size
        normalizing = self.runner.normalizing(state, pod)
        cached = self._cache.get(key) if key is not None else None
        rows = None
        if cached is not None and len(cached[0]) <= size and tuple(cached[3]) == normalizing:
            verdict, total, candidates, raws, stamp = cached
            rows = self.table.changed_since(stamp)
            if rows is not None and len(verdict) < size:  # nodes joined: their rows are among the changed ones
                verdict, total, candidates = grown(verdict, size, _FEASIBLE), grown(total, size), grown(candidates, size)
                raws = {i: grown(raw, size) for i, raw in raws.items()}
        if rows is None and size > self.few_rows:  # every row: the evaluation's arrays are the shape's
            verdict, total, raws = self._evaluate_rows(state, pod, self.table.all_rows(), normalizing)
            candidates = np.where(verdict == _FEASIBLE, total, _NO_SCORE)
            rows = _NO_ROWS
        elif rows is None:
            verdict = np.full(size, _FEASIBLE, dtype=np.int64)
            total = np.zeros(size, dtype=np.int64)
            candidates = np.zeros(size, dtype=np.int64)
            raws = {i: np.zeros(size, dtype=np.int64) for i in normalizing}
            rows = np.arange(size)
        if 0 < len(rows) <= self.few_rows:
            few = rows.tolist()
            first_of, total_of, raw_of = self._evaluate_few(state, pod, few, normalizing)
            for j, row in enumerate(few):
                first, score = first_of[j], total_of[j]
                verdict[row], total[row] = first, score
                candidates[row] = score if first == _FEASIBLE else _NO_SCORE
                for i, raw in raws.items():
                    raw[row] = raw_of[i][j]
        elif len(rows):
            verdict[rows], total[rows], raw_of = self._evaluate_rows(state, pod, rows, normalizing)
            candidates[rows] = np.where(verdict[rows] == _FEASIBLE, total[rows], _NO_SCORE)
            for i, raw in raws.items():
                raw[rows] = raw_of[i]
        if key is not None and keep:
            self._store(key, (verdict, total, candidates, raws, self.table.stamp))
        return verdict, total, candidates, raws

    def _evaluate_rows(self, state: CycleState, pod: Pod, rows: np.ndarray,
                       normalizing: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """Verdicts, totals of the plugins that do not normalize, and raw scores of those in ``normalizing``."""
        verdict, pending, at = self._filter_rows(state, pod, rows)
        total = np.zeros(len(rows), dtype=np.int64)
        raws = {i: np.zeros(len(rows), dtype=np.int64) for i in normalizing}
        if len(pending):
            refused, summed, scored = self._score_rows(state, pod, at, normalizing)
            if refused is not None:
                verdict[pending] = refused
                return verdict, total, raws
            for i, scores in scored.items():
                raws[i][pending] = scores
            if summed is not None:
                total[pending] = summed
        return verdict, total, raws

    def _filter_rows(self, state: CycleState, pod: Pod, rows: np.ndarray,
                     shape: tuple | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The Filter over ``rows``: per row the index of the first reason that refuses it (or
        _FEASIBLE), the positions in ``rows`` of the feasible ones, and those rows.

        With the pod's ``shape``, the answers of filters without a batch form (one Python call per
        node) are kept per shape and row until the row changes, as keyed filters' are: a pod has
        a shape only where every such plugin is row-local (:meth:`shape`)."""
        verdict = np.full(len(rows), _FEASIBLE, dtype=np.int64)
        table = self.table
        every = rows is table.all_rows()  # positions in ``rows`` are then rows: one gather serves both
        if every and table.live_count == table.size:
            # Every row, every node live (positions are rows): all_rows() is itself the positions, and stays itself.
            pending = at = rows
        else:
            live = table.pick(table.view("live"), rows)
            pending = np.flatnonzero(live)  # positions in ``rows`` no filter has refused yet
            if len(pending) < len(rows):
                verdict[~live] = self._reason_index(_GONE)
                at = rows[pending]
            else:
                at = rows  # the rows themselves, regathered only when a filter refuses some
        for index in self.runner.active_filters(state):
            if not len(pending):
                break
            key = self.runner.filter_key(index, state, pod)
            if key is None and shape is not None and not self.runner.batch_filter[index]:
                key = shape
            if key is not None:
                codes = self._keyed_filters[index].values(
                    key, at, lambda some, index=index: self._filter_codes(index, state, pod, some))
                mask = codes < 0
                if not mask.all():
                    verdict[pending[~mask]] = codes[~mask]
                    pending = pending[mask]
                    at = pending if every else at[mask]
                continue
            mask, reason = self.runner.filter_rows(index, state, pod, at)
            if rowloops.compiled is not None and isinstance(reason, (str, RowReasons)):
                if not mask.all():
                    pending, at = self._refuse(verdict, pending, None if every else at, mask, reason)
                continue
            if not mask.all():
                refused = ~mask
                if isinstance(reason, str):  # one reason, a text or a Refusal
                    verdict[pending[refused]] = self._reason_index(reason)
                elif isinstance(reason, RowReasons):
                    lut = np.array([self._reason_index(t) for t in reason.texts], dtype=np.int64)
                    gone = np.flatnonzero(refused)  # usually a few: gathered by position, not by mask
                    verdict[pending.take(gone)] = lut.take(reason.codes.take(gone))
                else:  # one reason per row
                    verdict[pending[refused]] = [self._reason_index(r) for r, no in zip(reason, refused) if no]
                pending = pending[mask]
                at = pending if every else at[mask]
        return verdict, pending, at

    def _refuse(self, verdict: np.ndarray, pending: np.ndarray, at: np.ndarray | None, mask: np.ndarray,
                reason: str | RowReasons) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_filter_rows`'s bookkeeping of a filter's refusals in one compiled pass: each refused
        row's reason index into ``verdict`` at its position, and the positions and rows (``at``; None
        when they are the positions) it kept."""
        kept_pending = np.empty(len(pending), dtype=np.int64)
        kept_at = None if at is None else np.empty(len(at), dtype=np.int64)
        if isinstance(reason, RowReasons):
            lut = np.array([self._reason_index(t) for t in reason.texts], dtype=np.int64)
            codes = np.asarray(reason.codes, dtype=np.int64)
            kept = rowloops.compiled.refuse(mask, pending, at, verdict, 0, codes, lut, kept_pending, kept_at)  # type: ignore[union-attr]
        else:
            kept = rowloops.compiled.refuse(mask, pending, at, verdict, self._reason_index(reason), None, None,  # type: ignore[union-attr]
                                            kept_pending, kept_at)
        return kept_pending[:kept], (kept_pending if kept_at is None else kept_at)[:kept]

    def _score_rows(self, state: CycleState, pod: Pod, rows: np.ndarray, normalizing: tuple[int, ...],
                    shape: tuple | None = None) -> tuple[int | None, np.ndarray | None, dict[int, np.ndarray]]:
        """PreScore and Score over feasible ``rows``: the reason index a PreScore plugin refused them
        all with (or None), the weighted sum of the plugins that do not normalize (None if there are
        none), and the raw scores of those in ``normalizing``. With the pod's ``shape``, per-node
        scores are kept per shape and row as in :meth:`_filter_rows`."""
        for plugin in self.runner.pre_scores:
            status = plugin.pre_score(state, pod, rows)
            if not status.is_success:
                return self._reason_index(reason_of(status)), None, {}
        summed = None
        raws: dict[int, np.ndarray] = {}
        for i, (_, weight) in enumerate(self.runner.scores):
            key = self.runner.score_key(i, state, pod)
            if key is None and shape is not None and not self.runner.batch_score[i]:
                key = shape
            if key is not None:
                scores = self._keyed_scores[i].values(
                    key, rows, lambda some, i=i: self._score_values(i, state, pod, some))
            else:
                scores = self.runner.score_rows(i, state, pod, rows)
            if i in normalizing:
                raws[i] = scores
            elif summed is None:
                summed = weight * scores
            else:
                summed += weight * scores
        return None, summed, raws

    def _filter_codes(self, index: int, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        """Filter ``index`` on ``rows``: per row the index of its reason, or _FEASIBLE (few rows in plain Python)."""
        if len(rows) <= self.few_rows:
            reasons = self.runner.filters_few[index](state, pod, rows.tolist())
            return np.array([_FEASIBLE if r is None else self._reason_index(r) for r in reasons], dtype=np.int64)
        mask, reason = self.runner.filter_rows(index, state, pod, rows)
        codes = np.full(len(rows), _FEASIBLE, dtype=np.int64)
        refused = ~mask
        if isinstance(reason, str):
            codes[refused] = self._reason_index(reason)
        elif isinstance(reason, RowReasons):
            lut = np.array([self._reason_index(t) for t in reason.texts], dtype=np.int64)
            codes[refused] = lut[reason.codes[refused]]
        else:
            codes[refused] = [self._reason_index(r) for r, no in zip(reason, refused) if no]
        return codes

    def _score_values(self, index: int, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        """Score plugin ``index`` on ``rows`` (raw; few rows in plain Python)."""
        if len(rows) <= self.few_rows:
            return np.array(self.runner.scores_few[index](state, pod, rows.tolist()), dtype=np.int64)
        return self.runner.score_rows(index, state, pod, rows)

    def _evaluate_few(self, state: CycleState, pod: Pod, rows: list[int],
                      normalizing: tuple[int, ...]) -> tuple[list[int], list[int], dict[int, list[int]]]:
        """:meth:`_evaluate_rows` for a few rows, in plain Python (the same verdicts, reasons and scores)."""
        table = self.table
        verdict = [_FEASIBLE] * len(rows)
        pending = []  # positions in ``rows`` no filter has refused yet
        for i, row in enumerate(rows):
            if table.row_values(row).live:
                pending.append(i)
            else:
                verdict[i] = self._reason_index(_GONE)
        feasible = [rows[i] for i in pending]
        for index in self.runner.active_filters(state):
            if not pending:
                break
            reasons = self.runner.filters_few[index](state, pod, feasible)
            if reasons.count(None) == len(reasons):
                continue
            kept = []
            for i, reason in zip(pending, reasons):
                if reason is None:
                    kept.append(i)
                else:
                    verdict[i] = self._reason_index(reason)
            pending = kept
            feasible = [rows[i] for i in pending]
        total = [0] * len(rows)
        raws = {i: [0] * len(rows) for i in normalizing}
        if pending:
            for plugin in self.runner.pre_scores:
                status = plugin.pre_score(state, pod, np.array(feasible, dtype=np.int64))
                if not status.is_success:
                    index = self._reason_index(reason_of(status))
                    for i in pending:
                        verdict[i] = index
                    return verdict, total, raws
            for k, score_few in enumerate(self.runner.scores_few):
                scores = score_few(state, pod, feasible)
                raw = raws.get(k)
                if raw is not None:
                    for i, score in zip(pending, scores):
                        raw[i] = score
                    continue
                weight = self.runner.scores[k][1]
                for i, score in zip(pending, scores):
                    total[i] += weight * score
        return verdict, total, raws

    def _reason_index(self, reason: str) -> int:
        """The index of a refused row's reason: its text with its code (:func:`~toposched.scheduler.status.code_of`),
        so one text refused with two codes has two indices. ``reasons`` holds plain texts."""
        code = code_of(reason)
        key = reason if code == Code.UNSCHEDULABLE else (str(reason), code)  # a Refusal hashes as its text
        index = self._reason_ids.get(key)
        if index is None:
            index = self._reason_ids[key] = len(self._reasons)
            self._reasons.append(str(reason))
            self._reason_codes.append(code)
        return index

    def shape(self, pod: Pod) -> tuple | None:
        """What the plugins read of a pod; pods of one shape share PreFilter, filter and score results.

        None (no caching) when a plugin's answer for a node may depend on more than that node.
        """
        if not self.runner.row_local:
            return None
        containers = tuple((c.name, tuple(sorted(c.requests.items()))) for c in pod.all_containers)
        return (
            containers,
            tuple(c.is_sidecar for c in pod.init_containers),
            len(pod.init_containers),
            tuple(sorted(pod.overhead.items())),
            tuple(sorted(pod.node_selector.items())),
            pod.tolerations,
            pod.qos_class,
            tuple(sorted((k, v) for k, v in pod.annotations.items() if k.startswith(_SHAPE_ANNOTATIONS))),
        )

    def _trial_devices(self, pod: Pod, node: str) -> tuple[dict[str, list[str]] | None, str | None]:
        """The devices ``pod`` would get on ``node`` (reserved on trial and given back), or why it would not."""
        state, status = self.runner.pre_filter(pod)
        if not status.is_success:
            return None, status.message
        refused = self.runner.reserve(state, pod, node, 0.0)
        if refused is not None:
            return None, refused
        placement = self.cluster.nodes[node].pods[pod.uid or pod.key].placement
        self.unreserve(pod)
        return ({r: sorted(ids) for r, ids in sorted(placement.devices().items())} if placement else {}), None

    def binding(self, decision: Decision, pod: Pod) -> list[dict[str, Any]]:
        """PreBind then Bind for a decision: the API requests an adapter must send, in order.

        Raises InputError when a PreBind plugin refuses (the caller then unreserves).
        """
        if decision.node is None:
            raise InputError("the decision has no node", field="node", source=f"pod {pod.key}")
        return self.runner.bind(pod, decision.node, decision.placement)

    def bound(self, pod: Pod, now: float) -> None:
        """The binding went through: the placement stays, reports may now reflect it, PostBind runs."""
        self.runner.bound(pod, now)

    def unreserve(self, pod: Pod) -> None:
        """The binding failed or was abandoned: Unreserve plugins run, and the placement is given back exactly."""
        self.runner.unreserve(pod)

    def explain(self, pod: Pod) -> dict[str, Any]:
        """Every node's verdict for ``pod``, plugin by plugin, without changing anything.

        Returns ``{"pod", "nodes": [{"name", "filter": {"code", "message"}, "score",
        "plugins": {name: raw score}, "view"}], "selected", "placement"}``; ``view`` says what
        the node's replica knows: ``exact`` (the agent's node description, or hardware given
        directly), ``count-only`` (a report without a description: NUMA nodes and counts, no CPU
        or device ids; with the reason when a description was refused), ``none`` (no topology
        data) or ``unschedulable: <why>``. The node and placement are
        what :meth:`schedule` would choose (computed on trial and given back). For a pod asking
        for devices, every node that passes the filters also gets ``"devices"`` (resource to the
        device IDs it would take there) or, when its exact placement refuses, ``"refused"``.
        """
        state, status = self.runner.pre_filter(pod)
        self.table.refresh()
        nodes = []
        feasible_rows = []
        for name in self.table.names:
            record = self.cluster.nodes.get(name)
            if record is None:
                continue
            verdict = self.runner.filter_node(state, pod, record)[0] if status.is_success else status
            nodes.append({"name": name, "filter": {"code": verdict.code.label, "message": verdict.message},
                          "score": None, "plugins": {}, "view": _view(record)})
            if verdict.is_success:
                feasible_rows.append((self.table.index[name], nodes[-1]))
        if feasible_rows:
            rows = np.array([row for row, _ in feasible_rows])
            for plugin in self.runner.pre_scores:
                plugin.pre_score(state, pod, rows)
            normalizing = self.runner.normalizing(state, pod)
            for i, (plugin, weight) in enumerate(self.runner.scores):
                scores = self.runner.score_rows(i, state, pod, rows)
                if i in normalizing:  # as schedule() does
                    scores = self.runner.normalize(i, state, pod, scores)
                for (_, entry), raw in zip(feasible_rows, scores):
                    entry["plugins"][plugin.name] = int(raw)
                    entry["score"] = (entry["score"] or 0) + weight * int(raw)
        if pod.asks_extended:
            for _, entry in feasible_rows:
                entry["devices"], entry["refused"] = self._trial_devices(pod, entry["name"])
        decision = self.schedule(pod, now=0.0)
        if decision.node is not None:
            self.unreserve(pod)
        return {
            "pod": pod.key,
            "nodes": nodes,
            "selected": decision.node,
            "placement": decision.placement.to_dict() if decision.placement else None,
            "message": decision.message,
        }


def _view(record: Any) -> str:
    """What a node's replica knows, for explain (see :meth:`Scheduler.explain`)."""
    if record.broken:
        return f"unschedulable: {record.broken}"
    if record.model is None:
        return "none"
    if record.count_only:
        return f"count-only ({record.degraded})" if record.degraded else "count-only"
    return "exact"
