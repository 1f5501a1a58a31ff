"""The scheduling queue of the standalone scheduler, shaped like kube-scheduler's PriorityQueue.

Every pending pod of ours is in exactly one place:

- **active**: ready to be tried; popped highest ``spec.priority`` first, then in order of arrival
  (the time it entered the queue or last failed), as kube-scheduler's PrioritySort orders them;
- **backoff**: failed recently and waiting ``1 s * 2**(attempts - 1)`` (at most 10 s) from its last
  failure before it is active again (``podInitialBackoffDuration`` / ``podMaxBackoffDuration``);
- **unschedulable**: no node fitted; it waits for a cluster change (:meth:`SchedulingQueue.move_all_to_active`)
  or 5 minutes (``podMaxInUnschedulablePodsDuration``), then goes to backoff or active;
- **in flight**: popped and being scheduled; :meth:`SchedulingQueue.done` says how that ended.

A cluster change seen while a pod was in flight sends it to backoff instead of unschedulable when
it fails (upstream's ``moveRequestCycle``), so an event that arrived during its cycle is never
missed. Pods are kept as the API server's dicts and known by ``metadata.uid``.

Time is the passed-in clock's; nothing else here depends on time. The queue is thread safe:
informer threads add, update and delete while the scheduling loop pops.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "INITIAL_BACKOFF",
    "MAX_BACKOFF",
    "MAX_UNSCHEDULABLE",
    "Outcome",
    "QueuedPod",
    "SchedulingQueue",
    "pod_uid",
]

INITIAL_BACKOFF = 1.0  # seconds, kube-scheduler's DefaultPodInitialBackoffDuration
MAX_BACKOFF = 10.0  # seconds, DefaultPodMaxBackoffDuration
MAX_UNSCHEDULABLE = 300.0  # seconds, DefaultPodMaxInUnschedulablePodsDuration

# Metadata that changes without the pod changing for the scheduler (upstream's isPodUpdated).
_VOLATILE_METADATA = ("resourceVersion", "generation", "managedFields", "finalizers")


class Outcome(enum.Enum):
    """How a popped pod's scheduling attempt ended."""

    DONE = "done"  # bound, or no longer ours to schedule: it leaves the queue
    UNSCHEDULABLE = "unschedulable"  # no node fits: park it until the cluster changes
    ERROR = "error"  # an error (API failure, lost lease): retry after backoff


def pod_uid(pod: Mapping[str, Any]) -> str:
    """The pod's ``metadata.uid``, or ``namespace/name`` for a pod without one."""
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}")


