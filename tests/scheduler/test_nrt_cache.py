"""The NRT cache strategies, checked against scheduler-plugins' own cache tests.

The upstream tables of ``pkg/noderesourcetopology/cache`` (``cache_test.go``,
``passthrough_test.go``, ``discardreserved_test.go``, ``overreserve_test.go``,
``store_test.go``, ``foreign_pods_test.go``) and of ``resourcerequests/exclusive_test.go`` are
restated below as data: the NRT objects, pods and expected outcomes are upstream's, the way they
are driven is ours (a report published at a time, a pod seen by the informer, a resync step).
Quantities are in canonical units: cpu in millicores, memory in bytes.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.errors import InputError
from toposched.names import FINGERPRINT_ANNOTATION as ANNOTATION
from toposched.names import FINGERPRINT_ATTRIBUTE as ATTRIBUTE
from toposched.names import FINGERPRINT_METHOD_ATTRIBUTE as ATTRIBUTE_METHOD
from toposched.scheduler.fingerprint import pods_fingerprint
from toposched.scheduler.nrt_cache import (
    REASON_INVALID_TOPOLOGY,
    STRATEGIES,
    STRATEGY_DISCARD_RESERVED,
    STRATEGY_OVERRESERVE,
    STRATEGY_PASSTHROUGH,
    DiscardReservedCache,
    NodeView,
    NRTCache,
    OverReserveCache,
    PassthroughCache,
    are_exclusive_for_pod,
    expected_fingerprint,
    new_nrt_cache,
)
from toposched.scheduler.nrt_match_args import NodeResourceTopologyMatchArgs
from toposched.scheduler.status import Code
from toposched.topology.nrt import NodeResourceTopology, ResourceInfo, Zone
from toposched.workload import Container, Pod

GI = 2**30
CPU, MEMORY, NIC, FPGA = "cpu", "memory", "vendor.com/nic1", "veryfast.io/fpga"
SNN_CONTAINER = {"topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "container"}
PERIOD = 5.0


def cpus(n: float) -> int:
    return int(n * 1000)


def nrt(name: str, zones: dict[str, dict[str, tuple[int, int]]], *, attributes=None, annotations=None,
        policies=("SingleNUMANodeContainerLevel",)) -> NodeResourceTopology:
    """An NRT whose zones map resource -> (capacity, available); allocatable is the capacity."""
    return NodeResourceTopology(
        name=name,
        zones=tuple(
            Zone(zone, "Node", resources=tuple(ResourceInfo(r, cap, cap, avail) for r, (cap, avail) in res.items()))
            for zone, res in zones.items()
        ),
        attributes=attributes or {},
        annotations=annotations or {},
        top_level_policies=policies,
    )


def default_topology(name: str = "node1", **kw) -> NodeResourceTopology:
    """Upstream's ``makeDefaultTestTopology``: two NUMA zones of 32 CPUs (30 free), 64Gi (60Gi free), 16 NICs."""
    zone = {CPU: (cpus(32), cpus(30)), MEMORY: (64 * GI, 60 * GI), NIC: (16, 16)}
    return nrt(name, {"node-0": zone, "node-1": zone}, **kw)


def attr_nrt(name: str) -> NodeResourceTopology:
    """Upstream's ``makeTestNRT``: policy and scope as attributes, 32Gi zones with 8 NICs."""
    zone = {CPU: (cpus(32), cpus(30)), MEMORY: (32 * GI, 32 * GI), NIC: (8, 8)}
    return nrt(name, {"node-0": zone, "node-1": zone}, attributes=SNN_CONTAINER, policies=())


def guaranteed(name: str = "pod1", namespace: str = "namespace1", cpu: int = cpus(8), memory: int = 16 * GI,
               **extra: int) -> Pod:
    limits = {CPU: cpu, MEMORY: memory, **extra}
    return Pod(name, namespace, containers=(Container("cnt", requests=limits, limits=limits),))


def foreign(name: str = "intruder", scheduler: str = "other-scheduler", **requests: int) -> Pod:
    return Pod(name, "other", containers=(Container("c", requests=requests),), scheduler_name=scheduler)


def overreserve(*initial: NodeResourceTopology, **kw) -> NRTCache:
    kw.setdefault("profile_names", ("topo-aware-scheduler",))
    return new_nrt_cache(STRATEGY_OVERRESERVE, resync_period=PERIOD, initial=initial, **kw)


def ours(pod: Pod) -> Pod:
    """The same pod, scheduled by the profile under test."""
    return Pod(pod.name, pod.namespace, containers=pod.containers, scheduler_name="topo-aware-scheduler")


