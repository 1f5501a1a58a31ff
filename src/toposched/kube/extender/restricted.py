"""The scheduling cycle restricted to the nodes kube-scheduler sends, with each refusal's status code.

:meth:`Scheduler.schedule` decides over every node and keeps only the counts of its reasons. An
extender must answer for exactly the nodes it is given, tell an ``Unschedulable`` node from an
``UnschedulableAndUnresolvable`` one, and reserve on a node of kube-scheduler's choosing at bind.
It runs the profile's framework runner (``scheduler.runner``): ``advance`` (the Clock plugins),
``pre_filter`` (PreFilter, cached per pod shape) and ``reserve`` (Reserve with the post-Reserve
confirmation), and :meth:`Scheduler.evaluate` over exactly the given rows.

Each refusal's code comes with the batch verdicts: the Scheduler's reason table keeps, per
reason, the code the plugin's per-node ``filter`` would give (a cordoned node, an untolerated
taint, a node affinity mismatch, a NUMA policy conflict are ``UnschedulableAndUnresolvable``), so
no node is judged a second time, node by node. The messages are the Scheduler's own reasons, the
texts :meth:`Scheduler.schedule` counts in its FitError message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from toposched.scheduler import Code, CycleState, Placement, Scheduler, Status
from toposched.workload import Pod

__all__ = ["NOT_IN_VIEW", "Evaluation", "evaluate", "reserve_best", "reserve_on"]

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


def evaluate(scheduler: Scheduler, pod: Pod, nodes: Sequence[str], now: float) -> Evaluation:
    """Filter and score ``pod`` on ``nodes`` only (no other node is looked at, nothing is reserved).

    Nodes the cluster does not know (or knows as gone) are refused as Unschedulable with
    :data:`NOT_IN_VIEW`: the extender's watch may lag behind kube-scheduler's. A PreFilter
    refusal (a malformed annotation is UnschedulableAndUnresolvable) applies to every node. A
    refused node's Status is its reason from the batch verdicts, with that reason's code (a
    plugin's Error is reported as Unschedulable: the extender protocol has no per-node error).
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
    statuses: dict[int, Status] = {}  # per reason index
    for name, v, t in zip(known, verdict.tolist(), total.tolist()):
        if v < 0:
            out.feasible[name] = int(t)
            continue
        status = statuses.get(v)
        if status is None:
            status = statuses[v] = _refusal(scheduler.refusal(v))
        out.refused[name] = status
    return out


def _refusal(status: Status) -> Status:
    """A reason's Status as the extender reports it: UnschedulableAndUnresolvable kept, any other code Unschedulable."""
    code = status.code if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else Code.UNSCHEDULABLE
    return Status(code, status.reasons, "toposched")


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
