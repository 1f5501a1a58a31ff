"""The node agent and the controller against the real control plane, each as its own ServiceAccount.

The agent reads a fixture sysfs tree and kubelet directory, lists its node's pods with the
``spec.nodeName`` field selector, publishes its NodeResourceTopology by server-side apply
(the CRD's schema validates and prunes it), takes the object over from an NFD-style writer of
the same NRT, and writes the placed container's cpuset into a temporary cgroup tree. The
controller merges zone attributes from deploy/'s ConfigMap while the agent keeps publishing.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.e2e.conftest import NAMESPACE, PODS_NAMESPACE
from tests.e2e.objects import wait_for
from tests.fixtures.sysfs_tree import two_socket_smt, write_sysfs_tree
from tests.kube.agent.agent_fakes import CgroupTree, container_id, placement, read, write_kubelet_dir
from toposched.kube.agent.loop import FIELD_MANAGER, Agent
from toposched.kube.client import CONFIGMAPS, NRTS, PODS
from toposched.kube.controller import ConfigMapSource, Controller
from toposched.scheduler.placement import PLACEMENT_ANNOTATION
from toposched.topology.nrt import parse_nrt

pytestmark = pytest.mark.controlplane

NODE = "worker-1"
CAPACITY = "toposched.io/cpu-capacity"


@pytest.fixture
def node(tmp_path):
    """The node's files: sysfs, the kubelet's directory and its cgroup tree."""
    sysfs = write_sysfs_tree(tmp_path / "sysfs", two_socket_smt())
    kubelet = write_kubelet_dir(tmp_path / "kubelet")
    return sysfs, kubelet, CgroupTree(tmp_path / "cgroup", version=2, driver="systemd")


def make_agent(e2e, node) -> Agent:
    sysfs, kubelet, tree = node
    client = e2e.client("toposched-agent", FIELD_MANAGER)
    return Agent(client, NODE, sysfs_root=sysfs, kubelet_dir=kubelet, cgroup_root=tree.root, clock=time.monotonic,
                 interval=60.0, period=0.2)


def running_placed_pod(e2e, name: str, cpuset: str) -> dict:
    """A Guaranteed pod bound to the node with a placement, its container started (status as the kubelet writes it)."""
    note = placement({"app": {"cpuset": cpuset, "numaNodes": [1]}}, node=NODE)
    e2e.admin.create(PODS, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": PODS_NAMESPACE, "annotations": {PLACEMENT_ANNOTATION: note}},
        "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                                   "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}})
    cid = container_id(f"{name}/app")
    status = {"status": {"phase": "Running", "containerStatuses": [{
        "name": "app", "image": "registry.k8s.io/pause:3.10", "imageID": "", "containerID": f"containerd://{cid}",
        "ready": True, "started": True, "restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}}
    with e2e.plane.admin_http() as http:  # the kubelet's status write
        response = http.patch(f"/api/v1/namespaces/{PODS_NAMESPACE}/pods/{name}/status", json=status,
                              headers={"Content-Type": "application/merge-patch+json"})
    response.raise_for_status()
    return response.json()


def test_the_agent_publishes_by_server_side_apply_and_enforces_cpusets(e2e, node):
    tree = node[2]
    pod = running_placed_pod(e2e, "pinned", "4-5")
    app = tree.add_pod(pod, qos="guaranteed")["app"]
    agent = make_agent(e2e, node)
    step = agent.step()
    assert step.errors == [] and step.published
    stored = e2e.admin.get(NRTS, NODE)
    assert [m["manager"] for m in stored["metadata"]["managedFields"]] == [FIELD_MANAGER]
    assert stored["metadata"]["managedFields"][0]["operation"] == "Apply"
    view = parse_nrt(stored)
    assert view.name == NODE and sorted(z.name for z in view.zones) == ["node-0", "node-1"]
    assert read(app, "cpuset.cpus") == "4-5"
    assert {a.kind for a in step.actions if a.applied} == {"write"}
    assert not agent.step().published  # unchanged: not applied again before the interval


def test_the_agent_takes_over_an_nrt_an_nfd_style_writer_made(e2e, node):
    """node-feature-discovery's topology updater creates and updates the whole object (get, set zones, update)."""
    foreign = {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
               "metadata": {"name": NODE}, "topologyPolicies": ["None"],
               "zones": [{"name": "node-0", "type": "Node",
                          "resources": [{"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"}]}]}
    e2e.admin.create(NRTS, foreign)
    agent = make_agent(e2e, node)
    assert agent.step().published
    stored = e2e.admin.get(NRTS, NODE)
    assert sorted(z["name"] for z in stored["zones"]) == ["node-0", "node-1"]
    managers = {m["manager"]: m["operation"] for m in stored["metadata"]["managedFields"]}
    assert managers[FIELD_MANAGER] == "Apply"
    # NFD writes again (a whole-object update from what it read): the next publish takes its fields back
    current = e2e.admin.get(NRTS, NODE)
    current["zones"] = foreign["zones"]
    e2e.admin.replace(NRTS, current)
    agent._published = None  # noqa: SLF001 - the report did not change; force the next step to apply it
    assert agent.step().published
    assert sorted(z["name"] for z in e2e.admin.get(NRTS, NODE)["zones"]) == ["node-0", "node-1"]


def test_the_controller_merges_zone_attributes_while_the_agent_keeps_publishing(e2e, node):
    agent = make_agent(e2e, node)
    assert agent.step().published
    document = f"{NODE}:\n  node-1:\n    {CAPACITY}: '6'\n"
    e2e.admin.patch(CONFIGMAPS, "toposched-zone-attributes", {"data": {"zone-attributes.yaml": document}},
                    namespace=NAMESPACE)
    client = e2e.client("toposched-controller", "toposched-controller")
    controller = Controller(client, ConfigMapSource(client, NAMESPACE, "toposched-zone-attributes"),
                            clock=time.monotonic, source_interval=0.5)
    stop = threading.Event()
    threads = [threading.Thread(target=controller.run, args=(stop,), kwargs={"watch_timeout": 1.0})]

    def publish_often() -> None:  # the agent re-applying its whole report (zones are an atomic list)
        while not stop.is_set():
            agent._published = None  # noqa: SLF001 - apply on every step, as after a report change
            agent.step()
            stop.wait(0.05)

    threads.append(threading.Thread(target=publish_often))
    for thread in threads:
        thread.start()
    try:
        wait_for("the controller's attribute", lambda: _capacity(e2e) == "6", timeout=30)
        time.sleep(2)  # a few dozen agent publications later
        assert _capacity(e2e) == "6"
    finally:
        e2e.admin.patch(CONFIGMAPS, "toposched-zone-attributes", {"data": {"zone-attributes.yaml": "{}\n"}},
                        namespace=NAMESPACE)
        stop.set()
        for thread in threads:
            thread.join(30)
    view = parse_nrt(e2e.admin.get(NRTS, NODE))
    assert {z.name for z in view.zones} == {"node-0", "node-1"}


def _capacity(e2e) -> str | None:
    for zone in e2e.admin.get(NRTS, NODE)["zones"]:
        if zone["name"] == "node-1":
            return {a["name"]: a["value"] for a in zone.get("attributes") or []}.get(CAPACITY)
    return None
