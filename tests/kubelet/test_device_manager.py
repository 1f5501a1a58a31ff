"""The device manager model against upstream's own test tables, rewritten as data.

Sources: kubernetes/kubernetes pkg/kubelet/cm/devicemanager/topology_hints_test.go
(TestGetTopologyHints, TestGetPodTopologyHints, TestTopologyAlignedAllocation,
TestGetPreferredAllocationParameters, TestGetPodDeviceRequest) and manager_test.go
(TestFilterByAffinity, TestPodContainerDeviceAllocation, TestPodContainerDeviceToAllocate,
TestInitContainerDeviceAllocation, TestRestartableInitContainerDeviceAllocation). Expected values
are upstream's; where upstream leaves the choice of device to Go's random set order, the tests
check what upstream checks (sizes, alignment, subsets) and, separately, our documented order.
"""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toposched.errors import InputError, ToposchedError
from toposched.kubelet import (
    DeviceAllocationError,
    DeviceManager,
    DeviceManagerState,
    TopologyHint,
    container_device_requests,
    device_topology_hints,
    devices_to_allocate,
    filter_by_affinity,
    pod_device_requests,
)
from toposched.topology import CPUSet, Device, DeviceKind, LogicalCPU, Machine, NUMANode
from toposched.workload import Container, Pod

NUMA = [0, 1]
POD = "fakePod"
CONTAINER = "fakeContainer"


def hints(*spec):
    """``hints(((0,), True), ((0, 1), False))`` -> a list of TopologyHint."""
    return [TopologyHint(frozenset(nodes), preferred) for nodes, preferred in spec]


def on(numa, *ids):
    """Devices ``ids`` all on one NUMA node."""
    return [(i, numa) for i in ids]


NO_ALIGNMENT = None
ONE_PER_NODE = [("Dev1", 0), ("Dev2", 1)]
TWO_PER_NODE = [("Dev1", 0), ("Dev2", 1), ("Dev3", 0), ("Dev4", 1)]
TWO_PER_NODE_SORTED = [("Dev1", 0), ("Dev2", 0), ("Dev3", 1), ("Dev4", 1)]

# (description, requests, devices, allocations [(pod, container, resource, ids)], expected hints)
COMMON_HINT_CASES = [
    (
        "single request, no device reports a NUMA node",
        {"testdevice": 1},
        {"testdevice": [("Dev1", None), ("Dev2", None), ("Dev3", ()), ("Dev4", [])]},
        [],
        {"testdevice": NO_ALIGNMENT},
    ),
    (
        "single request, only one device has a NUMA node",
        {"testdevice": 1},
        {"testdevice": [("Dev1", None), ("Dev2", 1)]},
        [],
        {"testdevice": hints(((1,), True))},  # v1.37: NUMA sets of the nodes devices report only
    ),
    (
        "single request, one device per NUMA node",
        {"testdevice": 1},
        {"testdevice": ONE_PER_NODE},
        [],
        {"testdevice": hints(((0,), True), ((1,), True), ((0, 1), False))},
    ),
    (
        "request for 2, one device per NUMA node",
        {"testdevice": 2},
        {"testdevice": ONE_PER_NODE},
        [],
        {"testdevice": hints(((0, 1), True))},
    ),
    (
        "request for 2, two devices per NUMA node",
        {"testdevice": 2},
        {"testdevice": TWO_PER_NODE},
        [],
        {"testdevice": hints(((0,), True), ((1,), True), ((0, 1), False))},
    ),
    (
        "request for 2 would fit one NUMA node, but the free devices force both",
        {"testdevice": 2},
        {"testdevice": TWO_PER_NODE},
        [(POD, "fakeOtherContainer", "testdevice", ["Dev1", "Dev2"])],
        {"testdevice": hints(((0, 1), False))},
    ),
    (
        "two device resources, mixed layout",
        {"testdevice1": 2, "testdevice2": 1},
        {"testdevice1": TWO_PER_NODE, "testdevice2": [("Dev1", 0)]},
        [],
        {
            "testdevice1": hints(((0,), True), ((1,), True), ((0, 1), False)),
            "testdevice2": hints(((0,), True)),  # NUMA sets of the nodes its devices report only
        },
    ),
    (
        "one resource, more requested than the node has",
        {"testdevice": 6},
        {"testdevice": TWO_PER_NODE_SORTED},
        [],
        {"testdevice": []},
    ),
    (
        "one resource, everything already allocated to this container",
        {"testdevice": 2},
        {"testdevice": on(0, "Dev1", "Dev2")},
        [(POD, CONTAINER, "testdevice", ["Dev1", "Dev2"])],
        {"testdevice": hints(((0,), True))},  # NUMA sets of the nodes its devices report only
    ),
    (
        "one resource, fewer already allocated to this container than requested",
        {"testdevice": 4},
        {"testdevice": TWO_PER_NODE_SORTED},
        [(POD, CONTAINER, "testdevice", ["Dev1", "Dev2"])],
        {"testdevice": []},
    ),
    (
        "one resource, more already allocated to this container than requested",
        {"testdevice": 2},
        {"testdevice": TWO_PER_NODE_SORTED},
        [(POD, CONTAINER, "testdevice", ["Dev1", "Dev2", "Dev3", "Dev4"])],
        {"testdevice": []},
    ),
]

PER_NODE_HINTS = hints(((0,), True), ((1,), True), ((0, 1), False))

