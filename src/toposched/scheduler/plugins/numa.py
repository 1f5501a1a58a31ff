"""NUMAAlignment and NUMAScore: toposched's own topology plugins.

NUMAAlignment decides whether the node's kubelet (or the toposched agent) can give the pod
what its NUMA policy demands. Its vector form is a necessary condition computed over every
node's per-zone free resources (a container must fit one zone under ``single-numa-node``; the
pod must fit the node's zones under ``restricted``). The exact answer comes from the node's
kubelet replica: the scheduling cycle confirms its chosen node by admitting the pod there (see
:class:`~toposched.scheduler.scheduler.Scheduler`), and the per-node ``filter`` used by
``explain`` does the same admission on trial and gives it back.

NUMAScore prefers nodes where the pod needs the fewest NUMA zones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from itertools import combinations
from math import comb
from typing import Any

import numpy as np

from toposched.kubelet.cpu_manager import guaranteed_cpus, pod_guaranteed_cpus
from toposched.kubelet.device_manager import container_device_requests, pod_device_requests
from toposched.kubelet.memory_manager import pod_requested_memory
from toposched.names import KOORDINATOR_RESOURCE_PREFIX
from toposched.scheduler import rowloops
from toposched.scheduler.cluster import NodeRecord, placement_of
from toposched.scheduler.framework import MAX_NODE_SCORE, CycleState, RowReasons, StateKey, registry
from toposched.scheduler.intent import (
    REASON_POLICY_MISMATCH,
    SOURCE_KUBELET_CONFIG,
    NodePolicy,
    PodIntent,
    effective_policy,
    node_topology_policy,
    pod_intent,
)
from toposched.scheduler.status import Refusal, Status
from toposched.scheduler.table import POLICY_CODES, NodeTable, RowValues, first_true, take_rows
from toposched.workload import GUARANTEED, Container, Pod

__all__ = ["ALIGNED_REQUEST", "POD_INTENT", "AlignedRequest", "NUMAAlignment", "NUMAScore", "aligned_request", "aligning_manager", "aligns"]

_POLICY_NAMES = {code: name for name, code in POLICY_CODES.items()}
_SCORE_ZONES = 8  # NUMAScore's scale: 100 for one zone down to 0 for this many (the table's zone slots may grow past it)
_MAX_SETS = 4096  # NUMA sets _fewest_zones tries at one width (8 NUMA nodes have at most 70)
_SINGLE = POLICY_CODES["single-numa-node"]
_RESTRICTED = POLICY_CODES["restricted"]
_BEST_EFFORT = POLICY_CODES["best-effort"]


_Plan = tuple[list[list[tuple[int, int]]], list[tuple[int, int]]]  # see AlignedRequest.plan


class AlignedRequest:
    """What of a pod the kubelet pins to NUMA nodes: exclusive CPUs, memory/hugepages, devices.

    Each part is computed by the kubelet model's own function, so the scheduler and the kubelet
    agree on it: exclusive CPUs as the static CPU manager counts them (whole-CPU containers of a
    Guaranteed pod; at pod scope, the pod's peak over init containers, sidecars and app
    containers), memory and hugepages as the Static memory manager requests them (Guaranteed pods
    only), devices as the device manager does. ``containers`` holds one request per container in
    admission order (empty ones dropped); ``pod`` the pod-scope request. CPUs are in millicores.

    ``walk``: the containers a container-scope kubelet places one after the other on single NUMA
    nodes, as (row of ``stacked``, step kind) in admission order; see :func:`_containers_in_turn`.
    ``steps``: the walk as an int64 array (steps x 2), as the compiled walk reads it.
    ``reuse_spans``: per container the walk forces into a regular init container's zone, how many
    of that container's CPUs are certainly still reusable when it comes, and its own; see
    :func:`_reuse_spans`.
    """

    def __init__(self, pod: Pod) -> None:
        self.guaranteed = pod.qos_class == GUARANTEED
        self._plans: dict[tuple[tuple[int, ...], bool, bool], _Plan] = {}
        if not self.guaranteed and not pod.asks_extended:
            # Most pods: no exclusive CPUs or pinned memory (not Guaranteed) and no device: nothing aligned.
            self.containers, self.pod, self.stacked_lists = [], {}, [[]]
            self.stacked = ([], np.zeros((1, 0), dtype=np.int64))
            self.aligned_by, self.walk, self.reuse_spans, self.memory_rows = [], [], [], []
            self.steps = np.zeros((0, 2), dtype=np.int64)
            self.first_memory = None
            return
        every = [self._of(pod, c) for c in pod.all_containers]
        self.containers = [r for r in every if r]
        pod_request: dict[str, int] = {}
        cpus = pod_guaranteed_cpus(pod)
        if cpus:
            pod_request["cpu"] = cpus * 1000
        if self.guaranteed:
            pod_request.update({k: v for k, v in pod_requested_memory(pod).items() if v > 0})
        pod_request.update({k: v for k, v in pod_device_requests(pod).items() if v > 0 and _is_device(k)})
        self.pod = pod_request
        names = sorted(set(pod_request).union(*self.containers))
        # The pod's request and each container's as one matrix (resources in ``names`` order).
        stacked = np.zeros((1 + len(self.containers), len(names)), dtype=np.int64)
        for i, request in enumerate([pod_request, *self.containers]):
            stacked[i] = [request.get(n, 0) for n in names]
        self.stacked = (names, stacked)
        self.stacked_lists = stacked.tolist()  # the same, for the plain-Python forms
        # Per name: which manager must be static for the node to align it ("cpu", "memory" or "" for devices).
        self.aligned_by = [aligning_manager(n) for n in names]
        self.walk = _walk(pod, every)
        self.steps = np.array(self.walk, dtype=np.int64).reshape(-1, 2)  # the walk as the compiled loop reads it
        self.reuse_spans = _reuse_spans(self.walk, names, self.stacked_lists)
        # Per row of ``stacked`` that asks for memory or hugepages: (row, [(name's position, amount)]).
        memory = [j for j, by in enumerate(self.aligned_by) if by == "memory"]
        self.memory_rows = [(i, [(j, want[j]) for j in memory if want[j]]) for i, want in enumerate(self.stacked_lists)
                            if any(want[j] for j in memory)]
        # The first container asking for memory, as its row of ``stacked`` and (name's position, amount) pairs.
        self.first_memory = next(((i, wants) for i, wants in self.memory_rows if i > 0), None)

    def plan(self, cols: list[int], cpu_static: bool, mem_static: bool) -> _Plan:
        """The (zone column, amount) pairs to check on a node with these managers, per request of
        ``stacked`` and for the pod's request across zones, leaving out what the node does not align;
        ``cols`` is the zone column of each of ``stacked``'s names. Kept per columns and managers."""
        key = (tuple(cols), cpu_static, mem_static)
        plan = self._plans.get(key)
        if plan is None:
            names, _ = self.stacked
            kept = [aligns(by, cpu_static, mem_static) for by in self.aligned_by]
            per_request = [[(col, need) for col, need, keep in zip(cols, want, kept) if keep] for want in self.stacked_lists]
            pod_wants = [(cols[names.index(name)], want) for name, want in self.pod.items()
                         if aligns(aligning_manager(name), cpu_static, mem_static)]
            plan = self._plans[key] = (per_request, pod_wants)
        return plan

    def _of(self, pod: Pod, container: Container) -> dict[str, int]:
        out: dict[str, int] = {}
        cpus = guaranteed_cpus(pod, container)
        if cpus:
            out["cpu"] = cpus * 1000
        if self.guaranteed:
            for name, value in container.requests.items():
                if value > 0 and (name == "memory" or name.startswith("hugepages-")):
                    out[name] = value
        out.update({k: v for k, v in container_device_requests(container).items() if v > 0 and _is_device(k)})
        return out


# The kinds of step of AlignedRequest.walk.
_INIT = 0    # the pod's regular init container: the lowest zone holding it; what it takes comes back
_LOWEST = 1  # the lowest zone holding the container
_FORCED = 2  # the init container's zone, while some of its CPUs are certainly still reusable
_EITHER = 3  # the init container's zone or the lowest holding one: which depends on the CPUs reused


