"""NodeResourceTopologyMatch Score, checked against scheduler-plugins' own test tables.

Every case of upstream's ``pkg/noderesourcetopology/score_test.go`` (TestNodeResourceScorePlugin,
TestNodeResourceScorePluginLeastNUMA, TestNodeResourcePartialDataScorePlugin) and
``least_numa_test.go`` (TestNUMANodesRequired, TestNormalizeScore, TestMinDistance), plus
``numaresources_test.go``'s TestSubstractNUMA, restated as data tables in our own words. The
expected scores, NUMA sets and distances are upstream's.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.quantity import canonical_units
from toposched.scheduler.nrt_match import MAX_NODE_SCORE, NUMAZone, nrt_filter
from toposched.scheduler.nrt_match_args import (
    BALANCED_ALLOCATION,
    LEAST_ALLOCATED,
    LEAST_NUMA_NODES,
    MOST_ALLOCATED,
    NodeResourceTopologyMatchArgs,
    ResourceSpec,
    ScoringStrategy,
)
from toposched.scheduler.nrt_match_score import (
    _subtract_from_numas,
    balanced_allocation_score,
    least_allocated_score,
    least_numa_normalize_score,
    min_avg_distance,
    most_allocated_score,
    nrt_score,
    numa_nodes_required,
)
from toposched.scheduler.status import Code
from toposched.topology.nrt import NodeResourceTopology, ResourceInfo, Zone
from toposched.workload import GUARANTEED, Container, Pod

CPU, MEMORY, GPU = "cpu", "memory", "gpu"


def quantities(spec: dict[str, str]) -> dict[str, int]:
    return {name: canonical_units(name, value) for name, value in spec.items()}


def res(name: str, capacity: str, available: str) -> ResourceInfo:
    return ResourceInfo(name, canonical_units(name, capacity), 0, canonical_units(name, available))


def zone(name: str, *resources: ResourceInfo, costs: dict[str, int] | None = None) -> Zone:
    return Zone(name, "Node", None, costs or {}, {}, resources)


def pod_of(*containers: dict[str, str]) -> Pod:
    """One container per request list, requests equal to limits (upstream's makePodByResourceLists)."""
    return Pod("testpod", containers=tuple(
        Container(f"cnt-{i + 1}", quantities(r), quantities(r)) for i, r in enumerate(containers)))


def args_for(strategy: str) -> NodeResourceTopologyMatchArgs:
    return NodeResourceTopologyMatchArgs(ScoringStrategy(strategy))


def default_numa_nodes(policy: str) -> dict[str, NodeResourceTopology]:
    """Upstream's three two-NUMA nodes of score_test.go, with a deprecated topologyPolicies entry."""
    sizes = {"Node1": ("4", "500Mi"), "Node2": ("2", "50Mi"), "Node3": ("6", "60Mi")}
    return {
        name: NodeResourceTopology(
            name,
            tuple(zone(f"node-{i}", res(CPU, cpu, cpu), res(MEMORY, mem, mem)) for i in range(2)),
            {},
            (policy,),
        )
        for name, (cpu, mem) in sizes.items()
    }


def four_numa_nodes() -> dict[str, NodeResourceTopology]:
    """Upstream's two four-NUMA nodes with SLIT-like costs and one GPU on some NUMA nodes."""
    costs = [
        {"node-0": 10, "node-1": 12, "node-2": 20, "node-3": 20},
        {"node-0": 12, "node-1": 10, "node-2": 20, "node-3": 20},
        {"node-0": 20, "node-1": 20, "node-2": 10, "node-3": 12},
        {"node-0": 20, "node-1": 20, "node-2": 12, "node-3": 10},
    ]
    gpus = {"Node1": ("1", "1", "0", "0"), "Node2": ("1", "0", "1", "0")}
    return {
        name: NodeResourceTopology(
            name,
            tuple(
                zone(f"node-{i}", res(CPU, "2", "2"), res(MEMORY, "50Mi", "50Mi"), res(GPU, g, g), costs=costs[i])
                for i, g in enumerate(per_numa)
            ),
            {},
            ("BestEffortContainerLevel",),
        )
        for name, per_numa in gpus.items()
    }


def scores(pod: Pod, nodes: dict[str, NodeResourceTopology | None], args) -> dict[str, int]:
    out = {}
    for name, nrt in nodes.items():
        score, status = nrt_score(pod, nrt, args=args)
        assert status.code == Code.SUCCESS, status
        out[name] = score
    return out


# ---- TestNodeResourceScorePlugin ----------------------------------------------------------------

SMALL_POD = {CPU: "2", MEMORY: str(20 * 1024 * 1024)}

STRATEGY_TABLE = [
    # Node2: cpu 2/2 = 100%, memory 20M/50M = 40% -> (100 + 40) / 2
    ("MostAllocated picks the fullest node", MOST_ALLOCATED, "Node2", 70),
    # Node3: cpu 2/6 and memory 20M/60M are equal fractions: no variance
    ("BalancedAllocation picks the most even node", BALANCED_ALLOCATION, "Node3", 100),
    # Node1: ((100 - 50) + (100 - 4)) / 2
    ("LeastAllocated picks the emptiest node", LEAST_ALLOCATED, "Node1", 73),
]


@pytest.mark.parametrize(("strategy", "node", "score"), [c[1:] for c in STRATEGY_TABLE],
                         ids=[c[0] for c in STRATEGY_TABLE])
def test_allocation_strategies_pick_upstreams_node(strategy, node, score):
    got = scores(pod_of(SMALL_POD), default_numa_nodes("SingleNUMANodeContainerLevel"), args_for(strategy))
    best = max(got.values())
    assert [n for n, s in got.items() if s == best] == [node]
    assert got[node] == score


# ---- TestNodeResourcePartialDataScorePlugin -----------------------------------------------------

PARTIAL_TABLE = [
    ("no data at all, MostAllocated", MOST_ALLOCATED, None, None),
    ("no data at all, LeastAllocated", LEAST_ALLOCATED, None, None),
    ("no data at all, BalancedAllocation", BALANCED_ALLOCATION, None, None),
    ("only Node1 reports, MostAllocated", MOST_ALLOCATED, "Node1", 27),
    ("only Node1 reports, LeastAllocated", LEAST_ALLOCATED, "Node1", 73),
    ("only Node1 reports, BalancedAllocation", BALANCED_ALLOCATION, "Node1", 89),
]


@pytest.mark.parametrize(("strategy", "reporting", "score"), [c[1:] for c in PARTIAL_TABLE],
                         ids=[c[0] for c in PARTIAL_TABLE])
def test_nodes_without_a_report_score_zero(strategy, reporting, score):
    nodes = default_numa_nodes("SingleNUMANodeContainerLevel")
    visible = {name: (nrt if name == reporting else None) for name, nrt in nodes.items()}
    got = scores(pod_of(SMALL_POD), visible, args_for(strategy))
    expected = {name: (score if name == reporting else 0) for name in nodes}
    assert got == expected


# ---- TestNodeResourceScorePluginLeastNUMA -------------------------------------------------------

BE_CONTAINER = "BestEffortContainerLevel"
BE_POD = "BestEffortPodLevel"

LEAST_NUMA_TABLE = [
    ("container scope, one container, case 1", [{CPU: "2", MEMORY: "50Mi"}], default_numa_nodes(BE_CONTAINER),
     {"Node1": 94, "Node2": 94, "Node3": 94}),
    ("container scope, one container, case 2", [{CPU: "4", MEMORY: "50Mi"}], default_numa_nodes(BE_CONTAINER),
     {"Node1": 94, "Node2": 82, "Node3": 94}),
    ("container scope, one container, case 3", [{CPU: "6", MEMORY: "50Mi"}], default_numa_nodes(BE_CONTAINER),
     {"Node1": 82, "Node2": 0, "Node3": 94}),
    ("container scope, two containers, case 1", [{CPU: "2", MEMORY: "50Mi"}, {CPU: "2", MEMORY: "50Mi"}],
     default_numa_nodes(BE_CONTAINER), {"Node1": 94, "Node2": 94, "Node3": 94}),
    ("container scope, two containers, case 2", [{CPU: "1", MEMORY: "50Mi"}, {CPU: "3", MEMORY: "50Mi"}],
     default_numa_nodes(BE_CONTAINER), {"Node1": 94, "Node2": 82, "Node3": 94}),
    ("container scope, two containers, case 3", [{CPU: "5", MEMORY: "50Mi"}, {CPU: "3", MEMORY: "50Mi"}],
     default_numa_nodes(BE_CONTAINER), {"Node1": 82, "Node2": 0, "Node3": 94}),
    ("container scope, two containers asking only for a non-NUMA resource",
     [{"non-numa-resource": "1"}, {"non-numa-resource": "2"}], default_numa_nodes(BE_CONTAINER),
     {"Node1": 100, "Node2": 100, "Node3": 100}),
    ("pod scope, two containers, case 1", [{CPU: "2", MEMORY: "50Mi"}, {CPU: "2", MEMORY: "50Mi"}],
     default_numa_nodes(BE_POD), {"Node1": 94, "Node2": 82, "Node3": 82}),
    ("pod scope, two containers, case 2", [{CPU: "1", MEMORY: "50Mi"}, {CPU: "3", MEMORY: "50Mi"}],
     default_numa_nodes(BE_POD), {"Node1": 94, "Node2": 82, "Node3": 82}),
    ("pod scope, two containers, case 3", [{CPU: "5", MEMORY: "50Mi"}, {CPU: "3", MEMORY: "50Mi"}],
     default_numa_nodes(BE_POD), {"Node1": 82, "Node2": 0, "Node3": 82}),
    ("pod scope, one container asking only for a non-NUMA resource", [{"non-numa-resource": "1"}],
     default_numa_nodes(BE_POD), {"Node1": 100, "Node2": 100, "Node3": 100}),
    ("container scope, one container, four NUMA nodes, one gpu", [{CPU: "2", MEMORY: "50Mi", GPU: "1"}],
     four_numa_nodes(), {"Node1": 94, "Node2": 94}),
    ("container scope, one container, four NUMA nodes, two gpus", [{CPU: "2", MEMORY: "50Mi", GPU: "2"}],
     four_numa_nodes(), {"Node1": 82, "Node2": 76}),
    ("container scope, two containers, four NUMA nodes, two gpus in one",
     [{CPU: "2", MEMORY: "50Mi", GPU: "2"}, {CPU: "2", MEMORY: "50Mi"}], four_numa_nodes(),
     {"Node1": 82, "Node2": 76}),
]


@pytest.mark.parametrize(("containers", "nodes", "want"), [c[1:] for c in LEAST_NUMA_TABLE],
                         ids=[c[0] for c in LEAST_NUMA_TABLE])
def test_least_numa_nodes(containers, nodes, want):
    assert scores(pod_of(*containers), nodes, args_for(LEAST_NUMA_NODES)) == want


# ---- least_numa_test.go: TestNUMANodesRequired ---------------------------------------------------

def numa(numa_id: int, resources: dict[str, str], costs: dict[int, int] | None = None) -> NUMAZone:
    return NUMAZone(numa_id, quantities(resources), costs or {})


def square(ids: list[int], rows: list[list[int]]) -> dict[int, dict[int, int]]:
    return {a: dict(zip(ids, row)) for a, row in zip(ids, rows)}


FOUR = square([0, 1, 2, 3], [[10, 12, 20, 20], [12, 10, 20, 20], [20, 20, 10, 12], [20, 20, 10, 12]])
FOUR_B = square([0, 1, 2, 3], [[10, 12, 20, 20], [12, 10, 20, 20], [20, 20, 10, 12], [20, 20, 12, 10]])
EIGHT = {
    0: [10, 20, 40, 30, 20, 30, 50, 40], 3: [30, 40, 20, 10, 30, 20, 40, 50], 5: [30, 20, 50, 20, 50, 10, 50, 40],
    7: [40, 50, 30, 50, 20, 40, 30, 10], 1: [20, 10, 30, 40, 50, 20, 40, 50], 6: [50, 40, 20, 40, 30, 50, 10, 30],
    2: [40, 30, 10, 20, 40, 50, 20, 30], 4: [20, 50, 40, 30, 10, 50, 30, 20],
}
EVEN = square([0, 2, 4, 6], [[10, 12, 20, 20], [12, 10, 20, 20], [20, 20, 10, 12], [20, 20, 12, 10]])
FULL = {GPU: "1", CPU: "4", MEMORY: "5Gi"}
NO_GPU = {GPU: "0", CPU: "4", MEMORY: "5Gi"}
NO_MEMORY = {GPU: "1", CPU: "4"}


def eight(memoryless: set[int]) -> list[NUMAZone]:
    order = [0, 3, 5, 7, 1, 6, 2, 4]
    return [numa(i, NO_MEMORY if i in memoryless else FULL, dict(enumerate(EIGHT[i]))) for i in order]


REQUIRED_TABLE = [
    ("fits one NUMA node", [numa(0, {CPU: "8", MEMORY: "10Gi"})], {CPU: "2", MEMORY: "2Gi"}, (0,), True),
    ("needs two NUMA nodes", [numa(0, {CPU: "8", MEMORY: "10Gi"}), numa(1, {CPU: "8", MEMORY: "10Gi"})],
     {CPU: "12", MEMORY: "2Gi"}, (0, 1), True),
    ("does not fit", [numa(0, {CPU: "8", MEMORY: "10Gi"}), numa(1, {CPU: "8", MEMORY: "10Gi"})],
     {CPU: "22", MEMORY: "2Gi"}, None, False),
    ("four NUMA nodes, closest pair has the gpus",
     [numa(0, FULL, FOUR[0]), numa(1, FULL, FOUR[1]), numa(2, NO_GPU, FOUR[2]), numa(3, NO_GPU, FOUR[3])],
     {CPU: "2", MEMORY: "2Gi", GPU: "2"}, (0, 1), True),
    ("four NUMA nodes, the gpus are far apart",
     [numa(0, FULL, FOUR_B[0]), numa(1, NO_GPU, FOUR_B[1]), numa(2, FULL, FOUR_B[2]), numa(3, NO_GPU, FOUR_B[3])],
     {CPU: "2", MEMORY: "2Gi", GPU: "2"}, (0, 2), False),
    ("eight NUMA nodes listed out of order, closest triple", eight(set()),
     {CPU: "3", MEMORY: "2Gi", GPU: "3"}, (0, 1, 5), True),
    ("eight NUMA nodes, odd ones without memory", eight({1, 3, 5, 7}),
     {CPU: "3", MEMORY: "2Gi", GPU: "3"}, (2, 4, 6), False),
    ("four NUMA nodes with even ids, closest pair has the gpus",
     [numa(0, FULL, EVEN[0]), numa(2, FULL, EVEN[2]), numa(4, NO_GPU, EVEN[4]), numa(6, NO_GPU, EVEN[6])],
     {CPU: "2", MEMORY: "2Gi", GPU: "2"}, (0, 2), True),
    ("four NUMA nodes with even ids, the gpus are far apart",
     [numa(0, FULL, EVEN[0]), numa(2, NO_GPU, EVEN[2]), numa(4, NO_GPU, EVEN[4]), numa(6, FULL, EVEN[6])],
     {CPU: "2", MEMORY: "2Gi", GPU: "2"}, (0, 6), False),
    ("four NUMA nodes with even ids, two without memory",
     [numa(0, FULL, EVEN[0]), numa(2, NO_MEMORY, EVEN[2]), numa(4, FULL, EVEN[4]), numa(6, NO_MEMORY, EVEN[6])],
     {CPU: "2", MEMORY: "2Gi", GPU: "2"}, (0, 4), False),
]


@pytest.mark.parametrize(("zones", "requests", "want_ids", "want_closest"), [c[1:] for c in REQUIRED_TABLE],
                         ids=[c[0] for c in REQUIRED_TABLE])
def test_numa_nodes_required(zones, requests, want_ids, want_closest):
    assert numa_nodes_required(GUARANTEED, zones, quantities(requests)) == (want_ids, want_closest)


# ---- least_numa_test.go: TestNormalizeScore and TestMinDistance ---------------------------------

@pytest.mark.parametrize(
    ("count", "closest", "score"),
    [(1, False, 88), (2, False, 76), (8, False, 4), (1, True, 94), (2, True, 82), (8, True, 10)],
)
def test_least_numa_normalize_score(count, closest, score):
    assert least_numa_normalize_score(count, closest) == score


def f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


DISTANCE_ZONES = [NUMAZone(i, {}, FOUR_B[i]) for i in range(4)]
NO_COST_ZONES = [NUMAZone(i, {}) for i in range(4)]
PAIRS = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]


