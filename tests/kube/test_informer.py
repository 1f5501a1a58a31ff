"""Reflector: list, watch from the list's version, resume from the last version seen, relist on 410, back off.

The behaviour mirrors client-go's reflector (kubernetes/client-go tools/cache/reflector.go:
ListAndWatch lists, then watches from the list's resourceVersion; a watch that ends is resumed
from the last synced version; "too old resource version" (410) forces a relist; other
errors back off). Faults come from the MemoryClient's hooks and from a wrapper that drops a
watch stream after a few events.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kube.memory_client import MemoryClient
from toposched.kube.client import NODES, PODS, ServerError, WatchEvent
from toposched.kube.informer import TOO_LARGE_RELIST_AFTER, Backoff, Reflector


class View:
    """What a consumer keeps: objects by name, how many relists, and the versions of events since the last one."""

    def __init__(self) -> None:
        self.objects: dict[str, dict] = {}
        self.relists = 0
        self.versions: list[int] = []
        self.events: list[tuple[str, str]] = []

    def on_relist(self, items: list[dict]) -> None:
        self.objects = {o["metadata"]["name"]: o for o in items}
        self.relists += 1
        self.versions = []

    def on_event(self, event: WatchEvent) -> None:
        name = event.object["metadata"]["name"]
        self.events.append((event.type, name))
        self.versions.append(int(event.object["metadata"]["resourceVersion"]))
        if event.type == "DELETED":
            self.objects.pop(name, None)
        else:
            self.objects[name] = event.object


class DroppingClient:
    """Delegates to a MemoryClient; the next watch stream breaks (raises) after ``drop_after`` events."""

    def __init__(self, store: MemoryClient):
        self.store = store
        self.drop_after: int | None = None
        self.watches = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def watch(self, kind, **kwargs: Any) -> Iterator[WatchEvent]:
        self.watches += 1
        stream = self.store.watch(kind, **kwargs)
        limit, self.drop_after = self.drop_after, None
        return self._dropping(stream, limit)

    @staticmethod
    def _dropping(stream: Iterator[WatchEvent], limit: int | None) -> Iterator[WatchEvent]:
        for delivered, event in enumerate(stream):
            if limit is not None and delivered == limit:
                raise ServerError("connection reset by peer", code=503)
            yield event


def node(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": labels}}


def reflector(client, view: View, sleeps: list[float], **kwargs: Any) -> Reflector:
    return Reflector(client, NODES, view.on_event, view.on_relist, sleep=sleeps.append, **kwargs)


def test_backoff_grows_caps_and_resets():
    backoff = Backoff(initial=0.5, maximum=3, factor=2)
    assert [backoff.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3, 3]
    backoff.reset()
    assert backoff.next() == 0.5
    with pytest.raises(ValueError):
        Backoff(initial=2, maximum=1)


def test_lists_then_watches_from_the_list_version(memory_client):
    memory_client.create(NODES, node("n1"))
    view, sleeps = View(), []
    r = reflector(memory_client, view, sleeps)
    assert not r.synced
    r.step(0)
    assert r.synced and view.relists == 1 and set(view.objects) == {"n1"}
    assert r.resource_version == memory_client.resource_version
    memory_client.create(NODES, node("n2"))
    memory_client.delete(NODES, "n1")
    r.step(0)
    assert view.events == [("ADDED", "n2"), ("DELETED", "n1")]
    assert set(view.objects) == {"n2"} and r.resource_version == memory_client.resource_version
    assert sleeps == []


def test_relists_after_gone_and_sees_deletions_it_missed(memory_client):
    memory_client.create(NODES, node("n1"))
    memory_client.create(NODES, node("n2"))
    view, sleeps = View(), []
    r = reflector(memory_client, view, sleeps)
    r.step(0)
    memory_client.delete(NODES, "n1")
    memory_client.create(NODES, node("n3"))
    memory_client.compact()
    r.step(0)  # the watch gets 410
    assert r.resource_version is None and view.relists == 1
    r.step(0)
    assert view.relists == 2 and set(view.objects) == {"n2", "n3"}
    assert sleeps == []  # a relist after 410 is not a failure
    memory_client.create(NODES, node("n4"))
    r.step(0)
    assert view.events == [("ADDED", "n4")]


def test_a_dropped_stream_resumes_without_losing_or_repeating_events(memory_client):
    client = DroppingClient(memory_client)
    view, sleeps = View(), []
    r = reflector(client, view, sleeps)
    r.step(0)
    for i in range(5):
        memory_client.create(NODES, node(f"n{i}"))
    client.drop_after = 2
    r.step(0)
    assert view.events == [("ADDED", "n0"), ("ADDED", "n1")]
    assert sleeps == [0.5] and isinstance(r.last_error, ServerError)
    r.step(0)
    assert [name for _, name in view.events] == ["n0", "n1", "n2", "n3", "n4"]
    assert view.relists == 1 and r.last_error is None


def test_server_errors_back_off_and_then_recover(memory_client):
    view, sleeps = View(), []
    r = reflector(memory_client, view, sleeps, backoff=Backoff(initial=1, maximum=4, factor=2))
    memory_client.fail_next("list", NODES, ServerError("etcd timeout"), times=4)
    for _ in range(5):
        r.step(0)
    assert sleeps == [1, 2, 4, 4] and r.synced
    memory_client.fail_next("watch", NODES, ServerError("overloaded", code=503), times=2)
    memory_client.create(NODES, node("n1"))
    for _ in range(3):
        r.step(0)
    assert sleeps == [1, 2, 4, 4, 1, 2]  # the successful list reset the backoff
    assert view.events == [("ADDED", "n1")]


def test_bookmarks_move_the_version_without_reaching_the_consumer():
    class Bookmarking:
        def list(self, kind, **kw):
            return MemoryClient().list(kind)

        def watch(self, kind, **kw):
            yield WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "42"}})

    view = View()
    r = Reflector(Bookmarking(), NODES, view.on_event, view.on_relist, sleep=lambda s: None)
    r.step(0)
    r.step(0)
    assert r.resource_version == "42" and view.events == []


def test_watches_ask_for_bookmarks_unless_told_not_to(memory_client):
    asked = []

    class Recording(DroppingClient):
        def watch(self, kind, **kw):
            asked.append(kw["allow_bookmarks"])
            return super().watch(kind, **kw)

    for bookmarks in (True, False):
        r = Reflector(Recording(memory_client), NODES, View().on_event, View().on_relist, sleep=lambda s: None,
                      bookmarks=bookmarks)
        r.step(0)
        r.step(0)
    assert asked == [True, False]


def too_large(version: int) -> ServerError:
    return ServerError(f"Too large resource version: {version}, current: 12", code=504)


def test_a_version_the_server_has_not_reached_is_retried_from_the_same_version(memory_client):
    memory_client.create(NODES, node("n1"))
    view, sleeps = View(), []
    r = reflector(memory_client, view, sleeps)
    r.step(0)
    version = r.resource_version
    memory_client.fail_next("watch", NODES, too_large(int(version)), times=TOO_LARGE_RELIST_AFTER - 1)
    for _ in range(TOO_LARGE_RELIST_AFTER - 1):
        r.step(0)
        assert r.resource_version == version  # kept: a lagging server catches up
    memory_client.create(NODES, node("n2"))
    r.step(0)
    assert view.relists == 1 and view.events == [("ADDED", "n2")]
    assert sleeps == [0.5, 1.0]


def test_a_version_the_server_keeps_refusing_as_too_large_means_one_relist(memory_client):
    memory_client.create(NODES, node("n1"))
    view, sleeps = View(), []
    r = reflector(memory_client, view, sleeps)
    r.step(0)
    memory_client.fail_next("watch", NODES, too_large(10**9), times=TOO_LARGE_RELIST_AFTER)
    for _ in range(TOO_LARGE_RELIST_AFTER):
        r.step(0)
    assert r.resource_version is None  # a history the server does not have (e.g. restored from a backup)
    r.step(0)
    assert view.relists == 2 and r.resource_version == memory_client.resource_version
    memory_client.create(NODES, node("n2"))
    r.step(0)
    assert view.events == [("ADDED", "n2")] and len(sleeps) == TOO_LARGE_RELIST_AFTER


def test_selectors_reach_the_server(memory_client):
    memory_client.create(PODS, {"metadata": {"name": "a"}, "spec": {"schedulerName": "toposched"}})
    memory_client.create(PODS, {"metadata": {"name": "b"}, "spec": {"schedulerName": "default-scheduler"}})
    view = View()
    r = Reflector(memory_client, PODS, view.on_event, view.on_relist, namespace="default",
                  field_selector="spec.schedulerName=toposched", sleep=lambda s: None)
    r.step(0)
    assert set(view.objects) == {"a"}


def test_run_until_stopped(memory_client):
    view = View()
    r = Reflector(memory_client, NODES, view.on_event, view.on_relist)
    stop = threading.Event()
    thread = threading.Thread(target=r.run, args=(stop,), kwargs={"watch_timeout": 0.05}, daemon=True)
    thread.start()
    memory_client.create(NODES, node("n1"))
    seen = threading.Event()
    original = view.on_event

    def on_event(event: WatchEvent) -> None:
        original(event)
        seen.set()

    r.on_event = on_event
    memory_client.create(NODES, node("n2"))
    assert seen.wait(timeout=5)
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert set(view.objects) == {"n1", "n2"}


def test_stopping_interrupts_a_backoff_wait(memory_client):
    view = View()
    r = Reflector(memory_client, NODES, view.on_event, view.on_relist, backoff=Backoff(initial=3600, maximum=3600))
    memory_client.fail_next("list", NODES, ServerError("down"), times=1000)
    stop = threading.Event()
    thread = threading.Thread(target=r.run, args=(stop,), daemon=True)
    thread.start()
    while not memory_client.requests:
        threading.Event().wait(0.01)
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive() and not r.synced


def test_over_http_a_compacted_history_means_a_relist(fake_server, http_client):
    store = fake_server.store
    store.create(NODES, node("n1"))
    view, sleeps = View(), []
    r = reflector(http_client, view, sleeps)
    r.step(1)
    store.create(NODES, node("n2"))
    r.step(0.2)
    assert view.events == [("ADDED", "n2")]
    store.delete(NODES, "n1")
    store.compact()
    r.step(0.2)
    assert r.resource_version is None
    r.step(0.2)
    assert view.relists == 2 and set(view.objects) == {"n2"} and sleeps == []


operations = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.integers(0, 5)),
        st.tuples(st.just("update"), st.integers(0, 5)),
        st.tuples(st.just("delete"), st.integers(0, 5)),
        st.tuples(st.just("compact"), st.just(0)),
        st.tuples(st.just("drop"), st.integers(0, 3)),
        st.tuples(st.just("fail"), st.integers(1, 2)),
        st.tuples(st.just("step"), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(operations)
def test_the_consumer_view_converges_whatever_the_faults(ops):
    store = MemoryClient(clock=lambda: 0.0)
    client = DroppingClient(store)
    view, sleeps = View(), []
    r = reflector(client, view, sleeps)
    for op, arg in ops:
        name = f"n{arg}"
        if op == "create" and not store.contains(NODES, name):
            store.create(NODES, node(name))
        elif op == "update" and store.contains(NODES, name):
            store.patch(NODES, name, {"metadata": {"labels": {"v": str(len(store.requests))}}})
        elif op == "delete" and store.contains(NODES, name):
            store.delete(NODES, name)
        elif op == "compact":
            store.compact()
        elif op == "drop":
            client.drop_after = arg
        elif op == "fail":
            store.fail_next("watch", NODES, ServerError("boom"), times=arg)
        elif op == "step":
            r.step(0)
        # Between relists, events arrive once each and in resourceVersion order.
        assert view.versions == sorted(set(view.versions))
    for _ in range(200):  # enough steps to use up every injected failure
        if r.synced and r.resource_version == store.resource_version:
            break
        r.step(0)
    expected = {o["metadata"]["name"]: o for o in store.list(NODES).items}
    assert view.objects == expected
    assert r.resource_version == store.resource_version
