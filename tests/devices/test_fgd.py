"""FGD and its baselines against the paper simulator's own tables and definitions.

Upstream: github.com/hkust-adsl/kubernetes-scheduler-simulator —
``pkg/utils/frag_test.go`` (TestNodeGpuShareFragAmountScore, TestNodeGpuShareFragAmountWithNonGpu,
TestGetGpuFragMilliByNodeResAndPodRes: the typical-pod lists and expected fragmentation are theirs),
``pkg/simulator/plugin/gpu_packing_score_test.go`` (GpuPacking's cases), and the definitions in
``pkg/utils/frag.go``, ``fgd_score.go``, ``best_fit_score.go``, ``dot_product_score.go``,
``gpu_clustering_score.go``, ``random_score.go``, ``open_gpu_share.go``, ``pkg/type/resource.go``.
The vector forms are checked against ``reference_*`` below, a direct, node-by-node reading of
those Go functions.
"""

from __future__ import annotations

import csv
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_path
from toposched.devices.fgd import (
    FGD,
    BestFit,
    DotProd,
    GpuClustering,
    GpuPacking,
    NodeBatch,
    NodeView,
    RandomPolicy,
    TargetWorkload,
    Task,
    feasible,
    feasible_one,
    fragmentation,
    make_policy,
    node_fragmentation,
    parse_gpu_spec,
)
from toposched.errors import InputError

# ---- upstream's typical-pod lists (frag_test.go) ----------------------------------------------

_TYPICAL = [  # cpu, milli, gpus, model, percent
    (6000, 465, 1, "", 9.33), (8000, 440, 1, "2080", 9.15), (8000, 475, 1, "T4", 8.76),
    (8000, 440, 1, "P100", 8.72), (2000, 465, 1, "", 8.68), (12000, 900, 1, "", 8.65), (4000, 900, 1, "", 8.43),
    (16000, 678, 1, "T4", 8.36), (8000, 500, 1, "", 8.29), (6000, 511, 1, "", 8.11), (14000, 1000, 2, "2080", 0.54),
    (4000, 1000, 1, "2080", 0.43), (32000, 1000, 2, "T4", 0.43), (16000, 1000, 1, "V100M16", 0.40),
    (64000, 1000, 2, "", 0.40), (10000, 1000, 2, "", 0.40), (11400, 1000, 1, "T4", 0.36), (16000, 1000, 1, "T4", 0.36),
    (4000, 1000, 2, "", 0.36), (14000, 1000, 2, "V100M16", 0.36), (8000, 1000, 4, "", 0.36), (16000, 1000, 2, "", 0.32),
    (2000, 1000, 1, "T4", 0.32), (6000, 1000, 1, "", 0.32), (4000, 1000, 1, "", 0.32), (5000, 1000, 1, "", 0.32),
    (32000, 1000, 4, "V100M16", 0.32), (32000, 1000, 2, "", 0.32), (24000, 1000, 8, "2080", 0.32),
    (40000, 1000, 4, "", 0.29), (32000, 1000, 8, "", 0.29), (32000, 1000, 1, "T4", 0.29), (16000, 1000, 1, "", 0.25),
    (7000, 1000, 1, "V100M16", 0.25), (24000, 1000, 1, "T4", 0.25),
]
_TYPICAL_WITH_CPU_PODS = [  # cpu, milli, gpus, percent
    (15700, 1000, 1, 28.69), (11900, 1000, 1, 18.93), (11400, 1000, 1, 12.27), (1000, 0, 0, 7.36),
    (18710, 1000, 1, 4.85), (8200, 1000, 1, 3.79), (16400, 1000, 1, 3.31), (9810, 1000, 1, 1.97),
    (15200, 1000, 1, 1.87), (11200, 1000, 1, 1.81), (14200, 1000, 1, 1.76), (12000, 0, 0, 1.65),
    (14900, 1000, 1, 1.39), (60200, 1000, 4, 1.23), (64200, 1000, 8, 1.07), (32200, 1000, 4, 1.01),
    (17400, 1000, 2, 0.91), (30200, 1000, 2, 0.69), (16000, 1000, 1, 0.64), (15000, 1000, 1, 0.59),
    (64000, 1000, 8, 0.53), (15000, 0, 0, 0.53), (11910, 1000, 1, 0.53), (120200, 1000, 8, 0.48),
    (11300, 1000, 1, 0.37), (30000, 1000, 2, 0.32), (9800, 1000, 1, 0.32), (8000, 1000, 1, 0.32),
    (2000, 1000, 1, 0.27), (2000, 80, 1, 0.27), (1000, 1000, 1, 0.27),
]


