"""Joint device choice: real GPU nodes, Koordinator's joint-allocation table, packing, properties, bad input.

Upstream semantics followed (koordinator-sh/koordinator, ``pkg/scheduler/plugins/deviceshare``):

* ``device_allocator.go`` (``tryJointAllocate``, ``jointAllocate``, ``validateJointAllocation``):
  the first of ``deviceTypes`` is the primary; with ``requiredScope: SamePCIe`` the PCIe ids of
  the secondary devices must equal those of the primary devices, else the node fails.
* ``device_allocator_test.go`` (``TestAllocateByPartition``, node ``fakeH800DeviceCR``): 8 GPUs
  and 8 RDMA NICs, one of each per PCIe id, 4 per NUMA node; 1, 2, 4, 8 GPUs jointly with RDMA
  under SamePCIe get GPU minors 0.., RDMA minors 1... Restated below with whole NICs (our NIC
  count is the request, Koordinator raises its VF count to the number of PCIe ids).
* ``allocator_gpu_helper.go`` / ``allocator_gpu.go`` (``GetGPUTopologyScope``,
  ``allocateFromScope``): devices are scoped node -> NUMA node -> PCIe, and the tightest scope
  that holds the request wins.

Real hardware checks compute what each choice should achieve from the hwloc XML itself: two
devices share a PCIe switch when they have a common ancestor bridge of hwloc depth 2 or more
(depth 0 is the host bridge, 1 the root port), independently of ``pcie_switch``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import cache
from itertools import combinations
from math import comb

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.conftest import shared_path
from toposched.devices.inventory import DeviceInventory, NodeDevice
from toposched.devices.joint import DEVICE_TYPE_KINDS, DeviceChoice, choose_devices
from toposched.errors import InputError
from toposched.scheduler.intent import KOORDINATOR_DEVICE_JOINT_ALLOCATE, DeviceScope, pod_intent
from toposched.topology.hwloc import read_hwloc_xml
from toposched.topology.model import DeviceKind
from toposched.workload import Container, Pod

GPU_KIND, IB_KIND, NIC_KIND = DeviceKind.GPU, DeviceKind.INFINIBAND, DeviceKind.NIC
RANK = {"pcie": 0, "numa": 1, "node": 2}


# ---- real machines, with an oracle read from the XML ----------------------------------------------


@dataclass(frozen=True)
class Hardware:
    inventory: DeviceInventory
    gpu: str  # the GPU resource
    nic: str | None  # the RDMA resource, if any
    bridges: dict[str, frozenset[str]]  # device id -> its ancestor bridges of depth >= 2 (by gp_index)


def _with_dgx2_nics(data: bytes) -> bytes:
    """The DGX-2 export with its ConnectX-5 HCAs back: one below each second-level PLX switch.

    The export keeps every GPU but none of the 8 HCAs; each GPU pair's switch (depth 4) still
    reserves an unused bus number in its range (e.g. 35 in 33-36), where the HCA sat. A downstream
    port and an InfiniBand function are put there.
    """
    root = ET.fromstring(data)
    added = 0
    for bridge in root.iter("object"):
        if bridge.get("type") != "Bridge" or bridge.get("depth") != "4":
            continue
        children = [c for c in bridge if c.get("type") == "Bridge"]
        gpus = [d for c in children for d in c if d.get("pci_type", "").startswith("0302")]
        if not gpus:
            continue
        domain, buses = bridge.get("bridge_pci").split(":")
        first, last = (int(b, 16) for b in buses.strip("[]").split("-"))
        used = {int(c.get("bridge_pci").split(":")[1].strip("[]").split("-")[0], 16) for c in children}
        bus = min(set(range(first + 1, last + 1)) - used)
        port = ET.SubElement(bridge, "object", {
            "type": "Bridge", "gp_index": str(9000 + added), "bridge_type": "1-1", "depth": "5",
            "bridge_pci": f"{domain}:[{bus:02x}-{bus:02x}]", "pci_busid": f"{domain}:{first:02x}:08.0",
            "pci_type": "0604 [10b5:9781] [10b5:9781] b0"})
        ET.SubElement(port, "object", {
            "type": "PCIDev", "gp_index": str(9100 + added), "pci_busid": f"{domain}:{bus:02x}:00.0",
            "pci_type": "0207 [15b3:1019] [15b3:0008] 00"})
        added += 1
    assert added == 8
    return ET.tostring(root)


@cache
def hardware(name: str) -> Hardware:
    data = shared_path("topologies", "hwloc", name).read_bytes()
    if name == "nvidiaDGX2.xml":
        data = _with_dgx2_nics(data)
    bridges: dict[str, frozenset[str]] = {}

    def walk(el: ET.Element, above: tuple[str, ...]) -> None:
        if el.get("type") == "PCIDev":
            bridges[el.get("pci_busid").lower()] = frozenset(above)
        if el.get("type") == "Bridge" and int(el.get("depth", "0")) >= 2:
            above = (*above, el.get("gp_index"))
        for child in el:
            walk(child, above)

    walk(ET.fromstring(data), ())
    inventory = DeviceInventory.from_machine(read_hwloc_xml(data))
    resources = inventory.resources
    gpu = next(r for r in resources if inventory.of_resource(r)[0].kind == GPU_KIND)
    nic = next((r for r in resources if r != gpu), None)
    return Hardware(inventory, gpu, nic, bridges)


MACHINES = ["nvidiaDGX2.xml", "g4dnmetal.xml", "epyc-corona-p2.xml", "eas-tioga.xml", "coral-lassen.xml"]


def _expected_level(hw: Hardware, allowed: frozenset[int] | None, gpus: int, nics: int) -> str | None:
    """The tightest level any choice can reach, from the XML's bridges and the NUMA nodes (None: impossible)."""
    inv = hw.inventory
    ok = [d for d in inv if allowed is None or d.numa_id is None or d.numa_id in allowed]
    gpu_devs = [d for d in ok if d.resource == hw.gpu]
    nic_devs = [d for d in ok if d.resource == hw.nic]
    if len(gpu_devs) < gpus or len(nic_devs) < nics:
        return None
    under: dict[str, tuple[int, int]] = {}
    for d in ok:
        for b in hw.bridges[d.id]:
            g, n = under.get(b, (0, 0))
            under[b] = (g + (d in gpu_devs), n + (d in nic_devs))
    numa = {n: (sum(d.numa_id == n for d in gpu_devs), sum(d.numa_id == n for d in nic_devs))
            for n in {d.numa_id for d in ok if d.numa_id is not None}}
    if nics == 0:
        if gpus == 1 or any(g >= gpus for g, _ in under.values()):
            return "pcie"
        return "numa" if any(g >= gpus for g, _ in numa.values()) else "node"
    # One NIC: the GPUs' switches (NUMA nodes) must all be the NIC's.
    if any(g >= gpus and n >= 1 for g, n in under.values()):
        return "pcie"
    return "numa" if any(g >= gpus and n >= 1 for g, n in numa.values()) else "node"


