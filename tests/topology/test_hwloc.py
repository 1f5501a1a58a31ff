"""read_hwloc_xml on hwloc XML the tests write themselves: both formats, the mapping rules, bad input.

The XML is built with the few helpers below in the shape ``lstopo --of xml`` writes (hwloc's
bitmap syntax, memory children in v2, NUMA parents in v1). Besides the hand-written machines, the
project's shared machine descriptions (``tests.fixtures.sysfs_tree``) are rendered as hwloc v2 XML
so that the hwloc reader is held to the very expectations the sysfs reader is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.sysfs_tree import FIXTURES, GiB, MachineSpec, PCIDeviceSpec
from toposched.errors import InputError
from toposched.topology import CPUSet, DeviceKind, Machine
from toposched.topology.hwloc import read_hwloc_xml

MiB = 1 << 20

# ---- writing hwloc XML ------------------------------------------------------------------------


def hexset(ids: Iterable[int]) -> str:
    """hwloc's bitmap text: 32-bit words, most significant first; inner zero words are left empty."""
    mask = CPUSet(ids).mask
    words = []
    while True:
        words.append(mask & 0xFFFFFFFF)
        mask >>= 32
        if not mask:
            break
    words.reverse()
    last = len(words) - 1
    return ",".join(f"0x{w:08x}" if w or i in (0, last) else "" for i, w in enumerate(words))


def obj(type_: str, *children: str, **attrs: object) -> str:
    """One ``<object>`` element; attributes given as None are left out."""
    text = "".join(f' {k}="{v}"' for k, v in attrs.items() if v is not None)
    return f'<object type="{type_}"{text}>{"".join(children)}</object>'


def sets(cpus: Iterable[int], nodes: Iterable[int], complete: Iterable[int] | None = None) -> dict[str, str]:
    """The cpuset/nodeset attributes of an object (complete_cpuset defaults to cpuset)."""
    cpus = list(cpus)
    nodes = list(nodes)
    return {
        "cpuset": hexset(cpus),
        "complete_cpuset": hexset(cpus if complete is None else complete),
        "nodeset": hexset(nodes),
        "complete_nodeset": hexset(nodes),
    }


def info(name: str, value: str) -> str:
    return f'<info name="{name}" value="{value}"/>'


def page(size: int, count: int) -> str:
    return f'<page_type size="{size}" count="{count}"/>'


def numa_latency(order: list[int], rows: list[list[int]], **attrs: object) -> str:
    attrs = {"type": "NUMANode", "nbobjs": len(order), "kind": 5, "name": "NUMALatency", "indexing": "os", **attrs}
    text = "".join(f' {k}="{v}"' for k, v in attrs.items() if v is not None)
    indexes = " ".join(map(str, order))
    values = " ".join(str(v) for row in rows for v in row)
    return f"<distances2{text}><indexes>{indexes}</indexes><u64values>{values}</u64values></distances2>"


def document(root: str, *after_root: str, version: str | None = "2.0") -> bytes:
    dtd = "hwloc2.dtd" if version else "hwloc.dtd"
    version_attr = f' version="{version}"' if version else ""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "{dtd}">\n'
        f"<topology{version_attr}>\n{root}\n{''.join(after_root)}</topology>\n"
    ).encode()


def pu(cpu: int, node: int) -> str:
    return obj("PU", os_index=cpu, **sets([cpu], [node]))


def core(index: int, cpus: list[int], node: int, complete: list[int] | None = None) -> str:
    return obj("Core", *(pu(c, node) for c in cpus), os_index=index, **sets(cpus, [node], complete))


# ---- a 2-socket SMT machine (v2) with a GPU and a NIC behind PCIe bridges ----------------------


def two_socket_gpu_nic() -> bytes:
    """2 packages x 2 cores x 2 threads (siblings n, n+4), one NUMA node per package.

    Package 0 holds a host bridge with two root ports: a V100 GPU (CUDA and NVML OS devices) and
    a ConnectX-5 Ethernet NIC (``eth0`` + ``mlx5_0``). A BMC VGA hangs off a host bridge attached
    to the Machine itself, so it has no single NUMA node.
    """
    gpu = obj(
        "PCIDev",
        info("PCIVendor", "NVIDIA Corporation"),
        obj("OSDev", info("CUDAGlobalMemorySize", "16777216"), name="cuda0", subtype="CUDA", osdev_type=5),
        obj("OSDev", info("NVIDIAUUID", "GPU-0f2e"), name="nvml0", subtype="NVML", osdev_type=1),
        pci_busid="0000:01:00.0", pci_type="0302 [10de:1db4] [10de:1214] a1", pci_link_speed="15.753846",
    )
    nic = obj(
        "PCIDev",
        obj("OSDev", info("Address", "0c:42:a1:00:00:01"), name="eth0", osdev_type=2),
        obj("OSDev", name="mlx5_0", osdev_type=3),
        pci_busid="0000:02:00.0", pci_type="0200 [15b3:1017] [15b3:0020] 00",
    )
    host0 = obj(
        "Bridge",
        obj("Bridge", gpu, bridge_type="1-1", depth=1, bridge_pci="0000:[01-01]", pci_busid="0000:00:03.0",
            pci_type="0604 [8086:2030] [0000:0000] 04"),
        obj("Bridge", nic, bridge_type="1-1", depth=1, bridge_pci="0000:[02-02]", pci_busid="0000:00:1c.0",
            pci_type="0604 [8086:a190] [0000:0000] f0"),
        bridge_type="0-1", depth=0, bridge_pci="0000:[00-02]",
    )
    bmc = obj(
        "Bridge",
        obj("PCIDev", pci_busid="0000:05:00.0", pci_type="0300 [102b:0536] [15d9:1b95] 04"),
        bridge_type="0-1", depth=0, bridge_pci="0000:[05-05]",
    )

    def package(p: int) -> str:
        cpus = [p * 2, p * 2 + 1, p * 2 + 4, p * 2 + 5]
        numa = obj("NUMANode", page(4096, 2097152), page(2 * MiB, 1024), page(GiB, 4),
                   os_index=p, local_memory=8 * GiB, **sets(cpus, [p]))
        l3 = obj("L3Cache", core(0, [p * 2, p * 2 + 4], p), core(1, [p * 2 + 1, p * 2 + 5], p),
                 cache_size=32 * MiB, depth=3, cache_type=0, **sets(cpus, [p]))
        return obj("Package", numa, l3, *([host0] if p == 0 else []), os_index=p, **sets(cpus, [p]))

    root = obj("Machine", info("OSName", "Linux"), info("HostName", "gpu-smt"), package(0), package(1), bmc,
               os_index=0, **sets(range(8), [0, 1]))
    kind = '<cpukind cpuset="0x000000ff"><info name="FrequencyMaxMHz" value="3900"/></cpukind>'
    return document(root, numa_latency([0, 1], [[10, 21], [21, 10]]), kind)


