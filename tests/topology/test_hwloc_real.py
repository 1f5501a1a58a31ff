"""Every real hwloc XML export under ../shared/data agrees with what hwloc itself reports about it.

hwloc's command-line tools are the oracle: ``hwloc-info`` for the objects (packages, cores, NUMA
nodes, PUs with their CPU kind, caches, groups) and for each PCI device's ancestors, ``lstopo --of
xml`` for hwloc's own NUMA distance matrix. All are run with
``--disallowed`` because the model describes the hardware, not the cgroup of the process that
happened to run lstopo (see docs/topology/hwloc.md, "Differences from hwloc").

Deliberate differences, checked here in their documented form:

* A NUMA node attached next to another at the same place (KNL MCDRAM beside DDR) has hwloc's
  *locality* as its cpuset; the model gives its CPUs to the DRAM node and leaves it CPU-less.
* Distances are scaled so that local is 10; hwloc keeps its raw values.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import shared_path
from toposched.topology import CPUSet, Machine
from toposched.topology.hwloc import read_hwloc_xml

# The 23 exports listed in ../shared/data/topologies/README.md.
FILES = [
    "16amd64-4distances.xml",
    "16em64t-4s2c2t-offlines.xml",
    "16em64t-4s2c2t.xml",
    "16intel64-manyVFs.xml",
    "192em64t-24n8c2t.xml",
    "24em64t-2n6c2t-pci.xml",
    "28intel64-2p2g7c-CoDgroups.v1tov2.xml",
    "32em64t-2n8c+1mic.xml",
    "32em64t-2n8c2t-pci-normalio.xml",
    "64intel64-3g2n+2n-irregulargroups+pci.xml",
    "96em64t-4n4d3ca2co-pci.xml",
    "arm64-ulna-hwloc1.xml",
    "coral-lassen.xml",
    "cts1-quartz-smt1.xml",
    "eas-tioga.xml",
    "epyc-corona-p2.xml",
    "epyc-corona.xml",
    "g4dnmetal.xml",
    "knl-snc4-flat-hwloc1.xml",
    "memorysidecaches.xml",
    "nvidia-dgx-gb10.xml",
    "nvidiaDGX2.xml",
    "power8gpudistances.xml",
]

_TOOLS = ("hwloc-info", "lstopo-no-graphics")


def _require_hwloc() -> None:
    missing = [tool for tool in _TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"hwloc tools not installed ({', '.join(missing)}); `apt-get install hwloc` provides them")


def _run(*args: str) -> str:
    return subprocess.run(args, capture_output=True, text=True, check=True, timeout=120).stdout


def _hwloc_set(text: str) -> CPUSet:
    """hwloc's bitmap text (comma-separated 32-bit hex words, high word first) as a CPUSet."""
    mask = 0
    for word in text.split(","):
        mask = mask << 32 | (int(word, 16) if word else 0)
    return CPUSet.from_mask(mask)


