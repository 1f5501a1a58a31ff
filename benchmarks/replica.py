"""Building a node's kubelet replica from its published report (issue 14's target: <= 20 ms for 384 threads).

The report is what the agent publishes for a 2-socket, 384-thread machine with 8 NUMA nodes, 16
GPUs and 8 NICs (tests/fixtures/big_machines.py), serialised and parsed as it comes from the API
server. Timed: ``Cluster.update_report`` on a fresh cluster (decode the node description, check
it against the zones, build the replica), and the same for a second node of the same hardware
(the decoded description is shared).

    python benchmarks/replica.py [--repeat 30] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys

from _common import REPO, peak_rss_mib, time_call, write_json

sys.path.insert(0, str(REPO))

from tests.fixtures.big_machines import big_gpu_server  # noqa: E402
from toposched.kubelet import KubeletConfig  # noqa: E402
from toposched.node_report import node_report  # noqa: E402
from toposched.scheduler import Cluster  # noqa: E402
from toposched.topology.nrt import parse_nrt  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    config = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                           kube_reserved={"cpu": 2000})
    text = json.dumps(node_report(big_gpu_server(), config, node_name="n"))
    nrt = parse_nrt(json.loads(text))
    figures = {"report_bytes": len(text)}
    figures["first_node"] = time_call(lambda: Cluster().update_report(nrt, 0.0), args.repeat)
    warm = Cluster()
    warm.update_report(nrt, 0.0)
    other = parse_nrt({**json.loads(text), "metadata": {"name": "n2"}})

    def second() -> None:
        warm.remove_node("n2")
        warm.update_report(other, 0.0)

    figures["alike_node"] = time_call(second, args.repeat)
    figures["peak_rss_mib"] = peak_rss_mib()
    print(f"384-thread report ({figures['report_bytes'] / 1024:.1f} KiB): replica built in "
          f"{figures['first_node']['median_ms']:.1f} ms median ({figures['first_node']['min_ms']:.1f} min; target <= 20), "
          f"{figures['alike_node']['median_ms']:.1f} ms for a node of the same hardware; "
          f"peak RSS {figures['peak_rss_mib']:.0f} MiB")
    write_json(args.json_out, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
