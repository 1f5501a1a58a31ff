"""What a run amounts to: the per-scheduler figures of ``metrics.json`` and the comparison table.

Every figure is computed from the run's record (its counters, the pods the nodes admitted, the
time series), so the same run always gives the same document. Figures measured on the wall
clock (``decisions_per_second``, ``scheduler_seconds``) are null when the run had no timer.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from toposched.sim.engine import RunResult

__all__ = ["TIMELINE_SERIES", "run_metrics"]

# The resources whose allocated share the time series follows, by their name in metrics.json.
TIMELINE_SERIES = {"cpu": "cpu", "memory": "memory", "gpu": "nvidia.com/gpu"}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def run_metrics(result: RunResult) -> dict[str, Any]:
    """One scheduler's object of ``metrics.json`` (see docs/sim/metrics.md for every key)."""
    started = result.started
    pinned = [r for r in started if r.aligned is not None]
    aligned = sum(1 for r in pinned if r.aligned)
    spread = [r.spread_distance for r in started if r.spread_distance is not None]
    numa_spread = Counter(len(r.numa_nodes) for r in pinned)
    seconds = result.scheduler_seconds
    samples = result.samples
    timeline: dict[str, list[Any]] = {"time": [_round(s["time"]) for s in samples]}
    for key, resource in TIMELINE_SERIES.items():
        timeline[key] = [_round(s["allocated"].get(resource, 0.0)) for s in samples]
    for key in ("running", "pending", "rejected"):
        timeline[key] = [s[key] for s in samples]
    return {
        "arrived": result.arrived,
        "scheduled": result.scheduled,
        "bound": result.bound,
        "rejected_admission": sum(result.rejected.values()),
        "rejections": dict(sorted(result.rejected.items())),
        "recreated": result.recreated,
        "abandoned": result.abandoned,
        "finished": result.finished,
        "running_end": result.running_end,
        "pending_end": result.pending_end,
        "pinned_pods": len(pinned),
        "aligned_pods": aligned,
        "aligned_fraction": _round(aligned / len(pinned)) if pinned else None,
        "multi_numa_pods": len(spread),
        "mean_numa_distance": _round(sum(spread) / len(spread)) if spread else None,
        "smt_shared_pods": sum(1 for r in started if r.shares_core),
        "numa_spread": {str(k): numa_spread[k] for k in sorted(numa_spread)},
        "decisions": result.decisions,
        "scheduler_seconds": _round(seconds),
        "decisions_per_second": _round(result.decisions / seconds) if seconds else None,
        "end_time": _round(result.end_time),
        "timeline": timeline,
    }
