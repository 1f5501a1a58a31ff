"""The plain-Python forms for a few rows (``filter_few``/``score_few``) are the vector forms, exactly.

When only a few rows changed since a pod shape last looked, the scheduler judges them in plain
Python instead of NumPy. On random clusters -- the vector-equivalence suite's nodes (known
directly, only by report, without topology data, unusable; cordoned, tainted, labelled; with
bound, assumed and stale pods) plus nodes that force a CPU bind policy or are agent-managed,
nodes with capped NUMA zones (``toposched.io/cpu-capacity``) and 8-GPU servers -- and random
pods (with NUMA and CPU bind policies, device scopes, whole GPUs with HCAs, GPU shares):

* every plugin of the built-in ``toposched`` profile (and NodeResourcesFit under each scoring
  strategy) gives, on any sorted set of rows, the same verdicts, reasons (with their Status
  codes) and scores in its few form as in its vector form;
* every row a filter's vector form refuses, its per-node ``filter`` refuses with the same code
  (Unschedulable or UnschedulableAndUnresolvable), and the scheduler's reason table keeps that
  code for the row's verdict;
* a scheduler that always uses the few path and one that never does decide every pod of a
  random sequence (binds, unreserves, cordons between them) identically: node, placement,
  status, reasons.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.scheduler.test_vector_equivalence import (
    SETTINGS,
    ClusterDescription,
    clusters,
    decide_alike,
    next_pod,
    outcome,
    scheduling_pods,
)
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.framework import CycleState, Profile, registry
from toposched.scheduler.intent import CPU_BIND_POLICY_ANNOTATION, DEVICE_SCOPE_ANNOTATION, NUMA_POLICY_ANNOTATION
from toposched.scheduler.nodes import NodeSpec
from toposched.scheduler.plugins.cpu_orchestration import CPU_ENFORCEMENT, KOORDINATOR_CPU_BIND_POLICY_LABEL
from toposched.scheduler.plugins.zone_capacity import CPU_CAPACITY_ATTRIBUTE
from toposched.scheduler.profile_setup import load_profile
from toposched.scheduler.scheduler import Scheduler
from toposched.scheduler.status import Code, code_of
from toposched.sim.hardware import load_hardware_profile as hardware_profile
from toposched.topology import Machine
from toposched.workload import Container, Pod

GI = 2**30
GPU_SERVER = hardware_profile("gpu-8x")
NODE_LABELS = (
    {},
    {},
    {CPU_ENFORCEMENT: "agent"},
    {KOORDINATOR_CPU_BIND_POLICY_LABEL: "FullPCPUsOnly"},
    {KOORDINATOR_CPU_BIND_POLICY_LABEL: "SpreadByPCPUs", CPU_ENFORCEMENT: "agent"},
    {CPU_ENFORCEMENT: "neither"},  # unreadable: pods with exclusive CPUs are refused there
)


def capped(machine: Machine, caps: dict[int, str]) -> Machine:
    """The machine with ``toposched.io/cpu-capacity`` on some NUMA nodes."""
    nodes = tuple(dataclasses.replace(n, attributes={**n.attributes, CPU_CAPACITY_ATTRIBUTE: caps[n.id]})
                  if n.id in caps else n for n in machine.numa_nodes)
    return dataclasses.replace(machine, numa_nodes=nodes)


@dataclasses.dataclass(frozen=True)
class Setting:
    """A random cluster of the vector-equivalence suite, its extra labels and caps, and GPU servers."""

    base: ClusterDescription
    labels: tuple[dict[str, str], ...]  # extra labels per base node
    caps: tuple[dict[int, str], ...]  # capped zones per base node (nodes known with their hardware)
    gpu_servers: int

    def build(self) -> Cluster:
        cluster = self.base.build()
        for node, labels, caps in zip(self.base.nodes, self.labels, self.caps):
            spec = cluster.nodes[node.spec.name].spec
            spec = dataclasses.replace(spec, labels={**spec.labels, **labels})
            if node.kind == "direct" and caps:
                cluster.set_node(spec, machine=capped(node.shape.machine, caps), kubelet_config=node.shape.config,
                                 device_plugins=node.shape.devices)
            else:
                cluster.set_node(spec)
        for i in range(self.gpu_servers):
            cluster.set_node(NodeSpec(f"gpu{i}"), machine=GPU_SERVER.machine, kubelet_config=GPU_SERVER.kubelet,
                             device_plugins={r: list(d) for r, d in (GPU_SERVER.device_plugins or {}).items()})
        return cluster


@st.composite
def settings_(draw: st.DrawFn) -> Setting:
    base = draw(clusters())
    labels = tuple(draw(st.sampled_from(NODE_LABELS)) for _ in base.nodes)
    caps = tuple(draw(st.sampled_from(({}, {}, {0: "1"}, {0: "0", 1: "2"}, {0: "x"}))) for _ in base.nodes)
    return Setting(base, labels, caps, draw(st.integers(0, 2)))


@st.composite
def few_pods(draw: st.DrawFn, name: str) -> Pod:
    """A scheduling pod of the vector suite, a whole-GPU pod with HCAs, or a GPU share; with policies."""
    kind = draw(st.sampled_from(("plain", "plain", "gpus", "share")))
    if kind == "plain":
        pod = draw(scheduling_pods(name))
    elif kind == "gpus":
        gpus = draw(st.sampled_from((1, 2, 4, 8)))
        limits = {"cpu": 2000 * gpus, "memory": 4 * GI * gpus, "nvidia.com/gpu": gpus, "rdma/hca": max(1, gpus // 2)}
        pod = Pod(name, uid=name, containers=(Container("train", limits=limits),))
    else:
        percent = draw(st.sampled_from((10, 25, 50, 100, 200)))
        limits = {"koordinator.sh/gpu-core": percent, "koordinator.sh/gpu-memory-ratio": percent}
        pod = Pod(name, uid=name, containers=(Container("infer", requests={"cpu": 1000, "memory": GI}, limits=limits),))
    annotations = dict(pod.annotations)
    scope = draw(st.sampled_from(("", "", "pcie:required", "numa:preferred", "pcie:preferred")))
    if scope:
        annotations[DEVICE_SCOPE_ANNOTATION] = scope
    bind = draw(st.sampled_from(("", "", "", "FullPCPUs", "SpreadByPCPUs")))
    if bind:
        annotations[CPU_BIND_POLICY_ANNOTATION] = bind
    if draw(st.integers(0, 4)) == 0:
        annotations[NUMA_POLICY_ANNOTATION] = draw(st.sampled_from(("single-numa-node", "restricted", "best-effort")))
    return dataclasses.replace(pod, annotations=annotations)


def plugins() -> tuple[list, list]:
    """The toposched profile's filters and scores, and NodeResourcesFit under every strategy."""
    profile = load_profile("toposched")
    filters = list(profile.filters)
    scores = [p for p, _ in profile.scores]
    for strategy in ("LeastAllocated", "MostAllocated", "BalancedAllocation"):
        scores.append(registry.create("NodeResourcesFit", {"scoringStrategy": {"type": strategy}}))
    scores.append(registry.create("NodeResourcesBalancedAllocation"))
    scores.append(registry.create("ZoneCapacity"))
    return filters, scores


