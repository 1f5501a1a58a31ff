"""The scheduling cycle: PreFilter, Filter over every node, Score, then Reserve with exact placement.

Filters and scores run over the whole :class:`NodeTable` at once where a plugin has a vector
form, node by node otherwise. The best-scored feasible nodes are then confirmed exactly, best
first: Reserve admits the pod into the node's kubelet replica (which decides the exact CPUs,
memory per NUMA node and devices) and plugins with a ``confirm`` hook check the result. The
first node that takes the pod is the decision; a node that refuses is counted with its reason.

Nothing here binds: the caller (simulator, extender, standalone scheduler) performs the
:class:`Decision` and then calls :meth:`Scheduler.bound` or :meth:`Scheduler.unreserve`.

Beyond the framework's extension points, a plugin may have ``attach(cluster, profile_name)``
(called once, when the scheduler is built), ``advance(now) -> node names`` (called at the start
of every cycle with the cycle's time; the nodes it returns are re-evaluated, as their answers
changed without a cluster change) and ``post_bind(state, pod, node)`` (PostBind, from
:meth:`Scheduler.bound`). NodeResourceTopologyMatch's NRT cache uses all three.
"""

from __future__ import annotations

import random
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toposched.errors import InputError
from toposched.names import KOORDINATOR_SCHEDULING_PREFIX, TOPOSCHED_PREFIX
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.framework import PLACEMENT_OVERRIDE_KEY, CycleState, Profile, RowReasons
from toposched.scheduler.placement import Placement
from toposched.scheduler.status import Code, Status
from toposched.scheduler.table import NodeTable
from toposched.workload import Pod

__all__ = ["Decision", "Scheduler"]

