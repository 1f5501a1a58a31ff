"""A faithful model of the kubelet's node-level decisions (Topology, CPU, memory, device managers)."""

from toposched.kubelet.config import KubeletConfig
from toposched.kubelet.cpu_assignment import CPUAllocationError, CPUTopology, take_by_topology
from toposched.kubelet.cpu_manager import (
    CPUState,
    SMTAlignmentError,
    StaticCPUPolicy,
    StaticPolicyOptions,
    cpu_topology_hints,
    parse_static_policy_options,
)
from toposched.kubelet.cpu_state import (
    CPUManagerCheckpoint,
    dumps_checkpoint,
    loads_checkpoint,
    read_checkpoint,
    write_checkpoint,
)
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
from toposched.kubelet.memory_manager import MemoryAllocation, MemoryManagerError, StaticMemoryPolicy
from toposched.kubelet.memory_state import (
    MemoryManagerCheckpoint,
    format_memory_state,
    parse_memory_state,
    read_memory_state,
    write_memory_state,
)
from toposched.kubelet.node import Admission, ContainerAllocation, KubeletNode
from toposched.kubelet.scope import HintProvider, TopologyManager, admit_pod
from toposched.kubelet.topology_manager import (
    PolicyOptions,
    TopologyAffinityError,
    UnexpectedAdmissionError,
    merge_hints,
    numa_distances,
    parse_policy_options,
)

__all__ = [
    "Admission",
    "CPUAllocationError",
    "CPUManagerCheckpoint",
    "CPUState",
    "CPUTopology",
    "ContainerAllocation",
    "DeviceAllocationError",
    "DeviceManager",
    "DeviceManagerState",
    "HintProvider",
    "KubeletConfig",
    "KubeletNode",
    "MemoryAllocation",
    "MemoryManagerCheckpoint",
    "MemoryManagerError",
    "PolicyOptions",
    "SMTAlignmentError",
    "StaticCPUPolicy",
    "StaticMemoryPolicy",
    "StaticPolicyOptions",
    "TopologyAffinityError",
    "TopologyHint",
    "TopologyManager",
    "UnexpectedAdmissionError",
    "admit_pod",
    "container_device_requests",
    "cpu_topology_hints",
    "device_topology_hints",
    "devices_to_allocate",
    "dumps_checkpoint",
    "fast_merge_hints",
    "filter_by_affinity",
    "format_memory_state",
    "loads_checkpoint",
    "merge_hints",
    "numa_distances",
    "parse_memory_state",
    "parse_policy_options",
    "parse_static_policy_options",
    "pod_device_requests",
    "read_checkpoint",
    "read_memory_state",
    "take_by_topology",
    "write_checkpoint",
    "write_memory_state",
]
