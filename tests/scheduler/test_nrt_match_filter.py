"""NodeResourceTopologyMatch Filter, checked against scheduler-plugins' own test tables.

The tables below restate, in our own words and data structures, every case of upstream's
``pkg/noderesourcetopology/filter_test.go`` (TestNodeResourceTopology,
TestNodeResourceTopologyMultiContainerPodScope, TestNodeResourceTopologyMultiContainerContainerScope),
the helper tables of ``numaresources_test.go`` and ``nodeconfig/topologymanager_test.go``. The
expected codes and reasons are upstream's. As in upstream's helpers, zone resources carry a
capacity and an ``available`` amount (``allocatable`` left at zero) and the node's allocatable
is the sum of the zones' available amounts plus any node-only resources.
"""

from __future__ import annotations

import pytest

from toposched.quantity import canonical_units
from toposched.scheduler.nrt_match import (
    REASON_CANNOT_ALIGN_CONTAINER,
    REASON_CANNOT_ALIGN_INIT_CONTAINER,
    REASON_CANNOT_ALIGN_POD,
    REASON_INCONSISTENT_ACCOUNTING,
    NUMAZone,
    TopologyManagerConfig,
    _subtract_from_numa,
    is_host_level_resource,
    is_numa_affine_resource,
    is_valid_policy,
    is_valid_scope,
    node_level_resources,
    nrt_filter,
    numa_zones,
    topology_manager_config,
)
from toposched.scheduler.status import Code
from toposched.topology.nrt import NodeResourceTopology, ResourceInfo, Zone
from toposched.workload import BURSTABLE, GUARANTEED, Container, Pod

CPU, MEMORY, HUGEPAGES_2MI = "cpu", "memory", "hugepages-2Mi"
EXTENDED = "namespace/extended"
NIC = "vendor/nic1"
NO_SUCH_NIC = "vendor/notexistingnic"
NIC_WITHOUT_NUMA = "vendor.com/old-nic-model"
EPHEMERAL = "ephemeral-storage"

OK = None
ALIGN_POD = (Code.UNSCHEDULABLE, REASON_CANNOT_ALIGN_POD)
ALIGN_CONTAINER = (Code.UNSCHEDULABLE, REASON_CANNOT_ALIGN_CONTAINER)
ALIGN_INIT = (Code.UNSCHEDULABLE, REASON_CANNOT_ALIGN_INIT_CONTAINER)


# ---- builders --------------------------------------------------------------------------------


def quantities(spec: dict[str, str | int]) -> dict[str, int]:
    """Kubernetes quantity strings ("2", "8Gi", "64Mi") to canonical units."""
    return {name: canonical_units(name, value) for name, value in spec.items()}


def res(name: str, capacity: str, available: str) -> ResourceInfo:
    return ResourceInfo(name, canonical_units(name, capacity), 0, canonical_units(name, available))


def zone(name: str, *resources: ResourceInfo, costs: dict[str, int] | None = None, type: str = "Node") -> Zone:
    return Zone(name, type, None, costs or {}, {}, resources)


def make_nrt(name: str, zones: list[Zone], *, policies: tuple[str, ...] = (), attributes=None) -> NodeResourceTopology:
    return NodeResourceTopology(name, tuple(zones), attributes or {}, policies)


def allocatable(nrt: NodeResourceTopology, extra: dict[str, str] | None = None) -> dict[str, int]:
    total: dict[str, int] = {}
    for z in nrt.zones:
        for r in z.resources:
            total[r.name] = total.get(r.name, 0) + r.available
    total.update(quantities(extra or {}))
    return total


def guaranteed_like(spec: dict[str, str | int], containers: int = 1) -> Pod:
    """Containers whose requests equal their limits (Guaranteed when cpu and memory are set)."""
    q = quantities(spec)
    return Pod("testpod", containers=tuple(Container(f"container{i + 1}", q, q) for i in range(containers)))


def requests_only(spec: dict[str, str | int]) -> Pod:
    return Pod("testpod", containers=(Container("container1", quantities(spec)),))


def requests_and_limits(requests: dict[str, str | int], limits: dict[str, str | int]) -> Pod:
    return Pod("testpod", containers=(Container("container1", quantities(requests), quantities(limits)),))


def assert_status(status, want) -> None:
    if want is None:
        assert status.is_success, status
        assert status.code == Code.SUCCESS
    else:
        assert (status.code, status.reasons) == (want[0], (want[1],))


# ---- the five nodes of upstream's main table ---------------------------------------------------

