"""The fast merge returns exactly the exhaustive (upstream) merge's result, and returns it fast.

Upstream's tables already run through both merges in test_topology_manager_policy.py; here
hypothesis compares the two on random provider answers and on CPU-manager-like hints (every
mask that can hold a request, the narrowest preferred) for machines of 1 to 8 NUMA nodes, with
and without prefer-closest-numa-nodes, under every policy.
"""

from __future__ import annotations

import dataclasses
import math
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toposched.kubelet.fast_merge as fast_merge
from toposched.errors import InputError
from toposched.kubelet import TopologyHint, fast_merge_hints, merge_hints
from toposched.kubelet.hint_arrays import MaskHintArray
from toposched.kubelet.topology_manager import _exhaustive_best, finish_merge, prepare_merge

POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
CLOSEST = {"prefer-closest-numa-nodes": "true"}


@st.composite
def machines(draw, max_nodes: int = 8):
    """NUMA ids (not always 0..n-1) and a random, possibly asymmetric, distance matrix."""
    n = draw(st.integers(1, max_nodes))
    ids = sorted(draw(st.sets(st.integers(0, 11), min_size=n, max_size=n)))
    distances = {a: {b: 10 if a == b else draw(st.sampled_from([11, 12, 20, 21, 30, 32])) for b in ids} for a in ids}
    return ids, distances


@st.composite
def random_answers(draw, ids):
    """Arbitrary provider answers: nil maps, nil and empty lists, nil and empty masks."""
    mask_st = st.one_of(st.none(), st.frozensets(st.sampled_from(ids), max_size=len(ids)))
    hint_st = st.builds(TopologyHint, mask_st, st.booleans())
    list_st = st.one_of(st.none(), st.lists(hint_st, max_size=3))
    provider_st = st.one_of(st.none(), st.dictionaries(st.sampled_from(["cpu", "memory", "gpu"]), list_st, max_size=2))
    return draw(st.lists(provider_st, max_size=3))


@st.composite
def capacity_answers(draw, ids, max_permutations: int = 5000):
    """Hints like the CPU manager's: every mask with enough free capacity, narrowest preferred."""
    providers = []
    resources = draw(st.lists(st.sampled_from(["cpu", "memory", "gpu", "nic"]), min_size=1, max_size=3, unique=True))
    for resource in resources:
        free = {n: draw(st.integers(0, 4)) for n in ids}
        request = draw(st.integers(1, 6))
        fits = [
            frozenset(c)
            for k in range(1, len(ids) + 1)
            for c in combinations(ids, k)
            if sum(free[n] for n in c) >= request
        ]
        narrowest = min((len(m) for m in fits), default=0)
        providers.append({resource: [TopologyHint(m, len(m) == narrowest) for m in fits]})
    # Keep the exhaustive reference affordable: thin long lists at random (still valid answers).
    budget = max(2, int(max_permutations ** (1 / len(providers))))
    rnd = draw(st.randoms(use_true_random=False))
    for provider in providers:
        for resource, hints in provider.items():
            if len(hints) > budget:
                provider[resource] = [hints[i] for i in sorted(rnd.sample(range(len(hints)), budget))]
    return providers


@st.composite
def problems(draw, answers, max_nodes: int = 8):
    ids, distances = draw(machines(max_nodes))
    return ids, distances, draw(answers(ids))


def _same(ids, distances, providers):
    for policy in POLICIES:
        for options in (None, CLOSEST) if distances is not None else (None,):
            expected = merge_hints(policy, ids, providers, options=options, distances=distances)
            assert fast_merge_hints(policy, ids, providers, options=options, distances=distances) == expected, (
                policy,
                options,
            )
            if policy != "none":
                problem = prepare_merge(policy, ids, providers, options=options, distances=distances)
                _preferred_alone_as_upstream(problem, _exhaustive_best(problem))


@settings(max_examples=300, deadline=None)
@given(problems(random_answers))
def test_same_result_as_upstream_on_random_answers(problem):
    _same(*problem)


@settings(max_examples=80, deadline=None)
@given(problems(capacity_answers))
def test_same_result_as_upstream_on_capacity_hints(problem):
    _same(*problem)


@pytest.mark.parametrize(
    ("knob", "value"),
    [
        # On small machines the target width is always tried candidate by candidate; with no
        # candidate budget the whole reachable set is built instead.
        ("_CANDIDATE_BUDGET", 0),
        # Machines of 9 to 16 NUMA nodes take the reachable set from zeta/Moebius transforms;
        # here every machine does.
        ("_TRANSFORMS_FROM", 1),
    ],
    ids=["reachable set instead of target-width candidates", "subset transforms on every machine"],
)
@settings(max_examples=150, deadline=None)
@given(problem=problems(random_answers))
def test_same_result_on_the_paths_small_machines_do_not_take(knob, value, problem):
    saved = getattr(fast_merge, knob)
    setattr(fast_merge, knob, value)
    try:
        _same(*problem)
    finally:
        setattr(fast_merge, knob, saved)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(1, 2**10 - 1), min_size=1, max_size=12), min_size=1, max_size=4),
       st.integers(1, 2**10 - 1))