def _check_against_xml(hw: Hardware, choice: DeviceChoice, allowed: frozenset[int] | None) -> None:
    chosen = [hw.inventory.device(i) for i in choice.all_ids]
    assert len(chosen) == sum(len(ids) for ids in choice.ids.values())
    assert all(allowed is None or d.numa_id is None or d.numa_id in allowed for d in chosen)
    if choice.level == "pcie" and len(chosen) > 1:
        assert frozenset.intersection(*(hw.bridges[d.id] for d in chosen)), "not under one PCIe switch"
    if choice.level in ("pcie", "numa"):
        assert len({d.numa_id for d in chosen}) == 1
    assert choice.numa_nodes == {d.numa_id for d in chosen}


@pytest.mark.parametrize("name", MACHINES)
@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
@pytest.mark.parametrize("nics", [0, 1])
def test_real_gpu_nodes(name: str, gpus: int, nics: int) -> None:
    hw = hardware(name)
    request = {hw.gpu: gpus, **({hw.nic: nics} if nics else {})}
    for allowed in [None, *(frozenset({n}) for n in hw.inventory.numa_ids)]:
        expected = _expected_level(hw, allowed, gpus, nics)
        for scope in (None, DeviceScope("pcie", True), DeviceScope("numa", True), DeviceScope("node", False)):
            choice = choose_devices(hw.inventory, request, numa_nodes=allowed, scope=scope)
            where = f"{name} {request} numa={allowed and sorted(allowed)} scope={scope}"
            if expected is None or (scope is not None and scope.required and RANK[expected] > RANK[scope.scope]):
                assert not choice.ok, where
                assert choice.ids == {} and choice.level is None
                continue
            assert choice.ok, f"{where}: {choice.reason}"
            assert {r: len(ids) for r, ids in choice.ids.items()} == request
            assert choice.level == expected, where
            _check_against_xml(hw, choice, allowed)