def typical() -> TargetWorkload:
    tasks = [Task(cpu=c, gpu_milli=m, num_gpu=n, gpu_models=parse_gpu_spec(t)) for c, m, n, t, _ in _TYPICAL]
    return TargetWorkload(tasks, [p / 100 for *_, p in _TYPICAL])


def typical_with_cpu_pods() -> TargetWorkload:
    tasks = [Task(cpu=c, gpu_milli=m, num_gpu=n) for c, m, n, _ in _TYPICAL_WITH_CPU_PODS]
    return TargetWorkload(tasks, [p / 100 for *_, p in _TYPICAL_WITH_CPU_PODS])


def node(cpu: int, gpus: list[int], model: str, memory: int = 0) -> NodeView:
    return NodeView(cpu_free=cpu, memory_free=memory, gpu_free=tuple(gpus), gpu_model=model)


# ---- a node-by-node reading of upstream's Go, the oracle for the vector forms ------------------

def reference_frag(view: NodeView, workload: TargetWorkload) -> float:
    """frag.go NodeGpuShareFragAmount(...).FragAmountSumExceptQ3(), memory treated like CPU."""
    left_total = sum(view.gpu_free)
    out = 0.0
    for task, p in zip(workload.tasks, workload._weights):
        host = view.cpu_free >= task.cpu and view.memory_free >= task.memory
        if task.gpu_milli == 0:
            amount = left_total  # XL / XR: a CPU pod cannot use idle GPUs
        elif not task.accessible(view.gpu_model):
            amount = left_total  # NoAccess
        elif sum(1 for g in view.gpu_free if g >= task.gpu_milli) >= task.num_gpu:
            amount = sum(g for g in view.gpu_free if g < task.gpu_milli) if host else left_total  # Q3 / Q4
        else:
            amount = left_total  # Q1 / Q2
        out += p * amount
    return out / workload._scale


def reference_sub(view: NodeView, task: Task) -> NodeView:
    """resource.go NodeResource.Sub: host request, then GPUs least-free-first (stable)."""
    gpus = list(view.gpu_free)
    need = task.num_gpu
    for i in sorted(range(len(gpus)), key=lambda i: gpus[i]):
        if need and gpus[i] >= task.gpu_milli:
            gpus[i] -= task.gpu_milli
            need -= 1
    return NodeView(view.cpu_free - task.cpu, view.memory_free - task.memory, tuple(gpus), view.gpu_model)


def sigmoid100(x: float) -> int:
    return int(1.0 / (1.0 + math.exp(-x)) * 100)


def reference_fgd(view: NodeView, task: Task, workload: TargetWorkload) -> tuple[int, int | None]:
    """fgd_score.go Score / calculateGpuShareFragExtendScore: (score, GPU for a shared pod)."""
    if not (task.cpu or task.memory or task.num_gpu):
        return 100, None  # a pod with no requests
    before = reference_frag(view, workload)
    if task.shared:
        score, gpu = 0, None
        for i, g in enumerate(view.gpu_free):
            if g >= task.gpu_milli:
                gpus = list(view.gpu_free)
                gpus[i] -= task.gpu_milli
                after = NodeView(view.cpu_free - task.cpu, view.memory_free - task.memory, tuple(gpus), view.gpu_model)
                s = sigmoid100((before - reference_frag(after, workload)) / 1000)
                if gpu is None or s > score:
                    score, gpu = s, i
        return score, gpu
    return sigmoid100((before - reference_frag(reference_sub(view, task), workload)) / 1000), None


# ---- upstream tables ----------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("view", "expected"),
    [
        (node(1000, [200, 1000, 1000, 500], "1080"), 2566.62),
        (node(1000, [1000] * 4, "1080"), 3802.40),
        (node(1000, [1000] * 8, "1080"), 7604.80),
    ],
)
def test_share_frag_amount_upstream_table(view, expected):
    assert node_fragmentation(view, typical()) == pytest.approx(expected, abs=0.01)


def test_one_type_lacking_cpu_fragments_every_idle_gpu():
    workload = TargetWorkload([Task(cpu=6000, gpu_milli=465, num_gpu=1)], [0.0933])
    view = node(1000, [200, 1000, 1000, 500], "1080")
    assert node_fragmentation(view, workload) == pytest.approx(251.91, abs=0.01)  # Q4: 9.33% × 2700