@pytest.fixture
def smt_file(tmp_path: Path) -> Path:
    path = tmp_path / "two-socket.xml"
    path.write_bytes(two_socket_gpu_nic())
    return path


def test_v2_two_socket_machine(smt_file: Path) -> None:
    m = read_hwloc_xml(smt_file)
    assert m.hostname == "gpu-smt"
    assert m.attributes["hwloc.xml_version"] == "2"
    assert [(s.id, str(s.cpus)) for s in m.sockets] == [(0, "0-1,4-5"), (1, "2-3,6-7")]
    assert [(c.id, str(c.cpus), c.socket_id, c.numa_id) for c in m.cores] == [
        (0, "0,4", 0, 0), (1, "1,5", 0, 0), (2, "2,6", 1, 1), (3, "3,7", 1, 1),
    ]
    assert m.threads_per_core == 2
    assert [str(n.cpus) for n in m.numa_nodes] == ["0-1,4-5", "2-3,6-7"]
    assert [n.memory_bytes for n in m.numa_nodes] == [8 * GiB, 8 * GiB]
    assert dict(m.numa(0).hugepages) == {2 * MiB: 1024, GiB: 4}  # the 4 KiB base page is not a hugepage
    assert m.distance(0, 1) == 21 and m.distance(1, 1) == 10
    assert {c.cache_id for c in m.cpus if c.socket_id == 1} == {2}  # L3 id = lowest CPU sharing it
    assert {c.kind for c in m.cpus} == {None}  # one CPU kind: not a hybrid part
    assert {c.die_id for c in m.cpus} == {None}
    assert not m.offline_cpus


def test_v2_devices_locality_path_name_and_memory(smt_file: Path) -> None:
    gpu, nic, bmc = read_hwloc_xml(smt_file).devices
    assert (gpu.address, gpu.kind, gpu.numa_id) == ("0000:01:00.0", DeviceKind.GPU, 0)
    assert (gpu.vendor_id, gpu.device_id, gpu.class_code) == (0x10DE, 0x1DB4, 0x030200)
    assert gpu.pcie_path == ("pci0000:00", "0000:00:03.0")
    assert gpu.name == "cuda0"  # CUDA's index before NVML's
    assert gpu.memory_bytes == 16 * GiB  # CUDAGlobalMemorySize is in KiB
    assert gpu.attributes["uuid"] == "GPU-0f2e"  # from the NVML OS device
    assert gpu.attributes["link_speed_gbps"] == "15.7538"
    assert gpu.attributes["os_devices"] == "cuda0,nvml0"
    assert (nic.kind, nic.numa_id, nic.name) == (DeviceKind.NIC, 0, "mlx5_0")  # the RDMA name wins
    assert nic.pcie_path == ("pci0000:00", "0000:00:1c.0")
    assert nic.attributes["os_devices"] == "mlx5_0,eth0"
    # Attached to the Machine, whose nodeset holds both NUMA nodes: no single NUMA node.
    assert (bmc.kind, bmc.numa_id, bmc.pcie_path, bmc.name) == (DeviceKind.OTHER, None, ("pci0000:05",), None)


def test_path_and_bytes_give_the_same_machine(smt_file: Path) -> None:
    a, b, c = read_hwloc_xml(smt_file), read_hwloc_xml(str(smt_file)), read_hwloc_xml(smt_file.read_bytes())
    assert a.to_dict() == b.to_dict() == c.to_dict()


# ---- a v1 machine: NUMA nodes as parents, a CPU-less node, offline PUs -------------------------


