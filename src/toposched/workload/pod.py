"""What a pod asks for: containers, init containers, requests/limits, QoS class, pod request.

Quantities are held as integers in canonical units (see :mod:`toposched.quantity`): ``cpu`` in
millicores, memory/hugepages/storage in bytes, extended resources as counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toposched.errors import InputError
from toposched.inputs import (
    MAX_CONTAINERS,
    check_annotations,
    check_dns_label,
    check_dns_subdomain,
    check_labels,
    check_resource_name,
    check_string_map,
    hugepage_size,
    is_extended_resource,
)
from toposched.quantity import canonical_units, check_amount, parse_quantity

__all__ = ["BEST_EFFORT", "BURSTABLE", "GUARANTEED", "Container", "Pod", "Toleration", "add_resources", "max_resources",
           "subtract_resources"]

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

_QOS_RESOURCES = ("cpu", "memory")
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping)) if mapping else _EMPTY


def add_resources(total: dict[str, int], extra: Mapping[str, int]) -> dict[str, int]:
    """Add ``extra`` into ``total`` in place and return it."""
    for name, value in extra.items():
        total[name] = total.get(name, 0) + value
    return total


def subtract_resources(total: Mapping[str, int], extra: Mapping[str, int]) -> dict[str, int]:
    """``total`` less ``extra``, without the resources that come to 0 (a resource ``total`` lacks counts 0:
    a request of 0 may have been dropped from it already)."""
    out = dict(total)
    for name, value in extra.items():
        out[name] = out.get(name, 0) - value
    return {name: value for name, value in out.items() if value}


def max_resources(total: dict[str, int], other: Mapping[str, int]) -> dict[str, int]:
    """Raise each resource of ``total`` to at least its value in ``other``, in place."""
    for name, value in other.items():
        if value > total.get(name, 0):
            total[name] = value
    return total


@dataclass(frozen=True, slots=True)
class Container:
    """One container's resources. ``restart_policy="Always"`` on an init container makes it a sidecar."""

    name: str
    requests: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    limits: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    restart_policy: str | None = None
    _limits_or_requests: Mapping[str, int] = field(default_factory=lambda: _EMPTY, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for kind, values in (("requests", self.requests), ("limits", self.limits)):
            for name, value in values.items():
                check_amount(value, field=f"{self.name}.{kind}.{name}")
        # The API server defaults a missing request to the limit; do the same for raw manifests.
        requests = dict(self.requests)
        for name, value in self.limits.items():
            requests.setdefault(name, value)
        object.__setattr__(self, "requests", _frozen(requests))
        object.__setattr__(self, "limits", _frozen(self.limits))
        object.__setattr__(self, "_limits_or_requests", _frozen({**self.limits, **{
            name: value for name, value in requests.items() if name not in self.limits}}))

    @property
    def limits_or_requests(self) -> Mapping[str, int]:
        """Each resource's limit, or its request where it has no limit (how the kubelet reads extended resources).

        Limits come first, in their order, then resources given only as requests.
        """
        return self._limits_or_requests

    @property
    def is_sidecar(self) -> bool:
        """True for a restartable init container (``restartPolicy: Always``)."""
        return self.restart_policy == "Always"

    def request(self, resource: str) -> int:
        """The request for one resource in canonical units, 0 when absent."""
        return self.requests.get(resource, 0)


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration (``operator`` Equal or Exists; empty ``effect`` tolerates every effect)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        """Whether this toleration tolerates a taint with this key, value and effect."""
        if self.effect and self.effect != effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != key:
            return False
        return self.operator == "Exists" or self.value == value


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod as the scheduler and the kubelet see it."""

    name: str
    namespace: str = "default"
    uid: str = ""
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    node_name: str | None = None
    scheduler_name: str = "default-scheduler"
    priority: int = 0
    overhead: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    node_selector: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    tolerations: tuple[Toleration, ...] = ()
    # Derived once: a pod never changes, and schedulers ask these many times per pod.
    _qos: str = field(default="", init=False, repr=False, compare=False)
    _requests: tuple[tuple[str, int], ...] = field(default=(), init=False, repr=False, compare=False)
    _extended: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "containers", tuple(self.containers))
        object.__setattr__(self, "init_containers", tuple(self.init_containers))
        for name in ("annotations", "labels", "overhead", "node_selector"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "tolerations", tuple(self.tolerations))
        names = [c.name for c in (*self.init_containers, *self.containers)]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise InputError(f"container names repeat: {dupes}", field="spec.containers", source=f"pod {self.key}")
        object.__setattr__(self, "_qos", self._compute_qos())
        object.__setattr__(self, "_requests", tuple(self._compute_requests().items()))
        object.__setattr__(self, "_extended", any("/" in r for c in self.all_containers for r in c.limits_or_requests))

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def all_containers(self) -> tuple[Container, ...]:
        """Init containers then app containers, in the order the kubelet admits them."""
        return self.init_containers + self.containers

    @property
    def asks_extended(self) -> bool:
        """Whether some container asks for a ``vendor/name`` resource (devices, GPU shares)."""
        return self._extended

    def container(self, name: str) -> Container:
        """The container (init or app) with this name; ``KeyError`` if none."""
        for c in self.all_containers:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def qos_class(self) -> str:
        """The pod's QoS class, computed as the kubelet's ``GetPodQOS``."""
        return self._qos

    def _compute_qos(self) -> str:
        requests: dict[str, int] = {}
        limits: dict[str, int] = {}
        guaranteed = True
        for c in (*self.containers, *self.init_containers):
            for name in _QOS_RESOURCES:
                if c.requests.get(name, 0) > 0:
                    requests[name] = requests.get(name, 0) + c.requests[name]
            found = set()
            for name in _QOS_RESOURCES:
                if c.limits.get(name, 0) > 0:
                    found.add(name)
                    limits[name] = limits.get(name, 0) + c.limits[name]
            if found != set(_QOS_RESOURCES):
                guaranteed = False
        if not requests and not limits:
            return BEST_EFFORT
        if guaranteed and all(limits.get(n) == v for n, v in requests.items()) and len(requests) == len(limits):
            return GUARANTEED
        return BURSTABLE

    def effective_requests(self) -> dict[str, int]:
        """The pod's request as the scheduler counts it (``resource.PodRequests``), as a new dict.

        App containers and sidecars run together; each regular init container runs alone next
        to the sidecars started before it; the pod needs the larger of the two, plus overhead.
        """
        return dict(self._requests)

    def _compute_requests(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for c in self.containers:
            add_resources(total, c.requests)
        sidecars: dict[str, int] = {}
        init_peak: dict[str, int] = {}
        for c in self.init_containers:
            if c.is_sidecar:
                add_resources(total, c.requests)
                add_resources(sidecars, c.requests)
                max_resources(init_peak, sidecars)
            else:
                max_resources(init_peak, add_resources(dict(c.requests), sidecars))
        max_resources(total, init_peak)
        return add_resources(total, self.overhead)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], source: str | None = None) -> Pod:
        """Parse a real pod object (JSON/YAML as the API server returns it or as written by hand).

        Unknown fields are ignored; malformed ones raise :class:`InputError` naming the pod
        and the field path.
        """
        if not isinstance(obj, Mapping):
            raise InputError("a pod must be a mapping", source=source)
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        if not isinstance(meta, Mapping):
            raise InputError(f"expected a mapping, got {type(meta).__name__}", field="metadata", source=source)
        if not isinstance(spec, Mapping):
            raise InputError(f"expected a mapping, got {type(spec).__name__}", field="spec", source=source)
        raw_name = meta.get("name") or meta.get("generateName") or ""
        raw_namespace = meta.get("namespace") or "default"
        name = raw_name if isinstance(raw_name, str) else "?"
        namespace = raw_namespace if isinstance(raw_namespace, str) else "?"
        where = source or f"pod {namespace[:63]}/{name[:253]}"
        if not raw_name:
            raise InputError("the pod has no name", field="metadata.name", source=where)
        label = f"pod {namespace[:63]}/{name[:253]}"
        try:
            if meta.get("name"):
                check_dns_subdomain(raw_name, field="metadata.name")
            else:
                check_dns_subdomain(str(raw_name).rstrip("-") + "x" if isinstance(raw_name, str) else raw_name,
                                    field="metadata.generateName")
            check_dns_label(raw_namespace, field="metadata.namespace")
            uid = meta.get("uid") or ""
            if not isinstance(uid, str) or len(uid) > 128:
                raise InputError(f"{uid!r:.60} is not a UID string", field="metadata.uid")
            if spec.get("containers") is None:
                raise InputError("a pod needs at least one container", field="spec.containers")
            containers = _containers(spec.get("containers"), "spec.containers")
            if not containers:
                raise InputError("a pod needs at least one container", field="spec.containers")
            init = _containers(spec.get("initContainers"), "spec.initContainers")
            if len(containers) + len(init) > MAX_CONTAINERS:
                raise InputError(f"more than {MAX_CONTAINERS} containers (the limit)", field="spec.containers")
            overhead = _resources(spec.get("overhead"), "spec.overhead")
            tolerations = tuple(_toleration(t, f"spec.tolerations[{i}]")
                                for i, t in enumerate(_list(spec.get("tolerations"), "spec.tolerations")))
            priority = spec.get("priority") or 0
            if isinstance(priority, bool) or not isinstance(priority, int) or not -(2**31) <= priority < 2**31:
                raise InputError(f"{priority!r:.60} is not a 32-bit integer", field="spec.priority")
            node_name = spec.get("nodeName") or None
            if node_name is not None:
                check_dns_subdomain(node_name, field="spec.nodeName")
            scheduler_name = spec.get("schedulerName") or "default-scheduler"
            if not isinstance(scheduler_name, str):
                raise InputError(f"expected a string, got {type(scheduler_name).__name__}", field="spec.schedulerName")
            return cls(
                name=str(raw_name),
                namespace=str(raw_namespace),
                uid=uid,
                containers=containers,
                init_containers=init,
                annotations=check_annotations(_plain(meta.get("annotations")), field="metadata.annotations"),
                labels=check_labels(_plain(meta.get("labels")), field="metadata.labels"),
                node_name=node_name,
                scheduler_name=scheduler_name,
                priority=priority,
                overhead=overhead,
                node_selector=check_string_map(_plain(spec.get("nodeSelector")), field="spec.nodeSelector"),
                tolerations=tolerations,
            )
        except InputError as err:
            if err.source is not None and err.source.startswith("pod "):
                err.source = None
            if source and not err.source:
                err.source = f"{source}: {label}"
            raise err.with_source(where) from None


def _plain(value: Any) -> Any:
    """A Mapping as a dict (the checks take dicts); anything else unchanged."""
    return dict(value) if isinstance(value, Mapping) and not isinstance(value, dict) else value


def _toleration(t: Mapping[str, Any], path: str) -> Toleration:
    values = {}
    for key, default in (("key", ""), ("operator", "Equal"), ("value", ""), ("effect", "")):
        value = t.get(key, default)
        if value is None:
            value = default
        if not isinstance(value, str):
            raise InputError(f"expected a string, got {type(value).__name__}", field=f"{path}.{key}")
        values[key] = value
    if values["operator"] not in ("Equal", "Exists"):
        raise InputError(f"operator {values['operator'][:40]!r} is not Equal or Exists", field=f"{path}.operator")
    return Toleration(values["key"], values["operator"], values["value"], values["effect"])


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"expected a list, got {type(value).__name__}", field=path)
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise InputError(f"expected a mapping, got {type(item).__name__}", field=f"{path}[{i}]")
    return value


def _resources(value: Any, path: str) -> dict[str, int]:
    """A requests/limits/overhead mapping: valid resource names, finite quantities, whole extended resources."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping of resource quantities, got {type(value).__name__}", field=path)
    out: dict[str, int] = {}
    for k, v in value.items():
        where = f"{path}.{str(k)[:80]}"
        name = check_resource_name(k, field=where)
        units = canonical_units(name, v, field=where)
        # Whole devices and whole pages are judged on the exact value: units are rounded up.
        if is_extended_resource(name) and parse_quantity(v, field=where).denominator != 1:
            raise InputError(f"{v!r:.40} is not a whole number: {name} is counted in whole devices", field=where)
        if name.startswith("hugepages-") and parse_quantity(v, field=where) % hugepage_size(name, field=where):
            raise InputError(f"{v!r:.40} is not a whole number of {name[len('hugepages-'):]} pages", field=where)
        out[name] = units
    return out


