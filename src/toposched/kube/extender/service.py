"""The extender's four verbs over a :class:`Scheduler`: filter, prioritize, bind, preempt (docs/kube/extender.md).

kube-scheduler runs its own cycle and asks the extender at three points: which of its feasible
nodes toposched accepts (filter), how much it prefers each (prioritize) and, for the node it
chose, to bind (bind); when no node fits it asks which preemptions toposched agrees with
(preempt). toposched decides from its own cache of nodes, reports and pods (kept by a
:class:`~toposched.kube.cluster_sync.ClusterSync` sharing :attr:`ExtenderService.lock`), never
from the Node objects in a request, and never answers for a node it was not given.

**Reservations.** filter (or prioritize, when no filter preceded it) reserves the exact
placement on toposched's best node, so a pod scheduled next already sees those CPUs taken, and
bind uses it. kube-scheduler may choose another node: bind then moves the reservation there, or
fails if that node cannot take the pod exactly. The protocol has no Unreserve, so a reservation
that no bind claims within ``reservation_ttl`` seconds is given back; expiry runs at the start
of every call, by the injected clock.

**Malformed pods** (e.g. a bad ``toposched.io/numa-policy`` annotation): filter puts every given
node in ``FailedAndUnresolvableNodes`` with the InputError's text rather than answering
``Error``. The text then reaches the pod's FailedScheduling event, preemption is not tried for a
pod no node can take, and the pod waits until it is fixed. ``Error`` is kept for requests the
extender cannot process at all (no pod, unnamed nodes) and for failures of its own.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from toposched.errors import InputError
from toposched.inputs import check_dns_label, check_dns_subdomain
from toposched.kube.binding import perform_binding
from toposched.kube.client import PODS, ApiError, KubeClient
from toposched.kube.extender.preemption import fits_after_eviction
from toposched.kube.extender.restricted import Evaluation, evaluate, reserve_best, reserve_on
from toposched.kube.extender.wire import (
    MAX_EXTENDER_PRIORITY,
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    ExtenderPreemptionResult,
    HostPriority,
    HostPriorityList,
    MetaPod,
    MetaVictims,
)
from toposched.scheduler import Code, Decision, Placement, Scheduler, Status
from toposched.workload import Pod

__all__ = ["ExtenderService", "Reservation", "scale_scores"]

log = logging.getLogger(__name__)

_UID = re.compile(r"[A-Za-z0-9][-A-Za-z0-9_.]*")
_BOUND_MEMORY = 4096  # pods bound recently, remembered so a repeated bind answers at once


@dataclass
class Reservation:
    """A pod's exact placement held on one node until a bind claims it or ``expires`` passes."""

    pod: Pod
    node: str
    placement: Placement | None
    expires: float
    scores: dict[str, int] = field(default_factory=dict)  # total score of each feasible node evaluated with it
    binding: bool = False  # a bind is sending it to the API server: it must not expire meanwhile


