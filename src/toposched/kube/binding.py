"""Send the API requests a scheduling decision amounts to (``Scheduler.binding``) through a client.

The core returns the requests (one Binding carrying the placement annotations, which the API
server copies onto the pod); this module performs them. Binding is idempotent the way kube-scheduler needs it to be: a retried bind
of a pod that is already bound to the same node succeeds, while a pod bound to another node is a
:class:`~toposched.kube.client.Conflict` the caller must not paper over.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from toposched.kube.client import PODS, Conflict, KubeClient

__all__ = ["perform_binding"]


def perform_binding(client: KubeClient, requests: Iterable[Mapping[str, Any]]) -> None:
    """Send ``requests`` in order; raise the client's ApiError of the first that fails.

    A 409 on the Binding of a pod whose ``spec.nodeName`` already is the requested node counts
    as success (a retry after a lost response).
    """
    for request in requests:
        verb, path, body = request["verb"], str(request["path"]), request.get("body") or {}
        namespace, name, sub = _pod_path(path)
        if verb == "create" and sub == "binding":
            node = body["target"]["name"]
            meta = body.get("metadata") or {}
            try:
                client.bind(namespace, name, node, uid=meta.get("uid"), annotations=meta.get("annotations"))
            except Conflict:
                current = (client.get(PODS, name, namespace=namespace).get("spec") or {}).get("nodeName")
                if current != node:
                    raise
        else:
            raise ValueError(f"unsupported binding request {verb} {path}")


def _pod_path(path: str) -> tuple[str, str, str | None]:
    """``/api/v1/namespaces/<ns>/pods/<name>[/<sub>]`` -> (ns, name, sub)."""
    parts = path.strip("/").split("/")
    if len(parts) not in (6, 7) or parts[:3] != ["api", "v1", "namespaces"] or parts[4] != "pods":
        raise ValueError(f"not a pod path: {path}")
    return parts[3], parts[5], parts[6] if len(parts) == 7 else None
