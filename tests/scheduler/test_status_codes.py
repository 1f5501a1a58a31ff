"""Unschedulable vs UnschedulableAndUnresolvable survives the batch path, plugin by plugin.

One cluster with a node refused for each reason a built-in filter has, and one pod: a
Guaranteed 5-CPU pod that asks for single-numa-node by annotation and selects ``zone: a``.
For every node, the code of the batch verdict (``Scheduler.evaluate`` and ``Scheduler.refusal``,
over given rows, on the vector path, the few-rows path and through the per-shape cache), of the refusing
plugin's ``filter_all`` and ``filter_few``, and of the per-node filter chain
(``Runner.filter_node``) are all the one the reason calls for.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from toposched.kubelet import KubeletConfig, KubeletNode
from toposched.names import CPU_CAPACITY_ATTRIBUTE, CPU_ENFORCEMENT_LABEL, KOORDINATOR_CPU_BIND_POLICY_LABEL
from toposched.scheduler import Cluster, Code, NodeSpec, Scheduler, Taint
from toposched.scheduler.intent import NUMA_POLICY_ANNOTATION
from toposched.scheduler.profile_setup import load_profile
from toposched.scheduler.status import code_of
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod

GI = 2**30
SINGLE = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                       reserved_system_cpus=CPUSet([0]))
BEST_EFFORT = dataclasses.replace(SINGLE, topology_manager_policy="best-effort")
UNRESOLVABLE, UNSCHEDULABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.UNSCHEDULABLE

# node -> (the first filter that refuses the pod there, its code)
EXPECTED = {
    "fits": None,
    "cordoned": ("NodeUnschedulable", UNRESOLVABLE),
    "broken": ("NodeUnschedulable", UNRESOLVABLE),
    "tainted": ("TaintToleration", UNRESOLVABLE),
    "elsewhere": ("NodeAffinity", UNRESOLVABLE),
    "small": ("NodeResourcesFit", UNSCHEDULABLE),
    "best-effort": ("NUMAAlignment", UNRESOLVABLE),  # the pod's policy conflicts with the node's
    "narrow": ("NUMAAlignment", UNSCHEDULABLE),  # 4 CPUs per NUMA node
    "smt": ("CPUOrchestration", UNRESOLVABLE),  # FullPCPUsOnly: 5 CPUs are not whole cores
    "unreadable": ("CPUOrchestration", UNRESOLVABLE),  # an unknown CPU enforcement
    "unusable-caps": ("ZoneCapacity", UNRESOLVABLE),  # a capacity attribute that is no quantity
    "capped": ("ZoneCapacity", UNSCHEDULABLE),  # 1 CPU per NUMA node
}


def machine(cores: int = 4, *, caps: dict[int, str] | None = None) -> Machine:
    """2 NUMA nodes x ``cores`` cores x 2 threads; ``caps``: ``toposched.io/cpu-capacity`` per NUMA node."""
    total = 2 * cores
    rows = [{"cpu": c + t * total, "core": c, "socket": c // cores, "numa": c // cores}
            for t in range(2) for c in range(total)]
    built = Machine.from_cpu_table(rows, memory_per_numa=32 * GI,
                                   distances={a: {b: 10 if a == b else 21 for b in range(2)} for a in range(2)})
    if not caps:
        return built
    nodes = tuple(dataclasses.replace(n, attributes={**n.attributes, CPU_CAPACITY_ATTRIBUTE: caps[n.id]})
                  for n in built.numa_nodes)
    return dataclasses.replace(built, numa_nodes=nodes)


def cluster() -> Cluster:
    out = Cluster()
    for name in EXPECTED:
        labels = {"zone": "b" if name == "elsewhere" else "a"}
        if name == "smt":
            labels[KOORDINATOR_CPU_BIND_POLICY_LABEL] = "FullPCPUsOnly"
        if name == "unreadable":
            labels[CPU_ENFORCEMENT_LABEL] = "neither"
        cpus = 4 if name == "narrow" else 8
        spec = NodeSpec(name, allocatable={"cpu": 2000 if name == "small" else 2 * cpus * 1000, "memory": 60 * GI,
                                           "pods": 110},
                        labels=labels, unschedulable=name == "cordoned",
                        taints=(Taint("dedicated", "gpu", "NoSchedule"),) if name == "tainted" else ())
        if name == "broken":  # a report without a NUMA zone: the node is unusable
            out.set_node(spec)
            report = KubeletNode(machine(), SINGLE, name=name).to_nrt()
            out.update_report(dataclasses.replace(report, zones=()), now=0.0)
            continue
        caps = {0: "x", 1: "x"} if name == "unusable-caps" else {0: "1", 1: "1"} if name == "capped" else None
        out.set_node(spec, machine=machine(cpus // 2, caps=caps),
                     kubelet_config=BEST_EFFORT if name == "best-effort" else SINGLE)
    return out


def pod(name: str = "p") -> Pod:
    return Pod(name, uid=name, node_selector={"zone": "a"}, annotations={NUMA_POLICY_ANNOTATION: "single-numa-node"},
               containers=(Container("c", limits={"cpu": 5000, "memory": GI}),))


def test_the_scenario_refuses_each_node_as_intended():
    scheduler = Scheduler(cluster(), load_profile("toposched"))
    state, status = scheduler.runner.pre_filter(pod())
    assert status.is_success
    for name, expected in EXPECTED.items():
        verdict, plugin = scheduler.runner.filter_node(state, pod(), scheduler.cluster.nodes[name])
        assert (verdict.is_success if expected is None else (plugin, verdict.code) == expected), (name, verdict)


@pytest.mark.parametrize("path", ["rows", "vector", "few", "cached"])
def test_the_batch_verdicts_keep_the_per_node_code(path):
    """``rows``: exactly the given rows, no cache; ``vector``/``few``: a new pod shape evaluated with
    NumPy / in plain Python; ``cached``: the same shape again, from the per-shape cache."""
    scheduler = Scheduler(cluster(), load_profile("toposched"), few_rows=10**9 if path == "few" else 0)

    def no_per_node_pass(*args, **kwargs):
        raise AssertionError("the batch path ran the per-node filter chain")

    scheduler.runner.filter_node = no_per_node_pass  # type: ignore[method-assign]
    state, status = scheduler.runner.pre_filter(pod())
    assert status.is_success
    scheduler.table.refresh()
    rows = np.arange(scheduler.table.size)
    key = None if path == "rows" else scheduler.shape(pod())
    assert path == "rows" or key is not None
    if path == "cached":
        scheduler.evaluate(state, pod(), key, rows)  # fill the cache; the answer below comes from it
    verdict, _ = scheduler.evaluate(state, pod(), key, rows)
    for row, index in enumerate(verdict.tolist()):
        name = scheduler.table.names[row]
        code = None if index < 0 else scheduler.refusal(index).code
        assert code == (EXPECTED[name] and EXPECTED[name][1]), name


def test_each_filters_batch_and_few_forms_give_its_per_node_code():
    scheduler = Scheduler(cluster(), load_profile("toposched"))
    state, _ = scheduler.runner.pre_filter(pod())
    table = scheduler.table
    table.refresh()
    rows = np.arange(table.size)
    seen = set()
    for index, plugin in enumerate(scheduler.runner.filters):
        ok, reason = plugin.filter_all(state, pod(), table, rows)
        batch = [None if passed else (reason if isinstance(reason, str) else reason[i]) for i, passed in enumerate(ok)]
        few = scheduler.runner.filters_few[index](state, pod(), rows.tolist())  # the plugin's, or derived
        for row, name in enumerate(table.names):
            if batch[row] is None:
                assert few[row] is None, (plugin.name, name)
                continue
            if not hasattr(plugin, "filter"):  # batch form only: its few form is derived from it
                assert code_of(batch[row]) == code_of(few[row]), (plugin.name, name)
                continue
            per_node = plugin.filter(state, pod(), scheduler.cluster.nodes[name])
            assert not per_node.is_success, (plugin.name, name)
            assert code_of(batch[row]) == code_of(few[row]) == per_node.code, (plugin.name, name, per_node)
            seen.add((plugin.name, per_node.code))
    assert {e for e in EXPECTED.values() if e} <= seen
