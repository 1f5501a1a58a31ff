"""The standalone scheduler against an in-memory API server (and once over real HTTP).

Pending pods of our scheduler name are bound with their placement annotation; failures are
explained with Events; 409 and 500 on the Binding, a lost Binding response and a watch that
drops mid-stream never cost a pod or bind it twice; a restarted scheduler rebuilds the ledger
before it places anything; two replicas under leader election bind every pod exactly once.

kube-scheduler behaviour mirrored here: the FailedScheduling / Scheduled Events and their
wording (kubernetes ``pkg/scheduler/schedule_one.go``: "Successfully assigned %v/%v to %v"),
unschedulable pods retried on cluster events (``pkg/scheduler/internal/queue``), and client-go's
leader election (``tools/leaderelection``) for the replica that may bind.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.kube.memory_client import MemoryClient
from toposched.kube.client import EVENTS, LEASES, NODES, NRTS, PODS, ServerError
from toposched.kube.leader import LeaderElector
from toposched.kube.standalone import StandaloneScheduler
from toposched.kubelet.config import KubeletConfig
from toposched.node_report import node_report
from toposched.scheduler import Cluster, Placement, Scheduler
from toposched.scheduler.placement import PLACEMENT_ANNOTATION
from toposched.scheduler.profile_setup import load_profile
from toposched.topology import CPUSet, Machine

GI = 2**30
T0 = 1_700_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def machine(numa=2, cores=4) -> Machine:
    total = numa * cores
    rows = [{"cpu": c + t * total, "core": c, "socket": c // cores, "numa": c // cores}
            for t in range(2) for c in range(total)]
    return Machine.from_cpu_table(rows, memory_per_numa=32 * GI,
                                  distances={a: {b: 10 if a == b else 21 for b in range(numa)} for a in range(numa)})


def node_obj(name, labels=None):
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}}


def nrt_obj(name):
    """The node's report as toposched's agent publishes it (node description included: exact CPU ids)."""
    config = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                           reserved_system_cpus=CPUSet([0, 8]))
    return node_report(machine(), config, node_name=name)


def pod_obj(name, cpus, *, scheduler="toposched", **spec):
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": scheduler, **spec,
                 "containers": [{"name": "c", "resources": {"limits": {"cpu": str(cpus), "memory": "1Gi"}}}]},
    }


def add_nodes(client, *names, labels=None):
    for name in names:
        client.create(NODES, node_obj(name, labels))
        client.create(NRTS, nrt_obj(name))


def add_pods(client, names, cpus=2, **kw):
    return [client.create(PODS, pod_obj(name, cpus, **kw)) for name in names]


def make(client, clock, identity="r1", elector=None) -> StandaloneScheduler:
    scheduler = Scheduler(Cluster(), load_profile("toposched"))
    return StandaloneScheduler(client, scheduler, clock=clock, sleep=lambda seconds: None, identity=identity,
                               elector=elector)


def drain(sched: StandaloneScheduler, limit: int = 100) -> list:
    """Watch, then schedule until nothing is ready; the results in order."""
    results = []
    for _ in range(limit):
        sched.pump()
        result = sched.step()
        if result is None:
            break
        results.append(result)
    sched.pump()
    return results


def pods(client) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in client.list(PODS).items}


def bind_calls(client, name) -> int:
    return sum(1 for verb, kind, n in client.requests if verb == "bind" and n == name)


def assert_no_cpu_twice(client):
    """Every CPU of every node is in at most one bound pod's placement annotation."""
    owner: dict[tuple[str, int], str] = {}
    for name, pod in pods(client).items():
        node = pod["spec"].get("nodeName")
        if not node:
            continue
        placement = Placement.from_annotation(pod["metadata"]["annotations"][PLACEMENT_ANNOTATION])
        assert placement.node == node
        for cpu in placement.cpuset:
            assert (node, cpu) not in owner, f"CPU {cpu} of {node}: {owner.get((node, cpu))} and {name}"
            owner[(node, cpu)] = name