@pytest.mark.parametrize(
    ("zones", "combinations", "expected"),
    [
        (DISTANCE_ZONES, [(0,), (1,), (2,), (3,)], 10.0),
        (DISTANCE_ZONES, PAIRS, 11.0),
        (DISTANCE_ZONES, [(0, 1, 2), (1, 2, 3), (0, 2, 3)], f32(14.888889)),
        (NO_COST_ZONES, PAIRS, 255.0),
    ],
    ids=["single NUMA nodes", "pairs", "triples", "pairs without costs"],
)
def test_min_avg_distance(zones, combinations, expected):
    assert min_avg_distance(zones, combinations) == expected


# ---- numaresources_test.go: TestSubstractNUMA ----------------------------------------------------

@pytest.mark.parametrize(
    ("zones", "requests", "ids", "expected"),
    [
        ([{CPU: "8", MEMORY: "10Gi"}], {CPU: "2", MEMORY: "2Gi"}, [0], [{CPU: "6", MEMORY: "8Gi"}]),
        ([{CPU: "8", MEMORY: "10Gi"}, {CPU: "8", MEMORY: "10Gi"}], {CPU: "12", MEMORY: "2Gi"}, [0, 1],
         [{CPU: "0", MEMORY: "8Gi"}, {CPU: "4", MEMORY: "10Gi"}]),
    ],
    ids=["one NUMA node", "spilling over to a second NUMA node"],
)
def test_subtract_from_numas(zones, requests, ids, expected):
    listed = [numa(i, z) for i, z in enumerate(zones)]
    _subtract_from_numas(quantities(requests), listed, ids)
    assert [dict(z.resources) for z in listed] == [quantities(e) for e in expected]


