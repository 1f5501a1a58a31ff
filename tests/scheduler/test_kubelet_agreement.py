"""Kubelet agreement: every node NUMAAlignment passes is one where the kubelet admits the pod.

For random machines, kubelet configurations and pods, on nodes with a random history of earlier
pods (admitted, some deleted again), the scheduler's verdicts are held against a fresh
:class:`~toposched.kubelet.KubeletNode` built from the same machine and configuration that
replays the same history, running the kubelet's reference code (``exhaustive=True``, the
upstream hint merge wherever it is affordable, see ``strategies.UPSTREAM_MERGE_MAX_NUMA``)
while the scheduler's replicas run the fast paths:

* whenever NUMAAlignment's per-node filter passes a node, that kubelet admits the pod; the
  filter's trial admission leaves the replica as it found it;
* the converse for pods that state no NUMA policy of their own: where the kubelet admits the
  pod, NUMAAlignment does not refuse the node (it is never stricter than the kubelet);
* whenever the scheduler's full cycle decides a node, that kubelet admits the pod there with
  exactly the placement the decision carries (cpusets, NUMA nodes, memory, device IDs);
* every history pod the kubelet admitted, the replica admits with the kubelet's placement.

Each example checks a sequence of pods against the node as the earlier pods left it, so the
examples below amount to several thousand pod/node verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from tests.scheduler.strategies import (
    GI,
    MI,
    NodeShape,
    comparable_state,
    describe_pod,
    memory_group_cluster,
    memory_pod,
    node_shapes,
    pods,
)
from toposched.kubelet import Admission, KubeletConfig, KubeletNode
from toposched.scheduler.cluster import Cluster, placement_of
from toposched.scheduler.framework import CycleState, Profile, registry
from toposched.scheduler.nodes import NodeSpec
from toposched.scheduler.placement import Placement
from toposched.scheduler.scheduler import Scheduler
from toposched.topology import Machine
from toposched.workload import Container, Pod

PODS_PER_NODE = 6
SETTINGS = {"deadline": None, "derandomize": True, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
ONE_IN_FOUR = st.integers(0, 3)


def toposched_profile() -> Profile:
    """toposched's filters and scores as the built-in profile orders them."""
    return Profile.build(
        "toposched",
        filters=["NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit", "NUMAAlignment"],
        scores=[("NUMAScore", 5), ("NodeResourcesFit", 1)],
        args={"NodeResourcesFit": {"scoringStrategy": {"type": "MostAllocated"}}},
    )


@dataclass
class Node:
    """One node of a test: its shape, what happened on it in order, and its kubelet that saw exactly that.

    The kubelet is built fresh from the shape (the reference code) and only ever admits and
    releases the history's pods, never a trial; the cluster's replica, by contrast, is rebuilt
    from the history wherever a check must not inherit an earlier check's trial admission.
    """

    name: str
    shape: NodeShape
    # ("admit", pod, the kubelet's placement) or ("release", pod, None)
    history: list[tuple[str, Pod, Placement | None]] = field(default_factory=list)
    kubelet: KubeletNode = field(init=False)

    def __post_init__(self) -> None:
        self.kubelet = self.shape.kubelet(self.name)

    def admit(self, pod: Pod) -> Admission:
        """The kubelet's answer; an admitted pod joins the history."""
        admission = self.kubelet.admit(pod)
        if admission.admitted:
            self.history.append(("admit", pod, placement_of(self.name, admission, pod)))
        return admission

    def release(self, pod: Pod) -> None:
        """The pod is deleted from the node."""
        self.kubelet.release(pod.uid)
        self.history.append(("release", pod, None))

    def present(self) -> list[Pod]:
        """The pods on the node now."""
        return list(self.kubelet.pods.values())

    def describe(self) -> str:
        history = "; ".join(f"{e} {describe_pod(p) if e == 'admit' else p.name}" for e, p, _ in self.history)
        return f"\n  node: {self.shape!r}\n  history: [{history}]"


def add_node(cluster: Cluster, node: Node) -> None:
    """Put ``node`` into ``cluster`` with its history, checking that the replica places each pod as the kubelet did."""
    shape = node.shape
    cluster.set_node(NodeSpec(node.name), machine=shape.machine, kubelet_config=shape.config, device_plugins=shape.devices)
    for i, (event_, pod, placement) in enumerate(node.history):
        if event_ == "admit":
            got = cluster.add_bound_pod(pod, node.name, now=float(i))
            assert got == placement, (f"the replica placed history pod {pod.name} at {got and got.to_dict()}, the kubelet at "
                                      f"{placement.to_dict()}" + node.describe())
        else:
            cluster.forget(pod)


def context(node: Node, pod: Pod, admission: Admission) -> str:
    return (node.describe() + f"\n  pod: {describe_pod(pod)}"
            f"\n  kubelet: admitted={admission.admitted} {admission.reason} {admission.message}")


def maybe_delete(cluster: Cluster | None, node: Node, data: st.DataObject) -> None:
    """Sometimes one of the node's pods is deleted (from the cluster too, when it persists)."""
    present = node.present()
    if present and data.draw(ONE_IN_FOUR, label="delete a pod") == 0:
        gone = data.draw(st.sampled_from(present), label="deleted")
        node.release(gone)
        if cluster is not None:
            cluster.forget(gone)


