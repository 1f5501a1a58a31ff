"""What the kubelet's podresources API says, as plain frozen values (no protobuf objects).

Ids keep the device plugin's spelling; CPU ids and NUMA ids are sorted and distinct. A device
or memory block whose plugin gave no topology has ``numa_ids == ()``.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from toposched.errors import ToposchedError

__all__ = [
    "AllocatableResources",
    "ContainerResources",
    "DeviceAssignment",
    "MemoryAssignment",
    "PodResources",
    "PodResourcesGetUnsupported",
    "PodResourcesSnapshot",
    "PodResourcesUnavailable",
]


@dataclass(frozen=True, slots=True)
class DeviceAssignment:
    """Devices of one resource (e.g. ``nvidia.com/gpu``), ids as the device plugin names them."""

    resource: str
    ids: tuple[str, ...]
    numa_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MemoryAssignment:
    """A block of ``memory`` or ``hugepages-<size>`` of ``size`` bytes on ``numa_ids``."""

    type: str
    size: int
    numa_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """What one container holds: devices, exclusive CPUs (empty when it shares the pool), memory blocks."""

    name: str
    cpu_ids: tuple[int, ...]
    devices: tuple[DeviceAssignment, ...]
    memory: tuple[MemoryAssignment, ...]


@dataclass(frozen=True, slots=True)
class PodResources:
    """One pod's containers (restartable init containers included, as the kubelet lists them).

    ``cpu_ids``/``memory`` are the pod-level exclusive allocation (kubelet feature
    PodLevelResourceManagers); they repeat what the containers hold and are empty otherwise.
    """

    namespace: str
    name: str
    containers: tuple[ContainerResources, ...]
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[MemoryAssignment, ...] = ()


@dataclass(frozen=True, slots=True)
class AllocatableResources:
    """Everything the kubelet can hand out: devices with topology, exclusive-capable CPUs, memory blocks."""

    devices: tuple[DeviceAssignment, ...]
    cpu_ids: tuple[int, ...]
    memory: tuple[MemoryAssignment, ...]


@dataclass(frozen=True, slots=True)
class PodResourcesSnapshot:
    """One reading of the API: every pod's assignments and the node's allocatable resources."""

    pods: tuple[PodResources, ...]
    allocatable: AllocatableResources


class PodResourcesUnavailable(ToposchedError):
    """The API could not be read: no socket, or a failed call.

    ``socket_path`` names the socket; ``code`` is the gRPC status code of a failed call (None
    when the socket does not exist).
    """

    def __init__(self, message: str, *, socket_path: str, code: grpc.StatusCode | None = None):
        super().__init__(message)
        self.socket_path = socket_path
        self.code = code


class PodResourcesGetUnsupported(PodResourcesUnavailable):
    """The kubelet does not serve ``Get`` (UNIMPLEMENTED: older kubelet or KubeletPodResourcesGet off); use ``list``."""
