"""DeviceLocality in the scheduling cycle: GPUs and RDMA NICs placed within the pod's device scope.

Expectations on real machines are computed here from the hwloc export itself (the devices'
NUMA node and PCIe path), not from the device inventory the plugin uses.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.conftest import shared_path
from toposched.kubelet import KubeletConfig
from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.profile_setup import load_profile
from toposched.topology import Machine
from toposched.topology.hwloc import read_hwloc_xml
from toposched.topology.model import Device, DeviceKind
from toposched.workload import Container, Pod

GI = 2**30
CONFIG = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static")


def scheduler_for(machine: Machine, nodes: int = 1) -> Scheduler:
    cluster = Cluster()
    for i in range(nodes):
        cluster.set_node(NodeSpec(f"n{i}"), machine=machine, kubelet_config=CONFIG)
    return Scheduler(cluster, load_profile("toposched"))


def device_pod(name: str, scope: str | None, cpu: int = 1000, **devices: int) -> Pod:
    limits = {"cpu": cpu, "memory": GI} if cpu else {}
    limits.update({k.replace("__", "/").replace("_", "."): v for k, v in devices.items()})
    annotations = {"toposched.io/device-scope": scope} if scope else {}
    return Pod(name, uid=name, containers=(Container("c", limits=limits),), annotations=annotations)


def hwloc_machine(name: str) -> Machine:
    return read_hwloc_xml(shared_path("topologies", "hwloc", f"{name}.xml"))


def same_switch(a: Device, b: Device) -> bool:
    """Two devices below one switch: their paths share the root port and a port below it."""
    return len(a.pcie_path) >= 3 and a.pcie_path[:3] == b.pcie_path[:3]


def test_pairs_of_dgx2_gpus_each_come_from_one_switch():
    machine = hwloc_machine("nvidiaDGX2")
    by_address = {d.address: d for d in machine.devices}
    sched = scheduler_for(machine)
    taken: set[str] = set()
    for i in range(8):  # 16 V100s, two per switch: eight pairs fit exactly
        pod = device_pod(f"p{i}", "pcie:required", cpu=0, nvidia_com__gpu=2)
        decision = sched.schedule(pod, 0.0)
        assert decision.node == "n0", decision.message
        sched.bound(pod, 0.0)
        a, b = (by_address[i] for i in sorted(decision.placement.devices()["nvidia.com/gpu"]))
        assert same_switch(a, b)
        assert not taken & {a.address, b.address}
        taken |= {a.address, b.address}
    refused = sched.schedule(device_pod("p8", "pcie:required", cpu=0, nvidia_com__gpu=2), 0.0)
    assert refused.node is None


def test_lassen_nics_are_not_under_the_gpu_switches_but_share_their_numa_node():
    machine = hwloc_machine("coral-lassen")
    by_address = {d.address: d for d in machine.devices}
    sched = scheduler_for(machine)
    refused = sched.schedule(device_pod("p", "pcie:required", nvidia_com__gpu=1, rdma__hca=1), 0.0)
    assert refused.node is None
    assert "under the same PCIe switch" in refused.message
    for i in range(4):
        pod = device_pod(f"q{i}", "numa:required", nvidia_com__gpu=1, rdma__hca=1)
        decision = sched.schedule(pod, 0.0)
        assert decision.node == "n0", decision.message
        sched.bound(pod, 0.0)
        devices = decision.placement.devices()
        (gpu,), (nic,) = devices["nvidia.com/gpu"], devices["rdma/hca"]
        assert by_address[gpu].numa_id == by_address[nic].numa_id
        assert decision.placement.numa_nodes == {by_address[gpu].numa_id}


def test_a_preferred_scope_places_what_a_required_one_refuses():
    machine = hwloc_machine("coral-lassen")
    sched = scheduler_for(machine)
    decision = sched.schedule(device_pod("p", "pcie:preferred", nvidia_com__gpu=1, rdma__hca=1), 0.0)
    assert decision.node == "n0"


def synthetic_machine() -> Machine:
    """One NUMA node, GPU A alone under switch S1, GPU B with the only NIC under switch S2."""
    base = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": 0, "numa": 0} for c in range(8)],
                                  memory_per_numa=64 * GI)
    root = "pci0000:00"
    s1 = (root, "0000:00:01.0", "0000:10:00.0")  # root port, then the switch's upstream port
    s2 = (root, "0000:00:02.0", "0000:20:00.0")
    devices = (
        Device("0000:12:00.0", DeviceKind.GPU, 0, 0x10DE, 0x1DB4, 0x030200, (*s1, "0000:11:00.0")),
        Device("0000:22:00.0", DeviceKind.GPU, 0, 0x10DE, 0x1DB4, 0x030200, (*s2, "0000:21:00.0")),
        Device("0000:23:00.0", DeviceKind.INFINIBAND, 0, 0x15B3, 0x1017, 0x020700, (*s2, "0000:21:01.0")),
    )
    return dataclasses.replace(base, devices=devices)


def test_a_kubelet_that_would_pick_devices_outside_a_required_scope_refuses_the_node():
    # A pcie-required choice exists (GPU B + the NIC), but the kubelet's device manager takes the
    # first free GPU (A) and the NIC: the node is refused after Reserve and left unchanged.
    sched = scheduler_for(synthetic_machine())
    record = sched.cluster.nodes["n0"]
    before = record.model.available()
    decision = sched.schedule(device_pod("p", "pcie:required", nvidia_com__gpu=1, rdma__hca=1), 0.0)
    assert decision.node is None
    assert "not pcie as required" in decision.message
    assert record.model.available() == before
    relaxed = sched.schedule(device_pod("q", "numa:required", nvidia_com__gpu=1, rdma__hca=1), 0.0)
    assert relaxed.node == "n0"


def test_device_scope_prefers_the_node_that_keeps_devices_together():
    # Two identical nodes; one already has a GPU in use under each switch but one.
    sched = scheduler_for(hwloc_machine("nvidiaDGX2"), nodes=2)
    filler = device_pod("f", None, cpu=0, nvidia_com__gpu=1)
    first = sched.schedule(filler, 0.0)
    sched.bound(filler, 0.0)
    pod = device_pod("p", "pcie:preferred", cpu=0, nvidia_com__gpu=2)
    decision = sched.schedule(pod, 0.0)
    # Packing: the node whose devices are already in use is preferred while it keeps a pair together.
    assert decision.node == first.node


@pytest.mark.parametrize("scope", [None, "pcie:required"])
def test_pods_without_devices_are_not_affected(scope):
    sched = scheduler_for(synthetic_machine())
    decision = sched.schedule(device_pod("p", scope, cpu=2000), 0.0)
    assert decision.node == "n0"
    assert not decision.placement.devices()


def test_explain_lists_the_devices_each_node_would_give_and_why_one_refuses():
    sched = scheduler_for(synthetic_machine(), nodes=1)
    lassen = hwloc_machine("coral-lassen")
    sched.cluster.set_node(NodeSpec("lassen"), machine=lassen, kubelet_config=CONFIG)
    result = sched.explain(device_pod("p", "pcie:required", nvidia_com__gpu=1, rdma__hca=1))
    by_name = {n["name"]: n for n in result["nodes"]}
    assert by_name["lassen"]["filter"]["message"].startswith("no 1 nvidia.com/gpu")
    assert "not pcie as required" in by_name["n0"]["refused"]  # passes the filter, refused at Reserve
    relaxed = sched.explain(device_pod("q", "numa:required", nvidia_com__gpu=1, rdma__hca=1))
    devices = {n["name"]: n.get("devices") for n in relaxed["nodes"]}
    assert set(devices["lassen"]) == {"nvidia.com/gpu", "rdma/hca"}
    assert relaxed["selected"] in devices
    assert all(not node.pods for node in sched.cluster.nodes.values())  # explain leaves nothing behind
