"""The controller: zone attributes from a ConfigMap or HTTP source merged into NodeResourceTopology objects.

The write path follows the real CRD (noderesourcetopology-api ``manifests/crd.yaml``, v1alpha2;
kept in ``../shared/data/k8s-objects/noderesourcetopology/``): ``zones`` and zone ``attributes``
have no ``x-kubernetes-list-type``, and apiextensions' ``JSONSchemaProps.XListType`` documents
"Defaults to atomic for arrays", so a writer owns the whole ``zones`` list. The publisher's side
is node-feature-discovery's ``pkg/nfd-topology-updater/nfd-topology-updater.go``
(``updateNodeResourceTopology``: get, set ``Zones`` wholesale, update) and our agent (apply of
the whole report with ``force``). The tests play the publisher with the same writes and check
that the controller keeps its attributes in, never loses the publisher's resources, and removes
only what it owns.
"""

from __future__ import annotations

import copy
import json
import logging
import threading

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.errors import InputError
from toposched.kube.client import CONFIGMAPS, NRTS, Conflict, NotFound, ServerError
from toposched.kube.controller import (
    OWNED_ANNOTATION,
    ConfigMapSource,
    Controller,
    HTTPSource,
    SourceUnavailable,
    keep_controller_attributes,
    merge_zone_attributes,
    parse_zone_attributes,
)
from toposched.kube.ops import Metrics, Registry
from toposched.topology.nrt import parse_nrt

CAP = "toposched.io/cpu-capacity"


def nrt(name: str, *, zone_attributes: dict[str, dict[str, str]] | None = None) -> dict:
    """An NRT as the agent (or NFD) publishes it: two NUMA zones with costs and resources."""
    zones = []
    for i in (0, 1):
        zone = {
            "name": f"node-{i}", "type": "Node",
            "costs": [{"name": "node-0", "value": 10 if i == 0 else 21},
                      {"name": "node-1", "value": 21 if i == 0 else 10}],
            "resources": [{"name": "cpu", "capacity": "16", "allocatable": "15", "available": "15"},
                          {"name": "memory", "capacity": "68719476736", "allocatable": "68719476736",
                           "available": "68719476736"}],
        }
        attrs = (zone_attributes or {}).get(zone["name"])
        if attrs:
            zone["attributes"] = [{"name": k, "value": v} for k, v in attrs.items()]
        zones.append(zone)
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": name}, "topologyPolicies": ["SingleNUMANodeContainerLevel"], "zones": zones,
            "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"},
                           {"name": "topologyManagerScope", "value": "container"}]}


def publish(client, obj: dict) -> dict:
    """The agent's write: server-side apply of the whole report, forced."""
    return client.apply(NRTS, obj, field_manager="toposched-agent", force=True)


def zone_attrs(obj: dict) -> dict[str, dict[str, str]]:
    return {z["name"]: {a["name"]: a["value"] for a in z.get("attributes", [])} for z in obj["zones"]}


def resources(obj: dict) -> dict[str, list]:
    return {z["name"]: (z.get("resources"), z.get("costs")) for z in obj["zones"]}


class StaticSource:
    """A source whose document the test sets (or makes fail)."""

    description = "test source"

    def __init__(self, document=None, error: Exception | None = None):
        self.document, self.error = document, error

    def read(self):
        if self.error is not None:
            raise self.error
        return parse_zone_attributes(self.document, source=self.description)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def controller_for(client, source, clock, **kw) -> Controller:
    return Controller(client, source, clock=clock, source_interval=30.0, sleep=lambda s: None, **kw)


# ---- the document -------------------------------------------------------------------------------


def test_document_is_read_with_string_values():
    doc = {"node-a": {"node-0": {CAP: "11500m", "example.com/rack": 7}, "node-1": {CAP: 11.5}},
           "node-b": None, "node-c": {"node-0": None}}
    assert parse_zone_attributes(doc, source="s") == {
        "node-a": {"node-0": {CAP: "11500m", "example.com/rack": "7"}, "node-1": {CAP: "11.5"}},
        "node-b": {}, "node-c": {"node-0": {}}}
    assert parse_zone_attributes({}, source="s") == {}


