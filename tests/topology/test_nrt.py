"""NodeResourceTopology: reading, writing the shape NFD publishes, conversion to and from Machine."""

from __future__ import annotations

import copy
import functools
import json

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import shared_path
from toposched.errors import InputError
from toposched.topology import CPUSet, Device, DeviceKind, LogicalCPU, Machine, NUMANode
from toposched.topology.nrt import (
    NodeResourceTopology,
    ResourceInfo,
    Zone,
    detect_topology_policy,
    device_kind_of_resource,
    dump_nrt,
    load_nrts,
    machine_from_nrt,
    nrt_from_machine,
    numa_id_of_zone,
    numa_zone_resources,
    parse_nrt,
    zone_name,
)

GiB = 2**30
MiB = 2**20
NRT_DIR = ("k8s-objects", "noderesourcetopology")


# ---- zone names: noderesourcetopology-api's numanode helper test table -------------------


@pytest.mark.parametrize(("numa_id", "name"), [(0, "node-0"), (7, "node-7"), (65535, "node-65535")])
def test_zone_name_of_numa_id(numa_id, name):
    assert zone_name(numa_id) == name
    assert numa_id_of_zone(name) == numa_id


def test_zone_name_of_negative_id_is_an_error():
    with pytest.raises(InputError):
        zone_name(-1)


@pytest.mark.parametrize("name", ["node--1", "cell-1", "Node-1", "NODE-2", "node_3", "node 4", "node-5-1", "node6",
                                  "--node-7"])
def test_malformed_zone_names_are_refused(name):
    with pytest.raises(InputError, match="node-<N>"):
        numa_id_of_zone(name)


# ---- the deprecated topologyPolicies value: NFD's topologypolicy test table -------------


@pytest.mark.parametrize(
    ("policy", "scope", "expected"),
    [
        ("best-effort", "pod", "BestEffortPodLevel"),
        ("best-effort", "container", "BestEffortContainerLevel"),
        ("restricted", "container", "RestrictedContainerLevel"),
        ("restricted", "pod", "RestrictedPodLevel"),
        ("single-numa-node", "pod", "SingleNUMANodePodLevel"),
        ("single-numa-node", "container", "SingleNUMANodeContainerLevel"),
        ("none", "container", "None"),
        ("none", "pod", "None"),
        ("non-existent", "pod", "None"),
        ("non-existent", "container", "None"),
        ("single-numa-node", "non-existent", "None"),
    ],
)
def test_detect_topology_policy(policy, scope, expected):
    assert detect_topology_policy(policy, scope) == expected


@pytest.mark.parametrize(
    ("resource", "kind"),
    [
        ("nvidia.com/gpu", DeviceKind.GPU),
        ("amd.com/gpu", DeviceKind.GPU),
        ("rdma/hca_shared_devices_a", DeviceKind.INFINIBAND),
        ("example.com/deviceA", DeviceKind.OTHER),
        ("intel.com/sriov_netdevice", DeviceKind.OTHER),
    ],
)
def test_device_kind_of_resource(resource, kind):
    assert device_kind_of_resource(resource) == kind


# ---- NFD's resource aggregator test, rewritten against nrt_from_machine -------------------


def nfd_test_machine() -> Machine:
    """NFD's aggregator test topology: 24 CPUs, even ones on NUMA 0, odd on NUMA 1, siblings n and n+12."""
    cpus = [LogicalCPU(c, c if c < 12 else c - 12, c % 2, c % 2) for c in range(24)]
    dist = {0: {0: 10, 1: 20}, 1: {0: 20, 1: 10}}
    nodes = (
        NUMANode(0, CPUSet(range(0, 24, 2)), memory_bytes=2048, distances=dist[0]),
        # Upstream's hugepages capacity (2048 bytes of 2Mi pages) is not a whole page, which a
        # page-count model cannot hold: here 2 pages, 1 allocatable, keep the same proportions.
        NUMANode(1, CPUSet(range(1, 24, 2)), memory_bytes=2048, hugepages={2 * MiB: 2}, distances=dist[1]),
    )
    return Machine(tuple(cpus), nodes)


def _zones_as_dicts(nrt: NodeResourceTopology) -> list[dict]:
    return dump_nrt(nrt)["zones"]


