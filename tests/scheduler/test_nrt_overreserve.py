"""NodeResourceTopologyMatch with its NRT cache wired in: the scheduling cycle through the cache.

The cache itself is checked against scheduler-plugins' tables in ``test_nrt_cache.py``; here the
plugin drives it as upstream's plugin does (kubernetes-sigs/scheduler-plugins
``pkg/noderesourcetopology/{filter,score,reserve,postbind,plugin}.go``): Filter and Score read
the cache's view, Reserve/Unreserve/PostBind reach the cache, reports and bound pods reach it
from the cluster, and resyncs run as the scheduler's time advances. The scheduler keeps the
plugin's per-node answers per pod shape, so every change of a node's view must re-evaluate that
node: a differential property test compares the caching scheduler with one that caches nothing.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.errors import InputError
from toposched.kubelet import KubeletConfig, KubeletNode
from toposched.names import FINGERPRINT_ATTRIBUTE as ATTRIBUTE
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.fingerprint import pods_fingerprint
from toposched.scheduler.framework import Profile, Registry
from toposched.scheduler.nrt_cache import REASON_INVALID_TOPOLOGY, STRATEGY_DISCARD_RESERVED, STRATEGY_OVERRESERVE
from toposched.scheduler.nrt_match import nrt_filter
from toposched.scheduler.plugins.basic import NodeResourcesFit
from toposched.scheduler.plugins.topologymatch import NodeResourceTopologyMatch
from toposched.scheduler.profile_setup import load_profile
from toposched.scheduler.scheduler import Scheduler
from toposched.scheduler.status import Status
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod

GI = 2**30
PLUGIN = "NodeResourceTopologyMatch"
OVERRESERVE = {"cacheResyncPeriodSeconds": 5}
DISCARD = {"discardReservedNodes": True}
# The kubelet of every node here: single-numa-node, static CPU manager, CPU 0 reserved, so a
# node of 2 NUMA nodes x 4 cores x 2 threads offers 7 CPUs on NUMA node 0 and 8 on NUMA node 1.
CONFIG = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                       reserved_system_cpus=CPUSet([0]))


def machine(numa: int = 2, cores: int = 4, threads: int = 2) -> Machine:
    total = numa * cores
    rows = [{"cpu": c + t * total, "core": c, "socket": c // cores, "numa": c // cores}
            for t in range(threads) for c in range(total)]
    return Machine.from_cpu_table(rows, memory_per_numa=32 * GI,
                                  distances={a: {b: 10 if a == b else 21 for b in range(numa)} for a in range(numa)})


def guaranteed(name: str, cpus: int, *, scheduler: str = "default-scheduler") -> Pod:
    limits = {"cpu": cpus * 1000, "memory": GI}
    return Pod(name, uid=name, containers=(Container("c", requests=limits, limits=limits),), scheduler_name=scheduler)


class Node:
    """A node's ground truth: its kubelet, and the report node-feature-discovery publishes for it."""

    def __init__(self, name: str) -> None:
        self.kubelet = KubeletNode(machine(), CONFIG, name=name)
        self.pods: dict[str, Pod] = {}

    def admit(self, pod: Pod) -> bool:
        if not self.kubelet.admit(pod).admitted:
            return False
        self.pods[pod.uid] = pod
        return True

    def release(self, pod: Pod) -> None:
        self.kubelet.release(pod.uid)
        self.pods.pop(pod.uid, None)

    def report(self, fingerprint_pods: list[Pod] | None = None):
        pods = list(self.pods.values()) if fingerprint_pods is None else fingerprint_pods
        nrt = self.kubelet.to_nrt()
        return dataclasses.replace(nrt, attributes={**nrt.attributes,
                                                    ATTRIBUTE: pods_fingerprint((p.namespace, p.name) for p in pods)})


def nrt_match(args: dict, name: str = "nrt-match-cache", reg: Registry | None = None,
              extra_filters: tuple[str, ...] = ()) -> Profile:
    return Profile.build(name, filters=["NodeResourcesFit", PLUGIN, *extra_filters], scores=[(PLUGIN, 1)],
                         args={PLUGIN: args}, reg=reg)


def world(args: dict, *names: str, cache_size: int = 512, percentage: int = 100) -> tuple[Scheduler, dict[str, Node]]:
    """Nodes known to the scheduler only by their reports (what scheduler-plugins sees), published at 0;
    the profile looks for ``percentage`` of them as feasible (percentageOfNodesToScore)."""
    nodes = {name: Node(name) for name in names}
    cluster = Cluster()
    for node in nodes.values():
        cluster.update_report(node.report(), now=0)
    profile = nrt_match(args)
    profile.percentage_of_nodes_to_score = percentage
    return Scheduler(cluster, profile, cache_size=cache_size), nodes


