"""scheduler-plugins' NodeResourceTopology cache strategies, as one pure object with time passed in.

``NodeResourceTopologyMatch`` never reads a NodeResourceTopology (NRT) directly: it asks its
cache (``pkg/noderesourcetopology/cache``) for a copy, and the cache decides what the Filter and
Score see. Three strategies exist upstream and here, each a class behind the one interface
:class:`NRTCache` (upstream's ``cache.Interface``); :func:`new_nrt_cache` and
:meth:`NRTCache.from_args` pick one (docs/scheduler/nrt-cache.md has the full story, the
upstream revision and every deliberate difference):

``passthrough`` (:class:`PassthroughCache`)
    the last published report, as is. Reserve, Unreserve and PostBind do nothing.
``discardreserved`` (:class:`DiscardReservedCache`)
    the last published report, but a node with a reservation in flight (Reserve seen, neither
    Unreserve nor PostBind yet) is refused: the view is ``None`` and not fresh.
``overreserve`` (:class:`OverReserveCache`)
    a private store of reports that changes only when the node is *resynced*. Pods reserved
    on a node since its last resync are "assumed": their effective request is subtracted from
    the ``available`` of every zone of the node (upstream cannot know which NUMA node the kubelet
    will pick, so it takes the request from all of them; available never drops below zero).
    A node becomes *dirty* when the Filter rejects a pod on it or when a pod of another scheduler
    (a "foreign pod") shows up on it; a node with foreign pods is refused (not fresh) until it is
    resynced. Every ``resync_period`` the resync step looks at the dirty nodes: a node whose latest
    report carries a pods fingerprint (``nodeTopologyPodsFingerprint``) equal to the fingerprint of
    the pods the scheduler knows on that node is flushed (the report becomes the stored one, its
    assumed pods and dirty marks are dropped). With ``resync_scope="All"`` a node whose report
    changes its Topology Manager policy or scope, or whose first report arrives after start, is
    flushed at the next resync whatever its fingerprint.

Time only enters through ``now`` arguments: :meth:`NRTCache.advance` runs the resyncs that fell
due, :meth:`NRTCache.update_report` advances to ``now`` before taking the new report.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from toposched.errors import InputError
from toposched.names import (
    FINGERPRINT_ANNOTATION,
    FINGERPRINT_ATTRIBUTE,
    FINGERPRINT_METHOD_ATTRIBUTE,
    FINGERPRINT_METHOD_WITH_EXCLUSIVE_RESOURCES,
)
from toposched.scheduler.fingerprint import (
    FingerprintCheck,
    check_fingerprint,
)
from toposched.scheduler.nrt_match import (
    TopologyManagerConfig,
    is_native_resource,
    nrt_filter,
    topology_manager_config,
    upstream_effective_request,
)
from toposched.scheduler.nrt_match_args import NodeResourceTopologyMatchArgs
from toposched.scheduler.nrt_match_score import nrt_score
from toposched.scheduler.status import Status
from toposched.topology.nrt import NodeResourceTopology
from toposched.workload import BEST_EFFORT, GUARANTEED, Pod

__all__ = [
    "FOREIGN_PODS_DETECT_MODES",
    "INFORMER_MODES",
    "DiscardReservedCache",
    "NRTCache",
    "NodeView",
    "OverReserveCache",
    "PassthroughCache",
    "POD_PHASES",
    "REASON_INVALID_TOPOLOGY",
    "RESYNC_METHODS",
    "RESYNC_SCOPES",
    "STRATEGIES",
    "STRATEGY_DISCARD_RESERVED",
    "STRATEGY_OVERRESERVE",
    "STRATEGY_PASSTHROUGH",
    "are_exclusive_for_pod",
    "expected_fingerprint",
    "new_nrt_cache",
]

STRATEGY_PASSTHROUGH = "passthrough"
STRATEGY_OVERRESERVE = "overreserve"
STRATEGY_DISCARD_RESERVED = "discardreserved"
STRATEGIES = (STRATEGY_PASSTHROUGH, STRATEGY_OVERRESERVE, STRATEGY_DISCARD_RESERVED)

RESYNC_METHODS = ("Autodetect", "All", "OnlyExclusiveResources")
FOREIGN_PODS_DETECT_MODES = ("None", "All", "OnlyExclusiveResources")
INFORMER_MODES = ("Shared", "Dedicated")
RESYNC_SCOPES = ("All", "OnlyResources")
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")

# The Filter's verdict on a node the cache refuses (foreign pods, or a reservation in flight).
REASON_INVALID_TOPOLOGY = "invalid node topology data"
_PLUGIN = "NodeResourceTopologyMatch"
_HUGEPAGES_PREFIX = "hugepages-"
_NO_RESOURCES: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the Filter and Score of the plugin see for one node (upstream ``GetCachedNRTCopy``).

    ``nrt is None and fresh``: no topology data, the node passes the Filter and scores 0.
    ``not fresh``: the cache refuses the node ("invalid node topology data"); ``nrt`` is None.
    ``generation`` counts the overreserve cache's flushes (0 for the other strategies).
    """

    nrt: NodeResourceTopology | None
    fresh: bool = True
    generation: int = 0