# Pod scope only: (description, pod, devices, allocations, expected hints)
POD_SCOPE_CASES = [
    (
        "two resources, app containers only; an unregistered resource gets no entry",
        Pod(
            "p",
            uid=POD,
            containers=(
                Container("fakeContainer1", limits={"testdevice1": 2}),
                Container("fakeContainer2", limits={"testdevice2": 2}),
                Container("fakeContainer3", limits={"notRegistered": 2}),
            ),
        ),
        {"testdevice1": TWO_PER_NODE_SORTED, "testdevice2": TWO_PER_NODE_SORTED},
        [],
        {"testdevice1": PER_NODE_HINTS, "testdevice2": PER_NODE_HINTS},
    ),
    (
        "two resources asked by init containers and app containers",
        Pod(
            "p",
            uid=POD,
            init_containers=(
                Container("init1", limits={"testdevice1": 1, "testdevice2": 1}),
                Container("init2", limits={"testdevice1": 1, "testdevice2": 2}),
            ),
            containers=(
                Container("fakeContainer1", limits={"testdevice1": 1, "testdevice2": 1}),
                Container("fakeContainer2", limits={"testdevice1": 1, "testdevice2": 1}),
                Container("fakeContainer3", limits={"notRegistered": 1}),
            ),
        ),
        {"testdevice1": TWO_PER_NODE_SORTED, "testdevice2": TWO_PER_NODE_SORTED},
        [],
        {"testdevice1": PER_NODE_HINTS, "testdevice2": PER_NODE_HINTS},
    ),
    (
        "two resources would fit one NUMA node, another pod's devices force both",
        Pod(
            "p",
            uid=POD,
            containers=(
                Container("fakeContainer1", limits={"testdevice1": 1, "testdevice2": 1}),
                Container("fakeContainer2", limits={"testdevice1": 1, "testdevice2": 1}),
                Container("fakeContainer3", limits={"notRegistered": 1}),
            ),
        ),
        {"testdevice1": TWO_PER_NODE_SORTED, "testdevice2": TWO_PER_NODE_SORTED},
        [
            ("fakeOtherPod", "fakeOtherContainer", "testdevice1", ["Dev1", "Dev3"]),
            ("fakeOtherPod", "fakeOtherContainer", "testdevice2", ["Dev1", "Dev3"]),
        ],
        {"testdevice1": hints(((0, 1), False)), "testdevice2": hints(((0, 1), False))},
    ),
]


def manager_with(devices, allocations, numa=NUMA, **kwargs) -> DeviceManager:
    """A manager whose allocations are seeded as upstream's tests seed ``podDevices``."""
    dm = DeviceManager(numa, devices, **kwargs)
    table: dict = {}
    for pod, container, resource, ids in allocations:
        table.setdefault(pod, {}).setdefault(container, {})[resource] = frozenset(ids)
    s = dm.state
    dm.restore(DeviceManagerState(s.numa_nodes, s.devices, s.healthy, table, {}))
    return dm


def single_container_pod(requests) -> Pod:
    return Pod("p", uid=POD, containers=(Container(CONTAINER, limits=requests),))


# --------------------------------------------------------------------------------------------
# Hints


COMMON_IDS = [c[0] for c in COMMON_HINT_CASES]


@pytest.mark.parametrize("desc, requests, devices, allocations, expected", COMMON_HINT_CASES, ids=COMMON_IDS)
def test_container_hints_function(desc, requests, devices, allocations, expected):
    mine = {r: ids for p, c, r, ids in allocations if (p, c) == (POD, CONTAINER)}
    others: dict = {}
    for p, c, r, ids in allocations:
        if (p, c) != (POD, CONTAINER):
            others.setdefault(r, set()).update(ids)
    got = device_topology_hints(devices, requests, NUMA, allocated=mine, in_use=others)
    assert got == expected


@pytest.mark.parametrize("desc, requests, devices, allocations, expected", COMMON_HINT_CASES, ids=COMMON_IDS)
def test_container_hints_manager(desc, requests, devices, allocations, expected):
    dm = manager_with(devices, allocations)
    pod = single_container_pod(requests)
    assert dm.get_topology_hints(pod, CONTAINER) == expected
    assert dm.get_topology_hints(pod, pod.containers[0]) == expected


@pytest.mark.parametrize("desc, requests, devices, allocations, expected", COMMON_HINT_CASES, ids=COMMON_IDS)
def test_pod_hints_common_cases(desc, requests, devices, allocations, expected):
    dm = manager_with(devices, allocations)
    assert dm.get_pod_topology_hints(single_container_pod(requests)) == expected


@pytest.mark.parametrize(
    "desc, pod, devices, allocations, expected", POD_SCOPE_CASES, ids=[c[0] for c in POD_SCOPE_CASES]
)
def test_pod_hints_pod_scope_cases(desc, pod, devices, allocations, expected):
    dm = manager_with(devices, allocations)
    assert dm.get_pod_topology_hints(pod) == expected


def test_hints_leave_out_resources_that_are_not_device_plugin_resources():
    got = device_topology_hints({"gpu": ONE_PER_NODE}, {"cpu": 2000, "memory": 1 << 30, "gpu": 1, "other": 1}, NUMA)
    assert list(got) == ["gpu"]


def test_hints_with_no_healthy_device_are_empty_not_nil():
    # The resource has topology (from all its devices) but nothing healthy is left.
    got = device_topology_hints({"gpu": ONE_PER_NODE}, {"gpu": 1}, NUMA, unhealthy={"gpu": ["Dev1", "Dev2"]})
    assert got == {"gpu": []}


def test_preferred_size_counts_unhealthy_and_busy_devices():
    # Two devices on node 0 (one unhealthy), one on node 1: one node could hold 2 on an empty,
    # healthy machine, so only 1-node hints would be preferred; none fits, so none is preferred.
    devices = {"gpu": [("a", 0), ("b", 0), ("c", 1)]}
    got = device_topology_hints(devices, {"gpu": 2}, NUMA, unhealthy={"gpu": ["b"]})
    assert got == {"gpu": hints(((0, 1), False))}


def test_reusable_devices_pin_the_hints_to_their_nodes():
    # An init container freed "a" (node 0): every hint must contain node 0.
    devices = {"gpu": [("a", 0), ("b", 0), ("c", 1), ("d", 1)]}
    got = device_topology_hints(devices, {"gpu": 2}, NUMA, reusable={"gpu": ["a"]}, in_use={"gpu": ["a"]})
    assert got == {"gpu": hints(((0,), True), ((0, 1), False))}


