"""The scheduling cycle restricted to the nodes kube-scheduler sends, with each refusal's status code.

:meth:`Scheduler.schedule` decides over every node and keeps only the counts of its reasons. An
extender must answer for exactly the nodes it is given, tell an ``Unschedulable`` node from an
``UnschedulableAndUnresolvable`` one, and reserve on a node of kube-scheduler's choosing at bind.
It runs the profile's framework runner (``scheduler.runner``): ``advance`` (the Clock plugins),
``pre_filter`` (PreFilter, cached per pod shape), ``filter_node`` (the per-node filter chain) and
``reserve`` (Reserve with the post-Reserve confirmation), and :meth:`Scheduler.evaluate` over
exactly the given rows.

The vectorised filters say which nodes refuse; why, and whether it is ``Unschedulable`` or
``UnschedulableAndUnresolvable``, is asked of the profile's per-node filters (the reference
semantics), the only place that distinction lives: one vector reason may cover both
(NUMAAlignment's "cannot align ..." also covers a pod whose NUMA policy conflicts with the
node's, which is unresolvable). Their messages are also the precise, kube-scheduler-like ones
("node(s) had untolerated taint {gpu: yes}"). :class:`RefusalCache` keeps these statuses per
pod shape while the nodes do not change.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from toposched.scheduler import Code, CycleState, Placement, Scheduler, Status
from toposched.workload import Pod

__all__ = ["NOT_IN_VIEW", "Evaluation", "RefusalCache", "evaluate", "reserve_best", "reserve_on"]

NOT_IN_VIEW = "node(s) not in toposched's view of the cluster yet"


@dataclass
class Evaluation:
    """One pod against the given nodes: the feasible ones with their total score, the others with why.

    ``state`` is the cycle state PreFilter built (``None`` when PreFilter refused the pod, in
    which case every node carries that refusal).
    """

    pod: Pod
    state: CycleState | None
    feasible: dict[str, int] = field(default_factory=dict)  # node -> total weighted score, in the order given
    refused: dict[str, Status] = field(default_factory=dict)  # node -> its Status (code and reason)


class RefusalCache:
    """Per pod shape, the Status of each node the filters refused, kept until that node changes.

    Running the per-node filters costs about 0.1 ms a node; pods of one shape (a Deployment's
    replicas) reuse the refusals of every node whose table row was not rebuilt since, as
    the Scheduler's own per-shape cache reuses verdicts.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._by_shape: OrderedDict[tuple, tuple[int, dict[str, Status]]] = OrderedDict()

    def statuses(self, scheduler: Scheduler, key: tuple | None) -> dict[str, Status]:
        """The statuses still valid for pods of shape ``key`` (a fresh dict to fill when there are none)."""
        if key is None:
            return {}
        table = scheduler.table
        stamp, known = self._by_shape.pop(key, (table.stamp, {}))
        changed = table.changed_since(stamp)
        if changed is None:
            known = {}
        else:
            for row in changed.tolist():
                known.pop(table.names[row], None)
        self._by_shape[key] = (table.stamp, known)
        while len(self._by_shape) > self.size:
            self._by_shape.popitem(last=False)
        return known


def evaluate(scheduler: Scheduler, pod: Pod, nodes: Sequence[str], now: float,
             cache: RefusalCache | None = None) -> Evaluation:
    """Filter and score ``pod`` on ``nodes`` only (no other node is looked at, nothing is reserved).

    Nodes the cluster does not know (or knows as gone) are refused as Unschedulable with
    :data:`NOT_IN_VIEW`: the extender's watch may lag behind kube-scheduler's. A PreFilter
    refusal (a malformed annotation is UnschedulableAndUnresolvable) applies to every node.
    ``cache`` keeps refusals between calls (see :class:`RefusalCache`).
    """
    scheduler.runner.advance(now)
    key = scheduler.shape(pod)
    state, status = scheduler.runner.pre_filter(pod, key)
    table = scheduler.table
    table.refresh()
    live = table.view("live")
    known: list[str] = []
    out = Evaluation(pod, state if status.is_success else None)
    for name in dict.fromkeys(nodes):  # a name given twice is answered once
        row = table.index.get(name)
        if row is None or not live[row] or name not in scheduler.cluster.nodes:
            out.refused[name] = Status.unschedulable(NOT_IN_VIEW, plugin="toposched")
        else:
            known.append(name)
    if not status.is_success:
        for name in known:
            out.refused[name] = status
        return out
    if not known:
        return out
    rows = np.array([table.index[name] for name in known], dtype=np.int64)
    verdict, total = scheduler.evaluate(state, pod, key, rows)  # scores normalized over the given feasible nodes
    refusals = cache.statuses(scheduler, key) if cache is not None else {}
    for name, v, t in zip(known, verdict.tolist(), total.tolist()):
        if v < 0:
            out.feasible[name] = int(t)
            continue
        status = refusals.get(name)
        if status is None:
            status = refusals[name] = _refusal(scheduler, state, pod, name, scheduler.reasons[v])
        out.refused[name] = status
    return out


def _refusal(scheduler: Scheduler, state: CycleState, pod: Pod, name: str, reason: str) -> Status:
    """The first per-node filter's refusal of ``pod`` on ``name``; the vector ``reason`` if none refuses.

    A plugin's Error is reported as Unschedulable: the extender protocol has no per-node error.
    """
    verdict, plugin = scheduler.runner.filter_node(state, pod, scheduler.cluster.nodes[name])
    if not verdict.is_success:
        code = verdict.code if verdict.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else Code.UNSCHEDULABLE
        return Status(code, verdict.reasons or (reason,), verdict.plugin or plugin)
    return Status.unschedulable(reason, plugin="toposched")


def reserve_best(scheduler: Scheduler, evaluation: Evaluation, now: float) -> tuple[str | None, Placement | None]:
    """Reserve the exact placement on the best feasible node that takes it, as :meth:`Scheduler.schedule` does.

    Feasible nodes are tried by total score, highest first (ties: the order given), at most
    ``scheduler.max_exact_attempts`` of them; a node whose exact placement refuses moves from
    ``evaluation.feasible`` to ``evaluation.refused`` (Unschedulable, with the reason). Returns
    the node and placement now reserved, or ``(None, None)``.
    """
    if evaluation.state is None:
        return None, None
    order = sorted(evaluation.feasible, key=lambda n: -evaluation.feasible[n])  # stable: ties keep the given order
    for name in order[: scheduler.max_exact_attempts]:
        placement = _reserve(scheduler, evaluation, name, now)
        if placement is not None:
            return name, placement
    return None, None


def reserve_on(scheduler: Scheduler, evaluation: Evaluation, node: str, now: float) -> Placement | None:
    """Reserve the exact placement on ``node`` if it is feasible and takes the pod; None otherwise.

    On refusal ``evaluation.refused[node]`` says why.
    """
    if evaluation.state is None or node not in evaluation.feasible:
        return None
    return _reserve(scheduler, evaluation, node, now)


def _reserve(scheduler: Scheduler, evaluation: Evaluation, node: str, now: float) -> Placement | None:
    pod = evaluation.pod
    refused = scheduler.runner.reserve(evaluation.state, pod, node, now)
    if refused is not None:
        del evaluation.feasible[node]
        evaluation.refused[node] = Status.unschedulable(refused, plugin="toposched")
        return None
    return scheduler.cluster.nodes[node].pods[pod.uid or pod.key].placement