NODE1 = make_nrt(
    "node1",
    [
        zone("node-0", res(CPU, "20", "4"), res(MEMORY, "8Gi", "8Gi"), res(NIC, "30", "10")),
        zone("node-1", res(CPU, "30", "8"), res(MEMORY, "8Gi", "8Gi"), res(NIC, "30", "10")),
    ],
    policies=("SingleNUMANodeContainerLevel",),
)
NODE2 = make_nrt(
    "node2",
    [
        zone("node-0", res(CPU, "20", "2"), res(MEMORY, "8Gi", "4Gi"), res(HUGEPAGES_2MI, "128Mi", "128Mi"),
             res(NIC, "30", "5")),
        zone("node-1", res(CPU, "30", "4"), res(MEMORY, "8Gi", "4Gi"), res(HUGEPAGES_2MI, "128Mi", "128Mi"),
             res(NIC, "30", "2")),
    ],
    policies=("SingleNUMANodeContainerLevel",),
)
NODE3 = make_nrt(
    "node3",
    [
        zone("node-0", res(CPU, "20", "2"), res(MEMORY, "8Gi", "4Gi"), res(NIC, "30", "5")),
        zone("node-1", res(CPU, "30", "4"), res(MEMORY, "8Gi", "4Gi"), res(NIC, "30", "2")),
    ],
    policies=("SingleNUMANodePodLevel",),
)
BADLY_FORMED = make_nrt(
    "badly_formed_node",
    [
        zone("node-0", res(CPU, "20", "2"), res(MEMORY, "8Gi", "4Gi"), res(NIC, "30", "5")),
        zone("node-75", res(CPU, "30", "4"), res(MEMORY, "8Gi", "4Gi"), res(NIC, "30", "2")),
    ],
    policies=("SingleNUMANodePodLevel",),
)
EXTENDED_NODE = make_nrt("extended", list(NODE1.zones), policies=("SingleNUMANodeContainerLevel",))

NODES = {
    "node1": (NODE1, allocatable(NODE1)),
    "node2": (NODE2, allocatable(NODE2, {NIC_WITHOUT_NUMA: "4"})),
    "node3": (NODE3, allocatable(NODE3)),
    "badly_formed_node": (BADLY_FORMED, allocatable(BADLY_FORMED)),
    "extended": (EXTENDED_NODE, allocatable(EXTENDED_NODE, {EXTENDED: "1"})),
}

