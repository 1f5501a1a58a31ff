"""The extender's restricted cycle agrees with the Scheduler's own: explain's verdicts and schedule's choice.

For every node given, the feasible set, the totals, and each refusal's code and message must be
what :meth:`Scheduler.explain` reports node by node, and the node and exact placement reserved
must be what :meth:`Scheduler.schedule` picks when given every node.
"""

import pytest

from tests.kube.extender.scenario import ANNOTATIONS, PENDING, build, pod_object, uid
from toposched.kube.extender.restricted import RefusalCache, evaluate, reserve_best
from toposched.workload import Pod

NODES = ["a", "b", "c", "f", "g", "h"]


@pytest.mark.parametrize("index", range(len(PENDING)))
def test_restricted_evaluation_matches_explain_and_schedule(index):
    name, cpus = PENDING[index]
    pod = Pod.from_dict(pod_object(name, cpus, uid=uid(index + 1), annotations=ANNOTATIONS.get(name)))
    world = build()
    report = {n["name"]: n for n in world.scheduler.explain(pod)["nodes"]}
    evaluation = evaluate(world.scheduler, pod, NODES, 0.0, RefusalCache())
    assert set(evaluation.feasible) == {n for n, r in report.items() if r["filter"]["code"] == "Success"}
    assert evaluation.feasible == {n: report[n]["score"] for n in evaluation.feasible}
    assert {n: (s.code.label, s.message) for n, s in evaluation.refused.items()} == {
        n: (r["filter"]["code"], r["filter"]["message"]) for n, r in report.items() if r["filter"]["code"] != "Success"}
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
