"""What a run amounts to: the per-scheduler figures of ``metrics.json`` and the comparison table.

Every figure is computed from the run's record (its counters, the pods the nodes admitted, the
time series), so the same run always gives the same document, except the figures measured on the
wall clock (:data:`WALL_CLOCK_KEYS`), which are null when the run had no timer.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from toposched.names import (
    AGENT_PLACEMENT_ERROR,
    GPU_SHARE_ERROR,
    NODE_AFFINITY_ERROR,
    SMT_ALIGNMENT_ERROR,
    TOPOLOGY_AFFINITY_ERROR,
    UNEXPECTED_ADMISSION_ERROR,
)
from toposched.sim.engine import RunResult

__all__ = ["TIMELINE_SERIES", "WALL_CLOCK_KEYS", "reason_label", "reason_meaning", "run_metrics"]

#: The only figures of a scheduler's object measured on the wall clock (``wall_seconds``: FGD runs);
#: every other figure is the same for the same scenario and seed, and these are null without a timer.
WALL_CLOCK_KEYS = ("scheduler_seconds", "decisions_per_second", "wall_seconds")

# The resources whose requested share the time series follows, by their name in metrics.json. The
# GPU series is measured on the GPUs themselves (whole GPUs and shares), see the engine's samples.
TIMELINE_SERIES = {"cpu": "cpu", "memory": "memory"}


# What each admission rejection reason means, for the tables: a reader looking for the NUMA story
# must tell it from a scheduler that does not understand GPU shares.
_REASONS = {
    TOPOLOGY_AFFINITY_ERROR: "NUMA alignment impossible",
    UNEXPECTED_ADMISSION_ERROR: "aligned memory or devices not allocatable",
    SMT_ALIGNMENT_ERROR: "whole physical cores not free",
    GPU_SHARE_ERROR: "GPU share fits no single GPU",
    AGENT_PLACEMENT_ERROR: "placement the agent cannot apply",
    NODE_AFFINITY_ERROR: "node selector not matched",
}


def reason_meaning(reason: str) -> str | None:
    """What an admission rejection reason means, in a few words; None for a reason not known here."""
    if reason.startswith("OutOf") and len(reason) > 5:
        return f"node out of {reason[5:]}"
    return _REASONS.get(reason)


def reason_label(reason: str) -> str:
    """How a table names an admission rejection reason: what it means, then the kubelet's reason,
    e.g. ``NUMA alignment impossible (TopologyAffinityError)``; an unknown reason as it is."""
    meaning = reason_meaning(reason)
    return f"{meaning} ({reason})" if meaning else reason


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def run_metrics(result: RunResult) -> dict[str, Any]:
    """One scheduler's object of ``metrics.json`` (docs/sim/engine.md, "Metrics", describes every key)."""
    started = result.started
    pinned = [r for r in started if r.aligned is not None]
    aligned = sum(1 for r in pinned if r.aligned)
    spread = [r.spread_distance for r in started if r.spread_distance is not None]
    numa_spread = Counter(len(r.numa_nodes) for r in pinned)
    seconds = result.scheduler_seconds
    waits = sorted(result.waits)
    samples = result.samples
    timeline: dict[str, list[Any]] = {"time": [_round(s["time"]) for s in samples]}
    for key, resource in TIMELINE_SERIES.items():
        timeline[key] = [_round(s["allocated"].get(resource, 0.0)) for s in samples]
    timeline["gpu"] = [_round(s["gpu"]) for s in samples]
    fragmentation = [s["gpu_fragmentation"] for s in samples]
    measured = [f for f in fragmentation if f is not None]
    if measured:
        timeline["gpu_fragmentation"] = [_round(f) for f in fragmentation]
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
        "wait_mean": _round(sum(waits) / len(waits)) if waits else None,
        "wait_p95": _round(waits[math.ceil(0.95 * len(waits)) - 1]) if waits else None,
        "waits_censored": result.censored,
        "wait_mean_by_gpus": {str(g): _round(sum(w) / len(w)) for g, w in sorted(result.gpu_waits.items())},
        "numa_spread": {str(k): numa_spread[k] for k in sorted(numa_spread)},
        "decisions": result.decisions,
        "scheduler_seconds": _round(seconds),
        "decisions_per_second": _round(result.decisions / seconds) if seconds else None,
        "gpu_fragmentation": _round(measured[-1]) if measured else None,
        "gpu_fragmentation_mean": _round(sum(measured) / len(measured)) if measured else None,
        "end_time": _round(result.end_time),
        "timeline": timeline,
    }
