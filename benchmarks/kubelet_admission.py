"""Time a whole kubelet admission (KubeletNode.admit) against the machine's NUMA node count.

Each machine has 4 two-thread cores and 16 GiB per NUMA node; the kubelet runs the static CPU
and memory managers under the restricted Topology Manager policy with pod scope, so both the
CPU and the memory manager give a hint for every NUMA set that fits. Guaranteed pods of 2..6
CPUs are admitted until the node is full, then released. Upstream's exhaustive merge grows as
(2^N)^providers; the fast merge gives the same answers. Above 8 NUMA nodes (the kubelet's
``max-allowable-numa-nodes`` is raised to the machine's count) only the fast merge is timed:
upstream's would take hours.

    python benchmarks/kubelet_admission.py [--numa 1 2 4 8 16] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from _common import peak_rss_mib, write_json

from toposched.kubelet import KubeletConfig, KubeletNode, fast_merge_hints, merge_hints
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
    samples, admitted_ms, admitted = [], [], 0
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
            if result.admitted:
                admitted_ms.append(samples[-1])
            refused = 0 if result.admitted else refused + 1
            if refused == 3:
                break
    return {"median_ms": statistics.median(samples), "max_ms": max(samples),
            "admitted_median_ms": statistics.median(admitted_ms), "admissions": len(samples), "admitted": admitted}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--numa", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    figures: dict[str, dict] = {}
    for numa in args.numa:
        merges = (("upstream", merge_hints), ("fast", fast_merge_hints))
        for label, merge in merges[numa > _KUBELET_NUMA_LIMIT:]:
            f = run(numa, merge, args.rounds)
            figures[f"{label}:{numa}"] = f
            print(f"{numa:2d} NUMA  {label:8s} merge  admitted pods: median {f['admitted_median_ms']:7.2f} ms"
                  f"  all: max {f['max_ms']:7.2f} ms"
                  f"  ({f['admissions']} admissions, {f['admitted']} admitted)", flush=True)
    figures["peak_rss_mib"] = peak_rss_mib()
    write_json(args.json_out, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