def plugin_of(sched: Scheduler) -> NodeResourceTopologyMatch:
    return next(p for p in sched.profile.filters if p.name == PLUGIN)


# ---- overreserve ---------------------------------------------------------------------------------


def test_overreserve_refuses_what_the_stale_report_accepts_until_a_matching_report_is_flushed():
    sched, nodes = world(OVERRESERVE, "r")
    p1, p2 = guaranteed("p1", 5), guaranteed("p2", 5)
    first = sched.schedule(p1, now=1)
    assert first.node == "r"
    sched.bound(p1, now=1)
    assert nodes["r"].admit(p1)
    # Overreserve takes p1's 5 CPUs from both zones (7 -> 2, 8 -> 3): no zone has 5 left, though
    # the report the node published before p1 still says 7 and 8 are free.
    refused = sched.schedule(p2, now=2)
    assert refused.node is None and "cannot align container" in refused.message
    assert nrt_filter(p2, sched.cluster.nodes["r"].nrt).is_success
    assert plugin_of(sched).cache.dirty_nodes() == ("r",)
    # The node publishes its state with p1: a candidate only, until the resync at t=5.
    sched.cluster.update_report(nodes["r"].report(), now=3)
    assert sched.schedule(p2, now=4).node is None
    placed = sched.schedule(p2, now=5)
    assert placed.node == "r"
    cache = plugin_of(sched).cache
    assert cache.generation == 1 and cache.assumed_pods("r") == ("default/p2",)
    assert sched.explain(guaranteed("p3", 5))["selected"] is None  # an explain at an earlier time is fine


def test_overreserve_keeps_refusing_while_the_report_does_not_show_the_pods_it_knows():
    sched, nodes = world(OVERRESERVE, "r")
    p1 = guaranteed("p1", 5)
    assert sched.schedule(p1, now=1).node == "r"
    sched.bound(p1, now=1)
    nodes["r"].admit(p1)
    assert sched.schedule(guaranteed("p2", 5), now=2).node is None
    sched.cluster.update_report(nodes["r"].report(fingerprint_pods=[]), now=3)  # counts no pod: mismatch
    assert sched.schedule(guaranteed("p2", 5), now=10).node is None
    assert plugin_of(sched).cache.generation == 0


def test_a_flush_run_by_another_nodes_report_re_evaluates_the_flushed_node():
    sched, nodes = world(OVERRESERVE, "r", "s")
    for pod, node in ((guaranteed("p1", 5), "r"), (guaranteed("q1", 5), "s")):
        assert sched.schedule(pod, now=1).node == node
        sched.bound(pod, now=1)
        nodes[node].admit(pod)
    assert sched.schedule(guaranteed("p2", 5), now=2).node is None  # both nodes dirty now
    sched.cluster.update_report(nodes["r"].report(), now=3)
    assert sched.schedule(guaranteed("p2", 5), now=4).node is None  # r's answer is kept from here on
    # s reports at the resync's instant: the resync runs first and flushes r, which changed
    # nothing in the cluster; the scheduler must still look at r again.
    sched.cluster.update_report(nodes["s"].report(fingerprint_pods=[]), now=5)
    assert sched.schedule(guaranteed("p2", 5), now=5).node == "r"


def test_overreserve_spreads_a_burst_the_stale_report_would_pile_on_one_node():
    stale, _ = world({}, "a", "b")
    cached, _ = world(OVERRESERVE, "a", "b")
    burst = [guaranteed(f"p{i}", 5) for i in range(3)]
    on_stale = [stale.schedule(p, now=1).node for p in burst]
    on_cached = [cached.schedule(p, now=1).node for p in burst]
    # The same report wins every time: three pods of 5 CPUs where 7 + 8 free CPUs take two.
    assert on_stale == ["a", "a", "a"]
    assert on_cached == ["a", "b", None]  # 5 taken from every zone of a, then of b


def test_unreserve_gives_the_reservation_back_to_the_cache():
    sched, _ = world(OVERRESERVE, "r")
    p1 = guaranteed("p1", 5)
    assert sched.schedule(p1, now=1).node == "r"
    sched.unreserve(p1)
    assert plugin_of(sched).cache.assumed_pods("r") == ()
    assert sched.schedule(guaranteed("p2", 5), now=2).node == "r"


