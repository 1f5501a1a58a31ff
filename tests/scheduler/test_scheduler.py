"""The scheduling cycle end to end: exact placements, stale reports, refusals, explain."""

import dataclasses
import json

import numpy as np

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from toposched.kubelet import KubeletConfig, KubeletNode
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.framework import Profile
from toposched.scheduler.nodes import NodeSpec, Taint
from toposched.scheduler.scheduler import Scheduler
from toposched.scheduler.status import Status
from toposched.topology import CPUSet, Machine
from toposched.topology.nrt import nrt_from_machine
from toposched.workload import Container, Pod, Toleration

GI = 2**30
MI = 2**20


def machine(numa=2, cores=4, threads=2) -> Machine:
    total = numa * cores
    rows = [{"cpu": c + t * total, "core": c, "socket": c // cores, "numa": c // cores} for t in range(threads) for c in range(total)]
    return Machine.from_cpu_table(rows, memory_per_numa=32 * GI,
                                  distances={a: {b: 10 if a == b else 21 for b in range(numa)} for a in range(numa)})


CONFIG = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                       reserved_system_cpus=CPUSet([0]))


def toposched_profile() -> Profile:
    return Profile.build(
        "toposched",
        filters=["NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit", "NUMAAlignment"],
        scores=[("NUMAScore", 5), ("NodeResourcesFit", 1)],
        args={"NodeResourcesFit": {"scoringStrategy": {"type": "MostAllocated"}}},
    )


def guaranteed(name, cpus, mem=GI, **kw) -> Pod:
    return Pod(name, uid=name, containers=(Container("c", limits={"cpu": cpus * 1000, "memory": mem}),), **kw)


def spec(name, **kw) -> NodeSpec:
    return NodeSpec(name, allocatable={"cpu": 15000, "memory": 60 * GI, "pods": 110}, **kw)


def cluster_of(*names, **kw) -> Cluster:
    cluster = Cluster(**kw)
    for name in names:
        cluster.set_node(spec(name), machine=machine(), kubelet_config=CONFIG)
    return cluster


def test_places_exact_cpus_on_one_numa_node_and_packs():
    cluster = cluster_of("a", "b")
    sched = Scheduler(cluster, toposched_profile())
    first = sched.schedule(guaranteed("p1", 4), now=0)
    second = sched.schedule(guaranteed("p2", 2), now=0)
    assert first.node is not None and second.node == first.node  # MostAllocated packs
    for d in (first, second):
        cpus = d.placement.containers["c"].cpuset
        assert len(cpus) in (4, 2) and 0 not in cpus
        assert len(machine().numa_of(cpus)) == 1
    assert first.placement.cpuset.isdisjoint(second.placement.cpuset)
    annotation = json.loads(first.placement.to_annotation())
    assert annotation["node"] == first.node and len(annotation["numaNodes"]) == 1


def test_a_pod_too_wide_for_any_numa_node_is_unschedulable_with_a_reason():
    cluster = cluster_of("a", "b")
    decision = Scheduler(cluster, toposched_profile()).schedule(guaranteed("wide", 9), now=0)
    assert decision.node is None
    assert decision.message.startswith("0/2 nodes are available: 2 cannot align")


def test_a_stale_report_never_leads_to_a_double_allocation():
    # The node is known only by its report, published once with 2 zones of 8 free CPUs each.
    m = machine()
    report = KubeletNode(m, CONFIG, name="r").to_nrt()
    cluster = Cluster(reflect_timeout=600)
    cluster.update_report(report, now=0)
    sched = Scheduler(cluster, toposched_profile())
    placed = [sched.schedule(guaranteed(f"p{i}", 4), now=i) for i in range(5)]
    assert [d.node for d in placed[:3]] == ["r", "r", "r"]  # 7 + 8 free CPUs: 4 + 4 | 4 (+3 left)
    assert placed[3].node is None and placed[4].node is None
    cpus = [d.placement.cpuset for d in placed[:3]]
    assert all(a.isdisjoint(b) for i, a in enumerate(cpus) for b in cpus[i + 1:])


def test_unreserve_restores_the_exact_state():
    cluster = cluster_of("a")
    sched = Scheduler(cluster, toposched_profile())
    before = (cluster.nodes["a"].model.state(), cluster.zone_available("a"))
    decision = sched.schedule(guaranteed("p", 4, 8 * GI), now=0)
    assert decision.node == "a"
    sched.unreserve(guaranteed("p", 4, 8 * GI))
    assert (cluster.nodes["a"].model.state(), cluster.zone_available("a")) == before
    assert cluster.nodes["a"].requested == {}


def test_cordoned_tainted_and_unselected_nodes_are_skipped():
    cluster = Cluster()
    cluster.set_node(spec("cordoned", unschedulable=True), machine=machine(), kubelet_config=CONFIG)
    cluster.set_node(spec("tainted", taints=(Taint("gpu", "yes"),)), machine=machine(), kubelet_config=CONFIG)
    cluster.set_node(spec("plain", labels={"zone": "a"}), machine=machine(), kubelet_config=CONFIG)
    sched = Scheduler(cluster, toposched_profile())
    assert sched.schedule(guaranteed("p1", 1), now=0).node == "plain"
    tolerant = guaranteed("p2", 1, tolerations=(Toleration("gpu", "Exists"),), node_selector={"zone": "b"})
    decision = sched.schedule(tolerant, now=0)
    assert decision.node is None
    assert "1 node(s) were unschedulable" in decision.message
    assert "2 node(s) didn't match Pod's node affinity/selector" in decision.message


def test_a_malformed_pod_is_refused_alone():
    cluster = cluster_of("a")
    sched = Scheduler(cluster, toposched_profile())
    bad = Pod("bad", uid="bad", annotations={"toposched.io/numa-policy": "sometimes"},
              containers=(Container("c", limits={"cpu": 1000, "memory": GI}),))
    decision = sched.schedule(bad, now=0)
    assert decision.node is None and decision.status.code.label == "UnschedulableAndUnresolvable"
    assert "toposched.io/numa-policy" in decision.message
    assert sched.schedule(guaranteed("good", 2), now=0).node == "a"


def test_a_pod_already_on_a_node_is_refused_and_changes_nothing():
    cluster = cluster_of("a", "b")
    sched = Scheduler(cluster, toposched_profile())
    pod = guaranteed("p", 2)
    first = sched.schedule(pod, now=0).node
    before = {n: cluster.nodes[n].model.state() for n in cluster.nodes}
    again = sched.schedule(pod, now=1)
    assert again.node is None and again.status.code.label == "UnschedulableAndUnresolvable"
    assert f"already on node {first}" in again.message and "default/p" in again.message
    assert {n: cluster.nodes[n].model.state() for n in cluster.nodes} == before
    assert sched.explain(pod)["selected"] is None  # explain asks schedule too: it reports, it does not raise
    sched.unreserve(pod)
    assert sched.schedule(pod, now=2).node is not None


def test_a_bad_report_makes_that_node_unschedulable_not_the_cluster():
    cluster = cluster_of("good")
    report = nrt_from_machine(machine(), node_name="bad", policy="single-numa-node")
    broken = dataclasses.replace(report, zones=())  # a report with no NUMA zone cannot describe a machine
    cluster.update_report(broken, now=0)
    assert cluster.nodes["bad"].broken
    decision = Scheduler(cluster, toposched_profile()).schedule(guaranteed("p", 1), now=0)
    assert decision.node == "good"


def test_explain_lists_every_node_with_its_verdict_and_changes_nothing():
    cluster = cluster_of("a", "b")
    cluster.set_node(spec("c", unschedulable=True), machine=machine(), kubelet_config=CONFIG)
    sched = Scheduler(cluster, toposched_profile())
    before = {n: cluster.nodes[n].model.state() for n in cluster.nodes}
    report = sched.explain(guaranteed("p", 2))
    assert [n["name"] for n in report["nodes"]] == ["a", "b", "c"]
    assert report["nodes"][2]["filter"] == {"code": "UnschedulableAndUnresolvable", "message": "node(s) were unschedulable"}
    assert set(report["nodes"][0]["plugins"]) == {"NUMAScore", "NodeResourcesFit"}
    assert report["selected"] in ("a", "b") and report["placement"]["node"] == report["selected"]
    assert {n: cluster.nodes[n].model.state() for n in cluster.nodes} == before


def test_the_binding_request_carries_the_placement():
    cluster = cluster_of("a")
    profile = toposched_profile()
    profile.binder = __import__("toposched.scheduler.framework", fromlist=["registry"]).registry.create("DefaultBinder")
    sched = Scheduler(cluster, profile)
    pod = guaranteed("p", 2)
    decision = sched.schedule(pod, now=0)
    [binding] = sched.binding(decision, pod)
    annotations = binding["body"]["metadata"]["annotations"]
    assert json.loads(annotations["toposched.io/placement"])["node"] == "a"
    assert "scheduling.koordinator.sh/resource-status" in annotations
    assert binding["path"] == "/api/v1/namespaces/default/pods/p/binding"
    assert binding["body"]["target"] == {"apiVersion": "v1", "kind": "Node", "name": "a"}


def test_normalize_and_post_filter_hooks_run():
    calls = []

    class Halve:
        name = "Halve"

        def score_all(self, state, pod, table, rows):
            return np.full(len(rows), 80, dtype=np.int64)

        def normalize_scores(self, state, pod, scores):
            calls.append("normalize")
            return scores // 2

    class Nominate:
        name = "Nominate"

        def post_filter(self, state, pod, reasons):
            calls.append("post_filter")
            return "a", Status.success()

    cluster = cluster_of("a")
    profile = toposched_profile()
    profile.scores.append((Halve(), 1))
    profile.post_filters.append(Nominate())
    sched = Scheduler(cluster, profile)
    report = sched.explain(guaranteed("p", 1))
    assert report["nodes"][0]["plugins"]["Halve"] == 40
    decision = sched.schedule(guaranteed("huge", 12), now=0)
    assert decision.node is None and decision.nominated == "a" and calls[-1] == "post_filter"


def test_the_pending_message_names_only_the_short_resource():
    cluster = cluster_of("a")
    decision = Scheduler(cluster, toposched_profile()).schedule(
        Pod("big", uid="big", containers=(Container("c", requests={"cpu": 500, "memory": 100 * GI}),)), now=0)
    assert decision.message == "0/1 nodes are available: 1 Insufficient memory."


def test_a_plugin_that_filters_and_scores_confirms_each_reservation_once():
    confirmed = []

    class Both:
        name = "Both"

        def filter_all(self, state, pod, table, rows):
            return np.ones(len(rows), dtype=bool), ""

        def score_all(self, state, pod, table, rows):
            return np.zeros(len(rows), dtype=np.int64)

        def confirm(self, state, pod, node, placement):
            confirmed.append(node.name)
            return Status.success()

    profile = toposched_profile()
    both = Both()
    profile.filters.append(both)
    profile.scores.append((both, 1))
    sched = Scheduler(cluster_of("a"), profile)
    assert sched.schedule(guaranteed("p", 1), now=0).node == "a"
    assert confirmed == ["a"]


def test_a_cluster_without_nodes_answers_unschedulable_for_every_profile():
    from toposched.scheduler import load_profile

    pod = Pod(name="lonely", namespace="default", containers=(Container(name="c", requests={"cpu": 1000}),))
    for name in ("toposched", "default"):
        decision = Scheduler(Cluster(), load_profile(name)).schedule(pod, 0.0)
        assert decision.node is None and not decision.status.is_success, name


def test_a_pod_asking_for_zero_of_a_resource_leaves_after_others_did():
    """Releasing pods prunes the resources their node no longer has requested; a pod whose request
    names one at 0 (``hugepages-1Gi: 0``) must still leave cleanly afterwards, from the ledger and
    from the kubelet replica, restoring the node's requests exactly."""
    cluster = cluster_of("a")
    sched = Scheduler(cluster, toposched_profile())
    zero = Pod("zero", uid="zero", containers=(Container("c", limits={"cpu": 1000, "memory": GI, "hugepages-1Gi": 0}),))
    other = guaranteed("other", 1)
    for pod in (zero, other):
        assert sched.schedule(pod, now=0.0).node == "a"
        sched.bound(pod, now=0.0)
    for pod in (other, zero):
        cluster.forget(pod, 1.0)
    record = cluster.nodes["a"]
    assert record.requested == {}
    assert not record.model.pods
    assert sched.schedule(guaranteed("again", 2), now=2.0).node == "a"
