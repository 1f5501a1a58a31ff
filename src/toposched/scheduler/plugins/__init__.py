"""Scheduling plugins. Importing this package registers them all in the framework's registry."""

# Imported for their side effect: each module registers its plugins when imported.
from toposched.scheduler.plugins import (  # noqa: F401
    basic,
    binder,
    cpu_orchestration,
    device_locality,
    gpu_share,
    numa,
    scarcity,
    topologymatch,
    zone_capacity,
)
