"""The vector forms agree with the per-node forms, and the scheduler's cache changes nothing.

On random clusters — nodes known with their hardware, known only by their report, without
topology data, or with an unusable report; cordoned, tainted, labelled; with bound and assumed
pods and stale reports — and random pods (with node selectors and tolerations):

* the :class:`NodeTable` mirrors the cluster: per row, the allocatable and requested columns
  are the node's, the zone columns are ``Cluster.zone_available``;
* NodeUnschedulable, TaintToleration, NodeAffinity and NodeResourcesFit give, row by row, the
  per-node filter's verdict, whatever rows they are asked about, also after nodes' labels and
  taints change and nodes leave and join;
* NUMAAlignment's vector form is a necessary condition: every node its exact per-node filter
  passes, the vector filter passes too;
* NUMAScore's and NodeResourcesFit's (every strategy) vector scores are the per-node scores, and
  NodeResourcesFit's are what its formula gives from the node's own allocatable and requests;
* a scheduler that caches evaluations per pod shape decides every pod of a random sequence
  (repeated shapes, binds, unreserves, foreign pods, reports, cordons between them) exactly as a
  scheduler that caches nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from tests.scheduler.strategies import GI, GPU, NodeShape, node_shapes, pods
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.framework import CycleState, Profile, registry
from toposched.scheduler.nodes import NodeSpec, Taint
from toposched.scheduler.plugins.cpu_orchestration import FlaggedNodes
from toposched.scheduler.scheduler import Decision, Scheduler
from toposched.workload import Pod, Toleration

SETTINGS = {"deadline": None, "derandomize": True, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
KINDS = ("direct", "direct", "direct", "report", "report", "plain", "broken")
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")
EXACT_FILTERS = ("NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit")
FIT_STRATEGIES = ("LeastAllocated", "MostAllocated", "BalancedAllocation")
NON_ZERO = {"cpu": 100, "memory": 200 * 2**20}  # kube-scheduler's scoring defaults for containers without requests


def profile() -> Profile:
    return Profile.build(
        "toposched",
        filters=["NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit", "NUMAAlignment"],
        scores=[("NUMAScore", 5), ("NodeResourcesFit", 1)],
        args={"NodeResourcesFit": {"scoringStrategy": {"type": "MostAllocated"}}},
    )


# ---- random clusters, as descriptions built twice when needed ------------------------------------


@dataclass(frozen=True)
class NodeDescription:
    """One node: how the cluster knows it (``kind``), its hardware and kubelet, its Node object."""

    kind: str  # direct | report | plain | broken
    shape: NodeShape
    spec: NodeSpec

    def add_to(self, cluster: Cluster, name: str | None = None, now: float = 0.0) -> None:
        """Add the node to ``cluster`` (under ``name``, if given) as its kind says the cluster learns of it."""
        spec = self.spec if name is None else dataclasses.replace(self.spec, name=name)
        if self.kind == "direct":
            cluster.set_node(spec, machine=self.shape.machine, kubelet_config=self.shape.config,
                             device_plugins=self.shape.devices)
            return
        cluster.set_node(spec)
        report = self.shape.kubelet(spec.name, reference=False).to_nrt()
        if self.kind == "report":
            cluster.update_report(report, now=now)
        elif self.kind == "broken":
            cluster.update_report(dataclasses.replace(report, zones=()), now=now)  # no NUMA zone: unusable


@dataclass(frozen=True)
class ClusterDescription:
    nodes: tuple[NodeDescription, ...]
    history: tuple[tuple[Pod, str, bool], ...]  # (pod, node, assumed?) in order
    stale_reports: tuple[str, ...]  # nodes whose report, published before the history, is the last one

    def build(self) -> Cluster:
        """A cluster in the described state (the same state every time it is called)."""
        cluster = Cluster(reflect_timeout=120.0)
        for node in self.nodes:
            node.add_to(cluster)
        for name in self.stale_reports:
            node = next(n for n in self.nodes if n.spec.name == name)
            cluster.update_report(node.shape.kubelet(name, reference=False).to_nrt(), now=0.0)
        for i, (pod, name, assumed) in enumerate(self.history):
            if assumed:
                cluster.assume(pod, name, now=1.0 + i)
            else:
                cluster.add_bound_pod(pod, name, now=1.0 + i)
        return cluster


@st.composite
def node_specs(draw: st.DrawFn, name: str, kind: str) -> NodeSpec:
    explicit = kind in ("plain", "broken") or draw(st.integers(0, 2)) == 0
    allocatable = {}
    if explicit:
        allocatable = {
            "cpu": draw(st.sampled_from((2000, 8000, 32000))),
            "memory": draw(st.sampled_from((4, 16, 64))) * GI,
            "pods": draw(st.sampled_from((110, 110, 2, 0))),
        }
        if draw(st.booleans()):
            allocatable[GPU] = draw(st.integers(0, 2))
    taints = ()
    if draw(st.integers(0, 3)) == 0:
        taints = (Taint("dedicated", draw(st.sampled_from(("gpu", "batch"))), draw(st.sampled_from(TAINT_EFFECTS))),)
    return NodeSpec(
        name,
        allocatable=allocatable,
        labels={"zone": draw(st.sampled_from(("a", "b")))} if draw(st.booleans()) else {},
        taints=taints,
        unschedulable=draw(st.integers(0, 7)) == 0,
    )


@st.composite
def scheduling_pods(draw: st.DrawFn, name: str) -> Pod:
    """A pod of the shared strategies, sometimes with a node selector and tolerations."""
    pod = draw(pods(name))
    selector = {"zone": draw(st.sampled_from(("a", "b")))} if draw(st.integers(0, 3)) == 0 else {}
    tolerations = draw(st.sampled_from((
        (),
        (),
        (Toleration("dedicated", "Exists"),),
        (Toleration("dedicated", "Equal", "gpu", "NoSchedule"),),
        (Toleration(operator="Exists"),),
    )))
    return dataclasses.replace(pod, node_selector=selector, tolerations=tolerations)


@st.composite
def clusters(draw: st.DrawFn, *, max_nodes: int = 5) -> ClusterDescription:
    count = draw(st.integers(1, max_nodes))
    nodes = []
    for i in range(count):
        kind = draw(st.sampled_from(KINDS))
        shape = draw(node_shapes(max_numa=4))
        nodes.append(NodeDescription(kind, shape, draw(node_specs(f"n{i}", kind))))
    history = []
    for j in range(draw(st.integers(0, 6))):
        history.append((draw(pods(f"h{j}")), f"n{draw(st.integers(0, count - 1))}", draw(st.booleans())))
    direct = [n.spec.name for n in nodes if n.kind == "direct"]
    stale = tuple(name for name in direct if draw(st.booleans()))
    return ClusterDescription(tuple(nodes), tuple(history), stale)


def cycle_state(cluster: Cluster, scheduler: Scheduler, pod: Pod) -> CycleState:
    state = CycleState(cluster=cluster)
    for plugin in scheduler.profile.pre_filters:
        assert plugin.pre_filter(state, pod).is_success
    return state


# ---- the table mirrors the cluster -------------------------------------------------------------


def check_table_mirrors_cluster(cluster: Cluster, scheduler: Scheduler) -> None:
    table = scheduler.table
    table.refresh()
    alloc, used, free, zfree, zvalid = (table.view(n) for n in ("alloc", "used", "free", "zfree", "zvalid"))
    for name, record in cluster.nodes.items():
        row = table.index[name]
        allocatable = record.spec.allocatable or (record.model.allocatable if record.model else {})
        for resource in set(allocatable) | set(table.resources):
            col = table.resources.index(resource)
            assert alloc[col, row] == allocatable.get(resource, 0), (name, resource)
            assert free[col, row] == alloc[col, row] - used[col, row], (name, resource)
        for resource in set(record.requested) | set(table.resources):
            assert used[table.resources.index(resource), row] == record.requested.get(resource, 0), (name, resource)
        zones = cluster.zone_available(name)
        assert int(zvalid[:, row].sum()) == len(zones)
        for slot, numa_id in enumerate(sorted(zones)):
            for resource in set(zones[numa_id]) | set(table.zone_resources):
                assert zfree[table.zone_resources.index(resource), slot, row] == zones[numa_id].get(resource, 0), \
                    (name, numa_id, resource)
        for resource in table.zone_resources:
            per_zone = [z.get(resource, 0) for _, z in sorted(zones.items())]
            assert table.zone_max(resource)[row] == max(per_zone, default=0), (name, resource)
            assert table.zone_sum(resource)[row] == sum(per_zone), (name, resource)


# ---- properties --------------------------------------------------------------------------------


@settings(max_examples=120, **SETTINGS)
@given(description=clusters(), data=st.data())
def test_vector_filters_and_scores_are_the_per_node_ones(description: ClusterDescription, data: st.DataObject) -> None:
    cluster = description.build()
    scheduler = Scheduler(cluster, profile())
    exact_filters = [registry.create(name) for name in EXACT_FILTERS]
    alignment = registry.create("NUMAAlignment")
    numa_score = registry.create("NUMAScore")
    fit_scores = [registry.create("NodeResourcesFit", {"scoringStrategy": {"type": s}}) for s in FIT_STRATEGIES]
    fit_scores.append(registry.create("NodeResourcesBalancedAllocation"))
    for i in range(4):
        pod = data.draw(scheduling_pods(f"p{i}"), label=f"pod {i}")
        check_table_mirrors_cluster(cluster, scheduler)
        table = scheduler.table
        names = list(table.names)
        rows = np.arange(table.size)
        subset = np.array(sorted(data.draw(st.sets(st.sampled_from(list(rows))), label="rows")), dtype=np.int64)
        state = cycle_state(cluster, scheduler, pod)
        for plugin in exact_filters:
            mask, _ = plugin.filter_all(state, pod, table, rows)
            exact = [plugin.filter(state, pod, cluster.nodes[name]).is_success for name in names]
            assert list(mask) == exact, f"{plugin.name}: vector {list(mask)} per node {exact}"
            part, _ = plugin.filter_all(state, pod, table, subset)
            assert list(part) == [exact[r] for r in subset], f"{plugin.name} on rows {list(subset)}"
        vector, _ = alignment.filter_all(state, pod, table, rows)
        for row, name in enumerate(names):
            verdict = alignment.filter(state, pod, cluster.nodes[name])
            event(f"NUMAAlignment exact={verdict.is_success} vector={bool(vector[row])}")
            if verdict.is_success:
                assert vector[row], f"NUMAAlignment's vector form refused {name}, which its exact filter passes"
        for plugin in [numa_score, *fit_scores]:
            scores = plugin.score_all(state, pod, table, rows)
            # A row's score does not depend on the rows scored with it.
            per_node = [int(plugin.score_all(state, pod, table, np.array([row]))[0]) for row in rows]
            assert list(scores) == per_node, f"{plugin.name}: vector {list(scores)} row by row {per_node}"
            if plugin is not numa_score:
                assert per_node == [fit_score(plugin, pod, cluster, name) for name in names], plugin.strategy
        decision = scheduler.schedule(pod, now=10.0 + i)
        if decision.node is not None and data.draw(st.booleans(), label="bind"):
            scheduler.bound(pod, now=10.0 + i)


LABEL_VALUES = {"zone": ("a", "b"), "rack": ("r1", "r2", "r3")}


@st.composite
def node_labels(draw: st.DrawFn) -> dict[str, str]:
    return {key: draw(st.sampled_from(values)) for key, values in LABEL_VALUES.items() if draw(st.booleans())}


@st.composite
def node_taints(draw: st.DrawFn) -> tuple[Taint, ...]:
    keys = draw(st.lists(st.sampled_from(("dedicated", "gpu")), max_size=2, unique=True))
    return tuple(Taint(key, draw(st.sampled_from(("x", "y"))), draw(st.sampled_from(TAINT_EFFECTS))) for key in keys)


@st.composite
def selector_pods(draw: st.DrawFn, name: str) -> Pod:
    selector = {key: draw(st.sampled_from((*values, "nowhere"))) for key, values in LABEL_VALUES.items() if draw(st.booleans())}
    tolerations = tuple(draw(st.lists(st.sampled_from((
        Toleration("dedicated", "Exists"),
        Toleration("gpu", "Equal", "x", "NoSchedule"),
        Toleration("gpu", "Equal", "y"),
        Toleration(operator="Exists"),
    )), max_size=2)))
    return Pod(name, uid=name, node_selector=selector, tolerations=tolerations)


@settings(max_examples=60, **SETTINGS)
@given(data=st.data())
def test_label_and_taint_filters_follow_nodes_that_change(data: st.DataObject) -> None:
    """The label columns and taint classes the table keeps are rewritten when a node's labels or
    taints change, when it leaves and when nodes join: the batch and few-rows filters give the
    per-node verdict after every change (a row whose node left passes TaintToleration, and
    NodeAffinity only for a pod without a selector, as before any index existed)."""
    cluster = Cluster()
    count = data.draw(st.integers(1, 6), label="nodes")
    for i in range(count):
        cluster.set_node(NodeSpec(f"n{i}", allocatable={"cpu": 4000, "memory": 8 * GI},
                                  labels=data.draw(node_labels()), taints=data.draw(node_taints())))
    scheduler = Scheduler(cluster, profile())
    filters = [registry.create("TaintToleration"), registry.create("NodeAffinity")]
    for step in range(8):
        table = scheduler.table
        table.refresh()
        rows = np.arange(table.size)
        for k in range(2):
            pod = data.draw(selector_pods(f"p{step}-{k}"), label="pod")
            state = cycle_state(cluster, scheduler, pod)
            for plugin in filters:
                gone = plugin.name == "TaintToleration" or not pod.node_selector
                expected = [plugin.filter(state, pod, cluster.nodes[name]).is_success if name in cluster.nodes
                            else gone for name in table.names]
                mask, _ = plugin.filter_all(state, pod, table, rows)
                assert list(mask) == expected, (plugin.name, pod, step)
                few = plugin.filter_few(state, pod, table, rows.tolist())
                assert [reason is None for reason in few] == expected, (plugin.name, pod, step)
        action = data.draw(st.sampled_from(("relabel", "retaint", "remove", "add")), label="action")
        names = sorted(cluster.nodes)
        if action == "add" or not names:
            cluster.set_node(NodeSpec(f"n{count}", allocatable={"cpu": 4000, "memory": 8 * GI},
                                      labels=data.draw(node_labels()), taints=data.draw(node_taints())))
            count += 1
        elif action == "remove":
            cluster.remove_node(data.draw(st.sampled_from(names), label="removed"))
        else:
            spec = cluster.nodes[data.draw(st.sampled_from(names), label="changed")].spec
            change = {"labels": data.draw(node_labels())} if action == "relabel" else {"taints": data.draw(node_taints())}
            cluster.set_node(dataclasses.replace(spec, **change))


def fit_score(plugin: object, pod: Pod, cluster: Cluster, name: str) -> int:
    """NodeResourcesFit's score from the node's own allocatable and requests, in upstream's integer arithmetic."""
    record = cluster.nodes[name]
    allocatable = record.spec.allocatable or (record.model.allocatable if record.model else {})
    requests = pod.effective_requests()
    weights = plugin.weights  # type: ignore[attr-defined]
    strategy = plugin.strategy  # type: ignore[attr-defined]
    if strategy == "BalancedAllocation":
        fractions = []
        for resource in weights:
            want = requests.get(resource, 0) or NON_ZERO.get(resource, 0)
            alloc = allocatable.get(resource, 0)
            used = record.requested.get(resource, 0) + want
            fractions.append(min(used / max(alloc, 1), 1.0) if alloc > 0 else 1.0)
        return int((1.0 - np.array(fractions).std()) * 100)
    total = 0
    for resource, weight in weights.items():
        want = requests.get(resource, 0) or NON_ZERO.get(resource, 0)
        capacity = allocatable.get(resource, 0)
        requested = record.requested.get(resource, 0) + want
        if capacity <= 0:
            score = 0
        elif strategy == "MostAllocated":
            score = min(requested, capacity) * 100 // capacity
        else:
            score = 0 if requested > capacity else (capacity - requested) * 100 // capacity
        total += score * weight
    return total // sum(weights.values())


