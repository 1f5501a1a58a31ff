"""LightkubeClient on the wire: the requests it sends and how it maps what comes back.

lightkube is given an httpx transport that records each request and answers with canned
responses, so the exact paths, query parameters, content types and bodies are checked
(Kubernetes API conventions: ``watch=true`` with ``resourceVersion`` and integer
``timeoutSeconds``; merge patch as ``application/merge-patch+json``; server-side apply as
``application/apply-patch+yaml`` with ``fieldManager`` and ``force``; ``POST
pods/{name}/binding`` with a ``Binding`` whose target is the Node), plus failures that only a
real network shows: non-JSON error pages from proxies, refused connections and streams cut off
mid-watch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import httpx2
import lightkube
import pytest
from lightkube.config.models import Cluster, User

from toposched.kube.client import NODES, NRTS, PODS, ApiError, Conflict, Gone, NotFound, ServerError
from toposched.kube.informer import Reflector
from toposched.kube.lightkube_client import LightkubeClient

Handler = Callable[[httpx2.Request], httpx2.Response]


def client_with(handler: Handler) -> tuple[LightkubeClient, list[httpx2.Request]]:
    seen: list[httpx2.Request] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        request.read()
        seen.append(request)
        return handler(request)

    config = lightkube.KubeConfig.from_one(cluster=Cluster(server="http://api.test", insecure=True), user=User(),
                                           namespace="default")
    client = lightkube.Client(config, field_manager="toposched", trust_env=False,
                              transport=httpx2.MockTransport(record))
    return LightkubeClient(client, lean_requests=False), seen


def query(request: httpx2.Request) -> dict[str, str]:
    return dict(request.url.params.items())


def status(code: int, reason: str, message: str) -> httpx2.Response:
    return httpx2.Response(code, json={"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                       "code": code, "reason": reason, "message": message})


def test_list_sends_selectors_verbatim_and_fills_in_item_kinds():
    client, seen = client_with(lambda r: httpx2.Response(200, json={
        "kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "17"},
        "items": [{"metadata": {"name": "a", "namespace": "default"}, "spec": {}}]}))
    listed = client.list(PODS, field_selector="spec.nodeName=,spec.schedulerName=toposched", label_selector="a!=b")
    assert listed.resource_version == "17"
    assert listed.items == [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "default"},
                             "spec": {}}]
    request = seen[0]
    assert request.method == "GET" and request.url.path == "/api/v1/pods"
    assert query(request) == {"fieldSelector": "spec.nodeName=,spec.schedulerName=toposched", "labelSelector": "a!=b"}
    client.list(PODS, namespace="kube-system")
    assert seen[1].url.path == "/api/v1/namespaces/kube-system/pods"
    client.list(NRTS)
    assert seen[2].url.path == "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"


def test_watch_request_and_events():
    lines = [{"type": "ADDED", "object": {"metadata": {"name": "n1", "resourceVersion": "5"}}},
             {"type": "DELETED", "object": {"metadata": {"name": "n1", "resourceVersion": "6"}}}]
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    client, seen = client_with(lambda r: httpx2.Response(200, content=body))
    events = list(client.watch(NODES, resource_version="4", field_selector="metadata.name=n1", timeout_seconds=0.3))
    assert [(e.type, e.object["metadata"]["resourceVersion"]) for e in events] == [("ADDED", "5"), ("DELETED", "6")]
    assert seen[0].url.path == "/api/v1/nodes"
    # The API server takes whole seconds; the client's read timeout covers the fraction.
    assert query(seen[0]) == {"watch": "true", "resourceVersion": "4", "fieldSelector": "metadata.name=n1",
                              "timeoutSeconds": "1"}


def test_watch_error_event_becomes_gone():
    expired = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
                                           "reason": "Expired", "message": "too old resource version: 1 (9)"}}
    client, _ = client_with(lambda r: httpx2.Response(200, content=(json.dumps(expired) + "\n").encode()))
    with pytest.raises(Gone, match="too old resource version"):
        list(client.watch(NODES, resource_version="1"))


class _CutStream(httpx2.SyncByteStream):
    """One watch line, then the connection dies."""

    def __iter__(self) -> Iterator[bytes]:
        yield json.dumps({"type": "ADDED", "object": {"metadata": {"name": "n1", "resourceVersion": "5"}}}).encode()
        yield b"\n"
        raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body")


def test_a_stream_cut_mid_watch_is_a_server_error_after_the_events_before_it():
    client, _ = client_with(lambda r: httpx2.Response(200, stream=_CutStream()))
    received = []
    with pytest.raises(ServerError) as err:
        for event in client.watch(NODES, resource_version="4"):
            received.append(event.object["metadata"]["name"])
    assert received == ["n1"] and err.value.code == 503


def test_a_reflector_resumes_after_a_cut_stream():
    calls = {"watch": 0}

    def handler(request: httpx2.Request) -> httpx2.Response:
        if "watch" not in query(request):
            return httpx2.Response(200, json={"kind": "NodeList", "apiVersion": "v1",
                                              "metadata": {"resourceVersion": "4"}, "items": []})
        calls["watch"] += 1
        if calls["watch"] == 1:
            return httpx2.Response(200, stream=_CutStream())
        line = {"type": "ADDED", "object": {"metadata": {"name": "n2", "resourceVersion": "6"}}}
        return httpx2.Response(200, content=(json.dumps(line) + "\n").encode())

    client, seen = client_with(handler)
    events, sleeps = [], []
    reflector = Reflector(client, NODES, events.append, lambda items: None, sleep=sleeps.append)
    for _ in range(3):
        reflector.step(1)
    assert [e.object["metadata"]["name"] for e in events] == ["n1", "n2"]
    assert [query(r).get("resourceVersion") for r in seen] == [None, "4", "5"]
    assert sleeps == [0.5] and reflector.resource_version == "6"


@pytest.mark.parametrize(("response", "error", "code"), [
    (status(404, "NotFound", 'pods "a" not found'), NotFound, 404),
    (status(409, "AlreadyExists", 'pods "a" already exists'), Conflict, 409),
    (status(403, "Forbidden", "pods is forbidden"), ApiError, 403),
    (status(422, "Invalid", "Pod is invalid"), ApiError, 422),
    (status(500, "InternalError", "etcd"), ServerError, 500),
    (httpx2.Response(502, headers={"Content-Type": "text/html"}, content=b"<html>Bad Gateway</html>"),
     ServerError, 502),
    (httpx2.Response(429, headers={"Content-Type": "text/plain"}, content=b"slow down"), ApiError, 429),
])
def test_errors_are_mapped_by_status_code(response, error, code):
    client, _ = client_with(lambda r: response)
    with pytest.raises(error) as err:
        client.get(PODS, "a", namespace="default")
    assert err.value.code == code
    if response.headers.get("Content-Type") == "application/json":
        assert err.value.message == response.json()["message"]


def test_conflict_reason_is_kept():
    client, _ = client_with(lambda r: status(409, "AlreadyExists", 'pods "a" already exists'))
    with pytest.raises(Conflict) as err:
        client.create(PODS, {"metadata": {"name": "a"}})
    assert err.value.reason == "AlreadyExists"


def test_patch_apply_and_bind_on_the_wire():
    client, seen = client_with(lambda r: httpx2.Response(
        201 if r.url.path.endswith("binding") else 200,
        json={"kind": "Status", "status": "Success"} if r.url.path.endswith("binding") else {"metadata": {}}))
    client.patch(PODS, "a", {"metadata": {"labels": {"x": None}}}, namespace="ns")
    client.apply(NRTS, {"metadata": {"name": "n1"}, "zones": []}, field_manager="agent", force=True)
    client.bind("ns", "a", "n1", uid="u-1")
    patch, apply, bind = seen
    assert (patch.method, patch.url.path, patch.headers["Content-Type"]) == (
        "PATCH", "/api/v1/namespaces/ns/pods/a", "application/merge-patch+json")
    assert json.loads(patch.content) == {"metadata": {"labels": {"x": None}}}
    assert (apply.method, apply.url.path, apply.headers["Content-Type"]) == (
        "PATCH", "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/n1", "application/apply-patch+yaml")
    assert query(apply) == {"fieldManager": "agent", "force": "true"}
    assert json.loads(apply.content)["kind"] == "NodeResourceTopology"
    assert (bind.method, bind.url.path) == ("POST", "/api/v1/namespaces/ns/pods/a/binding")
    assert json.loads(bind.content) == {"apiVersion": "v1", "kind": "Binding",
                                        "metadata": {"name": "a", "namespace": "ns", "uid": "u-1"},
                                        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}


def test_create_sends_to_the_objects_namespace_and_refuses_a_mismatch():
    client, seen = client_with(lambda r: httpx2.Response(201, json=json.loads(r.content)))
    created = client.create(PODS, {"metadata": {"name": "a", "namespace": "team"}})
    assert seen[0].url.path == "/api/v1/namespaces/team/pods" and created["kind"] == "Pod"
    with pytest.raises(ApiError) as err:
        client.create(PODS, {"metadata": {"name": "a", "namespace": "team"}}, namespace="other")
    assert err.value.code == 400


def test_a_refused_connection_is_a_server_error():
    client = LightkubeClient.from_url("http://127.0.0.1:9", timeout=2)
    with pytest.raises(ServerError) as err:
        client.get(NODES, "n1")
    assert err.value.code == 503
    with pytest.raises(ServerError):
        list(client.watch(NODES, resource_version="1", timeout_seconds=1))
    client.close()


def test_from_environment_reads_kubeconfig(tmp_path, monkeypatch):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "c",
                      "cluster": {"server": "https://k8s.example:6443", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "secret"}}],
        "contexts": [{"name": "test", "context": {"cluster": "c", "user": "u", "namespace": "team"}}],
    }))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    client = LightkubeClient.from_environment()
    assert client._client.config.cluster.server == "https://k8s.example:6443"
    assert client._client.namespace == "team"
    client.close()
