"""CPUOrchestration refuses a required SpreadByPCPUs only where the kubelet would certainly break it.

(Both forms of the rule: kubelets that pack, and kubelets with ``distribute-cpus-across-numa``,
whose even share on each NUMA node is taken packed; see ``_kubelet_splits_no_core``.)

On a node whose kubelet picks the CPUs (not agent-managed), a container with 2 or more exclusive
CPUs gets whole cores first from the static CPU manager (upstream ``takeByTopologyNUMAPacked``)
whenever the NUMA nodes its hint names hold a whole free core (and from every free CPU when they
have none free). When every NUMA node with a free CPU holds one, whatever hint the Topology
Manager picks, the container gets two threads of a core. The filter
refuses such nodes before Reserve instead of admitting the pod into the replica to find out.

Held against the kubelet model on the realistic benchmark's mixed clusters (both mixes): on every node the
filter refuses for that reason, the replica either refuses the pod or gives its first container
two threads of one core; and the batch form refuses the same rows as the per-node filter.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.scheduler.test_decisions_identical import _bench
from toposched.kubelet import KubeletConfig
from toposched.scheduler import Cluster, NodeSpec, Scheduler, load_profile
from toposched.scheduler.framework import CycleState, registry
from toposched.scheduler.plugins.cpu_orchestration import _bind_counts_of, _lowest_fit
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod

GI = 2**30
PACKS, DISTRIBUTES = "takes them first", "spreads its"  # the two wordings of the rule
UNHINTED = "names no NUMA node"  # the packing form where the Topology Manager gives no hint (policy none)
LOWEST = "from the lowest NUMA node"  # the packing form where it names the lowest NUMA node that fits


def _spread_pod(i: int, cpus: int, memory: dict[str, int] | None = None) -> Pod:
    limits = {"cpu": cpus * 1000, **(memory or {"memory": GI})}
    return Pod(f"spread-{i}", uid=f"spread-{i}", annotations={"toposched.io/cpu-bind-policy": "SpreadByPCPUs"},
               containers=(Container("app", limits=limits),))


STATIC_MEMORY = {"memory_manager_policy": "Static", "reserved_memory": {0: {"memory": GI + 100 * 2**20}}}


@pytest.mark.parametrize("mix", ["default", "wide"])
@pytest.mark.parametrize("seed", [3, 4, 5])
def test_the_kubelet_splits_a_core_wherever_the_filter_says_it_will(seed: int, mix: str) -> None:
    # The wide mix adds kubelets with CPU manager options (full-pcpus-only, distribute-cpus-across-numa,
    # align-by-socket), under which the static policy does not always pack whole cores first.
    bench = _bench("realistic")
    cluster = bench.build_cluster(40, seed=seed, gpu_share=0.1) if mix == "default" else bench.build_cluster_wide(40, seed)
    make_pod = bench.MIXES[mix][1]
    scheduler = Scheduler(cluster, load_profile("toposched"))
    rnd = random.Random(seed)
    for i in range(240):  # the nodes part full, some cores split
        pod = make_pod(i, rnd)
        if scheduler.schedule(pod, now=float(i)).node is not None:
            scheduler.bound(pod, now=float(i))
    refused, checked = _hold_against_the_replica(scheduler, (2, 3, 4, 6, 1, 8, 12, 16))
    assert refused and checked, f"the rule applied {refused} times, {checked} of them admitted: the test checks too little"


@pytest.mark.parametrize("seed", [1, 2])
def test_a_kubelet_distributing_over_numa_nodes_splits_a_core_wherever_the_filter_says_it_will(seed: int) -> None:
    # Every node's kubelet has distribute-cpus-across-numa: the rule's second form, on 1 to 8 NUMA nodes.
    policies = _bench("realistic").POLICIES
    scheduler = _filled_cluster(seed, 150, lambda rnd: rnd.choice(policies), {"distribute-cpus-across-numa": "true"})
    refused, checked = _hold_against_the_replica(scheduler, (2, 3, 4, 6, 8, 12, 16, 24), wording=DISTRIBUTES)
    assert refused and checked, f"the rule applied {refused} times, {checked} of them admitted: the test checks too little"


@pytest.mark.parametrize("memory", ["None", "Static"])
@pytest.mark.parametrize("policy", ["none", "best-effort", "restricted", "single-numa-node"])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_kubelet_whose_numa_choice_is_known_splits_a_core_wherever_the_filter_says_it_will(
        seed: int, policy: str, memory: str) -> None:
    # Under the Topology Manager policy none the static CPU manager takes from every free CPU, so a whole
    # free core on any NUMA node is enough; under the others (no devices) it takes from the lowest NUMA
    # node with enough free CPUs, and with a Static memory manager enough free memory outside any
    # multi-NUMA group too (the pods ask for 1 to 60 GiB, more than some NUMA nodes have free, and
    # some for 2 MiB hugepages, which some machines lack and others hold per NUMA node). Either
    # way a NUMA node elsewhere may have no whole free core left, where the rule for every NUMA node
    # would not apply.
    _hold_where_the_numa_choice_is_known(seed, policy, memory, {})


@pytest.mark.parametrize("memory", ["None", "Static"])
@pytest.mark.parametrize("policy", ["none", "best-effort", "restricted", "single-numa-node"])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_kubelet_distributing_over_numa_nodes_packs_the_one_it_takes_from(seed: int, policy: str, memory: str) -> None:
    # With distribute-cpus-across-numa, a hint naming one NUMA node leaves the CPU manager that node to
    # spread over: it takes the CPUs there packed, whole cores first, as a packing kubelet does. Without
    # a hint (policy none) it takes a count one NUMA node could hold from one NUMA node with that many
    # free when there is one: below the rule's form for every NUMA node (a core's threads on each).
    if policy == "none":
        def novel(cluster: Cluster, refused_on: list[tuple[str, int, int]]) -> bool:
            return any(cpus < 2 * len(cluster.nodes[name].model.machine.numa_nodes) for name, cpus, _ in refused_on)
    else:
        novel = _some_numa_node_without_a_whole_core
    _hold_where_the_numa_choice_is_known(seed, policy, memory, {"distribute-cpus-across-numa": "true"}, novel)


def _some_numa_node_without_a_whole_core(cluster: Cluster, refused_on: list[tuple[str, int, int]]) -> bool:
    """Whether some refused node has a NUMA node with free CPUs but no whole free core (the rule for
    every NUMA node with a free CPU would have let it through, to be refused after admission)."""
    plugin = registry.create("CPUOrchestration")
    counts = [_bind_counts_of(plugin._free_mask(cluster.nodes[name]), cluster.nodes[name].model.machine)
              for name, _, _ in refused_on]
    return any(c[4] == 0 for c in counts)


def _one_thread_of(machine: Machine, numa: int, cores: int) -> CPUSet:
    """Every CPU of NUMA node ``numa`` but the first thread of its first ``cores`` cores (to reserve)."""
    cpus = [c for c in machine.online if machine.cpu(c).numa_id == numa]
    firsts = sorted(min(c for c in cpus if machine.cpu(c).core_id == core) for core in {machine.cpu(c).core_id for c in cpus})
    return CPUSet(c for c in cpus if c not in firsts[:cores])


def _hold_where_the_numa_choice_is_known(seed: int, policy: str, memory: str, options: dict[str, str],
                                         novel: Callable[[Cluster, list[tuple[str, int, int]]], bool] | None
                                         = None) -> None:
    """The rule's forms for a Topology Manager policy whose NUMA choice is known (see the test above),
    held against the replica on a filled cluster of kubelets with CPU manager ``options``; ``novel``
    says whether some refusal (node, CPUs, memory) is one an older form of the rule would not make."""
    static = STATIC_MEMORY if memory == "Static" else {}
    scheduler = _filled_cluster(seed, 200, lambda rnd: policy, options, static)
    cluster = scheduler.cluster
    # And an empty node with one thread of every core of NUMA node 0 reserved (of every core, under
    # none): the kubelet gives one thread per core from it, and the rule must not refuse the node.
    machine = _bench("realistic").wide_machine(*_bench("realistic").WIDE_SHAPES[0])
    config = KubeletConfig(topology_manager_policy=policy, cpu_manager_policy="static", cpu_manager_options=options,
                           reserved_system_cpus=_second_threads(machine, None if policy == "none" else 0),
                           kube_reserved={"memory": GI}, **static)
    cluster.set_node(NodeSpec("halved"), machine=machine, kubelet_config=config)
    # And one whose NUMA node 0 keeps one thread of 4 cores: up to 4 CPUs get single threads there,
    # more go to NUMA node 1 (the lowest that fits), whole cores first. The rule for every NUMA node
    # with a free CPU does not reach it; the lowest NUMA node's does.
    cluster.set_node(NodeSpec("quartered"), machine=machine,
                     kubelet_config=dataclasses.replace(config, reserved_system_cpus=_one_thread_of(machine, 0, 4)))
    refused_on: list[tuple[str, int, int]] = []
    sizes = (2, 3, 4, 6, 8, 12, 16, 24)
    memories = ({"memory": GI},) if memory == "None" else tuple(
        {"memory": gib * GI, **({"hugepages-2Mi": pages * 2**21} if pages else {})}
        for gib in (1, 20, 45, 60) for pages in (0, 64, 600))
    refused, checked = _hold_against_the_replica(scheduler, sizes, wording=UNHINTED if policy == "none" else LOWEST,
                                                 refused_on=refused_on, memories=memories)
    assert refused and checked, f"the rule applied {refused} times, {checked} of them admitted: the test checks too little"
    # Its NUMA node 0 has 12 free CPUs, one per core, and over 90 GiB free: pods that fit there get one
    # thread per core.
    assert not [cpus for name, cpus, _ in refused_on if name == "halved" and cpus <= 12]
    quartered = {cpus for name, cpus, _ in refused_on if name == "quartered"}
    if policy != "none" and not options:
        assert 6 in quartered and not [cpus for cpus in quartered if cpus <= 4], sorted(quartered)
    assert (novel or _some_numa_node_without_a_whole_core)(cluster, refused_on), \
        "no refusal the rule's older forms would not make"


def _filled_cluster(seed: int, pods: int, policy: Callable[[random.Random], str], options: dict[str, str],
                    memory: dict | None = None) -> Scheduler:
    """24 nodes of the wide mix's hardware, static CPU managers with ``options``, Topology Manager
    policies drawn by ``policy`` and the memory manager ``memory`` configures (None by default); then
    ``pods`` of the wide mix's pods scheduled and bound."""
    bench = _bench("realistic")
    rnd = random.Random(seed)
    cluster = Cluster()
    for n in range(24):
        machine = bench.wide_machine(*rnd.choice(bench.WIDE_SHAPES))
        config = KubeletConfig(topology_manager_policy=policy(rnd), cpu_manager_policy="static",
                               cpu_manager_options=options, reserved_system_cpus=CPUSet([0]),
                               kube_reserved={"memory": GI}, **(memory or {}))
        cluster.set_node(NodeSpec(f"n{n}"), machine=machine, kubelet_config=config)
    scheduler = Scheduler(cluster, load_profile("toposched"))
    for i in range(pods):
        pod = bench.make_pod_wide(i, rnd)
        if scheduler.schedule(pod, now=float(i)).node is not None:
            scheduler.bound(pod, now=float(i))
    return scheduler