@pytest.mark.parametrize("doc, field, message", [
    (None, None, "empty; write {}"),
    (["node-a"], None, "not a mapping"),
    ({"Node_A": {}}, "Node_A", "not a node name"),
    ({"node-a": ["node-0"]}, "node-a", "zone names"),
    ({"node-a": {"": {}}}, "node-a.", "zone name"),
    ({"node-a": {"node-0": "12"}}, "node-a.node-0", "attribute names"),
    ({"node-a": {"node-0": {"bad name!": "x"}}}, "node-a.node-0.bad name!", "qualified name"),
    ({"node-a": {"node-0": {"a/b/c": "x"}}}, "node-a.node-0.a/b/c", "qualified name"),
    ({"node-a": {"node-0": {"x": True}}}, "node-a.node-0.x", "not a string"),
    ({"node-a": {"node-0": {"x": None}}}, "node-a.node-0.x", "not a string"),
    ({"node-a": {"node-0": {"x": float("inf")}}}, "node-a.node-0.x", "finite"),
    ({"node-a": {"node-0": {CAP: "lots"}}}, f"node-a.node-0.{CAP}", "not a number"),
    ({"node-a": {"node-0": {CAP: "-1"}}}, f"node-a.node-0.{CAP}", "negative"),
    ({"node-a": {"node-0": {CAP: "9000"}}}, f"node-a.node-0.{CAP}", "more than 8192 CPUs"),
])
def test_bad_documents_name_the_source_and_field(doc, field, message):
    with pytest.raises(InputError) as err:
        parse_zone_attributes(doc, source="ConfigMap ns/cm key k")
    assert err.value.source == "ConfigMap ns/cm key k"
    assert err.value.field == field
    assert message in err.value.message


# ---- sources --------------------------------------------------------------------------------------


def configmap(data: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "zones", "namespace": "toposched"},
            "data": data}


def test_configmap_source_reads_yaml_under_its_key(memory_client):
    memory_client.create(CONFIGMAPS, configmap({"zone-attributes.yaml": "node-a:\n  node-0:\n    "
                                                f"{CAP}: '12'\n"}))
    source = ConfigMapSource(memory_client, "toposched", "zones")
    assert source.read() == {"node-a": {"node-0": {CAP: "12"}}}
    assert source.description == "ConfigMap toposched/zones key zone-attributes.yaml"


def test_configmap_source_failures(memory_client):
    source = ConfigMapSource(memory_client, "toposched", "zones")
    with pytest.raises(SourceUnavailable, match="NotFound"):
        source.read()
    memory_client.create(CONFIGMAPS, configmap({"other": "{}"}))
    with pytest.raises(SourceUnavailable, match="no key 'zone-attributes.yaml' \\(keys: other\\)"):
        source.read()
    cm = memory_client.get(CONFIGMAPS, "zones", namespace="toposched")
    for text, message in [("node-a: [unclosed", "invalid YAML"), ("node-a: {}\n---\nnode-b: {}\n", "2 YAML documents"),
                          ("node-a:\n  node-0:\n    x: yes\n", "not a string")]:
        cm["data"] = {"zone-attributes.yaml": text}
        cm = memory_client.replace(CONFIGMAPS, cm)
        with pytest.raises(InputError, match=message) as err:
            source.read()
        assert err.value.source == source.description


def http_source(handler) -> HTTPSource:
    return HTTPSource("http://master.example/zones", httpx.Client(transport=httpx.MockTransport(handler)))


def test_http_source_reads_json():
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["accept"] == "application/json"
        return httpx.Response(200, json={"node-a": {"node-1": {CAP: "3500m"}}})

    assert http_source(handler).read() == {"node-a": {"node-1": {CAP: "3500m"}}}


