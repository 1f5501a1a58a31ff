"""``Placement``: the exact decision for a pod, and its annotations on the wire.

``toposched.io/placement`` (ours, see DESIGN.md)::

    {"node": "n1", "numaNodes": [0], "containers": {"app": {"cpuset": "2-5", "numaNodes": [0],
     "memory": {"0": "4Gi"}, "devices": {"nvidia.com/gpu": ["GPU-1"]}}}}

``scheduling.koordinator.sh/resource-status`` (Koordinator's, for clusters that run koordlet)::

    {"cpuset": "2-5", "numaNodeResources": [{"node": 0, "resources": {"cpu": "4", "memory": "4Gi"}}]}
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toposched.errors import InputError
from toposched.names import KOORDINATOR_RESOURCE_STATUS, PLACEMENT_ANNOTATION
from toposched.quantity import canonical_units, format_bytes, format_cpu
from toposched.topology import CPUSet

__all__ = [
    "KOORDINATOR_RESOURCE_STATUS",
    "PLACEMENT_ANNOTATION",
    "ContainerPlacement",
    "Placement",
]

_EMPTY: Mapping[Any, Any] = MappingProxyType({})
_MAX_CPU = 8192  # the kernel's largest NR_CPUS; a cpuset beyond it is not a real machine's


@dataclass(frozen=True, slots=True)
class ContainerPlacement:
    """One container's exact share: exclusive CPUs (empty = shared pool), NUMA nodes, memory, devices."""

    cpuset: CPUSet = CPUSet()
    numa_nodes: frozenset[int] = frozenset()
    memory: Mapping[int, Mapping[str, int]] = field(default_factory=lambda: _EMPTY)  # NUMA -> resource -> bytes
    devices: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _EMPTY)  # resource -> device IDs
    cpu_millis: int = 0  # the CPU request, for shares of NUMA zones when the cpuset is empty

    def __post_init__(self) -> None:
        object.__setattr__(self, "numa_nodes", frozenset(self.numa_nodes))
        object.__setattr__(self, "memory", MappingProxyType({int(n): MappingProxyType(dict(r)) for n, r in self.memory.items()}))
        object.__setattr__(self, "devices", MappingProxyType({r: tuple(sorted(ids)) for r, ids in self.devices.items()}))


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a pod goes, exactly: the node, the NUMA nodes, and each container's share."""

    node: str
    numa_nodes: frozenset[int] = frozenset()
    containers: Mapping[str, ContainerPlacement] = field(default_factory=lambda: _EMPTY)
    # Further annotations a plugin's decision adds at bind (Koordinator's device-allocated for GPU shares).
    extra_annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    # Every exclusive CPU of the pod as a bit mask (derived from ``containers``; read on every
    # pass over a node's pods, so computed once).
    cpu_mask: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "numa_nodes", frozenset(self.numa_nodes))
        object.__setattr__(self, "containers", MappingProxyType(dict(self.containers)))
        object.__setattr__(self, "extra_annotations", MappingProxyType(dict(self.extra_annotations)))
        mask = 0
        for c in self.containers.values():
            mask |= c.cpuset.mask
        object.__setattr__(self, "cpu_mask", mask)

    @property
    def cpuset(self) -> CPUSet:
        """Every exclusive CPU of the pod."""
        return CPUSet.from_mask(self.cpu_mask)

    def devices(self) -> dict[str, set[str]]:
        """Every device of the pod, per resource."""
        out: dict[str, set[str]] = {}
        for c in self.containers.values():
            for resource, ids in c.devices.items():
                out.setdefault(resource, set()).update(ids)
        return out

    def without_ids(self) -> Placement:
        """This placement with NUMA nodes and memory only: no cpuset, no device ids (a count-only node's).

        The agent enforces nothing for such a placement; the kubelet picks the CPUs and devices.
        """
        containers = {name: dataclasses.replace(c, cpuset=CPUSet(), devices={}) for name, c in self.containers.items()}
        return dataclasses.replace(self, containers=containers)

    # ---- toposched.io/placement ----------------------------------------------------------------

    def to_annotation(self) -> str:
        """The ``toposched.io/placement`` JSON, with sorted keys so equal placements serialise equally."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def to_dict(self) -> dict[str, Any]:
        """The placement as plain JSON-ready data (the annotation's shape)."""
        return {
            "node": self.node,
            "numaNodes": sorted(self.numa_nodes),
            "containers": {
                name: {
                    "cpuset": str(c.cpuset),
                    "numaNodes": sorted(c.numa_nodes),
                    "memory": {
                        str(n): format_bytes(sum(r.values())) if set(r) == {"memory"} else
                        {k: format_bytes(v) for k, v in sorted(r.items())}
                        for n, r in sorted(c.memory.items())
                    },
                    "devices": {r: list(ids) for r, ids in sorted(c.devices.items())},
                }
                for name, c in sorted(self.containers.items())
            },
        }

    @classmethod
    def from_annotation(cls, text: str, *, source: str | None = None) -> Placement:
        """Parse a ``toposched.io/placement`` annotation; refuse anything malformed or absurd.

        The node agent enforces what this says, so it is checked strictly: cpusets within the
        kernel's CPU range, NUMA ids non-negative, quantities valid, device IDs plain strings.
        """
        where = source or PLACEMENT_ANNOTATION
        try:
            obj = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise InputError(f"not JSON: {exc}", field=PLACEMENT_ANNOTATION, source=where) from None
        try:
            return cls._from_obj(obj)
        except InputError as err:
            raise err.with_source(where) from None

    @classmethod
    def _from_obj(cls, obj: Any) -> Placement:
        if not isinstance(obj, Mapping) or not isinstance(obj.get("node"), str) or not obj["node"]:
            raise InputError("needs a node name", field="node")
        containers = {}
        raw = obj.get("containers") or {}
        if not isinstance(raw, Mapping):
            raise InputError("expected a mapping of container name to placement", field="containers")
        for name, c in raw.items():
            where = f"containers.{name}"
            if not isinstance(c, Mapping):
                raise InputError("expected a mapping", field=where)
            cpuset = CPUSet.parse(str(c.get("cpuset", "")))
            if cpuset and max(cpuset) >= _MAX_CPU:
                raise InputError(f"cpuset {c.get('cpuset')!r} names CPUs beyond {_MAX_CPU - 1}", field=f"{where}.cpuset")
            memory: dict[int, dict[str, int]] = {}
            for numa, value in (c.get("memory") or {}).items():
                numa_id = _numa_id(numa, f"{where}.memory")
                if isinstance(value, Mapping):
                    memory[numa_id] = {k: canonical_units(k, v, field=f"{where}.memory.{numa}.{k}") for k, v in value.items()}
                else:
                    memory[numa_id] = {"memory": canonical_units("memory", value, field=f"{where}.memory.{numa}")}
            devices = {}
            for resource, ids in (c.get("devices") or {}).items():
                if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
                    raise InputError("expected a list of device IDs", field=f"{where}.devices.{resource}")
                devices[str(resource)] = tuple(ids)
            containers[str(name)] = ContainerPlacement(
                cpuset=cpuset,
                numa_nodes=frozenset(_numa_id(n, f"{where}.numaNodes") for n in c.get("numaNodes") or []),
                memory=memory,
                devices=devices,
            )
        numa_nodes = frozenset(_numa_id(n, "numaNodes") for n in obj.get("numaNodes") or [])
        return cls(obj["node"], numa_nodes, containers)

    # ---- Koordinator ---------------------------------------------------------------------------

    def to_koordinator_resource_status(self) -> str:
        """Koordinator's ``scheduling.koordinator.sh/resource-status`` for this placement.

        ``cpuset`` is the pod's exclusive CPUs; ``numaNodeResources`` lists, per NUMA node, the
        CPU (the exclusive CPUs there, or the request's share) and memory the pod takes there.
        """
        per_numa: dict[int, dict[str, int]] = {}
        for c in self.containers.values():
            for n, resources in c.memory.items():
                for k, v in resources.items():
                    per_numa.setdefault(n, {})[k] = per_numa.get(n, {}).get(k, 0) + v
        return json.dumps(
            {
                "cpuset": str(self.cpuset),
                "numaNodeResources": [
                    {"node": n, "resources": {k: (format_cpu(v) if k == "cpu" else format_bytes(v)) for k, v in sorted(r.items())}}
                    for n, r in sorted(self._numa_cpu(per_numa).items())
                ],
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    def _numa_cpu(self, per_numa: dict[int, dict[str, int]]) -> dict[int, dict[str, int]]:
        for c in self.containers.values():
            if c.cpuset or not c.cpu_millis or not c.numa_nodes:
                continue
            share, nodes = divmod(c.cpu_millis, len(c.numa_nodes))
            for i, n in enumerate(sorted(c.numa_nodes)):
                per_numa.setdefault(n, {})["cpu"] = per_numa.get(n, {}).get("cpu", 0) + share + (1 if i < nodes else 0)
        return per_numa

    def annotations(self) -> dict[str, str]:
        """The annotations a bind writes: ours, Koordinator's resource-status, and any a plugin added."""
        return {PLACEMENT_ANNOTATION: self.to_annotation(), KOORDINATOR_RESOURCE_STATUS: self.to_koordinator_resource_status(),
                **self.extra_annotations}


def _numa_id(value: Any, field_name: str) -> int:
    try:
        numa = int(value)
    except (TypeError, ValueError):
        raise InputError(f"{value!r} is not a NUMA node id", field=field_name) from None
    if numa < 0 or numa > 4095:
        raise InputError(f"NUMA node id {numa} is out of range", field=field_name)
    return numa
