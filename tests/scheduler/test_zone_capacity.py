"""ZoneCapacity: a NUMA zone's ``toposched.io/cpu-capacity`` attribute caps the CPU its pods take.

The attribute is ours (the cassini case: the real capacity of a NUMA node on an oversold host,
written by a controller into the zone's NodeResourceTopology attributes); there is no upstream
table. The cases below pin how the attribute is read, how a zone's load is counted, and what
Filter, confirm and Score decide, bad values included.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from toposched.errors import InputError
from toposched.kubelet import KubeletConfig, KubeletNode
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.framework import MAX_NODE_SCORE, CycleState, Profile
from toposched.scheduler.nodes import NodeSpec
from toposched.scheduler.placement import ContainerPlacement, Placement
from toposched.scheduler.plugins.cpu_orchestration import CPU_ENFORCEMENT
from toposched.scheduler.plugins.zone_capacity import (
    CPU_CAPACITY_ATTRIBUTE,
    ZoneCapacity,
    placement_zone_load,
    zone_capacities,
    zone_load,
)
from toposched.scheduler.scheduler import Scheduler
from toposched.topology import CPUSet, Machine
from toposched.topology.nrt import NodeResourceTopology
from toposched.workload import Container, Pod

GI = 2**30
P = CPUSet.parse
STATIC = KubeletConfig(cpu_manager_policy="static")


def machine(numa: int = 2, cores: int = 4) -> Machine:
    """``numa`` NUMA nodes of ``cores`` cores, no SMT: NUMA node n holds CPUs n*cores .. (n+1)*cores-1."""
    rows = [{"cpu": c, "core": c, "socket": 0, "numa": c // cores} for c in range(numa * cores)]
    return Machine.from_cpu_table(rows, memory_per_numa=32 * GI)


def capped(m: Machine, caps: dict[int, str]) -> Machine:
    """The machine with capacity attributes on some NUMA nodes."""
    nodes = tuple(dataclasses.replace(n, attributes={CPU_CAPACITY_ATTRIBUTE: caps[n.id]}) if n.id in caps else n
                  for n in m.numa_nodes)
    return Machine(m.cpus, nodes)


def report(m: Machine, name: str, caps: dict[int, str], config: KubeletConfig = STATIC) -> NodeResourceTopology:
    """The node's report with capacity attributes on some zones (as the controller writes them)."""
    nrt = KubeletNode(m, config, name=name).to_nrt()
    zones = tuple(dataclasses.replace(z, attributes={CPU_CAPACITY_ATTRIBUTE: caps[int(z.name[5:])]})
                  if int(z.name[5:]) in caps else z for z in nrt.zones)
    return dataclasses.replace(nrt, zones=zones)


def spec(name: str, **labels: str) -> NodeSpec:
    return NodeSpec(name, allocatable={"cpu": 8000, "memory": 64 * GI, "pods": 110}, labels=labels)


def guaranteed(name: str, cpus: int) -> Pod:
    return Pod(name, uid=name, containers=(Container("c", limits={"cpu": cpus * 1000, "memory": GI}),))


def shared(name: str, millis: int) -> Pod:
    return Pod(name, uid=name, containers=(Container("c", requests={"cpu": millis, "memory": GI}),))


# ---- reading the attribute -------------------------------------------------------------------------

@pytest.mark.parametrize("value, millis", [("12", 12000), ("11500m", 11500), ("11.5", 11500), ("0", 0),
                                           ("1e3", 1_000_000), (" 3 ", 3000), ("8192", 8_192_000)])
def test_a_capacity_is_a_cpu_quantity(value, millis):
    cluster = Cluster()
    cluster.set_node(spec("n"), machine=capped(machine(), {1: value}), kubelet_config=STATIC)
    assert zone_capacities(cluster.nodes["n"]) == {1: millis}


