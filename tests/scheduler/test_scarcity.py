"""ScarcityScore: pods that fit anywhere stay off the capacity only some nodes have for the demanding pods."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import toposched
from toposched.errors import InputError
from toposched.kubelet import KubeletConfig
from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.framework import registry
from toposched.scheduler.plugins.scarcity import _DemandWindow
from toposched.scheduler.profile_setup import load_profile
from toposched.topology import Machine, NUMANode
from toposched.workload import Container, Pod

GiB = 1 << 30
CONFIG = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static")


def machine(numa: int, cores: int, hugepages_1g: int = 0) -> Machine:
    rows = [{"cpu": c, "core": c, "socket": 0, "numa": c // cores} for c in range(numa * cores)]
    base = Machine.from_cpu_table(rows)
    return Machine(base.cpus, tuple(NUMANode(n.id, n.cpus, 64 * GiB, {GiB: hugepages_1g} if hugepages_1g else {})
                                    for n in base.numa_nodes))


def cluster() -> Cluster:
    """One bare-metal node (2 x 16 CPUs, 1 GiB hugepages) and one VM (2 x 8 CPUs, no hugepages)."""
    c = Cluster()
    c.set_node(NodeSpec("metal", allocatable={"cpu": 32000, "memory": 128 * GiB, "hugepages-1Gi": 16 * GiB, "pods": 110}),
               machine=machine(2, 16, 8), kubelet_config=CONFIG)
    c.set_node(NodeSpec("vm", allocatable={"cpu": 16000, "memory": 128 * GiB, "pods": 110}),
               machine=machine(2, 8), kubelet_config=CONFIG)
    return c


def latency(name: str, cpus: int = 12, hugepages: int = 2, memory: int = 8) -> Pod:
    limits = {"cpu": cpus * 1000, "memory": memory * GiB}
    if hugepages:
        limits["hugepages-1Gi"] = hugepages * GiB
    return Pod(name, uid=name, containers=(Container("c", requests=limits, limits=limits),), scheduler_name="toposched")


def burstable(name: str, millis: int = 1500) -> Pod:
    return Pod(name, uid=name, containers=(Container("c", requests={"cpu": millis, "memory": GiB}),),
               scheduler_name="toposched")


def without_scarcity(tmp_path) -> Path:
    """The built-in toposched profile with ScarcityScore taken out of scoring."""
    text = (Path(toposched.__file__).parent / "data" / "profiles" / "toposched.yaml").read_text()
    path = tmp_path / "plain.yaml"
    path.write_text(text.replace("      - name: ScarcityScore\n        weight: 2\n", ""))
    return path


def test_burstable_pods_go_where_the_demanding_pods_cannot(tmp_path):
    sched = Scheduler(cluster(), load_profile("toposched"))
    assert sched.schedule(latency("l0"), now=0).node == "metal"  # only metal can take it: the target is learned
    sched.bound(latency("l0"), now=0)
    plain = Scheduler(cluster(), load_profile("toposched", without_scarcity(tmp_path)))
    assert "ScarcityScore" not in [p.name for p, _ in plain.profile.scores]
    plain.schedule(latency("l0"), now=0)
    plain.bound(latency("l0"), now=0)
    # Packing alone sends a Burstable pod to the busier node (metal); the learned demand keeps it on the VM.
    # (metal would keep no room for another 12-CPU pod: its free CPUs, not its zones, would run out).
    assert plain.schedule(burstable("b0", 10000), now=1).node == "metal"
    assert sched.schedule(burstable("b0", 10000), now=1).node == "vm"


def test_no_opinion_before_anything_is_learned_or_for_device_pods():
    plugin = registry.create("ScarcityScore", {})
    sched = Scheduler(cluster(), load_profile("toposched"))
    sched.table.refresh()
    rows = np.arange(sched.table.size)
    from toposched.scheduler.framework import CycleState

    assert plugin.score_all(CycleState(), burstable("b"), sched.table, rows).tolist() == [0, 0]
    plugin.reserve(CycleState(), latency("l"), sched.cluster.nodes["metal"])
    gpu = Pod("g", uid="g", containers=(Container("c", requests={"cpu": 1000, "memory": GiB},
                                                  limits={"nvidia.com/gpu": 1}),))
    assert plugin.score_all(CycleState(), gpu, sched.table, rows).tolist() == [0, 0]
    assert plugin.score_all(CycleState(), burstable("b", 24000), sched.table, rows).tolist() != [0, 0]


def test_a_pod_seen_twice_is_learned_once():
    plugin = registry.create("ScarcityScore", {"epoch": 1})
    from toposched.scheduler.framework import CycleState

    for _ in range(3):
        plugin.post_filter(CycleState(), latency("l0"), {})
    assert plugin.shape_version == 1 and len(plugin._window.recent) == 1


def test_a_node_replaced_by_other_hardware_makes_capacity_rare_again():
    """Two VMs of one kind: nothing is rarer anywhere, so nothing is learned. One VM replaced by
    the bare-metal node (the node count unchanged): the demanding pods are learned again."""
    from toposched.scheduler.framework import CycleState

    c = Cluster()
    for name in ("vm-1", "vm-2"):
        c.set_node(NodeSpec(name, allocatable={"cpu": 16000, "memory": 128 * GiB, "pods": 110}),
                   machine=machine(2, 8), kubelet_config=CONFIG)
    plugin = registry.create("ScarcityScore", {"epoch": 1})
    plugin.reserve(CycleState(cluster=c), latency("l0", hugepages=0), c.nodes["vm-1"])
    assert plugin.shape_version == 0
    c.remove_node("vm-2")
    c.set_node(NodeSpec("metal", allocatable={"cpu": 32000, "memory": 128 * GiB, "hugepages-1Gi": 16 * GiB, "pods": 110}),
               machine=machine(2, 16, 8), kubelet_config=CONFIG)
    plugin.reserve(CycleState(cluster=c), latency("l1", hugepages=0), c.nodes["vm-1"])
    assert plugin.shape_version == 1


@pytest.mark.parametrize("args", [{"window": 0}, {"epoch": "x"}, {"shapes": True}, {"bogus": 1}])
def test_bad_args_are_refused(args):
    with pytest.raises(InputError, match="ScarcityScore"):
        registry.create("ScarcityScore", args)


def test_the_few_rows_form_equals_the_vector_form():
    from toposched.scheduler.framework import CycleState

    sched = Scheduler(cluster(), load_profile("toposched"))
    for i, cpus in enumerate((12, 6, 3)):
        pod = latency(f"l{i}", cpus, hugepages=1)
        if sched.schedule(pod, now=i).node:
            sched.bound(pod, now=i)
    plugin = next(p for p, _ in sched.profile.scores if p.name == "ScarcityScore")
    sched.table.refresh()
    rows = list(range(sched.table.size))
    for pod in (burstable("b", 3000), burstable("c", 14000), latency("x", 4, 1), latency("y", 2, 0)):
        vector = plugin.score_all(CycleState(), pod, sched.table, np.array(rows)).tolist()
        assert plugin.score_few(CycleState(), pod, sched.table, rows) == vector, pod.name


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 14), st.integers(0, 4), st.integers(1, 40)), min_size=3, max_size=25),
       st.lists(st.tuples(st.booleans(), st.integers(1, 16), st.integers(0, 6), st.integers(1, 60)), min_size=1, max_size=6))
def test_scores_over_many_rows_equal_the_row_by_row_scores(placed, asked):
    """On 12 nodes of three kinds filled by demanding pods of random sizes, the vector form's scores
    (every row at once, and half of the rows) equal the plain-Python form's for pods that take from
    one zone (their exclusive CPUs, memory and hugepages) and pods that take only from the node."""
    from toposched.scheduler.framework import CycleState

    c = Cluster()
    for i in range(4):
        c.set_node(NodeSpec(f"metal{i}", allocatable={"cpu": 32000, "memory": 128 * GiB, "hugepages-1Gi": 16 * GiB,
                                                     "pods": 110}), machine=machine(2, 16, 8), kubelet_config=CONFIG)
        c.set_node(NodeSpec(f"big{i}", allocatable={"cpu": 64000, "memory": 256 * GiB, "hugepages-1Gi": 32 * GiB,
                                                   "pods": 110}), machine=machine(4, 16, 8), kubelet_config=CONFIG)
        c.set_node(NodeSpec(f"vm{i}", allocatable={"cpu": 16000, "memory": 128 * GiB, "pods": 110}),
                   machine=machine(2, 8), kubelet_config=CONFIG)
    sched = Scheduler(c, load_profile("toposched"))
    plugin = next(p for p, _ in sched.profile.scores if p.name == "ScarcityScore")
    plugin.epoch = 1  # a target of several shapes (some with hugepages, some without) from the first pods
    for i, (cpus, hugepages, memory) in enumerate(placed):
        pod = latency(f"p{i}", cpus, hugepages, memory)
        if sched.schedule(pod, now=i).node:
            sched.bound(pod, now=i)
    sched.table.refresh()
    every = list(range(sched.table.size))
    for j, (pinned, cpus, hugepages, memory) in enumerate(asked):
        pod = latency(f"a{j}", cpus, hugepages, memory) if pinned else burstable(f"a{j}", cpus * 1000)
        for rows in (every, every[j % 2::2]):
            vector = plugin.score_all(CycleState(), pod, sched.table, np.array(rows)).tolist()
            assert plugin.score_few(CycleState(), pod, sched.table, rows) == vector, (pod.name, rows)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 14), st.integers(0, 3), st.booleans(), st.integers(0, 5)),
                min_size=5, max_size=40))
def test_what_rows_hold_kept_row_by_row_equals_it_computed_afresh(steps):
    """The per-row counts ScarcityScore keeps (what each row's zones hold of each target shape, its
    free CPU and memory, their quotients), brought up to date at the changed rows (a few of them in
    a few rows or all of them), equal the counts computed over every row, as pods of random sizes
    come and go on 22 nodes of three kinds (two of them pinning nothing), nodes join, and a node's allocatable memory shrinks (so
    that memory, not CPU, bounds what it holds, or its pods over-commit it). The target changes
    every few pods, so the rows a new target keeps from the old one are checked too."""
    c = Cluster()
    for i in range(10):
        c.set_node(NodeSpec(f"metal{i}", allocatable={"cpu": 32000, "memory": 128 * GiB, "hugepages-1Gi": 16 * GiB,
                                                     "pods": 110}), machine=machine(2, 16, 8), kubelet_config=CONFIG)
        c.set_node(NodeSpec(f"vm{i}", allocatable={"cpu": 16000, "memory": 128 * GiB, "pods": 110}),
                   machine=machine(2, 8), kubelet_config=CONFIG)
    for i in range(2):  # kubelets that pin nothing: they hold no demanding pod, their quotients are kept all the same
        c.set_node(NodeSpec(f"shared{i}", allocatable={"cpu": 8000, "memory": 16 * GiB, "pods": 110}),
                   machine=machine(1, 8), kubelet_config=KubeletConfig())
    sched = Scheduler(c, load_profile("toposched"))
    plugin = next(p for p, _ in sched.profile.scores if p.name == "ScarcityScore")
    plugin.epoch, plugin.shapes = 2, 2  # new targets often, most keeping a shape of the one before
    placed = []
    for i, (pinned, cpus, hugepages, release, shrink) in enumerate(steps):
        if shrink == 0 and placed:  # the node of the last pod placed: its pods may now over-commit its memory
            record = c.nodes[c.pod_node[placed[-1].uid]]
            c.set_node(NodeSpec(record.name, allocatable={**record.spec.allocatable, "memory": (i % 3) * 4 * GiB}),
                       machine=record.model.machine, kubelet_config=CONFIG)
        pod = latency(f"p{i}", cpus, hugepages) if pinned else burstable(f"p{i}", cpus * 1000)
        if sched.schedule(pod, now=i).node:
            sched.bound(pod, now=i)
            placed.append(pod)
        if release and placed:
            c.forget(placed.pop(0), float(i))
        if i % 6 == 5:  # a node joins: its row is new to what the plugin keeps
            c.set_node(NodeSpec(f"joined{i}", allocatable={"cpu": 32000, "memory": 128 * GiB, "hugepages-1Gi": 16 * GiB,
                                                          "pods": 110}), machine=machine(2, 16, 8), kubelet_config=CONFIG)
        if not plugin._target:
            continue
        sched.table.refresh()
        cols, needs = plugin._plan(sched.table)
        kept = [a.copy() for a in plugin._held_all(sched.table, cols, needs)]
        plugin._vector = None  # forget what is kept: every row is computed
        fresh = plugin._held_all(sched.table, cols, needs)
        for a, b in zip(kept, fresh):
            assert np.array_equal(a, b)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 140), st.integers(1, 300), st.integers(0, 2**31))
def test_the_first_fitting_zone_is_numpys_argmax_where_one_fits(zones, rows, seed):
    """The first True zone of each row (zones x rows), on up to 140 zones (past int8's range), is
    ``argmax`` along the zones where any is True, and the zone count where none is."""
    from toposched.scheduler.table import first_true

    mask = np.random.default_rng(seed).random((zones, rows)) < 0.2
    first = first_true(mask)
    assert np.array_equal(first, np.where(mask.any(axis=0), mask.argmax(axis=0), zones))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([1, 5, 63, 64, 200]), st.integers(1, 6), st.integers(0, 2**31))
def test_quotients_by_each_need_in_turn_equal_one_broadcast_division(rows, shapes, seed):
    """The free CPU and memory divided by every shape's need: the per-need division used on many rows
    gives NumPy's broadcast floor division, on amounts from -2**62 to 2**62 (negative where a pod takes
    more than is free)."""
    from toposched.scheduler.plugins.scarcity import ScarcityScore, _quotients

    rng = np.random.default_rng(seed)
    free = rng.integers(-2**62, 2**62, (2, rows), dtype=np.int64)
    free[:, ::3] = rng.integers(-2, 3, (2, len(free[0, ::3])))  # some amounts about zero, below the needs
    need = rng.integers(1, 2**40, (2, shapes), dtype=np.int64)
    totals = rng.integers(0, 50, (shapes, rows), dtype=np.int64)
    want = free[:, None, :] // need[:, :, None]
    for c in range(2):
        assert np.array_equal(_quotients(free[c], need[c]), want[c])
    assert np.array_equal(ScarcityScore._holds(totals, free, need), np.minimum(totals, np.minimum(want[0], want[1])))


@settings(max_examples=200, deadline=None)
@given(size=st.integers(1, 6),
       steps=st.lists(st.one_of(st.integers(0, 7), st.sets(st.integers(0, 7), max_size=3)), max_size=60))
@example(size=1, steps=[0, {0}, 1, set()])  # a kept shape out of the window, then no longer kept
def test_the_demand_window_ranks_as_a_count_of_its_shapes_and_forgets_what_left(size, steps):
    """Steps add a pod of shape i, or keep a set of shapes (as a new target does). The window ranks
    its shapes as counting the last ``size`` shapes does (ties in order of first sight), and knows a
    shape exactly while it is in the window or kept."""
    window = _DemandWindow(size)
    added: list[tuple] = []
    kept: set[tuple] = set()
    for step in steps:
        if isinstance(step, int):
            shape = (("cpu", 1000 * (step + 1)),)
            window.add(shape)
            added.append(shape)
        else:
            live = set(added[-size:]) | kept
            kept = {(("cpu", 1000 * (i + 1)),) for i in step} & live  # only known shapes are kept
            window.keep({window.number(shape) for shape in kept})
        ranked = [(window.shape(number), count) for number, count in window.ranked()]
        assert ranked == Counter(added[-size:]).most_common()
        assert set(window._numbers) == set(added[-size:]) | kept
        assert sorted(window._shapes) == sorted(window._numbers.values())