def test_reusable_device_without_topology_is_skipped_but_an_empty_topology_excludes_every_mask():
    devices = {"gpu": [("a", None), ("b", ()), ("c", 0), ("d", 1)]}
    # "a" reports no topology: skipped, and it does not count towards the request either.
    assert device_topology_hints(devices, {"gpu": 1}, NUMA, reusable={"gpu": ["a"]}) == {
        "gpu": hints(((0,), True), ((1,), True), ((0, 1), False))
    }
    # "b" has a topology with no node: no mask contains it, so no hint at all.
    assert device_topology_hints(devices, {"gpu": 1}, NUMA, reusable={"gpu": ["b"]}) == {"gpu": []}


def test_zero_request_gives_every_mask_with_single_nodes_preferred():
    got = device_topology_hints({"gpu": ONE_PER_NODE}, {"gpu": 0}, NUMA)
    assert got == {"gpu": hints(((0,), True), ((1,), True), ((0, 1), False))}


def test_four_numa_nodes_hint_order_is_smallest_first_then_lexicographic():
    devices = {"gpu": [("a", 0), ("b", 2), ("c", 3)]}
    got = device_topology_hints(devices, {"gpu": 2}, [0, 1, 2, 3])["gpu"]
    # Upstream (v1.37 deviceNUMANodes) walks the NUMA sets of the nodes the devices report: 1 has none.
    assert [sorted(h.numa_nodes) for h in got] == [[0, 2], [0, 3], [2, 3], [0, 2, 3]]
    assert [h.preferred for h in got] == [True, True, True, False]


# --------------------------------------------------------------------------------------------
# Pod device request (getPodDeviceRequest)

GPU_NIC_POD_CASES = [
    ("empty pod", Pod("p"), {}),
    (
        "one init container asks for a device",
        Pod("p", init_containers=(Container("i1", limits={"cpu": 2000, "memory": 10**9, "gpu": 2}),)),
        {"gpu": 2},
    ),
    (
        "init containers ask for devices",
        Pod(
            "p",
            init_containers=(
                Container("i1", limits={"cpu": 2000, "gpu": 2}),
                Container("i2", limits={"cpu": 2000, "gpu": 4}),
            ),
        ),
        {"gpu": 4},
    ),
    (
        "an app container asks for a device",
        Pod("p", containers=(Container("c1", limits={"cpu": 2000, "gpu": 2}),)),
        {"gpu": 2},
    ),
    (
        "init and app containers ask the same amount",
        Pod(
            "p",
            init_containers=(
                Container("i1", limits={"gpu": 2, "nic": 2}),
                Container("i2", limits={"gpu": 2, "nic": 2}),
            ),
            containers=(Container("c1", limits={"gpu": 1, "nic": 1}), Container("c2", limits={"gpu": 1, "nic": 1})),
        ),
        {"gpu": 2, "nic": 2},
    ),
    (
        "init containers ask more than app containers",
        Pod(
            "p",
            init_containers=(
                Container("i1", limits={"gpu": 2, "nic": 1}),
                Container("i2", limits={"gpu": 3, "nic": 2}),
            ),
            containers=(Container("c1", limits={"gpu": 1, "nic": 1}), Container("c2", limits={"gpu": 1})),
        ),
        {"gpu": 3, "nic": 2},
    ),
    (
        "app containers ask more than init containers",
        Pod(
            "p",
            init_containers=(
                Container("i1", limits={"gpu": 2, "nic": 1}),
                Container("i2", limits={"gpu": 2, "nic": 1}),
            ),
            containers=(Container("c1", limits={"gpu": 3, "nic": 2}), Container("c2", limits={"gpu": 3, "nic": 2})),
        ),
        {"gpu": 6, "nic": 4},
    ),
    (
        "sidecars run next to the app containers and after them the regular init container",
        Pod(
            "p",
            init_containers=(
                Container("i1", limits={"gpu": 3}),
                Container("s1", limits={"gpu": 1}, restart_policy="Always"),
                Container("s2", limits={"gpu": 2}, restart_policy="Always"),
            ),
            containers=(Container("c1", limits={"gpu": 1}), Container("c2", limits={"gpu": 2})),
        ),
        {"gpu": 6},
    ),
    (
        "a regular init container after a sidecar runs next to it",
        Pod(
            "p",
            init_containers=(
                Container("s1", limits={"gpu": 2}, restart_policy="Always"),
                Container("i1", limits={"gpu": 3}),
            ),
            containers=(Container("c1", limits={"gpu": 1}),),
        ),
        {"gpu": 5},
    ),
]


@pytest.mark.parametrize("desc, pod, expected", GPU_NIC_POD_CASES, ids=[c[0] for c in GPU_NIC_POD_CASES])
def test_pod_device_request(desc, pod, expected):
    assert pod_device_requests(pod, ["gpu", "nic"]) == expected


def test_container_device_request_reads_limits():
    c = Container("c", requests={"cpu": 500}, limits={"gpu": 2, "cpu": 1000})
    assert container_device_requests(c, ["gpu"]) == {"gpu": 2}
    assert container_device_requests(c) == {"gpu": 2, "cpu": 1000}


# --------------------------------------------------------------------------------------------
# Aligned allocation (TestTopologyAlignedAllocation)


def many(first, last, numa):
    return [(f"Dev{i}", numa) for i in range(first, last)]