def _second_threads(machine: Machine, numa: int | None) -> CPUSet:
    """The second thread of every core of NUMA node ``numa`` (of every core: None)."""
    cores = {machine.cpu(c).core_id for c in machine.online if numa is None or machine.cpu(c).numa_id == numa}
    return CPUSet(max(c for c in machine.online if machine.cpu(c).core_id == core) for core in cores)


def _hold_against_the_replica(scheduler: Scheduler, sizes: tuple[int, ...], wording: str = "",
                              refused_on: list[tuple[str, int, int]] | None = None,
                              memories: tuple[dict[str, int], ...] = ({"memory": GI},)) -> tuple[int, int]:
    """For SpreadByPCPUs pods of ``sizes`` CPUs, each with each of ``memories`` (memory limits): the batch filter
    is the per-node one on every node, and wherever it refuses for the kubelet taking whole cores
    (``wording``: only that form of the rule), the replica refuses the pod or gives its container two
    threads of a core. Returns how many nodes were refused so and how many of those the replica
    admitted; ``refused_on`` gets (node, CPUs, memory) of each."""
    cluster = scheduler.cluster
    plugin = registry.create("CPUOrchestration")
    table = scheduler.table
    table.refresh()
    refused = checked = 0
    for i, (cpus, memory) in enumerate((c, m) for c in sizes for m in memories):
        pod = _spread_pod(i, cpus, memory)
        rows = np.arange(table.size)
        batch, _ = plugin.filter_all(CycleState(cluster=cluster), pod, table, rows)
        for row, name in enumerate(table.names):
            node = cluster.nodes[name]
            verdict = plugin.filter(CycleState(cluster=cluster), pod, node)
            assert verdict.is_success == bool(batch[row]), (name, verdict.message)
            if verdict.is_success or not any(w in verdict.message for w in ((wording,) if wording else (PACKS, DISTRIBUTES))):
                continue
            assert cpus >= 2, "a 1-CPU container cannot be given two threads of a core"
            refused += 1
            if refused_on is not None:
                refused_on.append((name, cpus, memory["memory"]))
            admission = node.model.admit(pod, trial=True)
            if not admission.admitted:
                continue
            try:
                given = admission.containers["app"].cpuset
                cores = [node.model.machine.cpu(c).core_id for c in given]
                assert len(set(cores)) < len(cores), f"{name}: the kubelet gave {given}, one thread per core"
                checked += 1
            finally:
                node.model.unadmit(pod.uid)
    return refused, checked
    assert refused and checked, f"the rule applied {refused} times, {checked} of them admitted: the test checks too little"


