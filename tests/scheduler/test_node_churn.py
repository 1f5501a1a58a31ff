"""A cluster whose nodes come and go keeps its memory and its per-pod work bounded by the nodes it has.

Autoscaled pools and spot instances replace nodes all day, each new one under a new name. What
the scheduler keeps per node (the table's rows, the plugins' per-node caches, the GPU states)
must follow the nodes out, or every departed node's kubelet replica stays alive and every pod
pays for rows of nodes long gone.
"""

from __future__ import annotations

import gc
import random
import weakref

import numpy as np

from toposched.scheduler import Cluster, NodeSpec, Scheduler, load_profile
from toposched.scheduler.plugins import node_cache
from toposched.scheduler.plugins.row_memo import RowMemo
from toposched.scheduler.table import _DEAD_ROWS_KEPT, grown, grown_in_place
from toposched.sim.hardware import load_hardware_profile
from toposched.workload import Container, Pod

GI = 1 << 30
LIVE = 20


def _add(cluster: Cluster, name: str, rnd: random.Random) -> None:
    profile = load_hardware_profile(rnd.choice(("gpu-8x", "vm-2numa", "epyc-8numa")))
    plugins = {r: list(d) for r, d in (profile.device_plugins or {}).items()}
    cluster.set_node(NodeSpec(name, labels={"toposched.io/device-enforcement": "kubelet"}), machine=profile.machine,
                     kubelet_config=profile.kubelet, device_plugins=plugins)


def _pod(i: int, rnd: random.Random) -> Pod:
    kind = rnd.choice(("guaranteed", "burstable", "share", "gpu"))
    if kind == "guaranteed":
        limits = {"cpu": rnd.choice((1, 2, 4)) * 1000, "memory": rnd.randint(1, 8) * GI}
        container = Container("c", requests=limits, limits=limits)
    elif kind == "burstable":
        container = Container("c", requests={"cpu": rnd.randint(100, 3000), "memory": rnd.randint(1, 4) * GI})
    elif kind == "share":
        container = Container("c", requests={"cpu": 1000, "memory": GI}, limits={"koordinator.sh/gpu-core": 30,
                                                                             "koordinator.sh/gpu-memory-ratio": 30})
    else:
        container = Container("c", requests={"cpu": 1000, "memory": GI}, limits={"nvidia.com/gpu": 1})
    return Pod(f"p{i}", uid=f"p{i}", containers=(container,), scheduler_name="toposched")


def test_nodes_that_leave_take_their_replicas_and_rows_with_them(monkeypatch):
    """300 nodes come and go through a 20-node cluster while pods are scheduled, bound and deleted:
    the removed nodes' replicas still alive are bounded by the cluster's size, not by how many
    nodes ever left (each per-node cache tolerates departed names up to a quarter of the nodes
    between sweeps; its fixed allowance is set to 0 so the bound shows at this scale), and the
    table never holds more dead rows than it may keep."""
    monkeypatch.setattr(node_cache, "_SLACK", 0)
    rnd = random.Random(7)
    cluster = Cluster()
    for i in range(LIVE):
        _add(cluster, f"first-{i}", rnd)
    scheduler = Scheduler(cluster, load_profile("toposched"))
    removed: list[weakref.ref] = []
    running: list[Pod] = []
    for step in range(300):
        for i in range(3):
            pod = _pod(3 * step + i, rnd)
            if scheduler.schedule(pod, now=float(step)).node is not None:
                scheduler.bound(pod, now=float(step))
                running.append(pod)
        while len(running) > 4 * LIVE:
            cluster.forget(running.pop(rnd.randrange(len(running))), float(step))
        leaving = rnd.choice(sorted(cluster.nodes))
        removed.append(weakref.ref(cluster.nodes[leaving].model))
        running = [p for p in running if cluster.pod_node.get(p.uid) != leaving]
        cluster.remove_node(leaving)
        _add(cluster, f"joined-{step}", rnd)
        table = scheduler.table
        assert table.size - table.live_count <= max(_DEAD_ROWS_KEPT, table.live_count // 4)
    gc.collect()
    alive = sum(ref() is not None for ref in removed)
    assert alive <= 2 * LIVE, f"{alive} of {len(removed)} removed nodes' replicas are still alive"


def _keys_and_values(memo: RowMemo) -> list[tuple[object, list[int] | None]]:
    """Per row its class key and values; a gone node's row (class -1) has neither (its values are never read)."""
    return [(memo.keys[c], v) if c >= 0 else (None, None) for c, v in zip(memo.cls.tolist(), memo.values.tolist())]


def test_a_row_memo_kept_through_joins_equals_one_built_afresh():
    """A RowMemo brought up to date after every join and departure (its arrays grown in place, with
    spare rows) holds, row for row, what a memo reading the table once holds; past the table's
    compaction too."""
    rnd = random.Random(11)
    cluster = Cluster()
    for i in range(LIVE):
        _add(cluster, f"first-{i}", rnd)
    scheduler = Scheduler(cluster, load_profile("toposched"))
    table = scheduler.table

    def classify(record):
        return record.name.split("-")[0]

    def measure(record):
        return (len(record.pods), len(record.name), record.model is not None)

    kept = RowMemo(classify, measure, 3)
    layouts = set()
    for step in range(120):
        pod = _pod(step, rnd)
        if scheduler.schedule(pod, now=float(step)).node is not None:
            scheduler.bound(pod, now=float(step))
        if rnd.random() < 0.6:
            cluster.remove_node(rnd.choice(sorted(cluster.nodes)))
        for j in range(rnd.choice((0, 1, 1, 2))):
            _add(cluster, f"joined-{step}-{j}", rnd)
        table.refresh()
        kept.update(table)
        fresh = RowMemo(classify, measure, 3)
        fresh.update(table)
        assert _keys_and_values(kept) == _keys_and_values(fresh)
        layouts.add(table.layout)
    assert len(layouts) > 1  # the table compacted at least once on the way


def test_grown_in_place_is_grown_with_spare_rows():
    """Growing in place gives the arrays :func:`grown` gives, every time; once there is room the
    result is a wider view of the same memory (no copy), and the rows added are filled."""
    rnd = random.Random(5)
    for axis, shape in ((-1, (4,)), (0, (4, 3)), (-1, (3, 4))):
        plain = np.arange(np.prod(shape), dtype=np.int64).reshape(shape)
        kept = plain.copy()
        shared = 0
        for _ in range(30):
            size = plain.shape[axis] + rnd.choice((1, 1, 2, 5))
            fill = rnd.randrange(-3, 3)
            before = kept
            plain, kept = grown(plain, size, fill, axis), grown_in_place(kept, size, fill, axis)
            assert np.array_equal(plain, kept)
            shared += np.shares_memory(before, kept)
            kept[(slice(None),) * (axis % kept.ndim) + (size - 1,)] = 7  # the holder writes its new last row
            plain[(slice(None),) * (axis % plain.ndim) + (size - 1,)] = 7
        assert shared > 10
    # A view that does not start where its base starts is copied, never widened over other rows.
    kept = grown_in_place(np.arange(8), 9, -1)
    tail = kept[2:]
    wider = grown_in_place(tail, 8, 5)
    assert wider.tolist() == [2, 3, 4, 5, 6, 7, -1, 5]
    assert not np.shares_memory(wider, kept) and kept.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, -1]