def v1_machine(*, distances: str | None = None) -> bytes:
    """hwloc 1.x style: Package > NUMANode > caches > cores; CPUs 0-3 and 32-35 (two words).

    PU 33 is present but not in its online_cpuset, PU 35 has no object at all: both offline.
    NUMA node 2 is an MCDRAM-like memory-only node hanging off the Machine.
    """

    def v1pu(cpu: int, node: int, online: bool = True) -> str:
        mask = hexset([cpu])
        return obj("PU", os_index=cpu, cpuset=mask, complete_cpuset=mask, online_cpuset=mask if online else "0x0",
                   nodeset=hexset([node]), complete_nodeset=hexset([node]))

    def cache(depth: int, *children: str, cpus: list[int], node: int, cache_type: int = 0) -> str:
        return obj("Cache", *children, depth=depth, cache_type=cache_type, cache_size=MiB, **sets(cpus, [node]))

    def package(p: int) -> str:
        first, second = [p * 2, p * 2 + 32], [p * 2 + 1] + ([33] if p == 0 else [])
        cpus = first + second
        cores = [
            cache(2, cache(1, obj("Core", *(v1pu(c, p, c != 33) for c in members), os_index=i,
                                  **sets(members, [p])), cpus=members, node=p, cache_type=1),
                  cpus=members, node=p)
            for i, members in enumerate((first, second))
        ]
        bridge = ""
        if p == 0:
            hca = obj("PCIDev", obj("OSDev", name="ib0", osdev_type=2), obj("OSDev", name="mlx5_0", osdev_type=3),
                      pci_busid="0000:03:00.0", pci_type="0207 [15b3:1013] [15b3:0003] 00")
            bridge = obj("Bridge", hca, bridge_type="0-1", depth=0, bridge_pci="0000:[03-03]")
        node = obj("NUMANode", page(4096, 1048576), page(2 * MiB, 16), cache(3, *cores, cpus=cpus, node=p), bridge,
                   os_index=p, local_memory=4 * GiB, **sets(cpus, [p]))
        return obj("Package", node, os_index=p, **sets(cpus, [p]))

    mcdram = obj("NUMANode", info("Type", "MCDRAM"), page(4096, 262144), os_index=2, local_memory=GiB,
                 **sets([], [2]))
    if distances is None:
        lat = [1.0, 2.1, 3.1, 2.1, 1.0, 3.1, 3.1, 3.1, 1.0]
        distances = '<distances nbobjs="3" relative_depth="1" latency_base="10.000000">' + "".join(
            f'<latency value="{v:f}"/>' for v in lat) + "</distances>"
    everything = [0, 1, 2, 3, 32, 33, 34, 35]
    root = obj("Machine", info("HostName", "v1host"), distances, package(0), package(1), mcdram,
               online_cpuset=hexset([0, 1, 2, 3, 32, 34]), **sets([0, 1, 2, 3, 32, 33, 34], [0, 1, 2], everything))
    return document(root, version=None)


def test_v1_numa_parents_cpuless_node_and_offline_cpus() -> None:
    m = read_hwloc_xml(v1_machine())
    assert m.attributes["hwloc.xml_version"] == "1"
    assert m.hostname == "v1host"
    assert str(m.online) == "0-3,32,34"
    assert str(m.offline_cpus) == "33,35"
    assert [(c.id, str(c.cpus)) for c in m.cores] == [(0, "0,32"), (1, "1"), (2, "2,34"), (3, "3")]
    assert [(n.id, str(n.cpus), n.memory_bytes) for n in m.numa_nodes] == [
        (0, "0-1,32", 4 * GiB), (1, "2-3,34", 4 * GiB), (2, "", GiB),
    ]
    assert m.numa(2).cpu_less and m.numa(2).attributes["subtype"] == "MCDRAM"
    assert dict(m.numa(0).hugepages) == {2 * MiB: 16}
    # latency_base 10 x relative latencies 1.0 / 2.1 / 3.1
    assert dict(m.numa(0).distances) == {0: 10, 1: 21, 2: 31}
    assert {c.cache_id for c in m.cpus if c.numa_id == 1} == {2}
    (hca,) = m.devices
    assert (hca.kind, hca.numa_id, hca.name, hca.pcie_path) == (DeviceKind.INFINIBAND, 0, "mlx5_0", ("pci0000:03",))


def test_v1_relative_latencies_are_scaled_to_local_10() -> None:
    lat = [1.0, 2.0, 4.0, 2.0, 1.0, 4.0, 4.0, 4.0, 1.5]
    distances = '<distances nbobjs="3" relative_depth="1" latency_base="1.000000">' + "".join(
        f'<latency value="{v:f}"/>' for v in lat) + "</distances>"
    m = read_hwloc_xml(v1_machine(distances=distances))
    assert [list(n.distances.values()) for n in m.numa_nodes] == [[10, 20, 40], [20, 10, 40], [40, 40, 15]]


def test_v1_matrix_of_another_size_is_not_numa_distances() -> None:
    # hwloc only takes a v1 matrix as NUMA distances when it has one row per NUMA node.
    distances = '<distances nbobjs="2" relative_depth="1" latency_base="10.0">' + (
        '<latency value="1.0"/><latency value="2.0"/>' * 2) + "</distances>"
    m = read_hwloc_xml(v1_machine(distances=distances))
    assert all(not n.distances for n in m.numa_nodes) and m.distance(0, 1) == 20


def test_v1_without_numa_nodes_has_one_node_with_everything() -> None:
    cpus = [0, 1]
    root = obj("Machine", page(4096, 1000), page(2 * MiB, 8),
               obj("Package", core(0, [0], 0), core(1, [1], 0), os_index=0, cpuset=hexset(cpus),
                   complete_cpuset=hexset(cpus)),
               os_index=0, local_memory=4096000, cpuset=hexset(cpus), complete_cpuset=hexset(cpus))
    m = read_hwloc_xml(document(root, version=None))
    (node,) = m.numa_nodes
    assert (node.id, str(node.cpus), node.memory_bytes, dict(node.hugepages)) == (0, "0-1", 4096000, {2 * MiB: 8})