class Refuser:
    """A Reserve plugin that refuses every pod."""

    name = "Refuser"

    def __init__(self, args) -> None:
        pass

    def filter(self, state, pod, node) -> Status:
        return Status.success()

    def reserve(self, state, pod, node) -> Status:
        return Status.unschedulable("refused at Reserve", plugin=self.name)

    def unreserve(self, state, pod, node) -> None:
        pass


def test_a_later_reserve_plugin_refusing_unreserves_the_cache():
    reg = Registry()
    for cls in (NodeResourcesFit, NodeResourceTopologyMatch, Refuser):
        reg.register(cls)
    cluster = Cluster()
    cluster.update_report(Node("r").report(), now=0)
    sched = Scheduler(cluster, nrt_match(OVERRESERVE, reg=reg, extra_filters=("Refuser",)))
    decision = sched.schedule(guaranteed("p1", 5), now=1)
    assert decision.node is None and decision.reasons == {"refused at Reserve": 1}
    assert plugin_of(sched).cache.assumed_pods("r") == ()


def test_foreign_pods_make_the_node_refused_until_a_flush_and_our_own_pods_never_do():
    sched, nodes = world(OVERRESERVE, "r")
    ours = guaranteed("p1", 1)
    assert sched.schedule(ours, now=1).node == "r"
    sched.bound(ours, now=1)
    nodes["r"].admit(ours)
    cache = plugin_of(sched).cache
    assert not cache.has_foreign_pods("r") and cache.pods_on_node("r") == ("default/p1",)
    intruder = guaranteed("intruder", 1, scheduler="other-scheduler")
    sched.cluster.add_bound_pod(intruder, "r", now=2)
    nodes["r"].admit(intruder)
    decision = sched.schedule(guaranteed("p2", 1), now=2)
    assert decision.node is None and decision.reasons == {REASON_INVALID_TOPOLOGY: 1}
    sched.cluster.update_report(nodes["r"].report(), now=3)  # shows both pods: the fingerprint matches
    assert sched.schedule(guaranteed("p2", 1), now=5).node == "r"


def test_a_departed_pod_leaves_the_fingerprint_the_cache_expects():
    sched, nodes = world(OVERRESERVE, "r")
    p1 = guaranteed("p1", 5)
    sched.schedule(p1, now=1)
    sched.bound(p1, now=1)
    nodes["r"].admit(p1)
    assert sched.schedule(guaranteed("p2", 5), now=2).node is None  # marks r dirty
    nodes["r"].release(p1)
    sched.cluster.forget(p1)
    assert plugin_of(sched).cache.pods_on_node("r") == ()
    sched.cluster.update_report(nodes["r"].report(), now=3)
    assert sched.schedule(guaranteed("p2", 5), now=5).node == "r"


# ---- discardreserved ------------------------------------------------------------------------------


def test_discardreserved_refuses_a_node_from_reserve_until_postbind():
    sched, _ = world(DISCARD, "r")
    p1 = guaranteed("p1", 1)
    assert sched.schedule(p1, now=1).node == "r"
    waiting = sched.schedule(guaranteed("p2", 1), now=1)
    assert waiting.node is None and waiting.reasons == {REASON_INVALID_TOPOLOGY: 1}
    sched.bound(p1, now=2)  # PostBind: the node is no longer held back
    assert sched.schedule(guaranteed("p2", 1), now=2).node == "r"
    assert plugin_of(sched).cache.strategy == STRATEGY_DISCARD_RESERVED


# ---- passthrough: nrt-match as before ------------------------------------------------------------


def test_the_builtin_nrt_match_profile_has_no_cache_and_reads_the_last_report():
    cluster = Cluster()
    cluster.update_report(Node("r").report(), now=0)
    sched = Scheduler(cluster, load_profile("nrt-match"))
    assert plugin_of(sched).cache is None
    placed = [sched.schedule(guaranteed(f"p{i}", 5), now=i).node for i in range(1, 5)]
    # The unchanged report three times (its NUMA nodes take two such pods), then NodeResourcesFit
    # refuses: 15 allocatable CPUs.
    assert placed == ["r", "r", "r", None]


def test_one_plugin_instance_serves_one_cluster():
    profile = nrt_match(OVERRESERVE)
    Scheduler(Cluster(), profile)
    with pytest.raises(InputError) as err:
        Scheduler(Cluster(), profile)
    assert err.value.field == "cluster"


# ---- caching per pod shape stays exact ---------------------------------------------------------

