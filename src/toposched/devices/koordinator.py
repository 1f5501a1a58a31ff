"""Koordinator's ``scheduling.koordinator.sh/device-allocated`` annotation: write it, read it back.

The shape is Koordinator's ``DeviceAllocations`` (koordinator-sh/koordinator,
``apis/extension/device_share.go``): device type → list of ``{"minor", "resources", "id",
"extension"}``, as Go's ``encoding/json`` writes it — map keys sorted, fields in struct order,
``id`` and ``extension`` left out when empty, no spaces, quantities as strings::

    {"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"50","koordinator.sh/gpu-memory":"8Gi",
     "koordinator.sh/gpu-memory-ratio":"50"}}],"rdma":[{"minor":0,"resources":{"koordinator.sh/rdma":"100"},
     "id":"0000:09:00.0"}]}

Quantities print as apimachinery's ``Quantity.String()``: GPU memory in the binary-SI form
Koordinator creates it with (``"8Gi"``, ``"83201216Ki"``, below 1024 as decimal), everything
else decimal-SI (``"50"``, ``"1k"``, ``"46500m"`` for the trace's 46.5 %).

A GPU's minor number is its position in the node's device order (:class:`NodeGPUState`):
for a machine, the GPUs in PCI address order, which is how the NVIDIA driver numbers
``/dev/nvidiaN`` and how CUDA orders devices under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.
Per GPU the entry holds what Koordinator's scheduler writes: ``gpu-core`` when the request
names compute, and always ``gpu-memory`` (bytes taken) and ``gpu-memory-ratio``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any, NamedTuple

from toposched.devices.inventory import NodeDevice
from toposched.devices.joint import DEVICE_TYPE_KINDS
from toposched.devices.share import (
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    MILLI,
    DeviceShare,
    GPUAllocation,
    GPURequest,
    NodeGPUState,
)
from toposched.errors import InputError
from toposched.names import KOORDINATOR_DEVICE_ALLOCATED as DEVICE_ALLOCATED
from toposched.names import KOORDINATOR_RDMA
from toposched.quantity import parse_quantity

__all__ = [
    "DEVICE_ALLOCATED",
    "GPU",
    "RDMA",
    "DeviceAllocation",
    "format_device_allocated",
    "format_quantity",
    "gpu_allocation",
    "gpu_device_allocations",
    "gpu_entries",
    "parse_device_allocated",
    "whole_device_entries",
]

GPU = "gpu"
RDMA = "rdma"
_RDMA_KINDS = DEVICE_TYPE_KINDS[RDMA]

_BINARY_RESOURCES = frozenset({GPU_MEMORY})
_DECIMAL_SUFFIX = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E", -3: "m", -6: "u", -9: "n"}
_BINARY_SUFFIX = {0: "", 1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}
_MAX_MINOR = 2**31 - 1  # Koordinator's minor is an int32


def format_quantity(value: Fraction | int, *, binary: bool = False) -> str:
    """``value`` as apimachinery prints a Quantity in DecimalSI, or BinarySI when ``binary``.

    DecimalSI: trailing zeros folded into an exponent that is a multiple of 3 (``"1k"``,
    ``"46500m"``). BinarySI: integers of at least 1024 by their largest power-of-1024 suffix
    (``"23040Mi"``); smaller or fractional values fall back to DecimalSI, as upstream does.
    """
    value = Fraction(value)
    if value < 0:
        raise InputError(f"quantity {value} is negative", field="quantity")
    if binary and value >= 1024 and value.denominator == 1:
        amount, power = value.numerator, 0
        while amount % 1024 == 0 and power < 6:
            amount //= 1024
            power += 1
        return f"{amount}{_BINARY_SUFFIX[power]}"
    if value == 0:
        return "0"
    digits, exponent = value, 0
    while digits.denominator != 1:
        digits *= 10
        exponent -= 1
        if exponent < -9:
            raise InputError(f"quantity {value} is finer than apimachinery's nano scale", field="quantity")
    amount = digits.numerator
    while amount % 10 == 0:
        amount //= 10
        exponent += 1
    shift = exponent % 3
    amount *= 10**shift
    exponent -= shift
    suffix = _DECIMAL_SUFFIX.get(exponent, f"e{exponent}")
    return f"{amount}{suffix}"


@dataclass(frozen=True, slots=True)
class DeviceAllocation:
    """One device in ``device-allocated``: minor, resources (exact quantities), optional ID and extension.

    ``extension`` (virtual functions, templates) is kept as parsed and written back unchanged.
    """

    minor: int
    resources: Mapping[str, Fraction]
    id: str = ""
    extension: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if isinstance(self.minor, bool) or not isinstance(self.minor, int) or not 0 <= self.minor <= _MAX_MINOR:
            raise InputError(f"{self.minor!r} is not a device minor number", field="minor")
        resources = {}
        for name, value in self.resources.items():
            if not isinstance(name, str) or not name:
                raise InputError(f"{name!r} is not a resource name", field="resources")
            resources[name] = value if isinstance(value, Fraction) else parse_quantity(value, field=f"resources.{name}")
            if resources[name] < 0:
                raise InputError(f"{value} is negative", field=f"resources.{name}")
        object.__setattr__(self, "resources", MappingProxyType(resources))
        if not isinstance(self.id, str):
            raise InputError(f"{self.id!r} is not a device ID", field="id")
        object.__setattr__(self, "extension", MappingProxyType(dict(self.extension)))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object Go writes for this entry (fields in struct order)."""
        out: dict[str, Any] = {
            "minor": self.minor,
            "resources": {
                name: format_quantity(value, binary=name in _BINARY_RESOURCES)
                for name, value in sorted(self.resources.items())
            },
        }
        if self.id:
            out["id"] = self.id
        if self.extension:
            out["extension"] = dict(self.extension)
        return out


