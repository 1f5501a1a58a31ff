"""Time the Topology Manager merge: upstream's exhaustive walk vs NUMA count, and the fast path.

Targets (issue 3): show the upstream merge's growth honestly at 1, 2, 4 and 8 NUMA nodes with
4 providers, and decide a 64-NUMA machine with 4 providers in <= 10 ms with the fast path.

Upstream workload: four resources whose hints are, as the CPU manager generates them, every
NUMA mask that can hold the request (2^N - 1 masks minus those too small), the narrowest
preferred. Each resource fits on a single node only on every fourth node, a different one per
resource, so no single node is preferred by all four. The exhaustive merge walks
(hints per resource)^4 permutations; runs above --max-permutations are not executed but
projected from the per-permutation cost measured on the same four providers with each list cut
to its first hints so that the walk fits the budget, and printed as "projected".

Fast-path workload: the same four resources on 8 to 64 NUMA nodes, each hinting its preferred
single nodes, every pair of neighbouring nodes and the whole machine (the full mask list is
unaffordable there, for any merge). The 8-NUMA row also runs the exhaustive merge on that same
input for comparison. A last row shows a heavy input: every pair of the 64 nodes as a hint
(2,080 hints per provider), where reading and checking the hints alone takes milliseconds; and
the upstream workload on 16 NUMA nodes (a machine the kubelet takes with
``max-allowable-numa-nodes``): every mask that fits, ~65,000 hints per provider.

    python benchmarks/topology_manager.py [--repeat 5] [--max-permutations 200000] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import math
import sys
from itertools import combinations

from _common import peak_rss_mib, time_call, write_json

from toposched.kubelet import TopologyHint, fast_merge_hints, merge_hints

RESOURCES = ("cpu", "memory", "hugepages-1Gi", "nvidia.com/gpu")


def all_mask_answers(numa: int) -> list[dict[str, list[TopologyHint]]]:
    """Every mask that holds the request: 2 units fit on node n only when n % 4 is the resource's index."""
    providers = []
    for k, resource in enumerate(RESOURCES):
        free = {n: 2 if n % 4 == k else 1 for n in range(numa)}
        fits = [
            frozenset(c)
            for size in range(1, numa + 1)
            for c in combinations(range(numa), size)
            if sum(free[n] for n in c) >= 2
        ]
        narrowest = min((len(m) for m in fits), default=0)
        providers.append({resource: [TopologyHint(m, len(m) == narrowest) for m in fits]})
    return providers


def neighbour_answers(numa: int) -> list[dict[str, list[TopologyHint]]]:
    """Preferred single nodes where the resource fits, neighbouring pairs and the whole machine."""
    everything = frozenset(range(numa))
    providers = []
    for k, resource in enumerate(RESOURCES):
        hints = [TopologyHint(frozenset({n}), True) for n in range(numa) if n % 4 == k]
        hints += [TopologyHint(frozenset({n, n + 1}), False) for n in range(numa - 1)]
        hints.append(TopologyHint(everything, False))
        providers.append({resource: hints})
    return providers


def pair_answers(numa: int) -> list[dict[str, list[TopologyHint]]]:
    """A heavy input: preferred single nodes where the resource fits and every pair of nodes."""
    providers = []
    for k, resource in enumerate(RESOURCES):
        hints = [TopologyHint(frozenset({n}), True) for n in range(numa) if n % 4 == k]
        hints += [TopologyHint(frozenset(c), False) for c in combinations(range(numa), 2)]
        providers.append({resource: hints})
    return providers


def _lengths(providers) -> list[int]:
    return [max(1, len(h)) for p in providers for h in p.values()]