def outcome(decision: Decision) -> tuple:
    placement = decision.placement.to_dict() if decision.placement else None
    return decision.node, placement, decision.status, dict(decision.reasons), decision.nodes


def cache_outcome(decision: Decision) -> tuple:
    """:func:`outcome` as a scheduler with the per-shape cache must match one without it.

    A scheduled pod's reasons are left out: they list the better nodes whose exact placement
    refused it in this cycle, and with the cache a node that refused an earlier pod of the same
    shape is not tried again until it changes (its refusal is the row's cached verdict, and it
    still counts in an unscheduled pod's reasons).
    """
    node, placement, status, reasons, nodes = outcome(decision)
    return node, placement, status, reasons if node is None else None, nodes


def next_pod(data: st.DataObject, templates: list[Pod], i: int) -> Pod:
    """Pod ``i``: a copy of one of the drawn shapes under its own name and UID."""
    template = templates[data.draw(st.integers(0, len(templates) - 1), label="shape")]
    return dataclasses.replace(template, name=f"p{i}", uid=f"p{i}")


def decide_alike(one: Scheduler, other: Scheduler, data: st.DataObject, templates: list[Pod], i: int
                 ) -> tuple[Pod, float, Decision]:
    """Pod ``i`` (:func:`next_pod`) scheduled by both at time ``10 + i``; the two decisions must agree as
    :func:`cache_outcome` compares them. Returns the pod, the time and the first decision."""
    pod = next_pod(data, templates, i)
    now = 10.0 + i
    first, second = one.schedule(pod, now=now), other.schedule(pod, now=now)
    assert cache_outcome(first) == cache_outcome(second), f"pod {i}: {outcome(first)} against {outcome(second)}"
    return pod, now, first


