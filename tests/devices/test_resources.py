"""The device -> extended resource map: matching rules, the shipped defaults on real machines, the file format.

The default resource names are those the vendors' device plugins advertise (``nvidia.com/gpu``,
``amd.com/gpu``, ``gpu.intel.com/i915``, AWS's ``vpc.amazonaws.com/efa``) or ours where no plugin
sets one (``rdma/hca``, ``rdma/hfi``, ``rdma/cxi``); docs/devices/inventory.md gives the reasons.
The per-machine expectations below were read off the hwloc exports' PCI vendor/device ids by hand.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.conftest import shared_path
from toposched.devices.resources import DeviceResourceMap, ResourceRule, load_resource_map
from toposched.errors import InputError
from toposched.topology.hwloc import read_hwloc_xml
from toposched.topology.model import Device, DeviceKind, classify_pci_class


def pci(vendor: int, device: int, class_code: int, name: str | None = None) -> Device:
    return Device("0000:01:00.0", classify_pci_class(class_code, vendor), 0, vendor, device, class_code, name=name)


DEFAULT = DeviceResourceMap.default()


# ---- the shipped defaults ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "resource"),
    [
        (pci(0x10DE, 0x1DB8, 0x030200), "nvidia.com/gpu"),  # V100 SXM3 (DGX-2)
        (pci(0x10DE, 0x1EB8, 0x030200), "nvidia.com/gpu"),  # T4 (g4dn.metal)
        (pci(0x10DE, 0x1AC2, 0x068000), None),  # NVSwitch: a bridge-class function, not a GPU
        (pci(0x1002, 0x66A1, 0x038000), "amd.com/gpu"),  # MI50
        (pci(0x1002, 0x7408, 0x038000), "amd.com/gpu"),  # MI250X GCD
        (pci(0x1002, 0x515E, 0x030000), None),  # ATI ES1000: a BMC's VGA
        (pci(0x1A03, 0x2000, 0x030000), None),  # ASPEED BMC VGA
        (pci(0x102B, 0x0522, 0x030000), None),  # Matrox BMC VGA
        (pci(0x8086, 0x0BD5, 0x038000), "gpu.intel.com/i915"),  # Intel Data Center GPU Max
        (pci(0x15B3, 0x1019, 0x020700), "rdma/hca"),  # ConnectX-5, InfiniBand
        (pci(0x15B3, 0x101D, 0x020000), "rdma/hca"),  # ConnectX-6 Dx, Ethernet (RoCE)
        (pci(0x15B3, 0x6746, 0x0C0600), "rdma/hca"),  # ConnectX-2 as a serial-bus InfiniBand function
        (pci(0x1077, 0x7322, 0x0C0600), "rdma/hca"),  # QLogic InfiniBand: any other HCA
        (pci(0x8086, 0x24F0, 0x020800), "rdma/hfi"),  # Omni-Path HFI
        (pci(0x17DB, 0x0501, 0x020000), "rdma/cxi"),  # HPE Slingshot (Cassini)
        (pci(0x1D0F, 0xEFA0, 0x020000), "vpc.amazonaws.com/efa"),  # AWS EFA
        (pci(0x1D0F, 0xEC20, 0x020000), None),  # AWS ENA: plain Ethernet
        (pci(0x8086, 0x1521, 0x020000), None),  # Intel I350: plain Ethernet
        (pci(0x14E4, 0x1657, 0x020000), None),  # Broadcom BCM5719: plain Ethernet
        (pci(0x144D, 0xA808, 0x010802), None),  # NVMe
    ],
)
def test_default_map_gives_each_device_its_resource(device: Device, resource: str | None) -> None:
    assert DEFAULT.resource_of(device) == resource


# Expected device resources of real machines, from the exports' PCI ids.
REAL = {
    "nvidiaDGX2.xml": {"nvidia.com/gpu": 16},  # the 12 NVSwitch functions are no resource
    "g4dnmetal.xml": {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 1},  # not the ENA, not the 3 NVMe
    "epyc-corona-p2.xml": {"amd.com/gpu": 8, "rdma/hca": 1},  # not the two I350 ports, not the ASPEED
    "eas-tioga.xml": {"amd.com/gpu": 8, "rdma/cxi": 4},  # not the Intel I210, not the 16 NVMe
    "coral-lassen.xml": {"nvidia.com/gpu": 4, "rdma/hca": 4},  # not the Broadcom ports, not the ASPEED
    "24em64t-2n6c2t-pci.xml": {"nvidia.com/gpu": 3, "rdma/hca": 1},  # not the ES1000 BMC VGA
    "cts1-quartz-smt1.xml": {"rdma/hfi": 1},  # Omni-Path
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_default_map_on_real_machines(name: str) -> None:
    machine = read_hwloc_xml(shared_path("topologies", "hwloc", name))
    found = Counter(r for r in (DEFAULT.resource_of(d) for d in machine.devices) if r)
    assert dict(found) == REAL[name]


def test_default_map_lists_its_resources_and_kinds() -> None:
    assert DEFAULT.resources == (
        "amd.com/gpu", "gpu.intel.com/i915", "nvidia.com/gpu", "rdma/cxi", "rdma/hca", "rdma/hfi",
        "vpc.amazonaws.com/efa",
    )
    assert DEFAULT.kind_of("nvidia.com/gpu") == DeviceKind.GPU
    assert DEFAULT.kind_of("vpc.amazonaws.com/efa") == DeviceKind.NIC
    assert DEFAULT.kind_of("rdma/cxi") == DeviceKind.NIC
    assert DEFAULT.kind_of("rdma/hca") is None  # InfiniBand and Ethernet (RoCE) functions alike
    assert DEFAULT.kind_of("rdma/hfi") is None  # a class rule names no kind
    assert DEFAULT.kind_of("example.com/unknown") is None
    assert DEFAULT.source.endswith("data/devices/default-resource-map.yaml")


# ---- matching ------------------------------------------------------------------------------------


def test_each_criterion_must_hold() -> None:
    dev = pci(0x15B3, 0x1019, 0x020700, name="mlx5_0")
    assert ResourceRule("a/b", kinds=frozenset({DeviceKind.INFINIBAND})).matches(dev)
    assert not ResourceRule("a/b", kinds=frozenset({DeviceKind.GPU})).matches(dev)
    assert ResourceRule("a/b", vendor=0x15B3, device_ids=frozenset({0x1017, 0x1019})).matches(dev)
    assert not ResourceRule("a/b", vendor=0x15B3, device_ids=frozenset({0x1017})).matches(dev)
    assert ResourceRule("a/b", class_prefix="02").matches(dev)
    assert ResourceRule("a/b", class_prefix="0207").matches(dev)
    assert ResourceRule("a/b", class_prefix="020700").matches(dev)
    assert not ResourceRule("a/b", class_prefix="0200").matches(dev)
    assert ResourceRule("a/b", name="mlx5_*").matches(dev)
    assert not ResourceRule("a/b", name="mlx4_*").matches(dev)
    assert not ResourceRule("a/b", name="mlx5_*").matches(pci(0x15B3, 0x1019, 0x020700))  # no OS name
    assert not ResourceRule("a/b", class_prefix="02").matches(Device("x"))  # no class code


def test_first_matching_rule_wins_and_null_means_no_resource() -> None:
    data = {"rules": [
        {"vendor": "10de", "devices": ["1eb8"], "resource": None},
        {"kind": "gpu", "vendor": "0x10DE", "resource": "nvidia.com/gpu"},
        {"kind": "gpu", "resource": "example.com/gpu"},
    ]}
    mapping = DeviceResourceMap.from_dict(data, "test")
    assert mapping.resource_of(pci(0x10DE, 0x1EB8, 0x030200)) is None
    assert mapping.resource_of(pci(0x10DE, 0x1DB8, 0x030200)) == "nvidia.com/gpu"
    assert mapping.resource_of(pci(0x1002, 0x66A1, 0x038000)) == "example.com/gpu"
    assert mapping.resource_of(pci(0x8086, 0x1521, 0x020000)) is None


# ---- the file format -----------------------------------------------------------------------------


def test_a_user_file_replaces_the_defaults(tmp_path) -> None:
    path = tmp_path / "map.yaml"
    path.write_text(
        "rules:\n"
        "  - description: our T4s only\n"
        "    kind: [gpu]\n"
        "    vendor: '10de'\n"
        "    devices: ['1eb8']\n"
        "    resource: example.com/t4\n"
        "  - name: 'mlx5_*'\n"
        "    class: '0207'\n"
        "    resource: example.com/ib\n"
    )
    mapping = load_resource_map(path)
    assert mapping.source == str(path)
    assert mapping.resources == ("example.com/ib", "example.com/t4")
    assert mapping.resource_of(pci(0x10DE, 0x1EB8, 0x030200)) == "example.com/t4"
    assert mapping.resource_of(pci(0x10DE, 0x1DB8, 0x030200)) is None
    assert mapping.resource_of(pci(0x15B3, 0x1019, 0x020700, name="mlx5_3")) == "example.com/ib"
    assert DeviceResourceMap.from_yaml(path) == mapping


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("- kind: gpu\n", "rules", "expected a mapping"),
        ("rules: {kind: gpu}\n", "rules", "must be a list"),
        ("rulez: []\n", "rulez", "unknown field"),
        ("rules:\n  - 3\n", "rules[0]", "must be a mapping"),
        ("rules:\n  - {kind: gpu, resource: a/b, colour: red}\n", "rules[0].colour", "unknown field"),
        ("rules:\n  - {kind: gpus, resource: a/b}\n", "rules[0].kind", "unknown device kind 'gpus'"),
        ("rules:\n  - {kind: [], resource: a/b}\n", "rules[0].kind", "matches nothing"),
        ("rules:\n  - {vendor: 1002, resource: a/b}\n", "rules[0].vendor", "quoted hex strings"),
        ("rules:\n  - {vendor: '10xz', resource: a/b}\n", "rules[0].vendor", "not a PCI id"),
        ("rules:\n  - {vendor: '10de0', resource: a/b}\n", "rules[0].vendor", "not a PCI id"),
        ("rules:\n  - {vendor: '10de', devices: '1eb8', resource: a/b}\n", "rules[0].devices", "list"),
        ("rules:\n  - {vendor: '10de', devices: ['1eb8', 7], resource: a/b}\n", "rules[0].devices[1]", "hex"),
        ("rules:\n  - {class: '020', resource: a/b}\n", "rules[0].class", "2, 4 or 6 hex digits"),
        ("rules:\n  - {class: 207, resource: a/b}\n", "rules[0].class", "quoted hex string"),
        ("rules:\n  - {kind: gpu}\n", "rules[0].resource", "resource is missing"),
        ("rules:\n  - {kind: gpu, resource: ''}\n", "rules[0].resource", "empty"),
        ("rules:\n  - {kind: gpu, resource: gpu}\n", "rules[0].resource", "<domain>/<name>"),
        ("rules:\n  - {kind: gpu, resource: 'Nvidia.com/gpu'}\n", "rules[0].resource", "<domain>/<name>"),
        ("rules:\n  - {kind: gpu, resource: [a/b]}\n", "rules[0].resource", "resource name or null"),
        ("rules:\n  - {resource: a/b}\n", "rules[0]", "at least one of"),
        ("rules:\n  - {name: '', resource: a/b}\n", "rules[0].name", "non-empty"),
        ("rules:\n  - {kind: gpu, resource: a/b, description: 3}\n", "rules[0].description", "string"),
    ],
)
def test_bad_files_name_the_file_and_the_field(tmp_path, text: str, field: str, words: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_resource_map(path)
    assert info.value.source == str(path)
    assert info.value.field == field
    assert words in info.value.message
    assert str(info.value).startswith(f"{path}: {field}: ")


def test_unreadable_and_malformed_files(tmp_path) -> None:
    with pytest.raises(InputError, match="cannot read file") as info:
        load_resource_map(tmp_path / "missing.yaml")
    assert info.value.source == str(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("rules: [\n")
    with pytest.raises(InputError, match="invalid YAML"):
        load_resource_map(broken)
    twice = tmp_path / "twice.yaml"
    twice.write_text("rules: []\n---\nrules: []\n")
    with pytest.raises(InputError, match="one document"):
        load_resource_map(twice)
