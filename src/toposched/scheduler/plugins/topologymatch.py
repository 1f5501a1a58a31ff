"""NodeResourceTopologyMatch as a plugin: scheduler-plugins' semantics over the node's report.

The verdicts are :func:`~toposched.scheduler.nrt_match.nrt_filter` and
:func:`~toposched.scheduler.nrt_match_score.nrt_score`, applied to the node's last published
NodeResourceTopology exactly as scheduler-plugins sees it (a report that may lag what is
running). It has no vector form: nodes are evaluated one by one, and only again once their
row changed (a new report, a pod placed or gone).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toposched.scheduler.cluster import NodeRecord
from toposched.scheduler.framework import CycleState, registry
from toposched.scheduler.nrt_match import nrt_filter
from toposched.scheduler.nrt_match_args import NodeResourceTopologyMatchArgs
from toposched.scheduler.nrt_match_score import nrt_score
from toposched.scheduler.status import Status
from toposched.scheduler.table import NodeTable
from toposched.workload import Pod

__all__ = ["NodeResourceTopologyMatch"]


@registry.register
class NodeResourceTopologyMatch:
    """scheduler-plugins' NodeResourceTopologyMatch (Filter and Score)."""

    name = "NodeResourceTopologyMatch"
    # Its answer for a node reads only that node's report and allocatable, and a new report
    # refreshes the node's row: the scheduler may keep answers per pod shape between changes.
    row_local = True

    def __init__(self, args: Mapping[str, Any] | NodeResourceTopologyMatchArgs | None) -> None:
        self.args = args if isinstance(args, NodeResourceTopologyMatchArgs) else NodeResourceTopologyMatchArgs.from_dict(dict(args or {}))
        self.view = lambda node: node.nrt  # the NRT the plugin sees for a node (a cache may replace it)

    def filter(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        allocatable = node.spec.allocatable or (node.model.allocatable if node.model else None)
        return nrt_filter(pod, self.view(node), node_allocatable=allocatable).with_plugin(self.name)

    def score(self, state: CycleState, pod: Pod, node: NodeRecord, table: NodeTable) -> int:
        value, status = nrt_score(pod, self.view(node), args=self.args)
        return value if status.is_success else 0
