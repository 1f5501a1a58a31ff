"""takeByTopology on upstream's named machines: the tables of ``cpu_assignment_test.go``.

Each table is a rewrite of an upstream test table: same machine, same free CPUs, same request,
same expected CPUs (or error). Case names follow upstream's descriptions closely so a failing
case can be found upstream.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from machines import MACHINES

from toposched.errors import InputError, ToposchedError
from toposched.kubelet.cpu_assignment import CPUAllocationError, CPUTopology, _Accumulator, take_by_topology
from toposched.topology import CPUSet, Machine

P = CPUSet.parse


def acc(machine: str, free: str, needed: int = 0) -> _Accumulator:
    return _Accumulator(CPUTopology.of(MACHINES[machine]), P(free).mask, needed, "packed")


# ---- the accumulator's orderings (TestCPUAccumulatorFree*) ---------------------------------

FREE_SOCKETS = [
    ("single socket HT, 1 socket free", "topoSingleSocketHT", "0-7", [0]),
    ("single socket HT, 0 sockets free", "topoSingleSocketHT", "1-7", []),
    ("dual socket HT, 2 sockets free", "topoDualSocketHT", "0-11", [0, 1]),
    ("dual socket HT, 1 socket free", "topoDualSocketHT", "0-9,11", [1]),
    ("dual socket HT, 0 sockets free", "topoDualSocketHT", "0,2-9,11", []),
    ("multi numa per socket, 2 sockets free", "topoDualSocketMultiNumaPerSocketHT", "0-79", [0, 1]),
    ("multi numa per socket, 1 socket free", "topoDualSocketMultiNumaPerSocketHT", "1-79", [1]),
    ("multi numa per socket, 0 sockets free", "topoDualSocketMultiNumaPerSocketHT", "1-78", []),
    ("multi socket per numa, 4 sockets free", "fakeTopoMultiSocketDualSocketPerNumaHT", "0-79", [0, 1, 2, 3]),
    ("multi socket per numa, 3 sockets free", "fakeTopoMultiSocketDualSocketPerNumaHT", "0-19,21-79", [0, 1, 3]),
    ("multi socket per numa, 2 sockets free", "fakeTopoMultiSocketDualSocketPerNumaHT", "0-59,61-78", [0, 1]),
    ("multi socket per numa, 1 socket free", "fakeTopoMultiSocketDualSocketPerNumaHT", "1-19,21-38,41-60,61-78",
     [1]),
    ("multi socket per numa, 0 sockets free", "fakeTopoMultiSocketDualSocketPerNumaHT", "0-40,42-49,51-68,71-79",
     []),
]


@pytest.mark.parametrize(("machine", "free", "expect"), [c[1:] for c in FREE_SOCKETS], ids=[c[0] for c in FREE_SOCKETS])
def test_free_sockets(machine: str, free: str, expect: list[int]) -> None:
    assert sorted(acc(machine, free).free_sockets()) == expect


FREE_NUMA = [
    ("single socket HT, 1 NUMA node free", "topoSingleSocketHT", "0-7", [0]),
    ("single socket HT, 0 NUMA nodes free", "topoSingleSocketHT", "1-7", []),
    ("dual socket HT, 2 NUMA nodes free", "topoDualSocketHT", "0-11", [0, 1]),
    ("dual socket HT, 1 NUMA node free", "topoDualSocketHT", "0-9,11", [1]),
    ("dual socket HT, 0 NUMA nodes free", "topoDualSocketHT", "0,2-9,11", []),
    ("multi numa per socket, 4 free", "topoDualSocketMultiNumaPerSocketHT", "0-79", [0, 1, 2, 3]),
    ("multi numa per socket, 3 free", "topoDualSocketMultiNumaPerSocketHT", "1-79", [1, 2, 3]),
    ("multi numa per socket, 2 free", "topoDualSocketMultiNumaPerSocketHT", "1-9,11-79", [2, 3]),
    ("multi numa per socket, 1 free", "topoDualSocketMultiNumaPerSocketHT", "1-9,11-59,61-79", [3]),
    ("multi numa per socket, 0 free", "topoDualSocketMultiNumaPerSocketHT", "1-9,11-59,61-78", []),
    ("multi socket per numa, 2 free", "fakeTopoMultiSocketDualSocketPerNumaHT", "0-79", [0, 1]),
    ("multi socket per numa, 1 free", "fakeTopoMultiSocketDualSocketPerNumaHT", "0-9,11-79", [1]),
    ("multi socket per numa, 0 free", "fakeTopoMultiSocketDualSocketPerNumaHT", "0-9,11-59,61-79", []),
]


@pytest.mark.parametrize(("machine", "free", "expect"), [c[1:] for c in FREE_NUMA], ids=[c[0] for c in FREE_NUMA])
def test_free_numa_nodes(machine: str, free: str, expect: list[int]) -> None:
    assert acc(machine, free).free_numas() == expect


FREE_SOCKETS_AND_NUMA = [
    ("2 sockets, 4 NUMA nodes free", "0-79", [0, 1], [0, 1, 2, 3]),
    ("1 socket, 3 NUMA nodes free", "1-79", [1], [1, 2, 3]),
    ("1 socket, 2 NUMA nodes free", "1-9,11-79", [1], [2, 3]),
    ("0 sockets, 2 NUMA nodes free", "1-59,61-79", [], [1, 3]),
]


@pytest.mark.parametrize(("free", "sockets", "numas"), [c[1:] for c in FREE_SOCKETS_AND_NUMA],
                         ids=[c[0] for c in FREE_SOCKETS_AND_NUMA])
def test_free_sockets_and_numa_nodes(free: str, sockets: list[int], numas: list[int]) -> None:
    a = acc("topoDualSocketMultiNumaPerSocketHT", free)
    assert a.free_numas() == numas
    assert a.free_sockets() == sockets


FREE_CORES = [
    ("single socket HT, 4 cores free", "topoSingleSocketHT", "0-7", [0, 1, 2, 3]),
    ("single socket HT, 3 cores free", "topoSingleSocketHT", "0-2,4-6", [0, 1, 2]),
    ("single socket HT, 3 cores free (1 partially consumed)", "topoSingleSocketHT", "0-6", [0, 1, 2]),
    ("single socket HT, 0 cores free", "topoSingleSocketHT", "", []),
    ("single socket HT, 0 cores free (4 partially consumed)", "topoSingleSocketHT", "0-3", []),
    ("dual socket HT, 6 cores free", "topoDualSocketHT", "0-11", [0, 2, 4, 1, 3, 5]),
    ("dual socket HT, 5 cores free (1 consumed from socket 0)", "topoDualSocketHT", "1-5,7-11", [2, 4, 1, 3, 5]),
    ("dual socket HT, 4 cores free (1 consumed from each socket)", "topoDualSocketHT", "2-5,8-11", [2, 4, 3, 5]),
]


@pytest.mark.parametrize(("machine", "free", "expect"), [c[1:] for c in FREE_CORES], ids=[c[0] for c in FREE_CORES])
def test_free_cores(machine: str, free: str, expect: list[int]) -> None:
    assert acc(machine, free).free_cores() == expect


FREE_CPUS = [
    ("single socket HT, 8 cpus free", "topoSingleSocketHT", "0-7", [0, 4, 1, 5, 2, 6, 3, 7]),
    ("single socket HT, 5 cpus free", "topoSingleSocketHT", "3-7", [4, 5, 6, 3, 7]),
    ("dual socket HT, 12 cpus free", "topoDualSocketHT", "0-11", [0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
    ("dual socket HT, 11 cpus free", "topoDualSocketHT", "1-11", [6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
    ("dual socket HT, 10 cpus free", "topoDualSocketHT", "1-5,7-11", [2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
    ("triple socket HT, 12 cpus free", "topoTripleSocketHT", "0-3,6-13", [12, 13, 0, 1, 2, 3, 6, 7, 8, 9, 10, 11]),
]


@pytest.mark.parametrize(("machine", "free", "expect"), [c[1:] for c in FREE_CPUS], ids=[c[0] for c in FREE_CPUS])
def test_free_cpus_packed_order(machine: str, free: str, expect: list[int]) -> None:
    assert acc(machine, free).sort_cpus_packed() == expect


# (description, free CPUs, needed, CPUs taken one set at a time, satisfied, failed)
TAKE = [
    ("take 0 cpus, require 1", "0-7", 1, [""], False, False),
    ("take 0 cpus, require 1, none available", "", 1, [""], False, True),
    ("take 1 cpu, require 1", "0-7", 1, ["0"], True, False),
    ("take 1 cpu, require 2", "0-7", 2, ["0"], False, False),
    ("take 2 cpus, require 4, expect failed", "0-2", 4, ["0", "1"], False, True),
    ("take all cpus one at a time, require 8", "0-7", 8, [str(i) for i in range(8)], True, False),
]


@pytest.mark.parametrize(("free", "needed", "takes", "satisfied", "failed"), [c[1:] for c in TAKE],
                         ids=[c[0] for c in TAKE])
def test_accumulator_take(free: str, needed: int, takes: list[str], satisfied: bool, failed: bool) -> None:
    a = acc("topoSingleSocketHT", free, needed)
    for t in takes:
        a.take(P(t).mask)
    assert a.satisfied() is satisfied
    assert a.failed() is failed
    taken = 0
    for t in takes:
        assert P(t).mask & a.details == 0
        assert P(t).mask & ~a.result == 0
        taken += len(P(t))
    assert a.needed == needed - taken


# ---- takeByTopologyNUMAPacked --------------------------------------------------------------

# (description, machine, free CPUs, count, expected CPUs or error message)
COMMON = [
    ("take more cpus than are available from single socket with HT", "topoSingleSocketHT", "0,2,4,6", 5,
     "not enough cpus available to satisfy request: requested=5, available=4"),
    ("take zero cpus from single socket with HT", "topoSingleSocketHT", "0-7", 0, ""),
    ("take one cpu from single socket with HT", "topoSingleSocketHT", "0-7", 1, "0"),
    ("take one cpu from single socket with HT, some cpus are taken", "topoSingleSocketHT", "1,3,5-7", 1, "6"),
    ("take two cpus from single socket with HT", "topoSingleSocketHT", "0-7", 2, "0,4"),
    ("take all cpus from single socket with HT", "topoSingleSocketHT", "0-7", 8, "0-7"),
    ("take two cpus from single socket with HT, only one core totally free", "topoSingleSocketHT", "0-3,6", 2,
     "2,6"),
    ("take a socket of cpus from dual socket with HT", "topoDualSocketHT", "0-11", 6, "0,2,4,6,8,10"),
    ("take a socket of cpus from dual socket with multi-numa-per-socket with HT",
     "topoDualSocketMultiNumaPerSocketHT", "0-79", 40, "0-19,40-59"),
    ("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT",
     "topoDualSocketMultiNumaPerSocketHT", "0-79", 20, "0-9,40-49"),
    ("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, with 1 NUMA node already taken",
     "topoDualSocketMultiNumaPerSocketHT", "10-39,50-79", 20, "10-19,50-59"),
    ("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT",
     "topoDualSocketMultiNumaPerSocketHT", "0-79", 60, "0-29,40-69"),
    ("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, a core taken",
     "topoDualSocketMultiNumaPerSocketHT", "1-39,41-79", 60, "10-39,50-79"),
]

PACKED = COMMON + [
    ("take one cpu from dual socket with HT - core from Socket 0", "topoDualSocketHT", "1-5,7-11", 1, "2"),
    ("allocate 4 full cores with 3 coming from the first NUMA node (filling it up) and 1 coming from the second",
     "topoDualSocketHT", "0-11", 8, "0,6,2,8,4,10,1,7"),
    ("allocate 32 full cores with 30 coming from the first 3 NUMA nodes (filling them up) and 2 from the fourth",
     "topoDualSocketMultiNumaPerSocketHT", "0-79", 64, "0-29,40-69,30,31,70,71"),
]


def check(result_or_error: object, expected: str) -> None:
    if expected.startswith("not enough") or expected.startswith("failed") or expected.startswith("accounting"):
        assert isinstance(result_or_error, CPUAllocationError)
        assert str(result_or_error) == expected
    else:
        assert result_or_error == P(expected)


def run(**kwargs: object) -> object:
    try:
        return take_by_topology(**kwargs)  # type: ignore[arg-type]
    except CPUAllocationError as err:
        return err


@pytest.mark.parametrize(("machine", "free", "count", "expected"), [c[1:] for c in PACKED], ids=[c[0] for c in PACKED])
def test_take_by_topology_numa_packed(machine: str, free: str, count: int, expected: str) -> None:
    check(run(machine=MACHINES[machine], available=P(free), count=count), expected)


UNCORE = [
    ("take cpus from two full UncoreCaches and partial from a single UncoreCache",
     "topoUncoreSingleSocketNoSMT", "1-15", 10, "1,2,4-11"),
    ("take one cpu from dual socket with HT - core from Socket 0", "topoDualSocketHT", "1-5,7-11", 1, "1"),
    ("take first available UncoreCache from first socket", "topoUncoreDualSocketNoSMT", "0-15", 4, "0-3"),
    ("take all available UncoreCache from first socket", "topoUncoreDualSocketNoSMT", "2-15", 6, "2-7"),
    ("take first available UncoreCache from second socket", "topoUncoreDualSocketNoSMT", "8-15", 4, "8-11"),
    ("take first available UncoreCache from available NUMA", "topoUncoreSingleSocketMultiNuma", "3,4-8,12", 2,
     "4,5"),
    ("take cpus from best available UncoreCache group of multi uncore cache single socket - SMT enabled",
     "topoUncoreSingleSocketSMT", "2-3,10-11,4-7,12-15", 6, "4-6,12-14"),
    ("take cpus from multiple UncoreCache of single socket - SMT enabled", "topoUncoreSingleSocketSMT",
     "1-7,9-15", 10, "4-7,12-15,1,9"),
]


@pytest.mark.parametrize(("machine", "free", "count", "expected"), [c[1:] for c in UNCORE], ids=[c[0] for c in UNCORE])
def test_take_by_topology_prefer_uncore_cache(machine: str, free: str, count: int, expected: str) -> None:
    check(run(machine=MACHINES[machine], available=P(free), count=count, prefer_uncore_cache=True), expected)


SPREAD = [
    ("take a socket of cpus from single socket with HT, 3 cpus", "topoSingleSocketHT", "0-7", 3, "0-2"),
    ("take a socket of cpus from dual socket with HT, 2 cpus", "topoDualSocketHT", "0-11", 2, "0,2"),
    ("take a socket of cpus from dual socket with HT, 3 cpus", "topoDualSocketHT", "0-11", 3, "0,2,4"),
    ("take a socket of cpus from dual socket with HT, 6 cpus", "topoDualSocketHT", "0-11", 6, "0,2,4,6,8,10"),
    ("take cpus from dual socket with HT, 8 cpus", "topoDualSocketHT", "0-11", 8, "0,2,4,6,8,10,1,3"),
    ("take a socket of cpus from dual socket without HT, 2 cpus", "topoDualSocketNoHT", "0-7", 2, "0,1"),
    ("take a socket of cpus from dual socket with multi numa per socket and HT, 8 cpus",
     "topoDualSocketMultiNumaPerSocketHT", "0-79", 8, "0-7"),
    ("take a socket of cpus from quad socket four way with HT, 12 cpus", "topoQuadSocketFourWayHT", "0-287", 12,
     "0-2,9-10,13-14,21-22,25-26,33"),
]


@pytest.mark.parametrize(("machine", "free", "count", "expected"), [c[1:] for c in SPREAD], ids=[c[0] for c in SPREAD])
def test_take_by_topology_spread(machine: str, free: str, count: int, expected: str) -> None:
    check(run(machine=MACHINES[machine], available=P(free), count=count, strategy="spread"), expected)


# ---- takeByTopologyNUMADistributed ---------------------------------------------------------

# (description, machine, free CPUs, count, cpu group size, expected)
EXTENDED = [(d, m, f, n, 1, e) for d, m, f, n, e in COMMON] + [
    ("allocate 4 full cores with 2 distributed across each NUMA node", "topoDualSocketHT", "0-11", 8, 1,
     "0,6,2,8,1,7,3,9"),
    ("allocate 32 full cores with 8 distributed across each NUMA node", "topoDualSocketMultiNumaPerSocketHT",
     "0-79", 64, 1, "0-7,10-17,20-27,30-37,40-47,50-57,60-67,70-77"),
    ("allocate 24 full cores with 8 distributed across the first 3 NUMA nodes", "topoDualSocketMultiNumaPerSocketHT",
     "0-79", 48, 1, "0-7,10-17,20-27,40-47,50-57,60-67"),
    ("allocate 24 full cores with 8 distributed across the first 3 NUMA nodes (all but 2 from the first)",
     "topoDualSocketMultiNumaPerSocketHT", "1-29,32-39,41-69,72-79", 48, 1, "1-8,10-17,20-27,41-48,50-57,60-67"),
    ("allocate 24 full cores with 8 distributed across the last 3 NUMA nodes (even though all 8 could come from "
     "the first NUMA node)", "topoDualSocketMultiNumaPerSocketHT", "2-29,31-39,42-69,71-79", 48, 1,
     "10-17,20-27,31-38,50-57,60-67,71-78"),
    ("allocate 8 full cores with 2 distributed across each NUMA node", "topoDualSocketMultiNumaPerSocketHT",
     "0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71", 16, 1, "0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71"),
]

DISTRIBUTED = EXTENDED + [
    ("take one cpu from dual socket with HT - core from Socket 0", "topoDualSocketHT", "1-5,7-11", 1, 1, "1"),
    ("take one cpu from dual socket with HT - core from Socket 0 - cpuGroupSize 2", "topoDualSocketHT",
     "1-5,7-11", 1, 2, "2"),
    ("allocate 13 full cores distributed across the first 2 NUMA nodes", "topoDualSocketMultiNumaPerSocketHT",
     "0-79", 26, 1, "0-6,10-16,40-45,50-55"),
    ("allocate 13 full cores distributed across the first 2 NUMA nodes (cpuGroupSize 2)",
     "topoDualSocketMultiNumaPerSocketHT", "0-79", 26, 2, "0-6,10-15,40-46,50-55"),
    ("allocate 31 full cores with 15 CPUs on each NUMA node and 1 spilling over to NUMA 0, 1",
     "topoDualSocketMultiNumaPerSocketHT", "0-79", 62, 1, "0-7,10-17,20-27,30-37,40-47,50-57,60-66,70-76"),
    ("allocate 31 full cores with 14 CPUs on each NUMA node and 2 spilling over to NUMA 0, 1, 2 (cpuGroupSize 2)",
     "topoDualSocketMultiNumaPerSocketHT", "0-79", 62, 2, "0-7,10-17,20-27,30-36,40-47,50-57,60-67,70-76"),
    ("allocate 31 full cores with 15 CPUs on each NUMA node and 1 spilling over to NUMA 2, 3 (to keep balance)",
     "topoDualSocketMultiNumaPerSocketHT", "0-8,10-18,20-39,40-48,50-58,60-79", 62, 1,
     "0-7,10-17,20-27,30-37,40-46,50-56,60-67,70-77"),
    ("allocate 31 full cores with 14 CPUs on each NUMA node and 2 spilling over to NUMA 0, 2, 3 (cpuGroupSize 2)",
     "topoDualSocketMultiNumaPerSocketHT", "0-8,10-18,20-39,40-48,50-58,60-79", 62, 2,
     "0-7,10-16,20-27,30-37,40-47,50-56,60-67,70-77"),
    ("ensure bestRemainder chosen with NUMA nodes that have enough CPUs to satisfy the request",
     "topoDualSocketMultiNumaPerSocketHT", "0-3,10-13,20-23,30-36,40-43,50-53,60-63,70-76", 34, 1,
     "0-3,10-13,20-23,30-34,40-43,50-53,60-63,70-74"),
    ("ensure previous failure encountered on live machine has been fixed (1/1)",
     "topoDualSocketMultiNumaPerSocketHTLarge",
     "0,128,30,31,158,159,43-47,171-175,62,63,190,191,75-79,203-207,94,96,222,223,101-111,229-239,126,127,254,255",
     28, 1, "43-47,75-79,96,101-105,171-174,203-206,229-232"),
]


@pytest.mark.parametrize(("machine", "free", "count", "group", "expected"), [c[1:] for c in DISTRIBUTED],
                         ids=[c[0] for c in DISTRIBUTED])
def test_take_by_topology_numa_distributed(machine: str, free: str, count: int, group: int, expected: str) -> None:
    check(run(machine=MACHINES[machine], available=P(free), count=count, distribute=True, cpu_group_size=group),
          expected)


# ---- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"count": -1}, "count"),
        ({"count": 1, "strategy": "scattered"}, "strategy"),
        ({"count": 1, "cpu_group_size": 0}, "cpu_group_size"),
        ({"count": 1, "available": CPUSet([99])}, "available"),
    ],
)
def test_bad_input_is_one_input_error(kwargs: dict[str, object], field: str) -> None:
    args = {"machine": MACHINES["topoSingleSocketHT"], "available": P("0-7"), **kwargs}
    with pytest.raises(InputError) as info:
        take_by_topology(**args)  # type: ignore[arg-type]
    assert info.value.field == field


def test_allocation_error_is_a_toposched_error() -> None:
    with pytest.raises(ToposchedError, match="requested=9, available=8"):
        take_by_topology(MACHINES["topoSingleSocketHT"], P("0-7"), 9)


# ---- properties on random machines ---------------------------------------------------------

@st.composite
def machines_and_requests(draw: st.DrawFn) -> tuple[Machine, CPUSet, int, dict[str, object]]:
    sockets = draw(st.integers(1, 3))
    numa_per_socket = draw(st.integers(1, 2))
    cores_per_numa = draw(st.integers(1, 4))
    threads = draw(st.integers(1, 2))
    rows = []
    cpu = 0
    total_cores = sockets * numa_per_socket * cores_per_numa
    for t in range(threads):
        for core in range(total_cores):
            numa = core // cores_per_numa
            # Uncore caches of two cores, never spanning NUMA nodes (see the docs for caches that do).
            rows.append({"cpu": t * total_cores + core, "core": core, "socket": numa // numa_per_socket,
                         "numa": numa, "cache": numa * cores_per_numa + (core % cores_per_numa) // 2})
            cpu += 1
    machine = Machine.from_cpu_table(rows)
    free = CPUSet(c for c in range(cpu) if draw(st.booleans()))
    count = draw(st.integers(0, len(free)))
    mode = draw(st.sampled_from(["packed", "spread", "distributed", "distributed2", "uncore"]))
    kwargs: dict[str, object] = {
        "packed": {},
        "spread": {"strategy": "spread"},
        "distributed": {"distribute": True},
        "distributed2": {"distribute": True, "cpu_group_size": threads},
        "uncore": {"prefer_uncore_cache": True},
    }[mode]
    return machine, free, count, kwargs


@settings(max_examples=150, deadline=None)
@given(machines_and_requests())
def test_takes_exactly_the_count_from_the_free_cpus(case: tuple[Machine, CPUSet, int, dict[str, object]]) -> None:
    machine, free, count, kwargs = case
    taken = take_by_topology(machine, free, count, **kwargs)  # type: ignore[arg-type]
    assert taken <= free
    assert len(taken) == count


@settings(max_examples=60, deadline=None)
@given(machines_and_requests())
def test_too_many_is_refused_with_upstreams_message(case: tuple[Machine, CPUSet, int, dict[str, object]]) -> None:
    machine, free, _, kwargs = case
    with pytest.raises(CPUAllocationError, match=f"requested={len(free) + 1}, available={len(free)}"):
        take_by_topology(machine, free, len(free) + 1, **kwargs)  # type: ignore[arg-type]


def test_an_uncore_cache_spanning_numa_nodes_is_listed_twice_as_upstream() -> None:
    # Found by the property above. Upstream lists a cache once per NUMA node it meets; a free
    # cache met twice is "taken" twice and the request counted down twice, so 4 CPUs asked for
    # come back as 2. The model keeps upstream's behaviour; real caches do not span NUMA nodes.
    rows = [{"cpu": c, "core": c, "socket": 0, "numa": c // 3, "cache": c // 2} for c in range(6)]
    machine = Machine.from_cpu_table(rows)
    assert take_by_topology(machine, P("1-2,4-5"), 4, prefer_uncore_cache=True) == P("1-2,4-5")
    rows = [{"cpu": c, "core": c, "socket": c // 6, "numa": c // 3, "cache": c // 2} for c in range(18)]
    machine = Machine.from_cpu_table(rows)
    assert take_by_topology(machine, P("9-10,14-15"), 4, prefer_uncore_cache=True) == P("14-15")


@settings(max_examples=150, deadline=None)
@given(machines_and_requests(), st.booleans())
def test_free_cores_are_the_sorted_cores_that_are_wholly_free(case, numa_first: bool) -> None:
    """The accumulator lists free cores without sorting; the list is upstream's sort, filtered."""
    machine, free, _, _ = case
    accumulator = _Accumulator(CPUTopology.of(machine), free.mask, 1, "packed")
    accumulator.numa_first = numa_first  # both orders, whatever the machine's shape
    per, masks = accumulator.topo.cpus_per_core, accumulator.topo.core_masks
    sorted_whole = [c for c in accumulator.sort_cores() if (accumulator.details & masks[c]).bit_count() == per]
    assert accumulator.free_cores() == sorted_whole