def test_schedules_pending_pods_of_its_scheduler_name_only():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(client, "a", "b")
    add_pods(client, ["p0", "p1", "p2"])
    add_pods(client, ["theirs"], scheduler="default-scheduler")
    sched = make(client, clock)
    assert sched.step() is None  # nothing is listed yet: not ready
    results = drain(sched)
    assert sorted(r.pod for r in results) == ["default/p0", "default/p1", "default/p2"]
    assert {r.outcome for r in results} == {"scheduled"}
    state = pods(client)
    assert "nodeName" not in state["theirs"]["spec"]
    for name in ("p0", "p1", "p2"):
        node = state[name]["spec"]["nodeName"]
        placement = Placement.from_annotation(state[name]["metadata"]["annotations"][PLACEMENT_ANNOTATION])
        assert placement.node == node and len(placement.cpuset) == 2 and len(placement.numa_nodes) == 1
        entry = sched.scheduler.cluster.nodes[node].pods[state[name]["metadata"]["uid"]]
        assert not entry.assumed  # confirmed bound
    messages = sorted(e["message"] for e in client.list(EVENTS).items if e["reason"] == "Scheduled")
    assert messages == [f"Successfully assigned default/{n} to {state[n]['spec']['nodeName']}" for n in ("p0", "p1", "p2")]
    assert len(sched.queue) == 0
    assert_no_cpu_twice(client)


def test_an_unschedulable_pod_is_explained_and_retried_when_a_node_arrives():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(client, "a")
    [pod] = add_pods(client, ["gpu-job"], nodeSelector={"pool": "gpu"})
    sched = make(client, clock)
    [result] = drain(sched)
    assert result.outcome == "unschedulable"
    [event] = [e for e in client.list(EVENTS).items if e["reason"] == "FailedScheduling"]
    assert event["type"] == "Warning" and event["message"] == result.message
    assert event["message"].startswith("0/1 nodes are available: 1 ")
    assert event["involvedObject"]["uid"] == pod["metadata"]["uid"]
    assert sched.queue.where(pod["metadata"]["uid"]) == "unschedulable"
    [condition] = client.get(PODS, "gpu-job")["status"]["conditions"]
    assert condition == {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                         "message": result.message, "lastProbeTime": None, "lastTransitionTime": "2023-11-14T22:13:20Z"}
    clock.now += 30
    assert drain(sched) == []  # nothing changed: it stays parked
    add_nodes(client, "gpu-1", labels={"pool": "gpu"})
    [result] = drain(sched)
    assert (result.outcome, result.node) == ("scheduled", "gpu-1")
    [condition] = client.get(PODS, "gpu-job")["status"]["conditions"]
    assert (condition["type"], condition["status"]) == ("PodScheduled", "True")  # set by the Binding


def test_the_unschedulable_condition_is_written_only_when_it_changes():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(client, "a")
    add_pods(client, ["big"], cpus=64)
    sched = make(client, clock)
    writes = lambda: sum(1 for verb, _, _ in client.requests if verb == "set_pod_condition")  # noqa: E731
    drain(sched)
    assert writes() == 1
    clock.now += 30
    client.patch(NODES, "a", {"metadata": {"labels": {"touched": "yes"}}})  # a retry with the same message
    assert [r.outcome for r in drain(sched)] == ["unschedulable"]
    assert writes() == 1
    clock.now += 30
    client.fail_next("set_pod_condition", PODS, ServerError("etcd timeout"))
    client.create(NODES, node_obj("b"))  # no report yet: a new message, and its write is refused
    assert [r.outcome for r in drain(sched)] == ["unschedulable"]  # the refusal changes nothing else
    assert writes() == 2


def test_a_pod_bound_elsewhere_meanwhile_is_dropped_and_its_cpus_given_back():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(client, "a")
    [pod] = add_pods(client, ["p"])
    sched = make(client, clock)
    sched.pump()
    sched.pump()
    # another scheduler binds it before our Binding goes out (our watch has not shown it yet)
    client.create(NODES, node_obj("elsewhere"))
    client.bind("default", "p", "elsewhere")
    result = sched.step()
    assert (result.outcome, result.node) == ("conflict", "elsewhere")
    assert sched.scheduler.cluster.nodes["a"].pods == {}  # the reservation on a was given back
    assert len(sched.queue) == 0 and bind_calls(client, "p") == 2  # theirs, and our one refused try
    drain(sched)
    assert sched.scheduler.cluster.pod_node[pod["metadata"]["uid"]] == "elsewhere"