def available(view: NodeView, zone: str, resource: str) -> int | None:
    res = view.nrt.zone(zone).resource(resource)
    return None if res is None else res.available


# ---- every strategy: what a node looks like (cache_test.go checkGetCachedNRTCopy) --------------

GET_CASES = [
    # name, initial reports, node asked, foreign pod seen on it, {strategy: (returns the report?, fresh)}
    ("empty", [], "worker-node-1", False, dict.fromkeys(STRATEGIES, (False, True))),
    ("data present", ["worker-node-1"], "worker-node-1", False, dict.fromkeys(STRATEGIES, (True, True))),
    ("data missing for node", ["worker-node-1"], "invalid-node", False, dict.fromkeys(STRATEGIES, (False, True))),
    ("data present with foreign pods", ["worker-node-1"], "worker-node-1", True, {
        STRATEGY_PASSTHROUGH: (True, True),
        STRATEGY_DISCARD_RESERVED: (True, True),
        STRATEGY_OVERRESERVE: (False, False),
    }),
]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("case", GET_CASES, ids=[c[0] for c in GET_CASES])
def test_node_view_per_strategy(strategy, case):
    _, initial, node, with_foreign, expected = case
    reports = [attr_nrt(n) for n in initial]
    cache = new_nrt_cache(strategy, resync_period=PERIOD if strategy == STRATEGY_OVERRESERVE else 0, initial=reports)
    if with_foreign:
        cache.track_pod_on_node(node, foreign())
    view = cache.node_view(node)
    returns_report, fresh = expected[strategy]
    assert view.fresh is fresh
    assert view.nrt == (reports[0] if returns_report else None)


@pytest.mark.parametrize(
    "args, strategy",
    [
        ({}, STRATEGY_PASSTHROUGH),
        ({"cacheResyncPeriodSeconds": 5}, STRATEGY_OVERRESERVE),
        ({"discardReservedNodes": True}, STRATEGY_DISCARD_RESERVED),
        ({"discardReservedNodes": True, "cacheResyncPeriodSeconds": 5}, STRATEGY_DISCARD_RESERVED),
    ],
)
def test_strategy_chosen_from_the_plugin_args(args, strategy):
    assert NRTCache.from_args(NodeResourceTopologyMatchArgs.from_dict(args)).strategy == strategy


@pytest.mark.parametrize(("strategy", "cls"), [(STRATEGY_PASSTHROUGH, PassthroughCache),
                                               (STRATEGY_OVERRESERVE, OverReserveCache),
                                               (STRATEGY_DISCARD_RESERVED, DiscardReservedCache)])
def test_each_strategy_is_one_class_behind_the_interface(strategy, cls):
    cache = new_nrt_cache(strategy, resync_period=PERIOD if strategy == STRATEGY_OVERRESERVE else 0)
    assert type(cache) is cls and isinstance(cache, NRTCache) and cls.strategy == strategy


@pytest.mark.parametrize(
    "cache_args, method",
    [
        (None, "Autodetect"),  # nil config
        ({}, "Autodetect"),  # empty config
        ({"resyncMethod": "All"}, "All"),
        ({"resyncMethod": "Autodetect"}, "Autodetect"),
        ({"resyncMethod": "OnlyExclusiveResources"}, "OnlyExclusiveResources"),
    ],
)
def test_resync_method_from_the_args(cache_args, method):
    args = {"cacheResyncPeriodSeconds": 5}
    if cache_args is not None:
        args["cache"] = cache_args
    cache = NRTCache.from_args(NodeResourceTopologyMatchArgs.from_dict(args))
    assert (cache.resync_method, cache.resync_period) == (method, 5.0)


# ---- passthrough and discardreserved ----------------------------------------------------------


def test_passthrough_shows_each_report_at_once_and_ignores_the_cycle():
    cache = new_nrt_cache(STRATEGY_PASSTHROUGH, initial=[default_topology()])
    pod = guaranteed()
    cache.reserve("node1", pod)
    cache.post_bind("node1", pod)
    assert cache.node_view("node1") == NodeView(default_topology())
    newer = default_topology(annotations={"seen": "later"})
    cache.update_report(newer, now=60)
    assert cache.node_view("node1").nrt is newer


def test_discardreserved_refuses_a_node_with_a_reservation_in_flight():
    cache = new_nrt_cache(STRATEGY_DISCARD_RESERVED, initial=[default_topology()])
    pod = Pod("pod", "test", uid="some-uid")
    cache.reserve("node1", pod)
    assert cache.reservations("node1") == ("some-uid",)
    assert cache.node_view("node1") == NodeView(None, fresh=False)
    assert cache.node_view("node2") == NodeView(None)
    cache.post_bind("node1", pod)
    assert cache.reservations("node1") == ()
    assert cache.node_view("node1") == NodeView(default_topology())


