"""NodeResourceTopology (``topology.node.k8s.io/v1alpha2``): the object, its reader and writer.

The object has the shape of the CRD that node-feature-discovery's topology updater publishes
and scheduler-plugins' ``NodeResourceTopologyMatch`` reads. Conventions (see docs/topology/nrt.md):

* Quantities are held in toposched's canonical units (:func:`toposched.quantity.canonical_units`):
  ``cpu`` in millicores (NFD publishes whole CPU counts, so "4" is held as 4000), memory and
  ``hugepages-<size>`` in bytes, device resources as counts. On the wire they are written the
  way apimachinery prints a ``DecimalSI`` quantity ("11", "2048", "16G", "1500m").
* Objects of ``v1alpha1`` (no top-level attributes) are read too; everything is written as ``v1alpha2``.
* Every bad input raises one :class:`InputError` whose source names the file and the object
  (``nrt.yaml: NodeResourceTopology worker-a``) and whose field is the path inside the object
  (``zones[2].resources[0].capacity``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from toposched.errors import InputError
from toposched.inputs import check_dns_subdomain, check_resource_name, hugepage_size
from toposched.manifests import load_objects
from toposched.names import (
    AMD_GPU,
    NRT_API_GROUP,
    NVIDIA_GPU,
    TOPOLOGY_MANAGER_POLICY_ATTRIBUTE,
    TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE,
)
from toposched.quantity import canonical_units, check_amount, format_bytes
from toposched.topology.cpuset import MAX_CPU_ID, CPUSet
from toposched.topology.model import Device, DeviceKind, LogicalCPU, Machine, NUMANode

__all__ = [
    "API_VERSION",
    "KIND",
    "NodeResourceTopology",
    "ResourceInfo",
    "ZONE_TYPES",
    "ZONE_TYPE_NODE",
    "Zone",
    "detect_topology_policy",
    "device_kind_of_resource",
    "dump_nrt",
    "load_nrts",
    "machine_from_nrt",
    "nrt_from_machine",
    "numa_id_of_zone",
    "numa_zone_resources",
    "parse_nrt",
    "zone_name",
]

API_VERSION = f"{NRT_API_GROUP}/v1alpha2"
_READ_VERSIONS = (f"{NRT_API_GROUP}/v1alpha1", API_VERSION)
KIND = "NodeResourceTopology"
_LIST_KINDS = ("List", "NodeResourceTopologyList")

ZONE_TYPE_NODE = "Node"
# The CRD describes zones as "e.g. socket, node, die or core"; only Node zones carry NUMA
# resources (noderesourcetopology-api's helper knows no other type). Socket and Die zones are
# read as parents that group Node zones; Core zones are accepted and otherwise ignored.
ZONE_TYPES = (ZONE_TYPE_NODE, "Socket", "Die", "Core")

TOPOLOGY_MANAGER_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_MANAGER_SCOPES = ("container", "pod")

# Zones of one object: Linux has at most 1024 NUMA nodes (NODES_SHIFT 10); sockets, dies and cores add some.
MAX_ZONES = 8192
# Well above any real node; keeps a hostile object from making us build millions of devices.
MAX_DEVICES_PER_ZONE_RESOURCE = 4096
# Devices of one machine in all (a node with 8 GPUs and 8 NICs has 16).
MAX_DEVICES = 16384
_INT64_MAX = 2**63 - 1
_ZONE_NAME = re.compile(r"node-([0-9]+)")
_HUGEPAGES_PREFIX = "hugepages-"

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


def _frozen(value: Mapping[Any, Any] | None) -> Mapping[Any, Any]:
    return MappingProxyType(dict(value)) if value else _EMPTY


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """One resource of a zone, in canonical units (cpu in millicores, memory in bytes, devices as counts)."""

    name: str
    capacity: int
    allocatable: int
    available: int

    def __post_init__(self) -> None:
        for part in ("capacity", "allocatable", "available"):  # absurd amounts would overflow the scheduler's arrays
            check_amount(getattr(self, part), field=f"resources.{self.name}.{part}")


@dataclass(frozen=True, slots=True)
class Zone:
    """A topology zone: for NFD a NUMA node (``node-<N>`` of type ``Node``).

    ``costs`` maps a zone name to the cost of reaching it (the NUMA distance, 10 = local).
    """

    name: str
    type: str
    parent: str | None = None
    costs: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    attributes: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    resources: tuple[ResourceInfo, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "costs", _frozen(self.costs))
        object.__setattr__(self, "attributes", _frozen(self.attributes))
        object.__setattr__(self, "resources", tuple(self.resources))

    def resource(self, name: str) -> ResourceInfo | None:
        """The resource with this name, or None when the zone does not report it."""
        for res in self.resources:
            if res.name == name:
                return res
        return None


@dataclass(frozen=True, slots=True)
class NodeResourceTopology:
    """A NodeResourceTopology object.

    ``top_level_policies`` is the deprecated ``topologyPolicies`` list; ``metadata`` holds the
    metadata fields other than name, labels and annotations (uid, ownerReferences, ...) unchanged.
    ``source`` (the file it came from) is not part of the value: it does not take part in equality.
    """

    name: str
    zones: tuple[Zone, ...]
    attributes: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    top_level_policies: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    source: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "zones", tuple(self.zones))
        setattr_(self, "top_level_policies", tuple(self.top_level_policies))
        setattr_(self, "attributes", _frozen(self.attributes))
        setattr_(self, "labels", _frozen(self.labels))
        setattr_(self, "annotations", _frozen(self.annotations))
        setattr_(self, "metadata", _frozen(copy.deepcopy(dict(self.metadata))))

    def zone(self, name: str) -> Zone | None:
        """The zone with this name, or None."""
        for z in self.zones:
            if z.name == name:
                return z
        return None

    @property
    def numa_zones(self) -> tuple[Zone, ...]:
        """The zones of type ``Node`` (NUMA nodes), in object order."""
        return tuple(z for z in self.zones if z.type == ZONE_TYPE_NODE)

    @property
    def origin(self) -> str:
        """How errors name this object: ``<file>: NodeResourceTopology <name>``."""
        obj = f"NodeResourceTopology {self.name}"
        return f"{self.source}: {obj}" if self.source else obj


# ---- zone names and policies ---------------------------------------------------------------


def zone_name(numa_id: int) -> str:
    """The NRT zone name of a NUMA node: ``node-<id>``; InputError for a negative id."""
    if numa_id < 0:
        raise InputError(f"NUMA node id {numa_id} is negative", field="numa_id")
    return f"node-{numa_id}"


def numa_id_of_zone(name: str) -> int:
    """The NUMA id named by a zone ``node-<N>`` (exactly that spelling); InputError otherwise."""
    match = _ZONE_NAME.fullmatch(name) if isinstance(name, str) else None
    if not match:
        raise InputError(f"zone name {name!r} is not of the form node-<N>", field="name")
    return int(match.group(1))


_DEPRECATED_POLICY_NAMES = {
    ("single-numa-node", "container"): "SingleNUMANodeContainerLevel",
    ("single-numa-node", "pod"): "SingleNUMANodePodLevel",
    ("restricted", "container"): "RestrictedContainerLevel",
    ("restricted", "pod"): "RestrictedPodLevel",
    ("best-effort", "container"): "BestEffortContainerLevel",
    ("best-effort", "pod"): "BestEffortPodLevel",
}


def detect_topology_policy(policy: str, scope: str) -> str:
    """The deprecated ``topologyPolicies`` value NFD derives from a kubelet policy and scope.

    Unknown policies or scopes give "None", as upstream's ``DetectTopologyPolicy`` does.
    """
    return _DEPRECATED_POLICY_NAMES.get((policy, scope), "None")


_DEVICE_KINDS = {NVIDIA_GPU: DeviceKind.GPU, AMD_GPU: DeviceKind.GPU}


def device_kind_of_resource(resource: str) -> DeviceKind:
    """The device kind behind a device-plugin resource name.

    ``nvidia.com/gpu`` and ``amd.com/gpu`` are GPUs, ``rdma/<anything>`` is InfiniBand/RDMA,
    everything else is ``other``.
    """
    if resource in _DEVICE_KINDS:
        return _DEVICE_KINDS[resource]
    if resource.startswith("rdma/"):
        return DeviceKind.INFINIBAND
    return DeviceKind.OTHER


def _is_device_resource(name: str) -> bool:
    # Device-plugin (extended) resources are always domain-qualified ("vendor/name").
    return "/" in name


# ---- quantities on the wire ----------------------------------------------------------------

_DECIMAL_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def _decimal_si(mantissa: int, exponent: int) -> str:
    """``mantissa * 10**exponent`` printed as apimachinery prints a DecimalSI quantity."""
    if mantissa == 0:
        return "0"
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    # apimachinery keeps the exponent a multiple of 3 by growing the mantissa.
    shift = exponent % 3
    mantissa *= 10**shift
    exponent -= shift
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"


def _format_quantity(resource: str, value: int) -> str:
    return _decimal_si(value, -3) if resource == "cpu" else _decimal_si(value, 0)


# ---- parsing -------------------------------------------------------------------------------


class _Reader:
    """Raises InputErrors that name the source and the object being read."""

    def __init__(self, source: str | None):
        self.source = source
        self.name: str | None = None

    def origin(self) -> str:
        obj = f"NodeResourceTopology {self.name}" if self.name else "NodeResourceTopology"
        return f"{self.source}: {obj}" if self.source else obj

    def fail(self, message: str, path: str | None) -> InputError:
        return InputError(message, field=path, source=self.origin())

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(f"expected a mapping, got {_kind_of(value)}", path)
        return value

    def sequence(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(f"expected a list, got {_kind_of(value)}", path)
        return value

    def string(self, value: Any, path: str, *, what: str) -> str:
        if value is None or value == "":
            raise self.fail(f"{what} is missing", path)
        if not isinstance(value, str):
            raise self.fail(f"{what} must be a string, got {_kind_of(value)} {value!r}", path)
        return value

    def string_map(self, value: Any, path: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, item in self.mapping(value, path).items():
            if not isinstance(key, str) or not isinstance(item, str):
                raise self.fail(f"{key!r}: {item!r} is not a string to string entry", path)
            out[key] = item
        return out

    def attributes(self, value: Any, path: str) -> dict[str, str]:
        # A repeated name keeps its first value, as noderesourcetopology-api's attribute.Get does.
        out: dict[str, str] = {}
        for i, item in enumerate(self.sequence(value, path)):
            here = f"{path}[{i}]"
            item = self.mapping(item, here)
            name = self.string(item.get("name"), f"{here}.name", what="attribute name")
            if "value" not in item or item["value"] is None:
                raise self.fail(f"attribute {name!r} has no value", f"{here}.value")
            val = item["value"]
            if not isinstance(val, str):
                raise self.fail(f"attribute {name!r} must have a string value, got {val!r}", f"{here}.value")
            out.setdefault(name, val)
        return out

    def quantity(self, resource: str, value: Any, path: str) -> int:
        if value is None:
            raise self.fail("quantity is missing", path)
        try:
            return canonical_units(resource, value, field=path)
        except InputError as exc:
            raise self.fail(exc.message, path) from None


def _kind_of(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def parse_nrt(obj: Mapping[str, Any], source: str | None = None) -> NodeResourceTopology:
    """Read one NodeResourceTopology object (v1alpha2, or v1alpha1) from decoded YAML/JSON.

    Validates the whole object first: a zone without a name or of an unknown type, a repeated
    zone or resource, a cost or parent naming no zone of the object, a negative, absurd or
    malformed quantity each raise one InputError naming ``source``, the object and the field.
    """
    r = _Reader(source)
    obj = r.mapping(obj, "")
    meta = obj.get("metadata")
    if isinstance(meta, Mapping) and isinstance(meta.get("name"), str) and meta.get("name"):
        r.name = meta["name"]
    api_version = obj.get("apiVersion")
    if api_version is not None and api_version not in _READ_VERSIONS:
        raise r.fail(f"apiVersion {api_version!r} is not one of {', '.join(_READ_VERSIONS)}", "apiVersion")
    kind = obj.get("kind")
    if kind is not None and kind != KIND:
        raise r.fail(f"kind {kind!r} is not {KIND}", "kind")

    meta = r.mapping(meta, "metadata")
    name = r.string(meta.get("name"), "metadata.name", what="object name")
    try:
        check_dns_subdomain(name, field="metadata.name")
    except InputError as exc:
        raise r.fail(exc.message, "metadata.name") from None
    labels = r.string_map(meta.get("labels") or {}, "metadata.labels")
    annotations = r.string_map(meta.get("annotations") or {}, "metadata.annotations")
    passthrough = {k: v for k, v in meta.items() if k not in ("name", "labels", "annotations")}

    policies = []
    for i, p in enumerate(r.sequence(obj.get("topologyPolicies"), "topologyPolicies")):
        policies.append(r.string(p, f"topologyPolicies[{i}]", what="policy"))  # free text upstream
    attributes = r.attributes(obj.get("attributes"), "attributes")
    for attribute, known in ((TOPOLOGY_MANAGER_POLICY_ATTRIBUTE, TOPOLOGY_MANAGER_POLICIES),
                             (TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE, TOPOLOGY_MANAGER_SCOPES)):
        value = attributes.get(attribute)
        if value is not None and value not in known:
            raise r.fail(f"{attribute} {value[:60]!r} is not one of {', '.join(known)}", f"attributes.{attribute}")

    if "zones" not in obj or obj["zones"] is None:
        raise r.fail("zones is missing", "zones")
    raw_zones = r.sequence(obj["zones"], "zones")
    if len(raw_zones) > MAX_ZONES:
        raise r.fail(f"{len(raw_zones):,} zones: more than {MAX_ZONES:,} (the limit)", "zones")
    zones = [_parse_zone(r, z, f"zones[{i}]") for i, z in enumerate(raw_zones)]
    _check_zone_references(r, zones)
    return NodeResourceTopology(
        name=name,
        zones=tuple(zones),
        attributes=attributes,
        top_level_policies=tuple(policies),
        labels=labels,
        annotations=annotations,
        metadata=passthrough,
        source=source,
    )


def _parse_zone(r: _Reader, raw: Any, path: str) -> Zone:
    raw = r.mapping(raw, path)
    name = r.string(raw.get("name"), f"{path}.name", what="zone name")
    ztype = r.string(raw.get("type"), f"{path}.type", what=f"type of zone {name}")
    if ztype not in ZONE_TYPES:
        raise r.fail(f"zone {name} has unknown type {ztype!r} (known: {', '.join(ZONE_TYPES)})", f"{path}.type")
    parent = raw.get("parent")
    if parent is not None and parent != "":
        parent = r.string(parent, f"{path}.parent", what="parent")
    else:
        parent = None

    costs: dict[str, int] = {}
    for i, item in enumerate(r.sequence(raw.get("costs"), f"{path}.costs")):
        here = f"{path}.costs[{i}]"
        item = r.mapping(item, here)
        target = r.string(item.get("name"), f"{here}.name", what="cost target")
        value = item.get("value")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _INT64_MAX:
            raise r.fail(f"cost to {target} must be a positive 64-bit integer, got {value!r}", f"{here}.value")
        if target in costs:
            raise r.fail(f"cost to {target} is given twice", f"{here}.name")
        costs[target] = value

    attributes = r.attributes(raw.get("attributes"), f"{path}.attributes")

    resources: list[ResourceInfo] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(r.sequence(raw.get("resources"), f"{path}.resources")):
        here = f"{path}.resources[{i}]"
        item = r.mapping(item, here)
        rname = r.string(item.get("name"), f"{here}.name", what="resource name")
        if rname in seen:
            raise r.fail(f"resource {rname} is listed twice (resources[{seen[rname]}] and [{i}])", f"{here}.name")
        seen[rname] = i
        try:
            check_resource_name(rname, field=f"{here}.name")  # a hugepages-<size> name included
        except InputError as exc:
            raise r.fail(exc.message, f"{here}.name") from None
        values = [r.quantity(rname, item.get(key), f"{here}.{key}") for key in ("capacity", "allocatable", "available")]
        for key, value in (("allocatable", values[1]), ("available", values[2])):
            if value > values[0]:
                raise r.fail(f"{key} {item.get(key)!r:.40} is above the capacity {item.get('capacity')!r:.40}",
                             f"{here}.{key}")
        resources.append(ResourceInfo(rname, *values))
    return Zone(name, ztype, parent, costs, attributes, tuple(resources))


def _check_zone_references(r: _Reader, zones: list[Zone]) -> None:
    index: dict[str, int] = {}
    for i, z in enumerate(zones):
        if z.name in index:
            raise r.fail(f"zone {z.name} appears twice (zones[{index[z.name]}] and zones[{i}])", f"zones[{i}].name")
        index[z.name] = i
    for i, z in enumerate(zones):
        for k, target in enumerate(z.costs):
            if target not in index:
                raise r.fail(f"cost names unknown zone {target!r}", f"zones[{i}].costs[{k}].name")
        if z.parent is not None:
            if z.parent not in index:
                raise r.fail(f"parent names unknown zone {z.parent!r}", f"zones[{i}].parent")
            seen = {z.name}
            up = zones[index[z.parent]]
            while True:
                if up.name in seen:
                    raise r.fail(f"parent chain of zone {z.name} loops through {up.name}", f"zones[{i}].parent")
                seen.add(up.name)
                if up.parent is None:
                    break
                up = zones[index[up.parent]]


def load_nrts(path: str | Path) -> list[NodeResourceTopology]:
    """Read every NodeResourceTopology of a YAML or JSON file.

    The file holds one object, several YAML documents, a JSON array, or a ``List`` /
    ``NodeResourceTopologyList`` with ``items``. Empty documents are skipped; a file with no
    object, two objects of the same name, or any bad object raises InputError naming the file.
    """
    source = str(path)
    out = [parse_nrt(obj, where) for where, obj in load_objects(path, list_kinds=_LIST_KINDS)]
    if not out:
        raise InputError("no NodeResourceTopology object in file", source=source)
    names: dict[str, str] = {}
    for nrt in out:
        if nrt.name in names:
            raise InputError(f"two objects are named {nrt.name}", field="metadata.name", source=nrt.origin)
        names[nrt.name] = nrt.origin
    return out


# ---- writing -------------------------------------------------------------------------------


def dump_nrt(nrt: NodeResourceTopology) -> dict[str, Any]:
    """The object as plain JSON/YAML-ready data in the v1alpha2 shape, ready for ``kubectl apply``.

    Keys follow the Go types' field order; quantities are DecimalSI strings like NFD's; empty
    optional fields (parent, costs, attributes, resources) are left out as Go's omitempty does.
    """
    metadata: dict[str, Any] = {"name": nrt.name}
    if nrt.labels:
        metadata["labels"] = dict(nrt.labels)
    if nrt.annotations:
        metadata["annotations"] = dict(nrt.annotations)
    metadata.update(copy.deepcopy(dict(nrt.metadata)))
    out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata}
    if nrt.top_level_policies:
        out["topologyPolicies"] = list(nrt.top_level_policies)
    out["zones"] = [_dump_zone(z) for z in nrt.zones]
    if nrt.attributes:
        out["attributes"] = [{"name": k, "value": v} for k, v in nrt.attributes.items()]
    return out


def _dump_zone(zone: Zone) -> dict[str, Any]:
    out: dict[str, Any] = {"name": zone.name, "type": zone.type}
    if zone.parent:
        out["parent"] = zone.parent
    if zone.costs:
        out["costs"] = [{"name": k, "value": v} for k, v in zone.costs.items()]
    if zone.attributes:
        out["attributes"] = [{"name": k, "value": v} for k, v in zone.attributes.items()]
    if zone.resources:
        out["resources"] = [
            {
                "name": res.name,
                "capacity": _format_quantity(res.name, res.capacity),
                "allocatable": _format_quantity(res.name, res.allocatable),
                "available": _format_quantity(res.name, res.available),
            }
            for res in zone.resources
        ]
    return out


# ---- NRT -> Machine ------------------------------------------------------------------------


def machine_from_nrt(nrt: NodeResourceTopology) -> Machine:
    """The hardware an NRT describes, as a :class:`Machine` (hostname = the object's name).

    NRT carries no CPU ids, so CPUs are synthesised: consecutive ids zone by zone in NUMA-id
    order, one thread per core (core id = CPU id), one socket per Node zone unless the zones
    have ``Socket`` parents (then one socket per Socket zone, numbered in object order). Each
    device resource ``r`` with capacity ``k`` in zone ``z`` becomes ``k`` devices with address
    ``"<r>-<z>-<i>"``, kind :func:`device_kind_of_resource` and attribute ``{"resource": r}``.
    Zone attributes go to ``NUMANode.attributes``, top-level attributes to ``Machine.attributes``.
    """
    origin = nrt.origin
    index = {z.name: i for i, z in enumerate(nrt.zones)}
    node_zones: list[tuple[int, int, Zone]] = []
    for i, z in enumerate(nrt.zones):
        if z.type == ZONE_TYPE_NODE:
            try:
                node_zones.append((numa_id_of_zone(z.name), i, z))
            except InputError as exc:
                raise InputError(exc.message, field=f"zones[{i}].name", source=origin) from None
    if not node_zones:
        raise InputError("the object has no zone of type Node", field="zones", source=origin)
    node_zones.sort(key=lambda t: t[0])
    numa_ids = [n for n, _, _ in node_zones]
    for (a, ia, _), (b, ib, _) in zip(node_zones, node_zones[1:]):
        if a == b:
            raise InputError(f"zones[{ia}] and zones[{ib}] are both NUMA node {a}", field=f"zones[{ib}].name",
                             source=origin)

    sockets = _socket_and_die_ids(nrt, index, node_zones)
    zone_by_name = {z.name: n for n, _, z in node_zones}
    cpus: list[LogicalCPU] = []
    nodes: list[NUMANode] = []
    devices: list[Device] = []
    with_costs = [i for _, i, z in node_zones if z.costs]
    for numa_id, i, zone in node_zones:
        socket_id, die_id = sockets[numa_id]
        cpu_ids: list[int] = []
        memory = 0
        hugepages: dict[int, int] = {}
        for j, res in enumerate(zone.resources):
            path = f"zones[{i}].resources[{j}]"
            if res.name == "cpu":
                if res.capacity % 1000:
                    raise InputError(f"cpu capacity {res.capacity}m is not a whole number of CPUs",
                                     field=f"{path}.capacity", source=origin)
                count = res.capacity // 1000
                if len(cpus) + count > MAX_CPU_ID:
                    raise InputError(f"cpu capacity {count} is absurd (more than {MAX_CPU_ID} CPUs in all)",
                                     field=f"{path}.capacity", source=origin)
                for _ in range(count):
                    cpu_id = len(cpus)
                    cpus.append(LogicalCPU(cpu_id, cpu_id, socket_id, numa_id, die_id))
                    cpu_ids.append(cpu_id)
            elif res.name == "memory":
                memory = res.capacity
            elif res.name.startswith(_HUGEPAGES_PREFIX):
                size = hugepage_size(res.name, field=f"{path}.name", source=origin)
                if res.capacity % size:
                    raise InputError(f"{res.name} capacity {res.capacity} is not a whole number of pages",
                                     field=f"{path}.capacity", source=origin)
                hugepages[size] = res.capacity // size
            elif _is_device_resource(res.name):
                if res.capacity > MAX_DEVICES_PER_ZONE_RESOURCE:
                    raise InputError(f"{res.name} capacity {res.capacity} is absurd "
                                     f"(more than {MAX_DEVICES_PER_ZONE_RESOURCE} devices)",
                                     field=f"{path}.capacity", source=origin)
                if len(devices) + res.capacity > MAX_DEVICES:
                    raise InputError(f"more than {MAX_DEVICES:,} devices in all (the limit)",
                                     field=f"{path}.capacity", source=origin)
                kind = device_kind_of_resource(res.name)
                devices.extend(
                    Device(f"{res.name}-{zone.name}-{k}", kind, numa_id, attributes={"resource": res.name})
                    for k in range(res.capacity)
                )
        distances: dict[int, int] = {}
        if with_costs:
            if not zone.costs:
                raise InputError(f"zone {zone.name} has no costs while zones[{with_costs[0]}] has",
                                 field=f"zones[{i}].costs", source=origin)
            distances = {zone_by_name[t]: v for t, v in zone.costs.items() if t in zone_by_name}
            missing = [zone_name(n) for n in numa_ids if n not in distances]
            if missing:
                raise InputError(f"costs lack the Node zones {', '.join(missing)}", field=f"zones[{i}].costs",
                                 source=origin)
        nodes.append(NUMANode(numa_id, CPUSet(cpu_ids), memory, hugepages, distances, zone.attributes))
    try:
        return Machine(tuple(cpus), tuple(nodes), tuple(devices), hostname=nrt.name, attributes=nrt.attributes)
    except InputError as exc:
        raise exc.with_source(origin) from None


def _socket_and_die_ids(
    nrt: NodeResourceTopology, index: Mapping[str, int], node_zones: list[tuple[int, int, Zone]]
) -> dict[int, tuple[int, int | None]]:
    socket_zones = [z.name for z in nrt.zones if z.type == "Socket"]
    die_zones = [z.name for z in nrt.zones if z.type == "Die"]

    def ancestor(zone: Zone, ztype: str) -> str | None:
        while zone.parent is not None:
            zone = nrt.zones[index[zone.parent]]
            if zone.type == ztype:
                return zone.name
        return None

    out: dict[int, tuple[int, int | None]] = {}
    parentless = len(socket_zones)
    for numa_id, _, zone in node_zones:
        sock = ancestor(zone, "Socket")
        die = ancestor(zone, "Die")
        die_id = die_zones.index(die) if die is not None else None
        if not socket_zones:
            out[numa_id] = (numa_id, die_id)
        elif sock is not None:
            out[numa_id] = (socket_zones.index(sock), die_id)
        else:
            out[numa_id] = (parentless, die_id)
            parentless += 1
    return out


# ---- Machine -> NRT ------------------------------------------------------------------------


def nrt_from_machine(
    machine: Machine,
    *,
    node_name: str,
    policy: str = "none",
    scope: str = "container",
    allocatable: Mapping[int, Mapping[str, int]] | None = None,
    available: Mapping[int, Mapping[str, int]] | None = None,
    device_resources: Mapping[str, Mapping[int, int]] | None = None,
    reserved_cpus: CPUSet = CPUSet(),
    extra_attributes: Mapping[str, str] | None = None,
) -> NodeResourceTopology:
    """The NodeResourceTopology node-feature-discovery's topology updater publishes for this machine.

    One zone ``node-<N>`` of type ``Node`` per NUMA node (memory-only ones included), in NUMA-id
    order, with ``costs`` to every NUMA node (itself included) when the machine reports
    distances, its attributes, and resources sorted by name: ``cpu`` (capacity = its online
    CPUs, allocatable = those not in ``reserved_cpus``), ``memory``, ``hugepages-<size>`` for
    every page size of the node, and device resources. ``device_resources`` maps a resource
    name to ``{numa id: count}``; by default devices carrying a ``"resource"`` attribute are
    counted. ``allocatable``/``available`` (``{numa id: {resource: canonical units}}``) override
    the defaults (allocatable = capacity, available = allocatable). A node without memory
    publishes no ``memory``. As in NFD, a zone with no allocatable CPU publishes no ``cpu``
    resource unless it would otherwise publish nothing (then ``cpu`` with allocatable 0). Top-level attributes are
    ``topologyManagerPolicy``, ``topologyManagerScope`` and then ``extra_attributes`` (which
    cannot override the first two); ``topologyPolicies`` holds NFD's deprecated summary.
    """
    if not isinstance(node_name, str) or not node_name:
        raise InputError("a node name is required", field="node_name")
    if policy not in TOPOLOGY_MANAGER_POLICIES:
        raise InputError(f"policy {policy!r} is not one of {', '.join(TOPOLOGY_MANAGER_POLICIES)}", field="policy")
    if scope not in TOPOLOGY_MANAGER_SCOPES:
        raise InputError(f"scope {scope!r} is not one of {', '.join(TOPOLOGY_MANAGER_SCOPES)}", field="scope")
    devices = _device_counts(machine, device_resources)
    overrides = {"allocatable": allocatable or {}, "available": available or {}}
    for what, table in overrides.items():
        for numa_id in table:
            if not machine.has_numa(numa_id):
                raise InputError(f"NUMA node {numa_id} does not exist", field=f"{what}[{numa_id}]")

    has_distances = any(n.distances for n in machine.numa_nodes)
    zones = []
    for node in machine.numa_nodes:
        capacity: dict[str, int] = {}
        alloc: dict[str, int] = {}
        if node.cpus:
            capacity["cpu"] = len(node.cpus) * 1000
            alloc["cpu"] = len(node.cpus - reserved_cpus) * 1000
        if node.memory_bytes:
            capacity["memory"] = node.memory_bytes
        for size, count in node.hugepages.items():
            capacity[f"{_HUGEPAGES_PREFIX}{format_bytes(size)}"] = size * count
        for resource, per_numa in devices.items():
            if per_numa.get(node.id):
                capacity[resource] = per_numa[node.id]
        for resource, value in capacity.items():
            alloc.setdefault(resource, value)
        alloc = _override(alloc, overrides["allocatable"].get(node.id), f"allocatable[{node.id}]")
        if "cpu" in capacity and alloc["cpu"] == 0 and len(capacity) > 1:
            # NFD learns of a zone's CPUs only from the allocatable ones the kubelet reports; a
            # zone with nothing else to report gets a cpu entry (allocatable 0) all the same.
            del capacity["cpu"], alloc["cpu"]
        elif not capacity:
            capacity["cpu"] = alloc["cpu"] = 0
        avail = _override(dict(alloc), overrides["available"].get(node.id), f"available[{node.id}]")
        resources = []
        for resource in sorted(capacity):
            cap, al, av = capacity[resource], alloc[resource], avail[resource]
            if not 0 <= av <= al <= cap:
                raise InputError(
                    f"{resource}: need 0 <= available ({av}) <= allocatable ({al}) <= capacity ({cap})",
                    field=f"numa_nodes[{node.id}].{resource}",
                )
            resources.append(ResourceInfo(resource, cap, al, av))
        costs = {zone_name(m): node.distances[m] for m in machine.numa_ids} if has_distances else {}
        zones.append(Zone(zone_name(node.id), ZONE_TYPE_NODE, None, costs, node.attributes, tuple(resources)))

    attributes = {TOPOLOGY_MANAGER_POLICY_ATTRIBUTE: policy, TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE: scope}
    for key, value in (extra_attributes or {}).items():
        attributes.setdefault(key, value)
    return NodeResourceTopology(
        name=node_name,
        zones=tuple(zones),
        attributes=attributes,
        top_level_policies=(detect_topology_policy(policy, scope),),
    )


def _device_counts(
    machine: Machine, device_resources: Mapping[str, Mapping[int, int]] | None
) -> dict[str, dict[int, int]]:
    if device_resources is None:
        counted: dict[str, dict[int, int]] = {}
        for dev in machine.devices:
            resource = dev.attributes.get("resource")
            if resource and dev.numa_id is not None:
                per = counted.setdefault(resource, {})
                per[dev.numa_id] = per.get(dev.numa_id, 0) + 1
        return counted
    out: dict[str, dict[int, int]] = {}
    for resource, per_numa in device_resources.items():
        if not _is_device_resource(resource):
            raise InputError(f"{resource!r} is not a vendor/name device resource", field="device_resources")
        for numa_id, count in per_numa.items():
            if not machine.has_numa(numa_id):
                raise InputError(f"NUMA node {numa_id} does not exist", field=f"device_resources[{resource}]")
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise InputError(f"count {count!r} is not a non-negative integer",
                                 field=f"device_resources[{resource}][{numa_id}]")
        out[resource] = dict(per_numa)
    return out


def _override(values: dict[str, int], given: Mapping[str, int] | None, path: str) -> dict[str, int]:
    for resource, value in (given or {}).items():
        if resource not in values:
            raise InputError(f"the zone publishes no resource {resource!r}", field=f"{path}[{resource}]")
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{value!r} is not an integer in canonical units", field=f"{path}[{resource}]")
        values[resource] = value
    return values


def numa_zone_resources(nrt: NodeResourceTopology) -> dict[int, dict[str, ResourceInfo]]:
    """``{numa id: {resource name: ResourceInfo}}`` for the Node zones of an NRT."""
    out: dict[int, dict[str, ResourceInfo]] = {}
    for i, zone in enumerate(nrt.zones):
        if zone.type != ZONE_TYPE_NODE:
            continue
        try:
            numa_id = numa_id_of_zone(zone.name)
        except InputError as exc:
            raise InputError(exc.message, field=f"zones[{i}].name", source=nrt.origin) from None
        out[numa_id] = {res.name: res for res in zone.resources}
    return out
