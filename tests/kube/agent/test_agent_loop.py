"""The agent loop against the in-memory API server: publish on change and every interval, enforce, survive faults.

NFD's topology updater publishes on every ``-sleep-interval`` (default 60 s) and on change
(docs/usage/nfd-topology-updater.md of kubernetes-sigs/node-feature-discovery); the agent
applies its report the same way, by server-side apply as field manager ``toposched-agent``.
"""

from __future__ import annotations

import threading

import pytest

from tests.fixtures.sysfs_tree import two_socket_smt, write_sysfs_tree
from tests.kube.agent.agent_fakes import NODE, CgroupTree, make_pod, placement, read, write_kubelet_dir
from toposched.kube.agent.loop import FIELD_MANAGER, Agent
from toposched.kube.client import NRTS, PODS, NotFound, ServerError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def node(tmp_path):
    sysfs = write_sysfs_tree(tmp_path / "sysfs", two_socket_smt())
    kubelet = write_kubelet_dir(tmp_path / "kubelet")
    tree = CgroupTree(tmp_path / "cgroup", version=2, driver="systemd")
    return sysfs, kubelet, tree


def make_agent(client, node, clock, **kwargs):
    sysfs, kubelet, tree = node
    return Agent(client, NODE, sysfs_root=sysfs, kubelet_dir=kubelet, cgroup_root=tree.root, clock=clock,
                 interval=60.0, **kwargs)


def create_placed_pod(client, tree, name="web", cpuset="4-5"):
    note = placement({"app": {"cpuset": cpuset, "numaNodes": [1]}})
    created = client.create(PODS, make_pod(name, "", annotation=note))
    return tree.add_pod(created)["app"]


def applies(client):
    return sum(1 for verb, kind, _ in client.requests if verb == "apply" and kind == NRTS)


def test_publishes_once_then_on_change_and_every_interval(memory_client, node):
    clock = Clock()
    tree = node[2]
    app = create_placed_pod(memory_client, tree)
    agent = make_agent(memory_client, node, clock)

    first = agent.step()
    assert first.published and not first.errors
    stored = memory_client.get(NRTS, NODE)
    assert stored["zones"] == first.report["zones"] and stored["attributes"] == first.report["attributes"]
    assert "ownerReferences" not in stored["metadata"]
    assert {e["manager"] for e in stored["metadata"]["managedFields"]} == {FIELD_MANAGER}
    assert read(app, "cpuset.cpus") == "4-5" and read(app, "cpuset.mems") == "1"

    clock.now += 10
    second = agent.step()
    assert not second.published and second.actions == [] and applies(memory_client) == 1

    (app / "cpuset.cpus").write_text("0-15\n")  # drift
    memory_client.create(PODS, make_pod("other", ""))  # a new pod on the node changes the fingerprint
    clock.now += 10
    third = agent.step()
    assert third.published and applies(memory_client) == 2
    assert [(a.file, a.new) for a in third.actions] == [("cpuset.cpus", "4-5")]
    assert read(app, "cpuset.cpus") == "4-5"

    clock.now += 59
    assert not agent.step().published
    clock.now += 1
    assert agent.step().published and applies(memory_client) == 3


def test_coexistence_with_nfd_only_enforces(memory_client, node):
    app = create_placed_pod(memory_client, node[2])
    step = make_agent(memory_client, node, Clock(), publish=False).step()
    assert step.report is None and not step.published
    with pytest.raises(NotFound):
        memory_client.get(NRTS, NODE)
    assert read(app, "cpuset.cpus") == "4-5"


def test_dry_run_writes_nothing_anywhere(memory_client, node):
    tree = node[2]
    create_placed_pod(memory_client, tree)
    before = tree.snapshot()
    step = make_agent(memory_client, node, Clock(), dry_run=True).step()
    assert step.report is not None and not step.published
    assert [a.new for a in step.actions] == ["4-5", "1"] and not any(a.applied for a in step.actions)
    assert tree.snapshot() == before
    with pytest.raises(NotFound):
        memory_client.get(NRTS, NODE)


def test_api_faults_are_logged_and_retried(memory_client, node, caplog):
    tree = node[2]
    app = create_placed_pod(memory_client, tree)
    agent = make_agent(memory_client, node, Clock())
    memory_client.fail_next("list", PODS, ServerError("etcd is down"))
    step = agent.step()
    assert step.errors == ["cannot list the node's pods: 500 InternalError: etcd is down"]
    assert step.actions == [] and not step.published
    assert "etcd is down" in caplog.text

    memory_client.fail_next("apply", NRTS, ServerError("try later"))
    step = agent.step()
    assert not step.published and step.errors and read(app, "cpuset.cpus") == "4-5"
    assert agent.step().published  # same report, but it never reached the server


