"""The cluster's scheduling decisions, in the shape of the Kubernetes scheduling framework."""

# ruff: noqa: E402  (the heap's arenas are chosen before the scheduler's modules load)
from toposched.scheduler.heap import use_huge_pages

use_huge_pages()  # before the cluster's objects exist: see toposched.scheduler.heap

from toposched.scheduler import plugins  # noqa: F401  (registers the built-in plugins)
from toposched.scheduler.cluster import Cluster, NodeRecord
from toposched.scheduler.framework import CycleState, Profile, Registry, registry
from toposched.scheduler.nodes import NodeSpec, Taint
from toposched.scheduler.placement import ContainerPlacement, Placement
from toposched.scheduler.profile_setup import load_profile
from toposched.scheduler.scheduler import Decision, Scheduler
from toposched.scheduler.status import Code, Status

__all__ = [
    "Cluster",
    "Code",
    "ContainerPlacement",
    "CycleState",
    "Decision",
    "NodeRecord",
    "NodeSpec",
    "Placement",
    "Profile",
    "Registry",
    "Scheduler",
    "Status",
    "Taint",
    "load_profile",
    "registry",
]
