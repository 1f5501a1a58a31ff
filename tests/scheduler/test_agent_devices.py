"""Device ids chosen by the scheduler on nodes whose agent enforces them (``toposched.io/device-enforcement``).

On such a node the kubelet's device manager only counts; the scheduler picks the ids itself
(packed, within the pod's NUMA nodes and device scope), records them in the replica and the
ledger, and writes them on the pod, in ``toposched.io/placement`` and in Koordinator's
``device-allocated`` that koordlet's runtime hooks apply.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import shared_path
from tests.scheduler.test_device_locality import CONFIG, device_pod, same_switch, synthetic_machine
from toposched.errors import InputError
from toposched.kubelet.device_manager import DeviceManager
from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.placement import Placement
from toposched.scheduler.plugins.cpu_orchestration import DEVICE_ENFORCEMENT
from toposched.scheduler.plugins.gpu_share import DEVICE_ALLOCATED
from toposched.scheduler.profile_setup import load_profile
from toposched.topology import Machine
from toposched.topology.hwloc import read_hwloc_xml
from toposched.topology.model import Device, DeviceKind
from toposched.workload import Container, Pod

GI = 2**30
GPU, HCA = "nvidia.com/gpu", "rdma/hca"


def two_switch_machine() -> Machine:
    """One NUMA node; switch S2 (lower addresses) holds GPUs 12, 13 and the only NIC; S1 holds GPUs 22, 23."""
    base = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": 0, "numa": 0} for c in range(8)],
                                  memory_per_numa=64 * GI)
    root = "pci0000:00"
    s2 = (root, "0000:00:01.0", "0000:10:00.0")
    s1 = (root, "0000:00:02.0", "0000:20:00.0")

    def gpu(address: str, switch: tuple[str, ...], port: str) -> Device:
        return Device(address, DeviceKind.GPU, 0, 0x10DE, 0x1DB4, 0x030200, (*switch, port))

    devices = (
        gpu("0000:12:00.0", s2, "0000:11:00.0"),
        gpu("0000:13:00.0", s2, "0000:11:01.0"),
        Device("0000:14:00.0", DeviceKind.INFINIBAND, 0, 0x15B3, 0x1017, 0x020700, (*s2, "0000:11:02.0")),
        gpu("0000:22:00.0", s1, "0000:21:00.0"),
        gpu("0000:23:00.0", s1, "0000:21:01.0"),
    )
    return dataclasses.replace(base, devices=devices)


def scheduler_on(machine: Machine, enforcement: str = "agent") -> Scheduler:
    cluster = Cluster()
    cluster.set_node(NodeSpec("n", labels={DEVICE_ENFORCEMENT: enforcement}), machine=machine, kubelet_config=CONFIG)
    return Scheduler(cluster, load_profile("toposched"))


def place(sched: Scheduler, pod) -> Placement:
    decision = sched.schedule(pod, 0.0)
    assert decision.node == "n", decision.message
    sched.bound(pod, 0.0)
    return decision.placement


def fragment(sched: Scheduler) -> None:
    """GPUs 12 and 13 held then freed, 22 held: S2 is whole again, S1 has one GPU free."""
    for name in ("a", "b", "c"):
        place(sched, device_pod(name, None, nvidia_com__gpu=1))
    assert sched.cluster.nodes["n"].model.devices.available(GPU) == {"0000:23:00.0"}
    for name in ("a", "b"):
        sched.cluster.forget(name)


@pytest.mark.parametrize("enforcement, gpu, pair_fits", [
    ("agent", "0000:23:00.0", True),     # packs next to the held GPU: switch S2 stays whole
    ("kubelet", "0000:12:00.0", False),  # the kubelet takes the lowest free id and breaks S2
])
def test_the_agent_choice_keeps_a_whole_switch_free(enforcement, gpu, pair_fits):
    sched = scheduler_on(two_switch_machine(), enforcement)
    fragment(sched)
    assert place(sched, device_pod("d", None, nvidia_com__gpu=1)).devices()[GPU] == {gpu}
    pair = sched.schedule(device_pod("e", "pcie:required", nvidia_com__gpu=2), 0.0)
    assert (pair.node == "n") is pair_fits
    if pair_fits:
        assert pair.placement.devices()[GPU] == {"0000:12:00.0", "0000:13:00.0"}


def test_the_replica_and_the_ledger_hold_the_agents_ids_and_unreserve_restores_them():
    sched = scheduler_on(two_switch_machine())
    fragment(sched)
    record = sched.cluster.nodes["n"]
    state, available = record.model.state(), record.model.available()
    pod = device_pod("d", None, nvidia_com__gpu=1)
    decision = sched.schedule(pod, 0.0)
    assert decision.placement.devices()[GPU] == {"0000:23:00.0"}
    assert record.model.devices.pod_devices("d") == {"c": {GPU: frozenset({"0000:23:00.0"})}}
    assert record.model.devices.available(GPU) == {"0000:12:00.0", "0000:13:00.0"}
    assert record.pods["d"].usage == {0: {"cpu": 1000, GPU: 1}}  # memory is not pinned: no Static memory manager
    sched.unreserve(pod)
    assert record.model.state() == state
    assert record.model.available() == available


def test_a_required_scope_the_kubelet_would_break_is_met_on_an_agent_node():
    # GPU A alone under one switch, GPU B with the NIC under another: the kubelet takes A (the
    # lowest id) and the NIC, which the pcie scope refuses; the agent takes B and the NIC.
    for enforcement, placed in (("kubelet", False), ("agent", True)):
        sched = scheduler_on(synthetic_machine(), enforcement)
        decision = sched.schedule(device_pod("p", "pcie:required", nvidia_com__gpu=1, rdma__hca=1), 0.0)
        assert (decision.node == "n") is placed, (enforcement, decision.message)
        if placed:
            assert decision.placement.devices() == {GPU: {"0000:22:00.0"}, HCA: {"0000:23:00.0"}}


def test_the_device_allocated_annotation_names_the_chosen_gpu_and_nic():
    sched = scheduler_on(two_switch_machine())
    place(sched, device_pod("x", None, nvidia_com__gpu=1))
    place(sched, device_pod("y", None, nvidia_com__gpu=1))
    sched.cluster.forget("x")
    placement = place(sched, device_pod("p", "pcie:required", nvidia_com__gpu=1, rdma__hca=1))
    allocated = json.loads(placement.extra_annotations[DEVICE_ALLOCATED])
    # Minors: GPUs in PCI order (12 is 0), NICs among the node's RDMA devices.
    assert allocated == {
        "gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "16Gi",
                                           "koordinator.sh/gpu-memory-ratio": "100"}}],
        "rdma": [{"minor": 0, "resources": {"koordinator.sh/rdma": "100"}, "id": "0000:14:00.0"}],
    }
    assert json.loads(placement.to_annotation())["containers"]["c"]["devices"] == {
        GPU: ["0000:12:00.0"], HCA: ["0000:14:00.0"]}


def test_an_unknown_enforcement_value_refuses_the_node_naming_the_label():
    sched = scheduler_on(two_switch_machine(), "koordlet")
    decision = sched.schedule(device_pod("p", None, nvidia_com__gpu=1), 0.0)
    assert decision.node is None
    assert "device enforcement 'koordlet'" in decision.message
    assert f"labels.{DEVICE_ENFORCEMENT}" in decision.message
    assert not sched.cluster.nodes["n"].pods


def test_reassigning_a_device_another_container_holds_changes_nothing():
    manager = DeviceManager((0,), {GPU: [("g0", None), ("g1", None), ("g2", None)]})
    a, b = device_pod("a", None, cpu=0, nvidia_com__gpu=1), device_pod("b", None, cpu=0, nvidia_com__gpu=1)
    manager.allocate_pod(a)
    manager.allocate_pod(b)
    state = manager.state
    for ids, message in ((["g1"], "held by another container"), (["g9"], "not a healthy device"),
                         (["g1", "g2"], "2 nvidia.com/gpu given where the kubelet allocated 1")):
        with pytest.raises(InputError) as err:
            manager.reassign("a", "c", {GPU: ids})
        assert message in str(err.value) and err.value.field == f"devices.{GPU}"
        assert manager.state == state
    manager.reassign("a", "c", {GPU: ["g2"]})
    assert manager.available(GPU) == {"g0"}


def test_pairs_of_dgx2_gpus_stay_whole_when_single_gpus_are_packed_by_the_agent():
    machine = read_hwloc_xml(shared_path("topologies", "hwloc", "nvidiaDGX2.xml"))
    by_address = {d.address: d for d in machine.devices}
    sched = scheduler_on(machine)
    singles = [min(place(sched, device_pod(f"s{i}", None, cpu=0, nvidia_com__gpu=1)).devices()[GPU]) for i in range(3)]
    sched.cluster.forget("s0")
    sched.cluster.forget("s1")
    refill = min(place(sched, device_pod("r", None, cpu=0, nvidia_com__gpu=1)).devices()[GPU])
    # The GPU next to the one still held, not one of a whole pair.
    assert same_switch(by_address[refill], by_address[singles[2]])
    held = {refill, singles[2]}
    for i in range(7):  # every other switch of the 16 GPUs still gives a pair
        pair = sorted(place(sched, device_pod(f"p{i}", "pcie:required", cpu=0, nvidia_com__gpu=2)).devices()[GPU])
        assert same_switch(by_address[pair[0]], by_address[pair[1]])
        assert not held & set(pair)
        held |= set(pair)


def four_switch_machine() -> Machine:
    """Two NUMA nodes, two switches each; every switch holds two GPUs and one NIC, but the last holds no NIC."""
    base = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": c // 8, "numa": c // 8} for c in range(16)],
                                  memory_per_numa=64 * GI)
    devices = []
    for s in range(4):
        switch = (f"pci0000:{s:02x}", f"0000:{s:02x}:01.0", f"0000:{s + 1:x}0:00.0")
        for g in range(2):
            devices.append(Device(f"0000:{s + 1:x}{g + 1}:00.0", DeviceKind.GPU, s // 2, 0x10DE, 0x1DB4, 0x030200,
                                  (*switch, f"0000:{s + 1:x}0:0{g}.0")))
        if s < 3:
            devices.append(Device(f"0000:{s + 1:x}8:00.0", DeviceKind.INFINIBAND, s // 2, 0x15B3, 0x1017, 0x020700,
                                  (*switch, f"0000:{s + 1:x}0:08.0")))
    return dataclasses.replace(base, devices=tuple(devices))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1), st.sampled_from([None, "pcie:required", "numa:required",
                                                                               "pcie:preferred"]), st.booleans()),
                min_size=1, max_size=12))
def test_agent_choices_never_give_a_device_twice_and_keep_required_scopes(steps):
    machine = four_switch_machine()
    by_address = {d.address: d for d in machine.devices}
    sched = scheduler_on(machine)
    record = sched.cluster.nodes["n"]
    empty = record.model.state()
    live = []
    for i, (gpus, nics, scope, leave) in enumerate(steps):
        if leave and live:
            sched.cluster.forget(live.pop(0))
        if not gpus and not nics:
            continue
        pod = device_pod(f"p{i}", scope, **({"nvidia_com__gpu": gpus} if gpus else {}), **({"rdma__hca": nics} if nics else {}))
        decision = sched.schedule(pod, 0.0)
        if decision.node is None:
            continue
        sched.bound(pod, 0.0)
        live.append(pod.uid)
        got = decision.placement.devices()
        if scope and scope.endswith(":required") and gpus and nics:
            key = (lambda d: d.pcie_path[:3]) if scope.startswith("pcie") else (lambda d: d.numa_id)
            assert {key(by_address[i]) for i in got[HCA]} == {key(by_address[i]) for i in got[GPU]}
        holders: dict[str, str] = {}
        for uid, entry in record.pods.items():
            for ids in entry.placement.devices().values():
                for device in ids:
                    assert holders.setdefault(device, uid) == uid, f"{device} given to {holders[device]} and {uid}"
        replica = record.model.devices.pod_devices
        assert {uid: {r: set(ids) for c in replica(uid).values() for r, ids in c.items()} for uid in record.pods} == \
            {uid: {r: set(ids) for r, ids in entry.placement.devices().items()} for uid, entry in record.pods.items()}
    for uid in list(record.pods):
        sched.cluster.forget(uid)
    assert record.model.state() == empty


def test_a_pod_whose_init_container_asks_for_devices_keeps_the_kubelets_ids():
    # The kubelet hands an init container's devices on to the app containers; choosing per
    # container would ask for more devices than the pod holds, so the replica's ids stand.
    sched = scheduler_on(two_switch_machine())
    fragment(sched)
    limits = {"cpu": 1000, "memory": GI, GPU: 1}
    pod = Pod("i", uid="i", init_containers=(Container("init", limits=limits),), containers=(Container("c", limits=limits),))
    decision = sched.schedule(pod, 0.0)
    assert decision.node == "n", decision.message
    assert decision.placement.devices()[GPU] == {"0000:12:00.0"}  # the kubelet's lowest free id, reused
    assert DEVICE_ALLOCATED not in decision.placement.extra_annotations