_OP = st.sampled_from(["schedule", "schedule", "schedule", "abandon", "depart", "report", "foreign"])
_WAIT = st.sampled_from([0.0, 0.5, 1.0, 2.5, 5.0])  # time passing before the operation
# (operation, pod shape or which pod / node, wait)
OPS = st.lists(st.tuples(_OP, st.integers(0, 3), _WAIT), max_size=30)
# The same over 120 nodes: the integer also picks which node reports or takes a foreign pod.
SEARCH_OPS = st.lists(st.tuples(_OP, st.integers(0, 119), _WAIT), max_size=30)


@pytest.mark.parametrize("args", [OVERRESERVE, DISCARD], ids=[STRATEGY_OVERRESERVE, STRATEGY_DISCARD_RESERVED])
@settings(max_examples=25, deadline=None)
@given(ops=OPS)
def test_decisions_with_per_shape_caching_equal_decisions_without(args, ops):
    names = ("a", "b", "c")
    cached, nodes = world(args, *names)
    fresh, _ = world(args, *names, cache_size=0)
    _in_lockstep((cached, fresh), nodes, names, ops, cpus=(1, 2, 3, 5))


@pytest.mark.parametrize("args", [{}, OVERRESERVE, DISCARD], ids=["passthrough", STRATEGY_OVERRESERVE, STRATEGY_DISCARD_RESERVED])
@settings(max_examples=8, deadline=None)
@given(ops=SEARCH_OPS)
def test_a_search_keeps_per_node_answers_per_pod_shape_exactly(args, ops):
    """With more nodes than a cycle looks at (upstream's search over 100 of 120 nodes), the plugin's
    per-node answers are kept per pod shape and row; the decisions equal those of a scheduler that
    keeps nothing. Pods of 7 and 8 CPUs fill a NUMA node, so nodes refuse."""
    names = tuple(f"n{i:03d}" for i in range(120))
    cached, nodes = world(args, *names, percentage=0)
    fresh, _ = world(args, *names, percentage=0)
    fresh.shape = lambda pod: None  # no pod shape: nothing is kept between cycles
    _in_lockstep((cached, fresh), nodes, names, ops, cpus=(2, 5, 7, 8))


def _in_lockstep(worlds: tuple[Scheduler, Scheduler], nodes: dict[str, Node], names: tuple[str, ...],
                 ops: list[tuple[str, int, float]], cpus: tuple[int, ...]) -> None:
    """Run ``ops`` on both schedulers and the nodes' ground truth, asserting each decision is the same
    in both; ``cpus`` are the pod shapes' whole CPUs (the last shape's pods stay reserved a while)."""
    cached = worlds[0]
    now, serial = 0.0, 0
    bound: list[tuple[Pod, str]] = []
    pending: list[Pod] = []  # reserved, not yet bound (discardreserved holds their nodes)
    for op, k, dt in ops:
        now += dt
        serial += 1
        if op == "schedule":
            pod = guaranteed(f"p{serial}", cpus[k % len(cpus)])
            decisions = [w.schedule(pod, now=now) for w in worlds]
            assert decisions[0].node == decisions[1].node
            assert decisions[0].reasons == decisions[1].reasons
            if decisions[0].node is None:
                continue
            if not nodes[decisions[0].node].admit(pod):
                for w in worlds:
                    w.unreserve(pod)
            elif k % len(cpus) == len(cpus) - 1:
                pending.append(pod)  # bound later, or abandoned
            else:
                for w in worlds:
                    w.bound(pod, now)
                bound.append((pod, decisions[0].node))
        elif op == "abandon" and pending:
            pod = pending.pop(0)
            node = cached.cluster.pod_node[pod.uid]
            if k % 2:
                for w in worlds:
                    w.bound(pod, now)
                bound.append((pod, node))
            else:
                nodes[node].release(pod)
                for w in worlds:
                    w.unreserve(pod)
        elif op == "depart" and bound:
            pod, node = bound.pop(k % len(bound))
            nodes[node].release(pod)
            for w in worlds:
                w.cluster.forget(pod)
        elif op == "report":
            name = names[k % len(names)]
            report = nodes[name].report()
            for w in worlds:
                w.cluster.update_report(report, now)
        elif op == "foreign":
            name = names[k % len(names)]
            pod = guaranteed(f"f{serial}", 1, scheduler="other-scheduler")
            if nodes[name].admit(pod):
                for w in worlds:
                    w.cluster.add_bound_pod(pod, name, now)
                bound.append((pod, name))