# ---- helpers shared with the resync and the foreign pods detection ------------------------


def are_exclusive_for_pod(pod: Pod, nrt_resources: Collection[str]) -> bool:
    """Whether the pod holds exclusive resources in its steady state (upstream ``AreExclusiveForPod``).

    Only app containers and restartable init containers (sidecars) count. A resource outside the
    native ones (``vendor/name``) is exclusive when the node's NRT reports it (``nrt_resources``);
    for a Guaranteed pod, a whole number of CPUs, or any memory or hugepages, is exclusive too.
    """
    qos = pod.qos_class
    steady = [c for c in pod.init_containers if c.is_sidecar] + list(pod.containers)
    for container in steady:
        for resource, quantity in container.requests.items():
            if not is_native_resource(resource):
                if resource in nrt_resources:
                    return True
                continue
            if qos != GUARANTEED:
                continue
            if resource == "cpu" and quantity > 0 and quantity % 1000 == 0:
                return True
            if (resource == "memory" or resource.startswith(_HUGEPAGES_PREFIX)) and quantity > 0:
                return True
    return False


def expected_fingerprint(nrt: NodeResourceTopology, resync_method: str) -> tuple[str, bool]:
    """The pods fingerprint a report carries and whether only pods with exclusive resources count.

    The ``nodeTopologyPodsFingerprint`` attribute wins (first occurrence); then the legacy
    ``topology.node.k8s.io/fingerprint`` annotation, which never means "exclusive only"; else
    ``""``. With the attribute, ``OnlyExclusiveResources`` always restricts, ``All`` never, and
    ``Autodetect`` follows the ``nodeTopologyPodsFingerprintMethod`` attribute
    (``with-exclusive-resources``). Upstream ``podFingerprintForNodeTopology``.
    """
    if FINGERPRINT_ATTRIBUTE in nrt.attributes:
        if resync_method == "OnlyExclusiveResources":
            only_exclusive = True
        elif resync_method == "Autodetect":
            only_exclusive = nrt.attributes.get(FINGERPRINT_METHOD_ATTRIBUTE) == FINGERPRINT_METHOD_WITH_EXCLUSIVE_RESOURCES
        else:
            only_exclusive = False
        return nrt.attributes[FINGERPRINT_ATTRIBUTE], only_exclusive
    return nrt.annotations.get(FINGERPRINT_ANNOTATION, ""), False


def _resource_names(nrt: NodeResourceTopology | None) -> frozenset[str]:
    if nrt is None:
        return _NO_RESOURCES
    return frozenset(res.name for zone in nrt.zones for res in zone.resources)


