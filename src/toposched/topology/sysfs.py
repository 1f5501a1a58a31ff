"""Read a node's hardware topology from a Linux sysfs/procfs tree at any root.

``read_sysfs(root)`` reads ``<root>/sys`` and ``<root>/proc`` exactly as a running kernel exposes
them (``root="/"``), or as a snapshot unpacked anywhere (hwloc-gather-topology, ghw snapshots,
the project's own fixtures). It is a pure function of the files under ``root``.

What it follows (see docs/topology/sysfs.md for the reasons):

* Online CPUs come from ``devices/system/cpu/online`` (else ``cpuN/online``); CPUs that are
  present (``present``, else a ``cpuN`` directory) but not online are ``Machine.offline_cpus``.
* A core is, as cAdvisor (and so the kubelet) sees it, the online CPUs of one NUMA node with the
  same package and ``core_id``; CPUs without ``core_id`` follow their SMT sibling lists
  (``core_cpus_list``, ``thread_siblings_list`` or their hex-mask forms). Its id is the lowest
  online CPU id in it. (AMD Bulldozer's compute units are thread siblings with their own
  ``core_id``: one-thread cores, as hwloc and cAdvisor have them.)
* A CPU's NUMA node is the node whose ``cpulist`` (or ``cpumap``) lists it, else the node its
  ``cpuN/nodeM`` link names (a node that is offline gets no directory but keeps its CPUs).
  Without ``devices/system/node`` the machine has one NUMA node 0 with ``/proc/meminfo``'s memory.
* Partial snapshots are normal: a missing optional file, a dangling link, or a symlink stored
  as a plain file holding its target (as some archivers do) is tolerated. Contradictions are not:
  they raise :class:`~toposched.errors.InputError` naming the file and the field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from toposched.errors import InputError
from toposched.inputs import MAX_SYSFS_FILE_BYTES, read_within
from toposched.topology.cpuset import CPUSet
from toposched.topology.model import Device, LogicalCPU, Machine, NUMANode, classify_pci_class

__all__ = ["read_sysfs"]

_CPU_DIR = "sys/devices/system/cpu"
_NODE_DIR = "sys/devices/system/node"
_PCI_DIR = "sys/bus/pci/devices"

_CPU_NAME = re.compile(r"cpu(\d+)")
_NODE_NAME = re.compile(r"node(\d+)")
_INDEX_NAME = re.compile(r"index(\d+)")
_HUGEPAGES_NAME = re.compile(r"hugepages-(\d+)kB")
_HEX_MASK = re.compile(r"[0-9a-fA-F]+(,[0-9a-fA-F]*)*")
_FLAT_LINK = re.compile(r"(\.\./|\./)[^\s]*")
_MEMTOTAL = re.compile(r"MemTotal:\s*(\S+)")

_SIBLING_FILES = ("core_cpus_list", "thread_siblings_list", "core_cpus", "thread_siblings")
_PERFORMANCE = "performance"
_EFFICIENCY = "efficiency"
_PCI_BRIDGE_BASE_CLASS = 0x06  # host/PCI bridges: they appear in the pcie_path of what sits below them
# Sub-directories of a PCI function that name it, in order of preference.
_NAME_SUBSYSTEMS = ("infiniband", "net", "nvme", "drm")


def read_sysfs(root: str | os.PathLike[str] = "/") -> Machine:
    """Read the machine under ``root`` (``<root>/sys``, ``<root>/proc``) into a :class:`Machine`.

    Promises: the result is fully validated; offline CPUs are in ``offline_cpus`` only;
    CPU-less NUMA nodes are kept; every bad or contradictory input raises one
    :class:`InputError` whose ``source`` is the file and whose ``field`` is the value read.
    Reads files only, never writes, and does nothing else.
    """
    tree = _Tree(root)
    if not tree.isdir(_CPU_DIR):
        raise InputError("no CPU directory: not a sysfs tree", field="devices/system/cpu", source=tree.path(_CPU_DIR))
    cpus = _read_cpus(tree)
    numa = _read_numa(tree, cpus)
    kinds = _read_cpu_kinds(tree, cpus.online)
    core_of = _cores_within_nodes(cpus.core_of, numa.node_of)
    logical = tuple(
        LogicalCPU(
            id=cpu,
            core_id=core_of[cpu],
            socket_id=cpus.socket_of[cpu],
            numa_id=numa.node_of[cpu],
            die_id=cpus.die_of.get(cpu),
            cache_id=cpus.cache_of.get(cpu),
            kind=kinds.get(cpu),
        )
        for cpu in cpus.online
    )
    devices = _read_pci_devices(tree, numa)
    try:
        return Machine(
            cpus=logical,
            numa_nodes=numa.nodes,
            devices=devices,
            offline_cpus=cpus.offline,
            hostname=_read_hostname(tree),
        )
    except InputError as err:
        raise err.with_source(tree.path("")) from None


# ---- file access ---------------------------------------------------------------------------


class _Tree:
    """Read-only access to the files under a root, tolerant of partial snapshots.

    Paths are given relative to the root with ``/`` separators. Symlinks are followed; so are
    "flattened" symlinks (a small plain file whose whole content is a relative path), which is
    how some snapshot archives store links. Nothing resolves outside the root.
    """

    def __init__(self, root: str | os.PathLike[str]):
        self.shown = os.path.abspath(os.fspath(root))
        # Containment is judged on the resolved root: a snapshot reached through a symlinked
        # directory (a copied tree linked into place) is still one tree.
        self.root = os.path.realpath(self.shown)
        self._prefix = self.root.rstrip(os.sep) + os.sep
        self._dirs: dict[str, str | None] = {"": self.root}

    def path(self, rel: str) -> str:
        """The path shown in messages for ``rel`` (the naive join, as a user would type it)."""
        return self.shown.rstrip(os.sep) + os.sep + rel if rel else self.shown

    def _inside(self, real: str) -> bool:
        return real == self.root or real.startswith(self._prefix)

    def _follow_flat(self, real: str) -> str | None:
        """If ``real`` is a flattened link file, the real path it points at (one hop)."""
        data = read_within(self.root, real, limit=4096)
        if data is None:
            return None
        text = data.decode("utf-8", "replace").strip().strip("\x00")
        if not _FLAT_LINK.fullmatch(text):
            return None
        target = os.path.normpath(os.path.join(os.path.dirname(real), text))
        return target if self._inside(target) else None

    def real_dir(self, rel: str) -> str | None:
        """The on-disk directory for ``rel`` after following links, or None when there is none."""
        if rel in self._dirs:
            return self._dirs[rel]
        parent_rel, _, base = rel.rpartition("/")
        parent = self.real_dir(parent_rel)
        result: str | None = None
        candidate = None if parent is None else os.path.join(parent, base)
        hops = 0
        while candidate is not None and hops < 8:  # a bounded number of hops guards against link loops
            if os.path.isdir(candidate):
                real = os.path.realpath(candidate) if os.path.islink(candidate) else candidate
                if not self._inside(os.path.realpath(real)):
                    raise InputError(f"leads out of the snapshot, to {real}", field=base, source=candidate)
                result = real
                break
            candidate = self._follow_flat(candidate) if os.path.isfile(candidate) else None
            hops += 1
        self._dirs[rel] = result
        return result

    def isdir(self, rel: str) -> bool:
        """True when ``rel`` is (or links to) a directory."""
        return self.real_dir(rel) is not None

    def read(self, rel: str) -> str | None:
        """The stripped text of a file, or None when it is missing, unreadable or a directory."""
        # Only regular files that resolve inside the root are read (read_within): a snapshot's link
        # to /dev/zero, a FIFO or a file past MAX_SYSFS_FILE_BYTES reads as absent.
        data = read_within(self.root, self._prefix + rel)
        if data is None:
            if os.path.lexists(self._prefix + rel):
                real = os.path.realpath(self._prefix + rel)
                if os.path.exists(real) and not os.path.isdir(real):
                    raise InputError("is not a regular file inside the snapshot (a link out of it, a FIFO, a device "
                                     f"or larger than {MAX_SYSFS_FILE_BYTES:,} bytes)", field=rel.rpartition("/")[2],
                                     source=self._prefix + rel)
            parent_rel, _, base = rel.rpartition("/")
            parent = self.real_dir(parent_rel)
            if parent is None or parent == self.path(parent_rel):
                return None
            data = read_within(self.root, os.path.join(parent, base))
            if data is None:
                return None
        # Some snapshot tools keep the kernel's trailing NUL; it is never part of the value.
        return data.decode("utf-8", "replace").replace("\x00", "").strip()

    def listdir(self, rel: str) -> list[str]:
        """The entry names of a directory (empty when it is missing)."""
        real = self.real_dir(rel)
        if real is None:
            return []
        try:
            return os.listdir(real)
        except OSError:
            return []

    def link_target(self, rel: str) -> str | None:
        """Where the link ``rel`` points, as a normalised path relative to the root.

        Works for real symlinks (dangling or not) and flattened ones; None when ``rel`` is not
        a link or points outside the root.
        """
        parent = self.real_dir(rel.rpartition("/")[0])
        if parent is None:
            return None
        entry = os.path.join(parent, rel.rpartition("/")[2])
        if os.path.islink(entry):
            raw = os.readlink(entry)
            target = os.path.normpath(
                os.path.join(self.root, raw.lstrip("/")) if os.path.isabs(raw) else os.path.join(parent, raw)
            )
        elif os.path.isfile(entry):
            flat = self._follow_flat(entry)
            if flat is None:
                return None
            target = flat
        else:
            return None
        if not self._inside(target):
            return None
        return os.path.relpath(target, self.root).replace(os.sep, "/")


# ---- value parsers ---------------------------------------------------------------------------


def _cpulist(tree: _Tree, rel: str, field: str) -> CPUSet | None:
    text = tree.read(rel)
    if text is None:
        return None
    try:
        return CPUSet.parse(text)
    except InputError as err:
        raise InputError(err.message, field=field, source=tree.path(rel)) from None


def _cpumask(tree: _Tree, rel: str, field: str) -> CPUSet | None:
    """A kernel hex CPU mask ("00000000,0000ffff": 32-bit words, most significant first)."""
    text = tree.read(rel)
    if text is None:
        return None
    if not text:
        return CPUSet()
    if not _HEX_MASK.fullmatch(text):
        raise InputError(f"invalid CPU mask {text!r}: expected hex words separated by commas", field=field,
                         source=tree.path(rel))
    return CPUSet.from_mask(int(text.replace(",", ""), 16))


def _cpus_from(tree: _Tree, base: str, names: Iterable[str], present: set[str] | None = None) -> CPUSet | None:
    """The first of ``names`` under ``base`` that exists: ``*list`` files are lists, others masks.

    ``present`` is the directory's listing when the caller already has it.
    """
    if present is None:
        present = set(tree.listdir(base))
    for name in names:
        if name not in present:
            continue
        rel = f"{base}/{name}"
        parse = _cpulist if name.endswith("list") else _cpumask
        value = parse(tree, rel, name)
        if value is not None:
            return value
    return None


def _int(tree: _Tree, rel: str, field: str, *, base: int = 10) -> int | None:
    text = tree.read(rel)
    if text is None:
        return None
    return _to_int(text, tree, rel, field, base=base)


def _to_int(text: str, tree: _Tree, rel: str, field: str, *, base: int = 10) -> int:
    try:
        return int(text, base)
    except ValueError:
        raise InputError(f"{text!r} is not an integer", field=field, source=tree.path(rel)) from None


def _non_negative(value: int | None, tree: _Tree, rel: str, field: str) -> int | None:
    if value is not None and value < 0:
        raise InputError(f"{value} is negative", field=field, source=tree.path(rel))
    return value


# ---- CPUs ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Cpus:
    online: CPUSet
    offline: CPUSet
    core_of: dict[int, int]
    socket_of: dict[int, int]
    die_of: dict[int, int]
    cache_of: dict[int, int]
    node_links: dict[int, int]  # CPU -> NUMA id named by its cpuN/nodeM link


def _read_cpus(tree: _Tree) -> _Cpus:
    dirs = CPUSet(int(m.group(1)) for name in tree.listdir(_CPU_DIR) if (m := _CPU_NAME.fullmatch(name)))
    online = _cpulist(tree, f"{_CPU_DIR}/online", "online")
    if online is None:
        online = CPUSet(cpu for cpu in dirs if tree.read(f"{_CPU_DIR}/cpu{cpu}/online") != "0")
    else:
        for cpu in online & dirs:
            if tree.read(f"{_CPU_DIR}/cpu{cpu}/online") == "0":
                raise InputError(
                    f"CPU {cpu} is offline but {tree.path(_CPU_DIR + '/online')} lists it as online",
                    field="online",
                    source=tree.path(f"{_CPU_DIR}/cpu{cpu}/online"),
                )
    if not online:
        raise InputError("no online CPU", field="online", source=tree.path(f"{_CPU_DIR}/online"))
    present = _cpulist(tree, f"{_CPU_DIR}/present", "present")
    offline = (present if present is not None else dirs) - online

    socket_of: dict[int, int] = {}
    siblings: dict[int, CPUSet] = {}
    sibling_source: dict[int, str] = {}
    core_key: dict[int, tuple[int, int]] = {}
    dies: dict[int, int] = {}
    node_links: dict[int, int] = {}
    for cpu in online:
        entries = tree.listdir(f"{_CPU_DIR}/cpu{cpu}")
        linked = [int(m.group(1)) for n in entries if (m := _NODE_NAME.fullmatch(n))]
        if len(linked) == 1:
            node_links[cpu] = linked[0]
        topo = f"{_CPU_DIR}/cpu{cpu}/topology"
        files = set(tree.listdir(topo)) if "topology" in entries else set()
        package = _int(tree, f"{topo}/physical_package_id", "physical_package_id") if (
            "physical_package_id" in files) else None
        # -1 is the kernel's "unknown package" (some virtual machines and older ARM kernels).
        if package is not None and package < -1:
            raise InputError(f"{package} is negative", field="physical_package_id",
                             source=tree.path(f"{topo}/physical_package_id"))
        socket_of[cpu] = 0 if package is None or package == -1 else package
        if "die_id" in files:
            die = _non_negative(_int(tree, f"{topo}/die_id", "die_id"), tree, f"{topo}/die_id", "die_id")
            if die is not None:
                dies[cpu] = die
        sib_name = next((name for name in _SIBLING_FILES if name in files), None)
        sib = None if sib_name is None else _cpus_from(tree, topo, (sib_name,), files)
        if sib is not None:
            siblings[cpu] = (sib & online) | CPUSet([cpu])
            sibling_source[cpu] = f"{topo}/{sib_name}"
        if "core_id" in files:
            core_id = _non_negative(_int(tree, f"{topo}/core_id", "core_id"), tree, f"{topo}/core_id", "core_id")
            if core_id is not None:
                core_key[cpu] = (socket_of[cpu], core_id)

    core_of = _assign_cores(tree, online, siblings, sibling_source, core_key, socket_of)
    die_of = _real_dies(dies, socket_of)
    cache_of = _read_llc(tree, online)
    return _Cpus(online, offline, core_of, socket_of, die_of, cache_of, node_links)


def _assign_cores(
    tree: _Tree,
    online: CPUSet,
    siblings: dict[int, CPUSet],
    sibling_source: dict[int, str],
    core_key: dict[int, tuple[int, int]],
    socket_of: dict[int, int],
) -> dict[int, int]:
    """Core id of every online CPU: the lowest online CPU id of its core.

    A core is the CPUs with the same package and ``core_id``, as cAdvisor groups them and so the
    kubelet sees them (AMD Bulldozer's compute units are thread siblings with their own
    ``core_id``: one-thread cores); CPUs without ``core_id`` follow their sibling lists. Siblings
    must agree: CPU a listing b means b lists the same set, in the same package.
    """
    core_of: dict[int, int] = {}
    for cpu, sib in siblings.items():
        for other in sib:
            if other in siblings and siblings[other] != sib:
                rel = sibling_source[other]
                raise InputError(
                    f"CPU {other} has siblings {siblings[other]} but CPU {cpu} says {sib}",
                    field=rel.rpartition("/")[2],
                    source=tree.path(rel),
                )
            if socket_of[other] != socket_of[cpu]:
                rel = sibling_source[cpu]
                raise InputError(
                    f"SMT siblings {cpu} and {other} are in packages {socket_of[cpu]} and {socket_of[other]}",
                    field="physical_package_id",
                    source=tree.path(rel.rpartition("/")[0] + "/physical_package_id"),
                )
        if cpu not in core_key:
            core_of[cpu] = min(sib)
    lowest: dict[tuple[int, int], int] = {}
    for cpu in online:
        if cpu not in core_of and cpu in core_key:
            lowest.setdefault(core_key[cpu], cpu)
    for cpu in online:
        if cpu in core_key:
            core_of[cpu] = lowest[core_key[cpu]]
        elif cpu not in core_of:
            core_of[cpu] = cpu
    return core_of


def _cores_within_nodes(core_of: dict[int, int], node_of: dict[int, int]) -> dict[int, int]:
    """``core_of`` with every core cut at NUMA node borders (cAdvisor reads a node's cores from
    that node's CPUs only, so ``core_id`` repeating in another node of the package is another
    core); a core's id stays the lowest CPU id in it."""
    lowest: dict[tuple[int, int | None], int] = {}
    for cpu in sorted(core_of):
        lowest.setdefault((core_of[cpu], node_of.get(cpu)), cpu)
    return {cpu: lowest[(core, node_of.get(cpu))] for cpu, core in core_of.items()}


