"""percentageOfNodesToScore: how many feasible nodes a cycle looks for, in which order, and where
the next cycle starts. Expected values come from kube-scheduler's own tests
(schedule_one_test.go: TestNumFeasibleNodesToFind, TestFairEvaluationForNodes;
backend/cache/node_tree_test.go), restated here."""

from __future__ import annotations

import random

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scheduler.strategies import node_shapes, pods
from toposched.errors import InputError
from toposched.scheduler import Cluster, NodeSpec, Scheduler, Taint
from toposched.scheduler.framework import registry
from toposched.scheduler.profile_setup import load_profile
from toposched.scheduler.profiles import load_scheduler_config
from toposched.scheduler.sampling import NodeTree, num_feasible_nodes_to_find, zone_key
from toposched.workload import Container, Pod

REGION, ZONE = "topology.kubernetes.io/region", "topology.kubernetes.io/zone"
BETA_REGION, BETA_ZONE = "failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone"

# ---- how many -----------------------------------------------------------------------------------


def _percentage(global_share: int | None, profile_share: int | None) -> int:
    """The percentage a profile ends up with, read from a KubeSchedulerConfiguration as kube-scheduler reads it."""
    doc: dict = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 "profiles": [{"schedulerName": "s"}]}
    if global_share is not None:
        doc["percentageOfNodesToScore"] = global_share
    if profile_share is not None:
        doc["profiles"][0]["percentageOfNodesToScore"] = profile_share
    config = load_scheduler_config(yaml.safe_dump(doc), known_plugins=registry.known(), source="t.yaml")
    return config.profiles[0].percentage_of_nodes_to_score


@pytest.mark.parametrize(("global_share", "profile_share", "nodes", "wanted"), [
    (None, None, 10, 10),  # fewer than 100 nodes: every one
    (None, 40, 10, 10),
    (None, None, 1000, 420),  # adaptive: 50 - 1000/125 = 42%
    (None, 40, 1000, 400),
    (100, 40, 1000, 400),  # the profile's share wins over the global one
    (40, None, 1000, 400),  # the global share where the profile sets none
    (None, None, 6000, 300),  # adaptive bottoms out at 5%
    (None, 40, 6000, 2400),
])
def test_how_many_feasible_nodes_end_the_search(global_share, profile_share, nodes, wanted):
    assert num_feasible_nodes_to_find(_percentage(global_share, profile_share), nodes) == wanted


def test_never_fewer_than_a_hundred_nodes():
    assert num_feasible_nodes_to_find(1, 5000) == 100
    assert num_feasible_nodes_to_find(0, 150) == 100  # 48% of 150 is 72
    assert num_feasible_nodes_to_find(100, 5000) == 5000


def test_the_builtin_profiles_say_how_many_nodes_they_look_at():
    assert load_profile("toposched").percentage_of_nodes_to_score == 100  # every node, exactly
    assert load_profile("default").percentage_of_nodes_to_score == 0  # kube-scheduler's own default
    assert load_profile("nrt-match").percentage_of_nodes_to_score == 0


@pytest.mark.parametrize("bad", [-1, 101, True, "50"])
def test_a_percentage_outside_0_to_100_is_refused_naming_the_field(bad):
    profile = load_profile("default")
    profile.percentage_of_nodes_to_score = bad
    with pytest.raises(InputError) as err:
        Scheduler(Cluster(), profile)
    assert err.value.field == "percentageOfNodesToScore"


# ---- in which order -----------------------------------------------------------------------------

# upstream's test nodes: name -> labels
_NODES = {
    "node-0": {},
    "node-1": {REGION: "region-1"},
    "node-2": {ZONE: "zone-2"},
    "node-3": {REGION: "region-1", ZONE: "zone-2"},
    "node-4": {REGION: "region-1", ZONE: "zone-2"},
    "node-5": {REGION: "region-1", ZONE: "zone-3"},
    "node-6": {REGION: "region-2", ZONE: "zone-2"},
    "node-7": {REGION: "region-2", ZONE: "zone-2"},
    "node-8": {REGION: "region-2", ZONE: "zone-2"},
    "node-9": {REGION: "region-2", ZONE: "zone-2", BETA_REGION: "region-2", BETA_ZONE: "zone-2"},
    "node-10": {BETA_REGION: "region-2", BETA_ZONE: "zone-3"},
}