def test_discardreserved_unreserve_ends_the_reservation_too():
    cache = new_nrt_cache(STRATEGY_DISCARD_RESERVED, initial=[default_topology()])
    first, second = Pod("a", "test"), Pod("b", "test")
    cache.reserve("node1", first)
    cache.reserve("node1", second)
    cache.unreserve("node1", first)
    assert cache.reservations("node1") == ("test/b",)
    assert not cache.node_view("node1").fresh
    cache.unreserve("node1", second)
    assert cache.node_view("node1").fresh


# ---- overreserve: assumed resources (overreserve_test.go, store_test.go) ------------------------


def test_reserve_takes_the_request_from_every_zone():
    cache = overreserve(default_topology())
    cache.reserve("node1", guaranteed())
    view = cache.node_view("node1")
    for zone in ("node-0", "node-1"):
        assert available(view, zone, CPU) == cpus(22)
        assert available(view, zone, MEMORY) == 44 * GI
        assert available(view, zone, NIC) == 16
        assert view.nrt.zone(zone).resource(CPU).capacity == cpus(32)


def test_unreserve_without_reserve_changes_nothing():
    cache = overreserve(default_topology())
    cache.unreserve("node1", guaranteed())
    assert cache.node_view("node1").nrt == default_topology()


def test_reserve_then_unreserve_restores_the_report():
    cache = overreserve(default_topology())
    cache.reserve("node1", guaranteed())
    cache.unreserve("node1", guaranteed())
    assert cache.node_view("node1").nrt == default_topology()


def test_resource_store_update_table():
    """store_test.go TestResourceStoreUpdate: a NIC only zone 1 reports is taken from zone 1 only."""
    report = nrt("node", {
        "node-0": {CPU: (cpus(20), cpus(20)), MEMORY: (32 * GI, 32 * GI)},
        "node-1": {CPU: (cpus(20), cpus(20)), MEMORY: (32 * GI, 32 * GI), "vendor_A.com/nic": (8, 8)},
    }, policies=("SingleNUMANodePodLevel",))
    pod = Pod("pod-0", "ns-0", containers=(
        Container("cnt-0", requests={CPU: cpus(16), MEMORY: 4 * GI, "vendor_A.com/nic": 2}),
        Container("cnt-1", requests={CPU: cpus(2), MEMORY: 2 * GI}),
    ))
    cache = overreserve(report)
    cache.reserve("node", pod)
    view = cache.node_view("node")
    expected = {
        ("node-0", CPU): (cpus(20), cpus(2)), ("node-1", CPU): (cpus(20), cpus(2)),
        ("node-0", MEMORY): (32 * GI, 26 * GI), ("node-1", MEMORY): (32 * GI, 26 * GI),
        ("node-1", "vendor_A.com/nic"): (8, 6),
    }
    for (zone, resource), (capacity, avail) in expected.items():
        res = view.nrt.zone(zone).resource(resource)
        assert (res.capacity, res.available) == (capacity, avail)
    assert view.nrt.zone("node-0").resource("vendor_A.com/nic") is None


def test_reserving_the_same_pod_twice_counts_it_once():
    cache = overreserve(default_topology())
    cache.reserve("node1", guaranteed())
    cache.reserve("node1", guaranteed())
    assert cache.assumed_pods("node1") == ("namespace1/pod1",)
    assert available(cache.node_view("node1"), "node-0", CPU) == cpus(22)


def test_available_never_drops_below_zero():
    cache = overreserve(default_topology())
    cache.reserve("node1", guaranteed("big", cpu=cpus(20)))
    cache.reserve("node1", guaranteed("bigger", cpu=cpus(20)))
    assert available(cache.node_view("node1"), "node-1", CPU) == 0


def test_reserve_ignores_a_node_without_a_stored_report():
    cache = overreserve()
    cache.reserve("ghost-node", Pod("test-pod", "default"))
    assert cache.assumed_pods("ghost-node") == ()


# ---- overreserve: dirty nodes ------------------------------------------------------------------


def test_pristine_cache_has_no_dirty_node():
    assert overreserve().dirty_nodes() == ()


def test_reserve_does_not_dirty_discard_does_and_reserve_does_not_clean():
    nodes = ("node-1", "node-4")
    cache = overreserve(*(attr_nrt(n) for n in nodes))
    for node in nodes:
        cache.reserve(node, Pod("p", "ns"))
    assert cache.dirty_nodes() == ()
    for node in nodes:
        cache.mark_discarded(node)
    assert cache.dirty_nodes() == nodes
    cache.reserve("node-4", Pod("q", "ns"))
    assert cache.dirty_nodes() == nodes