@settings(max_examples=220, **SETTINGS)
@given(shape=node_shapes(), data=st.data())
def test_every_node_numa_alignment_passes_admits_the_pod(shape: NodeShape, data: st.DataObject) -> None:
    node = Node("n", shape)
    plugin = registry.create("NUMAAlignment")
    for i in range(PODS_PER_NODE):
        pod = data.draw(pods(f"p{i}"), label=f"pod {i}")
        cluster = Cluster()
        add_node(cluster, node)
        record = cluster.nodes[node.name]
        before = comparable_state(record.model)  # exactly: test_the_per_node_filter_leaves_the_replica_as_it_was
        verdict = plugin.filter(CycleState(cluster=cluster), pod, record)
        assert comparable_state(record.model) == before, "the per-node filter changed the replica" + node.describe()
        admission = node.admit(pod)
        event(f"{shape.config.topology_manager_policy}: filter passes={verdict.is_success}, kubelet admits={admission.admitted}")
        if verdict.is_success:
            assert admission.admitted, "NUMAAlignment passed a node whose kubelet rejects the pod" + context(node, pod, admission)
        maybe_delete(None, node, data)


@settings(max_examples=180, **SETTINGS)
@given(shape=node_shapes(), data=st.data())
def test_numa_alignment_is_never_stricter_than_the_kubelet(shape: NodeShape, data: st.DataObject) -> None:
    # Pods without a NUMA policy of their own: the node's kubelet policy is the whole requirement.
    node = Node("n", shape)
    plugin = registry.create("NUMAAlignment")
    for i in range(PODS_PER_NODE):
        pod = data.draw(pods(f"p{i}", annotations=False), label=f"pod {i}")
        cluster = Cluster()
        add_node(cluster, node)
        verdict = plugin.filter(CycleState(cluster=cluster), pod, cluster.nodes[node.name])
        admission = node.admit(pod)
        event(f"{shape.config.topology_manager_policy}: filter passes={verdict.is_success}, kubelet admits={admission.admitted}")
        if admission.admitted:
            assert verdict.is_success, f"NUMAAlignment refused ({verdict.message}) a node whose kubelet admits the pod" + \
                context(node, pod, admission)
        maybe_delete(None, node, data)


@settings(max_examples=180, **SETTINGS)
@given(shapes=st.lists(node_shapes(max_numa=4), min_size=1, max_size=3), data=st.data())
def test_every_decision_is_what_the_kubelet_does(shapes: list[NodeShape], data: st.DataObject) -> None:
    nodes = [Node(f"n{i}", shape) for i, shape in enumerate(shapes)]
    cluster = Cluster()
    for node in nodes:
        add_node(cluster, node)
    scheduler = Scheduler(cluster, toposched_profile())
    by_name = {node.name: node for node in nodes}
    for i in range(PODS_PER_NODE):
        pod = data.draw(pods(f"p{i}"), label=f"pod {i}")
        if data.draw(ONE_IN_FOUR, label="foreign") == 0:
            # Another scheduler bound this pod where it liked; the kubelet decided what it got.
            node = data.draw(st.sampled_from(nodes), label="foreign node")
            admission = node.admit(pod)
            if admission.admitted:
                got = cluster.add_bound_pod(pod, node.name, now=float(i))
                assert got == node.history[-1][2], f"the replica placed the foreign pod at {got and got.to_dict()}" + \
                    context(node, pod, admission)
            continue
        decision = scheduler.schedule(pod, now=float(i))
        event(f"scheduled={decision.node is not None}")
        if decision.node is None:
            continue
        node = by_name[decision.node]
        admission = node.admit(pod)
        assert admission.admitted, f"scheduled on {node.name} but its kubelet rejects the pod" + context(node, pod, admission)
        expected = node.history[-1][2]
        assert decision.placement == expected, (f"the decision's placement {decision.placement.to_dict()} is not the "
                                                f"kubelet's {expected.to_dict()}" + context(node, pod, admission))
        scheduler.bound(pod, now=float(i))
        maybe_delete(cluster, node, data)


def test_pod_scope_counts_only_exclusive_cpus() -> None:
    # Two NUMA nodes of 2 CPUs; two containers of 1.5 CPUs each run on the shared pool, so the
    # single-numa-node, pod-scope kubelet has nothing to align and admits the pod.
    machine = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": 0, "numa": c // 2} for c in range(4)],
                                     memory_per_numa=4 * GI)
    config = KubeletConfig(topology_manager_policy="single-numa-node", topology_manager_scope="pod",
                           cpu_manager_policy="static")
    pod = Pod("p", uid="p", containers=tuple(Container(f"c{i}", limits={"cpu": 1500, "memory": 256 * MI}) for i in range(2)))
    assert KubeletNode(machine, config).admit(pod).admitted
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)
    verdict = registry.create("NUMAAlignment").filter(CycleState(cluster=cluster), pod, cluster.nodes["n"])
    assert verdict.is_success, verdict.message
    assert Scheduler(cluster, toposched_profile()).schedule(pod, now=0).node == "n"


def test_the_per_node_filter_leaves_the_replica_as_it_was() -> None:
    # The trial pod's 1 GiB comes from node 1; handing it back the kubelet's way would give it to
    # node 0, which would then look 1 GiB free when it is full.
    cluster = memory_group_cluster()
    before = (cluster.nodes["n"].model.state(), cluster.zone_available("n"))
    verdict = registry.create("NUMAAlignment").filter(CycleState(cluster=cluster), memory_pod("small", GI), cluster.nodes["n"])
    assert verdict.is_success
    assert (cluster.nodes["n"].model.state(), cluster.zone_available("n")) == before