def test_dgx2_joint_choices() -> None:
    hw = hardware("nvidiaDGX2.xml")
    # GPUs and HCAs of one PLX tree are under one switch, whatever second-level switch holds them.
    assert {d.switch for d in hw.inventory.of_resource("rdma/hca")} == set(hw.inventory.switches("nvidia.com/gpu"))
    assert hw.inventory.locality("0000:35:00.0", "0000:3b:00.0") == "pcie"
    assert hw.inventory.locality("0000:35:00.0", "0000:57:00.0") == "numa"
    choice = choose_devices(hw.inventory, {"nvidia.com/gpu": 2, "rdma/hca": 1})
    assert dict(choice.ids) == {"nvidia.com/gpu": ("0000:34:00.0", "0000:36:00.0"), "rdma/hca": ("0000:35:00.0",)}
    assert (choice.level, choice.numa_nodes, choice.joint) == ("pcie", {0}, ("nvidia.com/gpu", "rdma/hca"))
    # 8 GPUs and 4 HCAs: two PLX trees, two HCAs in each; the other NUMA node stays whole.
    choice = choose_devices(hw.inventory, {"nvidia.com/gpu": 8, "rdma/hca": 4})
    assert choice.level == "pcie" and choice.numa_nodes == {0}
    assert choice.ids["rdma/hca"] == ("0000:35:00.0", "0000:3a:00.0", "0000:58:00.0", "0000:5d:00.0")
    # On NUMA node 1 only.
    choice = choose_devices(hw.inventory, {"nvidia.com/gpu": 4, "rdma/hca": 1}, numa_nodes={1},
                            scope=DeviceScope("pcie", True))
    assert choice.ids["nvidia.com/gpu"] == ("0000:b7:00.0", "0000:b9:00.0", "0000:bc:00.0", "0000:be:00.0")
    assert choice.ids["rdma/hca"] == ("0000:b8:00.0",)


def test_lassen_has_no_hca_under_a_gpu_switch() -> None:
    hw = hardware("coral-lassen.xml")
    request = {"nvidia.com/gpu": 2, "rdma/hca": 1}
    choice = choose_devices(hw.inventory, request, numa_nodes={8}, scope=DeviceScope("pcie", True))
    assert choice.reason == "no 2 nvidia.com/gpu on NUMA node 8 with a free rdma/hca under the same PCIe switch"
    choice = choose_devices(hw.inventory, request, numa_nodes={8}, scope=DeviceScope("pcie", False))
    assert dict(choice.ids) == {"nvidia.com/gpu": ("0035:03:00.0", "0035:04:00.0"), "rdma/hca": ("0033:01:00.0",)}
    assert choice.level == "numa"


def test_tioga_spreads_four_gcds_over_two_numa_nodes_and_keeps_a_nic_near() -> None:
    hw = hardware("eas-tioga.xml")
    choice = choose_devices(hw.inventory, {"amd.com/gpu": 4, "rdma/cxi": 1})
    assert choice.level == "node"  # one NIC cannot be on both NUMA nodes of four GCDs
    nic = hw.inventory.device(choice.ids["rdma/cxi"][0])
    assert nic.numa_id in choice.numa_nodes
    choice = choose_devices(hw.inventory, {"amd.com/gpu": 4, "rdma/cxi": 2})
    assert choice.level == "numa" and len(choice.numa_nodes) == 2


# ---- Koordinator's joint allocation table ---------------------------------------------------------

# fakeH800DeviceCR: (minor, busID or id, NUMA node, PCIe id)
H800_GPUS = [(0, "0000:08:00.0", 0, "0"), (1, "0000:7e:00.0", 0, "2"), (2, "0000:a2:00.0", 0, "3"),
             (3, "0000:c6:00.0", 0, "4"), (4, "0001:09:00.0", 1, "5"), (5, "0001:7f:00.0", 1, "6"),
             (6, "0001:a3:00.0", 1, "7"), (7, "0001:c7:00.0", 1, "8")]
H800_RDMA = [(1, "0000:09:00.0", 0, "0"), (2, "0000:7f:00.0", 0, "2"), (3, "0000:a3:00.0", 0, "3"),
             (4, "0000:c7:00.0", 0, "4"), (5, "0001:08:00.0", 1, "5"), (6, "0001:7e:00.0", 1, "6"),
             (7, "0001:a2:00.0", 1, "7"), (8, "0001:c6:00.0", 1, "8")]


