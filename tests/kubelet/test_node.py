"""KubeletNode: the kubelet's managers composed, admission reasons, exact release."""

import gc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toposched.errors import InputError
from toposched.kubelet.config import KubeletConfig
from toposched.kubelet.node import KubeletNode
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod

GI = 2**30
MI = 2**20


def machine(numa: int = 2, cores_per_numa: int = 4, threads: int = 2) -> Machine:
    """NUMA node n holds cores n*cores_per_numa..; a core's threads are c, c+cores, ... (Intel numbering)."""
    cores = numa * cores_per_numa
    rows = []
    for t in range(threads):
        for core in range(cores):
            rows.append({"cpu": core + t * cores, "core": core, "socket": core // cores_per_numa, "numa": core // cores_per_numa})
    dist = {a: {b: 10 if a == b else 21 for b in range(numa)} for a in range(numa)}
    return Machine.from_cpu_table(rows, memory_per_numa=16 * GI, distances=dist)


def static_config(**kw) -> KubeletConfig:
    base = dict(
        topology_manager_policy="single-numa-node",
        cpu_manager_policy="static",
        reserved_system_cpus=CPUSet([0, 8]),
        memory_manager_policy="Static",
        reserved_memory={0: {"memory": 100 * MI}},
    )
    base.update(kw)
    return KubeletConfig(**base)


GPUS = {"nvidia.com/gpu": [("gpu-0", [0]), ("gpu-1", [0]), ("gpu-2", [1]), ("gpu-3", [1])]}


def guaranteed(name, cpu, mem=GI, gpus=0, containers=1):
    limits = {"cpu": cpu * 1000, "memory": mem}
    if gpus:
        limits["nvidia.com/gpu"] = gpus
    return Pod(name, uid=name, containers=tuple(Container(f"c{i}", limits=limits) for i in range(containers)))


def test_guaranteed_pod_gets_cpus_and_memory_on_one_numa_node():
    node = KubeletNode(machine(), static_config())
    result = node.admit(guaranteed("a", 4, 4 * GI))
    assert result.admitted, result.message
    c = result.containers["c0"]
    assert len(c.cpuset) == 4 and c.cpuset.isdisjoint(CPUSet([0, 8]))
    numa = node.machine.numa_of(c.cpuset)
    assert len(numa) == 1 and c.hint.numa_nodes == numa and c.hint.preferred
    assert dict(c.memory) == {next(iter(numa)): {"memory": 4 * GI}}
    assert result.numa_nodes() == numa


def test_too_wide_for_one_numa_node_is_a_topology_affinity_error_and_changes_nothing():
    node = KubeletNode(machine(), static_config())
    before = node.state()
    result = node.admit(guaranteed("wide", 10))
    assert not result.admitted
    assert result.reason == "TopologyAffinityError"
    assert result.message == "Resources cannot be allocated with Topology locality"
    assert node.state() == before


def test_restricted_admits_the_narrowest_multi_numa_allocation():
    node = KubeletNode(machine(), static_config(topology_manager_policy="restricted"))
    result = node.admit(guaranteed("wide", 10, 20 * GI))
    assert result.admitted, result.message
    assert node.machine.numa_of(result.containers["c0"].cpuset) == frozenset({0, 1})


def test_gpus_and_cpus_are_aligned():
    node = KubeletNode(machine(), static_config(), device_plugins=GPUS)
    first = node.admit(guaranteed("g1", 2, gpus=2))
    second = node.admit(guaranteed("g2", 2, gpus=2))
    for result in (first, second):
        c = result.containers["c0"]
        numa = node.machine.numa_of(c.cpuset)
        gpu_numa = {int(d[-1]) // 2 for d in c.devices["nvidia.com/gpu"]}
        assert len(numa) == 1 and gpu_numa == set(numa)
    third = node.admit(guaranteed("g3", 1, gpus=1))
    # The Topology Manager's admit handler runs before the predicate one: no GPU left, no hint.
    assert not third.admitted and third.reason == "TopologyAffinityError"


def test_full_pcpus_only_refuses_odd_counts():
    node = KubeletNode(machine(), static_config(cpu_manager_options={"full-pcpus-only": "true"}))
    result = node.admit(guaranteed("odd", 3))
    assert not result.admitted and result.reason == "SMTAlignmentError"
    assert result.message == "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2"


def test_out_of_cpu_uses_the_kubelet_wording():
    node = KubeletNode(machine(), KubeletConfig())
    assert node.allocatable["cpu"] == 16000
    assert node.admit(Pod("a", uid="a", containers=(Container("c", requests={"cpu": 10000}),))).admitted
    result = node.admit(Pod("b", uid="b", containers=(Container("c", requests={"cpu": 7000}),)))
    assert result.reason == "OutOfcpu"
    assert result.message == "Node didn't have enough resource: cpu, requested: 7000, used: 10000, capacity: 16000"


def test_burstable_pods_run_on_the_shared_pool():
    node = KubeletNode(machine(), static_config())
    result = node.admit(Pod("b", uid="b", containers=(Container("c", requests={"cpu": 1500}),)))
    assert result.admitted and not result.containers["c"].cpuset


def test_release_restores_exactly_and_available_tracks_allocations():
    node = KubeletNode(machine(), static_config(), device_plugins=GPUS)
    empty = node.state()
    free = node.available()
    assert free[0]["cpu"] == 6000 and free[1]["cpu"] == 8000 and free[1]["nvidia.com/gpu"] == 2
    result = node.admit(guaranteed("a", 4, 2 * GI, gpus=1))
    (numa,) = node.machine.numa_of(result.containers["c0"].cpuset)
    after = node.available()
    assert after[numa]["cpu"] == free[numa]["cpu"] - 4000
    assert after[numa]["memory"] == free[numa]["memory"] - 2 * GI
    assert after[numa]["nvidia.com/gpu"] == free[numa]["nvidia.com/gpu"] - 1
    node.release("a")
    assert node.state() == empty and node.available() == free


def test_report_is_a_node_resource_topology():
    node = KubeletNode(machine(), static_config(), device_plugins=GPUS, name="worker-1")
    nrt = node.to_nrt()
    assert nrt.name == "worker-1"
    assert [z.name for z in nrt.zones] == ["node-0", "node-1"]
    assert nrt.attributes["topologyManagerPolicy"] == "single-numa-node"
    cpu = {z.name: next(r for r in z.resources if r.name == "cpu") for z in nrt.zones}
    assert cpu["node-0"].capacity == 8000 and cpu["node-0"].allocatable == 6000


def test_reserved_cpus_must_be_online():
    with pytest.raises(InputError, match="reservedSystemCPUs"):
        KubeletNode(machine(), static_config(reserved_system_cpus=CPUSet([99])))


def test_admitting_twice_returns_the_first_admission():
    node = KubeletNode(machine(), static_config())
    pod = guaranteed("a", 2)
    assert node.admit(pod) is node.admit(pod)
    assert node.requested["cpu"] == 2000


# ---- properties ----------------------------------------------------------------------------------

pods = st.lists(
    st.tuples(
        st.integers(1, 9),  # CPUs
        st.integers(1, 20),  # GiB
        st.integers(0, 2),  # GPUs
        st.integers(1, 2),  # containers
        st.booleans(),  # Guaranteed?
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pods,
    st.sampled_from(["none", "best-effort", "restricted", "single-numa-node"]),
    st.sampled_from(["container", "pod"]),
    st.lists(st.integers(0, 11), max_size=12),
)
def test_no_double_allocation_alignment_and_exact_release(specs, policy, scope, releases):
    node = KubeletNode(machine(), static_config(topology_manager_policy=policy, topology_manager_scope=scope),
                       device_plugins=GPUS)
    empty = node.state()
    admitted = []
    for i, (cpu, mem, gpus, containers, is_guaranteed) in enumerate(specs):
        if is_guaranteed:
            pod = guaranteed(f"p{i}", cpu, mem * GI // containers, gpus, containers)
        else:
            pod = Pod(f"p{i}", uid=f"p{i}", containers=(Container("c0", requests={"cpu": cpu * 300}),))
        before = node.state()
        result = node.admit(pod)
        if not result.admitted:
            after = node.state()
            # Everything comes back; a multi-NUMA group's memory may come back to other nodes of the
            # group (the kubelet drops a refused pod's blocks as stale state, RemoveContainer).
            assert (after[0], *after[2:]) == (before[0], *before[2:])
            if before[1] is not None:
                assert after[1].entries == before[1].entries
                assert _free_totals(after[1]) == _free_totals(before[1])
            continue
        admitted.append(pod.uid)
        if policy == "single-numa-node":
            for c in result.containers.values():
                touched = set(node.machine.numa_of(c.cpuset)) | set(c.memory)
                assert len(touched) <= 1
    cpus_seen, devices_seen = CPUSet(), set()
    for result in node.admissions.values():
        for c in result.containers.values():
            assert cpus_seen.isdisjoint(c.cpuset) and c.cpuset.isdisjoint(CPUSet([0, 8]))
            cpus_seen |= c.cpuset
            for ids in c.devices.values():
                assert devices_seen.isdisjoint(ids)
                devices_seen |= set(ids)
    for index in releases:
        if index < len(admitted):
            node.release(admitted[index])
    for uid in list(node.pods):
        node.release(uid)
    assert node.state() == empty


def _free_totals(checkpoint) -> dict[str, int]:
    """Free bytes per memory resource, summed over the NUMA nodes."""
    totals: dict[str, int] = {}
    for state in (checkpoint.machine_state or {}).values():
        for resource, table in (state.memory_map or {}).items():
            totals[resource] = totals.get(resource, 0) + table.free
    return totals


def _refused_case_node():
    """The kept oracle case where the kubelet's own takeByTopology gives a refused pod a reserved
    CPU (7 CPUs, one SMT sibling offline, strict-cpu-reservation): the node and the pod."""
    import json
    from pathlib import Path

    from tests.kubelet.oracle import config_of, machine_of

    case = json.loads((Path(__file__).with_name("oracle_regressions") / "refused-pod-cpus-released-as-stale.json").read_text())
    return KubeletNode(machine_of(case["machine"]), config_of(case["config"])), Pod.from_dict(case["ops"][0]["admit"])


def test_a_refused_pod_is_forgotten_as_the_kubelet_forgets_it():
    # The kubelet drops the refused pod's CPUs as stale state: RemoveContainer unions them into
    # the shared pool, the wrongly taken reserved CPU 3 included.
    node, pod = _refused_case_node()
    before = node.cpu.default_cpuset
    assert not node.admit(pod).admitted
    assert node.cpu.default_cpuset == before | CPUSet([3])


def test_a_refused_trial_leaves_the_node_exactly_as_it_was():
    # The scheduler's "would you admit it?": the real node never sees that pod.
    node, pod = _refused_case_node()
    before = (node.cpu.state, node.memory.checkpoint(), node.available())
    assert not node.admit(pod, trial=True).admitted
    assert (node.cpu.state, node.memory.checkpoint(), node.available()) == before


@pytest.mark.parametrize("collecting", [True, False])
def test_an_admission_on_many_numa_nodes_leaves_the_garbage_collector_as_it_found_it(collecting):
    """Admissions on 9+ NUMA nodes pause the cyclic collector while they list every NUMA set; after
    an admission and after a refusal it is running again exactly when it was running before."""
    node = KubeletNode(machine(numa=12, cores_per_numa=2), static_config(
        reserved_system_cpus=CPUSet([0, 24]), topology_manager_options={"max-allowable-numa-nodes": "12"}))
    was = gc.isenabled()
    try:
        gc.enable() if collecting else gc.disable()
        assert node.admit(guaranteed("fits", 2, 4 * GI)).admitted
        assert gc.isenabled() == collecting
        assert node.admit(guaranteed("too-wide", 6)).reason == "TopologyAffinityError"
        assert gc.isenabled() == collecting
    finally:
        gc.enable() if was else gc.disable()
