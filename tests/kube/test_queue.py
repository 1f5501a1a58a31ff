"""The standalone scheduler's queue: ordering, backoff, parking unschedulable pods, dedupe.

Upstream behaviour checked against kubernetes ``pkg/scheduler/internal/queue/scheduling_queue.go``
(``calculateBackoffDuration``, ``AddUnschedulableIfNotPresent`` with ``moveRequestCycle``,
``flushUnschedulablePodsLeftover``, ``Update``) and its test table ``TestBackOffFlow`` in
``scheduling_queue_test.go`` (backoffs 1 s, 2 s, 4 s, 8 s, then 10 s).
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from toposched.kube.queue import MAX_UNSCHEDULABLE, Outcome, SchedulingQueue, pod_uid


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def pod(name: str, priority: int | None = None, **spec) -> dict:
    body = {"schedulerName": "toposched", "containers": [{"name": "c"}], **spec}
    if priority is not None:
        body["priority"] = priority
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1"},
            "spec": body}


def names(queue: SchedulingQueue) -> list[str]:
    out = []
    while (entry := queue.pop()) is not None:
        out.append(entry.pod["metadata"]["name"])
    return out


def test_pods_come_out_in_arrival_order_and_once():
    clock = Clock()
    queue = SchedulingQueue(clock)
    for name in ("a", "b", "c"):
        queue.add(pod(name))
        clock.now += 1
    queue.add(pod("a"))  # a duplicate add is an update, not a second entry
    assert len(queue) == 3
    assert names(queue) == ["a", "b", "c"]
    assert queue.pop() is None


def test_higher_priority_first_then_arrival():
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(pod("low", priority=1))
    clock.now += 1
    queue.add(pod("high", priority=100))
    clock.now += 1
    queue.add(pod("also-high", priority=100))
    queue.add(pod("none"))
    assert names(queue) == ["high", "also-high", "low", "none"]


def test_backoff_doubles_from_one_second_to_ten():
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(pod("p"))
    for attempt, want in enumerate([1, 2, 4, 8, 10, 10, 10], start=1):
        entry = queue.pop()
        assert entry is not None and entry.attempts == attempt
        queue.done(entry.uid, Outcome.ERROR)
        assert queue.where(entry.uid) == "backoff"
        clock.now += want - 0.001
        assert queue.pop() is None  # still backing off
        clock.now += 0.001
    assert queue.pop() is not None
    assert [queue.backoff_duration(n) for n in range(1, 8)] == [1, 2, 4, 8, 10, 10, 10]


def test_unschedulable_waits_for_a_cluster_change():
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(pod("p"))
    entry = queue.pop()
    queue.done(entry.uid, Outcome.UNSCHEDULABLE)
    assert queue.where(entry.uid) == "unschedulable"
    clock.now += 60
    assert queue.pop() is None  # backoff is long over, but nothing changed
    queue.move_all_to_active()
    assert queue.where(entry.uid) == "active"
    assert queue.pop().uid == entry.uid


def test_a_cluster_change_during_backoff_goes_through_backoff():
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(pod("p"))
    entry = queue.pop()
    queue.done(entry.uid, Outcome.UNSCHEDULABLE)
    queue.move_all_to_active()  # at once: its 1 s backoff is not over
    assert queue.where(entry.uid) == "backoff"
    assert queue.pop() is None
    clock.now += 1
    assert queue.pop().uid == entry.uid


def test_a_change_seen_while_in_flight_is_not_missed():
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(pod("p"))
    entry = queue.pop()
    queue.move_all_to_active()  # e.g. a node was added while the pod was being scheduled
    queue.done(entry.uid, Outcome.UNSCHEDULABLE)
    assert queue.where(entry.uid) == "backoff"  # retried after backoff instead of parked


def test_unschedulable_pods_are_retried_after_five_minutes():
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(pod("p"))
    queue.done(queue.pop().uid, Outcome.UNSCHEDULABLE)
    clock.now += MAX_UNSCHEDULABLE
    assert queue.pop() is None
    clock.now += 0.5
    assert queue.pop() is not None


def test_an_update_that_may_help_moves_an_unschedulable_pod():
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(pod("p"))
    uid = queue.pop().uid
    queue.done(uid, Outcome.UNSCHEDULABLE)
    clock.now += 5
    same = pod("p")
    same["metadata"]["resourceVersion"] = "2"
    same["status"] = {"phase": "Pending"}
    queue.update(same)  # only status and version changed: stays parked
    assert queue.where(uid) == "unschedulable"
    queue.update(pod("p", nodeSelector={"zone": "b"}))
    assert queue.where(uid) == "active"


def test_a_pod_deleted_in_flight_is_forgotten_when_done():
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(pod("p"))
    entry = queue.pop()
    queue.delete(entry.pod)
    assert queue.where(entry.uid) == "in_flight"
    queue.done(entry.uid, Outcome.ERROR)
    assert queue.where(entry.uid) is None and len(queue) == 0


def test_an_update_in_flight_keeps_the_newest_object():
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(pod("p"))
    entry = queue.pop()
    queue.update(pod("p", nodeSelector={"zone": "b"}))
    assert queue.where(entry.uid) == "in_flight"
    queue.done(entry.uid, Outcome.UNSCHEDULABLE)
    assert queue.where(entry.uid) == "backoff"  # it changed: worth another try
    assert queue.get(entry.uid).pod["spec"]["nodeSelector"] == {"zone": "b"}


def test_done_removes_and_close_ends_pop():
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(pod("p"))
    queue.done(queue.pop().uid, Outcome.DONE)
    assert len(queue) == 0
    queue.add(pod("q"))
    queue.close()
    assert queue.pop(timeout=5) is None


def test_pod_uid_falls_back_to_the_key():
    assert pod_uid({"metadata": {"name": "x"}}) == "default/x"
    assert pod_uid(pod("y")) == "uid-y"


class QueueMachine(RuleBasedStateMachine):
    """Random add/update/delete/pop/done/move/clock steps: every pod is in exactly one sub-queue."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.queue = SchedulingQueue(self.clock)
        self.live: set[str] = set()  # pods the informer says are pending
        self.flight: set[str] = set()
        self.failed_at: dict[str, float] = {}  # uid -> earliest time its backoff lets it out

    @rule(name=st.sampled_from("abcdef"), priority=st.sampled_from([None, 0, 5]))
    def add(self, name, priority):
        self.queue.add(pod(name, priority))
        self.live.add(f"uid-{name}")

    @rule(name=st.sampled_from("abcdef"), zone=st.sampled_from("xy"))
    def update(self, name, zone):
        self.queue.update(pod(name, nodeSelector={"zone": zone}))
        uid = f"uid-{name}"
        if uid not in self.live:
            self.failed_at.pop(uid, None)
        self.live.add(uid)

    @rule(name=st.sampled_from("abcdef"))
    def delete(self, name):
        uid = f"uid-{name}"
        self.queue.delete(uid)
        self.live.discard(uid)
        self.failed_at.pop(uid, None)

    @rule()
    def pop(self):
        entry = self.queue.pop()
        if entry is not None:
            assert entry.uid not in self.flight
            assert self.clock.now >= self.failed_at.get(entry.uid, self.clock.now)
            self.flight.add(entry.uid)

    @precondition(lambda self: self.flight)
    @rule(data=st.data(), outcome=st.sampled_from(list(Outcome)))
    def done(self, data, outcome):
        uid = data.draw(st.sampled_from(sorted(self.flight)))
        self.flight.discard(uid)
        entry = self.queue.get(uid)
        deleted = uid not in self.live
        self.queue.done(uid, outcome)
        if outcome is Outcome.DONE or deleted:
            self.live.discard(uid)
            self.failed_at.pop(uid, None)
        else:
            self.failed_at[uid] = self.clock.now + self.queue.backoff_duration(entry.attempts)

    @rule()
    def move_all(self):
        self.queue.move_all_to_active()

    @rule(seconds=st.sampled_from([0.5, 1, 3, 10, 301]))
    def tick(self, seconds):
        self.clock.now += seconds

    @invariant()
    def one_place_per_pod(self):
        places = self.queue.sub_queues()
        seen: list[str] = [uid for members in places.values() for uid in members]
        assert len(seen) == len(set(seen)), places
        assert set(seen) == self.queue.uids()
        for place, members in places.items():
            for uid in members:
                assert self.queue.where(uid) == place
        assert places["in_flight"] == self.flight
        # what the queue holds is what is pending, plus pods deleted while in flight
        assert self.queue.uids() == self.live | self.flight


QueueMachine.TestCase.settings = settings(max_examples=75, stateful_step_count=40, deadline=None)
test_queue_state_machine = QueueMachine.TestCase