# ---- quirks beyond upstream's tables -------------------------------------------------------------

def single_numa(*zones: Zone, scope: str = "container") -> NodeResourceTopology:
    policy = "SingleNUMANodeContainerLevel" if scope == "container" else "SingleNUMANodePodLevel"
    return NodeResourceTopology("n", zones, {}, (policy,))


def test_non_guaranteed_pods_score_max_everywhere():
    burstable = Pod("p", containers=(Container("c", quantities({CPU: "1"})),))
    nrt = single_numa(zone("node-0", res(CPU, "1", "0")))
    for strategy in (MOST_ALLOCATED, LEAST_NUMA_NODES):
        for report in (None, nrt):
            score, status = nrt_score(burstable, report, args=args_for(strategy))
            assert (score, status.code) == (MAX_NODE_SCORE, Code.SUCCESS)


def test_allocation_strategies_score_zero_unless_single_numa_node():
    nrt = NodeResourceTopology("n", (zone("node-0", res(CPU, "4", "4"), res(MEMORY, "1Gi", "1Gi")),), {},
                               ("RestrictedContainerLevel",))
    assert nrt_score(pod_of({CPU: "1", MEMORY: "1Mi"}), nrt, args=args_for(LEAST_ALLOCATED))[0] == 0
    assert nrt_score(pod_of({CPU: "1", MEMORY: "1Mi"}), nrt, args=args_for(LEAST_NUMA_NODES))[0] == 94


