"""The agent's available CPUs are exactly the truly free CPUs, whoever pinned the others.

A CPU is taken when the kubelet's CPU manager holds it (its checkpoint) or a toposched placement
names it for a pod the kubelet has not admitted yet (bound, not started; or an agent-managed
pod). A pod that is in both counts once: placements carry the node's real CPU ids, so the
kubelet's and the placement's sets are the same CPUs.
"""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from toposched.kubelet import KubeletNode
from toposched.kubelet.config import KubeletConfig
from toposched.node_report import node_report
from toposched.scheduler.placement import PLACEMENT_ANNOTATION, ContainerPlacement, Placement
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod

NODE = "worker-1"
GiB = 1 << 30
CONFIG = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                       reserved_system_cpus=CPUSet([0, 8]))


def machine() -> Machine:
    rows = [{"cpu": c + t * 8, "core": c, "socket": c // 4, "numa": c // 4} for t in range(2) for c in range(8)]
    return Machine.from_cpu_table(rows, memory_per_numa=32 * GiB)


def pod_object(name: str, cpus: CPUSet | None) -> dict:
    meta = {"name": name, "namespace": "default", "uid": name}
    if cpus is not None:
        numa = sorted(machine().numa_of(cpus))
        placement = Placement(NODE, frozenset(numa), {"app": ContainerPlacement(cpus, frozenset(numa))})
        meta["annotations"] = {PLACEMENT_ANNOTATION: placement.to_annotation()}
    return {"metadata": meta, "spec": {"nodeName": NODE}, "status": {"phase": "Running"}}


operations = st.lists(st.one_of(
    st.tuples(st.just("kubelet"), st.integers(1, 4), st.booleans()),  # pinned by the kubelet, with/without placement
    st.tuples(st.just("placed"), st.integers(1, 4), st.booleans()),  # placed by toposched, not admitted yet
    st.tuples(st.just("release"), st.integers(0, 20), st.booleans()),
), max_size=25)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_available_cpus_are_the_truly_free_ones(ops):
    m = machine()
    kubelet = KubeletNode(m, CONFIG, name=NODE)
    placed: dict[str, CPUSet] = {}  # pending placements (not admitted by the kubelet)
    pods: dict[str, dict] = {}
    for i, (op, size, flag) in enumerate(ops):
        name = f"p{i}"
        if op == "kubelet":
            limits = {"cpu": size * 1000, "memory": GiB}
            admission = kubelet.admit(Pod(name, uid=name, containers=(Container("app", requests=limits, limits=limits),)))
            if not admission.admitted:
                continue
            cpus = admission.containers["app"].cpuset
            if cpus & CPUSet.from_mask(_mask(placed.values())):
                kubelet.release(name)  # the scheduler's replica would never have let the two meet
                continue
            pods[name] = pod_object(name, cpus if flag else None)
        elif op == "placed":
            free = m.online - CONFIG.reserved_system_cpus - kubelet.cpu.state.assigned() - CPUSet.from_mask(
                _mask(placed.values()))
            assume(len(free) >= size)
            cpus = CPUSet(sorted(free)[-size:] if flag else sorted(free)[:size])
            placed[name] = cpus
            pods[name] = pod_object(name, cpus)
        elif pods:
            victim = sorted(pods)[size % len(pods)]
            pods.pop(victim)
            if victim in placed:
                placed.pop(victim)
            else:
                kubelet.release(victim)
    report = node_report(m, CONFIG, node_name=NODE, cpu_state=kubelet.cpu.to_checkpoint(), pods=list(pods.values()))
    taken = kubelet.cpu.state.assigned() | CPUSet.from_mask(_mask(placed.values()))
    free = m.online - CONFIG.reserved_system_cpus - taken
    for zone in report["zones"]:
        numa = int(zone["name"].split("-")[1])
        [cpu] = [r for r in zone["resources"] if r["name"] == "cpu"]
        assert int(cpu["available"]) == len(free & m.numa(numa).cpus), (zone["name"], str(free))


def _mask(sets) -> int:
    mask = 0
    for s in sets:
        mask |= s.mask
    return mask