MAIN_TABLE = [
    ("guaranteed, extended resource and devices, fits", guaranteed_like(
        {CPU: "2", MEMORY: "2Gi", EXTENDED: "1", NIC: "3"}), "extended", OK),
    ("guaranteed, extended resource without devices, fits", guaranteed_like(
        {CPU: "2", MEMORY: "2Gi", EXTENDED: "1"}), "extended", OK),
    ("best-effort pod without containers passes", Pod("testpod"), "node1", OK),
    ("best-effort asking for devices, pod scope, fits", guaranteed_like({NIC: "5"}), "node3", OK),
    ("best-effort asking for too many devices, pod scope", guaranteed_like({NIC: "20"}), "node3", ALIGN_POD),
    ("best-effort asking for devices, container scope, fits", guaranteed_like({NIC: "5"}), "node2", OK),
    ("best-effort asking for too many devices, container scope", guaranteed_like({NIC: "20"}), "node1",
     ALIGN_CONTAINER),
    ("best-effort asking for devices and a node-level extended resource, container scope, fits",
     guaranteed_like({EXTENDED: "1", NIC: "10"}), "extended", OK),
    ("burstable (requests below limits), cpu and memory fit, devices do not, container scope",
     requests_and_limits({CPU: "3", MEMORY: "3Gi", NIC: "11"}, {CPU: "4", MEMORY: "4Gi", NIC: "11"}), "node2",
     ALIGN_CONTAINER),
    ("burstable (requests below limits), cpu and memory fit, devices do not, pod scope",
     requests_and_limits({CPU: "1", MEMORY: "1Gi", NIC: "6"}, {CPU: "2", MEMORY: "2Gi", NIC: "6"}), "node3",
     ALIGN_POD),
    ("burstable (requests below limits), everything fits, pod scope",
     requests_and_limits({CPU: "1", MEMORY: "1Gi", NIC: "5"}, {CPU: "2", MEMORY: "2Gi", NIC: "5"}), "node3", OK),
    ("burstable (requests below limits), cpu and memory beyond any NUMA node, pod scope, fits",
     requests_and_limits({CPU: "19", MEMORY: "5Gi", NIC: "5"}, {CPU: "20", MEMORY: "6Gi", NIC: "5"}), "node3", OK),
    ("burstable (requests below limits), everything fits, container scope",
     requests_and_limits({CPU: "3", MEMORY: "3Gi", NIC: "5"}, {CPU: "4", MEMORY: "4Gi", NIC: "5"}), "node2", OK),
    ("burstable (requests below limits), cpu and memory beyond any NUMA node, container scope, fits",
     requests_and_limits({CPU: "5", MEMORY: "5Gi", NIC: "5"}, {CPU: "6", MEMORY: "6Gi", NIC: "5"}), "node2", OK),
    ("guaranteed, minimal, fits", guaranteed_like({CPU: "2", MEMORY: "2Gi"}), "node1", OK),
    ("guaranteed, exactly what one zone has left, fits", guaranteed_like({CPU: "8", MEMORY: "8Gi"}), "node1", OK),
    ("guaranteed, zero request of a resource no zone has, fits",
     guaranteed_like({CPU: "2", MEMORY: "2Gi", HUGEPAGES_2MI: "0", NIC: "3"}), "node1", OK),
    ("guaranteed with devices, fits", guaranteed_like({CPU: "2", MEMORY: "2Gi", NIC: "3"}), "node2", OK),
    ("guaranteed with hugepages, fits", guaranteed_like(
        {CPU: "2", MEMORY: "2Gi", HUGEPAGES_2MI: "64Mi", NIC: "3"}), "node2", OK),
    ("burstable cpu and devices, fits", guaranteed_like({CPU: "4", NIC: "3"}), "node2", OK),
    ("burstable cpu and too many devices, container scope", guaranteed_like({CPU: "4", NIC: "11"}), "node2",
     ALIGN_CONTAINER),
    ("burstable cpu and too many devices, pod scope", guaranteed_like({CPU: "2", NIC: "6"}), "node3", ALIGN_POD),
    ("burstable cpu and devices, pod scope, fits", guaranteed_like({CPU: "2", NIC: "5"}), "node3", OK),
    ("burstable cpu beyond any NUMA node and devices, pod scope, fits", guaranteed_like({CPU: "20", NIC: "5"}),
     "node3", OK),
    ("burstable cpu and devices, container scope, fits", guaranteed_like({CPU: "2", NIC: "5"}), "node2", OK),
    ("burstable cpu beyond any NUMA node and devices, container scope, fits", guaranteed_like(
        {CPU: "4", NIC: "5"}), "node2", OK),
    ("burstable memory and too many devices, container scope", guaranteed_like({MEMORY: "2Gi", NIC: "11"}),
     "node2", ALIGN_CONTAINER),
    ("burstable memory and too many devices, pod scope", guaranteed_like({MEMORY: "2Gi", NIC: "6"}), "node3",
     ALIGN_POD),
    ("burstable memory and devices, pod scope, fits", guaranteed_like({MEMORY: "2Gi", NIC: "5"}), "node3", OK),
    ("burstable memory beyond any NUMA node and devices, pod scope, fits", guaranteed_like(
        {MEMORY: "5Gi", NIC: "5"}), "node3", OK),
    ("burstable memory and devices, container scope, fits", guaranteed_like({MEMORY: "4Gi", NIC: "5"}), "node2", OK),
    ("burstable memory beyond any NUMA node and devices, container scope, fits", guaranteed_like(
        {MEMORY: "5Gi", NIC: "5"}), "node2", OK),
    ("burstable (requests only), cpu and memory fit, devices do not, container scope",
     requests_only({CPU: "4", MEMORY: "4Gi", NIC: "11"}), "node2", ALIGN_CONTAINER),
    ("burstable (requests only), cpu and memory fit, devices do not, pod scope",
     requests_only({CPU: "2", MEMORY: "2Gi", NIC: "6"}), "node3", ALIGN_POD),
    ("burstable (requests only), everything fits, pod scope", requests_only({CPU: "2", MEMORY: "2Gi", NIC: "5"}),
     "node3", OK),
    ("burstable (requests only), cpu and memory beyond any NUMA node, pod scope, fits",
     requests_only({CPU: "20", MEMORY: "5Gi", NIC: "5"}), "node3", OK),
    ("burstable (requests only), everything fits, container scope",
     requests_only({CPU: "4", MEMORY: "4Gi", NIC: "5"}), "node2", OK),
    ("burstable (requests only), cpu and memory beyond any NUMA node, container scope, fits",
     requests_only({CPU: "5", MEMORY: "5Gi", NIC: "5"}), "node2", OK),
    ("burstable with an extended resource, fits", guaranteed_like({EXTENDED: "1", CPU: "4", NIC: "3"}),
     "extended", OK),
    ("guaranteed, more hugepages than any NUMA node", guaranteed_like(
        {CPU: "2", MEMORY: "2Gi", HUGEPAGES_2MI: "256Mi", NIC: "3"}), "node2", ALIGN_CONTAINER),
    ("guaranteed, more cpu than any NUMA node", guaranteed_like({CPU: "9", MEMORY: "1Gi", NIC: "3"}), "node1",
     ALIGN_CONTAINER),
    ("guaranteed, zero request of an unknown device, fits", guaranteed_like(
        {CPU: "2", MEMORY: "1Gi", NO_SUCH_NIC: "0"}), "node1", OK),
    ("guaranteed, three containers too big together, pod scope",
     guaranteed_like({CPU: "3", MEMORY: "1Gi", NO_SUCH_NIC: "0"}, 3), "node3", ALIGN_POD),
    ("guaranteed, minimal, pod scope, fits", guaranteed_like({CPU: "1", MEMORY: "1Gi"}), "node3", OK),
    ("guaranteed, exactly what the one valid zone has left, pod scope, fits",
     guaranteed_like({CPU: "2", MEMORY: "4Gi"}), "badly_formed_node", OK),
    ("guaranteed, three containers fitting together, pod scope",
     guaranteed_like({CPU: "1", MEMORY: "1Gi", NO_SUCH_NIC: "0"}, 3), "node3", OK),
    ("guaranteed, three containers, the zone named node-75 does not count",
     guaranteed_like({CPU: "1", MEMORY: "1Gi", NO_SUCH_NIC: "0"}, 3), "badly_formed_node", ALIGN_POD),
    ("guaranteed, hugepages and a NIC reported only at node level, fits",
     guaranteed_like({CPU: "2", MEMORY: "2Gi", HUGEPAGES_2MI: "64Mi", NIC_WITHOUT_NUMA: "3"}), "node2", OK),
    ("guaranteed, ephemeral storage no zone reports, fits",
     guaranteed_like({CPU: "2", MEMORY: "2Gi", EPHEMERAL: "100Mi"}), "node2", OK),
]


