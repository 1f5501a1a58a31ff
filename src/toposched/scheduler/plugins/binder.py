"""DefaultBinder: the Binding, carrying the placement annotations, that a decision amounts to.

The core performs no I/O: ``bind`` returns the requests an adapter sends to the API server, as
lightkube's sans-I/O style has it. It is one request: kube-apiserver's ``pods/binding`` copies
the Binding's ``metadata.annotations`` onto the pod in the same write that sets
``spec.nodeName`` (``setPodHostAndAnnotations`` in pkg/registry/core/pod/storage; the
control-plane tests check it), so a pod is never bound without its placement, nor annotated
without being bound.
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
    """The API requests that bind ``pod`` to ``node``: one Binding whose annotations are the placement's."""
    meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace}
    if pod.uid:
        meta["uid"] = pod.uid
    if placement is not None and placement.containers:
        meta["annotations"] = placement.annotations()
    return [{
        "verb": "create",
        "path": f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding",
        "body": {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                 "target": {"apiVersion": "v1", "kind": "Node", "name": node}},
    }]


@registry.register
class DefaultBinder:
    """Binds the pod to the chosen node through the Binding subresource, which carries the placement annotations."""

    name = "DefaultBinder"

    def __init__(self, args: Mapping[str, Any]) -> None:
        pass

    def bind(self, state: CycleState, pod: Pod, node: NodeRecord, placement: Placement | None) -> list[dict[str, Any]]:
        """The requests to send (see :func:`binding_requests`)."""
        return binding_requests(pod, node.name, placement)
