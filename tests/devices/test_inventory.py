"""Node device inventories: PCIe switches on real machines, NRT-only nodes, the kubelet's device table.

The switch each real device sits under is stated per machine, read by hand off the hwloc
exports' bridge trees: on the DGX-2 every four V100s hang below one PLX switch tree (whose
second-level switches hold a GPU pair each); on Lassen each POWER9 PHB's two V100s share a
switch while the ConnectX-5 HCAs sit directly on root ports; g4dn.metal's T4s and Tioga's MI250X
GCDs and Slingshot NICs sit directly on root ports; every MI50 of Corona brings its own on-card
bridge. Locality is then checked against those tables, not against ``pcie_switch``.
"""

from __future__ import annotations

import pytest

from tests.conftest import shared_path
from toposched.devices.inventory import LEVELS, DeviceInventory, NodeDevice, pcie_switch
from toposched.devices.resources import DeviceResourceMap
from toposched.errors import InputError
from toposched.kubelet.node import KubeletNode
from toposched.scheduler.intent import SCOPE_NODE, SCOPE_NUMA, SCOPE_PCIE
from toposched.topology.hwloc import read_hwloc_xml
from toposched.topology.model import Device, DeviceKind, Machine
from toposched.topology.nrt import nrt_from_machine
from toposched.workload import Container, Pod

GPU, IB, NIC = DeviceKind.GPU, DeviceKind.INFINIBAND, DeviceKind.NIC


def real(name: str) -> DeviceInventory:
    return DeviceInventory.from_machine(read_hwloc_xml(shared_path("topologies", "hwloc", name)))


# ---- the switch of a PCIe path -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "switch"),
    [
        # DGX-2 V100: root port 2b:00.0, PLX tree 2c:00.0 -> 2d:04.0 -> 32:00.0 -> 33:00.0
        (("pci0000:2b", "0000:2b:00.0", "0000:2c:00.0", "0000:2d:04.0", "0000:32:00.0", "0000:33:00.0"),
         "0000:2c:00.0"),
        # Lassen V100: PHB root port 0004:00:00.0, switch 0004:01:00.0 -> 0004:02:0a.0
        (("pci0004:00", "0004:00:00.0", "0004:01:00.0", "0004:02:0a.0"), "0004:01:00.0"),
        # Corona MI50: root port 80:01.1, the card's own bridge 81:00.0 -> 82:00.0
        (("pci0000:80", "0000:80:01.1", "0000:81:00.0", "0000:82:00.0"), "0000:81:00.0"),
        (("pci0000:17", "0000:17:00.0"), None),  # g4dn T4 on a root port
        (("pci0000:d4", "0000:d4:01.1"), None),  # Tioga Slingshot NIC on a root port
        (("pci0000:00", "0000:00:01.6", "0000:04:00.0"), None),  # ASPEED behind a PCIe-to-PCI bridge
        (("pci0000:00",), None),  # root-complex integrated endpoint
        ((), None),  # a device known only from a report
        (("0000:00:03.0", "0000:02:00.0", "0000:03:01.0"), "0000:02:00.0"),  # a path without host bridge
    ],
)
def test_pcie_switch(path: tuple[str, ...], switch: str | None) -> None:
    assert pcie_switch(path) == switch


def test_levels_are_the_device_scope_words() -> None:
    assert LEVELS == (SCOPE_PCIE, SCOPE_NUMA, SCOPE_NODE)


# ---- real machines -------------------------------------------------------------------------------

