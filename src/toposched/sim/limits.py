"""Bounds on every simulator input that drives work or memory (docs/inputs.md).

Each is far above what a real study needs (the bundled scenario has 200 nodes and 3,000 pods;
the Alibaba trace 1,523 nodes and 8,152 pods) and low enough that a run within them finishes on
a laptop. Inputs past a bound are refused with an InputError naming the field and the limit.
"""

from __future__ import annotations

__all__ = [
    "MAX_HORIZON",
    "MAX_INTERVAL",
    "MAX_RECREATIONS",
    "MAX_SIM_NODES",
    "MAX_SIM_PODS",
    "MAX_SEED",
    "MIN_INTERVAL",
]

MAX_SIM_NODES = 20_000
"""Nodes in one simulated cluster (4x the 5,000-node clusters toposched is built for)."""

MAX_SIM_PODS = 500_000
"""Pods in one workload (synthetic, trace or file), replicas counted."""

MIN_INTERVAL = 1.0
"""Shortest report, retry, sample and back-off interval, in simulated seconds."""

MAX_INTERVAL = 1e7
"""Longest interval (about 116 days of simulated time)."""

MAX_HORIZON = 1e9
"""Longest simulated run, in seconds (about 32 years)."""

MAX_RECREATIONS = 10_000
"""Re-creations of one rejected pod before the controller gives up."""

MAX_SEED = 2**64 - 1
"""Seeds are non-negative 64-bit integers."""