@pytest.mark.parametrize(
    ("view", "expected"),
    [
        (node(64000, [1000] * 8, "P100"), 887.20),
        (node(32000, [1000] * 4 + [0] * 4, "P100"), 554.4),
        (node(0, [1000] * 4 + [0] * 4, "P100"), 4000),
    ],
)
def test_frag_with_cpu_only_types_upstream_table(view, expected):
    assert node_fragmentation(view, typical_with_cpu_pods()) == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize(
    ("gpus", "task", "expected"),
    [
        ([200, 1000, 1000, 500], Task(cpu=100, gpu_milli=1000, num_gpu=2), 700),
        ([1000] * 4, Task(cpu=100, gpu_milli=1000, num_gpu=2), 0),
        ([1000] * 8, Task(cpu=100, gpu_milli=1000, num_gpu=2), 0),
        ([200, 1000, 1000, 500], Task(cpu=100, gpu_milli=200, num_gpu=2), 0),
    ],
)
def test_gpu_frag_milli_upstream_table(gpus, task, expected):
    # GetGpuFragMilliByNodeResAndPodRes: a fitting type's fragment is the milli on GPUs below it.
    workload = TargetWorkload([task], [1.0])
    assert node_fragmentation(node(1000, gpus, "1080"), workload) == expected


@pytest.mark.parametrize(
    ("gpus", "task", "expected"),
    [
        ([200, 1000, 1000, 500], Task(cpu=100, gpu_milli=1000, num_gpu=2), 48),  # case 2
        ([1000] * 4, Task(cpu=100, gpu_milli=1000, num_gpu=2), 29),  # case 3, 4 GPUs
        ([1000] * 8, Task(cpu=100, gpu_milli=1000, num_gpu=2), 25),  # case 3, 8 GPUs
        ([200, 1000, 1000, 500], Task(cpu=100, gpu_milli=200, num_gpu=2), 93),  # case 1
    ],
)
def test_gpu_packing_upstream_table(gpus, task, expected):
    result = GpuPacking().score(NodeBatch.from_views([node(1000, gpus, "1080")]), task)
    assert result.scores.tolist() == [expected]


# ---- the target workload ------------------------------------------------------------------------

def test_target_workload_counts_types_and_keeps_the_popular_ones():
    a, b, c = Task(cpu=1000, gpu_milli=500, num_gpu=1), Task(cpu=2000), Task(cpu=4000, gpu_milli=1000, num_gpu=2)
    tasks = [a] * 60 + [b] * 35 + [c] * 5
    full = TargetWorkload.from_tasks(tasks)
    assert full.tasks == (a, b, c)
    assert full.popularity == pytest.approx((0.6, 0.35, 0.05))
    cut = TargetWorkload.from_tasks(tasks, coverage=0.95)  # GetTypicalPods: stop once 95% are covered
    assert cut.tasks == (a, b)
    assert cut.popularity == pytest.approx((60 / 95, 35 / 95))  # renormalised after the cut


def test_target_workload_ties_put_larger_requests_first():
    small, large = Task(cpu=1000, gpu_milli=300, num_gpu=1), Task(cpu=1000, gpu_milli=700, num_gpu=1)
    assert TargetWorkload.from_tasks([small, large]).tasks == (large, small)  # sort.Reverse of Less


@pytest.mark.parametrize(
    "bad",
    [
        lambda: Task(cpu=-1),
        lambda: Task(gpu_milli=1001, num_gpu=1),
        lambda: Task(gpu_milli=500, num_gpu=0),
        lambda: Task(gpu_milli=0, num_gpu=1),
        lambda: TargetWorkload([], []),
        lambda: TargetWorkload([Task(cpu=1)], [2.0]),
        lambda: TargetWorkload([Task(cpu=1)], [float("nan")]),
        lambda: TargetWorkload.from_tasks([Task(cpu=1)], coverage=0),
        lambda: make_policy("Tetris"),
        lambda: make_policy("FGD"),
        lambda: make_policy("Random"),
        lambda: NodeBatch.from_views([node(0, [1200], "T4")]),
    ],
)
def test_bad_input_is_refused(bad):
    with pytest.raises(InputError):
        bad()