# (description, count, devices, hint NUMA nodes, plugin answer, devices that must be chosen, alignment)
ALIGNED_CASES = [
    ("single request, no alignment", 1, [("Dev1", None), ("Dev2", None)], (0, 1), None, [], {}),
    ("request for 1, partial alignment", 1, [("Dev1", None), ("Dev2", 1)], (1,), None, [], {1: 1}),
    ("single request, NUMA 0", 1, ONE_PER_NODE, (0,), None, [], {0: 1}),
    ("single request, NUMA 1", 1, ONE_PER_NODE, (1,), None, [], {1: 1}),
    ("request for 2, NUMA 0", 2, TWO_PER_NODE, (0,), None, [], {0: 2}),
    ("request for 2, NUMA 1", 2, TWO_PER_NODE, (1,), None, [], {1: 2}),
    (
        "request for 4 cannot fit, prefer NUMA 0",
        4,
        [("Dev1", 0), ("Dev2", 1), ("Dev3", 0), ("Dev4", 1), ("Dev5", 0), ("Dev6", 1)],
        (0,),
        None,
        [],
        {0: 3, 1: 1},
    ),
    (
        "request for 4 cannot fit, prefer NUMA 1",
        4,
        [("Dev1", 0), ("Dev2", 1), ("Dev3", 0), ("Dev4", 1), ("Dev5", 0), ("Dev6", 1)],
        (1,),
        None,
        [],
        {0: 1, 1: 3},
    ),
    (
        "request for 4 across two of four NUMA nodes",
        4,
        [("Dev1", 0), ("Dev2", 1), ("Dev3", 2), ("Dev4", 3), ("Dev5", 0), ("Dev6", 1), ("Dev7", 2), ("Dev8", 3)],
        (1, 3),
        None,
        [],
        {1: 2, 3: 2},
    ),
    (
        "request for 5 on NUMA 0, plugin's aligned choice accepted",
        5,
        many(0, 100, 0) + many(100, 200, 1),
        (0,),
        ["Dev0", "Dev19", "Dev83", "Dev42", "Dev77"],
        ["Dev0", "Dev19", "Dev83", "Dev42", "Dev77"],
        {0: 5},
    ),
    (
        "request for 5 on NUMA 0, plugin's aligned choice accepted, unaligned ignored",
        5,
        many(0, 100, 0) + many(100, 200, 1),
        (0,),
        ["Dev0", "Dev19", "Dev83", "Dev150", "Dev186"],
        ["Dev0", "Dev19", "Dev83"],
        {0: 5},
    ),
    (
        "request for 5 on NUMA 1, plugin's aligned choice accepted, unknown ids ignored",
        5,
        many(0, 100, 1),
        (1,),
        ["Dev0", "Dev19", "Dev83", "bogus0", "bogus1"],
        ["Dev0", "Dev19", "Dev83"],
        {1: 5},
    ),
    (
        "request for 5 across NUMA nodes, plugin's choice accepted",
        5,
        many(0, 3, 0) + many(3, 100, 1),
        (0,),
        ["Dev0", "Dev1", "Dev2", "Dev42", "Dev83"],
        ["Dev0", "Dev1", "Dev2", "Dev42", "Dev83"],
        {0: 3, 1: 2},
    ),
    (
        "request for 5 across NUMA nodes, plugin's unaligned choice accepted, unknown ids ignored",
        5,
        many(0, 3, 0) + many(3, 100, 1),
        (0,),
        ["Dev0", "Dev1", "Dev2", "Dev42", "bogus0"],
        ["Dev0", "Dev1", "Dev2", "Dev42"],
        {0: 3, 1: 2},
    ),
]


def alignment(devices, chosen):
    """Upstream's check: chosen devices counted by their (first) NUMA node, when the resource has topology."""
    topo = dict(devices)
    if not any(t is not None for t in topo.values()):
        return {}
    out: dict[int, int] = {}
    for d in chosen:
        if topo[d] is not None:
            out[topo[d]] = out.get(topo[d], 0) + 1
    return out


@pytest.mark.parametrize(
    "desc, count, devices, hint, answer, must, expected", ALIGNED_CASES, ids=[c[0] for c in ALIGNED_CASES]
)
def test_topology_aligned_allocation(desc, count, devices, hint, answer, must, expected):
    plugin = None if answer is None else (lambda available, must_include, size: answer)
    hint_ = TopologyHint(frozenset(hint), True)
    chosen = devices_to_allocate({"resource": devices}, "resource", count, hint_, preferred=plugin)
    assert len(chosen) == count
    assert set(must) <= chosen
    assert alignment(devices, chosen) == expected


@pytest.mark.parametrize(
    "desc, count, devices, hint, answer, must, expected", ALIGNED_CASES, ids=[c[0] for c in ALIGNED_CASES]
)
def test_topology_aligned_allocation_through_the_manager(desc, count, devices, hint, answer, must, expected):
    numa = sorted({t for _, t in devices if t is not None} | {0, 1})
    plugin = None if answer is None else (lambda available, must_include, size: answer)
    dm = DeviceManager(numa, {"resource": devices}, preferred=None if plugin is None else {"resource": plugin})
    before = dm.state
    picked = dm.pick("resource", count, hint)  # on trial: the state is kept
    assert dm.state is before
    pod = Pod("p", uid="podUID", containers=(Container("containerName", limits={"resource": count}),))
    got = dm.allocate(pod, "containerName", TopologyHint(frozenset(hint), True))
    assert set(must) <= got["resource"]
    assert alignment(devices, got["resource"]) == expected
    assert set(picked) == got["resource"]


# (description, count, devices, in use, reusable, hint, expected available, must_include, size)
PREFERRED_PARAMETER_CASES = [
    (
        "request for 1 on NUMA 0, nothing in use or reusable",
        1,
        many(0, 4, 0),
        [],
        [],
        (0,),
        ["Dev0", "Dev1", "Dev2", "Dev3"],
        [],
        1,
    ),
    (
        "request for 4 on NUMA 0, 2 in use and both reusable",
        4,
        many(0, 8, 0),
        ["Dev0", "Dev5"],
        ["Dev0", "Dev5"],
        (0,),
        ["Dev0", "Dev1", "Dev2", "Dev3", "Dev4", "Dev5", "Dev6", "Dev7"],
        ["Dev0", "Dev5"],
        4,
    ),
    (
        "request for 4 on NUMA 0, 4 in use of which 2 reusable",
        4,
        many(0, 8, 0),
        ["Dev0", "Dev5", "Dev4", "Dev1"],
        ["Dev0", "Dev5"],
        (0,),
        ["Dev0", "Dev2", "Dev3", "Dev5", "Dev6", "Dev7"],
        ["Dev0", "Dev5"],
        4,
    ),
    (
        "request for 6 across NUMA nodes, 2 in use and both reusable",
        6,
        many(0, 4, 0) + many(4, 8, 1),
        ["Dev1", "Dev6"],
        ["Dev1", "Dev6"],
        (0,),
        ["Dev0", "Dev1", "Dev2", "Dev3", "Dev4", "Dev5", "Dev6", "Dev7"],
        ["Dev0", "Dev1", "Dev2", "Dev3", "Dev6"],
        6,
    ),
    (
        "request for 6 across NUMA nodes, 4 in use of which 2 reusable",
        6,
        many(0, 4, 0) + many(4, 8, 1),
        ["Dev0", "Dev1", "Dev6", "Dev7"],
        ["Dev1", "Dev6"],
        (0,),
        ["Dev1", "Dev2", "Dev3", "Dev4", "Dev5", "Dev6"],
        ["Dev1", "Dev2", "Dev3", "Dev6"],
        6,
    ),
]


