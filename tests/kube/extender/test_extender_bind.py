"""Bind through the extender: idempotent retries, expired reservations, API refusals (409, 500) and retries.

kube-scheduler binds through the extender (pkg/scheduler/schedule_one.go ``extendersBinding``)
and, when a bind fails or times out, puts the pod back in its queue and runs a whole new cycle
(filter, prioritize, bind) later; it checks whether the pod already has ``spec.nodeName`` first,
because "the pod may have been bound successfully, but timed out returning its response".
"""

import threading

from tests.kube.extender.scenario import TTL, build, node_object, pod_object, uid
from toposched.kube.client import PODS, Conflict, ServerError
from toposched.kube.extender import ExtenderBindingArgs, ExtenderService
from toposched.scheduler import NodeSpec
from toposched.scheduler.placement import PLACEMENT_ANNOTATION


def filter_(world, name, nodes=("a", "b", "f")):
    return world.post("filter", {"Pod": world.request_pod(name), "Nodes": None, "NodeNames": list(nodes)})


def bind(world, name, node, pod_uid):
    return world.post("bind", {"PodName": name, "PodNamespace": "default", "PodUID": pod_uid, "Node": node})


def bindings(world, name="web-0"):
    return [verb for verb, _, n in world.client.requests if n == name and verb in ("patch", "bind")]


def cpus_held(world, node):
    """Every exclusive CPU the cluster's ledger gives out on ``node``, one entry per pod (so repeats show)."""
    out = []
    for entry in world.cluster.nodes[node].pods.values():
        out.extend(entry.placement.cpuset)
    return out


def test_binding_twice_succeeds_twice_and_binds_once():
    world = build()
    filter_(world, "web-0")
    assert bind(world, "web-0", "f", uid(1)) == {"Error": ""}
    assert bind(world, "web-0", "f", uid(1)) == {"Error": ""}
    assert bindings(world) == ["bind"]  # one Binding, carrying the placement annotation
    assert world.cluster.nodes["f"].requested["cpu"] == 6000  # the 2-CPU pod already there, and this one once
    # the same pod to another node is refused: it is bound already
    assert "already bound to node f" in bind(world, "web-0", "a", uid(1))["Error"]
    # and a new cycle for it (a retry after a lost answer) only offers its node
    answer = filter_(world, "web-0")
    assert answer["NodeNames"] == ["f"] and set(answer["FailedAndUnresolvableNodes"]) == {"a", "b"}


def test_a_bind_after_the_reservation_expired_decides_again_without_double_allocation():
    world = build()
    filter_(world, "web-0")
    first = world.service.reservation(uid(1)).placement.cpuset
    world.clock.now += TTL + 1
    filter_(world, "web-1")  # any call expires old reservations first; web-1 now gets the CPUs web-0 had
    assert world.service.reservation(uid(1)) is None
    assert world.service.reservation(uid(2)).placement.cpuset == first
    assert bind(world, "web-0", "f", uid(1)) == {"Error": ""}  # read from the API server, decided on f alone
    held = cpus_held(world, "f")
    assert len(held) == len(set(held)) == 2 + 4 + 4
    annotated = world.pod("web-0")["metadata"]["annotations"][PLACEMENT_ANNOTATION]
    assert world.cluster.nodes["f"].pods[uid(1)].placement.to_annotation() == annotated


def test_a_bind_after_expiry_to_a_node_that_no_longer_fits_fails_cleanly():
    world = build()
    filter_(world, "web-0")
    world.clock.now += TTL + 1
    world.cluster.set_node(NodeSpec.from_dict(node_object("f", unschedulable=True)))  # f was cordoned meanwhile
    answer = bind(world, "web-0", "f", uid(1))
    assert answer["Error"] == "node f cannot take pod default/web-0: node(s) were unschedulable"
    assert bindings(world) == [] and uid(1) not in world.cluster.pod_node
    assert world.service.reservation(uid(1)) is None


def test_bind_to_another_node_than_reserved_moves_the_reservation():
    world = build()
    filter_(world, "web-0")
    assert world.service.reservation(uid(1)).node == "f"
    assert bind(world, "web-0", "a", uid(1)) == {"Error": ""}
    assert world.pod("web-0")["spec"]["nodeName"] == "a"
    assert world.cluster.pod_node[uid(1)] == "a"
    assert world.cluster.nodes["f"].requested["cpu"] == 2000  # f keeps only the pod it had


def test_a_conflict_on_the_binding_gives_the_reservation_back_and_a_new_cycle_binds():
    world = build()
    filter_(world, "web-0")
    world.client.fail_next("bind", PODS, Conflict("Operation cannot be fulfilled on pods/binding"))
    answer = bind(world, "web-0", "f", uid(1))
    assert "409 Conflict" in answer["Error"]
    assert uid(1) not in world.cluster.pod_node and world.service.reservation(uid(1)) is None
    filter_(world, "web-0")
    assert bind(world, "web-0", "f", uid(1)) == {"Error": ""}
    assert world.pod("web-0")["spec"]["nodeName"] == "f"
    assert bindings(world) == ["bind", "bind"]


