"""The node agent's NodeResourceTopology: zones, quantities, attributes and the pods fingerprint.

The object's shape is node-feature-discovery's (pkg/resourcemonitor/noderesourcesaggregator.go,
pkg/nfd-topology-updater); the fingerprint is the one its pod resources scanner computes
(pkg/resourcemonitor/podresourcesscanner.go: ``podfingerprint`` over the namespace/name of every
pod, method ``all``), published under the attribute names of
k8stopologyawareschedwg/podfingerprint (``nodeTopologyPodsFingerprint``,
``nodeTopologyPodsFingerprintMethod``) and its annotation ``topology.node.k8s.io/fingerprint``.
Machine: tests/fixtures/sysfs_tree.py ``two_socket_smt`` (NUMA 0 = CPUs 0-3,8-11, NUMA 1 =
4-7,12-15, 16 GiB and 512 x 2 MiB hugepages each).
"""

from __future__ import annotations

import functools
import json

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import shared_path
from tests.fixtures.sysfs_tree import two_socket_smt, write_sysfs_tree
from tests.kube.agent.agent_fakes import NODE, UID_A, UID_B, make_pod, placement, write_kubelet_dir
from toposched.errors import InputError
from toposched.kube.agent.kubelet_files import read_kubelet_files
from toposched.kubelet.config import KubeletConfig
from toposched.kubelet.cpu_state import CPUManagerCheckpoint
from toposched.kubelet.description import ALLOCATIONS_ATTRIBUTE, DESCRIPTION_ATTRIBUTE, NodeAllocations, NodeDescription
from toposched.kubelet.hints import TopologyHint
from toposched.kubelet.memory_manager import StaticMemoryPolicy
from toposched.kubelet.memory_state import parse_memory_state, write_memory_state
from toposched.node_report import node_report, reserved_cpus
from toposched.scheduler.cluster import kubelet_config_from_nrt
from toposched.scheduler.fingerprint import pods_fingerprint
from toposched.topology import CPUSet
from toposched.topology.nrt import parse_nrt
from toposched.topology.sysfs import read_sysfs
from toposched.workload.pod import Pod

GiB, MiB = 1 << 30, 1 << 20


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    return read_sysfs(write_sysfs_tree(tmp_path_factory.mktemp("sysfs"), two_socket_smt()))


def zones(obj):
    """{zone: {resource: (capacity, allocatable, available)}} with quantities as ints."""
    return {
        z["name"]: {r["name"]: tuple(int(r[k]) for k in ("capacity", "allocatable", "available"))
                    for r in z["resources"]}
        for z in obj["zones"]
    }


def attributes(obj):
    return {a["name"]: a["value"] for a in obj["attributes"]}


def guaranteed(name, uid, cpu, memory):
    resources = {"cpu": cpu, "memory": memory}
    container = {"name": "app", "resources": {"requests": resources, "limits": resources}}
    return Pod.from_dict({"metadata": {"name": name, "namespace": "default", "uid": uid},
                          "spec": {"containers": [container]}})