class WatchesBeforeBinding:
    """A client that lets the scheduler's watch run just before each Binding, as its reflector thread may."""

    def __init__(self, client: MemoryClient) -> None:
        self.client = client
        self.sched: StandaloneScheduler | None = None

    def __getattr__(self, name):
        return getattr(self.client, name)

    def bind(self, namespace, name, node, *, uid=None, annotations=None):
        self.sched.pump()
        self.client.bind(namespace, name, node, uid=uid, annotations=annotations)


def test_giving_back_never_removes_the_pod_the_watch_already_placed_elsewhere():
    memory, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(memory, "a", "elsewhere")
    [pod] = add_pods(memory, ["p"])
    uid = pod["metadata"]["uid"]
    client = WatchesBeforeBinding(memory)
    sched = client.sched = make(client, clock)
    sched.pump()
    sched.pump()
    node = sched.scheduler.explain(sched.sync.pending()[0])["selected"]
    other = "a" if node == "elsewhere" else "elsewhere"
    memory.bind("default", "p", other)
    result = sched.step()
    assert (result.outcome, result.node) == ("conflict", other)
    assert sched.scheduler.cluster.pod_node[uid] == other  # the bound pod stays in the ledger
    assert uid not in sched.scheduler.cluster.nodes[node].pods


def test_a_server_error_on_bind_backs_off_then_binds_once():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(client, "a")
    [pod] = add_pods(client, ["p"])
    uid = pod["metadata"]["uid"]
    sched = make(client, clock)
    client.fail_next("bind", PODS, ServerError("etcd leader changed"))
    [result] = drain(sched)
    assert result.outcome == "error"
    assert uid not in sched.scheduler.cluster.pod_node  # given back while it waits
    assert sched.queue.where(uid) == "backoff"
    clock.now += 1
    [result] = drain(sched)
    assert result.outcome == "scheduled"
    assert pods(client)["p"]["spec"]["nodeName"] == "a"
    assert bind_calls(client, "p") == 2  # the refused one and the one that bound


class LosesBindResponses:
    """A client whose Binding goes through but whose response is lost (a 500 after the commit)."""

    def __init__(self, client: MemoryClient, times: int = 1) -> None:
        self.client = client
        self.times = times

    def __getattr__(self, name):
        return getattr(self.client, name)

    def bind(self, namespace, name, node, *, uid=None, annotations=None):
        self.client.bind(namespace, name, node, uid=uid, annotations=annotations)
        if self.times:
            self.times -= 1
            raise ServerError("the connection was reset")


def test_a_lost_bind_response_is_read_back_and_never_bound_twice():
    memory, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(memory, "a")
    [pod] = add_pods(memory, ["p"])
    sched = make(LosesBindResponses(memory), clock)
    [result] = drain(sched)
    assert (result.outcome, result.node) == ("scheduled", "a")
    assert bind_calls(memory, "p") == 1
    assert not sched.scheduler.cluster.nodes["a"].pods[pod["metadata"]["uid"]].assumed


def test_when_even_the_read_back_fails_the_reservation_is_kept_until_it_is_known():
    memory, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(memory, "a")
    add_pods(memory, ["p"])
    [q] = add_pods(memory, ["q"])
    sched = make(LosesBindResponses(memory), clock)
    sched.pump()
    sched.pump()
    memory.fail_next("get", PODS, ServerError("apiserver overloaded"))
    first = sched.step()
    assert first.outcome == "error" and "unknown" in first.message
    name = first.pod.split("/")[1]
    uid = pods(memory)[name]["metadata"]["uid"]
    assert sched.scheduler.cluster.pod_node[uid] == "a"  # still reserved: it may be bound
    # the other pod is placed meanwhile, on CPUs the uncertain pod does not hold
    other = sched.step()
    assert other.outcome == "scheduled"
    clock.now += 1
    again = sched.step()
    assert (again.pod, again.outcome) == (first.pod, "scheduled")
    assert bind_calls(memory, name) == 1
    sched.pump()
    assert_no_cpu_twice(memory)


class DropsWatches:
    """A client whose pod watches end after ``after`` events, as a dropped connection does."""

    def __init__(self, client: MemoryClient, after: int) -> None:
        self.client = client
        self.after = after

    def __getattr__(self, name):
        return getattr(self.client, name)

    def watch(self, kind, **kw):
        stream = self.client.watch(kind, **kw)
        if kind != PODS:
            return stream
        return (event for _, event in zip(range(self.after), stream))


