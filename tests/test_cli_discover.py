"""``toposched discover``: the four output formats and clean one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from toposched.cli import app
from toposched.kubelet.description import DESCRIPTION_ATTRIBUTE, NodeDescription
from toposched.topology import CPUSet
from toposched.topology.sysfs import read_sysfs

runner = CliRunner()

GiB = 2**30


def write_sysfs_tree(root: Path) -> Path:
    """A small machine in the kernel's sysfs format: 2 sockets = 2 NUMA nodes, 2 cores x 2 threads
    each (siblings n and n+4), 16 GiB and 512 2Mi hugepages per node, one NVIDIA GPU on node 1."""
    def put(rel: str, text: str) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")

    cpu = "sys/devices/system/cpu"
    put(f"{cpu}/online", "0-7")
    put(f"{cpu}/present", "0-7")
    put(f"{cpu}/possible", "0-7")
    for c in range(8):
        core = c % 4
        socket = core // 2
        siblings = f"{core},{core + 4}"
        put(f"{cpu}/cpu{c}/topology/physical_package_id", str(socket))
        put(f"{cpu}/cpu{c}/topology/core_id", str(core % 2))
        put(f"{cpu}/cpu{c}/topology/thread_siblings_list", siblings)
        put(f"{cpu}/cpu{c}/topology/core_cpus_list", siblings)
    node = "sys/devices/system/node"
    put(f"{node}/online", "0-1")
    put(f"{node}/possible", "0-1")
    put(f"{node}/has_cpu", "0-1")
    for n in range(2):
        put(f"{node}/node{n}/cpulist", f"{2 * n}-{2 * n + 1},{2 * n + 4}-{2 * n + 5}")
        put(f"{node}/node{n}/distance", "10 21" if n == 0 else "21 10")
        put(f"{node}/node{n}/meminfo", f"Node {n} MemTotal:       {16 * 1024 * 1024} kB\nNode {n} MemFree: 1 kB")
        put(f"{node}/node{n}/hugepages/hugepages-2048kB/nr_hugepages", "512")
    gpu = "sys/bus/pci/devices/0000:3b:00.0"
    put(f"{gpu}/class", "0x030200")
    put(f"{gpu}/vendor", "0x10de")
    put(f"{gpu}/device", "0x1db4")
    put(f"{gpu}/numa_node", "1")
    put("proc/sys/kernel/hostname", "fixture-host")
    return root


HWLOC_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x000000ff" complete_cpuset="0x000000ff" allowed_cpuset="0x000000ff"
          nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
    <info name="HostName" value="xml-host"/>
    <object type="Package" os_index="0" cpuset="0x00000033" complete_cpuset="0x00000033" nodeset="0x00000001"
            complete_nodeset="0x00000001" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x00000033" complete_cpuset="0x00000033" nodeset="0x00000001"
              complete_nodeset="0x00000001" gp_index="3" local_memory="17179869184">
        <page_type size="4096" count="4194304"/>
        <page_type size="2097152" count="0"/>
      </object>
      <object type="Core" os_index="0" cpuset="0x00000011" complete_cpuset="0x00000011" nodeset="0x00000001"
              complete_nodeset="0x00000001" gp_index="4">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001"
                complete_nodeset="0x00000001" gp_index="5"/>
        <object type="PU" os_index="4" cpuset="0x00000010" complete_cpuset="0x00000010" nodeset="0x00000001"
                complete_nodeset="0x00000001" gp_index="6"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000022" complete_cpuset="0x00000022" nodeset="0x00000001"
              complete_nodeset="0x00000001" gp_index="7">
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001"
                complete_nodeset="0x00000001" gp_index="8"/>
        <object type="PU" os_index="5" cpuset="0x00000020" complete_cpuset="0x00000020" nodeset="0x00000001"
                complete_nodeset="0x00000001" gp_index="9"/>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x000000cc" complete_cpuset="0x000000cc" nodeset="0x00000002"
            complete_nodeset="0x00000002" gp_index="10">
      <object type="NUMANode" os_index="1" cpuset="0x000000cc" complete_cpuset="0x000000cc" nodeset="0x00000002"
              complete_nodeset="0x00000002" gp_index="11" local_memory="17179869184">
        <page_type size="4096" count="4194304"/>
        <page_type size="2097152" count="0"/>
      </object>
      <object type="Core" os_index="0" cpuset="0x00000044" complete_cpuset="0x00000044" nodeset="0x00000002"
              complete_nodeset="0x00000002" gp_index="12">
        <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002"
                complete_nodeset="0x00000002" gp_index="13"/>
        <object type="PU" os_index="6" cpuset="0x00000040" complete_cpuset="0x00000040" nodeset="0x00000002"
                complete_nodeset="0x00000002" gp_index="14"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000088" complete_cpuset="0x00000088" nodeset="0x00000002"
              complete_nodeset="0x00000002" gp_index="15">
        <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002"
                complete_nodeset="0x00000002" gp_index="16"/>
        <object type="PU" os_index="7" cpuset="0x00000080" complete_cpuset="0x00000080" nodeset="0x00000002"
                complete_nodeset="0x00000002" gp_index="17"/>
      </object>
    </object>
  </object>
  <distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="os">
    <indexes length="4">0 1 </indexes>
    <u64values length="12">10 21 21 10 </u64values>
  </distances2>
</topology>
"""

