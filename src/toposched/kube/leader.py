"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection`` package does it.

The Lease's spec is the election record: ``holderIdentity``, ``leaseDurationSeconds``,
``acquireTime`` and ``renewTime`` (RFC 3339 micro time) and ``leaseTransitions``. Like client-go,
an elector never trusts the times written in the record (they come from another machine's
clock): it notes *when it saw the record change* on its own clock, and a holder's claim is
valid until ``lease_duration`` seconds after that. Every write replaces the Lease with the
``resourceVersion`` last read, so of two electors racing for an expired lease exactly one wins;
the other gets a Conflict and stays a follower.

A leader counts as leading only while its last successful renewal is less than
``renew_deadline`` seconds old. As ``renew_deadline < lease_duration``, a leader that cannot renew
stops leading before any other elector may take the lease: two electors sharing a clock never
both lead. Time comes from the passed-in clock (seconds since the epoch, for the record's times).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from toposched.errors import InputError
from toposched.kube.client import LEASES, ApiError, Conflict, KubeClient, NotFound

__all__ = ["LeaderElector", "micro_time"]

log = logging.getLogger(__name__)

_JITTER_FACTOR = 1.2  # client-go's JitterFactor: renew_deadline must exceed retry_period by it


def micro_time(seconds: float) -> str:
    """A ``metav1.MicroTime`` in its wire form: RFC 3339 in UTC with six fractional digits."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate for the lease ``namespace/name``; call :meth:`try_acquire_or_renew` every ``retry_period``."""

    def __init__(self, client: KubeClient, *, name: str, namespace: str, identity: str, clock: Callable[[], float],
                 lease_duration: float = 15, renew_deadline: float = 10, retry_period: float = 2) -> None:
        source = f"lease {namespace}/{name}"
        if not identity:
            raise InputError("the elector needs a non-empty identity", field="identity", source=source)
        if not lease_duration > renew_deadline:
            raise InputError("lease_duration must be greater than renew_deadline", field="lease_duration",
                             source=source)
        if not renew_deadline > _JITTER_FACTOR * retry_period:
            raise InputError(f"renew_deadline must be greater than retry_period*{_JITTER_FACTOR}",
                             field="renew_deadline", source=source)
        if retry_period <= 0 or int(lease_duration) < 1:
            raise InputError("retry_period must be positive and lease_duration at least 1 s", field="retry_period",
                             source=source)
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.clock = clock
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._lease: dict[str, Any] | None = None  # the Lease as last read or written (its resourceVersion)
        self._observed: dict[str, Any] = {}  # the election record (Lease spec) last seen
        self._observed_time = 0.0  # when, on our clock, the record was last seen to change
        self._renewed: float | None = None  # when our last acquire or renewal succeeded

    # ---- what this elector knows ------------------------------------------------------------------

    @property
    def leader(self) -> str:
        """The holder of the lease as last observed ("" when nobody holds it)."""
        return str(self._observed.get("holderIdentity") or "")

    @property
    def is_leader(self) -> bool:
        """This elector holds the lease and renewed it less than ``renew_deadline`` seconds ago."""
        return (self._holds() and self._renewed is not None
                and self.clock() - self._renewed < self.renew_deadline)

    def _holds(self) -> bool:
        return self.leader == self.identity

    def _lease_valid(self, now: float) -> bool:
        return self._observed_time + float(self._observed.get("leaseDurationSeconds") or 0) > now

    # ---- acting on the lease ----------------------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """Acquire the lease if it is free or expired, renew it if held; True when this elector holds it now.

        Any API failure (a Conflict: someone else wrote first; a 5xx) answers False and changes nothing.
        """
        now = self.clock()
        record = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": 0,
        }
        if self._holds() and self._lease is not None and self._lease_valid(now):
            # fast path: renew on top of the Lease we last wrote, without reading it first
            record["acquireTime"] = self._observed.get("acquireTime", record["acquireTime"])
            record["leaseTransitions"] = int(self._observed.get("leaseTransitions") or 0)
            if self._write(record, now):
                return True
        try:
            lease = self.client.get(LEASES, self.name, namespace=self.namespace)
        except NotFound:
            return self._create(record, now)
        except ApiError as err:
            log.warning("cannot read lease %s/%s: %s", self.namespace, self.name, err)
            return False
        self._lease = lease
        spec = dict(lease.get("spec") or {})
        if spec != self._observed:
            self._observed, self._observed_time = spec, now
        if self.leader and self._lease_valid(now) and not self._holds():
            return False
        if self._holds():
            record["acquireTime"] = spec.get("acquireTime", record["acquireTime"])
            record["leaseTransitions"] = int(spec.get("leaseTransitions") or 0)
        else:
            record["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        return self._write(record, now)

    def release(self) -> bool:
        """Give the lease up on shutdown so another replica takes over at once; True when done or not held."""
        if not self._holds() or self._lease is None:
            return True
        now = self.clock()
        record = {
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": int(self._observed.get("leaseTransitions") or 0),
        }
        released = self._write(record, now)
        self._renewed = None
        return released

    def _create(self, record: Mapping[str, Any], now: float) -> bool:
        lease = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": dict(record),
        }
        try:
            self._lease = self.client.create(LEASES, lease, namespace=self.namespace)
        except ApiError as err:
            log.info("cannot create lease %s/%s: %s", self.namespace, self.name, err)
            return False
        self._took(record, now)
        return True

    def _write(self, record: Mapping[str, Any], now: float) -> bool:
        """Replace the Lease with ``record`` as its spec, on the resourceVersion last seen."""
        assert self._lease is not None
        lease = {**self._lease, "spec": dict(record)}
        try:
            self._lease = self.client.replace(LEASES, lease, namespace=self.namespace)
        except Conflict:
            log.info("lease %s/%s changed since it was read; another replica wrote first", self.namespace, self.name)
            return False
        except ApiError as err:
            log.warning("cannot update lease %s/%s: %s", self.namespace, self.name, err)
            return False
        self._took(record, now)
        return True

    def _took(self, record: Mapping[str, Any], now: float) -> None:
        was = self.leader
        self._observed, self._observed_time = dict(record), now
        if record.get("holderIdentity") == self.identity:
            self._renewed = now
            if was != self.identity:
                log.info("%s became the leader of lease %s/%s", self.identity, self.namespace, self.name)