@pytest.mark.parametrize("steer", ["memory", "pod-scope", "device"])
def test_where_another_provider_or_the_pod_steers_the_hint_the_lowest_fitting_numa_node_decides_nothing(steer: str) -> None:
    # NUMA node 0 has whole free cores and room for the container's CPUs; NUMA node 1 has one thread
    # of every core reserved. Something other than the container's own CPUs makes the Topology
    # Manager name NUMA node 1: memory (the Static memory manager, NUMA node 0's memory taken), the
    # pod's peak (pod scope, NUMA node 0 without enough free CPUs for it) or a device on NUMA node 1.
    # The kubelet then gives one thread per core, and the filter must let the node through.
    bench = _bench("realistic")
    machine = bench.wide_machine(2, 12, 2, 2, 96, 0, 0)
    seconds = _second_threads(machine, 1)
    memory = dict(memory_manager_policy="Static", reserved_memory={0: {"memory": 2 * GI + 100 * 2**20}},
                  system_reserved={"memory": 2 * GI}) if steer == "memory" else {}
    config = KubeletConfig(topology_manager_policy="best-effort", cpu_manager_policy="static",
                           topology_manager_scope="pod" if steer == "pod-scope" else "container",
                           reserved_system_cpus=seconds, **memory)
    plugins = {"example.com/dev": [("dev0", [1])]} if steer == "device" else None
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config, device_plugins=plugins)
    if steer == "memory":  # NUMA node 0's memory goes to a 1-CPU pod (one thread: whole cores remain)
        cluster.add_bound_pod(Pod("big", uid="big", containers=(Container("c", limits={"cpu": 1000, "memory": 90 * GI}),)),
                              "n", now=0.0)
    if steer == "pod-scope":  # 14 of NUMA node 0's 24 CPUs taken: 10 left, 5 whole cores
        cluster.add_bound_pod(Pod("big", uid="big", containers=(Container("c", limits={"cpu": 14000, "memory": GI}),)),
                              "n", now=0.0)
    if steer != "device":
        assert cluster.nodes["n"].pods["big"].placement.numa_nodes == {0}
    limits = {"cpu": 4000, "memory": (10 if steer == "memory" else 1) * GI}
    if steer == "device":
        limits["example.com/dev"] = 1
    containers = [Container("app", limits=limits)]
    if steer == "pod-scope":
        containers.append(Container("side", limits={"cpu": 8000, "memory": GI}))  # the pod's peak: 12 CPUs
    pod = Pod("spread", uid="spread", annotations={"toposched.io/cpu-bind-policy": "SpreadByPCPUs"},
              containers=tuple(containers))
    given, verdict, batch = _kubelet_and_filter(cluster, pod)
    assert {machine.cpu(c).numa_id for c in given} == {1}
    assert len({machine.cpu(c).core_id for c in given}) == len(given)  # one thread per core
    assert verdict.is_success and batch