def settle(scheduler: Scheduler, pod: Pod, action: str, decision: Decision, now: float) -> bool:
    """Bind (``action`` "bind") or unreserve ("unreserve") a pod the decision placed; whether it did."""
    if decision.node is None or action not in ("bind", "unreserve"):
        return False
    if action == "bind":
        scheduler.bound(pod, now=now)
    else:
        scheduler.unreserve(pod)
    return True


@settings(max_examples=80, **SETTINGS)
@given(description=clusters(), data=st.data())
def test_the_cache_decides_as_a_scheduler_without_one(description: ClusterDescription, data: st.DataObject) -> None:
    cached_cluster, plain_cluster = description.build(), description.build()
    cached = Scheduler(cached_cluster, profile())
    plain = Scheduler(plain_cluster, profile(), cache_size=0)
    templates = [data.draw(scheduling_pods(f"t{k}"), label=f"shape {k}") for k in range(3)]
    node_names = [n.spec.name for n in description.nodes]
    placed: list[Pod] = []
    for i in range(10):
        pod, now, first = decide_alike(cached, plain, data, templates, i)
        event(f"scheduled={first.node is not None}")
        if first.node is not None:
            placed.append(pod)
        action = data.draw(st.sampled_from(("none", "bind", "unreserve", "foreign", "report", "cordon", "join")),
                           label="then")
        newcomer = data.draw(st.sampled_from(description.nodes), label="joining")
        for scheduler in (cached, plain):
            cluster = scheduler.cluster
            if settle(scheduler, pod, action, first, now):
                continue
            if action == "foreign":
                foreign = dataclasses.replace(templates[i % len(templates)], name=f"f{i}", uid=f"f{i}")
                cluster.add_bound_pod(foreign, node_names[i % len(node_names)], now=now)
            elif action == "report":
                node = description.nodes[i % len(description.nodes)]
                if node.kind in ("direct", "report"):
                    cluster.update_report(node.shape.kubelet(node.spec.name, reference=False).to_nrt(), now=now)
            elif action == "cordon":
                spec = cluster.nodes[node_names[i % len(node_names)]].spec
                cluster.set_node(dataclasses.replace(spec, unschedulable=not spec.unschedulable))
            elif action == "join":  # the cached shapes' rows grow by the new node's
                newcomer.add_to(cluster, f"joined-{i}", now=now)