def _real_dies(dies: dict[int, int], socket_of: dict[int, int]) -> dict[int, int]:
    """Keep die ids only when some package really has several dies (as hwloc does)."""
    per_socket: dict[int, set[int]] = {}
    for cpu, die in dies.items():
        per_socket.setdefault(socket_of[cpu], set()).add(die)
    if any(len(ids) > 1 for ids in per_socket.values()):
        return dies
    return {}


def _read_llc(tree: _Tree, online: CPUSet) -> dict[int, int]:
    """Last-level cache id of each CPU: the lowest online CPU id sharing that cache."""
    cache_of: dict[int, int] = {}
    for cpu in online:
        base = f"{_CPU_DIR}/cpu{cpu}/cache"
        best_level = -1
        best: CPUSet | None = None
        for name in tree.listdir(base):
            if not _INDEX_NAME.fullmatch(name):
                continue
            index = f"{base}/{name}"
            level = _non_negative(_int(tree, f"{index}/level", "level"), tree, f"{index}/level", "level")
            if level is None or level <= best_level or tree.read(f"{index}/type") == "Instruction":
                continue
            shared = _cpus_from(tree, index, ("shared_cpu_list", "shared_cpu_map"))
            if shared is None:
                continue
            best_level, best = level, shared
        if best is not None:
            cache_of[cpu] = min((best & online) | CPUSet([cpu]))
    return cache_of


