"""A node's schedulable devices as the scheduler sees them: id, resource, NUMA node, PCIe switch.

:class:`DeviceInventory` is built from the hardware model (:meth:`DeviceInventory.from_machine`,
devices mapped to extended resources by a :class:`~toposched.devices.resources.DeviceResourceMap`)
or from a NodeResourceTopology report (:meth:`DeviceInventory.from_nrt`, where only the count of
each device resource per NUMA zone is known). Devices that are no resource (plain NICs, NVMe,
a BMC's VGA) are not in it. Its :meth:`~DeviceInventory.device_plugins` is the kubelet model's
device-plugin table, so the kubelet model and the scheduler name the same device ids.

How a device's PCIe switch is identified (:func:`pcie_switch`) is written down, with what the
real machines give, in docs/devices/inventory.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from toposched.devices.resources import DeviceResourceMap
from toposched.errors import InputError
from toposched.topology.model import DeviceKind, Machine
from toposched.topology.nrt import NodeResourceTopology, machine_from_nrt

__all__ = [
    "LEVEL_NODE",
    "LEVEL_NUMA",
    "LEVEL_PCIE",
    "LEVELS",
    "DeviceInventory",
    "NodeDevice",
    "pcie_switch",
]

#: Locality levels, tightest first; the same words as the ``toposched.io/device-scope`` annotation.
LEVEL_PCIE = "pcie"
LEVEL_NUMA = "numa"
LEVEL_NODE = "node"
LEVELS = (LEVEL_PCIE, LEVEL_NUMA, LEVEL_NODE)


@dataclass(frozen=True, slots=True)
class NodeDevice:
    """One schedulable device of a node.

    ``id`` is the PCI address on a machine known from its hardware, the report's id
    (``"<resource>-<zone>-<i>"``) on a node known from a NodeResourceTopology; ``switch`` is the
    bus id of the upstream port of the PCIe switch the device sits under (None when it sits
    directly on a root port, or the path is unknown); ``model`` is the PCI device name when the
    reader found one (``"TU104GL [Tesla T4]"``).
    """

    id: str
    resource: str
    kind: DeviceKind
    numa_id: int | None = None
    switch: str | None = None
    pcie_path: tuple[str, ...] = ()
    memory_bytes: int | None = None
    model: str | None = None


# The devices of every inventory keyed so far -> its key (one entry per distinct hardware model).
_KEYS: dict[tuple[NodeDevice, ...], int] = {}


def pcie_switch(pcie_path: Iterable[str]) -> str | None:
    """The PCIe switch a device sits under, named by the bus id of the switch's upstream port.

    ``pcie_path`` lists the bridges from the root complex down to the device's parent: the host
    bridge (``pciDDDD:BB``), the root port, then for every switch its upstream port and the
    downstream port the path continues through. Below the root port, a switch shows as at least
    two bridges (upstream, downstream); the first bridge below the root port is then the
    upstream port of the outermost switch, the one every device of that switch tree shares
    (nested switches, such as a GPU card's own bridge under a PLX switch, belong to it). No
    bridge or a single bridge (a PCIe-to-PCI bridge) below the root port gives None.
    """
    path = list(pcie_path)
    if path and path[0].startswith("pci"):
        path = path[1:]  # the host bridge; the root port follows
    below_root_port = path[1:]
    return below_root_port[0] if len(below_root_port) >= 2 else None


class DeviceInventory:
    """A node's schedulable devices, in a fixed order (the order "lowest id" refers to).

    Construction checks that ids are unique and non-empty, resources domain-qualified and NUMA
    ids non-negative, raising :class:`InputError` (``source`` names the node) otherwise.
    """

    __slots__ = ("devices", "source", "_by_id", "_by_resource", "_position", "_key")

    def __init__(self, devices: Iterable[NodeDevice], *, source: str = "device inventory") -> None:
        self.devices: tuple[NodeDevice, ...] = tuple(devices)
        self.source = source
        by_id: dict[str, NodeDevice] = {}
        by_resource: dict[str, list[NodeDevice]] = {}
        for i, dev in enumerate(self.devices):
            field = f"devices[{i}]"
            if not isinstance(dev.id, str) or not dev.id:
                raise InputError(f"{dev.id!r} is not a device id (a non-empty string)", field=field, source=source)
            if dev.id in by_id:
                raise InputError(f"device {dev.id} is listed twice", field=field, source=source)
            if not isinstance(dev.resource, str) or "/" not in dev.resource:
                raise InputError(f"{dev.resource!r} is not a <domain>/<name> device resource", field=field,
                                 source=source)
            if dev.numa_id is not None and (isinstance(dev.numa_id, bool) or not isinstance(dev.numa_id, int)
                                            or dev.numa_id < 0):
                raise InputError(f"{dev.numa_id!r} is not a NUMA node id", field=field, source=source)
            by_id[dev.id] = dev
            by_resource.setdefault(dev.resource, []).append(dev)
        self._by_id = by_id
        self._by_resource = {r: tuple(ds) for r, ds in by_resource.items()}
        self._position = {dev.id: i for i, dev in enumerate(self.devices)}
        self._key: int | None = None

    @property
    def key(self) -> int:
        """A number that is the same, in this process, for exactly the inventories with equal devices.

        Nodes of one hardware model have equal inventories: what is computed from an inventory
        alone (a device choice for given free devices) can be shared between them by this key.
        """
        if self._key is None:
            self._key = _KEYS.setdefault(self.devices, len(_KEYS))
        return self._key

    # ---- construction -----------------------------------------------------------------------

    @classmethod
    def from_machine(cls, machine: Machine, resource_map: DeviceResourceMap | None = None) -> DeviceInventory:
        """The devices of a machine that are extended resources, ordered by PCI address.

        A device's resource is its ``"resource"`` attribute when it has one (devices of a machine
        read from a NodeResourceTopology), else what ``resource_map`` (default: the shipped map)
        gives. The switch comes from :func:`pcie_switch`, the model from the ``device_name``
        attribute the hwloc reader keeps.
        """
        mapping = resource_map if resource_map is not None else DeviceResourceMap.default()
        found = []
        for dev in machine.devices:
            resource = dev.attributes.get("resource") or mapping.resource_of(dev)
            if resource:
                found.append(NodeDevice(
                    id=dev.address,
                    resource=resource,
                    kind=dev.kind,
                    numa_id=dev.numa_id,
                    switch=pcie_switch(dev.pcie_path),
                    pcie_path=dev.pcie_path,
                    memory_bytes=dev.memory_bytes,
                    model=dev.attributes.get("device_name"),
                ))
        found.sort(key=lambda d: d.id)
        return cls(found, source=f"node {machine.hostname}" if machine.hostname else "machine")

    @classmethod
    def from_nrt(cls, nrt: NodeResourceTopology, resource_map: DeviceResourceMap | None = None) -> DeviceInventory:
        """The device resources a NodeResourceTopology reports, per NUMA zone; no switch is known.

        Devices get the ids :func:`~toposched.topology.nrt.machine_from_nrt` gives
        (``"<resource>-<zone>-<i>"``), zone by zone. Their kind is the one ``resource_map``
        (default: the shipped map) ties the resource to, else the one the resource name implies.
        A report that describes no machine raises InputError naming the object.
        """
        mapping = resource_map if resource_map is not None else DeviceResourceMap.default()
        machine = machine_from_nrt(nrt)
        devices = []
        for dev in machine.devices:
            resource = dev.attributes["resource"]
            devices.append(NodeDevice(dev.address, resource, mapping.kind_of(resource) or dev.kind, dev.numa_id))
        return cls(devices, source=nrt.origin)

    # ---- lookups ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.devices)

    def __iter__(self) -> Iterator[NodeDevice]:
        return iter(self.devices)

    def __contains__(self, device_id: object) -> bool:
        return device_id in self._by_id

    def get(self, device_id: str) -> NodeDevice | None:
        """The device with this id, or None."""
        return self._by_id.get(device_id)

    def device(self, device_id: str) -> NodeDevice:
        """The device with this id; InputError naming the inventory when there is none."""
        dev = self._by_id.get(device_id)
        if dev is None:
            raise InputError(f"no device {device_id!r}", field="device", source=self.source)
        return dev

    def position(self, device_id: str) -> int:
        """Where the device stands in the inventory's order (``KeyError`` for an unknown id)."""
        return self._position[device_id]

    @property
    def resources(self) -> tuple[str, ...]:
        """The resources the node has devices of, sorted."""
        return tuple(sorted(self._by_resource))

    def of_resource(self, resource: str) -> tuple[NodeDevice, ...]:
        """The devices of one resource, in inventory order (empty for a resource the node lacks)."""
        return self._by_resource.get(resource, ())

    def on_numa(self, numa_id: int, resource: str | None = None) -> tuple[NodeDevice, ...]:
        """The devices on one NUMA node, of one resource when given."""
        pool = self.devices if resource is None else self.of_resource(resource)
        return tuple(d for d in pool if d.numa_id == numa_id)

    def under_switch(self, switch: str, resource: str | None = None) -> tuple[NodeDevice, ...]:
        """The devices under one PCIe switch, of one resource when given."""
        pool = self.devices if resource is None else self.of_resource(resource)
        return tuple(d for d in pool if d.switch == switch)

    def switches(self, resource: str | None = None) -> tuple[str, ...]:
        """The PCIe switches that hold devices (of one resource when given), in inventory order."""
        pool = self.devices if resource is None else self.of_resource(resource)
        return tuple(dict.fromkeys(d.switch for d in pool if d.switch is not None))

    @property
    def numa_ids(self) -> tuple[int, ...]:
        """The NUMA nodes that hold devices, ascending."""
        return tuple(sorted({d.numa_id for d in self.devices if d.numa_id is not None}))

    def counts(self) -> Mapping[str, int]:
        """The number of devices per resource."""
        return MappingProxyType({r: len(ds) for r, ds in sorted(self._by_resource.items())})

    def counts_per_numa(self) -> Mapping[str, Mapping[int, int]]:
        """``{resource: {NUMA id: count}}`` for the devices whose NUMA node is known (the NRT shape)."""
        out: dict[str, dict[int, int]] = {}
        for dev in self.devices:
            if dev.numa_id is not None:
                per = out.setdefault(dev.resource, {})
                per[dev.numa_id] = per.get(dev.numa_id, 0) + 1
        return MappingProxyType({r: MappingProxyType(dict(sorted(p.items()))) for r, p in sorted(out.items())})

    def device_plugins(self) -> dict[str, list[tuple[str, list[int] | None]]]:
        """The kubelet model's device-plugin table: ``{resource: [(device id, [NUMA id] or None)]}``.

        Pass it as ``KubeletNode(..., device_plugins=...)``: the kubelet model then allocates the
        same ids this inventory names, in inventory order within each resource.
        """
        return {
            resource: [(d.id, None if d.numa_id is None else [d.numa_id]) for d in devices]
            for resource, devices in sorted(self._by_resource.items())
        }

    def locality(self, a: str, b: str) -> str:
        """How close two devices are: ``pcie`` under one PCIe switch, ``numa`` on one NUMA node, else ``node``.

        Unknown ids raise InputError.
        """
        first, second = self.device(a), self.device(b)
        if first.switch is not None and first.switch == second.switch:
            return LEVEL_PCIE
        if first.numa_id is not None and first.numa_id == second.numa_id:
            return LEVEL_NUMA
        return LEVEL_NODE

    def __repr__(self) -> str:
        counts = ", ".join(f"{r}: {n}" for r, n in self.counts().items())
        return f"DeviceInventory({self.source}; {counts or 'no devices'})"
