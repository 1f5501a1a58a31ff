"""Shared-GPU requests (Koordinator DeviceShare) and the per-node GPU ledger.

The validation and conversion tables are Koordinator's, rewritten: koordinator-sh/koordinator
``pkg/scheduler/plugins/deviceshare/utils_test.go`` (TestValidateDeviceRequest,
TestConvertDeviceRequest, Test_parseGPURequirements, Test_memoryRatioToBytes) for
``utils.go`` and ``devicehandler_gpu.go`` (calcDesiredRequestsAndCountForGPU). FPGA/RDMA rows are
left out: this module reads GPU requests only. The trace form follows the FGD simulator's pods
(hkust-adsl/kubernetes-scheduler-simulator, ``example/test-cluster/pod/gpu-pod-00.yaml``,
``pkg/type/open-gpu-share/utils/pod.go``).
"""

from __future__ import annotations

import csv
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_path
from toposched.devices.fgd import FGD, TargetWorkload, Task, make_policy
from toposched.devices.share import (
    AMD_GPU,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    HYGON_DCU,
    KOORD_GPU,
    NVIDIA_GPU,
    DeviceShare,
    GPUAllocation,
    GPUDevice,
    GPURequest,
    GPUResource,
    Host,
    NodeGPUState,
    Refusal,
    convert_device_request,
    gpu_request,
    per_gpu_request,
    pod_gpu_request,
    pod_task,
    validate_device_request,
)
from toposched.errors import InputError
from toposched.topology.hwloc import read_hwloc_xml
from toposched.workload.pod import Container, Pod

GI = 2**30
R = GPUResource

# ---- Koordinator's tables -------------------------------------------------------------------------

VALIDATE = [  # name, request, combination (None = error)
    ("empty pod request", {}, None),
    ("invalid gpu request 1", {GPU_CORE: 101}, None),
    ("invalid gpu request 2", {NVIDIA_GPU: 2, KOORD_GPU: 200, GPU_CORE: 200, GPU_MEMORY: 32 * GI, GPU_MEMORY_RATIO: 200},
     None),
    ("invalid gpu request 3", {KOORD_GPU: 101}, None),
    ("invalid gpu request 4", {GPU_CORE: 100, GPU_MEMORY_RATIO: 101}, None),
    ("valid nvidia", {NVIDIA_GPU: 2}, R.NVIDIA_GPU),
    ("valid hygon dcu", {HYGON_DCU: 2}, R.HYGON_DCU),
    ("valid koordinator gpu", {KOORD_GPU: 200}, R.KOORD_GPU),
    ("valid gpu request 3", {GPU_CORE: 200, GPU_MEMORY: 64 * GI}, R.GPU_CORE | R.GPU_MEMORY),
    ("valid gpu request 4", {GPU_CORE: 200, GPU_MEMORY_RATIO: 200}, R.GPU_CORE | R.GPU_MEMORY_RATIO),
    ("valid gpu request 5", {GPU_MEMORY_RATIO: 200}, R.GPU_MEMORY_RATIO),
    ("valid gpu request 7", {GPU_MEMORY: 64 * GI}, R.GPU_MEMORY),
    ("invalid gpu request 8", {GPU_MEMORY_RATIO: 101, GPU_SHARED: 1}, None),
    ("invalid gpu request 9", {GPU_MEMORY_RATIO: 101, GPU_SHARED: 2}, None),
    ("invalid gpu request 10", {GPU_CORE: 101, GPU_MEMORY: 64 * GI, GPU_SHARED: 1}, None),
    ("invalid gpu request 11", {GPU_CORE: 101, GPU_MEMORY: 64 * GI, GPU_SHARED: 2}, None),
    ("valid gpu request 12", {GPU_MEMORY_RATIO: 200, GPU_SHARED: 2}, R.GPU_SHARED | R.GPU_MEMORY_RATIO),
    ("valid gpu request 13", {GPU_MEMORY_RATIO: 100, GPU_SHARED: 2}, R.GPU_SHARED | R.GPU_MEMORY_RATIO),
    ("gpu request 14", {GPU_CORE: 100, GPU_MEMORY: 64 * GI, GPU_SHARED: 1}, R.GPU_SHARED | R.GPU_MEMORY | R.GPU_CORE),
    ("gpu request 15", {GPU_CORE: 100, GPU_MEMORY: 64 * GI, GPU_SHARED: 2}, R.GPU_SHARED | R.GPU_MEMORY | R.GPU_CORE),
    # The inconsistent request: upstream's percentage rule refuses the 150.
    ("core 150 with ratio 50", {GPU_CORE: 150, GPU_MEMORY_RATIO: 50}, None),
    ("core alone", {GPU_CORE: 50}, None),
    ("core, bytes and ratio together", {GPU_CORE: 50, GPU_MEMORY: GI, GPU_MEMORY_RATIO: 50}, None),
]


