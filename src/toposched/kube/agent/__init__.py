"""The node agent (``toposched agent``): publish the node's NodeResourceTopology, enforce placements on cgroups.

See docs/kube/agent.md. :mod:`.kubelet_files` reads the kubelet's configuration and checkpoints,
:mod:`.report` builds the NodeResourceTopology object, :mod:`.cgroups` writes cpusets and
:mod:`.loop` runs them on a node.
"""

from toposched.kube.agent.cgroups import CgroupAction, enforce_placements, plan_enforcement
from toposched.kube.agent.kubelet_files import KubeletFiles, read_kubelet_files
from toposched.kube.agent.loop import FIELD_MANAGER, Agent, AgentStep
from toposched.node_report import node_report

__all__ = [
    "FIELD_MANAGER",
    "Agent",
    "AgentStep",
    "CgroupAction",
    "KubeletFiles",
    "enforce_placements",
    "node_report",
    "plan_enforcement",
    "read_kubelet_files",
]