# ---- FGD ------------------------------------------------------------------------------------------

def test_fgd_keeps_room_where_best_fit_would_not():
    # Most pods ask 400 milli. A 200 pod on the half-used GPU leaves 300 there, too little for the
    # next one; FGD puts it on the free GPU and keeps both usable. BestFit takes the tighter GPU.
    workload = TargetWorkload.from_tasks([Task(cpu=1000, gpu_milli=400, num_gpu=1)] * 9 + [Task(cpu=1000)])
    view = node(16000, [500, 1000], "T4")
    pod = Task(cpu=1000, gpu_milli=200, num_gpu=1)
    assert FGD(workload).choose_gpus(view, pod) == (1,)
    assert BestFit().choose_gpus(view, pod) == (0,)


def test_fgd_node_choice_prefers_the_node_it_fragments_least():
    # Half-GPU and whole-GPU pods alike: a half GPU left over is a fragment for the whole ones.
    workload = TargetWorkload.from_tasks([Task(cpu=1000, gpu_milli=500, num_gpu=1), Task(cpu=1000, gpu_milli=1000, num_gpu=1)])
    views = [node(8000, [1000, 1000], "T4"), node(8000, [500, 1000], "T4"), node(8000, [300, 1000], "T4")]
    result = FGD(workload).score(NodeBatch.from_views(views), Task(cpu=1000, gpu_milli=500, num_gpu=1))
    assert result.best() == 1  # filling the half GPU removes a fragment
    assert result.scores[1] > 50 > result.scores[0]


def test_fgd_scores_pods_without_requests_as_upstream():
    result = FGD(typical()).score(NodeBatch.from_views([node(1000, [1000], "T4")]), Task())
    assert result.scores.tolist() == [100]


# Upstream's FGD score, case by case. The expected numbers were produced by upstream's own Go
# functions, copied verbatim into a stand-alone program (frag.go: NodeGpuShareFragAmountScore and
# what it calls; resource.go: NodeResource.Sub, AllocateExclusiveGpuId; fgd_score.go:
# calculateGpuShareFragExtendScore; plugin_utils.go: sigmoid) and run on these nodes and pods with
# the target workload below (docs/sim/fgd.md, "Our FGD against upstream's"). Memory is 0 throughout,
# as upstream does not count it.
_CASE_WORKLOAD = [(4000, 500, 1, "", 0.4), (8000, 1000, 1, "", 0.3), (16000, 1000, 2, "", 0.2),
                  (2000, 0, 0, "", 0.05), (8000, 300, 1, "T4", 0.05)]
_UPSTREAM_FGD_CASES = [  # node CPU, free milli per GPU, model, pod (cpu, milli, GPUs): frag before, score, GPUs
    ("share pod: the GPU that fragments least", 16000, [1000, 1000, 700, 300], "V100", (4000, 500, 1), 920.0, 45, (2,)),
    ("share pod fills a sliver", 16000, [1000, 600, 500], "V100", (4000, 500, 1), 960.0, 57, (2,)),
    ("share pod: first of equal GPUs", 16000, [700, 700, 1000], "V100", (4000, 200, 1), 1140.0, 52, (0,)),
    ("whole GPU: the first free one", 16000, [1000, 1000, 700, 300], "V100", (8000, 1000, 1), 920.0, 47, (0,)),
    ("two whole GPUs", 40000, [1000] * 4, "V100", (16000, 1000, 2), 400.0, 54, (0, 1)),
    ("CPU pod breaks the GPU types' fit", 10000, [1000, 1000], "V100", (4000, 0, 0), 600.0, 35, ()),
    ("CPU pod that changes nothing", 64000, [1000, 1000], "V100", (4000, 0, 0), 200.0, 50, ()),
    ("CPU pod on a node without GPUs", 64000, [], "", (4000, 0, 0), 0.0, 50, ()),
    ("CPU pod beside full GPUs", 8000, [0, 0], "V100", (4000, 0, 0), 0.0, 50, ()),
    ("model-restricted type", 16000, [1000, 400], "T4", (2000, 300, 1), 630.0, 56, (1,)),
    ("share pod leaves too little CPU", 12000, [1000, 500, 500], "V100", (6000, 500, 1), 900.0, 50, (0,)),
]


@pytest.mark.parametrize(("case", "cpu", "gpus", "model", "pod", "frag", "score", "chosen"), _UPSTREAM_FGD_CASES,
                         ids=[c[0] for c in _UPSTREAM_FGD_CASES])