# ---- overreserve: resync (overreserve_test.go) ------------------------------------------------


def _dirty_node1(cache: NRTCache) -> Pod:
    pod = guaranteed()
    cache.reserve("node1", pod)
    cache.mark_discarded("node1")
    return pod


AFTER_POD1 = {
    "node-0": {CPU: (cpus(32), cpus(30)), MEMORY: (64 * GI, 60 * GI), NIC: (16, 16)},
    "node-1": {CPU: (cpus(32), cpus(22)), MEMORY: (64 * GI, 44 * GI), NIC: (16, 16)},
}
POD1_FP = "pfp0v0019e0420efb37746c6"

RESYNC_CASES = [
    # name, fingerprint attribute / annotation of the node's new report, pod tracked, flushed?
    ("no fingerprint", None, None, True, False),
    ("matching fingerprint", POD1_FP, POD1_FP, True, True),
    ("matching legacy annotation only", None, POD1_FP, True, True),
    ("fingerprint mismatch", "pfp0vFFFFdeadbeef000000", "pfp0vFFFFdeadbeef000000", True, False),
    ("matching value but the pod is not known", POD1_FP, None, False, False),
    ("incompatible version", "pfp0v0029e0420efb37746c6", None, True, False),
]


@pytest.mark.parametrize("case", RESYNC_CASES, ids=[c[0] for c in RESYNC_CASES])
def test_resync_flushes_only_on_a_matching_fingerprint(case):
    _, attribute, annotation, tracked, flushed = case
    cache = overreserve(default_topology())
    pod = _dirty_node1(cache)
    report = nrt(
        "node1", AFTER_POD1,
        attributes={ATTRIBUTE: attribute} if attribute else None,
        annotations={ANNOTATION: annotation} if annotation else None,
    )
    cache.update_report(report, now=1.0)
    if tracked:
        cache.track_pod_on_node("node1", ours(pod))
    assert cache.resync() == (("node1",) if flushed else ())
    if flushed:
        assert cache.dirty_nodes() == ()
        assert cache.assumed_pods("node1") == ()
        assert cache.node_view("node1") == NodeView(report, generation=1)
        assert cache.resync() == () and cache.generation == 1  # nothing dirty: no new generation
    else:
        assert cache.dirty_nodes() == ("node1",)
        assert available(cache.node_view("node1"), "node-1", CPU) == cpus(22)
        assert cache.generation == 0


def test_resync_flushes_a_new_node_and_keeps_the_unmatched_one_dirty():
    cache = overreserve(default_topology())
    _dirty_node1(cache)  # its only report is the one known at start, without a fingerprint
    cache.update_report(default_topology("node2"), now=1.0)
    assert cache.resync() == ("node2",)
    assert cache.dirty_nodes() == ("node1",)


def test_clean_nodes_are_not_resynced_even_when_their_report_matches():
    cache = overreserve(default_topology())
    pod = guaranteed()
    cache.reserve("node1", pod)
    cache.track_pod_on_node("node1", ours(pod))
    cache.update_report(nrt("node1", AFTER_POD1, attributes={ATTRIBUTE: POD1_FP}), now=1.0)
    assert cache.resync() == ()
    assert cache.assumed_pods("node1") == ("namespace1/pod1",)


def test_a_report_that_appears_after_start_is_ingested_at_the_next_resync():
    late = nrt("late-arrival-node", {"node-0": {CPU: (cpus(32), cpus(30)), MEMORY: (64 * GI, 60 * GI)}})
    cache = overreserve()
    cache.update_report(late, now=1.0)
    assert cache.node_view("late-arrival-node") == NodeView(None)
    cache.reserve("late-arrival-node", Pod("test-pod", "default"))
    assert cache.assumed_pods("late-arrival-node") == ()
    assert cache.config_changed_nodes() == ("late-arrival-node",)
    assert cache.dirty_nodes() == ()
    assert cache.resync() == ("late-arrival-node",)
    view = cache.node_view("late-arrival-node")
    assert view.fresh and view.nrt == late and view.generation == 1
    assert cache.config_changed_nodes() == ()
    cache.reserve("late-arrival-node", Pod("real-pod", "default"))
    assert cache.assumed_pods("late-arrival-node") == ("default/real-pod",)