def test_http_source_failures():
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(SourceUnavailable, match="ConnectError"):
        http_source(refuse).read()
    with pytest.raises(SourceUnavailable, match="HTTP 503"):
        http_source(lambda r: httpx.Response(503, text="busy")).read()
    with pytest.raises(InputError, match="not JSON") as err:
        http_source(lambda r: httpx.Response(200, text="<html>")).read()
    assert err.value.source == "http://master.example/zones"
    with pytest.raises(InputError) as err:
        http_source(lambda r: httpx.Response(200, json={"node-a": {"node-0": {CAP: "x"}}})).read()
    assert (err.value.source, err.value.field) == ("http://master.example/zones", f"node-a.node-0.{CAP}")


# ---- the merge ----------------------------------------------------------------------------------


def test_merge_sets_in_place_dedupes_and_keeps_everything_else():
    obj = nrt("n", zone_attributes={"node-0": {"vendor/a": "1", CAP: "1"}})
    obj["zones"][0]["attributes"].append({"name": CAP, "value": "2"})  # a repeated name
    zones, owned, missing = merge_zone_attributes(obj, {"node-0": {CAP: "8"}, "node-1": {CAP: "9"}, "node-7": {}})
    assert zones[0]["attributes"] == [{"name": "vendor/a", "value": "1"}, {"name": CAP, "value": "8"}]
    assert zones[1]["attributes"] == [{"name": CAP, "value": "9"}]
    assert owned == {"node-0": [CAP], "node-1": [CAP]}
    assert missing == ["node-7"]
    assert resources({"zones": zones}) == resources(obj)
    assert obj["zones"][1].get("attributes") is None, "the input is not modified"


def test_merge_removes_only_what_it_owned():
    obj = nrt("n", zone_attributes={"node-0": {"vendor/a": "1", CAP: "8"}, "node-1": {CAP: "9"}})
    obj["metadata"]["annotations"] = {OWNED_ANNOTATION: json.dumps({"node-0": [CAP]})}
    zones, owned, _ = merge_zone_attributes(obj, {})
    assert zone_attrs({"zones": zones}) == {"node-0": {"vendor/a": "1"}, "node-1": {CAP: "9"}}
    assert owned == {}
    obj["metadata"]["annotations"] = {OWNED_ANNOTATION: json.dumps({"node-1": [CAP]})}
    zones, _, _ = merge_zone_attributes(obj, {})
    assert "attributes" not in zones[1], "an emptied list is left out, as Go's omitempty does"


def test_unreadable_ownership_counts_as_none(caplog):
    obj = nrt("n", zone_attributes={"node-0": {CAP: "8"}})
    obj["metadata"]["annotations"] = {OWNED_ANNOTATION: "{not json"}
    with caplog.at_level(logging.WARNING):
        zones, owned, _ = merge_zone_attributes(obj, {})
    assert zone_attrs({"zones": zones})["node-0"] == {CAP: "8"} and owned == {}
    assert "unreadable ownership annotation" in caplog.text


names = st.sampled_from(["a", "b", "c", CAP, "vendor/x"])
attr_maps = st.dictionaries(names, st.sampled_from(["1", "2", "3"]), max_size=4)


@settings(max_examples=150, deadline=None)
@given(existing=st.lists(st.tuples(names, st.sampled_from(["1", "2", "9"])), max_size=6),
       owned_before=st.lists(names, max_size=3, unique=True), desired=attr_maps, desired_after=attr_maps)
def test_merge_properties(existing, owned_before, desired, desired_after):
    obj = nrt("n")
    obj["zones"][0]["attributes"] = [{"name": n, "value": v} for n, v in existing]
    obj["metadata"]["annotations"] = {OWNED_ANNOTATION: json.dumps({"node-0": owned_before})}
    zones, owned, _ = merge_zone_attributes(obj, {"node-0": desired})
    after = zones[0].get("attributes", [])
    names_after = [a["name"] for a in after]
    for name, value in desired.items():
        assert names_after.count(name) == 1 and {"name": name, "value": value} in after
    kept = [(n, v) for n, v in existing if n not in desired and n not in owned_before]
    assert [(a["name"], a["value"]) for a in after if a["name"] not in desired] == kept
    assert owned == ({"node-0": sorted(desired)} if desired else {})
    assert resources({"zones": zones}) == resources(obj)
    # Applying the result and merging again changes nothing (the controller converges).
    again = {**obj, "zones": zones, "metadata": {"name": "n", "annotations": {OWNED_ANNOTATION: json.dumps(owned)}}}
    assert merge_zone_attributes(again, {"node-0": desired})[0] == zones
    # A later document removes what the first one set and no longer names, and nothing else.
    later, _, _ = merge_zone_attributes(again, {"node-0": desired_after})
    later_names = [a["name"] for a in later[0].get("attributes", [])]
    for name in set(desired) - set(desired_after):
        assert name not in later_names
    for name, _ in kept:
        if name not in desired_after:
            assert name in later_names


