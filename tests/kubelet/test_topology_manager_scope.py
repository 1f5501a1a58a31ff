"""Topology Manager admission under the container and pod scopes, as upstream.

Tables from kubernetes/kubernetes pkg/kubelet/cm/topologymanager: scope_container_test.go and
scope_pod_test.go (what the policy is handed: exactly the providers' answers),
topology_manager_test.go (TestNewManager, TestManagerScope, TestAdmit, the pod-level-resources
feature-off cases of TestAdmitWithPodLevelResources, TestGetAffinity) and scope_test.go
(TestGetAffinity, TestRemoveContainer), plus the order of calls from scope_container.go and
scope_pod.go.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.errors import InputError, ToposchedError
from toposched.kubelet import (
    HintProvider,
    TopologyAffinityError,
    TopologyHint,
    TopologyManager,
    UnexpectedAdmissionError,
    admit_pod,
    fast_merge_hints,
)
from toposched.kubelet.scope import container_providers_hints, pod_providers_hints
from toposched.workload import Container, Pod


def P(*nodes: int) -> TopologyHint:
    return TopologyHint(frozenset(nodes), True)


def N(*nodes: int) -> TopologyHint:
    return TopologyHint(frozenset(nodes), False)


NIL = TopologyHint(None, False)


@dataclass
class Provider:
    """A hint provider that answers the same for every container and the pod, and logs calls."""

    name: str = "provider"
    hints: Any = None
    log: list = field(default_factory=list)
    fail_on: str | None = None
    error: Exception | None = None
    manager: TopologyManager | None = None

    def get_topology_hints(self, pod, container):
        self.log.append((self.name, "hints", container.name))
        return self.hints

    def get_pod_topology_hints(self, pod):
        self.log.append((self.name, "pod-hints", None))
        return self.hints

    def allocate(self, pod, container):
        affinity = self.manager.get_affinity(pod, container.name) if self.manager else None
        self.log.append((self.name, "allocate", container.name, affinity))
        if container.name == self.fail_on:
            raise self.error


def pod(qos: str = "Guaranteed", *, init=(), apps=("app",), uid="uid-1") -> Pod:
    resources = {
        "Guaranteed": {"requests": {"cpu": 2000, "memory": 1 << 30}, "limits": {"cpu": 2000, "memory": 1 << 30}},
        "Burstable": {"requests": {"cpu": 500}},
        "BestEffort": {},
    }[qos]
    init_containers = tuple(
        Container(name, **resources, restart_policy="Always" if name.startswith("sidecar") else None) for name in init
    )
    containers = tuple(Container(n, **resources) for n in apps)
    result = Pod("web", uid=uid, init_containers=init_containers, containers=containers)
    assert result.qos_class == qos
    return result


# scope_container_test.go / scope_pod_test.go: TestContainerAccumulateProvidersHints and
# TestPodAccumulateProvidersHints (and the calculateAffinity variants).
ACCUMULATE = [
    ("TopologyHint not set", [], []),
    ("HintProvider returns empty non-nil map[string][]TopologyHint", [{}], [{}]),
    ("HintProvider returns - nil map[string][]TopologyHint from provider", [{"resource": None}], [{"resource": None}]),
    (
        "2 HintProviders with 1 resource returns hints",
        [{"resource1": [NIL]}, {"resource2": [NIL]}],
        [{"resource1": [NIL]}, {"resource2": [NIL]}],
    ),
    ("2 HintProviders 1 with 1 resource 1 with nil hints", [{"resource1": [NIL]}, None], [{"resource1": [NIL]}, None]),
    ("2 HintProviders 1 with 1 resource 1 empty hints", [{"resource1": [NIL]}, {}], [{"resource1": [NIL]}, {}]),
    (
        "HintProvider with 2 resources returns hints",
        [{"resource1": [NIL], "resource2": [NIL]}],
        [{"resource1": [NIL], "resource2": [NIL]}],
    ),
    (
        "Assorted HintProviders",
        [
            {"resource-1/A": [P(0), N(0, 1)], "resource-1/B": [P(1), N(1, 2)]},
            {"resource-2/A": [P(2), N(3, 4)], "resource-2/B": [P(2), N(3, 4)]},
            {"resource-3": None},
        ],
        [
            {"resource-1/A": [P(0), N(0, 1)], "resource-1/B": [P(1), N(1, 2)]},
            {"resource-2/A": [P(2), N(3, 4)], "resource-2/B": [P(2), N(3, 4)]},
            {"resource-3": None},
        ],
    ),
]


@pytest.mark.parametrize("name, answers, expected", ACCUMULATE, ids=[c[0] for c in ACCUMULATE])
def test_accumulate_providers_hints(name, answers, expected):
    providers = [Provider(hints=a) for a in answers]
    the_pod = pod()
    assert container_providers_hints(the_pod, the_pod.containers[0], providers) == expected
    assert pod_providers_hints(the_pod, providers) == expected


@pytest.mark.parametrize("scope", ["container", "pod"])
@pytest.mark.parametrize("name, answers, expected", ACCUMULATE, ids=[c[0] for c in ACCUMULATE])
def test_calculate_affinity_hands_the_answers_to_the_policy(scope, name, answers, expected):
    seen = []

    def recording_merge(policy, numa_nodes, providers_hints, **kwargs):
        seen.append(providers_hints)
        return TopologyHint(None, False), True

    providers = [Provider(hints=a) for a in answers]
    manager = TopologyManager(range(5), policy="best-effort", scope=scope, providers=providers, merge=recording_merge)
    manager.admit(pod())
    assert seen == [expected]


# topology_manager_test.go TestAdmit on two NUMA nodes: (name, qos, policy, answers, admitted).
ADMIT = [
    ("QOSClass set as BestEffort. None Policy. No Hints.", "BestEffort", "none", [], True),
    ("QOSClass set as Guaranteed. None Policy. No Hints.", "Guaranteed", "none", [], True),
    ("QOSClass set as BestEffort. single-numa-node Policy. No Hints.", "BestEffort", "single-numa-node", [None], True),
    ("QOSClass set as BestEffort. Restricted Policy. No Hints.", "BestEffort", "restricted", [None], True),
    (
        "QOSClass set as Guaranteed. BestEffort Policy. Preferred Affinity.",
        "Guaranteed",
        "best-effort",
        [{"resource": [P(0), N(0, 1)]}],
        True,
    ),
    (
        "QOSClass set as Guaranteed. BestEffort Policy. More than one Preferred Affinity.",
        "Guaranteed",
        "best-effort",
        [{"resource": [P(0), P(1), N(0, 1)]}],
        True,
    ),
    (
        "QOSClass set as Burstable. BestEffort Policy. More than one Preferred Affinity.",
        "Burstable",
        "best-effort",
        [{"resource": [P(0), P(1), N(0, 1)]}],
        True,
    ),
    (
        "QOSClass set as Guaranteed. BestEffort Policy. No Preferred Affinity.",
        "Guaranteed",
        "best-effort",
        [{"resource": [N(0, 1)]}],
        True,
    ),
    (
        "QOSClass set as Guaranteed. Restricted Policy. Preferred Affinity.",
        "Guaranteed",
        "restricted",
        [{"resource": [P(0), N(0, 1)]}],
        True,
    ),
    (
        "QOSClass set as Burstable. Restricted Policy. Preferred Affinity.",
        "Burstable",
        "restricted",
        [{"resource": [P(0), N(0, 1)]}],
        True,
    ),
    (
        "QOSClass set as Guaranteed. Restricted Policy. More than one Preferred affinity.",
        "Guaranteed",
        "restricted",
        [{"resource": [P(0), P(1), N(0, 1)]}],
        True,
    ),
    (
        "QOSClass set as Burstable. Restricted Policy. More than one Preferred affinity.",
        "Burstable",
        "restricted",
        [{"resource": [P(0), P(1), N(0, 1)]}],
        True,
    ),
    (
        "QOSClass set as Guaranteed. Restricted Policy. No Preferred affinity.",
        "Guaranteed",
        "restricted",
        [{"resource": [N(0, 1)]}],
        False,
    ),
    (
        "QOSClass set as Burstable. Restricted Policy. No Preferred affinity.",
        "Burstable",
        "restricted",
        [{"resource": [N(0, 1)]}],
        False,
    ),
]


@pytest.mark.parametrize("scope", ["container", "pod"])
@pytest.mark.parametrize("name, qos, policy, answers, admitted", ADMIT, ids=[c[0] for c in ADMIT])
def test_admit(scope, name, qos, policy, answers, admitted):
    manager = TopologyManager([0, 1], policy=policy, scope=scope, providers=[Provider(hints=a) for a in answers])
    if admitted:
        assert set(manager.admit(pod(qos))) == {"app"}
    else:
        with pytest.raises(TopologyAffinityError) as err:
            manager.admit(pod(qos))
        assert err.value.reason == "TopologyAffinityError"
        assert str(err.value) == "Resources cannot be allocated with Topology locality"
        assert err.value.hint == N(0, 1)
        assert err.value.container == ("app" if scope == "container" else None)


# TestAdmitWithPodLevelResources, the cases without the (alpha) pod-level resource managers.
@pytest.mark.parametrize(
    "scope, expected_calls",
    [
        ("pod", [("provider", "pod-hints", None), ("provider", "allocate", "c1", P(0))]),
        ("container", [("provider", "hints", "c1"), ("provider", "allocate", "c1", P(0))]),
    ],
)
def test_pod_scope_asks_for_pod_hints_and_container_scope_for_container_hints(scope, expected_calls):
    provider = Provider(hints={"resource": [P(0)]})
    manager = TopologyManager([0, 1], policy="restricted", scope=scope, providers=[provider])
    provider.manager = manager
    assert manager.admit(pod(apps=("c1",))) == {"c1": P(0)}
    assert provider.log == expected_calls


def test_container_scope_order_and_recorded_hints():
    log: list = []
    cpu = Provider("cpu", {"cpu": [P(0), P(1), N(0, 1)]}, log)
    gpu = Provider("gpu", {"nvidia.com/gpu": [P(1), N(0, 1)]}, log)
    manager = TopologyManager([0, 1], policy="single-numa-node", scope="container", providers=[cpu, gpu])
    cpu.manager = gpu.manager = manager
    the_pod = pod(init=("init-a", "sidecar-b", "init-c"), apps=("app-1", "app-2"))
    chosen = manager.admit(the_pod)
    order = ["init-a", "sidecar-b", "init-c", "app-1", "app-2"]
    assert list(chosen) == order
    assert all(h == P(1) for h in chosen.values())
    expected = []
    for name in order:
        expected += [("cpu", "hints", name), ("gpu", "hints", name)]
        expected += [("cpu", "allocate", name, P(1)), ("gpu", "allocate", name, P(1))]
    assert log == expected
    assert manager.get_affinity("uid-1", "sidecar-b") == P(1)
    assert manager.get_affinity(the_pod, "app-2") == P(1)


def test_pod_scope_merges_once_and_allocates_every_container_with_that_hint():
    log: list = []
    cpu = Provider("cpu", {"cpu": [P(0, 1), N(0, 1, 2)]}, log)
    memory = Provider("memory", {"memory": [P(0, 1)], "hugepages-1Gi": None}, log)
    manager = TopologyManager([0, 1, 2], policy="restricted", scope="pod", providers=[cpu, memory])
    cpu.manager = memory.manager = manager
    chosen = manager.admit(pod(init=("sidecar-a", "init-b"), apps=("app",)))
    assert chosen == {"sidecar-a": P(0, 1), "init-b": P(0, 1), "app": P(0, 1)}
    expected = [("cpu", "pod-hints", None), ("memory", "pod-hints", None)]
    for name in ("sidecar-a", "init-b", "app"):
        expected += [("cpu", "allocate", name, P(0, 1)), ("memory", "allocate", name, P(0, 1))]
    assert log == expected


class PerContainer(Provider):
    """Answers differently per container."""

    def __init__(self, answers: dict, log: list):
        super().__init__("cpu", None, log)
        self.answers = answers

    def get_topology_hints(self, pod, container):
        self.log.append((self.name, "hints", container.name))
        return self.answers[container.name]


def test_container_scope_refusal_stops_at_the_refused_container():
    log: list = []
    provider = PerContainer({"init": {"cpu": [P(0)]}, "app": {"cpu": [N(0, 1)]}, "never": {"cpu": [P(0)]}}, log)
    manager = TopologyManager([0, 1], policy="restricted", providers=[provider])
    provider.manager = manager
    with pytest.raises(TopologyAffinityError) as err:
        manager.admit(pod(init=("init",), apps=("app", "never")))
    assert (err.value.pod, err.value.container, err.value.hint) == ("default/web", "app", N(0, 1))
    # As upstream: the init container was already allocated and stays recorded.
    assert log == [("cpu", "hints", "init"), ("cpu", "allocate", "init", P(0)), ("cpu", "hints", "app")]
    assert manager.get_affinity("uid-1", "init") == P(0)
    assert manager.get_affinity("uid-1", "app") == NIL


def test_pod_scope_refusal_allocates_nothing():
    provider = Provider(hints={"cpu": [P(0)], "gpu": [P(1)]})
    manager = TopologyManager([0, 1], policy="single-numa-node", scope="pod", providers=[provider])
    with pytest.raises(TopologyAffinityError) as err:
        manager.admit(pod(init=("init",)))
    assert err.value.container is None and err.value.hint == NIL
    assert provider.log == [("provider", "pod-hints", None)]


class SMTAlignmentError(ToposchedError):
    """Stands for an admission error of another manager: it carries its own reason."""

    reason = "SMTAlignmentError"


@pytest.mark.parametrize("scope", ["container", "pod"])
def test_allocation_errors(scope):
    plain = ToposchedError("not enough cpus available to satisfy request")
    provider = Provider(hints=None, fail_on="app", error=plain)
    manager = TopologyManager([0, 1], policy="best-effort", scope=scope, providers=[provider])
    with pytest.raises(UnexpectedAdmissionError) as err:
        manager.admit(pod(init=("init",), apps=("app", "after")))
    assert err.value.reason == "UnexpectedAdmissionError"
    assert str(err.value) == "Allocate failed due to not enough cpus available to satisfy request, which is unexpected"
    assert err.value.cause is plain and err.value.container == "app"
    assert [e[2] for e in provider.log if e[1] == "allocate"] == ["init", "app"]

    smt = SMTAlignmentError("SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2")
    for error in (smt, InputError("bad")):
        provider = Provider(hints=None, fail_on="app", error=error)
        manager = TopologyManager([0, 1], policy="best-effort", scope=scope, providers=[provider])
        with pytest.raises(type(error)) as err:
            manager.admit(pod())
        assert err.value is error


def test_none_policy_allocates_in_order_and_records_nothing():
    log: list = []
    providers = [Provider("cpu", {"cpu": [N(0)]}, log), Provider("gpu", None, log)]
    manager = TopologyManager(range(12), policy="none", scope="pod", providers=providers)
    chosen = manager.admit(pod(init=("init",), apps=("a", "b")))
    assert chosen == {"init": NIL, "a": NIL, "b": NIL}
    assert log == [(p, "allocate", c, None) for c in ("init", "a", "b") for p in ("cpu", "gpu")]
    assert manager.get_affinity("uid-1", "a") == NIL


# topology_manager_test.go TestGetAffinity and scope_test.go TestGetAffinity / TestRemoveContainer.
def test_get_affinity_of_an_unknown_container():
    manager = TopologyManager([0, 1], policy="best-effort")
    assert manager.get_affinity("0aafa4c4-38e8-11e9-bcb1-a4bf01040474", "nginx") == NIL


def test_remove_container_and_pod():
    manager = TopologyManager([0, 1], policy="best-effort", providers=[Provider(hints={"cpu": [P(1)]})])
    manager.admit(pod(apps=("a", "b"), uid=""))  # no UID: recorded under namespace/name
    assert manager.get_affinity("default/web", "a") == P(1)
    manager.remove_container("default/web", "a")
    assert manager.get_affinity("default/web", "a") == NIL
    assert manager.get_affinity("default/web", "b") == P(1)
    manager.remove_pod("default/web")
    assert manager.get_affinity("default/web", "b") == NIL


# TestNewManager / TestManagerScope.
@pytest.mark.parametrize("policy", ["none", "best-effort", "restricted", "single-numa-node"])
@pytest.mark.parametrize("scope", ["container", "pod"])
def test_new_manager(policy, scope):
    manager = TopologyManager([0], policy=policy, scope=scope)
    assert (manager.policy, manager.scope) == (policy, scope)


@pytest.mark.parametrize(
    "kwargs, message, field",
    [
        ({"policy": "unknown"}, 'unknown policy: "unknown"', "topologyManagerPolicy"),
        ({"policy": "best-effort", "scope": "unknown"}, 'unknown scope: "unknown"', "topologyManagerScope"),
        (
            {"policy": "restricted", "options": {"unknown-option": "true"}},
            "unknown Topology Manager Policy option",
            "topologyManagerPolicyOptions[unknown-option]",
        ),
        ({"policy": "best-effort", "options": {"prefer-closest-numa-nodes": "true"}}, "distance", "distances"),
    ],
)
def test_new_manager_refuses(kwargs, message, field):
    with pytest.raises(InputError, match=message) as err:
        TopologyManager([0], **kwargs)
    assert err.value.field == field


def test_new_manager_refuses_more_than_eight_numa_nodes():
    with pytest.raises(InputError, match="unsupported on machines with more than 8 NUMA Nodes"):
        TopologyManager(range(9), policy="best-effort")
    manager = TopologyManager(range(9), policy="best-effort", options={"max-allowable-numa-nodes": "9"})
    assert manager.numa_nodes == tuple(range(9))


def test_add_hint_provider():
    manager = TopologyManager([0], policy="none")
    providers = [Provider(), Provider(), Provider()]
    for p in providers:
        manager.add_hint_provider(p)
    assert manager.providers == tuple(providers)
    assert all(isinstance(p, HintProvider) for p in providers)
    with pytest.raises(InputError, match="allocate"):
        manager.add_hint_provider(object())


def test_bad_hints_from_a_provider_are_input_errors():
    manager = TopologyManager([0, 1], policy="restricted", providers=[Provider(hints={"cpu": [P(4)]})])
    with pytest.raises(InputError, match="lacks"):
        manager.admit(pod())


def test_prefer_closest_through_the_manager():
    distances = [[10, 11, 20], [11, 10, 20], [20, 20, 10]]
    provider = Provider(hints={"cpu": [P(0, 1), P(0, 2)]})
    chosen = admit_pod(
        pod(),
        [provider],
        policy="best-effort",
        numa_nodes=[0, 1, 2],
        options={"prefer-closest-numa-nodes": "true"},
        distances=distances,
    )
    assert chosen == {"app": P(0, 1)}


# Properties: random answers per container, both scopes, exhaustive and fast merges agree.
hint_st = st.builds(TopologyHint, st.one_of(st.none(), st.frozensets(st.integers(0, 2), max_size=3)), st.booleans())
list_st = st.one_of(st.none(), st.lists(hint_st, max_size=3))
answer_st = st.one_of(st.none(), st.dictionaries(st.sampled_from(["cpu", "gpu"]), list_st, max_size=2))


@settings(max_examples=60, deadline=None)
@given(
    answers=st.lists(st.lists(answer_st, min_size=3, max_size=3), min_size=1, max_size=2),
    policy=st.sampled_from(["best-effort", "restricted", "single-numa-node"]),
    scope=st.sampled_from(["container", "pod"]),
)
def test_admitted_hints_respect_the_policy(answers, policy, scope):
    def make(log):
        return [PerContainerAndPod(dict(zip(("init", "app", "pod"), a)), log) for a in answers]

    the_pod = pod(init=("init",), apps=("app",))
    outcomes = []
    for merge in (None, fast_merge_hints):
        kwargs = {} if merge is None else {"merge": merge}
        manager = TopologyManager([0, 1, 2], policy=policy, scope=scope, providers=make([]), **kwargs)
        try:
            outcomes.append(manager.admit(the_pod))
        except TopologyAffinityError as err:
            outcomes.append((err.container, err.hint))
    assert outcomes[0] == outcomes[1]
    if isinstance(outcomes[0], dict):
        for hint in outcomes[0].values():
            if policy == "single-numa-node":
                assert hint.numa_nodes is None or len(hint.numa_nodes) == 1
            if policy == "restricted":
                assert hint.preferred


class PerContainerAndPod(PerContainer):
    def get_pod_topology_hints(self, pod):
        return self.answers["pod"]