def test_static_node(tmp_path, machine):
    kubelet = write_kubelet_dir(tmp_path)
    # What the kubelet's memory manager writes after giving pod a 2 GiB on NUMA node 0.
    cfg = read_kubelet_files(kubelet).config
    policy = StaticMemoryPolicy.from_config(machine, cfg)
    policy.allocate(guaranteed("a", UID_A, "2", "2Gi"), "app", TopologyHint(frozenset({0}), True))
    write_memory_state(kubelet / "memory_manager_state", policy.checkpoint())
    (kubelet / "cpu_manager_state").write_text(
        '{"policyName":"static","defaultCpuSet":"0-1,4-15",'
        f'"entries":{{"{UID_A}":{{"app":"2-3"}}}},"checksum":0}}')
    files = read_kubelet_files(kubelet)
    pods = [
        make_pod("a", UID_A),
        make_pod("b", UID_B, annotation=placement({"app": {"cpuset": "4-5", "numaNodes": [1]}}, numa=[1])),
        make_pod("done", "11111111-2222-4333-8444-555555555555", phase="Succeeded"),
        make_pod("elsewhere", "11111111-2222-4333-8444-666666666666", node="worker-2"),
    ]
    obj = node_report(machine, files.config, node_name=NODE, cpu_state=files.cpu_state,
                      memory_state=files.memory_state, pods=pods)

    hp = 512 * 2 * MiB
    assert zones(obj) == {
        "node-0": {
            "cpu": (8, 6, 4),  # CPUs 0 and 8 reserved, 2-3 pinned by the kubelet
            "hugepages-1Gi": (0, 0, 0),
            "hugepages-2Mi": (hp, hp, hp),
            "memory": (16 * GiB, 16 * GiB - 1124 * MiB, 16 * GiB - 1124 * MiB - hp - 2 * GiB),
        },
        "node-1": {
            "cpu": (8, 8, 6),  # 4-5 held by pod b's placement
            "hugepages-1Gi": (0, 0, 0),
            "hugepages-2Mi": (hp, hp, hp),
            "memory": (16 * GiB, 15 * GiB, 15 * GiB - hp),
        },
    }
    fingerprint = pods_fingerprint([("default", "a"), ("default", "b")])
    attrs = attributes(obj)
    allocations = NodeAllocations.from_json(attrs.pop(ALLOCATIONS_ATTRIBUTE))
    # Pod a's CPUs come from the kubelet's checkpoint, pod b's (not admitted yet) from its placement.
    assert {uid: {n: str(c.cpus) for n, c in cs.items()} for uid, cs in allocations.pods.items()} == {
        UID_A: {"app": "2-3"}, UID_B: {"app": "4-5"}}
    assert allocations.pods[UID_A]["app"].memory == (((0,), "memory", 2 * GiB),)
    description = NodeDescription.from_json(attrs.pop(DESCRIPTION_ATTRIBUTE))
    assert description.reserved_cpus == CPUSet([0, 8]) and description.config == files.config
    assert attrs == {
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerScope": "pod",
        "cpuManagerPolicy": "static",
        "memoryManagerPolicy": "Static",
        "nodeTopologyPodsFingerprint": fingerprint,
        "nodeTopologyPodsFingerprintMethod": "all",
    }
    assert obj["metadata"] == {"name": NODE, "annotations": {"topology.node.k8s.io/fingerprint": fingerprint}}
    assert obj["topologyPolicies"] == ["SingleNUMANodePodLevel"]
    assert (obj["apiVersion"], obj["kind"]) == ("topology.node.k8s.io/v1alpha2", "NodeResourceTopology")


def test_the_scheduler_reads_back_the_kubelet_it_describes(tmp_path, machine):
    cfg = read_kubelet_files(write_kubelet_dir(tmp_path)).config
    nrt = parse_nrt(node_report(machine, cfg, node_name=NODE))
    seen = kubelet_config_from_nrt(nrt, machine, {})
    assert (seen.topology_manager_policy, seen.topology_manager_scope) == ("single-numa-node", "pod")
    assert (seen.cpu_manager_policy, seen.memory_manager_policy) == ("static", "Static")
    assert seen.reserved_memory == {0: {"memory": 1124 * MiB}, 1: {"memory": GiB}}
    assert len(seen.reserved_system_cpus) == 2 and seen.reserved_system_cpus <= machine.numa(0).cpus


def test_node_without_resource_managers(machine):
    obj = node_report(machine, KubeletConfig(), node_name=NODE, pods=[])
    hp = 512 * 2 * MiB
    for zone in ("node-0", "node-1"):
        assert zones(obj)[zone]["cpu"] == (8, 8, 8)
        # Without the memory manager nothing is reserved per NUMA node; hugepages are not regular memory.
        assert zones(obj)[zone]["memory"] == (16 * GiB, 16 * GiB, 16 * GiB - hp)
    attrs = attributes(obj)
    policies = (attrs["cpuManagerPolicy"], attrs["memoryManagerPolicy"], attrs["topologyManagerPolicy"])
    assert policies == ("none", "None", "none")
    assert attrs["nodeTopologyPodsFingerprint"] == pods_fingerprint([])