@pytest.mark.parametrize("value, problem", [
    ("-1", "negative"), ("abc", "not a CPU quantity"), ("", "not a CPU quantity"), ("12Gi", "more than 8192 CPUs"),
    ("8193", "more than 8192 CPUs"), ("1e400", "absurd exponent"), ("1e19", "absurdly large"),
    ("NaN", "not a CPU quantity"),
])
def test_a_bad_capacity_names_the_zone_the_attribute_and_the_report(value, problem):
    cluster = Cluster()
    cluster.update_report(report(machine(), "n", {1: value}), now=0)
    with pytest.raises(InputError) as err:
        zone_capacities(cluster.nodes["n"])
    assert err.value.field == f"zones.node-1.attributes.{CPU_CAPACITY_ATTRIBUTE}"
    assert err.value.source == "NodeResourceTopology n"
    assert problem in err.value.message


def test_the_latest_report_is_authoritative_and_the_machine_counts_only_without_one():
    m = machine()
    cluster = Cluster()
    cluster.update_report(report(m, "n", {0: "3"}), now=0)  # the replica's machine is built from this report
    assert zone_capacities(cluster.nodes["n"]) == {0: 3000}
    cluster.update_report(report(m, "n", {1: "2"}), now=10)  # online load moved: zone 0 uncapped, zone 1 capped
    assert zone_capacities(cluster.nodes["n"]) == {1: 2000}
    cluster.update_report(report(m, "n", {}), now=20)
    assert zone_capacities(cluster.nodes["n"]) == {}
    known = Cluster()
    known.set_node(spec("k"), machine=capped(m, {0: "1500m"}), kubelet_config=STATIC)
    assert zone_capacities(known.nodes["k"]) == {0: 1500}


def test_a_node_without_topology_has_no_capped_zone():
    cluster = Cluster()
    cluster.set_node(spec("bare"))
    assert zone_capacities(cluster.nodes["bare"]) == {}


# ---- counting a zone's load -------------------------------------------------------------------------

def test_zone_load_counts_exclusive_cpus_where_they_are_and_splits_the_shared_pool():
    m = machine(numa=3, cores=2)
    init = Container("init", requests={"cpu": 5000})
    sidecar = Container("side", requests={"cpu": 100}, restart_policy="Always")
    pod = Pod("p", uid="p", init_containers=(init, sidecar),
              containers=(Container("a", requests={"cpu": 1000}), Container("b", requests={"cpu": 1000})))
    placement = Placement("n", frozenset({0}), {
        "init": ContainerPlacement(cpu_millis=5000),  # runs before the others: not counted
        "side": ContainerPlacement(cpu_millis=100),  # 34 + 33 + 33 over the three zones
        "a": ContainerPlacement(cpuset=P("0-1"), numa_nodes=frozenset({0}), cpu_millis=2000),
        "b": ContainerPlacement(numa_nodes=frozenset({2}), cpu_millis=1000),  # pinned: all of it on zone 2
    })
    assert placement_zone_load(pod, placement, m) == {0: 2034, 1: 33, 2: 1033}


def test_a_pod_without_placement_counts_its_request_on_the_shared_pool():
    assert placement_zone_load(shared("s", 1001), None, machine()) == {0: 501, 1: 500}


def test_zone_load_sums_the_pods_on_the_node_and_can_leave_one_out():
    cluster = Cluster()
    cluster.set_node(spec("n"), machine=machine(), kubelet_config=STATIC)
    cluster.assume(guaranteed("g", 2), "n", now=0)  # CPUs 0-1 on zone 0
    cluster.assume(shared("s", 500), "n", now=0)
    assert zone_load(cluster.nodes["n"]) == {0: 2250, 1: 250}
    assert zone_load(cluster.nodes["n"], exclude="g") == {0: 250, 1: 250}


# ---- Filter -----------------------------------------------------------------------------------------

def run(cluster: Cluster, name: str, pod: Pod) -> tuple[str, str]:
    plugin = ZoneCapacity({})
    status = plugin.filter(CycleState(cluster=cluster), pod, cluster.nodes[name])
    return status.code.label, status.message