def _walk(pod: Pod, every: list[dict[str, int]]) -> list[tuple[int, int]]:
    """:attr:`AlignedRequest.walk` from each container's request (``every``, admission order).

    The walk stops before a container asking for devices (which devices a zone offers is the
    device manager's business) and before a second regular init container with a request (the
    CPUs it may reuse from the first are not known); a walk of one step decides nothing.
    A regular init container's exclusive CPUs stay reusable by the pod's later containers, which
    the static CPU manager then offers only NUMA sets holding those CPUs: certainly while the
    exclusive containers after it took fewer CPUs than it has (:data:`_FORCED`), possibly after
    (:data:`_EITHER`).
    """
    inits = {id(c) for c in pod.init_containers if not c.is_sidecar}
    steps: list[tuple[int, int]] = []
    row = reusable = used = 0
    seen_init = False
    for container, request in zip(pod.all_containers, every):
        if not request:
            continue
        row += 1
        if any(_is_device(k) for k in request):
            break
        if id(container) in inits:
            if seen_init:
                break
            seen_init, reusable = True, request.get("cpu", 0)
            steps.append((row, _INIT))
            continue
        if "cpu" not in request or not reusable:
            kind = _LOWEST
        else:
            kind = _FORCED if used < reusable else _EITHER
            used += request["cpu"]
        steps.append((row, kind))
    return steps if len(steps) > 1 else []


# Written by NUMAAlignment's PreFilter (or the first reader): the pod's intent (its NUMA and
# CPU-bind policies, exclusive CPUs) and its aligned request; CPUOrchestration, ZoneCapacity,
# DeviceLocality and ScarcityScore read them.
POD_INTENT: StateKey[PodIntent] = StateKey("PodIntent", "NUMAAlignment")
ALIGNED_REQUEST: StateKey[AlignedRequest] = StateKey("AlignedRequest", "NUMAAlignment")


def aligning_manager(resource: str) -> str:
    """The manager that aligns a resource: "cpu" (static CPU manager), "memory" (Static memory manager) or ""."""
    if resource == "cpu":
        return "cpu"
    if resource == "memory" or resource.startswith("hugepages-"):
        return "memory"
    return ""


def aligns(by: str, cpu_static: Any, mem_static: Any) -> Any:
    """Whether a node with these managers aligns a resource that ``by`` aligns ("cpu", "memory", or ""
    for devices): a resource is exempt from NUMA alignment when its manager is not static.

    The flags may be bools or boolean arrays (one per row); the answer has their form (devices: True).
    """
    if by == "cpu":
        return cpu_static
    if by == "memory":
        return mem_static
    return True


def _is_device(resource: str) -> bool:
    """Extended resources (``vendor/name``) are the ones device plugins serve.

    Koordinator's shared-GPU resources (``koordinator.sh/gpu-core`` ...) are not: the node
    reports them as plain counts and GPUShare places them.
    """
    return "/" in resource and not resource.startswith(KOORDINATOR_RESOURCE_PREFIX)


def aligned_request(state: CycleState, pod: Pod) -> AlignedRequest:
    """The pod's aligned request, computed once per cycle."""
    request = state.get(ALIGNED_REQUEST)
    if request is None:
        request = state[ALIGNED_REQUEST] = AlignedRequest(pod)
    return request


_ANY_AMOUNT = np.iinfo(np.int64).min  # what a zone must hold of a resource the row does not align


def _fits_one_zone(table: NodeTable, rows: np.ndarray, request: AlignedRequest, which: range, *,
                   restricted: bool = False) -> np.ndarray:
    """Per row: each request ``which`` of ``request.stacked`` (0 the pod's, then each container's) is
    held whole by some valid zone (:func:`zones_hold_requests`, with the rows' managers and, with
    ``restricted``, the kubelet's rule for its ``restricted`` policy)."""
    names, want = request.stacked
    frees = [table.zone_free(name) for name in names]  # may add columns: before reading the zones' validity
    caps = [table.zone_capacity(name) for name in names] if restricted else []
    widest = [table.zone_capacity_max(name) for name in names] if restricted else []
    return zones_hold_requests(table.zone_valid(), frees, caps, widest, table.view("cpu_static"), table.view("mem_static"),
                               request.aligned_by, want[which.start:which.stop], restricted, rows)


_BY_CODES = {"": 0, "cpu": 1, "memory": 2}  # the compiled loop's codes of aligning_manager's answers


@lru_cache(maxsize=256)
def _codes_of(aligned_by: tuple[str, ...]) -> np.ndarray:
    """``aligned_by`` as the compiled loops' codes (read-only; kept per tuple: pods share a few)."""
    codes = np.array([_BY_CODES[by] for by in aligned_by], dtype=np.int64)
    codes.flags.writeable = False
    return codes


def zones_hold_requests(valid: np.ndarray, frees: list[np.ndarray], caps: list[np.ndarray], widest: list[np.ndarray],
                        cpu_static: np.ndarray, mem_static: np.ndarray, aligned_by: list[str], needs: np.ndarray,
                        restricted: bool, rows: np.ndarray) -> np.ndarray:
    """Per asked row (``rows``, positions along the last axis): every request of ``needs`` (requests x
    resources) is held whole by some ``valid`` zone, ``frees[r]`` (zones x rows) at least its need.

    Resources a row does not align (``aligned_by[r]`` "cpu" without ``cpu_static``, "memory" without
    ``mem_static``; both one flag per row) are left out. With ``restricted``, the kubelet's rule for
    its ``restricted`` policy (:func:`_narrowest`, from ``caps``, the zones' capacities, and
    ``widest``, the rows' largest): only the resources one zone's capacity could hold must share a
    zone, and a request mixing those with resources no zone could hold is refused. The compiled loop
    when built (one pass over the asked rows, the zones read in place), else NumPy: the same answer.
    """
    if rowloops.compiled is not None:
        out = np.empty(len(rows), dtype=bool)
        rowloops.compiled.zones_hold(valid, frees, caps, widest, cpu_static, mem_static,
                                     _codes_of(tuple(aligned_by)), np.ascontiguousarray(needs, dtype=np.int64), restricted,
                                     out, rows)
        return out
    # When the rows are an eighth of the table or more, the per-row arrays are computed over every
    # row and the asked ones picked at the end.
    whole = 8 * len(rows) >= valid.shape[1]
    if not whole:
        cpu_static, mem_static, widest = cpu_static[rows], mem_static[rows], [most[rows] for most in widest]

    def capacity(j: int) -> np.ndarray:  # zones x rows, as the rows are
        return caps[j] if whole else take_rows(caps[j], rows)
    exempt = [np.logical_not(aligns(by, cpu_static, mem_static)) if by else None for by in aligned_by]
    ok = np.ones(valid.shape[1] if whole else len(rows), dtype=bool)
    for needs_i in needs.tolist():
        spared_i: list[np.ndarray | None] = exempt
        if restricted:
            single, hinted = _narrowest(aligned_by, widest, capacity, needs_i)
            spared_i, some_single, some_wide = [], np.zeros_like(ok), np.zeros_like(ok)
            for j, spared in enumerate(exempt):
                if single[j] is None:  # not asked for
                    spared_i.append(spared)
                    continue
                counted = hinted[j] if spared is None else hinted[j] & ~spared  # resources with hints on the row
                some_single |= counted & single[j]
                some_wide |= counted & ~single[j]
                spared_i.append(~(counted & single[j]))
            ok &= ~(some_single & some_wide)
        # A spared row needs nothing of any zone: its need is the least integer (one pass over the
        # zones instead of a comparison and a union). A device (None) is aligned on every node.
        ok &= rowloops.any_zone_holding(valid, frees, [need if spared is None else np.where(spared, _ANY_AMOUNT, need)
                                                       for need, spared in zip(needs_i, spared_i)], None if whole else rows)
    return take_rows(ok, rows) if whole else ok


