"""MemoryClient: the in-memory API server's own semantics (the shared contract is in test_contract.py).

Behaviours mirrored from kube-apiserver and checked here: the watch cache turns an object that
leaves a watch's selector into a DELETED event carrying the old object at the new
resourceVersion (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/storage/cacher/
cache_watcher.go, convertToWatchEvent); a write that changes nothing gets no new resourceVersion
(etcd3 store GuaranteedUpdate); the binding message ``pod <name> is already assigned to node
"<node>"`` (pkg/registry/core/pod/storage/storage.go, assignPod).
"""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kube.memory_client import MemoryClient
from tests.kube.memory_merge_patch import merge_patch
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
    NotFound,
    ServerError,
)


def pod(name: str, namespace: str = "default", **spec) -> dict:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"containers": [{"name": "c"}], **spec}}


def test_identity_fields_are_set_by_the_server(memory_client):
    created = memory_client.create(PODS, pod("a"))
    meta = created["metadata"]
    assert created["apiVersion"] == "v1" and created["kind"] == "Pod"
    assert meta["uid"] == "00000000-0000-0000-0000-000000000001"
    assert meta["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert meta["generation"] == 1
    assert meta["resourceVersion"] == "2"
    assert created["status"] == {"phase": "Pending"}
    second = memory_client.create(PODS, pod("b"))
    assert second["metadata"]["uid"] != meta["uid"]
    assert int(second["metadata"]["resourceVersion"]) > 2


def test_status_phase_given_is_kept(memory_client):
    created = memory_client.create(PODS, {**pod("a"), "status": {"phase": "Running"}})
    assert created["status"]["phase"] == "Running"


def test_generation_moves_with_spec_only(memory_client):
    memory_client.create(PODS, pod("a"))
    labelled = memory_client.patch(PODS, "a", {"metadata": {"labels": {"x": "1"}}})
    assert labelled["metadata"]["generation"] == 1
    respecced = memory_client.patch(PODS, "a", {"spec": {"priority": 5}})
    assert respecced["metadata"]["generation"] == 2


def test_a_write_that_changes_nothing_is_a_no_op(memory_client):
    first = memory_client.create(NODES, {"metadata": {"name": "n1", "labels": {"a": "1"}}})
    again = memory_client.patch(NODES, "n1", {"metadata": {"labels": {"a": "1"}}})
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    applied = memory_client.apply(NODES, {"metadata": {"name": "n2", "labels": {"b": "2"}}}, field_manager="m")
    reapplied = memory_client.apply(NODES, {"metadata": {"name": "n2", "labels": {"b": "2"}}}, field_manager="m")
    assert reapplied["metadata"]["resourceVersion"] == applied["metadata"]["resourceVersion"]
    assert len(memory_client.events) == 2


def test_cluster_scoped_kinds_drop_the_namespace(memory_client):
    node = memory_client.create(NODES, {"metadata": {"name": "n1", "namespace": "ignored"}})
    assert "namespace" not in node["metadata"]
    assert memory_client.get(NODES, "n1", namespace="whatever")["metadata"]["name"] == "n1"
    nrt = memory_client.create(NRTS, {"metadata": {"name": "n1"}, "zones": []})
    assert nrt["apiVersion"] == "topology.node.k8s.io/v1alpha2"


def test_namespaced_kinds_default_and_check_the_namespace(memory_client):
    assert memory_client.create(CONFIGMAPS, {"metadata": {"name": "c"}})["metadata"]["namespace"] == "default"
    with pytest.raises(ApiError) as err:
        memory_client.create(CONFIGMAPS, {"metadata": {"name": "c", "namespace": "a"}}, namespace="b")
    assert err.value.code == 400


def test_generate_name(memory_client):
    first = memory_client.create(EVENTS, {"metadata": {"generateName": "web."}})
    second = memory_client.create(EVENTS, {"metadata": {"generateName": "web."}})
    assert first["metadata"]["name"].startswith("web.")
    assert first["metadata"]["name"] != second["metadata"]["name"]


def test_missing_name_is_invalid(memory_client):
    with pytest.raises(ApiError) as err:
        memory_client.create(PODS, {"metadata": {}})
    assert (err.value.code, err.value.reason) == (422, "Invalid")


def test_objects_are_copied_in_and_out(memory_client):
    body = pod("a")
    created = memory_client.create(PODS, body)
    body["spec"]["nodeName"] = "sneaky"
    created["spec"]["nodeName"] = "sneaky"
    memory_client.get(PODS, "a")["spec"]["containers"].append({"name": "x"})
    listed = memory_client.list(PODS).items[0]
    listed["metadata"]["labels"] = {"x": "y"}
    stored = memory_client.get(PODS, "a")
    assert "nodeName" not in stored["spec"] and len(stored["spec"]["containers"]) == 1
    assert "labels" not in stored["metadata"]


def test_watch_sees_selector_transitions_as_added_and_deleted(memory_client):
    start = memory_client.list(PODS).resource_version
    memory_client.create(PODS, pod("a"))
    memory_client.bind("default", "a", "n1")
    events = list(memory_client.watch(PODS, resource_version=start, field_selector="spec.nodeName=",
                                      timeout_seconds=0))
    assert [e.type for e in events] == ["ADDED", "DELETED"]
    # The DELETED event carries the object as it last matched, at the binding's resourceVersion.
    assert "nodeName" not in events[1].object["spec"]
    assert events[1].object["metadata"]["resourceVersion"] == memory_client.resource_version
    bound = list(memory_client.watch(PODS, resource_version=start, field_selector="spec.nodeName=n1",
                                     timeout_seconds=0))
    assert [e.type for e in bound] == ["ADDED"]


def test_watch_from_zero_starts_with_the_current_objects(memory_client):
    memory_client.create(NODES, {"metadata": {"name": "n1"}})
    memory_client.create(NODES, {"metadata": {"name": "n2"}})
    memory_client.delete(NODES, "n1")
    events = list(memory_client.watch(NODES, resource_version="0", timeout_seconds=0))
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "n2")]


