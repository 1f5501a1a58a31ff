"""The memory manager's Static policy against upstream's own test tables, plus properties.

The tables restate kubernetes ``pkg/kubelet/cm/memorymanager/policy_static_test.go`` (new
policy, start/validate state, allocate, allocate with init and restartable init containers,
remove, topology hints, pod requests) and the reservation/hint tables of
``memory_manager_test.go``. Machine states are written as upstream writes them: per NUMA node
a table per resource with allocatable, free, reserved, system-reserved and total.
"""

from __future__ import annotations

import json
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_path
from tests.kubelet.subset_paths import subset_arrays_from
from toposched.errors import InputError
from toposched.kubelet.config import KubeletConfig
from toposched.kubelet.hints import TopologyHint
from toposched.kubelet.memory_manager import (
    MemoryManagerError,
    StaticMemoryPolicy,
    hugepage_resource_name,
    pod_requested_memory,
    validate_reserved_memory,
)
from toposched.kubelet.memory_state import (
    Block,
    MemoryManagerCheckpoint,
    MemoryTable,
    NUMANodeState,
    format_memory_state,
    machine_states_equal,
    parse_memory_state,
)
from toposched.topology import Machine, NUMANode
from toposched.workload import Container, Pod

MB = 1 << 20
GB = 1 << 30
HP1G = "hugepages-1Gi"
HP2M = "hugepages-2Mi"


@pytest.fixture(autouse=True, params=[None, 1], ids=["lists", "arrays"])
def _subset_path(request: pytest.FixtureRequest):
    """Every test here runs twice: hint sets walked as lists (these machines have few NUMA nodes),
    and listed with NumPy as on machines with many."""
    with subset_arrays_from(request.param):
        yield


# ---- builders -------------------------------------------------------------------------------


def table(allocatable: int, free: int, reserved: int, system_reserved: int, total: int) -> MemoryTable:
    """A memory table in the column order upstream's tables use."""
    return MemoryTable(
        total=total, system_reserved=system_reserved, allocatable=allocatable, reserved=reserved, free=free
    )


def node(cells: tuple[int, ...], assignments: int = 0, **tables: MemoryTable) -> NUMANodeState:
    names = {"memory": "memory", "hp1g": HP1G, "hp2m": HP2M}
    return NUMANodeState(assignments, {names[k]: v for k, v in tables.items()}, cells)


def machine_for(state: dict[int, NUMANodeState]) -> Machine:
    """A machine whose NUMA nodes carry the memory and hugepages the state's tables describe."""
    nodes = []
    for nid, s in sorted(state.items()):
        pages = {}
        hp_total = 0
        for name, size in ((HP1G, GB), (HP2M, 2 * MB)):
            t = s.table(name)
            if t is not None:
                pages[size] = t.total // size
                hp_total += t.total
        nodes.append(NUMANode(nid, memory_bytes=s.table("memory").total + hp_total, hugepages=pages))
    return Machine((), tuple(nodes))


def policy_with(state: dict[int, NUMANodeState], reserved: dict, assignments: dict | None = None) -> StaticMemoryPolicy:
    """A policy holding exactly this state, set without validation as upstream's tests set it."""
    policy = StaticMemoryPolicy(machine_for(state), reserved)
    policy.restore(MemoryManagerCheckpoint("Static", state, assignments or {}), validate=False)
    return policy


def ctr(
    name: str, memory: int, hp1g: int | None = None, *, burstable: bool = False, sidecar: bool = False
) -> Container:
    requests = {"cpu": 1000, "memory": memory}
    if hp1g is not None:
        requests[HP1G] = hp1g
    limits = {k: (2 * v if burstable and k != "cpu" else v) for k, v in requests.items()}
    return Container(name, requests, limits, restart_policy="Always" if sidecar else None)


def pod(uid: str, *containers: Container, init: tuple[Container, ...] = ()) -> Pod:
    return Pod(name=uid, uid=uid, containers=tuple(containers), init_containers=init)


def guaranteed(uid: str, name: str) -> Pod:
    """Upstream's requirementsGuaranteed: 1Gi memory and 1Gi of 1Gi hugepages."""
    return pod(uid, ctr(name, GB, GB))


def burstable(uid: str, name: str) -> Pod:
    return pod(uid, ctr(name, GB, GB, burstable=True))


def hint(*nodes: int, preferred: bool = False) -> TopologyHint:
    return TopologyHint(frozenset(nodes), preferred)


NIL = TopologyHint(None, False)
NIL_PREFERRED = TopologyHint(None, True)
RESERVED_0 = {0: {"memory": 512 * MB}}


def blocks(nodes: tuple[int, ...], memory: int, hp: int | None = None, hp_name: str = HP1G) -> tuple[Block, ...]:
    out = [Block(nodes, "memory", memory)]
    if hp is not None:
        out.append(Block(nodes, hp_name, hp))
    return tuple(out)


def block_sets(assignments) -> dict:
    """Assignments with each container's blocks as a set (upstream compares them unordered)."""
    return {p: {c: set(b) for c, b in cs.items()} for p, cs in assignments.items()}


# ---- NewPolicyStatic / Name ------------------------------------------------------------------


def test_new_policy_needs_system_reserved_memory() -> None:
    machine = Machine((), (NUMANode(0, memory_bytes=4 * GB), NUMANode(1, memory_bytes=4 * GB)))
    with pytest.raises(InputError) as err:
        StaticMemoryPolicy(machine, {})
    assert err.value.message == "[memorymanager] you should specify the system reserved memory"
    policy = StaticMemoryPolicy(machine, {0: {}, 1: {"memory": 512 * MB}})
    assert policy.name == "Static"


# ---- Start: state validation -----------------------------------------------------------------

ONE_GB_PAGE = {GB: 1}


def single_node_machine(memory: int, pages: int) -> Machine:
    return Machine((), (NUMANode(0, memory_bytes=memory, hugepages={GB: pages}),))


STATE_2G = {0: node((0,), memory=table(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB), hp1g=table(GB, GB, 0, 0, GB))}