def test_fgd_score_and_gpu_choice_equal_upstream_case_by_case(case, cpu, gpus, model, pod, frag, score, chosen):
    workload = TargetWorkload([Task(cpu=c, gpu_milli=m, num_gpu=n, gpu_models=parse_gpu_spec(t))
                               for c, m, n, t, _ in _CASE_WORKLOAD], [p for *_, p in _CASE_WORKLOAD])
    view = node(cpu, gpus, model)
    task = Task(cpu=pod[0], gpu_milli=pod[1], num_gpu=pod[2])
    policy = FGD(workload)
    assert node_fragmentation(view, workload) == pytest.approx(frag, abs=1e-9)
    assert policy.score(NodeBatch.from_views([view]), task).scores.tolist() == [score]
    assert policy.raw_score_one(view, task) == score
    assert (policy.choose_gpus(view, task) if task.num_gpu else ()) == chosen


def test_fgd_respects_eligible_gpus():
    workload = TargetWorkload.from_tasks([Task(cpu=1000, gpu_milli=400, num_gpu=1)])
    view = node(16000, [500, 1000, 1000], "T4")
    pod = Task(cpu=1000, gpu_milli=200, num_gpu=1)
    assert FGD(workload).choose_gpus(view, pod, eligible=[True, False, False]) == (0,)
    assert FGD(workload).choose_gpus(view, pod, eligible=[False, False, False]) is None
    with pytest.raises(InputError):
        FGD(workload).choose_gpus(view, pod, eligible=[True])


models = st.sampled_from(["T4", "V100M16", "P100"])
tasks = st.builds(
    lambda cpu, mem, shape, spec: Task(cpu=cpu, memory=mem, gpu_milli=shape[0], num_gpu=shape[1], gpu_models=spec),
    st.integers(0, 16).map(lambda x: x * 1000),
    st.integers(0, 4),
    st.one_of(st.just((0, 0)), st.tuples(st.integers(1, 1000), st.just(1)),
              st.tuples(st.just(1000), st.integers(1, 4)), st.tuples(st.integers(1, 999), st.integers(2, 3))),
    st.sampled_from([frozenset(), frozenset({"T4"}), frozenset({"V100M16", "P100"})]),
)
views = st.builds(
    lambda cpu, mem, gpus, model: node(cpu, gpus, model, mem),
    st.integers(0, 40).map(lambda x: x * 1000),
    st.integers(0, 6),
    st.lists(st.sampled_from([0, 100, 250, 300, 465, 500, 600, 800, 1000]), min_size=0, max_size=8),
    models,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(views, min_size=1, max_size=6), st.lists(st.tuples(tasks, st.integers(1, 20)), min_size=1, max_size=8),
       tasks)
def test_vector_forms_equal_upstream_read_node_by_node(node_views, weighted, pod):
    counts: dict[Task, int] = {}
    for t, w in weighted:
        counts[t] = counts.get(t, 0) + w
    workload = TargetWorkload(list(counts), list(counts.values()), scale=sum(counts.values()))
    batch = NodeBatch.from_views(node_views)
    # Integer weights make both sums exact: equal, not approximately equal.
    assert fragmentation(batch, workload).tolist() == [reference_frag(v, workload) for v in node_views]
    result = FGD(workload).score(batch, pod)
    ok = feasible(batch, pod)
    for i, v in enumerate(node_views):
        if ok[i]:
            score, gpu = reference_fgd(v, pod, workload)
            assert result.scores[i] == score
            if pod.shared:
                assert FGD(workload).choose_gpus(v, pod) == (gpu,)
        else:
            assert result.scores[i] == 0


@settings(max_examples=40, deadline=None)
@given(st.lists(views, min_size=1, max_size=6), tasks)
def test_feasible_matches_upstream_filter(node_views, pod):
    ok = feasible(NodeBatch.from_views(node_views), pod)
    for v, flag in zip(node_views, ok):
        expected = v.cpu_free >= pod.cpu and v.memory_free >= pod.memory
        if pod.num_gpu:
            expected = expected and pod.accessible(v.gpu_model) and \
                sum(g >= pod.gpu_milli for g in v.gpu_free) >= pod.num_gpu
        assert bool(flag) == expected


# ---- baselines --------------------------------------------------------------------------------------