_FEASIBLE = -1
_NO_SCORE = np.iinfo(np.int64).min
# Pod annotations the plugins read: part of a pod's shape for caching.
_SHAPE_ANNOTATIONS = (TOPOSCHED_PREFIX, KOORDINATOR_SCHEDULING_PREFIX)


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
                 few_rows: int = 24, seed: int | None = None) -> None:
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
        # What PreFilter made of a pod shape (only successful ones): pods of one shape share it.
        self._pre_filtered: OrderedDict[tuple, dict[str, Any]] = OrderedDict()
        self._reasons: list[str] = []
        self._reason_ids: dict[str, int] = {}
        plugins = list(self.profile.filters) + [p for p, _ in self.profile.scores]
        members = _distinct(list(self.profile.pre_filters) + plugins + list(self.profile.reserves)
                            + list(self.profile.pre_binds))
        for plugin in members:
            attach = getattr(plugin, "attach", None)
            if attach is not None:
                attach(cluster, profile.name)
        self._clocks = [p.advance for p in members if getattr(p, "advance", None) is not None]
        self._post_binds = [p for p in members if getattr(p, "post_bind", None) is not None]
        self._exact = self.profile.exact
        # Once per plugin, though a plugin may filter and score.
        self._confirms = [(p.name, p.confirm) for p in _distinct(plugins) if getattr(p, "confirm", None) is not None]
        # Each filter and score as one call over a few rows (its few form, else an adapter).
        self._filters_few = [self._few_filter(p) for p in self.profile.filters]
        self._scores_few = [self._few_score(p) for p, _ in self.profile.scores]
        # Score plugins with a NormalizeScore step (by position in profile.scores): their raw
        # scores are kept per row and normalized over every feasible row when a node is chosen.
        self._normalizers = [i for i, (p, _) in enumerate(self.profile.scores)
                             if getattr(p, "normalize_scores", None) is not None]
        # Per-row results may be cached only when each row's verdict and raw score depend on that
        # row alone: every plugin has a vector form or says its per-node answer reads only the
        # node's record (``row_local``), and none pre-scores over rows.
        self._row_local = (
            bool(plugins)
            and all(_row_local(p, "filter_all") for p in self.profile.filters)
            and all(_row_local(p, "score_all") for p, _ in self.profile.scores)
            and not self.profile.pre_scores
        )

    def _state(self, pod: Pod, key: tuple | None = None) -> tuple[CycleState, Status]:
        state = CycleState(cluster=self.cluster)
        known = self._pre_filtered.get(key) if key is not None else None
        if known is not None:
            state.update(known)
            return state, Status.success()
        for plugin in self.profile.pre_filters:
            try:
                status = plugin.pre_filter(state, pod)
            except InputError as err:
                return state, Status.unresolvable(str(err), plugin=plugin.name)
            if not status.is_success:
                return state, status.with_plugin(plugin.name)
        if key is not None:
            self._pre_filtered[key] = {k: v for k, v in state.items() if k != "cluster"}
            if len(self._pre_filtered) > self.cache_size:
                self._pre_filtered.popitem(last=False)
        return state, Status.success()

    def schedule(self, pod: Pod, now: float) -> Decision:
        """Find a node for ``pod`` and reserve its exact placement there, or say why none fits.

        A malformed pod gets an UnschedulableAndUnresolvable decision naming the field; the
        cluster is unchanged and other pods keep being scheduled.
        """
        for advance in self._clocks:
            for name in advance(now):
                self.table.mark_dirty(name)
        key = self.shape(pod)
        state, status = self._state(pod, key)
        self.table.refresh()
        live = self.table.live_count
        if not status.is_success:
            return Decision(pod.key, None, None, status, {status.message: live}, live)
        verdict, _, base, raws = self._evaluate(state, pod, key)
        # A working copy: the cached candidates change only where a node refuses (below).
        candidates = self._normalized(state, pod, verdict, base, raws) if raws else base.copy()
        refusals: Counter[str] = Counter()  # the better-scored nodes whose exact placement refused the pod
        for _ in range(self.max_exact_attempts):
            row = self._best(candidates)  # the best score; among equals the lowest row or a seeded draw
            if candidates[row] == _NO_SCORE:
                break
            candidates[row] = _NO_SCORE
            name = self.table.names[row]
            refused = self._reserve(state, pod, name, now)
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
        counts = np.bincount(verdict[verdict >= 0], minlength=len(self._reasons))
        reasons: Counter[str] = Counter({self._reasons[i]: int(n) for i, n in enumerate(counts) if n})
        status, nominated = Status.unschedulable("no node fits", plugin="Scheduler"), None
        for plugin in self.profile.post_filters:
            nominated, verdict = plugin.post_filter(state, pod, dict(reasons))
            if verdict.is_success and nominated is not None:
                status = Status.unschedulable(f"nominated {nominated} after preemption", plugin=plugin.name)
                break
        return Decision(pod.key, None, None, status, dict(reasons), live, nominated)

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

    def _normalizing(self, state: CycleState, pod: Pod) -> tuple[int, ...]:
        """The normalizing score plugins (positions in profile.scores) that normalize this pod's scores."""
        out = []
        for i in self._normalizers:
            applies = getattr(self.profile.scores[i][0], "normalizes", None)
            if applies is None or applies(state, pod):
                out.append(i)
        return tuple(out)

    def _normalized(self, state: CycleState, pod: Pod, verdict: np.ndarray, base: np.ndarray,
                    raws: dict[int, np.ndarray]) -> np.ndarray:
        """``base`` (a new array) plus each normalizing plugin's weighted scores, normalized over the feasible rows."""
        out = base.copy()
        feasible = np.flatnonzero(verdict == _FEASIBLE)
        if len(feasible):
            for i, raw in raws.items():
                plugin, weight = self.profile.scores[i]
                out[feasible] += weight * np.asarray(plugin.normalize_scores(state, pod, raw[feasible]), dtype=np.int64)
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
            verdict, total, raws = self._evaluate_rows(state, pod, rows, self._normalizing(state, pod))
        if raws:
            total = self._normalized(state, pod, verdict, total, raws)
        return verdict, total

    @property
    def reasons(self) -> list[str]:
        """Filter reasons by the index :meth:`evaluate` gives."""
        return self._reasons

    def _evaluate(self, state: CycleState, pod: Pod,
                  key: tuple | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """Per row: the index of the first filter reason that rejects it (or _FEASIBLE), its total
        score without the normalizing plugins, its candidate score (that total where feasible,
        else _NO_SCORE), and per normalizing plugin its raw scores (0 where not feasible).

        Results are kept per pod shape; rows whose node changed since are the only ones recomputed.
        """
        size = self.table.size
        normalizing = self._normalizing(state, pod)
        cached = self._cache.get(key) if key is not None else None
        rows = None
        if cached is not None and len(cached[0]) == size and tuple(cached[3]) == normalizing:
            verdict, total, candidates, raws, stamp = cached
            rows = self.table.changed_since(stamp)
        if rows is None:
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
        if key is not None:
            self._cache[key] = (verdict, total, candidates, raws, self.table.stamp)
            self._cache.move_to_end(key)
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return verdict, total, candidates, raws

    def _evaluate_rows(self, state: CycleState, pod: Pod, rows: np.ndarray,
                       normalizing: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """Verdicts, totals of the plugins that do not normalize, and raw scores of those in ``normalizing``."""
        verdict = np.full(len(rows), _FEASIBLE, dtype=np.int64)
        raws = {i: np.zeros(len(rows), dtype=np.int64) for i in normalizing}
        live = self.table.view("live")[rows]
        pending = np.flatnonzero(live)  # positions in ``rows`` no filter has refused yet
        if len(pending) < len(rows):
            verdict[~live] = self._reason_index("node is gone")
        for plugin in self.profile.filters:
            if not len(pending):
                break
            if getattr(plugin, "filter_all", None) is not None:
                mask, reason = plugin.filter_all(state, pod, self.table, rows[pending])
                if mask.all():
                    continue
                refused = ~mask
                if isinstance(reason, str):
                    verdict[pending[refused]] = self._reason_index(reason)
                elif isinstance(reason, RowReasons):
                    lut = np.array([self._reason_index(t) for t in reason.texts], dtype=np.int64)
                    verdict[pending[refused]] = lut[reason.codes[refused]]
                else:  # one reason per row
                    verdict[pending[refused]] = [self._reason_index(r) for r, no in zip(reason, refused) if no]
                pending = pending[mask]
            else:
                kept = []
                for i in pending:
                    status = plugin.filter(state, pod, self.cluster.nodes[self.table.names[rows[i]]])
                    if status.is_success:
                        kept.append(i)
                    else:
                        verdict[i] = self._reason_index(status.message or status.code.label)
                pending = np.array(kept, dtype=np.int64)
        total = np.zeros(len(rows), dtype=np.int64)
        if len(pending):
            for plugin in self.profile.pre_scores:
                status = plugin.pre_score(state, pod, rows[pending])
                if not status.is_success:
                    verdict[pending] = self._reason_index(status.message or status.code.label)
                    return verdict, total, raws
            for i, (plugin, weight) in enumerate(self.profile.scores):
                scores = self._scores(plugin, state, pod, rows[pending])
                if i in raws:
                    raws[i][pending] = scores
                else:
                    total[pending] += weight * scores
        return verdict, total, raws

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
                verdict[i] = self._reason_index("node is gone")
        feasible = [rows[i] for i in pending]
        for judge in self._filters_few:
            if not pending:
                break
            reasons = judge(state, pod, feasible)
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
            for plugin in self.profile.pre_scores:
                status = plugin.pre_score(state, pod, np.array(feasible, dtype=np.int64))
                if not status.is_success:
                    index = self._reason_index(status.message or status.code.label)
                    for i in pending:
                        verdict[i] = index
                    return verdict, total, raws
            for k, score_few in enumerate(self._scores_few):
                scores = score_few(state, pod, feasible)
                raw = raws.get(k)
                if raw is not None:
                    for i, score in zip(pending, scores):
                        raw[i] = score
                    continue
                weight = self.profile.scores[k][1]
                for i, score in zip(pending, scores):
                    total[i] += weight * score
        return verdict, total, raws

    def _few_filter(self, plugin: Any) -> Any:
        """``(state, pod, rows) -> [reason or None]`` for one filter: its few form, else its vector or per-node form."""
        table = self.table
        few = getattr(plugin, "filter_few", None)
        if few is not None:
            return lambda state, pod, rows: few(state, pod, table, rows)
        if getattr(plugin, "filter_all", None) is not None:
            def vector(state: CycleState, pod: Pod, rows: list[int]) -> list[str | None]:
                mask, reason = plugin.filter_all(state, pod, table, np.array(rows, dtype=np.int64))
                if isinstance(reason, str):
                    return [None if ok else reason for ok in mask.tolist()]
                return [None if ok else r for ok, r in zip(mask.tolist(), reason)]
            return vector

        def per_node(state: CycleState, pod: Pod, rows: list[int]) -> list[str | None]:
            out: list[str | None] = []
            for row in rows:
                status = plugin.filter(state, pod, self.cluster.nodes[table.names[row]])
                out.append(None if status.is_success else status.message or status.code.label)
            return out
        return per_node

    def _few_score(self, plugin: Any) -> Any:
        """``(state, pod, rows) -> [score]`` for one score plugin: its few form, else its vector or per-node form."""
        few = getattr(plugin, "score_few", None)
        if few is not None:
            return lambda state, pod, rows: few(state, pod, self.table, rows)
        return lambda state, pod, rows: self._scores(plugin, state, pod, np.array(rows, dtype=np.int64)).tolist()

    def _reason_index(self, reason: str) -> int:
        index = self._reason_ids.get(reason)
        if index is None:
            index = self._reason_ids[reason] = len(self._reasons)
            self._reasons.append(reason)
        return index

    def shape(self, pod: Pod) -> tuple | None:
        """What the plugins read of a pod; pods of one shape share PreFilter, filter and score results.

        None (no caching) when a plugin's answer for a node may depend on more than that node.
        """
        if not self._row_local:
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

    def _scores(self, plugin: Any, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        if getattr(plugin, "score_all", None) is not None:
            return np.asarray(plugin.score_all(state, pod, self.table, rows), dtype=np.int64)
        out = np.zeros(len(rows), dtype=np.int64)
        for i, row in enumerate(rows):
            out[i] = plugin.score(state, pod, self.cluster.nodes[self.table.names[row]], self.table)
        return out

    def _reserve(self, state: CycleState, pod: Pod, node: str, now: float) -> str | None:
        """Reserve on ``node``; None on success, else the reason the node refused."""
        admission, placement = self.cluster.assume(pod, node, now, exact=self._exact)
        if placement is None:
            return f"kubelet would reject: {admission.reason}" if admission else "node refused the pod"
        record = self.cluster.nodes[node]
        state.pop(PLACEMENT_OVERRIDE_KEY, None)  # left by a node tried before
        for _, confirm in self._confirms:
            verdict = confirm(state, pod, record, state.get(PLACEMENT_OVERRIDE_KEY) or placement)
            if not verdict.is_success:
                self.cluster.forget(pod)
                return verdict.message
        override = state.pop(PLACEMENT_OVERRIDE_KEY, None)
        if override is not None:
            try:
                self.cluster.replace_placement(pod, override)
            except InputError as err:  # a hook's replacement the replica cannot take: the node refuses
                self.cluster.forget(pod)
                return f"cannot apply the agent's placement: {err}"
        for i, plugin in enumerate(self.profile.reserves):
            verdict = plugin.reserve(state, pod, record)
            if not verdict.is_success:
                for done in reversed(self.profile.reserves[:i]):  # as upstream, give back what the others reserved
                    unreserve = getattr(done, "unreserve", None)
                    if unreserve is not None:
                        unreserve(state, pod, record)
                self.cluster.forget(pod)
                return verdict.message
        return None

    def _trial_devices(self, pod: Pod, node: str) -> tuple[dict[str, list[str]] | None, str | None]:
        """The devices ``pod`` would get on ``node`` (reserved on trial and given back), or why it would not."""
        state, status = self._state(pod)
        if not status.is_success:
            return None, status.message
        refused = self._reserve(state, pod, node, 0.0)
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
        record = self.cluster.nodes[decision.node]
        state = CycleState(cluster=self.cluster)
        for plugin in self.profile.pre_binds:
            verdict = plugin.pre_bind(state, pod, record, decision.placement)
            if not verdict.is_success:
                raise InputError(verdict.message, field=plugin.name, source=f"pod {pod.key}")
        if self.profile.binder is None:
            raise InputError("the profile has no bind plugin", field="plugins.bind", source=self.profile.name)
        return self.profile.binder.bind(state, pod, record, decision.placement)

    def bound(self, pod: Pod, now: float) -> None:
        """The binding went through: the placement stays, reports may now reflect it, PostBind runs."""
        self.cluster.confirm(pod, now)
        node = self.cluster.pod_node.get(pod.uid or pod.key)
        if node is not None and self._post_binds:
            state = CycleState(cluster=self.cluster)
            for plugin in self._post_binds:
                plugin.post_bind(state, pod, self.cluster.nodes[node])

    def unreserve(self, pod: Pod) -> None:
        """The binding failed or was abandoned: Unreserve plugins run, and the placement is given back exactly."""
        node = self.cluster.pod_node.get(pod.uid or pod.key)
        if node is not None:
            state = CycleState(cluster=self.cluster)
            for plugin in self.profile.reserves:
                unreserve = getattr(plugin, "unreserve", None)
                if unreserve is not None:
                    unreserve(state, pod, self.cluster.nodes[node])
        self.cluster.forget(pod)

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
        state, status = self._state(pod)
        self.table.refresh()
        nodes = []
        feasible_rows = []
        for name in self.table.names:
            record = self.cluster.nodes.get(name)
            if record is None:
                continue
            verdict = status
            if status.is_success:
                for plugin in self.profile.filters:
                    verdict = plugin.filter(state, pod, record)
                    if not verdict.is_success:
                        break
            nodes.append({"name": name, "filter": {"code": verdict.code.label, "message": verdict.message},
                          "score": None, "plugins": {}, "view": _view(record)})
            if verdict.is_success:
                feasible_rows.append((self.table.index[name], nodes[-1]))
        if feasible_rows:
            rows = np.array([row for row, _ in feasible_rows])
            for plugin in self.profile.pre_scores:
                plugin.pre_score(state, pod, rows)
            for plugin, weight in self.profile.scores:
                scores = self._scores(plugin, state, pod, rows)
                normalize = getattr(plugin, "normalize_scores", None)
                applies = getattr(plugin, "normalizes", None)
                if normalize is not None and (applies is None or applies(state, pod)):  # as schedule() does
                    scores = np.asarray(normalize(state, pod, scores), dtype=np.int64)
                for (_, entry), raw in zip(feasible_rows, scores):
                    entry["plugins"][plugin.name] = int(raw)
                    entry["score"] = (entry["score"] or 0) + weight * int(raw)
        if any("/" in r for c in pod.all_containers for r in c.limits_or_requests):
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


def _distinct(plugins: list[Any]) -> list[Any]:
    """Each plugin instance once, in first-seen order (one instance may serve several points)."""
    seen: dict[int, Any] = {}
    for plugin in plugins:
        seen.setdefault(id(plugin), plugin)
    return list(seen.values())


def _row_local(plugin: Any, vector_method: str) -> bool:
    """Whether a plugin's verdict or score for a node depends on that node's record and the pod alone."""
    return getattr(plugin, vector_method, None) is not None or getattr(plugin, "row_local", False)
