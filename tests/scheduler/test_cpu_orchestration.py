"""CPUOrchestration: Koordinator's CPU accumulator tables, its Filter rules, and the cpusets the agent enforces.

Restated from koordinator-sh/koordinator ``pkg/scheduler/plugins/nodenumaresource``:
``cpu_accumulator_test.go`` (TestTakeFullPCPUs, ...WithNUMALeastAllocated, TestCPUSpreadByPCPUs,
TestTakeSpreadByPCPUs, ...WithNUMALeastAllocated, TestTakeCPUsWithExclusivePolicy),
``plugin_test.go`` (the CPU-binding rows of TestPlugin_Filter, the fractional-request row of
TestPlugin_PreFilter) and ``util_test.go`` (Test_getCPUBindPolicy). Their machines are
``buildCPUTopologyForTest(sockets, nodes per socket, cores per node, threads per core)``: CPU ids
run through each core's threads first. Expected CPUs and reasons carry over unchanged.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from tests.scheduler.held import assert_node_sums_match_the_ledger
from toposched.errors import InputError
from toposched.kubelet import KubeletConfig, KubeletNode
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.framework import CycleState, Profile
from toposched.scheduler.intent import pod_intent
from toposched.scheduler.nodes import NodeSpec
from toposched.scheduler.plugins.cpu_orchestration import (
    CPU_ENFORCEMENT,
    KOORDINATOR_CPU_BIND_POLICY_LABEL,
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    PLACEMENT_OVERRIDE,
    CPUOrchestration,
    CPUTakeError,
    _Accumulator,
    _topology,
    cpu_enforcement,
    node_cpu_bind_policy,
    resolve_cpu_bind_policy,
    take_cpus,
)
from toposched.scheduler.scheduler import Scheduler
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod

GI = 2**30
P = CPUSet.parse
BIND = "toposched.io/cpu-bind-policy"
SPEC = "scheduling.koordinator.sh/resource-spec"


def koord_machine(sockets: int, nodes_per_socket: int, cores_per_node: int, threads: int) -> Machine:
    """Koordinator's buildCPUTopologyForTest: each core's threads have consecutive CPU ids."""
    rows, cpu, core, node = [], 0, 0, 0
    for socket in range(sockets):
        for _ in range(nodes_per_socket):
            for _ in range(cores_per_node):
                for _ in range(threads):
                    rows.append({"cpu": cpu, "core": core, "socket": socket, "numa": node})
                    cpu += 1
                core += 1
            node += 1
    return Machine.from_cpu_table(rows, memory_per_numa=32 * GI)


# ---- the accumulator: TestTakeFullPCPUs and its NUMALeastAllocated twin ----------------------------

# (case, machine shape, CPUs already taken, CPUs wanted, MostAllocated answer, LeastAllocated answer)
FULL_PCPUS_CASES = [
    ("one NUMA node", (1, 1, 4, 2), "", 2, "0-1", "0-1"),
    ("next to taken CPUs", (1, 1, 4, 2), "0-1", 2, "2-3", "2-3"),
    ("a whole socket", (2, 1, 4, 2), "", 8, "0-7", "0-7"),
    ("across sockets", (2, 1, 4, 2), "", 12, "0-11", "0-11"),
    ("the idle socket when the other is partly used", (2, 1, 4, 2), "0-1", 8, "8-15", "8-15"),
    ("fullest (most idle) socket that fits", (2, 2, 4, 2), "0-5,16-23", 6, "24-29", "8-13"),
    ("most of it on one socket", (2, 2, 4, 2), "0-5,16-23", 12, "6-15,24-25", "6-15,24-25"),
    ("first (second) socket", (2, 2, 4, 2), "0-3,8-11", 4, "4-7", "16-19"),
    ("fewest split cores", (2, 2, 2, 2), "0,2,4,8,12", 4, "10-11,14-15", "10-11,14-15"),
    ("whole cores run out: single CPUs", (2, 2, 2, 2), "0,2,4,8,10,12", 6, "5-7,13-15", "1,3,6-7,14-15"),
]


@pytest.mark.parametrize("case, shape, taken, count, most, least", FULL_PCPUS_CASES, ids=[c[0] for c in FULL_PCPUS_CASES])
def test_full_pcpus_takes_whole_cores_in_the_strategys_unit(case, shape, taken, count, most, least):
    machine = koord_machine(*shape)
    available = machine.online - P(taken)
    assert take_cpus(machine, available, count, bind_policy="FullPCPUs", strategy=MOST_ALLOCATED) == P(most)
    assert take_cpus(machine, available, count, bind_policy="FullPCPUs", strategy=LEAST_ALLOCATED) == P(least)


@pytest.mark.parametrize("shape, strategy, want", [
    ((2, 2, 2, 2), MOST_ALLOCATED, "6-7,11,13-15"),  # "the most spread cpus on the smallest idle cpus socket"
    ((2, 2, 4, 2), LEAST_ALLOCATED, "16-21"),  # "the most spread cpus on the most idle cpus socket 3"
])
def test_full_pcpus_with_a_ragged_machine(shape, strategy, want):
    machine = koord_machine(*shape)
    available = machine.online - P("0,2,4,8-10,12")
    assert take_cpus(machine, available, 6, bind_policy="FullPCPUs", strategy=strategy) == P(want)


# ---- TestCPUSpreadByPCPUs and TestTakeSpreadByPCPUs ------------------------------------------------

@pytest.mark.parametrize("strategy", [MOST_ALLOCATED, LEAST_ALLOCATED])
def test_spread_order_gives_every_core_one_cpu_before_any_gives_two(strategy):
    machine = koord_machine(2, 2, 4, 2)
    acc = _Accumulator(_topology(machine), machine.online, {}, 8, "", strategy)
    assert acc.spread(acc.free_cpus(False)) == list(range(0, 32, 2)) + list(range(1, 32, 2))


SPREAD_CASES = [
    ("one NUMA node", (1, 1, 4, 2), "", 4, "0,2,4,6", "0,2,4,6"),
    ("the partly used socket (the idle one)", (2, 1, 4, 2), "0,2", 4, "1,3-4,6", "8,10,12,14"),
    ("a socket with whole free cores", (2, 1, 4, 2), "0-3", 4, "8,10,12,14", "8,10,12,14"),
    ("most on one socket, siblings shared", (2, 1, 4, 2), "0,2", 6, "1,3-7", "8-12,14"),
]


@pytest.mark.parametrize("case, shape, taken, count, most, least", SPREAD_CASES, ids=[c[0] for c in SPREAD_CASES])
def test_spread_by_pcpus_takes_one_thread_per_core_first(case, shape, taken, count, most, least):
    machine = koord_machine(*shape)
    available = machine.online - P(taken)
    assert take_cpus(machine, available, count, bind_policy="SpreadByPCPUs", strategy=MOST_ALLOCATED) == P(most)
    assert take_cpus(machine, available, count, bind_policy="SpreadByPCPUs", strategy=LEAST_ALLOCATED) == P(least)


# ---- TestTakeCPUsWithExclusivePolicy ------------------------------------------------------------------

# (case, shape, CPUs other pods hold, their exclusivity, the pod's exclusivity, bind policy, count, answer)
EXCLUSIVE_CASES = [
    ("PCPULevel avoids the held cores: idle socket", (2, 1, 4, 2), "0,2", "PCPULevel", "PCPULevel", "SpreadByPCPUs", 4,
     "8,10,12,14"),
    ("PCPULevel: more than one thread per core", (2, 1, 4, 2), "", "PCPULevel", "PCPULevel", "SpreadByPCPUs", 10,
     "0-4,6,8,10,12,14"),
    ("PCPULevel on a big socket stays on it", (2, 1, 8, 2), "0,2", "PCPULevel", "PCPULevel", "SpreadByPCPUs", 4,
     "4,6,8,10"),
    ("no exclusivity shares the held cores", (2, 1, 8, 2), "0,2", "PCPULevel", "", "SpreadByPCPUs", 4, "1,3-4,6"),
    ("NUMANodeLevel avoids the held NUMA node", (2, 1, 4, 2), "0,2", "NUMANodeLevel", "NUMANodeLevel",
     "SpreadByPCPUs", 4, "8,10,12,14"),
    ("a pod without exclusivity ignores NUMANodeLevel", (2, 1, 4, 2), "0,2", "NUMANodeLevel", "", "SpreadByPCPUs", 4,
     "1,3-4,6"),
    ("NUMANodeLevel with FullPCPUs", (2, 1, 4, 2), "0,2", "NUMANodeLevel", "NUMANodeLevel", "FullPCPUs", 4, "8-11"),
    ("FullPCPUs without exclusivity", (2, 1, 4, 2), "0,2", "NUMANodeLevel", "", "FullPCPUs", 4, "4-7"),
]


@pytest.mark.parametrize("case, shape, taken, theirs, ours, bind, count, want", EXCLUSIVE_CASES,
                         ids=[c[0] for c in EXCLUSIVE_CASES])
def test_exclusivity_keeps_exclusive_pods_apart(case, shape, taken, theirs, ours, bind, count, want):
    machine = koord_machine(*shape)
    held = dict.fromkeys(P(taken), theirs)
    got = take_cpus(machine, machine.online - P(taken), count, bind_policy=bind, exclusive_policy=ours, held=held)
    assert got == P(want)


def test_take_cpus_refuses_what_it_cannot_give_and_bad_arguments():
    machine = koord_machine(1, 1, 4, 2)
    assert take_cpus(machine, machine.online, 0) == CPUSet()
    with pytest.raises(CPUTakeError, match="not enough cpus available to satisfy request"):
        take_cpus(machine, P("0-3"), 5)
    for kwargs, field in [({"count": -1}, "count"), ({"count": True}, "count"),
                          ({"count": 1, "strategy": "Packed"}, "strategy")]:
        with pytest.raises(InputError) as err:
            take_cpus(machine, machine.online, **kwargs)
        assert err.value.field == field
    with pytest.raises(InputError, match="no online CPUs 8-9"):
        take_cpus(machine, P("6-9"), 1)


# ---- the node: Test_getCPUBindPolicy, labels and the enforcement marker -------------------------------

def intent_of(**annotations: str):
    return pod_intent(Pod("p", annotations=annotations, containers=(Container("c", limits={"cpu": 4000, "memory": GI}),)))


@pytest.mark.parametrize("case, labels, full_only, annotations, want", [
    ("kubelet full-pcpus-only", {}, True, {SPEC: '{"preferredCPUBindPolicy": "FullPCPUs"}'}, ("FullPCPUs", True)),
    ("node label FullPCPUsOnly", {KOORDINATOR_CPU_BIND_POLICY_LABEL: "FullPCPUsOnly"}, False,
     {SPEC: '{"preferredCPUBindPolicy": "FullPCPUs"}'}, ("FullPCPUs", True)),
    ("pod requires FullPCPUs", {}, False, {SPEC: '{"requiredCPUBindPolicy": "FullPCPUs"}'}, ("FullPCPUs", True)),
    ("pod prefers FullPCPUs", {}, False, {SPEC: '{"preferredCPUBindPolicy": "FullPCPUs"}'}, ("FullPCPUs", False)),
    ("node label SpreadByPCPUs over a preference", {KOORDINATOR_CPU_BIND_POLICY_LABEL: "SpreadByPCPUs"}, False,
     {SPEC: '{"preferredCPUBindPolicy": "FullPCPUs"}'}, ("SpreadByPCPUs", True)),
    ("node label None", {KOORDINATOR_CPU_BIND_POLICY_LABEL: "None"}, False, {}, ("", False)),
    ("ours is always required", {}, False, {BIND: "SpreadByPCPUs"}, ("SpreadByPCPUs", True)),
])
def test_which_bind_policy_applies(case, labels, full_only, annotations, want):
    node = node_cpu_bind_policy(labels, kubelet_full_pcpus_only=full_only)
    policy, required, refusal = resolve_cpu_bind_policy(intent_of(**annotations), node)
    assert (policy, required) == want and refusal is None


def test_a_required_policy_the_node_does_not_allow_is_a_conflict():
    node = node_cpu_bind_policy({KOORDINATOR_CPU_BIND_POLICY_LABEL: "SpreadByPCPUs"})
    _, _, refusal = resolve_cpu_bind_policy(intent_of(**{BIND: "FullPCPUs"}), node)
    assert refusal.code.label == "UnschedulableAndUnresolvable"
    assert refusal.message.startswith("node(s) cpu bind policy conflicts with pod's required cpu bind policy")


def test_an_unknown_node_bind_label_is_refused_by_name():
    with pytest.raises(InputError) as err:
        node_cpu_bind_policy({KOORDINATOR_CPU_BIND_POLICY_LABEL: "fullpcpusonly"}, node_name="n1")
    assert err.value.field == f"labels.{KOORDINATOR_CPU_BIND_POLICY_LABEL}" and err.value.source == "node n1"


def agent_machine(machine: Machine) -> Machine:
    return Machine(machine.cpus, machine.numa_nodes, attributes={CPU_ENFORCEMENT: "agent"})


@pytest.mark.parametrize("case, machine_attr, label, report_attr, want", [
    ("nothing said: the kubelet", None, None, None, "kubelet"),
    ("node label", None, "agent", None, "agent"),
    ("machine attribute", "agent", None, None, "agent"),
    ("the report wins over the label", None, "agent", "kubelet", "kubelet"),
    ("the report wins over the machine", "kubelet", None, "agent", "agent"),
])
def test_who_enforces_cpusets(case, machine_attr, label, report_attr, want):
    machine = koord_machine(1, 1, 2, 2)
    if machine_attr:
        machine = Machine(machine.cpus, machine.numa_nodes, attributes={CPU_ENFORCEMENT: machine_attr})
    cluster = Cluster()
    labels = {CPU_ENFORCEMENT: label} if label else {}
    cluster.set_node(NodeSpec("n", labels=labels), machine=machine, kubelet_config=KubeletConfig(cpu_manager_policy="static"))
    if report_attr:
        report = KubeletNode(machine, KubeletConfig(cpu_manager_policy="static"), name="n").to_nrt()
        cluster.update_report(dataclasses.replace(report, attributes={**report.attributes, CPU_ENFORCEMENT: report_attr}), 0)
    assert cpu_enforcement(cluster.nodes["n"]) == want


@pytest.mark.parametrize("value", ["Agent", "toposched", "yes"])
def test_an_unknown_enforcement_value_is_refused_by_name(value):
    cluster = Cluster()
    cluster.set_node(NodeSpec("n", labels={CPU_ENFORCEMENT: value}), machine=koord_machine(1, 1, 2, 2))
    with pytest.raises(InputError) as err:
        cpu_enforcement(cluster.nodes["n"])
    assert err.value.field == f"labels.{CPU_ENFORCEMENT}" and err.value.source == "node n"


# ---- Filter: TestPlugin_Filter's CPU-binding rows -----------------------------------------------------

def guaranteed(name: str, cpus: int, annotations: dict[str, str] | None = None, millis: int | None = None) -> Pod:
    cpu = millis if millis is not None else cpus * 1000
    return Pod(name, uid=name, annotations=annotations or {},
               containers=(Container("c", limits={"cpu": cpu, "memory": GI}),))


def node_on(machine: Machine, *, labels=None, config=None, name="n") -> tuple[Cluster, str]:
    cluster = Cluster()
    spec = NodeSpec(name, allocatable={"cpu": len(machine.online) * 1000, "memory": 64 * GI, "pods": 110},
                    labels={CPU_ENFORCEMENT: "agent", **(labels or {})})
    cluster.set_node(spec, machine=machine, kubelet_config=config or KubeletConfig(cpu_manager_policy="static"))
    return cluster, name


def run_filter(cluster: Cluster, name: str, pod: Pod, plugin: CPUOrchestration | None = None):
    plugin = plugin or CPUOrchestration({})
    state = CycleState(cluster=cluster)
    pre = plugin.pre_filter(state, pod)
    if not pre.is_success:
        return pre
    return plugin.filter(state, pod, cluster.nodes[name])


FULL_ONLY = {KOORDINATOR_CPU_BIND_POLICY_LABEL: "FullPCPUsOnly"}
SPREAD_ONLY = {KOORDINATOR_CPU_BIND_POLICY_LABEL: "SpreadByPCPUs"}
KUBELET_FULL_ONLY = KubeletConfig(cpu_manager_policy="static", cpu_manager_options={"full-pcpus-only": "true"})
PREFER_FULL = {SPEC: '{"preferredCPUBindPolicy": "FullPCPUs"}'}
PREFER_SPREAD = {SPEC: '{"preferredCPUBindPolicy": "SpreadByPCPUs"}'}
REQUIRE_FULL = {SPEC: '{"requiredCPUBindPolicy": "FullPCPUs"}'}
REQUIRE_SPREAD = {SPEC: '{"requiredCPUBindPolicy": "SpreadByPCPUs"}'}
SMT = "node(s) requested cpus not multiple cpus per core"
CONFLICT = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"

# (case, node labels, kubelet config, pod annotations, CPUs, expected code, reason prefix)
FILTER_CASES = [
    ("a valid topology passes", {}, None, PREFER_FULL, 4, "Success", ""),
    ("no binding asked: passes", {}, None, {}, 4, "Success", ""),
    ("node FullPCPUsOnly, 5 CPUs", FULL_ONLY, None, PREFER_FULL, 5, "UnschedulableAndUnresolvable", SMT),
    ("node FullPCPUsOnly forces a pod without a policy", FULL_ONLY, None, {}, 5, "UnschedulableAndUnresolvable", SMT),
    ("node FullPCPUsOnly, 4 CPUs", FULL_ONLY, None, PREFER_FULL, 4, "Success", ""),
    ("required FullPCPUs, 5 CPUs", {}, None, REQUIRE_FULL, 5, "UnschedulableAndUnresolvable", SMT),
    ("required FullPCPUs, 4 CPUs", {}, None, REQUIRE_FULL, 4, "Success", ""),
    ("node FullPCPUsOnly over a preferred SpreadByPCPUs", FULL_ONLY, None, PREFER_SPREAD, 4, "Success", ""),
    ("node SpreadByPCPUs, pod requires FullPCPUs", SPREAD_ONLY, None, REQUIRE_FULL, 4, "UnschedulableAndUnresolvable",
     CONFLICT),
    ("node FullPCPUsOnly, pod requires FullPCPUs", FULL_ONLY, None, REQUIRE_FULL, 4, "Success", ""),
    ("kubelet full-pcpus-only, 5 CPUs", {}, KUBELET_FULL_ONLY, PREFER_FULL, 5, "UnschedulableAndUnresolvable", SMT),
    ("kubelet full-pcpus-only, pod requires SpreadByPCPUs", {}, KUBELET_FULL_ONLY, REQUIRE_SPREAD, 4,
     "UnschedulableAndUnresolvable", CONFLICT),
    ("kubelet full-pcpus-only, pod requires FullPCPUs", {}, KUBELET_FULL_ONLY, REQUIRE_FULL, 4, "Success", ""),
    ("required FullPCPUs with the node's single-numa-node", {}, KubeletConfig(
        cpu_manager_policy="static", topology_manager_policy="single-numa-node"), REQUIRE_FULL, 4, "Success", ""),
]


@pytest.mark.parametrize("case, labels, config, annotations, cpus, code, reason", FILTER_CASES,
                         ids=[c[0] for c in FILTER_CASES])
def test_filter_follows_koordinators_rules(case, labels, config, annotations, cpus, code, reason):
    cluster, name = node_on(koord_machine(2, 1, 4, 2), labels=labels, config=config)
    status = run_filter(cluster, name, guaranteed("p", cpus, annotations))
    assert status.code.label == code
    assert status.message.startswith(reason)


def test_a_node_without_topology_cannot_bind_a_required_policy():
    cluster = Cluster()
    cluster.set_node(NodeSpec("bare", allocatable={"cpu": 16000, "memory": 64 * GI, "pods": 110}))
    status = run_filter(cluster, "bare", guaranteed("p", 4, REQUIRE_FULL))
    assert status.code.label == "UnschedulableAndUnresolvable"
    assert status.message.startswith("node(s) invalid CPU Topology")
    assert run_filter(cluster, "bare", guaranteed("p", 4, PREFER_FULL)).is_success


@pytest.mark.parametrize("annotations", [PREFER_FULL, {BIND: "FullPCPUs"}])
def test_a_fractional_request_under_a_bind_policy_is_refused(annotations):
    cluster, name = node_on(koord_machine(2, 1, 4, 2))
    status = run_filter(cluster, name, guaranteed("p", 0, annotations, millis=4500))
    assert status.code.label == "UnschedulableAndUnresolvable"
    assert status.message.startswith("the requested CPUs must be integer")


def test_a_malformed_annotation_is_a_clear_refusal_of_that_pod():
    cluster, name = node_on(koord_machine(2, 1, 4, 2))
    status = run_filter(cluster, name, guaranteed("p", 4, {SPEC: '{"requiredCPUBindPolicy": 3}'}))
    assert status.code.label == "UnschedulableAndUnresolvable"
    assert SPEC in status.message and "pod default/p" in status.message


@pytest.mark.parametrize("labels, field", [
    ({CPU_ENFORCEMENT: "sometimes"}, CPU_ENFORCEMENT),
    ({KOORDINATOR_CPU_BIND_POLICY_LABEL: "Full"}, KOORDINATOR_CPU_BIND_POLICY_LABEL),
])
def test_unreadable_node_data_refuses_pods_with_exclusive_cpus_only(labels, field):
    cluster, name = node_on(koord_machine(2, 1, 4, 2), labels=labels)
    status = run_filter(cluster, name, guaranteed("p", 4))
    assert status.code.label == "UnschedulableAndUnresolvable" and field in status.message
    shared = Pod("s", uid="s", containers=(Container("c", requests={"cpu": 500}),))
    assert run_filter(cluster, name, shared).is_success


def hold(cluster: Cluster, name: str, cpus: CPUSet) -> None:
    """Leave exactly ``cpus`` held on the node by one-CPU pods: fill every CPU, then remove the rest."""
    machine = cluster.nodes[name].model.machine
    for i in range(len(machine.online)):
        cluster.assume(guaranteed(f"h{i}", 1), name, now=0)
    for uid, entry in list(cluster.nodes[name].pods.items()):
        if not entry.placement.cpuset <= cpus:
            cluster.forget(uid)
    assert CPUSet.from_mask(sum(e.placement.cpuset.mask for e in cluster.nodes[name].pods.values())) == cpus


def test_too_few_free_whole_cores_are_named():
    machine = koord_machine(2, 1, 4, 2)
    cluster, name = node_on(machine, config=KubeletConfig(cpu_manager_policy="static",
                                                          topology_manager_policy="single-numa-node"))
    hold(cluster, name, P("0,2,4,8,10,12"))  # one thread of three cores on each NUMA node
    status = run_filter(cluster, name, guaranteed("p", 4, REQUIRE_FULL))
    assert status.code.label == "Unschedulable"
    assert status.message.startswith("not enough free whole cores on one NUMA node for FullPCPUs: needs 4 CPUs")
    assert run_filter(cluster, name, guaranteed("q", 2, REQUIRE_FULL)).is_success


def test_filter_all_gives_each_row_the_per_node_verdict():
    cluster = Cluster()
    machine = koord_machine(2, 1, 4, 2)
    shapes = {"agent": {}, "full-only": FULL_ONLY, "spread-only": SPREAD_ONLY, "broken": {CPU_ENFORCEMENT: "x"}}
    for name, labels in shapes.items():
        cluster.set_node(NodeSpec(name, allocatable={"cpu": 16000, "memory": 64 * GI, "pods": 110},
                                  labels={CPU_ENFORCEMENT: "agent", **labels}),
                         machine=machine, kubelet_config=KubeletConfig(cpu_manager_policy="static"))
    sched = Scheduler(cluster, Profile.build("t", filters=["CPUOrchestration"], scores=[]))
    sched.table.refresh()
    plugin = sched.profile.filters[0]
    rows = np.arange(sched.table.size)
    for pod in (guaranteed("a", 4), guaranteed("b", 5), guaranteed("c", 4, REQUIRE_FULL), guaranteed("d", 4, PREFER_SPREAD)):
        state = CycleState(cluster=cluster)
        plugin.pre_filter(state, pod)
        mask, _ = plugin.filter_all(state, pod, sched.table, rows)
        each = [plugin.filter(state, pod, cluster.nodes[n]).is_success for n in sched.table.names]
        assert list(mask) == each, pod.name


def test_a_node_that_starts_forcing_a_policy_is_seen_by_the_vector_filter():
    machine = koord_machine(2, 1, 4, 2)
    cluster, name = node_on(machine)
    sched = Scheduler(cluster, Profile.build("t", filters=["NodeResourcesFit", "CPUOrchestration"], scores=[]))
    assert sched.schedule(guaranteed("a", 5), now=0).node == name
    labels = {**cluster.nodes[name].spec.labels, **FULL_ONLY}
    cluster.set_node(dataclasses.replace(cluster.nodes[name].spec, labels=labels))
    sched.table.refresh()
    plugin, pod = sched.profile.filters[1], guaranteed("b", 3)
    state = CycleState(cluster=cluster)
    mask, reason = plugin.filter_all(state, pod, sched.table, np.arange(1))
    assert list(mask) == [False] and reason.texts[reason.codes[0]].startswith(SMT)
    assert sched.schedule(guaranteed("c", 2), now=2).node == name


# ---- confirm and reserve: the cpusets the agent enforces ----------------------------------------------

def profile(**args) -> Profile:
    return Profile.build("t", filters=["NodeUnschedulable", "NodeResourcesFit", "NUMAAlignment", "CPUOrchestration"],
                         scores=[("NUMAScore", 5), ("NodeResourcesFit", 1)], args={"CPUOrchestration": args})


def assert_replica_matches_ledger(cluster: Cluster, name: str) -> None:
    assert_node_sums_match_the_ledger(cluster)  # the agent's cpusets replaced the replica's
    record = cluster.nodes[name]
    if record.model.cpu is None:
        return
    state = record.model.cpu.state
    for uid, entry in record.pods.items():
        assigned = dict(state.assignments.get(uid, {}))
        placed = {c: p.cpuset for c, p in entry.placement.containers.items() if p.cpuset}
        assert assigned == placed, uid
    assert state.default_cpuset.isdisjoint(state.assigned())


def test_spread_by_pcpus_replaces_the_kubelets_packed_cores():
    cluster, name = node_on(koord_machine(2, 1, 4, 2), config=KubeletConfig(
        cpu_manager_policy="static", topology_manager_policy="single-numa-node"))
    sched = Scheduler(cluster, profile())
    before = (cluster.nodes[name].model.state(), cluster.zone_available(name))
    pod = guaranteed("s", 4, {BIND: "SpreadByPCPUs"})
    decision = sched.schedule(pod, now=0)
    cpus = decision.placement.containers["c"].cpuset
    assert cpus == P("0,2,4,6")  # the replica alone packs 0-3
    assert decision.placement.containers["c"].numa_nodes == {0}
    assert_replica_matches_ledger(cluster, name)
    sched.unreserve(pod)
    assert (cluster.nodes[name].model.state(), cluster.zone_available(name)) == before


def test_full_pcpus_moves_off_a_numa_node_where_the_kubelet_would_split_cores():
    cluster, name = node_on(koord_machine(2, 1, 4, 2), config=KubeletConfig(
        cpu_manager_policy="static", topology_manager_policy="single-numa-node"))
    sched = Scheduler(cluster, profile())
    for i in range(5):
        sched.schedule(guaranteed(f"y{i}", 1), now=0)  # CPUs 0-4
    for i in (1, 3):
        sched.unreserve(guaranteed(f"y{i}", 1))  # NUMA node 0 keeps 1, 3, 5 and the whole core 6-7
    decision = sched.schedule(guaranteed("f", 4, {BIND: "FullPCPUs"}), now=0)
    assert decision.placement.containers["c"].cpuset == P("8-11")  # the replica alone takes 1,3,6-7
    assert decision.placement.numa_nodes == {1}
    assert_replica_matches_ledger(cluster, name)


def test_numa_node_exclusivity_moves_an_exclusive_pod_off_a_shared_numa_node():
    cluster, name = node_on(koord_machine(2, 1, 4, 2))  # Topology Manager none: NUMA nodes are free to choose
    sched = Scheduler(cluster, profile())
    spec = '{"preferredCPUBindPolicy": "FullPCPUs", "preferredCPUExclusivePolicy": "NUMANodeLevel"}'
    first = sched.schedule(guaranteed("e1", 2, {SPEC: spec}), now=0)
    second = sched.schedule(guaranteed("e2", 2, {SPEC: spec}), now=0)
    numa = {c // 8 for c in first.placement.cpuset}, {c // 8 for c in second.placement.cpuset}
    assert len(numa[0]) == len(numa[1]) == 1 and numa[0] != numa[1]
    assert_replica_matches_ledger(cluster, name)


def test_a_kubelet_managed_node_that_would_break_a_required_policy_is_refused():
    machine = koord_machine(2, 1, 4, 2)
    cluster = Cluster()
    for name, labels in (("kubelet", {}), ("agent", {CPU_ENFORCEMENT: "agent"})):
        cluster.set_node(NodeSpec(name, allocatable={"cpu": 16000, "memory": 64 * GI, "pods": 110}, labels=labels),
                         machine=machine, kubelet_config=KubeletConfig(cpu_manager_policy="static"))
    sched = Scheduler(cluster, profile())
    decision = sched.schedule(guaranteed("s", 4, {BIND: "SpreadByPCPUs"}), now=0)
    assert decision.node == "agent"  # "kubelet" ranks first (lower row) but its CPU manager packs 0-3
    assert decision.placement.cpuset == P("0,2,4,6")
    alone = Scheduler(Cluster(), profile())
    alone.cluster.set_node(NodeSpec("kubelet", allocatable={"cpu": 16000, "memory": 64 * GI, "pods": 110}),
                           machine=machine, kubelet_config=KubeletConfig(cpu_manager_policy="static"))
    refused = alone.schedule(guaranteed("s", 4, {BIND: "SpreadByPCPUs"}), now=0)
    assert refused.node is None
    assert "which break the required SpreadByPCPUs" in refused.message


def test_without_a_static_cpu_manager_the_agent_picks_the_cpus_and_the_ledger_keeps_them():
    machine = koord_machine(1, 1, 4, 2)
    cluster, name = node_on(machine, config=KubeletConfig(cpu_manager_policy="none"))
    sched = Scheduler(cluster, profile())
    first = sched.schedule(guaranteed("a", 2), now=0)
    second = sched.schedule(guaranteed("b", 4, {BIND: "FullPCPUs"}), now=0)
    third = sched.schedule(guaranteed("c", 2, {BIND: "FullPCPUs"}), now=0)
    assert first.node == second.node == third.node == name
    assert {uid: e.placement.cpuset for uid, e in cluster.nodes[name].pods.items()} == {
        "a": first.placement.cpuset, "b": second.placement.cpuset, "c": third.placement.cpuset}
    assert len(first.placement.cpuset) == 2 and second.placement.cpuset and third.placement.cpuset
    sets = [first.placement.cpuset, second.placement.cpuset, third.placement.cpuset]
    assert sum(len(s) for s in sets) == len(CPUSet.from_mask(sets[0].mask | sets[1].mask | sets[2].mask)) == 8
    assert sched.schedule(guaranteed("d", 2, {BIND: "FullPCPUs"}), now=0).node is None


def test_confirm_leaves_the_replicas_cpusets_alone_when_they_honour_the_policy():
    cluster, name = node_on(koord_machine(2, 1, 4, 2))
    plugin = CPUOrchestration({})
    pod = guaranteed("f", 4, {BIND: "FullPCPUs"})
    _, placement = cluster.assume(pod, name, now=0)
    state = CycleState(cluster=cluster)
    assert plugin.confirm(state, pod, cluster.nodes[name], placement).is_success
    assert PLACEMENT_OVERRIDE not in state


def test_bad_arguments_are_refused_by_name():
    for args, field in [({"defaultCPUBindPolicy": "Full"}, "CPUOrchestration.args.defaultCPUBindPolicy"),
                        ({"numaAllocateStrategy": "Packed"}, "CPUOrchestration.args.numaAllocateStrategy"),
                        ({"bogus": 1}, "CPUOrchestration.args.bogus")]:
        with pytest.raises(InputError) as err:
            CPUOrchestration(args)
        assert err.value.field == field


@pytest.mark.parametrize("enforcement, want", [("agent", "0,2,4,6"), ("kubelet", "0-3")])
def test_the_default_policy_applies_on_agent_nodes_only(enforcement, want):
    cluster = Cluster()
    cluster.set_node(NodeSpec("n", allocatable={"cpu": 16000, "memory": 64 * GI, "pods": 110},
                              labels={CPU_ENFORCEMENT: enforcement}),
                     machine=koord_machine(2, 1, 4, 2), kubelet_config=KubeletConfig(cpu_manager_policy="static"))
    sched = Scheduler(cluster, profile(defaultCPUBindPolicy="SpreadByPCPUs"))
    assert sched.schedule(guaranteed("a", 4), now=0).placement.cpuset == P(want)


# ---- the property: FullPCPUs never shares a core ---------------------------------------------------------

POLICIES = st.sampled_from([{}, {BIND: "FullPCPUs"}, {BIND: "SpreadByPCPUs"},
                            {SPEC: '{"preferredCPUBindPolicy": "SpreadByPCPUs", "preferredCPUExclusivePolicy": "PCPULevel"}'},
                            {SPEC: '{"preferredCPUBindPolicy": "FullPCPUs", "preferredCPUExclusivePolicy": "NUMANodeLevel"}'}])
STEPS = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "remove"]), st.integers(1, 6), POLICIES,
                           st.integers(0, 1000)), min_size=1, max_size=14)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS, numa_policy=st.sampled_from(["none", "single-numa-node"]), cpu_policy=st.sampled_from(["static", "none"]))
def test_full_pcpus_placements_never_share_a_core_with_another_pod(steps, numa_policy, cpu_policy):
    machine = koord_machine(2, 1, 4, 2)
    config = KubeletConfig(cpu_manager_policy=cpu_policy,
                           topology_manager_policy=numa_policy if cpu_policy == "static" else "none")
    cluster, name = node_on(machine, config=config)
    sched = Scheduler(cluster, profile())
    live: dict[str, Pod] = {}
    for i, (action, cpus, wishes, pick) in enumerate(steps):
        if action == "remove" and live:
            uid = sorted(live)[pick % len(live)]
            sched.unreserve(live.pop(uid))
            continue
        pod = guaranteed(f"p{i}", cpus, wishes)
        decision = sched.schedule(pod, now=i)
        if decision.node is not None:
            live[pod.uid] = pod
        record = cluster.nodes[name]
        placements = {uid: e.placement.cpuset for uid, e in record.pods.items()}
        owners: dict[int, str] = {}
        for uid, cpus_held in placements.items():
            for cpu in cpus_held:
                assert cpu not in owners, f"CPU {cpu} held by {owners[cpu]} and {uid}"
                owners[cpu] = uid
        for uid, entry in record.pods.items():
            if entry.pod.annotations.get(BIND) == "FullPCPUs":
                assert len(placements[uid]) == guaranteed_count(entry.pod)
                for cpu in placements[uid]:
                    assert all(owners.get(s) == uid for s in machine.siblings(cpu)), (uid, cpu, owners)
        assert_replica_matches_ledger(cluster, name)


def guaranteed_count(pod: Pod) -> int:
    return pod.containers[0].limits["cpu"] // 1000


# ---- FullPCPUs / SpreadByPCPUs CPUs of a free mask: the bitwise form equals the core-by-core one ---


def _split_machine(cores: int, threads: int) -> Machine:
    """Linux's usual numbering: every core's first thread, then every second thread (siblings ``cores`` apart)."""
    rows = [{"cpu": c + t * cores, "core": c, "socket": 0, "numa": c * 2 // cores} for t in range(threads) for c in range(cores)]
    return Machine.from_cpu_table(rows)


def _uneven_machine() -> Machine:
    """Two-thread cores whose siblings are not a fixed distance apart, and one single-thread core."""
    pairs = [(0, 1), (2, 5), (3, 4), (6, 9), (7, 8), (10,)]
    rows = [{"cpu": cpu, "core": core, "socket": 0, "numa": core // 3} for core, cpus in enumerate(pairs) for cpu in cpus]
    return Machine.from_cpu_table(rows)


MACHINES = {
    "consecutive siblings": koord_machine(2, 1, 4, 2),
    "split siblings": _split_machine(12, 2),
    "one thread a core": koord_machine(1, 2, 4, 1),
    "four threads a core": koord_machine(1, 1, 3, 4),
    "uneven": _uneven_machine(),
}


@pytest.mark.parametrize("name", sorted(MACHINES))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_required_masks_equal_core_by_core(name: str, data: st.DataObject) -> None:
    from toposched.scheduler.plugins.cpu_orchestration import _core_masks, _required_masks

    machine = MACHINES[name]
    free = data.draw(st.integers(0, machine.online.mask)) & machine.online.mask
    per_core = _topology(machine).cpus_per_core
    full = spread = 0
    for core in _core_masks(machine):
        cpus = free & core
        if cpus:
            spread |= cpus & -cpus  # the core's lowest free CPU
            full |= cpus if cpus.bit_count() == per_core else 0
    assert _required_masks(free, machine) == (full, spread)
