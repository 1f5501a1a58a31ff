"""The kubelet CPU manager's named test machines, as :meth:`Machine.from_cpu_table` data.

Each machine is upstream's ``CPUTopology`` fixture from ``pkg/kubelet/cm/cpumanager`` (its
``CPUDetails``: per CPU the core, socket, NUMA node and, where given, uncore cache), written as
rows ``{cpu, core, socket, numa, cache}``. Where upstream leaves a field at Go's zero value the
row says 0, because the algorithms read that value (e.g. every CPU of ``topoDualSocketHT`` shares
uncore cache 0). Upstream's separate counters (``NumCPUs``, ``NumSockets``...) are derived from
the rows here; see ``docs/kubelet/cpu-manager.md`` for the few fixtures that leave
``NumNUMANodes`` unset upstream.

``MACHINES`` maps upstream's variable names to the machines; the module constants are the same
machines under Python names; :func:`rows` gives a machine's table to build variants from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import cache

from toposched.topology import Machine

Row = dict[str, int]


def _row(cpu: int, core: int, socket: int, numa: int, cache_id: int = 0) -> Row:
    return {"cpu": cpu, "core": core, "socket": socket, "numa": numa, "cache": cache_id}


def _smt_pairs(cores: int, socket_of: Callable[[int], int], numa_of: Callable[[int], int]) -> Iterator[Row]:
    # Two threads per core: core i holds CPUs i and i + cores (the Linux enumeration).
    for thread in range(2):
        for core in range(cores):
            yield _row(core + thread * cores, core, socket_of(core), numa_of(core))


def _single_socket_ht() -> Iterable[Row]:
    # topoSingleSocketHT: 1 socket, 4 cores, 8 CPUs; core i = CPUs {i, i+4}.
    return _smt_pairs(4, lambda c: 0, lambda c: 0)


def _dual_socket_ht() -> Iterable[Row]:
    # topoDualSocketHT: even cores on socket/NUMA 0, odd on socket/NUMA 1; core i = {i, i+6}.
    return _smt_pairs(6, lambda c: c % 2, lambda c: c % 2)


def _triple_socket_ht() -> Iterable[Row]:
    # topoTripleSocketHT ("fake topology for testing purposes only"): no NUMA ids (all 0);
    # CPUs 2k, 2k+1 form core k; cores 0-2 on socket 1, 3-5 on socket 0, 6-8 on socket 2.
    socket_of_core = [1, 1, 1, 0, 0, 0, 2, 2, 2]
    return [_row(cpu, cpu // 2, socket_of_core[cpu // 2], 0) for cpu in range(18)]


def _dual_socket_no_ht() -> Iterable[Row]:
    # topoDualSocketNoHT: 8 cores of one CPU; 0-3 on socket/NUMA 0, 4-7 on socket/NUMA 1.
    return [_row(cpu, cpu, cpu // 4, cpu // 4) for cpu in range(8)]


# topoQuadSocketFourWayHT (KNL SNC4): 4 sockets = 4 NUMA nodes, 18 cores of 4 threads each.
# Per socket: core id -> its four CPUs, in upstream's order.
_QUAD_SOCKET_CORES: tuple[dict[int, tuple[int, int, int, int]], ...] = (
    {
        0: (0, 169, 109, 229), 1: (50, 170, 110, 230), 64: (1, 25, 13, 38), 65: (2, 26, 14, 39),
        72: (9, 33, 21, 46), 73: (10, 34, 22, 47), 8: (57, 177, 117, 237), 9: (58, 178, 118, 238),
        24: (71, 191, 131, 251), 25: (72, 192, 132, 252), 32: (79, 199, 139, 259),
        33: (80, 200, 140, 260), 40: (87, 207, 147, 267), 41: (88, 208, 148, 268),
        48: (95, 215, 155, 275), 49: (96, 216, 156, 276), 56: (103, 223, 163, 283),
        57: (104, 224, 164, 284),
    },
    {
        66: (3, 27, 15, 40), 67: (4, 28, 16, 41), 74: (11, 35, 23, 48), 75: (12, 36, 24, 49),
        2: (51, 171, 111, 231), 3: (52, 172, 112, 232), 10: (59, 179, 119, 239),
        11: (60, 180, 120, 240), 18: (65, 185, 125, 245), 19: (66, 186, 126, 246),
        26: (73, 193, 133, 253), 27: (74, 194, 134, 254), 34: (81, 201, 141, 261),
        35: (82, 202, 142, 262), 42: (89, 209, 149, 269), 43: (90, 210, 150, 270),
        50: (97, 217, 157, 277), 51: (98, 218, 158, 278),
    },
    {
        68: (5, 29, 17, 42), 69: (6, 30, 18, 43), 4: (53, 173, 113, 233), 5: (54, 174, 114, 234),
        12: (61, 181, 121, 241), 13: (62, 182, 122, 242), 20: (67, 187, 127, 247),
        21: (68, 188, 128, 248), 28: (75, 195, 135, 255), 29: (76, 196, 136, 256),
        36: (83, 203, 143, 263), 37: (84, 204, 144, 264), 44: (91, 211, 151, 271),
        45: (92, 212, 152, 272), 52: (99, 219, 159, 279), 53: (100, 220, 160, 280),
        60: (105, 225, 165, 285), 61: (106, 226, 166, 286),
    },
    {
        70: (7, 31, 19, 44), 71: (8, 32, 20, 45), 63: (37, 168, 108, 228), 62: (107, 227, 167, 287),
        6: (55, 175, 115, 235), 7: (56, 176, 116, 236), 14: (63, 183, 123, 243),
        15: (64, 184, 124, 244), 22: (69, 189, 129, 249), 23: (70, 190, 130, 250),
        30: (77, 197, 137, 257), 31: (78, 198, 138, 258), 38: (85, 205, 145, 265),
        39: (86, 206, 146, 266), 46: (93, 213, 153, 273), 47: (94, 214, 154, 274),
        54: (101, 221, 161, 281), 55: (102, 222, 162, 282),
    },
)


def _quad_socket_four_way_ht() -> Iterable[Row]:
    return [
        _row(cpu, core, socket, socket)
        for socket, cores in enumerate(_QUAD_SOCKET_CORES)
        for core, cpus in cores.items()
        for cpu in cpus
    ]


def _dual_socket_multi_numa_per_socket_ht() -> Iterable[Row]:
    # topoDualSocketMultiNumaPerSocketHT (dual Xeon Gold 6230): 40 cores, core i = {i, i+40};
    # NUMA node i//10, socket i//20.
    return _smt_pairs(40, lambda c: c // 20, lambda c: c // 10)


def _fake_multi_socket_dual_socket_per_numa_ht() -> Iterable[Row]:
    # fakeTopoMultiSocketDualSocketPerNumaHT: the same CPUs with NUMA cells and sockets flipped:
    # socket i//10, NUMA node i//20.
    return _smt_pairs(40, lambda c: c // 10, lambda c: c // 20)


def _dual_socket_multi_numa_per_socket_ht_large() -> Iterable[Row]:
    # topoDualSocketMultiNumaPerSocketHTLarge (dual AMD EPYC 7742, NPS=4): 128 cores,
    # core i = {i, i+128}; NUMA node i//16, socket i//64.
    return _smt_pairs(128, lambda c: c // 64, lambda c: c // 16)


def _uncore_single_socket_no_smt() -> Iterable[Row]:
    # topoUncoreSingleSocketNoSMT: 16 single-thread cores, 1 socket, 1 NUMA node, 4 uncore
    # caches of 4 CPUs (0-3, 4-7, 8-11, 12-15).
    return [_row(cpu, cpu, 0, 0, cpu // 4) for cpu in range(16)]


def _uncore_dual_socket_no_smt() -> Iterable[Row]:
    # topoUncoreDualSocketNoSMT: as above, CPUs 0-7 on socket/NUMA 0 and 8-15 on socket/NUMA 1.
    return [_row(cpu, cpu, cpu // 8, cpu // 8, cpu // 4) for cpu in range(16)]


def _uncore_single_socket_multi_numa() -> Iterable[Row]:
    # topoUncoreSingleSocketMultiNuma: one socket, CPUs 0-7 on NUMA 0 and 8-15 on NUMA 1.
    return [_row(cpu, cpu, 0, cpu // 8, cpu // 4) for cpu in range(16)]


def _uncore_single_socket_smt() -> Iterable[Row]:
    # topoUncoreSingleSocketSMT: 8 cores, core i = {i, i+8}; cores 0-3 share cache 0, 4-7 cache 1.
    return [_row(cpu, cpu % 8, 0, 0, (cpu % 8) // 4) for cpu in range(16)]


# Upstream variable name -> row builder.
_BUILDERS: dict[str, Callable[[], Iterable[Row]]] = {
    "topoSingleSocketHT": _single_socket_ht,
    "topoDualSocketHT": _dual_socket_ht,
    "topoTripleSocketHT": _triple_socket_ht,
    "topoDualSocketNoHT": _dual_socket_no_ht,
    "topoQuadSocketFourWayHT": _quad_socket_four_way_ht,
    "topoDualSocketMultiNumaPerSocketHT": _dual_socket_multi_numa_per_socket_ht,
    "fakeTopoMultiSocketDualSocketPerNumaHT": _fake_multi_socket_dual_socket_per_numa_ht,
    "topoDualSocketMultiNumaPerSocketHTLarge": _dual_socket_multi_numa_per_socket_ht_large,
    "topoUncoreSingleSocketNoSMT": _uncore_single_socket_no_smt,
    "topoUncoreDualSocketNoSMT": _uncore_dual_socket_no_smt,
    "topoUncoreSingleSocketMultiNuma": _uncore_single_socket_multi_numa,
    "topoUncoreSingleSocketSMT": _uncore_single_socket_smt,
}

NAMES: tuple[str, ...] = tuple(_BUILDERS)


def rows(name: str) -> list[Row]:
    """The CPU table of the upstream machine ``name`` (``KeyError`` for an unknown name)."""
    return [dict(r) for r in _BUILDERS[name]()]


@cache
def machine(name: str) -> Machine:
    """The upstream machine ``name`` built with :meth:`Machine.from_cpu_table` (cached)."""
    return Machine.from_cpu_table(rows(name))


MACHINES: dict[str, Machine] = {name: machine(name) for name in NAMES}
"""Upstream variable name -> :class:`Machine`."""

SINGLE_SOCKET_HT = machine("topoSingleSocketHT")
DUAL_SOCKET_HT = machine("topoDualSocketHT")
TRIPLE_SOCKET_HT = machine("topoTripleSocketHT")
DUAL_SOCKET_NO_HT = machine("topoDualSocketNoHT")
QUAD_SOCKET_FOUR_WAY_HT = machine("topoQuadSocketFourWayHT")
DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT = machine("topoDualSocketMultiNumaPerSocketHT")
FAKE_MULTI_SOCKET_DUAL_SOCKET_PER_NUMA_HT = machine("fakeTopoMultiSocketDualSocketPerNumaHT")
DUAL_SOCKET_MULTI_NUMA_PER_SOCKET_HT_LARGE = machine("topoDualSocketMultiNumaPerSocketHTLarge")
UNCORE_SINGLE_SOCKET_NO_SMT = machine("topoUncoreSingleSocketNoSMT")
UNCORE_DUAL_SOCKET_NO_SMT = machine("topoUncoreDualSocketNoSMT")
UNCORE_SINGLE_SOCKET_MULTI_NUMA = machine("topoUncoreSingleSocketMultiNuma")
UNCORE_SINGLE_SOCKET_SMT = machine("topoUncoreSingleSocketSMT")