START_FAILURES = [
    (
        "machine state empty while assignments exist",
        single_node_machine(2 * GB, 1),
        {},
        {"pod": {"container1": (Block((0,), "memory", 512 * MB),)}},
        "[memorymanager] machine state can not be empty when it has memory assignments",
    ),
    (
        "machine state lacks a NUMA node",
        Machine(
            (),
            (
                NUMANode(0, memory_bytes=2 * GB, hugepages=ONE_GB_PAGE),
                NUMANode(1, memory_bytes=2 * GB, hugepages=ONE_GB_PAGE),
            ),
        ),
        STATE_2G,
        {},
        "[memorymanager] the expected machine state is different from the real one",
    ),
    (
        "machine state lacks the memory resource",
        single_node_machine(2 * GB, 1),
        {0: node((0,), hp1g=table(GB, GB, 0, 0, GB))},
        {},
        "[memorymanager] the expected machine state is different from the real one",
    ),
    (
        "machine state has a wrong total memory",
        single_node_machine(2 * GB, 1),
        {0: node((0,), memory=table(1536 * MB, 1536 * MB, 0, 512 * MB, 1536 * MB))},
        {},
        "[memorymanager] the expected machine state is different from the real one",
    ),
    (
        "machine state has a wrong system-reserved memory",
        single_node_machine(2 * GB, 1),
        {0: node((0,), memory=table(1536 * MB, 1536 * MB, 0, 1024, 2 * GB))},
        {},
        "[memorymanager] the expected machine state is different from the real one",
    ),
    (
        "reserved memory differs from the containers' blocks",
        single_node_machine(2 * GB, 1),
        {0: node((0,), 1, memory=table(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB))},
        {"pod": {"container1": (Block((0,), "memory", 512 * MB),)}},
        "[memorymanager] the expected machine state is different from the real one",
    ),
    # Upstream's machines for the next three rows hold fewer bytes than their hugepages plus the
    # reservation (its uint64 wraps); ours get enough memory, the state still differs.
    (
        "machine state has a wrong hugepages size",
        single_node_machine(4 * GB, 2),
        STATE_2G,
        {},
        "[memorymanager] the expected machine state is different from the real one",
    ),
    (
        "machine state has wrong system-reserved hugepages",
        single_node_machine(4 * GB, 2),
        {0: node((0,), memory=table(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB), hp1g=table(GB, GB, 0, GB, 2 * GB))},
        {},
        "[memorymanager] the expected machine state is different from the real one",
    ),
    (
        "reserved hugepages differ from the containers' blocks",
        single_node_machine(6 * GB, 4),
        {
            0: node(
                (0,),
                2,
                memory=table(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB),
                hp1g=table(4 * GB, GB, 3 * GB, 0, 4 * GB),
            )
        },
        {"pod1": {"container1": (Block((0,), HP1G, GB),)}, "pod2": {"container2": (Block((0,), HP1G, GB),)}},
        "[memorymanager] the expected machine state is different from the real one",
    ),
    (
        "a block names a NUMA node the machine lacks",
        single_node_machine(2 * GB, 1),
        STATE_2G,
        {"pod1": {"container1": (Block((1,), "memory", GB),)}},
        "[memorymanager] (pod: pod1, container: container1) the memory assignment uses the NUMA that does not exist",
    ),
    (
        "a block names a resource the machine lacks",
        single_node_machine(2 * GB, 1),
        {0: node((0,), 2, memory=table(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB), hp1g=table(GB, GB, 0, 0, GB))},
        {"pod1": {"container1": (Block((0,), "memory", GB), Block((0,), HP2M, GB))}},
        "[memorymanager] (pod: pod1, container: container1) the memory assignment uses memory resource that does not exist",
    ),
    (
        "assignment count differs from the blocks",
        single_node_machine(2 * GB, 1),
        {0: node((0,), 1, memory=table(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB), hp1g=table(GB, GB, 0, 0, GB))},
        {"pod1": {"container1": blocks((0,), GB, GB)}},
        "[memorymanager] the expected machine state is different from the real one",
    ),
]


@pytest.mark.parametrize(
    ("case", "machine", "state", "entries", "message"), START_FAILURES, ids=[c[0] for c in START_FAILURES]
)
def test_start_refuses_inconsistent_state(case, machine, state, entries, message) -> None:
    policy = StaticMemoryPolicy(machine, RESERVED_0)
    before = dict(policy.machine_state)
    with pytest.raises(InputError) as err:
        policy.restore(
            MemoryManagerCheckpoint("Static", state, entries), source="/var/lib/kubelet/memory_manager_state"
        )
    assert err.value.message == message
    assert err.value.source == "/var/lib/kubelet/memory_manager_state"
    assert dict(policy.machine_state) == before
    assert dict(policy.assignments) == {}


def test_start_fills_an_empty_state_with_defaults() -> None:
    policy = StaticMemoryPolicy(single_node_machine(3 * GB, 1), RESERVED_0)
    policy.restore(MemoryManagerCheckpoint("Static", {}, {}))
    assert dict(policy.machine_state) == {
        0: node((0,), memory=table(1536 * MB, 1536 * MB, 0, 512 * MB, 3 * GB), hp1g=table(GB, GB, 0, 0, GB))
    }
    assert dict(policy.assignments) == {}


def test_start_accepts_cross_numa_blocks_matching_the_state() -> None:
    machine = Machine(
        (),
        (
            NUMANode(0, memory_bytes=2176 * MB, hugepages=ONE_GB_PAGE),
            NUMANode(1, memory_bytes=2176 * MB, hugepages=ONE_GB_PAGE),
        ),
    )
    entries = {
        "pod1": {"container1": blocks((0, 1), 768 * MB, GB)},
        "pod2": {"container2": blocks((0, 1), 256 * MB, GB)},
    }
    policy = StaticMemoryPolicy(machine, {0: {"memory": 512 * MB}, 1: {"memory": 512 * MB}})
    total = 2176 * MB
    state = {
        0: node((0, 1), 4, memory=table(640 * MB, 0, 640 * MB, 512 * MB, total), hp1g=table(GB, 0, GB, 0, GB)),
        1: node((0, 1), 4, memory=table(640 * MB, 256 * MB, 384 * MB, 512 * MB, total), hp1g=table(GB, 0, GB, 0, GB)),
    }
    policy.restore(MemoryManagerCheckpoint("Static", state, entries))
    assert dict(policy.machine_state) == state
    assert block_sets(policy.assignments) == block_sets(entries)


def test_start_refuses_another_policy_name() -> None:
    policy = StaticMemoryPolicy(single_node_machine(3 * GB, 1), RESERVED_0)
    with pytest.raises(InputError) as err:
        policy.restore(MemoryManagerCheckpoint("None", {}, {}))
    assert err.value.message == '[memorymanager] configured policy "Static" differs from state checkpoint policy "None"'


# ---- Allocate --------------------------------------------------------------------------------

ONE_NODE_FREE = {0: node((0,), memory=table(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB), hp1g=table(GB, GB, 0, 0, GB))}
ONE_NODE_USED = {
    0: node((0,), 2, memory=table(1536 * MB, 512 * MB, GB, 512 * MB, 2 * GB), hp1g=table(GB, 0, GB, 0, GB))
}
THREE_NODES_0_USED = {
    0: node((0,), 1, memory=table(GB, 512 * MB, 512 * MB, 512 * MB, 1536 * MB), hp1g=table(GB, GB, 0, 0, GB)),
    1: node((1,), memory=table(512 * MB, 512 * MB, 0, 512 * MB, 1536 * MB), hp1g=table(GB, GB, 0, 0, GB)),
    2: node((2,), memory=table(512 * MB, 512 * MB, 0, 512 * MB, 1536 * MB), hp1g=table(GB, GB, 0, 0, GB)),
}
THREE_NODES_GROUP_12 = {
    0: node((0,), memory=table(512 * MB, 512 * MB, 0, 512 * MB, GB), hp1g=table(GB, GB, 0, 0, GB)),
    1: node((1, 2), 1, memory=table(1536 * MB, 512 * MB, GB, 512 * MB, 2 * GB), hp1g=table(GB, GB, 0, 0, GB)),
    2: node((1, 2), 1, memory=table(1536 * MB, 512 * MB, GB, 512 * MB, 2 * GB), hp1g=table(GB, GB, 0, 0, GB)),
}
FOUR_SMALL_NODES = {
    n: node((n,), memory=table(512 * MB, 512 * MB, 0, 512 * MB, GB), hp1g=table(GB, GB, 0, 0, GB)) for n in range(4)
}
RESERVED_EACH = {n: {"memory": 512 * MB} for n in range(4)}
RESERVED_3 = {n: {"memory": 512 * MB} for n in range(3)}

ALLOCATE_FAILURES = [
    (
        "no NUMA hint and no node with enough memory for a default hint",
        ONE_NODE_USED,
        RESERVED_0,
        {"pod1": {"container1": blocks((0,), GB, GB)}},
        guaranteed("pod2", "container2"),
        NIL,
        "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available",
    ),
    (
        "preferred nil hint while the best default hint is not preferred",
        THREE_NODES_0_USED,
        RESERVED_3,
        {"pod1": {"container1": (Block((0,), "memory", 512 * MB),)}},
        guaranteed("pod2", "container2"),
        NIL_PREFERRED,
        "[memorymanager] failed to find the default preferred hint",
    ),
    (
        "a too narrow hint that cannot be widened",
        THREE_NODES_GROUP_12,
        RESERVED_3,
        {},
        guaranteed("pod1", "container1"),
        hint(0),
        "[memorymanager] failed to find NUMA nodes to extend the current topology hint",
    ),
    (
        "a preferred hint whose widening is not preferred",
        THREE_NODES_0_USED,
        RESERVED_3,
        {"pod1": {"container1": (Block((0,), "memory", 512 * MB),)}},
        guaranteed("pod2", "container2"),
        hint(1, preferred=True),
        "[memorymanager] failed to find the extended preferred hint",
    ),
]


