"""GPUShare under FGD in the scheduling cycle: GPU-less pods scored by the fragmentation they cause,
the built-in GPU profile (toposched/data/profiles/gpu-fgd.yaml) and seeded random ties."""

from __future__ import annotations

import numpy as np
import pytest

from toposched.devices.fgd import Task
from toposched.errors import InputError
from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.plugins.gpu_share import GPUShare
from toposched.scheduler.profile_setup import load_profile
from toposched.sim.fgd_experiment import GPU_PROFILE, fgd_contender
from toposched.sim.nodes_csv import read_alibaba_nodes
from toposched.sim.truth import NodeTruth
from toposched.workload import Container, Pod

GI = 2**30
# node-small: 8 CPUs and 2 GPUs; node-big: 64 CPUs and 2 GPUs. The workload's GPU pods need 6 CPUs.
NODES = "sn,cpu_milli,memory_mib,gpu,model\nnode-small,8000,65536,2,T4\nnode-big,64000,262144,2,T4\n"
WORKLOAD = [Task(cpu=6000, memory=GI, gpu_milli=1000, num_gpu=1)] * 9 + [Task(cpu=4000, memory=GI)]


def cpu_pod(name: str, cpu: int = 4000) -> Pod:
    return Pod(name, uid=name, containers=(Container("c", requests={"cpu": cpu, "memory": GI}),))


def scheduler(name: str, tmp_path, *, workload: bool = True) -> Scheduler:
    path = tmp_path / "nodes.csv"
    path.write_text(NODES)
    nodes = read_alibaba_nodes(path)
    sched = fgd_contender(name).build(nodes, {n.name: NodeTruth(n) for n in nodes})
    if workload:
        for plugin, _ in sched.profile.scores:
            if isinstance(plugin, GPUShare) and plugin.policy_name == "FGD":
                plugin.set_target_workload(WORKLOAD)
    return sched


def gpu_share(sched: Scheduler) -> GPUShare:
    return next(p for p, _ in sched.profile.scores if isinstance(p, GPUShare))


def test_a_cpu_pod_goes_where_it_leaves_the_gpus_usable(tmp_path):
    # On node-small the 4-CPU pod leaves 4 CPUs: the 2 idle GPUs could then serve none of the
    # workload's 6-CPU GPU pods. FGD rates that below the neutral 50 and sends it to node-big,
    # where MostAllocated alone (the BestFit profile scores GPU-less pods 0) would pack node-small.
    fgd = scheduler("toposched-gpu", tmp_path)
    assert fgd.schedule(cpu_pod("p"), 0.0).node == "node-big"
    packing = scheduler("toposched-bestfit", tmp_path)
    assert packing.schedule(cpu_pod("p"), 0.0).node == "node-small"


def test_gpu_less_pods_score_by_fgd_only_with_a_target_workload(tmp_path):
    sched = scheduler("toposched-gpu", tmp_path)
    sched.table.refresh()
    plugin = gpu_share(sched)
    pod = cpu_pod("p")
    state = sched.runner.pre_filter(pod)[0]
    rows = np.array([sched.table.index["node-small"], sched.table.index["node-big"]])
    # node-small: 9/10 of the workload can no longer use its 2,000 idle milli-GPU, fragmentation
    # +1,800: int(sigmoid(-1.8) x 100) = 14 (upstream's fgd_score.go formula); node-big: unchanged, 50.
    assert plugin.score_all(state, pod, sched.table, rows).tolist() == [14, 50]
    assert plugin.score_few(state, pod, sched.table, rows.tolist()) == [14, 50]
    # The 2-CPU pod leaves 6 CPUs on node-small: nothing changes for the workload, neutral 50.
    small = cpu_pod("s", cpu=2000)
    assert plugin.score_all(sched.runner.pre_filter(small)[0], small, sched.table, rows).tolist() == [50, 50]
    # BestFit (or FGD without a workload) does not score GPU-less pods.
    other = gpu_share(scheduler("toposched-bestfit", tmp_path))
    assert other.score_all(state, pod, sched.table, rows).tolist() == [0, 0]


def test_fgd_without_a_target_workload_names_what_is_missing(tmp_path):
    sched = scheduler("toposched-gpu", tmp_path, workload=False)
    assert sched.schedule(cpu_pod("p"), 0.0).node is not None  # GPU-less pods do not need it
    share = Pod("s", uid="s", containers=(Container("c", requests={"cpu": 1000, "memory": GI},
                                                    limits={"koordinator.sh/gpu-core": 50,
                                                            "koordinator.sh/gpu-memory-ratio": 50}),))
    with pytest.raises(InputError, match="target workload"):
        sched.schedule(share, 0.0)