# ---- v2 placement rules ------------------------------------------------------------------------


def v2_one_package(numa_parts: list[str], cores: str, *after_root: str, extra_root: str = "",
                   cpus: list[int] | None = None) -> bytes:
    cpus = list(range(4)) if cpus is None else cpus
    package = obj("Package", *numa_parts, cores, os_index=0, **sets(cpus, [0, 1, 2]))
    return document(obj("Machine", package, extra_root, os_index=0, **sets(cpus, [0, 1, 2])), *after_root)


def test_offline_pus_in_complete_cpuset_only() -> None:
    numa = obj("NUMANode", os_index=0, local_memory=GiB, **sets([0, 1, 3], [0], range(4)))
    cores = core(0, [0, 1], 0) + core(1, [3], 0, complete=[2, 3])
    root = obj("Machine", obj("Package", numa, cores, os_index=0, **sets([0, 1, 3], [0], range(4))),
               os_index=0, **sets([0, 1, 3], [0], range(4)))
    m = read_hwloc_xml(document(root))
    assert str(m.online) == "0-1,3" and str(m.offline_cpus) == "2"
    assert [str(c.cpus) for c in m.cores] == ["0-1", "3"]
    assert [c.id for c in m.cores] == [0, 3]  # a core's id is its lowest online PU


def test_memory_only_node_beside_dram_gets_no_cpus() -> None:
    # v2 gives both nodes attached at one place the same cpuset; the DRAM node holds the CPUs.
    hbm = obj("NUMANode", os_index=1, subtype="HBM", local_memory=16 * GiB, **sets(range(4), [1]))
    ddr = obj("NUMANode", os_index=0, local_memory=64 * GiB, **sets(range(4), [0]))
    cxl = obj("NUMANode", os_index=2, subtype="CXL-DRAM", local_memory=GiB, **sets(range(4), [2]))
    data = v2_one_package([hbm, ddr], core(0, [0, 1], 0) + core(1, [2, 3], 0), extra_root=cxl)
    m = read_hwloc_xml(data)
    assert [(n.id, str(n.cpus)) for n in m.numa_nodes] == [(0, "0-3"), (1, ""), (2, "")]
    assert dict(m.numa(1).attributes) == {"subtype": "HBM", "local_cpus": "0-3"}
    assert m.numa(2).attributes["local_cpus"] == "0-3"  # attached at the Machine: near every CPU


def test_numa_node_behind_a_memory_side_cache() -> None:
    numa = obj("MemCache", obj("NUMANode", os_index=0, local_memory=GiB, **sets(range(4), [0])),
               cache_size=GiB, depth=1, cache_type=0, **sets(range(4), [0]))
    package = obj("Package", numa, core(0, [0, 1], 0), core(1, [2, 3], 0), os_index=0, **sets(range(4), [0]))
    m = read_hwloc_xml(document(obj("Machine", package, os_index=0, **sets(range(4), [0]))))
    assert str(m.numa(0).cpus) == "0-3"


def test_plain_nodes_at_one_place_go_to_the_lowest_os_index() -> None:
    a = obj("NUMANode", os_index=3, local_memory=GiB, **sets(range(4), [3]))
    b = obj("NUMANode", os_index=1, local_memory=GiB, **sets(range(4), [1]))
    package = obj("Package", a, b, core(0, [0, 1], 1), core(1, [2, 3], 1), os_index=0, **sets(range(4), [1, 3]))
    m = read_hwloc_xml(document(obj("Machine", package, os_index=0, **sets(range(4), [1, 3]))))
    assert [(n.id, str(n.cpus)) for n in m.numa_nodes] == [(1, "0-3"), (3, "")]


def sub_numa_package(group_attrs: dict[str, object], cluster_groups: bool = False) -> bytes:
    """One package, two NUMA nodes each under a Group (sub-NUMA clusters), 2 CPUs each."""
    parts = []
    for n in (0, 1):
        cpus = [2 * n, 2 * n + 1]
        body = core(0, cpus, n)
        if cluster_groups:  # a CPU cluster inside the NUMA group keeps the group's memory: not a die
            body = obj("Group", body, kind=222, **sets(cpus, [n]))
        numa = obj("NUMANode", os_index=n, local_memory=GiB, **sets(cpus, [n]))
        parts.append(obj("Group", numa, body, **group_attrs, **sets(cpus, [n])))
    package = obj("Package", *parts, os_index=0, **sets(range(4), [0, 1]))
    return document(obj("Machine", package, os_index=0, **sets(range(4), [0, 1])))


@pytest.mark.parametrize(
    "group_attrs",
    [{"kind": 1001, "subkind": 0}, {"subtype": "Die"}, {"kind": 104}],
    ids=["numa-group", "die-subtype", "intel-die-kind"],
)
def test_dies_are_die_objects_or_groups_splitting_a_package(group_attrs: dict[str, object]) -> None:
    m = read_hwloc_xml(sub_numa_package(group_attrs, cluster_groups=True))
    assert [(c.id, c.die_id) for c in m.cpus] == [(0, 0), (1, 0), (2, 1), (3, 1)]
    assert m.sockets[0].die_ids == (0, 1)


