"""A fake kubelet serving the podresources v1 API on a unix socket, with answers shaped like a real one's.

The node: 2 NUMA nodes, CPUs 0-1 and 48-49 reserved, 4 GPUs (two per NUMA node, named by UUID
as NVIDIA's plugin does) and SR-IOV VFs (named by PCI address). ``train-0`` holds two GPUs of
NUMA 0, one VF, 8 exclusive CPUs and memory plus hugepages on NUMA 0, next to a sidecar that
holds nothing; ``spread-0`` holds a GPU on each NUMA node (the kubelet lists one
``ContainerDevices`` per NUMA node); ``coredns`` is a Burstable pod in the shared pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Self

import grpc

from toposched.kube.agent.podresources import api_pb2 as pb

GPU = [f"GPU-{i}a2c4e6f-1b3d-4f5a-8c7e-9d0b1a2c3e4f" for i in range(4)]
VF = ["0000:3b:02.1", "0000:3b:02.2", "0000:86:02.1"]
GiB = 1024**3


def topo(*numa: int) -> pb.TopologyInfo:
    return pb.TopologyInfo(nodes=[pb.NUMANode(ID=n) for n in numa])


def devices(resource: str, ids: list[str], *numa: int) -> pb.ContainerDevices:
    return pb.ContainerDevices(resource_name=resource, device_ids=ids, topology=topo(*numa))


def memory(kind: str, size: int, *numa: int) -> pb.ContainerMemory:
    return pb.ContainerMemory(memory_type=kind, size=size, topology=topo(*numa))


def kubelet_pods() -> list[pb.PodResources]:
    """List's answer on the fake node."""
    trainer = pb.ContainerResources(
        name="trainer",
        devices=[devices("nvidia.com/gpu", GPU[:2], 0), devices("intel.com/sriov_netdevice", VF[:1], 0)],
        cpu_ids=[5, 4, 3, 2, 53, 52, 51, 50],  # the kubelet's order need not be sorted
        memory=[memory("memory", 8 * GiB, 0), memory("hugepages-1Gi", 2 * GiB, 0)],
    )
    spread = pb.ContainerResources(
        name="main", devices=[devices("nvidia.com/gpu", [GPU[2]], 0), devices("nvidia.com/gpu", [GPU[3]], 1)]
    )
    return [
        pb.PodResources(name="train-0", namespace="ml", containers=[trainer, pb.ContainerResources(name="sidecar")]),
        pb.PodResources(name="spread-0", namespace="ml", containers=[spread]),
        pb.PodResources(name="coredns-5d78c9869d-x2x7q", namespace="kube-system",
                        containers=[pb.ContainerResources(name="coredns")]),
    ]


def kubelet_allocatable() -> pb.AllocatableResourcesResponse:
    """GetAllocatableResources's answer on the fake node: one entry per device, as the kubelet sends them."""
    return pb.AllocatableResourcesResponse(
        devices=[devices("nvidia.com/gpu", [gpu], i // 2) for i, gpu in enumerate(GPU)]
        + [devices("intel.com/sriov_netdevice", [vf], 0 if vf.startswith("0000:3b") else 1) for vf in VF],
        cpu_ids=[c for c in range(96) if c not in (0, 1, 48, 49)],
        memory=[memory("memory", 180 * GiB, 0), memory("memory", 188 * GiB, 1),
                memory("hugepages-1Gi", 16 * GiB, 0), memory("hugepages-1Gi", 16 * GiB, 1)],
    )


class FakeKubelet:
    """The podresources service on ``socket``: answers from its attributes, or hangs, or fails.

    ``serve_get=False`` leaves Get unregistered (the server then answers UNIMPLEMENTED, as a
    kubelet without KubeletPodResourcesGet does). ``fail`` = (code, details) makes every call
    fail; ``hang`` makes every call wait until the server stops.
    """

    def __init__(self, socket: Path, *, serve_get: bool = True):
        self.socket = socket
        self.pods = kubelet_pods()
        self.allocatable = kubelet_allocatable()
        self.fail: tuple[grpc.StatusCode, str] | None = None
        self.hang = False
        self._released = threading.Event()
        handlers = {
            "List": self._handler(pb.ListPodResourcesRequest, self._list),
            "GetAllocatableResources": self._handler(pb.AllocatableResourcesRequest, lambda request, context: self.allocatable),
        }
        if serve_get:
            handlers["Get"] = self._handler(pb.GetPodResourcesRequest, self._get)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("v1.PodResourcesLister", handlers),))
        self._server.add_insecure_port(f"unix:{socket}")

    def __enter__(self) -> Self:
        self._server.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._released.set()
        self._server.stop(None).wait()

    def _list(self, request: pb.ListPodResourcesRequest, context: grpc.ServicerContext) -> pb.ListPodResourcesResponse:
        return pb.ListPodResourcesResponse(pod_resources=self.pods)

    def _get(self, request: pb.GetPodResourcesRequest, context: grpc.ServicerContext) -> pb.GetPodResourcesResponse:
        for pod in self.pods:
            if (pod.namespace, pod.name) == (request.pod_namespace, request.pod_name):
                return pb.GetPodResourcesResponse(pod_resources=pod)
        # what the kubelet answers for a pod it does not run: a plain Go error, code UNKNOWN
        context.abort(grpc.StatusCode.UNKNOWN, f"pod {request.pod_name} in namespace {request.pod_namespace} not found")

    def _handler(self, request_type, answer: Callable) -> grpc.RpcMethodHandler:
        def handle(request, context: grpc.ServicerContext):
            if self.hang:
                self._released.wait()
            if self.fail is not None:
                context.abort(*self.fail)
            return answer(request, context)

        return grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=request_type.FromString, response_serializer=lambda m: m.SerializeToString()
        )
