"""Which extended resource a device is: an ordered list of rules, read from YAML.

A :class:`DeviceResourceMap` holds rules matched against a :class:`~toposched.topology.Device`
by device kind, PCI vendor id, PCI device ids, PCI class-code prefix and OS device name; the
first rule that matches names the device's resource (``nvidia.com/gpu``, ``rdma/hca``, ...)
or says it is no schedulable resource (``resource: null``). A device that no rule matches has
no resource. The mapping is configuration: the defaults ship as
``toposched/data/devices/default-resource-map.yaml`` and a user file of the same format
replaces them. The format and the default choices are documented in docs/devices/inventory.md.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources as package_files
from typing import Any

from toposched.decoding import check_fields
from toposched.errors import InputError
from toposched.manifests import decode_documents, read_text
from toposched.topology.model import Device, DeviceKind

__all__ = ["DEFAULT_RESOURCE_MAP_FILE", "DeviceResourceMap", "ResourceRule", "load_resource_map"]

#: Where the default map ships, relative to the ``toposched`` package.
DEFAULT_RESOURCE_MAP_FILE = "data/devices/default-resource-map.yaml"

_RULE_KEYS = ("description", "kind", "vendor", "devices", "class", "name", "resource")
_MATCH_KEYS = ("kind", "vendor", "devices", "class", "name")
_HEX_ID = re.compile(r"(?:0[xX])?([0-9a-fA-F]{1,4})")
_CLASS_PREFIX = re.compile(r"(?:0[xX])?([0-9a-fA-F]{2}|[0-9a-fA-F]{4}|[0-9a-fA-F]{6})")
# An extended resource name as Kubernetes accepts it: "<DNS subdomain>/<name>".
_RESOURCE_NAME = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)


@dataclass(frozen=True, slots=True)
class ResourceRule:
    """One rule: what it matches and the resource it gives (``None``: no resource).

    Every given criterion must hold: ``kinds`` (any of them), ``vendor``, ``device_ids`` (any of
    them), ``class_prefix`` (lower-case hex digits the device's 6-digit class code starts with)
    and ``name`` (a shell-style pattern on the device's OS name, e.g. ``mlx5_*``).
    """

    resource: str | None
    kinds: frozenset[DeviceKind] = frozenset()
    vendor: int | None = None
    device_ids: frozenset[int] = frozenset()
    class_prefix: str = ""
    name: str | None = None
    description: str = ""

    def matches(self, device: Device) -> bool:
        """True when the device meets every criterion the rule gives."""
        if self.kinds and device.kind not in self.kinds:
            return False
        if self.vendor is not None and device.vendor_id != self.vendor:
            return False
        if self.device_ids and device.device_id not in self.device_ids:
            return False
        if self.class_prefix and (
            device.class_code is None or not f"{device.class_code:06x}".startswith(self.class_prefix)
        ):
            return False
        return self.name is None or (device.name is not None and fnmatch.fnmatchcase(device.name, self.name))


@dataclass(frozen=True, slots=True)
class DeviceResourceMap:
    """Ordered rules turning devices into extended resources; ``source`` names where they came from."""

    rules: tuple[ResourceRule, ...]
    source: str = ""

    @classmethod
    def default(cls) -> DeviceResourceMap:
        """The map shipped with toposched (``toposched/data/devices/default-resource-map.yaml``)."""
        return _default_map()

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> DeviceResourceMap:
        """Read a map from a YAML (or JSON) file; InputError naming the file and the field on bad input."""
        return load_resource_map(path)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<device resource map>") -> DeviceResourceMap:
        """Build a map from decoded YAML: ``{"rules": [rule, ...]}``.

        Raises InputError (``source``, and a field such as ``rules[2].vendor``) for anything but
        a mapping with a ``rules`` list of rule mappings: unknown keys, an unknown kind, a PCI id
        that is not a quoted hex string of at most 4 digits, a class prefix that is not 2, 4 or 6
        hex digits, a missing or empty resource, a resource name Kubernetes would refuse, a rule
        matching everything.
        """
        if not isinstance(data, Mapping):
            raise InputError(f"expected a mapping with a rules list, got {_kind(data)}", field="rules", source=source)
        try:
            check_fields(data, ("rules",), "")
        except InputError as err:
            raise err.with_source(source) from None
        raw = data.get("rules")
        if not isinstance(raw, list):
            raise InputError(f"rules must be a list of rules, got {_kind(raw)}", field="rules", source=source)
        rules = []
        for i, item in enumerate(raw):
            try:
                rules.append(_parse_rule(item, f"rules[{i}]"))
            except InputError as err:
                raise err.with_source(source) from None
        return cls(tuple(rules), source)

    def resource_of(self, device: Device) -> str | None:
        """The resource of the first rule matching ``device``; None when that rule or no rule gives one."""
        for rule in self.rules:
            if rule.matches(device):
                return rule.resource
        return None

    def kind_of(self, resource: str) -> DeviceKind | None:
        """The one device kind the rules naming ``resource`` restrict it to; None when unknown or several.

        Used for nodes known only from a NodeResourceTopology report, whose devices carry a
        resource name but no PCI facts.
        """
        kinds: set[DeviceKind] = set()
        for rule in self.rules:
            if rule.resource == resource:
                if not rule.kinds:
                    return None
                kinds |= rule.kinds
        return next(iter(kinds)) if len(kinds) == 1 else None

    @property
    def resources(self) -> tuple[str, ...]:
        """Every resource some rule gives, sorted."""
        return tuple(sorted({r.resource for r in self.rules if r.resource is not None}))


def load_resource_map(path: str | os.PathLike[str]) -> DeviceResourceMap:
    """Read a device resource map from a YAML or JSON file (format in docs/devices/inventory.md)."""
    source = os.fspath(path)
    return _from_text(read_text(source), source)


@functools.cache
def _default_map() -> DeviceResourceMap:
    text = (package_files.files("toposched") / DEFAULT_RESOURCE_MAP_FILE).read_text(encoding="utf-8")
    return _from_text(text, f"toposched/{DEFAULT_RESOURCE_MAP_FILE}")


def _from_text(text: str, source: str) -> DeviceResourceMap:
    documents = decode_documents(text, source)
    if len(documents) != 1:
        raise InputError(f"expected one document, found {len(documents)}", source=source)
    return DeviceResourceMap.from_dict(documents[0], source)


# ---- parsing one rule ------------------------------------------------------------------------


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def _parse_rule(item: Any, path: str) -> ResourceRule:
    if not isinstance(item, Mapping):
        raise InputError(f"a rule must be a mapping, got {_kind(item)}", field=path)
    check_fields(item, _RULE_KEYS, path)
    if not any(key in item for key in _MATCH_KEYS):
        raise InputError(f"a rule needs at least one of {', '.join(_MATCH_KEYS)}", field=path)
    if "resource" not in item:
        raise InputError("resource is missing (null says: no resource)", field=f"{path}.resource")
    description = item.get("description", "")
    if not isinstance(description, str):
        raise InputError(f"must be a string, got {_kind(description)}", field=f"{path}.description")
    name = item.get("name")
    if name is not None and (not isinstance(name, str) or not name):
        raise InputError(f"must be a non-empty name pattern, got {name!r}", field=f"{path}.name")
    return ResourceRule(
        resource=_resource(item["resource"], f"{path}.resource"),
        kinds=_kinds(item.get("kind"), f"{path}.kind"),
        vendor=None if item.get("vendor") is None else _hex_id(item["vendor"], f"{path}.vendor"),
        device_ids=_device_ids(item.get("devices"), f"{path}.devices"),
        class_prefix=_class_prefix(item.get("class"), f"{path}.class"),
        name=name,
        description=description,
    )


def _resource(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(f"must be a resource name or null, got {_kind(value)}", field=field)
    if not value:
        raise InputError("the resource name is empty (null says: no resource)", field=field)
    domain, _, name = value.partition("/")
    if not _RESOURCE_NAME.fullmatch(value) or len(domain) > 253 or len(name) > 63:
        raise InputError(f"{value!r} is not an extended resource name <domain>/<name>", field=field)
    return value


def _kinds(value: Any, field: str) -> frozenset[DeviceKind]:
    if value is None:
        return frozenset()
    items = value if isinstance(value, list) else [value]
    if not items:
        raise InputError("an empty kind list matches nothing", field=field)
    known = ", ".join(k.value for k in DeviceKind)
    out = set()
    for item in items:
        try:
            out.add(DeviceKind(item))
        except ValueError:
            raise InputError(f"unknown device kind {item!r} (known: {known})", field=field) from None
    return frozenset(out)


def _hex_id(value: Any, field: str) -> int:
    # YAML reads 1002 as the integer one thousand and two, not 0x1002: ids must be strings.
    if not isinstance(value, str):
        raise InputError(f"write PCI ids as quoted hex strings (\"10de\"), got {_kind(value)} {value!r}", field=field)
    match = _HEX_ID.fullmatch(value.strip())
    if match is None:
        raise InputError(f"{value!r} is not a PCI id (1 to 4 hex digits)", field=field)
    return int(match.group(1), 16)


def _device_ids(value: Any, field: str) -> frozenset[int]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not value:
        raise InputError(f"must be a non-empty list of PCI device ids, got {_kind(value)}", field=field)
    return frozenset(_hex_id(v, f"{field}[{i}]") for i, v in enumerate(value))


def _class_prefix(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"write the class prefix as a quoted hex string (\"0207\"), got {_kind(value)}", field=field)
    match = _CLASS_PREFIX.fullmatch(value.strip())
    if match is None:
        raise InputError(f"{value!r} is not a PCI class prefix of 2, 4 or 6 hex digits", field=field)
    return match.group(1).lower()