NRT_OBJECT = {
    "apiVersion": "topology.node.k8s.io/v1alpha2",
    "kind": "NodeResourceTopology",
    "metadata": {"name": "worker-7"},
    "zones": [
        {"name": f"node-{n}", "type": "Node",
         "costs": [{"name": "node-0", "value": 10 if n == 0 else 21},
                   {"name": "node-1", "value": 21 if n == 0 else 10}],
         "resources": [{"name": "cpu", "capacity": "4", "allocatable": "4", "available": "3"},
                       {"name": "memory", "capacity": "16Gi", "allocatable": "16Gi", "available": "16Gi"},
                       {"name": "hugepages-2Mi", "capacity": "1Gi", "allocatable": "1Gi", "available": "1Gi"}]
                      + ([{"name": "nvidia.com/gpu", "capacity": 1, "allocatable": 1, "available": 1}] if n else [])}
        for n in (0, 1)
    ],
    "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
}


@pytest.fixture
def sysfs_root(tmp_path) -> Path:
    pytest.importorskip("toposched.topology.sysfs")
    return write_sysfs_tree(tmp_path / "root")


@pytest.fixture
def nrt_file(tmp_path) -> Path:
    path = tmp_path / "worker-7.yaml"
    path.write_text(yaml.safe_dump(NRT_OBJECT))
    return path


def run(*args: str):
    return runner.invoke(app, ["discover", *args])


# ---- output formats ----------------------------------------------------------------------


def test_table_from_sysfs(sysfs_root):
    result = run("--sysfs", str(sysfs_root))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "host: fixture-host" in out and "sockets: 2" in out and "NUMA nodes: 2" in out
    assert "cores: 4" in out and "CPUs: 8 online" in out and "SMT: 2 thread(s) per core" in out
    assert "0-1,4-5" in out and "2-3,6-7" in out
    assert "16 GiB" in out and "512×2Mi" in out and "10 21" in out and "21 10" in out
    assert "0000:3b:00.0" in out and "gpu" in out


def test_json_from_sysfs(sysfs_root):
    result = run("--sysfs", str(sysfs_root), "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"sockets", "numa_nodes", "cores", "cpus", "devices"} <= set(data)
    assert [n["cpus"] for n in data["numa_nodes"]] == ["0-1,4-5", "2-3,6-7"]
    assert len(data["cores"]) == 4 and len(data["cpus"]) == 8
    assert data["devices"][0]["numa"] == 1 and data["devices"][0]["kind"] == "gpu"


def test_yaml_equals_json(sysfs_root):
    as_json = json.loads(run("--sysfs", str(sysfs_root), "-o", "json").stdout)
    result = run("--sysfs", str(sysfs_root), "-o", "yaml")
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout) == as_json


def test_nrt_from_sysfs(sysfs_root):
    result = run("--sysfs", str(sysfs_root), "-o", "nrt", "--policy", "single-numa-node", "--scope", "pod")
    assert result.exit_code == 0, result.output
    obj = yaml.safe_load(result.stdout)
    assert obj["apiVersion"] == "topology.node.k8s.io/v1alpha2" and obj["kind"] == "NodeResourceTopology"
    assert obj["metadata"]["name"] == "fixture-host"
    assert obj["topologyPolicies"] == ["SingleNUMANodePodLevel"]
    # What the agent publishes with no pod running: NFD's attributes, then the node description.
    attributes = {a["name"]: a["value"] for a in obj["attributes"]}
    assert list(attributes)[:3] == ["topologyManagerPolicy", "topologyManagerScope", "cpuManagerPolicy"]
    assert (attributes["topologyManagerPolicy"], attributes["topologyManagerScope"]) == ("single-numa-node", "pod")
    description = NodeDescription.from_json(attributes[DESCRIPTION_ATTRIBUTE])
    assert description.machine.online == read_sysfs(sysfs_root).online
    assert description.config.cpu_manager_policy == "static"
    zone0 = obj["zones"][0]
    assert zone0["name"] == "node-0" and zone0["type"] == "Node"
    assert zone0["costs"] == [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 21}]
    assert {r["name"]: r["capacity"] for r in zone0["resources"]} == {
        "cpu": "4", "memory": str(16 * GiB), "hugepages-2Mi": str(512 * 2 * 2**20)}


