"""Keyed per-plugin answers (KeyedFilter/KeyedScore, kept per key for every row) decide as computing them afresh.

GPU pods of the benchmarks' mix (whole GPUs with HCAs under a PCIe scope, GPU shares) on a
cluster with GPU servers, with deletions between arrivals and nodes replaced: a scheduler whose keyed filters and
scores are switched off, and one that keeps them, give every pod the same node, placement,
status and reasons.
"""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scheduler.test_decisions_identical import _bench
from toposched.scheduler import Cluster, NodeSpec, Scheduler, load_profile
from toposched.scheduler.keyed import KeyedRows
from toposched.scheduler.table import NodeTable


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
        if i % 40 == 20:  # a node is replaced by a new one of its kind: a new row, and one gone
            running = bench.replace_node(cluster, running, rnd, i)
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


def test_a_node_that_joins_is_computed_for_every_key_kept() -> None:
    """A key's values are kept for the rows known; a node that joins adds a row that is computed
    the next time the key is asked about, and only that row."""
    cluster = Cluster()
    for name in ("n0", "n1"):
        cluster.set_node(NodeSpec(name, allocatable={"cpu": 1000}))
    table = NodeTable(cluster)
    table.refresh()
    keyed = KeyedRows(table)
    computed: list[list[int]] = []

    def compute(rows: np.ndarray) -> np.ndarray:
        computed.append(rows.tolist())
        return rows * 10 + 1

    assert keyed.values("key", table.all_rows(), compute).tolist() == [1, 11]
    cluster.set_node(NodeSpec("n2", allocatable={"cpu": 1000}))
    table.refresh()
    assert keyed.values("key", table.all_rows(), compute).tolist() == [1, 11, 21]
    assert computed == [[0, 1], [2]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["all", "some", "change", "join"]), st.integers(0, 2**16)), max_size=40))
def test_kept_values_are_always_the_fresh_ones(steps) -> None:
    """Asked for every row or for some, between nodes that change and nodes that join, every answer
    is what computing the asked rows afresh gives: the shortcut for every row (the changed rows only,
    the kept array itself) never serves a row computed before its node changed."""
    cluster = Cluster()
    for i in range(6):
        cluster.set_node(NodeSpec(f"n{i}", allocatable={"cpu": 1000 + i}))
    table = NodeTable(cluster)
    table.refresh()
    keyed = KeyedRows(table)

    def compute(rows: np.ndarray) -> np.ndarray:
        return np.array([cluster.nodes[table.names[row]].spec.allocatable["cpu"] for row in rows.tolist()], dtype=np.int64)

    for what, seed in steps:
        rnd = random.Random(seed)
        if what == "change":
            name = rnd.choice(table.names)
            cluster.set_node(NodeSpec(name, allocatable={"cpu": rnd.randrange(1, 10**6)}))
        elif what == "join":
            cluster.set_node(NodeSpec(f"j{seed}", allocatable={"cpu": rnd.randrange(1, 10**6)}))
        table.refresh()
        rows = table.all_rows() if what != "some" else np.array(
            sorted(rnd.sample(range(table.size), rnd.randint(1, table.size))), dtype=np.int64)
        got = keyed.values("key", rows, compute)
        assert got.tolist() == compute(rows).tolist()