def test_a_group_keeping_all_of_the_package_memory_is_not_a_die() -> None:
    cluster = obj("Group", core(0, [0, 1], 0), kind=222, **sets([0, 1], [0]))
    numa = obj("NUMANode", os_index=0, local_memory=GiB, **sets(range(4), [0]))
    package = obj("Package", numa, cluster, core(1, [2, 3], 0), os_index=0, **sets(range(4), [0]))
    m = read_hwloc_xml(document(obj("Machine", package, os_index=0, **sets(range(4), [0]))))
    assert {c.die_id for c in m.cpus} == {None}


def hybrid(kinds: str) -> bytes:
    numa = obj("NUMANode", os_index=0, local_memory=GiB, **sets(range(4), [0]))
    cores = core(0, [0, 1], 0) + core(1, [2], 0) + core(2, [3], 0)
    return v2_one_package([numa], cores, kinds)


@pytest.mark.parametrize(
    "kinds",
    [
        '<cpukind cpuset="0x0000000c" forced_efficiency="0"/><cpukind cpuset="0x00000003" forced_efficiency="1"/>',
        '<cpukind cpuset="0x00000003"><info name="CoreType" value="IntelCore"/></cpukind>'
        '<cpukind cpuset="0x0000000c"><info name="CoreType" value="IntelAtom"/></cpukind>',
        '<cpukind cpuset="0x0000000c"><info name="FrequencyMaxMHz" value="3900"/></cpukind>'
        '<cpukind cpuset="0x00000003"><info name="FrequencyMaxMHz" value="5200"/></cpukind>',
    ],
    ids=["forced-efficiency", "intel-core-type", "max-frequency"],
)
def test_cpu_kinds_of_a_hybrid_part(kinds: str) -> None:
    m = read_hwloc_xml(hybrid(kinds))
    assert [c.kind for c in m.cpus] == ["performance", "performance", "efficiency", "efficiency"]


def test_cpu_kinds_that_cannot_be_ranked_are_unknown() -> None:
    kinds = '<cpukind cpuset="0x00000003"/><cpukind cpuset="0x0000000c"/>'
    assert {c.kind for c in read_hwloc_xml(hybrid(kinds)).cpus} == {None}


# ---- distances --------------------------------------------------------------------------------


def two_nodes(*after_root: str) -> bytes:
    parts = [obj("Package", obj("NUMANode", os_index=n, local_memory=GiB, **sets([n], [n])), core(0, [n], n),
                 os_index=n, **sets([n], [n])) for n in (0, 1)]
    return document(obj("Machine", *parts, os_index=0, **sets([0, 1], [0, 1])), *after_root)


def test_latencies_in_other_units_are_scaled_to_local_10() -> None:
    m = read_hwloc_xml(two_nodes(numa_latency([1, 0], [[100, 212], [212, 100]])))
    assert dict(m.numa(0).distances) == {0: 10, 1: 21}


def test_which_distance_matrix_is_used() -> None:
    bandwidth = numa_latency([0, 1], [[9000, 100], [100, 9000]], kind=9, name="NUMABandwidth")
    gp_indexed = numa_latency([0, 1], [[10, 99], [99, 10]], indexing="gp", name=None)
    package = '<distances2 type="Package" nbobjs="2" kind="5" indexing="gp"><indexes>3 7</indexes>' \
              "<u64values>1 2 2 1</u64values></distances2>"
    latency = numa_latency([0, 1], [[10, 32], [32, 10]])
    m = read_hwloc_xml(two_nodes(bandwidth, gp_indexed, package, latency))
    assert m.distance(0, 1) == 32
    assert all(not n.distances for n in read_hwloc_xml(two_nodes(bandwidth, gp_indexed)).numa_nodes)


def test_values_may_come_in_several_chunks() -> None:
    matrix = ('<distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="os">'
              "<indexes>0 1</indexes><u64values>10 20 </u64values><u64values>20 10 </u64values></distances2>")
    assert read_hwloc_xml(two_nodes(matrix)).distance(1, 0) == 20


# ---- the project's shared machine descriptions, rendered as hwloc v2 ---------------------------

_OSDEV_TYPES = {"drm": 1, "net": 2, "infiniband": 3, "nvme": 0}


def _pcidev(dev: PCIDeviceSpec) -> str:
    children = []
    if dev.name is not None:
        children.append(obj("OSDev", name=dev.name[1], osdev_type=_OSDEV_TYPES[dev.name[0]]))
    cls = dev.class_code
    # the hwloc 3 form with the programming interface, so the full 24-bit class comes through
    pci_type = f"{cls >> 8:04x} [{dev.vendor_id:04x}:{dev.device_id:04x}] [0000:0000] 00 {cls & 0xFF:02x}"
    return obj("PCIDev", *children, pci_busid=dev.address, pci_type=pci_type)


def _io_subtree(devs: list[PCIDeviceSpec], level: int) -> str:
    parts: list[str] = []
    below: dict[str, list[PCIDeviceSpec]] = {}
    for dev in devs:
        if len(dev.bridges) == level:
            parts.append(_pcidev(dev))
        else:
            port = dev.bridges[level]
            if port not in below:
                below[port] = []
                parts.append(port)
            below[port].append(dev)
    return "".join(
        obj("Bridge", _io_subtree(below[p], level + 1), bridge_type="1-1", depth=level + 1, pci_busid=p)
        if p in below else p
        for p in parts
    )