@pytest.mark.parametrize(("gpus", "gpu_minors", "rdma_minors"), [
    (1, [0], [1]),
    (2, [0, 1], [1, 2]),
    (4, [0, 1, 2, 3], [1, 2, 3, 4]),
    (8, list(range(8)), list(range(1, 9))),
])
def test_koordinator_h800_joint_table(gpus: int, gpu_minors: list[int], rdma_minors: list[int]) -> None:
    devices = [NodeDevice(i, "nvidia.com/gpu", GPU_KIND, n, f"pcie-{p}") for _, i, n, p in H800_GPUS]
    devices += [NodeDevice(i, "koordinator.sh/rdma", NIC_KIND, n, f"pcie-{p}") for _, i, n, p in H800_RDMA]
    inventory = DeviceInventory(devices)
    scope = DeviceScope("pcie", True, ("gpu", "rdma"))
    choice = choose_devices(inventory, {"nvidia.com/gpu": gpus, "koordinator.sh/rdma": gpus}, scope=scope)
    assert choice.ok, choice.reason
    minor_of = {i: m for m, i, _, _ in H800_GPUS + H800_RDMA}
    assert [minor_of[i] for i in choice.ids["nvidia.com/gpu"]] == gpu_minors
    assert [minor_of[i] for i in choice.ids["koordinator.sh/rdma"]] == rdma_minors
    assert choice.level == "pcie"
    # Fewer NICs than the GPUs' PCIe switches: Koordinator would raise the VF count; a whole-NIC
    # request cannot grow, so SamePCIe refuses and the preferred scope settles for NUMA.
    if gpus > 1:
        request = {"nvidia.com/gpu": gpus, "koordinator.sh/rdma": 1}
        assert not choose_devices(inventory, request, scope=scope).ok
        assert choose_devices(inventory, request, scope=DeviceScope("pcie", False, ("gpu", "rdma"))).level == (
            "numa" if gpus <= 4 else "node")


def test_koordinator_annotation_read_by_pod_intent_drives_the_choice() -> None:
    want = {"nvidia.com/gpu": 2, "rdma/hca": 1}
    pod = Pod("train", containers=(Container("main", want, want),), annotations={
        KOORDINATOR_DEVICE_JOINT_ALLOCATE: '{"deviceTypes":["gpu","rdma"],"requiredScope":"SamePCIe"}'})
    scope = pod_intent(pod).device_scope
    assert scope is not None
    assert set(scope.device_types) <= set(DEVICE_TYPE_KINDS)
    hw = hardware("nvidiaDGX2.xml")
    assert choose_devices(hw.inventory, want, scope=scope).level == "pcie"
    assert not choose_devices(hardware("coral-lassen.xml").inventory, want, scope=scope).ok


# ---- packing --------------------------------------------------------------------------------------


