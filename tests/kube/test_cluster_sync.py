"""ClusterSync: watched Nodes, reports and pods become the scheduler's cluster, ledger included."""

import json

import pytest

from toposched.kube.client import WatchEvent
from toposched.kube.cluster_sync import ClusterSync
from toposched.kubelet import KubeletConfig
from toposched.node_report import node_report
from toposched.scheduler import Cluster, Scheduler
from toposched.scheduler.placement import PLACEMENT_ANNOTATION
from toposched.scheduler.profile_setup import load_profile
from toposched.topology import CPUSet, Device, DeviceKind, Machine
from toposched.workload import Pod

GI = 2**30


def machine(numa=2, cores=4) -> Machine:
    total = numa * cores
    rows = [{"cpu": c + t * total, "core": c, "socket": c // cores, "numa": c // cores} for t in range(2) for c in range(total)]
    return Machine.from_cpu_table(rows, memory_per_numa=32 * GI,
                                  distances={a: {b: 10 if a == b else 21 for b in range(numa)} for a in range(numa)})


def node_obj(name, **spec):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "spec": spec, "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}}


def nrt_obj(name):
    """The node's report as the agent publishes it: the kubelet runs the static CPU manager, CPUs 0 and 8 reserved."""
    config = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                           reserved_system_cpus=CPUSet([0, 8]))
    return node_report(machine(), config, node_name=name)


def pod_obj(name, cpus, *, node="", scheduler="toposched", annotations=None, phase="Pending", uid=None):
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}", "annotations": annotations or {}},
        "spec": {"schedulerName": scheduler, "nodeName": node,
                 "containers": [{"name": "c", "resources": {"limits": {"cpu": str(cpus), "memory": "1Gi"}}}]},
        "status": {"phase": phase},
    }


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def make_sync():
    scheduler = Scheduler(Cluster(), load_profile("toposched"))
    return ClusterSync(scheduler, clock=Clock())


def test_relists_make_nodes_reports_and_pending_pods_and_then_it_is_ready():
    sync = make_sync()
    assert not sync.ready
    sync.relist_nodes([node_obj("a"), node_obj("b")])
    sync.relist_nrts([nrt_obj("a"), nrt_obj("b")])
    sync.relist_pods([pod_obj("p1", 2), pod_obj("other", 2, scheduler="default-scheduler")])
    assert sync.ready
    assert set(sync.cluster.nodes) == {"a", "b"}
    assert all(r.model is not None for r in sync.cluster.nodes.values())
    assert [p.name for p in sync.pending()] == ["p1"]


def test_on_ready_is_called_once_when_the_last_kind_is_first_listed():
    sync = make_sync()
    calls = []
    sync.on_ready = lambda: calls.append(sorted(sync.cluster.nodes))
    sync.relist_nodes([node_obj("a")])
    sync.relist_pods([])
    assert calls == []
    sync.relist_nrts([nrt_obj("a")])
    assert calls == [["a"]]
    sync.relist_nodes([node_obj("a"), node_obj("b")])  # a relist after a 410 is not a second start
    sync.relist_pods([])
    assert calls == [["a"]]


def test_a_scheduled_pod_leaves_pending_and_its_bound_event_keeps_the_reservation():
    sync = make_sync()
    sync.relist_nodes([node_obj("a")])
    sync.relist_nrts([nrt_obj("a")])
    sync.relist_pods([pod_obj("p1", 2)])
    pod = sync.pending()[0]
    decision = sync.scheduler.schedule(pod, now=0)
    assert decision.node == "a" and sync.pending() == []
    bound = pod_obj("p1", 2, node="a", annotations=decision.placement.annotations())
    sync.on_pod(WatchEvent("MODIFIED", bound))
    entry = sync.cluster.nodes["a"].pods["uid-p1"]
    assert entry.placement.cpuset == decision.placement.cpuset
    sync.on_pod(WatchEvent("DELETED", bound))
    assert "uid-p1" not in sync.cluster.pod_node