def test_default_args_are_least_allocated():
    nodes = default_numa_nodes("SingleNUMANodeContainerLevel")
    assert nrt_score(pod_of(SMALL_POD), nodes["Node1"]) == nrt_score(
        pod_of(SMALL_POD), nodes["Node1"], args=args_for(LEAST_ALLOCATED))


def test_cpu_counts_whole_cores_in_allocation_scores():
    # 500m against 4 cores: Quantity.Value() rounds 500m up to 1, so 1 * 100 / 4.
    available = quantities({CPU: "4", MEMORY: "100Mi"})
    args = args_for(MOST_ALLOCATED)
    assert most_allocated_score(quantities({CPU: "500m", MEMORY: "0"}), available, args) == (25 + 0) // 2
    assert least_allocated_score(quantities({CPU: "500m", MEMORY: "0"}), available, args) == (75 + 100) // 2


def test_weights_scale_listed_resources_and_default_to_one():
    available = quantities({CPU: "4", MEMORY: "100Mi", "vendor/nic": "4"})
    requested = quantities({CPU: "2", MEMORY: "10Mi", "vendor/nic": "1"})
    args = NodeResourceTopologyMatchArgs(ScoringStrategy(MOST_ALLOCATED, (ResourceSpec(CPU, 3),
                                                                          ResourceSpec(MEMORY, -5))))
    # cpu 50 * 3, memory 10 * 1 (a weight below 1 counts as 1), nic 25 * 1 (unlisted).
    assert most_allocated_score(requested, available, args) == (150 + 10 + 25) // 5