def _tree(*names: str) -> NodeTree:
    tree = NodeTree()
    for name in names:
        tree.add(name, zone_key(_NODES[name]))
    return tree


def test_zone_keys_join_region_and_zone_and_prefer_the_beta_labels():
    assert zone_key(_NODES["node-0"]) == ""
    assert zone_key(_NODES["node-1"]) == "region-1:\x00:"
    assert zone_key(_NODES["node-2"]) == ":\x00:zone-2"
    assert zone_key(_NODES["node-3"]) == "region-1:\x00:zone-2"
    assert zone_key(_NODES["node-10"]) == "region-2:\x00:zone-3"
    assert zone_key({BETA_ZONE: "old", ZONE: "new"}) == ":\x00:old"


def test_the_order_interleaves_zones():
    assert _tree().names() == []
    assert _tree("node-0").names() == ["node-0"]
    assert _tree("node-0", "node-0").names() == ["node-0"]  # added twice, listed once
    assert _tree(*[f"node-{i}" for i in range(4)]).names() == ["node-0", "node-1", "node-2", "node-3"]
    assert _tree(*[f"node-{i}" for i in range(9)]).names() == [
        "node-0", "node-1", "node-2", "node-3", "node-5", "node-6", "node-4", "node-7", "node-8"]
    # a zone that ran out takes the node that comes later, in its place among the zones
    assert _tree("node-4", "node-5", "node-6", "node-7", "node-8", "node-3").names() == [
        "node-4", "node-5", "node-6", "node-3", "node-7", "node-8"]


def test_a_zone_that_empties_is_forgotten_and_a_node_that_changes_zone_goes_last_in_its_new_one():
    tree = _tree(*[f"node-{i}" for i in range(7)])
    for name in ("node-1", "node-2", "node-3"):
        tree.remove(name)
    assert tree.names() == ["node-0", "node-4", "node-5", "node-6"]
    tree.remove("node-0")  # its zone "" empties and goes
    tree.add("node-0", "")  # and comes back last
    assert tree.names() == ["node-4", "node-5", "node-6", "node-0"]

    tree = _tree(*[f"node-{i}" for i in range(7)])
    tree.add("node-0", "region-1:\x00:zone-2")  # relabelled: upstream updateNode
    assert tree.names() == ["node-1", "node-2", "node-3", "node-5", "node-6", "node-4", "node-0"]

    tree = _tree("node-3", "node-4", "node-6", "node-7")
    tree.remove("node-3")
    tree.remove("node-4")
    assert tree.names() == ["node-6", "node-7"]
    tree.remove("node-missing")  # nothing to remove: nothing changes
    assert tree.names() == ["node-6", "node-7"]


# ---- the search in a scheduler ------------------------------------------------------------------


def _pod(name: str, cpu: int = 100, memory: int = 2**20) -> Pod:
    return Pod(name, uid=name, containers=(Container("c", requests={"cpu": cpu, "memory": memory}),))