def _kubelet_and_filter(cluster: Cluster, pod: Pod) -> tuple[CPUSet, Any, bool]:
    """On the cluster's only node "n": the CPUs the replica gives the pod's container "app" (admitted
    on trial), CPUOrchestration's per-node verdict, and whether its batch form passes the node."""
    admission = cluster.nodes["n"].model.admit(pod, trial=True)
    assert admission.admitted, admission.message
    given = admission.containers["app"].cpuset
    cluster.nodes["n"].model.unadmit(pod.uid)
    plugin = registry.create("CPUOrchestration")
    verdict = plugin.filter(CycleState(cluster=cluster), pod, cluster.nodes["n"])
    table = Scheduler(cluster, load_profile("toposched")).table
    table.refresh()
    ok, _ = plugin.filter_all(CycleState(cluster=cluster), pod, table, np.arange(table.size))
    return given, verdict, bool(ok[table.index["n"]])


def test_the_per_numa_counts_fit_the_row_memo_on_a_machine_of_many_numa_nodes() -> None:
    # 70 NUMA nodes of one two-thread core each: the counts are kept for the first 16 NUMA nodes, as
    # integers a row of int64 holds, and the lowest NUMA node that fits is found among them.
    rows = [{"cpu": c + t * 70, "core": c, "socket": 0, "numa": c} for t in range(2) for c in range(70)]
    machine = Machine.from_cpu_table(rows, memory_per_numa=GI)
    free = machine.online.mask & ~(1 << 70)  # NUMA node 0 has one thread left, the others whole cores
    counts = np.array([_bind_counts_of(free, machine)], dtype=np.int64)
    assert counts[0, 4] == 0 and counts[0, 0] == 2 * 69
    assert not _lowest_fit(counts, 1)[0]  # NUMA node 0 fits one CPU and has no whole core
    assert _lowest_fit(counts, 2)[0]  # NUMA node 1 is the lowest with two free CPUs, a whole core
    assert not _lowest_fit(counts, 3)[0]  # no NUMA node has three


