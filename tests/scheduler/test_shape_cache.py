"""The per-shape cache: results are kept from a shape's second pod on, and a node's refusal is
remembered for the shape from its first pod on, cached or not."""

import toposched.scheduler.plugins  # noqa: F401  (registers the plugins)
from tests.scheduler.test_scheduler import cluster_of, guaranteed, toposched_profile
from toposched.scheduler.framework import Profile
from toposched.scheduler.scheduler import Scheduler


def refusing(scheduler: Scheduler, node: str) -> list[tuple[str, str]]:
    """Make ``node`` refuse every reservation at Reserve (as a kubelet replica refusing would);
    returns the log of (pod, node) reservations tried."""
    tried: list[tuple[str, str]] = []
    reserve = scheduler.runner.reserve

    def reserve_or_refuse(state, pod, name, now):
        tried.append((pod.name, name))
        return "refused by the test" if name == node else reserve(state, pod, name, now)

    scheduler.runner.reserve = reserve_or_refuse  # type: ignore[method-assign]
    return tried


def unpacking_profile() -> Profile:
    """Filters only: every node scores alike, so the lowest row is tried first, whatever the pods placed."""
    return Profile.build("unpacking", filters=["NodeUnschedulable", "NodeResourcesFit", "NUMAAlignment"], scores=[])


def test_a_refusal_on_a_shapes_first_pod_is_not_tried_again_by_its_second():
    scheduler = Scheduler(cluster_of("a", "b", "c"), unpacking_profile())
    tried = refusing(scheduler, "a")
    one = scheduler.schedule(guaranteed("p1", 2), now=0)
    assert one.node == "b" and one.reasons == {"refused by the test": 1}
    two = scheduler.schedule(guaranteed("p2", 2), now=0)  # same shape: the refusal stands, row a unchanged
    assert two.node == "b" and two.reasons == {}
    assert [node for pod, node in tried if pod == "p2"] == ["b"]
    other = scheduler.schedule(guaranteed("p3", 3), now=0)  # another shape tries node a again
    assert other.node == "b" and other.reasons == {"refused by the test": 1}


def test_distinct_shapes_keep_no_results_and_a_repeated_one_is_kept():
    scheduler = Scheduler(cluster_of("a", "b"), toposched_profile())
    for i in range(6):
        scheduler.schedule(guaranteed(f"p{i}", 1, mem=(i + 1) * 2**20), now=0)  # each a shape of its own
    assert not scheduler._cache and not scheduler.runner._pre_filtered
    for name in ("q1", "q2"):
        scheduler.schedule(guaranteed(name, 1, mem=2**30), now=0)  # one shape, twice
    assert len(scheduler._cache) == 1 and len(scheduler.runner._pre_filtered) == 1


def test_the_doorkeeper_forgets_the_oldest_shapes_seen_once(monkeypatch):
    from toposched.scheduler import scheduler as module

    monkeypatch.setattr(module, "_DOORKEEPER_SIZE", 3)
    scheduler = Scheduler(cluster_of("a"), toposched_profile())
    shapes = [scheduler.shape(guaranteed(f"p{i}", 1, mem=(i + 1) * 2**20)) for i in range(5)]
    assert [scheduler._seen_before(s) for s in shapes] == [False] * 5
    assert not scheduler._seen_before(shapes[0])  # forgotten: seen "for the first time" again
    assert scheduler._seen_before(shapes[4])  # still remembered