def _includes_non_native(pod: Pod) -> bool:
    return any(not is_native_resource(name) for c in pod.all_containers for name in c.requests)


def _subtract_everywhere(nrt: NodeResourceTopology, totals: Mapping[str, int]) -> NodeResourceTopology:
    # Subtracting each assumed pod in turn and clamping at zero when a zone cannot cover it (as
    # upstream's UpdateNRT does) ends at max(0, available - total) whatever the order of the pods.
    zones = []
    for zone in nrt.zones:
        resources = tuple(
            replace(res, available=max(0, res.available - totals[res.name])) if res.name in totals else res
            for res in zone.resources
        )
        zones.append(replace(zone, resources=resources))
    return replace(nrt, zones=tuple(zones))


def _choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise InputError(f"{value!r} is not one of {', '.join(allowed)}", field=what, source="NRTCache")
    return value


# ---- the interface ------------------------------------------------------------------------


class NRTCache(ABC):
    """The NRT cache of one ``NodeResourceTopologyMatch`` profile: upstream's ``cache.Interface``.

    What every strategy answers (the abstract methods): the view of a node
    (``GetCachedNRTCopy``), a Filter rejection (``NodeMaybeOverReserved``), Reserve, Unreserve
    and PostBind, and the pod informer's events (``NodeHasForeignPods``). Time, the latest
    reports, the Filter and Score through the view are shared; the inspection methods answer
    "nothing" unless the strategy keeps that state. Mutable, not thread-safe, no clock of its
    own: every change of time comes through ``now``.
    """

    #: The strategy's name in upstream's terms (one of :data:`STRATEGIES`).
    strategy: ClassVar[str]

    def __init__(
        self,
        *,
        resync_period: float = 0.0,
        resync_method: str = "Autodetect",
        resync_scope: str = "All",
        foreign_pods_detect: str = "All",
        informer_mode: str = "Dedicated",
        profile_names: Iterable[str] = ("default-scheduler",),
        initial: Iterable[NodeResourceTopology] = (),
        start: float = 0.0,
    ):
        """A cache holding the reports in ``initial`` (upstream's start-up List).

        ``resync_period`` (seconds, used by overreserve only, which needs it > 0) spaces the
        resyncs, the first one at ``start``. ``profile_names`` are the scheduler names whose pods
        are not foreign. The other knobs are the plugin's ``cache`` args, checked whatever the
        strategy, as upstream validates the args. Bad values raise InputError.
        """
        self.resync_method = _choice(resync_method, RESYNC_METHODS, "cache.resyncMethod")
        self.resync_scope = _choice(resync_scope, RESYNC_SCOPES, "cache.resyncScope")
        self.foreign_pods_detect = _choice(foreign_pods_detect, FOREIGN_PODS_DETECT_MODES, "cache.foreignPodsDetect")
        self.informer_mode = _choice(informer_mode, INFORMER_MODES, "cache.informerMode")
        if isinstance(resync_period, bool) or not isinstance(resync_period, (int, float)) \
                or not math.isfinite(resync_period) or resync_period < 0:
            raise InputError(f"resync period {resync_period!r} is not a finite number of seconds >= 0",
                             field="cacheResyncPeriodSeconds", source="NRTCache")
        self.resync_period = float(resync_period)
        self.profile_names = frozenset(profile_names)
        self._now = float(start)
        # The API server's view: the last report published for each node.
        self._reports: dict[str, NodeResourceTopology] = {}
        for nrt in initial:
            self._reports[nrt.name] = nrt

    @classmethod
    def from_args(
        cls,
        args: NodeResourceTopologyMatchArgs,
        *,
        profile_names: Iterable[str] = ("default-scheduler",),
        initial: Iterable[NodeResourceTopology] = (),
        start: float = 0.0,
    ) -> NRTCache:
        """The cache upstream builds from the plugin args: ``discardReservedNodes`` wins, then a
        ``cacheResyncPeriodSeconds`` > 0 selects overreserve, else passthrough."""
        if args.discard_reserved_nodes:
            strategy = STRATEGY_DISCARD_RESERVED
        elif args.cache_resync_period_seconds > 0:
            strategy = STRATEGY_OVERRESERVE
        else:
            strategy = STRATEGY_PASSTHROUGH
        period = args.cache_resync_period_seconds if strategy == STRATEGY_OVERRESERVE else 0
        return new_nrt_cache(
            strategy,
            resync_period=period,
            resync_method=args.cache.resync_method,
            resync_scope=args.cache.resync_scope,
            foreign_pods_detect=args.cache.foreign_pods_detect,
            informer_mode=args.cache.informer_mode,
            profile_names=profile_names,
            initial=initial,
            start=start,
        )

    # ---- time and reports -----------------------------------------------------------------

    @property
    def now(self) -> float:
        """The latest time the cache has been told about."""
        return self._now

    @property
    def generation(self) -> int:
        """How many resyncs changed the overreserve store (upstream's generation counter); 0 elsewhere."""
        return 0

    @property
    def next_resync_at(self) -> float | None:
        """When the next periodic resync falls due (overreserve), else None."""
        return None

    def advance(self, now: float) -> tuple[str, ...]:
        """Move time to ``now`` and run the resync if one fell due; returns the nodes it flushed.

        Resyncs fall at ``start + k * resync_period``. Several periods passing with nothing
        happening in between need one resync only: a second one would find the same reports and
        pods. Time never goes backwards (InputError).
        """
        if not isinstance(now, (int, float)) or isinstance(now, bool) or not math.isfinite(now):
            raise InputError(f"time {now!r} is not a finite number", field="now", source="NRTCache")
        if now < self._now:
            raise InputError(f"time {now} is before {self._now}", field="now", source="NRTCache")
        self._now = float(now)
        return self._resync_due(self._now)

    def _resync_due(self, now: float) -> tuple[str, ...]:
        """The periodic resync at ``now`` if one fell due; the nodes it flushed."""
        return ()

    def update_report(self, nrt: NodeResourceTopology, now: float) -> None:
        """A node published ``nrt`` at ``now`` (the NRT object was created or updated).

        Resyncs due up to ``now`` run first, against the previous report. Passthrough and
        discardreserved show the new report at once. Overreserve keeps it as the candidate for
        the node's next resync; with ``resync_scope="All"`` a node seen for the first time, or
        whose Topology Manager policy or scope changed, is flushed at the next resync.
        """
        self.advance(now)
        self._reports[nrt.name] = nrt

    def report(self, node_name: str) -> NodeResourceTopology | None:
        """The last report published for the node (what the API server holds), or None."""
        return self._reports.get(node_name)

    # ---- what the plugin sees -------------------------------------------------------------

    @abstractmethod
    def node_view(self, node_name: str) -> NodeView:
        """The NRT the Filter and Score must use for ``node_name`` now (see :class:`NodeView`)."""

    def filter(self, pod: Pod, node_name: str, *, node_allocatable: Mapping[str, int] | Iterable[str] | None = None
               ) -> Status:
        """The plugin's Filter through this cache, with its side effect.

        A BestEffort pod asking for no extended resource passes without looking; a refused view
        is Unschedulable ("invalid node topology data"); otherwise :func:`nrt_filter` on the
        view, and any verdict other than Success marks the node dirty (upstream
        ``NodeMaybeOverReserved``).
        """
        if pod.qos_class == BEST_EFFORT and not _includes_non_native(pod):
            return Status.success()
        view = self.node_view(node_name)
        if not view.fresh:
            return Status.unschedulable(REASON_INVALID_TOPOLOGY, plugin=_PLUGIN)
        if view.nrt is None:
            return Status.success()
        status = nrt_filter(pod, view.nrt, node_allocatable=node_allocatable)
        if not status.is_success:
            self.mark_discarded(node_name)
        return status

    def score(self, pod: Pod, node_name: str, *, args: NodeResourceTopologyMatchArgs | None = None
              ) -> tuple[int, Status]:
        """The plugin's Score through this cache: a refused view scores 0, else :func:`nrt_score`."""
        if pod.qos_class != GUARANTEED:
            return nrt_score(pod, None, args=args)
        view = self.node_view(node_name)
        if not view.fresh:
            return 0, Status.success()
        return nrt_score(pod, view.nrt, args=args)

    # ---- the scheduling cycle ---------------------------------------------------------------

    @abstractmethod
    def mark_discarded(self, node_name: str) -> None:
        """The Filter rejected a pod on the node: overreserve marks it dirty (a resync candidate)."""

    @abstractmethod
    def reserve(self, node_name: str, pod: Pod) -> None:
        """Reserve: overreserve assumes the pod's request on the node (only if the node has a stored
        report); discardreserved records a reservation in flight; passthrough does nothing."""

    @abstractmethod
    def unreserve(self, node_name: str, pod: Pod) -> None:
        """Unreserve: undo :meth:`reserve` for this pod (nothing happens if it was not reserved)."""

    @abstractmethod
    def post_bind(self, node_name: str, pod: Pod) -> None:
        """PostBind: discardreserved ends the pod's reservation; the other strategies do nothing
        (overreserve keeps the pod assumed until the node is flushed)."""

    def assumed_pods(self, node_name: str) -> tuple[str, ...]:
        """The ``namespace/name`` of the pods overreserve assumes on the node, sorted."""
        return ()

    def reservations(self, node_name: str) -> tuple[str, ...]:
        """The reservations discardreserved has in flight on the node, sorted."""
        return ()

    # ---- the pods informer --------------------------------------------------------------------

    def add_profile_name(self, name: str) -> None:
        """From now on pods whose ``scheduler_name`` is ``name`` are this scheduler's own, not foreign.

        Nodes already marked for such pods stay marked until their next flush.
        """
        self.profile_names = self.profile_names | {name}

    @abstractmethod
    def track_pod_on_node(self, node_name: str, pod: Pod, *, phase: str = "Running") -> None:
        """The pod informer saw ``pod`` bound to ``node_name`` (added or updated) in ``phase``
        (one of :data:`POD_PHASES`, else InputError).

        Overreserve keeps it for the node's fingerprint (Dedicated informer: every phase but
        Pending counts; Shared: only Running) and, when the pod's scheduler is not one of
        ``profile_names``, treats it as a foreign pod. The other strategies ignore pods.
        """

    @abstractmethod
    def untrack_pod(self, node_name: str, pod: Pod) -> None:
        """The pod informer saw ``pod`` deleted from ``node_name``; a foreign pod leaving marks the
        node too, as upstream's delete handler does."""

    def pods_on_node(self, node_name: str) -> tuple[str, ...]:
        """The ``namespace/name`` of the pods the resync would fingerprint for the node, sorted."""
        return ()

    # ---- resync ---------------------------------------------------------------------------------

    def dirty_nodes(self) -> tuple[str, ...]:
        """Nodes overreserve would try to resync by fingerprint: discarded or with foreign pods, sorted."""
        return ()

    def config_changed_nodes(self) -> tuple[str, ...]:
        """Nodes overreserve will flush at the next resync whatever their fingerprint, sorted."""
        return ()

    def has_foreign_pods(self, node_name: str) -> bool:
        """Whether overreserve refuses the node for foreign pods until its next flush."""
        return False

    def resync(self) -> tuple[str, ...]:
        """One resync step now (upstream ``Resync``); returns the nodes flushed, sorted (overreserve only)."""
        return ()