@pytest.mark.parametrize("case", ["memory-elsewhere", "pod-memory-elsewhere", "hugepages-elsewhere", "group", "group-whole"])
def test_with_a_static_memory_manager_the_numa_node_both_hint_decides(case: str) -> None:
    # The Static memory manager offers the one-node sets of NUMA nodes outside any multi-NUMA group
    # whose free memory covers the container's; merged with the CPU manager's hints, the kubelet takes
    # the container's CPUs, whole cores first, from the lowest NUMA node both offer.
    # - memory-elsewhere: NUMA node 0 has one thread of every core reserved and its memory taken, so
    #   the kubelet takes from NUMA node 1, whole cores: refused (without the memory manager's hints
    #   the lowest fitting NUMA node, 0, has no whole core, and the node would pass).
    # - pod-memory-elsewhere: the same at pod scope, NUMA node 0 with 14 GiB free, the pod asking for
    #   twice 10 GiB (each container's would fit there; the pod's hint is for the pod's).
    # - hugepages-elsewhere: NUMA node 0's 2 MiB pages taken instead, the pod asking for some.
    # - group: a 100 GiB pod holds NUMA nodes 0 and 1 as one group, so neither is offered alone
    #   although NUMA node 1 has memory and whole cores left; NUMA node 2 has one thread of every
    #   core reserved: one thread per core, the node passes.
    # - group-whole: the same group, NUMA node 2 with whole cores (NUMA node 3 has none, so the rule for
    #   every NUMA node does not apply): refused.
    bench = _bench("realistic")
    memory = dict(memory_manager_policy="Static", reserved_memory={0: {"memory": 2 * GI + 100 * 2**20}},
                  system_reserved={"memory": 2 * GI})
    pages = {"hugepages-2Mi": 2 * GI} if case.startswith("hugepages") else {}
    if case.endswith("-elsewhere"):
        machine = bench.wide_machine(2, 12, 2, 2, 96, 0, 1024 if pages else 0)
        reserved, big = 0, (80 if case.startswith("pod") else 1 if pages else 90) * GI
    else:
        machine, reserved, big = bench.wide_machine(4, 8, 2, 2, 64, 0, 0), 2, 100 * GI
    seconds = _second_threads(machine, 3 if case == "group-whole" else reserved)
    config = KubeletConfig(topology_manager_policy="best-effort", cpu_manager_policy="static",
                           topology_manager_scope="pod" if case.startswith("pod") else "container",
                           reserved_system_cpus=seconds, **memory)
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)
    cluster.add_bound_pod(Pod("big", uid="big", containers=(Container("c", limits={"cpu": 1000, "memory": big, **pages}),)),
                          "n", now=0.0)
    assert 0 in cluster.nodes["n"].pods["big"].placement.numa_nodes
    grouped = cluster.nodes["n"].model.memory.one_node_memory(("memory",))[1]
    assert grouped == (0 if case.endswith("-elsewhere") else 0b11)
    containers = [Container("app", limits={"cpu": 4000, "memory": 10 * GI, **({"hugepages-2Mi": 64 * 2**20} if pages else {})})]
    if case.startswith("pod"):
        containers.append(Container("side", limits={"cpu": 2000, "memory": 10 * GI}))
    pod = Pod("spread", uid="spread", annotations={"toposched.io/cpu-bind-policy": "SpreadByPCPUs"},
              containers=tuple(containers))
    given, verdict, batch = _kubelet_and_filter(cluster, pod)
    assert {machine.cpu(c).numa_id for c in given} == {1 if case.endswith("-elsewhere") else 2}
    split = len({machine.cpu(c).core_id for c in given}) < len(given)
    assert split == (case != "group")
    assert verdict.is_success == (not split), verdict.message
    assert split == (LOWEST in verdict.message)
    assert batch == (not split)


