"""Keyed per-plugin answers (KeyedFilter/KeyedScore, kept per key for every row) decide as computing them afresh.

GPU pods of the benchmarks' mix (whole GPUs with HCAs under a PCIe scope, GPU shares) on a
cluster with GPU servers, with deletions between arrivals: a scheduler whose keyed filters and
scores are switched off, and one that keeps them, give every pod the same node, placement,
status and reasons.
"""

from __future__ import annotations

import random

from tests.scheduler.test_decisions_identical import _bench
from toposched.scheduler import Scheduler, load_profile


def _decisions(keyed: bool) -> list[tuple]:
    bench = _bench("realistic")
    cluster = bench.build_cluster(40, seed=3, gpu_share=0.4)
    scheduler = Scheduler(cluster, load_profile("toposched"))
    if not keyed:
        runner = scheduler.runner
        runner.keyed_filter = [False] * len(runner.keyed_filter)
        runner.keyed_score = [False] * len(runner.keyed_score)
    rnd = random.Random(5)
    running, out = [], []
    for i in range(400):
        if running and rnd.random() < 0.4:
            cluster.forget(running.pop(rnd.randrange(len(running))), float(i))
        pod = bench.make_pod(i, rnd)
        decision = scheduler.schedule(pod, now=float(i))
        out.append((decision.node, decision.placement, decision.status, decision.reasons))
        if decision.node is not None:
            scheduler.bound(pod, now=float(i))
            running.append(pod)
    return out


def test_keyed_answers_decide_as_fresh_ones() -> None:
    assert _decisions(keyed=True) == _decisions(keyed=False)
    assert any(flag for flag in Scheduler(_bench("realistic").build_cluster(2, seed=3), load_profile("toposched"))
               .runner.keyed_filter)
