"""How long the simulator takes, and how much of it is the scheduler.

Runs one contender over a workload (by default the full Alibaba GPU trace from ../shared/data:
``openb_pod_list_default.csv`` on ``openb_node_list_gpu_node.csv``; else the bundled default
scenario) and prints the total wall time, the time inside the scheduler's decisions, and the
simulator's own overhead (engine + node ground truth, i.e. the kubelet model) as the difference.

    python benchmarks/simulator.py [--bundled] [--scheduler toposched] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import SHARED_DATA, peak_rss_mib, write_json

from toposched.sim.contenders import contender
from toposched.sim.engine import Simulation
from toposched.sim.scenario import load_nodes_file, load_pods, load_scenario


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundled", action="store_true", help="the bundled default scenario instead of the trace")
    parser.add_argument("--scheduler", default="toposched", help="which contender (default toposched)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    traces = SHARED_DATA / "traces"
    pods_csv = next(traces.rglob("openb_pod_list_default.csv"), None) if traces.is_dir() else None
    nodes_csv = next(traces.rglob("openb_node_list_gpu_node.csv"), None) if traces.is_dir() else None
    if args.bundled or pods_csv is None or nodes_csv is None:
        if not args.bundled:
            print("the Alibaba trace is not in ../shared/data/traces: running the bundled scenario", file=sys.stderr)
        scenario = load_scenario()
        nodes, pods, config, workload = scenario.nodes, scenario.pods, scenario.config, "bundled default scenario"
    else:
        nodes, pods, config, workload = load_nodes_file(nodes_csv), load_pods(pods_csv), None, pods_csv.name
    start = time.perf_counter()
    result = Simulation(nodes, pods, contender(args.scheduler), config, timer=time.perf_counter).run()
    wall = time.perf_counter() - start
    scheduler = result.scheduler_seconds or 0.0
    figures = {
        "workload": workload, "scheduler": args.scheduler, "nodes": len(nodes), "pods": len(pods),
        "scheduled": result.scheduled, "wall_seconds": round(wall, 3), "scheduler_seconds": round(scheduler, 3),
        "simulator_overhead_seconds": round(wall - scheduler, 3), "peak_rss_mib": round(peak_rss_mib(), 1),
    }
    print(f"{workload}: {len(pods)} pods on {len(nodes)} nodes through {args.scheduler}")
    print(f"  total {wall:.1f} s = scheduler {scheduler:.1f} s + simulator (engine, kubelet model) {wall - scheduler:.1f} s")
    print(f"  scheduled {result.scheduled}, peak RSS {figures['peak_rss_mib']} MiB")
    write_json(args.json, figures)


if __name__ == "__main__":
    main()
