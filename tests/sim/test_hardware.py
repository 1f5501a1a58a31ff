"""Hardware profiles, nodes from hwloc/sysfs files, and the cluster spec (toposched.sim.hardware).

Each profile is checked for its NUMA/CPU/device counts and for a kubelet model that starts on
it and admits a Guaranteed pod. The parts' numbers (cores, SMT, NUMA layout, PCI ids) are the
published ones of the parts each profile names, written down in docs/sim/inputs.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import shared_path
from tests.fixtures.sysfs_tree import gpu_node, write_sysfs_tree
from toposched.errors import InputError
from toposched.kubelet import KubeletConfig, KubeletNode
from toposched.scheduler.nodes import Taint
from toposched.sim.hardware import (
    SIBLINGS_ADJACENT,
    build_machine,
    cluster_from_dict,
    default_kubelet_configuration,
    device_plugins,
    load_cluster,
    load_hardware_profile,
    node_from_hwloc,
    node_from_sysfs,
    profile_names,
    profile_node,
)
from toposched.sim.model import CPU_ENFORCEMENT_AGENT, GPU_MODEL_LABEL, SimNode
from toposched.topology import CPUSet, DeviceKind
from toposched.workload import Container, Pod

GI = 2**30
MI = 2**20

# name: (sockets, NUMA nodes, cores, threads per core, memory per NUMA, (local, same socket, other socket))
PROFILE_SHAPES = {
    "intel-snc": (2, 4, 56, 2, 96 * GI, (10, 11, 21)),
    "epyc-8numa": (2, 8, 128, 2, 128 * GI, (10, 12, 32)),
    "gpu-8x": (2, 2, 80, 2, 512 * GI, (10, None, 20)),
    "vm-2numa": (2, 2, 8, 2, 16 * GI, (10, None, 20)),
}


def kubelet_of(node: SimNode) -> KubeletNode:
    plugins = {r: list(d) for r, d in (node.device_plugins or {}).items()}
    return KubeletNode(node.machine, node.kubelet, device_plugins=plugins, name=node.name)


def guaranteed(name: str, cpus: int, memory: int, **extra: int) -> Pod:
    return Pod(name, uid=name, containers=(Container("main", limits={"cpu": cpus * 1000, "memory": memory, **extra}),))


# ---- profiles ------------------------------------------------------------------------------------


def test_the_four_profiles_ship() -> None:
    assert profile_names() == ("intel-snc", "epyc-8numa", "gpu-8x", "vm-2numa")


@pytest.mark.parametrize("name", sorted(PROFILE_SHAPES))
def test_profile_shape(name: str) -> None:
    sockets, numa, cores, threads, memory, (local, near, far) = PROFILE_SHAPES[name]
    machine = load_hardware_profile(name).machine
    assert len(machine.sockets) == sockets
    assert len(machine.numa_nodes) == numa
    assert len(machine.cores) == cores
    assert machine.threads_per_core == threads
    assert len(machine.cpus) == cores * threads
    per_socket = numa // sockets
    for node in machine.numa_nodes:
        assert node.memory_bytes == memory
        assert len(node.cpus) == cores * threads // numa
        for other in machine.numa_ids:
            want = local if other == node.id else near if other // per_socket == node.id // per_socket else far
            assert machine.distance(node.id, other) == want


@pytest.mark.parametrize("name", sorted(PROFILE_SHAPES))
def test_profile_hugepages_are_a_small_part_of_each_numa_node(name: str) -> None:
    for node in load_hardware_profile(name).machine.numa_nodes:
        assert node.hugepages.get(2 * MI, 0) > 0
        assert sum(size * count for size, count in node.hugepages.items()) <= node.memory_bytes // 4


@pytest.mark.parametrize("name", sorted(PROFILE_SHAPES))
def test_profile_kubelet_starts_and_admits_a_guaranteed_pod(name: str) -> None:
    node = profile_node(name, "n1")
    kubelet = kubelet_of(node)
    assert node.kubelet.cpu_manager_policy == "static"
    assert node.kubelet.topology_manager_policy in ("single-numa-node", "restricted")
    admission = kubelet.admit(guaranteed("web", 2, 2 * GI))
    assert admission.admitted, admission.message
    cpus = admission.containers["main"].cpuset
    assert len(cpus) == 2
    assert len(node.machine.numa_of(cpus)) == 1
    assert not cpus & node.kubelet.reserved_system_cpus


def test_static_memory_manager_where_latency_pods_live() -> None:
    for name in ("intel-snc", "epyc-8numa"):
        kubelet = kubelet_of(profile_node(name, "n1"))
        assert kubelet.memory is not None
        admission = kubelet.admit(guaranteed("db", 4, 8 * GI, **{"hugepages-1Gi": 2 * GI}))
        assert admission.admitted, admission.message
        assert len(admission.numa_nodes()) == 1


def test_siblings_numbering() -> None:
    epyc = load_hardware_profile("epyc-8numa").machine
    assert epyc.siblings(0) == CPUSet([0, 128])
    assert str(epyc.numa(1).cpus) == "16-31,144-159"
    vm = load_hardware_profile("vm-2numa").machine
    assert vm.siblings(0) == CPUSet([0, 1])
    assert str(vm.numa(1).cpus) == "8-15"
    assert load_hardware_profile("vm-2numa").kubelet.reserved_system_cpus == CPUSet([0, 1])


def test_gpu_profile_devices_switches_and_plugins() -> None:
    profile = load_hardware_profile("gpu-8x")
    machine = profile.machine
    gpus = machine.devices_of(DeviceKind.GPU)
    hcas = machine.devices_of(DeviceKind.INFINIBAND)
    assert len(gpus) == 8 and len(hcas) == 4
    assert [sum(1 for d in gpus if d.numa_id == n) for n in (0, 1)] == [4, 4]
    assert all(d.memory_bytes == 85198045184 for d in gpus)  # A100 80GB as nvidia-smi reports it
    switches: dict[str, list[DeviceKind]] = {}
    for device in machine.devices:
        switches.setdefault(device.pcie_path[2], []).append(device.kind)
    assert len(switches) == 4
    assert all(sorted(kinds) == sorted([DeviceKind.GPU, DeviceKind.GPU, DeviceKind.INFINIBAND])
               for kinds in switches.values())
    plugins = profile.device_plugins
    assert plugins is not None and set(plugins) == {"nvidia.com/gpu", "rdma/hca"}
    assert [dev_id for dev_id, _ in plugins["nvidia.com/gpu"]] == sorted(d.address for d in gpus)
    assert dict(plugins["rdma/hca"]) == {d.address: (d.numa_id,) for d in hcas}
    assert profile.gpu_model == "A100"
    assert profile_node("gpu-8x", "g1").labels[GPU_MODEL_LABEL] == "A100"


def test_gpu_profile_aligns_gpus_and_hcas_and_admits_an_8_gpu_pod() -> None:
    kubelet = kubelet_of(profile_node("gpu-8x", "g1"))
    pod = guaranteed("train-4", 32, 256 * GI, **{"nvidia.com/gpu": 4, "rdma/hca": 2})
    half = kubelet.admit(pod)
    assert half.admitted, half.message
    assert len(half.numa_nodes()) == 1
    kubelet.release(pod)
    # Upstream's merge: 64 CPUs fit one NUMA node, so the CPU manager does not prefer both, and
    # the merged hint for 8 GPUs + 64 CPUs is not preferred: restricted refuses it.
    narrow = kubelet.admit(guaranteed("train-8-narrow", 64, 512 * GI, **{"nvidia.com/gpu": 8, "rdma/hca": 4}))
    assert not narrow.admitted and narrow.reason == "TopologyAffinityError"
    # 96 CPUs need both NUMA nodes too: every resource prefers both, and restricted admits it.
    whole = kubelet.admit(guaranteed("train-8", 96, 512 * GI, **{"nvidia.com/gpu": 8, "rdma/hca": 4}))
    assert whole.admitted, whole.message
    assert whole.numa_nodes() == {0, 1}


def test_profile_overrides_replace_kubelet_fields() -> None:
    node = profile_node("epyc-8numa", "n1", overrides={"topologyManagerPolicy": "restricted", "topologyManagerScope": "pod"},
                        cpu_enforcement=CPU_ENFORCEMENT_AGENT)
    assert node.kubelet.topology_manager_policy == "restricted"
    assert node.kubelet.topology_manager_scope == "pod"
    assert node.kubelet.memory_manager_policy == "Static"  # the rest stays the profile's
    assert node.cpu_enforcement == CPU_ENFORCEMENT_AGENT
    assert node.profile == "epyc-8numa"


def test_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(InputError, match="known: intel-snc, epyc-8numa, gpu-8x, vm-2numa"):
        load_hardware_profile("xeon")


# ---- build_machine --------------------------------------------------------------------------------


def test_build_machine_split_and_adjacent_numbering() -> None:
    split = build_machine([2, 2], sockets=2, memory=GI)
    assert [str(n.cpus) for n in split.numa_nodes] == ["0-1,4-5", "2-3,6-7"]
    assert [c.id for c in split.cores] == [0, 1, 2, 3]
    adjacent = build_machine([2, 2], sockets=1, siblings=SIBLINGS_ADJACENT, memory=[GI, 2 * GI])
    assert [str(n.cpus) for n in adjacent.numa_nodes] == ["0-3", "4-7"]
    assert [c.id for c in adjacent.cores] == [0, 2, 4, 6]
    assert adjacent.distance(0, 1) == 11 and split.distance(0, 1) == 21
    assert adjacent.numa(1).memory_bytes == 2 * GI


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"numa_cores": [2, 2, 2], "sockets": 2}, "sockets"),
        ({"numa_cores": [2], "threads_per_core": 0}, "threads_per_core"),
        ({"numa_cores": [2, -1]}, "cores"),
        ({"numa_cores": [2], "siblings": "odd"}, "siblings"),
        ({"numa_cores": [2, 2], "memory": [GI]}, "memory"),
    ],
)
def test_build_machine_refuses_bad_shapes(kwargs: dict, field: str) -> None:
    cores = kwargs.pop("numa_cores")
    with pytest.raises(InputError) as err:
        build_machine(cores, **kwargs)
    assert err.value.field == field


# ---- nodes from files -----------------------------------------------------------------------------


def _hwloc_sets(cpus: list[int]) -> str:
    mask = f"0x{sum(1 << c for c in cpus):08x}"
    return f'cpuset="{mask}" complete_cpuset="{mask}" nodeset="0x00000001" complete_nodeset="0x00000001"'


def tiny_gpu_hwloc() -> str:
    """One package, one NUMA node of 16 GiB, 2 cores x 2 threads, an NVIDIA T4 on a root port."""
    pus = {0: [0, 2], 1: [1, 3]}
    cores = "".join(
        f'<object type="Core" os_index="{c}" {_hwloc_sets(ids)}>'
        + "".join(f'<object type="PU" os_index="{p}" {_hwloc_sets([p])}/>' for p in ids)
        + "</object>"
        for c, ids in pus.items()
    )
    pci = (
        '<object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[00-01]">'
        '<object type="Bridge" bridge_type="1-1" depth="1" bridge_pci="0000:[01-01]" pci_busid="0000:00:03.0" '
        'pci_type="0604 [8086:2030] [0000:0000] 04">'
        '<object type="PCIDev" pci_busid="0000:01:00.0" pci_type="0302 [10de:1eb8] [10de:12a2] a1"/>'
        "</object></object>"
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n<topology version="2.0">'
        f'<object type="Machine" os_index="0" {_hwloc_sets([0, 1, 2, 3])}><info name="HostName" value="tiny"/>'
        f'<object type="Package" os_index="0" {_hwloc_sets([0, 1, 2, 3])}>'
        f'<object type="NUMANode" os_index="0" local_memory="{16 * GI}" {_hwloc_sets([0, 1, 2, 3])}/>'
        f"{cores}{pci}</object></object></topology>\n"
    )


def test_node_from_hwloc_fixture(tmp_path: Path) -> None:
    path = tmp_path / "tiny.xml"
    path.write_text(tiny_gpu_hwloc())
    node = node_from_hwloc(path, gpu_model="T4")
    assert node.name == "tiny"
    assert node.profile == f"hwloc:{path}"
    assert node.device_plugins == {"nvidia.com/gpu": (("0000:01:00.0", (0,)),)}
    assert node.kubelet.topology_manager_policy == "restricted"  # it has device resources
    assert node.kubelet.reserved_system_cpus == CPUSet([0, 2])
    assert node.gpu_model == "T4" and node.labels[GPU_MODEL_LABEL] == "T4"
    admission = kubelet_of(node).admit(guaranteed("infer", 1, GI, **{"nvidia.com/gpu": 1}))
    assert admission.admitted, admission.message


def test_node_from_sysfs_fixture(tmp_path: Path) -> None:
    root = write_sysfs_tree(tmp_path, gpu_node())
    node = node_from_sysfs(root, name="gpu-a")
    assert node.name == "gpu-a"
    assert {r: len(d) for r, d in (node.device_plugins or {}).items()} == {"nvidia.com/gpu": 8, "rdma/hca": 4}
    admission = kubelet_of(node).admit(guaranteed("train", 4, 8 * GI, **{"nvidia.com/gpu": 2, "rdma/hca": 1}))
    assert admission.admitted and len(admission.numa_nodes()) == 1


def test_node_from_hwloc_with_a_given_kubelet(tmp_path: Path) -> None:
    path = tmp_path / "tiny.xml"
    path.write_text(tiny_gpu_hwloc())
    node = node_from_hwloc(path, name="x", kubelet=KubeletConfig(topology_manager_policy="best-effort"))
    assert node.kubelet.topology_manager_policy == "best-effort"
    with pytest.raises(InputError) as err:
        node_from_hwloc(path, kubelet=KubeletConfig(cpu_manager_policy="static", reserved_system_cpus=CPUSet([9])))
    assert err.value.source == str(path)


def test_node_from_real_hwloc_g4dn_metal() -> None:
    node = node_from_hwloc(shared_path("topologies", "hwloc", "g4dnmetal.xml"))
    assert len(node.machine.numa_nodes) == 2
    assert len((node.device_plugins or {})["nvidia.com/gpu"]) == 8
    admission = kubelet_of(node).admit(guaranteed("infer", 4, 8 * GI, **{"nvidia.com/gpu": 2}))
    assert admission.admitted and len(admission.numa_nodes()) == 1


def test_default_kubelet_without_devices_is_single_numa_node() -> None:
    machine = build_machine([4, 4], sockets=2, memory=8 * GI)
    assert device_plugins(machine) is None
    config = default_kubelet_configuration(machine)
    assert config["topologyManagerPolicy"] == "single-numa-node"
    assert config["reservedSystemCPUs"] == "0,8"


# ---- cluster spec ---------------------------------------------------------------------------------


def test_cluster_spec_names_counts_and_overrides(tmp_path: Path) -> None:
    kubelet_file = tmp_path / "kubelet.yaml"
    kubelet_file.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                            "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ntopologyManagerPolicy: best-effort\n")
    (tmp_path / "tiny.xml").write_text(tiny_gpu_hwloc())
    spec = tmp_path / "cluster.yaml"
    spec.write_text(
        "nodes:\n"
        "  - {profile: epyc-8numa, count: 3, topologyManagerPolicy: restricted, cpuEnforcement: agent}\n"
        "  - profile: vm-2numa\n"
        "    labels: {zone: a}\n"
        "    taints: [{key: dedicated, value: vm, effect: NoSchedule}]\n"
        "  - {hwloc: tiny.xml, count: 2, kubeletConfig: kubelet.yaml, gpuModel: T4}\n"
    )
    nodes = load_cluster(spec)
    assert [n.name for n in nodes] == [f"node-{i:04d}" for i in range(1, 7)]
    assert [n.profile for n in nodes] == ["epyc-8numa"] * 3 + ["vm-2numa"] + ["hwloc:tiny.xml"] * 2
    assert all(n.kubelet.topology_manager_policy == "restricted" and n.cpu_enforcement == "agent" for n in nodes[:3])
    assert nodes[0].machine is nodes[2].machine  # one group shares its immutable machine
    assert nodes[3].labels["zone"] == "a" and nodes[3].taints == (Taint("dedicated", "vm", "NoSchedule"),)
    assert nodes[4].kubelet.topology_manager_policy == "best-effort"
    assert nodes[4].labels[GPU_MODEL_LABEL] == "T4"
    assert nodes[4].labels["kubernetes.io/hostname"] == "node-0005"


def test_cluster_spec_name_width_grows_past_9999() -> None:
    nodes = cluster_from_dict({"nodes": [{"profile": "vm-2numa", "count": 10000}]})
    assert nodes[0].name == "node-00001" and nodes[-1].name == "node-10000"


@pytest.mark.parametrize(
    ("entry", "field", "message"),
    [
        ({"profile": "vm-2numa", "count": -1}, "nodes[0].count", "not a non-negative integer"),
        ({"profile": "vm-2numa", "count": 1.5}, "nodes[0].count", "not a non-negative integer"),
        ({"profile": "vm-2numa", "hwloc": "x.xml"}, "nodes[0]", "exactly one of"),
        ({"profile": "vm-2numa", "colour": "red"}, "nodes[0].colour", "unknown field"),
        ({"profile": "nope"}, "nodes[0].profile", "unknown profile"),
        ({"profile": "vm-2numa", "cpuEnforcement": "both"}, "nodes[0].cpuEnforcement", "unknown value"),
        ({"profile": "vm-2numa", "topologyManagerPolicy": "strict"}, "nodes[0].topologyManagerPolicy", "unknown value"),
        ({"profile": "vm-2numa", "reservedSystemCPUs": "0,99"}, "nodes[0].reservedSystemCPUs", "refuses"),
        ({"profile": "vm-2numa", "taints": [{"key": "a", "effect": "Never"}]}, "nodes[0].taints[0].effect", "unknown effect"),
    ],
)
def test_cluster_spec_bad_entries_name_file_and_field(tmp_path: Path, entry: dict, field: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        cluster_from_dict({"nodes": [entry]}, source="spec.yaml", base_dir=tmp_path)
    assert err.value.source == "spec.yaml"
    assert err.value.field == field


def test_cluster_spec_memory_manager_reservation_must_add_up() -> None:
    entry = {"profile": "intel-snc", "systemReserved": {"memory": "2Gi"}}
    with pytest.raises(InputError, match="refuses.*is not equal to the value") as err:
        cluster_from_dict({"nodes": [entry]}, source="spec.yaml")
    assert err.value.field == "nodes[0].reservedMemory"


def test_cluster_spec_missing_hwloc_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        cluster_from_dict({"nodes": [{"hwloc": "missing.xml"}]}, source="spec.yaml", base_dir=tmp_path)
    assert err.value.source == "spec.yaml"
    assert "missing.xml" in str(err.value)


def test_cluster_spec_must_be_a_nodes_list() -> None:
    with pytest.raises(InputError, match="one key, nodes"):
        cluster_from_dict({"node": []})
