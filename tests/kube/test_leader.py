"""Leader election on a coordination.k8s.io/v1 Lease: acquire, renew, expire, release, never two leaders.

Behaviour follows client-go ``tools/leaderelection/leaderelection.go`` (``tryAcquireOrRenew``:
the fast renewal path, the observed-time rule for expiry, ``leaseTransitions`` + 1 on a change of
holder, ``release`` writing an empty holder with ``leaseDurationSeconds: 1``) and
``resourcelock/leaselock.go`` (the record lives in the Lease spec; updates carry the
resourceVersion read, so a concurrent write is a Conflict).
"""

from __future__ import annotations

import re

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.kube.memory_client import MemoryClient
from toposched.errors import InputError
from toposched.kube.client import LEASES, ServerError
from toposched.kube.leader import LeaderElector, micro_time

T0 = 1_700_000_000.0
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def elector(client, clock, identity, **kw) -> LeaderElector:
    return LeaderElector(client, name="toposched", namespace="kube-system", identity=identity, clock=clock, **kw)


def lease(client) -> dict:
    return client.get(LEASES, "toposched", namespace="kube-system")


def test_the_first_candidate_creates_the_lease_and_leads():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    a = elector(client, clock, "a")
    assert not a.is_leader
    assert a.try_acquire_or_renew() and a.is_leader
    spec = lease(client)["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert MICRO.match(spec["acquireTime"]) and spec["acquireTime"] == spec["renewTime"] == micro_time(T0)
    assert micro_time(T0 + 0.25) == "2023-11-14T22:13:20.250000Z"


def test_renewal_keeps_acquire_time_and_a_follower_waits_for_expiry():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    a, b = elector(client, clock, "a"), elector(client, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew() and b.leader == "a"
    clock.now += 2
    assert a.try_acquire_or_renew()
    spec = lease(client)["spec"]
    assert spec["acquireTime"] == micro_time(T0) and spec["renewTime"] == micro_time(T0 + 2)
    # a stops renewing; b saw the renewal at T0+2 (when it next reads) and waits 15 s from then
    clock.now += 1
    assert not b.try_acquire_or_renew()
    clock.now += 14.9
    assert not b.try_acquire_or_renew()
    assert not a.is_leader  # a's last renewal is 15.9 s old, past its 10 s renew deadline
    clock.now += 0.2
    assert b.try_acquire_or_renew() and b.is_leader
    spec = lease(client)["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew() and a.leader == "b"


def test_release_lets_another_take_over_at_once():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    a, b = elector(client, clock, "a"), elector(client, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release() and not a.is_leader
    spec = lease(client)["spec"]
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
    assert b.try_acquire_or_renew() and lease(client)["spec"]["leaseTransitions"] == 1
    assert b.release() and b.release()  # releasing twice is harmless


def test_racing_for_a_free_lease_exactly_one_wins():
    """Both candidates read the expired lease before either writes: the second write is a Conflict."""
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    old = elector(client, clock, "old")
    assert old.try_acquire_or_renew()

    class Interleaved:
        """Lets ``b`` run a whole election right after ``a`` has read the lease."""

        def __init__(self) -> None:
            self.armed = True

        def __getattr__(self, name):
            return getattr(client, name)

        def get(self, kind, name, **kw):
            obj = client.get(kind, name, **kw)
            if self.armed:
                self.armed = False
                assert b.try_acquire_or_renew()
            return obj

    proxy = Interleaved()
    a = elector(proxy, clock, "a")
    b = elector(client, clock, "b")
    proxy.armed = False
    assert not a.try_acquire_or_renew() and not b.try_acquire_or_renew()  # both see "old" holding it
    clock.now += 16  # "old" is gone: its lease expired for both
    proxy.armed = True
    assert not a.try_acquire_or_renew()
    assert b.is_leader and not a.is_leader
    assert lease(client)["spec"]["holderIdentity"] == "b"


def test_api_failures_answer_false_and_a_leader_steps_down_after_the_renew_deadline():
    client, clock = MemoryClient(clock=lambda: T0), Clock()
    a = elector(client, clock, "a")
    assert a.try_acquire_or_renew()
    for _ in range(5):
        clock.now += 2
        client.fail_next("replace", LEASES, ServerError("etcd timeout"))
        client.fail_next("get", LEASES, ServerError("etcd timeout"))
        assert not a.try_acquire_or_renew()
    assert not a.is_leader  # 10 s without a renewal
    assert a.try_acquire_or_renew() and a.is_leader  # nobody took it meanwhile: a renews again


def test_bad_timings_are_refused():
    client, clock = MemoryClient(), Clock()
    with pytest.raises(InputError, match="renew_deadline"):
        elector(client, clock, "a", lease_duration=10, renew_deadline=10)
    with pytest.raises(InputError, match="retry_period"):
        elector(client, clock, "a", renew_deadline=2, retry_period=2)
    with pytest.raises(InputError, match="identity"):
        elector(client, clock, "")


class TwoElectors(RuleBasedStateMachine):
    """Two candidates on one API server and one clock, in any order, with failures: never two leaders."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.client = MemoryClient(clock=lambda: T0)
        self.electors = {name: elector(self.client, self.clock, name) for name in "ab"}
        self.transitions = 0

    @rule(who=st.sampled_from("ab"))
    def try_lead(self, who):
        if self.electors[who].try_acquire_or_renew():
            assert self.electors[who].is_leader

    @rule(who=st.sampled_from("ab"))
    def release(self, who):
        self.electors[who].release()

    @rule(seconds=st.sampled_from([0.5, 2, 5, 9.9, 10, 15, 16]))
    def tick(self, seconds):
        self.clock.now += seconds

    @rule(verb=st.sampled_from(["get", "replace", "create"]))
    def fail_once(self, verb):
        self.client.fail_next(verb, LEASES, ServerError("injected"))

    @invariant()
    def at_most_one_leader(self):
        leaders = [name for name, e in self.electors.items() if e.is_leader]
        assert len(leaders) <= 1, leaders

    @invariant()
    def transitions_never_go_back(self):
        items = self.client.list(LEASES).items  # not get: that would use up an injected failure
        if not items:
            return
        spec = items[0]["spec"]
        assert spec["leaseTransitions"] >= self.transitions
        self.transitions = spec["leaseTransitions"]


TwoElectors.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
test_two_electors_never_both_lead = TwoElectors.TestCase
