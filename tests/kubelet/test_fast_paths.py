"""The admission fast paths decide exactly as the upstream-shaped code they replace.

``KubeletNode`` admits through :class:`MaskTopologyManager`: the CPU, memory and device
managers hand over their hints as int masks computed from per-machine tables, and under the
single-numa-node policy only the single-NUMA hints that policy reads. ``KubeletNode(...,
exhaustive=True)`` runs the managers' original code (every NUMA set visited, ``TopologyHint``
lists validated and merged). The properties here check, on random machines, kubelet
configurations and pod sequences, that both give the same admissions and the same state; and,
one level down, that every fast hint function gives the same hints as the original one.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kubelet.subset_paths import subset_arrays_from
from toposched.errors import InputError, ToposchedError
from toposched.kubelet import cpu_assignment, fast_merge_hints, merge_hints
from toposched.kubelet.config import KubeletConfig
from toposched.kubelet.cpu_assignment import CPUAllocationError, CPUTopology, take_by_topology
from toposched.kubelet.cpu_manager import CPUState
from toposched.kubelet.cpu_manager import _generate_hints as cpu_hints_reference
from toposched.kubelet.cpu_manager import _mask_hints as cpu_mask_hints
from toposched.kubelet.device_manager import (
    DeviceAllocationError,
    DeviceManager,
    DeviceManagerState,
    _devices_to_allocate,
    container_device_requests,
)
from toposched.kubelet.device_manager import _generate_hints as device_hints_reference
from toposched.kubelet.device_manager import _mask_hints as device_mask_hints
from toposched.kubelet.hint_arrays import MaskHintArray, subset_masks, subset_order, subset_widths
from toposched.kubelet.hints import TopologyHint, iterate_masks, mask_of, numa_set
from toposched.kubelet.memory_manager import StaticMemoryPolicy
from toposched.kubelet.node import KubeletNode
from toposched.kubelet.scope import MaskTopologyManager, TopologyManager
from toposched.kubelet.topology_manager import POLICIES, TopologyAffinityError, numa_subsets
from toposched.topology import CPUSet, LogicalCPU, Machine, NUMANode
from toposched.workload import Container, Pod

MI = 2**20
GI = 2**30
HUGE = 2 * MI


def examples(n: int) -> settings:
    """Hypothesis settings for ``n`` examples, without deadlines (the reference path is slow by design)."""
    return settings(
        max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
    )


CPU_OPTION_SETS = (
    {},
    {"full-pcpus-only": "true"},
    {"distribute-cpus-across-numa": "true"},
    {"full-pcpus-only": "true", "distribute-cpus-across-numa": "true"},
    {"distribute-cpus-across-cores": "true"},
    {"strict-cpu-reservation": "true"},
    {"prefer-align-cpus-by-uncorecache": "true"},
    {"align-by-socket": "true"},
    {"full-pcpus-only": "true", "strict-cpu-reservation": "true"},
)


def as_masks(hints: Iterable[TopologyHint]) -> list[tuple[int, bool]]:
    return [(mask_of(h.numa_nodes or ()), h.preferred) for h in hints]


def single_numa(masks: Iterable[tuple[int, bool]]) -> list[tuple[int, bool]]:
    """What upstream's filterSingleNumaHints keeps of a list of non-nil hints."""
    return [(m, p) for m, p in masks if p and m.bit_count() == 1]


# Hint lists built by walking the subsets, and with NumPy on every machine (then up to ten NUMA
# nodes, past the default threshold).
SUBSET_PATHS = pytest.mark.parametrize("arrays_from, max_numa", [(None, 8), (1, 10)], ids=["lists", "arrays"])


# ---- random machines -----------------------------------------------------------------------------