def _read_cpu_kinds(tree: _Tree, online: CPUSet) -> dict[int, str]:
    """CPU kinds on hybrid parts, from the first source the tree has.

    ``devices/cpu_core`` / ``devices/cpu_atom`` (Intel hybrid PMUs), then unequal
    ``cpu_capacity`` (ARM big.LITTLE), then unequal ``cpufreq/base_frequency`` (intel_pstate).
    The most capable CPUs are ``performance``, the others ``efficiency``.
    """
    core = _cpulist(tree, "sys/devices/cpu_core/cpus", "cpus")
    atom = _cpulist(tree, "sys/devices/cpu_atom/cpus", "cpus")
    if core is not None and atom is not None:
        kinds = dict.fromkeys(core & online, _PERFORMANCE)
        kinds.update(dict.fromkeys(atom & online, _EFFICIENCY))
        return kinds
    for leaf in ("cpu_capacity", "cpufreq/base_frequency"):
        values = {}
        for cpu in online:
            value = _int(tree, f"{_CPU_DIR}/cpu{cpu}/{leaf}", leaf)
            if value is None:
                break
            values[cpu] = value
        else:
            if len(set(values.values())) > 1:
                top = max(values.values())
                return {cpu: _PERFORMANCE if v == top else _EFFICIENCY for cpu, v in values.items()}
    return {}