def upstream_rows(repeat: int, max_permutations: int) -> list[dict]:
    rows = []
    for numa in (1, 2, 4, 8):
        providers = all_mask_answers(numa)
        lengths = _lengths(providers)
        permutations = math.prod(lengths)
        row = {
            "numa_nodes": numa,
            "providers": len(providers),
            "hints_per_provider": lengths,
            "permutations": permutations,
        }
        if permutations <= max_permutations:
            t = time_call(lambda: merge_hints("best-effort", range(numa), providers), repeat)
            row.update(t, projected=False)
        else:
            # Measure the per-permutation cost on the same four providers, each cut to its
            # first hints so that the walk fits the budget (every permutation still merges four).
            keep = max(1, int(max_permutations ** (1 / len(providers))))
            sample = [{r: h[:keep] for r, h in p.items()} for p in providers]
            sample_perms = math.prod(_lengths(sample))
            t = time_call(lambda: merge_hints("best-effort", range(numa), sample), max(1, repeat // 2))
            per_perm_ms = t["median_ms"] / sample_perms
            row.update(
                projected=True,
                median_ms=per_perm_ms * permutations,
                measured_hints_per_provider=keep,
                measured_permutations=sample_perms,
                measured_ms=t["median_ms"],
                per_permutation_us=per_perm_ms * 1000,
            )
        fast = time_call(lambda: fast_merge_hints("best-effort", range(numa), providers), repeat)
        row["fast_median_ms"] = fast["median_ms"]
        rows.append(row)
    return rows


def fast_rows(repeat: int) -> list[dict]:
    rows = []
    for numa, workload in ((8, neighbour_answers), (16, neighbour_answers), (32, neighbour_answers),
                           (64, neighbour_answers), (64, pair_answers), (16, all_mask_answers)):
        providers = workload(numa)
        lengths = _lengths(providers)
        t = time_call(lambda: fast_merge_hints("best-effort", range(numa), providers), repeat)
        hint, admit = fast_merge_hints("best-effort", range(numa), providers)
        row = {
            "workload": workload.__name__.removesuffix("_answers"),
            "numa_nodes": numa,
            "providers": len(providers),
            "hints_per_provider": lengths,
            "permutations": math.prod(lengths),
            **t,
            "hint": sorted(hint.numa_nodes or ()),
            "preferred": hint.preferred,
        }
        if numa <= 8:
            exhaustive = time_call(lambda: merge_hints("best-effort", range(numa), providers), max(1, repeat // 2))
            assert merge_hints("best-effort", range(numa), providers) == (hint, admit)
            row["exhaustive_median_ms"] = exhaustive["median_ms"]
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--max-permutations", type=int, default=200_000)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()

    print("upstream (exhaustive) merge, 4 providers, every mask that fits as a hint:")
    upstream = upstream_rows(args.repeat, args.max_permutations)
    for r in upstream:
        how = (
            f"projected {r['median_ms'] / 1000:12.1f} s  ({r['per_permutation_us']:.2f} us/permutation measured on "
            f"{r['measured_permutations']:,d} permutations of the first "
            f"{r['measured_hints_per_provider']} hints of each)"
            if r["projected"]
            else f"measured  {r['median_ms']:12.3f} ms"
        )
        print(f"  {r['numa_nodes']:2d} NUMA  hints/provider {str(r['hints_per_provider']):22s} "
              f"{r['permutations']:>14,d} permutations  {how}   fast path {r['fast_median_ms']:.3f} ms")

    print("fast path, 4 providers (neighbour: preferred single nodes, neighbouring pairs, whole machine; "
          "pair: preferred single nodes, every pair):")
    fast = fast_rows(args.repeat)
    for r in fast:
        extra = f"  (exhaustive {r['exhaustive_median_ms']:.1f} ms)" if "exhaustive_median_ms" in r else ""
        print(f"  {r['workload']:9s} {r['numa_nodes']:2d} NUMA  hints/provider {str(r['hints_per_provider']):24s} "
              f"{r['permutations']:>22,d} permutations  median {r['median_ms']:7.3f} ms "
              f"(min {r['min_ms']:.3f}, max {r['max_ms']:.3f})  -> {r['hint']} preferred={r['preferred']}{extra}")
    target = next(r for r in fast if r["numa_nodes"] == 64 and r["workload"] == "neighbour")
    ok = target["median_ms"] <= 10
    print(f"64 NUMA target (<= 10 ms): {'met' if ok else 'MISSED'} ({target['median_ms']:.3f} ms median)")
    write_json(args.json_out, {"upstream": upstream, "fast": fast, "peak_rss_mib": peak_rss_mib()})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