# {machine: {device id: switch}} for every schedulable device, from the exports' bridge trees.
SWITCHES = {
    "nvidiaDGX2.xml": {
        **dict.fromkeys(["0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0"], "0000:2c:00.0"),
        **dict.fromkeys(["0000:57:00.0", "0000:59:00.0", "0000:5c:00.0", "0000:5e:00.0"], "0000:4f:00.0"),
        **dict.fromkeys(["0000:b7:00.0", "0000:b9:00.0", "0000:bc:00.0", "0000:be:00.0"], "0000:af:00.0"),
        **dict.fromkeys(["0000:e0:00.0", "0000:e2:00.0", "0000:e5:00.0", "0000:e7:00.0"], "0000:d8:00.0"),
    },
    "coral-lassen.xml": {
        "0004:04:00.0": "0004:01:00.0", "0004:05:00.0": "0004:01:00.0",
        "0035:03:00.0": "0035:01:00.0", "0035:04:00.0": "0035:01:00.0",
        "0003:01:00.0": None, "0003:01:00.1": None, "0033:01:00.0": None, "0033:01:00.1": None,
    },
    "g4dnmetal.xml": {
        **dict.fromkeys(["0000:18:00.0", "0000:19:00.0", "0000:35:00.0", "0000:36:00.0", "0000:e7:00.0",
                         "0000:e8:00.0", "0000:f4:00.0", "0000:f5:00.0"]),
        "0000:c5:00.0": "0000:c3:00.0",  # the EFA, below a switch it shares with the ENA
    },
    "eas-tioga.xml": dict.fromkeys([
        "0000:c1:00.0", "0000:c6:00.0", "0000:c9:00.0", "0000:ce:00.0", "0000:d1:00.0", "0000:d6:00.0",
        "0000:d9:00.0", "0000:de:00.0", "0000:c5:00.0", "0000:cd:00.0", "0000:d5:00.0", "0000:dd:00.0",
    ]),
    "epyc-corona-p2.xml": {
        "0000:03:00.0": "0000:01:00.0", "0000:27:00.0": "0000:25:00.0", "0000:43:00.0": "0000:41:00.0",
        "0000:63:00.0": "0000:61:00.0", "0000:83:00.0": "0000:81:00.0", "0000:a3:00.0": "0000:a1:00.0",
        "0000:c3:00.0": "0000:c1:00.0", "0000:e3:00.0": "0000:e1:00.0", "0000:c4:00.0": None,
    },
}


@pytest.mark.parametrize("name", sorted(SWITCHES))
def test_switches_of_real_machines(name: str) -> None:
    inventory = real(name)
    assert {d.id: d.switch for d in inventory} == SWITCHES[name]


@pytest.mark.parametrize("name", sorted(SWITCHES))
def test_locality_of_every_pair_follows_switch_and_numa(name: str) -> None:
    inventory = real(name)
    switch = SWITCHES[name]
    for a in inventory:
        for b in inventory:
            if switch[a.id] is not None and switch[a.id] == switch[b.id]:
                expected = "pcie"
            elif a.numa_id == b.numa_id:
                expected = "numa"
            else:
                expected = "node"
            assert inventory.locality(a.id, b.id) == expected, (a.id, b.id)


def test_dgx2_inventory() -> None:
    inventory = real("nvidiaDGX2.xml")
    assert dict(inventory.counts()) == {"nvidia.com/gpu": 16}
    assert inventory.numa_ids == (0, 1)
    assert [d.id for d in inventory] == sorted(d.id for d in inventory)
    assert inventory.switches() == ("0000:2c:00.0", "0000:4f:00.0", "0000:af:00.0", "0000:d8:00.0")
    assert [d.id for d in inventory.under_switch("0000:4f:00.0")] == [
        "0000:57:00.0", "0000:59:00.0", "0000:5c:00.0", "0000:5e:00.0"]
    assert len(inventory.on_numa(1, "nvidia.com/gpu")) == 8
    assert inventory.on_numa(1, "rdma/hca") == ()
    assert {r: dict(p) for r, p in inventory.counts_per_numa().items()} == {"nvidia.com/gpu": {0: 8, 1: 8}}
    gpu = inventory.device("0000:b7:00.0")
    assert (gpu.kind, gpu.numa_id, gpu.resource) == (GPU, 1, "nvidia.com/gpu")
    assert gpu.pcie_path[0] == "pci0000:ae"
    assert inventory.locality("0000:34:00.0", "0000:3b:00.0") == "pcie"
    assert inventory.locality("0000:34:00.0", "0000:57:00.0") == "numa"
    assert inventory.locality("0000:34:00.0", "0000:b7:00.0") == "node"


def test_g4dn_inventory_keeps_model_and_memory() -> None:
    inventory = real("g4dnmetal.xml")
    t4 = inventory.device("0000:18:00.0")
    assert t4.model == "TU104GL [Tesla T4]"
    assert t4.memory_bytes == 15843721216
    efa = inventory.device("0000:c5:00.0")
    assert (efa.resource, efa.kind, efa.numa_id) == ("vpc.amazonaws.com/efa", NIC, 1)
    assert "0000:c6:00.0" not in inventory  # the ENA
    assert inventory.get("0000:c6:00.0") is None


