"""The hardware model: machine → sockets → (dies) → NUMA nodes → cores → logical CPUs, and devices.

Pure data. Readers (sysfs, hwloc XML, NodeResourceTopology) all build a :class:`Machine`; every
other layer (kubelet model, scheduler, simulator) reads it. Conventions:

* A core's ``id`` is unique machine-wide. Readers use the lowest logical CPU id of the core, the
  same rule the kubelet applies to cAdvisor's per-socket core ids.
* ``numa_nodes`` holds every NUMA node, including memory-only nodes (HBM, CXL, GPU memory)
  whose ``cpus`` is empty.
* Offline CPUs are not part of ``cpus``; their ids are kept in ``offline_cpus``.
* Hugepages are keyed by page size in bytes; memory is in bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from toposched.errors import InputError
from toposched.quantity import check_amount
from toposched.topology.cpuset import CPUSet

__all__ = [
    "Core",
    "Device",
    "DeviceKind",
    "LogicalCPU",
    "Machine",
    "NUMANode",
    "Socket",
    "classify_pci_class",
]

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


def _frozen_map(value: Mapping[Any, Any] | None) -> Mapping[Any, Any]:
    return MappingProxyType(dict(value)) if value else _EMPTY


@dataclass(frozen=True, slots=True)
class LogicalCPU:
    """One online hardware thread (hwloc's PU)."""

    id: int
    core_id: int
    socket_id: int
    numa_id: int
    die_id: int | None = None
    cache_id: int | None = None  # last-level (uncore) cache shared by this CPU, when known
    kind: str | None = None  # CPU kind on hybrid parts ("performance"/"efficiency"), when known


@dataclass(frozen=True, slots=True)
class Core:
    """A physical core and its online SMT siblings."""

    id: int
    socket_id: int
    numa_id: int
    cpus: CPUSet
    die_id: int | None = None


@dataclass(frozen=True, slots=True)
class Socket:
    """A processor package."""

    id: int
    cpus: CPUSet
    core_ids: tuple[int, ...]
    numa_ids: tuple[int, ...]
    die_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class NUMANode:
    """A NUMA node: its online CPUs (empty for memory-only nodes), memory, hugepages, distances."""

    id: int
    cpus: CPUSet = CPUSet()
    memory_bytes: int = 0
    hugepages: Mapping[int, int] = field(default_factory=lambda: _EMPTY)  # page size in bytes -> number of pages
    distances: Mapping[int, int] = field(default_factory=lambda: _EMPTY)  # NUMA id -> distance (10 = local, like the ACPI SLIT)
    attributes: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hugepages", _frozen_map(self.hugepages))
        object.__setattr__(self, "distances", _frozen_map(self.distances))
        object.__setattr__(self, "attributes", _frozen_map(self.attributes))

    @property
    def cpu_less(self) -> bool:
        """True for a memory-only node (HBM, CXL, GPU memory)."""
        return not self.cpus


class DeviceKind(StrEnum):
    """The device classes the scheduler distinguishes."""

    GPU = "gpu"
    NIC = "nic"
    INFINIBAND = "infiniband"
    NVME = "nvme"
    ACCELERATOR = "accelerator"
    OTHER = "other"


_GPU_VENDORS = {0x10DE, 0x1002}  # NVIDIA, AMD: their VGA-class functions are compute GPUs


def classify_pci_class(class_code: int | None, vendor_id: int | None = None) -> DeviceKind:
    """Map a 24-bit PCI class code (e.g. 0x030200) and vendor to a :class:`DeviceKind`.

    Display controllers count as GPUs when they are 3D controllers (0x0302), "other display"
    (0x0380, used by AMD Instinct) or a VGA function of NVIDIA/AMD; a server's BMC VGA (Matrox,
    ASPEED) stays ``other``.
    """
    if class_code is None:
        return DeviceKind.OTHER
    base, sub = class_code >> 16 & 0xFF, class_code >> 8 & 0xFF
    if base == 0x03:
        if sub in (0x02, 0x80) or (sub == 0x00 and vendor_id in _GPU_VENDORS):
            return DeviceKind.GPU
        return DeviceKind.OTHER
    if base == 0x02:
        if sub in (0x07, 0x08):  # InfiniBand, fabric (Omni-Path)
            return DeviceKind.INFINIBAND
        return DeviceKind.NIC
    if base == 0x0C and sub == 0x06:  # serial bus controller: InfiniBand (older Mellanox HCAs)
        return DeviceKind.INFINIBAND
    if base == 0x01 and sub == 0x08:
        return DeviceKind.NVME
    if (base == 0x0B and sub == 0x40) or base == 0x12:  # co-processor, processing accelerator
        return DeviceKind.ACCELERATOR
    return DeviceKind.OTHER


@dataclass(frozen=True, slots=True)
class Device:
    """A PCI device (or a device known only by id, from a NodeResourceTopology report).

    ``pcie_path`` lists the upstream ports from the root complex down to the device's parent
    (e.g. ``("pci0000:00", "0000:00:03.0", "0000:02:00.0")``): two devices whose paths share a
    switch port sit under the same PCIe switch.
    """

    address: str
    kind: DeviceKind = DeviceKind.OTHER
    numa_id: int | None = None
    vendor_id: int | None = None
    device_id: int | None = None
    class_code: int | None = None
    pcie_path: tuple[str, ...] = ()
    name: str | None = None
    memory_bytes: int | None = None
    attributes: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", _frozen_map(self.attributes))

    def __hash__(self) -> int:
        return hash(("Device", self.address))


@dataclass(frozen=True, eq=False)
class Machine:
    """A whole node's hardware. Built once by a reader, then read-only.

    Construction validates the model (a CPU in exactly one NUMA node, distance rows complete,
    no negative quantities) and raises :class:`InputError` naming the field otherwise.
    """

    cpus: tuple[LogicalCPU, ...]
    numa_nodes: tuple[NUMANode, ...]
    devices: tuple[Device, ...] = ()
    offline_cpus: CPUSet = CPUSet()
    hostname: str | None = None
    attributes: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    # Derived in __post_init__.
    online: CPUSet = field(init=False)
    cores: tuple[Core, ...] = field(init=False)
    sockets: tuple[Socket, ...] = field(init=False)
    _cpu_by_id: dict[int, LogicalCPU] = field(init=False, repr=False)
    _numa_by_id: dict[int, NUMANode] = field(init=False, repr=False)
    _core_by_id: dict[int, Core] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        cpus = tuple(sorted(self.cpus, key=lambda c: c.id))
        nodes = tuple(sorted(self.numa_nodes, key=lambda n: n.id))
        setattr_ = object.__setattr__
        setattr_(self, "cpus", cpus)
        setattr_(self, "numa_nodes", nodes)
        setattr_(self, "devices", tuple(self.devices))
        setattr_(self, "attributes", _frozen_map(self.attributes))
        self._validate(cpus, nodes)
        setattr_(self, "_cpu_by_id", {c.id: c for c in cpus})
        setattr_(self, "_numa_by_id", {n.id: n for n in nodes})
        setattr_(self, "online", CPUSet(c.id for c in cpus))

        core_cpus: dict[int, list[LogicalCPU]] = {}
        for c in cpus:
            core_cpus.setdefault(c.core_id, []).append(c)
        cores = []
        for core_id in sorted(core_cpus):
            members = core_cpus[core_id]
            head = members[0]
            for m in members[1:]:
                if m.socket_id != head.socket_id:
                    raise InputError(
                        f"core {core_id} has CPUs {head.id} and {m.id} in different sockets",
                        field="cpus.core_id",
                    )
            cores.append(Core(core_id, head.socket_id, head.numa_id, CPUSet(m.id for m in members), head.die_id))
        setattr_(self, "cores", tuple(cores))
        setattr_(self, "_core_by_id", {c.id: c for c in cores})

        by_socket: dict[int, list[Core]] = {}
        for core in cores:
            by_socket.setdefault(core.socket_id, []).append(core)
        sockets = []
        for sid in sorted(by_socket):
            members_c = by_socket[sid]
            mask = 0
            for core in members_c:
                mask |= core.cpus.mask
            sockets.append(
                Socket(
                    sid,
                    CPUSet.from_mask(mask),
                    tuple(c.id for c in members_c),
                    tuple(sorted({c.numa_id for c in members_c})),
                    tuple(sorted({c.die_id for c in members_c if c.die_id is not None})),
                )
            )
        setattr_(self, "sockets", tuple(sockets))

    @staticmethod
    def _validate(cpus: tuple[LogicalCPU, ...], nodes: tuple[NUMANode, ...]) -> None:
        node_ids = [n.id for n in nodes]
        if len(set(node_ids)) != len(node_ids):
            raise InputError(f"NUMA node ids repeat: {node_ids}", field="numa_nodes")
        if not nodes:
            raise InputError("a machine needs at least one NUMA node", field="numa_nodes")
        seen: set[int] = set()
        for c in cpus:
            if c.id in seen:
                raise InputError(f"CPU {c.id} is listed twice", field="cpus")
            seen.add(c.id)
            if min(c.id, c.core_id, c.socket_id, c.numa_id) < 0:
                raise InputError(f"CPU {c.id} has a negative id", field="cpus")
        owner: dict[int, int] = {}
        known = set(node_ids)
        for n in nodes:
            if n.id < 0:
                raise InputError(f"NUMA node id {n.id} is negative", field="numa_nodes")
            check_amount(n.memory_bytes, field=f"numa_nodes[{n.id}].memory_bytes")
            for size, count in n.hugepages.items():
                if size <= 0 or count < 0:
                    raise InputError(
                        f"hugepages {size}: {count} is not a positive size with a non-negative count",
                        field=f"numa_nodes[{n.id}].hugepages",
                    )
                check_amount(size * count, field=f"numa_nodes[{n.id}].hugepages[{size}]")
            for cpu in n.cpus:
                if cpu in owner:
                    raise InputError(
                        f"CPU {cpu} appears in NUMA node {owner[cpu]} and NUMA node {n.id}",
                        field=f"numa_nodes[{n.id}].cpus",
                    )
                owner[cpu] = n.id
            if n.distances:
                missing = known - set(n.distances)
                if missing:
                    raise InputError(
                        f"distance row lacks NUMA nodes {sorted(missing)}", field=f"numa_nodes[{n.id}].distances"
                    )
                bad = {k: v for k, v in n.distances.items() if v <= 0}
                if bad:
                    raise InputError(f"distances must be positive, got {bad}", field=f"numa_nodes[{n.id}].distances")
        if any(n.distances for n in nodes) and not all(n.distances for n in nodes):
            raise InputError("some NUMA nodes have distances and others do not", field="numa_nodes.distances")
        for c in cpus:
            if owner.get(c.id) != c.numa_id:
                raise InputError(
                    f"CPU {c.id} says NUMA node {c.numa_id} but NUMA node {owner.get(c.id)} lists it",
                    field=f"cpus[{c.id}].numa_id",
                )
        stray = set(owner) - seen
        if stray:
            raise InputError(f"NUMA nodes list unknown CPUs {CPUSet(stray)}", field="numa_nodes.cpus")

    # ---- construction helpers -------------------------------------------------------------

    @classmethod
    def from_cpu_table(
        cls,
        rows: Iterable[Mapping[str, int]],
        *,
        memory_per_numa: int | Mapping[int, int] = 0,
        distances: Mapping[int, Mapping[int, int]] | None = None,
        numa_ids: Iterable[int] = (),
    ) -> Machine:
        """Build a machine from rows ``{"cpu", "core", "socket", "numa"}`` (optional ``"die"``, ``"cache"``).

        Core ids must be unique machine-wide, as in the kubelet's ``CPUDetails``. This is the
        form the kubelet's own tests describe their machines in. ``numa_ids`` adds CPU-less nodes.
        """
        cpus = [
            LogicalCPU(
                id=int(r["cpu"]),
                core_id=int(r["core"]),
                socket_id=int(r["socket"]),
                numa_id=int(r["numa"]),
                die_id=r.get("die"),
                cache_id=r.get("cache"),
            )
            for r in rows
        ]
        ids = sorted({c.numa_id for c in cpus} | set(numa_ids))
        nodes = []
        for nid in ids:
            mem = memory_per_numa.get(nid, 0) if isinstance(memory_per_numa, Mapping) else memory_per_numa
            nodes.append(
                NUMANode(
                    nid,
                    CPUSet(c.id for c in cpus if c.numa_id == nid),
                    memory_bytes=mem,
                    distances=distances.get(nid, {}) if distances else {},
                )
            )
        return cls(tuple(cpus), tuple(nodes))

    # ---- queries ----------------------------------------------------------------------------

    @property
    def numa_ids(self) -> tuple[int, ...]:
        """All NUMA node ids, ascending (memory-only nodes included)."""
        return tuple(n.id for n in self.numa_nodes)

    def numa(self, numa_id: int) -> NUMANode:
        """The NUMA node with this id; ``KeyError`` if the machine has none."""
        return self._numa_by_id[numa_id]

    def cpu(self, cpu_id: int) -> LogicalCPU:
        """The online CPU with this id; ``KeyError`` if there is none."""
        return self._cpu_by_id[cpu_id]

    def core(self, core_id: int) -> Core:
        """The core with this machine-wide id."""
        return self._core_by_id[core_id]

    def has_numa(self, numa_id: int) -> bool:
        """True when the machine has a NUMA node with this id."""
        return numa_id in self._numa_by_id

    def distance(self, a: int, b: int) -> int:
        """NUMA distance from ``a`` to ``b``; 10 locally and 20 elsewhere when the machine reports none."""
        row = self._numa_by_id[a].distances
        if row:
            return row[b]
        return 10 if a == b else 20

    def siblings(self, cpu_id: int) -> CPUSet:
        """The online SMT siblings of a CPU, itself included."""
        return self._core_by_id[self._cpu_by_id[cpu_id].core_id].cpus

    @property
    def threads_per_core(self) -> int:
        """Online hardware threads per core (the maximum over cores; 1 without SMT)."""
        return max((len(c.cpus) for c in self.cores), default=1)

    def cpus_in_numa(self, numa_ids: Iterable[int]) -> CPUSet:
        """Online CPUs of the given NUMA nodes."""
        mask = 0
        for n in numa_ids:
            mask |= self._numa_by_id[n].cpus.mask
        return CPUSet.from_mask(mask)

    def numa_of(self, cpus: CPUSet) -> frozenset[int]:
        """The NUMA nodes that the given online CPUs belong to."""
        return frozenset(self._cpu_by_id[c].numa_id for c in cpus)

    def devices_of(self, kind: DeviceKind) -> tuple[Device, ...]:
        """The devices of one kind, in the order the reader found them."""
        return tuple(d for d in self.devices if d.kind == kind)

    def with_devices(self, devices: Iterable[Device]) -> Machine:
        """A copy of this machine with a different device list."""
        return Machine(self.cpus, self.numa_nodes, tuple(devices), self.offline_cpus, self.hostname, self.attributes)

    def to_dict(self) -> dict[str, Any]:
        """The full model as plain JSON-ready data (the ``discover -o json`` shape)."""
        return {
            "hostname": self.hostname,
            "attributes": dict(self.attributes),
            "sockets": [
                {"id": s.id, "cpus": str(s.cpus), "cores": list(s.core_ids), "numa_nodes": list(s.numa_ids),
                 "dies": list(s.die_ids)}
                for s in self.sockets
            ],
            "numa_nodes": [
                {
                    "id": n.id,
                    "cpus": str(n.cpus),
                    "memory_bytes": n.memory_bytes,
                    "hugepages": {str(k): v for k, v in sorted(n.hugepages.items())},
                    "distances": {str(k): v for k, v in sorted(n.distances.items())},
                    "attributes": dict(n.attributes),
                }
                for n in self.numa_nodes
            ],
            "cores": [
                {"id": c.id, "socket": c.socket_id, "numa": c.numa_id, "die": c.die_id, "cpus": str(c.cpus)}
                for c in self.cores
            ],
            "cpus": [
                {"id": c.id, "core": c.core_id, "socket": c.socket_id, "numa": c.numa_id, "die": c.die_id,
                 "cache": c.cache_id, "kind": c.kind}
                for c in self.cpus
            ],
            "offline_cpus": str(self.offline_cpus),
            "devices": [
                {
                    "address": d.address,
                    "kind": d.kind.value,
                    "numa": d.numa_id,
                    "vendor_id": None if d.vendor_id is None else f"{d.vendor_id:04x}",
                    "device_id": None if d.device_id is None else f"{d.device_id:04x}",
                    "class_code": None if d.class_code is None else f"{d.class_code:06x}",
                    "pcie_path": list(d.pcie_path),
                    "name": d.name,
                    "memory_bytes": d.memory_bytes,
                    "attributes": dict(d.attributes),
                }
                for d in self.devices
            ],
        }