def test_subset_transforms_reach_the_pairwise_masks(lists, survivors):
    reduced = [{m & survivors for m in masks} - {0} for masks in lists]
    if any(not masks for masks in reduced):
        return
    masks, widths = fast_merge._reachable_by_transforms(survivors, reduced)
    assert set(masks.tolist()) == fast_merge._reachable_masks(survivors, reduced)
    assert widths.tolist() == [m.bit_count() for m in masks.tolist()]


def _as_arrays(problem, per_list_ids: bool):
    """The problem with each list that a provider could hand over as a MaskHintArray (no nil and no
    empty mask, no mask twice) held that way, as the CPU and memory managers hand their lists over
    on machines with many NUMA nodes; with ``per_list_ids`` each array counts over the NUMA nodes
    its own masks name (the CPU manager counts over the nodes that have CPUs), not over the
    machine's."""
    lists = []
    for hints in problem.lists:
        masks = [m for m, _ in hints]
        if not hints or None in masks or 0 in masks or len(set(masks)) < len(masks):
            lists.append(hints)
            continue
        union = 0
        for m in masks:
            union |= m
        ids = tuple(n for n in problem.numa_ids if union >> n & 1) if per_list_ids else problem.numa_ids
        valid = np.zeros(1 << len(ids), dtype=bool)
        preferred = np.zeros(1 << len(ids), dtype=bool)
        for m, p in hints:
            position = sum(1 << i for i, n in enumerate(ids) if m >> n & 1)
            valid[position], preferred[position] = True, p
        lists.append(MaskHintArray(ids, valid, preferred))
    return dataclasses.replace(problem, lists=tuple(lists))


def _same_on_arrays(ids, distances, providers, per_list_ids):
    for policy in POLICIES[1:]:
        for options in (None, CLOSEST):
            problem = prepare_merge(policy, ids, providers, options=options, distances=distances, enforce_numa_limit=False)
            arrays = _as_arrays(problem, per_list_ids)
            # The same lists, held otherwise (an array lists its hints in upstream's order).
            assert [sorted(hints, key=repr) for hints in arrays.lists] == [sorted(hints, key=repr) for hints in problem.lists]
            upstream = _exhaustive_best(problem)
            assert finish_merge(problem, *fast_merge._fast_best(arrays)) == finish_merge(problem, *upstream), (policy, options)
            _preferred_alone_as_upstream(problem, upstream)
            _preferred_alone_as_upstream(arrays, upstream)


def _preferred_alone_as_upstream(problem, upstream):
    """fast_preferred (what a policy admitting only preferred hints asks first) is upstream's best mask
    when that is preferred, and None exactly when it is not."""
    mask, preferred = upstream
    assert fast_merge.fast_preferred(problem) == (mask if preferred else None), problem.policy


@settings(max_examples=300, deadline=None)
@given(problems(random_answers), st.booleans())
def test_merge_over_hint_arrays_is_upstreams_on_random_answers(problem, per_list_ids):
    _same_on_arrays(*problem, per_list_ids)


@settings(max_examples=80, deadline=None)
@given(problems(capacity_answers, max_nodes=12), st.booleans())
def test_merge_over_hint_arrays_is_upstreams_on_capacity_hints(problem, per_list_ids):
    _same_on_arrays(*problem, per_list_ids)


@pytest.mark.parametrize(
    "providers",
    [
        [],
        [None],
        [{"cpu": []}],
        [{"cpu": [TopologyHint(frozenset(), True)]}, {"gpu": [TopologyHint(frozenset(), True)]}],
        [{"cpu": [TopologyHint(None, True), TopologyHint(frozenset({1}), True)]}, {"gpu": [TopologyHint(None, True)]}],
        [{"cpu": [TopologyHint(None, False)]}, {"gpu": [TopologyHint(frozenset({0, 1}), True)]}],
        [{"cpu": [TopologyHint(frozenset({0}), False)]}, {"gpu": [TopologyHint(frozenset({1}), False)]}],
    ],
    ids=["no providers", "nil map", "empty list", "empty masks", "nil wildcards", "nil not preferred", "disjoint"],
)
def test_edge_cases(providers):
    _same([0, 1, 2], None, providers)
    _same([0, 1, 2], {a: {b: 10 if a == b else 20 for b in range(3)} for a in range(3)}, providers)


def _hints(*masks):
    return [TopologyHint(frozenset(m), False) for m in masks]


