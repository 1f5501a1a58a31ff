"""Read an hwloc XML export (``lstopo --of xml``) into a :class:`~toposched.topology.model.Machine`.

Both of hwloc's XML formats are read:

* **v2** (``<topology version="2.0">``, hwloc 2.x): NUMA nodes are *memory children* hung under the
  normal object whose CPUs are local to them (Machine, Package, Group, Die, L3...), possibly behind
  memory-side caches (``MemCache``); NUMA distances are ``<distances2>`` matrices.
* **v1** (no ``version`` attribute, hwloc 1.x): NUMA nodes are ordinary parents of caches, cores
  and PUs; distances are ``<distances>`` elements of float ``<latency>`` values times
  ``latency_base``.

The rules that map hwloc objects onto the model, and where the result deliberately differs from
what hwloc reports, are written down in ``docs/topology/hwloc.md``.
"""

from __future__ import annotations

import math
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from xml.parsers.expat import ErrorString

from toposched.errors import InputError
from toposched.inputs import read_file_bytes
from toposched.topology.cpuset import MAX_CPU_ID, CPUSet
from toposched.topology.model import Device, LogicalCPU, Machine, NUMANode, classify_pci_class

__all__ = ["read_hwloc_xml"]

_BYTES_SOURCE = "<hwloc XML bytes>"

# hwloc type names (matched case-insensitively, as hwloc does) -> the names used below.
_TYPE_NAMES = {
    "machine": "Machine",
    "system": "Machine",  # hwloc 1.x name of a root that spans several machines
    "package": "Package",
    "socket": "Package",  # hwloc < 1.11 name of a package
    "die": "Die",
    "group": "Group",
    "tile": "Group",
    "module": "Group",
    "numanode": "NUMANode",
    "node": "NUMANode",
    "memcache": "MemCache",
    "core": "Core",
    "pu": "PU",
    "cache": "Cache",  # hwloc 1.x: level and kind come from the depth and cache_type attributes
    "bridge": "Bridge",
    "pcidev": "PCIDev",
    "osdev": "OSDev",
    "misc": "Misc",
}
_CACHE_TYPE = re.compile(r"l([1-5])(i?)cache")
_MEMORY_TYPES = frozenset({"NUMANode", "MemCache"})
_IO_TYPES = frozenset({"Bridge", "PCIDev", "OSDev"})
_NOT_NORMAL_V2 = _MEMORY_TYPES | _IO_TYPES | {"Misc"}
_NOT_NORMAL_V1 = _IO_TYPES | {"Misc"}

_GROUP_KIND_INTEL_DIE = "104"  # hwloc's HWLOC_GROUP_KIND_INTEL_DIE: such a Group is a Die
_DIST_KIND_LATENCY = 4  # HWLOC_DISTANCES_KIND_MEANS_LATENCY
_DIST_KIND_BANDWIDTH = 8  # HWLOC_DISTANCES_KIND_MEANS_BANDWIDTH
_LOCAL_DISTANCE = 10  # the ACPI SLIT value for "local"

_PCI_BUSID = re.compile(r"^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-9a-fA-F])$")
_PCI_TYPE = re.compile(
    r"^([0-9a-fA-F]{4}) \[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\] \[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]"
    r" ([0-9a-fA-F]{2})(?: ([0-9a-fA-F]{2}))?$"
)
_BRIDGE_PCI = re.compile(r"^([0-9a-fA-F]{1,8}):\[([0-9a-fA-F]{2})-([0-9a-fA-F]{2})\]$")

# Where a GPU's memory size is found among its OS devices' infos (hwloc writes them in KiB),
# most trusted first.
_GPU_MEMORY_INFOS = ("CUDAGlobalMemorySize", "RSMIVRAMSize", "LevelZeroHBMSize", "OpenCLGlobalMemorySize")
# PCI infos kept as device attributes.
_DEVICE_INFOS = {
    "PCIVendor": "vendor_name",
    "PCIDevice": "device_name",
    "PCISlot": "slot",
    "NVIDIAUUID": "uuid",
    "AMDUUID": "uuid",
}
# hwloc OS device types (the same numbers in v1 and v2 XML).
_OSDEV_BLOCK, _OSDEV_GPU, _OSDEV_NETWORK, _OSDEV_OPENFABRICS, _OSDEV_COPROC = 0, 1, 2, 3, 5


