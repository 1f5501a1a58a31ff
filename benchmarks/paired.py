"""The realistic workload on two versions of the scheduler in one process, interleaved pod by pod.

On a shared or throttled machine two benchmark runs a few minutes apart can differ by 30%, more
than most changes gain. This runs the same workload (``realistic.py``'s nodes, pods and churn) on
the working tree and on a git revision side by side: each arrival is scheduled by one version and
then the other, in alternating order, so both see the same machine at the same moment. It prints
each side's pods/s, mean, p50 and p99 (overall and per class of pod), the ratio of their times,
and how many decisions differ (the same node for every pod, or the change moved a decision).

    python benchmarks/paired.py --against HEAD~3 --nodes 2000 --pods 3000 [--mix wide] [--json OUT.json]

The revision is checked out with ``git worktree`` into a temporary directory and imported as
``toposched_ref`` (its imports rewritten), its compiled row loops built in place when it has them
(each side's line says which form its loops ran); both sides must offer ``realistic.py``'s ``MIXES``
(``--mix``: the default one or ``wide``) and ``kind``. Even the same code on both sides is not exactly 1.0:
on this 2-core machine it measured 1.03 (the working tree's side slower); run it with
``--against HEAD`` on an unchanged tree to know the harness's own bias before reading a ratio.
"""

from __future__ import annotations

import argparse
import importlib
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from _common import REPO, write_json

from toposched.kube.ops import freeze_heap

_IMPORT = re.compile(r"^(\s*)(from|import) toposched(\.| )", re.MULTILINE)


def reference_module(revision: str, workdir: Path) -> Any:
    """``realistic.py`` of ``revision``, importing that revision's package as ``toposched_ref``."""
    tree = workdir / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--force", str(tree), revision],
                   check=True, capture_output=True)
    try:
        root = workdir / "modules"
        shutil.copytree(tree / "src" / "toposched", root / "toposched_ref")
        if (tree / "setup.py").exists():
            _compiled_modules(revision, tree, workdir / "wheel", root / "toposched_ref")
        sources = list((root / "toposched_ref").rglob("*.py"))
        for path in sources:
            path.write_text(_IMPORT.sub(r"\1\2 toposched_ref\3", path.read_text()))
        bench = _IMPORT.sub(r"\1\2 toposched_ref\3", (tree / "benchmarks" / "realistic.py").read_text())
        (root / "realistic_ref.py").write_text(bench)
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False,
                       capture_output=True)
    sys.path.insert(0, str(root))
    return importlib.import_module("realistic_ref")


def _compiled_modules(revision: str, tree: Path, wheels: Path, package: Path) -> None:
    """Build ``tree``'s wheel as pip would (its own build requirements) and put its compiled modules
    (the row loops) into ``package``; without them that side would run the loops' NumPy forms."""
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(tree)],
                           capture_output=True, text=True)
    compiled = []
    for wheel in wheels.glob("*.whl") if built.returncode == 0 else ():
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.startswith("toposched/") and name.endswith((".so", ".pyd")):
                    target = package / name.removeprefix("toposched/")
                    target.write_bytes(archive.read(name))
                    compiled.append(name)
    if not compiled:
        print(f"warning: {revision}'s compiled row loops were not built; that side runs their NumPy forms", file=sys.stderr)