@pytest.mark.parametrize(
    ("providers", "merged"),
    [
        # {0, 1} is in no list, but {0, 1, 2} & {0, 1, 3} from two lists is exactly it.
        ([{"cpu": _hints({2, 3}, {0, 1, 2})}, {"gpu": _hints({2, 3}, {0, 1, 3})}], {0, 1}),
        # One list offers {0, 1} plus 2 and plus 3, but it gives only one mask: {0, 1} is out of reach.
        ([{"cpu": _hints({2, 3}, {0, 1, 2}, {0, 1, 3})}, {"gpu": _hints({2, 3}, {0, 1, 2, 3})}], {2, 3}),
        # Two lists offer {0, 1} plus the same node: their AND keeps it.
        ([{"cpu": _hints({2, 3}, {0, 1, 2})}, {"gpu": _hints({2, 3}, {0, 1, 2})}], {2, 3}),
        # A list offering f itself decides once every other list holds a mask containing f.
        ([{"cpu": _hints({0, 1}, {2, 3})}, {"gpu": _hints({0, 1, 2}, {0, 3})}], {0, 1}),
        ([{"cpu": _hints({0, 1}, {2, 3})}, {"gpu": _hints({0, 2}, {1, 2, 3})}], {2, 3}),
    ],
    ids=["two lists one node apart", "one list two near misses", "two lists the same node apart", "f offered",
         "f offered, no superset elsewhere"],
)
def test_target_width_candidates_settled_without_scanning(providers, merged):
    # The shortcuts of _exactly_reachable (set lookups instead of scanning the lists): each case
    # is decided at the target width (2), where a wrong shortcut would pick another mask.
    _same([0, 1, 2, 3], None, providers)
    assert fast_merge_hints("best-effort", [0, 1, 2, 3], providers)[0] == TopologyHint(frozenset(merged), False)


def test_validates_like_the_exhaustive_merge():
    with pytest.raises(InputError, match='unknown policy: "bogus"'):
        fast_merge_hints("bogus", [0], [])
    with pytest.raises(InputError, match="lacks"):
        fast_merge_hints("restricted", [0, 1], [{"cpu": [TopologyHint(frozenset({3}), True)]}])


def test_numa_limit_only_when_asked():
    providers = [{"cpu": [TopologyHint(frozenset({9}), True)]}]
    assert fast_merge_hints("restricted", range(16), providers) == (TopologyHint(frozenset({9}), True), True)
    with pytest.raises(InputError, match="more than 8 NUMA Nodes"):
        fast_merge_hints("restricted", range(16), providers, enforce_numa_limit=True)
    options = {"max-allowable-numa-nodes": "16"}
    assert fast_merge_hints("restricted", range(16), providers, options=options, enforce_numa_limit=True)[1]


def large_machine_answers(numa: int, *, common_preferred: bool) -> list[dict[str, list[TopologyHint]]]:
    """Four providers on a big machine: preferred single nodes where each resource fits, every
    pair of neighbouring nodes and the whole machine as non-preferred fallbacks. Without a
    common preferred node no permutation is preferred and the non-preferred search runs."""
    providers = []
    everything = frozenset(range(numa))
    for k, resource in enumerate(["cpu", "memory", "hugepages-1Gi", "nvidia.com/gpu"]):
        singles = [n for n in range(numa) if n % 4 == (0 if common_preferred else k)]
        hints = [TopologyHint(frozenset({n}), True) for n in singles]
        hints += [TopologyHint(frozenset({n, n + 1}), False) for n in range(numa - 1)]
        hints.append(TopologyHint(everything, False))
        providers.append({resource: hints})
    return providers


@pytest.mark.parametrize("common_preferred", [True, False], ids=["preferred-found", "non-preferred-search"])
def test_64_numa_nodes_four_providers_are_decided(common_preferred):
    """Far beyond what the exhaustive walk could visit, the fast merge decides. Its time (issue 3's
    10 ms) is measured by ``benchmarks/topology_manager.py``: tests assert no time."""
    providers = large_machine_answers(64, common_preferred=common_preferred)
    permutations = math.prod(len(h) for p in providers for h in p.values())
    assert permutations > 10**7
    hint, admit = fast_merge_hints("best-effort", range(64), providers)
    if common_preferred:
        assert (hint, admit) == (TopologyHint(frozenset({0}), True), True)
    else:
        # No node is preferred by all four; the target width is 1 and node 0 is reachable
        # (its own single node ANDed with the (0, 1) pairs of the others).
        assert (hint, admit) == (TopologyHint(frozenset({0}), False), True)


def test_large_machine_matches_exhaustive_when_it_is_affordable():
    # 12 NUMA nodes: the exhaustive merge is still affordable here (with the limit raised).
    providers = large_machine_answers(12, common_preferred=False)
    options = {"max-allowable-numa-nodes": "12"}
    for policy in POLICIES[1:]:
        expected = merge_hints(policy, range(12), providers, options=options)
        assert fast_merge_hints(policy, range(12), providers) == expected