@pytest.mark.parametrize(
    ("case", "state", "reserved", "entries", "the_pod", "the_hint", "message"),
    ALLOCATE_FAILURES,
    ids=[c[0] for c in ALLOCATE_FAILURES],
)
def test_allocate_refusals(case, state, reserved, entries, the_pod, the_hint, message) -> None:
    policy = policy_with(state, reserved, entries)
    with pytest.raises(MemoryManagerError) as err:
        policy.allocate(the_pod, the_pod.containers[0], the_hint)
    assert err.value.message == message
    assert dict(policy.machine_state) == state
    assert block_sets(policy.assignments) == block_sets(entries)


def test_allocate_ignores_pods_that_are_not_guaranteed() -> None:
    state = {0: node((), memory=table(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB), hp1g=table(GB, GB, 0, 0, GB))}
    policy = policy_with(state, RESERVED_0)
    the_pod = burstable("pod1", "container1")
    assert not policy.manages(the_pod)
    result = policy.allocate(the_pod, "container1", NIL)
    assert result.blocks == () and result.numa_nodes is None
    assert dict(policy.machine_state) == state
    assert dict(policy.assignments) == {}


def test_allocate_again_changes_nothing() -> None:
    state = {0: node((), memory=table(1536 * MB, 512 * MB, GB, 512 * MB, 2 * GB), hp1g=table(GB, GB, 0, 0, GB))}
    entries = {"pod1": {"container1": (Block((0,), "memory", GB),)}}
    policy = policy_with(state, RESERVED_0, entries)
    result = policy.allocate(guaranteed("pod1", "container1"), "container1", NIL)
    assert result.blocks == (Block((0,), "memory", GB),)
    assert dict(result.numa_memory) == {}
    assert dict(policy.machine_state) == state
    assert block_sets(policy.assignments) == block_sets(entries)


def test_allocate_with_a_default_hint() -> None:
    policy = policy_with(ONE_NODE_FREE, RESERVED_0)
    result = policy.allocate(guaranteed("pod1", "container1"), "container1", NIL)
    assert result.numa_nodes == frozenset({0})
    assert set(result.blocks) == set(blocks((0,), GB, GB))
    assert {n: dict(r) for n, r in result.numa_memory.items()} == {0: {"memory": GB, HP1G: GB}}
    assert dict(policy.machine_state) == {
        0: node((0,), 2, memory=table(1536 * MB, 512 * MB, GB, 512 * MB, 2 * GB), hp1g=table(GB, 0, GB, 0, GB))
    }


