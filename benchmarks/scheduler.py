"""Scheduler core throughput: every node evaluated, exact placement, a realistic pod mix.

Nodes: 2 sockets x (NUMA/2) NUMA nodes x 16 two-thread cores each (8 NUMA -> 256 CPUs, like two
64-core EPYCs in NPS4), 128 GiB and 16 x 1 GiB hugepages per NUMA node, kubelet with the static CPU manager and the
single-numa-node Topology Manager policy (container scope). Pods (seeded): 60% Guaranteed with
whole CPUs (1-32, small sizes more likely), a quarter of those with 1 GiB hugepages; 30%
Burstable; 10% BestEffort. Every pod is scheduled with no sampling of nodes.

    python benchmarks/scheduler.py --nodes 5000 --numa 8 --pods 10000 --json OUT.json [--scaling]

``--from-reports`` also runs the same pods on the same cluster built the way a real cluster
builds it: every node known only from the report its agent publishes (node description
included), serialised and parsed; its figures go under ``from_reports_*`` keys.

``--scaling`` also times 1,000 and 10,000 nodes on the same pods and prints the ratio of
per-pod time (cost should grow at most linearly: ratio <= 10).

``--cpu-time`` measures the CPU time of this process (``time.process_time``) instead of wall time,
for comparing changes on a machine others are using; the JSON keys stay the same and
``clock`` says which was measured.

``--gpu`` adds the GPU variant (issue 5): the same cluster with 1,000 of its nodes replaced by
GPU servers (the simulator's ``gpu-8x`` profile: 2 NUMA nodes, 8 GPUs and 4 RDMA HCAs under 4
PCIe switches, restricted policy at pod scope) and ~30% GPU pods: whole GPUs (1, 2, 4, 8) with
HCAs under a preferred PCIe scope, and shares of one GPU (``koordinator.sh/gpu-core``). Its
figures go into the same JSON under ``gpu_*`` keys. With ``--device-agent`` the GPU servers say
``toposched.io/device-enforcement: agent``, so the scheduler chooses the device ids itself
(docs/devices/scheduling.md); ``device_enforcement`` in the JSON says which ran.

Once its cluster is built, each run freezes the heap (``toposched.kube.ops.freeze_heap``) as the
long-running ``toposched scheduler`` and ``toposched extender`` do after their first full list:
the garbage collector then no longer walks the long-lived cluster model on every collection.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Callable

from _common import callgrind_instrument, peak_rss_mib, write_json

from toposched.kube.ops import freeze_heap
from toposched.kubelet import KubeletConfig
from toposched.node_report import node_report
from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.profile_setup import load_profile
from toposched.topology import CPUSet, Machine, NUMANode
from toposched.topology.nrt import parse_nrt
from toposched.workload import Container, Pod

GI = 2**30


def build_machine(numa: int) -> Machine:
    """A two-socket machine with ``numa`` NUMA nodes of 16 two-thread cores, 128 GiB and 16 x 1 GiB pages each."""
    cores = 16 * numa
    per_socket = max(1, cores // 2)
    rows = [{"cpu": c + t * cores, "core": c, "socket": c // per_socket, "numa": c // 16} for t in range(2) for c in range(cores)]
    base = Machine.from_cpu_table(rows, distances={a: {b: 10 if a == b else (12 if a // (numa // 2 or 1) == b // (numa // 2 or 1) else 32)
                                                       for b in range(numa)} for a in range(numa)})
    nodes = tuple(NUMANode(n.id, n.cpus, 128 * GI, {GI: 16}, n.distances) for n in base.numa_nodes)
    return Machine(base.cpus, nodes)


def build_cluster(n_nodes: int, numa: int, from_reports: bool = False) -> tuple[Cluster, float]:
    """The cluster, and how long building it took. ``from_reports``: each node known only by the
    report its agent publishes (serialised and parsed, as from the API server), as on a real cluster."""
    machine = build_machine(numa)
    config = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                           reserved_system_cpus=CPUSet([0, 16 * numa]))
    report = json.dumps(node_report(machine, config, node_name="template")) if from_reports else ""
    cluster = Cluster()
    start = time.perf_counter()
    for i in range(n_nodes):
        spec = NodeSpec(f"node-{i:05d}", allocatable={"cpu": (32 * numa - 2) * 1000, "memory": (128 * numa - 16 * numa - 2) * GI,
                                                     "hugepages-1Gi": 16 * numa * GI, "pods": 110})
        if from_reports:
            cluster.set_node(spec)
            obj = json.loads(report)
            obj["metadata"]["name"] = spec.name
            cluster.update_report(parse_nrt(obj), now=0.0)
        else:
            cluster.set_node(spec, machine=machine, kubelet_config=config)
    return cluster, time.perf_counter() - start


def make_pods(count: int, seed: int) -> list[Pod]:
    rnd = random.Random(seed)
    sizes = [1, 2, 4, 8, 16, 32]
    weights = [30, 25, 20, 14, 8, 3]
    pods = []
    for i in range(count):
        roll = rnd.random()
        if roll < 0.6:
            cpus = rnd.choices(sizes, weights)[0]
            limits = {"cpu": cpus * 1000, "memory": cpus * 2 * GI}
            if rnd.random() < 0.25:
                limits["hugepages-1Gi"] = rnd.choice([1, 2, 4]) * GI
            containers = (Container("app", limits=limits),)
        elif roll < 0.9:
            containers = (Container("app", requests={"cpu": rnd.choice([100, 250, 500, 1500]),
                                                     "memory": rnd.choice([256, 512, 2048]) * 2**20}),)
        else:
            containers = (Container("app"),)
        pods.append(Pod(f"pod-{i:05d}", uid=f"uid-{i:05d}", containers=containers))
    return pods


def add_gpu_nodes(cluster: Cluster, count: int, device_enforcement: str = "kubelet") -> None:
    """Replace the first ``count`` nodes by GPU servers of the simulator's ``gpu-8x`` profile."""
    from toposched.sim.hardware import load_hardware_profile as hardware_profile

    gpu = hardware_profile("gpu-8x")
    names = sorted(cluster.nodes)[:count]
    for name in names:
        cluster.remove_node(name)
        spec = NodeSpec(name, labels={"toposched.io/device-enforcement": device_enforcement})
        cluster.set_node(spec, machine=gpu.machine, kubelet_config=gpu.kubelet,
                         device_plugins={r: list(d) for r, d in (gpu.device_plugins or {}).items()})