# (case, capacities per zone, pods already there, the pod, Topology Manager policy, code, reason fragment)
FILTER_CASES = [
    ("no capped zone", {}, [], guaranteed("p", 8), "none", "Success", ""),
    ("a pod without CPU", {0: "0", 1: "0"}, [], Pod("z", uid="z", containers=(Container("c"),)), "none", "Success", ""),
    ("shared pod fits both halves", {0: "1", 1: "1"}, [], shared("p", 2000), "none", "Success", ""),
    ("shared pod's half over a full zone", {0: "1"}, [shared("s", 1500)], shared("p", 1000), "none", "Unschedulable",
     "NUMA zone 0 has 250m CPU left under its capacity 1"),
    ("exclusive CPUs beyond what capped zones leave", {0: "2", 1: "2"}, [guaranteed("g", 2)], guaranteed("p", 3),
     "none", "Unschedulable", "leaves 2 CPU, the pod needs 3"),
    ("exclusive CPUs that fit the zones together", {0: "2", 1: "2"}, [guaranteed("g", 2)], guaranteed("p", 2), "none",
     "Success", ""),
    ("an uncapped zone takes exclusive CPUs", {0: "0"}, [], guaranteed("p", 4), "none", "Success", ""),
    ("single-numa-node needs one zone with room", {0: "2", 1: "3"}, [], guaranteed("p", 4), "single-numa-node",
     "Unschedulable", "no NUMA zone has 4 CPU left"),
    ("single-numa-node with one zone with room", {0: "2", 1: "4"}, [], guaranteed("p", 4), "single-numa-node",
     "Success", ""),
    ("exclusive CPUs only, beside a zone already over its capacity", {0: "0", 1: "4"}, [shared("s", 1000)],
     guaranteed("p", 2), "none", "Success", ""),
]


@pytest.mark.parametrize("case, caps, existing, pod, policy, code, reason", FILTER_CASES,
                         ids=[c[0] for c in FILTER_CASES])
def test_filter(case, caps, existing, pod, policy, code, reason):
    cluster = Cluster()
    config = KubeletConfig(cpu_manager_policy="static", topology_manager_policy=policy)
    cluster.set_node(spec("n"), machine=capped(machine(), caps), kubelet_config=config)
    for other in existing:
        cluster.assume(other, "n", now=0)
    got_code, message = run(cluster, "n", pod)
    assert got_code == code
    assert reason in message
    if code != "Success":
        assert CPU_CAPACITY_ATTRIBUTE in message


def test_a_bad_attribute_makes_the_node_unschedulable_not_the_cluster():
    cluster = Cluster()
    cluster.update_report(report(machine(), "bad", {0: "lots"}), now=0)
    cluster.set_node(spec("good"), machine=machine(), kubelet_config=STATIC)
    code, message = run(cluster, "bad", guaranteed("p", 1))
    assert code == "UnschedulableAndUnresolvable"
    assert f"zones.node-0.attributes.{CPU_CAPACITY_ATTRIBUTE}" in message and "'lots'" in message
    sched = Scheduler(cluster, Profile.build("t", filters=["NodeResourcesFit", "ZoneCapacity"], scores=[]))
    decision = sched.schedule(guaranteed("p", 1), now=0)
    assert decision.node == "good"
    report_row = sched.explain(guaranteed("q", 1))["nodes"][0]
    assert report_row["name"] == "bad" and report_row["filter"]["code"] == "UnschedulableAndUnresolvable"


def test_filter_all_gives_each_row_the_per_node_verdict():
    cluster = Cluster()
    layouts = {"plain": {}, "tight": {0: "1", 1: "1"}, "half": {0: "0"}, "bad": {1: "x"}}
    for name, caps in layouts.items():
        cluster.set_node(spec(name), machine=capped(machine(), caps), kubelet_config=STATIC)
    cluster.assume(shared("s", 1000), "tight", now=0)
    sched = Scheduler(cluster, Profile.build("t", filters=["ZoneCapacity"], scores=[]))
    sched.table.refresh()
    plugin = sched.profile.filters[0]
    rows = np.arange(sched.table.size)
    for pod in (shared("a", 400), shared("b", 1200), guaranteed("c", 2), guaranteed("d", 6)):
        state = CycleState(cluster=cluster)
        mask, _ = plugin.filter_all(state, pod, sched.table, rows)
        each = [plugin.filter(state, pod, cluster.nodes[n]).is_success for n in sched.table.names]
        assert list(mask) == each, pod.name