def new_nrt_cache(strategy: str, **options: Any) -> NRTCache:
    """The cache of ``strategy`` (one of :data:`STRATEGIES`) built with ``options`` (see
    :meth:`NRTCache.__init__`); an unknown strategy or bad option raises InputError."""
    return _STRATEGY_CLASSES[_choice(strategy, STRATEGIES, "strategy")](**options)


# ---- the strategies -------------------------------------------------------------------------


class PassthroughCache(NRTCache):
    """``passthrough``: the last published report, as is; Reserve, Unreserve, PostBind and the pod
    informer change nothing."""

    strategy = STRATEGY_PASSTHROUGH

    def node_view(self, node_name: str) -> NodeView:
        """The last report published for the node (None: no topology data)."""
        return NodeView(self._reports.get(node_name))

    def mark_discarded(self, node_name: str) -> None:
        """Nothing to mark: the next report is shown as it comes."""

    def reserve(self, node_name: str, pod: Pod) -> None:
        """Nothing to reserve."""

    def unreserve(self, node_name: str, pod: Pod) -> None:
        """Nothing to undo."""

    def post_bind(self, node_name: str, pod: Pod) -> None:
        """Nothing to end."""

    def track_pod_on_node(self, node_name: str, pod: Pod, *, phase: str = "Running") -> None:
        """Pods do not matter here; a phase outside :data:`POD_PHASES` is still an InputError."""
        _choice(phase, POD_PHASES, "phase")

    def untrack_pod(self, node_name: str, pod: Pod) -> None:
        """Pods do not matter here."""