def test_after_a_restart_bound_pods_get_the_cpus_their_annotations_name():
    first = make_sync()
    first.relist_nodes([node_obj("a")])
    first.relist_nrts([nrt_obj("a")])
    first.relist_pods([pod_obj(f"p{i}", 2) for i in range(4)])
    bound = []
    for pod in first.pending():
        d = first.scheduler.schedule(pod, now=0)
        bound.append(pod_obj(pod.name, 2, node="a", annotations=d.placement.annotations()))
    # a new process: pods arrive in an order other than the one they were placed in
    second = make_sync()
    second.relist_nodes([node_obj("a")])
    second.relist_nrts([nrt_obj("a")])
    second.relist_pods(list(reversed(bound)))
    for obj in bound:
        want = json.loads(obj["metadata"]["annotations"][PLACEMENT_ANNOTATION])["containers"]["c"]["cpuset"]
        got = second.cluster.nodes["a"].pods[obj["metadata"]["uid"]].placement.cpuset
        assert got == CPUSet.parse(want)
    owned = [e.placement.cpuset for e in second.cluster.nodes["a"].pods.values()]
    seen: set[int] = set()
    for cpus in owned:
        assert seen.isdisjoint(cpus)
        seen |= set(cpus)
    # the next pod is placed on CPUs nobody holds
    second.relist_pods(bound + [pod_obj("new", 2)])
    d = second.scheduler.schedule(second.pending()[0], now=1)
    assert seen.isdisjoint(d.placement.cpuset)


def test_foreign_pods_are_admitted_and_a_pod_bound_before_its_node_is_known_waits():
    sync = make_sync()
    sync.relist_pods([pod_obj("foreign", 3, node="a", scheduler="default-scheduler")])
    assert "uid-foreign" not in sync.cluster.pod_node
    sync.relist_nodes([node_obj("a")])
    sync.relist_nrts([nrt_obj("a")])
    assert sync.cluster.pod_node["uid-foreign"] == "a"
    assert sync.cluster.nodes["a"].requested["cpu"] == 3000


def test_finished_pods_free_their_node():
    sync = make_sync()
    sync.relist_nodes([node_obj("a")])
    sync.relist_nrts([nrt_obj("a")])
    sync.relist_pods([pod_obj("job", 2, node="a")])
    sync.on_pod(WatchEvent("MODIFIED", pod_obj("job", 2, node="a", phase="Succeeded")))
    assert "uid-job" not in sync.cluster.pod_node
    assert sync.cluster.nodes["a"].requested.get("cpu", 0) == 0


def test_a_bad_report_makes_only_its_node_unschedulable_and_a_good_one_heals_it():
    sync = make_sync()
    sync.relist_nodes([node_obj("a"), node_obj("b")])
    bad = nrt_obj("b")
    bad["zones"][0]["resources"][0]["available"] = "-4"
    sync.relist_nrts([nrt_obj("a"), bad])
    assert sync.cluster.nodes["b"].broken and not sync.cluster.nodes["a"].broken
    sync.relist_pods([pod_obj(f"p{i}", 2) for i in range(3)])
    for pod in sync.pending():
        assert sync.scheduler.schedule(pod, now=0).node == "a"
    sync.on_nrt(WatchEvent("MODIFIED", nrt_obj("b")))
    assert not sync.cluster.nodes["b"].broken


