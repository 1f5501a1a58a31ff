"""Scheduling plugins. Importing this package registers them all in the framework's registry."""

from toposched.scheduler.plugins import basic, binder, numa, topologymatch  # noqa: F401  (registration)
from toposched.scheduler.plugins import cpu_orchestration  # noqa: F401  (registration)
from toposched.scheduler.plugins import zone_capacity  # noqa: F401  (registration)
from toposched.scheduler.plugins import device_locality, gpu_share  # noqa: F401  (registration)
from toposched.scheduler.plugins import scarcity  # noqa: F401  (registration)