@st.composite
def machines(draw, max_numa: int = 8) -> Machine:
    """1-8 NUMA nodes (some possibly memory-only), 1-3 cores each, SMT 1 or 2, 1-2 sockets, hugepages."""
    numa = draw(st.integers(1, max_numa))
    cpu_less = draw(st.sets(st.integers(0, numa - 1), max_size=min(2, numa - 1)))
    threads = draw(st.sampled_from([1, 2]))
    sockets = draw(st.sampled_from([1, 2])) if numa > 1 else 1
    cores_of = [0 if n in cpu_less else draw(st.integers(1, 3)) for n in range(numa)]
    total_cores = sum(cores_of)
    if total_cores == 0:
        cores_of[0], total_cores = 1, 1
    cpus = []
    core = 0
    for n in range(numa):
        for _ in range(cores_of[n]):
            socket = n * sockets // numa
            for t in range(threads):
                cache = draw(st.sampled_from([socket, 10 + n]))
                cpus.append(LogicalCPU(core + t * total_cores, core, socket, n, cache_id=cache if t == 0 else None))
            core += 1
    # A core's threads share the cache of its first thread.
    first_cache = {c.core_id: c.cache_id for c in cpus if c.cache_id is not None}
    cpus = [LogicalCPU(c.id, c.core_id, c.socket_id, c.numa_id, cache_id=first_cache[c.core_id]) for c in cpus]
    distances = {}
    for a in range(numa):
        for b in range(a, numa):
            d = 10 if a == b else draw(st.integers(11, 40))
            distances.setdefault(a, {})[b] = d
            distances.setdefault(b, {})[a] = d
    nodes = []
    for n in range(numa):
        pages = draw(st.sampled_from([0, 0, 64, 256]))
        nodes.append(
            NUMANode(
                n,
                CPUSet(c.id for c in cpus if c.numa_id == n),
                memory_bytes=draw(st.integers(1, 8)) * GI,
                hugepages={HUGE: pages} if pages else {},
                distances=distances[n],
            )
        )
    return Machine(tuple(cpus), tuple(nodes))


@st.composite
def device_plugins(draw, numa: int) -> dict[str, list[tuple[str, frozenset[int] | None]]]:
    """0-2 device resources whose devices sit on one NUMA node, two, none listed, or report no topology."""
    plugins = {}
    for resource in draw(st.sets(st.sampled_from(["example.com/gpu", "example.com/nic"]), max_size=2)):
        entries = []
        for i in range(draw(st.integers(0, 5))):
            kind = draw(st.sampled_from(["one", "one", "one", "two", "none", "empty"]))
            if kind == "none":
                topology = None
            elif kind == "empty":
                topology = frozenset()
            else:
                topology = frozenset(
                    draw(st.sets(st.integers(0, numa - 1), min_size=1, max_size=2 if kind == "two" else 1))
                )
            entries.append((f"{resource.split('/')[1]}-{i}", topology))
        plugins[resource] = entries
    return plugins


@st.composite
def configs(draw, machine: Machine) -> KubeletConfig:
    """Every policy and scope, the static CPU manager with or without options, the Static memory manager or not."""
    policy = draw(st.sampled_from(POLICIES))
    kw: dict = {
        "topology_manager_policy": policy,
        "topology_manager_scope": draw(st.sampled_from(["container", "pod"])),
    }
    if draw(st.booleans()):
        kw["topology_manager_options"] = {"prefer-closest-numa-nodes": draw(st.sampled_from(["true", "false"]))}
    if draw(st.integers(0, 4)):
        kw["cpu_manager_policy"] = "static"
        options = dict(draw(st.sampled_from(CPU_OPTION_SETS)))
        if options.get("align-by-socket") and (
            policy == "single-numa-node" or len(machine.sockets) > len(machine.numa_nodes)
        ):
            options = {}
        kw["cpu_manager_options"] = options
        online = sorted(machine.online)
        reserved = draw(st.sets(st.sampled_from(online), max_size=min(3, len(online) - 1)))
        kw["reserved_system_cpus"] = CPUSet(reserved) if reserved else None
    if draw(st.booleans()):
        kw["memory_manager_policy"] = "Static"
        first = draw(st.sampled_from(machine.numa_ids))
        second = draw(st.sampled_from(machine.numa_ids))
        part = draw(st.sampled_from([0, 50 * MI, 100 * MI]))
        reserved = {first: {"memory": 100 * MI - part}}
        if part:
            reserved.setdefault(second, {"memory": 0})
            reserved[second] = {"memory": reserved[second]["memory"] + part}
        kw["reserved_memory"] = reserved
    return KubeletConfig(**kw)


