"""The Topology Manager's merge and policies, checked against upstream's own test tables.

The tables come from kubernetes/kubernetes pkg/kubelet/cm/topologymanager: policy_test.go
(the cases every policy shares, the best-effort/restricted cases, the non-preferred width
cases with and without prefer-closest, TestMaxOfMinAffinityCounts, TestCompareHintsNarrowest),
policy_none_test.go, policy_best_effort_test.go, policy_restricted_test.go,
policy_single_numa_node_test.go, numa_info_test.go (TestClosest, TestCalculateAvgDistanceFor),
policy_options_test.go and topology_manager_test.go (TestNewManager). The case names are
upstream's so a failure can be traced back; the expected values are theirs, unchanged.

Every merge table runs through both the exhaustive merge and the fast path.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.errors import InputError
from toposched.kubelet import TopologyHint, fast_merge_hints, merge_hints, parse_policy_options
from toposched.kubelet.topology_manager import (
    PolicyOptions,
    average_distance,
    closest_mask,
    compare_hints,
    filter_providers_hints,
    filter_single_numa_hints,
    max_of_min_affinity_counts,
    narrowest_mask,
)


def P(*nodes: int) -> TopologyHint:
    """A preferred hint on these NUMA nodes."""
    return TopologyHint(frozenset(nodes), True)


def N(*nodes: int) -> TopologyHint:
    """A non-preferred hint on these NUMA nodes."""
    return TopologyHint(frozenset(nodes), False)


NIL_P = TopologyHint(None, True)
NIL_N = TopologyHint(None, False)
ANY = "any"  # stands for "every NUMA node of the machine" in the tables below

MERGES = pytest.mark.parametrize("merge", [merge_hints, fast_merge_hints], ids=["exhaustive", "fast"])

FOUR_NODES = [0, 1, 2, 3]
FOUR_DISTANCES = {0: [10, 11, 12, 12], 1: [11, 10, 12, 12], 2: [12, 12, 10, 11], 3: [12, 12, 11, 10]}
EIGHT_NODES = list(range(8))
EIGHT_DISTANCES = {
    0: [10, 11, 12, 12, 30, 30, 30, 30],
    1: [11, 10, 12, 12, 30, 30, 30, 30],
    2: [12, 12, 10, 11, 30, 30, 30, 30],
    3: [12, 12, 11, 10, 30, 30, 30, 30],
    4: [30, 30, 30, 30, 10, 11, 12, 12],
    5: [30, 30, 30, 30, 11, 10, 12, 12],
    6: [30, 30, 30, 30, 12, 12, 10, 11],
    7: [30, 30, 30, 30, 12, 12, 13, 10],
}

# commonPolicyMergeTestCases: (name, providers, expected) — the same for every merging policy.
COMMON = [
    ("Two providers, 1 hint each, same mask, both preferred 1/2", [{"resource1": [P(0)]}, {"resource2": [P(0)]}], P(0)),
    ("Two providers, 1 hint each, same mask, both preferred 2/2", [{"resource1": [P(1)]}, {"resource2": [P(1)]}], P(1)),
    ("Two providers, 1 no hints, 1 single hint preferred 1/2", [None, {"resource": [P(0)]}], P(0)),
    ("Two providers, 1 no hints, 1 single hint preferred 2/2", [None, {"resource": [P(1)]}], P(1)),
    (
        "Two providers, 1 with 2 hints, 1 with single hint matching 1/2",
        [{"resource1": [P(0), P(1)]}, {"resource2": [P(0)]}],
        P(0),
    ),
    (
        "Two providers, 1 with 2 hints, 1 with single hint matching 2/2",
        [{"resource1": [P(0), P(1)]}, {"resource2": [P(1)]}],
        P(1),
    ),
    (
        "Two providers, both with 2 hints, matching narrower preferred hint from both",
        [{"resource1": [P(0), P(1)]}, {"resource2": [P(0), N(0, 1)]}],
        P(0),
    ),
    (
        "Ensure less narrow preferred hints are chosen over narrower non-preferred hints",
        [{"resource1": [P(1), N(0, 1)]}, {"resource2": [P(0), P(1), N(0, 1)]}],
        P(1),
    ),
    (
        "Multiple resources, same provider",
        [{"resource1": [P(1), N(0, 1)], "resource2": [P(0), P(1), N(0, 1)]}],
        P(1),
    ),
]

# bestEffortPolicy.mergeTestCases, used by best-effort and restricted (ANY = the whole machine).
BEST_EFFORT = [
    (
        "Two providers, 2 hints each, same mask (some with different bits), same preferred",
        [{"resource1": [P(0, 1), P(0, 2)]}, {"resource2": [P(0, 1), P(0, 2)]}],
        P(0, 1),
    ),
    ("TopologyHint not set", [], (ANY, True)),
    ("HintProvider returns empty non-nil map[string][]TopologyHint", [{}], (ANY, True)),
    ("HintProvider returns -nil map[string][]TopologyHint from provider", [{"resource": None}], (ANY, True)),
    ("HintProvider returns empty non-nil map[string][]TopologyHint from provider", [{"resource": []}], (ANY, False)),
    ("Single TopologyHint with Preferred as true and NUMANodeAffinity as nil", [{"resource": [NIL_P]}], (ANY, True)),
    ("Single TopologyHint with Preferred as false and NUMANodeAffinity as nil", [{"resource": [NIL_N]}], (ANY, False)),
    ("Two providers, 1 hint each, no common mask", [{"resource1": [P(0)]}, {"resource2": [P(1)]}], (ANY, False)),
    (
        "Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
        [{"resource1": [P(0)]}, {"resource2": [N(0)]}],
        N(0),
    ),
    (
        "Two providers, 1 hint each, same mask, 1 preferred, 1 not 2/2",
        [{"resource1": [P(1)]}, {"resource2": [N(1)]}],
        N(1),
    ),
    (
        "Two providers, 1 hint each, 1 wider mask, both preferred 1/2",
        [{"resource1": [P(0)]}, {"resource2": [P(0, 1)]}],
        N(0),
    ),
    (
        "Two providers, 1 with 2 hints, 1 with single non-preferred hint matching",
        [{"resource1": [P(0), P(1)]}, {"resource2": [N(0, 1)]}],
        N(0),
    ),
    (
        "Two providers, 1 hint each, 1 wider mask, both preferred 2/2",
        [{"resource1": [P(1)]}, {"resource2": [P(0, 1)]}],
        N(1),
    ),
    (
        "bestNonPreferredAffinityCount (1)",
        [{"resource1": [N(0, 1, 2, 3), N(0, 1)]}, {"resource2": [N(0, 1)]}],
        N(0, 1),
    ),
    (
        "bestNonPreferredAffinityCount (2)",
        [{"resource1": [N(0, 1, 2, 3), N(0, 1)]}, {"resource2": [N(0, 3)]}],
        N(0, 3),
    ),
    (
        "bestNonPreferredAffinityCount (3)",
        [{"resource1": [N(0, 1, 2, 3), N(0, 1)]}, {"resource2": [N(1, 2)]}],
        N(1, 2),
    ),
    (
        "bestNonPreferredAffinityCount (4)",
        [{"resource1": [N(0, 1, 2, 3), N(0, 1)]}, {"resource2": [N(2, 3)]}],
        N(2, 3),
    ),
]

_CASE5 = [{"resource1": [N(0, 1, 2, 3), N(0, 1)]}, {"resource2": [N(1, 2), N(2, 3)]}]
_CASE6 = [{"resource1": [N(0, 1, 2, 3), N(0, 1)]}, {"resource2": [N(1, 2, 3), N(1, 2), N(1, 3), N(2, 3)]}]

# bestEffortPolicy.mergeTestCasesNoPolicies: without prefer-closest, equal widths go to the lower mask.
NO_OPTIONS = [
    ("bestNonPreferredAffinityCount (5)", _CASE5, N(1, 2)),
    ("bestNonPreferredAffinityCount (6)", _CASE6, N(1, 2)),
]

# bestEffortPolicy.mergeTestCasesClosestNUMA: with prefer-closest on the eight-node distances.
CLOSEST = [
    (
        "Two providers, 2 hints each, same mask (some with different bits), same preferred",
        [{"resource1": [P(0, 4), P(0, 2)]}, {"resource2": [P(0, 4), P(0, 2)]}],
        P(0, 2),
    ),
    (
        "Two providers, 2 hints each, different mask",
        [{"resource1": [P(4), P(0, 2)]}, {"resource2": [P(4), P(0, 2)]}],
        P(4),
    ),
    ("bestNonPreferredAffinityCount (5)", _CASE5, N(2, 3)),
    ("bestNonPreferredAffinityCount (6)", _CASE6, N(2, 3)),
]

# singleNumaNodePolicy.mergeTestCases (ANY here is upstream's nil affinity).
SINGLE_NUMA = [
    ("TopologyHint not set", [], NIL_P),
    ("HintProvider returns empty non-nil map[string][]TopologyHint", [{}], NIL_P),
    ("HintProvider returns -nil map[string][]TopologyHint from provider", [{"resource": None}], NIL_P),
    ("HintProvider returns empty non-nil map[string][]TopologyHint from provider", [{"resource": []}], NIL_N),
    ("Single TopologyHint with Preferred as true and NUMANodeAffinity as nil", [{"resource": [NIL_P]}], NIL_P),
    ("Single TopologyHint with Preferred as false and NUMANodeAffinity as nil", [{"resource": [NIL_N]}], NIL_N),
    ("Two providers, 1 hint each, no common mask", [{"resource1": [P(0)]}, {"resource2": [P(1)]}], NIL_N),
    (
        "Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
        [{"resource1": [P(0)]}, {"resource2": [N(0)]}],
        NIL_N,
    ),
    (
        "Two providers, 1 hint each, same mask, 1 preferred, 1 not 2/2",
        [{"resource1": [P(1)]}, {"resource2": [N(1)]}],
        NIL_N,
    ),
    (
        "Two providers, 1 with 2 hints, 1 with single non-preferred hint matching",
        [{"resource1": [P(0), P(1)]}, {"resource2": [N(0, 1)]}],
        NIL_N,
    ),
    (
        "Single NUMA hint generation",
        [{"resource1": [P(0, 1)], "resource2": [P(0), P(1), N(0, 1)]}],
        NIL_N,
    ),
    ("One no-preference provider", [{"resource1": [P(0), P(1), N(0, 1)]}, None], P(0)),
]


def _expected(expected: TopologyHint | tuple[str, bool], machine: list[int]) -> TopologyHint:
    if isinstance(expected, tuple):
        return TopologyHint(frozenset(machine), expected[1])
    return expected


def _ids(cases: list) -> list[str]:
    return [c[0] for c in cases]


WITHOUT_OPTIONS = COMMON + BEST_EFFORT + NO_OPTIONS
WITH_CLOSEST = COMMON + BEST_EFFORT + CLOSEST


@MERGES
@pytest.mark.parametrize("name, providers, expected", WITHOUT_OPTIONS, ids=_ids(WITHOUT_OPTIONS))
def test_best_effort_merge(merge, name, providers, expected):
    hint, admit = merge("best-effort", FOUR_NODES, providers)
    assert hint == _expected(expected, FOUR_NODES)
    assert admit is True  # best-effort admits whatever it merged


@MERGES
@pytest.mark.parametrize("name, providers, expected", WITH_CLOSEST, ids=_ids(WITH_CLOSEST))
def test_best_effort_merge_closest_numa(merge, name, providers, expected):
    options = {"prefer-closest-numa-nodes": "true"}
    hint, admit = merge("best-effort", EIGHT_NODES, providers, options=options, distances=EIGHT_DISTANCES)
    assert hint == _expected(expected, EIGHT_NODES)
    assert admit is True


@MERGES
@pytest.mark.parametrize("name, providers, expected", WITHOUT_OPTIONS, ids=_ids(WITHOUT_OPTIONS))
def test_restricted_merge(merge, name, providers, expected):
    hint, admit = merge("restricted", FOUR_NODES, providers)
    assert hint == _expected(expected, FOUR_NODES)
    assert admit is hint.preferred  # restricted admits exactly the preferred merges


@MERGES
@pytest.mark.parametrize("name, providers, expected", WITH_CLOSEST, ids=_ids(WITH_CLOSEST))
def test_restricted_merge_closest_numa(merge, name, providers, expected):
    options = {"prefer-closest-numa-nodes": "true"}
    hint, admit = merge("restricted", EIGHT_NODES, providers, options=options, distances=EIGHT_DISTANCES)
    assert hint == _expected(expected, EIGHT_NODES)
    assert admit is hint.preferred


@MERGES
@pytest.mark.parametrize("name, providers, expected", COMMON + SINGLE_NUMA, ids=_ids(COMMON + SINGLE_NUMA))
def test_single_numa_node_merge(merge, name, providers, expected):
    hint, admit = merge("single-numa-node", FOUR_NODES, providers)
    assert hint == expected
    assert admit is hint.preferred


@MERGES
def test_single_numa_node_ignores_prefer_closest(merge):
    # Upstream applies Closest only when the policy is not single-numa-node. With a (contrived)
    # matrix where node 1 is "closer to itself" than node 0, best-effort with prefer-closest
    # picks node 1 while single-numa-node keeps the narrowest-then-lowest order and picks node 0.
    distances = {0: {0: 20, 1: 30}, 1: {0: 30, 1: 10}}
    providers = [{"cpu": [P(0), P(1)]}, {"memory": [P(0), P(1)]}]
    options = {"prefer-closest-numa-nodes": "true"}
    assert merge("best-effort", [0, 1], providers, options=options, distances=distances) == (P(1), True)
    assert merge("single-numa-node", [0, 1], providers, options=options, distances=distances) == (P(0), True)


# policy_none_test.go TestPolicyNoneMerge.
NONE_CASES = [
    ("merged empty providers hints", []),
    ("merge with a single provider with a single preferred resource", [{"resource": [P(0, 1)]}]),
    ("merge with a single provider with a single non-preferred resource", [{"resource": [N(0, 1)]}]),
]


@MERGES
@pytest.mark.parametrize("name, providers", NONE_CASES, ids=[c[0] for c in NONE_CASES])
def test_none_policy_merge(merge, name, providers):
    assert merge("none", [0, 1], providers) == (NIL_N, True)


def test_none_policy_is_not_limited_to_eight_numa_nodes():
    # Upstream's NewManager short-circuits the none policy before the NUMA node limit.
    assert merge_hints("none", range(16), [{"cpu": [P(12)]}]) == (NIL_N, True)


# canAdmitPodResult tables of each policy: the admit decision for a nil hint, preferred or not.
@pytest.mark.parametrize(
    "policy, preferred, admit",
    [
        ("none", False, True),
        ("none", True, True),
        ("best-effort", False, True),
        ("best-effort", True, True),
        ("restricted", False, False),
        ("restricted", True, True),
        ("single-numa-node", False, False),
    ],
)
def test_can_admit_pod_result(policy, preferred, admit):
    hint = TopologyHint(None, preferred)
    _, admitted = merge_hints(policy, [0, 1], [{"resource": [hint]}])
    assert admitted is admit


# TestMaxOfMinAffinityCounts.
@pytest.mark.parametrize(
    "lists, expected",
    [
        ([], 0),
        ([[P()]], 0),
        ([[P(0)]], 1),
        ([[P(0, 1)]], 2),
        ([[P(0, 1), P(0, 1, 2)]], 2),
        ([[P(0, 1), P(0, 1, 2)], [P(0, 1, 2)]], 3),
        ([[P(0, 1), P(0, 1, 2)], [P(0, 1, 2), P(0, 1, 2, 3)]], 3),
    ],
)
def test_max_of_min_affinity_counts(lists, expected):
    assert max_of_min_affinity_counts(lists) == expected


def test_max_of_min_affinity_counts_skips_nil_hints():
    assert max_of_min_affinity_counts([[NIL_P], [NIL_N, P(0, 1)]]) == 2


# TestCompareHintsNarrowest: (name, bestNonPreferredAffinityCount, current, candidate, winner).
COMPARE = [
    ("candidate.NUMANodeAffinity.Count() == 0 (1)", -1, None, N(), "current"),
    ("candidate.NUMANodeAffinity.Count() == 0 (2)", -1, P(), N(), "current"),
    ("current == nil (1)", -1, None, P(0), "candidate"),
    ("current == nil (2)", -1, None, N(0), "candidate"),
    ("!current.Preferred && candidate.Preferred", -1, N(0), P(0), "candidate"),
    ("current.Preferred && !candidate.Preferred", -1, P(0), N(0), "current"),
    ("current.Preferred && candidate.Preferred (1)", -1, P(0), P(0), "current"),
    ("current.Preferred && candidate.Preferred (2)", -1, P(0, 1), P(0), "candidate"),
    ("current.Preferred && candidate.Preferred (3)", -1, P(0), P(0, 1), "current"),
    ("!current.Preferred && !candidate.Preferred (1.1)", 1, N(0, 1), N(0, 1), "current"),
    ("!current.Preferred && !candidate.Preferred (1.2)", 1, N(1, 2), N(0, 1), "candidate"),
    ("!current.Preferred && !candidate.Preferred (1.3)", 1, N(0, 1), N(1, 2), "current"),
    ("!current.Preferred && !candidate.Preferred (2.1)", 2, N(0, 1), N(0), "current"),
    ("!current.Preferred && !candidate.Preferred (2.2)", 2, N(0, 1), N(0, 1), "current"),
    ("!current.Preferred && !candidate.Preferred (2.3)", 2, N(1, 2), N(0, 1), "candidate"),
    ("!current.Preferred && !candidate.Preferred (2.4)", 2, N(0, 1), N(1, 2), "current"),
    ("!current.Preferred && !candidate.Preferred (3a)", 2, N(0), N(0, 1, 2), "current"),
    ("!current.Preferred && !candidate.Preferred (3b)", 2, N(0), N(0, 1), "candidate"),
    ("!current.Preferred && !candidate.Preferred (3ca.1)", 3, N(0), N(0, 1), "candidate"),
    ("!current.Preferred && !candidate.Preferred (3ca.2)", 3, N(0), N(1, 2), "candidate"),
    ("!current.Preferred && !candidate.Preferred (3ca.3)", 4, N(0, 1), N(1, 2, 3), "candidate"),
    ("!current.Preferred && !candidate.Preferred (3cb)", 4, N(1, 2, 3), N(0, 1), "current"),
    ("!current.Preferred && !candidate.Preferred (3cc.1)", 4, N(0, 1, 2), N(0, 1, 2), "current"),
    ("!current.Preferred && !candidate.Preferred (3cc.2)", 4, N(0, 1, 2), N(1, 2, 3), "current"),
    ("!current.Preferred && !candidate.Preferred (3cc.3)", 4, N(1, 2, 3), N(0, 1, 2), "candidate"),
]


@pytest.mark.parametrize("name, target, current, candidate, winner", COMPARE, ids=[c[0] for c in COMPARE])
def test_compare_hints_narrowest(name, target, current, candidate, winner):
    # Fresh objects so "which one came back" is decided by identity, as upstream's pointers.
    current = None if current is None else TopologyHint(current.numa_nodes, current.preferred)
    candidate = TopologyHint(candidate.numa_nodes, candidate.preferred)
    result = compare_hints(current, candidate, best_non_preferred_affinity_count=target)
    assert result is (current if winner == "current" else candidate)


def test_compare_hints_refuses_nil_affinity():
    with pytest.raises(InputError, match="nil affinity"):
        compare_hints(None, NIL_P, best_non_preferred_affinity_count=0)


# numa_info_test.go TestClosest: (name, current, candidate, distances, winner); Closest(candidate, current).
CLOSEST_MASKS = [
    ("current and candidate length is not the same, current narrower", {0}, {0, 2}, {}, "current"),
    (
        "current and candidate length is the same, distance is the same, current more lower bits set",
        {0, 1},
        {0, 2},
        [[10, 10, 10]] * 3,
        "current",
    ),
    (
        "current and candidate length is the same, distance is the same, candidate more lower bits set",
        {0, 3},
        {0, 2},
        [[10, 10, 10, 10]] * 4,
        "candidate",
    ),
    (
        "current and candidate length is the same, candidate average distance is smaller",
        {0, 3},
        {0, 1},
        [FOUR_DISTANCES[i] for i in range(4)],
        "candidate",
    ),
    (
        "current and candidate length is the same, current average distance is smaller",
        {2, 3},
        {0, 3},
        [FOUR_DISTANCES[i] for i in range(4)],
        "current",
    ),
]


@pytest.mark.parametrize("name, current, candidate, distances, winner", CLOSEST_MASKS, ids=_ids(CLOSEST_MASKS))
def test_closest(name, current, candidate, distances, winner):
    current, candidate = frozenset(current), frozenset(candidate)
    result = closest_mask(candidate, current, distances)
    assert result == (current if winner == "current" else candidate)


def test_narrowest():
    assert narrowest_mask(frozenset({0, 1}), frozenset({2})) == frozenset({2})
    # Equal widths: the numerically smaller mask (upstream IsLessThan compares the uint64), so
    # {1, 2} = 0b0110 beats {0, 3} = 0b1001 although it holds no "lower-numbered" bit first.
    assert narrowest_mask(frozenset({1, 2}), frozenset({0, 3})) == frozenset({1, 2})


# numa_info_test.go TestCalculateAvgDistanceFor.
@pytest.mark.parametrize(
    "name, nodes, distances, average",
    [
        ("1 NUMA node", [0], [[10]], 10),
        ("2 NUMA node, 1 set in bitmask", [0], [[10, 11], [11, 10]], 10),
        ("2 NUMA node, 2 set in bitmask", [0, 1], [[10, 11], [11, 10]], 10.5),
        ("4 NUMA node, 2 set in bitmask", [0, 2], [FOUR_DISTANCES[i] for i in range(4)], 11),
        ("4 NUMA node, 3 set in bitmask", [0, 2, 3], [FOUR_DISTANCES[i] for i in range(4)], 11.11111111111111),
        ("0 NUMA node, 0 set in bitmask", [], [], 0),
    ],
)
def test_average_distance(name, nodes, distances, average):
    assert average_distance(nodes, distances) == average


# policy_single_numa_node_test.go TestPolicySingleNumaNodeFilterHints (nil slices are empty lists).
@pytest.mark.parametrize(
    "name, lists, expected",
    [
        ("filter empty resources", [], []),
        ("filter hints with nil socket mask 1/2", [[NIL_N], [NIL_P]], [[], [NIL_P]]),
        ("filter hints with nil socket mask 2/2", [[P(0), NIL_N], [P(1), NIL_P]], [[P(0)], [P(1), NIL_P]]),
        ("filter hints with empty resource socket mask", [[P(1), P(0), NIL_N], []], [[P(1), P(0)], []]),
        (
            "filter hints with wide sockemask",
            [
                [P(0), P(1), N(1, 2), N(0, 1, 2), NIL_N],
                [N(1, 2), N(0, 1, 2), N(0, 2), N(3)],
                [N(1, 2), N(0, 1, 2), N(0, 2)],
            ],
            [[P(0), P(1)], [], []],
        ),
    ],
)
def test_filter_single_numa_hints(name, lists, expected):
    assert filter_single_numa_hints(lists) == expected


def test_filter_providers_hints():
    providers = [None, {}, {"a": None, "b": [], "c": [P(0), N(0, 1)]}]
    assert filter_providers_hints(providers) == [[NIL_P], [NIL_P], [NIL_P], [NIL_N], [P(0), N(0, 1)]]


# policy_options_test.go TestNewTopologyManagerOptions / TestPolicyDefaultsAvailable /
# TestPolicyOptionsAvailable, for the options upstream actually ships.
@pytest.mark.parametrize(
    "name, options, gates, expected",
    [
        (
            "return TopologyManagerOptions with PreferClosestNUMA set to true",
            {"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "8"},
            None,
            PolicyOptions(True, 8),
        ),
        (
            "return TopologyManagerOptions with MaxAllowableNUMANodes set to 12",
            {"max-allowable-numa-nodes": "12"},
            {"TopologyManagerPolicyBetaOptions": True},
            PolicyOptions(False, 12),
        ),
        ("return empty TopologyManagerOptions", None, None, PolicyOptions(False, 8)),
        (
            "prefer-closest-numa-nodes is stable: available with the beta options off",
            {"prefer-closest-numa-nodes": "1"},
            {"TopologyManagerPolicyBetaOptions": False},
            PolicyOptions(True, 8),
        ),
        ("Go boolean spellings", {"prefer-closest-numa-nodes": "F"}, None, PolicyOptions(False, 8)),
    ],
)
def test_policy_options(name, options, gates, expected):
    assert parse_policy_options(options, feature_gates=gates) == expected


@pytest.mark.parametrize(
    "name, options, gates, message",
    [
        (
            "fail to set option when TopologyManagerPolicyBetaOptions feature gate is not set",
            {"max-allowable-numa-nodes": "8"},
            {"TopologyManagerPolicyBetaOptions": False},
            "Topology Manager Policy Beta-level Options not enabled",
        ),
        (
            "fail to parse options with error PreferClosestNUMANodes",
            {"prefer-closest-numa-nodes": "not a boolean"},
            None,
            "bad value for option",
        ),
        (
            "fail to parse options with error MaxAllowableNUMANodes",
            {"max-allowable-numa-nodes": "can't parse to int"},
            None,
            "unable to convert policy option to integer",
        ),
        (
            "max-allowable-numa-nodes below the default",
            {"max-allowable-numa-nodes": "7"},
            None,
            'the minimum value of "max-allowable-numa-nodes" should not be less than 8',
        ),
        (
            "this-option-does-not-exist",
            {"this-option-does-not-exist": "true"},
            None,
            "unknown Topology Manager Policy option",
        ),
    ],
)
def test_policy_options_refused(name, options, gates, message):
    with pytest.raises(InputError, match=message) as err:
        parse_policy_options(options, feature_gates=gates)
    assert err.value.field.startswith("topologyManagerPolicyOptions")


# topology_manager_test.go TestNewManager, on the merge's own validation.
@pytest.mark.parametrize("policy", ["none", "best-effort", "restricted", "single-numa-node"])
def test_known_policies(policy):
    merge_hints(policy, [0, 1], [])


def test_unknown_policy():
    with pytest.raises(InputError, match='unknown policy: "unknown"'):
        merge_hints("unknown", [0, 1], [])


@pytest.mark.parametrize("policy", ["best-effort", "restricted"])
def test_unknown_option(policy):
    with pytest.raises(InputError, match="unknown Topology Manager Policy option"):
        merge_hints(policy, [0, 1], [], options={"unknown-option": "true"})


def test_prefer_closest_needs_distances():
    # Upstream: "can't get NUMA distances" when the machine reports none; the none policy never
    # reads them.
    with pytest.raises(InputError, match="distance") as err:
        merge_hints("best-effort", [0], [], options={"prefer-closest-numa-nodes": "true"})
    assert err.value.field == "distances"
    assert merge_hints("none", [0], [], options={"prefer-closest-numa-nodes": "true"}) == (NIL_N, True)


@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
def test_more_than_eight_numa_nodes(policy):
    with pytest.raises(InputError, match="unsupported on machines with more than 8 NUMA Nodes"):
        merge_hints(policy, range(9), [])


def test_max_allowable_numa_nodes_raises_the_limit():
    hint, admit = merge_hints("best-effort", range(9), [{"cpu": [P(8)]}], options={"max-allowable-numa-nodes": "9"})
    assert (hint, admit) == (P(8), True)
    with pytest.raises(InputError, match="more than 9 NUMA Nodes"):
        merge_hints("best-effort", range(10), [], options={"max-allowable-numa-nodes": "9"})


# Bad input: one clear InputError naming the field.
@pytest.mark.parametrize(
    "numa_nodes, providers, field, message",
    [
        ([0, 1], [{"cpu": [P(2)]}], "providers[0][cpu][0]", "lacks"),
        ([0, 1], [{"cpu": [P(0)]}, {"gpu": [N(0), P(0, 5)]}], "providers[1][gpu][1]", "lacks"),
        ([0, 1], [{"cpu": [(0, True)]}], "providers[0][cpu][0]", "TopologyHint"),
        ([0, 1], ["cpu"], "providers[0]", "map"),
        ([0, 1], {"cpu": []}, "providers", "list"),
        ([0, 1], [{"cpu": P(0)}], "providers[0][cpu]", "list"),
        ([], [], "numa_nodes", "at least one"),
        ([0, 0], [], "numa_nodes", "repeat"),
        ([-1], [], "numa_nodes", "non-negative"),
    ],
)
def test_bad_input(numa_nodes, providers, field, message):
    for merge in (merge_hints, fast_merge_hints):
        with pytest.raises(InputError, match=message) as err:
            merge("best-effort", numa_nodes, providers)
        assert err.value.field == field


def test_bad_distances():
    options = {"prefer-closest-numa-nodes": "true"}
    with pytest.raises(InputError, match="no distance from NUMA node 1 to 2"):
        distances = {0: [10, 20, 20], 1: [20, 10], 2: [20, 20, 10]}
        merge_hints("best-effort", [0, 1, 2], [], options=options, distances=distances)
    with pytest.raises(InputError, match="non-negative"):
        merge_hints("best-effort", [0, 1], [], options=options, distances=[[10, -1], [20, 10]])


def test_sparse_numa_ids_and_distances_by_id():
    # NUMA ids need not be 0..n-1; distances are looked up by id.
    distances = {1: {1: 10, 4: 20, 6: 12}, 4: {1: 20, 4: 10, 6: 20}, 6: {1: 12, 4: 20, 6: 10}}
    providers = [{"cpu": [P(1, 4), P(1, 6)]}, {"memory": [P(1, 4), P(1, 6)]}]
    options = {"prefer-closest-numa-nodes": "true"}
    assert merge_hints("best-effort", [6, 1, 4], providers, options=options, distances=distances) == (P(1, 6), True)
    assert merge_hints("best-effort", [6, 1, 4], providers) == (P(1, 4), True)


# Properties on random provider answers.

hint_st = st.builds(
    TopologyHint,
    st.one_of(st.none(), st.frozensets(st.integers(0, 3), max_size=4)),
    st.booleans(),
)
resource_hints_st = st.one_of(st.none(), st.lists(hint_st, max_size=3))
provider_st = st.one_of(
    st.none(), st.dictionaries(st.sampled_from(["cpu", "memory", "gpu"]), resource_hints_st, max_size=2)
)
providers_st = st.lists(provider_st, max_size=3)


@settings(max_examples=150, deadline=None)
@given(providers=providers_st)
def test_restricted_never_admits_a_non_preferred_merge(providers):
    hint, admit = merge_hints("restricted", FOUR_NODES, providers)
    assert admit is hint.preferred
    assert hint.numa_nodes is not None and hint.numa_nodes  # restricted always names a mask


@settings(max_examples=150, deadline=None)
@given(providers=providers_st)
def test_single_numa_node_admits_at_most_one_node(providers):
    hint, admit = merge_hints("single-numa-node", FOUR_NODES, providers)
    assert admit is hint.preferred
    if admit:
        assert hint.numa_nodes is None or len(hint.numa_nodes) == 1


@settings(max_examples=100, deadline=None)
@given(providers=providers_st, seed=st.integers(0, 2**32 - 1))
def test_merge_does_not_depend_on_map_order(providers, seed):
    # Upstream iterates Go maps in random order; the result must not depend on it.
    rng = random.Random(seed)
    shuffled = []
    for provider in providers:
        if isinstance(provider, dict):
            items = list(provider.items())
            rng.shuffle(items)
            provider = {k: (None if v is None else rng.sample(v, len(v))) for k, v in items}
        shuffled.append(provider)
    for policy in ("best-effort", "restricted", "single-numa-node"):
        assert merge_hints(policy, FOUR_NODES, providers) == merge_hints(policy, FOUR_NODES, shuffled)