def read_hwloc_xml(source: str | os.PathLike[str] | bytes) -> Machine:
    """Read an hwloc XML topology (v1 or v2 format) from a file path or from the XML bytes.

    Returns a fully validated :class:`Machine`: sockets, dies (where the XML shows them), NUMA
    nodes (memory-only ones included) with memory, hugepages and SLIT-like distances, cores,
    online logical CPUs with their last-level cache and CPU kind, offline CPUs, and PCI devices
    with their NUMA node and PCIe path. Any bad input -- unreadable file, malformed or truncated
    XML, a DTD with an internal subset or entities, an inconsistent topology -- raises one
    :class:`InputError` whose text names the file (or ``<hwloc XML bytes>``) and the element or
    attribute at fault; nothing is returned half-built.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), _BYTES_SOURCE
    else:
        name = os.fspath(source)
        try:
            data = read_file_bytes(name)  # a regular file under the size cap: never a FIFO or /dev/zero
        except InputError as exc:
            raise InputError(f"cannot read the file: {exc.message.removeprefix('cannot read file: ')}", field="file",
                             source=name) from None
    try:
        return _Reader(data).machine()
    except InputError as exc:
        raise exc.with_source(name) from None


# ---- small parsers ------------------------------------------------------------------------------


# The most logical CPUs one machine may have: Linux's NR_CPUS tops out at 8192 (the limit, named in errors).
MAX_PUS = 8192
# Objects of one topology (PUs, cores, caches, bridges, devices...): far above any real machine's.
MAX_OBJECTS = 200_000
_MAX_BITMAP_WORDS = MAX_CPU_ID // 32 + 1


def _bitmap(text: str, field: str) -> int:
    """Parse hwloc's bitmap syntax: comma-separated 32-bit hex words, most significant first."""
    value = 0
    words = text.strip().split(",")
    if len(words) > _MAX_BITMAP_WORDS:
        raise InputError(f"a bitmap of {len(words):,} words: more than {_MAX_BITMAP_WORDS:,} (CPU ids stop at "
                         f"{MAX_CPU_ID - 1}; the limit)", field=field)
    for word in words:
        if word == "":
            value <<= 32
            continue
        if word.lower() == "0xf...f":
            raise InputError(f"infinite set {text!r} where a finite one is needed", field=field)
        try:
            chunk = int(word, 16)
        except ValueError:
            raise InputError(f"{text!r} is not an hwloc bitmap", field=field) from None
        if chunk < 0 or chunk > 0xFFFFFFFF:
            raise InputError(f"{text!r} is not an hwloc bitmap (a word exceeds 32 bits)", field=field)
        value = value << 32 | chunk
    return value


def _bits(mask: int) -> Iterable[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _uint(text: str | None, field: str, *, default: int | None = None) -> int:
    if text is None:
        if default is None:
            raise InputError("is missing", field=field)
        return default
    stripped = text.strip()
    try:
        value = int(stripped, 16) if stripped.lower().startswith("0x") else int(stripped, 10)
    except ValueError:
        raise InputError(f"{text!r} is not an integer", field=field) from None
    if value < 0:
        raise InputError(f"{value} is negative", field=field)
    return value


def _float(text: str | None, field: str) -> float:
    if text is None:
        raise InputError("is missing", field=field)
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{text!r} is not a number", field=field) from None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{text!r} is not a finite non-negative number", field=field)
    return value


def _refuse_dtd_tricks(data: bytes) -> None:
    """Refuse what defusedxml would: entity declarations and DTD internal subsets.

    hwloc writes an external ``<!DOCTYPE topology SYSTEM "hwloc2.dtd">`` line, which is harmless
    (expat does not fetch it). The byte scan is only sound for ASCII-compatible encodings, so
    UTF-16/32 documents (which hwloc never writes) are refused too.
    """
    head = data[:4]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head:
        raise InputError("only UTF-8 (ASCII-compatible) XML is accepted, as hwloc writes it", field="encoding")
    if b"<!ENTITY" in data:
        raise InputError("entity declarations are not accepted", field="DOCTYPE")
    start = data.find(b"<!DOCTYPE")
    if start >= 0:
        end = data.find(b">", start)
        if b"[" in data[start : end if end >= 0 else len(data)]:
            raise InputError("a DOCTYPE with an internal subset is not accepted", field="DOCTYPE")


# ---- the object tree ----------------------------------------------------------------------------


class _Obj:
    """One ``<object>`` element with its parent link and a few derived facts."""

    __slots__ = ("type", "el", "parent", "memory", "level", "_sets")

    def __init__(self, type_: str, el: ET.Element, parent: _Obj | None, level: int | None):
        self.type = type_
        self.el = el
        self.parent = parent
        self.memory: list[_Obj] = []  # v2: NUMA nodes whose locality is this object
        self.level = level  # data/unified cache level; None for other objects and instruction caches
        self._sets: dict[str, int | None] = {}

    def label(self) -> str:
        """A name for error messages, e.g. ``PU P#3``, ``PCIDev 0000:04:00.0``, ``Group gp_index=9``."""
        if (busid := self.el.get("pci_busid")) is not None:
            return f"{self.type} {busid}"
        if (os_index := self.el.get("os_index")) is not None:
            return f"{self.type} P#{os_index}"
        if (gp := self.el.get("gp_index")) is not None:
            return f"{self.type} gp_index={gp}"
        return self.type

    def set_(self, attr: str) -> int | None:
        """The bitmap attribute ``attr`` (cpuset, nodeset...) as an int mask, None when absent."""
        if attr not in self._sets:
            text = self.el.get(attr)
            self._sets[attr] = None if text is None else _bitmap(text, f"{self.label()}.{attr}")
        return self._sets[attr]

    def os_index(self) -> int:
        return _uint(self.el.get("os_index"), f"{self.label()}.os_index")

    def infos(self) -> dict[str, str]:
        """The object's ``<info name= value=>`` children (the first value of a repeated name)."""
        out: dict[str, str] = {}
        for child in self.el:
            if child.tag == "info":
                key, value = child.get("name"), child.get("value")
                if key is not None and value is not None:
                    out.setdefault(key, value)
        return out

    def subtype(self) -> str | None:
        """hwloc's subtype (v2 attribute; v1 kept it in a ``Type``/``CoProcType`` info)."""
        if (subtype := self.el.get("subtype")) is not None:
            return subtype
        infos = self.infos()
        return infos.get("Type") or infos.get("CoProcType")