@st.composite
def pods(draw, name: str, machine: Machine, resources: Iterable[str]) -> Pod:
    """Guaranteed (whole or fractional CPUs), Burstable or BestEffort; init containers and sidecars; devices."""
    qos = draw(st.sampled_from(["guaranteed", "guaranteed", "guaranteed", "burstable", "best-effort"]))
    max_cpus = max(2, len(machine.online) // 3 + 1)
    hugepages = any(n.hugepages for n in machine.numa_nodes)
    resources = sorted(resources)

    def container(cname: str, restart: str | None = None) -> Container:
        if qos == "best-effort":
            return Container(cname, restart_policy=restart)
        cpu = draw(st.integers(1, max_cpus)) * 1000 if draw(st.integers(0, 5)) else draw(st.sampled_from([250, 1500]))
        limits = {"cpu": cpu, "memory": draw(st.integers(1, 12)) * 256 * MI}
        if hugepages and draw(st.integers(0, 3)) == 0:
            limits["hugepages-2Mi"] = draw(st.integers(1, 64)) * HUGE
        for resource in resources:
            if draw(st.integers(0, 2)) == 0:
                limits[resource] = draw(st.integers(1, 3))
        if qos == "guaranteed":
            return Container(cname, limits=limits, restart_policy=restart)
        return Container(cname, requests={"cpu": cpu // 2 or 1, "memory": limits["memory"]}, restart_policy=restart)

    inits = tuple(
        container(f"init{i}", "Always" if draw(st.booleans()) else None) for i in range(draw(st.integers(0, 2)))
    )
    apps = tuple(container(f"app{i}") for i in range(draw(st.sampled_from([1, 1, 2, 3]))))
    return Pod(name, uid=name, containers=apps, init_containers=inits)


# ---- the whole admission: fast KubeletNode against the reference ----------------------------------


def _admit(node: KubeletNode, pod: Pod):
    try:
        return node.admit(pod)
    except InputError as err:
        return ("InputError", str(err))


def _build(machine: Machine, config: KubeletConfig, plugins, merge, exhaustive: bool):
    try:
        return KubeletNode(machine, config, device_plugins=plugins, merge=merge, exhaustive=exhaustive)
    except InputError as err:
        return ("InputError", str(err))


def _permutations_bound(machine: Machine, plugins) -> int:
    """At most how many permutations one exhaustive merge on this node walks.

    A provider lists at most one hint per non-empty NUMA subset; the providers are the CPU and
    memory managers, one per hugepage size and one per device resource.
    """
    sizes = {size for n in machine.numa_nodes for size in n.hugepages}
    return (2 ** len(machine.numa_nodes) - 1) ** (2 + len(sizes) + len(plugins))


def _check_sequence(data, machine: Machine, config: KubeletConfig, plugins, fast_merge: bool, steps: int) -> int:
    """Admit and release random pods on a fast node and a reference node; every answer and state equal."""
    # merge_hints walks every permutation of the providers' hint lists (as upstream): only used
    # where that stays cheap; fast_merge_hints is itself checked against it (test_fast_merge.py).
    exhaustive_ok = _permutations_bound(machine, plugins) <= 20_000
    reference_merge = merge_hints if exhaustive_ok and not fast_merge else fast_merge_hints
    fast_merge_fn = merge_hints if exhaustive_ok and not fast_merge else fast_merge_hints
    fast = _build(machine, config, plugins, fast_merge_fn, exhaustive=False)
    reference = _build(machine, config, plugins, reference_merge, exhaustive=True)
    assert (fast if isinstance(fast, tuple) else None) == (reference if isinstance(reference, tuple) else None)
    if isinstance(fast, tuple):
        return 0
    admitted: list[str] = []
    refused: list[Pod] = []
    decisions = 0
    for i in range(steps):
        action = data.draw(st.integers(0, 5))
        if admitted and action == 0:
            uid = admitted.pop(data.draw(st.integers(0, len(admitted) - 1)))
            fast.release(uid)
            reference.release(uid)
        elif admitted and action == 2:  # the scheduler's Unreserve of its latest reservation
            uid = admitted.pop()
            fast.unadmit(uid)
            reference.unadmit(uid)
        else:
            if refused and action == 1:  # a refused pod comes back (the kubelet sees it again)
                pod = refused.pop(data.draw(st.integers(0, len(refused) - 1)))
            else:
                pod = data.draw(pods(f"p{i}", machine, plugins))
            unpinned, before = fast.pins_nothing(pod), fast.available()
            got, want = _admit(fast, pod), _admit(reference, pod)
            assert got == want, (pod, config)
            if unpinned:  # what the scheduler's ledger relies on to skip diffing the zones
                assert fast.available() == before
            decisions += 1
            if getattr(got, "admitted", False):
                admitted.append(pod.uid)
            else:
                refused.append(pod)
        assert fast.state() == reference.state()
        assert fast.available() == reference.available() == _recomputed_available(fast)
        _check_device_views(fast.devices)
    return decisions


def _check_device_views(devices: DeviceManager) -> None:
    """The device manager's memoised views are what its current state gives."""
    state = devices.state
    held = {r for containers in state.allocations.values() for own in containers.values() for r, ids in own.items() if ids}
    for resource in (*devices.resources, "cpu", "memory", "example.com/none"):
        assert devices.available(resource) == state.available(resource)
        assert devices.in_use(resource) == state.in_use(resource)
        assert devices.is_device_resource(resource) == (resource in state.devices or resource in held)


def _recomputed_available(node: KubeletNode) -> dict:
    """``available()`` computed afresh, not from its memo (which must never be stale)."""
    node._available = None
    return node.available()


@pytest.mark.parametrize("arrays_from", [None, 1], ids=["lists", "arrays"])
@examples(250)
@given(data=st.data())
def test_fast_admission_equals_the_reference_on_random_nodes(arrays_from, data):
    machine = data.draw(machines())
    plugins = data.draw(device_plugins(len(machine.numa_nodes)))
    config = data.draw(configs(machine))
    with subset_arrays_from(arrays_from):
        _check_sequence(data, machine, config, plugins, fast_merge=data.draw(st.booleans()), steps=6)


@examples(200)
@given(st.data())
def test_fast_single_numa_node_admission_equals_the_reference(data):
    """single-numa-node, where providers generate only the single-NUMA hints: long pod sequences."""
    machine = data.draw(machines())
    plugins = data.draw(device_plugins(len(machine.numa_nodes)))
    config = data.draw(configs(machine))
    config = KubeletConfig(
        **{
            **{f: getattr(config, f) for f in config.__dataclass_fields__},
            "topology_manager_policy": "single-numa-node",
            "cpu_manager_options": {k: v for k, v in config.cpu_manager_options.items() if k != "align-by-socket"},
        }
    )
    _check_sequence(data, machine, config, plugins, fast_merge=True, steps=10)


def test_prefer_closest_numa_nodes_reads_the_machine_distances():
    """The option needs the distance matrix; the node passes its machine's."""
    machine = Machine(
        tuple(LogicalCPU(c, c, 0, c // 2) for c in range(6)),
        tuple(
            NUMANode(
                n,
                CPUSet([2 * n, 2 * n + 1]),
                4 * GI,
                distances={0: [10, 30, 12][n], 1: [30, 10, 30][n], 2: [12, 30, 10][n]},
            )
            for n in range(3)
        ),
    )
    config = KubeletConfig(
        topology_manager_policy="restricted",
        topology_manager_options={"prefer-closest-numa-nodes": "true"},
        cpu_manager_policy="static",
    )
    pod = Pod("wide", uid="wide", containers=(Container("c", limits={"cpu": 3000, "memory": GI}),))
    for exhaustive in (False, True):
        node = KubeletNode(machine, config, exhaustive=exhaustive)
        result = node.admit(pod)
        # NUMA nodes 0 and 2 are the closest pair (12); 0 and 1 would be narrower by mask value.
        assert result.containers["c"].hint == TopologyHint(frozenset({0, 2}), True)


# ---- one level down: each fast hint function against the original one -----------------------------


@SUBSET_PATHS
@examples(600)
@given(data=st.data())
def test_cpu_mask_hints_equal_the_generated_hints(arrays_from, max_numa, data):
    machine = data.draw(machines(max_numa))
    topo = CPUTopology.of(machine)
    online = sorted(machine.online)
    available = CPUSet(data.draw(st.sets(st.sampled_from(online))))
    # Reusable CPUs of an init container usually lie on one NUMA node, and may also be available
    # (upstream then counts them twice, so a node can fit more than it holds).
    home = data.draw(st.sampled_from([n for n in machine.numa_nodes if n.cpus] + [None]))
    pool = sorted(home.cpus) if home is not None else online
    reusable = CPUSet(data.draw(st.sets(st.sampled_from(pool), max_size=3)))
    widest = max(len(n.cpus) for n in machine.numa_nodes)
    request = data.draw(st.one_of(st.integers(1, len(online) + 2), st.integers(widest, widest + 3)))
    align = data.draw(st.booleans())
    want = as_masks(cpu_hints_reference(topo, available, reusable, request, align))
    with subset_arrays_from(arrays_from):
        assert cpu_mask_hints(topo, available.mask, reusable.mask, request, align, False) == want
        assert cpu_mask_hints(topo, available.mask, reusable.mask, request, align, True) == single_numa(want)


@st.composite
def device_tables(draw):
    numa = draw(st.integers(1, 8))
    plugins = draw(device_plugins(numa))
    table = dict(plugins.get("example.com/gpu", []))
    extra = draw(st.lists(st.sampled_from([None, frozenset(), frozenset({0})]), max_size=2))
    for i, topology in enumerate(extra):
        table[f"odd-{i}"] = topology
    return tuple(range(numa)), table


@examples(800)
@given(device_tables(), st.data())
def test_device_mask_hints_equal_the_generated_hints(numa_and_table, data):
    numa_ids, table = numa_and_table
    ids = sorted(table) + ["unknown-device"]
    available = data.draw(st.sets(st.sampled_from(ids)))
    reusable = data.draw(st.sets(st.sampled_from(ids), max_size=2)) - available
    request = data.draw(st.integers(1, len(table) + 1))
    want = as_masks(device_hints_reference(table, available, reusable, request, numa_ids))
    assert device_mask_hints(table, available, reusable, request, numa_ids, False) == want
    assert device_mask_hints(table, available, reusable, request, numa_ids, True) == single_numa(want)


@SUBSET_PATHS
@examples(300)
@given(data=st.data())
def test_memory_mask_hints_equal_the_calculated_hints(arrays_from, max_numa, data):
    """On states reached by random allocations (single and multi-NUMA groups), with reusable memory."""
    machine = data.draw(machines(max_numa))
    policy = StaticMemoryPolicy(machine, {machine.numa_ids[0]: {"memory": 100 * MI}})
    for i in range(data.draw(st.integers(0, 6))):
        pod = data.draw(pods(f"p{i}", machine, ()))
        nodes = data.draw(st.sets(st.sampled_from(machine.numa_ids), min_size=1, max_size=3))
        try:
            for c in pod.all_containers:
                policy.allocate(pod, c, TopologyHint(frozenset(nodes), True))
        except ToposchedError:  # a refused allocation leaves the state as it was
            pass
    uid = "probe"
    if data.draw(st.booleans()):
        masks = [m for _, m, _ in numa_subsets(machine.numa_ids)]
        policy._reusable = {uid: {data.draw(st.sampled_from(masks)): {"memory": data.draw(st.integers(0, 8)) * GI}}}
    requested = {"memory": data.draw(st.integers(1, 40)) * 256 * MI}
    if any(n.hugepages for n in machine.numa_nodes) and data.draw(st.booleans()):
        requested["hugepages-2Mi"] = data.draw(st.integers(1, 300)) * HUGE
    state = policy._state
    want = {r: as_masks(h) for r, h in policy._calculate_hints(state, uid, requested).items()}
    with subset_arrays_from(arrays_from):
        assert policy._calculate_masks(state, uid, requested, False) == want
        single = policy._calculate_masks(state, uid, requested, True)
    if not want:
        assert single == {}
    else:
        assert single == {r: single_numa(h) for r, h in want.items()}


@pytest.mark.parametrize("arrays_from", [11, None], ids=["lists", "arrays"])
def test_memory_mask_hints_count_the_memory_a_container_reuses(arrays_from):
    """Ten NUMA nodes of 2 GiB, 1 GiB of node 0 held: 1.5 GiB fits on node 0 alone only with the
    2 GiB an init container left there, and every set holding node 0 counts that memory once."""
    machine = Machine(
        tuple(LogicalCPU(c, c, 0, c) for c in range(10)),
        tuple(NUMANode(n, CPUSet([n]), 2 * GI, distances={m: 10 if m == n else 20 for m in range(10)})
              for n in range(10)),
    )
    policy = StaticMemoryPolicy(machine, {9: {"memory": 100 * MI}})
    held = Pod("held", uid="held", containers=(Container("c", limits={"cpu": 1000, "memory": GI}),))
    policy.allocate(held, held.containers[0], TopologyHint(frozenset({0}), True))
    policy._reusable = {"probe": {mask_of({0}): {"memory": 2 * GI}}}
    requested = {"memory": 3 * GI // 2}
    want = {r: as_masks(h) for r, h in policy._calculate_hints(policy._state, "probe", requested).items()}
    assert (1, True) in want["memory"]
    with subset_arrays_from(arrays_from):
        assert policy._calculate_masks(policy._state, "probe", requested, False) == want


def test_numa_subsets_follow_upstreams_order():
    for ids in [(0,), (0, 1, 2), (1, 3, 4, 7), tuple(range(8))]:
        subsets = numa_subsets(ids)
        assert [m for _, m, _ in subsets] == [mask_of(s) for s in iterate_masks(ids)]
        for positions, mask, width in subsets:
            assert width == mask.bit_count() == positions.bit_count()
            assert mask == mask_of(ids[i] for i in range(len(ids)) if positions >> i & 1)


@pytest.mark.parametrize("ids", [tuple(range(9)), (0, 2, 3, 5, 7, 8, 11, 12, 13, 20), tuple(range(12))])
def test_subset_order_lists_the_subsets_in_numa_subsets_order(ids):
    positions = subset_order(len(ids))
    masks, widths = subset_masks(ids)[positions], subset_widths(len(ids))[positions]
    assert list(zip(positions.tolist(), masks.tolist(), widths.tolist())) == list(numa_subsets(ids))


# ---- the Topology Manager taking int masks ---------------------------------------------------------


class _Provider:
    """A provider answering with TopologyHint lists, optionally also as int masks (as the managers do)."""

    def __init__(self, answer, masks: bool):
        self.answer = answer
        if masks:
            self.topology_masks = self._masks
            self.pod_topology_masks = lambda pod, *, single_numa_only: self._masks(
                pod, None, single_numa_only=single_numa_only
            )

    def _masks(self, pod, container, *, single_numa_only):
        if not self.answer:
            return self.answer
        return {r: None if h is None else as_masks(h) for r, h in self.answer.items()}

    def get_topology_hints(self, pod, container):
        return self.answer

    def get_pod_topology_hints(self, pod):
        return self.answer

    def allocate(self, pod, container):
        return None


hint_lists = st.lists(
    st.builds(TopologyHint, st.sets(st.integers(0, 3), min_size=1).map(frozenset), st.booleans()), max_size=4
)
answers = st.one_of(
    st.none(),
    st.just({}),
    st.dictionaries(st.sampled_from(["a", "b"]), st.one_of(st.none(), hint_lists), max_size=2),
)


@examples(500)
@given(
    st.lists(st.tuples(answers, st.booleans()), min_size=1, max_size=3),
    st.sampled_from(POLICIES[1:]),
    st.sampled_from(["container", "pod"]),
    st.sampled_from([merge_hints, fast_merge_hints]),
    st.booleans(),
)
def test_mask_topology_manager_decides_as_the_topology_manager(providers, policy, scope, merge, closest):
    """Nil, empty and absent answers, trusted int masks and checked TopologyHint lists mixed."""
    distances = {a: {b: 10 if a == b else 10 + 3 * abs(a - b) + (a + b) % 2 for b in range(4)} for a in range(4)}
    kw = {
        "policy": policy,
        "scope": scope,
        "merge": merge,
        "distances": distances,
        "options": {"prefer-closest-numa-nodes": "true" if closest else "false"},
    }
    pod = Pod("p", uid="p", containers=(Container("c"),))
    outcomes = []
    for manager in (
        TopologyManager(range(4), providers=[_Provider(a, False) for a, _ in providers], **kw),
        MaskTopologyManager(range(4), providers=[_Provider(a, m) for a, m in providers], **kw),
    ):
        try:
            outcomes.append(manager.admit(pod))
        except TopologyAffinityError as err:
            outcomes.append(("refused", err.hint))
    assert outcomes[0] == outcomes[1]


class _ArrayProvider:
    """A provider handing its one resource's hints over as a MaskHintArray (as the CPU and memory
    managers do on machines with many NUMA nodes), or as the TopologyHint list it stands for."""

    def __init__(self, hints: MaskHintArray):
        self.hints = hints

    def topology_masks(self, pod, container, *, single_numa_only):
        return {"r": self.hints}

    def pod_topology_masks(self, pod, *, single_numa_only):
        return {"r": self.hints}

    def get_topology_hints(self, pod, container=None):
        return {"r": [TopologyHint(numa_set(m), p) for m, p in self.hints]}

    get_pod_topology_hints = get_topology_hints

    def allocate(self, pod, container):
        return None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(1, 3)), min_size=2, max_size=3),
       st.sampled_from(["restricted", "single-numa-node"]), st.sampled_from(["container", "pod"]))
def test_refused_hint_on_a_wide_machine_is_the_eager_merges(anchors, policy, scope):
    """On 10 NUMA nodes (hints as arrays, the non-preferred search by subset transforms) a policy that
    admits only preferred hints refuses without searching the best non-preferred hint; the error
    still names the hint the merge would have chosen (computed when read)."""
    ids = tuple(range(10))
    masks, widths = subset_masks(ids), subset_widths(len(ids))
    providers = []
    for node, width in anchors:  # every set of at most ``width`` nodes holding ``node``; the one-node set preferred
        valid = ((masks >> node) & 1 == 1) & (widths <= width)
        providers.append(_ArrayProvider(MaskHintArray(ids, valid, valid & (widths == 1))))
    pod = Pod("p", uid="p", containers=(Container("c"),))
    outcomes = []
    for manager in (TopologyManager(ids, policy=policy, scope=scope, providers=providers, merge=fast_merge_hints,
                                    options={"max-allowable-numa-nodes": "10"}),
                    MaskTopologyManager(ids, policy=policy, scope=scope, providers=providers, merge=fast_merge_hints,
                                        options={"max-allowable-numa-nodes": "10"})):
        try:
            outcomes.append(manager.admit(pod))
        except TopologyAffinityError as err:
            outcomes.append(("refused", err.hint))
    assert outcomes[0] == outcomes[1]
    assert isinstance(outcomes[0], tuple) == (len({node for node, _ in anchors}) > 1)  # preferred sets never meet


def test_mask_topology_manager_checks_the_hints_it_cannot_trust():
    bad = _Provider({"a": [TopologyHint(frozenset({9}), True)]}, masks=False)
    manager = MaskTopologyManager(range(2), policy="restricted", providers=[_Provider(None, True), bad])
    with pytest.raises(InputError, match=r"providers\[1\]\[a\]\[0\]"):
        manager.admit(Pod("p", uid="p", containers=(Container("c"),)))


# ---- shared by both modes: derived states, device allocation, the CPU accumulator's shortcuts ------


@examples(300)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["assign", "drop", "pool"]),
            st.sampled_from(["a", "b", "c"]),
            st.sampled_from(["x", "y"]),
            st.sets(st.integers(0, 15)),
        ),
        max_size=12,
    )
)
def test_derived_cpu_states_equal_states_built_from_scratch(operations):
    """with_assignment / without / with_default share what did not change; the result is the same state."""
    state = CPUState(CPUSet(range(16)))
    plain: dict[str, dict[str, CPUSet]] = {}
    default = CPUSet(range(16))
    for op, pod, container, cpus in operations:
        if op == "assign":
            state = state.with_assignment(pod, container, CPUSet(cpus))
            plain.setdefault(pod, {})[container] = CPUSet(cpus)
        elif op == "drop":
            state = state.without(pod, container)
            plain.get(pod, {}).pop(container, None)
        else:
            default = CPUSet(cpus)
            state = state.with_default(default)
        rebuilt = CPUState(default, plain)
        assert state == rebuilt and state.assignments == rebuilt.assignments
        assert all(isinstance(c, MappingProxyType) for c in state.assignments.values())
        assert isinstance(state.assignments, MappingProxyType)
    with pytest.raises(InputError):
        state.with_assignment("a", "x", {1, 2})  # type: ignore[arg-type]