# ---- NUMA nodes ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Numa:
    nodes: tuple[NUMANode, ...]
    node_of: dict[int, int]  # online CPU -> NUMA id
    raw_cpus: dict[int, CPUSet]  # NUMA id -> CPUs of its cpulist, offline ones included


def _read_numa(tree: _Tree, cpus: _Cpus) -> _Numa:
    if not tree.isdir(_NODE_DIR):
        memory, hugepages = _machine_memory(tree)
        node = NUMANode(0, cpus.online, memory_bytes=memory, hugepages=hugepages)
        return _Numa((node,), dict.fromkeys(cpus.online, 0), {0: cpus.online})

    ids = sorted(int(m.group(1)) for n in tree.listdir(_NODE_DIR) if (m := _NODE_NAME.fullmatch(n)))
    ids = [i for i in ids if tree.isdir(f"{_NODE_DIR}/node{i}")]
    raw: dict[int, CPUSet] = {}
    listed_in: dict[int, tuple[int, str]] = {}
    for nid in ids:
        base = f"{_NODE_DIR}/node{nid}"
        node_cpus = _cpus_from(tree, base, ("cpulist", "cpumap"))
        if node_cpus is None:
            continue
        source = tree.path(f"{base}/cpulist" if tree.read(f"{base}/cpulist") is not None else f"{base}/cpumap")
        for cpu in node_cpus:
            if cpu in listed_in:
                raise InputError(
                    f"CPU {cpu} is also listed by NUMA node {listed_in[cpu][0]} ({listed_in[cpu][1]})",
                    field="cpulist",
                    source=source,
                )
            listed_in[cpu] = (nid, source)
        raw[nid] = node_cpus

    node_of: dict[int, int] = {}
    for cpu in cpus.online:
        if cpu in listed_in:
            node_of[cpu] = listed_in[cpu][0]
        elif cpu in cpus.node_links:
            node_of[cpu] = cpus.node_links[cpu]
        elif len(ids) == 1:
            node_of[cpu] = ids[0]
        else:
            raise InputError(
                f"online CPU {cpu} belongs to no NUMA node (no node*/cpulist lists it, no cpu{cpu}/node* link)",
                field="cpulist",
                source=tree.path(_NODE_DIR),
            )
    # A node can be offline (no directory) while the kernel still maps online CPUs to it.
    all_ids = sorted(set(ids) | set(node_of.values()))

    rows = _read_distances(tree, ids)
    if any(nid not in rows for nid in all_ids):
        rows = {}  # a partial matrix cannot be used: the model wants every row or none

    nodes = []
    for nid in all_ids:
        base = f"{_NODE_DIR}/node{nid}"
        online_here = CPUSet(cpu for cpu, owner in node_of.items() if owner == nid)
        nodes.append(
            NUMANode(
                nid,
                online_here,
                memory_bytes=_node_memory(tree, f"{base}/meminfo"),
                hugepages=_hugepages(tree, f"{base}/hugepages"),
                distances={col: d for col, d in rows.get(nid, {}).items() if col in all_ids},
            )
        )
    return _Numa(tuple(nodes), node_of, raw)


