"""DefaultBinder: the Binding (and the placement annotations) a decision amounts to.

The core performs no I/O: ``bind`` returns the objects an adapter sends to the API server, in
order — the annotation patch on the pod, then the ``Binding`` subresource — as lightkube's
sans-I/O style has it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toposched.scheduler.cluster import NodeRecord
from toposched.scheduler.framework import CycleState, registry
from toposched.scheduler.placement import Placement
from toposched.workload import Pod

__all__ = ["DefaultBinder", "binding_requests"]


def binding_requests(pod: Pod, node: str, placement: Placement | None) -> list[dict[str, Any]]:
    """The API requests that bind ``pod`` to ``node``: a merge patch with the annotations, then the Binding."""
    requests: list[dict[str, Any]] = []
    if placement is not None and placement.containers:
        requests.append({
            "verb": "patch",
            "path": f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
            "contentType": "application/merge-patch+json",
            "body": {"metadata": {"annotations": placement.annotations()}},
        })
    requests.append({
        "verb": "create",
        "path": f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding",
        "body": {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, **({"uid": pod.uid} if pod.uid else {})},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    })
    return requests


@registry.register
class DefaultBinder:
    """Binds the pod to the chosen node through the Binding subresource, placement annotations first."""

    name = "DefaultBinder"

    def __init__(self, args: Mapping[str, Any]) -> None:
        pass

    def bind(self, state: CycleState, pod: Pod, node: NodeRecord, placement: Placement | None) -> list[dict[str, Any]]:
        """The requests to send, in order (see :func:`binding_requests`)."""
        return binding_requests(pod, node.name, placement)