def test_a_malformed_pod_is_recorded_as_invalid_and_the_others_stay_pending():
    sync = make_sync()
    sync.relist_nodes([node_obj("a")])
    sync.relist_nrts([nrt_obj("a")])
    bad = pod_obj("bad", 2)
    bad["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "lots"
    sync.relist_pods([bad, pod_obj("good", 1)])
    assert [p.name for p in sync.pending()] == ["good"]
    assert "default/bad" in sync.invalid and "cpu" in sync.invalid["default/bad"]


def test_relist_drops_deleted_nodes_and_pods_and_tells_listeners():
    sync = make_sync()
    heard = []
    sync.listeners.append(lambda kind, kind_event, name: heard.append((kind, kind_event, name)))
    sync.relist_nodes([node_obj("a"), node_obj("b")])
    sync.relist_nrts([nrt_obj("a"), nrt_obj("b")])
    sync.relist_pods([pod_obj("x", 1, node="b")])
    sync.relist_nodes([node_obj("a")])
    sync.relist_pods([])
    assert set(sync.cluster.nodes) == {"a"} and sync.cluster.pod_node == {}
    assert ("Node", "DELETED", "b") in heard and ("Pod", "ADDED", "default/x") in heard


def test_a_cordoned_or_unreadable_node_is_unschedulable():
    sync = make_sync()
    broken = node_obj("b")
    broken["status"]["allocatable"]["cpu"] = "-1"
    sync.relist_nodes([node_obj("a", unschedulable=True), broken])
    sync.relist_nrts([nrt_obj("a"), nrt_obj("b")])
    sync.relist_pods([pod_obj("p", 1)])
    decision = sync.scheduler.schedule(sync.pending()[0], now=0)
    assert decision.node is None


def test_static_config_is_known_from_the_report():
    sync = make_sync()
    sync.relist_nodes([node_obj("a")])
    sync.relist_nrts([nrt_obj("a")])
    assert sync.cluster.nodes["a"].policy == "single-numa-node"
    assert isinstance(sync.cluster.nodes["a"].model.config, KubeletConfig)


def test_a_pod_deleted_while_reserved_gives_its_reservation_back():
    sync = make_sync()
    sync.relist_nodes([node_obj("a")])
    sync.relist_nrts([nrt_obj("a")])
    sync.relist_pods([pod_obj("p1", 2)])
    decision = sync.scheduler.schedule(sync.pending()[0], now=0)
    assert decision.node == "a" and "uid-p1" in sync.cluster.pod_node
    sync.on_pod(WatchEvent("DELETED", pod_obj("p1", 2)))
    assert "uid-p1" not in sync.cluster.pod_node
    assert sync.cluster.nodes["a"].requested.get("cpu", 0) == 0


def test_an_admission_rejection_of_our_pod_is_reported_once_with_the_kubelets_reason():
    sync = make_sync()
    heard = []
    sync.on_rejection = heard.append
    sync.relist_nodes([node_obj("a")])
    sync.relist_nrts([nrt_obj("a")])
    sync.relist_pods([pod_obj("p1", 2, node="a"), pod_obj("theirs", 2, node="a", scheduler="default-scheduler")])
    for name, scheduler in (("p1", "toposched"), ("theirs", "default-scheduler")):
        failed = pod_obj(name, 2, node="a", phase="Failed", scheduler=scheduler)
        failed["status"]["reason"] = "TopologyAffinityError"
        sync.on_pod(WatchEvent("MODIFIED", failed))
        sync.on_pod(WatchEvent("MODIFIED", failed))
    assert heard == ["TopologyAffinityError"]
    assert sync.cluster.pod_node == {}


@pytest.mark.parametrize("cpus", ["1", "500m"])  # with exclusive CPUs, and device ids alone
def test_after_a_restart_bound_pods_get_the_device_ids_their_annotations_name(cpus):
    # An agent-enforced node known from its report: 2 GPUs per NUMA zone. Pods placed by one
    # process keep, in the next, the GPU ids the agent applied (replayed in another order, the
    # replica alone would hand p1's GPU to p2).
    def gpu_nrt():
        gpus = [Device(f"0000:{bus:02x}:00.0", DeviceKind.GPU, i // 2, 0x10DE, 0x1EB8, 0x030200)
                for i, bus in enumerate((0x3B, 0x3C, 0x86, 0x87))]
        config = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                               reserved_system_cpus=CPUSet([0, 8]))
        return node_report(machine().with_devices(gpus), config, node_name="a")

    def gpu_pod(name, *, node="", annotations=None):
        obj = pod_obj(name, cpus, node=node, annotations=annotations)
        obj["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
        return obj

    def gpu_node():
        obj = node_obj("a")
        obj["status"]["allocatable"]["nvidia.com/gpu"] = "4"
        obj["metadata"].setdefault("labels", {})["toposched.io/device-enforcement"] = "agent"
        return obj

    first = make_sync()
    first.relist_nodes([gpu_node()])
    first.relist_nrts([gpu_nrt()])
    first.relist_pods([gpu_pod(f"p{i}") for i in range(3)])
    placed = {}
    for pod in first.pending():
        d = first.scheduler.schedule(pod, now=0)
        assert d.node == "a", d.message
        first.scheduler.bound(pod, now=0)
        placed[pod.name] = d.placement
    first.scheduler.cluster.forget("uid-p0")  # p0 leaves: the agent's packing shows in who holds what
    d = first.scheduler.schedule(Pod.from_dict(gpu_pod("p3")), now=0)
    placed["p3"] = d.placement
    del placed["p0"]
    second = make_sync()
    second.relist_nodes([gpu_node()])
    second.relist_nrts([gpu_nrt()])
    second.relist_pods([gpu_pod(name, node="a", annotations=p.annotations()) for name, p in reversed(placed.items())])
    for name, placement in placed.items():
        got = second.cluster.nodes["a"].pods[f"uid-{name}"].placement.devices()
        assert got == placement.devices()
    held = [i for p in placed.values() for i in p.devices()["nvidia.com/gpu"]]
    assert len(set(held)) == len(held) == 3
