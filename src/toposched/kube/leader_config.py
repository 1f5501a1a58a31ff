"""The ``leaderElection`` block of a KubeSchedulerConfiguration, as the standalone scheduler uses it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toposched.errors import InputError

__all__ = ["LeaderElection", "parse_go_duration"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: Any, field: str, source: str) -> float:
    """Seconds in a Go duration string (``"15s"``, ``"1m30s"``, ``"500ms"``); InputError otherwise."""
    if not isinstance(text, str) or not text or _DURATION.sub("", text):
        raise InputError(f"{text!r} is not a duration like 15s or 1m30s", field=field, source=source)
    return sum(float(n) * _UNIT[u] for n, u in _DURATION.findall(text))


@dataclass(frozen=True)
class LeaderElection:
    """Whether to elect a leader, the Lease's namespace and name, and client-go's three timings (seconds).

    Defaults are kube-scheduler's, with our Lease name.
    """

    leader_elect: bool = True
    resource_namespace: str = "kube-system"
    resource_name: str = "toposched-scheduler"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None, source: str, *, namespace: str | None = None) -> LeaderElection:
        """Read ``config["leaderElection"]``; ``namespace`` (the pod's own) replaces the default namespace."""
        base = cls(resource_namespace=namespace or cls.resource_namespace)
        block = (config or {}).get("leaderElection")
        if block is None:
            return base
        if not isinstance(block, Mapping):
            raise InputError("expected a mapping", field="leaderElection", source=source)
        lock = block.get("resourceLock", "leases")
        if lock != "leases":
            raise InputError(f"resourceLock {lock!r} is not supported; use leases", field="leaderElection.resourceLock",
                             source=source)
        elect = block.get("leaderElect", True)
        if not isinstance(elect, bool):
            raise InputError(f"{elect!r} is not true or false", field="leaderElection.leaderElect", source=source)
        timings = {}
        for key, attr in (("leaseDuration", "lease_duration"), ("renewDeadline", "renew_deadline"),
                          ("retryPeriod", "retry_period")):
            if key in block:
                timings[attr] = parse_go_duration(block[key], f"leaderElection.{key}", source)
        return cls(
            leader_elect=elect,
            resource_namespace=str(block.get("resourceNamespace") or base.resource_namespace),
            resource_name=str(block.get("resourceName") or base.resource_name),
            **timings,
        )
