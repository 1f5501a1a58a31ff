"""Kubernetes Node objects as the scheduler needs them: allocatable, labels, taints, cordon."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toposched.errors import InputError
from toposched.quantity import canonical_units
from toposched.workload import Pod

__all__ = ["NodeSpec", "Taint", "untolerated_taint"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint; only NoSchedule and NoExecute keep pods off at scheduling time."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node's scheduling-relevant facts; ``allocatable`` is in canonical units (cpu millicores)."""

    name: str
    allocatable: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            raise InputError("a node needs a name", field="metadata.name")
        for key in ("allocatable", "labels", "annotations"):
            object.__setattr__(self, key, MappingProxyType(dict(getattr(self, key))))
        object.__setattr__(self, "taints", tuple(self.taints))
        for resource, value in self.allocatable.items():
            if not isinstance(value, int) or value < 0:
                raise InputError(f"{value!r} is not a non-negative quantity", field=f"status.allocatable.{resource}",
                                 source=f"node {self.name}")

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], source: str | None = None) -> "NodeSpec":
        """Parse a real Node object (as ``kubectl get node -o yaml`` prints it)."""
        if not isinstance(obj, Mapping):
            raise InputError("a Node must be a mapping", source=source)
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        name = meta.get("name") if isinstance(meta, Mapping) else None
        where = source or f"node {name}"
        if not name:
            raise InputError("the node has no name", field="metadata.name", source=where)
        try:
            raw = status.get("allocatable") or status.get("capacity") or {}
            if not isinstance(raw, Mapping):
                raise InputError("expected a mapping of quantities", field="status.allocatable")
            allocatable = {str(k): canonical_units(str(k), v, field=f"status.allocatable.{k}") for k, v in raw.items()}
            taints = []
            for i, t in enumerate(spec.get("taints") or []):
                if not isinstance(t, Mapping) or not t.get("key"):
                    raise InputError("a taint needs a key", field=f"spec.taints[{i}].key")
                effect = t.get("effect", "NoSchedule")
                if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                    raise InputError(f"unknown effect {effect!r}", field=f"spec.taints[{i}].effect")
                taints.append(Taint(str(t["key"]), str(t.get("value", "")), effect))
            return cls(
                name=str(name),
                allocatable=allocatable,
                labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
                annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
                taints=tuple(taints),
                unschedulable=bool(spec.get("unschedulable", False)),
            )
        except InputError as err:
            raise err.with_source(where) from None


def untolerated_taint(node: NodeSpec, pod: Pod) -> Taint | None:
    """The first NoSchedule/NoExecute taint of the node that the pod does not tolerate, if any."""
    for taint in node.taints:
        if taint.effect == "PreferNoSchedule":
            continue
        if not any(t.tolerates(taint.key, taint.value, taint.effect) for t in pod.tolerations):
            return taint
    return None