def test_node_name_option_wins(sysfs_root):
    result = run("--sysfs", str(sysfs_root), "-o", "nrt", "--node-name", "worker-3")
    assert yaml.safe_load(result.stdout)["metadata"]["name"] == "worker-3"


def test_hwloc_xml(tmp_path):
    pytest.importorskip("toposched.topology.hwloc")
    xml = tmp_path / "machine.xml"
    xml.write_text(HWLOC_XML)
    result = run("--hwloc", str(xml), "-o", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [n["cpus"] for n in data["numa_nodes"]] == ["0-1,4-5", "2-3,6-7"]
    assert len(data["sockets"]) == 2 and len(data["cores"]) == 4
    table = run("--hwloc", str(xml))
    assert table.exit_code == 0 and "SMT: 2 thread(s) per core" in table.stdout
    nrt = yaml.safe_load(run("--hwloc", str(xml), "-o", "nrt", "--node-name", "x").stdout)
    assert [z["name"] for z in nrt["zones"]] == ["node-0", "node-1"]


@pytest.mark.parametrize("fmt", ["table", "json", "yaml", "nrt"])
def test_every_format_from_an_nrt_file(nrt_file, fmt):
    result = run("--nrt", str(nrt_file), "-o", fmt)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    if fmt == "table":
        assert "host: worker-7" in result.stdout and "512×2Mi" in result.stdout
        assert "nvidia.com/gpu-node-1-0" in result.stdout
    elif fmt == "json":
        data = json.loads(result.stdout)
        assert [n["cpus"] for n in data["numa_nodes"]] == ["0-3", "4-7"]
        assert data["attributes"] == {"topologyManagerPolicy": "single-numa-node"}
    elif fmt == "yaml":
        assert yaml.safe_load(result.stdout)["hostname"] == "worker-7"
    else:
        obj = yaml.safe_load(result.stdout)
        assert obj["metadata"]["name"] == "worker-7"
        gpu = [r for r in obj["zones"][1]["resources"] if r["name"] == "nvidia.com/gpu"]
        assert gpu == [{"name": "nvidia.com/gpu", "capacity": "1", "allocatable": "1", "available": "1"}]


# ---- errors: one line on stderr, non-zero exit, no traceback ------------------------------


def _one_clean_line(result) -> str:
    assert result.exit_code != 0
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_missing_hwloc_file(tmp_path):
    line = _one_clean_line(run("--hwloc", str(tmp_path / "nope.xml")))
    assert str(tmp_path / "nope.xml") in line and "no such file" in line


def test_missing_sysfs_root(tmp_path):
    line = _one_clean_line(run("--sysfs", str(tmp_path / "nowhere")))
    assert "nowhere" in line


def test_sysfs_root_that_is_not_a_tree(tmp_path):
    pytest.importorskip("toposched.topology.sysfs")
    (tmp_path / "empty").mkdir()
    line = _one_clean_line(run("--sysfs", str(tmp_path / "empty")))
    assert "empty" in line


def test_two_sources_at_once(tmp_path, nrt_file):
    line = _one_clean_line(run("--sysfs", str(tmp_path), "--nrt", str(nrt_file)))
    assert "at most one" in line


def test_bad_nrt_names_file_object_and_field(tmp_path):
    obj = json.loads(json.dumps(NRT_OBJECT))
    obj["zones"][1]["resources"][1]["capacity"] = "-16Gi"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(obj))
    line = _one_clean_line(run("--nrt", str(path), "-o", "json"))
    assert line.startswith("toposched discover: ")
    assert f"{path}: NodeResourceTopology worker-7: zones[1].resources[1].capacity:" in line
    assert "negative" in line


def test_file_with_two_objects(tmp_path):
    second = dict(NRT_OBJECT, metadata={"name": "worker-8"})
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(NRT_OBJECT) + "---\n" + yaml.safe_dump(second))
    line = _one_clean_line(run("--nrt", str(path)))
    assert "worker-7, worker-8" in line