@settings(max_examples=60, **SETTINGS)
@given(description=clusters(), data=st.data())
def test_dropping_the_rows_of_removed_nodes_changes_no_decision(description: ClusterDescription,
                                                                  data: st.DataObject) -> None:
    """Nodes leave and others join (with new names, as autoscaled nodes do) while pods come and go:
    a table that drops dead rows and renumbers the others as soon as they outnumber a quarter of
    the live ones decides every pod as one that keeps them all. (A scheduled pod's reasons are
    compared as :func:`cache_outcome` does: renumbering forgets which nodes refused earlier pods
    of a shape, so one may be tried, and refuse, again.)"""
    compacting, keeping = Scheduler(description.build(), profile()), Scheduler(description.build(), profile())
    compacting.table.dead_rows_kept, keeping.table.dead_rows_kept = 0, 1 << 30
    templates = [data.draw(scheduling_pods(f"t{k}"), label=f"shape {k}") for k in range(3)]
    joined = 0
    for i in range(12):
        pod, now, first = decide_alike(compacting, keeping, data, templates, i)
        live = len(compacting.cluster.nodes)
        assert live <= compacting.table.size <= live + live // 4
        action = data.draw(st.sampled_from(("bind", "unreserve", "remove", "join", "replace")), label="then")
        names = sorted(compacting.cluster.nodes)
        leaving = data.draw(st.sampled_from(names), label="leaving") if names else None
        newcomer = data.draw(st.sampled_from(description.nodes), label="joining")
        for scheduler in (compacting, keeping):
            cluster = scheduler.cluster
            settle(scheduler, pod, action, first, now)
            if action in ("remove", "replace") and leaving is not None:
                cluster.remove_node(leaving)
            if action in ("join", "replace"):
                newcomer.add_to(cluster, f"joined-{joined}", now=now)
        joined += action in ("join", "replace")
    keeping.table.refresh()
    assert keeping.table.size == len(description.nodes) + joined
    event(f"renumbered={compacting.table.layout > 0}")