# ---- confirm: the exact placement ---------------------------------------------------------------------

def test_confirm_refuses_a_placement_that_lands_in_a_full_zone():
    cluster = Cluster()
    cluster.set_node(spec("n"), machine=capped(machine(), {0: "1"}), kubelet_config=STATIC)
    pod = guaranteed("p", 2)
    assert run(cluster, "n", pod)[0] == "Success"  # zone 1 is uncapped: it could take the pod
    _, placement = cluster.assume(pod, "n", now=0)  # the replica packs CPUs 0-1 on zone 0
    assert placement.cpuset == P("0-1")
    status = ZoneCapacity({}).confirm(CycleState(cluster=cluster), pod, cluster.nodes["n"], placement)
    assert status.code.label == "Unschedulable"
    assert status.message.startswith("NUMA zone 0 has 1 CPU left under its capacity 1")


def test_confirm_judges_the_placement_another_plugin_replaced():
    cluster = Cluster()
    cluster.set_node(spec("n"), machine=capped(machine(), {1: "1"}), kubelet_config=STATIC)
    pod = guaranteed("p", 2)
    _, placement = cluster.assume(pod, "n", now=0)
    state = CycleState(cluster=cluster)
    plugin = ZoneCapacity({})
    assert plugin.confirm(state, pod, cluster.nodes["n"], placement).is_success
    replaced = Placement("n", frozenset({1}), {"c": ContainerPlacement(P("4-5"), frozenset({1}))})
    assert plugin.confirm(state, pod, cluster.nodes["n"], replaced).code.label == "Unschedulable"


def test_the_cycle_tries_the_next_node_when_the_replica_lands_in_a_full_zone():
    cluster = Cluster()
    cluster.set_node(spec("a"), machine=capped(machine(), {0: "1"}), kubelet_config=STATIC)
    cluster.set_node(spec("b"), machine=machine(), kubelet_config=STATIC)
    sched = Scheduler(cluster, Profile.build("t", filters=["NodeResourcesFit", "ZoneCapacity"], scores=[]))
    decision = sched.schedule(guaranteed("p", 2), now=0)
    assert decision.node == "b"
    assert decision.reasons == {"NUMA zone 0 has 1 CPU left under its capacity 1 (toposched.io/cpu-capacity), "
                                "the pod would add 2": 1}


def test_an_oversold_host_takes_pods_until_its_zones_are_full_then_others_do():
    cluster = Cluster()
    cluster.update_report(report(machine(), "oversold", {0: "1500m", 1: "1500m"}), now=0)
    cluster.set_node(spec("spare"), machine=machine(), kubelet_config=STATIC)
    profile = Profile.build("t", filters=["NodeResourcesFit", "ZoneCapacity"], scores=[("ZoneCapacity", 1)])
    sched = Scheduler(cluster, profile)
    placed = [sched.schedule(shared(f"s{i}", 1000), now=i).node for i in range(4)]
    # "oversold" scores below "spare" (100) as soon as it is capped: the score prefers headroom.
    assert placed == ["spare"] * 4
    only = Cluster()
    only.update_report(report(machine(), "oversold", {0: "1500m", 1: "1500m"}), now=0)
    alone = Scheduler(only, profile)
    assert [alone.schedule(shared(f"s{i}", 1000), now=i).node for i in range(4)] == ["oversold"] * 3 + [None]
    only.update_report(report(machine(), "oversold", {0: "3", 1: "3"}), now=5)  # the online load went down
    assert alone.schedule(shared("late", 1000), now=6).node == "oversold"


