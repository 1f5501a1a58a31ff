"""The hardware topology model, its readers and its NodeResourceTopology writer."""

from toposched.topology.cpuset import CPUSet
from toposched.topology.model import (
    Core,
    Device,
    DeviceKind,
    LogicalCPU,
    Machine,
    NUMANode,
    Socket,
    classify_pci_class,
)

__all__ = [
    "CPUSet",
    "Core",
    "Device",
    "DeviceKind",
    "LogicalCPU",
    "Machine",
    "NUMANode",
    "Socket",
    "classify_pci_class",
]