def _host_bridges(devs: list[PCIDeviceSpec]) -> str:
    by_root: dict[str, list[PCIDeviceSpec]] = {}
    for dev in devs:
        by_root.setdefault(dev.root_complex, []).append(dev)
    out = []
    for rc, members in by_root.items():
        domain, bus = rc[3:].split(":")
        subtree = _io_subtree(members, 0)
        out.append(obj("Bridge", subtree, bridge_type="0-1", depth=0, bridge_pci=f"{domain}:[{bus}-ff]"))
    return "".join(out)


def render(spec: MachineSpec) -> bytes:
    """The spec as hwloc v2 XML: NUMA nodes under their Package (or a Group per NUMA node when a
    package has several), an L3 per NUMA node or per package, devices under their NUMA node's
    object or, without affinity, under the Machine."""
    online = spec.online_cpus
    devices: dict[int | None, list[PCIDeviceSpec]] = {}
    for dev in spec.devices:
        devices.setdefault(dev.numa_node if dev.write_numa_node else None, []).append(dev)

    def attrs(cpus: CPUSet, nodes: Iterable[int]) -> dict[str, str]:
        return sets(cpus & online, nodes, cpus)

    def numa_node(n: int, cpus: CPUSet) -> str:
        pages = [page(4096, spec.memory_of(n) // 4096)] + [page(s, c) for s, c in spec.hugepages.items()]
        return obj("NUMANode", *pages, os_index=n, local_memory=spec.memory_of(n), **attrs(cpus, [n]))

    def cores(n: int) -> list[str]:
        out = []
        for i in range(spec.cores_per_numa):
            index = n * spec.cores_per_numa + i
            threads = spec.siblings(index)
            if threads & online:
                pus = [obj("PU", os_index=c, **sets([c], [n])) for c in threads & online]
                out.append(obj("Core", *pus, os_index=index % (spec.numa_per_socket * spec.cores_per_numa),
                               **attrs(threads, [n])))
        return out

    packages = []
    for s in range(spec.sockets):
        nodes = [s * spec.numa_per_socket + k for k in range(spec.numa_per_socket)]
        all_cpus = CPUSet(c for n in nodes for c in spec.cpus_of_numa(n, online_only=False))
        inner = []
        for n in nodes:
            cpus = spec.cpus_of_numa(n, online_only=False)
            body = cores(n)
            if not spec.llc_per_socket:
                body = [obj("L3Cache", *body, depth=3, cache_type=0, cache_size=MiB, **attrs(cpus, [n]))]
            content = [numa_node(n, cpus), *body, _host_bridges(devices.get(n, []))]
            if spec.numa_per_socket == 1:
                inner += content
            else:
                inner.append(obj("Group", *content, kind=1001, subkind=0, **attrs(cpus, [n])))
        if spec.llc_per_socket:
            inner = [obj("L3Cache", *inner, depth=3, cache_type=0, cache_size=MiB, **attrs(all_cpus, nodes))]
        packages.append(obj("Package", *inner, os_index=s, **attrs(all_cpus, nodes)))
    cpuless = [numa_node(n, spec.all_cpus) for n in spec.cpuless_nodes]
    root_infos = [info("HostName", spec.hostname)] if spec.hostname else []
    root = obj("Machine", *root_infos, *cpuless, *packages, _host_bridges(devices.get(None, [])),
               os_index=0, **attrs(spec.all_cpus, spec.numa_ids))
    ids = list(spec.numa_ids)
    after = [numa_latency(ids, [[spec.distance(a, b) for b in ids] for a in ids])]
    if spec.efficiency_cpus:
        after.append(f'<cpukind cpuset="{hexset(spec.efficiency_cpus)}" forced_efficiency="0"/>')
        after.append(f'<cpukind cpuset="{hexset(spec.all_cpus - CPUSet(spec.efficiency_cpus))}" '
                     'forced_efficiency="1"/>')
    return document(root, *after)


def assert_matches_spec(m: Machine, spec: MachineSpec) -> None:
    expected = Machine.from_cpu_table(spec.cpu_rows())
    assert [(c.id, c.core_id, c.socket_id, c.numa_id) for c in m.cpus] == [
        (c.id, c.core_id, c.socket_id, c.numa_id) for c in expected.cpus
    ]
    assert [c.cache_id for c in m.cpus] == [spec.llc_of(c.id) for c in m.cpus]
    assert m.offline_cpus == spec.all_cpus - spec.online_cpus
    assert m.numa_ids == spec.numa_ids
    for n in m.numa_nodes:
        assert n.cpus == spec.cpus_of_numa(n.id)
        assert n.memory_bytes == spec.memory_of(n.id)
        assert dict(n.hugepages) == dict(spec.hugepages)
        assert dict(n.distances) == {b: spec.distance(n.id, b) for b in spec.numa_ids}
    if spec.numa_per_socket > 1:  # a Group per NUMA node splits the package: dies numbered per package
        assert [c.die_id for c in m.cpus] == [c.numa_id % spec.numa_per_socket for c in m.cpus]
    else:
        assert {c.die_id for c in m.cpus} == {None}
    assert m.hostname == spec.hostname
    assert len(m.devices) == len(spec.devices)
    for dev, want in zip(sorted(m.devices, key=lambda d: d.address), sorted(spec.devices, key=lambda d: d.address)):
        assert dev.address == want.address
        assert dev.numa_id == (want.numa_node if want.write_numa_node else None)
        assert dev.pcie_path == want.pcie_path
        assert (dev.class_code, dev.vendor_id, dev.device_id) == (want.class_code, want.vendor_id, want.device_id)
        assert dev.name == (want.name[1] if want.name else None)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_shared_fixture_machines(name: str) -> None:
    spec = FIXTURES[name]()
    assert_matches_spec(read_hwloc_xml(render(spec)), spec)


@st.composite
def machine_specs(draw: st.DrawFn) -> MachineSpec:
    spec = MachineSpec(
        sockets=draw(st.integers(1, 3)),
        numa_per_socket=draw(st.integers(1, 3)),
        cores_per_numa=draw(st.integers(1, 3)),
        threads_per_core=draw(st.integers(1, 3)),
        llc_per_socket=draw(st.booleans()),
        cpuless_nodes=tuple(range(20, 20 + draw(st.integers(0, 2)))),
        hugepages=draw(st.sampled_from([{}, {2 * MiB: 64}, {2 * MiB: 0, GiB: 2}])),
    )
    # Any CPU may be offline except the first thread of each NUMA node's first core.
    keep = {n * spec.cores_per_numa for n in spec.cpu_numa_ids}
    candidates = sorted(set(spec.all_cpus) - keep)
    offline = draw(st.frozensets(st.sampled_from(candidates))) if candidates else frozenset()
    return replace(spec, offline_cpus=offline)


@settings(max_examples=30, deadline=None)
@given(machine_specs())
def test_any_described_machine_reads_back(spec: MachineSpec) -> None:
    assert_matches_spec(read_hwloc_xml(render(spec)), spec)


# ---- bad input ---------------------------------------------------------------------------------


def error_of(data: bytes, tmp_path: Path, name: str = "bad.xml") -> InputError:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputError) as caught:
        read_hwloc_xml(path)
    assert str(path) in str(caught.value)
    return caught.value


def test_truncated_xml(tmp_path: Path) -> None:
    data = two_socket_gpu_nic()
    err = error_of(data[: len(data) // 2], tmp_path)
    assert "truncated" in str(err) and "line" in str(err)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_a_cut_anywhere_is_one_input_error(data: st.DataObject) -> None:
    xml = two_socket_gpu_nic().rstrip()
    cut = data.draw(st.integers(0, len(xml) - 1))
    with pytest.raises(InputError) as caught:
        read_hwloc_xml(xml[:cut])
    assert str(caught.value).startswith("<hwloc XML bytes>")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "truncated"),
        (b"this is not XML", "malformed"),
        (b'<?xml version="1.0"?><lstopo/>', "<topology>"),
        (b"<topology/>", "no root <object>"),
        (b'<topology version="3.0"><object type="Machine"/></topology>', "not supported"),
        (b'<topology><object type="Package" cpuset="0x1"/></topology>', "not a Machine"),
        (b'<topology version="2.0"><object type="Machine" cpuset="0x1"><object type="Gizmo"/></object></topology>',
         "unknown object type 'Gizmo'"),
        (b'<!DOCTYPE t [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><topology>&b;</topology>', "entity"),
        (b'<!DOCTYPE topology [<!ATTLIST object type CDATA "PU">]><topology/>', "internal subset"),
        ('<?xml version="1.0" encoding="UTF-16"?><topology/>'.encode("utf-16"), "UTF-8"),
    ],
    ids=["empty", "not-xml", "wrong-root", "no-object", "version-3", "root-not-machine", "unknown-type",
         "entities", "internal-dtd", "utf-16"],
)
def test_malformed_documents(data: bytes, words: str, tmp_path: Path) -> None:
    assert words in str(error_of(data, tmp_path))