def format_device_allocated(allocations: Mapping[str, Sequence[DeviceAllocation]]) -> str:
    """The annotation text for device type → entries (types with no entries are left out)."""
    obj = {kind: [a.to_dict() for a in entries] for kind, entries in sorted(allocations.items()) if entries}
    return json.dumps(obj, separators=(",", ":"))


def parse_device_allocated(text: str, *, source: str | None = None) -> dict[str, tuple[DeviceAllocation, ...]]:
    """Read a ``device-allocated`` annotation; InputError naming ``source`` and the field if malformed.

    Accepts what Go's decoder accepts for the shape: quantities as strings or numbers, ``null``
    lists and resources, unknown fields ignored; refuses non-integer or out-of-range minors,
    negative or unparsable quantities.
    """
    where = source or DEVICE_ALLOCATED
    try:
        obj = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InputError(f"not JSON: {exc}", field=DEVICE_ALLOCATED, source=where) from None
    if not isinstance(obj, Mapping):
        raise InputError("expected an object of device type to allocations", field=DEVICE_ALLOCATED, source=where)
    out: dict[str, tuple[DeviceAllocation, ...]] = {}
    for kind, entries in obj.items():
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise InputError("expected a list of allocations", field=kind, source=where)
        parsed = []
        for i, entry in enumerate(entries):
            path = f"{kind}[{i}]"
            if not isinstance(entry, Mapping):
                raise InputError("expected an object", field=path, source=where)
            resources = {} if entry.get("resources") is None else entry["resources"]
            extension = {} if entry.get("extension") is None else entry["extension"]
            if not isinstance(resources, Mapping) or not isinstance(extension, Mapping):
                raise InputError("resources and extension must be objects", field=path, source=where)
            for name, value in resources.items():
                if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                    raise InputError(f"{value!r} is not a quantity", field=f"{path}.resources.{name}", source=where)
            try:
                parsed.append(DeviceAllocation(
                    minor=entry.get("minor", 0),
                    resources=resources,
                    id="" if entry.get("id") is None else entry["id"],
                    extension=extension,
                ))
            except InputError as err:
                err.field = f"{path}.{err.field}" if err.field else path
                raise err.with_source(where) from None
        out[str(kind)] = tuple(parsed)
    return out


def gpu_device_allocations(allocation: GPUAllocation, state: NodeGPUState) -> tuple[DeviceAllocation, ...]:
    """Koordinator's GPU entries for an allocation on ``state``'s node, by minor.

    ``gpu-core`` (percent) when the request names compute; ``gpu-memory``: the bytes taken;
    ``gpu-memory-ratio``: 100 for a whole GPU, the requested percent for a ratio request, and
    for a request in bytes Koordinator's ``memoryBytesToRatio`` (float, truncated).
    """
    return gpu_entries(allocation, tuple(state.devices[state.minor(s.device)].memory for s in allocation.shares))


def gpu_entries(allocation: GPUAllocation, memories: Sequence[int]) -> tuple[DeviceAllocation, ...]:
    """:func:`gpu_device_allocations` given each share's GPU memory in bytes (in the order of the shares)."""
    request = allocation.request
    entries = []
    for share, device_memory in zip(allocation.shares, memories, strict=True):
        resources: dict[str, Fraction] = {}
        if request.core is not None:
            resources[GPU_CORE] = Fraction(request.core, 10)
        resources[GPU_MEMORY] = Fraction(share.memory)
        if request.memory_ratio is not None:
            resources[GPU_MEMORY_RATIO] = Fraction(request.memory_ratio, 10)
        else:
            resources[GPU_MEMORY_RATIO] = Fraction(int(float(share.memory) / float(device_memory) * 100))
        entries.append(DeviceAllocation(share.minor, resources))
    return tuple(entries)


