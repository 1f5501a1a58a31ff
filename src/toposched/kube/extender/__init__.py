"""The kube-scheduler extender: Go's extender/v1 wire format, the four verbs over a Scheduler, the HTTP app.

See docs/kube/extender.md.
"""

from typing import Any

from toposched.kube.extender.service import ExtenderService, Reservation, scale_scores
from toposched.kube.extender.wire import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    ExtenderPreemptionResult,
    HostPriority,
    HostPriorityList,
    MetaPod,
    MetaVictims,
    NodeList,
    Victims,
)

__all__ = [
    "ExtenderArgs",
    "ExtenderBindingArgs",
    "ExtenderBindingResult",
    "ExtenderFilterResult",
    "ExtenderPreemptionArgs",
    "ExtenderPreemptionResult",
    "ExtenderService",
    "HostPriority",
    "HostPriorityList",
    "MetaPod",
    "MetaVictims",
    "NodeList",
    "Reservation",
    "Victims",
    "create_app",
    "scale_scores",
]


def __getattr__(name: str) -> Any:
    """``create_app`` is imported on first use: it brings FastAPI, which only the extender command needs."""
    if name == "create_app":
        from toposched.kube.extender.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