@pytest.mark.parametrize(("pod", "node", "want"), [c[1:] for c in MAIN_TABLE], ids=[c[0] for c in MAIN_TABLE])
def test_single_container_table(pod, node, want):
    nrt, node_allocatable = NODES[node]
    assert_status(nrt_filter(pod, nrt, node_allocatable=node_allocatable), want)


def test_main_table_pods_have_the_qos_upstream_gives_them():
    # Upstream names some Burstable pods "Best effort"; the QoS the kubelet computes is what counts.
    qos = {c[0]: c[1].qos_class for c in MAIN_TABLE}
    assert qos["best-effort asking for devices, pod scope, fits"] == "BestEffort"
    assert qos["burstable (requests below limits), everything fits, pod scope"] == BURSTABLE
    assert qos["guaranteed, three containers fitting together, pod scope"] == GUARANTEED


# ---- several containers on one host --------------------------------------------------------------

HOST0_ZONES = [
    zone("node-0", res(CPU, "32", "30"), res(MEMORY, "64Gi", "60Gi"), res(HUGEPAGES_2MI, "384Mi", "384Mi"),
         res(NIC, "16", "16")),
    zone("node-1", res(CPU, "32", "32"), res(MEMORY, "64Gi", "64Gi"), res(HUGEPAGES_2MI, "512Mi", "512Mi"),
         res(NIC, "32", "32")),
]
HOST0_POD_SCOPE = make_nrt("host0", HOST0_ZONES, policies=("SingleNUMANodePodLevel",))
HOST0_CONTAINER_SCOPE = make_nrt("host0", HOST0_ZONES, policies=("SingleNUMANodeContainerLevel",))


def multi_container_pod(app: list[dict[str, str]], init: list[dict[str, str]] = ()) -> Pod:
    """Guaranteed-style containers (requests = limits); init containers are named apart from
    app containers because our pod model refuses repeated names (upstream reuses cnt-N)."""
    return Pod(
        "testpod",
        containers=tuple(Container(f"cnt-{i + 1}", quantities(r), quantities(r)) for i, r in enumerate(app)),
        init_containers=tuple(Container(f"init-{i + 1}", quantities(r), quantities(r)) for i, r in enumerate(init)),
    )


POD_SCOPE_TABLE = [
    ("guaranteed pod fits one NUMA node only",
     [{CPU: "2", MEMORY: "2Gi"}, {CPU: "4", MEMORY: "8Gi"},
      {CPU: "26", MEMORY: "32Gi", HUGEPAGES_2MI: "512Mi", NIC: "26"}], OK),
    ("not enough cpu on any NUMA node",
     [{CPU: "2", MEMORY: "2Gi"}, {CPU: "8", MEMORY: "8Gi"},
      {CPU: "26", MEMORY: "26Gi", HUGEPAGES_2MI: "52Mi", NIC: "26"}], ALIGN_POD),
    ("not enough memory on any NUMA node",
     [{CPU: "2", MEMORY: "4Gi"}, {CPU: "4", MEMORY: "16Gi"},
      {CPU: "26", MEMORY: "52Gi", HUGEPAGES_2MI: "52Mi", NIC: "26"}], ALIGN_POD),
    ("not enough hugepages on any NUMA node",
     [{CPU: "2", MEMORY: "2Gi"}, {CPU: "4", MEMORY: "8Gi"},
      {CPU: "26", MEMORY: "32Gi", HUGEPAGES_2MI: "3328Mi", NIC: "26"}], ALIGN_POD),
    ("not enough devices on any NUMA node",
     [{CPU: "2", MEMORY: "2Gi"}, {CPU: "4", MEMORY: "8Gi"},
      {CPU: "26", MEMORY: "26Gi", HUGEPAGES_2MI: "52Mi", NIC: "52"}], ALIGN_POD),
]


