"""How long ``toposched scheduler`` takes to start: reading a listed cluster into the scheduler, then its first cycle.

A scheduler that starts (a new leader after a failover, a restart) can place nothing until it has
listed Nodes, NodeResourceTopologies and Pods and built its model of them. This times that work
in one process, without a control plane: the three list answers as JSON text (``--nodes`` Nodes
as a kubelet registers them, each node's report as the agent publishes it for a machine of
``--numa`` NUMA nodes x 4 two-thread cores, and ``--pods`` pending Guaranteed pods of one CPU;
the objects of tests/e2e/objects.py, which benchmarks/e2e.py sends to the real API server),
decoded and handed to ``ClusterSync``'s relists as the reflectors hand them, then the first
scheduling cycle (which builds the node table). Prints CPU seconds per phase and peak RSS.
benchmarks/e2e.py measures the same start-up against the real kube-apiserver, network included.

    python benchmarks/startup.py --nodes 5000 --pods 10000 [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from _common import REPO, peak_rss_mib, write_json

sys.path.insert(0, str(REPO))

from tests.e2e.objects import node_object, nrt_object, pod_object  # noqa: E402
from toposched.kube.cluster_sync import ClusterSync  # noqa: E402
from toposched.scheduler import Cluster, Scheduler  # noqa: E402
from toposched.scheduler.profile_setup import load_profile  # noqa: E402


def list_texts(nodes: int, pods: int, numa: int) -> dict[str, str]:
    """The three list answers as the API server sends them (JSON text), by kind."""
    report = nrt_object("node", numa=numa)
    reports = []
    for i in range(nodes):
        obj = json.loads(json.dumps(report))
        obj["metadata"]["name"] = f"node-{i:05d}"
        reports.append(obj)
    pending = []
    for i in range(pods):
        obj = pod_object(f"pod-{i:05d}", 1, namespace="bench")
        obj["metadata"].update(uid=f"uid-{i:05d}", resourceVersion=str(i + 1))
        pending.append(obj)
    items = {"Node": [node_object(f"node-{i:05d}") for i in range(nodes)], "NodeResourceTopology": reports,
             "Pod": pending}
    return {kind: json.dumps({"items": objs}) for kind, objs in items.items()}


def start(texts: dict[str, str]) -> tuple[dict[str, float], str | None]:
    """CPU seconds of each phase of one start, and the node the first pod went to."""
    seconds: dict[str, float] = {}
    clock = time.process_time
    t = clock()
    items = {kind: json.loads(text)["items"] for kind, text in texts.items()}
    seconds["decode the lists"] = clock() - t
    scheduler = Scheduler(Cluster(), load_profile("toposched"))
    sync = ClusterSync(scheduler, clock=time.monotonic)
    for kind, relist, phase in (("Node", sync.relist_nodes, "read the Nodes"),
                                ("NodeResourceTopology", sync.relist_nrts, "read the reports (replicas built)"),
                                ("Pod", sync.relist_pods, "read the Pods")):
        t = clock()
        relist(items[kind])
        seconds[phase] = clock() - t
    t = clock()
    pending = sync.pending()
    decision = scheduler.schedule(pending[0], now=time.monotonic()) if pending else None
    seconds["first cycle"] = clock() - t
    return seconds, decision.node if decision is not None else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--numa", type=int, default=2, help="NUMA nodes of each machine (4 two-thread cores each)")
    parser.add_argument("--repeat", type=int, default=3, help="starts timed; the fastest is reported")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    texts = list_texts(args.nodes, args.pods, args.numa)
    runs = [start(texts) for _ in range(args.repeat)]
    seconds, node = min(runs, key=lambda run: sum(run[0].values()))
    total = sum(seconds.values())
    print(f"{args.nodes} nodes ({args.numa} NUMA each), {args.pods} pending pods: start-up {total:.2f} CPU s "
          f"(fastest of {args.repeat}), first pod on {node}")
    for phase, spent in seconds.items():
        print(f"  {phase:36s} {spent:6.3f} s")
    figures = {"nodes": args.nodes, "pods": args.pods, "numa": args.numa, "list_bytes": sum(map(len, texts.values())),
               "startup_cpu_seconds": total, "phases_cpu_seconds": seconds, "first_node": node,
               "peak_rss_mib": peak_rss_mib()}
    print(f"peak RSS {figures['peak_rss_mib']:.0f} MiB")
    write_json(args.json_out, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