def test_a_default_hint_with_no_preferred_set_is_the_narrowest_valid_one() -> None:
    """Node 0 alone could hold 3 GiB but has 1 GiB free, and its pod keeps it out of wider sets;
    nodes 1-3 (1.5 GiB each) hold 3 GiB two at a time: no set is preferred, and among the valid
    ones the narrowest with the smallest mask wins."""
    small = table(3 * GB // 2, 3 * GB // 2, 0, 0, 3 * GB // 2)
    state = {0: node((0,), 1, memory=table(8 * GB, GB, 7 * GB, 0, 8 * GB))} | {n: node((n,), memory=small) for n in (1, 2, 3)}
    policy = policy_with(state, RESERVED_0)
    result = policy.allocate(pod("pod1", ctr("c", 3 * GB)), "c", NIL)
    assert result.numa_nodes == frozenset({1, 2})


def test_a_default_hint_takes_the_narrowest_set_before_the_smallest_mask() -> None:
    """Nodes 0-2 free 4 GiB each, nodes 3-4 free 6 GiB: 10 GiB fit {0, 1, 2} (mask 7) and {0, 3}
    (mask 9), among others; the narrower set wins although its mask is larger."""
    def free(amount: int, reserved: int = 0) -> MemoryTable:
        return table(amount, amount, 0, reserved, amount + reserved)
    state = {0: node((0,), memory=free(4 * GB, 512 * MB))} | {n: node((n,), memory=free(4 * GB)) for n in (1, 2)}
    state |= {n: node((n,), memory=free(6 * GB)) for n in (3, 4)}
    policy = policy_with(state, RESERVED_0)
    result = policy.allocate(pod("pod1", ctr("c", 10 * GB)), "c", NIL)
    assert result.numa_nodes == frozenset({0, 3})


def test_allocate_across_numa_nodes() -> None:
    policy = policy_with(FOUR_SMALL_NODES, RESERVED_EACH)
    result = policy.allocate(guaranteed("pod1", "container1"), "container1", NIL_PREFERRED)
    assert result.numa_nodes == frozenset({0, 1})
    assert block_sets(policy.assignments) == {"pod1": {"container1": set(blocks((0, 1), GB, GB))}}
    assert dict(policy.machine_state) == {
        0: node((0, 1), 2, memory=table(512 * MB, 0, 512 * MB, 512 * MB, GB), hp1g=table(GB, 0, GB, 0, GB)),
        1: node((0, 1), 2, memory=table(512 * MB, 0, 512 * MB, 512 * MB, GB), hp1g=table(GB, GB, 0, 0, GB)),
        2: FOUR_SMALL_NODES[2],
        3: FOUR_SMALL_NODES[3],
    }
    # The bytes came from node 0 first, then node 1.
    assert {n: dict(r) for n, r in result.numa_memory.items()} == {
        0: {"memory": 512 * MB, HP1G: GB},
        1: {"memory": 512 * MB},
    }


def test_allocate_refuses_a_hint_that_breaks_the_groups() -> None:
    # Node 0 holds a single-NUMA block, so it cannot join a group with node 1.
    state = {
        0: node((0,), 1, memory=table(GB, 512 * MB, 512 * MB, 512 * MB, 1536 * MB)),
        1: node((1,), memory=table(GB, GB, 0, 512 * MB, 1536 * MB)),
    }
    policy = policy_with(
        state, {0: {"memory": 512 * MB}, 1: {"memory": 512 * MB}}, {"a": {"c": (Block((0,), "memory", 512 * MB),)}}
    )
    p = pod("b", ctr("c", 1280 * MB))
    assert policy.get_topology_hints(p, "c") == {}
    with pytest.raises(MemoryManagerError) as err:
        policy.allocate(p, "c", hint(0, 1, preferred=False))
    assert err.value.message == "[memorymanager] preferred hint violates NUMA node allocation"
    assert dict(policy.machine_state) == state


# ---- Allocate with init containers ---------------------------------------------------------


def init_pod(uid: str, init_sizes: list[int], app_sizes: list[int]) -> Pod:
    return pod(
        uid,
        *(ctr(f"container{i + 1}", s * GB, s * GB) for i, s in enumerate(app_sizes)),
        init=tuple(ctr(f"initContainer{i + 1}", s * GB, s * GB) for i, s in enumerate(init_sizes)),
    )


INIT_CASES = [
    # (init requests, app requests, node memory, expected block sizes per container, reserved afterwards) in GiB
    ([1, 2], [3, 4], 8, {"initContainer1": 0, "initContainer2": 0, "container1": 3, "container2": 4}, 7),
    ([4, 3], [2, 1], 8, {"initContainer1": 0, "initContainer2": 1, "container1": 2, "container2": 1}, 4),
    ([7, 4], [4, 3], 8, {"initContainer1": 0, "initContainer2": 0, "container1": 4, "container2": 3}, 7),
    ([7, 4], [5, 2], 10, {"initContainer1": 0, "initContainer2": 0, "container1": 5, "container2": 2}, 7),
]


@pytest.mark.parametrize(("inits", "apps", "size", "expected", "reserved"), INIT_CASES)
def test_init_container_memory_is_reused(inits, apps, size, expected, reserved) -> None:
    memory_total = size * GB
    state = {
        0: node(
            (0,),
            memory=table(memory_total - 512 * MB, memory_total - 512 * MB, 0, 512 * MB, memory_total),
            hp1g=table(size * GB, size * GB, 0, 0, size * GB),
        )
    }
    policy = policy_with(state, RESERVED_0)
    p = init_pod("pod1", inits, apps)
    for c in p.all_containers:
        policy.allocate(p, c, NIL)
    assert block_sets(policy.assignments) == {
        "pod1": {name: set(blocks((0,), s * GB, s * GB)) for name, s in expected.items()}
    }
    assert dict(policy.machine_state) == {
        0: node(
            (0,),
            8,
            memory=table(
                memory_total - 512 * MB, memory_total - 512 * MB - reserved * GB, reserved * GB, 512 * MB, memory_total
            ),
            hp1g=table(size * GB, (size - reserved) * GB, reserved * GB, 0, size * GB),
        )
    }


def test_restartable_init_container_memory_is_not_reused() -> None:
    state = {
        0: node((0,), memory=table(7 * GB, 7 * GB, 0, 512 * MB, 7680 * MB), hp1g=table(7 * GB, 7 * GB, 0, 0, 7 * GB))
    }
    policy = policy_with(state, RESERVED_0)
    p = pod(
        "pod1",
        ctr("container1", GB, GB),
        init=(
            ctr("initContainer1", GB, GB),
            ctr("restartableInitContainer2", 2 * GB, 2 * GB, sidecar=True),
            ctr("initContainer3", 3 * GB, 3 * GB),
            ctr("restartableInitContainer4", 4 * GB, 4 * GB, sidecar=True),
        ),
    )
    for c in p.all_containers:
        policy.allocate(p, c, NIL)
    sizes = {
        "initContainer1": 0,
        "restartableInitContainer2": 2,
        "initContainer3": 0,
        "restartableInitContainer4": 4,
        "container1": 1,
    }
    assert block_sets(policy.assignments) == {"pod1": {n: set(blocks((0,), s * GB, s * GB)) for n, s in sizes.items()}}
    assert dict(policy.machine_state) == {
        0: node(
            (0,), 10, memory=table(7 * GB, 0, 7 * GB, 512 * MB, 7680 * MB), hp1g=table(7 * GB, 0, 7 * GB, 0, 7 * GB)
        )
    }


def test_restartable_init_containers_already_present_change_nothing() -> None:
    state = {
        0: node(
            (), memory=table(2560 * MB, 512 * MB, 2048 * MB, 512 * MB, 3 * GB), hp1g=table(2 * GB, 2 * GB, 0, 0, 2 * GB)
        )
    }
    entries = {"pod1": {"initContainer1": (Block((0,), "memory", GB),), "container1": (Block((0,), "memory", GB),)}}
    policy = policy_with(state, RESERVED_0, entries)
    p = pod("pod1", ctr("container1", GB, GB), init=(ctr("initContainer1", GB, GB, sidecar=True),))
    for c in p.all_containers:
        policy.allocate(p, c, NIL)
    assert dict(policy.machine_state) == state
    assert block_sets(policy.assignments) == block_sets(entries)


def test_reusable_memory_of_other_pods_is_forgotten() -> None:
    # Upstream keeps init-container leftovers for one pod only: once another pod allocates,
    # the first pod's app containers take fresh memory.
    total = 16 * GB
    state = {0: node((0,), memory=table(total - 512 * MB, total - 512 * MB, 0, 512 * MB, total))}
    policy = policy_with(state, RESERVED_0)
    first = pod("a", ctr("app", 2 * GB), init=(ctr("init", 2 * GB),))
    policy.allocate(first, "init", NIL)
    policy.allocate(pod("b", ctr("x", GB)), "x", NIL)
    result = policy.allocate(first, "app", NIL)
    assert dict(result.numa_memory[0]) == {"memory": 2 * GB}


# ---- RemoveContainer ---------------------------------------------------------------------------


def test_remove_unknown_container_changes_nothing() -> None:
    state = {0: node((), memory=table(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB), hp1g=table(GB, GB, 0, 0, GB))}
    policy = policy_with(state, RESERVED_0)
    policy.remove_container("pod1", "container1")
    assert dict(policy.machine_state) == state
    assert dict(policy.assignments) == {}


def test_remove_single_numa_container() -> None:
    policy = policy_with(ONE_NODE_USED, RESERVED_0, {"pod1": {"container1": blocks((0,), GB, GB)}})
    policy.remove_container("pod1", "container1")
    assert dict(policy.assignments) == {}
    assert dict(policy.machine_state) == ONE_NODE_FREE


def test_remove_cross_numa_container() -> None:
    state = {
        0: node((0, 1), 2, memory=table(512 * MB, 0, 512 * MB, 512 * MB, GB), hp1g=table(GB, 0, GB, 0, GB)),
        1: node((0, 1), 2, memory=table(512 * MB, 0, 512 * MB, 512 * MB, GB), hp1g=table(GB, GB, 0, 0, GB)),
    }
    policy = policy_with(
        state, {0: {"memory": 512 * MB}, 1: {"memory": 512 * MB}}, {"pod1": {"container1": blocks((0, 1), GB, GB)}}
    )
    policy.remove_container("pod1", "container1")
    assert dict(policy.assignments) == {}
    assert dict(policy.machine_state) == {
        n: node((n,), memory=table(512 * MB, 512 * MB, 0, 512 * MB, GB), hp1g=table(GB, GB, 0, 0, GB)) for n in (0, 1)
    }


# ---- GetTopologyHints ---------------------------------------------------------------------------


def test_no_hints_for_pods_that_are_not_guaranteed() -> None:
    policy = policy_with(ONE_NODE_FREE, RESERVED_0)
    assert policy.get_topology_hints(burstable("pod1", "container1"), "container1") is None
    assert policy.get_pod_topology_hints(burstable("pod1", "container1")) is None


REGENERATE_CASES = [
    (
        "blocks match the request",
        blocks((0,), GB, GB),
        {"memory": [hint(0, preferred=True)], HP1G: [hint(0, preferred=True)]},
    ),
    ("fewer blocks than requested resources", (Block((0,), "memory", GB),), None),
    ("a block of a resource the container does not request", blocks((0,), GB, GB, HP2M), None),
    ("a block of another size than requested", (Block((0,), "memory", 512 * MB), Block((0,), HP1G, GB)), None),
]


@pytest.mark.parametrize(("case", "recorded", "expected"), REGENERATE_CASES, ids=[c[0] for c in REGENERATE_CASES])
def test_hints_regenerated_from_recorded_blocks(case, recorded, expected) -> None:
    policy = policy_with(ONE_NODE_FREE, RESERVED_0, {"pod1": {"container1": recorded}})
    assert policy.get_topology_hints(guaranteed("pod1", "container1"), "container1") == expected


def test_hints_for_a_new_container_avoid_used_groups() -> None:
    free_node = {"memory": table(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB), "hp1g": table(GB, GB, 0, 0, GB)}
    state = {
        0: node((0, 1), 2, memory=table(1536 * MB, 0, 1536 * MB, 512 * MB, 2 * GB), hp1g=table(GB, 0, GB, 0, GB)),
        1: node((0, 1), 2, memory=table(1536 * MB, GB, 512 * MB, 512 * MB, 2 * GB), hp1g=table(GB, 0, GB, 0, GB)),
        2: node((2,), **free_node),
        3: node((3,), **free_node),
    }
    policy = policy_with(state, RESERVED_EACH, {"pod1": {"container1": blocks((0, 1), 2 * GB, 2 * GB)}})
    expected = [hint(2, preferred=True), hint(3, preferred=True), hint(2, 3)]
    assert policy.get_topology_hints(guaranteed("pod2", "container2"), "container2") == {
        "memory": expected,
        HP1G: expected,
    }


def test_no_preferred_multi_numa_hint_when_one_node_would_do() -> None:
    state = {
        0: node(
            (0, 1),
            2,
            memory=table(1536 * MB, 0, 1536 * MB, 512 * MB, 2 * GB),
            hp2m=table(20 * MB, 0, 20 * MB, 0, 20 * MB),
        ),
        1: node(
            (0, 1),
            2,
            memory=table(1536 * MB, GB, 512 * MB, 512 * MB, 2 * GB),
            hp2m=table(20 * MB, 16 * MB, 4 * MB, 0, 20 * MB),
        ),
    }
    entries = {"pod1": {"container1": blocks((0, 1), 2 * GB, 24 * MB, HP2M)}}
    policy = policy_with(state, {0: {"memory": 512 * MB}, 1: {"memory": 512 * MB}}, entries)
    p = pod(
        "pod2",
        Container("container2", {"cpu": 1000, "memory": GB, HP2M: 16 * MB}, {"cpu": 1000, "memory": GB, HP2M: 16 * MB}),
    )
    assert policy.get_topology_hints(p, "container2") == {"memory": [hint(0, 1)], HP2M: [hint(0, 1)]}


# memory_manager_test.go TestGetTopologyHints: node 0 holds two single-NUMA containers.
MANAGER_HINT_STATE = {
    0: node((0,), 4, memory=table(9 * GB, 7 * GB, 2 * GB, GB, 10 * GB), hp1g=table(5 * GB, 3 * GB, 2 * GB, 0, 5 * GB)),
    1: node((1,), 0, memory=table(9 * GB, 9 * GB, 0, GB, 10 * GB), hp1g=table(5 * GB, 5 * GB, 0, 0, 5 * GB)),
}
MANAGER_HINT_ENTRIES = {"fakePod1": {"fakeContainer1": blocks((0,), GB, GB), "fakeContainer2": blocks((0,), GB, GB)}}


def test_manager_hints_while_the_other_pod_runs() -> None:
    policy = policy_with(MANAGER_HINT_STATE, {0: {"memory": GB}, 1: {"memory": GB}}, MANAGER_HINT_ENTRIES)
    expected = [hint(0, preferred=True), hint(1, preferred=True)]
    assert policy.get_topology_hints(guaranteed("fakePod2", "fakeContainer1"), "fakeContainer1") == {
        "memory": expected,
        HP1G: expected,
    }


def test_manager_hints_once_the_other_pod_is_gone() -> None:
    # Upstream drops the stale pod before answering; here the pod is released explicitly.
    policy = policy_with(MANAGER_HINT_STATE, {0: {"memory": GB}, 1: {"memory": GB}}, MANAGER_HINT_ENTRIES)
    policy.release("fakePod1")
    expected = [hint(0, preferred=True), hint(1, preferred=True), hint(0, 1)]
    assert policy.get_topology_hints(guaranteed("fakePod2", "fakeContainer1"), "fakeContainer1") == {
        "memory": expected,
        HP1G: expected,
    }


def test_pod_hints_use_the_pod_request() -> None:
    policy = policy_with(FOUR_SMALL_NODES, RESERVED_EACH)
    p = pod("p", ctr("a", 256 * MB), ctr("b", 512 * MB))
    hints = policy.get_pod_topology_hints(p)
    # 768Mi does not fit one 512Mi node: pairs are the narrowest, hence preferred.
    assert hints["memory"][:2] == [hint(0, 1, preferred=True), hint(0, 2, preferred=True)]
    assert all(h.preferred == (len(h.numa_nodes) == 2) for h in hints["memory"])
    assert set(hints) == {"memory"}
    policy.allocate(p, "a", hint(0, 1))
    assert policy.get_pod_topology_hints(p) is None  # recorded blocks no longer match the pod request


# ---- getPodRequestedResources ------------------------------------------------------------------

POD_REQUEST_CASES = [
    ("largest init container beats the app containers", [(1, 1), (4, 4)], [], [(1, 1), (2, 2)], (4, 4)),
    ("app containers beat the largest init container", [(1, 1), (3, 3)], [], [(2, 2), (3, 3)], (5, 5)),
    ("resources are counted independently", [(1, 1), (3, 4)], [], [(2, 1), (3, 2)], (5, 4)),
    (
        "init container next to a restartable one beats the long-running ones",
        [(4, 4)],
        [(2, 2)],
        [(1, 1), (2, 2)],
        (6, 6),
    ),
    ("long-running ones, restartable included, beat the init containers", [(4, 4)], [(2, 2)], [(2, 2), (3, 3)], (7, 7)),
]


@pytest.mark.parametrize(
    ("case", "inits", "sidecars", "apps", "expected"), POD_REQUEST_CASES, ids=[c[0] for c in POD_REQUEST_CASES]
)
def test_pod_requested_resources(case, inits, sidecars, apps, expected) -> None:
    def c(name: str, mem: int, hp: int, sidecar: bool = False) -> Container:
        req = {"memory": mem * GB, HP1G: hp * GB}
        return Container(name, req, restart_policy="Always" if sidecar else None)

    init = tuple(c(f"restartable{i}", m, h, True) for i, (m, h) in enumerate(sidecars))
    init += tuple(c(f"init{i}", m, h) for i, (m, h) in enumerate(inits))
    p = Pod("p", containers=tuple(c(f"app{i}", m, h) for i, (m, h) in enumerate(apps)), init_containers=init)
    assert pod_requested_memory(p) == {"memory": expected[0] * GB, HP1G: expected[1] * GB}


def test_pod_request_counts_only_resources_of_app_containers() -> None:
    p = Pod(
        "p",
        containers=(Container("a", {"memory": GB}),),
        init_containers=(Container("i", {"memory": GB, HP2M: 4 * MB}),),
    )
    assert pod_requested_memory(p) == {"memory": GB}


# ---- reservations (memory_manager_test.go) -------------------------------------------------------

MSG = 'the total amount "{}" of type "{}" is not equal to the value "{}" determined by Node Allocatable feature'
VALIDATE_CASES = [
    ("nothing set", {}, {}, None),
    ("node allocatable and reservation both zero", {"memory": 0}, {0: {"memory": 0}}, None),
    ("reservation without node allocatable", {}, {0: {"memory": 12}}, MSG.format("12", "memory", "0")),
    ("node allocatable without reservation", {HP2M: 5}, {}, MSG.format("0", HP2M, "5")),
    ("reservation differs from node allocatable", {"memory": 5}, {0: {"memory": 12}}, MSG.format("12", "memory", "5")),
    (
        "reservation names a missing NUMA node",
        {"memory": 17},
        {0: {"memory": 12}, 2: {"memory": 5}},
        "the reserved memory configuration references a NUMA node 2 that does not exist on this machine",
    ),
    (
        "totals equal",
        {"memory": 17, HP2M: 77, HP1G: 13},
        {0: {"memory": 12, HP2M: 70, HP1G: 13}, 1: {"memory": 5, HP2M: 7}},
        None,
    ),
    (
        "hugepages-2Mi totals differ",
        {"memory": 17, HP2M: 14, HP1G: 13},
        {0: {"memory": 12, HP2M: 70, HP1G: 13}, 1: {"memory": 5, HP2M: 7}},
        MSG.format("77", HP2M, "14"),
    ),
]


@pytest.mark.parametrize(
    ("case", "allocatable", "reserved", "message"), VALIDATE_CASES, ids=[c[0] for c in VALIDATE_CASES]
)
def test_validate_reserved_memory(case, allocatable, reserved, message) -> None:
    if message is None:
        validate_reserved_memory([0, 1], allocatable, reserved)
        return
    with pytest.raises(InputError) as err:
        validate_reserved_memory([0, 1], allocatable, reserved)
    assert err.value.message == message


def two_node_machine(memory: int = 10 * GB, pages: int = 5) -> Machine:
    return Machine((), tuple(NUMANode(n, memory_bytes=memory, hugepages={GB: pages}) for n in (0, 1)))


def test_reservations_listed_for_every_numa_node() -> None:
    machine = Machine((), tuple(NUMANode(n, memory_bytes=8 * GB, hugepages={GB: 1, 2 * MB: 64}) for n in (0, 1)))
    one = StaticMemoryPolicy(machine, {0: {"memory": 12, HP2M: 70, HP1G: 13}})
    assert {n: dict(r) for n, r in one.system_reserved.items()} == {0: {"memory": 12, HP2M: 70, HP1G: 13}, 1: {}}
    both = StaticMemoryPolicy(machine, {0: {"memory": 12, HP2M: 70, HP1G: 13}, 1: {"memory": 5, HP2M: 7}})
    assert {n: dict(r) for n, r in both.system_reserved.items()} == {
        0: {"memory": 12, HP2M: 70, HP1G: 13},
        1: {"memory": 5, HP2M: 7},
    }


NEW_MANAGER_CASES = [
    ("reservations match node allocatable", {"memory": 2 * GB}, {0: {"memory": GB}, 1: {"memory": GB}}, None),
    (
        "reservations exceed node allocatable",
        {"memory": 2 * GB},
        {0: {"memory": GB}, 1: {"memory": 2 * GB}},
        MSG.format("3Gi", "memory", "2Gi"),
    ),
    ("reservation without node allocatable", {}, {0: {"memory": GB}}, MSG.format("1Gi", "memory", "0")),
    ("no reservation at all", {}, {}, "[memorymanager] you should specify the system reserved memory"),
]


@pytest.mark.parametrize(
    ("case", "allocatable", "reserved", "message"), NEW_MANAGER_CASES, ids=[c[0] for c in NEW_MANAGER_CASES]
)
def test_new_static_manager(case, allocatable, reserved, message) -> None:
    if message is None:
        policy = StaticMemoryPolicy(two_node_machine(), reserved, node_allocatable_reservation=allocatable)
        assert {n: dict(r) for n, r in policy.system_reserved.items()} == reserved
        return
    with pytest.raises(InputError) as err:
        StaticMemoryPolicy(two_node_machine(), reserved, node_allocatable_reservation=allocatable)
    assert err.value.message == message


def test_from_config_adds_system_kube_reserved_and_eviction() -> None:
    config = KubeletConfig(
        memory_manager_policy="Static",
        system_reserved={"memory": GB, "cpu": 500},
        kube_reserved={"memory": 512 * MB},
        eviction_memory=512 * MB,
        reserved_memory={0: {"memory": GB}, 1: {"memory": GB}},
    )
    policy = StaticMemoryPolicy.from_config(two_node_machine(), config)
    assert policy.available()[0]["memory"] == 10 * GB - GB - 5 * GB
    short = KubeletConfig(memory_manager_policy="Static", eviction_memory=100 * MB, reserved_memory={0: {"memory": GB}})
    with pytest.raises(InputError) as err:
        StaticMemoryPolicy.from_config(two_node_machine(), short)
    assert err.value.message == MSG.format("1Gi", "memory", "100Mi")
    with pytest.raises(InputError) as err:
        StaticMemoryPolicy.from_config(two_node_machine(), KubeletConfig())
    assert err.value.field == "memoryManagerPolicy"
    with pytest.raises(InputError):
        KubeletConfig(memory_manager_policy="fake")


# ---- the default state against real machines ---------------------------------------------------

# What a kubelet 1.29.2 wrote for a two-NUMA node with 10 x 1Gi pages per node (kubernetes issue
# #128669); the policy must rebuild it byte for byte from the machine and the reservations.
KUBELET_1_29_FILE = (
    '{"policyName":"Static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"hugepages-1Gi":'
    '{"total":10737418240,"systemReserved":0,"allocatable":10737418240,"reserved":0,"free":10737418240},'
    '"hugepages-2Mi":{"total":0,"systemReserved":0,"allocatable":0,"reserved":0,"free":0},"memory":'
    '{"total":99759243264,"systemReserved":10538188800,"allocatable":78483636224,"reserved":0,"free":78483636224}},'
    '"cells":[0]},"1":{"numberOfAssignments":0,"memoryMap":{"hugepages-1Gi":{"total":10737418240,'
    '"systemReserved":0,"allocatable":10737418240,"reserved":0,"free":10737418240},"hugepages-2Mi":{"total":0,'
    '"systemReserved":0,"allocatable":0,"reserved":0,"free":0},"memory":{"total":99283886080,'
    '"systemReserved":1101004800,"allocatable":87445463040,"reserved":0,"free":87445463040}},"cells":[1]}},'
    '"checksum":2552710201}'
)


def test_default_state_matches_a_real_kubelet_file() -> None:
    machine = Machine(
        (),
        (
            NUMANode(0, memory_bytes=99759243264, hugepages={GB: 10, 2 * MB: 0}),
            NUMANode(1, memory_bytes=99283886080, hugepages={GB: 10, 2 * MB: 0}),
        ),
    )
    policy = StaticMemoryPolicy(machine, {0: {"memory": 10538188800}, 1: {"memory": 1101004800}})
    assert format_memory_state(policy.checkpoint()) == KUBELET_1_29_FILE
    policy.restore(parse_memory_state(KUBELET_1_29_FILE, policy_name="Static"))
    assert policy.allocatable() == {
        0: {HP1G: 10 * GB, "memory": 78483636224},
        1: {HP1G: 10 * GB, "memory": 87445463040},
    }


@pytest.mark.parametrize(
    "name",
    [
        "machineinfo-v39-dualxeongold6230.json",
        "machineinfo-v43-dualnuma.json",
        "machineinfo-v49-dualxeongold6230r.json",
        "machineinfo-v49-ryzen5950x.json",
    ],
)
def test_default_state_of_real_cadvisor_machines(name: str) -> None:
    info = json.loads(shared_path("k8s-objects", "cadvisor-machineinfo", name).read_text())
    nodes = tuple(
        NUMANode(
            n["node_id"],
            memory_bytes=n["memory"],
            hugepages={h["page_size"] * 1024: h["num_pages"] for h in n["hugepages"]},
        )
        for n in info["topology"]
    )
    machine = Machine((), nodes)
    policy = StaticMemoryPolicy(machine, {0: {"memory": GB}})
    for n in info["topology"]:
        tables = policy.machine_state[n["node_id"]].memory_map
        assert set(tables) == {"memory", HP1G, HP2M}
        held = GB if n["node_id"] == 0 else 0
        assert tables["memory"] == MemoryTable(n["memory"], held, n["memory"] - held, 0, n["memory"] - held)
    # Checkpoint text round trips through the reader and back into a fresh policy.
    again = StaticMemoryPolicy(machine, {0: {"memory": GB}})
    again.restore(parse_memory_state(format_memory_state(policy.checkpoint()), policy_name="Static"))
    assert dict(again.machine_state) == dict(policy.machine_state)
    # The largest node fits a container of all its free memory; one byte more needs two nodes.
    biggest = max(info["topology"], key=lambda n: n["memory"] - (GB if n["node_id"] == 0 else 0))
    free = policy.available()[biggest["node_id"]]["memory"]
    hints = policy.get_topology_hints(pod("p", ctr("c", free)), "c")
    assert hint(biggest["node_id"], preferred=True) in hints["memory"]
    if len(nodes) > 1:
        wider = policy.get_topology_hints(pod("p", ctr("c", free + 1)), "c")["memory"]
        assert all(len(h.numa_nodes) > 1 for h in wider)
    else:
        assert policy.get_topology_hints(pod("p", ctr("c", free + 1)), "c") == {}


# ---- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reserved", "field"),
    [
        ({2: {"memory": GB}}, "reservedMemory[2]"),
        ({0: {"cpu": 1000}}, "reservedMemory[0].cpu"),
        ({0: {"memory": -1}}, "reservedMemory[0].memory"),
        ({0: {"memory": "1Gi"}}, "reservedMemory[0].memory"),
        ({0: {"memory": GB, HP2M: 4 * MB}}, f"reservedMemory[0].{HP2M}"),
        ({0: {"memory": GB, HP1G: 6 * GB}}, f"reservedMemory[0].{HP1G}"),
        ({0: {"memory": 6 * GB}}, "reservedMemory[0].memory"),
    ],
)
def test_bad_reservations(reserved, field) -> None:
    with pytest.raises(InputError) as err:
        StaticMemoryPolicy(two_node_machine(), reserved)
    assert err.value.field == field