def test_a_pu_in_two_numa_nodes_v2(tmp_path: Path) -> None:
    # NUMA node 1's cpuset claims PU 1, which sits in package 0 with NUMA node 0.
    parts = []
    for n, claims in ((0, [0, 1]), (1, [1, 2, 3])):
        cpus = [2 * n, 2 * n + 1]
        parts.append(obj("Package", obj("NUMANode", os_index=n, local_memory=GiB, **sets(claims, [n])),
                         core(0, cpus, n), os_index=n, **sets(cpus, [n])))
    err = error_of(document(obj("Machine", *parts, os_index=0, **sets(range(4), [0, 1]))), tmp_path)
    assert "PU 1 appears in NUMA node 0 and NUMA node 1" in str(err)
    assert err.field == "NUMANode P#1.cpuset"


def test_a_pu_in_two_numa_nodes_v1(tmp_path: Path) -> None:
    inner = obj("NUMANode", core(0, [0, 1], 1), os_index=1, local_memory=GiB, **sets([0, 1], [1]))
    outer = obj("NUMANode", inner, os_index=0, local_memory=GiB, **sets([0, 1], [0, 1]))
    err = error_of(document(obj("Machine", outer, os_index=0, **sets([0, 1], [0, 1])), version=None), tmp_path)
    assert "PU 0 is in NUMA node 1 and NUMA node 0" in str(err)


def test_a_pu_under_a_numa_node_that_does_not_list_it(tmp_path: Path) -> None:
    numa = obj("NUMANode", os_index=0, local_memory=GiB, **sets([0], [0]))
    err = error_of(v2_one_package([numa], core(0, [0, 1], 0), cpus=[0, 1]), tmp_path)
    assert "PU 1 sits under NUMA node 0 but its cpuset does not list it" in str(err)