def test_bad_policy_for_nrt_output(nrt_file):
    line = _one_clean_line(run("--nrt", str(nrt_file), "-o", "nrt", "--policy", "strict"))
    assert "policy" in line and "strict" in line


def test_unknown_output_format(nrt_file):
    result = run("--nrt", str(nrt_file), "-o", "xml")
    assert result.exit_code != 0 and "Traceback" not in result.output


@pytest.mark.shared_data
@pytest.mark.parametrize("xml,pod,expect", [
    # g4dn.metal: 2 of the 4 GPUs on one NUMA node, CPUs of that node.
    ("g4dnmetal.xml", {"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": "2"}, None),
    # DGX-2: two GPUs under one PCIe switch when the pod requires it.
    ("nvidiaDGX2.xml", {"cpu": "1", "memory": "8Gi", "nvidia.com/gpu": "2"}, "pcie:required"),
])
def test_discover_nrt_piped_to_explain(tmp_path, xml, pod, expect):
    from tests.conftest import shared_path
    from toposched.devices import DeviceInventory
    from toposched.topology.hwloc import read_hwloc_xml

    path = shared_path("topologies", "hwloc", xml)
    nrt = run("--hwloc", str(path), "-o", "nrt", "--node-name", "n", "--policy", "single-numa-node")
    assert nrt.exit_code == 0, nrt.output
    annotations = {"toposched.io/device-scope": expect} if expect else {}
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod",
                                        "metadata": {"name": "train", "namespace": "default", "annotations": annotations},
                                        "spec": {"schedulerName": "toposched", "containers": [
                                            {"name": "main", "image": "x", "resources": {"limits": pod}}]}}))
    result = CliRunner().invoke(app, ["explain", "--pod", str(pod_file), "--nrt", "-", "-o", "json"], input=nrt.stdout)
    assert result.exit_code == 0, result.output
    explained = json.loads(result.stdout)
    assert explained["selected"] == "n" and explained["nodes"][0]["view"] == "exact"
    [container] = explained["placement"]["containers"].values()
    gpus = container["devices"]["nvidia.com/gpu"]
    inventory = DeviceInventory.from_machine(read_hwloc_xml(path))
    [numa] = container["numaNodes"]
    assert len(gpus) == 2 and {inventory.device(g).numa_id for g in gpus} == {numa}
    machine = read_hwloc_xml(path)
    assert machine.numa_of(CPUSet.parse(container["cpuset"])) == {numa}
    if expect:
        assert inventory.locality(*gpus) == "pcie"


def _description(result) -> NodeDescription:
    assert result.exit_code == 0, result.output
    attributes = {a["name"]: a["value"] for a in yaml.safe_load(result.stdout)["attributes"]}
    return NodeDescription.from_json(attributes[DESCRIPTION_ATTRIBUTE])


def test_nrt_output_reserves_cpus_for_the_static_policy_as_a_kubelet_must(sysfs_root):
    # The kubelet refuses the static CPU manager with nothing reserved: by default the first core's threads.
    result = run("--sysfs", str(sysfs_root), "-o", "nrt")
    assert _description(result).config.reserved_system_cpus == CPUSet([0, 4])
    zone0 = yaml.safe_load(result.stdout)["zones"][0]
    assert {r["name"]: (r["capacity"], r["allocatable"]) for r in zone0["resources"]}["cpu"] == ("4", "2")
    chosen = run("--sysfs", str(sysfs_root), "-o", "nrt", "--reserved-cpus", "3,7")
    assert _description(chosen).config.reserved_system_cpus == CPUSet([3, 7])
    none = run("--sysfs", str(sysfs_root), "-o", "nrt", "--cpu-manager-policy", "none")
    assert _description(none).config.reserved_system_cpus is None


@pytest.mark.parametrize(("cpus", "words"), [("8-9", "not online"), ("zero", "--reserved-cpus")])
def test_reserved_cpus_the_machine_lacks_or_that_do_not_parse(sysfs_root, cpus, words):
    line = _one_clean_line(run("--sysfs", str(sysfs_root), "-o", "nrt", "--reserved-cpus", cpus))
    assert words in line and "--reserved-cpus" in line


def test_a_kubelet_config_the_kubelet_would_refuse_is_refused(sysfs_root, tmp_path):
    path = tmp_path / "kubelet.yaml"
    path.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\n")
    line = _one_clean_line(run("--sysfs", str(sysfs_root), "-o", "nrt", "--kubelet-config", str(path)))
    assert str(path) in line and "cpuManagerPolicy" in line and "greater than zero" in line
