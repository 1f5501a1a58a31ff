"""kube-scheduler's node plugins toposched needs, with upstream's reasons and scoring.

NodeUnschedulable, TaintToleration, NodeAffinity (``nodeSelector``) and NodeResourcesFit
(Filter; Score with LeastAllocated / MostAllocated / BalancedAllocation). Each has a per-node
form (the reference) and a vector form over the :class:`NodeTable` that gives the same verdict,
and a plain-Python form for a few rows (``filter_few``/``score_few``) that gives exactly the
vector form's verdicts, reasons and scores without NumPy's fixed cost per call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from toposched.errors import InputError
from toposched.scheduler import rowloops
from toposched.scheduler.cluster import NodeRecord
from toposched.scheduler.framework import MAX_NODE_SCORE, CycleState, RowReasons, StateKey, registry
from toposched.scheduler.nodes import untolerated_among, untolerated_taint
from toposched.scheduler.plugins.rows import filter_rows
from toposched.scheduler.status import Refusal, Status
from toposched.scheduler.table import DEFAULT_MAX_PODS, NodeTable
from toposched.workload import Pod

__all__ = ["NodeAffinity", "NodeResourcesFit", "NodeUnschedulable", "TaintToleration"]

# NodeResourcesFit's PreFilter: the pod's effective requests above zero.
_FIT_REQUESTS: StateKey[dict[str, int]] = StateKey("requests", "NodeResourcesFit")

# Upstream's defaults for a container that requests nothing, used only when scoring.
_NON_ZERO = {"cpu": 100, "memory": 200 * 2**20}


@registry.register
class NodeUnschedulable:
    """Cordoned nodes (``spec.unschedulable``) and nodes whose topology report is unusable take no pods."""

    name = "NodeUnschedulable"
    reason = "node(s) were unschedulable"
    refusal = Refusal(reason)  # the batch and few-rows reason: UnschedulableAndUnresolvable, as ``filter`` says

    def __init__(self, args: Mapping[str, Any]) -> None:
        pass

    def filter(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        if node.broken:
            return Status.unresolvable(f"node's topology report is unusable: {node.broken}", plugin=self.name)
        if node.spec.unschedulable:
            return Status.unresolvable(self.reason, plugin=self.name)
        return Status.success()

    def filter_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> tuple[np.ndarray, str]:
        return table.pick(table.view("schedulable"), rows) & table.pick(table.view("live"), rows), self.refusal

    def filter_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[str | None]:
        """:meth:`filter_all` for a few rows: None where a row passes, else its reason."""
        out: list[str | None] = []
        for row in rows:
            values = table.row_values(row)
            out.append(None if values.schedulable and values.live else self.refusal)
        return out


@registry.register
class TaintToleration:
    """A node with a NoSchedule/NoExecute taint the pod does not tolerate is filtered out."""

    name = "TaintToleration"
    reason = "node(s) had untolerated taint"
    refusal = Refusal(reason)  # the batch and few-rows reason: UnschedulableAndUnresolvable, as ``filter`` says

    def __init__(self, args: Mapping[str, Any]) -> None:
        pass

    def filter(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        taint = untolerated_taint(node.spec, pod)
        if taint is None:
            return Status.success()
        return Status.unresolvable(f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}", plugin=self.name)

    def filter_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> tuple[np.ndarray, str]:
        """Judged once per distinct set of taints among the nodes (:attr:`NodeTable.taint_sets`), not per node."""
        if len(table.taint_sets) == 1:  # no node has ever had a taint that filters
            return np.ones(len(rows), dtype=bool), self.refusal
        return self._tolerated(pod, table)[table.pick(table.view("taint_class"), rows)], self.refusal

    def filter_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[str | None]:
        """:meth:`filter_all` for a few rows: None where a row passes, else its reason."""
        classes = table.view("taint_class")
        if len(table.taint_sets) == 1 or not classes[rows].any():
            return [None] * len(rows)
        tolerated = self._tolerated(pod, table)
        return [None if tolerated[classes[row]] else self.refusal for row in rows]

    @staticmethod
    def _tolerated(pod: Pod, table: NodeTable) -> np.ndarray:
        """Per taint set of the table, whether the pod tolerates every taint in it."""
        sets = table.taint_sets
        return np.fromiter((untolerated_among(taints, pod) is None for taints in sets), dtype=bool, count=len(sets))


@registry.register
class NodeAffinity:
    """The pod's ``nodeSelector`` must match the node's labels."""

    name = "NodeAffinity"
    reason = "node(s) didn't match Pod's node affinity/selector"
    refusal = Refusal(reason)  # the batch and few-rows reason: UnschedulableAndUnresolvable, as ``filter`` says

    def __init__(self, args: Mapping[str, Any]) -> None:
        pass

    def filter(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        if all(node.spec.labels.get(k) == v for k, v in pod.node_selector.items()):
            return Status.success()
        return Status.unresolvable(self.reason, plugin=self.name)

    def filter_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> tuple[np.ndarray, str]:
        """Compares whole label columns (:meth:`NodeTable.labels_match`), no pass over the nodes."""
        if not pod.node_selector:
            return np.ones(len(rows), dtype=bool), self.refusal
        return table.pick(table.labels_match(pod.node_selector), rows), self.refusal

    def filter_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[str | None]:
        """:meth:`filter_all` for a few rows: None where a row passes, else its reason."""
        if not pod.node_selector:
            return [None] * len(rows)
        return [None if self._matches(pod, table, row) else self.refusal for row in rows]

    @staticmethod
    def _matches(pod: Pod, table: NodeTable, row: int) -> bool:
        record = table.cluster.nodes.get(table.names[row])
        return record is not None and all(record.spec.labels.get(k) == v for k, v in pod.node_selector.items())


STRATEGIES = ("LeastAllocated", "MostAllocated", "BalancedAllocation")


@registry.register
class NodeResourcesFit:
    """Requests against allocatable (Filter) and how full the node would be (Score).

    Args (upstream NodeResourcesFitArgs): ``scoringStrategy: {type, resources: [{name, weight}]}``;
    type LeastAllocated (default, spreads), MostAllocated (packs) or BalancedAllocation.
    """

    name = "NodeResourcesFit"

    def __init__(self, args: Mapping[str, Any] | Any) -> None:
        if hasattr(args, "scoring_strategy"):  # NodeResourcesFitArgs from a profile file
            strategy_args = args.scoring_strategy
            args = {"scoringStrategy": {"type": strategy_args.type,
                                        "resources": [{"name": r.name, "weight": r.weight} for r in strategy_args.resources]}}
        strategy = (args or {}).get("scoringStrategy") or {}
        self.strategy = strategy.get("type", "LeastAllocated")
        if self.strategy not in STRATEGIES:
            raise InputError(f"scoring strategy {self.strategy!r} is not supported; toposched scores with "
                             f"{', '.join(STRATEGIES)}", field="NodeResourcesFit.scoringStrategy.type")
        resources = strategy.get("resources") or [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
        self.weights = {}
        for i, r in enumerate(resources):
            weight = r.get("weight", 1)
            if not isinstance(weight, int) or weight <= 0:
                raise InputError(f"weight {weight!r} must be a positive integer",
                                 field=f"NodeResourcesFit.scoringStrategy.resources[{i}].weight")
            self.weights[str(r["name"])] = weight

    def pre_filter(self, state: CycleState, pod: Pod) -> Status:
        requests = pod.effective_requests()
        state[_FIT_REQUESTS] = {k: v for k, v in requests.items() if v > 0}
        return Status.success()

    def _requests(self, state: CycleState, pod: Pod) -> dict[str, int]:
        if _FIT_REQUESTS not in state:
            self.pre_filter(state, pod)
        return state[_FIT_REQUESTS]

    def filter(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        allocatable = node.spec.allocatable or (node.model.allocatable if node.model else {})
        reasons = []
        if node.requested.get("pods", 0) + 1 > allocatable.get("pods", DEFAULT_MAX_PODS):
            reasons.append("Too many pods")
        for resource, want in sorted(self._requests(state, pod).items()):
            if node.requested.get(resource, 0) + want > allocatable.get(resource, 0):
                reasons.append(f"Insufficient {resource}")
        return Status.unschedulable(*reasons, plugin=self.name) if reasons else Status.success()

    def filter_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> tuple[np.ndarray, Any]:
        """The Filter for every row; the reason is per row ("Insufficient cpu, memory", "Too many pods")."""
        requests = self._requests(state, pod)
        names = list(requests)
        if len(names) >= 63:  # more than an int64 has bits for (no real pod): the per-node filter words each row
            ok = np.ones(len(rows), dtype=bool)
            return ok, filter_rows(self, state, pod, table, rows, np.arange(len(rows)), ok)
        # Per row, the resources it is short of (as the per-node filter names them), one bit each, and
        # a last bit for the pod slot; coded into a few texts over the refused rows only.
        free = [table.free(name) for name in (*names, "pods")]
        pattern = rowloops.short_bits(free, [*requests.values(), 1], None if rows is table.all_rows() else rows)
        ok = pattern == 0
        if ok.all():
            return ok, ""
        refused = np.flatnonzero(~ok)
        shorts = pattern.take(refused)
        codes = np.zeros(len(ok), dtype=np.int64)  # code 0: the row passes
        if len(names) < 15:  # few patterns possible: count them
            present = np.flatnonzero(np.bincount(shorts)[1:]) + 1
            lut = np.zeros(int(present[-1]) + 1, dtype=np.int64)
            lut[present] = np.arange(1, len(present) + 1)
            codes[refused] = lut.take(shorts)
        else:
            present = np.unique(shorts)
            codes[refused] = np.searchsorted(present, shorts) + 1
        texts = [""]
        for bits in present.tolist():
            lacking_names = sorted(name for j, name in enumerate(names) if bits >> j & 1)  # the pod slot: bit len(names)
            texts.append("Insufficient " + ", ".join(lacking_names) if lacking_names else "Too many pods")
        return ok, RowReasons(codes, texts)

    def filter_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[str | None]:
        """:meth:`filter_all` for a few rows: None where a row passes, else its reason."""
        requests = self._requests(state, pod)
        pods = table.resource_column("pods")
        wanted = [(name, table.resource_column(name), want) for name, want in requests.items()]
        out: list[str | None] = []
        for row in rows:
            values = table.row_values(row)
            used, alloc = values.used, values.alloc
            short = [name for name, col, want in wanted if used[col] + want > alloc[col]]
            if short:
                out.append("Insufficient " + ", ".join(sorted(short)))
            else:
                out.append("Too many pods" if used[pods] + 1 > alloc[pods] else None)
        return out

    def score_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """Upstream's scorers, in its integer arithmetic.

        Per resource: LeastAllocated ``(capacity - requested) * 100 // capacity`` (0 when
        over capacity), MostAllocated ``min(requested, capacity) * 100 // capacity``; then the
        weighted mean, integer-divided. BalancedAllocation: ``(1 - std of the requested
        fractions) * 100``. ``requested`` is what the node's pods request plus the pod's request
        (a pod without a cpu/memory request counts 100m / 200Mi, as upstream's non-zero default).
        """
        requests = self._requests(state, pod)
        wants = {r: requests.get(r, 0) or _NON_ZERO.get(r, 0) for r in self.weights}
        if self.strategy == "BalancedAllocation":
            alloc = np.stack([table.pick(table.allocatable(r), rows) for r in self.weights], axis=1)
            requested = np.stack([table.pick(table.requested(r), rows) + want for r, want in wants.items()], axis=1)
            frac = np.where(alloc > 0, np.minimum(requested / np.maximum(alloc, 1), 1.0), 1.0)
            return ((1.0 - frac.std(axis=1)) * MAX_NODE_SCORE).astype(np.int64)
        most = self.strategy == "MostAllocated"
        if rowloops.compiled is not None and wants:  # the compiled loop reads the asked rows in place
            values = [table.requested(r) if most else table.free(r) for r in wants]
            allocs = [table.allocatable(r) for r in wants]
            out = np.empty(len(rows), dtype=np.int64)
            rowloops.compiled.fit_score(most, values, allocs, list(wants.values()), list(self.weights.values()), out,
                                        None if rows is table.all_rows() else rows)
            return out
        # When most rows are asked, whole arrays (views: no gathers) and the asked rows picked once at the end.
        whole = 2 * len(rows) >= table.size
        at = table.all_rows() if whole else rows
        total: np.ndarray | None = None
        for (r, want), weight in zip(wants.items(), self.weights.values()):
            alloc = table.allocatable(r)
            # Both numerators are at most 100 times the divisor, max(alloc, 1), on every row of the table.
            largest = max(int(alloc.max()) if len(alloc) else 0, 1) * MAX_NODE_SCORE
            if most:
                per = table.pick(table.requested(r), at) + want
                np.minimum(per, table.pick(alloc, at), out=per)
            else:
                # (alloc - requested) * 100 // alloc: free minus the pod's request (free <= 0 where alloc <= 0).
                per = table.pick(table.free(r), at) - want
            # 0 when over capacity or nothing allocatable (MostAllocated: min(requested, alloc) <= alloc <= 0).
            np.maximum(per, 0, out=per)
            per *= MAX_NODE_SCORE
            exact = largest < _EXACT_IN_FLOAT  # the float divisor is exact; beyond, integers divide
            divisor = table.pick(table.divisor(r), at) if exact else np.maximum(table.pick(alloc, at), 1)
            per = _floor_divide(per, divisor, largest)
            if weight != 1:
                per *= weight
            if total is None:
                total = per
            else:
                total += per
        if total is None:
            return np.zeros(len(rows), dtype=np.int64)
        total //= sum(self.weights.values())
        return table.pick(total, rows) if whole else total

    def score_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[int]:
        """:meth:`score_all` for a few rows, in the same integer arithmetic (BalancedAllocation's
        floating-point deviation is left to NumPy, so it rounds as :meth:`score_all` does)."""
        if self.strategy == "BalancedAllocation":
            return self.score_all(state, pod, table, np.array(rows, dtype=np.int64)).tolist()
        requests = self._requests(state, pod)
        plan = [(table.resource_column(r), requests.get(r, 0) or _NON_ZERO.get(r, 0), weight)
                for r, weight in self.weights.items()]
        most = self.strategy == "MostAllocated"
        total_weight = sum(self.weights.values())
        out = []
        for row in rows:
            values = table.row_values(row)
            total = 0
            for col, want, weight in plan:
                alloc = values.alloc[col]
                requested = values.used[col] + want
                if alloc <= 0:
                    continue
                if most:
                    total += min(requested, alloc) * MAX_NODE_SCORE // alloc * weight
                elif requested <= alloc:
                    total += (alloc - requested) * MAX_NODE_SCORE // alloc * weight
            out.append(total // total_weight)
        return out


_EXACT_IN_FLOAT = 2**52


def _floor_divide(numerator: np.ndarray, denominator: np.ndarray, largest: int) -> np.ndarray:
    """``numerator // denominator`` for non-negative integers over positive ones, elementwise, exactly;
    ``largest`` bounds both arrays' values.

    NumPy divides int64 arrays element by element (50 µs over 5,000 rows); float64 division is
    vectorised. Below 2**52 both convert exactly, and with n = q*d + r (0 < r < d) the quotient's
    rounding error, under (q + 1) / 2**53, is less than its distance 1/d to q + 1 (d * (q + 1) <= n + d
    < 2**53): the floor of the rounded quotient is q. Larger values keep the integer division."""
    if largest >= _EXACT_IN_FLOAT:
        return numerator // denominator
    quotient = numerator.astype(np.float64)
    quotient /= denominator
    return np.floor(quotient, out=quotient).astype(np.int64)


class NodeResourcesBalancedAllocation(NodeResourcesFit):
    """Score only: how evenly the pod leaves cpu and memory used (upstream's plugin of that name)."""

    name = "NodeResourcesBalancedAllocation"

    def __init__(self, args: Mapping[str, Any] | Any) -> None:
        if hasattr(args, "resources"):
            args = {"resources": [{"name": r.name, "weight": r.weight} for r in args.resources]}
        resources = (args or {}).get("resources") or [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
        super().__init__({"scoringStrategy": {"type": "BalancedAllocation", "resources": resources}})

    filter = None  # type: ignore[assignment]
    filter_all = None  # type: ignore[assignment]
    filter_few = None  # type: ignore[assignment]


registry.register(NodeResourcesBalancedAllocation)
