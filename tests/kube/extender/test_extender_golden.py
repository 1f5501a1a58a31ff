"""Golden exchanges with the extender over HTTP, in the exact wire shape kube-scheduler uses.

The requests in golden/ are what kube-scheduler's HTTPExtender sends (kubernetes/kubernetes,
pkg/scheduler/extender.go: ``ExtenderArgs`` with ``NodeNames`` when ``nodeCacheCapable``, else
``Nodes``; ``ExtenderBindingArgs``; ``ExtenderPreemptionArgs`` with ``NodeNameToMetaVictims`` or
``NodeNameToVictims``), with the types of staging/src/k8s.io/kube-scheduler/extender/v1/types.go
encoded by Go's encoding/json (no json tags: PascalCase keys; nil pointers as null). The answers
are compared whole, and what they mean is checked against the scenario (tests/kube/extender/scenario.py).
"""

import json
from pathlib import Path

import pytest

from tests.kube.extender.scenario import build, uid
from toposched.scheduler.placement import PLACEMENT_ANNOTATION, Placement

GOLDEN = Path(__file__).parent / "golden"


def golden(name: str) -> tuple[dict, object]:
    request = json.loads((GOLDEN / f"{name}.request.json").read_text())
    response = json.loads((GOLDEN / f"{name}.response.json").read_text())
    return request, response


def exchange(world, verb: str, name: str) -> object:
    request, expected = golden(name)
    answer = world.post(verb, request)
    assert answer == expected
    return answer


def test_filter_with_node_names_answers_names_and_classifies_every_other_node():
    world = build()
    request, _ = golden("filter-node-names")
    assert request["Nodes"] is None
    assert request["Pod"]["spec"]["aFieldFromAFutureKubernetes"]  # unknown fields ride along
    answer = exchange(world, "filter", "filter-node-names")
    assert answer["NodeNames"] == ["a", "f"] and answer["Nodes"] is None
    assert set(answer["FailedNodes"]) == {"b", "d"}  # b: no NUMA node has 4 CPUs left; d: unknown here
    assert answer["FailedAndUnresolvableNodes"] == {"c": "node(s) were unschedulable"}
    # the exact placement is reserved on toposched's best node (f packs tighter than a)
    reservation = world.service.reservation(uid(1))
    assert reservation.node == "f" and world.cluster.pod_node[uid(1)] == "f"


def test_filter_with_nodes_and_null_node_names_echoes_the_node_objects_untouched():
    world = build()
    request, _ = golden("filter-nodes")
    answer = exchange(world, "filter", "filter-nodes")
    assert answer["NodeNames"] is None
    given = {n["metadata"]["name"]: n for n in request["Nodes"]["items"]}
    assert answer["Nodes"]["items"] == [given["a"], given["f"]]  # unknown fields included
    assert answer["Nodes"]["metadata"] == request["Nodes"]["metadata"]


def test_prioritize_gives_the_best_node_ten_in_both_forms():
    world = build()
    exchange(world, "filter", "filter-node-names")
    answer = exchange(world, "prioritize", "prioritize-node-names")
    assert max(h["Score"] for h in answer) == 10
    assert all(0 <= h["Score"] <= 10 and isinstance(h["Score"], int) for h in answer)
    world = build()
    exchange(world, "prioritize", "prioritize-nodes")  # no filter before it: prioritize decides (and reserves)
    assert world.service.reservation(uid(1)).node == "f"


def test_bind_writes_the_binding_with_the_reserved_placement():
    world = build()
    exchange(world, "filter", "filter-node-names")
    reserved = world.service.reservation(uid(1)).placement
    exchange(world, "bind", "bind")
    pod = world.pod("web-0")
    assert pod["spec"]["nodeName"] == "f"
    placement = Placement.from_annotation(pod["metadata"]["annotations"][PLACEMENT_ANNOTATION])
    assert placement.node == "f" and placement.cpuset == reserved.cpuset
    verbs = [(verb, name) for verb, _, name in world.client.requests if name == "web-0" and verb != "create"]
    assert verbs == [("bind", "web-0"), ("get", "web-0")]  # the get: this test reading it
    entry = world.cluster.nodes["f"].pods[uid(1)]
    assert not entry.assumed and world.service.reservation(uid(1)) is None


def test_a_pod_that_fits_nowhere_gets_an_empty_list_not_null():
    world = build()
    answer = exchange(world, "filter", "filter-fits-nowhere")
    assert answer["NodeNames"] == [] and answer["FailedAndUnresolvableNodes"] == {}
    assert world.service.reservation(uid(3)) is None and uid(3) not in world.cluster.pod_node


def test_a_malformed_annotation_fails_every_node_as_unresolvable_and_other_pods_keep_working():
    world = build()
    answer = exchange(world, "filter", "filter-bad-annotation")
    assert set(answer["FailedAndUnresolvableNodes"]) == {"a", "b", "f"}
    assert all("toposched.io/numa-policy" in m for m in answer["FailedAndUnresolvableNodes"].values())
    exchange(world, "filter", "filter-node-names")


@pytest.mark.parametrize("name", ["preempt-meta-victims", "preempt-victims"])
def test_preempt_keeps_only_nodes_where_evicting_the_victims_makes_room_on_one_numa_node(name):
    world = build()
    before = {n: world.cluster.nodes[n].model.state() for n in ("b", "g")}
    answer = exchange(world, "preempt", name)
    # b: evicting the 4-CPU pod frees NUMA node 0; g: two 1-CPU pods free 5 CPUs but at most 3 on one NUMA node
    assert list(answer["NodeNameToMetaVictims"]) == ["b"]
    assert {n: world.cluster.nodes[n].model.state() for n in ("b", "g")} == before  # asked of a scratch replica


def test_a_refusal_that_preemption_cannot_cure_is_unresolvable_and_names_both_policies():
    world = build()
    answer = exchange(world, "filter", "filter-policy-conflict")
    # h's kubelet runs best-effort; the pod demands single-numa-node: no eviction can change that
    assert list(answer["FailedAndUnresolvableNodes"]) == ["h"] and answer["NodeNames"] == ["a", "b"]
    # the batch verdict's own text for a policy conflict, not the one of nodes short of room on one NUMA node
    assert answer["FailedAndUnresolvableNodes"]["h"] == (
        "node(s) NUMA Topology policy not match: the pod asks for single-numa-node (toposched.io/numa-policy), "
        "the node enforces best-effort")


def test_unresolvable_nodes_come_from_the_batch_verdicts_without_a_per_node_pass(monkeypatch):
    world = build()

    def no_per_node_pass(*args, **kwargs):
        raise AssertionError("the extender ran the per-node filter chain")

    monkeypatch.setattr(world.scheduler.runner, "filter_node", no_per_node_pass)
    answer = exchange(world, "filter", "filter-policy-conflict")  # h: the pod's NUMA policy conflicts with its kubelet's
    assert list(answer["FailedAndUnresolvableNodes"]) == ["h"]
    world = build()
    monkeypatch.setattr(world.scheduler.runner, "filter_node", no_per_node_pass)
    answer = exchange(world, "filter", "filter-node-names")  # c: cordoned; b: no NUMA node has room (resolvable)
    assert answer["FailedAndUnresolvableNodes"] == {"c": "node(s) were unschedulable"}
    assert set(answer["FailedNodes"]) == {"b", "d"}
