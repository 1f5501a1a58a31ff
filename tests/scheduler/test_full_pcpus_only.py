"""CPUOrchestration foresees the SMTAlignmentError of a kubelet with ``full-pcpus-only``.

Upstream's static policy checks each container against the free whole-core CPUs of its shared
pool before allocating, and the CPUs the pod's earlier containers hold are not in it, those a
later container may reuse included. So a pod of an 8-CPU init container and a 24-CPU app
container needs 32 free whole-core CPUs, though it never holds more than 24 (``_smt_need``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from tests.scheduler.test_decisions_identical import _bench
from toposched.kubelet import KubeletConfig
from toposched.scheduler import Cluster, NodeSpec, Scheduler, load_profile
from toposched.scheduler.framework import CycleState
from toposched.scheduler.plugins.cpu_orchestration import _bind_counts_of, _smt_need
from toposched.topology import CPUSet
from toposched.workload import Container, Pod

GI = 2**30
SMT = "with an SMTAlignmentError"


def _scheduler(held: int, policy: str = "none", shape: tuple = (3, 16, 2, 1, 60, 2, 512)) -> Scheduler:
    """One node of the wide mix's ``shape`` whose kubelet has full-pcpus-only, with a pod holding ``held`` CPUs."""
    machine = _bench("realistic").wide_machine(*shape)
    config = KubeletConfig(topology_manager_policy=policy, cpu_manager_policy="static",
                           cpu_manager_options={"full-pcpus-only": "true"},
                           reserved_system_cpus=CPUSet([0, len(machine.cpus) // 2]), kube_reserved={"memory": GI})
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)
    return _hold(Scheduler(cluster, load_profile("toposched")), held)


def _hold(scheduler: Scheduler, held: int) -> Scheduler:
    """``scheduler`` after a pod holding ``held`` CPUs (none for 0) is bound to node ``n``."""
    if held:
        filler = Pod("held", uid="held", containers=(Container("c", limits={"cpu": held * 1000, "memory": GI}),))
        assert scheduler.schedule(filler, 0.0).node == "n"
        scheduler.bound(filler, 0.0)
    return scheduler


def _whole_core_cpus(scheduler: Scheduler) -> int:
    """The CPUs of node ``n``'s free whole cores (what full-pcpus-only counts)."""
    node = scheduler.cluster.nodes["n"]
    plugin = next(p for p in scheduler.runner.filters if p.name == "CPUOrchestration")
    return _bind_counts_of(plugin._free_mask(node), node.model.machine)[0]


def _pod(name: str, inits: tuple[int, ...] = (), sidecars: tuple[int, ...] = (), apps: tuple[int, ...] = (2,)) -> Pod:
    def container(prefix: str, k: int, cpus: int, restart: str | None = None) -> Container:
        return Container(f"{prefix}{k}", limits={"cpu": cpus * 1000, "memory": GI}, restart_policy=restart)
    return Pod(name, uid=name,
               init_containers=tuple(container("init", k, n) for k, n in enumerate(inits))
               + tuple(container("side", k, n, "Always") for k, n in enumerate(sidecars)),
               containers=tuple(container("app", k, n) for k, n in enumerate(apps)))


def _verdicts(scheduler: Scheduler, pod: Pod) -> tuple[str | None, str | None]:
    """CPUOrchestration's reason on node ``n`` from its batch and per-node forms (None: passes)."""
    plugin = next(p for p in scheduler.runner.filters if p.name == "CPUOrchestration")
    table = scheduler.table
    table.refresh()
    state, _ = scheduler.runner.pre_filter(pod)
    ok, reasons = plugin.filter_all(state, pod, table, np.array([table.index["n"]]))
    batch = None if ok[0] else str(reasons if isinstance(reasons, str) else reasons[0])
    status = plugin.filter(CycleState(cluster=scheduler.cluster), pod, scheduler.cluster.nodes["n"])
    return batch, None if status.is_success else status.message


def test_an_init_containers_cpus_count_against_the_app_container_after_it() -> None:
    # 94 CPUs free of 96 (core 0 reserved); 64 held leave 30 on free whole cores. The app container's
    # 24 would fit them, but the init container's 8 are not in the pool when it is checked.
    scheduler = _scheduler(64)
    pod = _pod("p", inits=(8,), apps=(24,))
    batch, per_node = _verdicts(scheduler, pod)
    assert batch == per_node and SMT in batch and "need 32 CPUs on free whole cores, the node has 30" in batch
    admission = scheduler.cluster.nodes["n"].model.admit(pod, trial=True)
    assert admission.reason == "SMTAlignmentError"
    # With 32 left, the kubelet admits it, and the filter passes it.
    roomy = _scheduler(62)
    assert _verdicts(roomy, pod) == (None, None)
    assert roomy.schedule(pod, 0.0).node == "n"


@pytest.mark.parametrize(("containers", "need"), [
    ([], (0, "")),
    ([("a", 4, False)], (4, "a")),
    ([("i", 8, True), ("a", 24, False)], (32, "a")),
    ([("i1", 8, True), ("i2", 4, True), ("a", 6, False)], (14, "a")),  # the inits reuse each other's: 8 held
    ([("i", 4, True), ("s", 6, False), ("a", 2, False)], (10, "s")),   # sidecar 6 after 4, app 2 after max(4, 6)
    ([("s", 2, False), ("a", 2, False), ("b", 2, False)], (6, "b")),   # nothing reused: the sum
])
def test_the_need_is_each_containers_count_over_what_those_before_it_certainly_hold(containers, need) -> None:
    assert _smt_need(containers) == need


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(_bench("realistic").WIDE_SHAPES), st.sampled_from(["none", "best-effort", "restricted"]),
       st.integers(-2, 1), st.lists(st.integers(1, 8), min_size=1, max_size=2), st.lists(st.integers(1, 4), max_size=1),
       st.lists(st.integers(1, 12), min_size=1, max_size=2))
def test_where_the_filter_foresees_an_smt_alignment_error_the_kubelet_refuses(shape, policy, slack, inits, sidecars, apps):
    """On random machines and kubelets with full-pcpus-only, for pods of random init, sidecar and app
    containers of whole cores, after a pod holding all but about what the pod needs (``slack`` cores
    from it): the batch and per-node forms agree, and where they foresee an SMTAlignmentError the
    replica refuses the pod."""
    per_core = shape[2]
    scheduler = _scheduler(0, policy, shape)
    pod = _pod("probe", tuple(n * per_core for n in inits), tuple(n * per_core for n in sidecars),
               tuple(n * per_core for n in apps))
    containers = [(c.name, int(c.limits["cpu"]) // 1000, c in pod.init_containers and not c.is_sidecar)
                  for c in pod.all_containers]
    held = max(0, min(_whole_core_cpus(scheduler) - _smt_need(containers)[0] - slack * per_core,
                      _whole_core_cpus(scheduler) - per_core))
    if held:
        # A restricted kubelet refuses a filler no preferred hint holds (24 CPUs on a 4 x 8 machine
        # whose reserved CPUs leave no three NUMA nodes with 24 free): such a draw sets up nothing.
        filler = Pod("held", uid="held", containers=(Container("c", limits={"cpu": held * 1000, "memory": GI}),))
        assume(scheduler.schedule(filler, 0.0).node == "n")
        scheduler.bound(filler, 0.0)
    batch, per_node = _verdicts(scheduler, pod)
    assert batch == per_node
    if batch is not None and SMT in batch:
        event("the filter foresees an SMTAlignmentError")
        assert not scheduler.cluster.nodes["n"].model.admit(pod, trial=True).admitted