def _read_distances(tree: _Tree, ids: list[int]) -> dict[int, dict[int, int]]:
    """Distance rows of the nodes that have a ``distance`` file, keyed by column NUMA id.

    The kernel prints one column per *online* node, in ascending id order. When ``node/online``
    is missing or disagrees with the row length, the node directories (hwloc's rule) and then
    ``node/possible`` are tried; a row that fits none of them is an error.
    """
    candidates = []
    online = _cpulist(tree, f"{_NODE_DIR}/online", "online")
    if online is not None:
        candidates.append(list(online))
    candidates.append(ids)
    possible = _cpulist(tree, f"{_NODE_DIR}/possible", "possible")
    if possible is not None:
        candidates.append(list(possible))
    rows: dict[int, dict[int, int]] = {}
    for nid in ids:
        rel = f"{_NODE_DIR}/node{nid}/distance"
        text = tree.read(rel)
        if text is None:
            continue
        values = [_to_int(tok, tree, rel, "distance") for tok in text.split()]
        bad = [v for v in values if v <= 0]
        if bad:
            raise InputError(f"distance {bad[0]} is not positive", field="distance", source=tree.path(rel))
        columns = next((c for c in candidates if len(c) == len(values)), None)
        if columns is None:
            raise InputError(
                f"{len(values)} distances, but {len(ids)} NUMA nodes exist"
                + (f" and {len(online)} are online" if online is not None else ""),
                field="distance",
                source=tree.path(rel),
            )
        rows[nid] = dict(zip(columns, values))
    return rows


