"""The whole node on the wire: the description and allocations the agent publishes in its NRT.

A NodeResourceTopology's zones carry counts. The kubelet's decisions depend on more: which CPU
ids each NUMA node holds and which of them are SMT siblings, the sockets, the reserved CPUs, the
policies and their options, the devices with the ids their device plugins give them and their
PCIe locality, and what is taken now. The node agent publishes all of that in two top-level
attributes of the same object (string values, so the CRD schema keeps them, and every NFD
consumer still reads the zones):

* ``toposched.io/node-description``: :class:`NodeDescription`, JSON, changes when the hardware or
  the kubelet's configuration changes;
* ``toposched.io/node-allocations``: :class:`NodeAllocations`, JSON, changes with every pod.

Both are versioned (``"version": "v1"``); docs/topology/description.md has the format and a
worked example. Decoding is strict: a truncated or unknown-version text, a missing or mistyped
field, a CPU or device on a NUMA node the description lacks each raise one :class:`InputError`
whose field is the path inside the attribute (``numa[1].cpus[0].cores[3]``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toposched.errors import InputError
from toposched.kubelet.config import KubeletConfig
from toposched.names import ALLOCATIONS_ATTRIBUTE, DESCRIPTION_ATTRIBUTE
from toposched.topology.cpuset import MAX_CPU_ID, CPUSet
from toposched.topology.model import Device, DeviceKind, LogicalCPU, Machine, NUMANode
from toposched.topology.nrt import device_kind_of_resource

__all__ = [
    "ALLOCATIONS_ATTRIBUTE",
    "DESCRIPTION_ATTRIBUTE",
    "DESCRIPTION_VERSION",
    "ContainerAllocations",
    "DescribedDevice",
    "NodeAllocations",
    "NodeDescription",
    "config_to_dict",
]

DESCRIPTION_VERSION = "v1"
# Far above any real node; keeps a hostile description from making us build millions of objects.
MAX_DEVICES = 16384
_MAX_NUMA_ID = 4095

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class DescribedDevice:
    """One device the kubelet hands out: its resource, its id exactly as the device plugin names it,
    its NUMA node, and what is known of the PCI device behind it (address, upstream bridges from the
    root complex down, model name, memory); unknown facts are None or empty."""

    resource: str
    id: str
    numa_id: int | None = None
    pci_address: str | None = None
    pcie_path: tuple[str, ...] = ()
    model: str | None = None
    memory_bytes: int | None = None
    kind: DeviceKind | None = None  # None: the kind the resource name implies

    def to_device(self) -> Device:
        """The device as the hardware model holds it, its resource and plugin id in ``attributes``.

        ``address`` is the plugin id (the name the kubelet and the placement use); the PCI
        address, when known, is the ``pci_address`` attribute.
        """
        attributes = {"resource": self.resource}
        if self.pci_address:
            attributes["pci_address"] = self.pci_address
        if self.model:
            attributes["device_name"] = self.model
        return Device(self.id, self.kind or device_kind_of_resource(self.resource), self.numa_id, pcie_path=self.pcie_path,
                      memory_bytes=self.memory_bytes, attributes=attributes)


@dataclass(frozen=True)
class NodeDescription:
    """What a node's kubelet decides with: the machine, the configuration, the reserved CPUs, the devices.

    ``machine`` has the real CPU ids, cores, sockets, dies and caches, NUMA memory, hugepages and
    distances; the devices the description holds are ``devices`` (whatever devices ``machine``
    holds are not part of the description); ``reserved_cpus`` are the CPUs the static CPU
    manager keeps from pods, as it computed them (empty under policy ``none``).
    """

    machine: Machine
    config: KubeletConfig
    reserved_cpus: CPUSet = CPUSet()
    devices: tuple[DescribedDevice, ...] = ()

    def machine_with_devices(self) -> Machine:
        """The machine with the described devices (each carrying its resource), for a kubelet replica."""
        devices = tuple(d.to_device() for d in self.devices)
        if devices == self.machine.devices:
            return self.machine  # a decoded description holds them already
        return self.machine.with_devices(devices)

    def device_plugins(self) -> dict[str, list[tuple[str, list[int] | None]]]:
        """The kubelet model's device-plugin table: ``{resource: [(id, [NUMA id] or None)]}`` in described order."""
        out: dict[str, list[tuple[str, list[int] | None]]] = {}
        for d in self.devices:
            out.setdefault(d.resource, []).append((d.id, None if d.numa_id is None else [d.numa_id]))
        return out

    # ---- wire --------------------------------------------------------------------------------

    def to_json(self) -> str:
        """The attribute value: compact JSON, keys in a fixed order, so equal descriptions are equal texts."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def to_dict(self) -> dict[str, Any]:
        """The description as plain JSON-ready data (see docs/topology/description.md)."""
        m = self.machine
        numa = []
        for node in m.numa_nodes:
            groups: dict[tuple[int, int | None, int | None, str | None], list[str]] = {}
            for core in m.cores:
                if core.numa_id != node.id:
                    continue
                head = m.cpu(min(core.cpus))
                groups.setdefault((head.socket_id, head.die_id, head.cache_id, head.kind), []).append(str(core.cpus))
            cpus = []
            for (socket, die, cache, kind), cores in groups.items():
                group: dict[str, Any] = {"socket": socket}
                if die is not None:
                    group["die"] = die
                if cache is not None:
                    group["cache"] = cache
                if kind is not None:
                    group["kind"] = kind
                group["cores"] = cores
                cpus.append(group)
            entry: dict[str, Any] = {"id": node.id, "memory": node.memory_bytes}
            if node.hugepages:
                entry["hugepages"] = {str(size): count for size, count in sorted(node.hugepages.items())}
            if node.distances:
                entry["distances"] = {str(k): v for k, v in sorted(node.distances.items())}
            entry["cpus"] = cpus
            numa.append(entry)
        out: dict[str, Any] = {"version": DESCRIPTION_VERSION, "numa": numa}
        if m.offline_cpus:
            out["offline"] = str(m.offline_cpus)
        out["kubelet"] = config_to_dict(self.config)
        out["reservedCPUs"] = str(self.reserved_cpus)
        devices: dict[str, list[dict[str, Any]]] = {}
        for d in self.devices:
            item: dict[str, Any] = {"id": d.id}
            if d.numa_id is not None:
                item["numa"] = d.numa_id
            if d.pci_address:
                item["pci"] = d.pci_address
            if d.pcie_path:
                item["path"] = list(d.pcie_path)
            if d.model:
                item["model"] = d.model
            if d.memory_bytes is not None:
                item["memory"] = d.memory_bytes
            if d.kind is not None and d.kind != device_kind_of_resource(d.resource):
                item["kind"] = d.kind.value
            devices.setdefault(d.resource, []).append(item)
        if devices:
            out["devices"] = devices
        return out

    @classmethod
    def from_json(cls, text: Any, *, source: str | None = None) -> NodeDescription:
        """Decode an attribute value; InputError (source, field path) for anything malformed or inconsistent."""
        obj = _load(text, DESCRIPTION_ATTRIBUTE, source)
        try:
            return cls._from_obj(obj)
        except InputError as err:
            raise InputError(err.message, field=_path(DESCRIPTION_ATTRIBUTE, err.field), source=source) from None

    @classmethod
    def _from_obj(cls, obj: Mapping[str, Any]) -> NodeDescription:
        d = _Decoder()
        raw_numa = d.list(obj.get("numa"), "numa", required=True)
        if not raw_numa:
            raise InputError("lists no NUMA node", field="numa")
        cpus: list[LogicalCPU] = []
        nodes: list[NUMANode] = []
        seen_cpus: set[int] = set()
        for i, raw in enumerate(raw_numa):
            where = f"numa[{i}]"
            raw = d.mapping(raw, where)
            numa_id = d.integer(raw.get("id"), f"{where}.id", maximum=_MAX_NUMA_ID)
            memory = d.integer(raw.get("memory", 0), f"{where}.memory")
            hugepages = {d.integer(k, f"{where}.hugepages", parse=True, minimum=1): d.integer(v, f"{where}.hugepages.{k}")
                         for k, v in d.mapping(raw.get("hugepages", {}), f"{where}.hugepages").items()}
            distances = {d.integer(k, f"{where}.distances", parse=True, maximum=_MAX_NUMA_ID):
                         d.integer(v, f"{where}.distances.{k}", minimum=1)
                         for k, v in d.mapping(raw.get("distances", {}), f"{where}.distances").items()}
            node_cpus: list[int] = []
            for j, group in enumerate(d.list(raw.get("cpus", []), f"{where}.cpus")):
                here = f"{where}.cpus[{j}]"
                group = d.mapping(group, here)
                socket = d.integer(group.get("socket"), f"{here}.socket")
                die = d.optional_integer(group.get("die"), f"{here}.die")
                cache = d.optional_integer(group.get("cache"), f"{here}.cache")
                kind = group.get("kind")
                if kind is not None and not isinstance(kind, str):
                    raise InputError(f"expected a string, got {kind!r}", field=f"{here}.kind")
                for k, text in enumerate(d.list(group.get("cores"), f"{here}.cores", required=True)):
                    at = f"{here}.cores[{k}]"
                    core = d.cpuset(text, at)
                    if not core:
                        raise InputError("a core needs at least one CPU", field=at)
                    again = seen_cpus.intersection(core)
                    if again:
                        raise InputError(f"CPUs {CPUSet(again)} are listed twice", field=at)
                    seen_cpus.update(core)
                    core_id = min(core)
                    for cpu in core:
                        cpus.append(LogicalCPU(cpu, core_id, socket, numa_id, die, cache, kind))
                        node_cpus.append(cpu)
            nodes.append(NUMANode(numa_id, CPUSet(node_cpus), memory, hugepages, distances))
        offline = d.cpuset(obj.get("offline", ""), "offline")
        numa_ids = {n.id for n in nodes}
        try:
            config = KubeletConfig.from_dict(d.mapping(obj.get("kubelet"), "kubelet"), source="")
        except InputError as err:
            raise InputError(err.message, field=_path("kubelet", err.field)) from None
        reserved = d.cpuset(obj.get("reservedCPUs", ""), "reservedCPUs")
        stray = reserved - CPUSet(seen_cpus)
        if stray:
            raise InputError(f"reserved CPUs {stray} are not CPUs of the described NUMA nodes", field="reservedCPUs")
        devices = []
        count = 0
        for resource, items in d.mapping(obj.get("devices", {}), "devices").items():
            if not isinstance(resource, str) or "/" not in resource:
                raise InputError(f"{resource!r} is not a <domain>/<name> device resource", field="devices")
            for i, item in enumerate(d.list(items, f"devices.{resource}")):
                here = f"devices.{resource}[{i}]"
                count += 1
                if count > MAX_DEVICES:
                    raise InputError(f"more than {MAX_DEVICES} devices", field=here)
                item = d.mapping(item, here)
                numa_id = d.optional_integer(item.get("numa"), f"{here}.numa")
                if numa_id is not None and numa_id not in numa_ids:
                    raise InputError(f"NUMA node {numa_id} is not one the description lists", field=f"{here}.numa")
                path = d.list(item.get("path", []), f"{here}.path")
                kind = d.optional_string(item.get("kind"), f"{here}.kind")
                if kind is not None and kind not in {k.value for k in DeviceKind}:
                    raise InputError(f"{kind!r} is not a device kind ({', '.join(k.value for k in DeviceKind)})",
                                     field=f"{here}.kind")
                devices.append(DescribedDevice(
                    resource=resource,
                    id=d.string(item.get("id"), f"{here}.id"),
                    numa_id=numa_id,
                    pci_address=d.optional_string(item.get("pci"), f"{here}.pci"),
                    pcie_path=tuple(d.string(p, f"{here}.path[{k}]") for k, p in enumerate(path)),
                    model=d.optional_string(item.get("model"), f"{here}.model"),
                    memory_bytes=d.optional_integer(item.get("memory"), f"{here}.memory"),
                    kind=DeviceKind(kind) if kind is not None else None,
                ))
        ids = [(dev.resource, dev.id) for dev in devices]
        if len(set(ids)) != len(ids):
            twice = sorted({i for i in ids if ids.count(i) > 1})
            raise InputError(f"device {twice[0][1]} of {twice[0][0]} is listed twice", field="devices")
        machine = Machine(tuple(cpus), tuple(nodes), tuple(dev.to_device() for dev in devices), offline_cpus=offline)
        return cls(machine, config, reserved, tuple(devices))


def config_to_dict(config: KubeletConfig) -> dict[str, Any]:
    """The topology-relevant KubeletConfiguration fields, as the kubelet's config file spells them.

    :meth:`KubeletConfig.from_dict` reads the result back to an equal configuration.
    """
    out: dict[str, Any] = {
        "topologyManagerPolicy": config.topology_manager_policy,
        "topologyManagerScope": config.topology_manager_scope,
    }
    if config.topology_manager_options:
        out["topologyManagerPolicyOptions"] = dict(sorted(config.topology_manager_options.items()))
    out["cpuManagerPolicy"] = config.cpu_manager_policy
    if config.cpu_manager_options:
        out["cpuManagerPolicyOptions"] = dict(sorted(config.cpu_manager_options.items()))
    if config.reserved_system_cpus is not None:
        out["reservedSystemCPUs"] = str(config.reserved_system_cpus)
    for key, values in (("kubeReserved", config.kube_reserved), ("systemReserved", config.system_reserved)):
        if values:
            out[key] = {k: _quantity(k, v) for k, v in sorted(values.items())}
    out["evictionHard"] = {"memory.available": str(config.eviction_memory)}
    out["memoryManagerPolicy"] = config.memory_manager_policy
    if config.reserved_memory:
        out["reservedMemory"] = [
            {"numaNode": n, "limits": {k: str(v) for k, v in sorted(limits.items())}}
            for n, limits in sorted(config.reserved_memory.items())
        ]
    out["maxPods"] = config.max_pods
    return out


def _quantity(resource: str, value: int) -> str:
    return f"{value}m" if resource == "cpu" else str(value)


# ---- allocations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ContainerAllocations:
    """What one container holds: exclusive CPUs, memory blocks, device ids per resource.

    ``memory`` lists the memory manager's blocks as its checkpoint and the podresources API give
    them: ``(NUMA ids, resource, bytes)``; a block on several NUMA nodes is one group.
    """

    cpus: CPUSet = CPUSet()
    memory: tuple[tuple[tuple[int, ...], str, int], ...] = ()
    devices: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _EMPTY)

    def __bool__(self) -> bool:
        return bool(self.cpus or self.memory or self.devices)


@dataclass(frozen=True)
class NodeAllocations:
    """What is taken on the node now: ``pods`` maps a pod uid to ``{container name: ContainerAllocations}``.

    A pod-level CPU set (pod-scope exclusive CPUs) is held under container name ``""``.
    ``names`` maps a pod uid to ``namespace/name`` where the agent knows it.
    """

    pods: Mapping[str, Mapping[str, ContainerAllocations]] = field(default_factory=lambda: _EMPTY)
    names: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    def cpus(self) -> CPUSet:
        """Every exclusive CPU of every pod."""
        mask = 0
        for containers in self.pods.values():
            for c in containers.values():
                mask |= c.cpus.mask
        return CPUSet.from_mask(mask)

    def devices(self) -> dict[str, set[str]]:
        """Every allocated device id, per resource."""
        out: dict[str, set[str]] = {}
        for containers in self.pods.values():
            for c in containers.values():
                for resource, ids in c.devices.items():
                    out.setdefault(resource, set()).update(ids)
        return out

    def to_json(self) -> str:
        """The attribute value: compact JSON with sorted pods and containers."""
        pods = []
        for uid in sorted(self.pods):
            containers = {}
            for name in sorted(self.pods[uid]):
                c = self.pods[uid][name]
                entry: dict[str, Any] = {}
                if c.cpus:
                    entry["cpus"] = str(c.cpus)
                if c.memory:
                    entry["memory"] = [{"numa": list(n), "type": t, "size": size} for n, t, size in c.memory]
                if c.devices:
                    entry["devices"] = {r: sorted(ids) for r, ids in sorted(c.devices.items())}
                containers[name] = entry
            item: dict[str, Any] = {"uid": uid}
            if uid in self.names:
                item["pod"] = self.names[uid]
            item["containers"] = containers
            pods.append(item)
        return json.dumps({"version": DESCRIPTION_VERSION, "pods": pods}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: Any, *, source: str | None = None) -> NodeAllocations:
        """Decode an attribute value; InputError (source, field path) for anything malformed."""
        obj = _load(text, ALLOCATIONS_ATTRIBUTE, source)
        d = _Decoder()
        try:
            pods: dict[str, dict[str, ContainerAllocations]] = {}
            names: dict[str, str] = {}
            for i, raw in enumerate(d.list(obj.get("pods"), "pods", required=True)):
                where = f"pods[{i}]"
                raw = d.mapping(raw, where)
                uid = d.string(raw.get("uid"), f"{where}.uid")
                if uid in pods:
                    raise InputError(f"pod {uid} is listed twice", field=f"{where}.uid")
                if raw.get("pod") is not None:
                    names[uid] = d.string(raw["pod"], f"{where}.pod")
                containers = {}
                for name, c in d.mapping(raw.get("containers", {}), f"{where}.containers").items():
                    here = f"{where}.containers.{name}"
                    c = d.mapping(c, here)
                    memory = []
                    for k, block in enumerate(d.list(c.get("memory"), f"{here}.memory")):
                        at = f"{here}.memory[{k}]"
                        block = d.mapping(block, at)
                        numa = tuple(d.integer(n, f"{at}.numa", maximum=_MAX_NUMA_ID)
                                     for n in d.list(block.get("numa"), f"{at}.numa", required=True))
                        kind = d.string(block.get("type"), f"{at}.type")
                        if kind != "memory" and not kind.startswith("hugepages-"):
                            raise InputError(f"{kind!r} is not memory or hugepages-<size>", field=f"{at}.type")
                        memory.append((numa, kind, d.integer(block.get("size"), f"{at}.size")))
                    devices = {
                        str(r): tuple(d.string(x, f"{here}.devices.{r}") for x in d.list(ids, f"{here}.devices.{r}"))
                        for r, ids in d.mapping(c.get("devices", {}), f"{here}.devices").items()
                    }
                    containers[str(name)] = ContainerAllocations(d.cpuset(c.get("cpus", ""), f"{here}.cpus"),
                                                                 tuple(memory), devices)
                pods[uid] = containers
        except InputError as err:
            raise InputError(err.message, field=_path(ALLOCATIONS_ATTRIBUTE, err.field), source=source) from None
        return cls(pods, names)


# ---- strict decoding ------------------------------------------------------------------------


def _load(text: Any, attribute: str, source: str | None) -> Mapping[str, Any]:
    if not isinstance(text, str):
        raise InputError(f"expected a JSON string, got {type(text).__name__}", field=attribute, source=source)
    try:
        obj = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"not JSON (truncated?): {exc}", field=attribute, source=source) from None
    if not isinstance(obj, Mapping):
        raise InputError("expected a JSON object", field=attribute, source=source)
    version = obj.get("version")
    if version != DESCRIPTION_VERSION:
        raise InputError(f"version {version!r} is not one this toposched reads ({DESCRIPTION_VERSION})",
                         field=f"{attribute}.version", source=source)
    return obj


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _path(attribute: str, inner: str | None) -> str:
    return f"{attribute}.{inner}" if inner else attribute


class _Decoder:
    """Type-checked access to decoded JSON; every failure names the field path."""

    @staticmethod
    def mapping(value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise InputError(f"expected an object, got {_kind(value)}", field=where)
        return value

    @staticmethod
    def list(value: Any, where: str, *, required: bool = False) -> list[Any]:
        if value is None and not required:
            return []
        if not isinstance(value, list):
            raise InputError(f"expected a list, got {_kind(value)}", field=where)
        return value

    @staticmethod
    def string(value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise InputError(f"expected a non-empty string, got {_kind(value)}", field=where)
        return value

    def optional_string(self, value: Any, where: str) -> str | None:
        return None if value is None else self.string(value, where)

    @staticmethod
    def integer(value: Any, where: str, *, parse: bool = False, minimum: int = 0, maximum: int = 2**63 - 1) -> int:
        if parse and isinstance(value, str) and value.isdigit() and len(value) <= 19:
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"expected an integer, got {_kind(value)} {value!r}"[:200], field=where)
        if not minimum <= value <= maximum:
            raise InputError(f"{value} is outside {minimum}..{maximum}", field=where)
        return value

    def optional_integer(self, value: Any, where: str) -> int | None:
        return None if value is None else self.integer(value, where)

    @staticmethod
    def cpuset(value: Any, where: str) -> CPUSet:
        if not isinstance(value, str):
            raise InputError(f"expected a CPU list like \"0-3,8\", got {_kind(value)}", field=where)
        try:
            cpus = CPUSet.parse(value)
        except InputError as err:
            raise InputError(err.message, field=where) from None
        if cpus and max(cpus) > MAX_CPU_ID:
            raise InputError(f"names CPUs beyond {MAX_CPU_ID}", field=where)
        return cpus


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__