@pytest.mark.parametrize(
    "desc, count, devices, in_use, reusable, hint, available, must_include, size",
    PREFERRED_PARAMETER_CASES,
    ids=[c[0] for c in PREFERRED_PARAMETER_CASES],
)
def test_get_preferred_allocation_parameters(
    desc, count, devices, in_use, reusable, hint, available, must_include, size
):
    calls = []

    def plugin(avail, must, n):
        calls.append((avail, must, n))
        return None

    devices_to_allocate(
        {"resource": devices}, "resource", count, TopologyHint(frozenset(hint), True),
        allocated=in_use, reusable=reusable, preferred=plugin,
    )
    assert len(calls) == 1
    got_available, got_must, got_size = calls[0]
    assert set(got_available) == set(available)
    assert set(got_must) == set(must_include)
    assert got_size == size


def test_plugin_is_not_asked_when_the_aligned_devices_are_exactly_enough():
    calls = []
    chosen = devices_to_allocate(
        {"r": [("a", 0), ("b", 0), ("c", 1)]}, "r", 2, TopologyHint(frozenset({0}), True),
        preferred=lambda *args: calls.append(args) or ["c"],
    )
    assert chosen == {"a", "b"}
    assert calls == []


# --------------------------------------------------------------------------------------------
# filterByAffinity (TestFilterByAffinity) and our deterministic order

FILTER_DEVICES = {
    "res1": [("dev1", [1]), ("dev2", [1, 2]), ("dev3", [2]), ("dev4", [2]), ("devwithouttopology", None)]
}

FILTER_CASES = [
    (["dev1", "dev2"], {"dev2"}, {"dev1"}, set()),
    (["dev1", "dev2", "dev3", "dev4"], {"dev2", "dev3", "dev4"}, {"dev1"}, set()),
]


@pytest.mark.parametrize("available, aligned, unaligned, no_affinity", FILTER_CASES)
def test_filter_by_affinity(available, aligned, unaligned, no_affinity):
    a, u, n = filter_by_affinity(FILTER_DEVICES, "res1", available, TopologyHint(frozenset({2}), True))
    assert (set(a), set(u), set(n)) == (aligned, unaligned, no_affinity)


def test_filter_by_affinity_without_hint_or_topology_puts_everything_in_no_affinity():
    assert filter_by_affinity(FILTER_DEVICES, "res1", ["dev1", "dev3"], None) == ([], [], ["dev1", "dev3"])
    assert filter_by_affinity(FILTER_DEVICES, "res1", ["dev1"], TopologyHint(None, True)) == ([], [], ["dev1"])
    plain = {"r": [("a", None), ("b", ())]}
    assert filter_by_affinity(plain, "r", ["a", "b"], TopologyHint(frozenset({0}), True)) == ([], [], ["a", "b"])


def test_our_order_follows_upstream_node_sort():
    # Hint {0}; node 2 has fewer free devices than node 1, so its device comes first among the
    # unaligned ones (upstream sorts nodes by ascending device count); no-NUMA devices last.
    devices = {"r": [("a", 1), ("b", 1), ("c", 2), ("d", None), ("e", 0)]}
    assert filter_by_affinity(devices, "r", ["a", "b", "c", "d"], TopologyHint(frozenset({0}), True)) == (
        [], ["c", "a", "b"], ["d"]
    )
    assert devices_to_allocate(devices, "r", 1, TopologyHint(frozenset({0}), True), allocated=["e"]) == {"c"}
    four = devices_to_allocate(devices, "r", 4, TopologyHint(frozenset({0}), True), allocated=["e"])
    assert four == {"a", "b", "c", "d"}


def test_reusable_devices_come_first_even_when_unaligned():
    devices = {"r": [("a", 0), ("b", 1)]}
    hint = TopologyHint(frozenset({0}), True)
    assert devices_to_allocate(devices, "r", 1, hint, allocated=["b"], reusable=["b"]) == {"b"}


# --------------------------------------------------------------------------------------------
# devicesToAllocate errors (TestPodContainerDeviceToAllocate) and the sequence tests

R1, R2, R3 = "domain1.com/resource1", "domain2.com/resource2", "domain2.com/resource3"
NO_LONGER_HEALTHY = "previously allocated devices are no longer healthy; cannot allocate unhealthy devices"


def test_devices_to_allocate_error_cases():
    with pytest.raises(DeviceAllocationError) as err:
        devices_to_allocate({R1: []}, R1, 2, None, container_devices=["dev1", "dev2"])
    assert str(err.value) == f"no healthy devices present; cannot allocate unhealthy devices {R1}"
    with pytest.raises(DeviceAllocationError) as err:
        devices_to_allocate({R1: [], R3: []}, R2, 1, None, container_devices=["dev5"])
    assert str(err.value) == f"cannot allocate unregistered device {R2}"
    with pytest.raises(DeviceAllocationError) as err:
        devices_to_allocate({R3: [("dev7", None), ("dev8", None)]}, R3, 1, None, container_devices=["dev5"])
    assert str(err.value) == f"{NO_LONGER_HEALTHY} {R3}"


