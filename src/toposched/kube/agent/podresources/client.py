"""A client for the kubelet's podresources v1 gRPC API on its unix socket.

Every call carries a deadline (``timeout`` seconds), so a kubelet that accepts the connection
and never answers costs at most that long. Failures raise :class:`PodResourcesUnavailable`
naming the socket (and the gRPC status code and details of a failed call); answers no kubelet
would send raise :class:`~toposched.errors.InputError` naming the socket and the field.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Self, TypeVar

import grpc

from toposched.kube.agent.podresources import api_pb2
from toposched.kube.agent.podresources.convert import allocatable_from_proto, pod_from_proto, pods_from_proto
from toposched.kube.agent.podresources.types import (
    AllocatableResources,
    PodResources,
    PodResourcesGetUnsupported,
    PodResourcesSnapshot,
    PodResourcesUnavailable,
)

__all__ = ["DEFAULT_SOCKET", "PodResourcesClient", "read_podresources"]

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
_SERVICE = "/v1.PodResourcesLister"
_MAX_MESSAGE = 16 * 1024 * 1024  # gRPC's default is 4 MiB; the kubelet's node e2e tests read with 16 MiB
_Response = TypeVar("_Response")


class PodResourcesClient:
    """One channel to the kubelet's podresources socket; use as a context manager or call :meth:`close`.

    Opening does not connect: a missing socket is reported by the first call.
    """

    def __init__(self, socket_path: str = DEFAULT_SOCKET, timeout: float = 5.0):
        self.socket_path = socket_path
        self.timeout = timeout
        self._channel = grpc.insecure_channel(
            f"unix:{os.path.abspath(socket_path)}",
            options=[("grpc.max_receive_message_length", _MAX_MESSAGE)],
        )
        self._list = self._method("List", api_pb2.ListPodResourcesRequest, api_pb2.ListPodResourcesResponse)
        self._allocatable = self._method(
            "GetAllocatableResources", api_pb2.AllocatableResourcesRequest, api_pb2.AllocatableResourcesResponse
        )
        self._get = self._method("Get", api_pb2.GetPodResourcesRequest, api_pb2.GetPodResourcesResponse)

    def list(self) -> tuple[PodResources, ...]:
        """Every pod the kubelet runs, with its containers' devices, exclusive CPUs and memory blocks."""
        return pods_from_proto(self._call(self._list, api_pb2.ListPodResourcesRequest()), self.socket_path)

    def allocatable(self) -> AllocatableResources:
        """The devices (with NUMA topology), CPUs and memory blocks the kubelet can hand out."""
        response = self._call(self._allocatable, api_pb2.AllocatableResourcesRequest())
        return allocatable_from_proto(response, self.socket_path)

    def get(self, namespace: str, name: str) -> PodResources | None:
        """One pod, or None when the kubelet does not run it.

        Raises :class:`PodResourcesGetUnsupported` (a :class:`PodResourcesUnavailable`) when the
        kubelet does not serve Get; callers fall back to :meth:`list`.
        """
        request = api_pb2.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
        try:
            response = self._call(self._get, request)
        except PodResourcesUnavailable as error:
            if error.code is grpc.StatusCode.UNIMPLEMENTED:
                raise PodResourcesGetUnsupported(str(error), socket_path=self.socket_path, code=error.code) from None
            # The kubelet answers a pod it does not run with a plain error (code UNKNOWN) worded so.
            if error.code is grpc.StatusCode.UNKNOWN and str(error).endswith(f"pod {name} in namespace {namespace} not found"):
                return None
            raise
        if not response.HasField("pod_resources"):
            return None
        return pod_from_proto(response.pod_resources, self.socket_path, "GetPodResourcesResponse.pod_resources")

    def close(self) -> None:
        """Close the channel; later calls fail."""
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _method(self, name: str, request: Any, response: Any) -> grpc.UnaryUnaryMultiCallable:
        return self._channel.unary_unary(
            f"{_SERVICE}/{name}",
            request_serializer=request.SerializeToString,
            response_deserializer=response.FromString,
        )

    def _call(self, method: Callable[..., _Response], request: Any) -> _Response:
        if not os.path.exists(self.socket_path):
            raise PodResourcesUnavailable(
                f"{self.socket_path}: no such socket (is the kubelet running, and its pod-resources "
                "directory mounted into the agent?)",
                socket_path=self.socket_path,
            )
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as error:
            code = error.code()  # type: ignore[attr-defined]  # a failed call is also a grpc.Call
            raise PodResourcesUnavailable(
                f"{self.socket_path}: {code.name}: {error.details()}",  # type: ignore[attr-defined]
                socket_path=self.socket_path,
                code=code,
            ) from None


def read_podresources(socket_path: str = DEFAULT_SOCKET, timeout: float = 5.0) -> PodResourcesSnapshot:
    """One reading of the API: List and GetAllocatableResources, each within ``timeout`` seconds.

    Raises :class:`PodResourcesUnavailable` when either call fails, :class:`InputError` on a
    malformed answer.
    """
    with PodResourcesClient(socket_path, timeout) as client:
        allocatable = client.allocatable()
        return PodResourcesSnapshot(pods=client.list(), allocatable=allocatable)
