"""Events on pods: FailedScheduling and Scheduled, with repeats counted and floods combined.

Correlation follows client-go ``tools/record/events_cache.go`` (``getEventKey``,
``EventAggregatorByReasonFunc`` with 10 distinct messages in 600 s and the "(combined from
similar events): " prefix, ``eventObserve`` counting repeats, the spam filter's burst of 25 and
refill of one event per 300 s) and ``tools/record/event.go`` (``recordEvent``: patch a repeat,
create it again when the patch finds it gone; names ``<object>.<unix nanos in hex>``).
"""

from __future__ import annotations

from tests.kube.memory_client import MemoryClient
from toposched.kube.client import EVENTS, PODS, ServerError
from toposched.kube.events import EventRecorder, event_time

T0 = 1_700_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def setup():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    pod = client.create(PODS, {"metadata": {"name": "web-0", "namespace": "shop"},
                               "spec": {"schedulerName": "toposched", "containers": [{"name": "c"}]}})
    return client, clock, pod, EventRecorder(client, component="toposched", clock=clock, instance="replica-1")


def events(client) -> list[dict]:
    return client.list(EVENTS, namespace="shop").items


def test_failed_scheduling_event_shape():
    client, clock, pod, recorder = setup()
    recorder.failed_scheduling(pod, "0/3 nodes are available: 3 Insufficient cpu.")
    [event] = events(client)
    assert event["type"] == "Warning" and event["reason"] == "FailedScheduling"
    assert event["message"] == "0/3 nodes are available: 3 Insufficient cpu."
    assert event["involvedObject"] == {"kind": "Pod", "namespace": "shop", "name": "web-0",
                                       "uid": pod["metadata"]["uid"], "apiVersion": "v1",
                                       "resourceVersion": pod["metadata"]["resourceVersion"]}
    assert event["source"] == {"component": "toposched"}
    assert event["count"] == 1 and event["firstTimestamp"] == event["lastTimestamp"] == event_time(T0)
    assert event["reportingComponent"] == "toposched" and event["reportingInstance"] == "replica-1"
    assert event["metadata"]["name"] == f"web-0.{int(T0 * 1e9):x}"


def test_scheduled_event_wording():
    client, clock, pod, recorder = setup()
    recorder.scheduled(pod, "node-7")
    [event] = events(client)
    assert (event["type"], event["reason"]) == ("Normal", "Scheduled")
    assert event["message"] == "Successfully assigned shop/web-0 to node-7"


def test_identical_events_are_counted_on_one_object():
    client, clock, pod, recorder = setup()
    for _ in range(3):
        recorder.failed_scheduling(pod, "0/3 nodes are available: 3 Insufficient cpu.")
        clock.now += 7
    [event] = events(client)
    assert event["count"] == 3
    assert event["firstTimestamp"] == event_time(T0) and event["lastTimestamp"] == event_time(T0 + 14)
    recorder.failed_scheduling(pod, "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint.")
    assert len(events(client)) == 2  # a different message is a different event


def test_a_deleted_event_is_created_again():
    client, clock, pod, recorder = setup()
    first = recorder.failed_scheduling(pod, "no room")
    client.delete(EVENTS, first["metadata"]["name"], namespace="shop")
    clock.now += 1
    again = recorder.failed_scheduling(pod, "no room")
    assert again is not None and again["count"] == 2
    assert len(events(client)) == 1


def test_many_distinct_messages_are_combined():
    client, clock, pod, recorder = setup()
    for i in range(12):
        recorder.failed_scheduling(pod, f"0/{i + 1} nodes are available")
        clock.now += 1
    stored = events(client)
    plain = [e for e in stored if not e["message"].startswith("(combined")]
    combined = [e for e in stored if e["message"].startswith("(combined from similar events): ")]
    assert len(plain) == 9  # the 10th distinct message starts the combined event
    assert len(combined) == 1
    assert combined[0]["count"] == 3 and combined[0]["message"].endswith("0/12 nodes are available")


def test_a_flood_is_cut_to_the_burst_then_one_per_five_minutes():
    client, clock, pod, recorder = setup()
    sent = [recorder.failed_scheduling(pod, "same") for _ in range(30)]
    assert sum(e is not None for e in sent) == 25
    clock.now += 300
    assert recorder.failed_scheduling(pod, "same") is not None
    assert recorder.failed_scheduling(pod, "same") is None


def test_api_failures_are_logged_not_raised(caplog):
    client, clock, pod, recorder = setup()
    client.fail_next("create", EVENTS, ServerError("etcd down"))
    assert recorder.failed_scheduling(pod, "x") is None
    assert "cannot record event FailedScheduling" in caplog.text
    assert recorder.failed_scheduling(pod, "x")["count"] == 2  # client-go counts the lost one too
