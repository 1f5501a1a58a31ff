"""One contract for every KubeClient: the in-memory API server directly, and lightkube over HTTP to the fake server.

Each test runs twice: against ``MemoryClient`` and against ``LightkubeClient`` talking to
``FakeApiServer(MemoryClient())`` on 127.0.0.1, so the fake's wire format and the lightkube
adapter are held to the same behaviour as the store. Expected behaviours follow the Kubernetes
API conventions (docs: "API Concepts" — resource versions, efficient detection of changes,
410 Gone; "Server-Side Apply" — conflicts and forcing) and the Binding subresource.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.kube.memory_client import MemoryClient
from toposched.kube.client import (
    CONFIGMAPS,
    EVENTS,
    LEASES,
    NODES,
    NRTS,
    PODS,
    ApiError,
    Conflict,
    Gone,
    KubeClient,
    NotFound,
    ServerError,
    WatchEvent,
)


@dataclass
class Backend:
    """A client under test and the store behind it (to compact or fault it)."""

    client: KubeClient
    store: MemoryClient


@pytest.fixture(params=["memory", "http"])
def backend(request) -> Backend:
    if request.param == "memory":
        store = request.getfixturevalue("memory_client")
        return Backend(store, store)
    server = request.getfixturevalue("fake_server")
    return Backend(request.getfixturevalue("http_client"), server.store)


def pod(name: str, namespace: str = "default", labels: dict[str, str] | None = None, **spec: Any) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def take(client: KubeClient, kind, resource_version: str, count: int, timeout: float = 5.0,
         **selectors: Any) -> list[WatchEvent]:
    """The first ``count`` events of a watch (fewer if the stream ends first)."""
    stream = client.watch(kind, resource_version=resource_version, timeout_seconds=timeout, **selectors)
    events: list[WatchEvent] = []
    try:
        for event in stream:
            events.append(event)
            if len(events) == count:
                break
    finally:
        stream.close()  # type: ignore[attr-defined]
    return events


def names(events: list[WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.object["metadata"]["name"]) for e in events]


def rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


# -- CRUD ---------------------------------------------------------------------------------------


def test_create_get_replace_delete(backend):
    client = backend.client
    created = client.create(PODS, pod("web"))
    assert type(created) is dict
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
    assert created["status"]["phase"] == "Pending"
    fetched = client.get(PODS, "web", namespace="default")
    assert fetched == created
    fetched["metadata"]["labels"] = {"tier": "front"}
    replaced = client.replace(PODS, fetched)
    assert replaced["metadata"]["labels"] == {"tier": "front"}
    assert rv(replaced) > rv(created)
    client.delete(PODS, "web", namespace="default")
    with pytest.raises(NotFound):
        client.get(PODS, "web", namespace="default")
    with pytest.raises(NotFound):
        client.delete(PODS, "web", namespace="default")


def test_create_twice_is_already_exists(backend):
    backend.client.create(NODES, {"metadata": {"name": "n1"}})
    with pytest.raises(Conflict) as err:
        backend.client.create(NODES, {"metadata": {"name": "n1"}})
    assert err.value.reason == "AlreadyExists"
    assert err.value.code == 409


def test_create_with_a_resource_version_is_refused(backend):
    stale = backend.client.create(NODES, {"metadata": {"name": "n1"}})
    backend.client.delete(NODES, "n1")
    with pytest.raises(ServerError, match="resourceVersion should not be set"):
        backend.client.create(NODES, stale)
    with pytest.raises(ServerError, match="resourceVersion should not be set"):
        backend.client.apply(NODES, stale, field_manager="m")


def test_replace_of_a_missing_object_is_not_found(backend):
    with pytest.raises(NotFound):
        backend.client.replace(CONFIGMAPS, {"metadata": {"name": "nope", "namespace": "default"}, "data": {}})
    with pytest.raises(NotFound):
        backend.client.patch(CONFIGMAPS, "nope", {"data": {"a": "1"}}, namespace="default")


def test_every_kind_round_trips_with_unknown_fields(backend):
    client = backend.client
    client.create(CONFIGMAPS, {"metadata": {"name": "cfg", "namespace": "kube-system"}, "data": {"k": "v"}})
    client.create(LEASES, {"metadata": {"name": "toposched", "namespace": "kube-system"},
                           "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})
    client.create(EVENTS, {"metadata": {"name": "e1", "namespace": "default"}, "reason": "FailedScheduling",
                           "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"}})
    nrt = {"metadata": {"name": "n1"}, "topologyPolicies": ["SingleNUMANodeContainerLevel"],
           "zones": [{"name": "node-0", "type": "Node", "resources": [
               {"name": "cpu", "capacity": "16", "allocatable": "14", "available": "10"}]}],
           "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}]}
    client.create(NRTS, nrt)
    client.create(PODS, pod("web", futureField={"x": [1, 2]}))
    assert client.get(CONFIGMAPS, "cfg", namespace="kube-system")["data"] == {"k": "v"}
    assert client.get(LEASES, "toposched", namespace="kube-system")["spec"]["leaseDurationSeconds"] == 15
    assert client.get(EVENTS, "e1", namespace="default")["reason"] == "FailedScheduling"
    got = client.get(NRTS, "n1")
    assert got["zones"] == nrt["zones"] and got["attributes"] == nrt["attributes"]
    assert got["apiVersion"] == "topology.node.k8s.io/v1alpha2" and got["kind"] == "NodeResourceTopology"
    assert client.get(PODS, "web", namespace="default")["spec"]["futureField"] == {"x": [1, 2]}


# -- list and selectors -------------------------------------------------------------------------


def _seed_pods(client: KubeClient) -> None:
    client.create(PODS, pod("a", labels={"app": "web"}, schedulerName="toposched"))
    client.create(PODS, pod("b", labels={"app": "db"}, schedulerName="toposched", nodeName="n1"))
    client.create(PODS, pod("c", namespace="other", labels={"app": "web"}))


def _listed(client: KubeClient, **kw: Any) -> list[str]:
    return [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in client.list(PODS, **kw).items]


def test_list_by_namespace_and_label(backend):
    client = backend.client
    _seed_pods(client)
    assert _listed(client) == ["default/a", "default/b", "other/c"]
    assert _listed(client, namespace="default") == ["default/a", "default/b"]
    assert _listed(client, label_selector="app=web") == ["default/a", "other/c"]
    assert _listed(client, label_selector="app!=web") == ["default/b"]
    assert _listed(client, label_selector="app in (db, cache)") == ["default/b"]
    assert _listed(client, namespace="other", label_selector="app==web") == ["other/c"]
    items = client.list(PODS).items
    assert all(item["apiVersion"] == "v1" and item["kind"] == "Pod" for item in items)


def test_list_by_field(backend):
    client = backend.client
    _seed_pods(client)
    assert _listed(client, field_selector="spec.nodeName=") == ["default/a", "other/c"]
    assert _listed(client, field_selector="spec.nodeName=n1") == ["default/b"]
    assert _listed(client, field_selector="spec.schedulerName=toposched,spec.nodeName=") == ["default/a"]
    assert _listed(client, field_selector="metadata.name=c") == ["other/c"]
    assert _listed(client, field_selector="metadata.namespace!=default") == ["other/c"]
    assert _listed(client, field_selector="status.phase=Pending") == ["default/a", "default/b", "other/c"]
    with pytest.raises(ApiError) as err:
        client.list(PODS, field_selector="spec.containers=x")
    assert err.value.code == 400


def test_list_resource_version_is_the_latest_write(backend):
    client = backend.client
    created = client.create(NODES, {"metadata": {"name": "n1"}})
    assert int(client.list(NODES).resource_version) >= rv(created)
    assert client.list(CONFIGMAPS).items == []


# -- watch --------------------------------------------------------------------------------------


def test_watch_replays_changes_in_order_and_resumes(backend):
    client = backend.client
    start = client.list(PODS).resource_version
    client.create(PODS, pod("a"))
    client.create(PODS, pod("b"))
    client.patch(PODS, "a", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
    client.delete(PODS, "b", namespace="default")
    events = take(client, PODS, start, 4)
    assert names(events) == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    versions = [rv(e.object) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 4
    resumed = take(client, PODS, events[1].object["metadata"]["resourceVersion"], 2)
    assert names(resumed) == [("MODIFIED", "a"), ("DELETED", "b")]


def test_watch_filters_by_namespace_and_selector_transitions(backend):
    client = backend.client
    start = client.list(PODS).resource_version
    client.create(PODS, pod("a", schedulerName="toposched"))
    client.create(PODS, pod("b", namespace="other", schedulerName="toposched"))
    client.bind("default", "a", "n1")
    events = take(client, PODS, start, 2, namespace="default", field_selector="spec.nodeName=")
    assert names(events) == [("ADDED", "a"), ("DELETED", "a")]
    everywhere = take(client, PODS, start, 3)
    assert names(everywhere) == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a")]


def test_watch_from_zero_lists_first(backend):
    client = backend.client
    client.create(NODES, {"metadata": {"name": "n1"}})
    client.create(NODES, {"metadata": {"name": "n2"}})
    assert names(take(client, NODES, "0", 2)) == [("ADDED", "n1"), ("ADDED", "n2")]


def test_watch_delivers_live_changes(backend):
    client = backend.client
    start = client.list(NODES).resource_version
    received: list[WatchEvent] = []
    thread = threading.Thread(target=lambda: received.extend(take(client, NODES, start, 2)), daemon=True)
    thread.start()
    client.create(NODES, {"metadata": {"name": "n1"}})
    client.delete(NODES, "n1")
    thread.join(timeout=10)
    assert names(received) == [("ADDED", "n1"), ("DELETED", "n1")]


def test_watch_ends_after_its_timeout(backend):
    start = backend.client.list(NODES).resource_version
    assert list(backend.client.watch(NODES, resource_version=start, timeout_seconds=0.2)) == []


def test_watch_from_a_compacted_version_is_gone(backend):
    client = backend.client
    start = client.list(NODES).resource_version
    client.create(NODES, {"metadata": {"name": "n1"}})
    backend.store.compact()
    with pytest.raises(Gone) as err:
        take(client, NODES, start, 1)
    assert err.value.code == 410
    fresh = client.list(NODES)
    client.create(NODES, {"metadata": {"name": "n2"}})
    assert names(take(client, NODES, fresh.resource_version, 1)) == [("ADDED", "n2")]


# -- concurrency control, patch, apply ----------------------------------------------------------


def test_replace_with_a_stale_version_conflicts(backend):
    client = backend.client
    first = client.create(LEASES, {"metadata": {"name": "l", "namespace": "default"}, "spec": {"holderIdentity": "a"}})
    second = client.replace(LEASES, {**first, "spec": {"holderIdentity": "b"}})
    with pytest.raises(Conflict) as err:
        client.replace(LEASES, {**first, "spec": {"holderIdentity": "c"}})
    assert err.value.reason == "Conflict"
    third = client.replace(LEASES, {**second, "spec": {"holderIdentity": "c"}})
    assert third["spec"]["holderIdentity"] == "c"
    with pytest.raises(Conflict):
        client.patch(LEASES, "l", {"metadata": {"resourceVersion": second["metadata"]["resourceVersion"]},
                                   "spec": {"holderIdentity": "d"}}, namespace="default")


def test_merge_patch_sets_and_deletes_keys(backend):
    client = backend.client
    client.create(PODS, pod("a", labels={"keep": "1", "drop": "1"}))
    client.patch(PODS, "a", {"metadata": {"annotations": {"toposched.io/placement": "{}", "other": "x"}}},
                 namespace="default")
    patched = client.patch(PODS, "a", {"metadata": {"labels": {"drop": None, "new": "2"},
                                                    "annotations": {"other": None}}}, namespace="default")
    assert patched["metadata"]["labels"] == {"keep": "1", "new": "2"}
    assert patched["metadata"]["annotations"] == {"toposched.io/placement": "{}"}
    assert patched["spec"]["containers"] == [{"name": "c", "image": "busybox"}]


def test_apply_creates_merges_conflicts_and_forces(backend):
    client = backend.client
    base = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}}
    created = client.apply(CONFIGMAPS, {**base, "data": {"a": "1"}}, field_manager="agent")
    assert created["data"] == {"a": "1"}
    merged = client.apply(CONFIGMAPS, {**base, "data": {"b": "2"}}, field_manager="controller")
    assert merged["data"] == {"a": "1", "b": "2"}
    with pytest.raises(Conflict) as err:
        client.apply(CONFIGMAPS, {**base, "data": {"a": "9"}}, field_manager="controller")
    assert "agent" in err.value.message
    same_value = client.apply(CONFIGMAPS, {**base, "data": {"a": "1", "b": "2"}}, field_manager="controller")
    assert same_value["data"] == {"a": "1", "b": "2"}
    forced = client.apply(CONFIGMAPS, {**base, "data": {"a": "9", "b": "2"}}, field_manager="controller", force=True)
    assert forced["data"] == {"a": "9", "b": "2"}
    managers = {e["manager"]: e for e in forced["metadata"]["managedFields"]}
    assert managers["controller"]["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}}}
    assert "agent" not in managers
    # The agent no longer owns data.a, so applying without it leaves the controller's value alone.
    after = client.apply(CONFIGMAPS, {**base, "data": {}}, field_manager="agent")
    assert after["data"] == {"a": "9", "b": "2"}


def test_apply_of_a_cluster_scoped_report(backend):
    client = backend.client
    report = {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
              "metadata": {"name": "n1"}, "zones": [{"name": "node-0", "type": "Node"}]}
    first = client.apply(NRTS, report, field_manager="toposched-agent")
    again = client.apply(NRTS, report, field_manager="toposched-agent")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    changed = client.apply(NRTS, {**report, "zones": []}, field_manager="toposched-agent")
    assert changed["zones"] == [] and rv(changed) > rv(first)


# -- binding ------------------------------------------------------------------------------------


def test_bind_sets_the_node_once(backend):
    client = backend.client
    created = client.create(PODS, pod("a"))
    client.bind("default", "a", "n1", uid=created["metadata"]["uid"])
    assert client.get(PODS, "a", namespace="default")["spec"]["nodeName"] == "n1"
    with pytest.raises(Conflict) as err:
        client.bind("default", "a", "n2")
    assert "already assigned to node" in err.value.message and '"n1"' in err.value.message
    with pytest.raises(NotFound):
        client.bind("default", "missing", "n1")


def test_bind_with_a_stale_uid_conflicts(backend):
    client = backend.client
    client.create(PODS, pod("a"))
    with pytest.raises(Conflict):
        client.bind("default", "a", "n1", uid="not-the-uid")
    assert "nodeName" not in client.get(PODS, "a", namespace="default")["spec"]


# -- injected server failures travel the same way -----------------------------------------------


def test_injected_failures_reach_the_caller(backend):
    client = backend.client
    client.create(PODS, pod("a"))
    backend.store.fail_next("get", PODS, ServerError("etcd unavailable"))
    with pytest.raises(ServerError) as err:
        client.get(PODS, "a", namespace="default")
    assert err.value.code == 500 and "etcd unavailable" in err.value.message
    backend.store.fail_next("bind", PODS, Conflict("try again"))
    with pytest.raises(Conflict):
        client.bind("default", "a", "n1")
    backend.store.fail_next("list", NODES, ServerError("overloaded", code=503))
    with pytest.raises(ServerError) as err:
        client.list(NODES)
    assert err.value.code == 503
    backend.store.fail_next("watch", NODES, ServerError("watch refused"))
    with pytest.raises(ServerError):
        take(client, NODES, "0", 1)
    assert client.list(NODES).items == []


def _iter_requests(store: MemoryClient) -> Iterator[tuple[str, str | None]]:
    for verb, kind, name in store.requests:
        yield verb, f"{kind.plural}/{name}" if name else kind.plural


def test_the_store_sees_the_same_requests(backend):
    client = backend.client
    client.create(PODS, pod("a"))
    client.list(PODS, namespace="default")
    client.bind("default", "a", "n1")
    client.delete(PODS, "a", namespace="default")
    assert list(_iter_requests(backend.store)) == [("create", "pods/a"), ("list", "pods"), ("bind", "pods/a"),
                                                   ("delete", "pods/a")]
