"""Koordinator's ``scheduling.koordinator.sh/device-allocated``: exact text, and the ledger rebuilt from it.

Expected texts come from Koordinator (koordinator-sh/koordinator): the koordlet pod-resources
proxy test ``TestFillPodDevicesAllocatedByKoord`` and the "GPU & RDMA Joint Allocation" user guide
(a P40 at ``23040Mi`` with an RDMA virtual function); the fine-grained device scheduling proposal
(``docs/proposals/scheduling/20220629-fine-grained-device-scheduling.md``, numbers unquoted);
``pkg/scheduler/plugins/deviceshare/utils_test.go`` (Test_memoryRatioToBytes,
Test_memoryBytesToRatio: 64Gi). The A100 text is ours, built the way Koordinator's deviceshare
tests describe an 80 GB A100 (``85198045184`` bytes, printed ``83201216Ki``). The struct is
``DeviceAllocation`` in ``apis/extension/device_share.go``; quantities print as apimachinery's
``Quantity.String()``.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.devices.koordinator import (
    DEVICE_ALLOCATED,
    DeviceAllocation,
    format_device_allocated,
    format_quantity,
    gpu_allocation,
    gpu_device_allocations,
    parse_device_allocated,
)
from toposched.devices.share import (
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    KOORD_GPU,
    NVIDIA_GPU,
    GPUDevice,
    GPURequest,
    NodeGPUState,
    Refusal,
    gpu_request,
)
from toposched.errors import InputError

GI = 2**30
MI = 2**20
A100 = 85198045184  # bytes, the FGD simulator's "A100-SXM4-80GB"


@pytest.mark.parametrize(
    ("value", "binary", "text"),
    [
        (100, False, "100"),
        (50, False, "50"),
        (0, False, "0"),
        (1000, False, "1k"),
        (1500, False, "1500"),
        (Fraction(465, 10), False, "46500m"),
        (Fraction(1, 2), False, "500m"),
        (23040 * MI, True, "23040Mi"),
        (A100, True, "83201216Ki"),
        (8 * GI, True, "8Gi"),
        (32 * GI, True, "32Gi"),
        (1536, True, "1536"),  # not a whole KiB: plain digits
        (1000, True, "1k"),  # below 1024 BinarySI prints as DecimalSI
        (512, True, "512"),
    ],
)
def test_quantities_print_as_apimachinery(value, binary, text):
    assert format_quantity(value, binary=binary) == text


UPSTREAM_TEXTS = [
    # koordlet / user docs: a whole GPU and an RDMA virtual function
    ('{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"23040Mi",'
     '"koordinator.sh/gpu-memory-ratio":"100"},"id":"0"}],"rdma":[{"minor":0,"resources":{"koordinator.sh/rdma":"1"},'
     '"id":"0000:01:00.0","extension":{"vfs":[{"minor":-1,"busID":"0000:01:00.2"}]}}]}'),
    # two whole A100 80GB
    ('{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"83201216Ki",'
     '"koordinator.sh/gpu-memory-ratio":"100"}},{"minor":1,"resources":{"koordinator.sh/gpu-core":"100",'
     '"koordinator.sh/gpu-memory":"83201216Ki","koordinator.sh/gpu-memory-ratio":"100"}}]}'),
]


@pytest.mark.parametrize("text", UPSTREAM_TEXTS)
def test_upstream_annotations_read_and_write_back_unchanged(text):
    assert format_device_allocated(parse_device_allocated(text)) == text


def test_our_whole_gpus_write_exactly_what_koordinator_writes():
    state = NodeGPUState.uniform(2, A100, model="A100")
    state, allocation = state.allocate(gpu_request({NVIDIA_GPU: 2}))
    assert format_device_allocated({"gpu": gpu_device_allocations(allocation, state)}) == UPSTREAM_TEXTS[1]


def test_shared_gpu_entry():
    state = NodeGPUState.uniform(2, 16 * GI)
    state, _ = state.allocate(gpu_request({NVIDIA_GPU: 1}))
    state, allocation = state.allocate(gpu_request({GPU_CORE: 50, GPU_MEMORY_RATIO: 50}))
    assert format_device_allocated({"gpu": gpu_device_allocations(allocation, state)}) == (
        '{"gpu":[{"minor":1,"resources":{"koordinator.sh/gpu-core":"50","koordinator.sh/gpu-memory":"8Gi",'
        '"koordinator.sh/gpu-memory-ratio":"50"}}]}'
    )


def test_memory_bytes_and_ratio_convert_as_upstream():
    # Test_memoryRatioToBytes / Test_memoryBytesToRatio: 50% of 64Gi ↔ 32Gi.
    state = NodeGPUState.uniform(1, 64 * GI)
    by_ratio = state.choose(gpu_request({GPU_MEMORY_RATIO: 50}))
    by_bytes = state.choose(gpu_request({GPU_MEMORY: 32 * GI}))
    assert gpu_device_allocations(by_ratio, state)[0].resources[GPU_MEMORY] == 32 * GI
    assert gpu_device_allocations(by_bytes, state)[0].resources[GPU_MEMORY_RATIO] == 50
    odd = state.choose(gpu_request({GPU_CORE: 30, GPU_MEMORY: 21 * GI}))  # 32.8125% → truncated 32
    assert gpu_device_allocations(odd, state)[0].resources[GPU_MEMORY_RATIO] == 32


def test_trace_shares_keep_their_tenths_of_a_percent():
    state = NodeGPUState.uniform(1, 16 * GI)
    allocation = state.choose(GPURequest.from_trace(1, 465))
    entry = gpu_device_allocations(allocation, state)[0].to_dict()
    assert entry["resources"][GPU_CORE] == "46500m"
    assert entry["resources"][GPU_MEMORY_RATIO] == "46500m"
    text = format_device_allocated({"gpu": gpu_device_allocations(allocation, state)})
    assert gpu_allocation(parse_device_allocated(text)["gpu"], state) == allocation


def test_proposal_shape_with_unquoted_numbers():
    text = json.dumps({"gpu": [{"minor": 0, "resources": {GPU_CORE: 100, GPU_MEMORY_RATIO: 100, GPU_MEMORY: "16Gi"}},
                               {"minor": 1, "resources": {GPU_CORE: 100, GPU_MEMORY_RATIO: 100, GPU_MEMORY: "16Gi"}}],
                       "rdma": [{"minor": 0, "id": "0000:09:00.0", "resources": {"koordinator.sh/rdma": 100}}]})
    parsed = parse_device_allocated(text)
    state = NodeGPUState.uniform(2, 16 * GI)
    allocation = gpu_allocation(parsed["gpu"], state)
    assert allocation.request == GPURequest(2, 1000, 1000, None, False)
    assert state.take(allocation).used_core == (1000, 1000)
    assert parsed["rdma"][0].id == "0000:09:00.0"
    assert parsed["rdma"][0].resources == {"koordinator.sh/rdma": 100}


def test_empty_types_are_left_out():
    assert format_device_allocated({"gpu": (), "rdma": [DeviceAllocation(0, {"koordinator.sh/rdma": 100})]}) == (
        '{"rdma":[{"minor":0,"resources":{"koordinator.sh/rdma":"100"}}]}')
    assert parse_device_allocated('{"gpu":null}') == {}


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("not json", DEVICE_ALLOCATED),
        ("[]", DEVICE_ALLOCATED),
        ('{"gpu":{}}', "gpu"),
        ('{"gpu":[1]}', "gpu[0]"),
        ('{"gpu":[{"minor":-1,"resources":{}}]}', "gpu[0].minor"),
        ('{"gpu":[{"minor":"0","resources":{}}]}', "gpu[0].minor"),
        ('{"gpu":[{"minor":1.5,"resources":{}}]}', "gpu[0].minor"),
        ('{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"-1"}}]}', "gpu[0].resources.koordinator.sh/gpu-core"),
        ('{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"lots"}}]}', "gpu[0].resources.koordinator.sh/gpu-core"),
        ('{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":true}}]}', "gpu[0].resources.koordinator.sh/gpu-core"),
        ('{"gpu":[{"minor":0,"resources":[]}]}', "gpu[0]"),
        ('{"gpu":[{"minor":0,"resources":{},"id":7}]}', "gpu[0].id"),
    ],
)
def test_malformed_annotations_name_the_field(text, field):
    with pytest.raises(InputError) as err:
        parse_device_allocated(text, source="pod default/p")
    assert err.value.source == "pod default/p"
    assert err.value.field == field


@pytest.mark.parametrize(
    "entries",
    [
        [DeviceAllocation(5, {GPU_CORE: 100, GPU_MEMORY_RATIO: 100})],  # no such minor
        [DeviceAllocation(0, {"koordinator.sh/rdma": 100})],  # not a GPU share
        [DeviceAllocation(0, {GPU_CORE: 50})],  # no memory
        [DeviceAllocation(0, {GPU_CORE: 150, GPU_MEMORY_RATIO: 50})],  # more than a GPU
        [DeviceAllocation(0, {GPU_CORE: Fraction(1, 100), GPU_MEMORY_RATIO: 50})],  # finer than milli
        [DeviceAllocation(0, {GPU_MEMORY_RATIO: 100, GPU_MEMORY: 8 * GI})],  # ratio 100 but half the memory
        [DeviceAllocation(0, {GPU_MEMORY: 32 * GI})],  # more than the GPU has
        [DeviceAllocation(0, {GPU_MEMORY_RATIO: 100}), DeviceAllocation(1, {GPU_MEMORY_RATIO: 50})],  # two requests
        [DeviceAllocation(0, {GPU_MEMORY: GI}), DeviceAllocation(1, {GPU_MEMORY: 2 * GI})],  # two sizes
        [],
    ],
)
def test_rebuild_refuses_inconsistent_entries(entries):
    with pytest.raises(InputError) as err:
        gpu_allocation(entries, NodeGPUState.uniform(2, 16 * GI), source="pod default/p")
    assert err.value.source == "pod default/p"


requests = st.one_of(
    st.builds(lambda n: gpu_request({NVIDIA_GPU: n}), st.integers(1, 2)),
    st.builds(lambda c, r: gpu_request({GPU_CORE: c, GPU_MEMORY_RATIO: r}), st.integers(1, 100), st.integers(1, 99)),
    st.builds(lambda c, g: gpu_request({GPU_CORE: c, GPU_MEMORY: g * MI}), st.integers(0, 100), st.integers(1, 12 * 1024)),
    st.builds(lambda n, r: gpu_request({GPU_SHARED: n, GPU_MEMORY_RATIO: r * n}), st.integers(1, 2), st.integers(1, 99)),
    st.builds(lambda g: gpu_request({KOORD_GPU: g}), st.integers(1, 100)),
    st.builds(lambda m: GPURequest.from_trace(1, m), st.integers(1, 1000)),
    st.builds(lambda n: GPURequest.from_trace(n, 1000), st.integers(2, 3)),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(requests, max_size=12))
def test_a_restarted_scheduler_rebuilds_the_same_ledger(asked):
    devices = (GPUDevice("a", 16 * GI), GPUDevice("b", 24 * GI), GPUDevice("c", 16 * GI))
    state = NodeGPUState(devices, "T4")
    annotations = []
    for request in asked:
        result = state.allocate(request)
        if isinstance(result, Refusal):
            continue
        state, allocation = result
        annotations.append(format_device_allocated({"gpu": gpu_device_allocations(allocation, state)}))
    rebuilt = NodeGPUState(devices, "T4")
    for i, text in enumerate(annotations):
        entries = parse_device_allocated(text, source=f"pod {i}")["gpu"]
        rebuilt = rebuilt.take(gpu_allocation(entries, rebuilt, source=f"pod {i}"), source=f"pod {i}")
    assert rebuilt == state