def test_a_renumbered_table_answers_for_the_nodes_now_in_its_rows() -> None:
    """After the table drops a removed node's row and renumbers the rest: a label key asked about
    for the first time reads each row's own node, taint classes and the flagged nodes' rows follow
    the renumbering (also once a new node brings the table back to its old size), and every
    column mirrors the cluster."""
    cluster = Cluster()
    for i, (zone, taints) in enumerate((("a", ()), ("b", (Taint("dedicated", "gpu", "NoSchedule"),)), ("c", ()))):
        cluster.set_node(NodeSpec(f"n{i}", allocatable={"cpu": 4000, "memory": 8 * GI, "pods": 110}, labels={"zone": zone, "rack": zone},
                                  taints=taints))
    scheduler = Scheduler(cluster, profile())
    table = scheduler.table
    table.dead_rows_kept = 0
    flagged = FlaggedNodes(cluster, lambda record: record.name == "n2")
    table.refresh()
    assert table.labels_match({"zone": "b"}).tolist() == [False, True, False]
    assert flagged.positions(table, table.all_rows()).tolist() == [2]
    cluster.remove_node("n0")
    table.refresh()
    assert table.names == ["n1", "n2"] and table.layout == 1
    assert table.labels_match({"rack": "b"}).tolist() == [True, False]  # a key first asked about now
    assert [table.taint_sets[c] != () for c in table.view("taint_class")] == [True, False]
    cluster.set_node(NodeSpec("n3", allocatable={"cpu": 4000, "memory": 8 * GI, "pods": 110}, labels={"zone": "a"}))
    table.refresh()
    assert table.names == ["n1", "n2", "n3"]
    assert flagged.positions(table, table.all_rows()).tolist() == [1]
    assert table.labels_match({"zone": "a"}).tolist() == [False, False, True]
    check_table_mirrors_cluster(cluster, scheduler)