def as_reasons(mask: np.ndarray, reason) -> list[str | None]:
    if isinstance(reason, str):
        return [None if ok else reason for ok in mask.tolist()]
    return [None if ok else r for ok, r in zip(mask.tolist(), reason)]


def codes(reasons: list[str | None]) -> list[Code | None]:
    """The Status code of each refused row's reason (texts compare equal whatever their code)."""
    return [None if r is None else code_of(r) for r in reasons]


@settings(max_examples=60, **SETTINGS)
@given(setting=settings_(), data=st.data())
def test_few_forms_are_the_vector_forms(setting: Setting, data: st.DataObject) -> None:
    cluster = setting.build()
    scheduler = Scheduler(cluster, load_profile("toposched"))
    filters, scores = plugins()
    for i in range(3):
        pod = data.draw(few_pods(f"p{i}"), label=f"pod {i}")
        scheduler.table.refresh()
        table = scheduler.table
        every = list(range(table.size))
        subset = sorted(data.draw(st.sets(st.sampled_from(every), min_size=1), label="rows"))
        state = CycleState(cluster=cluster)
        refused = False
        for plugin in scheduler.profile.pre_filters:
            refused = refused or not plugin.pre_filter(state, pod).is_success
        alone: dict[tuple[str, int], str | None] = {}  # (plugin, row) -> its reason among every row
        for rows in (every, subset):
            for plugin in filters:
                vector = as_reasons(*plugin.filter_all(state, pod, table, np.array(rows, dtype=np.int64)))
                for row, reason in zip(rows, vector):  # a row's reason does not depend on the rows judged with it
                    seen = alone.setdefault((plugin.name, row), reason)
                    assert seen == reason and codes([seen]) == codes([reason]), f"{plugin.name} on row {row}"
                if not hasattr(plugin, "filter_few"):
                    continue  # batch form only: the runner derives its few-rows form from it
                few = plugin.filter_few(state, pod, table, rows)
                assert few == vector, f"{plugin.name} on rows {rows}: few {few} vector {vector}"
                assert codes(few) == codes(vector), f"{plugin.name} on rows {rows}: few {codes(few)} vector {codes(vector)}"
                if any(r is not None for r in few):
                    event(f"{plugin.name} refuses a row")
            if refused:
                continue
            for plugin in scores:
                vector_scores = plugin.score_all(state, pod, table, np.array(rows, dtype=np.int64)).tolist()
                few_scores = plugin.score_few(state, pod, table, rows)
                assert few_scores == vector_scores, f"{plugin.name} on rows {rows}"
                assert all(type(s) is int for s in few_scores)
        decision = scheduler.schedule(pod, now=10.0 + i)
        if decision.node is not None and data.draw(st.booleans(), label="bind"):
            scheduler.bound(pod, now=10.0 + i)


