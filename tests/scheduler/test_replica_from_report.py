"""The scheduler's kubelet replica built from a node's published report alone.

The agent publishes the node description (toposched.kubelet.description) in its NRT; the
scheduler must build from it the same replica it would build from the hardware itself: CPU ids,
SMT siblings, sockets, NUMA memory and hugepages, devices with ids, NUMA node and PCIe switch,
the kubelet's configuration and reserved CPUs. Checked on every real machine of
../shared/data/topologies under several kubelet configurations; and the report passes the CRD
schema with nothing pruned. Reports without a description give count-only nodes; a description
that cannot be used makes that node count-only, naming the node and the field, and no other.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import SHARED_DATA, shared_path
from tests.deploy.test_deploy_crd import schema
from tests.fixtures.big_machines import big_gpu_server
from tests.scheduler.held import assert_node_sums_match_the_ledger
from toposched.errors import InputError
from toposched.kubelet.config import KubeletConfig
from toposched.kubelet.description import ALLOCATIONS_ATTRIBUTE, DESCRIPTION_ATTRIBUTE, NodeDescription
from toposched.node_report import node_report
from toposched.scheduler import Cluster, NodeSpec
from toposched.topology import CPUSet, Device, DeviceKind, Machine
from toposched.topology.hwloc import read_hwloc_xml
from toposched.topology.nrt import dump_nrt, parse_nrt
from toposched.topology.sysfs import read_sysfs
from toposched.workload import Container, Pod

GiB, MiB = 1 << 30, 1 << 20
TOPOLOGIES = SHARED_DATA / "topologies"


def _real_machines() -> list[tuple[str, Path]]:
    if not TOPOLOGIES.exists():
        return []
    found = [(f"hwloc/{p.name}", p) for p in sorted((TOPOLOGIES / "hwloc").glob("*.xml"))]
    found += [(f"sysfs/{p.name}", p) for p in sorted((TOPOLOGIES / "sysfs").iterdir())
              if p.is_dir() and (p / "sys").exists() or (p.is_dir() and (p / "devices").exists())]
    return found


def _read(path: Path) -> Machine:
    return read_hwloc_xml(path) if path.suffix == ".xml" else read_sysfs(path)


def _configs(machine: Machine) -> dict[str, KubeletConfig]:
    # The kubelet refuses a NUMA policy on more than 8 NUMA nodes unless told the limit.
    many = {"max-allowable-numa-nodes": str(len(machine.numa_nodes))} if len(machine.numa_nodes) > 8 else {}
    configs = {
        "none": KubeletConfig(),
        "single-numa-node/static/kube-reserved": KubeletConfig(
            topology_manager_policy="single-numa-node", topology_manager_options=many, cpu_manager_policy="static",
            kube_reserved={"cpu": 1500}),
        "restricted-pod/static/full-pcpus-only": KubeletConfig(
            topology_manager_policy="restricted", topology_manager_scope="pod",
            topology_manager_options={"prefer-closest-numa-nodes": "true", **many}, cpu_manager_policy="static",
            cpu_manager_options={"full-pcpus-only": "true"},
            reserved_system_cpus=machine.siblings(min(machine.online))),
    }
    first = next((n for n in machine.numa_nodes if n.memory_bytes >= 2 * GiB), None)
    if first is not None:
        configs["best-effort/static/memory-Static"] = KubeletConfig(
            topology_manager_policy="best-effort", topology_manager_options=many, cpu_manager_policy="static",
            kube_reserved={"cpu": 1000},
            memory_manager_policy="Static", reserved_memory={first.id: {"memory": GiB}},
            system_reserved={"memory": GiB - 100 * MiB}, eviction_memory=100 * MiB)
    return configs


def pruned(obj, node_schema, path="") -> list[str]:
    """The fields of ``obj`` a structural schema would prune (unknown properties), as paths."""
    out = []
    if isinstance(obj, dict) and node_schema.get("type") == "object" and "properties" in node_schema:
        for key, value in obj.items():
            if key not in node_schema["properties"]:
                out.append(f"{path}.{key}")
            else:
                out += pruned(value, node_schema["properties"][key], f"{path}.{key}")
    elif isinstance(obj, list) and "items" in node_schema:
        for i, item in enumerate(obj):
            out += pruned(item, node_schema["items"], f"{path}[{i}]")
    return out


def _replicas(machine: Machine, config: KubeletConfig, name: str = "n"):
    """(replica from the hardware, replica from the published report, the report as sent)."""
    direct = Cluster()
    direct.set_node(NodeSpec(name), machine=machine, kubelet_config=config)
    sent = json.loads(json.dumps(node_report(machine, config, node_name=name)))
    from_report = Cluster()
    from_report.update_report(parse_nrt(sent), now=0.0)
    return direct.nodes[name], from_report.nodes[name], sent


def assert_same_replica(direct, built) -> None:
    assert built.replica_source == "description" and not built.count_only and not built.broken, built.degraded
    a, b = direct.model, built.model
    assert a.machine.cpus == b.machine.cpus  # ids, cores (siblings), sockets, NUMA, dies, caches
    assert a.machine.offline_cpus == b.machine.offline_cpus
    for x, y in zip(a.machine.numa_nodes, b.machine.numa_nodes, strict=True):
        assert (x.id, x.cpus, x.memory_bytes, dict(x.hugepages), dict(x.distances)) == \
               (y.id, y.cpus, y.memory_bytes, dict(y.hugepages), dict(y.distances))
    assert a.config == b.config
    assert (a.cpu.reserved_cpus if a.cpu else None) == (b.cpu.reserved_cpus if b.cpu else None)
    assert direct.inventory.devices == built.inventory.devices  # ids, resource, kind, NUMA, switch, path, model
    assert a.available() == b.available() and a.allocatable == b.allocatable


# Without ../shared one case stands for them all and skips saying why (an empty set would skip unexplained).
REAL = _real_machines() or [("real-machines", None)]


@pytest.mark.shared_data
@pytest.mark.parametrize("label,path", REAL, ids=[label for label, _ in REAL])
def test_the_replica_from_the_report_is_the_replica_from_the_hardware(label, path):
    machine = _read(path if path is not None else shared_path("topologies"))
    validator = jsonschema.Draft7Validator(schema("v1alpha2"))
    for name, config in _configs(machine).items():
        direct, built, sent = _replicas(machine, config)
        assert_same_replica(direct, built)
        validator.validate(sent)
        assert pruned(sent, schema("v1alpha2")) == [], name
        assert dump_nrt(parse_nrt(sent)) == sent  # the object round-trips through our reader and writer


def test_the_real_machines_are_there_in_ci():
    if not TOPOLOGIES.exists():
        pytest.skip(f"real data not available: {TOPOLOGIES}")
    assert len(REAL) >= 20


def test_a_384_thread_report_with_16_gpus_and_8_nics_is_compact_and_exact():
    machine = big_gpu_server()
    config = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                           kube_reserved={"cpu": 2000})
    direct, built, sent = _replicas(machine, config)
    assert_same_replica(direct, built)
    assert len(json.dumps(sent)) < 100 * 1024
    counts = built.inventory.counts()
    assert counts["nvidia.com/gpu"] == 16 and sum(counts.values()) == 24
    assert len(built.inventory.switches("nvidia.com/gpu")) == 8


# ---- count-only and bad descriptions --------------------------------------------------------


def small_machine() -> Machine:
    rows = [{"cpu": c + t * 8, "core": c, "socket": c // 4, "numa": c // 4} for t in range(2) for c in range(8)]
    machine = Machine.from_cpu_table(rows, memory_per_numa=32 * GiB)
    return machine.with_devices([Device("0000:3b:00.0", DeviceKind.GPU, 0, 0x10DE, 0x1EB8, 0x030200,
                                        ("pci0000:3a", "0000:3a:00.0"))])


CONFIG = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                       reserved_system_cpus=CPUSet([0, 8]))


def guaranteed(name: str, cpus: int, gpus: int = 0) -> Pod:
    limits = {"cpu": cpus * 1000, "memory": GiB}
    if gpus:
        limits["nvidia.com/gpu"] = gpus
    return Pod(name, uid=name, containers=(Container("c", requests=limits, limits=limits),),
               scheduler_name="toposched")


def report_with(attribute_value: str | None, name: str = "n") -> dict:
    sent = json.loads(json.dumps(node_report(small_machine(), CONFIG, node_name=name)))
    for attr in sent["attributes"]:
        if attr["name"] == DESCRIPTION_ATTRIBUTE:
            attr["value"] = attribute_value if attribute_value is not None else attr["value"]
    sent["attributes"] = [a for a in sent["attributes"] if a["value"] is not None]
    return sent


def description_of(sent: dict) -> dict:
    return json.loads(next(a["value"] for a in sent["attributes"] if a["name"] == DESCRIPTION_ATTRIBUTE))


def test_exact_placements_on_a_described_node():
    from toposched.scheduler import Scheduler
    from toposched.scheduler.profile_setup import load_profile

    cluster = Cluster()
    cluster.update_report(parse_nrt(report_with(None)), now=0.0)
    decision = Scheduler(cluster, load_profile("toposched")).schedule(guaranteed("p", 2, gpus=1), now=0.0)
    assert decision.node == "n"
    container = decision.placement.containers["c"]
    # Whole cores next to the reserved CPUs 0 and 8 (CPU 1 and its sibling 9), the GPU by its id.
    assert container.cpuset == CPUSet([1, 9]) and container.devices == {"nvidia.com/gpu": ("0000:3b:00.0",)}


@pytest.mark.parametrize("mangle,field", [
    (lambda d: json.dumps(d)[:-40], f"{DESCRIPTION_ATTRIBUTE}"),  # truncated
    (lambda d: json.dumps({**d, "version": "v9"}), f"{DESCRIPTION_ATTRIBUTE}.version"),
    (lambda d: json.dumps({**d, "devices": {"nvidia.com/gpu": [{"id": "0000:3b:00.0", "numa": 7}]}}),
     f"{DESCRIPTION_ATTRIBUTE}.devices.nvidia.com/gpu[0].numa"),
    (lambda d: json.dumps({**d, "numa": d["numa"][:1]}), f"{DESCRIPTION_ATTRIBUTE}.numa"),  # contradicts the zones
    (lambda d: json.dumps({**d, "reservedCPUs": "0-1"}), f"{DESCRIPTION_ATTRIBUTE}.reservedCPUs"),
    (lambda d: json.dumps({**d, "kubelet": {**d["kubelet"], "cpuManagerPolicy": "dynamic"}}),
     f"{DESCRIPTION_ATTRIBUTE}.kubelet.cpuManagerPolicy"),
])
def test_a_bad_description_makes_that_node_count_only_and_says_why(mangle, field):
    good = report_with(None, "good")
    bad = report_with(mangle(description_of(report_with(None))), "bad")
    cluster = Cluster()
    cluster.update_report(parse_nrt(good), now=0.0)
    cluster.update_report(parse_nrt(bad, source="nrt.yaml"), now=0.0)
    record = cluster.nodes["bad"]
    assert record.count_only and record.model is not None and not record.broken
    assert "NodeResourceTopology bad" in record.degraded and field in record.degraded, record.degraded
    assert cluster.nodes["good"].replica_source == "description"


def test_a_device_count_that_contradicts_the_description_is_refused():
    sent = report_with(None)
    zone = sent["zones"][0]
    [gpu] = [r for r in zone["resources"] if r["name"] == "nvidia.com/gpu"]
    gpu["capacity"] = gpu["allocatable"] = gpu["available"] = "2"
    cluster = Cluster()
    cluster.update_report(parse_nrt(sent), now=0.0)
    assert cluster.nodes["n"].count_only
    assert "zones[0].resources" in cluster.nodes["n"].degraded and "nvidia.com/gpu" in cluster.nodes["n"].degraded


def test_count_only_placements_carry_numa_nodes_and_no_ids():
    from toposched.scheduler import Scheduler
    from toposched.scheduler.profile_setup import load_profile

    sent = report_with(None)
    sent["attributes"] = [a for a in sent["attributes"] if a["name"] not in (DESCRIPTION_ATTRIBUTE, ALLOCATIONS_ATTRIBUTE)]
    cluster = Cluster()
    cluster.update_report(parse_nrt(sent), now=0.0)
    scheduler = Scheduler(cluster, load_profile("toposched"))
    decision = scheduler.schedule(guaranteed("p", 2, gpus=1), now=0.0)
    assert decision.node == "n" and cluster.nodes["n"].count_only
    container = decision.placement.containers["c"]
    assert not container.cpuset and not container.devices and container.numa_nodes == {0}
    assert scheduler.explain(guaranteed("q", 1))["nodes"][0]["view"] == "count-only"


def test_count_only_assumes_the_memory_manager_pins_memory():
    """NFD does not publish the memory manager's policy: assume Static, so no pod passes that it would refuse."""
    from toposched.scheduler import Scheduler
    from toposched.scheduler.profile_setup import load_profile

    sent = report_with(None)
    sent["attributes"] = [a for a in sent["attributes"] if a["name"] not in (
        DESCRIPTION_ATTRIBUTE, ALLOCATIONS_ATTRIBUTE, "memoryManagerPolicy")]
    cluster = Cluster()
    cluster.update_report(parse_nrt(sent), now=0.0)
    assert cluster.nodes["n"].model.config.memory_manager_policy == "Static"
    big = Pod("big", uid="big", containers=(Container("c", requests={"cpu": 1000, "memory": 40 * GiB},
                                                      limits={"cpu": 1000, "memory": 40 * GiB}),))
    assert Scheduler(cluster, load_profile("toposched")).schedule(big, now=0.0).node is None  # no NUMA node has 40Gi