def test_negative_node_allocatable_is_refused() -> None:
    with pytest.raises(InputError) as err:
        StaticMemoryPolicy(two_node_machine(), {0: {"memory": GB}}, node_allocatable_reservation={"memory": -1})
    assert err.value.field == "nodeAllocatableReservation.memory"


def test_unknown_memory_resource_and_bad_hint_leave_state_unchanged() -> None:
    policy = StaticMemoryPolicy(two_node_machine(), {0: {"memory": GB}})
    policy.allocate(guaranteed("a", "c"), "c", NIL)
    before_state, before_entries = dict(policy.machine_state), block_sets(policy.assignments)
    odd = pod("b", Container("c", {"cpu": 1000, "memory": GB, HP2M: 2 * MB}, {"cpu": 1000, "memory": GB, HP2M: 2 * MB}))
    with pytest.raises(InputError) as err:
        policy.get_topology_hints(odd, "c")
    assert err.value.field == f"c.requests.{HP2M}" and err.value.source == "pod default/b"
    with pytest.raises(InputError):
        policy.allocate(odd, "c", hint(0))
    with pytest.raises(InputError) as err:
        policy.allocate(guaranteed("d", "c"), "c", hint(0, 5))
    assert err.value.field == "hint.numa_nodes"
    with pytest.raises(InputError) as err:
        policy.allocate(guaranteed("d", "c"), "nope", hint(0))
    assert err.value.field == "container"
    assert dict(policy.machine_state) == before_state
    assert block_sets(policy.assignments) == before_entries