@pytest.mark.parametrize(("app", "want"), [c[1:] for c in POD_SCOPE_TABLE], ids=[c[0] for c in POD_SCOPE_TABLE])
def test_multi_container_pod_scope(app, want):
    pod = multi_container_pod(app)
    assert pod.qos_class == GUARANTEED
    status = nrt_filter(pod, HOST0_POD_SCOPE, node_allocatable=allocatable(HOST0_POD_SCOPE))
    assert_status(status, want)


CONTAINER_SCOPE_TABLE = [
    ("[1][tier3] one container, fits", [], [{CPU: "2", MEMORY: "4G"}], OK),
    ("[2][tier3] one container, too much cpu", [], [{CPU: "40", MEMORY: "4G"}], ALIGN_CONTAINER),
    ("[2][tier3] one container, too much memory", [], [{CPU: "2", MEMORY: "100G"}], ALIGN_CONTAINER),
    ("[2][tier3] one container, too much cpu and memory", [], [{CPU: "40", MEMORY: "100G"}], ALIGN_CONTAINER),
    ("[4][tier2] two containers spread over the NUMA nodes, fit", [],
     [{CPU: "20", MEMORY: "40G"}, {CPU: "20", MEMORY: "40G"}], OK),
    ("[4][tier1] two containers with devices and hugepages spread over the NUMA nodes, fit", [],
     [{CPU: "2", MEMORY: "6G", HUGEPAGES_2MI: "500Mi", NIC: "16"},
      {CPU: "2", MEMORY: "6G", HUGEPAGES_2MI: "50Mi", NIC: "8"}], OK),
    ("[7][tier1] init container with too much cpu", [{CPU: "40", MEMORY: "40G"}],
     [{CPU: "1", MEMORY: "4G"}, {CPU: "1", MEMORY: "4G"}], ALIGN_INIT),
    ("[7][tier1] init container with too much memory", [{CPU: "4", MEMORY: "70G"}],
     [{CPU: "1", MEMORY: "4G"}, {CPU: "1", MEMORY: "4G"}], ALIGN_INIT),
    ("[11][tier1] init container fits, app containers spread", [{CPU: "4", MEMORY: "10G"}],
     [{CPU: "20", MEMORY: "40G"}, {CPU: "20", MEMORY: "40G"}], OK),
    ("[17][tier1] three init containers fit, three app containers spread",
     [{CPU: "4", MEMORY: "10G"}] * 3,
     [{CPU: "20", MEMORY: "40G"}, {CPU: "20", MEMORY: "40G"}, {CPU: "6", MEMORY: "10G"}], OK),
    ("[24][tier1] init containers fit, the third app container finds no cpu",
     [{CPU: "30", MEMORY: "10G"}] * 2,
     [{CPU: "20", MEMORY: "40G"}, {CPU: "20", MEMORY: "40G"}, {CPU: "20", MEMORY: "6G"}], ALIGN_CONTAINER),
    ("[27][tier1] init containers fit, the app container wants too much cpu",
     [{CPU: "30", MEMORY: "10G"}] * 2, [{CPU: "35", MEMORY: "40G"}], ALIGN_CONTAINER),
    ("[28][tier1] init containers and app containers fit",
     [{CPU: "30", MEMORY: "10G"}] * 2, [{CPU: "20", MEMORY: "40G"}, {CPU: "20", MEMORY: "40G"}], OK),
    ("[29][tier1] init containers' cpu exceeds the node only summed up, fits",
     [{CPU: "30", MEMORY: "10G"}] * 3,
     [{CPU: "20", MEMORY: "40G"}, {CPU: "20", MEMORY: "40G"}, {CPU: "2", MEMORY: "6G"}], OK),
    ("[29][tier1] init containers' memory exceeds the node only summed up, fits",
     [{CPU: "3", MEMORY: "50G"}] * 3,
     [{CPU: "20", MEMORY: "40G"}, {CPU: "20", MEMORY: "40G"}, {CPU: "2", MEMORY: "6G"}], OK),
    ("[32][tier1] the first init container wants too much cpu",
     [{CPU: "40", MEMORY: "50G"}, {CPU: "3", MEMORY: "50G"}, {CPU: "3", MEMORY: "50G"}],
     [{CPU: "20", MEMORY: "40G"}, {CPU: "2", MEMORY: "6G"}], ALIGN_INIT),
    ("[32][tier1] the second init container wants too much cpu",
     [{CPU: "20", MEMORY: "50G"}, {CPU: "40", MEMORY: "50G"}, {CPU: "3", MEMORY: "50G"}],
     [{CPU: "20", MEMORY: "40G"}, {CPU: "2", MEMORY: "6G"}], ALIGN_INIT),
]


