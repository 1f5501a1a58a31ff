"""Kubernetes Node objects as the scheduler needs them: allocatable, labels, taints, cordon."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toposched.errors import InputError
from toposched.inputs import (
    check_annotations,
    check_dns_subdomain,
    check_labels,
    check_qualified_name,
    check_resource_name,
    is_extended_resource,
)
from toposched.quantity import canonical_units, check_amount, parse_quantity
from toposched.workload import Pod

__all__ = ["NodeSpec", "Taint", "untolerated_among", "untolerated_taint"]

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
            check_amount(value, field=f"status.allocatable.{resource}", source=f"node {self.name}")

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], source: str | None = None) -> NodeSpec:
        """Parse a real Node object (as ``kubectl get node -o yaml`` prints it)."""
        if not isinstance(obj, Mapping):
            raise InputError("a Node must be a mapping", source=source)
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        name = meta.get("name") if isinstance(meta, Mapping) else None
        shown = name if isinstance(name, str) else "?"
        where = source or f"node {shown[:253]}"
        if not isinstance(meta, Mapping):
            raise InputError(f"expected a mapping, got {type(meta).__name__}", field="metadata", source=where)
        if not name:
            raise InputError("the node has no name", field="metadata.name", source=where)
        try:
            check_dns_subdomain(name, field="metadata.name")
            for part, value in (("spec", spec), ("status", status)):
                if not isinstance(value, Mapping):
                    raise InputError(f"expected a mapping, got {type(value).__name__}", field=part)
            allocatable: dict[str, int] = {}
            for key in ("capacity", "allocatable"):
                raw = status.get(key)
                if raw is None:
                    continue
                if not isinstance(raw, Mapping):
                    raise InputError(f"expected a mapping of quantities, got {type(raw).__name__}", field=f"status.{key}")
                values = {}
                for k, v in raw.items():
                    field = f"status.{key}.{str(k)[:80]}"
                    check_resource_name(k, field=field)
                    if is_extended_resource(k) and parse_quantity(v, field=field).denominator != 1:
                        raise InputError(f"{v!r:.40} is not a whole number of {k}", field=field)
                    values[k] = canonical_units(k, v, field=field)
                if values:  # allocatable when given, else capacity
                    allocatable = values
            taints = []
            raw_taints = spec.get("taints") or []
            if not isinstance(raw_taints, list):
                raise InputError(f"expected a list, got {type(raw_taints).__name__}", field="spec.taints")
            for i, t in enumerate(raw_taints):
                if not isinstance(t, Mapping) or not t.get("key"):
                    raise InputError("a taint needs a key", field=f"spec.taints[{i}].key")
                check_qualified_name(t["key"], field=f"spec.taints[{i}].key")
                effect = t.get("effect", "NoSchedule")
                if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                    raise InputError(f"unknown effect {effect!r:.40}", field=f"spec.taints[{i}].effect")
                value = t.get("value", "")
                if not isinstance(value, str):
                    raise InputError(f"expected a string, got {type(value).__name__}", field=f"spec.taints[{i}].value")
                taints.append(Taint(str(t["key"]), value, effect))
            unschedulable = spec.get("unschedulable", False)
            if unschedulable is None:
                unschedulable = False
            if not isinstance(unschedulable, bool):
                raise InputError(f"{unschedulable!r:.40} is not true or false", field="spec.unschedulable")
            return cls(
                name=name,
                allocatable=allocatable,
                labels=check_labels(_plain(meta.get("labels")), field="metadata.labels"),
                annotations=check_annotations(_plain(meta.get("annotations")), field="metadata.annotations"),
                taints=tuple(taints),
                unschedulable=unschedulable,
            )
        except InputError as err:
            raise err.with_source(where) from None


def _plain(value: Any) -> Any:
    """A Mapping as a dict (the checks take dicts); anything else unchanged."""
    return dict(value) if isinstance(value, Mapping) and not isinstance(value, dict) else value


def untolerated_taint(node: NodeSpec, pod: Pod) -> Taint | None:
    """The first NoSchedule/NoExecute taint of the node that the pod does not tolerate, if any."""
    return untolerated_among(node.taints, pod)


def untolerated_among(taints: Iterable[Taint], pod: Pod) -> Taint | None:
    """The first NoSchedule/NoExecute taint of ``taints`` that the pod does not tolerate, if any."""
    for taint in taints:
        if taint.effect == "PreferNoSchedule":
            continue
        if not any(t.tolerates(taint.key, taint.value, taint.effect) for t in pod.tolerations):
            return taint
    return None