class DiscardReservedCache(PassthroughCache):
    """``discardreserved``: the last published report, but a node with a reservation in flight
    (Reserve seen, neither Unreserve nor PostBind yet) is refused."""

    strategy = STRATEGY_DISCARD_RESERVED

    def __init__(self, **options: Any):
        """See :meth:`NRTCache.__init__`."""
        super().__init__(**options)
        # node -> reservation keys in flight.
        self._reservations: dict[str, set[str]] = {}

    def node_view(self, node_name: str) -> NodeView:
        """Not fresh while the node has a reservation in flight, else the last report."""
        if self._reservations.get(node_name):
            return NodeView(None, fresh=False)
        return NodeView(self._reports.get(node_name))

    def reserve(self, node_name: str, pod: Pod) -> None:
        """Record the pod's reservation in flight on the node."""
        self._reservations.setdefault(node_name, set()).add(_reservation_key(pod))

    def unreserve(self, node_name: str, pod: Pod) -> None:
        """End the pod's reservation (nothing happens if it had none)."""
        self._reservations.get(node_name, set()).discard(_reservation_key(pod))

    def post_bind(self, node_name: str, pod: Pod) -> None:
        """The pod is bound: its reservation ends."""
        self._reservations.get(node_name, set()).discard(_reservation_key(pod))

    def reservations(self, node_name: str) -> tuple[str, ...]:
        """The reservations in flight on the node, sorted."""
        return tuple(sorted(self._reservations.get(node_name, ())))