@pytest.mark.parametrize(
    ("init", "app", "want"), [c[1:] for c in CONTAINER_SCOPE_TABLE], ids=[c[0] for c in CONTAINER_SCOPE_TABLE]
)
def test_multi_container_container_scope(init, app, want):
    pod = multi_container_pod(app, init)
    status = nrt_filter(pod, HOST0_CONTAINER_SCOPE, node_allocatable=allocatable(HOST0_CONTAINER_SCOPE))
    assert_status(status, want)


# ---- the node's policy and scope (nodeconfig/topologymanager_test.go) --------------------------

@pytest.mark.parametrize(
    ("value", "valid"), [("", False), ("pod", True), ("container", True), ("POD", False), ("Container", False)]
)
def test_valid_scopes(value, valid):
    assert is_valid_scope(value) is valid


@pytest.mark.parametrize(
    ("value", "valid"),
    [("", False), ("none", True), ("best-effort", True), ("restricted", True), ("single-numa-node", True),
     ("None", False), ("BestEffort", False), ("Restricted", False), ("single-NUMA-node", False),
     ("SingleNUMANode", False)],
)
def test_valid_policies(value, valid):
    assert is_valid_policy(value) is valid


def attrs(**values: str) -> dict[str, str]:
    return {{"policy": "topologyManagerPolicy", "scope": "topologyManagerScope"}[k]: v for k, v in values.items()}


CONFIG_TABLE = [
    ("nothing at all gives the defaults", (), {}, ("none", "container")),
    ("deprecated policy alone", ("BestEffortPodLevel",), {}, ("best-effort", "pod")),
    ("only the first deprecated policy counts", ("RestrictedContainerLevel", "BestEffortPodLevel"), {},
     ("restricted", "container")),
    ("single-numa-node at pod level", ("SingleNUMANodePodLevel",), {}, ("single-numa-node", "pod")),
    ("single-numa-node at container level", ("SingleNUMANodeContainerLevel",), {}, ("single-numa-node", "container")),
    ("an unknown deprecated policy changes nothing", ("foobar",), {}, ("none", "container")),
    ("the deprecated None changes nothing", ("None",), {}, ("none", "container")),
    ("policy attribute alone keeps the default scope", (), attrs(policy="restricted"), ("restricted", "container")),
    ("scope attribute alone keeps the default policy", (), attrs(scope="pod"), ("none", "pod")),
    ("both attributes", (), attrs(policy="restricted", scope="container"), ("restricted", "container")),
    ("both attributes, other order", (), attrs(scope="pod", policy="single-numa-node"), ("single-numa-node", "pod")),
    ("a miscapitalised scope is ignored", (), attrs(scope="Pod", policy="single-numa-node"),
     ("single-numa-node", "container")),
    ("a miscapitalised scope is ignored (2)", (), attrs(scope="Container", policy="restricted"),
     ("restricted", "container")),
    ("attributes override the deprecated scope", ("BestEffortPodLevel",), attrs(scope="container"),
     ("best-effort", "container")),
    ("attributes override the deprecated policy and scope", ("BestEffortPodLevel",),
     attrs(scope="container", policy="restricted"), ("restricted", "container")),
]


@pytest.mark.parametrize(("policies", "attributes", "want"), [c[1:] for c in CONFIG_TABLE],
                         ids=[c[0] for c in CONFIG_TABLE])
def test_topology_manager_config(policies, attributes, want):
    nrt = make_nrt("n", [], policies=policies, attributes=attributes)
    assert topology_manager_config(nrt) == TopologyManagerConfig(*want)


# ---- resource classes and NUMA bookkeeping (numaresources_test.go) ------------------------------

@pytest.mark.parametrize(
    ("name", "host_level", "numa_affine"),
    [(CPU, False, True), (MEMORY, False, True), ("hugepages-1Gi", False, True), ("storage", True, False),
     (EPHEMERAL, True, False), ("vendor.io/fastest-nic", True, False), ("awesome.com/gpu-for-ai", True, False)],
)
def test_resource_classes(name, host_level, numa_affine):
    assert is_host_level_resource(name) is host_level
    assert is_numa_affine_resource(name) is numa_affine