@pytest.mark.parametrize(("name", "request_", "expected"), VALIDATE, ids=[row[0] for row in VALIDATE])
def test_validate_device_request_upstream_table(name, request_, expected):
    if expected is None:
        with pytest.raises(InputError):
            validate_device_request(request_, source="pod default/p")
    else:
        assert validate_device_request(request_) == expected


CONVERT = [  # request, combination, converted
    ({NVIDIA_GPU: 2}, R.NVIDIA_GPU, {GPU_CORE: 200, GPU_MEMORY_RATIO: 200}),
    ({HYGON_DCU: 2}, R.HYGON_DCU, {GPU_CORE: 200, GPU_MEMORY_RATIO: 200}),
    ({AMD_GPU: 3}, R.AMD_GPU, {GPU_CORE: 300, GPU_MEMORY_RATIO: 300}),
    ({KOORD_GPU: 50}, R.KOORD_GPU, {GPU_CORE: 50, GPU_MEMORY_RATIO: 50}),
    ({GPU_CORE: 50, GPU_MEMORY_RATIO: 50}, R.GPU_CORE | R.GPU_MEMORY_RATIO, {GPU_CORE: 50, GPU_MEMORY_RATIO: 50}),
    ({GPU_CORE: 50, GPU_MEMORY: 32 * GI}, R.GPU_CORE | R.GPU_MEMORY, {GPU_CORE: 50, GPU_MEMORY: 32 * GI}),
    ({NVIDIA_GPU: 2}, R.GPU_CORE | R.GPU_MEMORY | R.GPU_MEMORY_RATIO, {}),  # "invalid combination" → nil
]


@pytest.mark.parametrize(("request_", "combination", "expected"), CONVERT)
def test_convert_device_request_upstream_table(request_, combination, expected):
    assert convert_device_request(request_, combination) == expected


def test_per_gpu_split_upstream_table():
    # Test_parseGPURequirements: ratio 200 + core 200 → 2 GPUs of 100/100, not shared.
    assert per_gpu_request({GPU_MEMORY_RATIO: 200, GPU_CORE: 200}) == ({GPU_CORE: 100, GPU_MEMORY_RATIO: 100}, 2, False)
    assert per_gpu_request({GPU_SHARED: 2, GPU_MEMORY_RATIO: 100}) == ({GPU_MEMORY_RATIO: 50}, 2, True)
    assert per_gpu_request({GPU_CORE: 50, GPU_MEMORY: 8 * GI}) == ({GPU_CORE: 50, GPU_MEMORY: 8 * GI}, 1, True)
    assert per_gpu_request({GPU_CORE: 100, GPU_MEMORY_RATIO: 100}) == ({GPU_CORE: 100, GPU_MEMORY_RATIO: 100}, 1, False)


def test_memory_ratio_to_bytes_upstream():
    # Test_memoryRatioToBytes: 50% of 64Gi is 32Gi.
    assert gpu_request({GPU_MEMORY_RATIO: 50}).memory_on(64 * GI) == 32 * GI