def test_negative_request_is_refused_by_the_pod_model() -> None:
    with pytest.raises(InputError):
        Container("c", {"memory": -1})


def test_hugepage_resource_names() -> None:
    assert [hugepage_resource_name(s) for s in (64 * 1024, 2 * MB, 32 * MB, 512 * MB, GB, 16 * GB)] == [
        "hugepages-64Ki",
        "hugepages-2Mi",
        "hugepages-32Mi",
        "hugepages-512Mi",
        "hugepages-1Gi",
        "hugepages-16Gi",
    ]


def test_release_of_a_whole_pod_and_memory_numa_nodes() -> None:
    policy = StaticMemoryPolicy(two_node_machine(), {0: {"memory": GB}, 1: {"memory": GB}})
    p = init_pod("p", [1], [2, 1])
    for c in p.all_containers:
        policy.allocate(p, c, hint(1))
    assert policy.memory_numa_nodes(p, "container1") == frozenset({1})
    policy.release(p)
    assert dict(policy.machine_state) == dict(policy.default_machine_state)
    assert dict(policy.assignments) == {}
    assert policy.memory_numa_nodes(p, "container1") is None


# ---- properties -----------------------------------------------------------------------------------


@st.composite
def machines(draw) -> tuple[Machine, dict]:
    count = draw(st.integers(1, 4))
    nodes, reserved = [], {}
    for n in range(count):
        pages = draw(st.integers(0, 3))
        memory = draw(st.integers(4, 16)) * 256 * MB + pages * GB
        nodes.append(NUMANode(n, memory_bytes=memory, hugepages={GB: pages, 2 * MB: draw(st.integers(0, 64))}))
        reserved[n] = {"memory": 256 * MB} if n == 0 or draw(st.booleans()) else {}
    return Machine((), tuple(nodes)), reserved