def _object_type(el: ET.Element, where: str) -> tuple[str, int | None]:
    raw = el.get("type")
    if raw is None:
        raise InputError("an <object> has no type attribute", field=where)
    low = raw.lower()
    if (match := _CACHE_TYPE.fullmatch(low)) is not None:
        return "Cache", None if match.group(2) else int(match.group(1))
    name = _TYPE_NAMES.get(low)
    if name is None:
        raise InputError(f"unknown object type {raw!r}", field=where)
    if name == "Cache":
        level = _uint(el.get("depth"), f"{where}.depth")
        kind = _uint(el.get("cache_type"), f"{where}.cache_type", default=0)
        return "Cache", None if kind == 2 else level  # 2 = instruction cache
    if name == "Group" and (el.get("kind") == _GROUP_KIND_INTEL_DIE or el.get("subtype") == "Die"):
        return "Die", None
    return name, None


# ---- the reader ---------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes):
        _refuse_dtd_tricks(data)
        try:
            self.top = ET.fromstring(data)
        except ET.ParseError as exc:
            line, column = exc.position
            raise InputError(
                f"malformed or truncated XML: {ErrorString(exc.code)}", field=f"line {line}, column {column}"
            ) from None
        except (ValueError, LookupError) as exc:  # e.g. an encoding expat does not know
            raise InputError(f"unreadable XML: {exc}", field="encoding") from None
        if self.top.tag != "topology":
            raise InputError(f"the root element is <{self.top.tag}>, not <topology>", field="topology")
        version = self.top.get("version")
        if version is None:
            self.v2 = False
        elif version.split(".")[0] == "2":
            self.v2 = True
        else:
            raise InputError(
                f"hwloc XML version {version!r} is not supported (1.x and 2.x are)", field="topology.version"
            )
        self.version = "2" if self.v2 else "1"
        self.objs: list[_Obj] = []
        self.pus: list[_Obj] = []
        self.numas: list[_Obj] = []
        self.pcidevs: list[_Obj] = []
        self.packages: list[_Obj] = []
        self._collect()

    def _collect(self) -> None:
        """Walk the object tree in document order (iteratively: depth is the input's choice)."""
        roots = [el for el in self.top if el.tag == "object"]
        if not roots:
            raise InputError("the topology has no root <object>", field="topology.object")
        root_type, _ = _object_type(roots[0], "topology.object")
        if root_type != "Machine":
            raise InputError(f"the root object is a {root_type}, not a Machine", field="topology.object")
        stack: list[tuple[ET.Element, _Obj | None]] = [(roots[0], None)]
        not_normal = _NOT_NORMAL_V2 if self.v2 else _NOT_NORMAL_V1
        while stack:
            el, parent = stack.pop()
            where = "topology.object" if parent is None else f"object under {parent.label()}"
            type_, level = _object_type(el, where)
            obj = _Obj(type_, el, parent, level)
            self.objs.append(obj)
            if parent is not None:
                self._check_parent(obj, parent, not_normal)
            if len(self.objs) > MAX_OBJECTS:
                raise InputError(f"more than {MAX_OBJECTS:,} objects (the limit)", field="topology.object")
            if type_ == "PU":
                self.pus.append(obj)
                if len(self.pus) > MAX_PUS:
                    raise InputError(f"more than {MAX_PUS:,} PUs: no machine has that many logical CPUs (the limit)",
                                     field="PU")
            elif type_ == "NUMANode":
                self.numas.append(obj)
                if self.v2:
                    holder = parent
                    while holder is not None and holder.type == "MemCache":
                        holder = holder.parent
                    if holder is None:
                        raise InputError("a NUMA node has no parent object", field=obj.label())
                    holder.memory.append(obj)
            elif type_ == "PCIDev":
                self.pcidevs.append(obj)
            elif type_ == "Package":
                self.packages.append(obj)
            children = [c for c in el if c.tag == "object"]
            stack.extend((c, obj) for c in reversed(children))

    def _check_parent(self, obj: _Obj, parent: _Obj, not_normal: frozenset[str]) -> None:
        normal = obj.type not in _NOT_NORMAL_V2 or (not self.v2 and obj.type == "NUMANode")
        if normal and parent.type in not_normal:
            raise InputError(f"a {obj.type} cannot be a child of a {parent.type}", field=obj.label())
        if self.v2 and obj.type in _MEMORY_TYPES and parent.type in _IO_TYPES | {"Misc"}:
            raise InputError(f"a {obj.type} cannot be a child of a {parent.type}", field=obj.label())
        if obj.type in _IO_TYPES and (parent.type == "Misc" or (self.v2 and parent.type in _MEMORY_TYPES)):
            raise InputError(f"a {obj.type} cannot be a child of a {parent.type}", field=obj.label())

    # ---- CPUs ----------------------------------------------------------------------------------

    def _online(self, pu: _Obj) -> tuple[int, bool]:
        cpu = pu.os_index()
        if cpu >= MAX_CPU_ID:
            raise InputError(f"{cpu} is beyond the largest CPU id {MAX_CPU_ID - 1}", field=f"{pu.label()}.os_index")
        cpuset = pu.set_("cpuset")
        if cpuset is None:
            raise InputError("is missing", field=f"{pu.label()}.cpuset")
        online = bool(cpuset >> cpu & 1)
        if cpuset and not online:
            # hwloc writes a PU's own bit into its cpuset; an empty cpuset (hwloc 1.x) marks it offline.
            raise InputError(f"the cpuset of PU {cpu} does not hold CPU {cpu}", field=f"{pu.label()}.cpuset")
        if not self.v2 and online:
            # hwloc 1.x could keep offline PUs when asked for the whole system; it said so here.
            online_set = pu.set_("online_cpuset")
            online = online_set is None or bool(online_set >> cpu & 1)
        return cpu, online

    def _pu_context(self, pu: _Obj) -> tuple[_Obj | None, _Obj | None, _Obj | None, _Obj | None, _Obj | None]:
        """(core, package, die, last-level cache, NUMA node) of one PU, by walking its ancestors."""
        core = package = die = cache = numa = None
        groups: list[_Obj] = []  # Groups between the PU and its Package, innermost first
        node = pu.parent
        while node is not None:
            t = node.type
            if t == "Core" and core is None:
                core = node
            elif t == "Package" and package is None:
                package = node
            elif t == "Die" and die is None and package is None:
                die = node
            elif t == "Group" and package is None:
                groups.append(node)
            elif t == "Cache" and node.level is not None and (cache is None or node.level > (cache.level or 0)):
                cache = node
            elif t == "NUMANode":  # v1: NUMA nodes are parents of their CPUs
                if numa is not None:
                    cpu = pu.os_index()
                    raise InputError(
                        f"PU {cpu} is in NUMA node {numa.os_index()} and NUMA node {node.os_index()}",
                        field=f"{node.label()}.cpuset",
                    )
                numa = node
            if self.v2 and numa is None and node.memory:
                numa = _cpu_holder(node.memory)
            node = node.parent
        if die is None and package is not None:
            die = self._die_group(package, groups)
        return core, package, die, cache, numa

    @staticmethod
    def _die_group(package: _Obj, groups: list[_Obj]) -> _Obj | None:
        """The outermost Group inside the package that splits the package's NUMA nodes.

        Such Groups are how hwloc shows sub-NUMA clusters and multi-die packages (AMD Naples
        dies, Intel Cluster-on-Die/SNC halves, KNL quadrants, NPS4). Groups that keep all of the
        package's memory (CPU clusters, E-core modules) are not dies.
        """
        package_nodes = package.set_("nodeset")
        if not package_nodes:
            return None
        for group in reversed(groups):
            nodes = group.set_("nodeset")
            if nodes and nodes != package_nodes and nodes & ~package_nodes == 0:
                return group
        return None

    # ---- the machine ---------------------------------------------------------------------------

    def machine(self) -> Machine:
        root = self.objs[0]
        numa_of_cpu: dict[int, _Obj | None] = {}
        online_pus: list[tuple[int, _Obj]] = []
        seen_cpus: set[int] = set()
        offline_mask = 0
        for pu in self.pus:
            cpu, online = self._online(pu)
            if cpu in seen_cpus:
                raise InputError(f"PU {cpu} is listed twice", field=f"{pu.label()}.os_index")
            seen_cpus.add(cpu)
            if online:
                online_pus.append((cpu, pu))
            else:
                offline_mask |= 1 << cpu
        if not online_pus:
            raise InputError("the topology has no online PU", field="PU")
        online_mask = 0
        for cpu, _ in online_pus:
            online_mask |= 1 << cpu
        complete = root.set_("complete_cpuset") or 0
        offline_mask = (offline_mask | complete) & ~online_mask

        socket_ids = self._socket_ids()
        contexts = []
        core_min: dict[int, int] = {}
        cache_min: dict[int, int] = {}
        die_ids: dict[int, int] = {}  # die object -> its rank within its package
        dies_in_package: dict[int, int] = {}
        for cpu, pu in online_pus:
            core, package, die, cache, numa = self._pu_context(pu)
            contexts.append((cpu, pu, core, package, die, cache, numa))
            for obj, table in ((core, core_min), (cache, cache_min)):
                if obj is not None:
                    key = id(obj)
                    table[key] = min(cpu, table.get(key, cpu))
            if die is not None and id(die) not in die_ids:
                # Numbered within the package, like the kernel's die_id (PUs come in document order).
                die_ids[id(die)] = dies_in_package.get(id(package), 0)
                dies_in_package[id(package)] = die_ids[id(die)] + 1
            numa_of_cpu[cpu] = numa

        nodes_by_obj, numa_nodes = self._numa_nodes(root, numa_of_cpu)
        kinds = self._cpu_kinds()
        cpus = []
        for cpu, _pu, core, package, die, cache, numa in contexts:
            numa_id = nodes_by_obj[id(numa)] if numa is not None else 0
            cpus.append(
                LogicalCPU(
                    id=cpu,
                    core_id=core_min[id(core)] if core is not None else cpu,
                    socket_id=socket_ids.get(id(package), 0) if package is not None else 0,
                    numa_id=numa_id,
                    die_id=die_ids[id(die)] if die is not None else None,
                    cache_id=cache_min[id(cache)] if cache is not None else None,
                    kind=kinds.get(cpu),
                )
            )
        devices = self._devices({n.id for n in numa_nodes})
        infos = root.infos()
        attributes = {"hwloc.xml_version": self.version}
        allowed = root.set_("allowed_cpuset")
        if allowed is not None and allowed & online_mask != online_mask:
            attributes["hwloc.allowed_cpus"] = str(CPUSet.from_mask(allowed & online_mask))
        return Machine(
            cpus=tuple(cpus),
            numa_nodes=tuple(numa_nodes),
            devices=tuple(devices),
            offline_cpus=CPUSet.from_mask(offline_mask),
            hostname=infos.get("HostName"),
            attributes=attributes,
        )

    def _socket_ids(self) -> dict[int, int]:
        """Package os_index when every package has a distinct one, else document order."""
        indexes = [p.el.get("os_index") for p in self.packages]
        if all(i is not None for i in indexes) and len(set(indexes)) == len(indexes):
            return {id(p): p.os_index() for p in self.packages}
        return {id(p): n for n, p in enumerate(self.packages)}

    # ---- NUMA nodes ----------------------------------------------------------------------------

    def _numa_nodes(self, root: _Obj, numa_of_cpu: dict[int, _Obj | None]) -> tuple[dict[int, int], list[NUMANode]]:
        if not self.numas:
            if self.v2:
                raise InputError("the topology has no NUMA node", field="NUMANode")
            # hwloc 1.x omitted NUMA nodes on UMA machines; hwloc 2 then adds node 0 with everything.
            cpus = CPUSet(numa_of_cpu)
            memory = _uint(root.el.get("local_memory"), f"{root.label()}.local_memory", default=0)
            return {}, [NUMANode(0, cpus, memory, self._hugepages(root))]
        missing = [cpu for cpu, numa in numa_of_cpu.items() if numa is None]
        if missing:
            raise InputError(f"PU {min(missing)} belongs to no NUMA node", field=f"PU P#{min(missing)}")
        ids = {id(n): n.os_index() for n in self.numas}
        assigned: dict[int, int] = {}
        for cpu, numa in numa_of_cpu.items():
            assigned[id(numa)] = assigned.get(id(numa), 0) | 1 << cpu
        localities = {}
        for node in self.numas:
            locality = node.set_("cpuset")
            if locality is None:
                raise InputError("is missing", field=f"{node.label()}.cpuset")
            mine = assigned.get(id(node), 0)
            stray = mine & ~locality
            if stray:
                cpu = stray.bit_length() - 1
                raise InputError(
                    f"PU {cpu} sits under NUMA node {ids[id(node)]} but its cpuset does not list it",
                    field=f"{node.label()}.cpuset",
                )
            localities[id(node)] = locality
        self._check_laminar(ids, localities)
        distances = self._distances(list(ids.values()))
        out = []
        for node in self.numas:
            nid = ids[id(node)]
            cpus = CPUSet.from_mask(assigned.get(id(node), 0))
            attributes = {}
            if (subtype := node.subtype()) is not None:
                attributes["subtype"] = subtype
            if not cpus and localities[id(node)]:
                attributes["local_cpus"] = str(CPUSet.from_mask(localities[id(node)]))
            out.append(
                NUMANode(
                    id=nid,
                    cpus=cpus,
                    memory_bytes=_uint(node.el.get("local_memory"), f"{node.label()}.local_memory", default=0),
                    hugepages=self._hugepages(node),
                    distances=distances.get(nid, {}),
                    attributes=attributes,
                )
            )
        return ids, out

    def _check_laminar(self, ids: dict[int, int], localities: dict[int, int]) -> None:
        """Two NUMA nodes may share CPUs only when one's locality contains the other's.

        Equal localities are memory nodes attached at the same place (DDR + MCDRAM); nested ones
        are memory attached higher up (a CXL node at machine level). A partial overlap means a CPU
        is claimed by two NUMA nodes that cannot both hold it.
        """
        items = list(localities.items())
        for i, (a, set_a) in enumerate(items):
            for b, set_b in items[i + 1 :]:
                common = set_a & set_b
                if common and common != set_a and common != set_b:
                    cpu = (common & -common).bit_length() - 1
                    raise InputError(
                        f"PU {cpu} appears in NUMA node {ids[a]} and NUMA node {ids[b]}",
                        field=f"NUMANode P#{ids[b]}.cpuset",
                    )

    def _hugepages(self, obj: _Obj) -> dict[int, int]:
        """Page sizes bigger than the node's smallest (base) page size -> their page counts."""
        pages: dict[int, int] = {}
        for child in obj.el:
            if child.tag != "page_type":
                continue
            field = f"{obj.label()}.page_type"
            size = _uint(child.get("size"), f"{field}.size", default=0)
            count = _uint(child.get("count"), f"{field}.count", default=0)
            if size:  # hwloc ignores size-less entries too
                pages[size] = count
        if not pages:
            return {}
        base = min(pages)
        return {size: count for size, count in pages.items() if size != base}

    # ---- distances ----------------------------------------------------------------------------

    def _distances(self, numa_ids: list[int]) -> dict[int, dict[int, int]]:
        matrix = self._v2_matrix() if self.v2 else self._v1_matrix(numa_ids)
        if matrix is None:
            # hwloc keeps no 1x1 matrix; the kernel reports "10" for a lone node, and so do we.
            return {numa_ids[0]: {numa_ids[0]: _LOCAL_DISTANCE}} if len(numa_ids) == 1 else {}
        order, values, field = matrix
        if len(set(order)) != len(order):
            raise InputError(f"the distance matrix lists a NUMA node twice: {order}", field=field)
        if set(order) != set(numa_ids):
            unknown = sorted(set(order) - set(numa_ids))
            if unknown:
                raise InputError(
                    f"the distance matrix names NUMA node {unknown[0]}, which has no NUMANode", field=field
                )
            return {}  # a matrix over a subset of the nodes cannot give every node a full row
        scaled = _slit_like(values, order, field)
        n = len(order)
        return {order[i]: {order[j]: scaled[i * n + j] for j in range(n)} for i in range(n)}

    def _v2_matrix(self) -> tuple[list[int], list[float], str] | None:
        candidates = []
        for el in self.top:
            if el.tag != "distances2":
                continue
            name = el.get("name")
            field = f"distances2[name={name}]" if name else "distances2"
            nbobjs = _uint(el.get("nbobjs"), f"{field}.nbobjs")
            kind = _uint(el.get("kind"), f"{field}.kind", default=0)
            indexes, values = _matrix_numbers(el, nbobjs, field)
            type_ = _TYPE_NAMES.get((el.get("type") or "").lower())
            if type_ != "NUMANode" or el.get("indexing") != "os" or nbobjs < 2:
                continue  # hwloc itself drops NUMA matrices that are not os-indexed
            if kind & _DIST_KIND_BANDWIDTH or not kind & _DIST_KIND_LATENCY:
                continue
            rank = 0 if name == "NUMALatency" else 1 if name is None else 2
            candidates.append((rank, len(candidates), [int(i) for i in indexes], values, field))
        if not candidates:
            return None
        _, _, order, values, field = min(candidates)
        return order, values, field

    def _v1_matrix(self, numa_ids: list[int]) -> tuple[list[int], list[float], str] | None:
        """hwloc's rule: a root-level matrix whose size is the NUMA node count, in document order."""
        root = self.objs[0]
        for el in root.el:
            if el.tag != "distances":
                continue
            field = "distances"
            nbobjs = _uint(el.get("nbobjs"), f"{field}.nbobjs")
            base = _float(el.get("latency_base"), f"{field}.latency_base")
            latencies = [c for c in el if c.tag == "latency"]
            if len(latencies) != nbobjs * nbobjs:
                raise InputError(
                    f"has {len(latencies)} <latency> values, {nbobjs}x{nbobjs} expected", field=f"{field}.latency"
                )
            if nbobjs == len(numa_ids) and nbobjs >= 2 and base > 0:
                values = [_float(c.get("value"), f"{field}.latency.value") * base for c in latencies]
                return numa_ids, values, field
        return None

    # ---- CPU kinds -------------------------------------------------------------------------------

    def _cpu_kinds(self) -> dict[int, str]:
        """CPU -> "performance" / "efficiency" on hybrid parts (two or more hwloc CPU kinds)."""
        kinds = []
        for el in self.top:
            if el.tag == "cpukind":
                text = el.get("cpuset")
                if text is None:
                    raise InputError("is missing", field="cpukind.cpuset")
                infos = {c.get("name"): c.get("value") for c in el if c.tag == "info"}
                kinds.append((_bitmap(text, "cpukind.cpuset"), el.get("forced_efficiency"), infos))
        if len(kinds) < 2:
            return {}
        ranks = _kind_ranks(kinds)
        if ranks is None:
            return {}
        best = max(ranks)
        out = {}
        for (mask, _, _), rank in zip(kinds, ranks):
            label = "performance" if rank == best else "efficiency"
            for cpu in _bits(mask):
                out[cpu] = label
        return out

    # ---- devices -------------------------------------------------------------------------------

    def _devices(self, numa_ids: set[int]) -> list[Device]:
        devices = []
        for dev in self.pcidevs:
            label = dev.label()
            busid = dev.el.get("pci_busid")
            if busid is None or _PCI_BUSID.match(busid) is None:
                raise InputError(f"{busid!r} is not a PCI address DDDD:BB:DD.F", field=f"{label}.pci_busid")
            address = busid.lower()
            pci_type = dev.el.get("pci_type")
            match = _PCI_TYPE.match(pci_type or "")
            if match is None:
                raise InputError(
                    f"{pci_type!r} is not 'CCSS [vvvv:dddd] [ssss:ssss] rr'", field=f"{label}.pci_type"
                )
            class_code = int(match.group(1), 16) << 8 | int(match.group(7) or "0", 16)
            vendor, device_id = int(match.group(2), 16), int(match.group(3), 16)
            attributes = {"subsystem": f"{match.group(4)}:{match.group(5)}".lower(), "revision": match.group(6).lower()}
            if (speed := dev.el.get("pci_link_speed")) is not None:
                attributes["link_speed_gbps"] = f"{_float(speed, f'{label}.pci_link_speed'):g}"
            infos = dev.infos()
            for info, key in _DEVICE_INFOS.items():
                if (value := infos.get(info)) is not None:
                    attributes.setdefault(key, value)
            name, memory, os_names, os_infos = self._os_devices(dev)
            if os_names:
                attributes["os_devices"] = ",".join(os_names)
            for info, key in _DEVICE_INFOS.items():
                if (value := os_infos.get(info)) is not None:
                    attributes.setdefault(key, value)
            devices.append(
                Device(
                    address=address,
                    kind=classify_pci_class(class_code, vendor),
                    numa_id=self._device_numa(dev, numa_ids),
                    vendor_id=vendor,
                    device_id=device_id,
                    class_code=class_code,
                    pcie_path=self._pcie_path(dev),
                    name=name,
                    memory_bytes=memory,
                    attributes=attributes,
                )
            )
        return devices

    def _device_numa(self, dev: _Obj, numa_ids: set[int]) -> int | None:
        """The NUMA node of the nearest non-I/O ancestor's nodeset when it holds exactly one."""
        node = dev.parent
        while node is not None and (node.type in _IO_TYPES or node.type == "Misc" or node.set_("nodeset") is None):
            node = node.parent
        if node is None:
            return next(iter(numa_ids)) if len(numa_ids) == 1 else None
        nodeset = node.set_("nodeset") or 0
        if nodeset.bit_count() != 1:
            return None
        numa = nodeset.bit_length() - 1
        if numa not in numa_ids:
            raise InputError(f"is local to NUMA node {numa}, which has no NUMANode", field=f"{node.label()}.nodeset")
        return numa

    @staticmethod
    def _pcie_path(dev: _Obj) -> tuple[str, ...]:
        """Host bridge (``pciDDDD:BB``) then PCI bridges by bus id, from the root complex down."""
        path = []
        node = dev.parent
        while node is not None and node.type in _IO_TYPES:
            if node.type == "Bridge":
                busid = node.el.get("pci_busid")
                if busid is not None:
                    path.append(busid.lower())
                elif (downstream := node.el.get("bridge_pci")) is not None:
                    match = _BRIDGE_PCI.match(downstream)
                    if match is None:
                        raise InputError(f"{downstream!r} is not 'DDDD:[BB-BB]'", field=f"{node.label()}.bridge_pci")
                    path.append(f"pci{int(match.group(1), 16):04x}:{match.group(2).lower()}")
            node = node.parent
        return tuple(reversed(path))

    @staticmethod
    def _os_devices(dev: _Obj) -> tuple[str | None, int | None, list[str], dict[str, str]]:
        """(preferred name, memory in bytes, all names, merged infos) of a PCI device's OS devices."""
        found = []
        merged: dict[str, str] = {}
        memory = None
        memory_rank = len(_GPU_MEMORY_INFOS)
        for position, child in enumerate(c for c in dev.el if c.tag == "object"):
            if (child.get("type") or "").lower() != "osdev":
                continue
            osdev = _Obj("OSDev", child, dev, None)
            name = child.get("name")
            infos = osdev.infos()
            for key, value in infos.items():
                merged.setdefault(key, value)
            for rank, key in enumerate(_GPU_MEMORY_INFOS):
                if rank < memory_rank and key in infos:
                    memory = _uint(infos[key], f"{osdev.label()}.info[{key}]") * 1024
                    memory_rank = rank
            if name:
                raw_type = child.get("osdev_type")
                osdev_type = None if raw_type is None else _uint(raw_type, f"{osdev.label()}.osdev_type")
                found.append((_osdev_preference(osdev_type, osdev.subtype() or infos.get("Backend")), position, name))
        found.sort()
        names = [name for _, _, name in found]
        return (names[0] if names else None), memory, names, merged