def test_a_pu_without_numa_node(tmp_path: Path) -> None:
    with_node = obj("Package", obj("NUMANode", os_index=0, local_memory=GiB, **sets([0], [0])), core(0, [0], 0),
                    os_index=0, **sets([0], [0]))
    without = obj("Package", core(0, [1], 0), os_index=1, **sets([1], [0]))
    err = error_of(document(obj("Machine", with_node, without, os_index=0, **sets([0, 1], [0]))), tmp_path)
    assert "PU 1 belongs to no NUMA node" in str(err)


def test_a_pu_under_a_numa_node_in_v2(tmp_path: Path) -> None:
    numa = obj("NUMANode", core(0, [0], 0), os_index=0, local_memory=GiB, **sets([0], [0]))
    err = error_of(document(obj("Machine", numa, os_index=0, **sets([0], [0]))), tmp_path)
    assert "a Core cannot be a child of a NUMANode" in str(err)


def one_node(numa_attrs: dict[str, object], *numa_children: str, pu_attrs: dict[str, object] | None = None,
             after: tuple[str, ...] = ()) -> bytes:
    attrs = {"os_index": 0, "local_memory": GiB, **sets([0, 1], [0]), **numa_attrs}
    numa = obj("NUMANode", *numa_children, **{k: v for k, v in attrs.items() if v is not None})
    pus = [obj("PU", **{"os_index": c, **sets([c], [0]), **(pu_attrs or {})}) for c in (0, 1)]
    package = obj("Package", numa, obj("Core", *pus, os_index=0, **sets([0, 1], [0])), os_index=0, **sets([0, 1], [0]))
    return document(obj("Machine", package, os_index=0, **sets([0, 1], [0])), *after)


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        (one_node({"local_memory": -5}), "NUMANode P#0.local_memory", "-5 is negative"),
        (one_node({"local_memory": "lots"}), "NUMANode P#0.local_memory", "'lots' is not an integer"),
        (one_node({}, page(2 * MiB, -1)), "NUMANode P#0.page_type.count", "negative"),
        (one_node({"os_index": None}), "NUMANode.os_index", "is missing"),
        (one_node({"cpuset": "0xzz"}), "NUMANode P#0.cpuset", "not an hwloc bitmap"),
        (one_node({"cpuset": None}), "NUMANode P#0.cpuset", "is missing"),
        (one_node({}, pu_attrs={"os_index": "x"}), "PU P#x.os_index", "not an integer"),
        (one_node({}, pu_attrs={"os_index": 10**9}), "PU P#1000000000.os_index", "beyond the largest CPU id"),
        (one_node({}, after=(numa_latency([0, 1], [[10, 20]]),)), "distances2[name=NUMALatency].u64values",
         "has 2 values, 2x2 expected"),
        (one_node({}, after=(numa_latency([0, 1], [[10, 20], [20, 10]], nbobjs=3),)),
         "distances2[name=NUMALatency].indexes", "has 2 indexes for nbobjs=3"),
    ],
    ids=["negative-memory", "memory-not-a-number", "negative-hugepages", "numa-without-os-index", "bad-bitmap",
         "numa-without-cpuset", "pu-index", "huge-pu-index", "short-matrix", "missing-indexes"],
)
def test_bad_fields_are_named(data: bytes, field: str, words: str, tmp_path: Path) -> None:
    err = error_of(data, tmp_path)
    assert err.field == field and words in str(err)


def test_distances_to_an_unknown_node(tmp_path: Path) -> None:
    err = error_of(two_nodes(numa_latency([0, 7], [[10, 20], [20, 10]])), tmp_path)
    assert "NUMA node 7" in str(err)


def test_distances_listing_a_node_twice(tmp_path: Path) -> None:
    err = error_of(two_nodes(numa_latency([0, 1, 1], [[10, 20, 20], [20, 10, 10], [20, 10, 10]])), tmp_path)
    assert "lists a NUMA node twice" in str(err)


def test_zero_distance(tmp_path: Path) -> None:
    err = error_of(two_nodes(numa_latency([0, 1], [[0, 20], [20, 10]])), tmp_path)
    assert "not positive" in str(err)


@pytest.mark.parametrize(
    ("attrs", "words"),
    [
        ({"pci_busid": "04:00.0", "pci_type": "0200 [8086:1521] [0000:0000] 01"}, "not a PCI address"),
        ({"pci_busid": "0000:04:00.0", "pci_type": "0200 8086 1521"}, "is not 'CCSS"),
        ({"pci_type": "0200 [8086:1521] [0000:0000] 01"}, "None is not a PCI address"),
    ],
)
def test_bad_pci_attributes(attrs: dict[str, str], words: str, tmp_path: Path) -> None:
    dev = obj("PCIDev", **attrs)
    numa = obj("NUMANode", os_index=0, local_memory=GiB, **sets([0, 1], [0]))
    err = error_of(v2_one_package([numa], core(0, [0, 1], 0) + dev, cpus=[0, 1]), tmp_path)
    assert words in str(err)


def test_missing_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "absent.xml"
    with pytest.raises(InputError) as caught:
        read_hwloc_xml(path)
    assert str(caught.value).startswith(f"{path}: file: cannot read the file")


def test_bytes_are_named_as_such() -> None:
    with pytest.raises(InputError) as caught:
        read_hwloc_xml(b"<topology")
    assert str(caught.value).startswith("<hwloc XML bytes>: line 1")