@st.composite
def pods(draw, uid: str) -> Pod:
    def container(name: str, sidecar: bool = False) -> Container:
        req = {"cpu": 1000, "memory": draw(st.integers(1, 12)) * 256 * MB}
        if draw(st.booleans()):
            req[HP1G] = draw(st.integers(0, 2)) * GB
        if draw(st.booleans()):
            req[HP2M] = draw(st.integers(0, 16)) * 2 * MB
        return Container(name, req, req, restart_policy="Always" if sidecar else None)

    init = tuple(container(f"i{k}", draw(st.booleans())) for k in range(draw(st.integers(0, 2))))
    apps = tuple(container(f"a{k}") for k in range(draw(st.integers(1, 2))))
    return Pod(uid, uid=uid, containers=apps, init_containers=init)


def check_no_overcommit(policy: StaticMemoryPolicy) -> None:
    """Every table adds up and no NUMA node lends more than it has; counts match the blocks."""
    state = policy.machine_state
    for s in state.values():
        for t in s.memory_map.values():
            assert t.free >= 0 and t.reserved >= 0
            assert t.free + t.reserved == t.allocatable, "a NUMA node is over-committed"
    counts = dict.fromkeys(state, 0)
    for containers in policy.assignments.values():
        for bl in containers.values():
            for b in bl:
                for n in b.numa_affinity:
                    counts[n] += 1
    assert counts == {n: s.number_of_assignments for n, s in state.items()}


def check_bookkeeping(policy: StaticMemoryPolicy) -> None:
    """With hints the memory manager itself offers, groups stay whole and bytes match the blocks."""
    state = policy.machine_state
    held: dict[tuple[tuple[int, ...], str], int] = {}
    for containers in policy.assignments.values():
        for bl in containers.values():
            for b in bl:
                for n in b.numa_affinity:
                    assert tuple(sorted(state[n].cells)) == tuple(sorted(b.numa_affinity))
                held[(b.numa_affinity, b.type)] = held.get((b.numa_affinity, b.type), 0) + b.size
    for (group, resource), size in held.items():
        assert sum(state[n].memory_map[resource].reserved for n in group) == size


def admit(policy: StaticMemoryPolicy, p: Pod, choose) -> bool:
    """Admit a pod container by container; on refusal release what was taken, like the kubelet."""
    try:
        for c in p.all_containers:
            hints = policy.get_topology_hints(p, c)
            the_hint = choose(hints)
            result = policy.allocate(p, c, the_hint)
            if the_hint.numa_nodes is not None:
                assert the_hint.numa_nodes <= result.numa_nodes, "allocation left the hint's NUMA set"
                offered = [h.numa_nodes for h in (hints or {}).get("memory", [])]
                if the_hint.numa_nodes in offered:
                    assert result.numa_nodes == the_hint.numa_nodes
            assert set(result.numa_memory) <= result.numa_nodes
            assert all(b.numa_affinity == tuple(sorted(result.numa_nodes)) for b in result.blocks)
    except MemoryManagerError:
        policy.release(p)
        return False
    return True


def chooser(data, numa_ids: tuple[int, ...], *, any_set: bool):
    """A Topology Manager stand-in: no affinity, one of the offered hints, or (any_set) any NUMA set."""

    def choose(hints) -> TopologyHint:
        options = (hints or {}).get("memory", [])
        pick = data.draw(st.sampled_from(["nil", "offered", "subset"] if any_set else ["nil", "offered"]))
        if pick == "offered" and options:
            return data.draw(st.sampled_from(options))
        if pick == "subset":
            ids = data.draw(st.sets(st.sampled_from(numa_ids), min_size=1, max_size=2))
            return TopologyHint(frozenset(ids), data.draw(st.booleans()))
        return NIL

    return choose


