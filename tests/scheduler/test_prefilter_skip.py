"""PreFilter's Skip: a plugin with nothing to check for a pod says so once, and none of its
filter's forms runs that cycle (upstream's SkipFilterPlugins)."""

from __future__ import annotations

import numpy as np
import pytest

from toposched.names import DEVICE_SCOPE_ANNOTATION
from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.framework import SKIPPED_FILTERS, CycleState, Profile
from toposched.scheduler.plugins.device_locality import DeviceLocality
from toposched.scheduler.plugins.gpu_share import GPUShare
from toposched.scheduler.status import Code, Status
from toposched.workload import Container, Pod

_SKIP_ME = "test/skip-me"


class Gate:
    """Refuses every node, in each of its forms, unless its PreFilter skipped it; counts what ran."""

    name = "Gate"

    def __init__(self) -> None:
        self.pre_filtered = 0
        self.ran: list[str] = []

    def pre_filter(self, state, pod) -> Status:
        self.pre_filtered += 1
        return Status.skip(self.name) if _SKIP_ME in pod.annotations else Status.success()

    def filter(self, state, pod, node) -> Status:
        self.ran.append("node")
        return Status.unschedulable("closed", plugin=self.name)

    def filter_all(self, state, pod, table, rows):
        self.ran.append("all")
        return np.zeros(len(rows), dtype=bool), "closed"

    def filter_few(self, state, pod, table, rows):
        self.ran.append("few")
        return ["closed"] * len(rows)


def _scheduler(gate: Gate, nodes: int) -> Scheduler:
    cluster = Cluster()
    for i in range(nodes):
        cluster.set_node(NodeSpec(f"n{i}", allocatable={"cpu": 4000, "memory": 2**30, "pods": 110}))
    return Scheduler(cluster, Profile("t", pre_filters=[gate], filters=[gate]))


def _pod(name: str, skip: bool) -> Pod:
    return Pod(name, uid=name, annotations={_SKIP_ME: "yes"} if skip else {},
               containers=(Container("c", requests={"cpu": 100}),))


@pytest.mark.parametrize("nodes", [3, 40], ids=["few rows", "batch"])
def test_a_skipped_filter_runs_in_no_form(nodes):
    gate = Gate()
    scheduler = _scheduler(gate, nodes)
    decision = scheduler.schedule(_pod("a", skip=True), now=0.0)
    assert decision.node is not None and gate.ran == []
    explained = scheduler.explain(_pod("b", skip=True))
    assert {n["filter"]["code"] for n in explained["nodes"]} == {"Success"} and gate.ran == []


@pytest.mark.parametrize("nodes", [3, 40], ids=["few rows", "batch"])
def test_a_filter_that_is_not_skipped_still_refuses(nodes):
    gate = Gate()
    scheduler = _scheduler(gate, nodes)
    decision = scheduler.schedule(_pod("a", skip=False), now=0.0)
    assert decision.node is None and decision.reasons == {"closed": nodes}
    assert scheduler.explain(_pod("b", skip=False))["nodes"][0]["filter"] == {"code": "Unschedulable", "message": "closed"}


def test_the_skip_is_kept_with_the_pod_shapes_prefilter_result():
    gate = Gate()
    scheduler = _scheduler(gate, 40)
    for name in ("a", "b", "c", "e"):
        assert scheduler.schedule(_pod(name, skip=True), now=0.0).node is not None
    # A shape is cached from its second pod on: the pods after it reuse that one's state.
    assert gate.pre_filtered == 2 and gate.ran == []
    state, status = scheduler.runner.pre_filter(_pod("d", skip=True), scheduler.shape(_pod("d", skip=True)))
    assert status.is_success and state[SKIPPED_FILTERS] == frozenset({"Gate"})
    assert scheduler.runner.active_filters(state) == []


def test_skip_is_not_a_refusal():
    status = Status.skip("Gate")
    assert status.code == Code.SKIP and status.is_success and not status.is_rejected


def _state() -> CycleState:
    return CycleState()


def test_gpu_share_skips_pods_without_gpus_and_judges_the_others():
    plugin = GPUShare({})
    plain = Pod("p", containers=(Container("c", requests={"cpu": 1000}),))
    whole = Pod("w", containers=(Container("c", requests={"cpu": 1000, "nvidia.com/gpu": 1}),))
    share = Pod("s", containers=(Container("c", requests={"koordinator.sh/gpu-core": 50,
                                                          "koordinator.sh/gpu-memory-ratio": 50}),))
    assert plugin.pre_filter(_state(), plain).code == Code.SKIP
    assert plugin.pre_filter(_state(), whole).code == Code.SUCCESS
    assert plugin.pre_filter(_state(), share).code == Code.SUCCESS


def test_device_locality_skips_pods_without_a_required_device_scope():
    plugin = DeviceLocality({})
    plain = Pod("p", containers=(Container("c", requests={"cpu": 1000}),))
    devices = Pod("d", containers=(Container("c", requests={"nvidia.com/gpu": 1}),))
    required = Pod("r", annotations={DEVICE_SCOPE_ANNOTATION: "numa"},
                   containers=(Container("c", requests={"nvidia.com/gpu": 1}),))
    assert plugin.pre_filter(_state(), plain).code == Code.SKIP
    assert plugin.pre_filter(_state(), devices).code == Code.SKIP  # no required scope: nothing to check
    assert plugin.pre_filter(_state(), required).code == Code.SUCCESS