def test_a_topology_manager_change_flushes_without_a_fingerprint():
    cache = overreserve(attr_nrt("node1"))
    cache.reserve("node1", guaranteed())
    same_conf = attr_nrt("node1")
    cache.update_report(same_conf, now=1.0)
    assert cache.config_changed_nodes() == ()
    new_conf = nrt("node1", AFTER_POD1, attributes={**SNN_CONTAINER, "topologyManagerScope": "pod"}, policies=())
    cache.update_report(new_conf, now=2.0)
    assert cache.config_changed_nodes() == ("node1",)
    assert cache.resync() == ("node1",)
    assert cache.node_view("node1").nrt == new_conf and cache.assumed_pods("node1") == ()


def test_only_resources_scope_never_learns_late_nodes_or_config_changes():
    cache = overreserve(attr_nrt("node1"), resync_scope="OnlyResources")
    cache.update_report(attr_nrt("late"), now=1.0)
    cache.update_report(nrt("node1", AFTER_POD1, policies=("BestEffortPodLevel",)), now=2.0)
    assert cache.config_changed_nodes() == () and cache.resync() == ()
    assert cache.node_view("late") == NodeView(None)


# ---- overreserve: resync methods and the exclusive-resources fingerprint ----------------------

FINGERPRINT_CASES = [
    # store_test.go TestFingerprintFromNRT (method Autodetect)
    ("no annotations, no attribute", None, None, ""),
    ("empty annotations", {}, None, ""),
    ("empty annotation value", {ANNOTATION: ""}, None, ""),
    ("annotation only", {ANNOTATION: "test-ann"}, None, "test-ann"),
    ("attribute wins over annotation", {ANNOTATION: "test-ann"}, "test-attr", "test-attr"),
    ("attribute only", None, "test-attr", "test-attr"),
]


@pytest.mark.parametrize("case", FINGERPRINT_CASES, ids=[c[0] for c in FINGERPRINT_CASES])
def test_fingerprint_read_from_a_report(case):
    _, annotations, attribute, expected = case
    report = nrt("node-0", {}, annotations=annotations, attributes={ATTRIBUTE: attribute} if attribute else None,
                 policies=("best-effort",))
    assert expected_fingerprint(report, "Autodetect")[0] == expected


@pytest.mark.parametrize(
    "method_attribute, resync_method, only_exclusive",
    [
        # store_test.go TestFingerprintMethodFromNRT (Autodetect), then the two explicit methods.
        (None, "Autodetect", False),
        ("foobar", "Autodetect", False),
        ("all", "Autodetect", False),
        ("with-exclusive-resources", "Autodetect", True),
        ("all", "OnlyExclusiveResources", True),
        ("with-exclusive-resources", "All", False),
    ],
)
def test_fingerprint_method(method_attribute, resync_method, only_exclusive):
    attributes = {ATTRIBUTE: "test-attr"}
    if method_attribute:
        attributes[ATTRIBUTE_METHOD] = method_attribute
    report = nrt("node-0", {}, attributes=attributes)
    assert expected_fingerprint(report, resync_method) == ("test-attr", only_exclusive)


def test_legacy_annotation_never_restricts_to_exclusive_pods():
    report = nrt("node-0", {}, annotations={ANNOTATION: "x"})
    assert expected_fingerprint(report, "OnlyExclusiveResources") == ("x", False)


def test_exclusive_method_fingerprints_only_pods_with_exclusive_resources():
    cache = overreserve(default_topology())
    pod = _dirty_node1(cache)
    shared = Pod("web", "namespace1", containers=(Container("c", requests={CPU: 500}),))
    cache.track_pod_on_node("node1", ours(pod))
    cache.track_pod_on_node("node1", ours(shared))
    report = nrt("node1", AFTER_POD1,
                 attributes={ATTRIBUTE: POD1_FP, ATTRIBUTE_METHOD: "with-exclusive-resources"})
    cache.update_report(report, now=1.0)
    assert cache.resync() == ("node1",)

    everything = overreserve(default_topology(), resync_method="All")
    _dirty_node1(everything)
    everything.track_pod_on_node("node1", ours(pod))
    everything.track_pod_on_node("node1", ours(shared))
    everything.update_report(report, now=1.0)
    assert everything.resync() == ()


# ---- which pods the informer offers (TestMakeNodeToPodDataMap) --------------------------------

INFORMER_CASES = [
    ("Dedicated", "Succeeded", True),  # finished jobs still count on a dedicated informer
    ("Dedicated", "Failed", True),
    ("Shared", "Succeeded", False),
    ("Shared", "Failed", False),
    ("Dedicated", "Running", True),
    ("Shared", "Running", True),
    ("Dedicated", "Pending", False),
]