class OverReserveCache(NRTCache):
    """``overreserve``: a private store of reports that changes only when a node is resynced, with
    the pods reserved since then subtracted from every zone (see the module notes)."""

    strategy = STRATEGY_OVERRESERVE

    def __init__(self, **options: Any):
        """See :meth:`NRTCache.__init__`; the resync period must be > 0 (InputError)."""
        super().__init__(**options)
        if self.resync_period <= 0:
            raise InputError("the overreserve cache needs a resync period > 0",
                             field="cacheResyncPeriodSeconds", source="NRTCache")
        self._next_resync = self._now
        self._generation = 0
        self._store: dict[str, NodeResourceTopology] = {}
        self._store_resources: dict[str, frozenset[str]] = {}
        self._assumed: dict[str, dict[str, dict[str, int]]] = {}
        self._discarded: dict[str, int] = {}
        self._foreign: dict[str, int] = {}
        self._config_changed: dict[str, int] = {}
        self._watched_conf: dict[str, TopologyManagerConfig] = {}
        self._pods: dict[str, dict[str, tuple[Pod, str]]] = {}
        self._views: dict[str, NodeResourceTopology] = {}
        for nrt in self._reports.values():
            self._store[nrt.name] = nrt
            self._store_resources[nrt.name] = _resource_names(nrt)
            if self.resync_scope == "All":
                self._watched_conf[nrt.name] = topology_manager_config(nrt)

    # ---- time and reports -----------------------------------------------------------------

    @property
    def generation(self) -> int:
        """How many resyncs changed the store."""
        return self._generation

    @property
    def next_resync_at(self) -> float | None:
        """When the next periodic resync falls due."""
        return self._next_resync

    def _resync_due(self, now: float) -> tuple[str, ...]:
        if now < self._next_resync:
            return ()
        periods = math.floor((now - self._next_resync) / self.resync_period) + 1
        self._next_resync += periods * self.resync_period
        return self.resync()

    # ---- what the plugin sees -------------------------------------------------------------

    def node_view(self, node_name: str) -> NodeView:
        """The stored report less the assumed pods; not fresh while the node has foreign pods."""
        if node_name in self._foreign:
            return NodeView(None, fresh=False, generation=self._generation)
        stored = self._store.get(node_name)
        if stored is None or not self._assumed.get(node_name):
            return NodeView(stored, generation=self._generation)
        view = self._views.get(node_name)
        if view is None:
            totals: dict[str, int] = {}
            for request in self._assumed[node_name].values():
                for resource, quantity in request.items():
                    totals[resource] = totals.get(resource, 0) + quantity
            view = self._views[node_name] = _subtract_everywhere(stored, totals)
        return NodeView(view, generation=self._generation)

    # ---- the scheduling cycle ---------------------------------------------------------------

    def update_report(self, nrt: NodeResourceTopology, now: float) -> None:
        """Keep ``nrt`` as the node's candidate for its next resync (see :meth:`NRTCache.update_report`)."""
        super().update_report(nrt, now)
        if self.resync_scope != "All":
            return
        conf = topology_manager_config(nrt)
        if self._watched_conf.get(nrt.name) != conf:
            self._watched_conf[nrt.name] = conf
            self._config_changed[nrt.name] = self._config_changed.get(nrt.name, 0) + 1

    def mark_discarded(self, node_name: str) -> None:
        """Mark the node dirty: a candidate for the next resync."""
        self._discarded[node_name] = self._discarded.get(node_name, 0) + 1

    def reserve(self, node_name: str, pod: Pod) -> None:
        """Assume the pod's request on the node, if the node has a stored report."""
        if node_name in self._store:
            self._assumed.setdefault(node_name, {})[pod.key] = upstream_effective_request(pod)
            self._views.pop(node_name, None)

    def unreserve(self, node_name: str, pod: Pod) -> None:
        """Stop assuming the pod on the node (nothing happens if it was not assumed)."""
        if pod.key in self._assumed.get(node_name, {}):
            del self._assumed[node_name][pod.key]
            self._views.pop(node_name, None)

    def post_bind(self, node_name: str, pod: Pod) -> None:
        """Nothing: the pod stays assumed until the node is flushed."""

    def assumed_pods(self, node_name: str) -> tuple[str, ...]:
        """The ``namespace/name`` of the pods assumed on the node, sorted."""
        return tuple(sorted(self._assumed.get(node_name, {})))

    # ---- the pods informer --------------------------------------------------------------------

    def track_pod_on_node(self, node_name: str, pod: Pod, *, phase: str = "Running") -> None:
        """Keep the pod for the node's fingerprint; a foreign pod marks the node (see the base)."""
        _choice(phase, POD_PHASES, "phase")
        self._pods.setdefault(node_name, {})[pod.key] = (pod, phase)
        self._foreign_pod(node_name, pod)

    def untrack_pod(self, node_name: str, pod: Pod) -> None:
        """Forget the pod; a foreign pod leaving marks the node too."""
        self._pods.get(node_name, {}).pop(pod.key, None)
        self._foreign_pod(node_name, pod)

    def pods_on_node(self, node_name: str) -> tuple[str, ...]:
        """The ``namespace/name`` of the pods the resync would fingerprint for the node, sorted."""
        return tuple(sorted(pod.key for pod, _ in self._relevant_pods(node_name)))

    def _relevant_pods(self, node_name: str) -> list[tuple[Pod, str]]:
        wanted = (lambda p: p == "Running") if self.informer_mode == "Shared" else (lambda p: p != "Pending")
        return [(pod, phase) for pod, phase in self._pods.get(node_name, {}).values() if wanted(phase)]

    def _foreign_pod(self, node_name: str, pod: Pod) -> None:
        """Upstream's foreign pods detector followed by ``NodeHasForeignPods``."""
        if self.foreign_pods_detect == "None" or pod.scheduler_name in self.profile_names:
            return
        if self.foreign_pods_detect == "OnlyExclusiveResources":
            names = _resource_names(self.node_view(node_name).nrt)
            if not are_exclusive_for_pod(pod, names):
                return
        if node_name in self._store:
            self._foreign[node_name] = self._foreign.get(node_name, 0) + 1

    # ---- resync ---------------------------------------------------------------------------------

    def dirty_nodes(self) -> tuple[str, ...]:
        """Nodes discarded or with foreign pods, sorted."""
        return tuple(sorted(set(self._discarded) | set(self._foreign)))

    def config_changed_nodes(self) -> tuple[str, ...]:
        """Nodes to flush at the next resync whatever their fingerprint, sorted."""
        return tuple(sorted(self._config_changed))

    def has_foreign_pods(self, node_name: str) -> bool:
        """Whether the node is refused for foreign pods until its next flush."""
        return node_name in self._foreign

    def resync(self) -> tuple[str, ...]:
        """One resync step now (upstream ``Resync``); returns the nodes flushed, sorted.

        A dirty node is flushed when its latest report carries a fingerprint that matches the
        pods tracked on it (only those with exclusive resources when the method says so); a
        missing report or fingerprint, a malformed or other-version fingerprint, or a mismatch
        leaves it dirty. A config-changed node is flushed with its latest report.
        """
        dirty = set(self._discarded) | set(self._foreign)
        changed = set(self._config_changed)
        updates: dict[str, NodeResourceTopology] = {}
        for node_name in sorted(dirty | changed):
            report = self._reports.get(node_name)
            if report is None:
                continue
            if node_name in changed or (node_name in dirty and self._fingerprint_matches(node_name, report)):
                updates[node_name] = report
        for node_name, report in updates.items():
            self._store[node_name] = report
            self._store_resources[node_name] = _resource_names(report)
            for table in (self._assumed, self._discarded, self._foreign, self._config_changed, self._views):
                table.pop(node_name, None)
        if updates:
            self._generation += 1
        return tuple(updates)

    def _fingerprint_matches(self, node_name: str, report: NodeResourceTopology) -> bool:
        expected, only_exclusive = expected_fingerprint(report, self.resync_method)
        if not expected:
            return False
        names = self._store_resources.get(node_name, _NO_RESOURCES)
        pods = [
            (pod.namespace, pod.name)
            for pod, _ in self._relevant_pods(node_name)
            if not only_exclusive or are_exclusive_for_pod(pod, names)
        ]
        return check_fingerprint(pods, expected) is FingerprintCheck.MATCH


_STRATEGY_CLASSES: dict[str, type[NRTCache]] = {
    cls.strategy: cls for cls in (PassthroughCache, OverReserveCache, DiscardReservedCache)
}


def _reservation_key(pod: Pod) -> str:
    # Upstream keys reservations by pod UID; a pod without one (hand-written manifests, the
    # simulator) is keyed by namespace/name so two such pods do not share one reservation.
    return pod.uid or pod.key