def test_best_fit_is_normalised_least_leftover():
    views = [node(64000, [1000] * 8, "T4"), node(8000, [1000, 500], "T4"), node(2000, [500], "T4")]
    pod = Task(cpu=1000, gpu_milli=500, num_gpu=1)
    raw = [int((1 - ((v.cpu_free - 1000) / 128000 * 0.5 + (sum(v.gpu_free) - 500) / 8000 * 0.5)) * 100) for v in views]
    lo, hi = min(raw), max(raw)
    result = BestFit().score(NodeBatch.from_views(views), pod)
    assert result.scores.tolist() == [(r - lo) * 100 // (hi - lo) for r in raw]
    assert result.best() == 2
    same = BestFit().score(NodeBatch.from_views([views[0], views[0]]), pod)
    assert same.scores.tolist() == [0, 0]  # NormalizeScore: no spread → MinNodeScore


@settings(max_examples=60, deadline=None)
@given(st.lists(views, min_size=1, max_size=6), tasks, st.integers(0, 2**31))
def test_normalizing_the_raw_scores_of_the_feasible_nodes_gives_the_scores(node_views, pod, seed):
    # A caller that keeps raw scores per node (the scheduler's per-shape cache) and normalizes
    # later over all feasible nodes gets what score() gives over the batch.
    batch = NodeBatch.from_views(node_views)
    for policy, again in ((BestFit(), BestFit()), (DotProd(), DotProd()), (GpuPacking(), GpuPacking()),
                          (RandomPolicy(random.Random(seed)), RandomPolicy(random.Random(seed)))):
        whole = policy.score(batch, pod)
        raw = again.raw_score(batch, pod)
        assert raw.feasible.tolist() == whole.feasible.tolist()
        ok = whole.feasible
        assert again.normalize(raw.scores[ok]).tolist() == whole.scores[ok].tolist(), policy.name
        # a raw score reads its node alone: scoring one node at a time gives the same raw scores
        alone = [again.raw_score(NodeBatch.from_views([v]), pod).scores[0] for v in node_views]
        assert alone == raw.scores.tolist()
        assert [again.raw_score_one(v, pod) for v in node_views] == raw.scores.tolist()
        assert [feasible_one(v, pod) for v in node_views] == feasible(batch, pod).tolist()


def test_dot_product_merges_gpus_and_normalises_by_the_largest_node():
    view = node(32000, [1000, 1000, 500, 0], "T4")
    pod = Task(cpu=4000, gpu_milli=1000, num_gpu=1)
    dot = (32000 / 128000) * (4000 / 128000) + (2500 / 8000) * (1000 / 8000)
    assert DotProd().score(NodeBatch.from_views([view]), pod).scores.tolist() == [int(100 * (1 - dot / 2))]


def test_gpu_clustering_groups_pods_of_one_shape():
    pod = Task(cpu=1000, gpu_milli=500, num_gpu=1)
    views = [
        NodeView(8000, 0, (500, 1000), "T4", {"share-gpu": 2}),  # only share pods: 75 + base
        NodeView(8000, 0, (500, 0), "T4", {"share-gpu": 1, "1-gpu": 1}),  # mixed: 50 + base
        NodeView(8000, 0, (1000, 1000), "T4", {}),  # empty: 25 + base
        NodeView(8000, 0, (1000, 0), "T4", {"1-gpu": 1}),  # other shapes only: base
    ]
    base = [25 * (8000 - sum(v.gpu_free)) // 8000 for v in views]
    scores = GpuClustering().score(NodeBatch.from_views(views), pod).scores.tolist()
    assert scores == [base[0] + 75, base[1] + 50, base[2] + 25, base[3]]
    assert GpuClustering().score(NodeBatch.from_views(views), Task(cpu=1000)).scores.tolist() == [0, 0, 0, 0]


def test_gpu_clustering_truncates_like_go_on_nodes_with_more_than_eight_gpus():
    view = NodeView(8000, 0, (1000,) * 16, "V100M32", {})
    score = GpuClustering().score(NodeBatch.from_views([view]), Task(cpu=1, gpu_milli=1000, num_gpu=1)).scores[0]
    assert score == -(25 * 8000 // 8000) + 25  # 25·(8000−16000)/8000 truncates toward zero: −25


def test_random_is_seeded_uniform_and_feasible_only():
    views = [node(8000, [1000], "T4"), node(0, [1000], "T4"), node(8000, [1000], "T4"), node(8000, [1000], "T4")]
    pod = Task(cpu=1000, gpu_milli=500, num_gpu=1)
    batch = NodeBatch.from_views(views)
    picks = [RandomPolicy(random.Random(s)).score(batch, pod).best() for s in range(300)]
    assert set(picks) == {0, 2, 3}
    assert picks == [make_policy("Random", seed=s).score(batch, pod).best() for s in range(300)]
    gpu_picks = {RandomPolicy(random.Random(s)).choose_gpus(node(0, [600, 0, 700], "T4"), pod) for s in range(50)}
    assert gpu_picks == {(0,), (2,)}


@pytest.mark.parametrize("name", ["BestFit", "DotProd", "GpuPacking", "GpuClustering", "FGD", "Random"])
def test_whole_gpus_are_the_first_free_ones(name):
    policy = make_policy(name, workload=typical(), seed=1)
    view = node(8000, [500, 1000, 1000, 0, 1000], "T4")
    assert policy.choose_gpus(view, Task(cpu=1000, gpu_milli=1000, num_gpu=2)) == (1, 2)
    assert policy.choose_gpus(view, Task(cpu=1000, gpu_milli=1000, num_gpu=4)) is None


def test_best_gpu_is_the_tightest_fit():
    view = node(8000, [600, 300, 1000, 300], "T4")
    assert BestFit().choose_gpus(view, Task(cpu=1, gpu_milli=250, num_gpu=1)) == (1,)
    assert BestFit().choose_gpus(view, Task(cpu=1, gpu_milli=700, num_gpu=1)) == (2,)
    assert BestFit().choose_gpus(view, Task(cpu=1, gpu_milli=200, num_gpu=2)) == (1, 3)  # Sub's order


# ---- real trace -----------------------------------------------------------------------------------

def _openb():
    folder = shared_path("traces", "alibaba-cluster-trace-gpu-v2023")
    with open(folder / "openb_pod_list_default.csv", newline="") as f:
        pods = [Task(cpu=int(r["cpu_milli"]), memory=int(r["memory_mib"]) * 2**20, gpu_milli=int(r["gpu_milli"]),
                     num_gpu=int(r["num_gpu"]) if int(r["gpu_milli"]) else 0, gpu_models=parse_gpu_spec(r["gpu_spec"]))
                for r in csv.DictReader(f)]
    with open(folder / "openb_node_list_gpu_node.csv", newline="") as f:
        nodes = [node(int(r["cpu_milli"]), [1000] * int(r["gpu"]), r["model"], int(r["memory_mib"]) * 2**20)
                 for r in csv.DictReader(f)]
    return pods, nodes


@pytest.mark.shared_data
def test_openb_trace_workload_and_cluster():
    pods, nodes = _openb()
    workload = TargetWorkload.from_tasks(pods, coverage=0.95)
    assert sum(workload.popularity) == pytest.approx(1.0)
    batch = NodeBatch.from_views(nodes)
    assert len(batch) == 1213
    sample = nodes[::97]
    assert fragmentation(NodeBatch.from_views(sample), workload).tolist() == pytest.approx(
        [reference_frag(v, workload) for v in sample])
    rng = random.Random(7)
    for pod in rng.sample(pods, 12):
        for name in ("FGD", "BestFit", "DotProd", "GpuPacking", "GpuClustering", "Random"):
            result = make_policy(name, workload=workload, seed=3).score(batch, pod)
            chosen = result.best()
            assert chosen is not None and result.feasible[chosen]
            assert (result.scores[~result.feasible] == 0).all()
            assert ((result.scores >= 0) & (result.scores <= 100)).all()
            if pod.num_gpu:
                gpus = make_policy(name, workload=workload, seed=3).choose_gpus(nodes[chosen], pod)
                assert gpus is not None and len(gpus) == pod.num_gpu
                assert all(nodes[chosen].gpu_free[g] >= pod.gpu_milli for g in gpus)


def test_batch_pads_nodes_with_fewer_gpus():
    batch = NodeBatch.from_views([node(1, [1000, 500], "T4"), node(1, [], "")])
    assert batch.gpu_free.tolist() == [[1000, 500], [0, 0]]
    assert batch.gpu_count.tolist() == [2, 0]
    assert not batch.gpu_free.flags.writeable
    assert np.array_equal(feasible(batch, Task(cpu=1, gpu_milli=100, num_gpu=1)), [True, False])