def test_bounded_history_expires_old_versions():
    client = MemoryClient(clock=lambda: 0.0, history_limit=2)
    versions = [client.create(NODES, {"metadata": {"name": f"n{i}"}})["metadata"]["resourceVersion"]
                for i in range(6)]
    with pytest.raises(Gone):
        client.watch(NODES, resource_version=versions[0])
    # At least the last history_limit changes stay available.
    recent = list(client.watch(NODES, resource_version=versions[-3], timeout_seconds=0))
    assert [e.object["metadata"]["name"] for e in recent] == ["n4", "n5"]


def test_a_kind_first_written_late_still_replays_from_an_early_version(memory_client):
    rv = memory_client.list(PODS).resource_version
    memory_client.create(CONFIGMAPS, {"metadata": {"name": "c"}})
    memory_client.create(NODES, {"metadata": {"name": "n1"}})
    assert [e.type for e in memory_client.watch(NODES, resource_version=rv, timeout_seconds=0)] == ["ADDED"]


def test_other_kinds_history_does_not_expire_a_watch():
    client = MemoryClient(clock=lambda: 0.0, history_limit=2)
    rv = client.list(NODES).resource_version
    for i in range(10):
        client.create(CONFIGMAPS, {"metadata": {"name": f"c{i}"}})
    assert list(client.watch(NODES, resource_version=rv, timeout_seconds=0)) == []


def test_a_stream_falling_behind_compaction_gets_gone(memory_client):
    rv = memory_client.list(NODES).resource_version
    memory_client.create(NODES, {"metadata": {"name": "n1"}})
    stream = memory_client.watch(NODES, resource_version=rv, timeout_seconds=0)
    memory_client.compact()
    with pytest.raises(Gone):
        next(stream)


def test_close_watches_ends_a_blocked_stream(memory_client):
    stream = memory_client.watch(NODES, resource_version=memory_client.list(NODES).resource_version)
    seen: list[str] = []
    first = threading.Event()

    def consume():
        for event in stream:
            seen.append(event.object["metadata"]["name"])
            first.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    memory_client.create(NODES, {"metadata": {"name": "n1"}})
    assert first.wait(timeout=5)
    memory_client.close_watches()
    thread.join(timeout=5)
    assert not thread.is_alive() and seen == ["n1"]
    assert [e.type for e in memory_client.watch(NODES, resource_version="0", timeout_seconds=0)] == ["ADDED"]


def test_fail_next_and_the_request_log(memory_client):
    memory_client.fail_next("get", PODS, ServerError("boom"), times=2)
    memory_client.create(PODS, pod("a"))
    for _ in range(2):
        with pytest.raises(ServerError):
            memory_client.get(PODS, "a")
    assert memory_client.get(PODS, "a")["metadata"]["name"] == "a"
    memory_client.fail_next("bind", PODS, Conflict("later"))
    with pytest.raises(Conflict):
        memory_client.bind("default", "a", "n1")
    assert memory_client.requests == [("create", PODS, "a"), ("get", PODS, "a"), ("get", PODS, "a"),
                                      ("get", PODS, "a"), ("bind", PODS, "a")]
    with pytest.raises(ValueError):
        memory_client.fail_next("frobnicate", PODS, ServerError("x"))