class Side:
    """One version's cluster, scheduler and share of the run."""

    def __init__(self, bench: Any, mix: str, nodes: int, pods: int, seed: int, per_node: float) -> None:
        self.bench = bench
        build_cluster, make_pod = bench.MIXES[mix]
        self.cluster = build_cluster(nodes, seed)
        self.scheduler = bench.Scheduler(self.cluster, bench.load_profile("toposched"))
        rnd = random.Random(seed + 1)
        self.running: list[Any] = []
        self.now = 0.0
        prefill = int(per_node * nodes)
        for i in range(prefill):
            self._place(make_pod(i, rnd))
        self.arrivals = [make_pod(prefill + i, rnd) for i in range(pods)]
        self.victims = [rnd.random() for _ in range(pods)]
        self.ms: list[float] = []

    def _place(self, pod: Any) -> Any:
        self.now += 0.01
        start = time.perf_counter()
        decision = self.scheduler.schedule(pod, now=self.now)
        elapsed = time.perf_counter() - start
        if decision.node is not None:
            self.scheduler.bound(pod, now=self.now)
            self.running.append(pod)
        return decision.node, elapsed

    def step(self, i: int) -> str | None:
        """Delete a running pod, then schedule arrival ``i`` (timed)."""
        k = int(self.victims[i] * len(self.running))
        self.running[k], self.running[-1] = self.running[-1], self.running[k]
        self.cluster.forget(self.running.pop(), self.now + 0.01)
        node, elapsed = self._place(self.arrivals[i])
        self.ms.append(elapsed * 1000)
        return node

    def figures(self) -> dict[str, Any]:
        """pods/s, mean, p50, p99 and per class of pod (mean, p99) of the timed arrivals."""
        ordered = sorted(self.ms)
        total = sum(ordered)
        by_kind: dict[str, list[float]] = defaultdict(list)
        for pod, ms in zip(self.arrivals, self.ms):
            by_kind[self.bench.kind(pod)].append(ms)
        return {"pods_per_second": len(ordered) / total * 1000, "mean_ms": total / len(ordered),
                "p50_ms": ordered[len(ordered) // 2], "p99_ms": ordered[int(0.99 * (len(ordered) - 1))],
                "by_kind": {k: {"mean_ms": sum(v) / len(v), "p99_ms": sorted(v)[int(0.99 * (len(v) - 1))]}
                            for k, v in sorted(by_kind.items())}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="git revision to compare the working tree with")
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--per-node", type=float, default=6.0)
    parser.add_argument("--mix", choices=("default", "wide"), default="default", help="realistic.py's --mix")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.nodes < 1 or args.pods < 1 or args.per_node <= 0:
        parser.error("--nodes and --pods must be at least 1, --per-node positive")
    import realistic

    with tempfile.TemporaryDirectory(prefix="toposched-paired-") as tmp:
        reference = reference_module(args.against, Path(tmp))
        sides = {name: Side(bench, args.mix, args.nodes, args.pods, args.seed, args.per_node)
                 for name, bench in (("reference", reference), ("working tree", realistic))}
    freeze_heap()
    differ = 0
    for i in range(args.pods):
        order = ("reference", "working tree") if i % 2 == 0 else ("working tree", "reference")
        nodes = {name: sides[name].step(i) for name in order}
        differ += nodes["reference"] != nodes["working tree"]
    figures = {name: side.figures() for name, side in sides.items()}
    ratio = sum(sides["working tree"].ms) / sum(sides["reference"].ms)
    print(f"{args.nodes} nodes ({args.mix} mix), {args.pods} arrivals, working tree against {args.against}:")
    for (name, f), package in zip(figures.items(), ("toposched_ref", "toposched")):
        kinds = "  ".join(f"{k} {v['mean_ms']:.2f}/{v['p99_ms']:.2f}" for k, v in f["by_kind"].items())
        loops = getattr(sys.modules.get(f"{package}.scheduler.rowloops"), "compiled", None)
        f["row_loops"] = "compiled" if loops is not None else "numpy"
        print(f"  {name:12}  {f['pods_per_second']:.0f} pods/s  mean {f['mean_ms']:.3f} ms  p50 {f['p50_ms']:.2f}  "
              f"p99 {f['p99_ms']:.2f}   (mean/p99 ms) {kinds}  [row loops {f['row_loops']}]")
    print(f"  time ratio working tree / reference: {ratio:.3f}; decisions that differ: {differ}")
    if args.json is not None:
        write_json(args.json, {"against": args.against, "mix": args.mix, "nodes": args.nodes, "pods": args.pods,
                               "seed": args.seed,
                               "sides": figures, "time_ratio": ratio, "decisions_differ": differ})
    return 0


if __name__ == "__main__":
    sys.exit(main())
