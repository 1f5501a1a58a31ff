"""perform_binding: one Binding carrying the placement annotation; retries of a bind that went through succeed."""

import json

import pytest

from toposched.kube.binding import perform_binding
from toposched.kube.client import PODS, Conflict, ServerError
from toposched.scheduler import Placement
from toposched.scheduler.placement import ContainerPlacement
from toposched.scheduler.plugins.binder import binding_requests
from toposched.topology import CPUSet
from toposched.workload import Container, Pod

POD_OBJ = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"schedulerName": "toposched", "containers": [{"name": "c"}]}}


def requests_for(store, node="n1"):
    created = store.create(PODS, POD_OBJ, namespace="shop")
    pod = Pod("web", namespace="shop", uid=created["metadata"]["uid"], containers=(Container("c"),))
    placement = Placement(node, numa_nodes=frozenset({0}),
                          containers={"c": ContainerPlacement(cpuset=CPUSet([2, 3]), numa_nodes=frozenset({0}))})
    return binding_requests(pod, node, placement)


def test_binds_and_annotates_in_one_request(memory_client):
    perform_binding(memory_client, requests_for(memory_client))
    assert [verb for verb, _, _ in memory_client.requests] == ["create", "bind"]
    pod = memory_client.get(PODS, "web", namespace="shop")
    assert pod["spec"]["nodeName"] == "n1"
    placement = json.loads(pod["metadata"]["annotations"]["toposched.io/placement"])
    assert placement["node"] == "n1" and placement["containers"]["c"]["cpuset"] == "2-3"


def test_a_retried_bind_to_the_same_node_succeeds_and_to_another_node_conflicts(memory_client):
    requests = requests_for(memory_client)
    perform_binding(memory_client, requests)
    perform_binding(memory_client, requests)  # kube-scheduler retried after a lost answer
    other = [dict(r) for r in requests]
    other[-1] = {**other[-1], "body": {**other[-1]["body"], "target": {"kind": "Node", "name": "n2"}}}
    with pytest.raises(Conflict):
        perform_binding(memory_client, other)
    assert memory_client.get(PODS, "web", namespace="shop")["spec"]["nodeName"] == "n1"


def test_a_server_error_surfaces_and_leaves_the_pod_unbound(memory_client):
    requests = requests_for(memory_client)
    memory_client.fail_next("bind", PODS, ServerError("etcd timeout"))
    with pytest.raises(ServerError):
        perform_binding(memory_client, requests)
    assert not memory_client.get(PODS, "web", namespace="shop")["spec"].get("nodeName")
    perform_binding(memory_client, requests)
    assert memory_client.get(PODS, "web", namespace="shop")["spec"]["nodeName"] == "n1"


def test_requests_it_does_not_know_are_refused(memory_client):
    with pytest.raises(ValueError):
        perform_binding(memory_client, [{"verb": "delete", "path": "/api/v1/namespaces/a/pods/b"}])
    with pytest.raises(ValueError):
        perform_binding(memory_client, [{"verb": "patch", "path": "/api/v1/nodes/n1"}])
    with pytest.raises(ValueError):
        perform_binding(memory_client, [{"verb": "patch", "path": "/api/v1/namespaces/a/pods/b"}])