# ---- the controller ------------------------------------------------------------------------------


def test_merges_into_published_nrts_and_keeps_the_publishers_fields(memory_client, clock):
    publish(memory_client, nrt("node-a"))
    publish(memory_client, nrt("node-b"))
    registry = Registry()
    ctl = controller_for(memory_client, StaticSource({"node-a": {"node-0": {CAP: "11500m"}, "node-1": {CAP: "12"}}}),
                         clock, metrics=Metrics.register(registry))
    assert not ctl.ready
    ctl.step()
    assert ctl.ready
    a = memory_client.get(NRTS, "node-a")
    assert zone_attrs(a) == {"node-0": {CAP: "11500m"}, "node-1": {CAP: "12"}}
    assert resources(a) == resources(nrt("node-a"))
    assert a["attributes"] == nrt("node-a")["attributes"] and a["topologyPolicies"] == ["SingleNUMANodeContainerLevel"]
    assert json.loads(a["metadata"]["annotations"][OWNED_ANNOTATION]) == {"node-0": [CAP], "node-1": [CAP]}
    managers = {m["manager"] for m in a["metadata"]["managedFields"]}
    assert {"toposched-agent", "toposched-controller"} <= managers
    assert "attributes" not in json.dumps(memory_client.get(NRTS, "node-b")["zones"]), "node-b is not named"
    # The scheduler's reader sees the capacity in the zone.
    parsed = parse_nrt(a, source="test")
    assert parsed.zones[0].attributes[CAP] == "11500m"
    assert Metrics.register(registry).controller_nrt_updates.labels(result="updated").value == 1
    # Nothing more to do: another step writes nothing.
    writes = len([r for r in memory_client.requests if r[0] == "apply"])
    ctl.step()
    assert len([r for r in memory_client.requests if r[0] == "apply"]) == writes


def test_publisher_rewrites_are_merged_again_from_the_watch(memory_client, clock):
    publish(memory_client, nrt("node-a"))
    ctl = controller_for(memory_client, StaticSource({"node-a": {"node-1": {CAP: "6"}}}), clock)
    ctl.step()
    # The agent republishes its report (force-applying zones without the controller's attribute) ...
    fresh = nrt("node-a")
    fresh["zones"][1]["resources"][0]["available"] = "3"
    publish(memory_client, fresh)
    assert "attributes" not in memory_client.get(NRTS, "node-a")["zones"][1]
    ctl.step()  # ... and the next watch round puts it back, on top of the new resources.
    a = memory_client.get(NRTS, "node-a")
    assert zone_attrs(a)["node-1"] == {CAP: "6"}
    assert a["zones"][1]["resources"][0]["available"] == "3"


def test_nfd_style_update_is_merged_again(memory_client, clock):
    memory_client.create(NRTS, nrt("node-a"))
    ctl = controller_for(memory_client, StaticSource({"node-a": {"node-0": {CAP: "4"}}}), clock)
    ctl.step()
    # NFD: get, replace Zones wholesale, update (annotations survive).
    current = memory_client.get(NRTS, "node-a")
    current["zones"] = nrt("node-a")["zones"]
    memory_client.replace(NRTS, current)
    ctl.step()
    assert zone_attrs(memory_client.get(NRTS, "node-a"))["node-0"] == {CAP: "4"}