def test_a_changed_description_rebuilds_the_replica_and_keeps_reservations():
    from toposched.scheduler import Scheduler
    from toposched.scheduler.profile_setup import load_profile

    cluster = Cluster()
    cluster.update_report(parse_nrt(report_with(None)), now=0.0)
    scheduler = Scheduler(cluster, load_profile("toposched"))
    first = scheduler.schedule(guaranteed("p", 2), now=0.0)
    changed = KubeletConfig(topology_manager_policy="restricted", cpu_manager_policy="static",
                            reserved_system_cpus=CPUSet([0, 8]))
    cluster.update_report(parse_nrt(json.loads(json.dumps(node_report(small_machine(), changed, node_name="n")))),
                          now=1.0)
    record = cluster.nodes["n"]
    assert record.policy == "restricted"
    assert "p" in record.model.admissions and record.pods["p"].assumed  # the in-flight reservation survived
    assert record.pods["p"].placement.cpuset == first.placement.cpuset
    second = scheduler.schedule(guaranteed("q", 2), now=1.0)
    assert not (second.placement.cpuset & first.placement.cpuset)
    assert_node_sums_match_the_ledger(cluster)  # the rebuilt replica re-placed the pods


def test_a_description_decodes_to_what_was_encoded():
    machine = big_gpu_server()
    config = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                           kube_reserved={"cpu": 2000})
    sent = node_report(machine, config, node_name="n")
    text = next(a["value"] for a in sent["attributes"] if a["name"] == DESCRIPTION_ATTRIBUTE)
    description = NodeDescription.from_json(text)
    assert description.to_json() == text
    with pytest.raises(InputError, match="not JSON"):
        NodeDescription.from_json(text[:100])