def test_balanced_allocation_is_zero_when_any_fraction_exceeds_one():
    args = args_for(BALANCED_ALLOCATION)
    assert balanced_allocation_score(quantities({CPU: "5", MEMORY: "1Mi"}), quantities(
        {CPU: "4", MEMORY: "1Gi"}), args) == 0
    # a resource the NUMA node lacks counts as fraction 1
    assert balanced_allocation_score(quantities({CPU: "4", GPU: "1"}), quantities({CPU: "4"}), args) == 100


def test_node_score_is_the_smallest_non_zero_numa_score():
    nrt = single_numa(zone("node-0", res(CPU, "1", "1"), res(MEMORY, "256Mi", "256Mi")),
                      zone("node-1", res(CPU, "8", "8"), res(MEMORY, "1Gi", "1Gi")),
                      zone("node-2", res(CPU, "4", "4"), res(MEMORY, "1Gi", "1Gi")))
    # node-0 fits neither resource (0); node-1 scores (25 + 50) // 2 = 37, node-2 (50 + 50) // 2 = 50.
    assert nrt_score(pod_of({CPU: "2", MEMORY: "512Mi"}), nrt, args=args_for(MOST_ALLOCATED))[0] == 37


def test_container_scope_averages_container_scores_and_truncates():
    nrt = single_numa(zone("node-0", res(CPU, "4", "4"), res(MEMORY, "1Gi", "1Gi")))
    pod = pod_of({CPU: "1", MEMORY: "256Mi"}, {CPU: "2", MEMORY: "256Mi"})
    # containers score (25 + 25) // 2 = 25 and (50 + 25) // 2 = 37; mean 31.0
    assert nrt_score(pod, nrt, args=args_for(MOST_ALLOCATED))[0] == 31