# ---- our requests --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({NVIDIA_GPU: 2}, GPURequest(2, 1000, 1000, None, False)),
        ({KOORD_GPU: 50}, GPURequest(1, 500, 500, None, True)),
        ({GPU_CORE: 50, GPU_MEMORY: 4 * GI}, GPURequest(1, 500, None, 4 * GI, True)),
        ({GPU_MEMORY_RATIO: 25}, GPURequest(1, None, 250, None, True)),
        ({GPU_MEMORY_RATIO: 300}, GPURequest(3, None, 1000, None, False)),
        ({GPU_SHARED: 2, GPU_MEMORY_RATIO: 100, GPU_CORE: 60}, GPURequest(2, 300, 500, None, True)),
        ({GPU_CORE: 100, GPU_MEMORY_RATIO: 50}, GPURequest(1, 1000, 500, None, True)),
        ({"cpu": 4000, "memory": GI}, None),
        ({NVIDIA_GPU: 0, "cpu": 1000}, None),
    ],
)
def test_gpu_request(resources, expected):
    assert gpu_request(resources) == expected


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ({GPU_CORE: 150, GPU_MEMORY_RATIO: 50}, GPU_CORE),  # the inconsistent request
        ({GPU_CORE: 200, GPU_MEMORY_RATIO: 50}, GPU_CORE),  # 200% compute on the one GPU ratio 50 implies
        ({GPU_CORE: 200, GPU_MEMORY: 64 * GI}, GPU_CORE),  # upstream-valid, but never placeable
        ({GPU_SHARED: 2, GPU_MEMORY_RATIO: 300}, GPU_MEMORY_RATIO),
        ({GPU_CORE: -50, GPU_MEMORY_RATIO: 50}, GPU_CORE),  # negative share
        ({GPU_MEMORY: -1}, GPU_MEMORY),
        ({NVIDIA_GPU: 10**6}, NVIDIA_GPU),  # absurd
        ({GPU_MEMORY: 2**60}, "gpu.memory"),
        ({NVIDIA_GPU: 1, GPU_CORE: 50}, f"{GPU_CORE},{NVIDIA_GPU}"),
    ],
)
def test_bad_requests_name_the_pod_and_the_resource(resources, field):
    with pytest.raises(InputError) as err:
        gpu_request(resources, source="pod default/infer-0")
    assert err.value.source == "pod default/infer-0"
    assert err.value.field == field


def _resources(requests: dict) -> dict:
    # Extended resources cannot be overcommitted: the API server wants their limit equal to the request.
    return {"requests": requests, "limits": {k: v for k, v in requests.items() if "/" in k}}


def pod(name: str = "p", *, requests=None, annotations=None, init=None) -> Pod:
    spec = {"containers": [{"name": "app", "resources": _resources(requests or {})}]}
    if init:
        spec["initContainers"] = [{"name": "init", "resources": _resources(init)}]
    return Pod.from_dict({"metadata": {"name": name, "annotations": annotations or {}}, "spec": spec})


def test_pod_request_comes_from_the_pod_request():
    p = pod(requests={"cpu": "2", GPU_CORE: "30", GPU_MEMORY_RATIO: "30"},
            init={GPU_CORE: "100", GPU_MEMORY_RATIO: "100"})
    assert pod_gpu_request(p) == GPURequest(1, 1000, 1000, None, False)  # the init container's is larger
    assert pod_gpu_request(pod(requests={"cpu": "1"})) is None


def test_pod_with_inconsistent_request_is_named():
    with pytest.raises(InputError) as err:
        pod_gpu_request(pod("bad", requests={GPU_CORE: "150", GPU_MEMORY_RATIO: "50"}))
    assert str(err.value).startswith(f"pod default/bad: {GPU_CORE}:")


def test_negative_quantity_in_a_manifest_is_refused():
    with pytest.raises(InputError) as err:
        pod("neg", requests={GPU_CORE: "-50", GPU_MEMORY_RATIO: "50"})
    assert err.value.source == "pod default/neg"
    with pytest.raises(InputError):
        Container("c", requests={GPU_CORE: -50})


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({"alibabacloud.com/gpu-milli": "465", "alibabacloud.com/gpu-count": "1"}, GPURequest(1, 465, 465, None, True)),
        ({"alibabacloud.com/gpu-milli": "1000", "alibabacloud.com/gpu-count": "8"}, GPURequest(8, 1000, 1000, None, False)),
        ({"alibabacloud.com/gpu-milli": "500"}, GPURequest(1, 500, 500, None, True)),
        ({"alibabacloud.com/gpu-milli": "0", "alibabacloud.com/gpu-count": "0"}, None),
    ],
)
def test_trace_annotations(annotations, expected):
    assert pod_gpu_request(pod(annotations=annotations)) == expected


