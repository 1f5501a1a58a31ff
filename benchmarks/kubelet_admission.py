"""Time a whole kubelet admission (KubeletNode.admit) against the machine's NUMA node count.

Each machine has 4 two-thread cores and 16 GiB per NUMA node; the kubelet runs the static CPU
and memory managers under the restricted Topology Manager policy with pod scope, so both the
CPU and the memory manager give a hint for every NUMA set that fits. Guaranteed pods of 2..6
CPUs are admitted until the node is full (three refusals in a row), then released; the refusals
(TopologyAffinityError: no preferred hint is left) are timed apart from the admitted pods.
Upstream's exhaustive merge grows as (2^N)^providers; the fast merge gives the same answers. Above 8 NUMA nodes (the kubelet's
``max-allowable-numa-nodes`` is raised to the machine's count) only the fast merge is timed:
upstream's would take hours.

``--distribute`` times instead the CPU manager's ``distribute-cpus-across-numa`` choice alone
(``take_by_topology(distribute=True)``): on each machine, 300 seeded draws of free CPUs, a count
of 1 to 24 CPUs, a CPU group size of 1 or 2 and ``align-by-socket`` or not, once with the compiled
search (``toposched.kubelet.numa_distribution``) and once with its Python form, which must choose
the same CPUs.

    python benchmarks/kubelet_admission.py [--numa 1 2 4 8 16] [--distribute] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from _common import peak_rss_mib, write_json

from toposched.kubelet import KubeletConfig, KubeletNode, fast_merge_hints, merge_hints, numa_distribution
from toposched.kubelet.cpu_assignment import CPUAllocationError, CPUTopology, take_by_topology
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod

GI = 2**30
_KUBELET_NUMA_LIMIT = 8  # upstream's default max-allowable-numa-nodes


def build(numa: int) -> Machine:
    cores = 4 * numa
    rows = [{"cpu": c + t * cores, "core": c, "socket": c // 4, "numa": c // 4} for t in range(2) for c in range(cores)]
    dist = {a: {b: 10 if a == b else 20 + 2 * abs(a - b) for b in range(numa)} for a in range(numa)}
    return Machine.from_cpu_table(rows, memory_per_numa=16 * GI, distances=dist)


def run(numa: int, merge, rounds: int) -> dict[str, float]:
    config = KubeletConfig(
        topology_manager_policy="restricted",
        topology_manager_scope="pod",
        cpu_manager_policy="static",
        reserved_system_cpus=CPUSet([0]),
        memory_manager_policy="Static",
        reserved_memory={0: {"memory": 100 * 2**20}},
        topology_manager_options={"max-allowable-numa-nodes": str(numa)} if numa > _KUBELET_NUMA_LIMIT else {},
    )
    samples, admitted_ms, refused_ms, admitted = [], [], [], 0
    for r in range(rounds):
        node = KubeletNode(build(numa), config, merge=merge)
        refused = 0
        for i in range(64 * numa):
            cpus = 2 + (i + r) % 5
            pod = Pod(f"p{i}", uid=f"p{i}", containers=(Container("c", limits={"cpu": cpus * 1000, "memory": cpus * GI}),))
            start = time.perf_counter()
            result = node.admit(pod)
            samples.append((time.perf_counter() - start) * 1000)
            admitted += result.admitted
            (admitted_ms if result.admitted else refused_ms).append(samples[-1])
            refused = 0 if result.admitted else refused + 1
            if refused == 3:
                break
    return {"median_ms": statistics.median(samples), "max_ms": max(samples),
            "admitted_median_ms": statistics.median(admitted_ms),
            "refused_median_ms": statistics.median(refused_ms) if refused_ms else 0.0,
            "admissions": len(samples), "admitted": admitted}


def run_distribute(numa: int, draws: int = 300) -> dict[str, float]:
    """The distribute-cpus-across-numa choice on ``numa`` NUMA nodes (module notes), per form: mean and max ms."""
    machine = build(numa)
    topo, cpus = CPUTopology.of(machine), sorted(c.id for c in machine.cpus)
    rnd = random.Random(numa)
    cases = []
    for _ in range(draws):
        share = rnd.choice((0.5, 0.8, 1.0))
        cases.append((CPUSet([c for c in cpus if rnd.random() < share]), rnd.choice((1, 2, 3, 4, 6, 8, 12, 16, 24)),
                      rnd.choice((1, 2)), rnd.random() < 0.2))
    built, figures, chosen = numa_distribution.compiled, {}, {}
    for form, module in (("compiled", built), ("python", None)):
        if form == "compiled" and built is None:
            continue
        numa_distribution.compiled = module
        times, picks = [], []
        for available, count, group, by_socket in cases:
            start = time.perf_counter()
            try:
                picks.append(take_by_topology(topo, available, count, distribute=True, cpu_group_size=group,
                                              align_by_socket=by_socket))
            except CPUAllocationError as err:
                picks.append(str(err))
            times.append((time.perf_counter() - start) * 1000)
        figures[f"{form}_mean_ms"], figures[f"{form}_max_ms"] = statistics.fmean(times), max(times)
        chosen[form] = picks
    numa_distribution.compiled = built
    if len(chosen) == 2 and chosen["compiled"] != chosen["python"]:
        raise SystemExit(f"{numa} NUMA: the compiled search chose other CPUs than the Python form")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--numa", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--distribute", action="store_true", help="time the distribute-cpus-across-numa choice alone")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    figures: dict[str, dict] = {}
    for numa in args.numa:
        if args.distribute:
            f = figures[f"distribute:{numa}"] = run_distribute(numa)
            compiled = (f"compiled: mean {f['compiled_mean_ms']:6.3f} ms, max {f['compiled_max_ms']:6.2f} ms   "
                        if "compiled_mean_ms" in f else "compiled: not built   ")
            print(f"{numa:2d} NUMA  distribute-cpus-across-numa  {compiled}"
                  f"Python: mean {f['python_mean_ms']:6.3f} ms, max {f['python_max_ms']:6.2f} ms", flush=True)
            continue
        merges = (("upstream", merge_hints), ("fast", fast_merge_hints))
        for label, merge in merges[numa > _KUBELET_NUMA_LIMIT:]:
            f = run(numa, merge, args.rounds)
            figures[f"{label}:{numa}"] = f
            print(f"{numa:2d} NUMA  {label:8s} merge  admitted pods: median {f['admitted_median_ms']:7.2f} ms"
                  f"  refused: median {f['refused_median_ms']:7.2f} ms  all: max {f['max_ms']:7.2f} ms"
                  f"  ({f['admissions']} admissions, {f['admitted']} admitted)", flush=True)
    figures["peak_rss_mib"] = peak_rss_mib()
    write_json(args.json_out, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
