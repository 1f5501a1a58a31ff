"""The static CPU manager policy against upstream's tables.

Rewrites of ``policy_static_test.go`` (Start, Allocate, reuse, Remove, allocateCPUs, the
reserved-list variants, option parsing), ``policy_options_test.go`` and
``topology_hints_test.go`` (podGuaranteedCPUs, GetTopologyHints, GetPodTopologyHints, the
align-by-socket hints), then properties on random machines and pods.

Upstream's Allocate tests hand the policy a state without calling Start; here that is
``validate_state=False``. Upstream's pods: ``makePod`` gives one container with the CPU
request/limit and 1G of memory (so equal values make the pod Guaranteed);
``makeMultiContainerPod`` names its containers ``initContainer-<i>`` and ``appContainer-<i>``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from machines import MACHINES

from toposched.errors import InputError
from toposched.kubelet import TopologyHint
from toposched.kubelet.cpu_assignment import CPUAllocationError
from toposched.kubelet.cpu_manager import (
    CPUState,
    SMTAlignmentError,
    StaticCPUPolicy,
    StaticPolicyOptions,
    cpu_topology_hints,
    parse_static_policy_options,
)
from toposched.topology import CPUSet, Machine
from toposched.workload import Container, Pod

P = CPUSet.parse
GIB = 10**9


def make_pod(uid: str, name: str, request: int, limit: int) -> Pod:
    """Upstream ``makePod``: CPU in millicores, plus 1G of memory requested and limited."""
    return Pod(name=uid, uid=uid, containers=(
        Container(name, requests={"cpu": request, "memory": GIB}, limits={"cpu": limit, "memory": GIB}),))


def make_multi(init: list[tuple[int, bool]], apps: list[int], uid: str = "podUID") -> Pod:
    """Upstream ``makeMultiContainerPodWithOptions``: (millicores, restartable) init containers, app containers."""
    def c(name: str, milli: int, always: bool = False) -> Container:
        res = {"cpu": milli, "memory": GIB}
        return Container(name, requests=res, limits=res, restart_policy="Always" if always else None)

    return Pod(name="pod", uid=uid,
               init_containers=tuple(c(f"initContainer-{i}", m, a) for i, (m, a) in enumerate(init)),
               containers=tuple(c(f"appContainer-{i}", m) for i, m in enumerate(apps)))


def state(default: str, assignments: dict[str, dict[str, str]] | None = None) -> CPUState:
    return CPUState(P(default), {p: {c: P(s) for c, s in cs.items()} for p, cs in (assignments or {}).items()})


QUAD = MACHINES["topoQuadSocketFourWayHT"]
QUAD_ALL = QUAD.online
QUAD_SOCK0 = QUAD.sockets[0].cpus
QUAD_SOCK1 = QUAD.sockets[1].cpus


# ---- Start ----------------------------------------------------------------------------------

START = [
    ("non-corrupted state", 0, None, "1-11", {"fakePod": {"0": "0"}}, "1-11", None),
    ("empty cpuset", 1, None, "", {}, "0-11", None),
    ("reserved cores 0 & 6 are not present in available cpuset", 2, None, "0-1", {}, None,
     'not all reserved cpus: "0,6" are present in defaultCpuSet: "0-1"'),
    ("some of reserved cores are present in available cpuset (strict)", 2, {"strict-cpu-reservation": "true"},
     "0-1", {}, None, 'some of strictly reserved cpus: "0" are present in defaultCpuSet: "0-1"'),
    ("assigned core 2 is still present in available cpuset", 0, None, "2-11", {"fakePod": {"0": "0-2"}}, None,
     'pod: fakePod, container: 0 cpuset: "0-2" overlaps with default cpuset "2-11"'),
    ("assigned core 2 is still present in available cpuset (strict)", 0, {"strict-cpu-reservation": "true"},
     "2-11", {"fakePod": {"0": "0-2"}}, None,
     'pod: fakePod, container: 0 cpuset: "0-2" overlaps with default cpuset "2-11"'),
    ("core 12 is not present in topology but is in state cpuset", 0, None, "5-12",
     {"fakePod": {"0": "0-2", "1": "3-4"}}, None,
     'current set of available CPUs "0-11" doesn\'t match with CPUs in state "0-12"'),
    ("core 11 is present in topology but is not in state cpuset", 0, None, "5-10",
     {"fakePod": {"0": "0-2", "1": "3-4"}}, None,
     'current set of available CPUs "0-11" doesn\'t match with CPUs in state "0-10"'),
]


@pytest.mark.parametrize(("reserved", "options", "default", "assignments", "expected", "error"),
                         [c[1:] for c in START], ids=[c[0] for c in START])
def test_start(reserved: int, options: dict[str, str] | None, default: str, assignments: dict[str, dict[str, str]],
               expected: str | None, error: str | None) -> None:
    policy = StaticCPUPolicy(MACHINES["topoDualSocketHT"], num_reserved=reserved, options=options)
    before = policy.state
    if error:
        with pytest.raises(InputError) as info:
            policy.start(state(default, assignments))
        assert info.value.message == error
        assert policy.state == before
    else:
        policy.start(state(default, assignments))
        assert policy.default_cpuset == P(expected or "")


START_WITH_RESERVED_LIST = [
    ("empty cpuset", 2, "0-1", None, "", "0-11", None),
    ("empty cpuset with strict-cpu-reservation", 2, "0-1", {"strict-cpu-reservation": "true"}, "", "2-11", None),
    ("reserved cores 0 & 1 are not present in available cpuset", 2, "0-1", None, "2-5", None,
     'not all reserved cpus: "0-1" are present in defaultCpuSet: "2-5"'),
    ("reserved cores 0 & 1 are present in available cpuset with strict-cpu-reservation", 2, "0-1",
     {"strict-cpu-reservation": "true"}, "0-5", None,
     'some of strictly reserved cpus: "0-1" are present in defaultCpuSet: "0-5"'),
]


@pytest.mark.parametrize(("num", "reserved", "options", "default", "expected", "error"),
                         [c[1:] for c in START_WITH_RESERVED_LIST], ids=[c[0] for c in START_WITH_RESERVED_LIST])
def test_start_with_reserved_list(num: int, reserved: str, options: dict[str, str] | None, default: str,
                                  expected: str | None, error: str | None) -> None:
    policy = StaticCPUPolicy(MACHINES["topoDualSocketHT"], num_reserved=num, reserved_cpus=P(reserved),
                             options=options)
    if error:
        with pytest.raises(InputError, match=error):
            policy.start(state(default))
    else:
        policy.start(state(default))
        assert policy.default_cpuset == P(expected or "")


def test_reserved_size_must_match_the_reserved_list() -> None:
    with pytest.raises(InputError) as info:
        StaticCPUPolicy(MACHINES["topoDualSocketHT"], num_reserved=1, reserved_cpus=P("0-1"))
    assert info.value.message == ("[cpumanager] unable to reserve the required amount of CPUs "
                                  "(size of 0-1 did not equal 1)")


def test_policy_name_and_reserved_cpus_taken_by_topology() -> None:
    policy = StaticCPUPolicy(MACHINES["topoSingleSocketHT"], num_reserved=2)
    assert policy.name == "static"
    assert policy.reserved_cpus == P("0,4")  # the lowest-numbered core, both threads


# ---- Allocate ---------------------------------------------------------------------------------

# (description, machine, reserved count, reserved list, options, default, assignments, pod, hint NUMA ids,
#  expected CPUs / error message / None for "no exclusive CPUs")
OPTIONS_INSENSITIVE = [
    ("GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore", "topoSingleSocketHT", 1, None, "0-1,4-5",
     {"fakePod": {"fakeContainer100": "2-3,6-7"}}, ("fakeContainer3", 2000, 2000), "1,5"),
    ("GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocket", "topoDualSocketHT", 1, None, "0-1,3-11",
     {"fakePod": {"fakeContainer100": "2"}}, ("fakeContainer3", 6000, 6000), "1,3,5,7,9,11"),
    ("GuPodMultipleCores, DualSocketHT, ExpectAllocThreeCores", "topoDualSocketHT", 1, None, "0,2-4,6-11",
     {"fakePod": {"fakeContainer100": "1,5"}}, ("fakeContainer3", 6000, 6000), "2-4,8-10"),
    ("GuPodMultipleCores, DualSocketNoHT, ExpectAllocOneSocket", "topoDualSocketNoHT", 1, None, "0-1,3-7",
     {"fakePod": {"fakeContainer100": ""}}, ("fakeContainer1", 4000, 4000), "4-7"),
    ("GuPodMultipleCores, DualSocketNoHT, ExpectAllocFourCores", "topoDualSocketNoHT", 1, None, "0-1,3,6-7",
     {"fakePod": {"fakeContainer100": "4-5"}}, ("fakeContainer1", 4000, 4000), "1,3,6-7"),
    ("GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocketOneCore", "topoDualSocketHT", 1, None, "0-1,3-11",
     {"fakePod": {"fakeContainer100": "2"}}, ("fakeContainer3", 8000, 8000), "1,3-5,7,9-11"),
    ("NonGuPod, SingleSocketHT, NoAlloc", "topoSingleSocketHT", 1, None, "0-7", {},
     ("fakeContainer1", 1000, 2000), None),
    ("GuPodNonIntegerCore, SingleSocketHT, NoAlloc", "topoSingleSocketHT", 1, None, "0-7", {},
     ("fakeContainer4", 977, 977), None),
    ("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocSock0", "topoQuadSocketFourWayHT", 0, None,
     str(QUAD_ALL - P("3-7,11")), {"fakePod": {"fakeContainer100": "3-7,11"}},
     ("fakeContainer5", 72000, 72000), str(QUAD_SOCK0)),
    ("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllFullCoresFromThreeSockets",
     "topoQuadSocketFourWayHT", 0, None, "1,25,13,38,2,9,11,35,23,48,12,51,53,173,113,233,54,61",
     {"fakePod": {"fakeContainer100": str(QUAD_ALL - P("1,25,13,38,2,9,11,35,23,48,12,51,53,173,113,233,54,61"))}},
     ("fakeCcontainer5", 12000, 12000), "1,25,13,38,11,35,23,48,53,173,113,233"),
    ("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllSock1+FullCore", "topoQuadSocketFourWayHT", 0,
     None, str(QUAD_SOCK1 | P("10,34,22,47,53,173,61,181,108,228,115,235")),
     {"fakePod": {"fakeContainer100": str(QUAD_ALL - (QUAD_SOCK1 | P("10,34,22,47,53,173,61,181,108,228,115,235")))}},
     ("fakeContainer5", 76000, 76000), str(QUAD_SOCK1 | P("10,34,22,47"))),
]

DEFAULT_OPTIONS = [
    ("GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", "topoSingleSocketHT", 1, None, "0-7", {},
     ("fakeContainer2", 1000, 1000), "4"),
    ("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocCPUs", "topoQuadSocketFourWayHT", 0, None,
     "10,11,53,67,52", {"fakePod": {"fakeContainer100": str(QUAD_ALL - P("10,11,53,37,55,67,52"))}},
     ("fakeContainer5", 5000, 5000), "10,11,53,67,52"),
    ("GuPodSingleCore, SingleSocketHT, ExpectError", "topoSingleSocketHT", 1, None, "0-7", {},
     ("fakeContainer2", 8000, 8000), "not enough cpus available to satisfy request: requested=8, available=7"),
    ("GuPodMultipleCores, SingleSocketHT, ExpectSameAllocation", "topoSingleSocketHT", 1, None, "0-1,4-5",
     {"fakePod": {"fakeContainer3": "2-3,6-7"}}, ("fakeContainer3", 4000, 4000), "2-3,6-7"),
    ("GuPodMultipleCores, DualSocketHT, NoAllocExpectError", "topoDualSocketHT", 1, None, "0,4-11",
     {"fakePod": {"fakeContainer100": "1-3"}}, ("fakeContainer5", 10000, 10000),
     "not enough cpus available to satisfy request: requested=10, available=8"),
    ("GuPodMultipleCores, SingleSocketHT, NoAllocExpectError", "topoSingleSocketHT", 1, None, "0,7",
     {"fakePod": {"fakeContainer100": "1-6"}}, ("fakeContainer5", 2000, 2000),
     "not enough cpus available to satisfy request: requested=2, available=1"),
    ("GuPodMultipleCores, topoQuadSocketFourWayHT, NoAlloc", "topoQuadSocketFourWayHT", 0, None,
     "10,11,53,37,55,67,52", {"fakePod": {"fakeContainer100": str(QUAD_ALL - P("10,11,53,37,55,67,52"))}},
     ("fakeContainer5", 76000, 76000), "not enough cpus available to satisfy request: requested=76, available=7"),
]

FULL_PCPUS = {"full-pcpus-only": "true"}
SMT_ALIGN = [
    ("GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", "topoSingleSocketHT", 1, None, "0-7", {},
     ("fakeContainer2", 1000, 1000), "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2"),
    ("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocOneCPUs", "topoQuadSocketFourWayHT", 8, None,
     str(QUAD_ALL), {}, ("fakeContainer15", 15000, 15000),
     "SMT Alignment Error: requested 15 cpus not multiple cpus per core = 4"),
    ("GuPodManyCores, topoDualSocketHT, ExpectDoNotAllocPartialCPU", "topoDualSocketHT", 2, "1,6", "0,2-5,7-11", {},
     ("fakeContainerBug113537_1", 10000, 10000),
     "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 8, requested CPUs = 10, "
     "CPUs per core = 2"),
    ("GuPodManyCores, topoDualSocketHT, AutoReserve, ExpectAllocAllCPUs", "topoDualSocketHT", 2, None,
     "1-5,7-11", {}, ("fakeContainerBug113537_2", 10000, 10000), "1-5,7-11"),
    ("GuPodManyCores, topoDualSocketHT, ExpectAllocAllCPUs", "topoDualSocketHT", 2, "0,6", "1-5,7-11", {},
     ("fakeContainerBug113537_2", 10000, 10000), "1-5,7-11"),
]

ALIGN_BY_SOCKET = [
    ("Align by socket: true, cpus within same socket of numa in hint are part of allocation", "true", "2,11"),
    ("Align by socket: false, cpus are taken strictly from NUMA nodes in hint", "false", "2,21"),
]


def run_allocate(machine: str, num: int, reserved: str | None, options: dict[str, str] | None, default: str,
                 assignments: dict[str, dict[str, str]], pod_spec: tuple[str, int, int], expected: str | None,
                 hint: TopologyHint | None = None) -> None:
    policy = StaticCPUPolicy(MACHINES[machine], num_reserved=num, reserved_cpus=P(reserved) if reserved else None,
                             options=options, state=state(default, assignments), validate_state=False)
    pod = make_pod("fakePod", *pod_spec)
    container = pod.containers[0]
    before = policy.state
    if expected is not None and ("Error" in expected or "not enough" in expected):
        error = SMTAlignmentError if "SMT" in expected else CPUAllocationError
        with pytest.raises(error) as info:
            policy.allocate(pod, container, hint)
        assert str(info.value) == expected
        assert policy.state == before
        assert policy.state.get("fakePod", container.name) is None
        return
    cpus = policy.allocate(pod, container, hint)
    held = policy.state.get("fakePod", container.name)
    if expected is None:
        assert cpus == CPUSet() and held is None
        assert policy.state == before
        return
    assert cpus == held == P(expected)
    assert cpus.isdisjoint(policy.default_cpuset)


@pytest.mark.parametrize("options", [None, FULL_PCPUS], ids=["no options", "full-pcpus-only"])
@pytest.mark.parametrize("case", OPTIONS_INSENSITIVE, ids=[c[0] for c in OPTIONS_INSENSITIVE])
def test_allocate_options_insensitive(case: tuple, options: dict[str, str] | None) -> None:
    _, machine, num, reserved, default, assignments, pod, expected = case
    run_allocate(machine, num, reserved, options, default, assignments, pod, expected)


@pytest.mark.parametrize("case", DEFAULT_OPTIONS, ids=[c[0] for c in DEFAULT_OPTIONS])
def test_allocate_default_options(case: tuple) -> None:
    _, machine, num, reserved, default, assignments, pod, expected = case
    run_allocate(machine, num, reserved, None, default, assignments, pod, expected)


@pytest.mark.parametrize("case", SMT_ALIGN, ids=[c[0] for c in SMT_ALIGN])
def test_allocate_full_pcpus_only(case: tuple) -> None:
    _, machine, num, reserved, default, assignments, pod, expected = case
    run_allocate(machine, num, reserved, FULL_PCPUS, default, assignments, pod, expected)


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in ALIGN_BY_SOCKET], ids=[c[0] for c in ALIGN_BY_SOCKET])
def test_allocate_align_by_socket(value: str, expected: str) -> None:
    run_allocate("topoDualSocketMultiNumaPerSocketHT", 1, None, {"align-by-socket": value}, "2,11,21,22", {},
                 ("fakeContainer2", 2000, 2000), expected, hint=TopologyHint(frozenset({0, 2}), True))


def test_allocate_with_reserved_list() -> None:
    # TestStaticPolicyAddWithResvList
    run_allocate("topoSingleSocketHT", 1, "0", None, "0-7", {}, ("fakeContainer2", 8000, 8000),
                 "not enough cpus available to satisfy request: requested=8, available=7")
    run_allocate("topoSingleSocketHT", 2, "0-1", None, "0-7", {}, ("fakeContainer2", 1000, 1000), "4")
    run_allocate("topoSingleSocketHT", 2, "0-1", None, "0-1,4-5", {"fakePod": {"fakeContainer100": "2-3,6-7"}},
                 ("fakeContainer3", 2000, 2000), "4-5")


def test_allocate_reads_the_hint_from_the_affinity_store() -> None:
    class Store:
        def get_affinity(self, pod: object, name: str) -> TopologyHint:
            return TopologyHint(frozenset({1}), True)

    policy = StaticCPUPolicy(MACHINES["topoDualSocketHT"], affinity=Store())
    assert policy.allocate(make_pod("p", "c", 2000, 2000), "c") == P("1,7")


def test_a_hint_naming_a_missing_numa_node_is_refused() -> None:
    policy = StaticCPUPolicy(MACHINES["topoDualSocketHT"])
    before = policy.state
    with pytest.raises(InputError, match="lacks"):
        policy.allocate(make_pod("p", "c", 2000, 2000), "c", TopologyHint(frozenset({7}), True))
    assert policy.state == before


# ---- init-container CPU reuse and release -----------------------------------------------------

def test_reuse_init_container_cpus_and_release() -> None:
    # TestStaticPolicyReuseCPUs: SingleSocketHT, DeAllocOneInitContainer
    policy = StaticCPUPolicy(MACHINES["topoSingleSocketHT"], state=state("0-7"), validate_state=False)
    pod = make_multi([(4000, False)], [2000])
    for c in pod.all_containers:
        policy.allocate(pod, c)
    assert policy.state.get("podUID", "initContainer-0") == P("0-1,4-5")
    assert policy.state.get("podUID", "appContainer-0") == P("0,4")
    assert policy.default_cpuset == P("2-3,6-7")
    policy.release_container("podUID", "initContainer-0")
    assert policy.default_cpuset == P("1-3,5-7")
    assert policy.state.get("podUID", "initContainer-0") is None


def test_do_not_reuse_sidecar_cpus() -> None:
    # TestStaticPolicyDoNotReuseCPUs: a restartable init container keeps its CPUs.
    policy = StaticCPUPolicy(MACHINES["topoSingleSocketHT"], state=state("0-7"), validate_state=False)
    pod = make_multi([(4000, True)], [2000])
    for c in pod.all_containers:
        policy.allocate(pod, c)
    assert policy.default_cpuset == P("3,7")


REMOVE = [
    ("SingleSocketHT, DeAllocOneContainer", "fakeContainer1", {"fakeContainer1": "1-3"}, "4-7", "1-7"),
    ("SingleSocketHT, DeAllocOneContainer, BeginEmpty", "fakeContainer1",
     {"fakeContainer1": "1-3", "fakeContainer2": "4-7"}, "", "1-3"),
    ("SingleSocketHT, DeAllocTwoContainer", "fakeContainer1", {"fakeContainer1": "1,3,5", "fakeContainer2": "2,4"},
     "6-7", "1,3,5-7"),
    ("SingleSocketHT, NoDeAlloc", "fakeContainer2", {"fakeContainer1": "1,3,5"}, "2,4,6-7", "2,4,6-7"),
]


@pytest.mark.parametrize(("container", "assignments", "default", "expected"), [c[1:] for c in REMOVE],
                         ids=[c[0] for c in REMOVE])
def test_release_container(container: str, assignments: dict[str, str], default: str, expected: str) -> None:
    policy = StaticCPUPolicy(MACHINES["topoSingleSocketHT"], state=state(default, {"fakePod": assignments}),
                             validate_state=False)
    policy.release_container("fakePod", container)
    assert policy.default_cpuset == P(expected)
    assert policy.state.get("fakePod", container) is None


TOPOLOGY_AWARE = [
    ("Request 2 CPUs, No BitMask", 2, None, "0,6"),
    ("Request 2 CPUs, BitMask on Socket 0", 2, {0}, "0,6"),
    ("Request 2 CPUs, BitMask on Socket 1", 2, {1}, "1,7"),
    ("Request 8 CPUs, BitMask on Socket 0", 8, {0}, "0,6,2,8,4,10,1,7"),
    ("Request 8 CPUs, BitMask on Socket 1", 8, {1}, "1,7,3,9,5,11,0,6"),
]


@pytest.mark.parametrize(("count", "numa", "expected"), [c[1:] for c in TOPOLOGY_AWARE],
                         ids=[c[0] for c in TOPOLOGY_AWARE])
def test_topology_aware_allocate_cpus(count: int, numa: set[int] | None, expected: str) -> None:
    policy = StaticCPUPolicy(MACHINES["topoDualSocketHT"], state=state("0-11"))
    assert policy.allocate_cpus(count, numa) == P(expected)
    assert policy.default_cpuset == P("0-11") - P(expected)


# ---- option parsing (TestStaticPolicyOptions, policy_options_test.go) -------------------------

OPTION_CASES = [
    ("nil args", None, StaticPolicyOptions()),
    ("empty args", {}, StaticPolicyOptions()),
    ("bad single arg", {"badValue1": ""}, None),
    ("bad multiple arg", {"badValue1": "", "badvalue2": "aaaa"}, None),
    ("good arg", {"full-pcpus-only": "true"}, StaticPolicyOptions(full_pcpus_only=True)),
    ("good arg, bad value", {"full-pcpus-only": "enabled!"}, None),
    ("bad arg intermixed", {"full-pcpus-only": "1", "badvalue2": "lorem ipsum"}, None),
    ("FullPhysicalCPUsOnly set to true only", {"full-pcpus-only": "true"}, StaticPolicyOptions(full_pcpus_only=True)),
    ("DistributeCPUsAcrossCores set to true only", {"distribute-cpus-across-cores": "true"},
     StaticPolicyOptions(distribute_cpus_across_cores=True)),
    ("PreferAlignByUnCoreCache and StrictCPUReservation set to true",
     {"prefer-align-cpus-by-uncorecache": "true", "strict-cpu-reservation": "true"},
     StaticPolicyOptions(prefer_align_cpus_by_uncorecache=True, strict_cpu_reservation=True)),
    ("PreferAlignByUnCoreCache and FullPCPUsOnly set to true",
     {"prefer-align-cpus-by-uncorecache": "true", "full-pcpus-only": "true"},
     StaticPolicyOptions(prefer_align_cpus_by_uncorecache=True, full_pcpus_only=True)),
    ("PreferAlignByUnCoreCache and AlignBySocket set to true",
     {"prefer-align-cpus-by-uncorecache": "true", "align-by-socket": "true"},
     StaticPolicyOptions(prefer_align_cpus_by_uncorecache=True, align_by_socket=True)),
    ("FullPhysicalCPUsOnly and DistributeCPUsAcrossCores options can not coexist",
     {"full-pcpus-only": "true", "distribute-cpus-across-cores": "true"}, None),
    ("PreferAlignByUnCoreCache and DistributeCPUsAcrossCores options can not coexist",
     {"prefer-align-cpus-by-uncorecache": "true", "distribute-cpus-across-cores": "true"}, None),
    ("PreferAlignByUnCoreCache and DistributeCPUsAcrossNUMA options can not coexist",
     {"prefer-align-cpus-by-uncorecache": "true", "distribute-cpus-across-numa": "true"}, None),
]


@pytest.mark.parametrize(("options", "expected"), [c[1:] for c in OPTION_CASES], ids=[c[0] for c in OPTION_CASES])
def test_parse_options(options: dict[str, str] | None, expected: StaticPolicyOptions | None) -> None:
    if expected is None:
        with pytest.raises(InputError):
            parse_static_policy_options(options)
    else:
        assert parse_static_policy_options(options) == expected


def test_unknown_option_message_and_field() -> None:
    with pytest.raises(InputError) as info:
        StaticCPUPolicy(MACHINES["topoDualSocketHT"], options={"this-option-does-not-exist": "true"})
    assert info.value.message == 'unknown CPU Manager Policy option: "this-option-does-not-exist"'
    assert info.value.field == "cpuManagerPolicyOptions.this-option-does-not-exist"


AVAILABILITY = [
    # (option, alpha gate, beta gate, available)
    ("this-option-does-not-exist", False, False, False),
    ("this-option-does-not-exist", False, True, False),
    ("full-pcpus-only", False, False, True),
    ("align-by-socket", True, False, True),
    ("align-by-socket", False, True, False),
    ("distribute-cpus-across-numa", False, True, True),
    ("distribute-cpus-across-numa", True, False, False),
    ("distribute-cpus-across-cores", True, False, True),
    ("distribute-cpus-across-cores", False, True, False),
    ("strict-cpu-reservation", True, False, False),
    ("strict-cpu-reservation", False, True, True),
    ("prefer-align-cpus-by-uncorecache", True, False, False),
    ("prefer-align-cpus-by-uncorecache", False, True, True),
]


@pytest.mark.parametrize(("option", "alpha", "beta", "available"), AVAILABILITY)
def test_option_feature_gates(option: str, alpha: bool, beta: bool, available: bool) -> None:
    try:
        parse_static_policy_options({option: "true"}, alpha_options=alpha, beta_options=beta)
    except InputError:
        assert not available
    else:
        assert available


VALIDATE = [
    ("Align by socket not enabled", {"full-pcpus-only": "true"}, "topoDualSocketMultiNumaPerSocketHT",
     "single-numa-node", False),
    ("Align by socket enabled with topology manager single numa node", {"align-by-socket": "true"},
     "topoDualSocketMultiNumaPerSocketHT", "single-numa-node", True),
    ("Align by socket enabled with num_sockets > num_numa", {"align-by-socket": "true"},
     "fakeTopoMultiSocketDualSocketPerNumaHT", "none", True),
    ("Align by socket enabled: with topology manager None policy", {"align-by-socket": "true"},
     "topoDualSocketMultiNumaPerSocketHT", "none", False),
    ("Align by socket enabled: with topology manager best-effort policy", {"align-by-socket": "true"},
     "topoDualSocketMultiNumaPerSocketHT", "best-effort", False),
    ("Align by socket enabled: with topology manager restricted policy", {"align-by-socket": "true"},
     "topoDualSocketMultiNumaPerSocketHT", "restricted", False),
]


@pytest.mark.parametrize(("options", "machine", "tm_policy", "error"), [c[1:] for c in VALIDATE],
                         ids=[c[0] for c in VALIDATE])
def test_validate_options_against_the_machine(options: dict[str, str], machine: str, tm_policy: str,
                                              error: bool) -> None:
    if error:
        with pytest.raises(InputError):
            StaticCPUPolicy(MACHINES[machine], options=options, topology_manager_policy=tm_policy)
    else:
        StaticCPUPolicy(MACHINES[machine], options=options, topology_manager_policy=tm_policy)


# ---- topology_hints_test.go -----------------------------------------------------------------

def guaranteed_pod(init: list[tuple[int, bool]], apps: list[int]) -> Pod:
    return make_multi([(m * 1000, a) for m, a in init], [m * 1000 for m in apps])


POD_GUARANTEED = [
    ("TestCase01: requested 0, not Guaranteed", [(0, False)], [0], 0),
    ("TestCase04: Guaranteed Pod requests 2 CPUs", [(2, False)], [2], 2),
    ("TestCase05: Guaranteed Pod requests 5 CPUs", [(5, False)], [5], 5),
    ("TestCase06: app containers request more than init containers", [(2, False)], [5], 5),
    ("TestCase07: init containers request more than app containers", [(5, False)], [2], 5),
    ("TestCase08: Sum of CPUs requested by multiple containers", [(2, False), (4, False)], [2, 4], 6),
    ("TestCase09: restartable init container + regular container", [(1, True)], [1], 2),
    ("TestCase10: multiple restartable init containers", [(5, False), (1, True), (2, True), (3, True)], [1], 7),
    ("TestCase11: multiple restartable and regular init containers",
     [(5, False), (1, True), (2, True), (5, False), (3, True)], [1], 8),
    ("TestCase12: restartable init, regular init and regular container", [(10, True), (200, False)], [100], 210),
]


@pytest.mark.parametrize(("init", "apps", "expected"), [c[1:] for c in POD_GUARANTEED],
                         ids=[c[0] for c in POD_GUARANTEED])
def test_pod_guaranteed_cpus(init: list[tuple[int, bool]], apps: list[int], expected: int) -> None:
    policy = StaticCPUPolicy(MACHINES["topoSingleSocketHT"])
    assert policy.pod_guaranteed_cpus(guaranteed_pod(init, apps)) == expected


def test_pod_guaranteed_cpus_of_pods_that_are_not_guaranteed() -> None:
    # TestCase02/03: one container without CPU makes the pod BestEffort/Burstable.
    policy = StaticCPUPolicy(MACHINES["topoSingleSocketHT"])
    empty = Container("initContainer-0")
    two = Container("appContainer-0", requests={"cpu": 2000, "memory": GIB}, limits={"cpu": 2000, "memory": GIB})
    assert policy.pod_guaranteed_cpus(Pod("pod", uid="u", init_containers=(empty,), containers=(two,))) == 0
    assert policy.pod_guaranteed_cpus(Pod("pod", uid="u", init_containers=(two,), containers=(empty,))) == 0


def hints_machine() -> Machine:
    """``returnMachineInfo`` through upstream's Discover: NUMA 0 = cores {0,6},{1,7},{2,8}; NUMA 1 = {3,9}..."""
    return Machine.from_cpu_table(
        {"cpu": cpu, "core": cpu % 6, "socket": (cpu % 6) // 3, "numa": (cpu % 6) // 3} for cpu in range(12))


N0, N1, BOTH = frozenset({0}), frozenset({1}), frozenset({0, 1})

# (description, CPUs requested, assignments of the container, default cpuset, expected hints)
HINT_CASES = [
    ("Request 2 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", 2, None, "2-11",
     [(N0, True), (N1, True), (BOTH, False)]),
    ("Request 5 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", 5, None, "2-11", [(N1, True), (BOTH, False)]),
    ("Request 7 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", 7, None, "2-11", [(BOTH, True)]),
    ("Request 11 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", 11, None, "2-11", []),
    ("Request 2 CPUs, 1 available on NUMA 0, 1 available on NUMA 1", 2, None, "0,3", [(BOTH, False)]),
    ("Request more CPUs than available", 5, None, "0-3", []),
    ("Regenerate Single-Node NUMA Hints if already allocated 1/2", 2, "0,6", "", [(N0, True), (BOTH, False)]),
    ("Regenerate Single-Node NUMA Hints if already allocated 2/2", 2, "3,9", "", [(N1, True), (BOTH, False)]),
    ("Regenerate Cross-NUMA Hints if already allocated", 11, "0-10", "", [(BOTH, True)]),
    ("Requested less than already allocated", 2, "0,6,3,9", "", []),
    ("Requested more than already allocated", 11, "0,6,3,9", "", []),
]


def as_pairs(hints: list[TopologyHint] | None) -> list[tuple[frozenset[int] | None, bool]]:
    return sorted(((h.numa_nodes, h.preferred) for h in hints or []), key=lambda p: (sorted(p[0] or []), p[1]))


@pytest.mark.parametrize(("count", "allocated", "default", "expected"), [c[1:] for c in HINT_CASES],
                         ids=[c[0] for c in HINT_CASES])
def test_get_topology_hints(count: int, allocated: str | None, default: str, expected: list) -> None:
    pod = make_pod("fakePod", "fakeContainer", count * 1000, count * 1000)
    assignments = {"fakePod": {"fakeContainer": allocated}} if allocated else {}
    policy = StaticCPUPolicy(hints_machine(), state=state(default, assignments), validate_state=False)
    hints = policy.get_topology_hints(pod, pod.containers[0])
    assert hints is not None
    assert as_pairs(hints["cpu"]) == as_pairs([TopologyHint(n, p) for n, p in expected])
    assert as_pairs(policy.get_pod_topology_hints(pod)["cpu"]) == as_pairs(hints["cpu"])  # type: ignore[index]
    # The same through the free function.
    direct = cpu_topology_hints(hints_machine(), P(default), count, allocated=P(allocated) if allocated else None)
    assert as_pairs(direct) == as_pairs(hints["cpu"])


def test_no_hints_for_a_shared_container() -> None:
    policy = StaticCPUPolicy(hints_machine())
    pod = make_pod("p", "c", 1500, 1500)
    assert policy.get_topology_hints(pod, pod.containers[0]) is None
    assert policy.get_pod_topology_hints(pod) is None
    assert cpu_topology_hints(hints_machine(), P("0-11"), 0) is None


M = {name: frozenset(bits) for name, bits in {
    "0001": {0}, "0011": {0, 1}, "0101": {0, 2}, "1001": {0, 3}, "0111": {0, 1, 2}, "1011": {0, 1, 3},
    "1101": {0, 2, 3}, "1111": {0, 1, 2, 3}}.items()}

ALIGN_HINTS = [
    ("AlignBySocket:false, preferred hints do not contain socket aligned hints", 2, "2-3,11", "false",
     [("0001", True), ("0011", False), ("0101", False), ("1001", False), ("0111", False), ("1011", False),
      ("1101", False), ("1111", False)]),
    ("AlignBySocket:true, preferred hints contain socket aligned hints", 2, "2-3,11", "true",
     [("0001", True), ("0011", True), ("0101", False), ("1001", False), ("0111", False), ("1011", False),
      ("1101", False), ("1111", False)]),
    ("AlignBySocket:true, preferred hints are spread across sockets since 2 sockets are required", 41,
     "0-28,40-57", "true", [("0111", True), ("1111", True)]),
]


@pytest.mark.parametrize(("count", "default", "align", "expected"), [c[1:] for c in ALIGN_HINTS],
                         ids=[c[0] for c in ALIGN_HINTS])
def test_pod_topology_hints_with_align_by_socket(count: int, default: str, align: str, expected: list) -> None:
    machine = MACHINES["topoDualSocketMultiNumaPerSocketHT"]
    policy = StaticCPUPolicy(machine, options={"align-by-socket": align}, state=state(default), validate_state=False)
    pod = make_pod("fakePod", "fakeContainer", count * 1000, count * 1000)
    hints = policy.get_pod_topology_hints(pod)
    assert hints is not None
    assert as_pairs(hints["cpu"]) == as_pairs([TopologyHint(M[k], p) for k, p in expected])


def test_hints_count_reusable_cpus_only_inside_the_mask() -> None:
    # Reusable CPUs on NUMA 1 rule out every mask without NUMA 1.
    hints = cpu_topology_hints(hints_machine(), P("0-2"), 2, reusable=P("3,9"))
    assert as_pairs(hints) == as_pairs([TopologyHint(N1, True), TopologyHint(BOTH, False)])


# ---- checkpoint round trip ------------------------------------------------------------------

def test_state_round_trips_through_the_checkpoint() -> None:
    policy = StaticCPUPolicy(MACHINES["topoDualSocketHT"], num_reserved=1)
    pod = make_pod("uid-1", "app", 4000, 4000)
    policy.allocate(pod, "app")
    checkpoint = policy.to_checkpoint()
    again = StaticCPUPolicy(MACHINES["topoDualSocketHT"], num_reserved=1, state=CPUState.from_checkpoint(checkpoint))
    assert again.state == policy.state
    assert policy.container_cpuset(pod, "app") == policy.state.get("uid-1", "app")
    assert policy.container_cpuset("other", "x") == policy.default_cpuset


# ---- properties on random machines and pods ---------------------------------------------------

@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Machine, int, dict[str, str], list[Pod]]:
    sockets = draw(st.integers(1, 2))
    numa_per_socket = draw(st.integers(1, 2))
    cores_per_numa = draw(st.integers(1, 4))
    threads = draw(st.integers(1, 2))
    total = sockets * numa_per_socket * cores_per_numa
    machine = Machine.from_cpu_table(
        {"cpu": t * total + core, "core": core, "socket": core // cores_per_numa // numa_per_socket,
         "numa": core // cores_per_numa}
        for t in range(threads) for core in range(total))
    reserved = draw(st.integers(0, min(2 * threads, total * threads - 1)))
    option = draw(st.sampled_from([{}, {"full-pcpus-only": "true"}, {"distribute-cpus-across-numa": "true"},
                                   {"strict-cpu-reservation": "true"}, {"distribute-cpus-across-cores": "true"},
                                   {"align-by-socket": "true"}, {"prefer-align-cpus-by-uncorecache": "true"}]))
    pods = []
    for i in range(draw(st.integers(1, 5))):
        init = [(draw(st.integers(0, 4)) * 1000, draw(st.booleans())) for _ in range(draw(st.integers(0, 2)))]
        apps = [draw(st.sampled_from([0, 500, 1000, 2000, 3000, 4000])) for _ in range(draw(st.integers(1, 3)))]
        pods.append(make_multi(init, apps, uid=f"pod-{i}"))
    return machine, reserved, option, pods


def admit(policy: StaticCPUPolicy, pod: Pod, hint: TopologyHint | None) -> bool:
    """Allocate every container; on a failure undo the pod as the kubelet's cleanup would."""
    try:
        for c in pod.all_containers:
            policy.allocate(pod, c, hint)
    except (CPUAllocationError, SMTAlignmentError):
        policy.release_pod(pod)
        return False
    return True


@settings(max_examples=120, deadline=None)
@given(scenarios(), st.data())
def test_allocations_never_overlap_nor_touch_reserved_and_release_restores(
        scenario: tuple[Machine, int, dict[str, str], list[Pod]], data: st.DataObject) -> None:
    machine, reserved, options, pods = scenario
    policy = StaticCPUPolicy(machine, num_reserved=reserved, options=options)
    history = [policy.state]
    admitted = []
    for pod in pods:
        numa = data.draw(st.sampled_from([None, *machine.numa_ids]))
        hint = None if numa is None else TopologyHint(frozenset({numa}), True)
        before = policy.state
        if admit(policy, pod, hint):
            admitted.append(pod)
            history.append(policy.state)
        else:
            assert policy.state == before
        # Exclusive sets of different pods never overlap and never touch the reserved CPUs or the pool.
        owners: dict[int, str] = {}
        for uid, containers in policy.state.assignments.items():
            pod_cpus = CPUSet.from_mask(0)
            for cpus in containers.values():
                pod_cpus = pod_cpus | cpus
                assert cpus.isdisjoint(policy.reserved_cpus)
                assert cpus.isdisjoint(policy.default_cpuset)
                # Upstream guarantees whole cores only when the reserved CPUs are whole cores: a
                # hint's NUMA part may pick the free sibling of a reserved CPU (allocateCPUs takes
                # from the pool minus the reserved CPUs, not minus their cores).
                if options.get("full-pcpus-only") and policy.reserved_cpus == policy.reserved_physical_cpus:
                    for cpu in cpus:
                        assert machine.siblings(cpu) <= cpus  # whole cores only
            for cpu in pod_cpus:
                assert owners.setdefault(cpu, uid) == uid
        assert policy.state.assigned() | policy.default_cpuset == (
            machine.online - policy.reserved_cpus if options.get("strict-cpu-reservation") else machine.online)
    # Releasing in reverse order walks back through the exact same states.
    for pod in reversed(admitted):
        assert policy.state == history.pop()
        policy.release_pod(pod)
    assert policy.state == history.pop()


# ---- as a Topology Manager hint provider ------------------------------------------------------

def test_policy_is_a_hint_provider_for_the_topology_manager() -> None:
    from toposched.kubelet import HintProvider, TopologyAffinityError, TopologyManager

    machine = MACHINES["topoDualSocketHT"]
    manager = TopologyManager(machine.numa_ids, policy="single-numa-node")
    policy = StaticCPUPolicy(machine, num_reserved=1, options=FULL_PCPUS, affinity=manager)
    assert isinstance(policy, HintProvider)
    manager.add_hint_provider(policy)

    pod = make_multi([], [4000, 2000], uid="aligned")
    chosen = manager.admit(pod)
    # CPU 0 is reserved: NUMA 0 keeps two whole cores (2,8 and 4,10) for the first container; the
    # second finds only CPU 6 left there and goes to NUMA 1.
    assert chosen == {"appContainer-0": TopologyHint(frozenset({0}), True),
                      "appContainer-1": TopologyHint(frozenset({1}), True)}
    assert policy.state.get("aligned", "appContainer-0") == P("2,4,8,10")
    assert policy.state.get("aligned", "appContainer-1") == P("1,7")

    with pytest.raises(TopologyAffinityError):
        manager.admit(make_multi([], [8000], uid="too-big"))
    assert policy.state.get("too-big", "appContainer-0") is None

    with pytest.raises(SMTAlignmentError) as info:
        manager.admit(make_multi([], [3000], uid="odd"))
    assert info.value.reason == "SMTAlignmentError"


def test_reserved_cpus_accepts_a_count_or_the_list_syntax() -> None:
    machine = MACHINES["topoDualSocketHT"]
    assert StaticCPUPolicy(machine, reserved_cpus=2).reserved_cpus == P("0,6")
    assert StaticCPUPolicy(machine, reserved_cpus="0-1").reserved_physical_cpus == P("0-1,6-7")
    with pytest.raises(InputError):
        StaticCPUPolicy(machine, reserved_cpus="0-x")
    with pytest.raises(InputError):
        StaticCPUPolicy(machine, reserved_cpus=P("40"))


def test_release_restores_the_state_before_allocation() -> None:
    policy = StaticCPUPolicy(MACHINES["topoSingleSocketHT"], num_reserved=1)
    before = policy.state
    pod = make_multi([(4000, False)], [2000, 1000], uid="p")
    for c in pod.all_containers:
        policy.allocate(pod, c)
    assert policy.shared_pool == policy.default_cpuset != before.default_cpuset
    policy.release(pod, "appContainer-1")
    assert policy.state.get("p", "appContainer-1") is None
    policy.release(pod)
    assert policy.state == before
    assert policy.cpus_to_reuse(pod) == CPUSet()


def test_full_pcpus_only_with_a_partly_reserved_core_can_split_a_core_as_upstream() -> None:
    # Found by the property above: CPU 0 reserved, its sibling 2 free. The hint's NUMA node 0 has
    # only CPU 2 left; allocateCPUs takes it first, then CPU 1 elsewhere (upstream does the same).
    machine = Machine.from_cpu_table(
        {"cpu": c, "core": c % 2, "socket": 0, "numa": c % 2} for c in range(4))
    policy = StaticCPUPolicy(machine, num_reserved=1, options=FULL_PCPUS)
    assert policy.reserved_cpus == P("0")
    cpus = policy.allocate(make_pod("p", "c", 2000, 2000), "c", TopologyHint(frozenset({0}), True))
    assert cpus == P("1-2")