@pytest.mark.parametrize(
    "annotations",
    [
        {"alibabacloud.com/gpu-milli": "500", "alibabacloud.com/gpu-count": "2"},  # several partial GPUs
        {"alibabacloud.com/gpu-milli": "1200"},
        {"alibabacloud.com/gpu-milli": "-5"},
        {"alibabacloud.com/gpu-milli": "half"},
        {"alibabacloud.com/gpu-milli": "300", "alibabacloud.com/gpu-count": "0"},
    ],
)
def test_bad_trace_annotations(annotations):
    with pytest.raises(InputError) as err:
        pod_gpu_request(pod("t", annotations=annotations))
    assert err.value.source == "pod default/t"


def test_both_forms_at_once_is_ambiguous():
    with pytest.raises(InputError):
        pod_gpu_request(pod(requests={NVIDIA_GPU: "1"}, annotations={"alibabacloud.com/gpu-milli": "500"}))


def test_pod_task_for_the_policies():
    p = pod(requests={"cpu": "6", "memory": "12Gi"},
            annotations={"alibabacloud.com/gpu-milli": "460", "alibabacloud.com/gpu-card-model": "T4|P100"})
    assert pod_task(p) == Task(cpu=6000, memory=12 * GI, gpu_milli=460, num_gpu=1, gpu_models=frozenset({"T4", "P100"}))
    bytes_pod = pod(requests={GPU_CORE: "10", GPU_MEMORY: "4Gi"})
    assert pod_task(bytes_pod, gpu_memory=16 * GI).gpu_milli == 250
    with pytest.raises(InputError):
        pod_task(bytes_pod)


