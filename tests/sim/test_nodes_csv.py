"""Node lists: the Alibaba GPU trace's openb_node_list_*.csv and our node CSV (toposched.sim.nodes_csv).

Expected counts of the real node list are the ones its README in ../shared/data states (model
mix and GPUs per node); GPU memory per model is the FGD simulator's table
(hkust-adsl/kubernetes-scheduler-simulator, pkg/type/open-gpu-share/utils/const.go), as
toposched.devices.share.GPU_MODEL_MEMORY holds it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_path
from toposched.devices.share import GPU_MODEL_MEMORY
from toposched.errors import InputError
from toposched.kubelet import KubeletNode
from toposched.sim.model import GPU_MODEL_LABEL, SimNode
from toposched.sim.nodes_csv import (
    load_nodes,
    read_alibaba_nodes,
    read_node_csv,
    trace_kubelet,
    trace_machine,
)
from toposched.topology import DeviceKind
from toposched.workload import Container, Pod

GI = 2**30
MI = 2**20
TRACE = ("traces", "alibaba-cluster-trace-gpu-v2023")
HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"


def kubelet_of(node: SimNode) -> KubeletNode:
    plugins = {r: list(d) for r, d in (node.device_plugins or {}).items()}
    return KubeletNode(node.machine, node.kubelet, device_plugins=plugins)


def write(tmp_path: Path, text: str, name: str = "nodes.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---- the layout rule ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cpus", "gpus", "numa", "threads", "cores_per_numa", "gpus_per_numa"),
    [
        (8, 1, 1, 2, [4], [1]),  # small GPU VM: one NUMA node
        (16, 2, 2, 2, [4, 4], [1, 1]),  # two GPUs: one per socket
        (32, 0, 1, 2, [16], [0]),  # 32 CPUs, no GPU: one socket
        (64, 0, 2, 2, [16, 16], [0, 0]),  # 64 CPUs: two sockets
        (82, 8, 2, 2, [21, 20], [4, 4]),  # 41 cores: the extra core on NUMA 0
        (128, 1, 2, 2, [32, 32], [1, 0]),  # one GPU on NUMA 0
        (9, 0, 1, 1, [9], [0]),  # an odd CPU count has no SMT
        (2, 2, 1, 2, [1], [2]),  # never more NUMA nodes than cores
    ],
)
def test_trace_layout_rule(cpus: int, gpus: int, numa: int, threads: int, cores_per_numa: list[int],
                           gpus_per_numa: list[int]) -> None:
    machine = trace_machine(cpus, 64 * GI, gpus=gpus, gpu_model="T4")
    assert len(machine.numa_nodes) == numa
    assert machine.threads_per_core == threads
    assert [len(n.cpus) // threads for n in machine.numa_nodes] == cores_per_numa
    assert [sum(1 for d in machine.devices if d.numa_id == n) for n in machine.numa_ids] == gpus_per_numa
    assert all(not n.hugepages for n in machine.numa_nodes)
    if numa == 2:
        assert machine.distance(0, 1) == 21


@settings(max_examples=60, deadline=None)
@given(cpus=st.integers(1, 256), memory_mib=st.integers(0, 2**21), gpus=st.integers(0, 16),
       model=st.sampled_from(sorted(GPU_MODEL_MEMORY) + ["G2"]))
def test_trace_layout_keeps_every_total(cpus: int, memory_mib: int, gpus: int, model: str) -> None:
    machine = trace_machine(cpus, memory_mib * MI, gpus=gpus, gpu_model=model)
    assert len(machine.cpus) == cpus
    assert sum(n.memory_bytes for n in machine.numa_nodes) == memory_mib * MI
    gpu_devices = machine.devices_of(DeviceKind.GPU)
    assert len(gpu_devices) == gpus
    assert len({d.address for d in gpu_devices}) == gpus
    per_numa = [sum(1 for d in gpu_devices if d.numa_id == n) for n in machine.numa_ids]
    assert max(per_numa) - min(per_numa) <= 1
    cores = [len(n.cpus) for n in machine.numa_nodes]
    assert max(cores) - min(cores) <= machine.threads_per_core
    assert all(d.memory_bytes == GPU_MODEL_MEMORY.get(model) for d in gpu_devices)


def test_undisclosed_model_memory_can_be_given() -> None:
    machine = trace_machine(96, 384 * GI, gpus=8, gpu_model="G2", gpu_memory={"G2": 32 * GI})
    assert {d.memory_bytes for d in machine.devices} == {32 * GI}
    assert {d.memory_bytes for d in trace_machine(96, 384 * GI, gpus=8, gpu_model="G2").devices} == {None}


# ---- the real node lists ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def all_nodes() -> list[SimNode]:
    return read_alibaba_nodes(shared_path(*TRACE, "openb_node_list_all_node.csv"))


def test_real_node_list_counts(all_nodes: list[SimNode]) -> None:
    assert len(all_nodes) == 1523
    assert Counter(n.gpu_model for n in all_nodes) == {
        "G2": 549, "T4": 404, None: 310, "P100": 134, "V100M16": 55, "G3": 39, "V100M32": 30, "A10": 2}
    gpus = Counter(len((n.device_plugins or {}).get("nvidia.com/gpu", ())) for n in all_nodes)
    assert gpus == {8: 617, 2: 518, 0: 310, 4: 54, 1: 24}
    assert len({n.name for n in all_nodes}) == 1523
    assert all(n.labels.get(GPU_MODEL_LABEL) == n.gpu_model for n in all_nodes if n.gpu_model)


def test_real_node_allocatable_is_the_trace_capacity(all_nodes: list[SimNode]) -> None:
    by_name = {n.name: n for n in all_nodes}
    rows = shared_path(*TRACE, "openb_node_list_all_node.csv").read_text().splitlines()[1:]
    checked = set()
    for line in rows:
        sn, cpu_milli, memory_mib, gpu, model = line.split(",")
        if (cpu_milli, memory_mib, gpu, model) in checked:
            continue
        checked.add((cpu_milli, memory_mib, gpu, model))
        allocatable = kubelet_of(by_name[sn]).allocatable
        assert allocatable["cpu"] == int(cpu_milli)
        assert allocatable["memory"] == int(memory_mib) * MI
        assert allocatable.get("nvidia.com/gpu", 0) == int(gpu)
        assert allocatable["pods"] == 1001
    assert len(checked) == 27  # the distinct node shapes of the trace


def test_real_gpu_node_list_and_shared_machines() -> None:
    nodes = read_alibaba_nodes(shared_path(*TRACE, "openb_node_list_gpu_node.csv"))
    assert len(nodes) == 1213
    assert all(n.gpu_model for n in nodes)
    assert len({id(n.machine) for n in nodes}) == len({(len(n.machine.cpus), n.gpu_model,
                                                        n.machine.numa(0).memory_bytes,
                                                        len(n.machine.devices)) for n in nodes})


def test_trace_kubelet_is_the_papers_cluster() -> None:
    config = trace_kubelet()
    assert config.topology_manager_policy == "none" and config.cpu_manager_policy == "none"
    assert config.eviction_memory == 0 and config.max_pods == 1001


# ---- bad Alibaba node lists -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "line", "field", "message"),
    [
        ("n1,8000,32768,1,T4\nn2,8000,32768,-1,T4\n", 3, "gpu", "-1 is negative"),
        ("n1,8000,32768,1.5,T4\n", 2, "gpu", "not a non-negative integer"),
        ("n1,8000,32768,one,T4\n", 2, "gpu", "not a non-negative integer"),
        ("n1,8000,32768,1,H100\n", 2, "model", "unknown GPU model 'H100'"),
        ("n1,8000,32768,1,\n", 2, "model", "unknown GPU model ''"),
        ("n1,8000,32768,0,T4\n", 2, "model", "no GPU"),
        ("n1,8500,32768,0,\n", 2, "cpu_milli", "whole number of CPUs"),
        ("n1,8000,32768,0,\nn1,8000,32768,0,\n", 3, "sn", "listed twice"),
        ("n1,8000,32768,0\n", 2, None, "4 cells for 5 columns"),
    ],
)
def test_bad_alibaba_rows_name_file_line_and_column(tmp_path: Path, rows: str, line: int, field: str | None,
                                                    message: str) -> None:
    path = write(tmp_path, HEADER + rows)
    with pytest.raises(InputError, match=message) as err:
        read_alibaba_nodes(path)
    assert err.value.source == f"{path}:{line}"
    assert err.value.field == field


@pytest.mark.parametrize(
    ("header", "field", "message"),
    [
        ("sn,cpu_milli,memory_mib,gpu,model,rack\n", "rack", "unknown column 'rack'"),
        ("sn,cpu_milli,memory_mib,model\n", "gpu", "the column 'gpu' is missing"),
        ("sn,cpu_milli,cpu_milli,memory_mib,gpu,model\n", "header", "columns repeat"),
    ],
)
def test_bad_alibaba_header(tmp_path: Path, header: str, field: str, message: str) -> None:
    path = write(tmp_path, header)
    with pytest.raises(InputError, match=message) as err:
        read_alibaba_nodes(path)
    assert err.value.source == f"{path}:1"
    assert err.value.field == field


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read file"):
        read_alibaba_nodes(tmp_path / "absent.csv")
    with pytest.raises(InputError, match="empty"):
        read_alibaba_nodes(write(tmp_path, ""))


def test_small_alibaba_fixture(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "a,96000,393216,8,V100M32\nb,32000,131072,0,\n\n")
    a, b = read_alibaba_nodes(path)
    assert a.gpu_model == "V100M32" and b.gpu_model is None
    assert [len(n.cpus) for n in a.machine.numa_nodes] == [48, 48]
    assert {d.memory_bytes for d in a.machine.devices} == {GPU_MODEL_MEMORY["V100M32"]}
    assert b.device_plugins is None and len(b.machine.numa_nodes) == 1
    assert a.profile == "alibaba-openb"


# ---- our node CSV -------------------------------------------------------------------------------


def test_our_node_csv(tmp_path: Path) -> None:
    path = write(tmp_path, (
        "name,cpus,memory,count,numa,gpus,gpu_model,rdma_nics,hugepages_1Gi,hugepages_2Mi,topology_manager_policy,"
        "cpu_enforcement\n"
        "cpu,64,256Gi,3,4,,,,4,512,,agent\n"
        "gpu,96,768Gi,,,8,A100,4,,,best-effort,\n"
    ))
    nodes = read_node_csv(path)
    assert [n.name for n in nodes] == ["cpu-0001", "cpu-0002", "cpu-0003", "gpu"]
    cpu, gpu = nodes[0], nodes[3]
    assert len(cpu.machine.numa_nodes) == 4 and len(cpu.machine.sockets) == 2
    assert cpu.machine.numa(3).hugepages == {GI: 4, 2 * MI: 512}
    assert cpu.kubelet.topology_manager_policy == "single-numa-node" and cpu.cpu_enforcement == "agent"
    assert gpu.kubelet.topology_manager_policy == "best-effort"
    assert {r: len(d) for r, d in (gpu.device_plugins or {}).items()} == {"nvidia.com/gpu": 8, "rdma/hca": 4}
    assert gpu.labels[GPU_MODEL_LABEL] == "A100"
    admission = kubelet_of(cpu).admit(_guaranteed(4, 8 * GI))
    assert admission.admitted and len(admission.numa_nodes()) == 1


def _guaranteed(cpus: int, memory: int) -> Pod:
    return Pod("p", uid="p", containers=(Container("main", limits={"cpu": cpus * 1000, "memory": memory}),))


@pytest.mark.parametrize(
    ("text", "line", "field", "message"),
    [
        ("name,cpus,memory,colour\na,8,8Gi,red\n", 1, "colour", "unknown column"),
        ("name,cpus\na,8\n", 1, "memory", "is missing"),
        ("name,cpus,memory,count\na,8,8Gi,-2\n", 2, "count", "negative"),
        ("name,cpus,memory,count\na,8,8Gi,two\n", 2, "count", "not a non-negative integer"),
        ("name,cpus,memory,gpus,gpu_model\na,8,8Gi,1,Z9\n", 2, "model", "unknown GPU model"),
        ("name,cpus,memory,gpus\na,8,8Gi,1\n", 2, "gpu_model", "needs a gpu_model"),
        ("name,cpus,memory\na,8,eight\n", 2, "memory", "not a number"),
        ("name,cpus,memory\na,7,8Gi\nb,8,\n", 3, "memory", "empty"),
        ("name,cpus,memory,threads_per_core\na,9,8Gi,2\n", 2, "cpus", "multiple of 2"),
        ("name,cpus,memory,numa\na,8,8Gi,0\n", 2, "numa", "at least one"),
        ("name,cpus,memory,topology_manager_policy\na,8,8Gi,strict\n", 2, "topologyManagerPolicy", "unknown value"),
        ("name,cpus,memory,cpu_enforcement\na,8,8Gi,nobody\n", 2, "cpu_enforcement", "unknown value"),
        ("name,cpus,memory,count\na,8,8Gi,2\na-0002,8,8Gi,1\n", 3, "name", "listed twice"),
    ],
)
def test_bad_node_csv_rows(tmp_path: Path, text: str, line: int, field: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError, match=message) as err:
        read_node_csv(path)
    assert err.value.source == f"{path}:{line}"
    assert err.value.field == field


def test_load_nodes_tells_the_formats_apart(tmp_path: Path) -> None:
    alibaba = write(tmp_path, HEADER + "a,8000,32768,1,T4\n", "openb.csv")
    ours = write(tmp_path, "name,cpus,memory\nb,8,16Gi\n", "ours.csv")
    spec = write(tmp_path, "nodes: [{profile: vm-2numa, count: 2}]\n", "cluster.yaml")
    assert [n.profile for n in load_nodes(alibaba)] == ["alibaba-openb"]
    assert [n.profile for n in load_nodes(ours)] == ["csv:ours.csv"]
    assert [n.name for n in load_nodes(spec)] == ["node-0001", "node-0002"]
