"""Speed work changes no decision: small seeded runs of both benchmarks decide as the recorded code did.

``tests/scheduler/data/decisions.json`` holds, per workload, a short hash of every decision
(pod, node, exact placement) the scheduler made when the fixture was written, plus a digest of
them all. Workloads: ``benchmarks/scheduler.py`` at 200 nodes and 2,000 pods, plain and with its
GPU variant; ``benchmarks/realistic.py`` at 200 nodes pre-filled to 6 pods a node, then 2,000
arrivals each after a deletion; the last also with the row loops' NumPy forms in place of the
compiled ones (``toposched.scheduler.rowloops``). Rewrite the fixture only for a change of decisions that is
explained (docs/scheduler/design.md):

    .venv/bin/python tests/scheduler/test_decisions_identical.py --write
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).with_name("data") / "decisions.json"
NODES, PODS, SEED = 200, 2000, 7


def _bench(name: str) -> Any:
    """A benchmark script as a module (its directory on the path for ``_common``)."""
    folder = str(REPO / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _short(record: list) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]


def _plain(gpu: bool) -> list[list]:
    from toposched.scheduler import Scheduler
    from toposched.scheduler.profile_setup import load_profile

    bench = _bench("scheduler")
    realistic = _bench("realistic")
    cluster, _ = bench.build_cluster(NODES, 8)
    pods = bench.make_pods(PODS, SEED)
    if gpu:
        bench.add_gpu_nodes(cluster, NODES // 5)
        pods = bench.make_gpu_pods(pods, SEED)
    scheduler = Scheduler(cluster, load_profile("toposched"))
    out = []
    for i, pod in enumerate(pods):
        decision = scheduler.schedule(pod, now=float(i))
        out.append(realistic.decision_record(decision))
        if decision.node is not None:
            scheduler.bound(pod, now=float(i))
    return out


def _realistic() -> list[list]:
    records: list[list] = []
    _bench("realistic").run(NODES, PODS, SEED, record=records)
    return records


WORKLOADS = {"scheduler": lambda: _plain(False), "scheduler-gpu": lambda: _plain(True), "realistic": _realistic}


def _summary(records: list[list]) -> dict[str, Any]:
    hashes = [_short(r) for r in records]
    return {"digest": hashlib.sha256("".join(hashes).encode()).hexdigest(), "decisions": hashes,
            "scheduled": sum(1 for r in records if r[1] is not None)}


def _check(workload: str, records: list[list]) -> None:
    expected = json.loads(FIXTURE.read_text())[workload]
    got = _summary(records)
    if got["digest"] != expected["digest"]:
        first = next((i for i, (a, b) in enumerate(zip(got["decisions"], expected["decisions"])) if a != b),
                     min(len(got["decisions"]), len(expected["decisions"])))
        pytest.fail(f"{workload}: decision {first} differs from the recorded one "
                    f"({sum(a != b for a, b in zip(got['decisions'], expected['decisions']))} of {len(records)} differ; "
                    f"now {records[first] if first < len(records) else None})")
    assert got["scheduled"] == expected["scheduled"]


@pytest.mark.slow
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_decisions_are_the_recorded_ones(workload: str) -> None:
    _check(workload, WORKLOADS[workload]())


@pytest.mark.slow
def test_the_numpy_forms_decide_as_the_compiled_loops() -> None:
    """An install without a C compiler runs the row loops' NumPy forms: the same decisions."""
    from tests.scheduler.test_rowloops import numpy_forms
    from toposched.scheduler import rowloops

    if rowloops.compiled is None:
        pytest.skip("this install runs the NumPy forms already: test_decisions_are_the_recorded_ones checks them")
    with numpy_forms():
        _check("realistic", _realistic())


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    sys.path.insert(0, str(REPO))
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps({name: _summary(make()) for name, make in sorted(WORKLOADS.items())}, indent=1) + "\n")
    print(f"wrote {FIXTURE}")
