"""NodeTable's per-resource arrays, kept current at changed rows only, equal the arrays computed afresh.

The realistic benchmark's mixes (heterogeneous nodes, GPU servers, every class of pod; the wide
mix adds taints, selectors and kubelet options) are scheduled
with deletions in between; after every cycle each array the batch forms read (``free``,
``allocatable``, ``requested``, ``divisor``, ``zone_free``, ``zone_max``, ``zone_sum``, ``zone_valid``) is compared with the
same quantity computed from the table's full blocks. Arrays are read at random moments, so some
are brought up to date after one change and some after many.
"""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scheduler.test_decisions_identical import _bench
from toposched.scheduler import Scheduler, load_profile
from toposched.scheduler.table import NodeTable, take_rows


def _fresh(table: NodeTable, kind: str, resource: str) -> np.ndarray:
    if kind in ("free", "allocatable", "requested", "divisor"):
        col = table.resource_column(resource)
        alloc, used = table.view("alloc")[col], table.view("used")[col]
        return {"free": alloc - used, "allocatable": alloc, "requested": used,
                "divisor": np.maximum(alloc, 1).astype(np.float64)}[kind]
    zones = table.view("zfree")[table.zone_column(resource)]  # zones x rows
    return {"zone_free": zones, "zone_max": zones.max(axis=0), "zone_sum": zones.sum(axis=0)}[kind]


KINDS = ("free", "allocatable", "requested", "divisor", "zone_free", "zone_max", "zone_sum", "zone_valid")


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**16), read_every=st.integers(1, 9), mix=st.sampled_from(("default", "wide")))
def test_per_resource_arrays_equal_fresh_ones(seed: int, read_every: int, mix: str) -> None:
    bench = _bench("realistic")
    cluster = bench.build_cluster(30, seed=seed, gpu_share=0.3) if mix == "default" else bench.build_cluster_wide(30, seed)
    make_pod = bench.MIXES[mix][1]
    scheduler = Scheduler(cluster, load_profile("toposched"))
    table = scheduler.table
    rnd = random.Random(seed)
    running = []
    resources = ["cpu", "memory", "pods", "hugepages-1Gi", "nvidia.com/gpu"]
    for i in range(150):
        if running and rnd.random() < 0.5:
            cluster.forget(running.pop(rnd.randrange(len(running))), float(i))
        pod = make_pod(i, rnd)
        if scheduler.schedule(pod, now=float(i)).node is not None:
            scheduler.bound(pod, now=float(i))
            running.append(pod)
        if i % read_every:
            continue
        table.refresh()
        for kind in KINDS:
            if kind == "zone_valid":
                assert np.array_equal(table.zone_valid(), table.view("zvalid")), (kind, i)
                continue
            resource = rnd.choice(resources if not kind.startswith("zone") else resources[:2] + resources[3:4])
            got = getattr(table, kind)(resource)
            assert np.array_equal(got, _fresh(table, kind, resource)), (kind, resource, i)
        # The gathers the batch forms make: one zone per row through the flat index, and rows of the
        # table's views (which end at the row count, short of the arrays' capacity) and of an array
        # of exactly the rows.
        rows = np.array(sorted(rnd.sample(range(table.size), rnd.randint(1, table.size))))
        zones = np.array([rnd.randrange(table.max_zones) for _ in rows])
        assert np.array_equal(table.zone_free_at("cpu", zones, rows), table.zone_free("cpu")[zones, rows])
        for name in ("zfree", "free", "zvalid", "live"):
            view = table.view(name)
            assert np.array_equal(table.pick(view, rows), view[..., rows]), name
            assert np.array_equal(take_rows(view.copy(), rows), view[..., rows]), name