def test_a_conflict_because_an_earlier_bind_went_through_counts_as_success():
    world = build()
    filter_(world, "web-0")
    world.client.bind("default", "web-0", "f", uid=uid(1))  # the first attempt's answer was lost
    assert bind(world, "web-0", "f", uid(1)) == {"Error": ""}
    assert not world.cluster.nodes["f"].pods[uid(1)].assumed


def test_a_pod_bound_elsewhere_behind_our_back_is_an_error_and_frees_the_reservation():
    world = build()
    filter_(world, "web-0")
    world.client.bind("default", "web-0", "a", uid=uid(1))  # another scheduler got there first
    answer = bind(world, "web-0", "f", uid(1))
    assert "409" in answer["Error"]
    assert world.cluster.nodes["f"].requested["cpu"] == 2000


def test_a_server_error_then_the_retry_binds_once():
    world = build()
    filter_(world, "web-0")
    world.client.fail_next("bind", PODS, ServerError("etcdserver: request timed out"))
    answer = bind(world, "web-0", "f", uid(1))
    assert "500 InternalError" in answer["Error"]
    assert uid(1) not in world.cluster.pod_node
    world.client.fail_next("bind", PODS, ServerError("etcdserver: leader changed", code=503))
    filter_(world, "web-0")
    assert "503" in bind(world, "web-0", "f", uid(1))["Error"]
    filter_(world, "web-0")
    assert bind(world, "web-0", "f", uid(1)) == {"Error": ""}
    assert world.pod("web-0")["spec"]["nodeName"] == "f"
    held = cpus_held(world, "f")
    assert len(held) == len(set(held)) == 6


def test_bind_refuses_a_recreated_pod_and_works_without_a_prior_filter():
    world = build()
    assert "it was recreated" in bind(world, "web-0", "f", "some-older-uid")["Error"]
    assert bind(world, "web-1", "a", uid(2)) == {"Error": ""}  # no reservation: decided on a alone
    assert world.cluster.pod_node[uid(2)] == "a"


def test_bind_needs_a_client():
    world = build()
    service = ExtenderService(world.scheduler, clock=world.clock)
    result = service.bind(ExtenderBindingArgs(PodName="web-0", PodNamespace="default", PodUID=uid(1), Node="a"))
    assert result.error == "the extender has no API client to bind with"


def test_concurrent_cycles_never_give_a_cpu_twice():
    world = build(nodes=("a",))
    names = [f"job-{i}" for i in range(6)]
    for name in names:
        world.client.create(PODS, pod_object(name, 2), namespace="default")
    errors = []

    def cycle(name):
        obj = world.request_pod(name)
        got = world.post("filter", {"Pod": obj, "Nodes": None, "NodeNames": ["a"]})
        if got["NodeNames"] == ["a"]:
            errors.append(bind(world, name, "a", obj["metadata"]["uid"])["Error"])

    threads = [threading.Thread(target=cycle, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [""] * 6  # 6 x 2 CPUs on a node with 7 + 8 usable, 2 per NUMA node at a time
    held = cpus_held(world, "a")
    assert len(held) == len(set(held)) == 12


def test_a_network_failure_during_bind_gives_the_reservation_back(monkeypatch):
    world = build()
    filter_(world, "web-0")

    def unreachable(*args, **kwargs):
        raise ConnectionResetError("connection reset by peer")

    monkeypatch.setattr(world.client, "bind", unreachable)
    answer = bind(world, "web-0", "f", uid(1))
    assert "connection reset by peer" in answer["Error"]
    assert uid(1) not in world.cluster.pod_node and world.service.reservation(uid(1)) is None


def test_a_slow_bind_does_not_hold_up_other_pods_decisions():
    world = build()
    filter_(world, "web-0")
    entered, release = threading.Event(), threading.Event()
    real_bind = world.client.bind

    def slow_bind(*args, **kwargs):
        entered.set()
        release.wait(10)  # the API server takes its time answering this Binding
        return real_bind(*args, **kwargs)

    world.client.bind = slow_bind
    answers = {}
    binder = threading.Thread(target=lambda: answers.setdefault("bind", bind(world, "web-0", "f", uid(1))))
    binder.start()
    try:
        assert entered.wait(10)
        # meanwhile kube-scheduler filters the next pod: it gets an answer, and not web-0's CPUs
        other = filter_(world, "web-1")
        assert other["NodeNames"], other
        held = world.service.reservation(uid(1)).placement.cpuset
        assert held.isdisjoint(world.service.reservation(uid(2)).placement.cpuset)
    finally:
        release.set()
        binder.join(10)
    assert answers["bind"] == {"Error": ""}