def test_a_node_that_takes_no_pods_takes_none() -> None:
    cluster = Cluster()
    cluster.set_node(NodeSpec("n", allocatable={"cpu": 2000, "memory": 4 * GI, "pods": 0}))
    scheduler = Scheduler(cluster, profile())
    pod = Pod("p", uid="p")
    plugin = registry.create("NodeResourcesFit")
    state = cycle_state(cluster, scheduler, pod)
    assert plugin.filter(state, pod, cluster.nodes["n"]).message == "Too many pods"
    scheduler.table.refresh()
    mask, _ = plugin.filter_all(state, pod, scheduler.table, np.arange(1))
    assert not mask[0]
    assert scheduler.schedule(pod, now=0).node is None


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**60), st.integers(1, 2**60)), min_size=1, max_size=40),
       st.sampled_from([2**52 - 1, 2**40, 100]))
def test_nodes_resources_fits_division_through_floats_is_the_integer_division(pairs, bound):
    """NodeResourcesFit divides through float64 where every value is below 2**52: there its floor is
    Python's ``//`` (integers near the bound, exact multiples, quotients just below an integer);
    above it the integer division is kept."""
    from toposched.scheduler.plugins.basic import _floor_divide

    numerator = np.array([n % (bound + 1) for n, _ in pairs] + [bound, bound - 1, bound, 0], dtype=np.int64)
    denominator = np.array([max(1, d % (bound + 1)) for _, d in pairs] + [bound, bound, 1 if bound < 2**52 - 1 else 3, 7],
                           dtype=np.int64)
    assert _floor_divide(numerator, denominator, bound).tolist() == [
        int(n) // int(d) for n, d in zip(numerator.tolist(), denominator.tolist())]
    pairs = [*pairs, (2**53 + 1, 1), ((2**30 + 1) * 2**31 - 1, 2**31)]  # floats would round these quotients up
    big = np.array([n for n, _ in pairs], dtype=np.int64)
    small = np.array([d for _, d in pairs], dtype=np.int64)
    largest = max(int(big.max()), int(small.max()))
    assert _floor_divide(big, small, largest).tolist() == [n // d for n, d in pairs]


def test_a_pod_asking_for_more_resources_than_bits_gets_each_rows_reason() -> None:
    """The batch filter codes a row's shortfalls as bits of an int64; a pod naming 63 resources or more
    is judged row by row instead, with the per-node filter's words."""
    cluster = Cluster()
    names = [f"example.com/r{i:02d}" for i in range(70)]
    cluster.set_node(NodeSpec("rich", allocatable={"cpu": 2000, "memory": 4 * GI, "pods": 10, **dict.fromkeys(names, 5)}))
    cluster.set_node(NodeSpec("poor", allocatable={"cpu": 2000, "memory": 4 * GI, "pods": 10, **dict.fromkeys(names[:-1], 5)}))
    scheduler = Scheduler(cluster, profile())
    pod = Pod.from_dict({"metadata": {"name": "many", "uid": "many"}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": dict.fromkeys(names, "1"), "limits": dict.fromkeys(names, "1")}}]}})
    plugin = registry.create("NodeResourcesFit")
    state = cycle_state(cluster, scheduler, pod)
    scheduler.table.refresh()
    rows = np.arange(2)
    mask, reasons = plugin.filter_all(state, pod, scheduler.table, rows)
    by_name = dict(zip(scheduler.table.names, zip(mask.tolist(), [reasons[i] for i in range(2)])))
    assert by_name["rich"] == (True, "")
    assert by_name["poor"] == (False, plugin.filter(state, pod, cluster.nodes["poor"]).message)
    assert by_name["poor"][1] == f"Insufficient {names[-1]}"