def test_a_watch_that_drops_mid_stream_or_expires_loses_no_pod():
    memory, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(memory, "a", "b")
    sched = make(DropsWatches(memory, after=1), clock)
    sched.pump()
    add_pods(memory, ["p1", "p2", "p3"])
    sched.pump()  # the stream drops after p1
    assert sched.queue.uids() == {pods(memory)["p1"]["metadata"]["uid"]}
    sched.pump()  # resumes after p1: p2
    sched.pump()  # p3
    assert len(sched.queue) == 3
    add_pods(memory, ["p4"])
    memory.delete(PODS, "p2")
    memory.compact()  # those changes are out of the history: the next watch is 410 and the reflector lists again
    results = drain(sched)
    assert sorted(r.pod for r in results) == ["default/p1", "default/p3", "default/p4"]
    assert {r.outcome for r in results} == {"scheduled"}
    assert sched.reflectors[2].lists == 2
    assert_no_cpu_twice(memory)


def test_a_restarted_scheduler_rebuilds_the_ledger_before_placing_anything():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(client, "a", "b")
    add_pods(client, [f"old-{i}" for i in range(5)])
    first = make(client, clock)
    assert {r.outcome for r in drain(first)} == {"scheduled"}
    # the process restarts: a fresh scheduler with an empty ledger
    add_pods(client, [f"new-{i}" for i in range(6)])
    second = make(client, clock, identity="r1-restarted")
    results = drain(second)
    assert sorted(r.pod for r in results) == [f"default/new-{i}" for i in range(6)]
    assert {r.outcome for r in results} == {"scheduled"}
    assert_no_cpu_twice(client)


def elected(client, clock, identity) -> StandaloneScheduler:
    elector = LeaderElector(client, name="toposched", namespace="kube-system", identity=identity, clock=clock)
    return make(client, clock, identity=identity, elector=elector)


def bindings_per_pod(client) -> dict[str, int]:
    """How many times each pod went from unbound to bound, from the API server's change history."""
    counts: dict[str, int] = {}
    last: dict[str, str] = {}
    for kind, event in client.events:
        if kind != PODS:
            continue
        name, node = event.object["metadata"]["name"], event.object["spec"].get("nodeName") or ""
        if node and not last.get(name):
            counts[name] = counts.get(name, 0) + 1
        last[name] = node
    return counts


def test_two_replicas_with_leader_election_bind_each_pod_exactly_once():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(client, "a", "b")
    add_pods(client, [f"p{i}" for i in range(4)])
    one, two = elected(client, clock, "one"), elected(client, clock, "two")
    for _ in range(6):  # both replicas run side by side; only the leader binds
        for replica in (one, two):
            for _ in drain(replica):
                assert replica is one
        clock.now += 1
    assert one.leading and not two.leading
    assert all(p["spec"].get("nodeName") for p in pods(client).values())
    # more work arrives; "two" watches it but "one" dies before a last pod's binding reaches two's watch
    add_pods(client, [f"q{i}" for i in range(4)])
    two.pump()
    one.pump()
    assert one.step().outcome == "scheduled"  # one binds a q pod that two still sees pending ...
    for _ in range(12):  # ... and then stops; two takes the lease once it expires, without pumping
        clock.now += 2
        for result in iter(two.step, None):
            assert result.outcome in ("scheduled", "gone")
    assert two.leading
    drain(two)
    assert all(p["spec"].get("nodeName") for p in pods(client).values())
    assert set(bindings_per_pod(client).values()) == {1}
    assert all(bind_calls(client, name) == 1 for name in pods(client))  # no replica ever tried twice
    assert_no_cpu_twice(client)
    lease = client.get(LEASES, "toposched", namespace="kube-system")["spec"]
    assert lease["holderIdentity"] == "two" and lease["leaseTransitions"] == 1


def test_a_released_lease_hands_over_at_once():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(client, "a")
    one, two = elected(client, clock, "one"), elected(client, clock, "two")
    drain(one)
    drain(two)
    assert one.leading and not two.leading
    one.elector.release()
    add_pods(client, ["p"])
    clock.now += 2  # two's next election try
    [result] = drain(two)
    assert result.outcome == "scheduled"
    assert one.step() is None


