"""The extender's verbs: only given nodes, scores 0..10, reservations that expire, readiness, the prefix.

Scores: kube-scheduler multiplies an extender's 0..MaxExtenderPriority (10) score by the
extender's weight and by MaxNodeScore / MaxExtenderPriority = 10 (pkg/scheduler/schedule_one.go
``prioritizeNodes``), so toposched answers integers 0..10 with 10 for its best node, scaled as
upstream's DefaultNormalizeScore (score * max / highest; pkg/scheduler/framework/plugins/helper/
normalize_score.go).
"""

import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kube.extender.scenario import TTL, build, node_object, uid
from toposched.kube.extender import ExtenderArgs, ExtenderPreemptionArgs, create_app, scale_scores
from toposched.kube.extender.app import NOT_READY
from toposched.kube.extender.restricted import NOT_IN_VIEW
from toposched.kube.ops import Metrics, Registry
from toposched.scheduler import NodeSpec


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=5), st.integers(-50, 10_000), max_size=12))
def test_scaled_scores_are_0_to_10_best_is_10_and_order_is_kept(totals):
    scores = scale_scores(totals)
    assert set(scores) == set(totals)
    if totals:
        best = max(totals.values())
        assert all(scores[n] == 10 for n, t in totals.items() if t == best)
        assert all(0 <= s <= 10 for s in scores.values())
        for a in totals:
            for b in totals:
                if totals[a] <= totals[b]:
                    assert scores[a] <= scores[b]


def test_scaling_is_upstreams_default_normalize_score():
    assert scale_scores({"a": 514, "f": 523}) == {"a": 9, "f": 10}  # 10 * 514 // 523
    assert scale_scores({"a": 0, "b": 0}) == {"a": 10, "b": 10}
    assert scale_scores({"a": 100, "b": 0}) == {"a": 10, "b": 0}


POOL = ["a", "b", "c", "d", "f", "g", "h", "zz"]


@pytest.fixture(scope="module")
def shared_world():
    """One world for many examples: each example gives its reservation back."""
    return build()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nodes=st.lists(st.sampled_from(POOL), max_size=9), as_objects=st.booleans(),
       pod=st.sampled_from(["web-0", "wide-0", "small-0", "pinned-0"]))
def test_filter_answers_for_exactly_the_given_nodes(shared_world, nodes, as_objects, pod):
    world = shared_world
    body = {"Pod": world.request_pod(pod), "Nodes": None, "NodeNames": nodes}
    if as_objects:
        body = {"Pod": body["Pod"], "Nodes": {"items": [node_object(n) for n in nodes]}, "NodeNames": None}
    answer = world.post("filter", body)
    passing = answer["NodeNames"] if not as_objects else [n["metadata"]["name"] for n in answer["Nodes"]["items"]]
    assert (answer["Nodes"] is None) != as_objects and (answer["NodeNames"] is None) == as_objects
    failed, unresolvable = set(answer["FailedNodes"]), set(answer["FailedAndUnresolvableNodes"])
    assert len(passing) == len(set(passing))
    assert set(passing) | failed | unresolvable == set(nodes)
    assert not (set(passing) & failed) and not (set(passing) & unresolvable) and not (failed & unresolvable)
    assert answer["Error"] == ""
    prioritized = world.post("prioritize", {"Pod": body["Pod"], "Nodes": None, "NodeNames": nodes})
    assert [h["Host"] for h in prioritized] == list(dict.fromkeys(nodes))
    assert all(h["Score"] == 0 for h in prioritized if h["Host"] not in passing)
    if passing:
        assert max(h["Score"] for h in prioritized) == 10
    pod_uid = body["Pod"]["metadata"]["uid"]
    reservation = world.service.reservation(pod_uid)
    assert (reservation is not None) == bool(passing)
    if reservation is not None:
        assert reservation.node in passing
        world.service._drop(pod_uid)


