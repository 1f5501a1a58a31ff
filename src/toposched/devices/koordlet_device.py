"""koordlet's ``Device`` objects (``scheduling.koordinator.sh/v1alpha1``) as a node's device description.

On clusters that run Koordinator, koordlet publishes one cluster-scoped ``Device`` per node (the
node's name) listing its GPUs and RDMA NICs: type, id (the GPU UUID, or the PCI address),
minor number, health, resources (a GPU's ``koordinator.sh/gpu-memory``) and topology (socket,
NUMA node, the PCIe switch's id, the PCI bus id); the shape is Koordinator's
``apis/scheduling/v1alpha1/device_types.go``. toposched reads it as the description of that
node's devices when the node's report carries none (a report published by node-feature-
discovery): device ids, NUMA nodes and PCIe switches become known, so GPU shares and
``toposched.io/device-scope: pcie`` work there without toposched's agent.

Which extended resource each device type is handed out as is configuration
(:data:`DEFAULT_RESOURCES`: ``gpu`` as ``nvidia.com/gpu``, ``rdma`` as ``rdma/hca``). koordlet
names a PCIe switch by an id only; the device's PCIe path is rebuilt as (root port, the
switch's upstream port named by that id, a downstream port), so every device koordlet puts
under one ``pcieID`` sits under one switch (:func:`toposched.devices.inventory.pcie_switch`).
See docs/devices/koordinator-devices.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toposched.errors import InputError
from toposched.kubelet.description import DescribedDevice
from toposched.names import KOORDINATOR_GPU_MEMORY, KOORDINATOR_SCHEDULING_GROUP, NVIDIA_GPU, RDMA_HCA
from toposched.quantity import canonical_units
from toposched.topology.model import DeviceKind

__all__ = ["API_VERSION", "DEFAULT_RESOURCES", "KIND", "devices_from_koordlet"]

API_VERSION = f"{KOORDINATOR_SCHEDULING_GROUP}/v1alpha1"
KIND = "Device"
DEFAULT_RESOURCES: Mapping[str, str] = {"gpu": NVIDIA_GPU, "rdma": RDMA_HCA}
_KINDS = {"gpu": DeviceKind.GPU, "rdma": DeviceKind.INFINIBAND}
MAX_DEVICES = 4096


def devices_from_koordlet(obj: Mapping[str, Any], *, source: str | None = None,
                          resources: Mapping[str, str] = DEFAULT_RESOURCES) -> tuple[str, tuple[DescribedDevice, ...]]:
    """``(node name, its healthy devices)`` from one ``Device`` object (decoded YAML/JSON).

    Devices of a type ``resources`` does not map (``fpga``, ``xpu``) and unhealthy ones are left
    out (the kubelet does not hand them out). A negative ``nodeID`` (koordlet's "unknown") gives
    no NUMA node, an empty ``pcieID`` no switch. Anything malformed raises :class:`InputError`
    naming ``source`` (default ``Device <name>``) and the field.
    """
    if not isinstance(obj, Mapping):
        raise InputError("a Device must be an object", source=source or "Device")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    where = source or (f"Device {name}" if isinstance(name, str) else "Device")
    if not isinstance(name, str) or not name:
        raise InputError("metadata.name (the node's name) is missing", field="metadata.name", source=where)
    if obj.get("apiVersion") not in (None, API_VERSION) or obj.get("kind") not in (None, KIND):
        raise InputError(f"is not a {API_VERSION} {KIND}", field="apiVersion", source=where)
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InputError("expected an object", field="spec", source=where)
    items = spec.get("devices") or []
    if not isinstance(items, list):
        raise InputError("expected a list", field="spec.devices", source=where)
    if len(items) > MAX_DEVICES:
        raise InputError(f"more than {MAX_DEVICES} devices", field="spec.devices", source=where)
    out = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        path = f"spec.devices[{i}]"
        if not isinstance(item, Mapping):
            raise InputError("expected an object", field=path, source=where)
        kind = item.get("type")
        resource = resources.get(kind) if isinstance(kind, str) else None
        if resource is None or item.get("health") is not True:
            continue
        topology = item.get("topology") or {}
        if not isinstance(topology, Mapping):
            raise InputError("expected an object", field=f"{path}.topology", source=where)
        bus = _string(topology.get("busID"), f"{path}.topology.busID", where)
        device_id = _string(item.get("id"), f"{path}.id", where) or bus
        if not device_id:
            raise InputError("a device needs an id or a bus id", field=f"{path}.id", source=where)
        if (resource, device_id) in seen:
            raise InputError(f"device {device_id} is listed twice", field=f"{path}.id", source=where)
        seen.add((resource, device_id))
        numa = topology.get("nodeID")
        if numa is not None and (isinstance(numa, bool) or not isinstance(numa, int) or numa > 4095):
            raise InputError(f"{numa!r} is not a NUMA node id", field=f"{path}.topology.nodeID", source=where)
        switch = _string(topology.get("pcieID"), f"{path}.topology.pcieID", where)
        memory = None
        raw = (item.get("resources") or {}).get(KOORDINATOR_GPU_MEMORY) if isinstance(item.get("resources"), Mapping) else None
        if raw is not None:
            memory = canonical_units("memory", raw, field=f"{path}.resources.{KOORDINATOR_GPU_MEMORY}")
        out.append(DescribedDevice(
            resource=resource, id=device_id, numa_id=numa if numa is not None and numa >= 0 else None,
            pci_address=bus or None,
            pcie_path=(f"root-port:{switch}", switch, f"{switch}/{bus or device_id}") if switch else (),
            memory_bytes=memory, kind=_KINDS.get(kind)))
    return name, tuple(out)


def _string(value: Any, field: str, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {value!r}"[:200], field=field, source=where)
    return value
