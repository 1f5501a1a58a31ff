"""The Alibaba GPU trace's pod lists as simulated pods (toposched.sim.traces).

Expected figures of the real lists are the ones the trace's README in ../shared/data states
(8,152 pods; QoS LS 4647 / BE 3398 / Burstable 100 / Guaranteed 7; num_gpu 0:1088, 1:6989,
2:16, 4:15, 8:44; 2,388 pods with a gpu_spec in gpuspec33). GPU shares are checked against
Koordinator's reading of them as toposched.devices.share implements it (koordinator-sh/
koordinator, pkg/scheduler/plugins/deviceshare/utils.go): each trace pod's request must read
back as exactly its ``num_gpu`` x ``gpu_milli``.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import shared_path
from toposched.devices.share import GPU_CORE, GPU_MEMORY_RATIO, NVIDIA_GPU, pod_gpu_request
from toposched.errors import InputError
from toposched.sim.model import SimPod
from toposched.sim.traces import KOORDINATOR_QOS_LABEL, TRACE_PHASE_ANNOTATION, read_alibaba_pods
from toposched.workload import BEST_EFFORT, BURSTABLE, GUARANTEED

TRACE = ("traces", "alibaba-cluster-trace-gpu-v2023")
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
MI = 2**20


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pods.csv"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def default_pods() -> list[SimPod]:
    return read_alibaba_pods(shared_path(*TRACE, "openb_pod_list_default.csv"))


def test_default_trace_counts(default_pods: list[SimPod]) -> None:
    assert len(default_pods) == 8152
    qos = Counter(p.pod.labels.get(KOORDINATOR_QOS_LABEL) for p in default_pods)
    assert qos == {"LS": 4647, "BE": 3398, None: 107}
    assert Counter(p.pod.qos_class for p in default_pods) == {BURSTABLE: 8145, GUARANTEED: 7}
    gpus = Counter(0 if (r := pod_gpu_request(p.pod)) is None else r.count for p in default_pods)
    assert gpus == {0: 1088, 1: 6989, 2: 16, 4: 15, 8: 44}
    shared = sum(1 for p in default_pods if GPU_CORE in p.pod.effective_requests())
    assert shared == 3078
    phases = Counter(p.pod.annotations[TRACE_PHASE_ANNOTATION] for p in default_pods)
    assert phases == {"Running": 5193, "Failed": 1870, "Pending": 897, "Succeeded": 192}
    assert [p.arrival for p in default_pods] == sorted(p.arrival for p in default_pods)
    assert all(p.owner == f"job/{p.pod.name}" and p.pod.uid == p.pod.name for p in default_pods)


def test_default_trace_rows_map_exactly(default_pods: list[SimPod]) -> None:
    """Every row: CPU, memory, GPU request and times as the trace gives them."""
    by_name = {p.pod.name: p for p in default_pods}
    with open(shared_path(*TRACE, "openb_pod_list_default.csv"), newline="") as fh:
        for row in csv.DictReader(fh):
            sim = by_name[row["name"]]
            requests = sim.pod.effective_requests()
            assert requests.get("cpu", 0) == int(row["cpu_milli"])
            assert requests.get("memory", 0) == int(row["memory_mib"]) * MI
            request = pod_gpu_request(sim.pod)
            if row["gpu_milli"] == "0":
                assert request is None
            else:
                assert (request.count, request.milli_on(None)) == (int(row["num_gpu"]), int(row["gpu_milli"]))
                assert request.shared == (row["gpu_milli"] != "1000")
            start = row["scheduled_time"] or row["creation_time"]
            assert sim.arrival == float(row["creation_time"])
            assert sim.duration == float(row["deletion_time"]) - float(start)


def test_gpuspec_becomes_gpu_models() -> None:
    pods = read_alibaba_pods(shared_path(*TRACE, "openb_pod_list_gpuspec33.csv"))
    constrained = [p for p in pods if p.gpu_models]
    assert len(constrained) == 2388
    models = Counter(p.gpu_models for p in constrained)
    assert models[("T4",)] == 1291
    assert models[("V100M16", "V100M32")] == 141 + 22  # "V100M16|V100M32|V100M32" repeats a model


def test_multigpu_files_without_times_arrive_in_file_order_and_stay() -> None:
    pods = read_alibaba_pods(shared_path(*TRACE, "openb_pod_list_multigpu20.csv"))
    assert len(pods) == 8324
    assert [p.arrival for p in pods[:3]] == [0.0, 1.0, 2.0]
    assert all(p.duration is None and not p.pod.annotations and not p.pod.labels for p in pods)
    assert pods[0].pod.name == "openb-pod-0000"


# ---- the mapping on fixtures ------------------------------------------------------------------


FIXTURE = HEADER + (
    "w,16000,32768,8,1000,,Guaranteed,Running,10,110,20\n"
    "s,2500,1024,1,455,T4|P100,LS,Running,5,50,\n"
    "c,1000,0,0,0,,BE,Pending,5,8,\n"
    "b,4000,2048,2,1000,,Burstable,Succeeded,0,100,0\n"
)


def test_mapping_of_each_kind(tmp_path: Path) -> None:
    pods = read_alibaba_pods(write(tmp_path, FIXTURE))
    assert [p.pod.name for p in pods] == ["b", "s", "c", "w"]  # by arrival, file order among ties
    b, s, c, w = pods
    assert w.pod.qos_class == GUARANTEED
    assert dict(w.pod.containers[0].limits) == {"cpu": 16000, "memory": 32 * 2**30, NVIDIA_GPU: 8}
    assert (w.arrival, w.duration) == (10.0, 90.0)
    assert s.pod.qos_class == BURSTABLE and s.pod.labels == {KOORDINATOR_QOS_LABEL: "LS"}
    assert s.pod.effective_requests() == {"cpu": 2500, "memory": 1024 * MI, GPU_CORE: 46, GPU_MEMORY_RATIO: 46}
    assert not {"cpu", "memory"} & set(s.pod.containers[0].limits)
    assert s.gpu_models == ("T4", "P100")
    assert (s.arrival, s.duration) == (5.0, 45.0)  # never scheduled: deletion - creation
    assert c.pod.effective_requests() == {"cpu": 1000}  # 0 MiB asks no memory
    assert c.pod.annotations[TRACE_PHASE_ANNOTATION] == "Pending"
    assert b.pod.labels == {} and b.pod.qos_class == BURSTABLE
    assert b.pod.effective_requests()[NVIDIA_GPU] == 2


def test_ls_as_guaranteed_and_bare_pods(tmp_path: Path) -> None:
    pods = read_alibaba_pods(write(tmp_path, FIXTURE), guaranteed=("LS", "Guaranteed"), owned=False)
    by_name = {p.pod.name: p for p in pods}
    assert by_name["s"].pod.qos_class == GUARANTEED
    assert by_name["c"].pod.qos_class == BURSTABLE
    assert all(p.owner is None for p in pods)
    with pytest.raises(InputError, match="unknown trace QoS"):
        read_alibaba_pods(write(tmp_path, FIXTURE), guaranteed=("LSR",))


def test_best_effort_class_has_no_requests_only_when_the_row_asks_nothing(tmp_path: Path) -> None:
    pods = read_alibaba_pods(write(tmp_path, HEADER + "z,0,0,0,0,,BE,Running,0,1,0\n"))
    assert pods[0].pod.qos_class == BEST_EFFORT


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ("x,1000,10,-1,1000,,LS,Running,0,1,0", "num_gpu", "-1 is negative"),
        ("x,1000,10,1,-5,,LS,Running,0,1,0", "gpu_milli", "negative"),
        ("x,1e3,10,0,0,,LS,Running,0,1,0", "cpu_milli", "not a non-negative integer"),
        ("x,1000,ten,0,0,,LS,Running,0,1,0", "memory_mib", "not a non-negative integer"),
        ("x,1000,10,2,500,,LS,Running,0,1,0", "gpu_milli", "whole ones"),
        ("x,1000,10,1,1500,,LS,Running,0,1,0", "gpu_milli", "more than one GPU"),
        ("x,1000,10,0,300,,LS,Running,0,1,0", "num_gpu", "inconsistent"),
        ("x,1000,10,1,500,H100,LS,Running,0,1,0", "gpu_spec", "unknown GPU model 'H100'"),
        ("x,1000,10,0,0,,LSR,Running,0,1,0", "qos", "unknown QoS class"),
        ("x,1000,10,0,0,,LS,Evicted,0,1,0", "pod_phase", "unknown phase"),
        ("x,1000,10,0,0,,LS,Running,soon,1,0", "creation_time", "not a number"),
        ("x,1000,10,0,0,,LS,Running,-3,1,0", "creation_time", "negative"),
        ("x,1000,10,0,0,,LS,Running,,1,0", "creation_time", "empty"),
        ("x,1000,10,0,0,,LS,Running,10,5,10", "deletion_time", "before it started"),
        ("x,1000,10,0,0,,LS,Running,10,50,5", "scheduled_time", "before its creation"),
        (",1000,10,0,0,,LS,Running,0,1,0", "name", "no name"),
    ],
)
def test_bad_rows_name_file_line_and_column(tmp_path: Path, row: str, field: str, message: str) -> None:
    path = write(tmp_path, HEADER + "ok,1000,10,0,0,,LS,Running,0,1,0\n" + row + "\n")
    with pytest.raises(InputError, match=message) as err:
        read_alibaba_pods(path)
    assert err.value.source == f"{path}:3"
    assert err.value.field == field


def test_bad_headers_and_repeated_names(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown column 'priority'") as err:
        read_alibaba_pods(write(tmp_path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli,priority\n"))
    assert (err.value.source, err.value.field) == (f"{tmp_path / 'pods.csv'}:1", "priority")
    with pytest.raises(InputError, match="'num_gpu' is missing"):
        read_alibaba_pods(write(tmp_path, "name,cpu_milli,memory_mib,gpu_milli\n"))
    with pytest.raises(InputError, match="listed twice") as err:
        read_alibaba_pods(write(tmp_path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,0,0\na,1,1,0,0\n"))
    assert err.value.source.endswith(":3")