SUBTRACT_TABLE = [
    ("nothing from nothing", {}, 0, GUARANTEED, {}, {}, None),
    ("a NUMA id that is not there changes nothing", {}, 2, GUARANTEED, {}, {}, None),
    ("nothing from something", {CPU: "2", MEMORY: "4Gi"}, 0, GUARANTEED, {}, {CPU: "2", MEMORY: "4Gi"}, None),
    ("guaranteed pods take cpu and memory", {CPU: "8", MEMORY: "16Gi"}, 0, GUARANTEED,
     {CPU: "2", MEMORY: "4Gi"}, {CPU: "6", MEMORY: "12Gi"}, None),
    ("burstable pods take only devices", {CPU: "8", MEMORY: "16Gi", "vendor.io/gpu": "4"}, 0, BURSTABLE,
     {CPU: "2", MEMORY: "4Gi", "vendor.io/gpu": "2"}, {CPU: "8", MEMORY: "16Gi", "vendor.io/gpu": "2"}, None),
    ("resources the zone does not report are skipped", {CPU: "8", MEMORY: "16Gi", "vendor.io/nic": "4"}, 0,
     GUARANTEED, {CPU: "6", MEMORY: "12Gi", "vendor.io/nic": "2", EPHEMERAL: "1Gi"},
     {CPU: "2", MEMORY: "4Gi", "vendor.io/nic": "2"}, None),
    ("taking more than the zone has is an accounting error", {CPU: "8", MEMORY: "16Gi"}, 0, GUARANTEED,
     {CPU: "10", MEMORY: "20Gi"}, None, "exceeds NUMA 0"),
    ("a missing device is skipped", {CPU: "8", MEMORY: "16Gi"}, 0, GUARANTEED,
     {CPU: "4", MEMORY: "8Gi", "vendor.io/gpu": "2"}, {CPU: "4", MEMORY: "8Gi"}, None),
    ("missing hugepages are skipped", {CPU: "8", MEMORY: "16Gi"}, 0, GUARANTEED,
     {CPU: "4", MEMORY: "8Gi", "hugepages-1Gi": "2Gi"}, {CPU: "4", MEMORY: "8Gi"}, None),
]


@pytest.mark.parametrize(
    ("resources", "numa_id", "qos", "requested", "want", "error"),
    [c[1:] for c in SUBTRACT_TABLE], ids=[c[0] for c in SUBTRACT_TABLE],
)
def test_subtract_from_numa(resources, numa_id, qos, requested, want, error):
    zones = [NUMAZone(0, quantities(resources))]
    problem = _subtract_from_numa(zones, numa_id, qos, quantities(requested))
    if error is None:
        assert problem is None
        assert dict(zones[0].resources) == quantities(want)
    else:
        assert error in problem


def test_accounting_error_message_is_upstreams():
    zones = [NUMAZone(0, quantities({CPU: "8", MEMORY: "16Gi"}))]
    problem = _subtract_from_numa(zones, 0, GUARANTEED, quantities({CPU: "10"}))
    assert problem == 'resource "cpu" request 10 exceeds NUMA 0 availability 8'


# ---- quirks beyond upstream's tables -------------------------------------------------------------

SNN_CONTAINER = ("SingleNUMANodeContainerLevel",)


def small_node(*zones: Zone, policies=SNN_CONTAINER, attributes=None) -> NodeResourceTopology:
    return make_nrt("n", list(zones), policies=policies, attributes=attributes)


def test_missing_report_and_other_policies_pass():
    pod = guaranteed_like({CPU: "64", MEMORY: "1Ti"})
    assert nrt_filter(pod, None).is_success
    for policy in ("none", "best-effort", "restricted"):
        nrt = small_node(zone("node-0", res(CPU, "1", "1")), policies=(), attributes=attrs(policy=policy))
        assert nrt_filter(pod, nrt).is_success


def test_attributes_make_a_node_single_numa():
    nrt = small_node(zone("node-0", res(CPU, "4", "4"), res(MEMORY, "4Gi", "4Gi")), policies=(),
                     attributes=attrs(policy="single-numa-node", scope="pod"))
    assert_status(nrt_filter(guaranteed_like({CPU: "2", MEMORY: "2Gi"}, 3), nrt), ALIGN_POD)


def test_best_effort_pod_without_devices_always_passes():
    nrt = small_node(zone("node-0", res(CPU, "1", "0")))
    assert nrt_filter(Pod("p", containers=(Container("c"),)), nrt).is_success


def test_guaranteed_fractional_cpu_is_still_checked_per_numa_node():
    # Upstream's filter applies no "integer CPUs only are exclusive" rule: 1500m must fit one zone.
    nrt = small_node(zone("node-0", res(CPU, "1", "1"), res(MEMORY, "4Gi", "4Gi")),
                     zone("node-1", res(CPU, "1", "1"), res(MEMORY, "4Gi", "4Gi")))
    assert_status(nrt_filter(guaranteed_like({CPU: "1500m", MEMORY: "1Gi"}), nrt), ALIGN_CONTAINER)


def test_native_resource_without_numa_affinity_does_not_fit():
    # cpu is native and not host-level: a node whose zones report no cpu cannot align it.
    nrt = small_node(zone("node-0", res(MEMORY, "4Gi", "4Gi")))
    assert_status(nrt_filter(guaranteed_like({CPU: "1", MEMORY: "1Gi"}), nrt, node_allocatable={CPU: 4000}),
                  ALIGN_CONTAINER)