def test_nfd_aggregate_without_pods():
    nrt = nrt_from_machine(
        nfd_test_machine(),
        node_name="fake-node",
        reserved_cpus=CPUSet([0, 1]),  # CPUs 0 and 1 are reserved (not allocatable)
        allocatable={0: {"memory": 1024}, 1: {"memory": 1024, "hugepages-2Mi": 2 * MiB}},
        device_resources={"fake.io/net": {0: 4, 1: 2}, "fake.io/gpu": {1: 1}},
    )

    def res(name, cap, alloc, avail):
        return {"name": name, "capacity": cap, "allocatable": alloc, "available": avail}

    assert _zones_as_dicts(nrt) == [
        {
            "name": "node-0",
            "type": "Node",
            "costs": [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 20}],
            "resources": [
                res("cpu", "12", "11", "11"),
                res("fake.io/net", "4", "4", "4"),
                res("memory", "2048", "1024", "1024"),
            ],
        },
        {
            "name": "node-1",
            "type": "Node",
            "costs": [{"name": "node-0", "value": 20}, {"name": "node-1", "value": 10}],
            "resources": [
                res("cpu", "12", "11", "11"),
                res("fake.io/gpu", "1", "1", "1"),
                res("fake.io/net", "2", "2", "2"),
                res("hugepages-2Mi", "4194304", "2097152", "2097152"),
                res("memory", "2048", "1024", "1024"),
            ],
        },
    ]


def test_nfd_aggregate_with_pods_using_resources():
    # Only CPU 0 reserved; a pod holds CPUs 5 and 7 (NUMA 1), netBBB (NUMA 1), 512 bytes of
    # memory and of hugepages on NUMA 1: NFD's scanner turns that into "available".
    nrt = nrt_from_machine(
        nfd_test_machine(),
        node_name="fake-node",
        reserved_cpus=CPUSet([0]),
        allocatable={0: {"memory": 1024}, 1: {"memory": 1024, "hugepages-2Mi": 2 * MiB}},
        available={1: {"cpu": 10_000, "fake.io/net": 0, "memory": 512, "hugepages-2Mi": 0}},
        device_resources={"fake.io/net": {0: 1, 1: 1}, "fake.io/gpu": {1: 1}},
    )
    zones = numa_zone_resources(nrt)
    assert zones[0]["cpu"] == ResourceInfo("cpu", 12_000, 11_000, 11_000)
    assert zones[1]["cpu"] == ResourceInfo("cpu", 12_000, 12_000, 10_000)
    assert zones[1]["fake.io/net"] == ResourceInfo("fake.io/net", 1, 1, 0)
    assert zones[1]["memory"] == ResourceInfo("memory", 2048, 1024, 512)
    assert _zones_as_dicts(nrt)[1]["resources"][0] == {
        "name": "cpu", "capacity": "12", "allocatable": "12", "available": "10"}


def test_top_level_attributes_and_policies_as_nfd_writes_them():
    nrt = nrt_from_machine(
        nfd_test_machine(), node_name="w1", policy="single-numa-node", scope="pod",
        extra_attributes={"nodeTopologyPodsFingerprint": "pfp0v001abc", "topologyManagerPolicy": "ignored"},
    )
    out = dump_nrt(nrt)
    assert list(out) == ["apiVersion", "kind", "metadata", "topologyPolicies", "zones", "attributes"]
    assert out["apiVersion"] == "topology.node.k8s.io/v1alpha2" and out["kind"] == "NodeResourceTopology"
    assert out["metadata"] == {"name": "w1"}
    assert out["topologyPolicies"] == ["SingleNUMANodePodLevel"]
    assert out["attributes"] == [
        {"name": "topologyManagerPolicy", "value": "single-numa-node"},
        {"name": "topologyManagerScope", "value": "pod"},
        {"name": "nodeTopologyPodsFingerprint", "value": "pfp0v001abc"},
    ]


@pytest.mark.parametrize(
    ("resource", "value", "text"),
    [
        ("cpu", 4000, "4"),
        ("cpu", 1500, "1500m"),
        ("cpu", 500, "500m"),
        ("cpu", 12_000_000, "12k"),
        ("memory", 0, "0"),
        ("memory", 1024, "1024"),
        ("memory", 100, "100"),
        ("memory", 16_000_000_000, "16G"),
        ("memory", 17_179_869_184, "17179869184"),
        ("example.com/dev", 3000, "3k"),
    ],
)
def test_quantities_are_written_as_decimal_si(resource, value, text):
    nrt = NodeResourceTopology("n", (Zone("node-0", "Node", resources=(ResourceInfo(resource, value, value, value),)),))
    written = dump_nrt(nrt)["zones"][0]["resources"][0]
    assert written["capacity"] == text
    assert parse_nrt(dump_nrt(nrt)).zones[0].resources[0].capacity == value


# ---- special zones ------------------------------------------------------------------------