def test_reserved_cpus_without_reserved_system_cpus(machine):
    # kube-reserved + system-reserved = 1.5 CPUs: the static policy keeps 2, one whole core.
    cfg = KubeletConfig(cpu_manager_policy="static", kube_reserved={"cpu": 1000}, system_reserved={"cpu": 500})
    assert reserved_cpus(machine, cfg) == CPUSet([0, 8])
    assert zones(node_report(machine, cfg, node_name=NODE))["node-0"]["cpu"] == (8, 6, 6)
    # The none policy reserves no CPU set.
    assert reserved_cpus(machine, KubeletConfig(kube_reserved={"cpu": 1000})) == CPUSet()


def test_a_zone_whose_cpus_are_all_reserved_publishes_no_cpu(machine):
    cfg = KubeletConfig(cpu_manager_policy="static", reserved_system_cpus=machine.numa(1).cpus)
    assert "cpu" not in zones(node_report(machine, cfg, node_name=NODE))["node-1"]


def test_a_memory_state_that_does_not_follow_from_its_blocks_is_refused(tmp_path, machine):
    cfg = read_kubelet_files(write_kubelet_dir(tmp_path)).config
    state = parse_memory_state(
        '{"policyName":"Static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":'
        '{"total":1,"systemReserved":0,"allocatable":1,"reserved":0,"free":1}},"cells":[0]}},"checksum":0}')
    with pytest.raises(InputError) as err:
        node_report(machine, cfg, node_name=NODE, memory_state=state)
    assert err.value.source == "memory_manager_state"


@functools.cache
def crd_schemas():
    out = []
    for crd in sorted(shared_path("k8s-objects", "noderesourcetopology").glob("*/crd.yaml")):
        for doc in yaml.safe_load_all(crd.read_text()):
            for version in (doc or {}).get("spec", {}).get("versions", []):
                if version["name"] == "v1alpha2":
                    out.append(version["schema"]["openAPIV3Schema"])
    return out


def test_the_report_validates_against_the_crds(tmp_path, machine):
    cfg = read_kubelet_files(write_kubelet_dir(tmp_path)).config
    obj = json.loads(json.dumps(node_report(machine, cfg, node_name=NODE, pods=[make_pod("a", UID_A)])))
    assert crd_schemas()
    for schema in crd_schemas():
        jsonschema.Draft7Validator(schema).validate(obj)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pinned=st.lists(st.sets(st.integers(0, 15), min_size=1, max_size=4), max_size=3),
    placed=st.sets(st.integers(0, 15), max_size=6),
    reserved=st.sets(st.integers(0, 15), max_size=4),
)
def test_available_cpus_are_the_allocatable_ones_nobody_holds(machine, pinned, placed, reserved):
    cfg = KubeletConfig(reserved_system_cpus=CPUSet(reserved) if reserved else None)
    entries = {f"{i:08d}-0000-4000-8000-000000000000": {"c": CPUSet(cpus)} for i, cpus in enumerate(pinned)}
    state = CPUManagerCheckpoint("static", CPUSet(), entries)
    annotation = placement({"app": {"cpuset": str(CPUSet(placed))}})
    obj = node_report(machine, cfg, node_name=NODE, cpu_state=state, pods=[make_pod("p", UID_A, annotation=annotation)])
    held = CPUSet(placed).mask
    for cpus in pinned:
        held |= CPUSet(cpus).mask
    for node in machine.numa_nodes:
        resources = zones(obj)[f"node-{node.id}"]
        allocatable = node.cpus - CPUSet(reserved)
        if not allocatable:
            assert "cpu" not in resources
            continue
        cap, alloc, avail = resources["cpu"]
        assert (cap, alloc) == (len(node.cpus), len(allocatable))
        assert avail == len(allocatable - CPUSet.from_mask(held))
        assert 0 <= avail <= alloc <= cap
