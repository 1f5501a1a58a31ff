"""The Reflector against kube-apiserver's watch cache: bookmarks, and a resourceVersion the server has not reached.

kube-apiserver serves watches from a window of recent events per resource (its watch cache: at
least 75 s of history, grown or evicted as events come). A watch from a version older than the
window is answered 410 ("too old resource version") and the client must list again. A list at a
version newer than the cache is waited for up to 3 s, then answered 504 ("too large resource
version"); a watch from such a version is held open until the server gets there.
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from tests.e2e.controlplane import ControlPlane
from tests.e2e.deploy import NAMESPACES, PODS_NAMESPACE
from tests.e2e.objects import pod_object
from toposched.cli.cluster_common import connect
from toposched.kube.client import CONFIGMAPS, PODS, Conflict, KubeClient, ObjectList, WatchEvent
from toposched.kube.informer import Reflector

pytestmark = pytest.mark.controlplane

QUIET, BUSY = "watch-quiet", "watch-busy"
#: kube-apiserver's shortest watch-cache window (DefaultEventFreshDuration), plus a margin.
HISTORY_WINDOW = 75.0 + 3.0
#: How often kube-apiserver sends a quiet watch a bookmark (its bookmarkFrequency).
BOOKMARK_PERIOD = 60.0
#: How far ahead of the server AheadList's list version is.
AHEAD = 20


class Seen:
    """What a Reflector's consumer was handed."""

    def __init__(self) -> None:
        self.relists: list[list[str]] = []
        self.events: list[tuple[str, str]] = []
        self.versions: list[int] = []

    def on_relist(self, items: list[dict]) -> None:
        self.relists.append(sorted(o["metadata"]["name"] for o in items))

    def on_event(self, event: WatchEvent) -> None:
        self.events.append((event.type, event.object["metadata"]["name"]))
        self.versions.append(int(event.object["metadata"]["resourceVersion"]))


def namespaces(admin: KubeClient, *names: str) -> None:
    for name in names:
        with contextlib.suppress(Conflict):  # kept from an earlier run: no namespace controller deletes namespaces
            admin.create(NAMESPACES, {"metadata": {"name": name}})


def watch_cache_capacity(plane: ControlPlane, resource: str) -> int:
    """kube-apiserver's current watch-cache capacity for ``resource``, from /metrics (``watch_cache_capacity``)."""
    with plane.admin_http() as http:
        text = http.get("/metrics").text
    for line in text.splitlines():
        if line.startswith("watch_cache_capacity{") and f'resource="{resource}"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    raise AssertionError(f"no watch_cache_capacity for {resource}")


def create_configmaps(admin: KubeClient, prefix: str, count: int) -> None:
    for i in range(count):
        admin.create(CONFIGMAPS, {"metadata": {"name": f"{prefix}-{i:04d}", "namespace": BUSY}, "data": {"i": str(i)}})


@pytest.mark.slow
def test_bookmarks_keep_a_quiet_watch_inside_the_servers_history(e2e):
    """Two Reflectors watch a namespace where nothing happens while another churns. Once the churn has pushed
    the quiet watch's list version out of kube-apiserver's window, the Reflector that asked for bookmarks
    resumes a dropped watch from the bookmark's version; the one that did not is answered 410 and lists again.

    kube-apiserver v1.37 sends a quiet watch a bookmark about once a minute (none before a short watch's
    timeout, as measured), so the bookmarking Reflector's watch lasts a little over a minute here.
    """
    namespaces(e2e.admin, QUIET, BUSY)
    e2e.plane.delete_all(CONFIGMAPS.path(BUSY))
    client = connect(e2e.plane.admin_kubeconfig(), "watch-test")
    try:
        seen = {True: Seen(), False: Seen()}
        reflectors = {b: Reflector(client, CONFIGMAPS, seen[b].on_event, seen[b].on_relist, namespace=QUIET,
                                   bookmarks=b, sleep=lambda s: None) for b in (True, False)}
        for reflector in reflectors.values():
            reflector.step()
        listed = int(reflectors[True].resource_version)
        create_configmaps(e2e.admin, "old", 10)
        old = time.monotonic()
        watching = threading.Thread(target=reflectors[True].step, args=(BOOKMARK_PERIOD + 10,))
        watching.start()  # quiet: nothing but a bookmark reaches it
        time.sleep(BOOKMARK_PERIOD - 10)
        create_configmaps(e2e.admin, "trigger", 1)  # before the bookmark, after the old events
        trigger = int(e2e.admin.get(CONFIGMAPS, "trigger-0000", namespace=BUSY)["metadata"]["resourceVersion"])
        watching.join()
        bookmarked = int(reflectors[True].resource_version)
        assert bookmarked >= trigger > listed and seen[True].events == []
        time.sleep(max(0.0, old + HISTORY_WINDOW - time.monotonic()))  # the old events leave the window
        # Fill the cache: the events older than the window are evicted first, so the list version is gone.
        create_configmaps(e2e.admin, "new", watch_cache_capacity(e2e.plane, "configmaps") + 10)
        for reflector in reflectors.values():
            reflector.step(2)  # a new watch: as after a dropped connection
        assert reflectors[True].lists == 1 and int(reflectors[True].resource_version) >= bookmarked
        assert reflectors[False].resource_version is None  # 410: too old
        reflectors[False].step()
        assert reflectors[False].lists == 2
        assert seen[True].events == seen[False].events == []
    finally:
        client.close()
        e2e.plane.delete_all(CONFIGMAPS.path(BUSY))


class AheadList:
    """A client whose first list answers a resourceVersion far ahead of the server (as another kube-apiserver
    ahead of this one would); everything else is the real server's."""

    def __init__(self, client: KubeClient, ahead: int):
        self.client, self.ahead = client, ahead

    def __getattr__(self, name: str):
        return getattr(self.client, name)

    def list(self, kind, **kwargs) -> ObjectList:
        listed = self.client.list(kind, **kwargs)
        ahead, self.ahead = self.ahead, 0
        return ObjectList(listed.items, str(int(listed.resource_version) + ahead))


def test_a_watch_from_a_version_the_server_has_not_reached_waits_for_it(e2e):
    """kube-apiserver v1.37 answers a list at a resourceVersion it has not reached with 504 "Too large resource
    version" (after waiting for it), but holds a watch from such a version open, without events, until it
    gets there. The Reflector keeps that version across empty watches, neither failing nor listing again,
    and is handed the first changes past it."""
    client = e2e.client("toposched-scheduler", "toposched-scheduler")
    seen, sleeps = Seen(), []
    reflector = Reflector(AheadList(client, AHEAD), PODS, seen.on_event, seen.on_relist, namespace=PODS_NAMESPACE,
                          sleep=sleeps.append)
    reflector.step()
    future = int(reflector.resource_version)
    with e2e.plane.admin_http() as http:
        answer = http.get(PODS.path(PODS_NAMESPACE), params={"resourceVersion": str(future)})
    assert answer.status_code == 504 and "Too large resource version" in answer.json()["message"]
    reflector.step(2)
    assert reflector.resource_version == str(future) and seen.events == []
    for i in range(AHEAD + 10):  # the server gets past that version
        e2e.admin.create(PODS, pod_object(f"p-{i:03d}", 1, namespace=PODS_NAMESPACE))
    reflector.step(3)
    assert seen.events and all(version > future for version in seen.versions)
    assert int(reflector.resource_version) > future and reflector.lists == 1 and sleeps == []