def test_cpu_less_zone_carries_memory_only():
    m = Machine(
        (LogicalCPU(0, 0, 0, 0), LogicalCPU(1, 1, 0, 0)),
        (NUMANode(0, CPUSet([0, 1]), 4 * GiB), NUMANode(1, CPUSet(), 16 * GiB, hugepages={GiB: 0})),
    )
    zones = numa_zone_resources(nrt_from_machine(m, node_name="hbm"))
    assert sorted(zones[1]) == ["hugepages-1Gi", "memory"]
    assert zones[1]["memory"] == ResourceInfo("memory", 16 * GiB, 16 * GiB, 16 * GiB)
    back = machine_from_nrt(nrt_from_machine(m, node_name="hbm"))
    assert back.numa(1).cpu_less and back.numa(1).memory_bytes == 16 * GiB
    assert dict(back.numa(1).hugepages) == {GiB: 0}


def test_zone_with_every_cpu_reserved_publishes_no_cpu_like_nfd():
    m = Machine(
        (LogicalCPU(0, 0, 0, 0), LogicalCPU(1, 1, 1, 1)),
        (NUMANode(0, CPUSet([0]), GiB), NUMANode(1, CPUSet([1]), GiB), NUMANode(2, CPUSet(), 0)),
    )
    zones = numa_zone_resources(nrt_from_machine(m, node_name="n", reserved_cpus=CPUSet([0])))
    assert "cpu" not in zones[0]
    assert zones[1]["cpu"].allocatable == 1000
    # A zone with nothing at all still says cpu 0, as NFD's aggregator does.
    assert zones[2] == {"cpu": ResourceInfo("cpu", 0, 0, 0)}


def test_machine_without_distances_publishes_no_costs():
    m = Machine.from_cpu_table([{"cpu": 0, "core": 0, "socket": 0, "numa": 0}], memory_per_numa=GiB)
    nrt = nrt_from_machine(m, node_name="small")
    assert nrt.zones[0].costs == {}
    assert "costs" not in dump_nrt(nrt)["zones"][0]
    assert machine_from_nrt(nrt).numa(0).distances == {}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"policy": "strict"}, "policy"),
        ({"scope": "node"}, "scope"),
        ({"node_name": ""}, "node_name"),
        ({"allocatable": {5: {"memory": 1}}}, "allocatable[5]"),
        ({"allocatable": {0: {"nvidia.com/gpu": 1}}}, "allocatable[0][nvidia.com/gpu]"),
        ({"allocatable": {0: {"memory": 3 * GiB}}}, "numa_nodes[0].memory"),
        ({"available": {0: {"cpu": 13_000}}}, "numa_nodes[0].cpu"),
        ({"device_resources": {"gpu": {0: 1}}}, "device_resources"),
        ({"device_resources": {"nvidia.com/gpu": {9: 1}}}, "device_resources[nvidia.com/gpu]"),
        ({"device_resources": {"nvidia.com/gpu": {0: -1}}}, "device_resources[nvidia.com/gpu][0]"),
    ],
)
def test_writer_refuses_bad_arguments(kwargs, field):
    args = {"node_name": "n", **kwargs}
    with pytest.raises(InputError) as err:
        nrt_from_machine(nfd_test_machine(), **args)
    assert err.value.field == field


# ---- round trips --------------------------------------------------------------------------


def carried(machine: Machine) -> dict:
    """What NRT carries of a machine: per NUMA node CPU count, memory, hugepages, distances,
    attributes and device counts per resource."""
    out = {}
    for n in machine.numa_nodes:
        devices: dict[str, int] = {}
        for d in machine.devices:
            if d.numa_id == n.id and "resource" in d.attributes:
                devices[d.attributes["resource"]] = devices.get(d.attributes["resource"], 0) + 1
        out[n.id] = (len(n.cpus), n.memory_bytes, dict(n.hugepages), dict(n.distances), dict(n.attributes), devices)
    return out


