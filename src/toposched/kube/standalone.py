"""The standalone secondary scheduler (``toposched scheduler``): watch, queue, schedule, bind, explain.

It schedules the pods whose ``spec.schedulerName`` is ours, the way kube-scheduler's loop does:

1. Reflectors list and watch Nodes, NodeResourceTopologies and Pods; :class:`ClusterSync` turns
   them into the scheduler's cluster (bound pods, ours and others', admitted with the CPUs their
   ``toposched.io/placement`` annotation names) and pending pods of ours enter the
   :class:`SchedulingQueue`. A node or report change, or a pod leaving a node, retries the
   unschedulable pods.
2. :meth:`StandaloneScheduler.step` (only on the leader, only once every kind has been listed)
   pops one pod, schedules it, and sends ``Scheduler.binding``'s request (the Binding, carrying
   the placement annotation) through :func:`perform_binding`.
3. Success: ``Scheduler.bound`` and a ``Scheduled`` Event. No node fits: a ``FailedScheduling``
   Event with kube-scheduler's FitError text, the pod's condition ``PodScheduled=False`` with
   reason ``Unschedulable`` and that message (what cluster-autoscaler and Karpenter wait for;
   the API server sets it ``True`` at binding), and the pod parks until the cluster changes. A 404
   (the pod is gone): the reservation is given back and the pod dropped. Any other API error
   (409: bound elsewhere, e.g. by a replica that led before us; 5xx): the pod is read back. Bound
   to our node means the Binding went through (its response was lost); bound elsewhere or gone,
   it is given back and dropped; unbound, it is given back and retried after backoff. When even
   that read fails, the reservation is kept and the pod is read again before any further
   attempt, so a pod that got a Binding never gets a second one.

:meth:`StandaloneScheduler.run` binds the way kube-scheduler's binding cycle does: the decision
(and its reservation) is made in the loop, one pod at a time, and the Binding goes to a pool of
``bind_workers`` threads, so the next pod is scheduled while earlier ones are being bound; at
most ``bind_workers`` bindings are in flight. Events go to a pool of their own, as client-go's
event broadcaster sends them apart from the work they describe. :meth:`StandaloneScheduler.step`
does one pod from start to end, Events included (tests, or a loop without threads).

With an elector, only the holder of the Lease schedules. A replica that becomes the leader first
lists the pods and takes in every binding its watch has not shown yet, so the pods the previous
leader bound just before it stopped are in the ledger before the new leader places anything.
Scheduling and the cluster are guarded by one lock; watch handlers run in the reflectors' threads.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from toposched.errors import InputError
from toposched.kube.binding import perform_binding
from toposched.kube.client import DEVICES, NODES, NRTS, PODS, ApiError, KubeClient, NotFound, WatchEvent
from toposched.kube.cluster_sync import ClusterSync, pod_key
from toposched.kube.events import EventRecorder, event_time
from toposched.kube.informer import Reflector
from toposched.kube.leader import LeaderElector
from toposched.kube.ops import Metrics
from toposched.kube.queue import Outcome, SchedulingQueue, pod_uid
from toposched.names import POD_SCHEDULED_CONDITION, UNSCHEDULABLE_CONDITION_REASON
from toposched.scheduler import Scheduler
from toposched.workload import Pod

__all__ = ["StandaloneScheduler", "StepResult"]

log = logging.getLogger(__name__)

_TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class _Binding:
    """A decision whose Binding is still to be sent: the pod (uid, object, key), its node and the requests."""

    uid: str
    obj: dict[str, Any]
    key: str
    node: str
    requests: list[dict[str, Any]]


@dataclass(frozen=True)
class StepResult:
    """What one scheduling attempt did.

    ``outcome`` is ``scheduled``, ``unschedulable``, ``conflict`` (bound elsewhere: dropped),
    ``gone`` (deleted, or already bound: dropped), ``error`` (retried after backoff) or
    ``invalid`` (the pod object cannot be read: parked with an Event saying why).
    """

    pod: str
    outcome: str
    node: str | None = None
    message: str = ""


# StepResult outcomes as the scheduling_attempts metric's result label.
_RESULT_LABEL = {"scheduled": "scheduled", "unschedulable": "unschedulable", "invalid": "unschedulable"}


def _call_now(function: Callable[..., Any], *args: Any) -> None:
    function(*args)


class StandaloneScheduler:
    """Watches the cluster and binds the pending pods of ``scheduler_name``, one per :meth:`step`.

    ``clock`` gives seconds since the epoch (Event and Lease times, the queue's backoff, report
    ages); ``sleep(seconds)`` is how :meth:`run` waits while it is not the leader or not synced.
    ``identity`` names this replica (Events' ``reportingInstance``; the elector's identity).
    ``metrics``, when given, counts every attempt by result and times it. ``bind_workers`` is how
    many Bindings :meth:`run` may have in flight at once, ``event_workers`` how many Events (which
    :meth:`run` sends apart from the Bindings, so a slow Event never holds a Binding back).
    """

    def __init__(self, client: KubeClient, scheduler: Scheduler, *, scheduler_name: str = "toposched",
                 clock: Callable[[], float], sleep: Callable[[float], None], identity: str,
                 elector: LeaderElector | None = None, metrics: Metrics | None = None, bind_workers: int = 8,
                 event_workers: int = 8, koordlet_devices: bool = False) -> None:
        if bind_workers < 1 or event_workers < 1:
            raise ValueError("bind_workers and event_workers must be at least 1")
        self.client = client
        self.metrics = metrics
        self.bind_workers = bind_workers
        self.event_workers = event_workers
        self.scheduler = scheduler
        self.scheduler_name = scheduler_name
        self.clock = clock
        self.sleep = sleep
        self.identity = identity
        self.elector = elector
        self.sync = ClusterSync(scheduler, clock=clock, scheduler_name=scheduler_name)
        self.queue = SchedulingQueue(clock)
        self.events = EventRecorder(client, component=scheduler_name, clock=clock, instance=identity)
        self.reflectors = [
            Reflector(client, NODES, self._on_node, self._on_nodes),
            Reflector(client, NRTS, self._on_nrt, self._on_nrts),
            Reflector(client, PODS, self._on_pod, self._on_pods),
        ]
        if koordlet_devices:  # koordlet's Device objects describe the devices of count-only nodes
            self.reflectors.append(Reflector(client, DEVICES, self._on_device, self._on_devices))
        self._lock = threading.RLock()
        self._leading = False
        self._caught_up = elector is None  # a new leader first takes in bindings its watch may not show yet
        self._next_election = float("-inf")
        self._uncertain: dict[str, str] = {}  # uid -> node whose Binding may have gone through (reservation kept)
        self._post: Callable[..., Any] = _call_now  # how an Event is sent: now, or by run()'s event pool

    # ---- watch handlers (reflector threads) ---------------------------------------------------------

    def _on_node(self, event: WatchEvent) -> None:
        with self._lock:
            self.sync.on_node(event)
            if event.type in ("ADDED", "MODIFIED"):
                self.queue.move_all_to_active()

    def _on_nodes(self, items: list[dict[str, Any]]) -> None:
        with self._lock:
            self.sync.relist_nodes(items)
            self.queue.move_all_to_active()

    def _on_nrt(self, event: WatchEvent) -> None:
        with self._lock:
            self.sync.on_nrt(event)
            if event.type in ("ADDED", "MODIFIED"):
                self.queue.move_all_to_active()

    def _on_nrts(self, items: list[dict[str, Any]]) -> None:
        with self._lock:
            self.sync.relist_nrts(items)
            self.queue.move_all_to_active()

    def _on_device(self, event: WatchEvent) -> None:
        with self._lock:
            self.sync.on_device(event)
            if event.type in ("ADDED", "MODIFIED"):
                self.queue.move_all_to_active()

    def _on_devices(self, items: list[dict[str, Any]]) -> None:
        with self._lock:
            self.sync.relist_devices(items)
            self.queue.move_all_to_active()

    def _on_pod(self, event: WatchEvent) -> None:
        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        obj = event.object
        uid = pod_uid(obj)
        with self._lock:
            self.sync.on_pod(event)
            spec, status = obj.get("spec") or {}, obj.get("status") or {}
            if event.type == "DELETED":
                self.queue.delete(uid)
                node = self._uncertain.pop(uid, None)
                if node is not None:
                    self._give_back(uid, node)
                if spec.get("nodeName"):
                    self.queue.move_all_to_active()  # its room on the node is free
            elif self._is_pending(obj):
                self.queue.update(obj)
            else:
                self.queue.delete(uid)
                if spec.get("nodeName") and status.get("phase") in _TERMINAL:
                    self.queue.move_all_to_active()

    def _on_pods(self, items: list[dict[str, Any]]) -> None:
        with self._lock:
            self.sync.relist_pods(items)
            listed = {pod_uid(o) for o in items}
            for uid in [u for u in self._uncertain if u not in listed]:  # deleted while we could not tell
                self._give_back(uid, self._uncertain.pop(uid))
            pending = {pod_uid(o): o for o in items if self._is_pending(o)}
            for uid in self.queue.uids() - pending.keys():
                self.queue.delete(uid)
            for obj in pending.values():
                self.queue.update(obj)
            self.queue.move_all_to_active()

    def _is_pending(self, obj: Mapping[str, Any]) -> bool:
        """A pod of ours to schedule: not bound, not finished, not being deleted."""
        spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
        return (not spec.get("nodeName")
                and (spec.get("schedulerName") or "default-scheduler") == self.scheduler_name
                and (obj.get("status") or {}).get("phase") not in _TERMINAL
                and not meta.get("deletionTimestamp"))

    def pump(self, timeout_seconds: float = 0.0) -> None:
        """One list-or-watch round of every reflector, in this thread (tests, or a loop without threads)."""
        for reflector in self.reflectors:
            reflector.step(timeout_seconds)

    # ---- leadership -------------------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        """Whether this replica may schedule now (always, without an elector)."""
        return self.elector is None or self.elector.is_leader

    def _lead(self) -> bool:
        """Renew or try for the lease when due; on becoming the leader, catch up with recent bindings."""
        if self.elector is None:
            return True
        now = self.clock()
        if now >= self._next_election:
            self.elector.try_acquire_or_renew()
            self._next_election = now + self.elector.retry_period
        leading = self.elector.is_leader
        if leading != self._leading:
            log.info("%s %s scheduling", self.identity, "starts" if leading else "stops")
            self._leading, self._caught_up = leading, False
        return leading and (self._caught_up or self._catch_up())

    def _catch_up(self) -> bool:
        """Take in every bound pod the API server lists that the cluster does not show on its node yet."""
        try:
            items = self.client.list(PODS).items
        except ApiError as err:
            log.warning("cannot list pods to catch up after becoming the leader: %s", err)
            return False
        with self._lock:
            for obj in items:
                node = (obj.get("spec") or {}).get("nodeName")
                finished = (obj.get("status") or {}).get("phase") in _TERMINAL
                uid = pod_uid(obj)
                if node and not finished and self.scheduler.cluster.pod_node.get(uid) != node:
                    self.sync.on_pod(WatchEvent("MODIFIED", obj))
                    self.queue.delete(uid)
        self._caught_up = True
        return True

    # ---- scheduling ---------------------------------------------------------------------------------

    def _schedulable(self) -> bool:
        with self._lock:
            return self.leading and self.sync.ready

    def step(self, timeout: float = 0.0) -> StepResult | None:
        """Schedule and bind at most one pod (waiting up to ``timeout`` seconds for one); None when nothing was tried.

        Nothing is tried while this replica is not the leader or the cluster has not been listed in full.
        """
        started = self.clock()
        decided = self._decide(timeout)
        if decided is None:
            return None
        return self._finish(self._bind(decided) if isinstance(decided, _Binding) else decided, started)

    def _decide(self, timeout: float) -> StepResult | _Binding | None:
        """Pop one pod and decide it: a final result, a Binding still to send, or None when nothing was tried."""
        if not self._lead():
            return None
        with self._lock:
            ready = self.sync.ready
        if not ready:
            return None
        entry = self.queue.pop(timeout)
        if entry is None:
            return None
        return self._attempt(entry.uid, entry.pod)

    def _finish(self, result: StepResult, started: float) -> StepResult:
        """Count, time and log one attempt that has ended."""
        if self.metrics is not None:
            self.metrics.scheduling_duration.observe(max(0.0, self.clock() - started))
            self.metrics.scheduling_attempts.labels(result=_RESULT_LABEL.get(result.outcome, "error")).inc()
        log.info("pod %s: %s%s%s", result.pod, result.outcome, f" on {result.node}" if result.node else "",
                 f": {result.message}" if result.message and result.outcome != "scheduled" else "")
        return result

    def _attempt(self, uid: str, obj: dict[str, Any]) -> StepResult | _Binding:
        key = pod_key(obj)
        with self._lock:
            uncertain = uid in self._uncertain
        if uncertain:
            settled = self._settle(uid, obj, key)
            if settled is not None:
                return settled
        with self._lock:
            pod = self.sync.parsed_pending(obj)
        try:
            if pod is None:
                pod = Pod.from_dict(obj, source=f"pod {key}")
        except InputError as err:
            self._unschedulable(obj, str(err))
            self.queue.done(uid, Outcome.UNSCHEDULABLE)
            return StepResult(key, "invalid", message=str(err))
        requests: list[dict[str, Any]] = []
        with self._lock:
            known = self.scheduler.cluster.pod_node.get(uid)
            if known is not None:  # bound already, as far as the cluster knows
                self.queue.done(uid, Outcome.DONE)
                return StepResult(key, "gone", known)
            decision = self.scheduler.schedule(pod, now=self.clock())
            node, message = decision.node, decision.message
            if node is not None:
                try:
                    requests = self.scheduler.binding(decision, pod)
                except InputError as err:  # a PreBind plugin refused
                    self._give_back(uid, node)
                    node, message = None, str(err)
        if node is None:
            self._unschedulable(obj, message)
            self.queue.done(uid, Outcome.UNSCHEDULABLE)
            return StepResult(key, "unschedulable", message=message)
        return _Binding(uid, obj, key, node, requests)

    def _unschedulable(self, obj: dict[str, Any], message: str) -> None:
        """Tell why the pod cannot be placed: a ``FailedScheduling`` Event and ``PodScheduled=False``.

        The condition is written only when it changes (kube-scheduler's ``updatePod``), keeping
        ``lastTransitionTime`` while the status stays ``False``. A refused write is logged: the
        pod is retried either way.
        """
        self._post(self.events.failed_scheduling, obj, message)
        meta = obj.get("metadata") or {}
        current = next((c for c in (obj.get("status") or {}).get("conditions") or []
                        if c.get("type") == POD_SCHEDULED_CONDITION), {})
        if (current.get("status"), current.get("reason"), current.get("message")) == ("False", UNSCHEDULABLE_CONDITION_REASON, message):
            return
        since = current.get("lastTransitionTime") if current.get("status") == "False" else None
        condition = {"type": POD_SCHEDULED_CONDITION, "status": "False", "reason": UNSCHEDULABLE_CONDITION_REASON,
                     "message": message, "lastProbeTime": None,
                     "lastTransitionTime": since or event_time(self.clock())}
        try:
            self.client.set_pod_condition(meta.get("namespace") or "default", meta.get("name", ""), condition)
        except ApiError as err:
            log.warning("cannot set PodScheduled=False on pod %s: %s", pod_key(obj), err)

    def _bind(self, binding: _Binding) -> StepResult:
        """Send the Binding of a decision and settle its reservation by the answer."""
        uid, obj, key, node = binding.uid, binding.obj, binding.key, binding.node
        if not self.leading:  # the lease ran out while we were choosing
            self._release(uid, node, Outcome.ERROR)
            return StepResult(key, "error", node, "no longer the leader")
        try:
            perform_binding(self.client, binding.requests)
        except NotFound as err:
            self._release(uid, node, Outcome.DONE)
            return StepResult(key, "gone", node, err.message)
        except ApiError as err:  # 409 (bound elsewhere, or a new pod of that name), 5xx, ...
            log.warning("binding pod %s to %s failed: %s; reading the pod back", key, node, err)
            with self._lock:
                self._uncertain[uid] = node
            settled = self._settle(uid, obj, key)
            if settled is not None:
                return settled
            self.queue.done(uid, Outcome.ERROR)
            return StepResult(key, "error", node, err.message)
        return self._bound(uid, obj, key, node)

    def _settle(self, uid: str, obj: dict[str, Any], key: str) -> StepResult | None:
        """After a failure whose effect is unknown, read the pod: None when it is unbound (reservation given back).

        Bound to the node we asked for: the Binding went through. Bound elsewhere or gone: dropped.
        Unreadable: the reservation stays and the pod backs off, still uncertain.
        """
        with self._lock:
            node = self._uncertain[uid]
        meta = obj.get("metadata") or {}
        try:
            current = self.client.get(PODS, meta.get("name", ""), namespace=meta.get("namespace") or "default")
        except NotFound:
            current = None
        except ApiError as err:
            log.warning("cannot read pod %s back: %s; keeping its reservation on %s", key, err, node)
            self.queue.done(uid, Outcome.ERROR)
            return StepResult(key, "error", node, f"binding state unknown: {err.message}")
        with self._lock:
            self._uncertain.pop(uid, None)
        if current is None or pod_uid(current) != uid:
            self._release(uid, node, Outcome.DONE)
            return StepResult(key, "gone", node)
        bound = (current.get("spec") or {}).get("nodeName")
        if bound == node:
            return self._bound(uid, current, key, node)
        if bound:
            self._release(uid, node, Outcome.DONE)
            return StepResult(key, "conflict", bound, f"bound to {bound} by someone else")
        self._release(uid, node, None)
        return None

    def _bound(self, uid: str, obj: dict[str, Any], key: str, node: str) -> StepResult:
        with self._lock:
            cluster = self.scheduler.cluster
            if cluster.pod_node.get(uid) == node:
                self.scheduler.bound(cluster.nodes[node].pods[uid].pod, self.clock())
        self._post(self.events.scheduled, obj, node)
        self.queue.done(uid, Outcome.DONE)
        return StepResult(key, "scheduled", node)

    def _release(self, uid: str, node: str, outcome: Outcome | None) -> None:
        """Give the reservation back and tell the queue how the attempt ended (None: the attempt goes on)."""
        with self._lock:
            self._give_back(uid, node)
        if outcome is not None:
            self.queue.done(uid, outcome)

    def _give_back(self, uid: str, node: str) -> None:
        """Unreserve the pod on ``node`` if the cluster still holds our reservation there (not a bound pod)."""
        cluster = self.scheduler.cluster
        if cluster.pod_node.get(uid) != node:
            return
        entry = cluster.nodes[node].pods[uid]
        if entry.assumed:
            self.scheduler.unreserve(entry.pod)

    # ---- the loop -----------------------------------------------------------------------------------

    def _bind_in_background(self, binding: _Binding, started: float, slot: threading.BoundedSemaphore) -> None:
        """One Binding in a pool thread; frees its slot however it ends."""
        try:
            self._finish(self._bind(binding), started)
        except Exception:  # a bug must not kill the pool thread silently
            log.exception("binding pod %s failed unexpectedly", binding.key)
        finally:
            slot.release()

    def run(self, stop: threading.Event, *, poll: float = 0.5, watch_timeout: float = 30.0) -> None:
        """Run the reflectors in threads and schedule until ``stop`` is set; then finish the Bindings in
        flight and give the lease up.

        ``poll`` bounds how long one wait for a pod lasts, hence how soon a stop is noticed;
        ``watch_timeout`` how long one watch stream lasts (a reflector notices a stop between streams).
        The cyclic garbage collector is paused until the cluster has been listed in full: the
        first lists build the long-lived cluster model, and each automatic full collection
        meanwhile walks all of it again (a third of the parsing time at 5,000 nodes).
        """
        threads = [threading.Thread(target=r.run, args=(stop,), kwargs={"watch_timeout": watch_timeout},
                                    name=f"reflector-{r.kind.plural}", daemon=True) for r in self.reflectors]
        for thread in threads:
            thread.start()
        binders = ThreadPoolExecutor(self.bind_workers, thread_name_prefix="bind")
        slots = threading.BoundedSemaphore(self.bind_workers)
        events = ThreadPoolExecutor(self.event_workers, thread_name_prefix="event")
        self._post = events.submit
        paused = gc.isenabled()
        gc.disable()
        try:
            while not stop.is_set():
                if paused and self.sync.ready:
                    gc.enable()
                    paused = False
                started = self.clock()
                decided = self._decide(poll)
                if decided is None:
                    if not self._schedulable():
                        self.sleep(min(poll, self.elector.retry_period) if self.elector else poll)
                elif isinstance(decided, _Binding):
                    slots.acquire()
                    binders.submit(self._bind_in_background, decided, started, slots)
                else:
                    self._finish(decided, started)
        finally:
            if paused:
                gc.enable()
            binders.shutdown(wait=True)
            events.shutdown(wait=True)
            self._post = _call_now
            self.queue.close()
            if self.elector is not None:
                self.elector.release()
            for thread in threads:
                thread.join(timeout=5)
            log.info("%s stopped", self.identity)
