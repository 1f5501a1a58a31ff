"""koordlet's Device objects as a node's device description on count-only nodes.

The object's shape is Koordinator's apis/scheduling/v1alpha1/device_types.go (DeviceInfo: type,
id, minor, health, resources, topology {socketID, nodeID, pcieID, busID}).
"""

from __future__ import annotations

import json

import pytest

from toposched.devices.koordlet_device import devices_from_koordlet
from toposched.errors import InputError
from toposched.kube.client import WatchEvent
from toposched.kube.cluster_sync import ClusterSync
from toposched.kubelet.config import KubeletConfig
from toposched.kubelet.description import ALLOCATIONS_ATTRIBUTE, DESCRIPTION_ATTRIBUTE
from toposched.node_report import node_report
from toposched.scheduler import Cluster, Scheduler
from toposched.scheduler.profile_setup import load_profile
from toposched.topology import CPUSet, Device, DeviceKind, Machine
from toposched.topology.nrt import parse_nrt
from toposched.workload import Container, Pod

GiB = 1 << 30


def gpu(i: int, numa: int, pcie: str, healthy: bool = True) -> dict:
    return {"type": "gpu", "id": f"GPU-{i:08d}-1111-2222-3333-444444444444", "minor": i, "health": healthy,
            "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "16Gi",
                          "koordinator.sh/gpu-memory-ratio": "100"},
            "topology": {"socketID": numa, "nodeID": numa, "pcieID": pcie, "busID": f"0000:{0x3b + i:02x}:00.0"}}


def device_object(name: str = "n") -> dict:
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device", "metadata": {"name": name},
            "spec": {"devices": [gpu(0, 0, "pci0000:3a"), gpu(1, 0, "pci0000:3a"), gpu(2, 0, "pci0000:5d"),
                                 gpu(3, 1, "pci0000:ae"), gpu(4, 1, "pci0000:ae", healthy=False),
                                 {"type": "fpga", "id": "fpga-0", "health": True}]}}


def nfd_report(name: str = "n") -> dict:
    """What node-feature-discovery publishes for a 2-NUMA node with 4 GPUs: zones and counts only."""
    rows = [{"cpu": c + t * 8, "core": c, "socket": c // 4, "numa": c // 4} for t in range(2) for c in range(8)]
    machine = Machine.from_cpu_table(rows, memory_per_numa=64 * GiB).with_devices(
        [Device(f"0000:{0x3b + i:02x}:00.0", DeviceKind.GPU, 0 if i < 3 else 1, 0x10DE, 0x1EB8, 0x030200)
         for i in range(4)])
    obj = json.loads(json.dumps(node_report(machine, KubeletConfig(topology_manager_policy="single-numa-node",
                                                                   cpu_manager_policy="static",
                                                                   reserved_system_cpus=CPUSet([0, 8])),
                                            node_name=name)))
    obj["attributes"] = [a for a in obj["attributes"] if a["name"] not in (DESCRIPTION_ATTRIBUTE, ALLOCATIONS_ATTRIBUTE)]
    return obj


def test_healthy_gpus_with_numa_switch_and_memory():
    name, devices = devices_from_koordlet(device_object())
    assert name == "n"
    assert [(d.resource, d.id[:12], d.numa_id, d.pci_address, d.memory_bytes) for d in devices] == [
        ("nvidia.com/gpu", f"GPU-{i:08d}"[:12], numa, f"0000:{0x3b + i:02x}:00.0", 16 * GiB)
        for i, numa in ((0, 0), (1, 0), (2, 0), (3, 1))]  # the unhealthy GPU and the FPGA are left out
    assert devices[0].pcie_path[1] == devices[1].pcie_path[1] == "pci0000:3a" != devices[2].pcie_path[1]


@pytest.mark.parametrize("mangle,field", [
    (lambda o: o["spec"]["devices"][0].__setitem__("topology", {"nodeID": "zero"}), "spec.devices[0].topology.nodeID"),
    (lambda o: o["spec"]["devices"][0].__setitem__("id", 7), "spec.devices[0].id"),
    (lambda o: o["spec"].__setitem__("devices", {"a": 1}), "spec.devices"),
    (lambda o: o["spec"]["devices"][1].__setitem__("id", o["spec"]["devices"][0]["id"]), "spec.devices[1].id"),
    (lambda o: o["metadata"].pop("name"), "metadata.name"),
])
def test_malformed_objects_name_the_field(mangle, field):
    obj = device_object()
    mangle(obj)
    with pytest.raises(InputError) as err:
        devices_from_koordlet(obj)
    assert err.value.field == field


def gpu_pod(name: str, annotations=None, **limits) -> Pod:
    return Pod(name, uid=name, annotations=annotations or {}, scheduler_name="toposched",
               containers=(Container("c", requests={"cpu": 1000, "memory": GiB, **limits},
                                     limits={"cpu": 1000, "memory": GiB, **limits}),))


def test_a_count_only_node_with_koordlets_devices_offers_shares_and_pcie_scopes():
    cluster = Cluster()
    cluster.update_report(parse_nrt(nfd_report()), now=0.0)
    scheduler = Scheduler(cluster, load_profile("toposched"))
    pair = gpu_pod("pair", {"toposched.io/device-scope": "pcie:required"}, **{"nvidia.com/gpu": 2})
    share = gpu_pod("share", **{"koordinator.sh/gpu-core": 50, "koordinator.sh/gpu-memory-ratio": 50})
    # Counts only: no PCIe switch is known, no GPU memory: neither pod fits.
    assert scheduler.schedule(pair, now=0.0).node is None
    assert scheduler.schedule(share, now=0.0).node is None
    sync = ClusterSync(scheduler, clock=lambda: 1.0)
    sync.on_device(WatchEvent("ADDED", device_object()))
    decision = scheduler.schedule(pair, now=1.0)
    assert decision.node == "n"
    record = cluster.nodes["n"]
    ids = record.pods["pair"].placement.containers["c"].devices["nvidia.com/gpu"]
    assert record.inventory.locality(*ids) == "pcie"
    assert scheduler.schedule(share, now=1.0).node == "n"
    sync.on_device(WatchEvent("DELETED", {"metadata": {"name": "n"}}))
    assert not record.external_devices and record.count_only


def test_a_bad_device_object_is_ignored_and_the_node_keeps_its_counts(caplog):
    cluster = Cluster()
    cluster.update_report(parse_nrt(nfd_report()), now=0.0)
    sync = ClusterSync(Scheduler(cluster, load_profile("toposched")), clock=lambda: 1.0)
    bad = device_object()
    bad["spec"]["devices"][0]["topology"]["nodeID"] = "zero"
    sync.on_device(WatchEvent("ADDED", bad))
    assert cluster.nodes["n"].model is not None and not cluster.nodes["n"].external_devices
    assert "ignoring koordlet's devices of node n" in caplog.text
