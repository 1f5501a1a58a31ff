"""The cluster's scheduling decisions, in the shape of the Kubernetes scheduling framework."""

from toposched.scheduler.status import Code, Status

__all__ = sorted(["Code", "Status"])