# ---- Score ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("caps, existing, pod, want", [
    ({}, [], shared("p", 1000), MAX_NODE_SCORE),
    ({0: "2", 1: "2"}, [], shared("p", 1000), 75),
    ({0: "2", 1: "2"}, [shared("s", 2000)], shared("p", 1000), 25),
    ({0: "2", 1: "2"}, [shared("s", 4000)], shared("p", 1000), 0),
    ({0: "0", 1: "0"}, [], shared("p", 1000), 0),
    ({0: "bad"}, [], shared("p", 1000), 0),
])
def test_score_is_the_capped_capacity_left(caps, existing, pod, want):
    cluster = Cluster()
    cluster.set_node(spec("n"), machine=capped(machine(), caps), kubelet_config=STATIC)
    for other in existing:
        cluster.assume(other, "n", now=0)
    sched = Scheduler(cluster, Profile.build("t", filters=[], scores=[("ZoneCapacity", 1)]))
    sched.table.refresh()
    plugin = sched.profile.scores[0][0]
    state = CycleState(cluster=cluster)
    assert plugin.score(state, pod, cluster.nodes["n"], sched.table) == want
    assert list(plugin.score_all(state, pod, sched.table, np.arange(1))) == [want]


def test_no_arguments_are_taken():
    with pytest.raises(InputError) as err:
        ZoneCapacity({"attribute": "x"})
    assert err.value.field == "ZoneCapacity.args"


def test_capacity_is_judged_on_the_cpus_the_agent_enforces():
    # Two NUMA nodes of two 2-thread cores: zone 0 holds CPUs 0,1,4,5, zone 1 holds 2,3,6,7; zone 1 is capped.
    rows = [{"cpu": c + t * 4, "core": c, "socket": 0, "numa": c // 2} for t in range(2) for c in range(4)]
    m = capped(Machine.from_cpu_table(rows, memory_per_numa=32 * GI), {1: "1"})
    pod = Pod("s", uid="s", annotations={"toposched.io/cpu-bind-policy": "SpreadByPCPUs"},
              containers=(Container("c", limits={"cpu": 2000, "memory": GI}),))

    def attempt(filters: list[str]):
        cluster = Cluster()
        cluster.set_node(spec("n", **{CPU_ENFORCEMENT: "agent"}), machine=m, kubelet_config=STATIC)
        sched = Scheduler(cluster, Profile.build("t", filters=filters, scores=[]))
        assert sched.schedule(guaranteed("h", 2), now=0).placement.cpuset == P("0,4")
        return sched.schedule(pod, now=1)

    # The replica alone packs the whole core 1,5 on zone 0, which is uncapped.
    assert attempt(["NodeResourcesFit", "ZoneCapacity"]).placement.cpuset == P("1,5")
    # Spread over physical cores, the agent's CPUs are 2,3 on zone 1: over its capacity.
    decision = attempt(["NodeResourcesFit", "CPUOrchestration", "ZoneCapacity"])
    assert decision.node is None
    assert list(decision.reasons) == [("NUMA zone 1 has 1 CPU left under its capacity 1 (toposched.io/cpu-capacity), "
                                       "the pod would add 2")]


def test_a_zone_capped_by_a_later_report_is_seen_by_the_vector_filter():
    cluster = Cluster()
    cluster.update_report(report(machine(), "n", {}), now=0)
    sched = Scheduler(cluster, Profile.build("t", filters=["NodeResourcesFit", "ZoneCapacity"], scores=[]))
    assert sched.schedule(shared("a", 1000), now=0).node == "n"
    cluster.update_report(report(machine(), "n", {0: "500m", 1: "500m"}), now=1)
    sched.table.refresh()
    plugin = sched.profile.filters[1]
    mask, reason = plugin.filter_all(CycleState(cluster=cluster), shared("b", 200), sched.table, np.arange(1))
    assert list(mask) == [False] and reason.texts[reason.codes[0]].startswith("NUMA zone 0 has 0 CPU left under its capacity 500m")
