"""The kubelet Topology Manager's hint merge, policies and policy options, as upstream.

This is a faithful model of ``pkg/kubelet/cm/topologymanager`` (``policy.go``,
``policy_options.go``, ``policy_none.go``, ``policy_best_effort.go``, ``policy_restricted.go``,
``policy_single_numa_node.go``, ``numa_info.go``, ``bitmask/bitmask.go``):

* every hint provider's answer is first normalised by ``filterProvidersHints``: a provider that
  gave no map (or an empty one) and a resource whose hint list is nil both mean "no preference"
  (one preferred any-NUMA hint); an empty, non-nil list means "no possible affinity" (one
  non-preferred any-NUMA hint);
* ``single-numa-node`` keeps only preferred hints that are nil or name exactly one NUMA node;
* the merge walks the cross product of the lists, ANDs the masks of each permutation (a nil
  mask counts as every NUMA node of the machine) and marks the result preferred only when every
  hint is preferred *and* all their non-nil masks are equal;
* the best merged hint is chosen as upstream's ``HintMerger.compare`` does: preferred beats
  non-preferred; among preferred hints the narrowest mask wins (with
  ``prefer-closest-numa-nodes``, among equally wide masks the one with the smallest average
  NUMA distance); among non-preferred hints the one whose width is closest to, but not above,
  the largest of the providers' narrowest widths.

:func:`merge_hints` runs that exhaustive merge. It is the reference the fast path in
:mod:`toposched.kubelet.fast_merge` is checked against, so it deliberately walks every
permutation like the kubelet does (its cost is the product of the list lengths).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations, product
from typing import Any

import numpy as np

from toposched.errors import InputError, ToposchedError
from toposched.kubelet.hints import TopologyHint, mask_of, numa_set
from toposched.names import TOPOLOGY_AFFINITY_ERROR, UNEXPECTED_ADMISSION_ERROR

__all__ = [
    "DEFAULT_MAX_ALLOWABLE_NUMA_NODES",
    "MAX_ALLOWABLE_NUMA_NODES",
    "POLICIES",
    "POLICY_BEST_EFFORT",
    "POLICY_NONE",
    "POLICY_RESTRICTED",
    "POLICY_SINGLE_NUMA_NODE",
    "PREFER_CLOSEST_NUMA_NODES",
    "MergeProblem",
    "PolicyOptions",
    "TopologyAffinityError",
    "UnexpectedAdmissionError",
    "average_distance",
    "closest_mask",
    "compare_hints",
    "filter_providers_hints",
    "filter_single_numa_hints",
    "finish_merge",
    "max_of_min_affinity_counts",
    "max_of_min_mask_counts",
    "merge_hints",
    "narrowest_mask",
    "numa_distances",
    "numa_subsets",
    "parse_policy_options",
    "prepare_merge",
    "subset_arrays_apply",
    "subset_sums",
    "subset_sums_array",
]

POLICY_NONE = "none"
POLICY_BEST_EFFORT = "best-effort"
POLICY_RESTRICTED = "restricted"
POLICY_SINGLE_NUMA_NODE = "single-numa-node"
POLICIES = (POLICY_NONE, POLICY_BEST_EFFORT, POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE)

PREFER_CLOSEST_NUMA_NODES = "prefer-closest-numa-nodes"
MAX_ALLOWABLE_NUMA_NODES = "max-allowable-numa-nodes"
DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8

# Maturity of each option, as upstream's policy_options.go sorts them; an option is usable only
# when the feature gate of its level is on (stable options always are).
_STABLE_OPTIONS = frozenset({PREFER_CLOSEST_NUMA_NODES})
_BETA_OPTIONS = frozenset({MAX_ALLOWABLE_NUMA_NODES})
_ALPHA_OPTIONS: frozenset[str] = frozenset()
BETA_OPTIONS_GATE = "TopologyManagerPolicyBetaOptions"
ALPHA_OPTIONS_GATE = "TopologyManagerPolicyAlphaOptions"
_DEFAULT_GATES = {BETA_OPTIONS_GATE: True, ALPHA_OPTIONS_GATE: False}

_GO_BOOLS = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}
_GO_INT = re.compile(r"[+-]?[0-9]+")

_OPTIONS_FIELD = "topologyManagerPolicyOptions"


class TopologyAffinityError(ToposchedError):
    """The policy refused the pod: no allowed NUMA alignment (upstream ``TopologyAffinityError``).

    ``reason`` and ``str(error)`` are upstream's admission result reason and message; ``pod``,
    ``container`` (``None`` under the pod scope) and ``hint`` say which merge was refused.
    """

    reason = TOPOLOGY_AFFINITY_ERROR
    message = "Resources cannot be allocated with Topology locality"

    def __init__(self, *, pod: str | None = None, container: str | None = None,
                 hint: TopologyHint | Callable[[], TopologyHint] | None = None):
        super().__init__(self.message)
        self.pod = pod
        self.container = container
        self._hint = hint

    @property
    def hint(self) -> TopologyHint | None:
        """The refused merged hint (computed on first read where it was given as a function)."""
        if callable(self._hint):
            self._hint = self._hint()
        return self._hint


class UnexpectedAdmissionError(ToposchedError):
    """A hint provider failed to allocate (upstream ``admission.unexpectedAdmissionError``).

    ``str(error)`` is upstream's message, ``Allocate failed due to <cause>, which is unexpected``.
    """

    reason = UNEXPECTED_ADMISSION_ERROR

    def __init__(self, cause: BaseException, *, pod: str | None = None, container: str | None = None):
        self.message = f"Allocate failed due to {cause}, which is unexpected"
        super().__init__(self.message)
        self.cause = cause
        self.pod = pod
        self.container = container


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """The parsed ``topologyManagerPolicyOptions`` (upstream ``PolicyOptions``)."""

    prefer_closest_numa: bool = False
    max_allowable_numa_nodes: int = DEFAULT_MAX_ALLOWABLE_NUMA_NODES


def _option_available(name: str, gates: Mapping[str, bool]) -> None:
    if name not in _STABLE_OPTIONS | _BETA_OPTIONS | _ALPHA_OPTIONS:
        raise InputError(f'unknown Topology Manager Policy option: "{name}"', field=f"{_OPTIONS_FIELD}[{name}]")
    if name in _ALPHA_OPTIONS and not gates[ALPHA_OPTIONS_GATE]:
        raise InputError(
            f'Topology Manager Policy Alpha-level Options not enabled, but option "{name}" provided',
            field=f"{_OPTIONS_FIELD}[{name}]",
        )
    if name in _BETA_OPTIONS and not gates[BETA_OPTIONS_GATE]:
        raise InputError(
            f'Topology Manager Policy Beta-level Options not enabled, but option "{name}" provided',
            field=f"{_OPTIONS_FIELD}[{name}]",
        )


def parse_policy_options(
    options: Mapping[str, Any] | PolicyOptions | None, *, feature_gates: Mapping[str, bool] | None = None
) -> PolicyOptions:
    """Parse ``topologyManagerPolicyOptions`` exactly as upstream ``NewPolicyOptions`` does.

    Values are strings as in the kubelet configuration (``"true"``, ``"12"``); Go's
    ``ParseBool`` spellings are accepted, and for convenience a Python ``bool`` / ``int`` too.
    ``max-allowable-numa-nodes`` below 8 is refused. ``feature_gates`` may switch the
    ``TopologyManagerPolicyBetaOptions`` (default on) and ``TopologyManagerPolicyAlphaOptions``
    (default off) gates. Raises one :class:`InputError` naming the option on any bad entry.
    """
    if isinstance(options, PolicyOptions):
        return options
    gates = dict(_DEFAULT_GATES)
    for gate, enabled in (feature_gates or {}).items():
        if gate not in gates or not isinstance(enabled, bool):
            raise InputError(f"unknown feature gate or non-boolean value: {gate}={enabled!r}", field="featureGates")
        gates[gate] = enabled
    if options is None:
        return PolicyOptions()
    if not isinstance(options, Mapping):
        raise InputError(
            f"must be a mapping of option name to value, got {type(options).__name__}", field=_OPTIONS_FIELD
        )
    prefer_closest = False
    max_allowable = DEFAULT_MAX_ALLOWABLE_NUMA_NODES
    for name, value in options.items():
        if not isinstance(name, str):
            raise InputError(f"option names must be strings, got {name!r}", field=_OPTIONS_FIELD)
        _option_available(name, gates)
        field = f"{_OPTIONS_FIELD}[{name}]"
        if name == PREFER_CLOSEST_NUMA_NODES:
            if isinstance(value, bool):
                prefer_closest = value
            elif isinstance(value, str) and value in _GO_BOOLS:
                prefer_closest = _GO_BOOLS[value]
            else:
                raise InputError(f'bad value for option "{name}": {value!r} is not a boolean', field=field)
        else:  # max-allowable-numa-nodes, the only other known option
            if isinstance(value, int) and not isinstance(value, bool):
                number = value
            elif isinstance(value, str) and _GO_INT.fullmatch(value):
                number = int(value)
            else:
                raise InputError(f'unable to convert policy option to integer "{name}": {value!r}', field=field)
            if number < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
                raise InputError(
                    f'the minimum value of "{name}" should not be less than {DEFAULT_MAX_ALLOWABLE_NUMA_NODES}',
                    field=field,
                )
            max_allowable = number
    return PolicyOptions(prefer_closest_numa=prefer_closest, max_allowable_numa_nodes=max_allowable)


def numa_distances(machine: Any) -> dict[int, dict[int, int]]:
    """The NUMA distance matrix of a :class:`~toposched.topology.Machine`, by NUMA id."""
    ids = machine.numa_ids
    return {a: {b: machine.distance(a, b) for b in ids} for a in ids}


@lru_cache(maxsize=64)
def numa_subsets(numa_ids: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    """Every non-empty subset of ``numa_ids`` in upstream's ``IterateBitMasks`` order, computed once.

    Each subset is ``(positions, mask, width)``: ``positions`` has bit i set for the i-th id of
    ``numa_ids`` (so running sums over subsets can be built in ``range(1, 2**len(ids))``
    order), ``mask`` has bit n set for NUMA node n, ``width`` is the number of nodes. The
    order is :func:`~toposched.kubelet.hints.iterate_masks`'s: by width, then
    lexicographically by the ids in the order given (ascending ids give upstream's order).
    """
    out = []
    for width in range(1, len(numa_ids) + 1):
        for combo in combinations(range(len(numa_ids)), width):
            positions = mask = 0
            for i in combo:
                positions |= 1 << i
                mask |= 1 << numa_ids[i]
            out.append((positions, mask, width))
    return tuple(out)


ARRAY_SUBSETS_FROM = 9
"""NUMA nodes from which hint providers list their subsets with NumPy: 511 sets and more. Below
that, plain lists cost less than the NumPy calls; a 16-node machine has 65,535 sets, which a
Python loop visits in ~0.1 s per resource and per container."""

_INT64_BITS = 62  # sums and masks below 2**62 cannot overflow the int64 arrays


def subset_arrays_apply(numa_ids: tuple[int, ...]) -> bool:
    """Whether hint providers list the subsets of ``numa_ids`` with NumPy: from
    :data:`ARRAY_SUBSETS_FROM` NUMA nodes on, every id small enough for an int64 mask (else they
    walk :func:`numa_subsets`)."""
    return len(numa_ids) >= ARRAY_SUBSETS_FROM and max(numa_ids) < _INT64_BITS


def subset_sums_array(values: Sequence[int]) -> np.ndarray | None:
    """:func:`subset_sums` as an int64 array, or None when a sum could reach 2**61 (so a caller may
    still add amounts below 2**61 without overflow)."""
    if sum(abs(v) for v in values) >> (_INT64_BITS - 1):
        return None
    sums = np.zeros(1 << len(values), dtype=np.int64)
    for i, v in enumerate(values):
        sums[1 << i:2 << i] = sums[:1 << i] + v
    return sums


def subset_sums(values: Sequence[int]) -> list[int]:
    """For every ``positions`` in ``range(2**len(values))``, the sum of ``values[i]`` over its bits i.

    Indexed like the ``positions`` of :func:`numa_subsets`: one list built in ``2**n`` steps
    instead of a sum per subset.
    """
    sums = [0]
    for v in values:
        sums += [s + v for s in sums]
    return sums


# ---------------------------------------------------------------------------------------------
# The normalised merge problem shared by the exhaustive merge and the fast path.

Hint = tuple[int | None, bool]  # (mask or None for nil affinity, preferred)


@dataclass(frozen=True, slots=True)
class MergeProblem:
    """A validated merge: the machine, the policy and the filtered hint lists as int masks.

    ``lists`` is upstream's ``filteredHints`` (after ``filterSingleNumaHints`` for the
    single-numa-node policy): one tuple per provider resource, each hint ``(mask, preferred)``
    with ``mask`` an int bitmask or ``None`` for a nil affinity.
    """

    policy: str
    numa_ids: tuple[int, ...]
    default: int
    lists: tuple[tuple[Hint, ...], ...]
    options: PolicyOptions
    distances: Mapping[int, Mapping[int, int]] | None

    @property
    def prefer_closest(self) -> bool:
        """Whether masks of equal width are compared by average distance (never for single-numa-node)."""
        return self.policy != POLICY_SINGLE_NUMA_NODE and self.options.prefer_closest_numa

    def distance_sum(self, mask: int) -> int:
        """Sum of the distances between every ordered pair of NUMA nodes of ``mask``.

        Upstream compares ``sum / count²``; masks are only compared this way when their widths
        are equal, so comparing the integer sums decides exactly the same way.
        """
        assert self.distances is not None
        ids = numa_set(mask)
        return sum(self.distances[a][b] for a in ids for b in ids)


def _check_numa_ids(numa_nodes: Iterable[int]) -> tuple[int, ...]:
    if isinstance(numa_nodes, (str, bytes)) or not isinstance(numa_nodes, Iterable):
        raise InputError("must be a collection of NUMA node ids", field="numa_nodes")
    ids = list(numa_nodes)
    for n in ids:
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise InputError(f"NUMA node ids must be non-negative integers, got {n!r}", field="numa_nodes")
    if len(set(ids)) != len(ids):
        raise InputError(f"NUMA node ids repeat: {sorted(ids)}", field="numa_nodes")
    if not ids:
        raise InputError("the machine must have at least one NUMA node", field="numa_nodes")
    return tuple(sorted(ids))


def _check_distances(distances: Any, ids: tuple[int, ...]) -> dict[int, dict[int, int]]:
    if not isinstance(distances, (Mapping, Sequence)) or isinstance(distances, (str, bytes)):
        raise InputError("must be a matrix distances[i][j] indexed by NUMA id", field="distances")
    out: dict[int, dict[int, int]] = {}
    for a in ids:
        try:
            row = distances[a]
        except (KeyError, IndexError):
            raise InputError(f"no distance row for NUMA node {a}", field="distances") from None
        out[a] = {}
        for b in ids:
            try:
                d = row[b]
            except (KeyError, IndexError, TypeError):
                raise InputError(f"no distance from NUMA node {a} to {b}", field=f"distances[{a}]") from None
            if not isinstance(d, int) or isinstance(d, bool) or d < 0:
                raise InputError(
                    f"distance {a}->{b} must be a non-negative integer, got {d!r}", field=f"distances[{a}]"
                )
            out[a][b] = d
    return out


def _convert_hint(hint: Any, node_set: frozenset[int], bits: Mapping[int, int], field: str) -> Hint:
    if not isinstance(hint, TopologyHint):
        raise InputError(f"must be a TopologyHint, got {type(hint).__name__}", field=field)
    if not isinstance(hint.preferred, bool):
        raise InputError(f"preferred must be a bool, got {hint.preferred!r}", field=field)
    nodes = hint.numa_nodes
    if nodes is None:
        return (None, hint.preferred)
    if not nodes <= node_set:
        raise InputError(
            f"hint names NUMA nodes the machine lacks: {sorted(nodes - node_set, key=repr)} "
            f"(machine has {sorted(node_set)})",
            field=field,
        )
    mask = 0
    for n in nodes:
        mask |= bits[n]
    return (mask, hint.preferred)


def _filter_providers(
    providers: Any, node_set: frozenset[int], bits: Mapping[int, int], first_index: int = 0
) -> list[tuple[Hint, ...]]:
    """Upstream ``filterProvidersHints`` with validation and int masks (errors count providers from ``first_index``)."""
    if isinstance(providers, (str, bytes, Mapping)) or not isinstance(providers, Iterable):
        raise InputError("must be a list of provider hint maps (or None)", field="providers")
    out: list[tuple[Hint, ...]] = []
    for i, hints in enumerate(providers, first_index):
        if hints is None or (isinstance(hints, Mapping) and len(hints) == 0):
            out.append(((None, True),))
            continue
        if not isinstance(hints, Mapping):
            raise InputError(
                f"must be a map of resource to hints or None, got {type(hints).__name__}", field=f"providers[{i}]"
            )
        for resource, resource_hints in hints.items():
            field = f"providers[{i}][{resource}]"
            if resource_hints is None:
                out.append(((None, True),))
            elif isinstance(resource_hints, (str, bytes, Mapping)) or not isinstance(resource_hints, Iterable):
                raise InputError("must be a list of TopologyHint or None", field=field)
            else:
                converted = tuple(
                    _convert_hint(h, node_set, bits, f"{field}[{j}]") for j, h in enumerate(resource_hints)
                )
                out.append(converted if converted else ((None, False),))
    return out


def _filter_single_numa(lists: Iterable[tuple[Hint, ...]]) -> list[tuple[Hint, ...]]:
    """Upstream ``filterSingleNumaHints``: keep preferred hints that are nil or one NUMA node wide."""
    return [tuple(h for h in hints if h[1] and (h[0] is None or h[0].bit_count() == 1)) for hints in lists]


def prepare_merge(
    policy: str,
    numa_nodes: Iterable[int],
    providers: Any,
    *,
    options: Mapping[str, Any] | PolicyOptions | None = None,
    distances: Any = None,
    enforce_numa_limit: bool = True,
    feature_gates: Mapping[str, bool] | None = None,
) -> MergeProblem:
    """Validate a merge's inputs and normalise them as upstream does before merging.

    Raises one :class:`InputError` for an unknown policy, an unknown or invalid option, a
    machine with more NUMA nodes than ``max-allowable-numa-nodes`` (when
    ``enforce_numa_limit``, never for the ``none`` policy, as upstream's ``NewManager``), a
    malformed provider answer, a hint naming a NUMA node the machine lacks, or a missing or
    incomplete distance matrix when ``prefer-closest-numa-nodes`` is on (except under ``none``,
    which upstream never gives a distance matrix).
    """
    if policy not in POLICIES:
        raise InputError(f'unknown policy: "{policy}"', field="topologyManagerPolicy")
    opts = parse_policy_options(options, feature_gates=feature_gates)
    ids = _check_numa_ids(numa_nodes)
    if enforce_numa_limit and policy != POLICY_NONE and len(ids) > opts.max_allowable_numa_nodes:
        raise InputError(
            f"unsupported on machines with more than {opts.max_allowable_numa_nodes} NUMA Nodes "
            f"(this one has {len(ids)}; raise {MAX_ALLOWABLE_NUMA_NODES} to allow it)",
            field="numa_nodes",
        )
    dist = None
    if opts.prefer_closest_numa and policy != POLICY_NONE:
        if distances is None:
            raise InputError(
                f'"{PREFER_CLOSEST_NUMA_NODES}" needs the NUMA distance matrix, none was given', field="distances"
            )
        dist = _check_distances(distances, ids)
    node_set = frozenset(ids)
    bits = {n: 1 << n for n in ids}
    lists = _filter_providers(providers, node_set, bits)
    if policy == POLICY_SINGLE_NUMA_NODE:
        lists = _filter_single_numa(lists)
    return MergeProblem(
        policy=policy,
        numa_ids=ids,
        default=mask_of(ids),
        lists=tuple(lists),
        options=opts,
        distances=dist,
    )


def finish_merge(problem: MergeProblem, mask: int, preferred: bool) -> tuple[TopologyHint, bool]:
    """Turn the merger's best ``(mask, preferred)`` into the policy's ``(hint, admit)``.

    single-numa-node reports a best mask equal to the whole machine as a nil affinity; it and
    restricted admit only a preferred hint; best-effort admits everything.
    """
    if problem.policy == POLICY_SINGLE_NUMA_NODE and mask == problem.default:
        hint = TopologyHint(None, preferred)
    else:
        hint = TopologyHint(numa_set(mask), preferred)
    admit = True if problem.policy == POLICY_BEST_EFFORT else preferred
    return hint, admit


# ---------------------------------------------------------------------------------------------
# Mask comparisons (numa_info.go, bitmask.go) and HintMerger.compare (policy.go), on int masks.


def _narrowest(m1: int, m2: int) -> int:
    c1, c2 = m1.bit_count(), m2.bit_count()
    if c1 == c2:
        return m1 if m1 < m2 else m2
    return m1 if c1 < c2 else m2


def _closest(problem: MergeProblem, m1: int, m2: int) -> int:
    if m1.bit_count() != m2.bit_count():
        return _narrowest(m1, m2)
    d1, d2 = problem.distance_sum(m1), problem.distance_sum(m2)
    if d1 == d2:
        return m1 if m1 < m2 else m2
    return m1 if d1 < d2 else m2


def _compare_masks(problem: MergeProblem, current: Hint, candidate: Hint) -> Hint:
    cur, cand = current[0], candidate[0]
    if cur == cand:
        return current
    best = _closest(problem, cur, cand) if problem.prefer_closest else _narrowest(cur, cand)
    return current if best == cur else candidate


def _compare(problem: MergeProblem, best_non_preferred: int, current: Hint | None, candidate: Hint) -> Hint | None:
    """Upstream ``HintMerger.compare``: which of the current best and a candidate to keep."""
    cand_mask, cand_pref = candidate
    cand_count = cand_mask.bit_count()
    if cand_count == 0:
        return current
    if current is None:
        return candidate
    cur_mask, cur_pref = current
    if not cur_pref and cand_pref:
        return candidate
    if cur_pref and not cand_pref:
        return current
    if cur_pref and cand_pref:
        return _compare_masks(problem, current, candidate)
    # Both non-preferred: aim for a width as close as possible to, but not above, the largest
    # of the providers' narrowest widths.
    cur_count = cur_mask.bit_count()
    target = best_non_preferred
    if cur_count > target:
        return _compare_masks(problem, current, candidate)
    if cur_count == target:
        return current if cand_count != target else _compare_masks(problem, current, candidate)
    if cand_count > target:
        return current
    if cand_count == target:
        return candidate
    if cand_count > cur_count:
        return candidate
    if cand_count < cur_count:
        return current
    return _compare_masks(problem, current, candidate)


def max_of_min_mask_counts(lists: Iterable[Iterable[Hint]]) -> int:
    """Upstream ``maxOfMinAffinityCounts`` on ``(mask, preferred)`` lists (nil masks skipped)."""
    result = 0
    for hints in lists:
        counts = [m.bit_count() for m, _ in hints if m is not None]
        if counts and min(counts) > result:
            result = min(counts)
    return result


def _merge_permutation(default: int, permutation: Iterable[Hint]) -> Hint:
    """Upstream ``mergePermutation``: AND the masks; preferred only if all preferred and equal."""
    mask = default
    preferred = True
    first: int | None = None
    for m, p in permutation:
        if m is not None:
            mask &= m
            if first is None:
                first = m
            elif m != first:
                preferred = False
        if not p:
            preferred = False
    return (mask, preferred)


def _exhaustive_best(problem: MergeProblem) -> Hint:
    """Upstream ``HintMerger.Merge``: compare the merge of every permutation of the lists."""
    target = max_of_min_mask_counts(problem.lists)
    best: Hint | None = None
    for permutation in product(*problem.lists):
        best = _compare(problem, target, best, _merge_permutation(problem.default, permutation))
    return best if best is not None else (problem.default, False)


def merge_hints(
    policy: str,
    numa_nodes: Iterable[int],
    providers: Any,
    *,
    options: Mapping[str, Any] | PolicyOptions | None = None,
    distances: Any = None,
    feature_gates: Mapping[str, bool] | None = None,
) -> tuple[TopologyHint, bool]:
    """Merge the providers' hints exactly as the kubelet's policy ``Merge`` does; return (hint, admit).

    ``numa_nodes`` are the machine's NUMA ids. ``providers`` lists, in consultation order, each
    provider's answer: ``None`` (no map) or ``{resource: [TopologyHint, ...] | None}`` where
    ``None`` is a nil list (no preference) and ``[]`` an empty one (no possible affinity).
    ``options`` are the kubelet's ``topologyManagerPolicyOptions`` (e.g.
    ``{"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "16"}``) and
    ``distances[i][j]`` the NUMA distance matrix by id (needed with prefer-closest).

    Policy ``none`` returns ``(TopologyHint(None, False), True)`` without merging. The others
    walk every permutation (cost: the product of the list lengths) and return the best merged
    hint; the whole-machine mask stands for "no alignment found". Bad input raises one
    :class:`InputError` (see :func:`prepare_merge`), including more NUMA nodes than
    ``max-allowable-numa-nodes`` (default 8) for any policy but ``none``.
    """
    problem = prepare_merge(
        policy, numa_nodes, providers, options=options, distances=distances, feature_gates=feature_gates
    )
    if policy == POLICY_NONE:
        return TopologyHint(None, False), True
    mask, preferred = _exhaustive_best(problem)
    return finish_merge(problem, mask, preferred)


# ---------------------------------------------------------------------------------------------
# The same building blocks on TopologyHint values, for callers and for upstream's unit tables.


def _distance_problem(distances: Any) -> MergeProblem:
    if distances is None:
        distances = {}
    if not isinstance(distances, (Mapping, Sequence)) or isinstance(distances, (str, bytes)):
        raise InputError("must be a matrix distances[i][j] indexed by NUMA id", field="distances")
    ids = tuple(sorted(distances)) if isinstance(distances, Mapping) else tuple(range(len(distances)))
    dist = _check_distances(distances, ids) if ids else {}
    return MergeProblem(
        policy=POLICY_BEST_EFFORT,
        numa_ids=ids,
        default=mask_of(ids),
        lists=(),
        options=PolicyOptions(prefer_closest_numa=True),
        distances=dist,
    )


def filter_providers_hints(providers: Any) -> list[list[TopologyHint]]:
    """Upstream ``filterProvidersHints``: one hint list per provider resource, nil answers expanded.

    A provider with no (or an empty) map and a resource with a nil list become
    ``[TopologyHint(None, True)]``; a resource with an empty list becomes
    ``[TopologyHint(None, False)]``. Hints are not checked against a machine here.
    """
    if isinstance(providers, (str, bytes, Mapping)) or not isinstance(providers, Iterable):
        raise InputError("must be a list of provider hint maps (or None)", field="providers")
    out: list[list[TopologyHint]] = []
    for i, hints in enumerate(providers):
        if hints is None or (isinstance(hints, Mapping) and len(hints) == 0):
            out.append([TopologyHint(None, True)])
            continue
        if not isinstance(hints, Mapping):
            raise InputError("must be a map of resource to hints or None", field=f"providers[{i}]")
        for resource_hints in hints.values():
            if resource_hints is None:
                out.append([TopologyHint(None, True)])
            elif len(resource_hints) == 0:
                out.append([TopologyHint(None, False)])
            else:
                out.append(list(resource_hints))
    return out


def filter_single_numa_hints(lists: Iterable[Iterable[TopologyHint]]) -> list[list[TopologyHint]]:
    """Upstream ``filterSingleNumaHints``: keep preferred hints that are nil or one NUMA node wide."""
    return [
        [h for h in hints if h.preferred and (h.numa_nodes is None or len(h.numa_nodes) == 1)] for hints in lists
    ]


def max_of_min_affinity_counts(lists: Iterable[Iterable[TopologyHint]]) -> int:
    """Upstream ``maxOfMinAffinityCounts``: the widest of the lists' narrowest non-nil hints."""
    return max_of_min_mask_counts(
        [[(None if h.numa_nodes is None else mask_of(h.numa_nodes), h.preferred) for h in hints] for hints in lists]
    )


def narrowest_mask(m1: frozenset[int], m2: frozenset[int]) -> frozenset[int]:
    """Upstream ``NUMAInfo.Narrowest``: the one with fewer nodes, else the numerically smaller mask."""
    return m1 if _narrowest(mask_of(m1), mask_of(m2)) == mask_of(m1) else m2


def closest_mask(m1: frozenset[int], m2: frozenset[int], distances: Any) -> frozenset[int]:
    """Upstream ``NUMAInfo.Closest``: narrower first; equal widths by average distance, then mask value."""
    problem = _distance_problem(distances)
    return m1 if _closest(problem, mask_of(m1), mask_of(m2)) == mask_of(m1) else m2


def average_distance(nodes: frozenset[int] | Iterable[int], distances: Any) -> float:
    """Upstream ``CalculateAverageFor``: mean distance over every ordered pair of the nodes (0 if none)."""
    ids = sorted(set(nodes))
    if not ids:
        return 0.0
    dist = _check_distances(distances, tuple(ids))
    total = sum(dist[a][b] for a in ids for b in ids)
    return float(total) / float(len(ids) * len(ids))


def compare_hints(
    current: TopologyHint | None,
    candidate: TopologyHint,
    *,
    best_non_preferred_affinity_count: int,
    prefer_closest: bool = False,
    distances: Any = None,
) -> TopologyHint | None:
    """Upstream ``HintMerger.compare`` on merged hints: returns ``current`` or ``candidate`` itself.

    ``best_non_preferred_affinity_count`` is the merger's target width for non-preferred hints
    (see :func:`max_of_min_affinity_counts`). Merged hints always carry a mask, so a nil
    affinity here is an :class:`InputError`.
    """
    for name, hint in (("current", current), ("candidate", candidate)):
        if hint is not None and hint.numa_nodes is None:
            raise InputError("merged hints always carry a NUMA mask; got a nil affinity", field=name)
    if prefer_closest:
        if distances is None:
            raise InputError("prefer_closest needs the NUMA distance matrix", field="distances")
        problem = _distance_problem(distances)
    else:
        problem = MergeProblem(POLICY_BEST_EFFORT, (), 0, (), PolicyOptions(), None)
    cur = None if current is None else (mask_of(current.numa_nodes or ()), current.preferred)
    cand = (mask_of(candidate.numa_nodes or ()), candidate.preferred)
    chosen = _compare(problem, best_non_preferred_affinity_count, cur, cand)
    if chosen is None:
        return None
    return current if chosen is cur else candidate
