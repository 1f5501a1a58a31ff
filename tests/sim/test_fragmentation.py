"""GPU fragmentation of a simulated cluster over a run (toposched.sim.fragmentation).

The definition is the FGD paper's (Weng et al., ATC '23; hkust-adsl/kubernetes-scheduler-simulator
``pkg/utils/frag.go``), computed by ``toposched.devices.fgd.fragmentation``, whose upstream test
tables live in tests/devices/test_fgd.py. Here: that the simulator feeds it the node's true free
GPUs (shares and GPUs the kubelet holds whole), that measuring only the nodes that changed gives
the full recomputation's answer, and that the target workload holds the workload's GPU pods.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.devices.fgd import MILLI, NodeBatch, TargetWorkload, Task, fragmentation
from toposched.devices.share import GPU_CORE, GPU_MEMORY_RATIO, NVIDIA_GPU
from toposched.sim.contenders import contender
from toposched.sim.engine import SimConfig, Simulation
from toposched.sim.fragmentation import ClusterGPUs, gpu_target_workload
from toposched.sim.hardware import device_plugins, sim_node
from toposched.sim.metrics import run_metrics
from toposched.sim.model import SimPod
from toposched.sim.nodes_csv import trace_kubelet, trace_machine
from toposched.sim.truth import NodeTruth
from toposched.workload import Container, Pod

GI = 2**30


def _node(name: str, gpus: int = 2, model: str = "T4"):
    machine = trace_machine(16, 64 * GI, gpus=gpus, gpu_model=model)
    return sim_node(name, machine, trace_kubelet(), plugins=device_plugins(machine), gpu_model=model)


def _share(name: str, percent: int, cpu: int = 1000) -> Pod:
    return Pod(name, uid=name, containers=(Container("main", requests={"cpu": cpu, "memory": GI},
                                                     limits={GPU_CORE: percent, GPU_MEMORY_RATIO: percent}),))


def _whole(name: str, gpus: int) -> Pod:
    return Pod(name, uid=name, containers=(Container("main", requests={"cpu": 1000}, limits={NVIDIA_GPU: gpus}),))


def test_half_a_gpu_taken_leaves_half_a_gpu_a_whole_gpu_pod_cannot_use():
    truth = NodeTruth(_node("n1"))
    whole_gpu_pods = TargetWorkload([Task(cpu=1000, gpu_milli=MILLI, num_gpu=1)], [1.0])
    gpus = ClusterGPUs([truth], whole_gpu_pods)
    assert gpus.capacity == 2 * MILLI
    assert gpus.measure() == (0, 0.0)  # an idle node: every idle GPU fits a whole-GPU pod
    assert truth.admit(_share("s1", 50), None, 0.0).admitted
    assert gpus.measure() == (500, 500.0)  # the other half of GPU 0 is fragmented for that workload
    half_gpu_pods = TargetWorkload([Task(cpu=1000, gpu_milli=500, num_gpu=1)], [1.0])
    assert ClusterGPUs([truth], half_gpu_pods).measure() == (500, 0.0)


def test_a_gpu_the_kubelet_gave_whole_is_not_idle():
    truth = NodeTruth(_node("n1"))
    assert truth.admit(_whole("w1", 1), None, 0.0).admitted
    view = truth.gpu_view()
    assert sorted(view.gpu_free) == [0, MILLI] and view.gpu_model == "T4"
    assert ClusterGPUs([truth], None).measure() == (MILLI, None)


def test_the_target_workload_is_the_gpu_pods_with_their_models():
    pods = [SimPod(_share("a", 50), 0.0), SimPod(_share("b", 50), 1.0), SimPod(_whole("c", 2), 2.0, gpu_models=("T4",)),
            SimPod(Pod("cpu-only", uid="cpu-only", containers=(Container("main", requests={"cpu": 500}),)), 3.0)]
    workload = gpu_target_workload(pods)
    assert set(workload.tasks) == {Task(cpu=1000, memory=GI, gpu_milli=500, num_gpu=1),
                                   Task(cpu=1000, gpu_milli=MILLI, num_gpu=2, gpu_models=frozenset({"T4"}))}
    assert sorted(workload.popularity) == [1 / 3, 2 / 3]
    assert gpu_target_workload(pods[3:]) is None


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from([10, 25, 50, 70]), st.booleans()), max_size=25))
def test_measuring_only_changed_nodes_equals_measuring_all(steps):
    truths = [NodeTruth(_node(f"n{i}", gpus=2 + i)) for i in range(3)]
    workload = TargetWorkload([Task(cpu=1000, gpu_milli=m, num_gpu=1) for m in (250, 500, MILLI)] +
                              [Task(cpu=1000, gpu_milli=MILLI, num_gpu=2)], [3, 2, 1, 1], scale=7)
    gpus = ClusterGPUs(truths, workload)
    admitted: list[tuple[NodeTruth, str]] = []
    for index, (node, percent, release) in enumerate(steps):
        if release and admitted:
            truth, uid = admitted.pop(0)
            truth.release(uid)
        elif truths[node].admit(_share(f"p{index}", percent), None, 0.0).admitted:
            admitted.append((truths[node], f"p{index}"))
        allocated, fragmented = gpus.measure()
        views = [t.gpu_view() for t in truths]
        assert allocated == gpus.capacity - sum(sum(v.gpu_free) for v in views)
        assert math.isclose(fragmented, float(fragmentation(NodeBatch.from_views(views), workload).sum()))


def test_a_run_reports_gpu_allocation_with_shares_and_fragmentation_over_time():
    nodes = [_node("n1", gpus=4), _node("n2", gpus=4)]
    pods = [SimPod(_share(f"s{i}", 30 + 10 * (i % 3)), float(i), duration=50.0 + i) for i in range(12)]
    metrics = run_metrics(Simulation(nodes, pods, contender("toposched"), SimConfig(sample_interval=5.0)).run())
    timeline = metrics["timeline"]
    assert max(timeline["gpu"]) > 0  # shares count: no pod asks for nvidia.com/gpu
    assert len(timeline["gpu_fragmentation"]) == len(timeline["time"])
    assert max(timeline["gpu_fragmentation"]) > 0
    assert metrics["gpu_fragmentation"] == timeline["gpu_fragmentation"][-1] == 0.0  # all gone: nothing idle is cut up
    assert metrics["gpu_fragmentation_mean"] > 0


def test_without_gpu_pods_there_is_no_fragmentation_to_report():
    nodes = [_node("n1")]
    pods = [SimPod(Pod("c", uid="c", containers=(Container("main", requests={"cpu": 500}),)), 0.0, duration=5.0)]
    metrics = run_metrics(Simulation(nodes, pods, contender("default")).run())
    assert metrics["gpu_fragmentation"] is None and metrics["gpu_fragmentation_mean"] is None
    assert "gpu_fragmentation" not in metrics["timeline"]