def make_gpu_pods(pods: list[Pod], seed: int, share: float = 0.3) -> list[Pod]:
    """``pods`` with about ``share`` of them replaced by GPU pods (whole GPUs with HCAs, or a GPU share)."""
    rnd = random.Random(seed + 1)
    out = []
    for pod in pods:
        if rnd.random() >= share:
            out.append(pod)
            continue
        if rnd.random() < 0.5:
            gpus = rnd.choices([1, 2, 4, 8], [40, 30, 20, 10])[0]
            limits = {"cpu": 12000 * gpus, "memory": 64 * GI * gpus, "nvidia.com/gpu": gpus, "rdma/hca": max(1, gpus // 2)}
            annotations = {"toposched.io/device-scope": "pcie:preferred"}
            containers = (Container("train", limits=limits),)
        else:
            percent = rnd.choice([10, 20, 25, 50])
            limits = {"koordinator.sh/gpu-core": percent, "koordinator.sh/gpu-memory-ratio": percent}
            containers = (Container("infer", requests={"cpu": 2000, "memory": 8 * GI}, limits=limits),)
            annotations = {}
        out.append(Pod(pod.name, uid=pod.uid, containers=containers, annotations=annotations))
    return out


def run(n_nodes: int, numa: int, pods: list[Pod], gpu_nodes: int = 0,
        clock: Callable[[], float] = time.perf_counter, device_enforcement: str = "kubelet",
        from_reports: bool = False, callgrind: bool = False) -> dict[str, float]:
    """Schedule ``pods`` (binding each decision) and time the loop with ``clock``; ``callgrind``
    switches callgrind's instrumentation on for the loop only."""
    cluster, build_s = build_cluster(n_nodes, numa, from_reports)
    if gpu_nodes:
        add_gpu_nodes(cluster, gpu_nodes, device_enforcement)
    scheduler = Scheduler(cluster, load_profile("toposched"))  # the built-in profile users run
    scheduler.table.refresh()
    freeze_heap()  # as `toposched scheduler` and `toposched extender` do once the cluster is listed
    latencies, scheduled = [], 0
    if callgrind:
        callgrind_instrument(True)
    start = clock()
    for i, pod in enumerate(pods):
        t0 = clock()
        decision = scheduler.schedule(pod, now=float(i))
        latencies.append((clock() - t0) * 1000)
        if decision.node is not None:
            scheduler.bound(pod, now=float(i))
            scheduled += 1
    elapsed = clock() - start
    if callgrind:
        callgrind_instrument(False)
    gc.unfreeze()  # this cluster is done with: let the next run's replace it
    latencies.sort()
    return {
        "nodes": n_nodes,
        "pods": len(pods),
        "scheduled": scheduled,
        "pods_per_second": len(pods) / elapsed,
        "p50_ms": statistics.median(latencies),
        "p99_ms": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "build_seconds": build_s,
        "seconds": elapsed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--numa", type=int, default=8)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scaling", action="store_true", help="also time 1,000 vs 10,000 nodes")
    parser.add_argument("--gpu", action="store_true", help="also run the GPU variant (1,000 GPU nodes, ~30%% GPU pods)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with this process's CPU time instead of wall time (for a busy machine)")
    parser.add_argument("--device-agent", action="store_true",
                        help="GPU variant: the scheduler chooses device ids (toposched.io/device-enforcement: agent)")
    parser.add_argument("--from-reports", action="store_true",
                        help="also run with every node known only from its agent's published report")
    parser.add_argument("--callgrind", action="store_true",
                        help="under valgrind --tool=callgrind --instr-atstart=no: count the instructions of the "
                             "first run's loop only (run without --gpu, --scaling, --from-reports)")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    clock = time.process_time if args.cpu_time else time.perf_counter
    pods = make_pods(args.pods, args.seed)
    figures = run(args.nodes, args.numa, pods, clock=clock, callgrind=args.callgrind)
    figures["clock"] = "cpu" if args.cpu_time else "wall"
    unit = " (CPU time)" if args.cpu_time else ""
    print(f"{figures['nodes']} nodes x {args.numa} NUMA, {figures['pods']} pods: {figures['pods_per_second']:.0f} pods/s{unit}, "
          f"p50 {figures['p50_ms']:.2f} ms, p99 {figures['p99_ms']:.2f} ms, scheduled {figures['scheduled']} "
          f"(cluster built in {figures['build_seconds']:.1f} s)", flush=True)
    if args.from_reports:
        reported = run(args.nodes, args.numa, pods, clock=clock, from_reports=True)
        figures.update({f"from_reports_{k}": v for k, v in reported.items() if k not in ("nodes", "pods")})
        print(f"from published reports: {reported['pods_per_second']:.0f} pods/s{unit}, p50 {reported['p50_ms']:.2f} ms, "
              f"p99 {reported['p99_ms']:.2f} ms, scheduled {reported['scheduled']} "
              f"(cluster built in {reported['build_seconds']:.1f} s)", flush=True)
    if args.scaling:
        sample = pods[: min(len(pods), 2000)]
        small = run(1000, args.numa, sample, clock=clock)
        large = run(10000, args.numa, sample, clock=clock)
        ratio = large["seconds"] / small["seconds"]
        figures["scaling_ratio_10000_vs_1000"] = ratio
        print(f"time for {len(sample)} pods: 1,000 nodes {small['seconds']:.2f} s, 10,000 nodes {large['seconds']:.2f} s, "
              f"ratio {ratio:.2f} (target <= 10)", flush=True)
    if args.gpu:
        gpu_nodes = min(1000, args.nodes)
        enforcement = "agent" if args.device_agent else "kubelet"
        gpu = run(args.nodes, args.numa, make_gpu_pods(pods, args.seed), gpu_nodes=gpu_nodes, clock=clock,
                  device_enforcement=enforcement)
        figures.update({f"gpu_{k}": v for k, v in gpu.items() if k not in ("nodes", "pods")})
        figures["gpu_nodes"] = gpu_nodes
        figures["device_enforcement"] = enforcement
        print(f"GPU variant, {gpu_nodes} of {args.nodes} nodes with 8 GPUs + 4 HCAs ({enforcement} chooses device ids), "
              f"~30% GPU pods: "
              f"{gpu['pods_per_second']:.0f} pods/s{unit}, p50 {gpu['p50_ms']:.2f} ms, p99 {gpu['p99_ms']:.2f} ms, "
              f"scheduled {gpu['scheduled']}", flush=True)
    figures["peak_rss_mib"] = peak_rss_mib()
    print(f"peak RSS {figures['peak_rss_mib']:.0f} MiB", flush=True)
    write_json(args.json_out, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