@pytest.mark.parametrize("mode, phase, listed", INFORMER_CASES)
def test_pods_listed_per_informer_mode(mode, phase, listed):
    cache = overreserve(informer_mode=mode)
    cache.track_pod_on_node("node1", ours(Pod("pod1", "namespace1")), phase=phase)
    assert cache.pods_on_node("node1") == (("namespace1/pod1",) if listed else ())


def test_several_pods_on_one_node_and_deletion():
    cache = overreserve()
    for ns, name in (("namespace1", "pod1"), ("namespace2", "pod2"), ("namespace2", "pod3")):
        cache.track_pod_on_node("node1", ours(Pod(name, ns)))
    assert cache.pods_on_node("node1") == ("namespace1/pod1", "namespace2/pod2", "namespace2/pod3")
    cache.untrack_pod("node1", ours(Pod("pod2", "namespace2")))
    assert cache.pods_on_node("node1") == ("namespace1/pod1", "namespace2/pod3")


def test_bad_phase_is_an_input_error():
    with pytest.raises(InputError) as err:
        overreserve().track_pod_on_node("node1", Pod("p"), phase="Sleeping")
    assert err.value.field == "phase"


# ---- foreign pods (foreign_pods_test.go, overreserve_test.go) -----------------------------------

FOREIGN_CASES = [
    # profiles registered, scheduler of the pod, foreign?
    (("secondary-scheduler",), "default-scheduler", True),
    (("secondary-scheduler",), "secondary-scheduler", False),
    (("secondary-scheduler-A", "secondary-scheduler-B", "fancy-scheduler"), "secondary-scheduler-B", False),
]


@pytest.mark.parametrize("profiles, scheduler, is_foreign", FOREIGN_CASES)
def test_foreign_pod_detection(profiles, scheduler, is_foreign):
    cache = overreserve(attr_nrt("random-node"), profile_names=profiles)
    cache.track_pod_on_node("random-node", foreign(scheduler=scheduler))
    assert cache.has_foreign_pods("random-node") is is_foreign
    assert cache.dirty_nodes() == (("random-node",) if is_foreign else ())


def test_foreign_pods_on_an_unknown_node_are_ignored():
    cache = overreserve()
    cache.track_pod_on_node("node-bogus", foreign())
    assert cache.dirty_nodes() == ()


def test_foreign_pods_refuse_the_node_until_its_flush():
    cache = overreserve(default_topology("node1"), default_topology("node2"))
    cache.resync()  # nothing dirty yet
    cache.update_report(default_topology("node2", attributes={ATTRIBUTE: pods_fingerprint([])}), now=1.0)
    assert cache.generation == 0
    intruder = foreign()
    cache.track_pod_on_node("node2", intruder)
    assert cache.dirty_nodes() == ("node2",)
    assert cache.node_view("node2") == NodeView(None, fresh=False)
    cache.untrack_pod("node2", intruder)  # it left again: the report with no pods now matches
    assert cache.resync() == ("node2",)
    assert cache.node_view("node2").fresh and cache.generation == 1


@pytest.mark.parametrize(
    "mode, requests, marks",
    [
        ("None", {CPU: cpus(4)}, False),
        ("All", {CPU: 100}, True),
        ("OnlyExclusiveResources", {CPU: 100}, False),
        ("OnlyExclusiveResources", {NIC: 1}, True),  # the node's NRT reports the NIC
        ("OnlyExclusiveResources", {FPGA: 1}, False),  # a device the NRT does not report
    ],
)
def test_foreign_pods_detect_modes(mode, requests, marks):
    cache = overreserve(default_topology(), foreign_pods_detect=mode)
    cache.track_pod_on_node("node1", foreign(**requests))
    assert cache.has_foreign_pods("node1") is marks


# ---- exclusive resources (resourcerequests/exclusive_test.go) ----------------------------------


def _gu(name: str, **requests: int) -> Container:
    return Container(name, requests=requests, limits=requests)


