"""read_sysfs on the real sysfs snapshots of ../shared/data, checked against hwloc.

Two oracles, both hwloc's own reading of the same tree:

* ``<name>.output``: the ``lstopo -v`` text that hwloc's test suite expects for the snapshot
  (hwloc 2.14, from the original tarball); parsed here.
* hwloc run now: ``lstopo -i <tree> --if fsroot --of xml --whole-io -``, the way hwloc's own
  tests read a tree. The shared copies store symlinks as plain files holding the target, which
  hwloc cannot follow, so the tree is first copied to a temporary directory with the links
  restored (the check below proves this copy makes hwloc print exactly ``<name>.output``).

Both must agree with our model on: the counts of packages, cores and online CPUs, the CPUs and
memory of each NUMA node, and the NUMA node of each PCI device (plus distances and CPU kinds
where hwloc reports them). Where the model differs from hwloc on purpose, the difference is
spelled out below, value by value, and explained in docs/topology/sysfs.md.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import shared_path
from toposched.topology import CPUSet, Machine
from toposched.topology.sysfs import read_sysfs

SNAPSHOTS = (
    "16amd64-8n2c",
    "16em64t-4s2c2t",
    "20em64t-hybrid-1p6c2t+2ca4co1t",
    "256ia64-64n2s2c",
    "32intel64-2p8co2t+8ve",
    "64amd64-4s2n4ca2co",
    "ghw-linux-amd64-xeon-L5640",
    "nvidiagpunumanodes",
    "offline-cpu0-node0",
)
WITH_OUTPUT = tuple(s for s in SNAPSHOTS if not s.startswith("ghw-"))  # ghw's snapshot comes without one

pytestmark = pytest.mark.shared_data


@dataclass(frozen=True)
class View:
    """What both hwloc and our model say about a machine, in comparable form."""

    packages: int
    cores: int
    cpus: CPUSet
    numa_cpus: dict[int, CPUSet]
    numa_memory: dict[int, int]  # bytes
    pci_numa: dict[str, int | None]  # PCI address -> NUMA node, bridges excluded
    distances: dict[int, dict[int, int]] | None = None  # None: not compared
    kinds: dict[str, CPUSet] | None = None  # None: not compared
    cpuless: frozenset[int] = field(default_factory=frozenset)  # hwloc's memory-only NUMA nodes


def our_view(machine: Machine) -> View:
    kinds: dict[str, CPUSet] = {}
    for cpu in machine.cpus:
        if cpu.kind is not None:
            kinds[cpu.kind] = kinds.get(cpu.kind, CPUSet()) | CPUSet([cpu.id])
    return View(
        packages=len(machine.sockets),
        cores=len(machine.cores),
        cpus=machine.online,
        numa_cpus={n.id: n.cpus for n in machine.numa_nodes},
        numa_memory={n.id: n.memory_bytes for n in machine.numa_nodes},
        pci_numa={d.address: d.numa_id for d in machine.devices},
        distances={n.id: dict(n.distances) for n in machine.numa_nodes} if machine.numa_nodes[0].distances else {},
        kinds=kinds,
    )


# ---- hwloc's view, from a tree of objects ------------------------------------------------------


@dataclass
class Obj:
    type: str
    subtype: str | None = None
    os_index: int | None = None
    busid: str | None = None
    pci_class: str | None = None  # four hex digits, e.g. "0200"
    memory: int | None = None
    children: list[Obj] = field(default_factory=list)
    parent: Obj | None = None

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def pus(self) -> CPUSet:
        return CPUSet(o.os_index for o in self.walk() if o.type == "PU")


# hwloc object types that hold CPUs (everything else is memory or I/O).
_NORMAL = re.compile(r"Machine|Package|Die|Group\d*|L\d[diu]?Cache|Core|PU")


def hwloc_view(root: Obj, kinds: list[CPUSet], distances: dict[int, dict[int, int]] | None) -> View:
    objs = list(root.walk())
    nodes = [o for o in objs if o.type == "NUMANode"]
    # hwloc gives a NUMA node the CPUs of the object it hangs under.
    numa_cpus = {n.os_index: n.parent.pus() for n in nodes}
    cpuless = frozenset(n.os_index for n in nodes if n.subtype == "GPUMemory")
    pci_numa: dict[str, int | None] = {}
    for o in objs:
        if o.type != "PCI" or o.pci_class.startswith("06"):  # 06xx: host/PCI/ISA bridges
            continue
        anc = o.parent
        while not _NORMAL.fullmatch(anc.type):
            anc = anc.parent
        local = anc.pus()
        near = [n for n, cpus in numa_cpus.items() if n not in cpuless and not cpus.isdisjoint(local)]
        pci_numa[o.busid] = near[0] if len(near) == 1 else None
    named_kinds = {}
    if len(kinds) > 1:  # ascending efficiency: the last kind is the most capable
        named_kinds = {"performance": kinds[-1]}
        rest = CPUSet()
        for k in kinds[:-1]:
            rest |= k
        named_kinds["efficiency"] = rest
    return View(
        packages=sum(o.type == "Package" for o in objs),
        cores=sum(o.type == "Core" for o in objs),
        cpus=root.pus(),
        numa_cpus=numa_cpus,
        numa_memory={n.os_index: n.memory for n in nodes},
        pci_numa=pci_numa,
        distances=distances,
        kinds=named_kinds,
        cpuless=cpuless,
    )


# ---- oracle (a): the lstopo -v text ------------------------------------------------------------------

_LINE = re.compile(
    r'(?P<indent> *)(?P<type>[A-Za-z][\w-]*)(?:\((?P<subtype>[^)]*)\))?(?: L#\d+)?(?: \((?P<attrs>.*)\))?(?: "[^"]*")?'
)
_KIND = re.compile(r"CPU kind #(\d+) efficiency (\d+) cpuset (0x[0-9a-f,x]+)")


def parse_hex_set(text: str) -> CPUSet:
    """hwloc's bitmap syntax: comma-separated 32-bit hex words, "0x" prefixed, empty words are 0."""
    return CPUSet.from_mask(int("".join(w.removeprefix("0x").rjust(8, "0") for w in text.split(",")), 16))