def test_devices_to_allocate_errors_through_the_manager():
    dm = manager_with(
        {R1: [], R3: [("dev7", None), ("dev8", None)]},
        [("pod1", "con1", R1, ["dev1", "dev2"]), ("pod2", "con2", R2, ["dev5"]), ("pod3", "con3", R3, ["dev5"])],
    )
    before = dm.state
    cases = [
        ("pod1", "con1", R1, 2, f"no healthy devices present; cannot allocate unhealthy devices {R1}"),
        ("pod2", "con2", R2, 1, f"cannot allocate unregistered device {R2}"),
        ("pod3", "con3", R3, 1, f"{NO_LONGER_HEALTHY} {R3}"),
    ]
    for uid, name, resource, count, message in cases:
        pod = Pod(uid, uid=uid, containers=(Container(name, limits={resource: count}),))
        with pytest.raises(DeviceAllocationError) as err:
            dm.allocate(pod, name)
        assert str(err.value) == message
        assert dm.state == before


def test_changed_request_is_refused_and_an_unchanged_one_is_a_no_op():
    dm = DeviceManager(NUMA, {"r": TWO_PER_NODE})
    pod = Pod("p", uid="uid-1", containers=(Container("c", limits={"r": 2}),))
    first = dm.allocate(pod, "c", TopologyHint(frozenset({1}), True))
    assert first == {"r": frozenset({"Dev2", "Dev4"})}
    assert dm.allocate(pod, "c", TopologyHint(frozenset({0}), True)) == first
    grown = Pod("p", uid="uid-1", containers=(Container("c", limits={"r": 3}),))
    before = dm.state
    with pytest.raises(DeviceAllocationError) as err:
        dm.allocate(grown, "c")
    assert str(err.value) == 'pod "uid-1" container "c" changed request for resource "r" from 2 to 3'
    assert dm.state == before
    # The allocation regenerates the same hints (kubelet restart path).
    assert dm.get_topology_hints(pod, "c") == {"r": hints(((1,), True), ((0, 1), False))}
    assert dm.get_topology_hints(grown, "c") == {"r": []}


def test_pod_container_device_allocation_sequence():
    dm = DeviceManager([0], {R1: [("dev1", 0), ("dev2", 0)], R2: [("dev3", None), ("dev4", None)]})
    pods = [
        Pod("p0", uid="p0", containers=(Container("c", limits={R1: 2, "cpu": 2000, R2: 1}),)),
        Pod("p1", uid="p1", containers=(Container("c", limits={R1: 1}),)),
        Pod("p2", uid="p2", containers=(Container("c", limits={R2: 1}),)),
    ]
    dm.allocate(pods[0], "c")
    assert (len(dm.in_use(R1)), len(dm.in_use(R2))) == (2, 1)
    with pytest.raises(DeviceAllocationError) as err:
        dm.allocate(pods[1], "c")
    assert str(err.value) == f"requested number of devices unavailable for {R1}. Requested: 1, Available: 0"
    assert (len(dm.in_use(R1)), len(dm.in_use(R2))) == (2, 1)
    dm.allocate(pods[2], "c")
    assert (len(dm.in_use(R1)), len(dm.in_use(R2))) == (2, 2)


def test_init_container_devices_are_reused_by_app_containers():
    dm = DeviceManager([0], {R1: [("dev1", None), ("dev2", None)], R2: [("dev3", 0), ("dev4", 0)]})
    pod = Pod(
        "p",
        uid="u",
        init_containers=(Container("init1", limits={R1: 1}), Container("init2", limits={R1: 2})),
        containers=(Container("app1", limits={R1: 1, R2: 1}), Container("app2", limits={R1: 1, R2: 1})),
    )
    for c in pod.all_containers:
        dm.allocate(pod, c)
    got = {c: r.get(R1, frozenset()) for c, r in dm.pod_devices(pod).items()}
    assert [len(got[c]) for c in ("init1", "init2", "app1", "app2")] == [1, 2, 1, 1]
    assert got["init2"] >= got["init1"] | got["app1"] | got["app2"]
    assert not got["app1"] & got["app2"]


def test_a_pod_without_devices_changes_nothing_and_reuse_sets_keep_only_devices():
    # Upstream gives every pod it allocates for a reuse set; an empty one reads as an absent one, so
    # the model keeps none: a pod asking for no device leaves the state the same object (its
    # availability and in-use views stay memoised), and a set the app containers used up is dropped.
    dm = DeviceManager([0], {R1: [("dev1", None), ("dev2", None)]})
    before = dm.state
    plain = Pod("plain", uid="plain", init_containers=(Container("init", limits={"cpu": 1000}),),
                containers=(Container("app", limits={"cpu": 1000}),))
    for c in plain.all_containers:
        assert dm.allocate(plain, c) == {}
    dm.release(plain)
    assert dm.state is before
    pod = Pod("p", uid="u", init_containers=(Container("init", limits={R1: 1}),),
              containers=(Container("app", limits={R1: 1}),))
    dm.allocate(pod, "init")
    assert dict(dm.state.reusable) == {"u": {R1: dm.pod_devices(pod)["init"][R1]}}
    dm.allocate(pod, "app")  # takes the init container's device: nothing is left to reuse
    assert dict(dm.state.reusable) == {}
    assert dm.state == DeviceManagerState(dm.state.numa_nodes, dm.state.devices, dm.state.healthy,
                                          dm.state.allocations, {"u": {R1: frozenset()}})


def test_restartable_init_container_devices_are_not_reused():
    dm = DeviceManager([0], {R1: [(f"dev{i}", None) for i in range(1, 7)]})
    pod = Pod(
        "p",
        uid="u",
        init_containers=(
            Container("init", limits={R1: 3}),
            Container("sidecar1", limits={R1: 1}, restart_policy="Always"),
            Container("sidecar2", limits={R1: 2}, restart_policy="Always"),
        ),
        containers=(Container("app1", limits={R1: 1}), Container("app2", limits={R1: 2})),
    )
    dm.allocate_pod(pod)
    got = {c: r[R1] for c, r in dm.pod_devices(pod).items()}
    assert {c: len(d) for c, d in got.items()} == {"init": 3, "sidecar1": 1, "sidecar2": 2, "app1": 1, "app2": 2}
    assert got["init"] >= got["sidecar1"] | got["sidecar2"]
    dedicated = [got[c] for c in ("sidecar1", "sidecar2", "app1", "app2")]
    for i, a in enumerate(dedicated):
        for b in dedicated[i + 1:]:
            assert not a & b
    # With our deterministic order the exact devices are known too.
    assert got == {
        "init": {"dev1", "dev2", "dev3"},
        "sidecar1": {"dev1"},
        "sidecar2": {"dev2", "dev3"},
        "app1": {"dev4"},
        "app2": {"dev5", "dev6"},
    }