def test_the_gpu_profile_lets_fgd_decide_and_the_other_scores_break_ties():
    profile = load_profile(config=str(GPU_PROFILE))
    weights = {p.name: w for p, w in profile.scores}
    assert weights.pop("GPUShare") == 1000
    assert 100 * sum(weights.values()) < 1000  # one FGD point outweighs every other score together
    (share,) = {id(p): p for p, _ in profile.scores if isinstance(p, GPUShare)}.values()
    assert share.policy_name == "FGD"
    assert profile.exact  # exact NUMA/CPU placement: GPU shares on the NUMA nodes of the pod's CPUs


# ---- seeded random ties ---------------------------------------------------------------------------


def plain_cluster(n: int = 8) -> Cluster:
    cluster = Cluster()
    for i in range(n):
        cluster.set_node(NodeSpec(f"n{i}", allocatable={"cpu": 64000, "memory": 256 * GI, "pods": 110}))
    return cluster


def placements(seed: int | None, pods: int = 6) -> list[str]:
    sched = Scheduler(plain_cluster(), load_profile("default"), seed=seed)
    out = []
    for i in range(pods):
        pod = cpu_pod(f"p{i}", cpu=1000)
        decision = sched.schedule(pod, 0.0)
        sched.bound(pod, 0.0)
        out.append(decision.node)
    return out


def test_without_a_seed_ties_go_to_the_first_node():
    # LeastAllocated spreads: each pod goes to the first of the emptiest nodes.
    assert placements(None) == ["n0", "n1", "n2", "n3", "n4", "n5"]


def test_a_seed_draws_among_equal_nodes_and_the_same_seed_gives_the_same_placements():
    runs = {seed: placements(seed) for seed in range(6)}
    assert runs[3] == placements(3)
    assert len({tuple(r) for r in runs.values()}) > 1  # different seeds, different draws
    for r in runs.values():
        assert len(set(r)) == 6  # still spread: only ties are drawn, the scores decide the rest
    sched = Scheduler(plain_cluster(), load_profile("default"), seed=3)
    sched.reseed(None)
    assert sched.seed is None and sched.schedule(cpu_pod("x"), 0.0).node == "n0"
    with pytest.raises(InputError):
        sched.reseed("7")  # type: ignore[arg-type]


# ---- multi-GPU pods on one NUMA node ------------------------------------------------------------


def test_a_multi_gpu_choice_takes_one_numa_node_where_one_has_enough():
    from toposched.devices.fgd import FGD, TargetWorkload
    from toposched.devices.share import GPUDevice, GPURequest, NodeGPUState

    # NUMA 0: GPUs 0-3, GPU 0 taken; NUMA 1: GPUs 4-7. "First free ones" would take 1 and 2 for a
    # 2-GPU pod anyway, 1-3 for three; four free ones exist only on NUMA 1.
    devices = [GPUDevice(f"g{i}", 16 * GI, numa=i // 4) for i in range(8)]
    state = NodeGPUState(devices, "T4").take(NodeGPUState(devices, "T4").choose(GPURequest.from_trace(1, 1000)))
    policy = FGD(TargetWorkload.from_tasks([Task(cpu=1000, gpu_milli=1000, num_gpu=1)]))
    for count, numa in ((2, {0}), (3, {0}), (4, {1})):
        got = state.choose(GPURequest.from_trace(count, 1000), policy=policy)
        assert {devices[s.minor].numa for s in got.shares} == numa, count
    # NUMA 0 with 1 free (GPU 3) and NUMA 1 with 4: met in the order 3, 4, 5, ... the policy
    # would take GPUs 3 and 4, across both; taken again on NUMA 1, the only one with two.
    two = state.take(state.choose(GPURequest.from_trace(2, 1000)))
    got = two.choose(GPURequest.from_trace(2, 1000), policy=policy, tie_order=(3, 4, 5, 6, 7, 0, 1, 2))
    assert [s.minor for s in got.shares] == [4, 5]
    # A choice already on one NUMA node is the policy's own.
    got = two.choose(GPURequest.from_trace(2, 1000), policy=policy, tie_order=(7, 6, 5, 4, 3, 2, 1, 0))
    assert [s.minor for s in got.shares] == [6, 7]
    # Eight GPUs need both NUMA nodes: kept as the policy chose.
    full = NodeGPUState(devices, "T4").choose(GPURequest.from_trace(8, 1000), policy=policy)
    assert len(full.shares) == 8