def test_unreadable_kubelet_files(memory_client, node):
    sysfs, kubelet, tree = node
    app = create_placed_pod(memory_client, tree)
    (kubelet / "config.yaml").write_text("kind: Pod\n")
    step = make_agent(memory_client, node, Clock()).step()
    # No report without the kubelet's configuration; enforcement does not need it.
    assert step.report is None and str(kubelet / "config.yaml") in step.errors[0]
    assert read(app, "cpuset.cpus") == "4-5"

    write_kubelet_dir(kubelet)
    (app / "cpuset.cpus").write_text("\n")
    (kubelet / "cpu_manager_state").write_text("{broken")
    step = make_agent(memory_client, node, Clock()).step()
    # Without the CPU manager checkpoint the agent cannot tell the kubelet's CPUs: it does nothing.
    assert step.report is None and step.actions == []
    assert str(kubelet / "cpu_manager_state") in step.errors[0]
    assert read(app, "cpuset.cpus") == ""


def test_run_steps_until_stopped(memory_client, node):
    stop = threading.Event()

    def clock():
        stop.set()  # the first step asks the time; the loop then ends without waiting
        return 0.0

    make_agent(memory_client, node, clock).run(stop)
    assert memory_client.get(NRTS, NODE)["metadata"]["name"] == NODE


def test_republishing_keeps_the_controllers_zone_attributes(memory_client, node):
    import json

    from toposched.kube.controller import OWNED_ANNOTATION

    clock = Clock()
    agent = make_agent(memory_client, node, clock)
    assert agent.step().published
    obj = memory_client.get(NRTS, NODE)
    obj["zones"][1].setdefault("attributes", []).append({"name": "toposched.io/cpu-capacity", "value": "6"})
    obj["metadata"].setdefault("annotations", {})[OWNED_ANNOTATION] = json.dumps({obj["zones"][1]["name"]: ["toposched.io/cpu-capacity"]})
    obj["metadata"].pop("managedFields", None)
    memory_client.apply(NRTS, obj, field_manager="toposched-controller", force=True)
    clock.now += 61  # the interval passes: the agent applies its report again
    assert agent.step().published
    zone = memory_client.get(NRTS, NODE)["zones"][1]
    assert {"name": "toposched.io/cpu-capacity", "value": "6"} in zone["attributes"]


def test_devices_and_their_holders_come_from_the_kubelets_podresources_api(memory_client, node, tmp_path, caplog):
    import json

    from tests.kube.agent.podresources_fakes import GPU, VF, FakeKubelet
    from toposched.kubelet.description import (
        ALLOCATIONS_ATTRIBUTE,
        DESCRIPTION_ATTRIBUTE,
        NodeAllocations,
        NodeDescription,
    )

    socket = tmp_path / "kubelet.sock"
    with FakeKubelet(socket):
        agent = make_agent(memory_client, node, Clock(), podresources_socket=socket, host_root=tmp_path / "host")
        step = agent.step()
    assert step.published and not step.errors
    attributes = {a["name"]: a["value"] for a in step.report["attributes"]}
    description = NodeDescription.from_json(attributes[DESCRIPTION_ATTRIBUTE])
    # Ids exactly as the plugins name them; NUMA nodes from the API (no PCI device of this machine matches).
    assert [(d.resource, d.id, d.numa_id, d.pcie_path) for d in description.devices] == [
        *(("nvidia.com/gpu", gpu, i // 2, ()) for i, gpu in enumerate(GPU)),
        *(("intel.com/sriov_netdevice", vf, 0 if vf.startswith("0000:3b") else 1, ()) for vf in VF)]
    held = NodeAllocations.from_json(attributes[ALLOCATIONS_ATTRIBUTE]).devices()
    assert held == {"nvidia.com/gpu": set(GPU), "intel.com/sriov_netdevice": {VF[0]}}
    zones = {z["name"]: {r["name"]: (r["capacity"], r["available"]) for r in z["resources"]} for z in step.report["zones"]}
    assert zones["node-0"]["intel.com/sriov_netdevice"] == ("2", "1")
    assert zones["node-1"]["nvidia.com/gpu"] == ("2", "0")
    json.dumps(step.report)


def test_without_the_podresources_socket_the_agent_says_so_once(memory_client, node, tmp_path, caplog):
    agent = make_agent(memory_client, node, Clock(), podresources_socket=tmp_path / "missing.sock")
    with caplog.at_level("WARNING"):
        first, second = agent.step(), agent.step()
    assert first.report is not None and second.report is not None
    assert sum("podresources API cannot be read" in r.message for r in caplog.records) == 1
