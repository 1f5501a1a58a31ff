"""``NodeResourceTopologyMatch`` Score: the semantics of kubernetes-sigs/scheduler-plugins' plugin.

A pure model of ``score.go``, ``most_allocated.go``, ``least_allocated.go``,
``balanced_allocation.go`` and ``least_numa.go`` of scheduler-plugins' ``pkg/noderesourcetopology``,
integer truncation, float32 distances and index quirks included (docs/scheduler/nrt-match.md).

* Non-Guaranteed pods score :data:`MAX_NODE_SCORE` everywhere; a node without a report scores 0.
* ``MostAllocated`` / ``LeastAllocated`` / ``BalancedAllocation`` score only nodes whose policy is
  ``single-numa-node`` (others score 0): each NUMA node is scored against the request (the
  effective pod request under pod scope; each init and app container under container scope,
  whose scores are averaged) and the node takes the smallest non-zero NUMA score.
* ``LeastNUMANodes`` scores every node with a report, whatever its policy: the fewer NUMA nodes
  the request needs, the higher the score, with a bonus when they are the closest possible.

Upstream has no NormalizeScore extension (``ScoreExtensions`` returns nil): the score returned
here is final. :func:`least_numa_normalize_score` is upstream's internal mapping from a NUMA
count to a score, not a framework NormalizeScore.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from itertools import combinations

from toposched.kubelet.scope import SCOPE_CONTAINER, SCOPE_POD
from toposched.kubelet.topology_manager import POLICY_SINGLE_NUMA_NODE
from toposched.scheduler.nrt_match import (
    _HIGHEST_NUMA_ID,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    PLUGIN_NAME,
    NUMAZone,
    _index_panic,
    _resource_set_suitable,
    _UpstreamPanic,
    numa_zones,
    topology_manager_config,
    upstream_effective_request,
)
from toposched.scheduler.nrt_match_args import (
    BALANCED_ALLOCATION,
    LEAST_ALLOCATED,
    LEAST_NUMA_NODES,
    MOST_ALLOCATED,
    NodeResourceTopologyMatchArgs,
)
from toposched.scheduler.status import Status
from toposched.topology.nrt import NodeResourceTopology
from toposched.workload import GUARANTEED, Pod

__all__ = [
    "MAX_DISTANCE_VALUE",
    "balanced_allocation_score",
    "least_allocated_score",
    "least_numa_normalize_score",
    "min_avg_distance",
    "most_allocated_score",
    "nodes_avg_distance",
    "nrt_score",
    "numa_nodes_required",
    "score_for_each_numa_node",
]

# ACPI SLIT's "unknown distance"; upstream uses it for a missing cost.
MAX_DISTANCE_VALUE = 255
# Upstream starts its search for the closest fitting combination just above the largest distance.
_DISTANCE_CEILING = 256


def _value(resource: str, amount: int) -> int:
    """apimachinery's ``Quantity.Value()``: whole units rounded up, so cpu counts whole cores."""
    return -(-amount // 1000) if resource == "cpu" else amount


def _f32(x: float) -> float:
    """``x`` rounded to the nearest float32, as Go's float32 arithmetic stores it."""
    return struct.unpack("f", struct.pack("f", x))[0]


# ---- MostAllocated / LeastAllocated / BalancedAllocation ---------------------------------------


def _most_allocated_resource(resource: str, requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return _value(resource, requested) * MAX_NODE_SCORE // _value(resource, capacity)


def _least_allocated_resource(resource: str, requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    cap = _value(resource, capacity)
    return (cap - _value(resource, requested)) * MAX_NODE_SCORE // cap


def most_allocated_score(
    requested: Mapping[str, int], available: Mapping[str, int], args: NodeResourceTopologyMatchArgs
) -> int:
    """One NUMA node's MostAllocated score: the weighted mean (truncated) over every requested
    resource of ``request * 100 / available`` in whole units, 0 where it does not fit or is absent."""
    total = weight_sum = 0
    for resource, amount in requested.items():
        w = args.weight(resource)
        total += _most_allocated_resource(resource, amount, available.get(resource, 0)) * w
        weight_sum += w
    return total // weight_sum


def least_allocated_score(
    requested: Mapping[str, int], available: Mapping[str, int], args: NodeResourceTopologyMatchArgs
) -> int:
    """One NUMA node's LeastAllocated score: the weighted mean (truncated) over every requested
    resource of ``(available - request) * 100 / available`` in whole units, 0 where it does not fit."""
    total = weight_sum = 0
    for resource, amount in requested.items():
        w = args.weight(resource)
        total += _least_allocated_resource(resource, amount, available.get(resource, 0)) * w
        weight_sum += w
    return total // weight_sum


def balanced_allocation_score(
    requested: Mapping[str, int], available: Mapping[str, int], args: NodeResourceTopologyMatchArgs
) -> int:
    """One NUMA node's BalancedAllocation score: ``int((1 - variance) * 100)`` of the fractions
    request/available (a zero or absent capacity counts as fraction 1), 0 as soon as one
    fraction exceeds 1. The variance is gonum's sample variance (divided by n - 1); weights
    play no part."""
    fractions = []
    for resource in sorted(requested):
        capacity = _value(resource, available.get(resource, 0))
        fraction = 1.0 if capacity == 0 else float(_value(resource, requested[resource])) / float(capacity)
        if fraction > 1:
            return 0
        fractions.append(fraction)
    n = len(fractions)
    mean = sum(fractions) / n
    squares = compensation = 0.0
    for f in fractions:
        d = f - mean
        squares += d * d
        compensation += d
    variance = (squares - compensation * compensation / n) / (n - 1)
    return int((1 - variance) * float(MAX_NODE_SCORE))


_STRATEGIES = {
    MOST_ALLOCATED: most_allocated_score,
    LEAST_ALLOCATED: least_allocated_score,
    BALANCED_ALLOCATION: balanced_allocation_score,
}


def score_for_each_numa_node(
    requested: Mapping[str, int], zones: Sequence[NUMAZone], args: NodeResourceTopologyMatchArgs
) -> int:
    """Upstream ``scoreForEachNUMANode``: every NUMA node scored with the args' strategy; the
    node's score is the smallest non-zero one (0 if all are 0).

    Raises upstream's index panic when a NUMA id is not below the number of NUMA nodes
    (upstream stores the scores in a slice indexed by NUMA id).
    """
    strategy = _STRATEGIES[args.scoring_strategy.type]
    min_score = 0
    for zone in zones:
        numa_score = strategy(requested, zone.resources, args)
        if min_score == 0 or (numa_score != 0 and numa_score < min_score):
            min_score = numa_score
        if zone.numa_id >= len(zones):
            raise _UpstreamPanic(_index_panic(zone.numa_id, len(zones)))
    return min_score


def _pod_scope_score(pod: Pod, zones: Sequence[NUMAZone], args: NodeResourceTopologyMatchArgs) -> int:
    return score_for_each_numa_node(upstream_effective_request(pod), zones, args)


def _container_scope_score(pod: Pod, zones: Sequence[NUMAZone], args: NodeResourceTopologyMatchArgs) -> int:
    scores = [float(score_for_each_numa_node(c.requests, zones, args)) for c in pod.all_containers]
    return int(sum(scores) / len(scores))


# ---- LeastNUMANodes ----------------------------------------------------------------------------


def least_numa_normalize_score(numa_nodes_count: int, is_min_avg_distance: bool) -> int:
    """Upstream ``normalizeScore``: ``100 - count * 12``, plus 6 when the NUMA nodes are the closest.

    12 is ``MaxNodeScore / 8`` in integer arithmetic; more than 8 NUMA nodes give a negative score.
    """
    numa_node_score = MAX_NODE_SCORE // _HIGHEST_NUMA_ID
    score = MAX_NODE_SCORE - numa_nodes_count * numa_node_score
    if is_min_avg_distance:
        return score + numa_node_score // 2
    return score


def nodes_avg_distance(zones: Sequence[NUMAZone], positions: Sequence[int]) -> float:
    """The float32 mean of the costs between every ordered pair of the zones at ``positions``
    (self included); a missing cost counts as 255, and no position at all gives 255."""
    if not positions:
        return float(MAX_DISTANCE_VALUE)
    accu = 0
    for a in positions:
        for b in positions:
            accu += zones[a].costs.get(zones[b].numa_id, MAX_DISTANCE_VALUE)
    return _f32(_f32(float(accu)) / _f32(float(len(positions) * len(positions))))


def min_avg_distance(zones: Sequence[NUMAZone], position_combinations: Sequence[Sequence[int]]) -> float:
    """Upstream ``minAvgDistanceInCombinations``: the smallest average distance among the
    combinations (of positions in ``zones``), never more than 255."""
    minimum = float(MAX_DISTANCE_VALUE)
    for combination in position_combinations:
        distance = nodes_avg_distance(zones, combination)
        if distance < minimum:
            minimum = distance
    return minimum


def _combination_fits(
    qos: str, zones: Sequence[NUMAZone], requests: Mapping[str, int], combination: Sequence[int]
) -> bool:
    # Every requested resource (zero-valued and non-NUMA ones included) must be reported by every
    # NUMA node of the combination, or the combination is not considered at all.
    for position in combination:
        if any(resource not in zones[position].resources for resource in requests):
            return False
    combined: dict[str, int] = {}
    for position in combination:
        for resource, amount in zones[position].resources.items():
            combined[resource] = combined.get(resource, 0) + amount
    return all(
        quantity == 0 or _resource_set_suitable(qos, resource, quantity, combined.get(resource, 0))
        for resource, quantity in requests.items()
    )


def _find_suitable_combination(
    qos: str, zones: Sequence[NUMAZone], requests: Mapping[str, int], candidates: Sequence[tuple[int, ...]]
) -> tuple[tuple[int, ...] | None, bool]:
    best_possible = min_avg_distance(zones, candidates)
    best: tuple[int, ...] | None = None
    best_distance = float(_DISTANCE_CEILING)
    for combination in candidates:
        if not _combination_fits(qos, zones, requests, combination):
            continue
        distance = nodes_avg_distance(zones, combination)
        if distance == best_possible:
            return combination, True
        if distance < best_distance:
            best_distance = distance
            best = combination
    return best, False


def numa_nodes_required(
    qos: str, zones: Sequence[NUMAZone], requests: Mapping[str, int]
) -> tuple[tuple[int, ...] | None, bool]:
    """Upstream ``numaNodesRequired``: the fewest NUMA nodes that together fit ``requests``.

    Combinations of 1, 2, ... zones are tried in lexicographic order of their positions; among
    those that fit, the first one with the smallest average distance of all combinations of
    that size wins (and the flag says so), else the first one with the smallest distance of
    those that fit. Returns the sorted NUMA ids (or None when nothing fits) and that flag.
    """
    for size in range(1, len(zones) + 1):
        candidates = list(combinations(range(len(zones)), size))
        combination, is_min_distance = _find_suitable_combination(qos, zones, requests, candidates)
        if combination is not None:
            return tuple(sorted({zones[p].numa_id for p in combination})), is_min_distance
    return None, False


def _only_non_numa_resources(zones: Sequence[NUMAZone], requests: Mapping[str, int]) -> bool:
    return not any(resource in zone.resources for resource in requests for zone in zones)


def _subtract_from_numas(requests: Mapping[str, int], zones: list[NUMAZone], numa_ids: Sequence[int]) -> None:
    """Upstream ``subtractFromNUMAs``: take each request from the listed NUMA nodes in turn.

    Upstream indexes its NUMA list by NUMA id rather than position, reproduced here: with ids
    that are not 0..n-1 in object order the wrong zone is charged, or the index overflows.
    """
    for resource, quantity in requests.items():
        for index in numa_ids:
            if quantity == 0:
                break
            if index >= len(zones):
                raise _UpstreamPanic(_index_panic(index, len(zones)))
            zone = zones[index]
            if resource not in zone.resources:
                continue
            available = zone.resources[resource]
            taken = min(quantity, available)
            quantity -= taken
            left = dict(zone.resources)
            left[resource] = available - taken
            zones[index] = NUMAZone(zone.numa_id, left, zone.costs)


def _least_numa_container_scope(pod: Pod, zones: Sequence[NUMAZone]) -> int:
    qos = pod.qos_class
    remaining = list(zones)
    max_numa_nodes = 0
    all_min_distance = True
    # The Topology Manager admits init containers first, then app containers, in spec order.
    for container in pod.all_containers:
        if _only_non_numa_resources(remaining, container.requests):
            continue
        numa_ids, is_min_distance = numa_nodes_required(qos, remaining, container.requests)
        if numa_ids is None:
            return MIN_NODE_SCORE
        all_min_distance = all_min_distance and is_min_distance
        max_numa_nodes = max(max_numa_nodes, len(numa_ids))
        _subtract_from_numas(container.requests, remaining, numa_ids)
    if max_numa_nodes == 0:
        return MAX_NODE_SCORE
    return least_numa_normalize_score(max_numa_nodes, all_min_distance)


def _least_numa_pod_scope(pod: Pod, zones: Sequence[NUMAZone]) -> int:
    requests = upstream_effective_request(pod)
    if _only_non_numa_resources(zones, requests):
        return MAX_NODE_SCORE
    numa_ids, is_min_distance = numa_nodes_required(pod.qos_class, zones, requests)
    if numa_ids is None:
        return MIN_NODE_SCORE
    return least_numa_normalize_score(len(numa_ids), is_min_distance)


# ---- Score -----------------------------------------------------------------------------------


def nrt_score(
    pod: Pod, nrt: NodeResourceTopology | None, *, args: NodeResourceTopologyMatchArgs | None = None
) -> tuple[int, Status]:
    """The plugin's Score for ``pod`` on the node ``nrt`` describes, as upstream computes it.

    Returns ``(score, status)`` like upstream's ``Score``. The status is Success except where
    upstream's Go code would index out of range and panic (NUMA ids that are not 0..n-1 in
    object order, or a zone named ``node-64``): then ``(0, Error)`` with the Go runtime's
    message. ``args`` defaults to the plugin's defaults (LeastAllocated, cpu and memory weight 1).
    The score is the plugin's final one; with LeastNUMANodes a request needing more than eight
    NUMA nodes scores below zero, as upstream (the framework then refuses the score).
    """
    args = args if args is not None else NodeResourceTopologyMatchArgs()
    if pod.qos_class != GUARANTEED:
        return MAX_NODE_SCORE, Status.success()
    if nrt is None:
        return 0, Status.success()
    conf = topology_manager_config(nrt)
    strategy = args.scoring_strategy.type
    if strategy != LEAST_NUMA_NODES and conf.policy != POLICY_SINGLE_NUMA_NODE:
        return 0, Status.success()
    try:
        zones = numa_zones(nrt)
        if strategy == LEAST_NUMA_NODES:
            if conf.scope == SCOPE_POD:
                return _least_numa_pod_scope(pod, zones), Status.success()
            return _least_numa_container_scope(pod, zones), Status.success()
        if conf.scope == SCOPE_CONTAINER:
            return _container_scope_score(pod, zones, args), Status.success()
        return _pod_scope_score(pod, zones, args), Status.success()
    except _UpstreamPanic as panic:
        return 0, Status.error(str(panic), plugin=PLUGIN_NAME)
