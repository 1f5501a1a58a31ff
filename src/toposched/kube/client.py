"""The small Kubernetes client interface the adapters use, its errors and the kinds they touch.

Objects cross this interface as plain JSON-shaped dicts (what the API server sends), so the pure
core reads them with its own parsers (``Pod.from_dict``, ``parse_nrt``, ``NodeSpec.from_dict``).
:class:`toposched.kube.lightkube_client.LightkubeClient` implements it for a real cluster through
lightkube; the unit tests keep an in-memory API server to the same contract
(``tests/kube/memory_client.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from toposched.names import KOORDINATOR_SCHEDULING_GROUP, NRT_API_GROUP

__all__ = [
    "CONFIGMAPS",
    "DEVICES",
    "EVENTS",
    "KINDS",
    "LEASES",
    "NODES",
    "NRTS",
    "PODS",
    "ApiError",
    "Conflict",
    "Gone",
    "Kind",
    "KubeClient",
    "NotFound",
    "ObjectList",
    "ServerError",
    "WatchEvent",
]


@dataclass(frozen=True)
class Kind:
    """One API resource: where it lives on the REST path and whether it is namespaced."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, else ``<group>/<version>``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The REST path of the collection, or of one object (and its subresource)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if subresource is not None:
                base += f"/{subresource}"
        return base


PODS = Kind("", "v1", "Pod", "pods", True)
NODES = Kind("", "v1", "Node", "nodes", False)
EVENTS = Kind("", "v1", "Event", "events", True)
CONFIGMAPS = Kind("", "v1", "ConfigMap", "configmaps", True)
LEASES = Kind("coordination.k8s.io", "v1", "Lease", "leases", True)
NRTS = Kind(NRT_API_GROUP, "v1alpha2", "NodeResourceTopology", "noderesourcetopologies", False)
DEVICES = Kind(KOORDINATOR_SCHEDULING_GROUP, "v1alpha1", "Device", "devices", False)  # koordlet's, where Koordinator runs
KINDS: tuple[Kind, ...] = (PODS, NODES, EVENTS, CONFIGMAPS, LEASES, NRTS, DEVICES)


class ApiError(Exception):
    """An API server refusal: its HTTP code, Kubernetes ``reason`` (``NotFound``, ``Conflict``, ...) and message."""

    def __init__(self, code: int, reason: str, message: str):
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


class NotFound(ApiError):
    """404: the object does not exist."""

    def __init__(self, message: str):
        super().__init__(404, "NotFound", message)


class Conflict(ApiError):
    """409: the object exists already (``AlreadyExists``) or changed since it was read (``Conflict``)."""

    def __init__(self, message: str, reason: str = "Conflict"):
        super().__init__(409, reason, message)


class Gone(ApiError):
    """410: a watch's resourceVersion is too old; the caller must list again."""

    def __init__(self, message: str):
        super().__init__(410, "Expired", message)


class ServerError(ApiError):
    """5xx: the server failed; the request may be retried."""

    def __init__(self, message: str, code: int = 500):
        super().__init__(code, "InternalError", message)


@dataclass(frozen=True)
class ObjectList:
    """The items of a list call and the collection's resourceVersion to watch from."""

    items: list[dict[str, Any]]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    """One watch event: ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK``, and the object."""

    type: str
    object: dict[str, Any] = field(default_factory=dict)


class KubeClient(Protocol):
    """What toposched asks of the API server. Every method raises :class:`ApiError` subclasses on refusal.

    ``namespace=None`` on a namespaced kind lists or watches all namespaces. Selectors use the
    API server's string syntax (``"spec.nodeName=n1"``, ``"app=web"``); only equality terms
    (``=``, ``==``, ``!=``) are promised.
    """

    def list(self, kind: Kind, *, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> ObjectList:
        """All matching objects and the resourceVersion a watch continues from."""
        ...

    def watch(self, kind: Kind, *, resource_version: str, namespace: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              timeout_seconds: float | None = None, allow_bookmarks: bool = False) -> Iterator[WatchEvent]:
        """Changes after ``resource_version``, in order; ends when the server closes the stream.

        Raises :class:`Gone` when ``resource_version`` is too old to continue from. With
        ``allow_bookmarks`` the server may also send ``BOOKMARK`` events, which carry only a newer
        resourceVersion to continue from (a quiet watch's version stays fresh).
        """
        ...

    def get(self, kind: Kind, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """One object; :class:`NotFound` when absent."""
        ...

    def create(self, kind: Kind, obj: Mapping[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """Create ``obj``; :class:`Conflict` (reason ``AlreadyExists``) when the name is taken."""
        ...

    def replace(self, kind: Kind, obj: Mapping[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """PUT ``obj``; with ``metadata.resourceVersion`` set, :class:`Conflict` when it is no longer current."""
        ...

    def patch(self, kind: Kind, name: str, patch: Mapping[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """Apply a JSON merge patch (RFC 7386) and return the result."""
        ...

    def apply(self, kind: Kind, obj: Mapping[str, Any], *, field_manager: str, force: bool = False,
              namespace: str | None = None) -> dict[str, Any]:
        """Server-side apply ``obj`` as ``field_manager`` (creates it when absent)."""
        ...

    def delete(self, kind: Kind, name: str, *, namespace: str | None = None) -> None:
        """Delete one object; :class:`NotFound` when absent."""
        ...

    def bind(self, namespace: str, name: str, node: str, *, uid: str | None = None,
             annotations: Mapping[str, str] | None = None) -> None:
        """Create the pod's Binding; :class:`Conflict` when it is bound already (to any node).

        ``annotations`` (the Binding's) are set on the pod in the same write, as kube-apiserver does.
        """
        ...

    def set_pod_condition(self, namespace: str, name: str, condition: Mapping[str, Any]) -> dict[str, Any]:
        """Write ``condition`` into the pod's ``status.conditions`` through the ``status`` subresource.

        It replaces the condition of the same ``type`` and leaves the others alone (a strategic
        merge patch, as kube-scheduler sends it); returns the pod. :class:`NotFound` when absent.
        """
        ...