def _priority(pod: Mapping[str, Any]) -> int:
    value = (pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _scheduling_view(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod without the parts whose change cannot make it schedulable (status, versions)."""
    meta = {k: v for k, v in (pod.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    return {**{k: v for k, v in pod.items() if k != "status"}, "metadata": meta}


@dataclass
class QueuedPod:
    """A pod in the queue and its scheduling history."""

    pod: dict[str, Any]
    uid: str
    timestamp: float  # when it entered the queue or last failed: the start of its backoff
    initial_attempt: float  # when it first entered the queue
    attempts: int = 0  # how many times it has been popped
    cycle: int = 0  # the scheduling cycle in which it was last popped
    # set while in flight: the pod was deleted, or changed in a way that may make it schedulable
    deleted: bool = field(default=False, repr=False)
    changed: bool = field(default=False, repr=False)

    @property
    def priority(self) -> int:
        """The pod's ``spec.priority`` (0 when unset)."""
        return _priority(self.pod)


class SchedulingQueue:
    """Pending pods: active, backoff, unschedulable and in-flight, each pod in exactly one of them."""

    def __init__(self, clock: Callable[[], float], *, initial_backoff: float = INITIAL_BACKOFF,
                 max_backoff: float = MAX_BACKOFF, max_unschedulable: float = MAX_UNSCHEDULABLE) -> None:
        self.clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable = max_unschedulable
        self._entries: dict[str, QueuedPod] = {}
        self._where: dict[str, str] = {}  # uid -> "active" | "backoff" | "unschedulable" | "in_flight"
        self._active: list[tuple[int, float, int, str]] = []  # heap; rows no longer live are skipped
        self._backoff: list[tuple[float, int, str]] = []  # heap by expiry; rows no longer live are skipped
        self._rows: dict[str, tuple] = {}  # uid -> its live row in the active or backoff heap
        self._parked: OrderedDict[str, None] = OrderedDict()  # unschedulable pods, oldest failure first
        self._counter = itertools.count()
        self._cycle = 0
        self._move_request_cycle = -1
        self._closed = False
        self._cond = threading.Condition()

    # ---- what is where -------------------------------------------------------------------------------

    def where(self, uid: str) -> str | None:
        """``"active"``, ``"backoff"``, ``"unschedulable"``, ``"in_flight"``, or None when unknown."""
        with self._cond:
            return self._where.get(uid)

    def get(self, uid: str) -> QueuedPod | None:
        """The queue's record of a pod, or None."""
        with self._cond:
            return self._entries.get(uid)

    def uids(self) -> set[str]:
        """Every pod the queue holds, in any sub-queue or in flight."""
        with self._cond:
            return set(self._entries)

    def sub_queues(self) -> dict[str, set[str]]:
        """The pods each sub-queue holds, read from the structures themselves (heaps, parked, in flight)."""
        with self._cond:
            return {
                "active": {r[-1] for r in self._active if self._rows.get(r[-1]) is r},
                "backoff": {r[-1] for r in self._backoff if self._rows.get(r[-1]) is r},
                "unschedulable": set(self._parked),
                "in_flight": {uid for uid, place in self._where.items() if place == "in_flight"},
            }

    def __len__(self) -> int:
        with self._cond:
            return len(self._entries)

    def __iter__(self) -> Iterator[QueuedPod]:
        with self._cond:
            return iter(list(self._entries.values()))

    # ---- informer side -------------------------------------------------------------------------------

    def add(self, pod: Mapping[str, Any]) -> None:
        """A pending pod appeared; a pod the queue already holds is updated instead (no duplicates)."""
        self.update(pod)

    def update(self, pod: Mapping[str, Any]) -> None:
        """A pending pod changed (or appeared): upstream's ``PriorityQueue.Update``.

        In active or backoff it is replaced where it is; an unschedulable pod whose change may make
        it schedulable moves to backoff (still backing off) or active; an unknown pod becomes active.
        """
        pod = dict(pod)
        uid = pod_uid(pod)
        with self._cond:
            entry = self._entries.get(uid)
            if entry is None:
                now = self.clock()
                self._entries[uid] = QueuedPod(pod, uid, timestamp=now, initial_attempt=now)
                self._to_active(uid)
                return
            changed = _scheduling_view(entry.pod) != _scheduling_view(pod)
            entry.pod = pod
            place = self._where[uid]
            if place == "active":
                self._to_active(uid)  # its priority may have changed
            elif place == "in_flight":
                entry.deleted = False  # seen again (a relist after a spurious delete): still pending
                entry.changed = entry.changed or changed
            elif place == "unschedulable" and changed:
                self._requeue(entry)

    def delete(self, pod_or_uid: Mapping[str, Any] | str) -> None:
        """The pod is gone or no longer pending: forget it (a pod in flight is forgotten at :meth:`done`)."""
        uid = pod_or_uid if isinstance(pod_or_uid, str) else pod_uid(pod_or_uid)
        with self._cond:
            if self._where.get(uid) == "in_flight":
                self._entries[uid].deleted = True
            elif uid in self._entries:
                self._forget(uid)

    def move_all_to_active(self) -> None:
        """The cluster changed (node, NRT or pod deletion): every unschedulable pod is tried again.

        Those still within their backoff go to backoff, the others to active; pods now in flight
        go to backoff if they fail (``moveRequestCycle``).
        """
        with self._cond:
            for uid in list(self._parked):
                self._requeue(self._entries[uid])
            self._move_request_cycle = self._cycle

    # ---- scheduling loop side -------------------------------------------------------------------------

    def pop(self, timeout: float = 0.0) -> QueuedPod | None:
        """The next pod to schedule, now in flight; None when none is ready.

        Waits once, at most ``timeout`` seconds (and no longer than the next backoff expiry), for a
        pod to become ready. Returns None at once after :meth:`close`.
        """
        with self._cond:
            entry = self._pop_ready()
            if entry is None and timeout > 0 and not self._closed:
                wait = timeout
                if self._backoff:
                    wait = max(0.0, min(wait, self._backoff[0][0] - self.clock()))
                self._cond.wait(wait)
                entry = self._pop_ready()
            return entry

    def done(self, uid: str, outcome: Outcome) -> None:
        """How the attempt for a popped pod ended: it leaves, parks as unschedulable, or backs off."""
        with self._cond:
            if self._where.get(uid) != "in_flight":
                return
            entry = self._entries[uid]
            if entry.deleted or outcome is Outcome.DONE:
                self._forget(uid)
                return
            entry.timestamp = self.clock()
            moved = self._move_request_cycle >= entry.cycle or entry.changed
            entry.changed = False
            if outcome is Outcome.UNSCHEDULABLE and not moved:
                self._where[uid] = "unschedulable"
                self._parked[uid] = None
            else:
                self._to_backoff(uid)

    def close(self) -> None:
        """Wake every waiting :meth:`pop`; from now on pop returns None."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def backoff_duration(self, attempts: int) -> float:
        """Upstream's ``calculateBackoffDuration``: the initial backoff doubled per attempt after the first, capped."""
        duration = self.initial_backoff
        for _ in range(1, attempts):
            if duration > self.max_backoff - duration:
                return self.max_backoff
            duration += duration
        return duration

    def backoff_expiry(self, entry: QueuedPod) -> float:
        """When ``entry``'s backoff ends: its last failure plus its backoff duration."""
        return entry.timestamp + self.backoff_duration(entry.attempts)

    # ---- internals (the caller holds the lock) ----------------------------------------------------------

    def _pop_ready(self) -> QueuedPod | None:
        if self._closed:
            return None
        self._flush()
        while self._active:
            row = heapq.heappop(self._active)
            uid = row[-1]
            if self._rows.get(uid) is row:
                entry = self._entries[uid]
                self._where[uid] = "in_flight"
                del self._rows[uid]
                self._cycle += 1
                entry.attempts += 1
                entry.cycle = self._cycle
                return entry
        return None

    def _flush(self) -> None:
        """Backoffs that ended go to active; pods unschedulable for too long go to backoff or active."""
        now = self.clock()
        while self._backoff and self._backoff[0][0] <= now:
            row = heapq.heappop(self._backoff)
            if self._rows.get(row[-1]) is row:
                self._to_active(row[-1])
        while self._parked:
            entry = self._entries[next(iter(self._parked))]
            if now - entry.timestamp <= self.max_unschedulable:
                break
            self._requeue(entry)

    def _requeue(self, entry: QueuedPod) -> None:
        self._parked.pop(entry.uid, None)
        if self.backoff_expiry(entry) > self.clock():
            self._to_backoff(entry.uid)
        else:
            self._to_active(entry.uid)

    def _to_active(self, uid: str) -> None:
        entry = self._entries[uid]
        self._push("active", self._active, (-entry.priority, entry.timestamp, next(self._counter), uid))

    def _to_backoff(self, uid: str) -> None:
        self._push("backoff", self._backoff, (self.backoff_expiry(self._entries[uid]), next(self._counter), uid))

    def _push(self, place: str, heap: list, row: tuple) -> None:
        uid = row[-1]
        self._where[uid], self._rows[uid] = place, row
        heapq.heappush(heap, row)
        if len(heap) > 2 * len(self._rows) + 64:  # drop the rows of pods that moved on
            heap[:] = [r for r in heap if self._rows.get(r[-1]) is r]
            heapq.heapify(heap)
        self._cond.notify_all()  # a waiting pop may take it, or wait for this expiry instead

    def _forget(self, uid: str) -> None:
        self._entries.pop(uid, None)
        self._where.pop(uid, None)
        self._rows.pop(uid, None)
        self._parked.pop(uid, None)