def test_dgx2_one_gpu_at_a_time_fills_switch_after_switch() -> None:
    inventory = hardware("nvidiaDGX2.xml").inventory
    gpus = [d.id for d in inventory.of_resource("nvidia.com/gpu")]
    free = set(gpus)
    order = []
    for _ in gpus:
        choice = choose_devices(inventory, {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": free})
        (taken,) = choice.ids["nvidia.com/gpu"]
        order.append(taken)
        free.discard(taken)
    # The partly used switch first (tightest), then the partly used NUMA node: address order here.
    assert order == gpus
    assert not choose_devices(inventory, {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": free}).ok


def test_dgx2_a_second_request_leaves_whole_switches() -> None:
    inventory = hardware("nvidiaDGX2.xml").inventory
    gpus = [d.id for d in inventory.of_resource("nvidia.com/gpu")]
    free = set(gpus) - {"0000:57:00.0"}  # one GPU busy in the second PLX tree of NUMA node 0
    choice = choose_devices(inventory, {"nvidia.com/gpu": 2}, {"nvidia.com/gpu": free})
    assert choice.ids["nvidia.com/gpu"] == ("0000:59:00.0", "0000:5c:00.0")
    choice = choose_devices(inventory, {"nvidia.com/gpu": 4}, {"nvidia.com/gpu": free})
    assert choice.ids["nvidia.com/gpu"] == ("0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0")


def gpu(i: str, numa: int | None, switch: str | None = None) -> NodeDevice:
    return NodeDevice(i, "nvidia.com/gpu", GPU_KIND, numa, switch)


def nic(i: str, numa: int | None, switch: str | None = None) -> NodeDevice:
    return NodeDevice(i, "rdma/hca", IB_KIND, numa, switch)


def test_the_tightest_switch_and_numa_node_are_taken() -> None:
    inventory = DeviceInventory([
        gpu("a0", 0, "A"), gpu("a1", 0, "A"), gpu("a2", 0, "A"), gpu("a3", 0, "A"),
        gpu("b0", 0, "B"), gpu("b1", 0, "B"),
        gpu("c0", 1, "C"), gpu("c1", 1, "C"), gpu("c2", 1, "C"),
        gpu("l0", 1), gpu("l1", 1),
    ])
    ask = {"nvidia.com/gpu": 2}
    assert choose_devices(inventory, ask).ids["nvidia.com/gpu"] == ("b0", "b1")  # switch B fits exactly
    assert choose_devices(inventory, {"nvidia.com/gpu": 3}).ids["nvidia.com/gpu"] == ("c0", "c1", "c2")
    # One GPU: a device on a root port leaves every switch whole.
    assert choose_devices(inventory, {"nvidia.com/gpu": 1}).ids["nvidia.com/gpu"] == ("l0",)
    # Five: NUMA node 1 would fit exactly but spans three places (switch C, two root ports);
    # locality comes first, so two switches of NUMA node 0.
    assert choose_devices(inventory, {"nvidia.com/gpu": 5}).ids["nvidia.com/gpu"] == ("a0", "a1", "a2", "a3", "b0")
    six = choose_devices(inventory, {"nvidia.com/gpu": 6})
    assert (six.level, six.numa_nodes) == ("numa", {0})
    # Seven cannot stay on one NUMA node: the smaller node is taken whole, the rest packed on the
    # other (switch B fits the remaining two exactly, switch A stays whole).
    seven = choose_devices(inventory, {"nvidia.com/gpu": 7})
    assert seven.level == "node"
    assert seven.ids["nvidia.com/gpu"] == ("b0", "b1", "c0", "c1", "c2", "l0", "l1")


def test_ties_go_to_the_lowest_ids() -> None:
    inventory = DeviceInventory([gpu("g0", 0, "S0"), gpu("g1", 0, "S0"), gpu("g2", 1, "S1"), gpu("g3", 1, "S1")])
    assert choose_devices(inventory, {"nvidia.com/gpu": 2}).ids["nvidia.com/gpu"] == ("g0", "g1")
    assert choose_devices(inventory, {"nvidia.com/gpu": 2}, numa_nodes=[1]).ids["nvidia.com/gpu"] == ("g2", "g3")


def test_joint_prefers_a_nic_under_the_gpus_switch_then_on_their_numa_node() -> None:
    inventory = DeviceInventory([
        gpu("g0", 0, "S0"), gpu("g1", 0, "S0"), nic("n0", 0),
        gpu("g2", 0, "S1"), gpu("g3", 0, "S1"), nic("n1", 0, "S1"),
        gpu("g4", 1), nic("n2", 1),
    ])
    ask = {"nvidia.com/gpu": 2, "rdma/hca": 1}
    choice = choose_devices(inventory, ask)
    assert (dict(choice.ids), choice.level) == ({"nvidia.com/gpu": ("g2", "g3"), "rdma/hca": ("n1",)}, "pcie")
    busy = {"nvidia.com/gpu": ["g0", "g1", "g4"], "rdma/hca": ["n0", "n1", "n2"]}
    choice = choose_devices(inventory, ask, busy | {"rdma/hca": ["n0", "n2"]})
    assert (dict(choice.ids), choice.level) == ({"nvidia.com/gpu": ("g0", "g1"), "rdma/hca": ("n0",)}, "numa")
    # A NIC of another type than the scope groups is placed on its own.
    choice = choose_devices(inventory, ask, scope=DeviceScope("pcie", True, ("gpu",)))
    assert choice.joint == ("nvidia.com/gpu",) and choice.level == "pcie"
    assert choice.ids["nvidia.com/gpu"] == ("g0", "g1")


def test_nothing_requested_and_zero_counts() -> None:
    inventory = DeviceInventory([gpu("g0", 0)])
    empty = choose_devices(inventory, {})
    assert empty.ok and empty.ids == {} and empty.level is None and empty.numa_nodes == frozenset()
    zero = choose_devices(inventory, {"nvidia.com/gpu": 0, "example.com/none": 0})
    assert zero.ok and zero.ids == {}


# ---- refusals and bad input ----------------------------------------------------------------------


def test_refusals_say_why_and_choose_nothing() -> None:
    inventory = DeviceInventory([gpu("g0", 0, "S"), gpu("g1", 0, "S"), gpu("g2", 1), nic("n0", 1)])
    cases = [
        ({"nvidia.com/gpu": -1}, {}, "nvidia.com/gpu: a device count cannot be negative (-1)"),
        ({"nvidia.com/gpu": 1, "amd.com/gpu": 1}, {}, "the node has no amd.com/gpu devices"),
        ({"nvidia.com/gpu": 3}, {"numa_nodes": [0]}, "2 free nvidia.com/gpu on NUMA node 0, 3 requested"),
        ({"nvidia.com/gpu": 2}, {"numa_nodes": []}, "0 free nvidia.com/gpu on no NUMA node, 2 requested"),
        ({"nvidia.com/gpu": 2}, {"free": {"nvidia.com/gpu": ["g0"]}}, "1 free nvidia.com/gpu, 2 requested"),
        ({"nvidia.com/gpu": 2, "rdma/hca": 1}, {"scope": DeviceScope("numa", True)},
         "no 2 nvidia.com/gpu with a free rdma/hca on the same NUMA node"),
        ({"nvidia.com/gpu": 2}, {"numa_nodes": [1, 0], "scope": DeviceScope("pcie", True), "free": {
            "nvidia.com/gpu": ["g0", "g2"]}}, "no 2 free nvidia.com/gpu under one PCIe switch on NUMA nodes 0,1"),
        ({"nvidia.com/gpu": 3}, {"scope": DeviceScope("numa", True)}, "no 3 free nvidia.com/gpu on one NUMA node"),
    ]
    for request, kwargs, reason in cases:
        free = kwargs.pop("free", None)
        choice = choose_devices(inventory, request, free, **kwargs)
        assert (choice.ok, choice.reason, dict(choice.ids), choice.level) == (False, reason, {}, None)


@pytest.mark.parametrize(("call", "field"), [
    (lambda inv: choose_devices(inv, {"nvidia.com/gpu": 1.5}), "request[nvidia.com/gpu]"),
    (lambda inv: choose_devices(inv, {"nvidia.com/gpu": True}), "request[nvidia.com/gpu]"),
    (lambda inv: choose_devices(inv, ["nvidia.com/gpu"]), "request"),
    (lambda inv: choose_devices(inv, {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": ["g9"]}), "free[nvidia.com/gpu]"),
    (lambda inv: choose_devices(inv, {"nvidia.com/gpu": 1}, {"rdma/hca": ["g0"]}), "free[rdma/hca]"),
    (lambda inv: choose_devices(inv, {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": "g0"}), "free[nvidia.com/gpu]"),
    (lambda inv: choose_devices(inv, {"nvidia.com/gpu": 1}, numa_nodes=[-1]), "numa_nodes"),
    (lambda inv: choose_devices(inv, {"nvidia.com/gpu": 1}, numa_nodes="0"), "numa_nodes"),
    (lambda inv: choose_devices(inv, {"nvidia.com/gpu": 1}, scope=DeviceScope("socket", True)), "scope"),
    (lambda inv: choose_devices(inv, {"nvidia.com/gpu": 1}, scope=DeviceScope("pcie", True, ("tpu",))),
     "scope.device_types"),
])
def test_malformed_arguments_raise_input_error(call, field: str) -> None:
    inventory = DeviceInventory([gpu("g0", 0), nic("n0", 0)])
    with pytest.raises(InputError) as info:
        call(inventory)
    assert info.value.field == field


# ---- properties on synthetic nodes ---------------------------------------------------------------


@st.composite
def nodes(draw) -> tuple[DeviceInventory, dict[str, list[str]], frozenset[int] | None]:
    """A node of 1-3 NUMA nodes, switches holding GPUs and NICs, devices on root ports; free ids; a NUMA set."""
    numa_count = draw(st.integers(1, 3))
    devices = []
    for s in range(draw(st.integers(0, 3))):
        numa = draw(st.integers(0, numa_count - 1))
        devices += [gpu(f"g{s}{i}", numa, f"S{s}") for i in range(draw(st.integers(0, 3)))]
        devices += [nic(f"n{s}{i}", numa, f"S{s}") for i in range(draw(st.integers(0, 2)))]
    for numa in range(numa_count):
        devices += [gpu(f"gl{numa}{i}", numa) for i in range(draw(st.integers(0, 2)))]
        devices += [nic(f"nl{numa}{i}", numa) for i in range(draw(st.integers(0, 1)))]
    if draw(st.booleans()):
        devices.append(gpu("gx", None))  # a GPU whose NUMA node is unknown
    devices = draw(st.permutations(devices))
    inventory = DeviceInventory([*devices, gpu("g-last", 0), nic("n-last", numa_count - 1)])
    free = {r: [d.id for d in inventory.of_resource(r) if draw(st.booleans()) or draw(st.booleans())]
            for r in inventory.resources}
    allowed = draw(st.none() | st.frozensets(st.integers(0, numa_count - 1), min_size=1))
    return inventory, free, allowed


scopes = st.none() | st.builds(
    DeviceScope, st.sampled_from(["pcie", "numa", "node"]), st.booleans(),
    st.sampled_from([(), ("gpu", "rdma"), ("rdma", "gpu")]))


def reference_level(chosen: dict[str, list[NodeDevice]]) -> str:
    """The level of a choice, restated from the documented semantics."""
    groups = [devs for devs in chosen.values() if devs]
    if len(groups) == 1:
        devs = groups[0]
        if len(devs) == 1 or (len({d.switch for d in devs}) == 1 and devs[0].switch is not None):
            return "pcie"
        return "numa" if len({d.numa_id for d in devs}) == 1 and devs[0].numa_id is not None else "node"
    for attr, level in (("switch", "pcie"), ("numa_id", "numa")):
        sets = [{getattr(d, attr) for d in devs} for devs in groups]
        if None not in sets[0] and all(s == sets[0] for s in sets):
            return level
    return "node"


@settings(max_examples=250, deadline=None)
@given(nodes(), st.integers(0, 4), st.integers(0, 3), scopes)
def test_properties(node, gpus: int, nics: int, scope: DeviceScope | None) -> None:
    inventory, free, allowed = node
    request = {"nvidia.com/gpu": gpus, "rdma/hca": nics}
    choice = choose_devices(inventory, request, free, numa_nodes=allowed, scope=scope)
    again = choose_devices(inventory, request, {r: list(reversed(ids)) for r, ids in free.items()},
                           numa_nodes=allowed, scope=scope)
    assert again == choice  # deterministic, whatever order the free ids come in

    if gpus == 0 and nics == 0:
        assert choice.ok and choice.ids == {} and choice.level is None
        return
    pools = {r: [d for d in inventory.of_resource(r) if d.id in free[r]
                 and (allowed is None or d.numa_id is None or d.numa_id in allowed)] for r in request}
    assume(comb(len(pools["nvidia.com/gpu"]), gpus) * comb(len(pools["rdma/hca"]), nics) <= 3000)
    levels = {reference_level({"nvidia.com/gpu": list(g), "rdma/hca": list(n)})
              for g in combinations(pools["nvidia.com/gpu"], gpus) for n in combinations(pools["rdma/hca"], nics)}
    best = min(levels, key=RANK.__getitem__) if levels else None
    limit = RANK[scope.scope] if scope is not None and scope.required else RANK["node"]
    if best is None or RANK[best] > limit:
        assert not choice.ok and choice.ids == {} and choice.level is None
        return
    assert choice.ok, choice.reason  # a choice within the scope exists, so one is found
    chosen = {r: [inventory.device(i) for i in ids] for r, ids in choice.ids.items()}
    for resource, devices in chosen.items():
        ids = [d.id for d in devices]
        assert len(ids) == request[resource] and len(set(ids)) == len(ids)
        assert set(ids) <= set(free[resource])
        assert all(d.resource == resource for d in devices)
        assert all(allowed is None or d.numa_id is None or d.numa_id in allowed for d in devices)
    assert choice.level == reference_level(chosen) == best  # the tightest level any choice reaches
    if scope is not None and scope.required and gpus and nics and scope.scope != "node":
        attr = "switch" if scope.scope == "pcie" else "numa_id"
        gpu_places = {getattr(d, attr) for d in chosen["nvidia.com/gpu"]}
        nic_places = {getattr(d, attr) for d in chosen["rdma/hca"]}
        assert gpu_places == nic_places and None not in gpu_places  # no GPU or NIC outside the scope
