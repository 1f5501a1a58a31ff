"""Scheduling plugins. Importing this package registers them all in the framework's registry."""

from toposched.scheduler.plugins import basic, binder, numa, topologymatch  # noqa: F401  (registration)