def _node_memory(tree: _Tree, rel: str) -> int:
    text = tree.read(rel)
    if text is None:
        return 0
    match = _MEMTOTAL.search(text)
    if match is None:
        return 0
    kib = _to_int(match.group(1), tree, rel, "MemTotal")
    _non_negative(kib, tree, rel, "MemTotal")
    return kib * 1024


def _hugepages(tree: _Tree, rel: str) -> dict[int, int]:
    pages: dict[int, int] = {}
    for name in tree.listdir(rel):
        match = _HUGEPAGES_NAME.fullmatch(name)
        if match is None:
            continue
        count_rel = f"{rel}/{name}/nr_hugepages"
        count = _non_negative(_int(tree, count_rel, "nr_hugepages"), tree, count_rel, "nr_hugepages")
        if count is not None:
            pages[int(match.group(1)) * 1024] = count
    return pages


def _machine_memory(tree: _Tree) -> tuple[int, dict[int, int]]:
    """Memory and hugepages of a machine without NUMA directories, from /proc and /sys/kernel/mm."""
    memory = _node_memory(tree, "proc/meminfo")
    hugepages = _hugepages(tree, "sys/kernel/mm/hugepages")
    if not hugepages:
        text = tree.read("proc/meminfo") or ""
        total = re.search(r"HugePages_Total:\s*(\S+)", text)
        size = re.search(r"Hugepagesize:\s*(\S+)\s*kB", text)
        if total and size:
            count = _to_int(total.group(1), tree, "proc/meminfo", "HugePages_Total")
            kib = _to_int(size.group(1), tree, "proc/meminfo", "Hugepagesize")
            _non_negative(count, tree, "proc/meminfo", "HugePages_Total")
            if kib > 0:
                hugepages[kib * 1024] = count
    return memory, hugepages


