"""NUMAAlignment's three forms asked about one node, for tests that hold them to each other."""

from __future__ import annotations

import numpy as np

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.framework import CycleState, registry
from toposched.scheduler.profile_setup import load_profile
from toposched.scheduler.scheduler import Scheduler
from toposched.workload import Pod


def numa_verdicts(cluster: Cluster, pod: Pod, node: str = "n") -> tuple[bool, bool, bool]:
    """Whether NUMAAlignment passes ``pod`` on ``node``: (batch filter, few-rows filter, exact per-node filter)."""
    scheduler = Scheduler(cluster, load_profile("toposched"))
    table = scheduler.table
    table.refresh()
    plugin = registry.create("NUMAAlignment")
    rows = np.array([table.index[node]])
    batch, _ = plugin.filter_all(CycleState(cluster=cluster), pod, table, rows)
    few = plugin.filter_few(CycleState(cluster=cluster), pod, table, rows.tolist())
    exact = plugin.filter(CycleState(cluster=cluster), pod, cluster.nodes[node])
    return bool(batch[0]), few[0] is None, exact.is_success
