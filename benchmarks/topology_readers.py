"""Time the topology readers on the largest real machines of ../shared/data.

Targets (issue 2): under 200 ms each for the 384-thread SGI UV hwloc XML and the 64-NUMA sysfs
tree on a 2-core machine.

    python benchmarks/topology_readers.py [--repeat 5] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import sys

from _common import SHARED_DATA, peak_rss_mib, time_call, write_json

from toposched.topology.hwloc import read_hwloc_xml
from toposched.topology.sysfs import read_sysfs

CASES = {
    "hwloc:192em64t-24n8c2t.xml": lambda: read_hwloc_xml(SHARED_DATA / "topologies/hwloc/192em64t-24n8c2t.xml"),
    "sysfs:256ia64-64n2s2c": lambda: read_sysfs(SHARED_DATA / "topologies/sysfs/256ia64-64n2s2c"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    if not SHARED_DATA.exists():
        print(f"no real data at {SHARED_DATA}", file=sys.stderr)
        return 2
    figures = {}
    for name, read in CASES.items():
        machine = read()
        t = time_call(read, args.repeat)
        figures[name] = {**t, "cpus": len(machine.cpus), "numa_nodes": len(machine.numa_nodes)}
        print(f"{name:34s} {len(machine.cpus):4d} CPUs {len(machine.numa_nodes):3d} NUMA  "
              f"median {t['median_ms']:7.1f} ms  (min {t['min_ms']:.1f}, max {t['max_ms']:.1f})", flush=True)
    figures["peak_rss_mib"] = peak_rss_mib()
    write_json(args.json_out, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