# ---- PCI devices -----------------------------------------------------------------------------


def _read_pci_devices(tree: _Tree, numa: _Numa) -> tuple[Device, ...]:
    known = {n.id for n in numa.nodes}
    devices = []
    for address in sorted(tree.listdir(_PCI_DIR)):
        entry = f"{_PCI_DIR}/{address}"
        target = tree.link_target(entry)
        path: tuple[str, ...] = ()
        dev = entry
        if target is not None:
            dev = target
            parts = target.split("/")
            roots = [i for i, p in enumerate(parts) if p.startswith("pci")]
            if roots:
                path = tuple(parts[roots[0]:-1])
        class_code = _int(tree, f"{dev}/class", "class", base=16)
        if class_code is not None and class_code >> 16 == _PCI_BRIDGE_BASE_CLASS:
            continue
        vendor = _int(tree, f"{dev}/vendor", "vendor", base=16)
        device = _int(tree, f"{dev}/device", "device", base=16)
        for field, value in (("class", class_code), ("vendor", vendor), ("device", device)):
            _non_negative(value, tree, f"{dev}/{field}", field)
        numa_id = _device_numa(tree, dev, numa, known)
        devices.append(
            Device(
                address=address,
                kind=classify_pci_class(class_code, vendor),
                numa_id=numa_id,
                vendor_id=vendor,
                device_id=device,
                class_code=class_code,
                pcie_path=path,
                name=_device_name(tree, dev),
            )
        )
    return tuple(devices)


def _device_numa(tree: _Tree, dev: str, numa: _Numa, known: set[int]) -> int | None:
    """``numa_node`` (-1: no affinity); without the file, the one node its local CPUs fall in."""
    rel = f"{dev}/numa_node"
    value = _int(tree, rel, "numa_node")
    if value is None:
        local = _cpus_from(tree, dev, ("local_cpulist", "local_cpus"))
        if not local:
            return None
        hits = [nid for nid, cpus in numa.raw_cpus.items() if not cpus.isdisjoint(local)]
        return hits[0] if len(hits) == 1 else None
    if value == -1:
        return None
    if value < -1:
        raise InputError(f"{value} is negative (only -1, no affinity, is allowed)", field="numa_node",
                         source=tree.path(rel))
    if value not in known:
        raise InputError(f"NUMA node {value} does not exist (nodes: {sorted(known)})", field="numa_node",
                         source=tree.path(rel))
    return value


def _device_name(tree: _Tree, dev: str) -> str | None:
    """The kernel's name for the function, also looking inside a virtio child (virtio-net)."""
    entries = tree.listdir(dev)
    bases = [dev] + [f"{dev}/{e}" for e in sorted(entries) if re.fullmatch(r"virtio\d+", e)]
    for subsystem in _NAME_SUBSYSTEMS:
        for base in bases:
            names = sorted(tree.listdir(f"{base}/{subsystem}"))
            if subsystem == "drm":
                names = [n for n in names if re.fullmatch(r"card\d+", n)]
            if names:
                return names[0]
    return None


def _read_hostname(tree: _Tree) -> str | None:
    for rel in ("proc/sys/kernel/hostname", "etc/hostname"):
        text = tree.read(rel)
        if text:
            return text.splitlines()[0].strip()
    return None
