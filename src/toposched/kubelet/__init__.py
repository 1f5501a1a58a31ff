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
from toposched.kubelet.fast_merge import fast_merge_hints
from toposched.kubelet.hints import TopologyHint
from toposched.kubelet.scope import HintProvider, TopologyManager, admit_pod
from toposched.kubelet.topology_manager import (
    PolicyOptions,
    TopologyAffinityError,
    UnexpectedAdmissionError,
    merge_hints,
    numa_distances,
    parse_policy_options,
)

__all__ = sorted(
    [
        "DeviceAllocationError",
        "DeviceManager",
        "DeviceManagerState",
        "HintProvider",
        "PolicyOptions",
        "TopologyAffinityError",
        "TopologyHint",
        "TopologyManager",
        "UnexpectedAdmissionError",
        "admit_pod",
        "container_device_requests",
        "device_topology_hints",
        "devices_to_allocate",
        "fast_merge_hints",
        "filter_by_affinity",
        "merge_hints",
        "numa_distances",
        "parse_policy_options",
        "pod_device_requests",
    ]
)