def test_the_replica_takes_the_cpus_and_devices_the_kubelet_reports():
    """A pod bound by another scheduler: the replica guessed its ids, the report says what the kubelet gave."""
    from toposched.kubelet import KubeletNode
    from toposched.scheduler import Scheduler
    from toposched.scheduler.profile_setup import load_profile

    machine = small_machine().with_devices([
        Device("0000:3b:00.0", DeviceKind.GPU, 0, 0x10DE, 0x1EB8, 0x030200, ("pci0000:3a", "0000:3a:00.0")),
        Device("0000:3c:00.0", DeviceKind.GPU, 0, 0x10DE, 0x1EB8, 0x030200, ("pci0000:3a", "0000:3a:01.0"))])
    cluster = Cluster()
    cluster.update_report(parse_nrt(json.loads(json.dumps(node_report(machine, CONFIG, node_name="n")))), now=0.0)
    other = guaranteed("other", 2, gpus=1)
    guessed = cluster.add_bound_pod(other, "n", now=0.0)
    # The real kubelet admitted another pod first (since gone), so it gave "other" different ids.
    kubelet = KubeletNode(machine, CONFIG, name="n", device_plugins=cluster.nodes["n"].inventory.device_plugins())
    kubelet.admit(guaranteed("gone", 2, gpus=1))
    got = kubelet.admit(other).containers["c"]
    kubelet.release("gone")
    assert got.cpuset != guessed.containers["c"].cpuset and got.devices != guessed.containers["c"].devices
    pods = [{"metadata": {"name": "other", "namespace": "default", "uid": "other"}, "spec": {"nodeName": "n"},
             "status": {"phase": "Running"}}]
    assignments = {"other": {"c": {r: sorted(ids) for r, ids in got.devices.items()}}}
    report = node_report(machine, CONFIG, node_name="n", cpu_state=kubelet.cpu.to_checkpoint(), pods=pods,
                         device_assignments=assignments)
    cluster.update_report(parse_nrt(json.loads(json.dumps(report))), now=1.0)
    record = cluster.nodes["n"]
    adopted = record.pods["other"].placement.containers["c"]
    assert adopted.cpuset == got.cpuset and set(adopted.devices["nvidia.com/gpu"]) == set(got.devices["nvidia.com/gpu"])
    assert record.model.cpu.state.get("other", "c") == got.cpuset
    assert record.model.available() == kubelet.available()  # the replica is the kubelet again
    assert_node_sums_match_the_ledger(cluster)  # the report's cpusets replaced the guessed ones
    nxt = Scheduler(cluster, load_profile("toposched")).schedule(guaranteed("next", 2, gpus=1), now=2.0)
    assert not (nxt.placement.cpuset & got.cpuset)
    assert not set(nxt.placement.containers["c"].devices["nvidia.com/gpu"]) & set(got.devices["nvidia.com/gpu"])