@pytest.mark.shared_data
def test_every_row_of_the_openb_trace_is_a_request():
    folder = shared_path("traces", "alibaba-cluster-trace-gpu-v2023")
    with open(folder / "openb_pod_list_default.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    requests = [GPURequest.from_trace(int(r["num_gpu"]), int(r["gpu_milli"]), source=r["name"]) for r in rows]
    shared = sum(1 for r in requests if r is not None and r.shared)
    whole = sum(1 for r in requests if r is not None and r.whole)
    assert len(rows) == 8152
    assert shared == sum(1 for r in rows if 0 < int(r["gpu_milli"]) < 1000)  # 37.8% per the README
    assert shared + whole + requests.count(None) == len(rows)


# ---- the ledger ----------------------------------------------------------------------------------

def node(count: int = 4, memory: int = 16 * GI, model: str = "T4") -> NodeGPUState:
    return NodeGPUState.uniform(count, memory, model=model)


def test_a_shared_request_fits_on_one_gpu():
    state, first = node().allocate(gpu_request({GPU_CORE: 50, GPU_MEMORY_RATIO: 50}))
    assert [(s.device, s.core, s.memory, s.whole) for s in first.shares] == [("gpu0", 500, 8 * GI, False)]
    state, second = state.allocate(gpu_request({GPU_CORE: 30, GPU_MEMORY: 2 * GI}))
    assert second.devices == ("gpu0",)  # best fit: the GPU already in use
    assert state.used_core == (800, 0, 0, 0)
    assert state.used_memory == (10 * GI, 0, 0, 0)
    assert state.free_milli() == (200, 1000, 1000, 1000)


def test_whole_requests_take_unused_gpus_whole():
    state, _ = node().allocate(gpu_request({KOORD_GPU: 10}))
    state, whole = state.allocate(gpu_request({NVIDIA_GPU: 2}))
    assert whole.devices == ("gpu1", "gpu2")
    assert [(s.core, s.memory, s.whole) for s in whole.shares] == [(1000, 16 * GI, True)] * 2
    refusal = state.choose(gpu_request({NVIDIA_GPU: 2}))
    assert refusal == Refusal("needs 2 whole GPUs; 1 of 4 candidate GPUs is free")
    assert state.choose(gpu_request({GPU_SHARED: 2, GPU_CORE: 190, GPU_MEMORY_RATIO: 190})) == Refusal(
        "needs 2 GPUs with 95% compute and 95% memory each; 1 of 4 candidate GPUs has that free")


def test_candidates_restrict_the_choice():
    state = node()
    allocation = state.choose(gpu_request({NVIDIA_GPU: 2}), candidates=["gpu3", "gpu1"])
    assert allocation.devices == ("gpu1", "gpu3")
    assert state.choose(gpu_request({NVIDIA_GPU: 3}), candidates=["gpu3", "gpu1"]) == Refusal(
        "needs 3 whole GPUs; 2 of 2 candidate GPUs are free")
    assert state.choose(gpu_request({KOORD_GPU: 5}), candidates=[]) == Refusal(
        "needs 1 GPU with 5% compute and 5% memory each; no candidate GPUs")
    with pytest.raises(InputError):
        state.choose(gpu_request({KOORD_GPU: 5}), candidates=["gpu9"])
    with pytest.raises(InputError):
        state.choose(gpu_request({KOORD_GPU: 5}), candidates="gpu1")


def test_a_request_spread_over_shared_gpus():
    state, allocation = node().allocate(gpu_request({GPU_SHARED: 2, GPU_MEMORY_RATIO: 100}))
    assert allocation.devices == ("gpu0", "gpu1")
    assert state.used_memory == (8 * GI, 8 * GI, 0, 0)
    assert state.used_core == (0, 0, 0, 0)  # memory only: the compute stays shareable


def test_memory_in_bytes_on_gpus_of_different_sizes():
    state = NodeGPUState((GPUDevice("a", 8 * GI), GPUDevice("b", 32 * GI)))
    allocation = state.choose(gpu_request({GPU_CORE: 10, GPU_MEMORY: 12 * GI}))
    assert allocation.devices == ("b",)
    state = state.take(allocation)
    assert state.free_milli() == (1000, 625)  # 20Gi of 32Gi left


def test_policy_and_host_reach_the_choice():
    workload = TargetWorkload.from_tasks([Task(cpu=1000, gpu_milli=400, num_gpu=1)] * 9)
    state, _ = node(2).allocate(gpu_request({KOORD_GPU: 50}))
    request = gpu_request({KOORD_GPU: 20})
    host = Host(cpu_free=16000, memory_free=64 * GI, pod_cpu=1000)
    assert state.choose(request).devices == ("gpu0",)  # best fit
    assert state.choose(request, policy=FGD(workload), host=host).devices == ("gpu1",)  # keeps gpu0 usable


def test_take_and_release_refuse_what_does_not_fit_or_is_not_held():
    state, allocation = node(1).allocate(gpu_request({KOORD_GPU: 60}))
    with pytest.raises(InputError) as err:
        state.take(allocation, source="pod default/again")
    assert err.value.source == "pod default/again"
    with pytest.raises(InputError):
        node(1).release(allocation)
    with pytest.raises(InputError):  # minor 1 is not gpu0's place in the node's order
        node(2).take(GPUAllocation(allocation.request, (DeviceShare("gpu0", 1, 1, 1, False),)))
    twice = GPUAllocation(allocation.request, (DeviceShare("gpu0", 0, 1, 1, False),) * 2)
    with pytest.raises(InputError):
        node(2).take(twice)
    whole = node(1).choose(gpu_request({NVIDIA_GPU: 1}))
    with pytest.raises(InputError):
        state.take(whole)  # a whole GPU needs a GPU nobody uses


def test_state_validation():
    with pytest.raises(InputError):
        NodeGPUState((GPUDevice("a", GI), GPUDevice("a", GI)))
    with pytest.raises(InputError):
        NodeGPUState((GPUDevice("a", GI),), used_core=(1001,), used_memory=(0,))
    with pytest.raises(InputError):
        GPUDevice("", GI)
    with pytest.raises(InputError):
        GPUDevice("a", 0)
    with pytest.raises(InputError):
        node().minor("nope")


@pytest.mark.shared_data
def test_real_machine_gpus_in_pci_order_and_numa_aligned_choices():
    machine = read_hwloc_xml(shared_path("topologies", "hwloc", "g4dnmetal.xml"))
    state = NodeGPUState.from_devices(machine.devices, default_memory=16 * GI, model="T4")
    assert len(state.devices) == 8
    assert [d.id for d in state.devices] == sorted(d.id for d in state.devices)
    assert [state.minor(d.id) for d in state.devices] == list(range(8))
    numa1 = [d.id for d in state.devices if d.numa == 1]
    for request in ({KOORD_GPU: 25}, {NVIDIA_GPU: 2}, {GPU_SHARED: 2, GPU_MEMORY_RATIO: 60}):
        state, allocation = state.allocate(gpu_request(request), candidates=numa1)
        assert set(allocation.devices) <= set(numa1)
    assert state.choose(gpu_request({NVIDIA_GPU: 1}), candidates=numa1).reason.startswith("needs 1 whole GPU;")


# ---- properties ------------------------------------------------------------------------------------

requests = st.one_of(
    st.builds(lambda n: {NVIDIA_GPU: n}, st.integers(1, 3)),
    st.builds(lambda c, r: {GPU_CORE: c, GPU_MEMORY_RATIO: r}, st.integers(1, 100), st.integers(1, 100)),
    st.builds(lambda c, g: {GPU_CORE: c, GPU_MEMORY: g * GI // 4}, st.integers(0, 100), st.integers(1, 70)),
    st.builds(lambda r: {GPU_MEMORY_RATIO: r}, st.sampled_from([10, 50, 100, 200])),
    st.builds(lambda n, r: {GPU_SHARED: n, GPU_MEMORY_RATIO: r * n}, st.integers(1, 2), st.integers(1, 90)),
)
ops = st.lists(st.tuples(st.booleans(), requests, st.sets(st.integers(0, 5)), st.integers(0, 10**6)), max_size=25)
policies = st.sampled_from(["BestFit", "FGD", "Random", "GpuPacking", "DotProd", "GpuClustering"])
WORKLOAD = TargetWorkload.from_tasks([Task(cpu=1000, gpu_milli=m, num_gpu=1) for m in (250, 500, 1000)])


@settings(max_examples=80, deadline=None)
@given(ops, policies, st.integers(0, 2**32))
def test_ledger_invariants(operations, policy_name, seed):
    devices = tuple(GPUDevice(f"g{i}", (8 + 8 * (i % 2)) * GI, i // 3) for i in range(6))
    initial = NodeGPUState(devices, "T4")
    policy = make_policy(policy_name, workload=WORKLOAD, seed=seed)
    rng = random.Random(seed)
    state, held, history = initial, [], [initial]
    for release, resources, candidate_set, _ in operations:
        if release and held:
            allocation = held.pop(rng.randrange(len(held)))
            state = state.release(allocation)
            history.append(state)
            continue
        candidates = [f"g{i}" for i in sorted(candidate_set)]
        request = gpu_request(resources)
        before = state
        result = state.allocate(request, candidates=candidates, policy=policy,
                                host=Host(cpu_free=64000, memory_free=256 * GI, pod_cpu=1000))
        if isinstance(result, Refusal):
            assert state == before  # a refusal changes nothing
            continue
        new, allocation = result
        assert set(allocation.devices) <= set(candidates)
        assert len(allocation.shares) == request.count == len(set(allocation.devices))
        assert new.release(allocation) == state  # release restores the exact prior state
        state = new
        held.append(allocation)
        # Nothing is given beyond a GPU's compute or memory, and a whole GPU has one holder.
        for i, device in enumerate(devices):
            shares = [s for a in held for s in a.shares if s.device == device.id]
            assert sum(s.core for s in shares) == state.used_core[i] <= 1000
            assert sum(s.memory for s in shares) == state.used_memory[i] <= device.memory
            if any(s.whole for s in shares):
                assert len(shares) == 1
    for allocation in held:
        state = state.release(allocation)
    assert state == initial


@settings(max_examples=80, deadline=None)
@given(ops, requests, st.sets(st.integers(0, 5)), st.integers(0, 2**32))
def test_count_fitting_counts_what_fits(operations, resources, excluded, seed):
    """The fast count is the number of GPUs outside the excluded ones that ``fits`` accepts."""
    devices = tuple(GPUDevice(f"g{i}", (8 + 8 * (i % 2)) * GI, i // 3) for i in range(6))
    state = NodeGPUState(devices, "T4")
    policy = make_policy("BestFit", seed=seed)
    for _, taken, candidate_set, _ in operations:
        result = state.allocate(gpu_request(taken), candidates=[f"g{i}" for i in sorted(candidate_set)], policy=policy)
        if not isinstance(result, Refusal):
            state = result[0]
    request = gpu_request(resources)
    ids = {f"g{i}" for i in excluded}
    want = sum(1 for i, d in enumerate(devices) if d.id not in ids and state.fits(i, request))
    assert state.count_fitting(request, ids) == want
