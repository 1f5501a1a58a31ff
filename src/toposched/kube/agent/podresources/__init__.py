"""The kubelet's podresources v1 API: which devices, exclusive CPUs and memory blocks each container holds.

See docs/kube/podresources.md. ``api.proto`` is the API (wire compatible with upstream),
``api_pb2`` its generated messages (``scripts/gen-podresources.sh``), :mod:`.client` the gRPC
client, :mod:`.convert` the checks that turn answers into the values of :mod:`.types`.
"""

from toposched.kube.agent.podresources.client import DEFAULT_SOCKET, PodResourcesClient, read_podresources
from toposched.kube.agent.podresources.types import (
    AllocatableResources,
    ContainerResources,
    DeviceAssignment,
    MemoryAssignment,
    PodResources,
    PodResourcesGetUnsupported,
    PodResourcesSnapshot,
    PodResourcesUnavailable,
)

__all__ = [
    "DEFAULT_SOCKET",
    "AllocatableResources",
    "ContainerResources",
    "DeviceAssignment",
    "MemoryAssignment",
    "PodResources",
    "PodResourcesClient",
    "PodResourcesGetUnsupported",
    "PodResourcesSnapshot",
    "PodResourcesUnavailable",
    "read_podresources",
]