def test_document_changes_add_change_and_remove_owned_attributes_only(memory_client, clock):
    publish(memory_client, nrt("node-a", zone_attributes={"node-0": {"vendor/own": "x"}}))
    source = StaticSource({"node-a": {"node-0": {CAP: "4", "example.com/tier": "gold"}}})
    ctl = controller_for(memory_client, source, clock)
    ctl.step()
    assert zone_attrs(memory_client.get(NRTS, "node-a"))["node-0"] == {
        "vendor/own": "x", CAP: "4", "example.com/tier": "gold"}
    source.document = {"node-a": {"node-0": {CAP: "5"}}}
    clock.now += 29
    ctl.step()
    assert zone_attrs(memory_client.get(NRTS, "node-a"))["node-0"][CAP] == "4", "not read again before the interval"
    clock.now += 1
    ctl.step()
    assert zone_attrs(memory_client.get(NRTS, "node-a"))["node-0"] == {"vendor/own": "x", CAP: "5"}
    source.document = {}
    clock.now += 30
    ctl.step()
    a = memory_client.get(NRTS, "node-a")
    assert zone_attrs(a)["node-0"] == {"vendor/own": "x"}
    assert json.loads(a["metadata"]["annotations"][OWNED_ANNOTATION]) == {}


def test_nothing_is_written_before_a_good_document_and_the_last_good_one_is_kept(memory_client, clock, caplog):
    publish(memory_client, nrt("node-a"))
    source = StaticSource(error=SourceUnavailable("down"))
    registry = Registry()
    metrics = Metrics.register(registry)
    ctl = controller_for(memory_client, source, clock, metrics=metrics)
    with caplog.at_level(logging.ERROR):
        ctl.step()
    assert not ctl.ready and ctl.desired is None
    assert [r[0] for r in memory_client.requests].count("apply") == 1, "only the publisher's own write"
    assert "keeping the last good document" in caplog.text
    source.error, source.document = None, {"node-a": {"node-0": {CAP: "4"}}}
    clock.now += 30
    ctl.step()
    assert zone_attrs(memory_client.get(NRTS, "node-a"))["node-0"] == {CAP: "4"}
    # A broken document (a typo in the capacity) does not strip what was merged.
    source.error, source.document = None, {"node-a": {"node-0": {CAP: "four"}}}
    clock.now += 30
    ctl.step()
    assert zone_attrs(memory_client.get(NRTS, "node-a"))["node-0"] == {CAP: "4"}
    assert ctl.desired == {"node-a": {"node-0": {CAP: "4"}}}
    reads = metrics.controller_source_reads
    assert (reads.labels(result="ok").value, reads.labels(result="error").value) == (1, 2)


def test_a_conflict_reads_again_and_retries(memory_client, clock):
    publish(memory_client, nrt("node-a"))
    registry = Registry()
    metrics = Metrics.register(registry)
    ctl = controller_for(memory_client, StaticSource({"node-a": {"node-0": {CAP: "4"}}}), clock, metrics=metrics)
    memory_client.fail_next("apply", NRTS, Conflict("the object has been modified"), times=2)
    ctl.step()
    assert zone_attrs(memory_client.get(NRTS, "node-a"))["node-0"] == {CAP: "4"}
    assert metrics.controller_nrt_updates.labels(result="conflict").value == 2


def test_a_stale_read_never_overwrites_newer_resources(memory_client, clock):
    """The resourceVersion precondition: a report published after the controller's read wins, then gets merged."""
    publish(memory_client, nrt("node-a"))
    ctl = controller_for(memory_client, StaticSource({"node-a": {"node-0": {CAP: "4"}}}), clock)
    ctl.step()
    stale = memory_client.get(NRTS, "node-a")
    fresh = nrt("node-a")
    fresh["zones"][0]["resources"][0]["available"] = "1"
    publish(memory_client, fresh)
    ctl._nrts["node-a"] = stale  # as if the watch had not delivered the new report yet
    stale_zones = copy.deepcopy(stale["zones"])
    stale["zones"][0]["attributes"] = []  # make the stale copy look out of step
    assert ctl.reconcile("node-a") == "updated"
    a = memory_client.get(NRTS, "node-a")
    assert a["zones"][0]["resources"][0]["available"] == "1"
    assert zone_attrs(a)["node-0"] == {CAP: "4"}
    assert stale_zones != a["zones"]


