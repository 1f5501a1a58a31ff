"""The extender's restricted cycle agrees with the Scheduler's own: explain's verdicts and schedule's choice.

For every node given, the feasible set, the totals and each refusal's code must be what
:meth:`Scheduler.explain` reports node by node (its per-node filter chain); each refusal's
message is the reason the Scheduler's batch verdicts give that node (the text
:meth:`Scheduler.schedule` counts); and the node and exact placement reserved must be what
:meth:`Scheduler.schedule` picks when given every node. The codes come from the batch verdicts:
the per-node filter chain is never run.
"""

import numpy as np
import pytest

from tests.kube.extender.scenario import ANNOTATIONS, PENDING, build, pod_object, uid
from toposched.kube.extender.restricted import evaluate, reserve_best
from toposched.scheduler import Code
from toposched.workload import Pod

NODES = ["a", "b", "c", "f", "g", "h"]


def batch_reason(pod: Pod, node: str) -> tuple[str, Code] | None:
    """A fresh Scheduler's batch verdict for ``pod`` on ``node`` alone (no per-shape cache): its reason and code."""
    scheduler = build().scheduler
    state, status = scheduler.runner.pre_filter(pod)
    assert status.is_success
    scheduler.table.refresh()
    verdict, _ = scheduler.evaluate(state, pod, None, np.array([scheduler.table.index[node]]))
    if verdict[0] < 0:
        return None
    refusal = scheduler.refusal(int(verdict[0]))
    return refusal.message, refusal.code


@pytest.mark.parametrize("index", range(len(PENDING)))
def test_restricted_evaluation_matches_explain_and_schedule(index, monkeypatch):
    name, cpus = PENDING[index]
    pod = Pod.from_dict(pod_object(name, cpus, uid=uid(index + 1), annotations=ANNOTATIONS.get(name)))
    world = build()
    report = {n["name"]: n for n in world.scheduler.explain(pod)["nodes"]}

    def no_per_node_pass(*args, **kwargs):
        raise AssertionError("the restricted cycle ran the per-node filter chain")

    monkeypatch.setattr(world.scheduler.runner, "filter_node", no_per_node_pass)
    evaluation = evaluate(world.scheduler, pod, NODES, 0.0)
    assert set(evaluation.feasible) == {n for n, r in report.items() if r["filter"]["code"] == "Success"}
    assert evaluation.feasible == {n: report[n]["score"] for n in evaluation.feasible}
    assert {n: s.code.label for n, s in evaluation.refused.items()} == {
        n: r["filter"]["code"] for n, r in report.items() if r["filter"]["code"] != "Success"}
    for node, status in evaluation.refused.items():
        assert (status.message, status.code) == batch_reason(pod, node)
    node, placement = reserve_best(world.scheduler, evaluation, 0.0)
    decision = build().scheduler.schedule(pod, now=0.0)
    assert (node, placement) == (decision.node, decision.placement)


def test_a_subset_of_nodes_is_all_that_is_looked_at():
    world = build()
    pod = Pod.from_dict(pod_object("web-0", 4, uid=uid(1)))
    evaluation = evaluate(world.scheduler, pod, ["b", "a"], 0.0)
    assert set(evaluation.feasible) | set(evaluation.refused) == {"a", "b"}
    node, _ = reserve_best(world.scheduler, evaluation, 0.0)
    assert node == "a"  # f would score higher, but it was not given