def test_unknown_nodes_fail_as_resolvable_and_cordoned_ones_as_unresolvable():
    world = build()
    answer = world.post("filter", {"Pod": world.request_pod("small-0"), "Nodes": None, "NodeNames": ["zz", "c"]})
    assert answer == {"Nodes": None, "NodeNames": [], "FailedNodes": {"zz": NOT_IN_VIEW},
                      "FailedAndUnresolvableNodes": {"c": "node(s) were unschedulable"}, "Error": ""}


def test_an_unclaimed_reservation_expires_and_gives_back_exactly_what_it_took():
    world = build()
    before = world.cluster.nodes["f"].model.state()
    world.post("filter", {"Pod": world.request_pod("web-0"), "Nodes": None, "NodeNames": ["a", "f"]})
    assert world.cluster.pod_node[uid(1)] == "f"
    world.clock.now += TTL - 1
    assert world.service.expire() == []
    world.clock.now += 1
    assert world.service.expire() == ["default/web-0"]
    assert uid(1) not in world.cluster.pod_node and world.cluster.nodes["f"].model.state() == before


def test_filtering_a_pod_again_replaces_its_reservation():
    world = build()
    for nodes in (["a", "f"], ["a"], ["a", "f"]):
        world.post("filter", {"Pod": world.request_pod("web-0"), "Nodes": None, "NodeNames": nodes})
    assert world.cluster.pod_node[uid(1)] == "f"
    assert world.cluster.nodes["a"].requested == {}