def test_resource_absent_at_node_level_does_not_fit():
    nrt = small_node(zone("node-0", res(CPU, "4", "4"), res(MEMORY, "4Gi", "4Gi")))
    pod = guaranteed_like({CPU: "1", MEMORY: "1Gi", "vendor.com/fpga": "1"})
    assert_status(nrt_filter(pod, nrt), ALIGN_CONTAINER)
    assert nrt_filter(pod, nrt, node_allocatable={"vendor.com/fpga": 1}).is_success


def test_node_level_resources_keep_only_what_nodeinfo_keeps():
    names = node_level_resources(["gpu", "storage", "vendor.com/fpga", "hugepages-1Gi", "example.kubernetes.io/x",
                                  "attachable-volumes-aws-ebs", "Vendor/Upper", "a/b/c"])
    assert names == {"cpu", "memory", "pods", "ephemeral-storage", "vendor.com/fpga", "hugepages-1Gi",
                     "example.kubernetes.io/x", "attachable-volumes-aws-ebs"}


def test_init_containers_do_not_consume_but_app_containers_do():
    nrt = small_node(zone("node-0", res(CPU, "4", "4"), res(MEMORY, "4Gi", "4Gi")))
    fits = multi_container_pod([{CPU: "2", MEMORY: "1Gi"}, {CPU: "2", MEMORY: "1Gi"}], [{CPU: "4", MEMORY: "4Gi"}])
    assert nrt_filter(fits, nrt).is_success
    too_many = multi_container_pod([{CPU: "2", MEMORY: "1Gi"}] * 3)
    assert_status(nrt_filter(too_many, nrt), ALIGN_CONTAINER)


def test_pod_scope_counts_sidecars_like_ordinary_init_containers():
    # Upstream's effective request takes the largest init container, sidecars included, and
    # does not add sidecars to the app containers.
    nrt = small_node(zone("node-0", res(CPU, "4", "4"), res(MEMORY, "4Gi", "4Gi")),
                     policies=("SingleNUMANodePodLevel",))
    q = quantities({CPU: "2", MEMORY: "1Gi"})
    pod = Pod("p", containers=(Container("app", q, q), Container("app2", q, q)),
              init_containers=(Container("sidecar", q, q, restart_policy="Always"),))
    assert pod.effective_requests()[CPU] == 6000
    assert nrt_filter(pod, nrt).is_success


def test_zone_names_follow_go_atoi_and_skip_other_types():
    nrt = make_nrt("n", [
        zone("node-+1", res(CPU, "1", "1")),
        zone("node-007", res(CPU, "1", "1")),
        zone("node--1", res(CPU, "1", "1")),
        zone("Node-2", res(CPU, "1", "1")),
        zone("socket-0", res(CPU, "1", "1"), type="Socket"),
        zone("node-65", res(CPU, "1", "1")),
    ])
    assert [z.numa_id for z in numa_zones(nrt)] == [1, 7]


def test_zone_named_node_64_is_an_upstream_panic():
    nrt = small_node(zone("node-0", res(CPU, "4", "4")), zone("node-64", res(CPU, "4", "4")))
    status = nrt_filter(guaranteed_like({CPU: "1", MEMORY: "1Gi"}), nrt)
    assert status.code == Code.ERROR
    assert status.reasons == ("runtime error: index out of range [64] with length 64",)


def test_two_zones_with_one_numa_id_make_an_accounting_error():
    # "node-1" and "node-01" are both NUMA 1: the first fits, the second is charged too.
    nrt = small_node(zone("node-1", res(CPU, "4", "4"), res(MEMORY, "4Gi", "4Gi")),
                     zone("node-01", res(CPU, "1", "1"), res(MEMORY, "4Gi", "4Gi")))
    status = nrt_filter(guaranteed_like({CPU: "2", MEMORY: "1Gi"}), nrt)
    assert status.code == Code.ERROR
    assert status.reasons[0] == REASON_INCONSISTENT_ACCOUNTING
    assert status.reasons[1] == 'resource "cpu" request 2 exceeds NUMA 1 availability 1'


def test_costs_follow_the_last_zone_of_a_numa_id():
    nrt = make_nrt("n", [
        zone("node-0", res(CPU, "1", "1"), costs={"node-0": 10, "node-1": 20}),
        zone("node-1", res(CPU, "1", "1"), costs={"node-0": 21, "node-1": 11, "cell-3": 5}),
    ])
    listed = numa_zones(nrt)
    assert [dict(z.costs) for z in listed] == [{0: 10, 1: 20}, {0: 21, 1: 11}]
    assert [dict(z.resources) for z in listed] == [{CPU: 1000}, {CPU: 1000}]