def _reference_device_allocate(manager: DeviceManager, pod: Pod, container: Container, hint) -> dict:
    """Upstream ``Allocate`` as first written here: every record copied, the state rebuilt and frozen whole."""
    hint_nodes = None if hint is None or hint.numa_nodes is None else frozenset(hint.numa_nodes)
    uid = pod.uid or pod.key
    requests = manager._device_requests(container_device_requests(container))
    s = manager.state
    allocations = {p: {c: dict(r) for c, r in cs.items()} for p, cs in s.allocations.items()}
    reusable = {p: dict(r) for p, r in s.reusable.items()}
    reuse = reusable.setdefault(uid, {})
    for resource, count in requests.items():
        in_use: set[str] = set()
        for containers in allocations.values():
            for held in containers.values():
                in_use.update(held.get(resource, ()))
        chosen = _devices_to_allocate(
            table=s.devices.get(resource),
            healthy=s.healthy.get(resource, frozenset()),
            in_use=frozenset(in_use),
            resource=resource,
            required=count,
            hint_nodes=hint_nodes,
            reusable=reuse.get(resource, frozenset()),
            container_devices=allocations.get(uid, {}).get(container.name, {}).get(resource),
            preferred=None,
            pod_uid=uid,
            container_name=container.name,
        )
        if chosen:
            allocations.setdefault(uid, {}).setdefault(container.name, {})[resource] = frozenset(chosen)
    own = allocations.get(uid, {}).get(container.name, {})
    regular_init = any(c.name == container.name and not c.is_sidecar for c in pod.init_containers)
    for resource, held in own.items():
        reuse[resource] = (
            reuse.get(resource, frozenset()) | held if regular_init else reuse.get(resource, frozenset()) - held
        )
    manager.restore(DeviceManagerState(s.numa_nodes, s.devices, s.healthy, allocations, reusable))
    return dict(own)


