"""The framework runner: a profile's plugins sorted by extension point once, and the points run in order.

:class:`Runner` is built once per profile and cluster (:class:`~toposched.scheduler.scheduler.Scheduler`
builds it; ``Scheduler.runner``). It decides which Protocol of :mod:`toposched.scheduler.framework`
each plugin satisfies when it is built, derives the few-rows forms a plugin does not write from its
batch form (or, for a plugin with no batch form, from its per-node form), and runs PreFilter,
the per-node filter chain, Reserve with the post-Reserve confirmation, Unreserve, PreBind, Bind and
PostBind. The evaluation over rows (Filter, PreScore, Score, NormalizeScore with the per-shape
cache) is :meth:`Scheduler.evaluate`'s, which calls the runner's filter and score forms.
:meth:`Scheduler.schedule`, :meth:`Scheduler.explain`, the extender's restricted cycle and the
simulator (through the Scheduler) all go through it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from toposched.errors import InputError
from toposched.scheduler.cluster import Cluster, NodeRecord
from toposched.scheduler.framework import (
    CLUSTER,
    PLACEMENT_OVERRIDE,
    SKIPPED_FILTERS,
    Attach,
    Bind,
    Clock,
    Confirm,
    CycleState,
    FewRowsFilter,
    FewRowsScore,
    Filter,
    KeyedFilter,
    KeyedScore,
    NodeFilter,
    NormalizeScore,
    NormalizesSome,
    PostBind,
    PostFilter,
    PreBind,
    PreFilter,
    PreScore,
    Profile,
    Reserve,
    RowLocal,
    RowReasons,
    Score,
    implements,
)
from toposched.scheduler.status import Code, Status, code_of, reason_of
from toposched.scheduler.table import NodeTable
from toposched.workload import Pod

__all__ = ["FewFilter", "FewScore", "Runner"]

FewFilter = Callable[[CycleState, Pod, list[int]], list[str | None]]  # rows -> reason or None per row
FewScore = Callable[[CycleState, Pod, list[int]], list[int]]  # rows -> score per row


class Runner:
    """A profile's extension points, resolved once against the Protocols, run on one cluster.

    ``cache_size`` bounds the PreFilter results kept per pod shape.
    """

    def __init__(self, cluster: Cluster, profile: Profile, table: NodeTable, *, cache_size: int = 512) -> None:
        self.cluster = cluster
        self.profile = profile
        self.table = table
        self.cache_size = cache_size
        self.pre_filters = [p for p in profile.pre_filters if implements(p, PreFilter)]
        self.filters = list(profile.filters)
        self._every_filter = list(range(len(self.filters)))
        self.scores = list(profile.scores)
        self.pre_scores = [p for p in profile.pre_scores if implements(p, PreScore)]
        self.post_filters = [p for p in profile.post_filters if implements(p, PostFilter)]
        for plugin in profile.reserves:
            if not implements(plugin, Reserve):  # kube-scheduler's ReservePlugin has both, so Unreserve can always give back
                raise InputError(f"plugin {plugin.name} has reserve but no unreserve", field="plugins.reserve",
                                 source=profile.name)
        self.reserves = list(profile.reserves)
        self.pre_binds = [p for p in profile.pre_binds if implements(p, PreBind)]
        self.binder = profile.binder if profile.binder is not None and implements(profile.binder, Bind) else None
        scorers = [p for p, _ in self.scores]
        members = _distinct(self.pre_filters + self.filters + scorers + self.reserves + self.pre_binds)
        for plugin in members:
            if implements(plugin, Attach):
                plugin.attach(cluster, profile.name)
        self.clocks = [p for p in members if implements(p, Clock)]
        self.post_binds = [p for p in members if implements(p, PostBind)]
        # Once per plugin, though a plugin may filter and score.
        self.confirms = [p for p in _distinct(self.filters + scorers) if implements(p, Confirm)]
        self.exact = profile.exact
        self.batch_filter = [implements(p, Filter) for p in self.filters]
        self.batch_score = [implements(p, Score) for p in scorers]
        self.keyed_filter = [b and implements(p, KeyedFilter) for p, b in zip(self.filters, self.batch_filter)]
        self.keyed_score = [b and implements(p, KeyedScore) for p, b in zip(scorers, self.batch_score)]
        # Each filter and score as one call over a few rows: the plugin's own few form, else derived.
        self.filters_few: list[FewFilter] = [self._few_filter(p) for p in self.filters]
        self.scores_few: list[FewScore] = [self._few_score(p) for p in scorers]
        # Score plugins with a NormalizeScore step (positions in ``scores``): raw scores are kept
        # per row and normalized over every feasible row when a node is chosen.
        self.normalizers = [i for i, p in enumerate(scorers) if implements(p, NormalizeScore)]
        self._some = {i for i in self.normalizers if implements(scorers[i], NormalizesSome)}
        # Per-row results may be cached only when each row's verdict and raw score depend on that
        # row alone: every plugin has a batch form or declares its per-node answer reads only the
        # node's record (RowLocal), and none pre-scores over rows.
        self.row_local = (
            bool(self.filters or scorers)
            and all(b or implements(p, RowLocal) for p, b in zip(self.filters, self.batch_filter))
            and all(b or implements(p, RowLocal) for p, b in zip(scorers, self.batch_score))
            and not self.pre_scores
        )
        self._pre_filtered: OrderedDict[tuple, dict[Any, Any]] = OrderedDict()

    # ---- cycle start -----------------------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Start a cycle at ``now``: the Clock plugins' changed nodes are marked for re-evaluation."""
        for plugin in self.clocks:
            for name in plugin.advance(now):
                self.table.mark_dirty(name)

    def new_state(self) -> CycleState:
        """An empty cycle state on this runner's cluster."""
        return CycleState(cluster=self.cluster)

    def pre_filter(self, pod: Pod, key: tuple | None = None) -> tuple[CycleState, Status]:
        """PreFilter: the cycle state, and Success or the first refusal (a malformed annotation is
        UnschedulableAndUnresolvable naming it). The plugins that returned Skip are named under
        :data:`~toposched.scheduler.framework.SKIPPED_FILTERS`: their Filter does not run this
        cycle. With a pod-shape ``key`` a successful result is kept and reused for pods of that shape."""
        state = self.new_state()
        known = self._pre_filtered.get(key) if key is not None else None
        if known is not None:
            state.update(known)
            return state, Status.success()
        skipped = []
        for plugin in self.pre_filters:
            try:
                status = plugin.pre_filter(state, pod)
            except InputError as err:
                return state, Status.unresolvable(str(err), plugin=plugin.name)
            if status.code == Code.SKIP:
                skipped.append(plugin.name)
            elif not status.is_success:
                return state, status.with_plugin(plugin.name)
        if skipped:
            state[SKIPPED_FILTERS] = frozenset(skipped)
        if key is not None:
            self._pre_filtered[key] = {k: v for k, v in state.items() if k is not CLUSTER}
            if len(self._pre_filtered) > self.cache_size:
                self._pre_filtered.popitem(last=False)
        return state, Status.success()

    # ---- filters and scores ------------------------------------------------------------------------

    def active_filters(self, state: CycleState) -> list[int]:
        """The positions in ``filters`` of the filters that run this cycle: all but those whose
        PreFilter returned Skip."""
        skipped = state.get(SKIPPED_FILTERS)
        if not skipped:
            return self._every_filter
        return [i for i in self._every_filter if self.filters[i].name not in skipped]

    def filter_node(self, state: CycleState, pod: Pod, node: NodeRecord) -> tuple[Status, str]:
        """Every filter that runs this cycle on one node, in order: Success, or the first refusal
        with its code and the name of the plugin that gave it."""
        for index in self.active_filters(state):
            plugin = self.filters[index]
            if implements(plugin, NodeFilter):
                verdict = plugin.filter(state, pod, node)
            else:
                row = self.table.index[node.name]
                reason = self.filters_few[index](state, pod, [row])[0]
                verdict = Status.success() if reason is None else Status(code_of(reason), (str(reason),), plugin.name)
            if not verdict.is_success:
                return verdict, plugin.name
        return Status.success(), ""

    def filter_rows(self, index: int, state: CycleState, pod: Pod, rows: np.ndarray) -> tuple[np.ndarray, Any]:
        """Filter ``index`` of the profile over ``rows``: its batch form, else its per-node form row by row."""
        plugin = self.filters[index]
        if self.batch_filter[index]:
            return plugin.filter_all(state, pod, self.table, rows)
        ok = np.ones(len(rows), dtype=bool)
        reasons = [""] * len(rows)
        for i, row in enumerate(rows.tolist()):
            status = plugin.filter(state, pod, self.cluster.nodes[self.table.names[row]])
            if not status.is_success:
                ok[i], reasons[i] = False, reason_of(status)
        return ok, reasons

    def filter_key(self, index: int, state: CycleState, pod: Pod) -> Any:
        """Filter ``index``'s key for this pod (:class:`~toposched.scheduler.framework.KeyedFilter`), or None."""
        return self.filters[index].filter_key(state, pod) if self.keyed_filter[index] else None

    def score_key(self, index: int, state: CycleState, pod: Pod) -> Any:
        """Score plugin ``index``'s key for this pod (:class:`~toposched.scheduler.framework.KeyedScore`), or None."""
        return self.scores[index][0].score_key(state, pod) if self.keyed_score[index] else None

    def score_rows(self, index: int, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray:
        """Score plugin ``index`` of the profile over ``rows`` (raw): its batch form, else its per-node form."""
        plugin = self.scores[index][0]
        if self.batch_score[index]:
            return np.asarray(plugin.score_all(state, pod, self.table, rows), dtype=np.int64)
        out = np.zeros(len(rows), dtype=np.int64)
        for i, row in enumerate(rows.tolist()):
            out[i] = plugin.score(state, pod, self.cluster.nodes[self.table.names[row]], self.table)
        return out

    def normalizing(self, state: CycleState, pod: Pod) -> tuple[int, ...]:
        """The NormalizeScore plugins (positions in ``scores``) that normalize this pod's scores."""
        return tuple(i for i in self.normalizers if i not in self._some or self.scores[i][0].normalizes(state, pod))

    def normalize(self, index: int, state: CycleState, pod: Pod, raw: np.ndarray) -> np.ndarray:
        """NormalizeScore of plugin ``index`` over the raw scores of the feasible rows."""
        return np.asarray(self.scores[index][0].normalize_scores(state, pod, raw), dtype=np.int64)

    def _few_filter(self, plugin: Any) -> FewFilter:
        """``(state, pod, rows) -> [reason or None]`` for one filter: its few form, else derived."""
        table = self.table
        if implements(plugin, FewRowsFilter):
            return lambda state, pod, rows: plugin.filter_few(state, pod, table, rows)
        if implements(plugin, Filter):
            def from_batch(state: CycleState, pod: Pod, rows: list[int]) -> list[str | None]:
                mask, reason = plugin.filter_all(state, pod, table, np.array(rows, dtype=np.int64))
                if isinstance(reason, str):
                    return [None if ok else reason for ok in mask.tolist()]
                texts = reason if not isinstance(reason, RowReasons) else reason[:]
                return [None if ok else r for ok, r in zip(mask.tolist(), texts)]
            return from_batch

        def per_node(state: CycleState, pod: Pod, rows: list[int]) -> list[str | None]:
            out: list[str | None] = []
            for row in rows:
                status = plugin.filter(state, pod, self.cluster.nodes[table.names[row]])
                out.append(None if status.is_success else reason_of(status))
            return out
        return per_node

    def _few_score(self, plugin: Any) -> FewScore:
        """``(state, pod, rows) -> [score]`` for one score plugin: its few form, else derived."""
        if implements(plugin, FewRowsScore):
            return lambda state, pod, rows: plugin.score_few(state, pod, self.table, rows)
        index = [p for p, _ in self.scores].index(plugin)
        return lambda state, pod, rows: self.score_rows(index, state, pod, np.array(rows, dtype=np.int64)).tolist()

    # ---- reserve and bind ----------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node: str, now: float) -> str | None:
        """Reserve ``pod`` on ``node`` with its exact placement; None on success, else why the node refused.

        The kubelet replica admits the pod; each Confirm plugin judges the placement (and may
        replace it, :data:`~toposched.scheduler.framework.PLACEMENT_OVERRIDE`, applied to the
        replica and the ledger); then the Reserve plugins run. Any refusal gives everything back.
        """
        admission, placement = self.cluster.assume(pod, node, now, exact=self.exact)
        if placement is None:
            return f"kubelet would reject: {admission.reason}" if admission else "node refused the pod"
        record = self.cluster.nodes[node]
        state.pop(PLACEMENT_OVERRIDE, None)  # left by a node tried before
        for plugin in self.confirms:
            verdict = plugin.confirm(state, pod, record, state.get(PLACEMENT_OVERRIDE) or placement)
            if not verdict.is_success:
                self.cluster.forget(pod)
                return verdict.message
        override = state.pop(PLACEMENT_OVERRIDE, None)
        if override is not None:
            try:
                self.cluster.replace_placement(pod, override)
            except InputError as err:  # a hook's replacement the replica cannot take: the node refuses
                self.cluster.forget(pod)
                return f"cannot apply the agent's placement: {err}"
        for i, plugin in enumerate(self.reserves):
            verdict = plugin.reserve(state, pod, record)
            if not verdict.is_success:
                for done in reversed(self.reserves[:i]):  # as upstream, give back what the others reserved
                    done.unreserve(state, pod, record)
                self.cluster.forget(pod)
                return verdict.message
        return None

    def unreserve(self, pod: Pod) -> None:
        """Unreserve plugins run, and the placement is given back exactly."""
        node = self.cluster.pod_node.get(pod.uid or pod.key)
        if node is not None:
            state = self.new_state()
            for plugin in self.reserves:
                plugin.unreserve(state, pod, self.cluster.nodes[node])
        self.cluster.forget(pod)

    def post_filter(self, state: CycleState, pod: Pod, reasons: dict[str, int]) -> tuple[str | None, Status | None]:
        """PostFilter when no node fits: the first nominated node and the plugin's Status, or (None, None)."""
        for plugin in self.post_filters:
            nominated, verdict = plugin.post_filter(state, pod, dict(reasons))
            if verdict.is_success and nominated is not None:
                return nominated, Status.unschedulable(f"nominated {nominated} after preemption", plugin=plugin.name)
        return None, None

    def bind(self, pod: Pod, node: str, placement: Any) -> list[dict[str, Any]]:
        """PreBind then Bind: the API requests an adapter must send, in order (InputError when a
        PreBind plugin refuses or the profile has no bind plugin)."""
        record = self.cluster.nodes[node]
        state = self.new_state()
        for plugin in self.pre_binds:
            verdict = plugin.pre_bind(state, pod, record, placement)
            if not verdict.is_success:
                raise InputError(verdict.message, field=plugin.name, source=f"pod {pod.key}")
        if self.binder is None:
            raise InputError("the profile has no bind plugin", field="plugins.bind", source=self.profile.name)
        return self.binder.bind(state, pod, record, placement)

    def bound(self, pod: Pod, now: float) -> None:
        """The binding went through: the placement stays, reports may now reflect it, PostBind runs."""
        self.cluster.confirm(pod, now)
        node = self.cluster.pod_node.get(pod.uid or pod.key)
        if node is not None and self.post_binds:
            state = self.new_state()
            for plugin in self.post_binds:
                plugin.post_bind(state, pod, self.cluster.nodes[node])


def _distinct(plugins: list[Any]) -> list[Any]:
    """Each plugin instance once, in first-seen order (one instance may serve several points)."""
    seen: dict[int, Any] = {}
    for plugin in plugins:
        seen.setdefault(id(plugin), plugin)
    return list(seen.values())