EXCLUSIVE_CASES = [
    # name, pod, exclusive when the NRT reports veryfast.io/fpga
    ("no containers", Pod("pod"), False),
    ("single container guaranteed, no devices", Pod("pod", containers=(_gu("cnt", cpu=cpus(4), memory=2 * GI),)),
     True),
    ("single init container guaranteed, no devices",
     Pod("pod", init_containers=(_gu("cnt", cpu=cpus(4), memory=2 * GI),)), False),
    ("single sidecar guaranteed, no devices",
     Pod("pod", init_containers=(Container("cnt", {CPU: cpus(4), MEMORY: 2 * GI}, {CPU: cpus(4), MEMORY: 2 * GI},
                                           restart_policy="Always"),)), True),
    ("single container, devices only", Pod("pod", containers=(_gu("cnt", **{FPGA: 1}),)), True),
    ("single init container, devices only", Pod("pod", init_containers=(_gu("cnt", **{FPGA: 1}),)), False),
    ("single sidecar, devices only",
     Pod("pod", init_containers=(Container("cnt", {FPGA: 1}, {FPGA: 1}, restart_policy="Always"),)), True),
    ("guaranteed cpus, memory and devices",
     Pod("pod", containers=(_gu("cnt", cpu=cpus(8), memory=16 * GI, **{FPGA: 1}),)), True),
    ("not guaranteed, cpus and devices", Pod("pod", containers=(_gu("cnt", cpu=cpus(8), **{FPGA: 1}),)), True),
    ("not guaranteed, cpus only", Pod("pod", containers=(_gu("cnt", cpu=cpus(8)),)), False),
]


@pytest.mark.parametrize("case", EXCLUSIVE_CASES, ids=[c[0] for c in EXCLUSIVE_CASES])
def test_exclusive_resources(case):
    _, pod, exclusive = case
    assert are_exclusive_for_pod(pod, {FPGA}) is exclusive


@pytest.mark.parametrize(
    "pod, nrt_resources, exclusive",
    [
        (Pod("pod", containers=(Container("cnt", {FPGA: 1}),)), {FPGA}, True),
        (Pod("pod", containers=(Container("cnt", {FPGA: 1}),)), set(), False),
        (Pod("pod", containers=(_gu("cnt", cpu=cpus(4), memory=2 * GI),)), set(), True),
        (Pod("pod", containers=(_gu("cnt", cpu=500, memory=128 * 2**20),)), set(), True),  # memory alone
        (Pod("pod", containers=(_gu("cnt", cpu=500, memory=0),)), set(), False),  # half a CPU, not Guaranteed
        (Pod("pod", containers=(_gu("cnt", cpu=cpus(1), memory=GI, **{"hugepages-2Mi": 64 * 2**20}),)), set(), True),
    ],
)
def test_exclusive_resources_scoped_by_the_nrt(pod, nrt_resources, exclusive):
    assert are_exclusive_for_pod(pod, nrt_resources) is exclusive


# ---- the Filter and Score through the cache ----------------------------------------------------


def _two_numa(name: str = "n", free: int = 4, **kw) -> NodeResourceTopology:
    zone = {CPU: (cpus(4), cpus(free)), MEMORY: (8 * GI, 8 * GI)}
    return nrt(name, {"node-0": zone, "node-1": zone}, attributes=SNN_CONTAINER, policies=(), **kw)


def test_filter_marks_the_node_dirty_when_it_rejects():
    cache = overreserve(_two_numa())
    assert cache.filter(guaranteed("a", cpu=cpus(3), memory=GI), "n").is_success
    assert cache.dirty_nodes() == ()
    status = cache.filter(guaranteed("b", cpu=cpus(5), memory=GI), "n")
    assert status.code == Code.UNSCHEDULABLE
    assert cache.dirty_nodes() == ("n",)


def test_filter_on_a_refused_node():
    cache = overreserve(_two_numa())
    cache.track_pod_on_node("n", foreign())
    status = cache.filter(guaranteed("a", cpu=cpus(1), memory=GI), "n")
    assert status.code == Code.UNSCHEDULABLE and status.reasons == (REASON_INVALID_TOPOLOGY,)
    assert cache.filter(Pod("best-effort"), "n").is_success  # BestEffort never asks the cache
    assert cache.filter(guaranteed("a", cpu=cpus(1), memory=GI), "no-report").is_success


def test_score_through_the_cache():
    cache = overreserve(_two_numa())
    pod = guaranteed("a", cpu=cpus(1), memory=GI)
    assert cache.score(pod, "n")[0] > 0
    assert cache.score(pod, "no-report")[0] == 0
    cache.track_pod_on_node("n", foreign())
    assert cache.score(pod, "n")[0] == 0
    assert cache.score(Pod("burstable", containers=(Container("c", {CPU: 100}),)), "n")[0] == 100