def test_container_hints_count_devices_freed_by_init_containers():
    dm = DeviceManager(NUMA, {"r": [("a", 0), ("b", 1)]})
    pod = Pod(
        "p",
        uid="u",
        init_containers=(Container("init", limits={"r": 1}),),
        containers=(Container("app", limits={"r": 2}),),
    )
    dm.allocate(pod, "init", TopologyHint(frozenset({0}), True))
    # "a" is held by the finished init container but reusable: the app container can have both.
    assert dm.get_topology_hints(pod, "app") == {"r": hints(((0, 1), True))}
    assert dm.allocate(pod, "app", TopologyHint(frozenset({0, 1}), True)) == {"r": frozenset({"a", "b"})}


def test_allocate_pod_is_all_or_nothing_and_release_restores_state():
    dm = DeviceManager(NUMA, {"r": TWO_PER_NODE})
    other = Pod("o", uid="o", containers=(Container("c", limits={"r": 1}),))
    dm.allocate_pod(other, TopologyHint(frozenset({0}), True))
    before = dm.state
    too_big = Pod("p", uid="p", containers=(Container("c1", limits={"r": 2}), Container("c2", limits={"r": 2})))
    with pytest.raises(DeviceAllocationError):
        dm.allocate_pod(too_big, TopologyHint(frozenset({0, 1}), True))
    assert dm.state == before
    fits = Pod("q", uid="q", containers=(Container("c1", limits={"r": 1}), Container("c2", limits={"r": 2})))
    placed = dm.allocate_pod(fits, {"c1": TopologyHint(frozenset({0}), True), "c2": TopologyHint(frozenset({1}), True)})
    assert placed == {"c1": {"r": frozenset({"Dev3"})}, "c2": {"r": frozenset({"Dev2", "Dev4"})}}
    dm.release(fits)
    assert dm.state == before
    dm.release("never-seen")
    assert dm.state == before


def test_update_devices_keeps_allocations_and_health_matters():
    dm = DeviceManager(NUMA, {"r": ONE_PER_NODE})
    pod = Pod("p", uid="u", containers=(Container("c", limits={"r": 1}),))
    dm.allocate(pod, "c", TopologyHint(frozenset({0}), True))
    dm.update_devices("r", ONE_PER_NODE, unhealthy=["Dev1"])
    assert dm.container_devices(pod, "c") == {"r": frozenset({"Dev1"})}
    assert dm.available("r") == frozenset({"Dev2"})
    with pytest.raises(DeviceAllocationError, match="previously allocated devices are no longer healthy"):
        dm.allocate(pod, "c")


def test_from_machine_takes_numa_nodes_from_the_model():
    machine = Machine(
        cpus=(LogicalCPU(0, 0, 0, 0), LogicalCPU(1, 1, 0, 1)),
        numa_nodes=(NUMANode(0, CPUSet([0])), NUMANode(1, CPUSet([1]))),
        devices=(
            Device("0000:3b:00.0", DeviceKind.GPU, numa_id=1, name="gpu1"),
            Device("0000:af:00.0", DeviceKind.GPU, numa_id=0),
            Device("0000:00:1f.0", DeviceKind.OTHER),
        ),
    )
    dm = DeviceManager.from_machine(machine, {"nvidia.com/gpu": ["gpu1", "0000:af:00.0"], "x/other": ["0000:00:1f.0"]})
    assert dm.numa_nodes == (0, 1)
    assert dict(dm.state.devices["nvidia.com/gpu"]) == {"0000:af:00.0": frozenset({0}), "gpu1": frozenset({1})}
    assert dict(dm.state.devices["x/other"]) == {"0000:00:1f.0": None}
    with pytest.raises(InputError, match="no device"):
        DeviceManager.from_machine(machine, {"nvidia.com/gpu": ["0000:99:00.0"]})


# --------------------------------------------------------------------------------------------
# Bad input


HINT_ON_3 = TopologyHint(frozenset({3}), True)


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: device_topology_hints({"r": ONE_PER_NODE}, {"r": -1}, NUMA), "requests[r]"),
        (lambda: device_topology_hints({"r": [("a", 5)]}, {"r": 1}, NUMA), "devices[r][a]"),
        (lambda: device_topology_hints({"r": [("a", 0), ("a", 1)]}, {"r": 1}, NUMA), "devices[r][1]"),
        (lambda: device_topology_hints({"r": [("a",)]}, {"r": 1}, NUMA), "devices[r][0]"),
        (lambda: device_topology_hints({"r": ONE_PER_NODE}, {"r": 1}, [0, 0]), "numa_nodes"),
        (lambda: devices_to_allocate({"r": ONE_PER_NODE}, "r", -2, None), "count"),
        (lambda: devices_to_allocate({"r": ONE_PER_NODE}, "r", 1, HINT_ON_3, numa_nodes=NUMA), "hint"),
        (lambda: DeviceManager(NUMA, {"r": [("a", "zero")]}), "devices[r][a]"),
    ],
)
def test_bad_input_is_one_input_error_naming_the_field(call, field):
    with pytest.raises(InputError) as err:
        call()
    assert err.value.field == field