def test_a_configured_map_decides_what_is_a_resource() -> None:
    mapping = DeviceResourceMap.from_dict({"rules": [{"kind": "gpu", "vendor": "10de", "resource": "example.com/t4"}]})
    machine = read_hwloc_xml(shared_path("topologies", "hwloc", "g4dnmetal.xml"))
    inventory = DeviceInventory.from_machine(machine, mapping)
    assert dict(inventory.counts()) == {"example.com/t4": 8}
    assert inventory.source == "node gpu-st-g4dnmetal-1"


def test_the_kubelet_model_allocates_the_inventory_ids() -> None:
    machine = read_hwloc_xml(shared_path("topologies", "hwloc", "coral-lassen.xml"))
    inventory = DeviceInventory.from_machine(machine)
    plugins = inventory.device_plugins()
    assert plugins["rdma/hca"] == [("0003:01:00.0", [0]), ("0003:01:00.1", [0]), ("0033:01:00.0", [8]),
                                   ("0033:01:00.1", [8])]
    node = KubeletNode(machine, device_plugins=plugins)
    want = {"nvidia.com/gpu": 2, "rdma/hca": 1}
    admission = node.admit(Pod("train", containers=(Container("main", want, want),)))
    assert admission.admitted, admission.message
    devices = admission.containers["main"].devices
    assert {r: len(ids) for r, ids in devices.items()} == want
    for resource, ids in devices.items():
        assert all(inventory.device(i).resource == resource for i in ids)


# ---- nodes known from a NodeResourceTopology report ----------------------------------------------


def test_from_nrt_keeps_the_counts_per_numa_node() -> None:
    machine = read_hwloc_xml(shared_path("topologies", "hwloc", "g4dnmetal.xml"))
    hardware = DeviceInventory.from_machine(machine)
    nrt = nrt_from_machine(machine, node_name="g4dn-1",
                           device_resources={r: dict(p) for r, p in hardware.counts_per_numa().items()})
    reported = DeviceInventory.from_nrt(nrt)
    assert reported.counts_per_numa() == hardware.counts_per_numa()
    assert all(d.switch is None and d.pcie_path == () for d in reported)
    assert reported.device("nvidia.com/gpu-node-1-3").numa_id == 1
    assert reported.device("nvidia.com/gpu-node-1-3").kind == GPU
    # The resource name alone says nothing of an EFA; the map ties it to NICs.
    assert reported.device("vpc.amazonaws.com/efa-node-1-0").kind == NIC
    assert reported.source == "NodeResourceTopology g4dn-1"
    assert reported.locality("nvidia.com/gpu-node-1-0", "vpc.amazonaws.com/efa-node-1-0") == "numa"


# ---- bad input -----------------------------------------------------------------------------------


def test_bad_devices_are_refused_with_the_node_named() -> None:
    gpu = NodeDevice("g0", "nvidia.com/gpu", GPU, 0)
    with pytest.raises(InputError, match="listed twice") as info:
        DeviceInventory([gpu, gpu], source="node n1")
    assert (info.value.source, info.value.field) == ("node n1", "devices[1]")
    with pytest.raises(InputError, match="domain"):
        DeviceInventory([NodeDevice("g0", "gpu", GPU, 0)])
    with pytest.raises(InputError, match="not a NUMA node id"):
        DeviceInventory([NodeDevice("g0", "nvidia.com/gpu", GPU, -1)])
    with pytest.raises(InputError, match="not a device id"):
        DeviceInventory([NodeDevice("", "nvidia.com/gpu", GPU, 0)])
    inventory = DeviceInventory([gpu])
    with pytest.raises(InputError, match="no device 'g9'"):
        inventory.locality("g0", "g9")


def test_two_mapped_devices_with_one_address_are_refused() -> None:
    twin = Device("0000:04:00.0", IB, 0, 0x15B3, 0x1013, 0x020700)
    base = Machine.from_cpu_table([{"cpu": 0, "core": 0, "socket": 0, "numa": 0}])
    with pytest.raises(InputError, match="0000:04:00.0 is listed twice"):
        DeviceInventory.from_machine(base.with_devices([twin, twin]))
