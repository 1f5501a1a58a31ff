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

from toposched.scheduler import Cluster, NodeSpec, Scheduler, load_profile
from toposched.scheduler.plugins import node_cache
from toposched.scheduler.table import _DEAD_ROWS_KEPT
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