@examples(300)
@given(st.data())
def test_device_allocation_equals_the_copy_everything_reference(data):
    numa = data.draw(st.integers(1, 4))
    plugins = data.draw(device_plugins(numa))
    machine = data.draw(machines(max_numa=numa).filter(lambda m: len(m.numa_nodes) == numa))
    fast, reference = DeviceManager(range(numa), plugins), DeviceManager(range(numa), plugins)
    live: list[Pod] = []
    for i in range(data.draw(st.integers(1, 8))):
        if live and data.draw(st.integers(0, 3)) == 0:
            gone = live.pop(data.draw(st.integers(0, len(live) - 1)))
            fast.release(gone)
            reference.release(gone)
            assert fast.state == reference.state
            continue
        pod = data.draw(pods(f"p{i}", machine, plugins))
        live.append(pod)
        for c in pod.all_containers:
            nodes = data.draw(st.one_of(st.none(), st.sets(st.integers(0, numa - 1), min_size=1)))
            hint = TopologyHint(None if nodes is None else frozenset(nodes), True)
            outcomes = []
            for manager, allocate in ((fast, fast.allocate), (reference, None)):
                try:
                    if allocate is not None:
                        outcomes.append(allocate(pod, c, hint))
                    else:
                        outcomes.append(_reference_device_allocate(manager, pod, c, hint))
                except DeviceAllocationError as err:
                    outcomes.append(str(err))
            assert outcomes[0] == outcomes[1]
            assert fast.state == reference.state


