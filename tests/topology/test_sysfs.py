"""read_sysfs on trees the tests write: the machine it builds, the kernel's quirks, and bad input."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.sysfs_tree import (
    FIXTURES,
    GiB,
    MachineSpec,
    MiB,
    PCIDeviceSpec,
    cpuless_node,
    epyc_like_8numa,
    gpu_node,
    no_affinity_devices,
    offline_cpus,
    remove,
    sub_numa_clustering,
    two_socket_smt,
    write_file,
    write_sysfs_tree,
)
from toposched.errors import InputError
from toposched.topology import CPUSet, DeviceKind, Machine
from toposched.topology.sysfs import read_sysfs

CPU = "sys/devices/system/cpu"
NODE = "sys/devices/system/node"


def build(tmp_path: Path, spec: MachineSpec) -> Path:
    return write_sysfs_tree(tmp_path / "root", spec)


def assert_matches(machine: Machine, spec: MachineSpec) -> None:
    """Everything the spec says the tree holds, the machine holds."""
    assert machine.online == spec.online_cpus
    assert machine.offline_cpus == CPUSet(spec.offline_cpus)
    assert machine.numa_ids == spec.numa_ids
    for nid in spec.numa_ids:
        node = machine.numa(nid)
        assert node.cpus == spec.cpus_of_numa(nid)
        assert node.memory_bytes == spec.memory_of(nid)
        assert dict(node.hugepages) == dict(spec.hugepages)
        assert dict(node.distances) == {b: spec.distance(nid, b) for b in spec.numa_ids}
    rows = [{"cpu": c.id, "core": c.core_id, "socket": c.socket_id, "numa": c.numa_id} for c in machine.cpus]
    assert rows == spec.cpu_rows()
    assert {c.id: c.cache_id for c in machine.cpus} == {c: spec.llc_of(c) for c in spec.online_cpus}
    assert [s.id for s in machine.sockets] == sorted({spec.socket_of(c) for c in spec.online_cpus})
    assert machine.hostname == spec.hostname
    expected = list(spec.devices)
    assert [d.address for d in machine.devices] == sorted(d.address for d in expected)
    for want in expected:
        got = next(d for d in machine.devices if d.address == want.address)
        assert (got.class_code, got.vendor_id, got.device_id) == (want.class_code, want.vendor_id, want.device_id)
        assert got.numa_id == want.numa_node
        assert got.pcie_path == want.pcie_path
        assert got.name == (want.name[1] if want.name else None)


# ---- the fixtures ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_machines_are_read_back(tmp_path, name):
    spec = FIXTURES[name]()
    assert_matches(read_sysfs(build(tmp_path, spec)), spec)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_flattened_links_read_like_real_ones(tmp_path, name):
    # Some snapshot archives store each symlink as a plain file holding its target.
    spec = FIXTURES[name]()
    real = read_sysfs(write_sysfs_tree(tmp_path / "links", spec))
    flat = read_sysfs(write_sysfs_tree(tmp_path / "flat", replace(spec, flat_links=True)))
    assert flat.to_dict() == real.to_dict()


def test_two_socket_smt(tmp_path):
    m = read_sysfs(build(tmp_path, two_socket_smt()))
    assert [str(s.cpus) for s in m.sockets] == ["0-3,8-11", "4-7,12-15"]
    assert m.threads_per_core == 2
    assert str(m.siblings(9)) == "1,9"
    assert m.cpu(9).core_id == 1
    assert m.distance(0, 1) == 21
    assert m.numa(1).hugepages[2 * MiB] == 512
    assert m.numa(0).memory_bytes == 16 * GiB
    assert m.hostname == "smt2s"
    assert m.devices == ()


def test_sub_numa_clustering(tmp_path):
    m = read_sysfs(build(tmp_path, sub_numa_clustering()))
    assert [s.numa_ids for s in m.sockets] == [(0, 1), (2, 3)]
    assert (m.distance(0, 1), m.distance(0, 2), m.distance(3, 3)) == (11, 21, 10)
    assert str(m.numa(1).cpus) == "3-5,15-17"
    # The last-level cache follows the NUMA node here, so each node is its own cache domain.
    assert {m.cpu(c).cache_id for c in m.numa(1).cpus} == {3}


def test_epyc_like_distances(tmp_path):
    m = read_sysfs(build(tmp_path, epyc_like_8numa()))
    assert len(m.numa_nodes) == 8
    assert [m.distance(0, b) for b in range(8)] == [10, 12, 12, 12, 32, 32, 32, 32]
    assert [m.distance(6, b) for b in range(8)] == [32, 32, 32, 32, 12, 12, 10, 12]
    assert [len(s.numa_ids) for s in m.sockets] == [4, 4]


def test_gpu_node_devices_and_switches(tmp_path):
    m = read_sysfs(build(tmp_path, gpu_node()))
    gpus, hcas = m.devices_of(DeviceKind.GPU), m.devices_of(DeviceKind.INFINIBAND)
    assert len(gpus) == 8 and len(hcas) == 4
    assert [g.numa_id for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [h.name for h in hcas] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert gpus[0].name == "card0" and gpus[0].vendor_id == 0x10DE
    # Two devices sit under the same PCIe switch when their paths share the upstream port.
    switch = {d.address: d.pcie_path[:3] for d in m.devices}
    assert switch[gpus[0].address] == switch[gpus[1].address] == switch[hcas[0].address]
    assert switch[gpus[0].address] != switch[gpus[2].address]
    assert gpus[0].pcie_path == ("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0")
    # Bridges are not devices: they appear only in the paths.
    assert all(d.kind != DeviceKind.OTHER for d in m.devices)


def test_numa_node_minus_one_means_no_affinity(tmp_path):
    m = read_sysfs(build(tmp_path, no_affinity_devices()))
    by_address = {d.address: d for d in m.devices}
    assert by_address["0000:01:00.0"].numa_id is None
    assert by_address["0000:01:00.0"].kind == DeviceKind.NIC and by_address["0000:01:00.0"].name == "eno1"
    assert by_address["0000:02:00.0"].numa_id is None and by_address["0000:02:00.0"].kind == DeviceKind.NVME
    assert by_address["0000:81:00.0"].numa_id == 1
    # No numa_node file at all: the node its local CPUs belong to.
    assert by_address["0000:82:00.0"].numa_id == 0


def test_offline_cpus_are_known_but_not_usable(tmp_path):
    m = read_sysfs(build(tmp_path, offline_cpus()))
    assert str(m.offline_cpus) == "3,5,11"
    assert 3 not in m.online and 5 not in m.online
    with pytest.raises(KeyError):
        m.cpu(5)
    # Core 3 has no online thread left; core 5 keeps CPU 13, which becomes the core's id.
    assert m.cpu(13).core_id == 13
    assert str(m.siblings(13)) == "13"
    assert len(m.cores) == 7
    assert str(m.numa(0).cpus) == "0-2,8-10"


def test_cpu_less_nodes_are_kept_with_sparse_ids(tmp_path):
    m = read_sysfs(build(tmp_path, cpuless_node()))
    assert m.numa_ids == (0, 2, 3)
    assert m.numa(2).cpu_less and m.numa(3).cpu_less and not m.numa(0).cpu_less
    assert m.numa(3).memory_bytes == 16 * GiB
    assert (m.distance(0, 2), m.distance(2, 3), m.distance(3, 3)) == (30, 30, 10)


def test_without_numa_directory_one_node_holds_everything(tmp_path):
    spec = replace(two_socket_smt(), numa_sysfs=False)
    m = read_sysfs(build(tmp_path, spec))
    assert m.numa_ids == (0,)
    assert m.numa(0).cpus == spec.online_cpus
    # /proc/meminfo holds the machine's total; hugepages come from /sys/kernel/mm.
    assert m.numa(0).memory_bytes == 2 * 16 * GiB
    assert dict(m.numa(0).hugepages) == {2 * MiB: 512, GiB: 0}
    assert not m.numa(0).distances


def test_without_numa_directory_hugepages_from_proc_meminfo(tmp_path):
    root = build(tmp_path, replace(two_socket_smt(), numa_sysfs=False))
    remove(root, "sys/kernel/mm/hugepages")
    assert dict(read_sysfs(root).numa(0).hugepages) == {2 * MiB: 2 * 512}


def test_hybrid_cpu_kinds(tmp_path):
    spec = MachineSpec(cores_per_numa=6, efficiency_cpus=frozenset({4, 5}))
    m = read_sysfs(build(tmp_path, spec))
    assert [c.kind for c in m.cpus] == ["performance"] * 4 + ["efficiency"] * 2


def test_cpu_kinds_from_capacity_and_base_frequency(tmp_path):
    root = build(tmp_path, MachineSpec(cores_per_numa=4))
    for cpu, capacity in enumerate([1024, 1024, 446, 446]):
        write_file(root, f"{CPU}/cpu{cpu}/cpu_capacity", f"{capacity}\n")
    assert [c.kind for c in read_sysfs(root).cpus] == ["performance"] * 2 + ["efficiency"] * 2

    root = build(tmp_path / "freq", MachineSpec(cores_per_numa=4))
    for cpu, khz in enumerate([1900000, 1400000, 1900000, 1400000]):
        write_file(root, f"{CPU}/cpufreq/policy{cpu}/base_frequency", f"{khz}\n")
        write_file(root, f"{CPU}/cpu{cpu}/cpufreq", f"../cpufreq/policy{cpu}")  # a flattened link
    assert [c.kind for c in read_sysfs(root).cpus] == ["performance", "efficiency"] * 2


def test_uniform_capacity_means_no_kinds(tmp_path):
    root = build(tmp_path, MachineSpec(cores_per_numa=2))
    for cpu in range(2):
        write_file(root, f"{CPU}/cpu{cpu}/cpu_capacity", "1024\n")
    assert {c.kind for c in read_sysfs(root).cpus} == {None}


# ---- quirks of real trees ----------------------------------------------------------------------


def test_online_from_per_cpu_files_when_the_list_is_missing(tmp_path):
    root = build(tmp_path, offline_cpus())
    remove(root, f"{CPU}/online")
    remove(root, f"{CPU}/present")
    m = read_sysfs(root)
    assert str(m.offline_cpus) == "3,5,11"
    assert m.online == offline_cpus().online_cpus


def test_old_kernels_hex_masks_only(tmp_path):
    spec = sub_numa_clustering()
    root = build(tmp_path, spec)
    for cpu in spec.online_cpus:
        for name in ("core_cpus_list", "thread_siblings_list", "core_cpus"):
            remove(root, f"{CPU}/cpu{cpu}/topology/{name}")
        for index in range(4):
            remove(root, f"{CPU}/cpu{cpu}/cache/index{index}/shared_cpu_list")
    for nid in spec.numa_ids:
        remove(root, f"{NODE}/node{nid}/cpulist")
    assert_matches(read_sysfs(root), spec)


def test_values_with_trailing_nul_and_blank_lines(tmp_path):
    root = build(tmp_path, two_socket_smt())
    write_file(root, f"{NODE}/online", "0-1\n\x00")
    write_file(root, f"{NODE}/node0/cpulist", "0-3,8-11\x00\n")
    assert read_sysfs(root).numa(0).cpus == CPUSet.parse("0-3,8-11")


def test_missing_optional_files_are_tolerated(tmp_path):
    spec = replace(gpu_node(), hugepages={2 * MiB: 16})
    root = build(tmp_path, spec)
    remove(root, f"{NODE}/node1/meminfo")
    remove(root, f"{NODE}/node0/hugepages")
    remove(root, f"{CPU}/cpu0/cache")
    remove(root, f"{CPU}/cpu0/topology/die_id")
    gpu = spec.devices[0]
    device_dir = root / "sys/bus/pci/devices" / gpu.address
    remove(root, f"sys/bus/pci/devices/{gpu.address}/vendor")
    assert device_dir.is_symlink()
    m = read_sysfs(root)
    assert m.numa(1).memory_bytes == 0
    assert dict(m.numa(0).hugepages) == {} and dict(m.numa(1).hugepages) == {2 * MiB: 16}
    assert m.cpu(0).cache_id is None and m.cpu(1).cache_id == 0
    assert m.devices[0].vendor_id is None and m.devices[0].class_code == gpu.class_code


def test_dangling_pci_link_gives_a_bare_device(tmp_path):
    spec = gpu_node()
    root = build(tmp_path, spec)
    gpu = spec.devices[0]
    remove(root, f"sys/devices/{gpu.root_complex}/{'/'.join(gpu.bridges)}/{gpu.address}")
    m = read_sysfs(root)
    bare = next(d for d in m.devices if d.address == gpu.address)
    assert (bare.kind, bare.numa_id, bare.class_code, bare.name) == (DeviceKind.OTHER, None, None, None)
    assert bare.pcie_path == gpu.pcie_path  # the link itself still says where it sat


def test_a_node_without_distance_drops_the_matrix(tmp_path):
    root = build(tmp_path, epyc_like_8numa())
    remove(root, f"{NODE}/node5/distance")
    m = read_sysfs(root)
    assert all(not n.distances for n in m.numa_nodes)
    assert m.distance(0, 5) == 20  # the model's default


def test_distance_columns_follow_online_nodes(tmp_path):
    # The kernel prints one column per online node; node 1 is offline and has no directory.
    root = build(tmp_path, MachineSpec(sockets=1, cores_per_numa=2, cpuless_nodes=(2,)))
    write_file(root, f"{NODE}/online", "0,2\n")
    write_file(root, f"{NODE}/possible", "0-2\n")
    m = read_sysfs(root)
    assert dict(m.numa(2).distances) == {0: 30, 2: 10}


def test_cpus_of_an_offline_node_keep_that_node(tmp_path):
    # Like a machine whose node 0 memory is offline: node0/ is gone, its CPUs still link to it.
    spec = two_socket_smt()
    root = build(tmp_path, spec)
    remove(root, f"{NODE}/node0")
    write_file(root, f"{NODE}/online", "1\n")
    write_file(root, f"{NODE}/node1/distance", "21 10\n")
    m = read_sysfs(root)
    assert m.numa_ids == (0, 1)
    assert m.numa(0).cpus == spec.cpus_of_numa(0) and m.numa(0).memory_bytes == 0
    assert not m.numa(1).distances  # node 0 has no row, so the matrix is incomplete


def test_unknown_package_id_is_package_zero(tmp_path):
    spec = MachineSpec(cores_per_numa=2)
    root = build(tmp_path, spec)
    for cpu in spec.online_cpus:
        write_file(root, f"{CPU}/cpu{cpu}/topology/physical_package_id", "-1\n")
    assert [s.id for s in read_sysfs(root).sockets] == [0]


def test_cores_from_core_id_without_sibling_files(tmp_path):
    spec = two_socket_smt()
    root = build(tmp_path, spec)
    for cpu in spec.online_cpus:
        for name in ("core_cpus_list", "thread_siblings_list", "core_cpus", "thread_siblings"):
            remove(root, f"{CPU}/cpu{cpu}/topology/{name}")
    m = read_sysfs(root)
    assert [str(c.cpus) for c in m.cores] == [str(spec.siblings(c)) for c in range(spec.total_cores)]


def test_compute_unit_siblings_are_cores_of_their_own(tmp_path):
    # AMD Bulldozer: the two integer cores of a module are thread siblings with their own
    # core_id. cAdvisor groups CPUs by (package, core_id), so the kubelet sees one-thread cores;
    # the reader does the same (see docs/topology/sysfs.md).
    spec = MachineSpec(cores_per_numa=2, threads_per_core=2)
    root = build(tmp_path, spec)
    for cpu in spec.online_cpus:
        write_file(root, f"{CPU}/cpu{cpu}/topology/core_id", f"{cpu}\n")
    m = read_sysfs(root)
    assert len(m.cores) == 4 and m.threads_per_core == 1


def test_die_ids_only_when_a_package_has_several_dies(tmp_path):
    spec = MachineSpec(sockets=1, numa_per_socket=2, cores_per_numa=1)
    root = build(tmp_path, spec)
    assert {c.die_id for c in read_sysfs(root).cpus} == {None}
    write_file(root, f"{CPU}/cpu1/topology/die_id", "1\n")
    m = read_sysfs(root)
    assert [c.die_id for c in m.cpus] == [0, 1] and m.sockets[0].die_ids == (0, 1)


def test_hostname_from_etc_when_proc_lacks_it(tmp_path):
    root = build(tmp_path, MachineSpec())
    write_file(root, "etc/hostname", "node-7\n")
    assert read_sysfs(root).hostname == "node-7"


@settings(max_examples=25, deadline=None)
@given(
    sockets=st.integers(1, 3),
    numa_per_socket=st.integers(1, 2),
    cores=st.integers(1, 3),
    threads=st.integers(1, 2),
    cpuless=st.lists(st.integers(8, 12), max_size=2, unique=True),
    data=st.data(),
)
def test_any_written_machine_is_read_back(sockets, numa_per_socket, cores, threads, cpuless, data):
    base = MachineSpec(sockets=sockets, numa_per_socket=numa_per_socket, cores_per_numa=cores,
                       threads_per_core=threads, cpuless_nodes=tuple(sorted(cpuless)))
    all_cpus = list(base.all_cpus)
    offline = data.draw(st.sets(st.sampled_from(all_cpus), max_size=len(all_cpus) - 1))
    spec = replace(base, offline_cpus=frozenset(offline), flat_links=data.draw(st.booleans()))
    with tempfile.TemporaryDirectory() as tmp:
        assert_matches(read_sysfs(write_sysfs_tree(Path(tmp), spec)), spec)


# ---- bad input -----------------------------------------------------------------------------------


def expect_error(root: Path, rel: str, field: str, match: str) -> InputError:
    with pytest.raises(InputError) as info:
        read_sysfs(root)
    err = info.value
    assert err.source == str(root / rel)
    assert err.field == field
    assert str(root / rel) in str(err) and field in str(err)
    assert match in err.message, err.message
    return err


def test_cpu_in_two_numa_nodes(tmp_path):
    root = build(tmp_path, two_socket_smt())
    write_file(root, f"{NODE}/node1/cpulist", "3-7,12-15\n")
    err = expect_error(root, f"{NODE}/node1/cpulist", "cpulist", "CPU 3 is also listed by NUMA node 0")
    assert str(root / NODE / "node0/cpulist") in err.message


@pytest.mark.parametrize(("text", "match"), [("3-1", "'3-1'"), ("a-b", "'a-b'"), ("0-3,,5", "0-3,,5")])
def test_malformed_node_cpulist(tmp_path, text, match):
    root = build(tmp_path, two_socket_smt())
    write_file(root, f"{NODE}/node0/cpulist", text + "\n")
    expect_error(root, f"{NODE}/node0/cpulist", "cpulist", match)


@pytest.mark.parametrize(("rel", "field", "text", "match"), [
    (f"{CPU}/online", "online", "3-1", "'3-1'"),
    (f"{CPU}/present", "present", "x", "'x'"),
    (f"{CPU}/cpu0/topology/core_cpus_list", "core_cpus_list", "0-", "'0-'"),
    (f"{CPU}/cpu2/cache/index3/shared_cpu_list", "shared_cpu_list", "a-b", "'a-b'"),
    (f"{CPU}/cpu0/topology/physical_package_id", "physical_package_id", "zero", "'zero' is not an integer"),
    (f"{CPU}/cpu0/topology/physical_package_id", "physical_package_id", "-3", "-3 is negative"),
    (f"{NODE}/node0/meminfo", "MemTotal", "Node 0 MemTotal: -4096 kB", "-4096 is negative"),
    (f"{NODE}/node0/meminfo", "MemTotal", "Node 0 MemTotal: lots kB", "'lots' is not an integer"),
    (f"{NODE}/node1/hugepages/hugepages-2048kB/nr_hugepages", "nr_hugepages", "-1", "-1 is negative"),
    (f"{NODE}/node0/distance", "distance", "10 -21", "distance -21 is not positive"),
    (f"{NODE}/node0/distance", "distance", "10 far", "'far' is not an integer"),
    (f"{NODE}/node0/distance", "distance", "10 21 31", "3 distances, but 2 NUMA nodes exist"),
    (f"{NODE}/online", "online", "1-0", "'1-0'"),
])
def test_malformed_or_negative_values(tmp_path, rel, field, text, match):
    root = build(tmp_path, two_socket_smt())
    if field == "shared_cpu_list":
        remove(root, f"{CPU}/cpu2/cache/index3/shared_cpu_map")
    write_file(root, rel, text + "\n")
    expect_error(root, rel, field, match)


def test_malformed_hex_mask(tmp_path):
    spec = two_socket_smt()
    root = build(tmp_path, spec)
    for name in ("core_cpus_list", "thread_siblings_list", "core_cpus"):
        remove(root, f"{CPU}/cpu1/topology/{name}")
    write_file(root, f"{CPU}/cpu1/topology/thread_siblings", "00000000,0000zz02\n")
    expect_error(root, f"{CPU}/cpu1/topology/thread_siblings", "thread_siblings", "'00000000,0000zz02'")


def test_siblings_that_disagree(tmp_path):
    root = build(tmp_path, two_socket_smt())
    write_file(root, f"{CPU}/cpu8/topology/core_cpus_list", "8\n")
    rel = f"{CPU}/cpu8/topology/core_cpus_list"
    expect_error(root, rel, "core_cpus_list", "CPU 8 has siblings 8 but CPU 0 says 0,8")


def test_siblings_in_different_packages(tmp_path):
    root = build(tmp_path, two_socket_smt())
    write_file(root, f"{CPU}/cpu8/topology/physical_package_id", "1\n")
    expect_error(root, f"{CPU}/cpu0/topology/physical_package_id", "physical_package_id", "in packages 0 and 1")


def test_negative_core_id_without_siblings(tmp_path):
    root = build(tmp_path, MachineSpec())
    for name in ("core_cpus_list", "thread_siblings_list", "core_cpus", "thread_siblings"):
        remove(root, f"{CPU}/cpu0/topology/{name}")
    write_file(root, f"{CPU}/cpu0/topology/core_id", "-2\n")
    expect_error(root, f"{CPU}/cpu0/topology/core_id", "core_id", "-2 is negative")


def test_per_cpu_online_contradicts_the_online_list(tmp_path):
    root = build(tmp_path, two_socket_smt())
    write_file(root, f"{CPU}/cpu2/online", "0\n")
    expect_error(root, f"{CPU}/cpu2/online", "online", "CPU 2 is offline")


def test_online_cpu_in_no_numa_node(tmp_path):
    root = build(tmp_path, two_socket_smt())
    write_file(root, f"{NODE}/node0/cpulist", "0-2,8-11\n")
    remove(root, f"{CPU}/cpu3/node0")
    expect_error(root, NODE, "cpulist", "online CPU 3 belongs to no NUMA node")


@pytest.mark.parametrize(("text", "match"), [("-2", "-2 is negative"), ("7", "NUMA node 7 does not exist"),
                                             ("one", "'one' is not an integer")])
def test_bad_device_numa_node(tmp_path, text, match):
    spec = gpu_node()
    root = build(tmp_path, spec)
    gpu = spec.devices[0]
    rel = f"sys/devices/{gpu.root_complex}/{'/'.join(gpu.bridges)}/{gpu.address}/numa_node"
    write_file(root, rel, text + "\n")
    expect_error(root, rel, "numa_node", match)


def test_bad_device_class(tmp_path):
    spec = gpu_node()
    root = build(tmp_path, spec)
    gpu = spec.devices[0]
    rel = f"sys/devices/{gpu.root_complex}/{'/'.join(gpu.bridges)}/{gpu.address}/class"
    write_file(root, rel, "0xZZ0300\n")
    expect_error(root, rel, "class", "'0xZZ0300' is not an integer")


def test_not_a_sysfs_tree(tmp_path):
    expect_error(tmp_path, CPU, "devices/system/cpu", "not a sysfs tree")


def test_no_online_cpu(tmp_path):
    root = build(tmp_path, MachineSpec())
    write_file(root, f"{CPU}/online", "\n")
    expect_error(root, f"{CPU}/online", "online", "no online CPU")


def test_devices_with_a_single_bridge_path(tmp_path):
    spec = MachineSpec(devices=(PCIDeviceSpec("0000:00:1f.6", 0x020000, name=("net", "eno1")),))
    m = read_sysfs(build(tmp_path, spec))
    assert m.devices[0].pcie_path == ("pci0000:00",)
    assert m.devices[0].name == "eno1"


def test_virtio_nic_is_named_by_its_virtio_child(tmp_path):
    spec = MachineSpec(devices=(PCIDeviceSpec("0000:00:03.0", 0x020000, 0x1AF4, 0x1000, numa_node=None),))
    root = build(tmp_path, spec)
    (root / "sys/devices/pci0000:00/0000:00:03.0/virtio0/net/eth0").mkdir(parents=True)
    assert read_sysfs(root).devices[0].name == "eth0"