def _one_zone_per_scope(table: NodeTable, rows: np.ndarray, positions: np.ndarray, request: AlignedRequest,
                        cpu_static: np.ndarray, mem_static: np.ndarray, ok: np.ndarray, *, restricted: bool = False) -> None:
    """:func:`_fits_one_zone` into ``ok`` at ``positions`` of ``rows``: the pod's request on pod-scope
    nodes, each container's on container-scope nodes."""
    if not len(positions):
        return
    if len(request.containers) == 1 and request.stacked_lists[0] == request.stacked_lists[1]:
        # One container asks for all the pod asks: both scopes judge the same request, at once.
        ok[positions] = _fits_one_zone(table, rows[positions], request, range(1), restricted=restricted)
        return
    pod_scope = table.view("pod_scope")[rows[positions]]
    for part, which in ((positions[pod_scope], range(1)), (positions[~pod_scope], range(1, len(request.containers) + 1))):
        if len(part):
            ok[part] = _fits_one_zone(table, rows[part], request, which, restricted=restricted)
    if request.walk:  # the kubelet enforces the policy: its containers go one after the other
        enforcing = table.view("policy")[rows[positions]] == (_RESTRICTED if restricted else _SINGLE)
        part = positions[~pod_scope & enforcing]
        part = part[ok[part]]
        if len(part):
            ok[part] &= _containers_in_turn(table, rows[part], request, cpu_static[part], mem_static[part], restricted)
    if request.reuse_spans and restricted:
        part = positions[~pod_scope]
        if len(part):
            widest = take_rows(table.zone_capacity_max("cpu"), rows[part])
            for reusable, need in request.reuse_spans:
                ok[part] &= (reusable <= widest) | (need > widest)


def _memory_sets_per_scope(table: NodeTable, rows: np.ndarray, request: AlignedRequest, node_policy: np.ndarray,
                           candidates: np.ndarray, ok: np.ndarray) -> None:
    """:func:`_memory_sets_allow` into ``ok`` on the ``candidates`` rows (with topology data and a
    Static memory manager) whose kubelet enforces restricted and whose memory groups can refuse
    what the other checks pass (:func:`_memory_groups_matter`): the pod's request on pod-scope
    nodes, each container's on container-scope nodes. (A kubelet enforcing single-numa-node forms
    no multi-NUMA group, and its one-zone check already asks for a zone holding the memory.)"""
    at = np.flatnonzero(candidates & (node_policy == _RESTRICTED))
    if len(at):
        at = at[_memory_groups_matter(table, rows[at], request)]
    if not len(at):
        return
    pod_scope = take_rows(table.view("pod_scope"), rows[at])
    for part, which in ((at[pod_scope], {0}), (at[~pod_scope], set(range(1, len(request.stacked_lists))))):
        if len(part):
            ok[part] &= _memory_sets_allow(table, rows[part], request, which)


def _memory_groups_matter(table: NodeTable, rows: np.ndarray, request: AlignedRequest) -> np.ndarray:
    """Per row: a zone belongs to a multi-NUMA group, or a zone holds single-NUMA allocations and some
    memory request of the pod is larger than any zone's allocatable. Elsewhere the one-zone checks
    already ask for what :func:`_memory_sets_allow` does (a zone holding the memory), or wide
    requests are left to the sum over the zones."""
    groups = take_rows(table.memory_groups(), rows)
    matter = (groups & 1).astype(bool)
    held = (groups & 2).astype(bool)
    if held.any():
        names, _ = request.stacked
        wide = np.zeros(len(rows), dtype=bool)
        for _, wants in request.memory_rows:
            for j, need in wants:
                wide |= take_rows(table.zone_capacity_max(names[j]), rows) < need
        matter |= held & wide
    return matter


def _memory_groups_matter_row(values: RowValues, request: AlignedRequest, cols: list[int]) -> bool:
    """One row of :func:`_memory_groups_matter`; ``cols`` the zone column of each of ``request.stacked``'s names."""
    if any(values.zsplit):
        return True
    return any(values.zheld) and any(max(zone[cols[j]] for zone in values.zcap) < need
                                     for _, wants in request.memory_rows for j, need in wants)


def _memory_sets_allow(table: NodeTable, rows: np.ndarray, request: AlignedRequest, which: set[int]) -> np.ndarray:
    """Per row: each request ``which`` of ``request.stacked`` that asks for memory or hugepages has a
    preferred hint left in the node's Static memory manager, as far as the zones tell (upstream
    ``calculateHints``). Its valid sets are one zone outside any multi-NUMA group, or several zones
    of which none holds a single-NUMA allocation (or exactly an existing group); the preferred ones
    are the narrowest valid sets whose allocatable memory could hold the request. So where one
    zone outside any group could hold it (its capacity), one such zone must hold it now;
    otherwise one must, or the zones holding no single-NUMA allocation together.

    A kubelet enforcing restricted admits a container only with a preferred merged hint, which is
    a preferred hint of every provider: the node refuses where the memory manager has none. On
    those nodes this is a necessary condition (the zones before the pod bound what any of its
    containers finds: its admission only adds allocations)."""
    names, _ = request.stacked
    valid = take_rows(table.zone_valid(), rows)
    one_node = valid & ~take_rows(table.zone_split(), rows)
    joinable = valid & ~take_rows(table.zone_held(), rows)
    free: dict[int, np.ndarray] = {}
    capacity: dict[int, np.ndarray] = {}
    ok = np.ones(len(rows), dtype=bool)
    for i, wants in request.memory_rows:
        if i not in which:
            continue
        holds_now = could_hold = one_node  # zones x rows: one-node sets holding the request now, by allocatable
        multi = np.ones(len(rows), dtype=bool)
        for j, need in wants:
            if j not in free:
                free[j] = take_rows(table.zone_free(names[j]), rows)
                capacity[j] = take_rows(table.zone_capacity(names[j]), rows)
            holds_now = holds_now & (free[j] >= need)
            could_hold = could_hold & (capacity[j] >= need)
            multi &= (free[j] * joinable).sum(axis=0) >= need
        ok &= holds_now.any(axis=0) | (multi & ~could_hold.any(axis=0))
    return ok