def whole_device_entries(inventory: Iterable[NodeDevice], ids: Iterable[str],
                         gpus: NodeGPUState) -> dict[str, tuple[DeviceAllocation, ...]]:
    """Koordinator's entries for whole devices the scheduler chose: ``gpu`` and ``rdma`` by minor.

    A GPU takes all of itself (``gpu-core`` and ``gpu-memory-ratio`` 100, ``gpu-memory`` its
    memory), its minor from ``gpus`` (the node's GPU order); an RDMA NIC takes
    ``koordinator.sh/rdma`` 100, its minor being its position among the node's RDMA devices
    (inventory order), with its PCI address as ``id``. Other devices are left out.
    """
    chosen = set(ids)
    rdma_order = [d for d in inventory if d.kind in _RDMA_KINDS]
    out: dict[str, tuple[DeviceAllocation, ...]] = {}
    whole_gpus = [DeviceAllocation(gpus.minor(d.id), {GPU_CORE: Fraction(100), GPU_MEMORY: Fraction(d.memory),
                                                      GPU_MEMORY_RATIO: Fraction(100)})
                  for d in gpus.devices if d.id in chosen]
    if whole_gpus:
        out[GPU] = tuple(whole_gpus)
    rdma = [DeviceAllocation(minor, {KOORDINATOR_RDMA: Fraction(100)}, id=d.id)
            for minor, d in enumerate(rdma_order) if d.id in chosen]
    if rdma:
        out[RDMA] = tuple(rdma)
    return out


def gpu_allocation(entries: Sequence[DeviceAllocation], state: NodeGPUState, *,
                   source: str | None = None) -> GPUAllocation:
    """Rebuild an allocation from a pod's GPU entries, to replay into a ledger with ``state.take``.

    A GPU whose entry has ratio 100 (all its memory) was taken whole. Every entry must describe
    the same request per GPU; a ratio request is recognised when each entry's memory is its
    ratio of the device, otherwise the request is in bytes. Raises InputError (naming
    ``source``) for unknown minors, foreign resources, or inconsistent entries.
    """
    where = source or DEVICE_ALLOCATED
    if not entries:
        raise InputError("no GPU entries", field=GPU, source=where)
    rows = []
    for entry in entries:
        path = f"{GPU}[minor {entry.minor}]"
        if entry.minor >= len(state.devices):
            raise InputError(f"the node has no GPU with minor {entry.minor}", field=path, source=where)
        foreign = set(entry.resources) - {GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO}
        if foreign:
            raise InputError(f"{sorted(foreign)} are not GPU share resources", field=path, source=where)
        device = state.devices[entry.minor]
        core = entry.resources.get(GPU_CORE)
        ratio = entry.resources.get(GPU_MEMORY_RATIO)
        memory = entry.resources.get(GPU_MEMORY)
        if memory is None and ratio is None:
            raise InputError("names neither gpu-memory nor gpu-memory-ratio", field=path, source=where)
        if core is not None and (core * 10).denominator != 1 or (core or 0) > 100:
            raise InputError(f"gpu-core {float(core):g} is not a share of one GPU in milli", field=path,
                             source=where)
        if memory is None:
            memory = Fraction(math.floor(device.memory * ratio / 100))
        if memory.denominator != 1 or memory > device.memory:
            raise InputError(f"gpu-memory {float(memory):g} is not bytes of this GPU", field=path, source=where)
        whole = ratio == 100
        if whole and memory != device.memory:
            raise InputError("gpu-memory-ratio 100 but not all of the GPU's memory", field=path, source=where)
        rows.append(_Entry(entry.minor, device.memory, None if core is None else int(core * 10), int(memory),
                           ratio, whole))
    if len({r.whole for r in rows}) != 1 or len({r.core for r in rows}) != 1:
        raise InputError("the entries do not describe one request per GPU", field=GPU, source=where)
    try:
        request = _request_of(rows, where)
    except InputError as err:
        raise err.with_source(where) from None
    shares = tuple(
        DeviceShare(state.devices[r.minor].id, r.minor, MILLI if r.whole else (r.core or 0),
                    r.total if r.whole else r.memory, r.whole)
        for r in sorted(rows)
    )
    return GPUAllocation(request, shares)


class _Entry(NamedTuple):
    minor: int
    total: int  # the GPU's memory
    core: int | None  # milli-GPU
    memory: int  # bytes taken
    ratio: Fraction | None  # percent
    whole: bool


def _request_of(rows: list[_Entry], where: str) -> GPURequest:
    core = rows[0].core
    if rows[0].whole:
        return GPURequest(len(rows), core, MILLI, None, False)
    # A ratio request if every entry's memory is its ratio of that GPU; else one size in bytes.
    ratios = {r.ratio for r in rows}
    if len(ratios) == 1 and (ratio := ratios.pop()) is not None and (ratio * 10).denominator == 1 \
            and all(r.total * int(ratio * 10) // MILLI == r.memory for r in rows):
        return GPURequest(len(rows), core, int(ratio * 10), None, True)
    sizes = {r.memory for r in rows}
    if len(sizes) != 1:
        raise InputError("the entries take different memory and no common ratio", field=GPU, source=where)
    return GPURequest(len(rows), core, None, sizes.pop(), True)