def test_server_errors_are_left_to_the_next_resync(memory_client, clock, caplog):
    publish(memory_client, nrt("node-a"))
    ctl = controller_for(memory_client, StaticSource({"node-a": {"node-0": {CAP: "4"}}}), clock)
    memory_client.fail_next("apply", NRTS, ServerError("etcd timeout"))
    with caplog.at_level(logging.ERROR):
        ctl.step()
    assert "attributes" not in memory_client.get(NRTS, "node-a")["zones"][0]
    assert "cannot write zone attributes" in caplog.text
    clock.now += 30
    ctl.step()
    assert zone_attrs(memory_client.get(NRTS, "node-a"))["node-0"] == {CAP: "4"}


def test_never_creates_nrts_and_follows_new_and_deleted_ones(memory_client, clock, caplog):
    ctl = controller_for(memory_client, StaticSource({"node-a": {"node-0": {CAP: "4"}, "node-9": {CAP: "1"}}}), clock)
    ctl.step()
    with pytest.raises(NotFound):
        memory_client.get(NRTS, "node-a")
    publish(memory_client, nrt("node-a"))
    with caplog.at_level(logging.WARNING):
        ctl.step()
        ctl.step()
    a = memory_client.get(NRTS, "node-a")
    assert zone_attrs(a)["node-0"] == {CAP: "4"}
    assert caplog.text.count("names zones this NRT does not have") == 1, "reported once, not every round"
    memory_client.delete(NRTS, "node-a")
    ctl.step()
    clock.now += 30
    ctl.step()
    assert [o["metadata"]["name"] for o in memory_client.list(NRTS).items] == []
    assert ctl.reconcile("node-a") == "absent"


def test_run_stops_when_told(memory_client, clock):
    publish(memory_client, nrt("node-a"))
    ctl = controller_for(memory_client, StaticSource({"node-a": {"node-1": {CAP: "2"}}}), clock)
    stop = threading.Event()
    thread = threading.Thread(target=ctl.run, args=(stop,), kwargs={"watch_timeout": 0.05})
    thread.start()
    try:
        for _ in range(200):
            if zone_attrs(memory_client.get(NRTS, "node-a"))["node-1"]:
                break
            stop.wait(0.01)
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
    assert zone_attrs(memory_client.get(NRTS, "node-a"))["node-1"] == {CAP: "2"}


def test_over_http_through_the_real_client(http_client, fake_server, clock):
    """The same merge through LightkubeClient and the fake API server's REST + SSA wire format."""
    publish(fake_server.store, nrt("node-a"))
    fake_server.store.create(CONFIGMAPS, configmap({"zone-attributes.yaml": f"node-a: {{node-0: {{{CAP}: '7'}}}}"}))
    ctl = controller_for(http_client, ConfigMapSource(http_client, "toposched", "zones"), clock)
    ctl.step(0.1)
    a = fake_server.store.get(NRTS, "node-a")
    assert zone_attrs(a)["node-0"] == {CAP: "7"}
    assert resources(a) == resources(nrt("node-a"))


def test_a_publisher_that_carries_the_controllers_attributes_over_never_drops_them(memory_client, clock):
    publish(memory_client, nrt("node-a"))
    ctl = controller_for(memory_client, StaticSource({"node-a": {"node-1": {CAP: "6"}}}), clock)
    ctl.step()
    fresh = nrt("node-a")
    fresh["zones"][1]["resources"][0]["available"] = "3"
    current = memory_client.get(NRTS, "node-a")
    publish(memory_client, keep_controller_attributes(fresh, current))  # what the agent does
    a = memory_client.get(NRTS, "node-a")
    assert zone_attrs(a)["node-1"] == {CAP: "6"} and a["zones"][1]["resources"][0]["available"] == "3"
    assert keep_controller_attributes(fresh, None) == fresh
    assert "attributes" not in json.dumps(keep_controller_attributes(fresh, nrt("node-a"))["zones"])