def _containers_in_turn(table: NodeTable, rows: np.ndarray, request: AlignedRequest, cpu_static: np.ndarray,
                        mem_static: np.ndarray, restricted: bool, lenient: bool = False) -> np.ndarray:
    """Per row of a container-scope kubelet enforcing ``single-numa-node`` (or ``restricted``): the
    containers of ``request.walk``, placed one after the other as the kubelet places them, each
    find a zone.

    Each container is given one zone. Every provider's hints are single zones (under
    ``restricted``: while each of them could hold the container in one zone, its minAffinitySize
    is 1 and only single zones are preferred; a row stops being read at the first container for
    which that is not so), and of equally narrow preferred merged hints the kubelet keeps the
    first, the lowest zone (upstream ``compareHints``). There the CPU manager takes the
    container's CPUs, the memory manager its memory (a single-NUMA hint never names a zone of a
    multi-NUMA group), so the next container finds that zone less what it took. A regular init
    container's CPUs and memory come back to the pod's later containers (upstream ``cpusToReuse``
    and ``initContainersReusableMemory``): they take nothing. While its CPUs are reusable a later
    container's CPU hints must hold their NUMA node, which leaves the init container's zone only
    (:data:`_FORCED`); where that is not certain (:data:`_EITHER`) the container goes there or to
    the lowest zone holding it, and the row stops being read where the two differ.

    Under ``restricted`` one more refusal is certain: the init container's memory is a
    single-NUMA allocation in its zone, so no multi-NUMA memory hint includes that zone, while a
    container forced there needs every CPU hint to include it. A forced container whose memory no
    zone's capacity holds has no preferred merged hint.

    Rows whose CPU manager is not static have no forced zone; resources a row does not align are
    left out. Amounts of 0 are not checked: no provider asks for them.

    ``lenient``: the rows' kubelets enforce no alignment (Topology Manager ``none``, or
    ``best-effort`` without a static CPU manager) and the caller passes no CPU as aligned. The
    Static memory manager still places each container's memory on its best hint, the lowest zone
    holding it while one does (upstream ``findBestHint``), so the walk is the same; where no zone
    holds a container, the row is refused only if no multi-NUMA set could either
    (:func:`_no_memory_set`), and is not read further otherwise.
    """
    names, stacked = request.stacked
    if rowloops.compiled is not None:  # the same walk, row by row in one compiled pass (no _roomy shortcut needed)
        frees = [table.zone_free(name) for name in names]  # may add columns: before reading the zones' validity
        out = np.empty(len(rows), dtype=bool)
        rowloops.compiled.walk_zones(
            table.zone_valid(), table.zone_split(), table.zone_held(), frees,
            [table.zone_capacity(name) for name in names] if restricted else [],
            table.zone_capacity_max("cpu") if restricted and "cpu" in names else None,
            np.ascontiguousarray(cpu_static, dtype=bool), np.ascontiguousarray(mem_static, dtype=bool),
            _codes_of(tuple(request.aligned_by)), stacked, request.steps, names.index("cpu") if "cpu" in names else -1,
            restricted, lenient, out, rows)
        return out
    asked = sorted({j for i, _ in request.walk for j, need in enumerate(request.stacked_lists[i]) if need})
    aligned = {j: np.broadcast_to(aligns(request.aligned_by[j], cpu_static, mem_static), rows.shape) for j in asked}
    kinds = {kind for _, kind in request.walk}
    if not (restricted and _FORCED in kinds) and _roomy(table, rows, request, asked, aligned):
        return np.ones(len(rows), dtype=bool)
    free = {j: take_rows(table.zone_free(names[j]), rows) for j in asked}
    valid = take_rows(table.zone_valid(), rows)  # after the columns exist
    alone = valid & ~take_rows(table.zone_split(), rows)  # the zones a single-NUMA memory hint may name
    memory = [j for j in asked if request.aligned_by[j] == "memory"]
    zones, columns = len(valid), np.arange(len(rows))
    cpu = names.index("cpu") if "cpu" in names else -1
    if restricted:  # what minAffinitySize counts: the same for every step
        capacity = {j: take_rows(table.zone_capacity(names[j]), rows) for j in memory}
        widest_cpu = take_rows(table.zone_capacity_max("cpu"), rows) if cpu >= 0 else None

    def holding(needs: list[int], taken: dict[int, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The zones holding ``needs`` less ``taken`` (zones x rows), and per row whether it aligns any
        of them and any memory."""
        counted = np.zeros(len(rows), dtype=bool)
        with_memory = np.zeros(len(rows), dtype=bool)
        holds = valid
        for j in asked:
            if needs[j]:
                counted |= aligned[j]
                left = free[j] if taken is None else free[j] - taken[j]
                holds = holds & (left >= np.where(aligned[j], needs[j], _ANY_AMOUNT))
                if j in memory:
                    with_memory |= aligned[j]
        return holds & (alone | ~with_memory), counted, with_memory

    taken = {j: np.zeros_like(zone) for j, zone in free.items()}
    held = take_rows(table.zone_held(), rows).copy() if lenient else None  # zones with single-NUMA allocations
    ok, alive = np.ones(len(rows), dtype=bool), np.ones(len(rows), dtype=bool)
    forced = np.full(len(rows), zones, dtype=np.int64)  # the init container's zone where its CPUs force it
    init_memory = np.zeros(len(rows), dtype=bool)  # the init container's memory is in its zone
    for i, kind in request.walk:
        needs = request.stacked_lists[i]
        holds, counted, with_memory = holding(needs, taken)
        live = alive & counted
        if restricted:
            wide_memory = with_memory & ~_memory_fits_one_zone(valid, capacity, needs, aligned)
            if kind == _FORCED:
                ok &= ~(live & (forced < zones) & init_memory & wide_memory)
            wide = wide_memory
            if cpu >= 0 and needs[cpu]:
                wide = wide | (aligned[cpu] & (widest_cpu < needs[cpu]))
            alive &= ~(live & wide)
            live &= alive
        lowest = first_true(holds)
        found = lowest < zones
        if held is not None:
            stuck = live & ~found
            if stuck.any():
                ok &= ~(stuck & _no_memory_set(valid & ~held, {j: free[j] for j in memory}, needs, aligned))
                alive &= ~stuck
                live &= alive
        ok &= ~(live & ~found)
        if held is not None:  # its memory is a single-NUMA allocation: no multi-NUMA set may hold the zone
            at = np.flatnonzero(live & found & with_memory)
            held[lowest[at], at] = True
        if kind == _INIT:
            cpu_here = cpu >= 0 and needs[cpu] > 0 and cpu_static
            forced = np.where(live & found & cpu_here, lowest, zones)
            init_memory = live & found & with_memory
            continue
        zone = lowest
        if kind in (_FORCED, _EITHER):
            pinned = live & (forced < zones)
            in_forced = holds[np.minimum(forced, zones - 1), columns] & pinned
            if kind == _FORCED:
                ok &= ~(pinned & ~in_forced)
                zone = np.where(pinned, forced, lowest)
            else:
                alive &= ~(in_forced & found & (lowest != forced))
                live &= alive
        place = np.flatnonzero(live & (zone < zones))
        for j in asked:
            if needs[j]:
                at = place[aligned[j][place]]
                taken[j][zone[at], at] += needs[j]
    return ok


def _roomy(table: NodeTable, rows: np.ndarray, request: AlignedRequest, asked: list[int],
           aligned: Mapping[int, np.ndarray]) -> bool:
    """Whether, on every row, one zone holds every container of ``request.walk`` at once (each at least
    as much as the init container, and that zone is the init container's): each then finds room
    there and :func:`_containers_in_turn` has nothing to refuse. (Not to be asked where the init
    container's memory can refuse: restricted with a forced container.)

    A container asking for memory the row aligns may be placed only in a zone outside multi-NUMA
    memory groups; the zones are read in place when no zone of the asked rows is in such a group,
    and the walk is left to decide otherwise."""
    split = table.zone_split()
    if split.any() and take_rows(split, rows).any():
        return False
    names, _ = request.stacked
    walk = [request.stacked_lists[i] for i, kind in request.walk if kind != _INIT]
    init = next((request.stacked_lists[i] for i, kind in request.walk if kind == _INIT), None)
    totals = [sum(col) for col in zip(*walk)]

    def first_room(needs: list[int]) -> np.ndarray:
        use = [j for j in asked if needs[j]]
        return rowloops.first_zone_holding(table.zone_valid(), [table.zone_free(names[j]) for j in use],
                                           [np.where(aligned[j], needs[j], _ANY_AMOUNT) for j in use], rows)

    room = first_room(totals if init is None else [max(t, n) for t, n in zip(totals, init)])
    roomy = room < len(table.zone_valid())
    if init is not None:
        roomy &= room == first_room(init)
    return bool(roomy.all())


def _lenient_memory(table: NodeTable, rows: np.ndarray, positions: np.ndarray, request: AlignedRequest,
                    node_policy: np.ndarray, cpu_static: np.ndarray, ok: np.ndarray) -> None:
    """Refuse into ``ok`` at ``positions`` of ``rows`` (nodes with the Static memory manager whose
    kubelet enforces no alignment: Topology Manager ``none`` or ``best-effort``) the rows where the
    memory manager certainly finds no place for a container's memory.

    The memory manager allocates container by container. Where the Topology Manager is ``none``
    (whatever its scope) or at container scope, the first container asking for memory meets the
    zones as they were: where no zone has enough of some memory resource and
    :func:`_no_memory_set`, the kubelet refuses. (A zone of a multi-NUMA group counts as holding
    it: under ``best-effort`` the merged hint may name it alone, and the memory manager then takes
    it.) Where the hint is the memory manager's own
    (Topology Manager ``none``, or no static CPU manager to merge with), the containers' memory
    goes in turn: :func:`_containers_in_turn`, lenient. At pod scope under ``best-effort`` each
    container gets the pod's merged hint, which these rules do not read.
    """
    positions = positions[(node_policy[positions] == 0) | ~take_rows(table.view("pod_scope"), rows[positions])]
    if request.first_memory is None or not len(positions):
        return
    names, _ = request.stacked
    first, wants = request.first_memory
    needs = request.stacked_lists[first]
    # Rows where some memory resource's largest free zone is too small: no zone holds the container.
    # (Where each resource has such a zone, but not one zone for all, the rows are passed: the few-rows form does the same.)
    narrow = np.zeros(len(positions), dtype=bool)
    for j, need in wants:
        narrow |= take_rows(table.zone_max(names[j]), rows[positions]) < need
    if narrow.any():
        part = positions[narrow]
        at = rows[part]
        free = {j: take_rows(table.zone_free(names[j]), at) for j, _ in wants}
        joinable = take_rows(table.zone_valid(), at) & ~take_rows(table.zone_held(), at)
        ok[part] &= ~_no_memory_set(joinable, free, needs, {j: np.ones(len(at), dtype=bool) for j in free})
    if request.walk:
        part = positions[((node_policy[positions] == 0) | ~cpu_static[positions]) & ok[positions]]
        if len(part):
            ok[part] &= _containers_in_turn(table, rows[part], request, np.zeros(len(part), dtype=bool),
                                            np.ones(len(part), dtype=bool), False, lenient=True)


def _no_memory_set(joinable: np.ndarray, free: dict[int, np.ndarray], needs: list[int], aligned: dict[int, np.ndarray]
                   ) -> np.ndarray:
    """Per row: the memory ``needs`` asks (of the resources in ``free``, zones x rows, that the row
    aligns) exceeds the free memory of the ``joinable`` zones together (zones x rows: those no
    single-NUMA allocation holds). Where no single zone holds the memory either, the Static memory
    manager has no valid hint (upstream ``calculateHints``: a multi-NUMA set holds no zone with a
    single-NUMA allocation), and the kubelet refuses the container whatever its Topology Manager
    policy: TopologyAffinityError where it enforces alignment, UnexpectedAdmissionError where the
    memory manager is left to find a set itself (``getDefaultHint``) or to extend or use the
    merged one."""
    short = np.zeros(joinable.shape[1], dtype=bool)
    for j, zone in free.items():
        if needs[j]:
            short |= aligned[j] & ((zone * joinable).sum(axis=0) < needs[j])
    return short


def _memory_fits_one_zone(valid: np.ndarray, capacity: dict[int, np.ndarray], needs: list[int],
                          aligned: Mapping[int, np.ndarray | bool]) -> np.ndarray:
    """Per row: one valid zone's allocatable (``capacity``, per memory resource zones x rows) holds
    every memory resource ``needs`` asks that the row aligns (the memory manager's minAffinitySize
    is then 1)."""
    holds = valid
    for j, zone in capacity.items():
        if needs[j]:
            holds = holds & (zone >= np.where(aligned[j], needs[j], _ANY_AMOUNT))
    return holds.any(axis=0)


def _widths_per_scope(table: NodeTable, rows: np.ndarray, positions: np.ndarray, request: AlignedRequest,
                      cpu_static: np.ndarray, mem_static: np.ndarray, ok: np.ndarray) -> None:
    """Refuse into ``ok`` at ``positions`` of ``rows`` (nodes whose kubelet enforces restricted) the
    rows where some request (the pod's on pod-scope nodes, each container's on container-scope
    nodes) has its CPUs and memory preferred at widths no set has: :func:`_preferred_widths_differ`
    where the zones give the CPUs' width, :func:`_socket_widths_differ` under ``align-by-socket``."""
    names, _ = request.stacked
    memory = [j for j, by in enumerate(request.aligned_by) if by == "memory"]
    if "cpu" not in names or not memory or not len(positions):
        return
    at = rows[positions]
    pod_scope = take_rows(table.view("pod_scope"), at)
    widest_cpu = take_rows(table.zone_capacity_max("cpu"), at)
    _zone_widths(table, at, positions, request, cpu_static, mem_static, ok, pod_scope, widest_cpu)
    _socket_widths(table, at, positions, request, cpu_static, mem_static, ok, pod_scope, widest_cpu)


def _zone_widths(table: NodeTable, at: np.ndarray, positions: np.ndarray, request: AlignedRequest, cpu_static: np.ndarray,
                 mem_static: np.ndarray, ok: np.ndarray, pod_scope: np.ndarray, widest_cpu: np.ndarray) -> None:
    """:func:`_widths_per_scope`'s :func:`_preferred_widths_differ` part. Only rows where some request
    wants more CPUs and more of a memory resource than any one zone could hold are read one by one:
    elsewhere :func:`_narrowest`'s one-zone rule decides."""
    names, _ = request.stacked
    memory = [j for j, by in enumerate(request.aligned_by) if by == "memory"]
    cpu = names.index("cpu")
    # Per request asking for both: the rows one zone's CPUs cannot hold it on (a row without a CPU
    # capacity decides nothing); most pods fit a zone everywhere and stop here.
    wide_cpu = {i: (needs[cpu] > widest_cpu) & (widest_cpu > 0) for i, needs in enumerate(request.stacked_lists)
                if needs[cpu] and any(needs[j] for j in memory)}
    wide_cpu = {i: wide for i, wide in wide_cpu.items() if wide.any()}
    if not wide_cpu:
        return
    widest_memory = {j: take_rows(table.zone_capacity_max(names[j]), at) for j in memory}
    both = np.zeros(len(at), dtype=bool)
    for i, wide in wide_cpu.items():
        needs = request.stacked_lists[i]
        wide &= np.logical_or.reduce([needs[j] > widest_memory[j] for j in memory if needs[j]])
        both |= wide & (pod_scope if i == 0 else ~pod_scope)
    if not both.any():
        return
    cols = [table.zone_column(name) for name in names]
    memory_cols = {cols[j] for j in memory}
    for p in np.flatnonzero(both).tolist():
        position, row = int(positions[p]), int(at[p])
        per_request, _ = request.plan(cols, bool(cpu_static[position]), bool(mem_static[position]))
        scoped = per_request[:1] if pod_scope[p] else per_request[1:]
        if _preferred_widths_differ(table.row_values(row), scoped, cols[cpu], memory_cols):
            ok[position] = False


def _socket_widths(table: NodeTable, at: np.ndarray, positions: np.ndarray, request: AlignedRequest, cpu_static: np.ndarray,
                   mem_static: np.ndarray, ok: np.ndarray, pod_scope: np.ndarray, widest_cpu: np.ndarray) -> None:
    """:func:`_widths_per_scope`'s ``align-by-socket`` part (:func:`_socket_widths_differ`): one zone's
    memory against the CPUs of two zones or more over the rows at once, wider memory row by row."""
    names, _ = request.stacked
    memory = [j for j, by in enumerate(request.aligned_by) if by == "memory"]
    cpu = names.index("cpu")
    widest = take_rows(table.view("cpu_widest"), at)
    # align-by-socket rows: a static CPU manager whose CPUs zone_capacity leaves out
    socket = cpu_static[positions] & mem_static[positions] & (widest > 0) & (widest_cpu == 0)
    if not socket.any():
        return
    valid = take_rows(table.zone_valid(), at)
    for i, needs in enumerate(request.stacked_lists):
        asked = [j for j in memory if needs[j]]
        if not needs[cpu] or not asked:
            continue
        scoped = socket & (pod_scope if i == 0 else ~pod_scope)
        fewest_cpu_zones = -(-needs[cpu] // np.maximum(widest, 1))
        capacity = {j: take_rows(table.zone_capacity(names[j]), at) for j in asked}
        refused = scoped & (fewest_cpu_zones >= 2) & _memory_fits_one_zone(valid, capacity, needs, dict.fromkeys(asked, True))
        ok[positions[refused]] = False
        cols = [table.zone_column(names[j]) for j in asked]
        for p in np.flatnonzero(scoped & ~refused & (fewest_cpu_zones >= 3)).tolist():
            values = table.row_values(int(at[p]))
            if _socket_widths_differ(values, [(table.zone_column("cpu"), needs[cpu]), *zip(cols, (needs[j] for j in asked))],
                                     table.zone_column("cpu"), set(cols)):
                ok[positions[p]] = False


def _socket_widths_differ(values: RowValues, wants: list[tuple[int, int]], cpu_col: int, memory_cols: set[int]) -> bool:
    """Whether, on a node whose kubelet enforces restricted with a static CPU manager under
    ``align-by-socket`` and the Static memory manager, a request (its (zone column, amount) pairs)
    certainly gets no preferred merged hint.

    A merged hint is preferred only when every provider's hint is preferred and all name the same
    NUMA set (upstream ``mergePermutation``). The memory manager prefers the sets exactly as wide
    as the fewest zones whose allocatable holds the memory (``calculateHints``). No CPU hint is
    narrower than the fewest zones whose CPUs, all of them counted, could hold the request
    (``generateCPUTopologyHints``; ``align-by-socket`` prefers wider socket-aligned sets too, never
    narrower ones), and no zone has more CPUs than the node's largest. So when the memory's width is
    below ``ceil(CPUs / largest zone's CPUs)``, no set is preferred by both.
    """
    cpu = [need for col, need in wants if col == cpu_col and need]
    memory = [(col, need) for col, need in wants if col in memory_cols and need]
    if not cpu or not memory or values.cpu_widest <= 0:
        return False
    zones = [capacity for capacity, valid in zip(values.zcap, values.zvalid) if valid]
    memory_width = _fewest_zones(zones, memory)
    return memory_width is not None and memory_width < -(-cpu[0] // values.cpu_widest)


def _preferred_widths_differ(values: RowValues, requests: list[list[tuple[int, int]]], cpu_col: int,
                             memory_cols: set[int]) -> bool:
    """Whether, on a node whose kubelet enforces restricted, some request (its (zone column, amount)
    pairs the node aligns) certainly gets no preferred merged hint because its CPU and memory hints
    are preferred at different widths.

    A merged hint is preferred only when every provider's hint is preferred and all name the same
    NUMA set (upstream ``mergePermutation``). The static CPU manager prefers the sets as few as the
    fewest zones whose CPUs could hold the request (``generateCPUTopologyHints``: the largest zones'
    CPUs, all of them counted); the Static memory manager those as few as the fewest zones whose
    allocatable memory could hold every memory resource asked at once (``calculateHints``). When
    the two widths differ, no set is preferred by both. CPUs without a capacity in the table (no
    static CPU manager, or ``align-by-socket``, which prefers socket-aligned wider sets too) decide
    nothing.
    """
    zones = [capacity for capacity, valid in zip(values.zcap, values.zvalid) if valid]
    for wants in requests:
        cpu = [need for col, need in wants if col == cpu_col and need]
        memory = [(col, need) for col, need in wants if col in memory_cols and need]
        if not cpu or not memory:
            continue
        cpu_width = _fewest_zones(zones, [(cpu_col, cpu[0])])
        memory_width = _fewest_zones(zones, memory)
        if cpu_width is not None and memory_width is not None and cpu_width != memory_width:
            return True
    return False


def _fewest_zones(zones: list[list[int]], wants: list[tuple[int, int]]) -> int | None:
    """The fewest ``zones`` whose capacities together hold every (zone column, amount) of ``wants``;
    None if all of them cannot, or if that would mean trying more than ``_MAX_SETS`` sets. One
    resource: its largest zones first; several: every set, narrowest first."""
    if len(wants) == 1:
        (col, need), total = wants[0], 0
        for count, capacity in enumerate(sorted((zone[col] for zone in zones), reverse=True), 1):
            total += capacity
            if total >= need:
                return count
        return None
    for count in range(1, len(zones) + 1):
        if comb(len(zones), count) > _MAX_SETS:
            return None  # a very wide machine: left to the replica
        for chosen in combinations(zones, count):
            if all(sum(zone[col] for zone in chosen) >= need for col, need in wants):
                return count
    return None


def _reuse_spans(walk: list[tuple[int, int]], names: list[str], stacked: list[list[int]]) -> list[tuple[int, int]]:
    """:attr:`AlignedRequest.reuse_spans` from the walk: per :data:`_FORCED` step, the init
    container's CPUs (millicores) less those of the forced containers before it, and its own.

    On a container-scope kubelet enforcing ``restricted`` with the static CPU manager, CPU hints
    must hold the NUMA node of every reusable CPU (upstream ``generateCPUTopologyHints``). Where
    more CPUs stay reusable than the largest zone has (``zone_capacity_max``: 0 under
    ``align-by-socket``, which prefers wider sets), they span two zones or more, so every hint of a
    container whose CPUs one zone could hold is wider than its ``minAffinitySize`` of 1. None is
    preferred, and the kubelet refuses the pod with a TopologyAffinityError.
    """
    if "cpu" not in names:
        return []
    cpu = names.index("cpu")
    spans, reusable = [], 0
    for i, kind in walk:
        need = stacked[i][cpu]
        if kind == _INIT:
            reusable = need
        elif kind == _FORCED:
            spans.append((reusable, need))
            reusable -= need
    return spans


def _narrowest(aligned_by: list[str], widest: list[np.ndarray], capacity: Callable[[int], np.ndarray], needs: list[int]
               ) -> tuple[list[np.ndarray | None], list[np.ndarray | None]]:
    """Per resource of a request, per row: whether one zone's capacity holds the amount (upstream's
    ``minAffinitySize`` is then 1, and the provider prefers single zones only), and whether the row
    counts any capacity of it at all (else its provider gives no hints, e.g. devices without NUMA
    information); None for a resource not asked for. ``widest`` is per resource the rows' largest
    zone capacity, ``capacity(j)`` resource j's per zone (zones x rows). Memory and hugepages are
    judged together, as the memory manager's hints cover them at once: one zone must hold them all.

    Why this decides ``restricted``: the kubelet marks a merged hint preferred only when every
    provider's hint in it is preferred *and* all are the same NUMA set (upstream
    ``mergePermutation``). Preferred sets are exactly ``minAffinitySize`` wide, so a request with
    one resource of minimal size 1 and another of minimal size 2 or more is never admitted, and
    one whose minimal sizes are all 1 needs one zone that holds all of it.
    """
    single: list[np.ndarray | None] = [None] * len(needs)
    hinted: list[np.ndarray | None] = [None] * len(needs)
    memory = [j for j, by in enumerate(aligned_by) if by == "memory" and needs[j]]
    if len(memory) > 1:
        together = capacity(memory[0]) >= needs[memory[0]]
        for j in memory[1:]:
            together &= capacity(j) >= needs[j]
        counted = np.logical_or.reduce([widest[j] > 0 for j in memory])
        for j in memory:
            single[j], hinted[j] = together.any(axis=0), counted
    for j in range(len(needs)):
        if needs[j] and single[j] is None:
            single[j], hinted[j] = widest[j] >= needs[j], widest[j] > 0
    return single, hinted


def _fits_zones(table: NodeTable, rows: np.ndarray, request: Mapping[str, int], cpu_static: np.ndarray,
                mem_static: np.ndarray) -> np.ndarray:
    """Per row: the node's zones together hold the request."""
    ok = np.ones(len(rows), dtype=bool)
    for name, want in request.items():
        ok &= (table.pick(table.zone_sum(name), rows) >= want) | np.logical_not(aligns(aligning_manager(name), cpu_static, mem_static))
    return ok


@registry.register
class NUMAAlignment:
    """The node's kubelet will admit the pod with the NUMA alignment its policy (or the pod's) demands."""

    name = "NUMAAlignment"
    exact_placement = True

    def __init__(self, args: Mapping[str, Any]) -> None:
        pass

    def pre_filter(self, state: CycleState, pod: Pod) -> Status:
        state[POD_INTENT] = pod_intent(pod)
        aligned_request(state, pod)
        return Status.success()

    def _intent(self, state: CycleState, pod: Pod) -> Any:
        if POD_INTENT not in state:
            self.pre_filter(state, pod)
        return state[POD_INTENT]

    def filter(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        """Exact: the node's replica admits the pod (on trial) and the result meets the pod's policy."""
        intent = self._intent(state, pod)
        if node.model is None:
            return Status.success()  # a node without topology data: nothing to align with
        policy, refusal = effective_policy(intent, node_topology_policy(node.nrt, node.spec.labels)
                                           if node.nrt is not None else _node_policy(node))
        if refusal is not None:
            return refusal.with_plugin(self.name)
        table_ok = self._zones_allow(state, pod, node, policy)
        if table_ok is not None:
            return table_ok
        admission = node.model.admit(pod, trial=True)
        if not admission.admitted:
            return Status.unschedulable(f"kubelet would reject: {admission.reason}: {admission.message}", plugin=self.name)
        try:
            placement = placement_of(node.name, admission, pod)
        finally:
            node.model.unadmit(pod.uid or pod.key)  # a trial: leave no trace
        if policy == "single-numa-node" and any(len(c.numa_nodes) > 1 for c in placement.containers.values()):
            return Status.unschedulable("cannot align the pod on one NUMA node", plugin=self.name)
        return Status.success()

    def _zones_allow(self, state: CycleState, pod: Pod, node: NodeRecord, policy: str) -> Status | None:
        """The necessary condition on the corrected zone availability, for one node."""
        request = aligned_request(state, pod)
        cluster = state.cluster
        if cluster is None or node.name not in cluster.nodes:
            return None
        zones = cluster.zone_available(node.name)
        cpu_static, mem_static = node.model.cpu is not None, node.model.memory is not None  # type: ignore[union-attr]
        wanted = request.containers if node.scope == "container" else [request.pod]
        for want in wanted:
            relevant = {k: v for k, v in want.items() if aligns(aligning_manager(k), cpu_static, mem_static)}
            if policy == "single-numa-node" and relevant and not any(
                    all(zone.get(k, 0) >= v for k, v in relevant.items()) for zone in zones.values()):
                return Status.unschedulable(f"cannot align {', '.join(sorted(relevant))} on one NUMA node", plugin=self.name)
        return None

    def confirm(self, state: CycleState, pod: Pod, node: NodeRecord, placement: Any) -> Status:
        """After Reserve: a pod asking for single-numa-node got it even where the node's kubelet does not insist."""
        intent = self._intent(state, pod)
        if intent.numa_policy == "single-numa-node" and any(len(c.numa_nodes) > 1 for c in placement.containers.values()):
            return Status.unschedulable("cannot align the pod on one NUMA node", plugin=self.name)
        return Status.success()

    def filter_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> tuple[np.ndarray, Any]:
        """Necessary condition on the given rows at once; the chosen node is confirmed exactly at Reserve.

        Rows whose node's policy conflicts with the pod's are refused UnschedulableAndUnresolvable
        (as :meth:`filter` refuses them), with a text naming both policies (:func:`_conflict`)."""
        intent = self._intent(state, pod)
        request = aligned_request(state, pod)
        pod_code = POLICY_CODES.get(intent.numa_policy or "none", 0)
        if not pod_code and not request.pod:
            return np.ones(len(rows), dtype=bool), ""  # nothing to align, no policy of its own (most pods)
        node_policy = table.pick(table.view("policy"), rows)
        topology = table.pick(table.view("topology"), rows)
        ok = np.ones(len(rows), dtype=bool)
        if pod_code:
            ok &= (node_policy == 0) | (node_policy == pod_code) | ~topology
        conflict = ~ok
        if not request.pod:
            return ok, _with_conflicts("", conflict, node_policy, intent)
        effective = np.where(node_policy > 0, node_policy, pod_code) if pod_code else node_policy
        cpu_static, mem_static = table.pick(table.view("cpu_static"), rows), table.pick(table.view("mem_static"), rows)
        _one_zone_per_scope(table, rows, np.flatnonzero(topology & (effective == _SINGLE) & ok), request,
                            cpu_static, mem_static, ok)
        restricted = topology & (effective == _RESTRICTED)
        if restricted.any():
            ok &= ~restricted | _fits_zones(table, rows, request.pod, cpu_static, mem_static)
            # The node's kubelet enforces restricted: see _narrowest.
            enforced = np.flatnonzero(restricted & (node_policy == _RESTRICTED) & ok)
            _one_zone_per_scope(table, rows, enforced, request, cpu_static, mem_static, ok, restricted=True)
            _widths_per_scope(table, rows, enforced[ok[enforced]], request, cpu_static, mem_static, ok)
        if request.memory_rows:
            _memory_sets_per_scope(table, rows, request, node_policy, topology & mem_static & ok, ok)
            _lenient_memory(table, rows, np.flatnonzero(topology & mem_static & (node_policy <= _BEST_EFFORT) & ok), request,
                            node_policy, cpu_static, ok)
        return ok, _with_conflicts(f"cannot align {', '.join(sorted(request.pod))} on the node's NUMA nodes", conflict,
                                   node_policy, intent)

    def filter_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[str | None]:
        """:meth:`filter_all` for a few rows, in plain Python: None where a row passes, else its reason."""
        intent = self._intent(state, pod)
        request = aligned_request(state, pod)
        pod_code = POLICY_CODES.get(intent.numa_policy or "none", 0)
        if not request.pod:
            out: list[str | None] = []
            for row in rows:
                values = table.row_values(row)
                ok = not pod_code or values.policy == 0 or values.policy == pod_code or not values.topology
                out.append(None if ok else _conflict(intent, values.policy))
            return out
        reason = f"cannot align {', '.join(sorted(request.pod))} on the node's NUMA nodes"
        names, _ = request.stacked
        cols = [table.zone_column(name) for name in names]
        memory_cols = {col for col, by in zip(cols, request.aligned_by) if by == "memory"}
        cpu_col = table.zone_column("cpu") if "cpu" in names else -1
        out = []
        for row in rows:
            values = table.row_values(row)
            policy = values.policy
            ok = not pod_code or policy == 0 or policy == pod_code or not values.topology
            if not ok:
                out.append(_conflict(intent, policy))
                continue
            effective = policy if policy > 0 else pod_code
            if ok and values.topology and effective in (_SINGLE, _RESTRICTED):
                per_request, pod_wants = request.plan(cols, values.cpu_static, values.mem_static)
                scoped = per_request[:1] if values.pod_scope else per_request[1:]
                if effective == _SINGLE:
                    ok = all(_one_zone_holds(values, wants) for wants in scoped)
                    if ok and request.walk and not values.pod_scope and policy == _SINGLE:
                        ok = _containers_in_turn_row(values, request, per_request, memory_cols, cpu_col, False)
                else:
                    ok = all(sum(zone[col] for zone in values.zfree) >= want for col, want in pod_wants)
                    if ok and policy == _RESTRICTED:  # the kubelet enforces it: see _narrowest
                        ok = all(_restricted_holds(values, wants, memory_cols) for wants in scoped)
                        ok = ok and not _preferred_widths_differ(values, scoped, cpu_col, memory_cols)
                        if (ok and cpu_col >= 0 and values.cpu_static and values.mem_static
                                and not max(zone[cpu_col] for zone in values.zcap)):  # align-by-socket
                            ok = not any(_socket_widths_differ(values, wants, cpu_col, memory_cols) for wants in scoped)
                        if ok and request.walk and not values.pod_scope:
                            ok = _containers_in_turn_row(values, request, per_request, memory_cols, cpu_col, True)
                        if ok and request.reuse_spans and not values.pod_scope:
                            widest = max(zone[cpu_col] for zone in values.zcap)
                            ok = all(reusable <= widest or need > widest for reusable, need in request.reuse_spans)
            if (ok and values.topology and values.mem_static and policy == _RESTRICTED and request.memory_rows
                    and _memory_groups_matter_row(values, request, cols)):
                which = {0} if values.pod_scope else set(range(1, len(request.stacked_lists)))
                ok = _memory_sets_allow_row(values, request, cols, which)
            if ok and values.topology and values.mem_static and policy <= _BEST_EFFORT and request.memory_rows:
                ok = _lenient_memory_row(values, request, cols, memory_cols, cpu_col)
            out.append(None if ok else reason)
        return out


def _with_conflicts(reason: str, conflict: np.ndarray, node_policy: np.ndarray, intent: PodIntent) -> Any:
    """``reason`` for every refused row, except the rows where the pod's NUMA policy conflicts with the
    node's: those get :func:`_conflict` of their node's policy (UnschedulableAndUnresolvable)."""
    if not conflict.any():
        return reason
    return RowReasons(np.where(conflict, node_policy, 0).astype(np.int64),
                      (reason, *(_conflict(intent, code) for code in range(1, len(_POLICY_NAMES)))))


def _conflict(intent: PodIntent, node_code: int) -> Refusal:
    """Why a node whose Topology Manager enforces policy ``node_code`` cannot take a pod asking for
    another one (the per-node filter's words, without where the node's policy was read)."""
    return Refusal(f"{REASON_POLICY_MISMATCH}: the pod asks for {intent.numa_policy} ({intent.numa_policy_source}), "
                   f"the node enforces {_POLICY_NAMES[node_code]}")


def _restricted_holds(values: RowValues, wants: list[tuple[int, int]], memory_cols: set[int]) -> bool:
    """One row of :func:`_fits_one_zone` with ``restricted``: of ``wants`` (zone column, amount), the
    amounts some zone's capacity holds (memory and hugepages only together) must share one zone,
    and none may be mixed with an amount no zone holds (see :func:`_narrowest`)."""
    def counted(col: int) -> bool:
        return sum(zone[col] for zone in values.zcap) > 0

    memory = [(col, need) for col, need in wants if col in memory_cols and need]
    memory_single = bool(memory) and any(all(zone[col] >= need for col, need in memory) for zone in values.zcap)
    memory_counted = any(counted(col) for col, _ in memory)
    singles, wide = [], False
    for col, need in wants:
        if not need:
            singles.append((col, need))
            continue
        if col in memory_cols:
            single, hinted = memory_single, memory_counted
        else:
            single, hinted = any(zone[col] >= need for zone in values.zcap), counted(col)
        if hinted and single:
            singles.append((col, need))
        elif hinted:
            wide = True
    if wide and any(need for _, need in singles):
        return False
    return _one_zone_holds(values, singles)


def _containers_in_turn_row(values: RowValues, request: AlignedRequest, per_request: list[list[tuple[int, int]]],
                            memory_cols: set[int], cpu_col: int, restricted: bool, lenient: bool = False) -> bool:
    """One row of :func:`_containers_in_turn`; ``per_request`` holds, per row of ``request.stacked``,
    the (zone column, amount) pairs the row aligns."""
    zones = list(zip(values.zfree, values.zvalid, values.zsplit))
    widest_cpu = max(zone[cpu_col] for zone in values.zcap) if cpu_col >= 0 else 0
    taken: dict[tuple[int, int], int] = {}
    held = list(values.zheld)
    forced, init_memory = None, False
    for i, kind in request.walk:
        wants = [(col, need) for col, need in per_request[i] if need]
        if not wants:
            continue
        with_memory = any(col in memory_cols for col, _ in wants)
        if restricted:
            memory = [(col, need) for col, need in wants if col in memory_cols]
            wide_memory = bool(memory) and not any(
                valid and all(capacity[col] >= need for col, need in memory) for capacity, valid in zip(values.zcap, values.zvalid))
            if kind == _FORCED and forced is not None and init_memory and wide_memory:
                return False
            if wide_memory or any(col == cpu_col and need > widest_cpu for col, need in wants):
                return True  # wider than a zone: the row is not read further
        holding = [z for z, (free, valid, split) in enumerate(zones) if valid and not (with_memory and split)
                   and all(free[col] - taken.get((z, col), 0) >= need for col, need in wants)]
        if not holding:
            return lenient and not _no_memory_set_row(values, [(col, need) for col, need in wants if col in memory_cols],
                                                      held)
        zone = holding[0]
        if with_memory:
            held[zone] = True
        if kind == _INIT:
            forced = zone if any(col == cpu_col for col, _ in wants) else None
            init_memory = with_memory
            continue
        if kind != _LOWEST and forced is not None:
            if kind == _FORCED:
                if forced not in holding:
                    return False
                zone = forced
            elif forced in holding and zone != forced:
                return True  # the init container's zone or another: not known
        for col, need in wants:
            taken[zone, col] = taken.get((zone, col), 0) + need
    return True


def _no_memory_set_row(values: RowValues, wants: list[tuple[int, int]], held: list[bool]) -> bool:
    """One row of :func:`_no_memory_set`: some (zone column, amount) of ``wants`` exceeds the free
    memory of the valid zones ``held`` does not mark, together."""
    return any(sum(zone[col] for zone, valid, taken in zip(values.zfree, values.zvalid, held) if valid and not taken) < need
               for col, need in wants)


def _lenient_memory_row(values: RowValues, request: AlignedRequest, cols: list[int], memory_cols: set[int],
                        cpu_col: int) -> bool:
    """One row of :func:`_lenient_memory`; ``cols`` the zone column of each of ``request.stacked``'s names."""
    if request.first_memory is None or (values.pod_scope and values.policy != 0):
        return True
    wants = [(cols[j], need) for j, need in request.first_memory[1]]
    if any(max(zone[col] for zone in values.zfree) < need for col, need in wants) and _no_memory_set_row(values, wants, values.zheld):
        return False
    if request.walk and (values.policy == 0 or not values.cpu_static):
        per_request, _ = request.plan(cols, False, True)
        return _containers_in_turn_row(values, request, per_request, memory_cols, cpu_col, False, lenient=True)
    return True


def _memory_sets_allow_row(values: RowValues, request: AlignedRequest, cols: list[int], which: set[int]) -> bool:
    """One row of :func:`_memory_sets_allow`; ``cols`` the zone column of each of ``request.stacked``'s names."""
    zones = [(zone, capacity, not split, not held) for zone, capacity, valid, split, held
             in zip(values.zfree, values.zcap, values.zvalid, values.zsplit, values.zheld) if valid]
    for i, wants in request.memory_rows:
        if i not in which:
            continue
        wanted = [(cols[j], need) for j, need in wants]
        if any(one and all(zone[col] >= need for col, need in wanted) for zone, _, one, _ in zones):
            continue
        if any(one and all(capacity[col] >= need for col, need in wanted) for _, capacity, one, _ in zones):
            return False
        if not all(sum(zone[col] for zone, _, _, join in zones if join) >= need for col, need in wanted):
            return False
    return True


def _one_zone_holds(values: RowValues, wants: list[tuple[int, int]]) -> bool:
    """One row of :func:`_fits_one_zone`: some valid zone holds every (zone column, amount) of ``wants``."""
    for zone, valid in zip(values.zfree, values.zvalid):
        if not valid:
            continue
        for col, need in wants:
            if zone[col] < need:
                break
        else:
            return True
    return False


def _zones_to_cover(free: list[int], want: int, zones: int) -> int:
    """How many zones, largest first, hold ``want`` together (``zones`` when all of them do not)."""
    covered = 0
    for k, value in enumerate(sorted(free, reverse=True)):
        covered += value
        if covered >= want:
            return k + 1
    return zones


def _node_policy(node: NodeRecord) -> NodePolicy:
    """The policy of a node whose kubelet configuration is known directly (no report)."""
    return NodePolicy(node.policy, node.scope, SOURCE_KUBELET_CONFIG)


@registry.register
class NUMAScore:
    """Prefer the node where the pod's aligned request needs the fewest NUMA zones.

    Score = 100 for one zone, falling linearly to 0 at :data:`_SCORE_ZONES` or more; nodes without topology
    data score 0 for pods with an aligned request (nothing there keeps them aligned), and every
    node scores 0 for pods without one (this plugin then has no opinion).
    """

    name = "NUMAScore"

    def __init__(self, args: Mapping[str, Any]) -> None:
        pass

    def score_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        request = aligned_request(state, pod)
        if not request.pod:
            return np.zeros(len(rows), dtype=np.int64)
        needed = np.ones(len(rows), dtype=np.int64)
        for name, want in request.pod.items():
            wide = np.flatnonzero(table.pick(table.zone_max(name), rows) < want)  # rows where one zone is not enough
            if len(wide):
                ordered = -np.sort(-take_rows(table.zone_free(name), rows[wide]).T, axis=1)
                covered = np.cumsum(ordered, axis=1) >= want
                count = np.where(covered.any(axis=1), covered.argmax(axis=1) + 1, _SCORE_ZONES)
                needed[wide] = np.maximum(needed[wide], count)
        score = (_SCORE_ZONES - np.minimum(needed, _SCORE_ZONES)) * MAX_NODE_SCORE // (_SCORE_ZONES - 1)
        return np.where(table.pick(table.view("topology"), rows), score, 0).astype(np.int64)

    def score_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[int]:
        """:meth:`score_all` for a few rows, in plain Python (the same integer arithmetic)."""
        request = aligned_request(state, pod)
        if not request.pod:
            return [0] * len(rows)
        plan = [(table.zone_column(name), want) for name, want in request.pod.items()]
        zones = _SCORE_ZONES
        out = []
        for row in rows:
            values = table.row_values(row)
            if not values.topology:
                out.append(0)
                continue
            needed = 1
            for col, want in plan:
                for zone in values.zfree:
                    if zone[col] >= want:
                        break
                else:  # no one zone is enough: how many it takes, largest first
                    needed = max(needed, _zones_to_cover([zone[col] for zone in values.zfree], want, zones))
            out.append((zones - min(needed, zones)) * MAX_NODE_SCORE // (zones - 1))
        return out