def scale_scores(totals: dict[str, int]) -> dict[str, int]:
    """Total scores to extender priorities 0..10: the best node gets 10, the others ``10 * total // best``.

    This is upstream's DefaultNormalizeScore (score * max / highest) with the extender's
    maximum; negative totals count as 0, and when no total is above 0 the nodes sharing the
    highest get 10 and the rest 0.
    """
    if not totals:
        return {}
    best = max(totals.values())
    if best <= 0:
        return {n: MAX_EXTENDER_PRIORITY if t == best else 0 for n, t in totals.items()}
    return {n: MAX_EXTENDER_PRIORITY * max(t, 0) // best for n, t in totals.items()}


class ExtenderService:
    """Answers kube-scheduler's extender calls for one :class:`Scheduler`; thread-safe through :attr:`lock`.

    ``clock`` gives the time used for reservations and handed to the scheduler; ``client`` is
    the API client bind writes through (without one, bind answers an error);
    ``reservation_ttl`` is how long (seconds) a reservation waits for its bind. Whatever feeds
    ``scheduler.cluster`` from the API server must hold ``lock`` (or pass it in as ``lock``)
    while it changes the cluster.
    """

    def __init__(self, scheduler: Scheduler, *, clock: Callable[[], float], client: KubeClient | None = None,
                 reservation_ttl: float = 30.0, lock: threading.RLock | None = None) -> None:
        if reservation_ttl <= 0:
            raise InputError(f"{reservation_ttl!r} must be a positive number of seconds", field="reservation_ttl")
        self.scheduler = scheduler
        self.clock = clock
        self.client = client
        self.reservation_ttl = reservation_ttl
        self.lock = lock or threading.RLock()
        self._reservations: dict[str, Reservation] = {}
        self._bound: OrderedDict[str, str] = OrderedDict()  # pod uid -> node, for pods this service bound

    # ---- reservations ------------------------------------------------------------------------------

    def reservation(self, uid: str) -> Reservation | None:
        """The live reservation of the pod with this UID (``namespace/name`` for a pod without one), if any."""
        with self.lock:
            return self._reservations.get(uid)

    def expire(self) -> list[str]:
        """Give back every reservation whose time is up and no bind is sending; returns their pods' keys."""
        with self.lock:
            now = self.clock()
            gone = [uid for uid, r in self._reservations.items() if r.expires <= now and not r.binding]
            keys = []
            for uid in gone:
                reservation = self._reservations.pop(uid)
                self.scheduler.unreserve(reservation.pod)
                keys.append(reservation.pod.key)
                log.info("reservation of pod %s on %s expired without a bind", reservation.pod.key, reservation.node)
            return keys

    def _drop(self, uid: str) -> None:
        reservation = self._reservations.pop(uid, None)
        if reservation is not None:
            self.scheduler.unreserve(reservation.pod)

    def _bound_node(self, pod: Pod) -> str | None:
        """The node the pod is bound (or being bound) to as far as this service knows: its binds, the cluster's."""
        uid = pod.uid or pod.key
        node = self._bound.get(uid)
        if node is not None:
            return node
        reservation = self._reservations.get(uid)
        if reservation is not None and reservation.binding:
            return reservation.node  # a bind is sending it there right now
        on = self.scheduler.cluster.pod_node.get(uid)
        if on is not None and uid not in self._reservations:
            entry = self.scheduler.cluster.nodes[on].pods.get(uid)
            if entry is not None and not entry.assumed:
                return on
        return None

    def _decide(self, pod: Pod, names: list[str], now: float) -> Evaluation:
        """Evaluate ``pod`` on ``names`` and hold a reservation on the best node that takes it exactly."""
        uid = pod.uid or pod.key
        self._drop(uid)
        evaluation = evaluate(self.scheduler, pod, names, now)
        node, placement = reserve_best(self.scheduler, evaluation, now)
        if node is not None:
            self._reservations[uid] = Reservation(pod, node, placement, now + self.reservation_ttl,
                                                  dict(evaluation.feasible))
        return evaluation

    # ---- filter ------------------------------------------------------------------------------------

    def filter(self, args: ExtenderArgs) -> ExtenderFilterResult:
        """The given nodes that can take the pod, and why each other one cannot.

        The answer uses the request's form (``NodeNames`` or ``Nodes``) and names only given nodes.
        """
        self.expire()
        try:
            names = args.candidate_names()
            obj = _pod_object(args.pod)
        except InputError as err:
            return ExtenderFilterResult(Error=str(err))  # not a request kube-scheduler sends: nothing to answer for
        try:
            pod = Pod.from_dict(obj)
        except InputError as err:
            return _filter_result(args, [], {}, {n: str(err) for n in names})
        with self.lock:
            now = self.clock()
            bound = self._bound_node(pod)
            if bound is not None:
                refused = f"pod {pod.key} is already bound to node {bound}"
                others = {n: refused for n in names if n != bound}
                return _filter_result(args, [n for n in dict.fromkeys(names) if n == bound], {}, others)
            evaluation = self._decide(pod, names, now)
        refused = [(n, evaluation.refused[n]) for n in dict.fromkeys(names) if n in evaluation.refused]
        failed = {n: s.message for n, s in refused if s.code != Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
        unresolvable = {n: s.message for n, s in refused if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
        passing = [n for n in dict.fromkeys(names) if n in evaluation.feasible]
        return _filter_result(args, passing, failed, unresolvable)

    # ---- prioritize --------------------------------------------------------------------------------

    def prioritize(self, args: ExtenderArgs) -> HostPriorityList:
        """A score 0..10 for every given node (10 for toposched's best), in the order given.

        Scores come from the totals filter computed for the pod's reservation when it covers the
        given nodes, else from a fresh evaluation (which then reserves). Nodes toposched refuses,
        and every node for a pod it cannot read, score 0.
        """
        self.expire()
        try:
            names = args.candidate_names()
        except InputError as err:
            log.info("prioritize: %s", err)
            return HostPriorityList([])  # nodes without names cannot be scored
        try:
            pod = _pod(args.pod)
        except InputError as err:
            log.info("prioritize: %s", err)
            return HostPriorityList([HostPriority(Host=n, Score=0) for n in dict.fromkeys(names)])
        with self.lock:
            now = self.clock()
            reservation = self._reservations.get(pod.uid or pod.key)
            bound = self._bound_node(pod)
            if reservation is not None and set(names) <= set(reservation.scores):
                totals = reservation.scores
            elif bound is not None:
                totals = {bound: 0}  # its node is the only one: scale_scores gives it 10
            else:
                totals = self._decide(pod, names, now).feasible
        scores = scale_scores({n: totals[n] for n in names if n in totals})
        return HostPriorityList([HostPriority(Host=n, Score=scores.get(n, 0)) for n in dict.fromkeys(names)])

    # ---- bind --------------------------------------------------------------------------------------

    def bind(self, args: ExtenderBindingArgs) -> ExtenderBindingResult:
        """Write the pod's placement annotations, then its Binding to ``args.Node``; idempotent.

        A pod this service already bound to that node succeeds at once; to another node it is
        an error. Without a live reservation (it expired, or none was made) the pod is read from
        the API server and decided afresh on that node alone. If the API server refuses, the
        reservation is given back and the error returned: kube-scheduler retries the pod.
        """
        self.expire()
        key = f"{args.pod_namespace}/{args.pod_name}"
        uid = args.pod_uid or key
        node = args.node
        if not args.pod_name or not args.pod_namespace or not node:
            return ExtenderBindingResult(Error="bind needs PodName, PodNamespace and Node")
        try:
            # Request text goes into API URLs (pods/<namespace>/<name>, the Binding): names only, as Kubernetes spells them.
            check_dns_subdomain(args.pod_name, field="PodName", source="bind request")
            check_dns_label(args.pod_namespace, field="PodNamespace", source="bind request")
            check_dns_subdomain(node, field="Node", source="bind request")
            if args.pod_uid and (len(args.pod_uid) > 128 or not _UID.fullmatch(args.pod_uid)):
                raise InputError(f"{args.pod_uid[:60]!r} is not a UID", field="PodUID", source="bind request")
        except InputError as err:
            return ExtenderBindingResult(Error=str(err))
        if self.client is None:
            return ExtenderBindingResult(Error="the extender has no API client to bind with")
        with self.lock:
            known = self._bound.get(uid)
            if known is not None:
                return ExtenderBindingResult(Error=_already_bound(key, known, node))
            reservation = self._reservations.get(uid)
        if reservation is None:
            try:
                obj = self.client.get(PODS, args.pod_name, namespace=args.pod_namespace)
                pod = _pod(obj)
            except Exception as err:  # an API refusal, a bad object or the network: all end this bind
                _log_failure("reading pod %s for its bind failed", key, err)
                return ExtenderBindingResult(Error=f"cannot read pod {key}: {err}")
            if args.pod_uid and pod.uid and pod.uid != args.pod_uid:
                return ExtenderBindingResult(Error=f"pod {key} has UID {pod.uid}, not {args.pod_uid}: it was recreated")
            current = (obj.get("spec") or {}).get("nodeName")
            if current:
                return ExtenderBindingResult(Error=_already_bound(key, current, node))
        else:
            pod = reservation.pod
        uid = pod.uid or pod.key
        with self.lock:
            refused = self._claim(pod, node)
            if refused:
                return ExtenderBindingResult(Error=refused)
            reservation = self._reservations[uid]
            reservation.binding = True
            try:
                decision = Decision(pod.key, node, reservation.placement, Status.success())
                requests = self.scheduler.binding(decision, pod)
            except InputError as err:
                self._drop(uid)
                return ExtenderBindingResult(Error=str(err))
        try:
            perform_binding(self.client, requests)
        except Exception as err:  # whatever stopped it, the reservation must not outlive the bind
            with self.lock:
                self._drop(uid)
            _log_failure("binding pod %s failed", key, err)
            return ExtenderBindingResult(Error=f"binding pod {key} to node {node}: {err}")
        with self.lock:
            self._reservations.pop(uid, None)
            self.scheduler.bound(pod, self.clock())
            self._bound[uid] = node
            while len(self._bound) > _BOUND_MEMORY:
                self._bound.popitem(last=False)
        log.info("bound pod %s to %s", key, node)
        return ExtenderBindingResult()

    def _claim(self, pod: Pod, node: str) -> str:
        """Make sure the pod's reservation is on ``node``; the reason it cannot be, or ''. Holds the lock."""
        uid = pod.uid or pod.key
        reservation = self._reservations.get(uid)
        if reservation is not None and reservation.node == node:
            reservation.expires = self.clock() + self.reservation_ttl
            return ""
        self._drop(uid)
        now = self.clock()
        evaluation = evaluate(self.scheduler, pod, [node], now)
        placement = reserve_on(self.scheduler, evaluation, node, now)
        if placement is None:
            status = evaluation.refused.get(node) or Status.unschedulable("no longer fits")
            return f"node {node} cannot take pod {pod.key}: {status.message}"
        self._reservations[uid] = Reservation(pod, node, placement, now + self.reservation_ttl,
                                              dict(evaluation.feasible))
        return ""

    # ---- preempt -----------------------------------------------------------------------------------

    def preempt(self, args: ExtenderPreemptionArgs) -> ExtenderPreemptionResult:
        """kube-scheduler's candidate nodes, kept with its own victims where the pod would then fit here.

        For each candidate node, the victims are released from a scratch copy of the node's
        kubelet replica and the pod admitted to it (see :mod:`.preemption`); nodes where it is
        refused are dropped. Victims are never added or swapped: toposched does not know
        priorities or PodDisruptionBudgets. A node proposed with no victims is dropped too
        (kube-scheduler rejects an extender answer naming a node without victims).
        """
        self.expire()
        try:
            pod = _pod(args.pod)
        except InputError as err:
            log.info("preempt: %s", err)
            return ExtenderPreemptionResult()
        kept: dict[str, MetaVictims] = {}
        with self.lock:
            for node, (uids, violations) in args.victims().items():
                if not uids:
                    continue
                fits, why = fits_after_eviction(self.scheduler.cluster, pod, node, uids)
                if fits:
                    kept[node] = MetaVictims(Pods=[MetaPod(UID=u) for u in uids], NumPDBViolations=violations)
                else:
                    log.info("preempt: pod %s would not fit on %s after evicting %d pod(s): %s", pod.key, node,
                             len(uids), why)
        return ExtenderPreemptionResult(NodeNameToMetaVictims=kept)


def _log_failure(message: str, key: str, err: Exception) -> None:
    """An API refusal is logged as a warning; anything else (network, a bug) with its traceback."""
    if isinstance(err, ApiError):
        log.warning(message + ": %s", key, err)
    else:
        log.error(message, key, exc_info=err)


def _already_bound(key: str, bound: str, wanted: str) -> str:
    """A repeated bind's answer: success ('') for the same node, else why not."""
    return "" if bound == wanted else f"pod {key} is already bound to node {bound}"


def _pod_object(obj: object) -> dict:
    """The request's pod object; InputError when the request has none."""
    if not isinstance(obj, dict):
        raise InputError("the request has no Pod object", field="Pod", source="extender request")
    return obj


def _pod(obj: object) -> Pod:
    """The request's pod, parsed; InputError naming the field when it is absent or malformed."""
    return Pod.from_dict(_pod_object(obj))


def _filter_result(args: ExtenderArgs, passing: list[str], failed: dict[str, str],
                   unresolvable: dict[str, str]) -> ExtenderFilterResult:
    """A filter answer in the request's form: ``NodeNames`` if sent, else ``Nodes`` (names when neither was)."""
    result = ExtenderFilterResult(FailedNodes=failed, FailedAndUnresolvableNodes=unresolvable)
    if args.node_names is not None or args.nodes is None:
        result.node_names = passing
    if args.nodes is not None:
        result.nodes = args.nodes.only(set(passing))
    return result