def test_every_node_gets_its_turn():
    """500 nodes that all fit, 30%: each cycle finds 150 and the next starts where it stopped."""
    cluster = Cluster()
    for i in range(500):
        cluster.set_node(NodeSpec(f"n{i:03d}", allocatable={"cpu": 64000, "memory": 2**36, "pods": 110}))
    profile = load_profile("default")
    profile.percentage_of_nodes_to_score = 30
    scheduler = Scheduler(cluster, profile)
    to_find = num_feasible_nodes_to_find(30, 500)
    assert to_find == 150
    for i in range(2 * (500 // to_find + 1)):
        decision = scheduler.schedule(_pod(f"p{i}"), now=float(i))
        assert decision.node is not None
        assert scheduler.next_start_node_index == (i + 1) * to_find % 500


@pytest.mark.parametrize(("percentage", "reaches_the_last"), [(0, False), (100, True)])
def test_every_node_is_looked_at_when_the_profile_says_100(percentage, reaches_the_last):
    cluster = Cluster()
    for i in range(300):
        cluster.set_node(NodeSpec(f"n{i:03d}", allocatable={"cpu": 1000, "memory": 2**31, "pods": 110}))
    cluster.set_node(NodeSpec("roomiest", allocatable={"cpu": 64000, "memory": 2**36, "pods": 110}))
    profile = load_profile("default")
    profile.percentage_of_nodes_to_score = percentage
    # LeastAllocated prefers the roomiest node, which came last: a search for 100 of the 301 nodes
    # from the first does not reach it.
    decision = Scheduler(cluster, profile).schedule(_pod("p", cpu=500, memory=2**30), now=0.0)
    assert (decision.node == "roomiest") is reaches_the_last


def test_the_search_follows_the_order_nodes_came_in_not_their_names():
    cluster = Cluster()
    for i in reversed(range(150)):
        cluster.set_node(NodeSpec(f"n{i:03d}", allocatable={"cpu": 4000, "memory": 2**33, "pods": 110}))
    # 100 of the 150 equal nodes are looked at: n149 down to n050; among equals the lowest row
    # (the first name) wins, n050, not n000.
    assert Scheduler(cluster, load_profile("default")).schedule(_pod("p"), now=0.0).node == "n050"


def _random_cluster(rnd: random.Random, nodes: int) -> Cluster:
    """Nodes of random sizes, zones, taints; named out of the order they come in, so that the table's
    rows (by name within a refresh) and the node tree (in the order nodes came) differ."""
    cluster = Cluster()
    zones = [f"z{k}" for k in range(rnd.randint(1, 4))]
    numbers = list(range(nodes))
    rnd.shuffle(numbers)
    for i in numbers:
        cluster.set_node(_random_node(rnd, f"n{i:03d}", zones))
    return cluster


def _random_node(rnd: random.Random, name: str, zones: list[str]) -> NodeSpec:
    labels = {REGION: "r", ZONE: rnd.choice(zones)} if rnd.random() < 0.8 else {}
    taints = (Taint("dedicated", "team", "NoSchedule"),) if rnd.random() < 0.1 else ()
    return NodeSpec(name, allocatable={"cpu": rnd.choice([2000, 4000, 8000]), "memory": rnd.choice([4, 8, 16]) * 2**30,
                                       "pods": 110},
                    labels=labels, taints=taints, unschedulable=rnd.random() < 0.05)


def _tree_of(cluster: Cluster) -> NodeTree:
    """A node tree of the cluster's nodes in the order they came, for the test to keep as nodes come and go."""
    tree = NodeTree()
    for name, record in cluster.nodes.items():
        tree.add(name, zone_key(record.spec.labels))
    return tree


def _walk(scheduler: Scheduler, tree: NodeTree, state, pod: Pod, to_find: int) -> tuple[list[int], int]:
    """The search worked out the long way: every live node's verdict, walked in the order of ``tree``
    as upstream's one worker walks them (the nodes that refuse after the last one wanted are looked
    at, up to the next that passes). The rows kept, and where the next search starts."""
    table = scheduler.table
    order = tree.names()
    verdict, _ = scheduler.evaluate(state, pod, None, table.all_rows())
    start = scheduler.next_start_node_index % len(order)
    kept, looked = [], 0
    for k in range(len(order)):
        row = table.index[order[(start + k) % len(order)]]
        if verdict[row] < 0:
            if len(kept) == to_find:  # one feasible node too many: upstream's worker stops before it
                break
            kept.append(row)
        looked += 1
    return kept, (start + looked) % len(order)


def _expected(scheduler: Scheduler, tree: NodeTree, pod: Pod, to_find: int) -> tuple[str | None, int]:
    """What the search should choose: the rows :func:`_walk` keeps, scored together; and where the next search starts."""
    scheduler.table.refresh()
    state, _ = scheduler.runner.pre_filter(pod)
    kept, next_start = _walk(scheduler, tree, state, pod, to_find)
    if not kept:
        return None, next_start
    rows = np.array(sorted(kept), dtype=np.int64)
    _, total = scheduler.evaluate(state, pod, None, rows)
    return scheduler.table.names[int(rows[int(np.argmax(total))])], next_start


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), percentage=st.sampled_from([0, 10, 45]))
def test_the_search_chooses_the_best_of_the_first_feasible_nodes_in_tree_order(seed, percentage):
    """Pods come, some leave and nodes are replaced; each decision is the best of the first
    ``to_find`` feasible nodes from where the last search stopped, and the start moves on by the
    nodes looked at."""
    rnd = random.Random(seed)
    cluster = _random_cluster(rnd, rnd.randint(120, 260))
    profile = load_profile("default")
    profile.percentage_of_nodes_to_score = percentage
    scheduler = Scheduler(cluster, profile)
    tree = _tree_of(cluster)
    zones = ["z0", "z1", "z9"]
    placed: list[Pod] = []
    for i in range(25):
        if placed and rnd.random() < 0.3:
            scheduler.unreserve(placed.pop(rnd.randrange(len(placed))))
        if rnd.random() < 0.15:  # a node leaves, another joins (perhaps in a new zone)
            gone = rnd.choice(sorted(cluster.nodes))
            cluster.remove_node(gone)
            tree.remove(gone)
            spec = _random_node(rnd, f"m{i:03d}", zones)
            cluster.set_node(spec)
            tree.add(spec.name, zone_key(spec.labels))
        pod = _pod(f"p{i}", cpu=rnd.choice([100, 1500, 3000, 6000]), memory=rnd.choice([1, 6, 12]) * 2**30)
        to_find = num_feasible_nodes_to_find(percentage, len(cluster.nodes))
        node, next_start = _expected(scheduler, tree, pod, to_find)
        decision = scheduler.schedule(pod, now=float(i))
        assert decision.node == node
        assert scheduler.next_start_node_index == next_start
        if decision.node is not None:
            scheduler.bound(pod, now=float(i))
            placed.append(pod)