def _blocks(text: str) -> list[dict[str, str]]:
    """hwloc-info's object listing: a header line per object, then indented ``key = value`` lines."""
    blocks: list[dict[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            blocks.append({"header": line.strip()})
        elif blocks:
            key, sep, value = line.strip().partition(" = ")
            if sep:
                blocks[-1].setdefault(key, value)
    return blocks


@dataclass(frozen=True)
class HwlocView:
    """What hwloc reports about one file."""

    objects: dict[str, list[dict[str, str]]]  # hwloc type -> its objects' hwloc-info blocks
    machine: dict[str, str]
    pci: list[tuple[str, CPUSet | None, tuple[str, ...], str | None]]  # busid, nodeset, bridges, host bus
    kinds: list[tuple[int, CPUSet]]  # (efficiency, cpuset) per CPU kind
    distances: dict[int, dict[int, int]] | None  # hwloc's NUMALatency matrix by os index


@functools.cache
def hwloc_view(path: Path) -> HwlocView:
    """Run hwloc's tools once per file."""
    base = ("hwloc-info", "--disallowed", "--input", str(path))
    listing = _run(*base, "machine:0", "package:all", "core:all", "numa:all", "pu:all", "l3cache:all",
                   "l2cache:all", "group:all", "die:all")
    objects: dict[str, list[dict[str, str]]] = {}
    for block in _blocks(listing):
        objects.setdefault(block["type"], []).append(block)

    pci = []
    current: list = []
    ancestors = _run("hwloc-info", "--disallowed", "--whole-io", "--input", str(path), "--ancestors", "pci:all")
    for block in _blocks(ancestors):
        if "= parent" not in block["header"]:
            current = [block["attr PCI bus id"], None, [], None]
            pci.append(current)
        elif block["type"] == "Bridge" and "attr PCI bus id" in block:
            current[2].append(block["attr PCI bus id"])
        elif block["type"] == "Bridge":
            current[3] = block.get("attr PCI secondary bus")
        elif current[1] is None and "nodeset" in block:
            current[1] = _hwloc_set(block["nodeset"])
    pci_view = [(busid, nodeset, tuple(reversed(bridges)), host) for busid, nodeset, bridges, host in pci]

    by_efficiency: dict[int, CPUSet] = {}
    for block in objects["PU"]:
        if "cpukind efficiency" in block:
            eff = int(block["cpukind efficiency"])
            by_efficiency[eff] = by_efficiency.get(eff, CPUSet()) | CPUSet([int(block["os index"])])
    kinds = sorted(by_efficiency.items())

    exported = ET.fromstring(_run("lstopo-no-graphics", "--disallowed", "--input", str(path), "--of", "xml", "-"))
    distances = None
    for el in exported.iter("distances2"):
        if el.get("type") == "NUMANode" and el.get("name", "NUMALatency") == "NUMALatency":
            order = [int(x) for x in " ".join(i.text or "" for i in el.iter("indexes")).split()]
            values = [int(x) for x in " ".join(v.text or "" for v in el.iter("u64values")).split()]
            n = len(order)
            distances = {order[i]: {order[j]: values[i * n + j] for j in range(n)} for i in range(n)}
            break
    return HwlocView(objects, objects["Machine"][0], pci_view, kinds, distances)


@pytest.fixture(scope="module")
def folder() -> Path:
    _require_hwloc()
    return shared_path("topologies", "hwloc")


def test_the_folder_holds_the_23_documented_exports(folder: Path) -> None:
    assert sorted(p.name for p in folder.glob("*.xml")) == sorted(FILES)


@pytest.fixture(params=FILES)
def pair(request: pytest.FixtureRequest, folder: Path) -> tuple[Machine, HwlocView]:
    path = folder / request.param
    return _read(path), hwloc_view(path)


@functools.cache
def _read(path: Path) -> Machine:
    return read_hwloc_xml(path)


def _cpusets(blocks: list[dict[str, str]]) -> Counter[CPUSet]:
    return Counter(_hwloc_set(b["cpuset"]) for b in blocks)


def test_sockets_cores_and_online_cpus(pair: tuple[Machine, HwlocView]) -> None:
    machine, hw = pair
    packages = [b for b in hw.objects.get("Package", []) if _hwloc_set(b["cpuset"])]
    assert len(machine.sockets) == len(packages)
    assert Counter(s.cpus for s in machine.sockets) == _cpusets(packages)
    assert len(machine.cores) == len(hw.objects["Core"])
    assert Counter(c.cpus for c in machine.cores) == _cpusets(hw.objects["Core"])
    assert machine.online == CPUSet(int(b["os index"]) for b in hw.objects["PU"])
    assert len(machine.cpus) == len(hw.objects["PU"])


def test_offline_cpus_and_hostname(pair: tuple[Machine, HwlocView]) -> None:
    machine, hw = pair
    complete = _hwloc_set(hw.machine["complete cpuset"])
    assert machine.offline_cpus == complete - _hwloc_set(hw.machine["cpuset"])
    assert machine.hostname == hw.machine.get("info HostName")


def test_numa_nodes_and_their_cpus(pair: tuple[Machine, HwlocView]) -> None:
    machine, hw = pair
    hw_nodes = {int(b["os index"]): _hwloc_set(b["cpuset"]) for b in hw.objects["NUMANode"]}
    assert sorted(hw_nodes) == list(machine.numa_ids)
    for node in machine.numa_nodes:
        locality = hw_nodes[node.id]
        if node.cpus:
            assert node.cpus == locality, f"NUMA node {node.id}"
        else:
            # On purpose: hwloc gives a memory-only node the CPUs near it (its locality); the model
            # leaves it CPU-less and its locality is exactly the CPUs of the nodes it sits beside.
            beside = CPUSet()
            for other in machine.numa_nodes:
                if other.cpus and hw_nodes[other.id] <= locality:
                    beside |= other.cpus
            assert locality == beside, f"memory-only NUMA node {node.id}"


def test_numa_memory_is_what_hwloc_reports(pair: tuple[Machine, HwlocView]) -> None:
    machine, hw = pair
    for block in hw.objects["NUMANode"]:
        node = machine.numa(int(block["os index"]))
        assert node.memory_bytes == int(block.get("local memory", "0"))


def test_last_level_caches_and_dies(pair: tuple[Machine, HwlocView]) -> None:
    machine, hw = pair
    caches = hw.objects.get("L3Cache") or hw.objects.get("L2Cache") or []
    by_cache: dict[int | None, CPUSet] = {}
    for cpu in machine.cpus:
        by_cache[cpu.cache_id] = by_cache.get(cpu.cache_id, CPUSet()) | CPUSet([cpu.id])
    if caches:
        assert Counter(by_cache.values()) == _cpusets(caches)
        assert all(cache_id == min(cpus) for cache_id, cpus in by_cache.items())
    # A die is a Die object or a Group splitting a package's NUMA nodes: one of hwloc's objects.
    candidates = set(_cpusets(hw.objects.get("Group", []) + hw.objects.get("Die", [])))
    by_die: dict[tuple[int, int], CPUSet] = {}
    for cpu in machine.cpus:
        if cpu.die_id is not None:
            key = (cpu.socket_id, cpu.die_id)
            by_die[key] = by_die.get(key, CPUSet()) | CPUSet([cpu.id])
    assert set(by_die.values()) <= candidates
    if hw.objects.get("Die"):
        assert set(by_die.values()) == set(_cpusets(hw.objects["Die"]))


def test_each_pci_device_numa_node_and_bridges(pair: tuple[Machine, HwlocView]) -> None:
    machine, hw = pair
    expected = []
    for busid, nodeset, bridges, host_bus in hw.pci:
        numa = next(iter(nodeset)) if nodeset is not None and len(nodeset) == 1 else None
        host = () if host_bus is None else (host_bus,)
        expected.append((busid, numa, bridges, host))
    ours = []
    for dev in machine.devices:
        bridges = tuple(p for p in dev.pcie_path if not p.startswith("pci"))
        host = tuple(p[-2:] for p in dev.pcie_path if p.startswith("pci"))
        ours.append((dev.address, dev.numa_id, bridges, host))
    assert sorted(ours, key=repr) == sorted(expected, key=repr)


def test_cpu_kinds(pair: tuple[Machine, HwlocView]) -> None:
    machine, hw = pair
    if len(hw.kinds) < 2:
        assert {cpu.kind for cpu in machine.cpus} == {None}
        return
    best = max(eff for eff, _ in hw.kinds)
    for eff, cpus in hw.kinds:
        want = "performance" if eff == best else "efficiency"
        assert {machine.cpu(c).kind for c in cpus if c in machine.online} == {want}


def test_distances_are_hwloc_numa_latencies_scaled_to_local_10(pair: tuple[Machine, HwlocView]) -> None:
    machine, hw = pair
    if hw.distances is None:
        # hwloc stores no matrix for a lone NUMA node; the model gives it the kernel's "10".
        expected = [{n.id: 10} for n in machine.numa_nodes] if len(machine.numa_nodes) == 1 else [{}] * len(
            machine.numa_nodes)
        assert [dict(n.distances) for n in machine.numa_nodes] == expected
        return
    local = min(hw.distances[i][i] for i in hw.distances)
    for i, row in hw.distances.items():
        assert dict(machine.numa(i).distances) == {j: int(10 * d / local + 0.5) for j, d in row.items()}


def test_largest_export_reads_whole(folder: Path) -> None:
    """The 384-thread SGI UV export, whole: 24 NUMA nodes of 8 two-thread cores. How fast it reads
    (issue 2's 200 ms) is measured by ``benchmarks/topology_readers.py``: tests assert no time."""
    machine = read_hwloc_xml(folder / "192em64t-24n8c2t.xml")
    assert len(machine.cpus) == 384
    assert len(machine.numa_nodes) == 24
    assert all(len(node.cpus) == 16 for node in machine.numa_nodes)
