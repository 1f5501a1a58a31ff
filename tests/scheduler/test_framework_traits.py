"""The framework's traits (RowLocal, ExactPlacement) are Protocols tested by ``implements``, like the extension points."""

from __future__ import annotations

from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.framework import ExactPlacement, Profile, RowLocal, implements
from toposched.scheduler.profile_setup import load_profile
from toposched.scheduler.status import Status
from toposched.workload import Container, Pod


class PerNode:
    """A filter with only a per-node form: its answers may read more than the node (not row-local)."""

    name = "PerNode"

    def filter(self, state, pod, node) -> Status:
        return Status.success()


class PerNodeRowLocal(PerNode):
    name = "PerNodeRowLocal"
    row_local = True


class OptedOut(PerNodeRowLocal):
    name = "OptedOut"
    row_local = False  # type: ignore[assignment]


class Exact(PerNode):
    name = "Exact"
    exact_placement = True


def test_a_trait_counts_only_when_its_flag_is_true():
    assert implements(PerNodeRowLocal(), RowLocal)
    assert not implements(PerNode(), RowLocal)
    assert not implements(OptedOut(), RowLocal)
    assert implements(Exact(), ExactPlacement) and not implements(PerNode(), ExactPlacement)


def scheduler(*filters) -> Scheduler:
    cluster = Cluster()
    cluster.set_node(NodeSpec("n", allocatable={"cpu": 4000, "memory": 2**30, "pods": 110}))
    profile = Profile("t", filters=list(filters))
    return Scheduler(cluster, profile)


def test_pod_shapes_are_cached_only_when_every_plugin_without_a_batch_form_is_row_local():
    pod = Pod("p", uid="p", containers=(Container("c", requests={"cpu": 1000}),))
    assert scheduler(PerNodeRowLocal()).shape(pod) is not None
    assert scheduler(PerNode()).shape(pod) is None
    assert scheduler(OptedOut()).shape(pod) is None
    assert scheduler(PerNodeRowLocal()).schedule(pod, now=0.0).node == "n"


def test_a_profile_is_exact_when_a_filter_declares_exact_placement():
    assert Profile("t", filters=[PerNode(), Exact()]).exact
    assert not Profile("t", filters=[PerNode()]).exact
    assert load_profile("toposched").exact and not load_profile("default").exact
    assert implements(load_profile("nrt-match").filters[-1], RowLocal)  # NodeResourceTopologyMatch