@settings(max_examples=8, deadline=None)
@given(shapes=st.lists(node_shapes(max_numa=4), min_size=1, max_size=4), data=st.data())
def test_a_profile_with_exact_placement_places_only_on_nodes_its_search_kept(shapes, data):
    """toposched's own profile asked to look at 10%: every pod lands on one of the feasible nodes the
    search kept (the replica may refuse the best of them, and the next is tried), the start moves
    as the node-by-node walk says, and what the replicas hold is never given twice."""
    cluster = Cluster()
    for i in range(110):
        shape = shapes[i % len(shapes)]
        cluster.set_node(NodeSpec(f"n{i:03d}", labels={ZONE: f"z{i % 3}"}), machine=shape.machine,
                         kubelet_config=shape.config, device_plugins=shape.devices)
    profile = load_profile("toposched")
    profile.percentage_of_nodes_to_score = 10
    scheduler = Scheduler(cluster, profile)
    tree = _tree_of(cluster)
    to_find = num_feasible_nodes_to_find(10, len(cluster.nodes))
    for i in range(12):
        pod = data.draw(pods(f"p{i}"))
        scheduler.table.refresh()
        state, status = scheduler.runner.pre_filter(pod)
        if not status.is_success:
            continue
        kept, next_start = _walk(scheduler, tree, state, pod, to_find)
        decision = scheduler.schedule(pod, now=float(i))
        assert decision.node is None or scheduler.table.index[decision.node] in kept
        assert scheduler.next_start_node_index == next_start
        if decision.node is not None:
            scheduler.bound(pod, now=float(i))
    for record in cluster.nodes.values():
        masks = [entry.placement.cpu_mask for entry in record.pods.values() if entry.placement is not None]
        union = 0
        for mask in masks:
            assert not union & mask, f"{record.spec.name}: a CPU given twice"
            union |= mask