def test_non_contiguous_numa_ids_are_an_upstream_panic():
    nrt = single_numa(zone("node-0", res(CPU, "4", "4"), res(MEMORY, "1Gi", "1Gi")),
                      zone("node-2", res(CPU, "4", "4"), res(MEMORY, "1Gi", "1Gi")))
    score, status = nrt_score(pod_of({CPU: "1", MEMORY: "1Mi"}), nrt, args=args_for(MOST_ALLOCATED))
    assert score == 0
    assert status.code == Code.ERROR
    assert status.reasons == ("runtime error: index out of range [2] with length 2",)


def test_least_numa_container_scope_charges_zones_by_position():
    # Zones listed node-1 then node-0: the first container lands on NUMA 1 but upstream charges
    # position 1 (node-0), so the second container still finds NUMA 1 whole.
    nrt = NodeResourceTopology("n", (zone("node-1", res(CPU, "2", "2"), res(MEMORY, "1Gi", "1Gi")),
                                     zone("node-0", res(CPU, "1", "1"), res(MEMORY, "1Gi", "1Gi"))), {},
                               ("BestEffortContainerLevel",))
    pod = pod_of({CPU: "2", MEMORY: "1Mi"}, {CPU: "2", MEMORY: "1Mi"})
    assert nrt_score(pod, nrt, args=args_for(LEAST_NUMA_NODES))[0] == 94