def two_socket_gpu_machine() -> Machine:
    rows = [{"cpu": c, "core": c % 8, "socket": (c % 8) // 4, "numa": (c % 8) // 4} for c in range(16)]
    base = Machine.from_cpu_table(rows, memory_per_numa={0: 64 * GiB, 1: 63 * GiB + 12345 * 4096},
                                  distances={0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}})
    nodes = tuple(
        NUMANode(n.id, n.cpus, n.memory_bytes, {2 * MiB: 1024, GiB: 4 * n.id}, n.distances,
                 {"toposched.io/real-capacity": f"{8 - n.id}"})
        for n in base.numa_nodes
    )
    devices = (
        Device("0000:3b:00.0", DeviceKind.GPU, 0, attributes={"resource": "nvidia.com/gpu"}),
        Device("0000:5e:00.0", DeviceKind.GPU, 1, attributes={"resource": "nvidia.com/gpu"}),
        Device("0000:d8:00.0", DeviceKind.GPU, 1, attributes={"resource": "nvidia.com/gpu"}),
        Device("0000:af:00.0", DeviceKind.INFINIBAND, 1, attributes={"resource": "rdma/hca"}),
        Device("0000:00:1f.6", DeviceKind.NIC, None),
    )
    return Machine(base.cpus, nodes, devices, attributes={"topologyManagerPolicy": "restricted"})


def epyc_like_machine() -> Machine:
    # 8 NUMA nodes (4 per socket), SMT2, plus a CPU-less memory node 8.
    rows = []
    for c in range(64):
        core = c % 32
        rows.append({"cpu": c, "core": core, "socket": core // 16, "numa": core // 4})
    dist = {a: {b: 10 if a == b else (12 if a // 4 == b // 4 else 32) for b in range(9)} for a in range(9)}
    for a in range(9):
        dist[a][8] = dist[8][a] = 10 if a == 8 else 40
    return Machine.from_cpu_table(rows, memory_per_numa=16 * GiB, distances=dist, numa_ids=[8])


def wire(nrt: NodeResourceTopology, tmp_path, suffix=".yaml") -> NodeResourceTopology:
    path = tmp_path / f"nrt{suffix}"
    data = dump_nrt(nrt)
    path.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data))
    [back] = load_nrts(path)
    return back


@pytest.mark.parametrize("build", [nfd_test_machine, two_socket_gpu_machine, epyc_like_machine])
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_machine_nrt_machine_is_lossless_for_what_nrt_carries(build, suffix, tmp_path):
    machine = build()
    nrt = nrt_from_machine(machine, node_name="worker-1", policy="single-numa-node")
    through_wire = wire(nrt, tmp_path, suffix)
    assert through_wire == nrt
    back = machine_from_nrt(through_wire)
    assert carried(back) == carried(machine)
    assert back.hostname == "worker-1"
    assert back.attributes["topologyManagerPolicy"] == "single-numa-node"
    assert {d.kind for d in back.devices} == {d.kind for d in machine.devices if "resource" in d.attributes}
    # Converting the rebuilt machine again gives the very same object.
    assert nrt_from_machine(back, node_name="worker-1", policy="single-numa-node") == nrt


def test_synthetic_cpu_numbering():
    nrt = nrt_from_machine(epyc_like_machine(), node_name="e")
    back = machine_from_nrt(nrt)
    assert [str(n.cpus) for n in back.numa_nodes] == [f"{8 * i}-{8 * i + 7}" for i in range(8)] + [""]
    assert back.threads_per_core == 1
    assert [s.numa_ids for s in back.sockets] == [(i,) for i in range(8)]
    gpu = machine_from_nrt(nrt_from_machine(two_socket_gpu_machine(), node_name="g"))
    assert [d.address for d in gpu.devices if d.numa_id == 1] == [
        "nvidia.com/gpu-node-1-0", "nvidia.com/gpu-node-1-1", "rdma/hca-node-1-0"]
    assert [d.kind for d in gpu.devices if d.numa_id == 1] == [DeviceKind.GPU, DeviceKind.GPU, DeviceKind.INFINIBAND]


def test_socket_parents_group_numa_zones():
    obj = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": "snc"},
        "zones": [
            {"name": "socket-0", "type": "Socket"},
            {"name": "socket-1", "type": "Socket"},
            {"name": "die-0", "type": "Die", "parent": "socket-1"},
            {"name": "node-0", "type": "Node", "parent": "socket-0", "resources": [_res("cpu", 2)]},
            {"name": "node-1", "type": "Node", "parent": "socket-0", "resources": [_res("cpu", 2)]},
            {"name": "node-2", "type": "Node", "parent": "die-0", "resources": [_res("cpu", 2)]},
            {"name": "node-3", "type": "Node", "resources": [_res("cpu", 2)]},
        ],
    }
    m = machine_from_nrt(parse_nrt(obj))
    assert [(s.id, s.numa_ids, s.die_ids) for s in m.sockets] == [(0, (0, 1), ()), (1, (2,), (0,)), (2, (3,), ())]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cpus=st.lists(st.integers(0, 6), min_size=1, max_size=5),
    data=st.data(),
)
def test_round_trip_property(cpus, data):
    ids = list(range(len(cpus)))
    rows, next_cpu = [], 0
    for numa_id, count in zip(ids, cpus):
        for _ in range(count):
            rows.append({"cpu": next_cpu, "core": next_cpu, "socket": 0, "numa": numa_id})
            next_cpu += 1
    far = data.draw(st.integers(11, 254))
    dist = {a: {b: 10 if a == b else far for b in ids} for a in ids}
    memory = {i: data.draw(st.integers(0, 2**40)) for i in ids}
    base = Machine.from_cpu_table(rows, memory_per_numa=memory, distances=dist, numa_ids=ids)
    pages = st.dictionaries(st.sampled_from([64 * 1024, 2 * MiB, 32 * MiB, GiB]), st.integers(0, 10_000), max_size=2)
    nodes = tuple(NUMANode(n.id, n.cpus, n.memory_bytes, data.draw(pages), n.distances) for n in base.numa_nodes)
    gpus = data.draw(st.lists(st.sampled_from(ids), max_size=4))
    devices = tuple(Device(f"gpu{i}", DeviceKind.GPU, n, attributes={"resource": "nvidia.com/gpu"})
                    for i, n in enumerate(gpus))
    machine = Machine(base.cpus, nodes, devices)
    reserved = CPUSet(data.draw(st.lists(st.integers(0, max(next_cpu - 1, 0)), max_size=3))) if next_cpu else CPUSet()
    nrt = nrt_from_machine(machine, node_name="prop", reserved_cpus=reserved)
    assert parse_nrt(json.loads(json.dumps(dump_nrt(nrt)))) == nrt
    back = machine_from_nrt(nrt)
    # Zones whose every CPU is reserved publish no cpu (NFD) unless cpu is all they would
    # publish (then it stays, allocatable 0); everything else survives.
    expected = carried(machine)
    for n in machine.numa_nodes:
        publishes_more = n.memory_bytes or n.hugepages or expected[n.id][5]
        if n.cpus and not (n.cpus - reserved) and publishes_more:
            count, *rest = expected[n.id]
            expected[n.id] = (0, *rest)
    assert carried(back) == expected


# ---- real machines ------------------------------------------------------------------------

REAL_HWLOC = ["24em64t-2n6c2t-pci.xml", "epyc-corona.xml", "knl-snc4-flat-hwloc1.xml", "192em64t-24n8c2t.xml"]
REAL_SYSFS = ["16amd64-8n2c", "nvidiagpunumanodes", "offline-cpu0-node0"]


def _check_real_round_trip(machine: Machine, *, schema: bool = True) -> None:
    gpus: dict[int, int] = {}
    for d in machine.devices:
        if d.kind == DeviceKind.GPU and d.numa_id is not None:
            gpus[d.numa_id] = gpus.get(d.numa_id, 0) + 1
    nrt = nrt_from_machine(machine, node_name="real", device_resources={"nvidia.com/gpu": gpus})
    if schema:
        validate(json.loads(json.dumps(dump_nrt(nrt))))
    back = machine_from_nrt(parse_nrt(dump_nrt(nrt)))
    assert back.numa_ids == machine.numa_ids
    for n in machine.numa_nodes:
        b = back.numa(n.id)
        assert (len(b.cpus), b.memory_bytes, dict(b.hugepages), dict(b.distances), dict(b.attributes)) == (
            len(n.cpus), n.memory_bytes, dict(n.hugepages), dict(n.distances), dict(n.attributes))
        assert sum(1 for d in back.devices if d.numa_id == n.id) == gpus.get(n.id, 0)


@pytest.mark.parametrize("name", REAL_HWLOC)
def test_real_hwloc_machines_round_trip(name):
    hwloc = pytest.importorskip("toposched.topology.hwloc")
    _check_real_round_trip(hwloc.read_hwloc_xml(shared_path("topologies", "hwloc", name)))


@pytest.mark.parametrize("name", REAL_SYSFS)
def test_real_sysfs_machines_round_trip(name):
    sysfs = pytest.importorskip("toposched.topology.sysfs")
    _check_real_round_trip(sysfs.read_sysfs(shared_path("topologies", "sysfs", name)))


@pytest.mark.parametrize("name", ["two_socket_smt", "sub_numa_clustering", "epyc_like_8numa", "gpu_node",
                                  "no_affinity_devices", "offline_cpus", "cpuless_node"])
def test_project_sysfs_fixtures_round_trip(name, tmp_path):
    sysfs = pytest.importorskip("toposched.topology.sysfs")
    fixtures = pytest.importorskip("tests.fixtures.sysfs_tree")
    root = fixtures.write_sysfs_tree(tmp_path / name, fixtures.FIXTURES[name]())
    _check_real_round_trip(sysfs.read_sysfs(root), schema=False)


# ---- CRD schema and upstream examples -----------------------------------------------------


@functools.cache
def crd_schemas() -> tuple[tuple[str, dict], ...]:
    out = []
    for crd in sorted(shared_path(*NRT_DIR).glob("*/crd.yaml")):
        for doc in yaml.safe_load_all(crd.read_text()):
            if not doc:
                continue
            for version in doc["spec"]["versions"]:
                if version["name"] == "v1alpha2":
                    out.append((str(crd), version["schema"]["openAPIV3Schema"]))
    assert len(out) == 2, "both CRD files carry a v1alpha2 schema"
    return tuple(out)


def validate(obj: dict) -> None:
    for _, schema in crd_schemas():
        jsonschema.Draft7Validator(schema).validate(obj)


@pytest.mark.parametrize("build", [nfd_test_machine, two_socket_gpu_machine, epyc_like_machine])
def test_output_validates_against_both_crd_schemas(build):
    nrt = nrt_from_machine(build(), node_name="worker-1", policy="restricted", scope="pod",
                           reserved_cpus=CPUSet([0]))
    validate(json.loads(json.dumps(dump_nrt(nrt))))


def test_schema_check_is_not_vacuous():
    bad = dump_nrt(nrt_from_machine(nfd_test_machine(), node_name="w"))
    bad["zones"][0]["resources"][0]["capacity"] = "twelve"
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)


def test_upstream_examples_parse_and_convert():
    example = shared_path(*NRT_DIR, "noderesourcetopology-api", "crd-instance-example.yaml")
    [node1] = load_nrts(example)
    assert node1.name == "node1" and node1.top_level_policies == ("SingleNUMANode",)
    assert [z.name for z in node1.zones] == ["node-0", "node-1", "node-2", "node-3"]
    assert node1.zones[0].resource("cpu") == ResourceInfo("cpu", 20_000, 15_000, 10_000)
    assert node1.zones[1].resource("vendor/nic2") == ResourceInfo("vendor/nic2", 6, 6, 6)
    m = machine_from_nrt(node1)
    assert [len(n.cpus) for n in m.numa_nodes] == [20, 30, 30, 30]
    assert [d.address for d in m.devices if d.numa_id == 1][:2] == ["vendor/nic2-node-1-0", "vendor/nic2-node-1-1"]

    for name, a_count in (("worker-node-A.yaml", [1, 2]), ("worker-node-B.yaml", [3, 0])):
        [nrt] = load_nrts(shared_path(*NRT_DIR, "scheduler-plugins", name))
        assert nrt.top_level_policies == ("SingleNUMANodeContainerLevel",)
        m = machine_from_nrt(nrt)
        assert [len(n.cpus) for n in m.numa_nodes] == [4, 4]
        per_numa = [sum(1 for d in m.devices if d.numa_id == i and d.attributes["resource"] == "example.com/deviceA")
                    for i in (0, 1)]
        assert per_numa == a_count
        # What we write back is the same object, and valid v1alpha2.
        assert parse_nrt(dump_nrt(nrt)) == nrt
        validate(dump_nrt(nrt))


# ---- reading files ------------------------------------------------------------------------


def _res(name, cap, alloc=None, avail=None):
    alloc = cap if alloc is None else alloc
    return {"name": name, "capacity": cap, "allocatable": alloc, "available": alloc if avail is None else avail}


def good_object(name="worker-a") -> dict:
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name, "labels": {"team": "hpc"}, "annotations": {"a": "b"},
                     "uid": "1234", "ownerReferences": [{"kind": "Namespace", "name": "nfd"}]},
        "topologyPolicies": ["RestrictedContainerLevel"],
        "attributes": [{"name": "topologyManagerPolicy", "value": "restricted"},
                       {"name": "topologyManagerScope", "value": "container"},
                       {"name": "topologyManagerPolicy", "value": "second-is-ignored"}],
        "zones": [
            {"name": "node-0", "type": "Node",
             "costs": [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 21}],
             "attributes": [{"name": "capacity.cpu", "value": "24"}],
             "resources": [_res("cpu", "12", "11", "9"), _res("memory", "64Gi", "60Gi", "40Gi"),
                           _res("hugepages-1Gi", "4Gi", "4Gi", "2Gi"), _res("nvidia.com/gpu", 2, 2, 1)]},
            {"name": "node-1", "type": "Node",
             "costs": [{"name": "node-0", "value": 21}, {"name": "node-1", "value": 10}],
             "resources": [_res("cpu", 12), _res("memory", "64Gi"), _res("example.com/nic", 1)]},
        ],
    }