@settings(max_examples=60, **SETTINGS)
@given(setting=settings_(), data=st.data())
def test_the_vector_forms_refuse_with_the_per_node_code(setting: Setting, data: st.DataObject) -> None:
    """Unschedulable vs UnschedulableAndUnresolvable survives the batch path: per filter of the
    built-in profile, and through the scheduler's reason table (``Scheduler.refusal``)."""
    cluster = setting.build()
    scheduler = Scheduler(cluster, load_profile("toposched"))
    filters, _ = plugins()
    for i in range(3):
        pod = data.draw(few_pods(f"p{i}"), label=f"pod {i}")
        scheduler.table.refresh()
        table = scheduler.table
        rows = np.arange(table.size)
        state = CycleState(cluster=cluster)
        for plugin in scheduler.profile.pre_filters:
            plugin.pre_filter(state, pod)
        for plugin in filters:
            if not hasattr(plugin, "filter"):
                continue  # batch form only: no per-node form to hold it to
            vector = as_reasons(*plugin.filter_all(state, pod, table, rows))
            for row, reason in enumerate(vector):
                if reason is None:
                    continue
                verdict = plugin.filter(state, pod, cluster.nodes[table.names[row]])
                assert not verdict.is_success, f"{plugin.name} refuses {table.names[row]} only in its vector form"
                assert code_of(reason) == verdict.code, \
                    f"{plugin.name} on {table.names[row]}: vector {code_of(reason).label} per node {verdict.code.label}"
                event(f"{plugin.name} refuses {verdict.code.label}")
        # The scheduler's verdicts: each refused row's reason index keeps the code of the first filter
        # whose vector form refuses the row, which is its per-node code.
        state, status = scheduler.runner.pre_filter(pod)
        if status.is_success:
            verdict, _ = scheduler.evaluate(state, pod, None, rows)
            for row, index in enumerate(verdict.tolist()):
                if index < 0:
                    continue
                one = np.array([row])
                first = next(p for p in scheduler.runner.filters if not p.filter_all(state, pod, table, one)[0][0])
                reason = as_reasons(*first.filter_all(state, pod, table, one))[0]
                expected = first.filter(state, pod, cluster.nodes[table.names[row]]).code if hasattr(first, "filter") \
                    else code_of(reason)
                assert (scheduler.refusal(index).code, scheduler.reasons[index]) == (expected, reason), table.names[row]
        decision = scheduler.schedule(pod, now=10.0 + i)
        if decision.node is not None and data.draw(st.booleans(), label="bind"):
            scheduler.bound(pod, now=10.0 + i)


def builtin() -> Profile:
    return load_profile("toposched")


@settings(max_examples=40, **SETTINGS)
@given(setting=settings_(), data=st.data())
def test_a_scheduler_on_the_few_path_decides_as_one_on_the_vector_path(setting: Setting, data: st.DataObject) -> None:
    few, vector = Scheduler(setting.build(), builtin(), few_rows=10**9), Scheduler(setting.build(), builtin(), few_rows=0)
    templates = [data.draw(few_pods(f"t{k}"), label=f"shape {k}") for k in range(3)]
    names = sorted(few.cluster.nodes)
    for i in range(10):
        pod = next_pod(data, templates, i)
        now = 10.0 + i
        first, second = few.schedule(pod, now=now), vector.schedule(pod, now=now)
        assert outcome(first) == outcome(second), f"pod {i}: few {outcome(first)} vector {outcome(second)}"
        action = data.draw(st.sampled_from(("bind", "bind", "unreserve", "cordon")), label="then")
        for scheduler in (few, vector):
            if action == "bind" and first.node is not None:
                scheduler.bound(pod, now=now)
            elif action == "unreserve" and first.node is not None:
                scheduler.unreserve(pod)
            elif action == "cordon":
                spec = scheduler.cluster.nodes[names[i % len(names)]].spec
                scheduler.cluster.set_node(dataclasses.replace(spec, unschedulable=not spec.unschedulable))


@settings(max_examples=40, **SETTINGS)
@given(setting=settings_(), data=st.data())
def test_the_per_shape_cache_changes_no_decision(setting: Setting, data: st.DataObject) -> None:
    """Cached rows and recomputed rows decide alike, GPUShare's normalized BestFit score included.

    BestFit min-max normalizes over every feasible node: the cache keeps raw scores per row and
    the scheduler normalizes them over all feasible rows when it chooses, never over the rows
    that happened to be recomputed together.
    """
    setting = dataclasses.replace(setting, gpu_servers=3)
    cached, uncached = Scheduler(setting.build(), builtin()), Scheduler(setting.build(), builtin(), cache_size=0)
    templates = [data.draw(few_pods(f"t{k}"), label=f"shape {k}") for k in range(3)]
    for i in range(12):
        pod, now, first = decide_alike(cached, uncached, data, templates, i)
        if first.node is not None:
            for scheduler in (cached, uncached):
                scheduler.bound(pod, now=now)
