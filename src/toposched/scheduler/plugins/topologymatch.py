"""NodeResourceTopologyMatch as a plugin: scheduler-plugins' semantics over the node's report.

The verdicts are :func:`~toposched.scheduler.nrt_match.nrt_filter` and
:func:`~toposched.scheduler.nrt_match_score.nrt_score`. Which NodeResourceTopology they read
follows the plugin's args as upstream's cache does (docs/scheduler/nrt-cache.md):

* no cache args (``cacheResyncPeriodSeconds: 0``, no ``discardReservedNodes``): the node's last
  published report, exactly as scheduler-plugins sees it (a report that may lag what runs);
* ``cacheResyncPeriodSeconds > 0``: the overreserve cache's view, ``discardReservedNodes``: the
  discardreserved cache's view (:class:`~toposched.scheduler.nrt_cache.NRTCache`).

A cache is fed from the cluster the scheduler runs on (:meth:`NodeResourceTopologyMatch.attach`):
reports and the pods bound to each node reach it through the cluster's change listeners, Reserve,
Unreserve and PostBind through the scheduler, and time through :meth:`advance`, which also tells
the scheduler which nodes' answers changed without a cluster change (a resync flush), so that
its per-shape caching of this plugin's per-node answers (``row_local``) stays exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toposched.errors import InputError
from toposched.scheduler.cluster import Cluster, NodeRecord
from toposched.scheduler.framework import CycleState, registry
from toposched.scheduler.nrt_cache import STRATEGY_DISCARD_RESERVED, STRATEGY_PASSTHROUGH, NRTCache
from toposched.scheduler.nrt_match import nrt_filter
from toposched.scheduler.nrt_match_args import NodeResourceTopologyMatchArgs
from toposched.scheduler.nrt_match_score import nrt_score
from toposched.scheduler.status import Status
from toposched.scheduler.table import NodeTable
from toposched.topology.nrt import NodeResourceTopology
from toposched.workload import Pod

__all__ = ["NodeResourceTopologyMatch"]


@registry.register
class NodeResourceTopologyMatch:
    """scheduler-plugins' NodeResourceTopologyMatch (Filter, Score, Reserve, PostBind), with its NRT cache."""

    name = "NodeResourceTopologyMatch"
    # framework.RowLocal: its answer for a node reads only that node's report (or the cache's view
    # of that node) and allocatable; every change of either marks the node's row changed: the
    # scheduler may keep answers per pod shape between changes.
    row_local = True

    def __init__(self, args: Mapping[str, Any] | NodeResourceTopologyMatchArgs | None) -> None:
        self.args = args if isinstance(args, NodeResourceTopologyMatchArgs) else NodeResourceTopologyMatchArgs.from_dict(dict(args or {}))
        self.cache: NRTCache | None = None  # set by attach() when the args ask for a cache
        self._cluster: Cluster | None = None
        self._reported: dict[str, NodeResourceTopology] = {}  # node -> the report last handed to the cache
        self._informed: dict[str, dict[str, Pod]] = {}  # node -> uid -> bound pods the cache was told about
        self._stale: set[str] = set()  # nodes whose view changed with no cluster change to say so

    # ---- wiring ---------------------------------------------------------------------------------

    def attach(self, cluster: Cluster, profile_name: str) -> None:
        """Run on ``cluster`` under the profile ``profile_name`` (the scheduler calls this once).

        When the args select overreserve or discardreserved, the plugin builds its cache from the
        reports the cluster already holds (upstream's start-up List, starting at the latest report
        time), tells it the pods already bound, and follows the cluster's changes from then on.
        Pods of ``profile_name`` and of every pod this plugin reserves are not foreign.
        Passthrough needs none of this: the plugin reads ``node.nrt``.
        """
        if self._cluster is not None and self._cluster is not cluster:
            raise InputError("the plugin already serves another cluster; build a new profile per scheduler",
                             field="cluster", source=self.name)
        records = [cluster.nodes[name] for name in sorted(cluster.nodes)]
        cache = NRTCache.from_args(
            self.args,
            profile_names=(profile_name,),
            initial=[r.nrt for r in records if r.nrt is not None],
            start=max((r.report_time for r in records if r.report_time is not None), default=0.0),
        )
        if cache.strategy == STRATEGY_PASSTHROUGH:
            return
        if self._cluster is None:
            cluster.subscribe(self._node_changed)
        self.cache, self._cluster = cache, cluster
        self._reported = {r.name: r.nrt for r in records if r.nrt is not None}
        self._informed, self._stale = {}, set()
        for record in records:
            self._inform_pods(record.name, record)

    def advance(self, now: float) -> tuple[str, ...]:
        """Move the cache's time to ``now`` (running the resyncs that fell due) and return, sorted,
        the nodes whose view changed since the last call without a cluster change marking them.

        A ``now`` earlier than the cache's time (an explain's trial run) moves nothing.
        """
        if self.cache is None:
            return ()
        if now > self.cache.now:
            self._stale.update(self.cache.advance(now))
        stale, self._stale = self._stale, set()
        return tuple(sorted(stale))

    def _node_changed(self, name: str) -> None:
        """A cluster listener: hand the cache a new report and the pods bound or gone on the node."""
        cache, cluster = self.cache, self._cluster
        if cache is None or cluster is None:
            return
        record = cluster.nodes.get(name)
        if record is not None and record.nrt is not None and self._reported.get(name) is not record.nrt:
            self._reported[name] = record.nrt
            at = max(cache.now, record.report_time if record.report_time is not None else cache.now)
            # Resyncs due before the report see the previous one; what they flush must reach the table.
            self._stale.update(cache.advance(at))
            cache.update_report(record.nrt, at)
        self._inform_pods(name, record)

    def _inform_pods(self, name: str, record: NodeRecord | None) -> None:
        """The pod informer: pods bound to the node (not merely assumed) are tracked, gone ones untracked."""
        cache = self.cache
        seen = self._informed.setdefault(name, {})
        current = {} if record is None else {uid: e.pod for uid, e in record.pods.items() if not e.assumed}
        for uid in [uid for uid in seen if uid not in current]:
            cache.untrack_pod(name, seen.pop(uid))  # type: ignore[union-attr]
        for uid, pod in current.items():
            if uid not in seen:
                seen[uid] = pod
                cache.track_pod_on_node(name, pod)  # type: ignore[union-attr]

    # ---- extension points -----------------------------------------------------------------------

    def filter(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        """Upstream's Filter on the node's report, or through the cache (which marks a node that
        rejects a pod as a resync candidate, and refuses nodes it cannot vouch for)."""
        allocatable = node.spec.allocatable or (node.model.allocatable if node.model else None)
        if self.cache is None:
            return nrt_filter(pod, node.nrt, node_allocatable=allocatable).with_plugin(self.name)
        return self.cache.filter(pod, node.name, node_allocatable=allocatable).with_plugin(self.name)

    def score(self, state: CycleState, pod: Pod, node: NodeRecord, table: NodeTable) -> int:
        """Upstream's Score (0..100) on the node's report or the cache's view; 0 when it cannot score."""
        if self.cache is None:
            value, status = nrt_score(pod, node.nrt, args=self.args)
        else:
            value, status = self.cache.score(pod, node.name, args=self.args)
        return value if status.is_success else 0

    def reserve(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        """Reserve: the cache assumes the pod on the node (overreserve) or holds the node back
        until PostBind (discardreserved). Never refuses."""
        if self.cache is not None:
            # A pod this scheduler places names one of its profiles (kube-scheduler only picks up
            # pods naming one), so pods of that scheduler name are not foreign.
            self.cache.add_profile_name(pod.scheduler_name)
            self.cache.reserve(node.name, pod)
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node: NodeRecord) -> None:
        """Unreserve: the cache forgets the pod's reservation on the node."""
        if self.cache is not None:
            self.cache.unreserve(node.name, pod)

    def post_bind(self, state: CycleState, pod: Pod, node: NodeRecord) -> None:
        """PostBind: discardreserved releases the node; the pod informer now sees the pod bound there."""
        if self.cache is None:
            return
        self.cache.post_bind(node.name, pod)
        if self.cache.strategy == STRATEGY_DISCARD_RESERVED:
            self._stale.add(node.name)
        self._inform_pods(node.name, node)