def test_parse_keeps_everything(tmp_path):
    nrt = parse_nrt(good_object(), "nrt.yaml")
    assert nrt.labels == {"team": "hpc"} and nrt.annotations == {"a": "b"}
    assert nrt.metadata == {"uid": "1234", "ownerReferences": [{"kind": "Namespace", "name": "nfd"}]}
    assert nrt.attributes == {"topologyManagerPolicy": "restricted", "topologyManagerScope": "container"}
    assert nrt.zones[0].resource("memory") == ResourceInfo("memory", 64 * GiB, 60 * GiB, 40 * GiB)
    assert nrt.zones[0].costs == {"node-0": 10, "node-1": 21}
    assert nrt.zones[0].attributes == {"capacity.cpu": "24"}
    assert nrt.source == "nrt.yaml" and nrt.origin == "nrt.yaml: NodeResourceTopology worker-a"
    again = parse_nrt(dump_nrt(nrt))
    assert again == nrt
    m = machine_from_nrt(nrt)
    assert m.attributes["topologyManagerPolicy"] == "restricted"
    assert m.numa(0).attributes == {"capacity.cpu": "24"}
    assert dict(m.numa(0).hugepages) == {GiB: 4}
    assert m.distance(0, 1) == 21


def test_load_multi_document_yaml_lists_and_json(tmp_path):
    docs = tmp_path / "many.yaml"
    docs.write_text("---\n" + yaml.safe_dump(good_object("a")) + "---\n---\n" + yaml.safe_dump(good_object("b")))
    assert [n.name for n in load_nrts(docs)] == ["a", "b"]

    lst = tmp_path / "list.yaml"
    lst.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [good_object("c"), good_object("d")]}))
    assert [n.name for n in load_nrts(lst)] == ["c", "d"]

    typed = tmp_path / "typed.json"
    typed.write_text(json.dumps({"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopologyList",
                                 "metadata": {}, "items": [good_object("e")]}))
    assert [n.name for n in load_nrts(typed)] == ["e"]

    array = tmp_path / "array.json"
    array.write_text(json.dumps([good_object("f"), good_object("g")]))
    assert [n.name for n in load_nrts(array)] == ["f", "g"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "no NodeResourceTopology object"),
        ("---\n---\n", "no NodeResourceTopology object"),
        ("zones: [\n", "invalid YAML at line"),
        ('{"zones": ', "invalid JSON at line 1"),
        ("apiVersion: v1\nkind: List\nitems: 3\n", "needs an items list"),
    ],
)
def test_bad_files(tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(InputError, match=message) as err:
        load_nrts(path)
    assert str(path) in str(err.value)


def test_missing_file_and_duplicate_names(tmp_path):
    with pytest.raises(InputError, match="cannot read file") as err:
        load_nrts(tmp_path / "absent.yaml")
    assert "absent.yaml" in str(err.value)
    twice = tmp_path / "twice.yaml"
    twice.write_text(yaml.safe_dump(good_object()) + "---\n" + yaml.safe_dump(good_object()))
    with pytest.raises(InputError, match="two objects are named worker-a"):
        load_nrts(twice)


# ---- bad objects: one clear error naming file, object and field --------------------------


def _mutate(path_and_value):
    def apply(obj):
        for keys, value in path_and_value:
            target = obj
            for k in keys[:-1]:
                target = target[k]
            if value is _DELETE:
                del target[keys[-1]]
            else:
                target[keys[-1]] = value
        return obj

    return apply


_DELETE = object()

BAD_OBJECTS = [
    ("zone without a name", [(("zones", 1, "name"), _DELETE)], "zones[1].name", "zone name is missing"),
    ("zone with an empty name", [(("zones", 0, "name"), "")], "zones[0].name", "zone name is missing"),
    ("negative quantity", [(("zones", 0, "resources", 0, "capacity"), "-1")], "zones[0].resources[0].capacity",
     "negative"),
    ("negative integer quantity", [(("zones", 1, "resources", 2, "available"), -3)],
     "zones[1].resources[2].available", "negative"),
    ("absurd quantity", [(("zones", 0, "resources", 1, "capacity"), "100Ei")], "zones[0].resources[1].capacity",
     "absurd"),
    ("absurd exponent", [(("zones", 0, "resources", 1, "allocatable"), "1e40")], "zones[0].resources[1].allocatable",
     "absurd"),
    ("absurd in millicores", [(("zones", 0, "resources", 0, "capacity"), "10000000000000")],
     "zones[0].resources[0].capacity", "absurd"),
    ("malformed quantity", [(("zones", 0, "resources", 1, "capacity"), "64GB")], "zones[0].resources[1].capacity",
     "unknown unit"),
    ("missing allocatable", [(("zones", 0, "resources", 0, "allocatable"), _DELETE)],
     "zones[0].resources[0].allocatable", "missing"),
    ("unknown zone type", [(("zones", 0, "type"), "NUMA")], "zones[0].type", "unknown type 'NUMA'"),
    ("zone without a type", [(("zones", 1, "type"), _DELETE)], "zones[1].type", "missing"),
    ("cost naming an unknown zone", [(("zones", 0, "costs", 1, "name"), "node-7")], "zones[0].costs[1].name",
     "unknown zone 'node-7'"),
    ("negative cost", [(("zones", 0, "costs", 0, "value"), -10)], "zones[0].costs[0].value", "positive"),
    ("cost as text", [(("zones", 0, "costs", 0, "value"), "10")], "zones[0].costs[0].value", "positive"),
    ("duplicated zone", [(("zones", 1, "name"), "node-0")], "zones[1].name", "appears twice"),
    ("duplicated resource", [(("zones", 1, "resources", 1, "name"), "cpu")], "zones[1].resources[1].name",
     "listed twice"),
    ("bad hugepage size", [(("zones", 0, "resources", 2, "name"), "hugepages-big")], "zones[0].resources[2].name",
     "hugepages-big"),
    ("unknown parent", [(("zones", 0, "parent"), "socket-9")], "zones[0].parent", "unknown zone"),
    ("parent loop", [(("zones", 0, "parent"), "node-1"), (("zones", 1, "parent"), "node-0")], "zones[0].parent",
     "loops"),
    ("attribute value not text", [(("zones", 0, "attributes", 0, "value"), 24)], "zones[0].attributes[0].value",
     "string"),
    ("attribute without a name", [(("attributes", 0, "name"), _DELETE)], "attributes[0].name", "missing"),
    ("zones not a list", [(("zones",), {"node-0": {}})], "zones", "expected a list"),
    ("no zones", [(("zones",), _DELETE)], "zones", "zones is missing"),
    ("wrong kind", [(("kind",), "Node")], "kind", "is not NodeResourceTopology"),
    ("wrong version", [(("apiVersion",), "topology.node.k8s.io/v9")], "apiVersion", "v1alpha2"),
    ("policy not text", [(("topologyPolicies", 0), 7)], "topologyPolicies[0]", "string"),
    ("label not text", [(("metadata", "labels", "team"), 3)], "metadata.labels", "string"),
]


@pytest.mark.parametrize(("what", "edits", "field", "message"), BAD_OBJECTS, ids=[b[0] for b in BAD_OBJECTS])
def test_bad_object_gives_one_clear_error(tmp_path, what, edits, field, message):
    obj = _mutate(edits)(copy.deepcopy(good_object()))
    path = tmp_path / "nrt.yaml"
    path.write_text(yaml.safe_dump(obj))
    with pytest.raises(InputError, match=message) as err:
        load_nrts(path)
    assert err.value.field == field
    assert err.value.source == f"{path}: NodeResourceTopology worker-a"
    assert str(err.value).startswith(f"{path}: NodeResourceTopology worker-a: {field}: ")


def test_object_without_name_is_named_by_position(tmp_path):
    path = tmp_path / "nrt.yaml"
    obj = good_object()
    del obj["metadata"]["name"]
    path.write_text(yaml.safe_dump(good_object("ok")) + "---\n" + yaml.safe_dump(obj))
    with pytest.raises(InputError) as err:
        load_nrts(path)
    assert err.value.field == "metadata.name"
    assert err.value.source == f"{path} (document 2): NodeResourceTopology"


BAD_FOR_MACHINE = [
    ("zone name not node-N", [(("zones", 1, "name"), "numa1"), (("zones", 0, "costs", 1, "name"), "numa1"),
                              (("zones", 1, "costs", 1, "name"), "numa1")], "zones[1].name", "node-<N>"),
    ("fractional cpu", [(("zones", 0, "resources", 0, k), "1500m") for k in ("capacity", "allocatable", "available")],
     "zones[0].resources[0].capacity",
     "whole number of CPUs"),
    ("absurd cpu count", [(("zones", 0, "resources", 0, "capacity"), "1M")], "zones[0].resources[0].capacity",
     "absurd"),
    ("partial hugepage", [(("zones", 0, "resources", 2, k), "1500Mi") for k in ("capacity", "allocatable", "available")],
     "zones[0].resources[2].capacity",
     "whole number of pages"),
    ("absurd device count", [(("zones", 1, "resources", 2, "capacity"), "1G")], "zones[1].resources[2].capacity",
     "absurd"),
    ("incomplete costs", [(("zones", 1, "costs"), [{"name": "node-1", "value": 10}])], "zones[1].costs",
     "lack the Node zones node-0"),
    ("costs on one zone only", [(("zones", 1, "costs"), _DELETE)], "zones[1].costs", "has no costs"),
    ("no Node zones", [(("zones",), [{"name": "s", "type": "Socket"}])], "zones", "no zone of type Node"),
]


@pytest.mark.parametrize(("what", "edits", "field", "message"), BAD_FOR_MACHINE, ids=[b[0] for b in BAD_FOR_MACHINE])
def test_bad_object_for_a_machine(what, edits, field, message):
    nrt = parse_nrt(_mutate(edits)(copy.deepcopy(good_object())), "nrt.yaml")
    with pytest.raises(InputError, match=message) as err:
        machine_from_nrt(nrt)
    assert err.value.field == field
    assert err.value.source == "nrt.yaml: NodeResourceTopology worker-a"


def test_non_node_zone_resources_are_ignored():
    obj = good_object()
    obj["zones"].append({"name": "core-0", "type": "Core", "parent": "node-0", "resources": [_res("cpu", 2)]})
    m = machine_from_nrt(parse_nrt(obj))
    assert len(m.cpus) == 24
