"""The extender under hostile requests: never a 500, a clear refusal, nothing unvalidated in an API URL (issue 19).

Every request goes through the real FastAPI app (TestClient) over the extender test cluster of
``tests/kube/extender/scenario.py``. A bad pod or node gets 200 with ``Error`` or every node
failed (filter, bind), or 400 (prioritize, preempt) with the reason; the server keeps answering
good requests afterwards; and its memory stays within 20% after 10,000 malformed requests.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import time
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.test_fuzz_readers import mutated
from tests.kube.extender.scenario import build
from toposched.kube.client import PODS

_WORLD = build()


def _pod(**changes: Any) -> dict:
    pod = _WORLD.request_pod("web-0")
    for path, value in changes.items():
        target = pod
        keys = path.split("__")
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[keys[-1]] = value
    return pod


LIM = "spec__containers__0__resources__limits"
REQ = "spec__containers__0__resources__requests"

BAD_PODS: list[tuple[str, dict | Any]] = [
    ("cpu-1e400-text", {f"{LIM}__cpu": "1e400", f"{REQ}__cpu": "1e400"}),
    ("cpu-huge-int", {f"{LIM}__cpu": 10**40, f"{REQ}__cpu": 10**40}),
    ("cpu-5000-digits", {f"{LIM}__cpu": "9" * 5000, f"{REQ}__cpu": "9" * 5000}),
    ("cpu-negative", {f"{LIM}__cpu": "-4", f"{REQ}__cpu": "-4"}),
    ("cpu-list", {f"{LIM}__cpu": [4], f"{REQ}__cpu": [4]}),
    ("cpu-bool", {f"{LIM}__cpu": True, f"{REQ}__cpu": True}),
    ("memory-junk", {f"{LIM}__memory": "2 gigs", f"{REQ}__memory": "2 gigs"}),
    ("gpu-half", {f"{LIM}__nvidia.com/gpu": "0.5", f"{REQ}__nvidia.com/gpu": "0.5"}),
    ("gpu-request-only", {f"{REQ}__nvidia.com/gpu": "1"}),
    ("request-above-limit", {f"{REQ}__cpu": "8"}),
    ("resource-name-space", {f"{LIM}__c p u": "1"}),
    ("containers-empty", {"spec__containers": []}),
    ("containers-string", {"spec__containers": "app"}),
    ("container-dup", {"spec__containers": [{"name": "a"}, {"name": "a"}]}),
    ("container-name-bad", {"spec__containers__0__name": "App!"}),
    ("name-list", {"metadata__name": ["a"]}),
    ("name-mapping", {"metadata__name": {"a": 1}}),
    ("name-path", {"metadata__name": "../../x"}),
    ("namespace-path", {"metadata__namespace": "default/pods?x="}),
    ("annotation-int", {"metadata__annotations": {"a": 1}}),
    ("annotation-nested", {"metadata__annotations": {"a": {"b": [1, 2]}}}),
    ("numa-policy-bad", {"metadata__annotations": {"toposched.io/numa-policy": "sometimes"}}),
    ("labels-list", {"metadata__labels": ["x"]}),
    ("metadata-string", {"metadata": "x"}),
    ("spec-list", {"spec": [1]}),
    ("tolerations-string", {"spec__tolerations": "all"}),
    ("priority-string", {"spec__priority": "high"}),
    ("overhead-inf-text", {"spec__overhead": {"cpu": "1e999"}}),
]
RAW_BODIES: list[tuple[str, bytes]] = [
    ("not-json", b"this is not json"),
    ("empty", b""),
    ("json-nan", b'{"Pod": {"metadata": {"name": "x"}}, "NodeNames": ["a"], "x": NaN}'),
    ("cpu-1e400-number", b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "resources": '
                         b'{"limits": {"cpu": 1e400}}}]}}, "NodeNames": ["a"]}'),
    ("cpu-infinity", b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "resources": '
                     b'{"limits": {"cpu": Infinity}}}]}}, "NodeNames": ["a"]}'),
    ("int-5000-digits", b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "resources": '
                        b'{"limits": {"cpu": ' + b"9" * 5000 + b"}}}]}}, \"NodeNames\": [\"a\"]}"),
    ("deep-nesting", b'{"Pod": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    ("pod-null", b'{"Pod": null, "NodeNames": ["a"]}'),
    ("pod-list", b'{"Pod": [1, 2], "NodeNames": ["a"]}'),
    ("nodenames-string", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": "a"}'),
    ("nodenames-ints", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": [1, 2]}'),
    ("nodes-items-string", b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": "x"}}'),
    ("nodes-item-status-string", b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}}, '
                                 b'"Nodes": {"items": [{"metadata": {"name": "a"}, "status": "Ready"}]}}'),
    ("utf8-garbage", b"\xff\xfe\x00{"),
    ("array", b"[1, 2, 3]"),
    ("string", b'"filter me"'),
]

_NODES_NOT_READ = {"nodes-item-status-string"}


def _assert_refused(verb: str, response: Any) -> str:
    assert response.status_code != 500, response.text
    assert response.status_code in (200, 400, 413), (response.status_code, response.text)
    if response.status_code != 200:
        assert response.text and "\n" not in response.text.strip() and "Traceback" not in response.text
        return response.text
    body = response.json()
    if verb == "filter":
        passing = body.get("NodeNames") or [n["metadata"]["name"] for n in (body.get("Nodes") or {}).get("items", [])]
        failed = {**(body.get("FailedNodes") or {}), **(body.get("FailedAndUnresolvableNodes") or {})}
        assert not passing, body
        assert body.get("Error") or failed, body
        text = body.get("Error") or next(iter(failed.values()))
    elif verb == "prioritize":
        assert all(h["Score"] == 0 for h in body), body
        text = "scores 0"
    elif verb == "preempt":
        assert not body.get("NodeNameToMetaVictims"), body
        text = "no victims"
    else:
        assert body.get("Error"), body
        text = body["Error"]
    assert "Traceback" not in text and len(text) < 2000
    return text


@pytest.fixture(scope="module")
def world():
    return build()


@pytest.mark.parametrize("verb", ["filter", "prioritize", "preempt"])
@pytest.mark.parametrize(("name", "changes"), BAD_PODS, ids=[n for n, _ in BAD_PODS])
def test_bad_pod_is_refused_not_a_500(world, verb: str, name: str, changes: dict, caplog) -> None:
    pod = _pod(**changes)
    body = {"Pod": pod, "NodeNames": ["a", "f"]} if verb != "preempt" else {
        "Pod": pod, "NodeNameToMetaVictims": {"g": {"Pods": [{"UID": "uid-tiny-0"}], "NumPDBViolations": 0}}}
    response = world.http.post(f"/{verb}", content=json.dumps(body))
    _assert_refused(verb, response)
    assert not [r for r in caplog.records if r.levelname == "ERROR"], "refused by the catch-all: a bug"


@pytest.mark.parametrize("verb", ["filter", "prioritize", "bind", "preempt"])
@pytest.mark.parametrize(("name", "raw"), RAW_BODIES, ids=[n for n, _ in RAW_BODIES])
def test_malformed_body_is_refused_not_a_500(world, verb: str, name: str, raw: bytes, caplog) -> None:
    response = world.http.post(f"/{verb}", content=raw, headers={"content-type": "application/json"})
    assert not [r for r in caplog.records if r.levelname == "ERROR"], "refused by the catch-all: a bug"
    if name in _NODES_NOT_READ:  # toposched decides from its own cache, never from the request's Node objects
        assert response.status_code != 500, response.text
        return
    if verb == "prioritize" and response.status_code == 200:
        assert all(h["Score"] == 0 for h in response.json())
        return
    if verb == "preempt" and response.status_code == 200:
        assert not response.json().get("NodeNameToMetaVictims")
        return
    _assert_refused(verb, response)


BAD_BINDS = [
    ("namespace-query", {"PodName": "web-0", "PodNamespace": "default/pods?x=", "Node": "a"}, "PodNamespace"),
    ("namespace-dotdot", {"PodName": "web-0", "PodNamespace": "..", "Node": "a"}, "PodNamespace"),
    ("name-slash", {"PodName": "web-0/binding", "PodNamespace": "default", "Node": "a"}, "PodName"),
    ("name-query", {"PodName": "web-0?dryRun=All", "PodNamespace": "default", "Node": "a"}, "PodName"),
    ("name-percent", {"PodName": "web%2F0", "PodNamespace": "default", "Node": "a"}, "PodName"),
    ("name-upper", {"PodName": "Web-0", "PodNamespace": "default", "Node": "a"}, "PodName"),
    ("name-long", {"PodName": "a" * 300, "PodNamespace": "default", "Node": "a"}, "PodName"),
    ("node-slash", {"PodName": "web-0", "PodNamespace": "default", "Node": "a/../b"}, "Node"),
    ("node-space", {"PodName": "web-0", "PodNamespace": "default", "Node": "bad node"}, "Node"),
    ("uid-slash", {"PodName": "web-0", "PodNamespace": "default", "PodUID": "x/../y", "Node": "a"}, "PodUID"),
    ("name-int", {"PodName": 5, "PodNamespace": "default", "Node": "a"}, "PodName"),
    ("missing-node", {"PodName": "web-0", "PodNamespace": "default"}, "Node"),
]


@pytest.mark.parametrize(("name", "body", "field"), BAD_BINDS, ids=[n for n, _, _ in BAD_BINDS])
def test_bind_refuses_names_that_are_not_kubernetes_names(name: str, body: dict, field: str) -> None:
    world = build()
    calls: list[tuple] = []
    real_get = world.client.get

    def spy(resource, name, **kwargs):  # the API client must never see the request's text unvalidated
        calls.append((name, kwargs))
        return real_get(resource, name, **kwargs)

    world.client.get = spy  # type: ignore[method-assign]
    response = world.http.post("/bind", content=json.dumps(body))
    text = _assert_refused("bind", response)
    assert field in text, text
    assert not calls, calls
    assert world.client.get(PODS, "web-0", namespace="default")["spec"].get("nodeName") in (None, "")


def test_the_server_keeps_serving_good_requests_after_hostile_ones(world) -> None:
    for _, raw in RAW_BODIES:
        world.http.post("/filter", content=raw)
    good = {"Pod": world.request_pod("small-0"), "NodeNames": ["a", "f"]}
    answer = world.http.post("/filter", json=good).json()
    assert answer["NodeNames"] and not answer.get("Error")


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_memory_stays_flat_over_10000_malformed_requests() -> None:
    """10,000 malformed requests (bounded in count and time) through the app in-process (httpx's ASGI transport)."""
    world = build()
    bodies = [json.dumps({"Pod": _pod(**changes), "NodeNames": ["a", "f"]}).encode() for _, changes in BAD_PODS]
    bodies += [raw for _, raw in RAW_BODIES if len(raw) < 10_000]
    bodies += [json.dumps(b).encode() for _, b, _ in BAD_BINDS]
    verbs = ["filter", "prioritize", "preempt", "bind"]
    app = world.http.app

    async def run() -> tuple[int, int]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://extender") as http:
            async def send(i: int) -> None:
                response = await http.post(f"/{verbs[i % 4]}", content=bodies[i % len(bodies)])
                assert response.status_code != 500, response.text

            for i in range(500):  # warm up: caches, interned strings, the first allocations of every path
                await send(i)
            gc.collect()
            start = _rss()
            deadline = time.monotonic() + 240
            for i in range(10_000):  # bounded in count and time
                await send(i)
                if time.monotonic() > deadline:
                    pytest.fail(f"10,000 requests took more than 240 s (stopped at {i})")
            gc.collect()
            return start, _rss()

    start, end = asyncio.run(run())
    print(f"RSS before {start / 2**20:.1f} MiB, after 10,000 malformed requests {end / 2**20:.1f} MiB")
    assert end <= start * 1.2, (start, end)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(pod=mutated(_WORLD.request_pod("web-0")), verb=st.sampled_from(["filter", "prioritize", "preempt"]))
def test_fuzzed_pods_never_get_a_500(pod: Any, verb: str) -> None:
    body = {"Pod": pod, "NodeNames": ["a", "f"]} if verb != "preempt" else {
        "Pod": pod, "NodeNameToMetaVictims": {"g": {"Pods": [{"UID": "uid-tiny-0"}], "NumPDBViolations": 0}}}
    response = _WORLD.http.post(f"/{verb}", content=json.dumps(body, allow_nan=True))
    assert response.status_code in (200, 400), (response.status_code, response.text)
    assert "Traceback" not in response.text