class _ReferenceAccumulator(cpu_assignment._Accumulator):
    """The accumulator's listing and taking without the shortcuts (every level listed and sorted)."""

    def _sorted(self, ids, masks):
        return sorted(ids, key=lambda i: (self._free(masks[i]), i))

    def _present(self, ids, masks, within):
        return [i for i in ids if self.details & masks[i] & within]

    def free_numas(self):
        masks = self.topo.numa_masks
        return [n for n in self.sort_numas() if self._free(masks[n]) == masks[n].bit_count()]

    def free_sockets(self):
        return [s for s in self.sort_sockets() if self._free(self.topo.socket_masks[s]) == self.topo.cpus_per_socket]

    def free_cores(self):
        return [c for c in self.sort_cores() if self._free(self.topo.core_masks[c]) == self.topo.cpus_per_core]

    def free_caches(self):
        masks = self.topo.cache_masks
        return [u for u in self.sort_caches() if self._free(masks[u]) == masks[u].bit_count()]

    def _take_whole(self, units, masks, smallest):
        for unit in units():
            if self.needs(masks[unit].bit_count()):
                self.take(masks[unit])


@examples(400)
@given(st.data())
def test_take_by_topology_shortcuts_pick_the_same_cpus(data):
    machine = data.draw(machines())
    topo = CPUTopology.of(machine)
    online = sorted(machine.online)
    available = CPUSet(data.draw(st.sets(st.sampled_from(online), min_size=1)))
    count = data.draw(st.integers(0, len(available)))
    kw = data.draw(
        st.sampled_from(
            [
                {},
                {"strategy": "spread"},
                {"prefer_uncore_cache": True},
                {"distribute": True},
                {"distribute": True, "cpu_group_size": 2},
            ]
        )
    )
    outcomes = []
    for accumulator in (cpu_assignment._Accumulator, _ReferenceAccumulator):
        original = cpu_assignment._Accumulator
        cpu_assignment._Accumulator = accumulator
        try:
            outcomes.append(take_by_topology(topo, available, count, **kw))
        except CPUAllocationError as err:
            outcomes.append(str(err))
        finally:
            cpu_assignment._Accumulator = original
    assert outcomes[0] == outcomes[1]