def test_runs_end_to_end_over_http_and_stops_gracefully(fake_server, http_client):
    store = fake_server.store
    add_nodes(store, "a", "b")
    names = [f"web-{i}" for i in range(5)]
    add_pods(store, names)
    elector = LeaderElector(http_client, name="toposched", namespace="kube-system", identity="http-1",
                            clock=time.time)
    sched = StandaloneScheduler(http_client, Scheduler(Cluster(), load_profile("toposched")), clock=time.time,
                                sleep=lambda seconds: time.sleep(min(seconds, 0.05)), identity="http-1",
                                elector=elector)
    stop = threading.Event()
    thread = threading.Thread(target=sched.run, args=(stop,), kwargs={"poll": 0.05, "watch_timeout": 1.0})
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not all(pods(store)[n]["spec"].get("nodeName") for n in names):
            if time.monotonic() > deadline or not thread.is_alive():
                pytest.fail("the scheduler did not bind the pods")
            time.sleep(0.02)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert_no_cpu_twice(store)
    scheduled = [e for e in store.list(EVENTS).items if e["reason"] == "Scheduled"]
    assert sorted(e["involvedObject"]["name"] for e in scheduled) == names
    assert store.get(LEASES, "toposched", namespace="kube-system")["spec"]["holderIdentity"] == ""  # released


def test_a_pod_deleted_while_its_binding_is_uncertain_gives_its_reservation_back():
    memory, clock = MemoryClient(clock=lambda: T0), Clock()
    add_nodes(memory, "a")
    [pod] = add_pods(memory, ["p"])
    uid = pod["metadata"]["uid"]
    sched = make(memory, clock)
    sched.pump()
    sched.pump()
    memory.fail_next("bind", PODS, ServerError("timeout"))  # in truth it never arrived
    memory.fail_next("get", PODS, ServerError("apiserver overloaded"))
    assert sched.step().outcome == "error"
    assert sched.scheduler.cluster.pod_node[uid] == "a"
    memory.delete(PODS, "p")
    sched.pump()
    assert uid not in sched.scheduler.cluster.pod_node and len(sched.queue) == 0


class BindsTogether:
    """A client whose Bindings each wait until ``together`` of them are in flight at once."""

    def __init__(self, client: MemoryClient, together: int) -> None:
        self.client = client
        self.barrier = threading.Barrier(together, timeout=20)

    def __getattr__(self, name):
        return getattr(self.client, name)

    def bind(self, namespace, name, node, *, uid=None, annotations=None):
        self.barrier.wait()
        self.client.bind(namespace, name, node, uid=uid, annotations=annotations)


def test_run_binds_from_a_pool_while_it_schedules_the_next_pods():
    """kube-scheduler's binding cycle runs apart from its scheduling cycle; so do ours in run(): here four
    Bindings can only go through together, which a loop binding one pod at a time would never reach."""
    store = MemoryClient(clock=time.time)
    add_nodes(store, "a", "b")
    names = [f"web-{i}" for i in range(4)]
    add_pods(store, names)
    client = BindsTogether(store, together=4)
    sched = StandaloneScheduler(client, Scheduler(Cluster(), load_profile("toposched")), clock=time.time,
                                sleep=lambda seconds: time.sleep(min(seconds, 0.05)), identity="r1", bind_workers=4)
    stop = threading.Event()
    thread = threading.Thread(target=sched.run, args=(stop,), kwargs={"poll": 0.05, "watch_timeout": 0.2})
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not all(pods(store)[n]["spec"].get("nodeName") for n in names):
            if time.monotonic() > deadline or not thread.is_alive():
                pytest.fail("the scheduler did not bind the pods")
            time.sleep(0.02)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive() and not client.barrier.broken
    assert_no_cpu_twice(store)
    assert {e["involvedObject"]["name"] for e in store.list(EVENTS).items if e["reason"] == "Scheduled"} == set(names)


def test_bind_workers_must_be_positive():
    with pytest.raises(ValueError):
        StandaloneScheduler(MemoryClient(), Scheduler(Cluster(), load_profile("toposched")), clock=time.time,
                            sleep=time.sleep, identity="r1", bind_workers=0)