def _osdev_preference(osdev_type: int | None, subtype: str | None) -> int:
    """Which OS device names a PCI device: RDMA (mlx5_0) > net (eth0) > CUDA > NVML/RSMI > rest."""
    if osdev_type == _OSDEV_OPENFABRICS:
        return 0
    if osdev_type == _OSDEV_NETWORK:
        return 1
    if osdev_type == _OSDEV_COPROC and subtype == "CUDA":
        return 2
    if osdev_type == _OSDEV_GPU and subtype in ("NVML", "RSMI", "LevelZero"):
        return 3
    if osdev_type == _OSDEV_COPROC:
        return 4
    if osdev_type == _OSDEV_GPU:
        return 5
    if osdev_type == _OSDEV_BLOCK:
        return 6
    return 7


def _cpu_holder(nodes: list[_Obj]) -> _Obj:
    """Of the NUMA nodes attached at one place, the one whose CPUs these are.

    hwloc v2 gives every node attached at the same parent that parent's cpuset, so the XML does not
    say which node the kernel lists the CPUs under. Plain DRAM nodes (no subtype) win over
    MCDRAM/HBM/GPU/CXL memory; among equals the lowest os_index, as the kernel numbers CPU nodes
    first.
    """
    plain = [n for n in nodes if n.subtype() in (None, "DRAM")]
    return min(plain or nodes, key=lambda n: n.os_index())


