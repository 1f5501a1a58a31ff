"""GPUShare in the scheduling cycle: shares of GPUs packed per device, NUMA-aligned, released exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_path
from toposched.devices.fgd import NodeBatch
from toposched.devices.share import MILLI
from toposched.kubelet import KubeletConfig
from toposched.names import GPU_MODEL_LABEL
from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.plugins import gpu_share
from toposched.scheduler.plugins.gpu_rows import GPURows
from toposched.scheduler.plugins.gpu_share import DEVICE_ALLOCATED, GPUShare, gpus_with_shares, node_gpu_state
from toposched.scheduler.profile_setup import load_profile
from toposched.sim.hardware import load_hardware_profile
from toposched.topology.hwloc import read_hwloc_xml
from toposched.workload import Container, Pod

GI = 2**30
CONFIG = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static")


def g4dn_scheduler() -> Scheduler:
    machine = read_hwloc_xml(shared_path("topologies", "hwloc", "g4dnmetal.xml"))
    cluster = Cluster()
    cluster.set_node(NodeSpec("g4dn"), machine=machine, kubelet_config=CONFIG)
    return Scheduler(cluster, load_profile("toposched"))


def share_pod(name: str, percent: int, guaranteed: bool = False) -> Pod:
    limits = {"koordinator.sh/gpu-core": percent, "koordinator.sh/gpu-memory-ratio": percent}
    if guaranteed:
        limits.update({"cpu": 2000, "memory": 4 * GI})
        return Pod(name, uid=name, containers=(Container("c", limits=limits),))
    return Pod(name, uid=name, containers=(Container("c", requests={"cpu": 500, "memory": GI}, limits=limits),))


def test_shares_pack_onto_one_gpu_before_opening_the_next():
    sched = g4dn_scheduler()
    got = []
    for i in range(4):
        pod = share_pod(f"p{i}", 50)
        decision = sched.schedule(pod, 0.0)
        sched.bound(pod, 0.0)
        (gpu,) = decision.placement.devices()["koordinator.sh/gpu"]
        got.append(gpu)
    assert got[0] == got[1] and got[2] == got[3] and got[0] != got[2]


def test_the_device_allocated_annotation_names_the_gpu_and_its_share():
    sched = g4dn_scheduler()
    pod = share_pod("p", 25)
    decision = sched.schedule(pod, 0.0)
    patch = sched.binding(decision, pod)[0]["body"]["metadata"]["annotations"]
    allocated = json.loads(patch[DEVICE_ALLOCATED])
    (entry,) = allocated["gpu"]
    assert entry["resources"]["koordinator.sh/gpu-core"] == "25"
    assert entry["resources"]["koordinator.sh/gpu-memory-ratio"] == "25"
    gpus = node_gpu_state(sched.cluster.nodes["g4dn"])
    assert gpus.devices[entry["minor"]].id == decision.placement.devices()["koordinator.sh/gpu"].pop()


def test_a_guaranteed_share_sits_on_its_numa_node():
    sched = g4dn_scheduler()
    machine = sched.cluster.nodes["g4dn"].model.machine
    numa_of = {d.address: d.numa_id for d in machine.devices}
    for i in range(6):
        pod = share_pod(f"p{i}", 40, guaranteed=True)
        decision = sched.schedule(pod, 0.0)
        sched.bound(pod, 0.0)
        (gpu,) = decision.placement.devices()["koordinator.sh/gpu"]
        assert {numa_of[gpu]} == set(decision.placement.numa_nodes)


def test_inconsistent_shares_are_refused_and_other_pods_still_schedule():
    sched = g4dn_scheduler()
    bad = Pod("bad", uid="bad", containers=(Container("c", limits={
        "koordinator.sh/gpu-core": 150, "koordinator.sh/gpu-memory-ratio": 50}),))
    decision = sched.schedule(bad, 0.0)
    assert decision.node is None and decision.status.code.label == "UnschedulableAndUnresolvable"
    assert all(used == 0 for used in node_gpu_state(sched.cluster.nodes["g4dn"]).used_core)
    assert sched.schedule(share_pod("ok", 30), 0.0).node == "g4dn"


def whole_gpu_pod(name: str, gpus: int) -> Pod:
    return Pod(name, uid=name, containers=(Container("c", limits={"cpu": 1000, "memory": GI, "nvidia.com/gpu": gpus}),))


def test_a_whole_gpu_pod_is_filtered_out_where_every_gpu_the_kubelet_could_pick_holds_shares():
    sched = g4dn_scheduler()
    for i in range(16):  # two halves on every one of the 8 T4s
        pod = share_pod(f"p{i}", 50)
        assert sched.schedule(pod, 0.0).node == "g4dn"
        sched.bound(pod, 0.0)
    decision = sched.schedule(whole_gpu_pod("w", 1), 0.0)
    assert decision.node is None
    assert decision.reasons == {"needs 1 nvidia.com/gpu; only 0 of the 8 GPUs the kubelet could hand out hold no "
                                "shares of other pods": 1}
    assert sched.cluster.pod_node == {f"p{i}": "g4dn" for i in range(16)}  # nothing was admitted on trial


def test_a_whole_gpu_pod_is_refused_where_the_kubelet_would_hand_out_a_shared_gpu():
    # Guaranteed shares of 60% sit on NUMA node 0 with their CPUs, one per GPU: all four GPUs
    # there hold shares. Four clean GPUs remain on NUMA node 1, but the kubelet's Topology Manager
    # picks NUMA node 0 for a 1-GPU pod (the lowest that can hold it) and hands out a shared GPU.
    sched = g4dn_scheduler()
    numa_of = {d.address: d.numa_id for d in sched.cluster.nodes["g4dn"].model.machine.devices}
    for i in range(4):
        pod = share_pod(f"p{i}", 60, guaranteed=True)
        decision = sched.schedule(pod, 0.0)
        sched.bound(pod, 0.0)
        assert [numa_of[g] for g in decision.placement.devices()["koordinator.sh/gpu"]] == [0]
    pod = whole_gpu_pod("w", 1)
    decision = sched.schedule(pod, 0.0)
    assert decision.node is None
    # The filter foresees it; Reserve (the replica's admission and the confirm hooks) says the same.
    assert decision.reasons == {"needs 1 nvidia.com/gpu; the kubelet would align the pod to the lowest NUMA node that "
                                "can hold it, where it would hand out a GPU that holds shares of other pods": 1}
    state, _ = sched.runner.pre_filter(pod)
    assert "kubelet would hand out GPU" in sched.runner.reserve(state, pod, "g4dn", 0.0)


def test_shares_take_the_gpus_the_kubelet_hands_out_last():
    # The kubelet hands out whole GPUs in its device plugin's order; shares start from the other end.
    sched = g4dn_scheduler()
    kubelet_order = list(sched.cluster.nodes["g4dn"].model.devices.state.devices["nvidia.com/gpu"])
    first = sched.schedule(share_pod("s0", 50), 0.0)
    sched.bound(share_pod("s0", 50), 0.0)
    assert first.placement.devices()["koordinator.sh/gpu"] == {kubelet_order[-1]}
    for i in range(7):  # whole GPUs come from the front, never meeting the share
        pod = whole_gpu_pod(f"w{i}", 1)
        decision = sched.schedule(pod, 0.0)
        assert decision.node == "g4dn", decision.message
        assert decision.reasons == {}  # no admission refused on the way
        sched.bound(pod, 0.0)
    assert sched.schedule(whole_gpu_pod("w7", 1), 0.0).node is None  # only the shared GPU is left


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([10, 25, 50, 75, 100, 200]), st.booleans()), min_size=1, max_size=30))
def test_no_gpu_is_ever_over_shared_and_release_restores_the_ledger(steps):
    sched = g4dn_scheduler()
    node = sched.cluster.nodes["g4dn"]
    empty = node_gpu_state(node)
    placed = []
    for i, (percent, release) in enumerate(steps):
        pod = share_pod(f"p{i}", percent)
        decision = sched.schedule(pod, 0.0)
        if decision.node is not None:
            sched.bound(pod, 0.0)
            placed.append(pod)
        state = node_gpu_state(node)
        assert all(0 <= c <= MILLI for c in state.used_core)
        assert all(0 <= m <= d.memory for m, d in zip(state.used_memory, state.devices))
        if release and placed:
            sched.cluster.forget(placed.pop(0))
    for pod in placed:
        sched.cluster.forget(pod)
    assert node_gpu_state(node) == empty


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([10, 25, 50, 100]), st.sampled_from(["keep", "forget", "rebind"])),
                min_size=1, max_size=20))
def test_the_remembered_gpu_state_is_the_one_rebuilt_from_the_ledger(steps):
    # The state is remembered with the shares it holds and checked against those only; a pod
    # that leaves, or comes back bound from elsewhere (a ledger entry without a share), must
    # still be seen.
    sched = g4dn_scheduler()
    node = sched.cluster.nodes["g4dn"]
    placed = []
    for i, (percent, then) in enumerate(steps):
        pod = share_pod(f"p{i}", percent)
        if sched.schedule(pod, 0.0).node is not None:
            sched.bound(pod, 0.0)
            placed.append(pod)
        if then != "keep" and placed:
            gone = placed.pop(0)
            sched.cluster.forget(gone)
            if then == "rebind":
                sched.cluster.add_bound_pod(gone, "g4dn", 0.0)
        remembered = node_gpu_state(node)
        gpu_share._STATES.clear()
        assert node_gpu_state(node) == remembered


def test_a_node_that_refused_a_pod_shape_is_not_tried_again_until_it_changes():
    # A best-effort kubelet: the filter does not judge its pick of GPUs, so the refusal comes at Reserve.
    machine = read_hwloc_xml(shared_path("topologies", "hwloc", "g4dnmetal.xml"))
    cluster = Cluster()
    config = KubeletConfig(topology_manager_policy="best-effort", cpu_manager_policy="static")
    for name in ("a", "b"):
        cluster.set_node(NodeSpec(name), machine=machine, kubelet_config=config)
    sched = Scheduler(cluster, load_profile("toposched"))
    for i in range(4):  # as above: every GPU of a's NUMA node 0 holds a share
        pod = share_pod(f"p{i}", 60, guaranteed=True)
        assert sched.schedule(pod, 0.0).node == "a"
        sched.bound(pod, 0.0)
    admissions = []
    assume = cluster.assume
    cluster.assume = lambda pod, node, *a, **k: admissions.append(node) or assume(pod, node, *a, **k)
    first = sched.schedule(whole_gpu_pod("w0", 1), 0.0)
    sched.bound(whole_gpu_pod("w0", 1), 0.0)
    assert first.node == "b" and admissions == ["a", "b"]
    assert list(first.reasons.values()) == [1]
    second = sched.schedule(whole_gpu_pod("w1", 1), 0.0)
    assert second.node == "b" and admissions == ["a", "b", "b"] and second.reasons == {}
    sched.bound(whole_gpu_pod("w1", 1), 0.0)
    for pod in (whole_gpu_pod("w0", 1), whole_gpu_pod("w1", 1), share_pod("p0", 60, guaranteed=True)):
        sched.unreserve(pod)  # b is empty again; a changes, so its row is judged afresh
    sched.schedule(whole_gpu_pod("w2", 1), 0.0)
    assert admissions[3] == "a"


GPU_SERVER = load_hardware_profile("gpu-8x")


def gpu_rows_equal(kept: GPURows, fresh: GPURows) -> None:
    # The codes depend on the order each saw the models in: compared by name.
    assert [kept.model_names[c] for c in kept.model_code.tolist()] == [fresh.model_names[c] for c in fresh.model_code.tolist()]
    for name in ("count", "smallest", "memory", "used_core", "used_memory", "busy", "free_milli"):
        a, b = getattr(kept, name), getattr(fresh, name)
        width = max(a.shape[-1], b.shape[-1]) if a.ndim == 2 else None
        if width is not None:  # a kept array may be wider than a fresh one: the extra slots are empty
            a = np.pad(a, ((0, 0), (0, width - a.shape[1])))
            b = np.pad(b, ((0, 0), (0, width - b.shape[1])))
        assert np.array_equal(a, b), name
    assert kept.whole.keys() == fresh.whole.keys() and kept.devices.keys() == fresh.devices.keys()
    for resource in kept.whole:
        for a, b in zip(kept.whole[resource], fresh.whole[resource]):
            assert np.array_equal(a, b), resource
    for resource in kept.devices:
        assert np.array_equal(kept.devices[resource], fresh.devices[resource]), resource


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["share", "whole", "plain"]), st.sampled_from([1, 2, 4]),
                          st.sampled_from([10, 25, 50, 100]), st.booleans()), min_size=1, max_size=25))
def test_the_gpu_arrays_kept_row_by_row_equal_arrays_built_afresh(steps):
    """GPUShare's per-row GPU arrays, brought up to date at the changed rows only, always equal the
    arrays built from every row: shares and whole GPUs placed and released, nodes removed and added."""
    cluster = Cluster()
    for i, model in enumerate(("H100", "", "A100")):  # rows of three models and none, in no sorted order
        cluster.set_node(NodeSpec(f"gpu{i}", labels={GPU_MODEL_LABEL: model} if model else {}), machine=GPU_SERVER.machine,
                         kubelet_config=GPU_SERVER.kubelet,
                         device_plugins={r: list(d) for r, d in (GPU_SERVER.device_plugins or {}).items()})
    cluster.set_node(NodeSpec("plain"), machine=GPU_SERVER.machine, kubelet_config=CONFIG)
    sched = Scheduler(cluster, load_profile("toposched"))
    plugin = next(p for p in sched.profile.filters if isinstance(p, GPUShare))
    placed = []
    for i, (kind, gpus, percent, release) in enumerate(steps):
        if kind == "share":
            pod = share_pod(f"p{i}", percent)
        elif kind == "whole":
            pod = whole_gpu_pod(f"p{i}", gpus)
        else:
            pod = Pod(f"p{i}", uid=f"p{i}", containers=(Container("c", requests={"cpu": 1000 * gpus, "memory": GI}),))
        if sched.schedule(pod, float(i)).node is not None:
            sched.bound(pod, float(i))
            placed.append(pod)
        if release and placed:
            sched.cluster.forget(placed.pop(0), float(i))
        if i == 10:
            cluster.remove_node("gpu2")
        if i in (4, 12):  # a GPU server joins: its row is new to the arrays kept
            cluster.set_node(NodeSpec(f"joined{i}", labels={GPU_MODEL_LABEL: "L4"}), machine=GPU_SERVER.machine,
                             kubelet_config=GPU_SERVER.kubelet,
                             device_plugins={r: list(d) for r, d in (GPU_SERVER.device_plugins or {}).items()})
        sched.table.refresh()
        kept = plugin._rows(sched.table)
        fresh = GPURows().update(sched.table, lambda row: plugin._row_gpus(sched.table, row))
        gpu_rows_equal(kept, fresh)
        facts = [plugin._row_gpus(sched.table, row) for row in range(sched.table.size)]
        assert [kept.model_names[c] for c in kept.model_code[: len(facts)].tolist()] == [
            fact.model if fact is not None else "" for fact in facts]
        everyone = sched.table.all_rows()
        for rows in (everyone, everyone[::-1].copy(), np.flatnonzero(kept.count[: len(everyone)] > 0)):
            batch_equals_the_checked_one(kept.batch(sched.table, rows))


def batch_equals_the_checked_one(batch: NodeBatch) -> None:
    """A batch GPURows hands over unchecked is what the checking constructor makes of the same nodes."""
    checked = NodeBatch(cpu_free=batch.cpu_free, memory_free=batch.memory_free, gpu_free=batch.gpu_free,
                        gpu_count=batch.gpu_count, gpu_model=batch.gpu_model)
    for name in ("cpu_free", "memory_free", "gpu_free", "gpu_count", "model_index"):
        assert np.array_equal(getattr(batch, name), getattr(checked, name)), name
        assert getattr(batch, name).dtype == getattr(checked, name).dtype and not getattr(batch, name).flags.writeable
    assert batch.gpu_model == checked.gpu_model and batch.models == checked.models
    assert batch.affinity == checked.affinity and len(batch) == len(checked)


def gpu8x_scheduler(policy: str = "restricted", scope: str = "pod", cpu: str = "static",
                    cpu_options: dict[str, str] | None = None, memory: str = "None") -> Scheduler:
    """One ``gpu-8x`` node (2 NUMA nodes, 4 GPUs and 2 RDMA HCAs on each) whose kubelet enforces
    ``policy``, with these CPU manager (policy, options) and memory manager policies."""
    import dataclasses

    gpu = load_hardware_profile("gpu-8x")
    reserved = gpu.kubelet.kube_reserved["memory"] + gpu.kubelet.system_reserved["memory"] + gpu.kubelet.eviction_memory
    config = dataclasses.replace(gpu.kubelet, topology_manager_policy=policy, topology_manager_scope=scope,
                                 cpu_manager_policy=cpu, cpu_manager_options=cpu_options or {},
                                 reserved_system_cpus=gpu.kubelet.reserved_system_cpus if cpu == "static" else None,
                                 memory_manager_policy=memory,
                                 reserved_memory={0: {"memory": reserved}} if memory == "Static" else {})
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=gpu.machine, kubelet_config=config,
                     device_plugins={r: list(d) for r, d in (gpu.device_plugins or {}).items()})
    return Scheduler(cluster, load_profile("toposched"))


def gpu_verdicts(sched: Scheduler, pod: Pod) -> tuple[str | None, str | None]:
    """GPUShare's reason on node ``n`` from its batch form and from the few-rows form the runner
    derives from it (None: passes)."""
    from toposched.scheduler.framework import CycleState

    index = next(i for i, p in enumerate(sched.runner.filters) if p.name == "GPUShare")
    plugin = sched.runner.filters[index]
    table = sched.table
    table.refresh()
    rows = np.array([table.index["n"]])
    mask, reasons = plugin.filter_all(CycleState(cluster=sched.cluster), pod, table, rows)
    batch = None if mask[0] else (reasons if isinstance(reasons, str) else reasons[0])
    few = sched.runner.filters_few[index](CycleState(cluster=sched.cluster), pod, rows.tolist())[0]
    return batch, few


def exact_refusal(sched: Scheduler, pod: Pod) -> str | None:
    """Why Reserve (the replica's admission and the confirm hooks, no filter) refuses ``pod`` on node ``n``; None
    where it would place it (given back at once)."""
    state, status = sched.runner.pre_filter(pod)
    assert status.is_success
    refused = sched.runner.reserve(state, pod, "n", 0.0)
    if refused is None:
        sched.unreserve(pod)
    return refused


def test_a_whole_gpu_pod_is_filtered_out_where_each_numa_nodes_pick_holds_shares():
    # Shares take the GPUs the kubelet hands out last: b4, b3, then 94 on NUMA node 1. A 3-GPU pod
    # takes 13, 14 and 33 on NUMA node 0. Free: 34 (NUMA 0, clean), 93 (clean), 94, b3, b4 (NUMA 1).
    sched = gpu8x_scheduler()
    for i in range(3):
        pod = share_pod(f"s{i}", 60)
        assert sched.schedule(pod, 0.0).node == "n"
        sched.bound(pod, 0.0)
    pod = whole_gpu_pod("w", 3)
    assert sched.schedule(pod, 0.0).node == "n"
    sched.bound(pod, 0.0)
    # Two GPUs are free of shares, but a 2-GPU pod gets them from one NUMA node: only NUMA node 1
    # has two free, and the kubelet's first two there are 93 and 94, which holds a share.
    reason = ("needs 2 nvidia.com/gpu; on every NUMA node that could hold them, the kubelet would hand out a GPU that "
              "holds shares of other pods")
    assert gpu_verdicts(sched, whole_gpu_pod("p", 2)) == (reason, reason)
    assert "would hand out GPU 0000:94:00.0" in exact_refusal(sched, whole_gpu_pod("p", 2))
    # One GPU: NUMA node 0's pick (34) is clean, so the filter cannot say; two GPUs wanted by
    # two containers are not judged by the one-node pick either.
    assert gpu_verdicts(sched, whole_gpu_pod("q", 1)) == (None, None)
    two = Pod("t", uid="t", containers=tuple(Container(f"c{i}", limits={"cpu": 1000, "memory": GI, "nvidia.com/gpu": 1})
                                             for i in range(2)))
    assert gpu_verdicts(sched, two) == (None, None)
    # A kubelet that does not align devices to one NUMA node may hand out 34 and 93.
    loose = gpu8x_scheduler("best-effort")
    for pod in [share_pod(f"s{i}", 60) for i in range(3)] + [whole_gpu_pod("w", 3)]:
        loose.schedule(pod, 0.0)
        loose.bound(pod, 0.0)
    assert gpu_verdicts(loose, whole_gpu_pod("p", 2)) == (None, None)


def device_pod(name: str, gpus: int = 0, hcas: int = 0, cpus: int = 1, sidecar_cpus: int = 0) -> Pod:
    """A Guaranteed pod of whole CPUs asking for GPUs and RDMA HCAs in one container (and for CPUs
    only in a second one, with ``sidecar_cpus``)."""
    def limits(gpus: int, hcas: int, cpus: int) -> dict[str, int]:
        out = {"cpu": cpus * 1000, "memory": GI}
        out.update({k: v for k, v in (("nvidia.com/gpu", gpus), ("rdma/hca", hcas)) if v})
        return out
    containers = [Container("c", limits=limits(gpus, hcas, cpus))]
    if sidecar_cpus:
        containers.append(Container("side", limits=limits(0, 0, sidecar_cpus)))
    return Pod(name, uid=name, containers=tuple(containers))


SHARED_PICK = ("needs 2 nvidia.com/gpu; on every NUMA node that could hold them, the kubelet would hand out a GPU "
               "that holds shares of other pods")


def placed(sched: Scheduler, pods: list[Pod]) -> Scheduler:
    """``sched`` after each of ``pods`` is scheduled to node ``n`` and bound."""
    for pod in pods:
        assert sched.schedule(pod, 0.0).node == "n", pod.name
        sched.bound(pod, 0.0)
    return sched


def test_the_one_node_pick_is_taken_where_the_pods_other_aligned_requests_fit():
    # Shares sit on b4, b3 and 94 (NUMA node 1). A pod holding both RDMA HCAs of NUMA node 0
    # leaves NUMA node 0 four clean GPUs and no HCA.
    sched = placed(gpu8x_scheduler(), [share_pod(f"s{i}", 60) for i in range(3)] + [device_pod("h", hcas=2)])
    reason = SHARED_PICK
    # 2 GPUs and an HCA: the only preferred hint is NUMA node 1, where the kubelet hands out 93 and 94.
    both = device_pod("p", gpus=2, hcas=1)
    assert gpu_verdicts(sched, both) == (reason, reason)
    assert "would hand out GPU 0000:94:00.0" in exact_refusal(sched, both)
    # Without the HCA, NUMA node 0 serves the GPUs, clean.
    assert gpu_verdicts(sched, device_pod("q", gpus=2)) == (None, None)
    assert exact_refusal(sched, device_pod("q", gpus=2)) is None


def test_the_one_node_pick_is_taken_where_the_pods_cpus_fit():
    # A 70-CPU pod fills NUMA node 0's CPUs (80 threads, one reserved); shares sit on NUMA node 1.
    filled = [share_pod(f"s{i}", 60) for i in range(3)] + [device_pod("big", cpus=70)]
    sched = placed(gpu8x_scheduler(), filled)
    reason = SHARED_PICK
    wide = device_pod("p", gpus=2, cpus=20)
    assert gpu_verdicts(sched, wide) == (reason, reason)
    assert "would hand out GPU 0000:94:00.0" in exact_refusal(sched, wide)
    narrow = device_pod("q", gpus=2, cpus=4)
    assert gpu_verdicts(sched, narrow) == (None, None)
    assert exact_refusal(sched, narrow) is None
    # CPUs in a second container: at pod scope the hint must hold them all, at container scope
    # only the GPUs' container's.
    apart = device_pod("r", gpus=2, cpus=4, sidecar_cpus=16)
    assert gpu_verdicts(sched, apart) == (reason, reason)
    assert exact_refusal(sched, apart) is not None
    per_container = placed(gpu8x_scheduler(scope="container"), filled)
    assert gpu_verdicts(per_container, apart) == (None, None)
    assert exact_refusal(per_container, apart) is None
    assert gpu_verdicts(per_container, wide) == (reason, reason)


@pytest.mark.parametrize("scope", ["pod", "container"])
def test_the_kubelet_aligns_the_pod_to_the_lowest_numa_node_that_holds_it(scope):
    # Guaranteed shares sit on their NUMA node (0), on the GPUs the kubelet hands out last: 34, 33,
    # 14, then 13. NUMA node 1's GPUs are clean, but the kubelet prefers NUMA node 0 where both
    # could hold the pod, and hands out 13 and 14 there.
    sched = placed(gpu8x_scheduler(scope=scope), [share_pod(f"s{i}", 60, guaranteed=True) for i in range(4)])
    assert gpus_with_shares(node_gpu_state(sched.cluster.nodes["n"])) == {
        "0000:13:00.0", "0000:14:00.0", "0000:33:00.0", "0000:34:00.0"}
    reason = ("needs 2 nvidia.com/gpu; the kubelet would align the pod to the lowest NUMA node that can hold it, where "
              "it would hand out a GPU that holds shares of other pods")
    pod = device_pod("p", gpus=2)
    assert gpu_verdicts(sched, pod) == (reason, reason)
    assert "would hand out GPU 0000:13:00.0" in exact_refusal(sched, pod)
    # Too many CPUs for NUMA node 0 (79 threads, 8 of them held): the kubelet takes NUMA node 1.
    wide = device_pod("q", gpus=2, cpus=75)
    assert gpu_verdicts(sched, wide) == (None, None)
    assert exact_refusal(sched, wide) is None
    # A second container with CPUs: at container scope the GPUs' container is not the only one
    # with something to align, so the filter cannot say which NUMA node it gets.
    two = device_pod("r", gpus=2, sidecar_cpus=2)
    assert gpu_verdicts(sched, two) == ((reason, reason) if scope == "pod" else (None, None))
    assert exact_refusal(sched, two) is not None


def test_the_lowest_numa_node_is_not_read_where_the_cpus_preferred_hints_are_not_known():
    # align-by-socket: the CPU manager also prefers socket-aligned sets, so the table counts no CPU
    # capacity per zone and the CPUs' hints are not read. NUMA node 0 has 1 CPU free after the
    # shares and a 70-CPU pod, so a 4-CPU pod's hint is NUMA node 1, whose GPUs are clean.
    sched = placed(gpu8x_scheduler(cpu_options={"align-by-socket": "true"}),
                   [share_pod(f"s{i}", 60, guaranteed=True) for i in range(4)] + [device_pod("big", cpus=70)])
    pod = device_pod("p", gpus=2, cpus=4)
    assert exact_refusal(sched, pod) is None
    assert gpu_verdicts(sched, pod) == (None, None)


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(["restricted", "single-numa-node"]), st.sampled_from(["pod", "container"]),
       st.lists(st.tuples(st.sampled_from(["share", "whole", "hca", "cpu"]), st.integers(1, 3), st.integers(20, 100),
                          st.booleans()), max_size=10),
       st.integers(1, 4), st.integers(0, 2), st.integers(1, 60), st.integers(0, 30),
       st.sampled_from(["static", "static", "none"]), st.sampled_from(["", "full-pcpus-only", "align-by-socket"]),
       st.sampled_from(["None", "Static"]))
def test_the_one_node_pick_rule_only_refuses_what_the_kubelet_refuses(policy, scope, steps, gpus, hcas, cpus, sidecar,
                                                                      cpu, option, memory):
    """On a gpu-8x node whose kubelet aligns devices to one NUMA node (with either CPU and memory
    manager), after random shares, whole-GPU, HCA and many-CPU pods (some leaving), GPUShare's batch
    form and the few-rows form derived from it agree on a pod asking for GPUs, HCAs and whole CPUs,
    and where they refuse it, Reserve (the replica's admission and the confirm hooks) refuses it too."""
    if option == "align-by-socket" and policy == "single-numa-node":
        option = ""  # upstream refuses the combination
    sched = gpu8x_scheduler(policy, scope, cpu, {option: "true"} if option and cpu == "static" else None, memory)
    placed = []
    for i, (kind, count, percent, leave) in enumerate(steps):
        if kind == "share":
            pod = share_pod(f"s{i}", percent, guaranteed=count == 1)
        else:
            pod = device_pod(f"{kind}{i}", **{"whole": {"gpus": count}, "hca": {"hcas": count}, "cpu": {"cpus": percent}}[kind])
        if sched.schedule(pod, float(i)).node:
            sched.bound(pod, float(i))
            placed.append(pod)
        if leave and placed:
            sched.cluster.forget(placed.pop(0), float(i))
    pod = device_pod("probe", gpus=gpus, hcas=hcas, cpus=cpus, sidecar_cpus=sidecar)
    batch, few = gpu_verdicts(sched, pod)
    assert batch == few
    if batch is not None:
        assert exact_refusal(sched, pod) is not None


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(0, 7)), st.sets(st.integers(0, 7)), st.booleans())
def test_aligned_picks_are_the_device_managers_picks(held, shared, reversed_plugin):
    """Bit n of a NUMA node's ``aligned_picks`` is set exactly when the NUMA node has n free GPUs and
    the device manager's pick of n there holds no shared GPU, with or without a plugin preferring other devices."""
    from toposched.kubelet import DeviceManager

    ids = [f"gpu{i}" for i in range(8)]
    devices = {"nvidia.com/gpu": [(d, frozenset({i // 4})) for i, d in enumerate(ids)]}
    preferred = {"nvidia.com/gpu": lambda available, must, size: sorted(available, reverse=True)[:size]}
    manager = DeviceManager([0, 1], devices, preferred=preferred if reversed_plugin else None)
    if held:
        pod = Pod("w", uid="w", containers=(Container("c", limits={"nvidia.com/gpu": len(held)}),))
        manager.restore(manager.state._with({"w": {"c": {"nvidia.com/gpu": frozenset(ids[i] for i in held)}}}, {}))
        assert manager.pod_devices(pod)["c"]["nvidia.com/gpu"] == frozenset(ids[i] for i in held)
    shared_ids = frozenset(ids[i] for i in shared)
    bits, most = gpu_share.aligned_picks(manager, "nvidia.com/gpu", shared_ids)
    free = manager.available("nvidia.com/gpu")
    want = [0, 0]
    for numa in (0, 1):
        for n in range(1, sum(1 for d in ids[4 * numa:4 * numa + 4] if d in free) + 1):
            if not shared_ids & set(manager.pick("nvidia.com/gpu", n, (numa,))):
                want[numa] |= 1 << n
    assert (bits, most) == (tuple(want), 4)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=200),
       st.sampled_from([1, 1 << 10, 1 << 20]))
def test_the_pairs_seen_are_numpys_unique_pairs(pairs: list[tuple[int, int]], scale: int) -> None:
    """The refusal texts' distinct (fitting, candidates) pairs and each row's index among them, as
    ``np.unique`` over the pairs gives them: counted in a table for small counts, sorted beyond."""
    first = np.array([a * scale for a, _ in pairs], dtype=np.int64)
    second = np.array([b for _, b in pairs], dtype=np.int64)
    seen, which = gpu_share._pairs_seen(first, second)
    want, inverse = np.unique(np.stack([first, second], axis=1), axis=0, return_inverse=True)
    assert seen == want.tolist()
    assert np.array_equal(which, inverse.reshape(-1))
