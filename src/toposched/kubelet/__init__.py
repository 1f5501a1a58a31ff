"""A faithful model of the kubelet's node-level decisions (Topology, CPU, memory, device managers)."""

from toposched.kubelet.device_manager import (
    DeviceAllocationError,
    DeviceManager,
    DeviceManagerState,
    container_device_requests,
    device_topology_hints,
    devices_to_allocate,
    filter_by_affinity,
    pod_device_requests,
)
from toposched.kubelet.hints import TopologyHint

__all__ = sorted(
    [
        "DeviceAllocationError",
        "DeviceManager",
        "DeviceManagerState",
        "TopologyHint",
        "container_device_requests",
        "device_topology_hints",
        "devices_to_allocate",
        "filter_by_affinity",
        "pod_device_requests",
    ]
)