def test_bind_checks_uid_and_sets_the_scheduled_condition(memory_client):
    created = memory_client.create(PODS, pod("a"))
    with pytest.raises(Conflict, match="Precondition failed"):
        memory_client.bind("default", "a", "n1", uid="other")
    memory_client.bind("default", "a", "n1", uid=created["metadata"]["uid"])
    bound = memory_client.get(PODS, "a")
    assert bound["spec"]["nodeName"] == "n1"
    assert [c["type"] for c in bound["status"]["conditions"]] == ["PodScheduled"]
    with pytest.raises(Conflict, match='pod a is already assigned to node "n1"'):
        memory_client.bind("default", "a", "n2")
    with pytest.raises(NotFound):
        memory_client.bind("default", "missing", "n1")


def test_replace_keeps_identity_and_checks_uid(memory_client):
    created = memory_client.create(LEASES, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    changed = memory_client.replace(LEASES, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "b"}})
    assert changed["metadata"]["uid"] == created["metadata"]["uid"]
    assert changed["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    with pytest.raises(Conflict, match="Precondition failed"):
        memory_client.replace(LEASES, {"metadata": {"name": "l", "uid": "x"}, "spec": {}})


def test_managed_fields_record_managers_and_operations(memory_client):
    memory_client.create(CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"a": "1"}}, field_manager="creator")
    applied = memory_client.apply(CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"b": "2"}}, field_manager="agent")
    entries = {(e["manager"], e["operation"]): e for e in applied["metadata"]["managedFields"]}
    assert entries[("creator", "Update")]["fieldsV1"] == {"f:data": {"f:a": {}}}
    assert entries[("agent", "Apply")]["fieldsV1"] == {"f:data": {"f:b": {}}}
    assert entries[("agent", "Apply")]["fieldsType"] == "FieldsV1"


def test_an_update_takes_a_field_from_its_applier_without_conflict(memory_client):
    memory_client.apply(CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"a": "1"}}, field_manager="agent")
    memory_client.patch(CONFIGMAPS, "c", {"data": {"a": "2"}}, field_manager="editor")
    with pytest.raises(Conflict, match='conflict with "editor": .data.a'):
        memory_client.apply(CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"a": "1"}}, field_manager="agent")


def test_apply_removes_fields_the_manager_stopped_applying(memory_client):
    memory_client.apply(CONFIGMAPS, {"metadata": {"name": "c", "labels": {"x": "1", "y": "1"}}},
                        field_manager="agent")
    result = memory_client.apply(CONFIGMAPS, {"metadata": {"name": "c", "labels": {"x": "1"}}},
                                 field_manager="agent")
    assert result["metadata"]["labels"] == {"x": "1"}


def test_apply_keeps_a_dropped_field_another_manager_owns(memory_client):
    memory_client.apply(CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"a": "1", "b": "1"}}, field_manager="one")
    memory_client.apply(CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"b": "1"}}, field_manager="two")
    result = memory_client.apply(CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"a": "1"}}, field_manager="one")
    assert result["data"] == {"a": "1", "b": "1"}


def test_apply_needs_a_field_manager(memory_client):
    with pytest.raises(ApiError) as err:
        memory_client.apply(CONFIGMAPS, {"metadata": {"name": "c"}}, field_manager="")
    assert err.value.code == 422


def test_concurrent_writers_get_distinct_increasing_versions(memory_client):
    versions: list[int] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        for j in range(25):
            created = memory_client.create(CONFIGMAPS, {"metadata": {"name": f"c{i}-{j}"}})
            rv = int(created["metadata"]["resourceVersion"])
            with lock:
                versions.append(rv)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(versions) == list(range(2, 102))
    events = list(memory_client.watch(CONFIGMAPS, resource_version="0", timeout_seconds=0))
    assert len(events) == 100


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab", max_size=2),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text("abc", max_size=2), children,
                                                                       max_size=3),
    max_leaves=8,
)


@settings(max_examples=100, deadline=None)
@given(json_values, json_values)
def test_merge_patch_follows_rfc7386(target, patch):
    result = merge_patch(target, patch)
    if not isinstance(patch, dict):
        assert result == patch
        return
    assert isinstance(result, dict)
    for key, value in patch.items():
        if value is None:
            assert key not in result
        elif not isinstance(value, dict):
            assert result[key] == value
    base = target if isinstance(target, dict) else {}
    for key in base.keys() - patch.keys():
        assert result[key] == base[key]
    # Applying the same patch twice changes nothing more (RFC 7386 patches are idempotent).
    assert merge_patch(result, patch) == result


def test_merge_patch_rfc7386_examples():
    # The example table of RFC 7386, appendix A.
    cases = [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ]
    for target, patch, expected in cases:
        assert merge_patch(target, patch) == expected