def _containers(value: Any, path: str) -> tuple[Container, ...]:
    out = []
    for i, c in enumerate(_list(value, path)):
        where = f"{path}[{i}]"
        name = c.get("name")
        if not name:
            raise InputError("a container needs a name", field=f"{where}.name")
        check_dns_label(name, field=f"{where}.name")
        resources = c.get("resources") or {}
        if not isinstance(resources, Mapping):
            raise InputError(f"expected a mapping, got {type(resources).__name__}", field=f"{where}.resources")
        requests = _resources(resources.get("requests"), f"{where}.resources.requests")
        limits = _resources(resources.get("limits"), f"{where}.resources.limits")
        for resource, request in requests.items():
            limit = limits.get(resource)
            overcommit = not (is_extended_resource(resource) or resource.startswith("hugepages-"))
            if limit is None and not overcommit:
                raise InputError(f"{resource} cannot be overcommitted: give a limit equal to the request",
                                 field=f"{where}.resources.limits.{resource}")
            if limit is not None and not overcommit and request != limit:
                raise InputError(f"{resource} cannot be overcommitted: the request must equal the limit",
                                 field=f"{where}.resources.requests.{resource}")
            if limit is not None and request > limit:
                raise InputError(f"the request is above the limit ({resource})",
                                 field=f"{where}.resources.requests.{resource}")
        restart = c.get("restartPolicy")
        if restart is not None and not isinstance(restart, str):
            raise InputError(f"expected a string, got {type(restart).__name__}", field=f"{where}.restartPolicy")
        out.append(Container(name=name, requests=requests, limits=limits, restart_policy=restart))
    return tuple(out)


def pods_from_objects(objects: Iterable[Mapping[str, Any]], source: str | None = None) -> list[Pod]:
    """Parse every object of kind Pod (or with no kind) among ``objects``."""
    return [Pod.from_dict(o, source) for o in objects if o.get("kind", "Pod") == "Pod"]