@settings(max_examples=50, deadline=None)
@given(machines(), st.data())
def test_property_no_overcommit_and_allocations_stay_on_the_hint(machine_reserved, data) -> None:
    # Any NUMA set may come from the Topology Manager (other providers narrow or move it).
    machine, reserved = machine_reserved
    policy = StaticMemoryPolicy(machine, reserved)
    choose = chooser(data, machine.numa_ids, any_set=True)
    for k in range(data.draw(st.integers(1, 6))):
        p = data.draw(pods(f"p{k}"))
        before_entries = block_sets(policy.assignments)
        if not admit(policy, p, choose):
            assert block_sets(policy.assignments) == before_entries
        check_no_overcommit(policy)
        if data.draw(st.booleans()) and policy.assignments:
            policy.release(data.draw(st.sampled_from(sorted(policy.assignments))))
            check_no_overcommit(policy)


@settings(max_examples=50, deadline=None)
@given(machines(), st.data())
def test_property_release_restores_the_state(machine_reserved, data) -> None:
    # Hints as the memory manager offers them (Topology Manager policy none, or memory alone).
    machine, reserved = machine_reserved
    policy = StaticMemoryPolicy(machine, reserved)
    choose = chooser(data, machine.numa_ids, any_set=False)
    admitted = []
    for k in range(data.draw(st.integers(1, 6))):
        p = data.draw(pods(f"p{k}"))
        snapshot = dict(policy.machine_state)
        if admit(policy, p, choose):
            admitted.append(p)
        else:
            assert machine_states_equal(snapshot, policy.machine_state)
        check_no_overcommit(policy)
        check_bookkeeping(policy)

    # Release one pod again: the state returns to what it was before it came, exactly when its
    # blocks sat on nodes nobody else used, and in upstream's sense (group sums) otherwise.
    probe = data.draw(pods("probe"))
    before = dict(policy.machine_state)
    if admit(policy, probe, choose):
        probe_nodes = {n for bl in policy.assignments["probe"].values() for b in bl for n in b.numa_affinity}
        policy.release(probe)
        assert machine_states_equal(before, policy.machine_state)
        assert {n: (s.number_of_assignments, s.cells) for n, s in before.items()} == {
            n: (s.number_of_assignments, s.cells) for n, s in policy.machine_state.items()
        }
        if len(probe_nodes) == 1 or all(before[n].number_of_assignments == 0 for n in probe_nodes):
            assert dict(policy.machine_state) == before
    check_bookkeeping(policy)

    for p in admitted:
        policy.release(p)
    assert dict(policy.machine_state) == dict(policy.default_machine_state)
    assert dict(policy.assignments) == {}


@settings(max_examples=40, deadline=None)
@given(machines(), st.data())
def test_property_every_offered_hint_can_be_allocated(machine_reserved, data) -> None:
    machine, reserved = machine_reserved
    policy = StaticMemoryPolicy(machine, reserved)
    for k in range(data.draw(st.integers(0, 3))):
        admit(policy, data.draw(pods(f"p{k}")), lambda hints: NIL)
    p = data.draw(pods("new"))
    p = Pod(p.name, uid=p.uid, containers=p.containers[:1])
    hints = policy.get_topology_hints(p, p.containers[0])
    requested = policy.requested_resources(p, p.containers[0])
    for h in hints.get("memory", []):
        trial = StaticMemoryPolicy(machine, reserved)
        trial.restore(policy.checkpoint())
        result = trial.allocate(p, p.containers[0], h)
        assert result.numa_nodes == h.numa_nodes
        for resource, size in requested.items():
            assert sum(r.get(resource, 0) for r in result.numa_memory.values()) == size
    # A NUMA set is offered only if no narrower set is also enough by allocatable memory.
    sizes = [len(h.numa_nodes) for h in hints.get("memory", []) if h.preferred]
    assert len(set(sizes)) <= 1
    fits = [
        len(s)
        for k in range(1, len(machine.numa_ids) + 1)
        for s in combinations(machine.numa_ids, k)
        if all(sum(policy.machine_state[n].memory_map[r].allocatable for n in s) >= v for r, v in requested.items())
    ]
    if sizes:
        assert sizes[0] == min(fits)


def test_single_numa_hint_inside_a_group_is_accepted_as_upstream() -> None:
    # Upstream checks the group rule only for multi-NUMA hints. A single-NUMA hint on a node of
    # a group (e.g. the Topology Manager narrowed [0,1] to [1] for the CPUs' sake) is booked and
    # the node's cells become [1] while node 0 still lists the group.
    machine = Machine((), tuple(NUMANode(n, memory_bytes=1536 * MB) for n in (0, 1)))
    policy = StaticMemoryPolicy(machine, {0: {"memory": 512 * MB}, 1: {"memory": 512 * MB}})
    wide = pod("a", ctr("c", 1536 * MB))
    assert policy.get_topology_hints(wide, "c") == {"memory": [hint(0, 1, preferred=True)]}
    policy.allocate(wide, "c", hint(0, 1, preferred=True))
    small = pod("b", ctr("c", 256 * MB))
    # The memory manager itself only offers the whole group, and not as preferred.
    assert policy.get_topology_hints(small, "c") == {"memory": [hint(0, 1)]}
    policy.allocate(small, "c", hint(1))
    assert (policy.machine_state[0].cells, policy.machine_state[1].cells) == ((0, 1), (1,))
    assert policy.available() == {0: {"memory": 0}, 1: {"memory": 256 * MB}}


def test_policy_is_a_topology_manager_hint_provider() -> None:
    from toposched.kubelet import TopologyAffinityError, TopologyManager

    machine = Machine((), tuple(NUMANode(n, memory_bytes=4 * GB) for n in (0, 1)))
    for tm_policy, request, outcome in (
        ("single-numa-node", 2 * GB, frozenset({0})),
        ("single-numa-node", 5 * GB, TopologyAffinityError),
        ("restricted", 5 * GB, frozenset({0, 1})),
    ):
        manager = TopologyManager([0, 1], policy=tm_policy)
        memory = StaticMemoryPolicy(machine, {0: {"memory": GB}, 1: {"memory": GB}}, affinity=manager)
        manager.add_hint_provider(memory)
        p = pod("p", ctr("c", request))
        if outcome is TopologyAffinityError:
            with pytest.raises(TopologyAffinityError):
                manager.admit(p)
            assert dict(memory.assignments) == {}
            continue
        chosen = manager.admit(p)
        assert chosen["c"].numa_nodes == outcome
        assert memory.memory_numa_nodes(p, "c") == outcome


def test_allocation_refusal_surfaces_as_upstreams_admission_error() -> None:
    from toposched.kubelet import TopologyManager, UnexpectedAdmissionError

    manager = TopologyManager([0, 1], policy="best-effort")
    machine = Machine((), tuple(NUMANode(n, memory_bytes=2 * GB) for n in (0, 1)))
    memory = StaticMemoryPolicy(machine, {0: {"memory": GB}, 1: {"memory": GB}}, affinity=manager)
    manager.add_hint_provider(memory)
    with pytest.raises(UnexpectedAdmissionError) as err:
        manager.admit(pod("p", ctr("c", 3 * GB)))
    # No NUMA set can hold 3Gi, so the memory manager offers nothing, the merge falls back to
    # every NUMA node, and the allocation cannot widen that.
    assert str(err.value) == (
        "Allocate failed due to [memorymanager] failed to find NUMA nodes to extend the current topology hint, "
        "which is unexpected"
    )
    assert dict(memory.assignments) == {}