def _kind_ranks(kinds: list[tuple[int, str | None, dict[str | None, str | None]]]) -> list[float] | None:
    """Rank CPU kinds by power: hwloc's forced efficiency, else Intel core type, else max frequency."""
    if all(eff is not None for _, eff, _ in kinds):
        try:
            return [float(eff) for _, eff, _ in kinds]  # type: ignore[arg-type]
        except ValueError:
            raise InputError("is not a number", field="cpukind.forced_efficiency") from None
    core_types = [infos.get("CoreType") for _, _, infos in kinds]
    if all(t in ("IntelCore", "IntelAtom") for t in core_types) and len(set(core_types)) > 1:
        return [1.0 if t == "IntelCore" else 0.0 for t in core_types]
    for key in ("FrequencyMaxMHz", "LinuxCapacity", "FrequencyBaseMHz"):
        values = [infos.get(key) for _, _, infos in kinds]
        if all(v is not None for v in values):
            numbers = [_float(v, f"cpukind.info[{key}]") for v in values]
            if len(set(numbers)) > 1:
                return numbers
    return None


def _matrix_numbers(el: ET.Element, nbobjs: int, field: str) -> tuple[list[int], list[float]]:
    """The ``<indexes>`` and ``<u64values>`` of a distances2 matrix (both may come in several chunks)."""
    indexes: list[int] = []
    values: list[float] = []
    for child in el:
        if child.tag not in ("indexes", "u64values"):
            continue
        target = indexes if child.tag == "indexes" else values
        for token in (child.text or "").split():
            target.append(_uint(token, f"{field}.{child.tag}"))
    if len(indexes) != nbobjs:
        raise InputError(f"has {len(indexes)} indexes for nbobjs={nbobjs}", field=f"{field}.indexes")
    if len(values) != nbobjs * nbobjs:
        raise InputError(f"has {len(values)} values, {nbobjs}x{nbobjs} expected", field=f"{field}.u64values")
    return indexes, values


def _slit_like(values: list[float], order: list[int], field: str) -> list[int]:
    """Scale a latency matrix so that the smallest local (diagonal) value is 10, like the ACPI SLIT.

    Linux-sourced matrices are SLIT values already (diagonal 10) and come out unchanged; other
    sources (hwloc 1.x relative latencies, user-given nanoseconds) become ``round(10 * d / local)``.
    """
    n = len(order)
    for k, value in enumerate(values):
        if value <= 0:
            raise InputError(
                f"distance {value:g} from NUMA node {order[k // n]} to {order[k % n]} is not positive", field=field
            )
    local = min(values[i * n + i] for i in range(n))
    if local == _LOCAL_DISTANCE and all(float(v).is_integer() for v in values):
        return [int(v) for v in values]
    return [max(1, int(_LOCAL_DISTANCE * v / local + 0.5)) for v in values]