def _numa_node_1_reserved(policy: str, options: dict[str, str], **memory: Any) -> Cluster:
    """One node of 2 NUMA nodes of 4 two-thread cores and 8 GiB, every CPU of NUMA node 1 reserved."""
    machine = Machine.from_cpu_table([{"cpu": c, "core": c % 8, "socket": 0, "numa": c % 8 // 4} for c in range(16)],
                                     memory_per_numa=8 * GI)
    config = KubeletConfig(topology_manager_policy=policy, cpu_manager_policy="static", cpu_manager_options=options,
                           reserved_system_cpus=CPUSet(c for c in range(16) if c % 8 // 4 == 1),
                           kube_reserved={"memory": GI}, **memory)
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)
    return cluster


def _refused_and_split(cluster: Cluster, pod: Pod, wording: str) -> tuple[str, Any]:
    """Both forms of the filter refuse ``pod`` on node ``n`` with ``wording``, and the replica admits it
    with two threads of one core for its container; returns the refusal and the admission."""
    plugin = registry.create("CPUOrchestration")
    node = cluster.nodes["n"]
    verdict = plugin.filter(CycleState(cluster=cluster), pod, node)
    assert not verdict.is_success and wording in verdict.message, verdict.message
    scheduler = Scheduler(cluster, load_profile("toposched"))
    scheduler.table.refresh()
    batch, _ = plugin.filter_all(CycleState(cluster=cluster), pod, scheduler.table, np.arange(scheduler.table.size))
    assert not batch[0]
    admission = node.model.admit(pod, trial=True)
    given = admission.containers["app"].cpuset
    assert len({node.model.machine.cpu(c).core_id for c in given}) < len(given)  # two threads of one core
    return verdict.message, admission


def test_a_numa_node_without_free_cpus_does_not_spare_a_packing_kubelet_whose_hint_names_it() -> None:
    # NUMA node 1's CPUs are all reserved, so its memory is all a container may get there; a pod
    # holding one CPU and most of NUMA node 0's memory leaves NUMA node 0 three whole free cores. The
    # Static memory manager can place 3 GiB on NUMA node 1 only, so a best-effort Topology Manager
    # names NUMA node 1, which has no free CPU: the static CPU manager then takes from every free CPU,
    # whole cores first. No NUMA node has both the CPUs and the memory (the lowest-fit rule says
    # nothing); every NUMA node with a free CPU has a whole free core, and the filter refuses the node.
    cluster = _numa_node_1_reserved("best-effort", {}, **STATIC_MEMORY)
    cluster.add_bound_pod(Pod("hog", uid="hog", containers=(Container("app", limits={"cpu": 1000, "memory": 6 * GI}),)),
                          "n", now=0.0)
    node = cluster.nodes["n"]
    counts = _bind_counts_of(registry.create("CPUOrchestration")._free_mask(node), node.model.machine)
    assert counts[4] == 6  # NUMA node 1, without a free CPU, is not counted; NUMA node 0 has 3 whole free cores
    refusal, admission = _refused_and_split(cluster, _spread_pod(1, 2, {"memory": 3 * GI}), PACKS)
    assert LOWEST not in refusal and admission.containers["app"].hint.numa_nodes == frozenset({1})


@pytest.mark.parametrize(("policy", "cpus", "wording"), [("none", 4, DISTRIBUTES), ("best-effort", 4, "whole cores"),
                                                         ("none", 2, "from one NUMA node")])
def test_a_kubelet_distributing_over_numa_nodes_has_only_those_with_free_cpus_to_spread_over(
        policy: str, cpus: int, wording: str) -> None:
    # distribute-cpus-across-numa spreads a container over NUMA nodes that have free CPUs: with NUMA
    # node 1's CPUs all reserved, 4 CPUs (a core's threads times the NUMA nodes) all go to NUMA node
    # 0, packed, whole cores first, though NUMA node 1 has no whole free core. Without a hint, 2 CPUs
    # (fewer than a NUMA node averages) are packed on one NUMA node that has them free: NUMA node 0.
    cluster = _numa_node_1_reserved(policy, {"distribute-cpus-across-numa": "true"})
    _refused_and_split(cluster, _spread_pod(1, cpus), wording)


_AFTER_OTHERS = "even after the"  # the rule's wording for a container admitted after others


@pytest.mark.parametrize("options", [{}, {"distribute-cpus-across-numa": "true"}])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_container_admitted_after_others_gets_whole_cores_wherever_the_filter_says_it_will(
        seed: int, options: dict[str, str]) -> None:
    # The containers before the one judged take CPUs first, each breaking at most one whole core; the
    # filter refuses only where a whole core is left on every NUMA node with a free CPU even so. Held
    # on filled clusters: there the replica refuses the pod or gives that container two threads of a core.
    policies = _bench("realistic").POLICIES
    scheduler = _filled_cluster(seed, 150, lambda rnd: rnd.choice(policies), options)
    cluster, table = scheduler.cluster, scheduler.table
    plugin = registry.create("CPUOrchestration")
    table.refresh()
    shapes = [((1, 2), ()), ((1, 7), ()), ((3, 4), ()), ((1, 1, 12), ()), ((1, 3), (2,)), ((2, 16), (1,)), ((1, 24), ())]
    refused = checked = 0
    for i, (apps, inits) in enumerate(shapes):
        pod = Pod(f"after-{i}", uid=f"after-{i}", annotations={"toposched.io/cpu-bind-policy": "SpreadByPCPUs"},
                  init_containers=tuple(Container(f"init{k}", limits={"cpu": n * 1000, "memory": GI})
                                        for k, n in enumerate(inits)),
                  containers=tuple(Container(f"c{k}", limits={"cpu": n * 1000, "memory": GI}) for k, n in enumerate(apps)))
        batch, _ = plugin.filter_all(CycleState(cluster=cluster), pod, table, np.arange(table.size))
        for row, name in enumerate(table.names):
            node = cluster.nodes[name]
            verdict = plugin.filter(CycleState(cluster=cluster), pod, node)
            assert verdict.is_success == bool(batch[row]), (name, verdict.message)
            if verdict.is_success or _AFTER_OTHERS not in verdict.message:
                continue
            refused += 1
            judged = verdict.message.split("container ")[1].split(" ")[0]
            admission = node.model.admit(pod, trial=True)
            if not admission.admitted:
                continue
            try:
                given = admission.containers[judged].cpuset
                cores = [node.model.machine.cpu(c).core_id for c in given]
                assert len(set(cores)) < len(cores), f"{name}: the kubelet gave {judged} {given}, one thread per core"
                checked += 1
            finally:
                node.model.unadmit(pod.uid)
    assert refused and checked, f"the rule applied {refused} times, {checked} of them admitted: the test checks too little"


def test_the_first_container_with_enough_cpus_is_judged_after_the_cpus_of_those_before_it() -> None:
    # One NUMA node of 48 two-thread cores, all free but core 0 (reserved): a 1-CPU container, then
    # one of 7. The first takes a thread, the second three whole cores and a thread: the filter
    # says so for the second, and the replica agrees.
    bench = _bench("realistic")
    cluster = Cluster()
    config = KubeletConfig(topology_manager_policy="restricted", cpu_manager_policy="static",
                           reserved_system_cpus=CPUSet([0, 48]), kube_reserved={"memory": GI})
    cluster.set_node(NodeSpec("n"), machine=bench.wide_machine(1, 48, 2, 1, 384, 0, 0), kubelet_config=config)
    pod = Pod("p", uid="p", annotations={"toposched.io/cpu-bind-policy": "SpreadByPCPUs"},
              containers=(Container("c0", limits={"cpu": 1000, "memory": GI}),
                          Container("c1", limits={"cpu": 7000, "memory": GI})))
    scheduler = Scheduler(cluster, load_profile("toposched"))
    decision = scheduler.schedule(pod, now=0.0)
    assert decision.node is None
    (reason,) = decision.reasons
    assert "container c1 whole cores" in reason and "even after the 1 CPU of the containers before it" in reason
    admission = cluster.nodes["n"].model.admit(pod, trial=True)
    cores = [cluster.nodes["n"].model.machine.cpu(c).core_id for c in admission.containers["c1"].cpuset]
    assert len(set(cores)) < len(cores)