def test_prioritize_reuses_the_filter_totals_and_a_pod_it_cannot_read_scores_zero():
    world = build()
    world.post("filter", {"Pod": world.request_pod("web-0"), "Nodes": None, "NodeNames": ["a", "f"]})
    reserved = world.service.reservation(uid(1)).placement
    scores = world.post("prioritize", {"Pod": world.request_pod("web-0"), "Nodes": None, "NodeNames": ["f", "a"]})
    assert scores == [{"Host": "f", "Score": 10}, {"Host": "a", "Score": 9}]
    assert world.service.reservation(uid(1)).placement == reserved  # not decided again
    bad = world.request_pod("small-0")
    bad["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "lots"
    assert world.post("prioritize", {"Pod": bad, "NodeNames": ["a", "f"]}) == [
        {"Host": "a", "Score": 0}, {"Host": "f", "Score": 0}]
    answer = world.post("filter", {"Pod": bad, "NodeNames": ["a"]})
    assert "spec.containers[0].resources.limits.cpu" in answer["FailedAndUnresolvableNodes"]["a"]


def test_requests_that_cannot_be_read_are_answered_as_kube_scheduler_can_show_them():
    world = build()
    answer = world.post("filter", {"NodeNames": ["a"]})
    assert answer["Error"].startswith("extender request: Pod:") and answer["NodeNames"] is None
    answer = world.post("filter", {"Pod": world.request_pod("web-0"), "NodeNames": "a"})
    assert answer["Error"].startswith("cannot read the ExtenderArgs: NodeNames")
    assert world.http.post("/prioritize", content=b"{not json").status_code == 400
    assert world.post("bind", {"PodName": "web-0"})["Error"] == "bind needs PodName, PodNamespace and Node"
    assert world.post("preempt", {"NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "x"}]}}}) == {
        "NodeNameToMetaVictims": {}}


def test_nothing_is_decided_before_the_cluster_view_is_synced():
    world = build()
    world.ready[0] = False
    assert world.http.get("/healthz").status_code == 200
    assert world.http.get("/readyz").status_code == 503
    assert world.post("filter", {"Pod": world.request_pod("web-0"), "NodeNames": ["a"]})["Error"] == NOT_READY
    assert world.post("bind", {"PodName": "web-0", "PodNamespace": "default", "Node": "a"})["Error"] == NOT_READY
    body = {"Pod": world.request_pod("web-0"), "NodeNames": ["a"]}
    assert world.http.post("/prioritize", json=body).status_code == 503
    assert world.http.post("/preempt", json={"Pod": body["Pod"]}).status_code == 503
    assert uid(1) not in world.cluster.pod_node  # nothing reserved
    world.ready[0] = True
    assert world.http.get("/readyz").text == "ok"


def test_verbs_live_under_the_url_prefix():
    world = build(url_prefix="/toposched/")
    body = {"Pod": world.request_pod("web-0"), "Nodes": None, "NodeNames": ["a"]}
    assert world.http.post("/toposched/filter", json=body).json()["NodeNames"] == ["a"]
    assert world.http.post("/filter", json=body).status_code == 404
    assert world.http.get("/healthz").status_code == 200
    app = create_app(world.service, ready=lambda: True, url_prefix="")
    assert TestClient(app).post("/filter", json=body).status_code == 200


def test_preempt_drops_nodes_without_victims_or_unknown_and_keeps_nodes_without_topology_data():
    world = build()
    world.cluster.set_node(NodeSpec.from_dict(node_object("plain")))  # no machine, no report
    args = ExtenderPreemptionArgs.model_validate({"Pod": world.request_pod("web-1"), "NodeNameToMetaVictims": {
        "a": {"Pods": [], "NumPDBViolations": 0},
        "zz": {"Pods": [{"UID": "u"}]},
        "plain": {"Pods": [{"UID": "u2"}], "NumPDBViolations": 1},
    }})
    result = world.service.preempt(args)
    assert json.loads(result.model_dump_json(by_alias=True)) == {
        "NodeNameToMetaVictims": {"plain": {"Pods": [{"UID": "u2"}], "NumPDBViolations": 1}}}


def test_the_service_takes_the_request_form_it_is_given():
    world = build()
    args = ExtenderArgs.model_validate({"Pod": world.request_pod("web-0"), "NodeNames": ["f", "a", "f"]})
    result = world.service.filter(args)
    assert result.node_names == ["f", "a"] and result.nodes is None


def test_nodes_without_names_cannot_be_answered_for():
    world = build()
    body = {"Pod": world.request_pod("web-0"), "Nodes": {"items": [{"metadata": {}}]}, "NodeNames": None}
    assert world.post("filter", body)["Error"] == "extender request: Nodes.items[0].metadata.name: a node has no name"
    assert world.post("prioritize", body) == []


def test_refusal_codes_kept_for_a_pod_shape_follow_node_changes():
    world = build()
    names = {"Nodes": None, "NodeNames": ["b"]}
    assert set(world.post("filter", {"Pod": world.request_pod("web-0"), **names})["FailedNodes"]) == {"b"}
    world.cluster.set_node(NodeSpec.from_dict(node_object("b", unschedulable=True)))
    answer = world.post("filter", {"Pod": world.request_pod("web-1"), **names})  # same shape as web-0
    assert answer["FailedAndUnresolvableNodes"] == {"b": "node(s) were unschedulable"}
    world.cluster.set_node(NodeSpec.from_dict(node_object("b")))
    assert set(world.post("filter", {"Pod": world.request_pod("web-1"), **names})["FailedNodes"]) == {"b"}


def test_calls_are_counted_by_verb_and_http_code_and_timed_by_the_service_clock():
    world = build()
    metrics = Metrics.register(Registry())
    http = TestClient(create_app(world.service, ready=lambda: world.ready[0], metrics=metrics))
    body = {"Pod": world.request_pod("web-0"), "NodeNames": ["a"]}
    assert http.post("/filter", json=body).status_code == 200
    world.ready[0] = False
    assert http.post("/prioritize", json=body).status_code == 503
    assert metrics.extender_requests.labels(verb="filter", code="200").value == 1
    assert metrics.extender_requests.labels(verb="prioritize", code="503").value == 1
    samples = {(name, labels): value for name, labels, value in metrics.extender_request_duration.samples()}
    assert samples[("toposched_extender_request_duration_seconds_count", (("verb", "filter"),))] == 1
    assert samples[("toposched_extender_request_duration_seconds_sum", (("verb", "filter"),))] == 0.0  # hand clock