def test_bad_hint_or_request_leaves_the_manager_unchanged():
    dm = DeviceManager(NUMA, {"r": TWO_PER_NODE})
    pod = Pod("p", uid="u", containers=(Container("c", limits={"r": 1}),))
    before = dm.state
    with pytest.raises(InputError) as err:
        dm.allocate(pod, "c", TopologyHint(frozenset({0, 7}), True))
    assert err.value.field == "hint"
    assert dm.state == before

    class Negative:  # a container that slipped past the pod model's own check
        name = "c"
        limits = {"r": -1}
        requests = {"r": -1}
        limits_or_requests = {"r": -1}
        restart_policy = None

    with pytest.raises(InputError):
        dm.allocate(pod, Negative())
    with pytest.raises(InputError):
        dm.get_topology_hints(pod, Negative())
    with pytest.raises(InputError):
        dm.allocate(pod, "no-such-container")
    assert dm.state == before
    assert issubclass(DeviceAllocationError, ToposchedError)


# --------------------------------------------------------------------------------------------
# Properties

numa_counts = st.integers(min_value=1, max_value=4)


@st.composite
def device_layouts(draw):
    numa = list(range(draw(numa_counts)))
    topo = st.one_of(st.none(), st.frozensets(st.sampled_from(numa), min_size=1, max_size=2))
    n = draw(st.integers(min_value=0, max_value=8))
    return numa, [(f"d{i}", draw(topo)) for i in range(n)]


@settings(max_examples=150, deadline=None)
@given(layout=device_layouts(), data=st.data())
def test_aligned_allocation_never_skips_a_free_aligned_device(layout, data):
    numa, devices = layout
    ids = [d for d, _ in devices]
    hint = data.draw(st.frozensets(st.sampled_from(numa), min_size=1))
    in_use = data.draw(st.frozensets(st.sampled_from(ids))) if ids else frozenset()
    free = [d for d in ids if d not in in_use]
    count = data.draw(st.integers(min_value=0, max_value=len(free)))
    answer = data.draw(st.one_of(st.none(), st.lists(st.sampled_from(ids + ["bogus"]), max_size=6)))
    plugin = None if answer is None else (lambda a, m, s: answer)
    try:
        chosen = devices_to_allocate(
            {"r": devices}, "r", count, TopologyHint(hint, True), allocated=in_use, preferred=plugin
        )
    except DeviceAllocationError as err:
        assert "no healthy devices present" in str(err) and not ids
        return
    assert len(chosen) == count and not chosen & in_use and chosen <= set(ids)
    topo = dict(devices)
    has_topology = any(topo.values())
    aligned_free = {d for d in free if has_topology and topo[d] and topo[d] & hint}
    if not chosen <= aligned_free:
        assert aligned_free <= chosen


@settings(max_examples=150, deadline=None)
@given(layout=device_layouts(), data=st.data())
def test_hints_are_exactly_the_fitting_masks(layout, data):
    numa, devices = layout
    count = data.draw(st.integers(min_value=0, max_value=4))
    got = device_topology_hints({"r": devices}, {"r": count}, numa)["r"]
    topo = dict(devices)
    if not any(topo.values()):
        assert got is None
        return
    if len(devices) < count:
        assert got == []
        return
    fitting = [h.numa_nodes for h in got]
    reported = [n for n in numa if any(t and n in t for t in topo.values())]  # upstream deviceNUMANodes
    expected = [
        frozenset(c)
        for k in range(1, len(reported) + 1)
        for c in combinations(reported, k)
        if sum(1 for t in topo.values() if t and t & set(c)) >= count
    ]
    assert fitting == expected
    narrowest = min((len(m) for m in expected), default=len(reported))
    assert [h.preferred for h in got] == [len(m) == narrowest for m in fitting]


@st.composite
def pods(draw, index):
    def container(name, sidecar=False):
        limits = {r: draw(st.integers(min_value=0, max_value=2)) for r in draw(st.sets(st.sampled_from(["r", "s"])))}
        return Container(name, limits=limits, restart_policy="Always" if sidecar else None)

    inits = tuple(container(f"i{k}", draw(st.booleans())) for k in range(draw(st.integers(min_value=0, max_value=2))))
    apps = tuple(container(f"c{k}") for k in range(draw(st.integers(min_value=1, max_value=2))))
    return Pod(f"pod{index}", uid=f"uid{index}", init_containers=inits, containers=apps)


def check_exclusive(dm: DeviceManager, live: dict[str, Pod]) -> None:
    for resource in ("r", "s"):
        owner: dict[str, str] = {}
        for uid, pod in live.items():
            held = dm.pod_devices(uid)
            together = [c.name for c in pod.init_containers if c.is_sidecar] + [c.name for c in pod.containers]
            seen: set[str] = set()
            for name in together:
                mine = held.get(name, {}).get(resource, frozenset())
                assert not mine & seen, f"{resource}: containers of {uid} share {mine & seen}"
                seen |= mine
            for resources in held.values():
                for d in resources.get(resource, ()):
                    assert owner.setdefault(d, uid) == uid, f"{d} held by {owner[d]} and {uid}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=device_layouts(), data=st.data())
def test_allocations_stay_exclusive_and_release_restores_state(layout, data):
    numa, devices = layout
    second = [(f"s{i}", t) for i, (_, t) in enumerate(devices[:4])]
    dm = DeviceManager(numa, {"r": devices, "s": second})
    live: dict[str, Pod] = {}
    for index in range(data.draw(st.integers(min_value=1, max_value=5))):
        pod = data.draw(pods(index))
        before = dm.state
        hints_by_resource = dm.get_pod_topology_hints(pod)
        preferred = [h for hs in hints_by_resource.values() if hs for h in hs if h.preferred]
        hint = data.draw(st.sampled_from(preferred)) if preferred and data.draw(st.booleans()) else None
        try:
            dm.allocate_pod(pod, hint)
        except DeviceAllocationError:
            assert dm.state == before
            continue
        live[pod.uid] = pod
        check_exclusive(dm, live)
        for c in pod.all_containers:
            for resource, n in c.limits.items():
                assert len(dm.container_devices(pod, c.name).get(resource, ())) == n
        if data.draw(st.booleans()):
            dm.release(pod)
            del live[pod.uid]
            assert dm.state == before
    for uid in list(live):
        dm.release(uid)
    assert not dm.state.allocations and not dm.state.reusable