def test_a_replica_rebuilt_with_other_reserved_cpus_moves_the_pods_and_what_the_node_holds():
    """A new kubelet configuration rebuilds the replica and re-admits the node's pods, which may get
    other CPUs: what the ledger keeps of the held CPUs follows them."""
    machine = small_machine()
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=CONFIG)
    pod = guaranteed("p", 2)
    cluster.add_bound_pod(pod, "n", now=0.0)
    before = cluster.nodes["n"].pods["p"].placement.cpuset
    cores = {machine.cpu(c).core_id for c in before}
    moved = dataclasses.replace(CONFIG, reserved_system_cpus=CPUSet(c for c in machine.online if machine.cpu(c).core_id in cores))
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=moved)
    after = cluster.nodes["n"].pods["p"].placement.cpuset
    assert after and not (after & before)
    assert_node_sums_match_the_ledger(cluster)



@pytest.mark.parametrize("known_by", ["report", "machine"])
def test_a_pod_the_rebuilt_replica_moves_to_another_zone_takes_from_that_zone(known_by):
    """A new configuration that reserves a pod's whole NUMA node (in a new report, or given directly):
    the rebuilt replica re-admits the pod on the other node, and what the ledger says the pod took
    (and no report counts yet) moves with it."""
    machine = small_machine()
    numa0 = CPUSet(c for c in machine.online if machine.cpu(c).numa_id == 0)
    moved = dataclasses.replace(CONFIG, reserved_system_cpus=numa0)

    def configure(config: KubeletConfig, now: float) -> None:
        if known_by == "report":
            cluster.update_report(parse_nrt(json.loads(json.dumps(node_report(machine, config, node_name="n")))), now=now)
        else:
            cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)

    cluster = Cluster()
    configure(CONFIG, 0.0)
    cluster.add_bound_pod(guaranteed("p", 2), "n", now=0.0)
    record = cluster.nodes["n"]
    assert record.pods["p"].usage == {0: {"cpu": 2000}}
    configure(moved, 1.0)
    assert record.pods["p"].placement.numa_nodes == {1}
    assert record.pods["p"].usage == {1: {"cpu": 2000}}
    assert record.unreflected == {1: {"cpu": 2000}}  # no report counts the pod yet
    assert_node_sums_match_the_ledger(cluster)