def test_least_numa_with_a_resource_no_zone_reports_scores_zero():
    # Every requested name must be reported by each NUMA node of a combination.
    nrt = NodeResourceTopology("n", (zone("node-0", res(CPU, "4", "4"), res(MEMORY, "1Gi", "1Gi")),), {},
                               ("SingleNUMANodePodLevel",))
    pod = pod_of({CPU: "1", MEMORY: "1Mi", "ephemeral-storage": "1Gi"})
    assert nrt_score(pod, nrt, args=args_for(LEAST_NUMA_NODES))[0] == 0


def test_least_numa_beyond_eight_numa_nodes_goes_negative():
    zones = tuple(zone(f"node-{i}", res(CPU, "1", "1"), res(MEMORY, "1Gi", "1Gi")) for i in range(10))
    nrt = NodeResourceTopology("n", zones, {}, ("SingleNUMANodePodLevel",))
    score, status = nrt_score(pod_of({CPU: "9", MEMORY: "1Mi"}), nrt, args=args_for(LEAST_NUMA_NODES))
    # no costs: every combination is equally far (255), so the closest-distance bonus applies
    assert (score, status.code) == (100 - 9 * 12 + 6, Code.SUCCESS)


# ---- property: Filter and LeastNUMANodes agree on "fits one NUMA node" ---------------------------

_zone_spec = st.fixed_dictionaries(
    {CPU: st.integers(0, 8), MEMORY: st.integers(0, 8)}, optional={"vendor/nic": st.integers(0, 4)})
_request_spec = st.fixed_dictionaries(
    {CPU: st.integers(1, 8), MEMORY: st.integers(1, 8)}, optional={"vendor/nic": st.integers(1, 4)})


@settings(max_examples=150, deadline=None)
@given(zone_specs=st.lists(_zone_spec, min_size=1, max_size=4), request=_request_spec)
def test_filter_passes_exactly_when_least_numa_needs_one_numa_node(zone_specs, request):
    zones = tuple(
        zone(f"node-{i}", *(res(name, f"{v}Gi" if name == MEMORY else str(v), f"{v}Gi" if name == MEMORY else str(v))
                            for name, v in spec.items()))
        for i, spec in enumerate(zone_specs)
    )
    nrt = NodeResourceTopology("n", zones, {}, ("SingleNUMANodeContainerLevel",))
    pod = pod_of({name: (f"{v}Gi" if name == MEMORY else str(v)) for name, v in request.items()})
    assert pod.qos_class == GUARANTEED
    fits = nrt_filter(pod, nrt).is_success
    least, status = nrt_score(pod, nrt, args=args_for(LEAST_NUMA_NODES))
    assert status.code == Code.SUCCESS
    assert fits == (least in (88, 94))
    for strategy in (MOST_ALLOCATED, LEAST_ALLOCATED, BALANCED_ALLOCATION):
        score, status = nrt_score(pod, nrt, args=args_for(strategy))
        assert status.code == Code.SUCCESS
        assert 0 <= score <= MAX_NODE_SCORE