def parse_lstopo_text(text: str) -> View:
    root: Obj | None = None
    stack: list[tuple[int, Obj]] = []
    kinds: dict[int, CPUSet] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith("depth 0:"):
            break
        assert " x { " not in line, f"collapsed lstopo line cannot be compared: {line!r}"
        m = _LINE.fullmatch(line)
        assert m, f"unexpected lstopo line {line!r}"
        attrs = m.group("attrs") or ""
        obj = Obj(m.group("type"), m.group("subtype"))
        if (p := re.search(r"\bP#(\d+)", attrs)) is not None:
            obj.os_index = int(p.group(1))
        if (b := re.search(r"busid=([0-9a-f:.]+)", attrs)) is not None:
            obj.busid = b.group(1)
        if (c := re.search(r"class=([0-9a-f]{4})", attrs)) is not None:
            obj.pci_class = c.group(1)
        if (mem := re.search(r"\blocal=(\d+)KB", attrs)) is not None:
            obj.memory = int(mem.group(1)) * 1024
        indent = len(m.group("indent"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if stack:
            obj.parent = stack[-1][1]
            obj.parent.children.append(obj)
        else:
            root = obj
        stack.append((indent, obj))
    for line in lines:
        if (k := _KIND.match(line)) is not None:
            kinds[int(k.group(2))] = parse_hex_set(k.group(3))
    assert root is not None and root.type == "Machine"
    # The text prints distances by logical index; the live XML oracle checks distances.
    return hwloc_view(root, [kinds[e] for e in sorted(kinds)], None)


# ---- oracle (b): hwloc run now, XML ----------------------------------------------------------------------


def parse_lstopo_xml(text: str) -> View:
    tree = ET.fromstring(text)

    def build(elem: ET.Element, parent: Obj | None) -> Obj:
        kind = {"PCIDev": "PCI", "Bridge": "Bridge", "OSDev": "OSDev"}.get(elem.get("type"), elem.get("type"))
        obj = Obj(kind, elem.get("subtype"), parent=parent)
        if elem.get("os_index") is not None:
            obj.os_index = int(elem.get("os_index"))
        obj.busid = elem.get("pci_busid")
        if elem.get("pci_type"):
            obj.pci_class = elem.get("pci_type")[:4]
        if elem.get("local_memory") is not None:
            obj.memory = int(elem.get("local_memory"))
        obj.children = [build(child, obj) for child in elem.findall("object")]
        return obj

    root = build(tree.find("object"), None)
    kinds = [parse_hex_set(k.get("cpuset")) for k in tree.findall("cpukind")]  # exported in rank order
    distances: dict[int, dict[int, int]] | None = None  # hwloc exports no matrix for a single node
    for dist in tree.findall("distances2"):
        if dist.get("type") == "NUMANode" and dist.get("name") == "NUMALatency":
            assert dist.get("indexing") == "os"
            # Long lists are split over several elements.
            ids = [int(t) for v in dist.findall("indexes") for t in v.text.split()]
            values = [int(t) for v in dist.findall("u64values") for t in v.text.split()]
            distances = {a: {b: values[i * len(ids) + j] for j, b in enumerate(ids)} for i, a in enumerate(ids)}
    return hwloc_view(root, kinds, distances)


FLAT_LINK = re.compile(rb"(\.\./|\./)\S*")


def restore_links(src: Path, dst: Path) -> None:
    """Copy a snapshot, turning each file that holds a relative link target back into a symlink.

    Other files are hard-linked when the file system allows it (much faster), else copied.
    """
    for dirpath, _, filenames in os.walk(src):
        out = os.path.join(dst, os.path.relpath(dirpath, src))
        os.makedirs(out, exist_ok=True)
        for name in filenames:
            path, target = os.path.join(dirpath, name), os.path.join(out, name)
            if os.path.getsize(path) <= 4096:
                with open(path, "rb") as fh:
                    data = fh.read().strip()
                if FLAT_LINK.fullmatch(data):
                    os.symlink(data.decode(), target)
                    continue
            try:
                os.link(path, target)
            except OSError:
                shutil.copyfile(path, target)


@pytest.fixture(scope="module")
def restored(tmp_path_factory):
    """The snapshot with its links restored, made once per snapshot."""
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            made[name] = tmp_path_factory.mktemp("snapshots") / name
            restore_links(shared_path("topologies", "sysfs", name), made[name])
        return made[name]

    return get


def lstopo(tree: Path, *args: str, keep_gpu_numa: bool = False) -> str:
    exe = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if exe is None:
        pytest.skip("hwloc's lstopo is not installed (apt-get install hwloc)")
    env = {**os.environ, "LANG": "C", "LC_ALL": "C"}
    if keep_gpu_numa:
        env["HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES"] = "1"
    return subprocess.run([exe, "-i", str(tree), "--if", "fsroot", *args], env=env, check=True,
                          capture_output=True, text=True, timeout=60).stdout


# ---- differences on purpose -----------------------------------------------------------------------
#
# Each entry: field -> hwloc's value -> ours. For dict fields, per key; ABSENT = hwloc has no such key.

ABSENT = object()

_GPU_NODES = (250, 251, 252, 253, 254, 255)
_GPU_NODE_SOCKET = {253: 0, 254: 0, 255: 0, 250: 8, 251: 8, 252: 8}  # the package each hangs under
_P9_SOCKET_CPUS = {0: CPUSet.parse("0-15"), 8: CPUSet.parse("88-103")}
# The Intel I350 functions of the ghw machine and their numa_node.
_GHW_I350 = {"0000:05:00.0": 0, "0000:05:00.1": 1, "0000:05:10.0": 0, "0000:05:10.1": 1, "0000:05:10.4": 0,
             "0000:05:10.5": 1, "0000:05:11.0": 0, "0000:05:11.1": 1, "0000:05:11.4": 0, "0000:05:11.5": 1}

BOTH: dict[str, dict[str, Any]] = {
    # NUMA node 0 is offline (no node0/), yet the kernel maps the online even CPUs 4-20 to it
    # (cpuN/node0). hwloc drops the node; we keep node 0, with those CPUs and no memory.
    "offline-cpu0-node0": {
        "numa_cpus": {0: (ABSENT, CPUSet.parse("4-20:1/2"))},
        "numa_memory": {0: (ABSENT, 0)},
    },
}
OUTPUT_ONLY: dict[str, dict[str, Any]] = {
    # By default hwloc hides the NVLink GPUs' memory nodes; we keep every CPU-less node.
    "nvidiagpunumanodes": {
        "numa_cpus": {n: (ABSENT, CPUSet()) for n in _GPU_NODES},
        "numa_memory": dict.fromkeys(_GPU_NODES, (ABSENT, 15 * 1024 ** 3)),
    },
}
LIVE_ONLY: dict[str, dict[str, Any]] = {
    # With HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES=1 hwloc shows them, with the CPUs of the package
    # they hang under (a locality); their cpulist is empty, so ours have no CPUs.
    "nvidiagpunumanodes": {
        "numa_cpus": {n: (_P9_SOCKET_CPUS[s], CPUSet()) for n, s in _GPU_NODE_SOCKET.items()},
    },
    # hwloc locates a PCI device by its local_cpus mask, which ghw's snapshot did not capture,
    # so hwloc leaves every device at the machine level. The kernel's numa_node is there: the
    # Intel I350 functions alternate between node 0 and node 1, and we follow numa_node.
    "ghw-linux-amd64-xeon-L5640": {
        "pci_numa": {address: (None, numa) for address, numa in _GHW_I350.items()},
    },
}


def expected(hwloc: View, *tables: dict[str, Any], name: str) -> View:
    """hwloc's view with our documented differences applied (each checked against hwloc first)."""
    out = hwloc
    for table in tables:
        for fld, change in table.get(name, {}).items():
            value = getattr(out, fld)
            if isinstance(change, dict):
                value = dict(value)
                for key, (theirs, ours) in change.items():
                    assert value.get(key, ABSENT) == theirs, f"{name}: hwloc's {fld}[{key}] changed"
                    value[key] = ours
            else:
                theirs, ours = change
                assert value == theirs, f"{name}: hwloc's {fld} changed"
                value = ours
            out = replace(out, **{fld: value})
    return out


def assert_same(ours: View, want: View) -> None:
    assert ours.packages == want.packages
    assert ours.cores == want.cores
    assert ours.cpus == want.cpus
    assert {n: str(c) for n, c in ours.numa_cpus.items()} == {n: str(c) for n, c in want.numa_cpus.items()}
    assert ours.numa_memory == want.numa_memory
    assert ours.pci_numa == want.pci_numa
    if want.distances is not None:
        assert ours.distances == want.distances
    if want.kinds is not None:
        assert ours.kinds == want.kinds


# ---- the tests ---------------------------------------------------------------------------------------


def test_every_snapshot_is_covered():
    base = shared_path("topologies", "sysfs")
    assert sorted(p.name for p in base.iterdir() if p.is_dir()) == sorted(SNAPSHOTS)
    assert sorted(p.stem for p in base.glob("*.output")) == sorted(WITH_OUTPUT)


@pytest.mark.parametrize("name", WITH_OUTPUT)
def test_agrees_with_hwloc_expected_output(name):
    base = shared_path("topologies", "sysfs")
    want = expected(parse_lstopo_text((base / f"{name}.output").read_text()), BOTH, OUTPUT_ONLY, name=name)
    assert_same(our_view(read_sysfs(base / name)), want)


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_agrees_with_hwloc_run_now(name, restored):
    xml = lstopo(restored(name), "--of", "xml", "--whole-io", "-", keep_gpu_numa=True)
    want = expected(parse_lstopo_xml(xml), BOTH, LIVE_ONLY, name=name)
    ours = read_sysfs(shared_path("topologies", "sysfs", name))
    assert_same(our_view(ours), want)
    # And the link-restored copy reads exactly like the shared one.
    assert read_sysfs(restored(name)).to_dict() == ours.to_dict()


@pytest.mark.parametrize("name", WITH_OUTPUT)
def test_restored_copy_is_what_hwloc_expects(name, restored):
    # Proves the copy is faithful: hwloc prints, line for line, what its test suite expects
    # (compared as hwloc's tests do, ignoring changes in white space).
    base = shared_path("topologies", "sysfs")
    text = re.sub(r" (hwlocVersion|ProcessName)=[^\s)]+", "", lstopo(restored(name), "-v", "-"))
    want = (base / f"{name}.output").read_text()
    assert [line.split() for line in text.splitlines()] == [line.split() for line in want.splitlines()]


def test_snapshot_specifics():
    base = shared_path("topologies", "sysfs")
    p9 = read_sysfs(base / "nvidiagpunumanodes")
    assert p9.numa_ids == (0, 8, 250, 251, 252, 253, 254, 255)
    assert p9.distance(0, 8) == 40 and p9.distance(8, 250) == 80 and p9.threads_per_core == 4
    hybrid = read_sysfs(base / "20em64t-hybrid-1p6c2t+2ca4co1t")
    assert len(hybrid.cores) == 14 and {c.kind for c in hybrid.cpus if c.id >= 12} == {"efficiency"}
    offline = read_sysfs(base / "offline-cpu0-node0")
    assert str(offline.offline_cpus) == "0-3,21-23"
    ve = read_sysfs(base / "32intel64-2p8co2t+8ve")
    assert str(ve.offline_cpus) == ""  # 32-111 are possible but not present: not offline CPUs
    assert [d.name for d in ve.devices if d.name] == ["enp96s0f0", "enp96s0f1"]
    assert len(ve.devices_of(ve.devices[1].kind)) == 8  # the NEC vector engines are accelerators