def test_overreserve_prevents_the_stale_report_double_allocation():
    """Two 3-CPU single-NUMA pods on a node of two 4-CPU NUMA nodes, the report 60 s stale.

    Passthrough lets both through on the stale report; overreserve rejects the second (it takes
    3 CPUs from both zones) until the node publishes the report that shows the first pod, whose
    fingerprint matches, and the next resync flushes the node.
    """
    first, second = (guaranteed(n, cpu=cpus(3), memory=GI) for n in ("first", "second"))
    stale = _two_numa()
    passthrough = new_nrt_cache(STRATEGY_PASSTHROUGH, initial=[stale])
    cache = overreserve(stale)
    for c in (passthrough, cache):
        assert c.filter(first, "n").is_success
        c.reserve("n", first)
        c.post_bind("n", first)
        c.track_pod_on_node("n", ours(first))
    assert passthrough.filter(second, "n").is_success  # the stale report still shows 4 free everywhere
    assert not cache.filter(second, "n").is_success
    fresh = nrt("n", {
        "node-0": {CPU: (cpus(4), cpus(1)), MEMORY: (8 * GI, 7 * GI)},
        "node-1": {CPU: (cpus(4), cpus(4)), MEMORY: (8 * GI, 8 * GI)},
    }, attributes={**SNN_CONTAINER, ATTRIBUTE: pods_fingerprint([("namespace1", "first")])}, policies=())
    cache.update_report(fresh, now=3.0)
    assert not cache.filter(second, "n").is_success  # no resync before t = 5
    assert cache.advance(5.0) == ("n",)
    assert cache.filter(second, "n").is_success


# ---- time ---------------------------------------------------------------------------------------


def test_resyncs_fall_on_the_period_grid():
    cache = overreserve(default_topology(), start=100.0)
    assert cache.next_resync_at == 100.0
    cache.advance(100.0)
    assert cache.next_resync_at == 105.0
    cache.advance(123.0)  # several periods at once: one resync, next one on the grid
    assert cache.next_resync_at == 125.0
    assert new_nrt_cache(STRATEGY_PASSTHROUGH).next_resync_at is None


def test_update_report_runs_the_due_resync_against_the_previous_report():
    cache = overreserve(default_topology())
    cache.advance(0.0)
    pod = _dirty_node1(cache)
    cache.track_pod_on_node("node1", ours(pod))
    matching = nrt("node1", AFTER_POD1, attributes={ATTRIBUTE: POD1_FP})
    cache.update_report(matching, now=5.0)  # the resync at t = 5 still sees no report
    assert cache.dirty_nodes() == ("node1",)
    cache.update_report(matching, now=10.0)  # the resync at t = 10 sees it
    assert cache.dirty_nodes() == () and cache.node_view("node1").nrt == matching


def test_time_never_goes_backwards():
    cache = overreserve()
    cache.advance(10.0)
    with pytest.raises(InputError) as err:
        cache.update_report(attr_nrt("x"), now=9.0)
    assert err.value.field == "now"


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"strategy": "lru"}, "strategy"),
        ({"strategy": STRATEGY_OVERRESERVE}, "cacheResyncPeriodSeconds"),
        ({"strategy": STRATEGY_OVERRESERVE, "resync_period": float("nan")}, "cacheResyncPeriodSeconds"),
        ({"strategy": STRATEGY_PASSTHROUGH, "resync_method": "Sometimes"}, "cache.resyncMethod"),
        ({"strategy": STRATEGY_PASSTHROUGH, "foreign_pods_detect": "Some"}, "cache.foreignPodsDetect"),
        ({"strategy": STRATEGY_PASSTHROUGH, "informer_mode": "Private"}, "cache.informerMode"),
        ({"strategy": STRATEGY_PASSTHROUGH, "resync_scope": "Everything"}, "cache.resyncScope"),
    ],
)
def test_bad_configuration_names_the_field(kwargs, field):
    strategy = kwargs.pop("strategy")
    with pytest.raises(InputError) as err:
        new_nrt_cache(strategy, **kwargs)
    assert err.value.field == field and err.value.source == "NRTCache"


# ---- property: the view is always the stored report minus what is assumed ----------------------

_PODS = [guaranteed(f"p{i}", cpu=cpus(c), memory=m * GI) for i, (c, m) in enumerate([(8, 16), (2, 1), (31, 60), (1, 1)])]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, len(_PODS) - 1)), max_size=20))
def test_view_is_report_minus_assumed(ops):
    cache = overreserve(default_topology())
    assumed: set[int] = set()
    for reserve, index in ops:
        if reserve:
            cache.reserve("node1", _PODS[index])
            assumed.add(index)
        else:
            cache.unreserve("node1", _PODS[index])
            assumed.discard(index)
        view = cache.node_view("node1").nrt
        for zone in view.zones:
            for res in zone.resources:
                taken = sum(_PODS[i].containers[0].requests.get(res.name, 0) for i in assumed)
                original = default_topology().zone(zone.name).resource(res.name).available
                assert res.available == max(0, original - taken)
    for index in range(len(_PODS)):
        cache.unreserve("node1", _PODS[index])
    assert cache.node_view("node1").nrt == default_topology()
