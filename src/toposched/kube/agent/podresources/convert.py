"""Turn the API's protobuf answers into our values, refusing what no kubelet would send.

Every check raises :class:`InputError` with ``source`` the socket path and ``field`` the
protobuf path of the bad value (e.g. ``ListPodResourcesResponse.pod_resources[0].containers[1]
.devices[0].topology.nodes[0].ID``): a negative NUMA or CPU id, an empty resource name, device
id, memory type, pod or container name. DRA ``dynamic_resources`` are not carried.
"""

from __future__ import annotations

from collections.abc import Iterable

from toposched.errors import InputError
from toposched.kube.agent.podresources import api_pb2
from toposched.kube.agent.podresources.types import (
    AllocatableResources,
    ContainerResources,
    DeviceAssignment,
    MemoryAssignment,
    PodResources,
)

__all__ = ["allocatable_from_proto", "pod_from_proto", "pods_from_proto"]


def pods_from_proto(response: api_pb2.ListPodResourcesResponse, source: str) -> tuple[PodResources, ...]:
    """Every pod of a List answer, in the kubelet's order."""
    return tuple(
        pod_from_proto(pod, source, f"ListPodResourcesResponse.pod_resources[{i}]")
        for i, pod in enumerate(response.pod_resources)
    )


def allocatable_from_proto(response: api_pb2.AllocatableResourcesResponse, source: str) -> AllocatableResources:
    """The node's allocatable resources from a GetAllocatableResources answer."""
    where = "AllocatableResourcesResponse"
    return AllocatableResources(
        devices=_devices(response.devices, source, f"{where}.devices"),
        cpu_ids=_cpu_ids(response.cpu_ids, source, f"{where}.cpu_ids"),
        memory=_memory(response.memory, source, f"{where}.memory"),
    )


def pod_from_proto(pod: api_pb2.PodResources, source: str, where: str) -> PodResources:
    """One pod; ``where`` is its protobuf path, used in error messages."""
    containers = tuple(_container(c, source, f"{where}.containers[{i}]") for i, c in enumerate(pod.containers))
    return PodResources(
        namespace=_name(pod.namespace, source, f"{where}.namespace"),
        name=_name(pod.name, source, f"{where}.name"),
        containers=containers,
        cpu_ids=_cpu_ids(pod.cpu_ids, source, f"{where}.cpu_ids"),
        memory=_memory(pod.memory, source, f"{where}.memory"),
    )


def _container(container: api_pb2.ContainerResources, source: str, where: str) -> ContainerResources:
    return ContainerResources(
        name=_name(container.name, source, f"{where}.name"),
        cpu_ids=_cpu_ids(container.cpu_ids, source, f"{where}.cpu_ids"),
        devices=_devices(container.devices, source, f"{where}.devices"),
        memory=_memory(container.memory, source, f"{where}.memory"),
    )


def _devices(devices: Iterable[api_pb2.ContainerDevices], source: str, where: str) -> tuple[DeviceAssignment, ...]:
    out = []
    for i, dev in enumerate(devices):
        here = f"{where}[{i}]"
        for j, device_id in enumerate(dev.device_ids):
            if not device_id:
                raise InputError("empty device id", field=f"{here}.device_ids[{j}]", source=source)
        out.append(DeviceAssignment(
            resource=_name(dev.resource_name, source, f"{here}.resource_name"),
            ids=tuple(dev.device_ids),
            numa_ids=_numa_ids(dev.topology, source, f"{here}.topology"),
        ))
    return tuple(out)


def _memory(blocks: Iterable[api_pb2.ContainerMemory], source: str, where: str) -> tuple[MemoryAssignment, ...]:
    return tuple(
        MemoryAssignment(
            type=_name(block.memory_type, source, f"{where}[{i}].memory_type"),
            size=block.size,
            numa_ids=_numa_ids(block.topology, source, f"{where}[{i}].topology"),
        )
        for i, block in enumerate(blocks)
    )


def _numa_ids(topology: api_pb2.TopologyInfo, source: str, where: str) -> tuple[int, ...]:
    for i, node in enumerate(topology.nodes):
        if node.ID < 0:
            raise InputError(f"negative NUMA node id {node.ID}", field=f"{where}.nodes[{i}].ID", source=source)
    return tuple(sorted({node.ID for node in topology.nodes}))


def _cpu_ids(cpu_ids: Iterable[int], source: str, where: str) -> tuple[int, ...]:
    ids = tuple(cpu_ids)
    for i, cpu in enumerate(ids):
        if cpu < 0:
            raise InputError(f"negative CPU id {cpu}", field=f"{where}[{i}]", source=source)
    return tuple(sorted(set(ids)))


def _name(value: str, source: str, field: str) -> str:
    if not value:
        raise InputError("empty", field=field, source=source)
    return value
