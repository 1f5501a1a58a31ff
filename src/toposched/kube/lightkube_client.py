"""A :class:`KubeClient` over lightkube: the real API server, dict objects in and out.

Every kind is handled as a lightkube *generic* resource, so objects travel as the JSON the
server sends (no model conversion, unknown fields kept). Selectors pass through as strings.
lightkube's own ``watch`` reconnects forever; ours must end with the stream and surface 410 as
:class:`Gone`, so it sends the watch request through lightkube's request builder and reads one
stream. lightkube and HTTP failures become our errors: 404 :class:`NotFound`, 409
:class:`Conflict`, 410 :class:`Gone`, 5xx and lost connections :class:`ServerError`.
"""

from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any, TypeVar

import httpx2  # lightkube's HTTP library; its exceptions are what lightkube raises for transport failures
import lightkube
from lightkube.config.client_adapter import verify_cluster
from lightkube.config.models import Cluster, User
from lightkube.core import resource as lk_resource
from lightkube.generic_resource import (
    Generic,
    GenericGlobalResource,
    GenericNamespacedResource,
    create_api_info,
)
from lightkube.types import PatchType

from toposched.kube.client import ApiError, Conflict, Gone, Kind, NotFound, ObjectList, ServerError, WatchEvent
from toposched.kube.lean_http import LeanSender

__all__ = ["LightkubeClient"]

T = TypeVar("T")

#: The field manager writes are recorded under unless the lightkube client was given one.
DEFAULT_FIELD_MANAGER = "toposched"


@cache
def _resource(kind: Kind) -> type:
    """A lightkube generic resource class for ``kind`` (unregistered, so it cannot clash with lightkube's models)."""
    base = GenericNamespacedResource if kind.namespaced else GenericGlobalResource
    info = create_api_info(kind.group, kind.version, kind.kind, kind.plural)
    return type(kind.kind, (base,), {"_api_info": info})


class _PodBinding(lk_resource.NamespacedSubResource, Generic):
    """The ``pods/{name}/binding`` subresource, answered with a ``Status`` (so decoded as a plain dict)."""

    _api_info = lk_resource.ApiInfo(
        resource=lk_resource.ResourceDef("", "v1", "Binding"),
        parent=lk_resource.ResourceDef("", "v1", "Pod"),
        plural="pods",
        verbs=["post"],
        action="binding",
    )


class _PodStatus(lk_resource.NamespacedSubResource, Generic):
    """The ``pods/{name}/status`` subresource, patched with a strategic merge patch."""

    _api_info = lk_resource.ApiInfo(
        resource=lk_resource.ResourceDef("", "v1", "Pod"),
        parent=lk_resource.ResourceDef("", "v1", "Pod"),
        plural="pods",
        verbs=["patch"],
        action="status",
    )


_HTTP_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 405: "MethodNotAllowed",
                 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests"}


def _error_from_status(code: int, reason: str | None, message: str | None) -> ApiError:
    message = message or ""
    if code == 404:
        return NotFound(message)
    if code == 409:
        return Conflict(message, reason=reason or "Conflict")
    if code == 410:
        return Gone(message)
    if code >= 500:
        return ServerError(message, code=code)
    return ApiError(code, reason or _HTTP_REASONS.get(code, "Unknown"), message)


def _translate(exc: Exception) -> ApiError:
    """Our error for a lightkube or HTTP failure."""
    if isinstance(exc, lightkube.ApiError):
        status = exc.status
        return _error_from_status(status.code or exc.response.status_code, status.reason, status.message)
    if isinstance(exc, httpx2.HTTPStatusError):
        response = exc.response
        reason, message = None, response.reason_phrase
        try:
            body = response.json()
            reason, message = body.get("reason"), body.get("message", message)
        except (ValueError, AttributeError, httpx2.ResponseNotRead):
            pass
        return _error_from_status(response.status_code, reason, message)
    return ServerError(f"connection to the API server failed: {exc}", code=503)


#: Where a pod's Binding is POSTed.
_BINDING_PATH = "/api/v1/namespaces/{namespace}/pods/{name}/binding"


def _lean_sender(generic: Any) -> LeanSender | None:
    """A lean sender with the configuration of lightkube's client, or None when it sends through a proxy."""
    http = generic._client  # the httpx client lightkube configured: base URL, credentials, timeouts
    server = str(http.base_url)
    if getattr(generic, "_dry_run", False):
        return None
    if http.trust_env and urllib.request.getproxies() and not urllib.request.proxy_bypass(
            urllib.parse.urlsplit(server).hostname or ""):
        return None
    config = generic.config
    context = (verify_cluster(config.cluster, config.user, config.abs_file, trust_env=http.trust_env)
               if server.startswith("https:") else None)
    return LeanSender(server, ssl_context=context, auth=http.auth, timeout=http.timeout.read or 10.0,
                      headers={"User-Agent": http.headers.get("User-Agent", "toposched")})


def _plain(obj: Any) -> dict[str, Any]:
    """A decoded generic object as a plain dict."""
    return dict(obj) if obj is not None else {}


class LightkubeClient:
    """:class:`KubeClient` backed by a :class:`lightkube.Client`.

    With ``lean_requests`` (the default), :meth:`create`, :meth:`bind` and :meth:`list` go out through a
    :class:`~toposched.kube.lean_http.LeanSender` built from the same configuration (server, TLS,
    credentials, field manager) instead of lightkube's request machinery: same request, a third
    of the client's CPU. It is off when the lightkube client sends through a proxy; tests that
    give lightkube a transport of their own turn it off.
    """

    def __init__(self, client: lightkube.Client, *, connect_timeout: float = 10.0, lean_requests: bool = True):
        self._client = client
        self._connect_timeout = connect_timeout
        # lightkube's request builder and sender; the public Client has no single-stream watch.
        self._generic = client._client
        self._field_manager: str | None = getattr(self._generic, "_field_manager", None)
        self._lean = _lean_sender(self._generic) if lean_requests else None

    @classmethod
    def from_url(cls, url: str, *, namespace: str = "default", field_manager: str = DEFAULT_FIELD_MANAGER,
                 timeout: float = 10.0) -> LightkubeClient:
        """A client for an unauthenticated API server at ``url`` (e.g. the tests' fake API server)."""
        # Plain HTTP needs no certificate bundle; not loading one saves ~0.3 s per client.
        cluster = Cluster(server=url, insecure=url.startswith("http://"))
        config = lightkube.KubeConfig.from_one(cluster=cluster, user=User(), namespace=namespace)
        return cls(lightkube.Client(config, field_manager=field_manager, trust_env=False,
                                    timeout=httpx2.Timeout(timeout)), connect_timeout=timeout)

    @classmethod
    def from_environment(cls, *, field_manager: str = DEFAULT_FIELD_MANAGER) -> LightkubeClient:
        """A client configured like kubectl: in-cluster service account, else ``$KUBECONFIG`` or ``~/.kube/config``."""
        return cls(lightkube.Client(field_manager=field_manager))

    def close(self) -> None:
        """Release the HTTP connections."""
        if self._lean is not None:
            self._lean.close()
        self._client.close()

    def _lean_post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST through the lean sender; the decoded answer, or the matching :class:`ApiError`."""
        if self._field_manager:
            path += "?" + urllib.parse.urlencode({"fieldManager": self._field_manager})
        return self._decoded(*self._lean.post(path, body))

    def _lean_list(self, kind: Kind, namespace: str | None, params: Mapping[str, str | None]) -> ObjectList:
        """A list through the lean sender (one page: no ``limit`` is asked, so the server sends all)."""
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v})
        path = kind.path(namespace if kind.namespaced else None) + (f"?{query}" if query else "")
        listed = self._decoded(*self._lean.get(path))
        items = listed.get("items") or []
        for obj in items:
            obj.setdefault("apiVersion", kind.api_version)
            obj.setdefault("kind", kind.kind)
        return ObjectList(items, str((listed.get("metadata") or {}).get("resourceVersion") or ""))

    @staticmethod
    def _decoded(code: int, answer: bytes) -> dict[str, Any]:
        """The JSON object the server answered, or the :class:`ApiError` its refusal stands for."""
        try:
            decoded = json.loads(answer) if answer else {}
        except ValueError:
            decoded = None
        if code >= 400:
            status = decoded if isinstance(decoded, dict) else {}
            raise _error_from_status(code, status.get("reason"), status.get("message") or answer[:200].decode(
                "utf-8", "replace"))
        if not isinstance(decoded, dict):
            raise ServerError(f"the API server answered {code} with a body that is not a JSON object", code=502)
        return decoded

    def _call(self, action: Callable[[], T]) -> T:
        try:
            return action()
        except (httpx2.HTTPError, lightkube.ApiError) as exc:
            raise _translate(exc) from exc

    def _selectors(self, label_selector: str | None, field_selector: str | None) -> dict[str, str | None]:
        return {"labelSelector": label_selector or None, "fieldSelector": field_selector or None}

    def list(self, kind: Kind, *, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> ObjectList:
        """All matching objects (each with ``apiVersion`` and ``kind`` filled in) and the list's resourceVersion."""
        if self._lean is not None:
            return self._lean_list(kind, namespace, self._selectors(label_selector, field_selector))
        request = self._generic.prepare_request(
            "list", res=_resource(kind), namespace=(namespace or lightkube.ALL_NS) if kind.namespaced else None,
            params=self._selectors(label_selector, field_selector))

        def run() -> ObjectList:
            listed = self._generic.list(request)
            items = []
            for item in listed:
                obj = _plain(item)
                obj.setdefault("apiVersion", kind.api_version)
                obj.setdefault("kind", kind.kind)
                items.append(obj)
            return ObjectList(items, listed.resourceVersion)

        return self._call(run)

    def watch(self, kind: Kind, *, resource_version: str, namespace: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              timeout_seconds: float | None = None, allow_bookmarks: bool = False) -> Iterator[WatchEvent]:
        """One watch stream from ``resource_version``; ends when the server closes it or after ``timeout_seconds``.

        The server is asked for whole seconds (what it accepts); a shorter ``timeout_seconds``
        also ends the stream once that long passes without an event. ``allow_bookmarks`` asks
        for ``BOOKMARK`` events (``allowWatchBookmarks=true``).
        """
        params: dict[str, Any] = {"resourceVersion": resource_version or None, **self._selectors(
            label_selector, field_selector)}
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        if timeout_seconds is not None:
            params["timeoutSeconds"] = max(1, math.ceil(timeout_seconds))
        request = self._generic.prepare_request(
            "list", res=_resource(kind), namespace=(namespace or lightkube.ALL_NS) if kind.namespaced else None,
            watch=True, params=params)
        request.timeout = httpx2.Timeout(self._connect_timeout, read=timeout_seconds)
        return self._stream(request)

    def _stream(self, request: Any) -> Iterator[WatchEvent]:
        try:
            response = self._generic.send(self._generic.build_adapter_request(request), stream=True)
        except httpx2.HTTPError as exc:
            raise _translate(exc) from exc
        try:
            if response.status_code >= 400:
                response.read()
                self._generic.raise_for_status(response)
            for line in response.iter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise _error_from_status(int(status.get("code") or 500), status.get("reason"),
                                             status.get("message"))
                yield WatchEvent(event["type"], event.get("object") or {})
        except httpx2.ReadTimeout:
            return  # no event within timeout_seconds: the stream is over
        except (httpx2.HTTPError, lightkube.ApiError) as exc:
            raise _translate(exc) from exc
        finally:
            response.close()

    def get(self, kind: Kind, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """One object; :class:`NotFound` when absent."""
        return self._call(lambda: _plain(self._client.get(_resource(kind), name, namespace=self._ns(kind, namespace))))

    @staticmethod
    def _ns(kind: Kind, namespace: str | None) -> str | None:
        return namespace if kind.namespaced else None

    def _instance(self, kind: Kind, obj: Mapping[str, Any], namespace: str | None) -> tuple[Any, str | None]:
        """``obj`` as a generic resource instance, and the namespace to send it to."""
        body = dict(obj)
        body.setdefault("apiVersion", kind.api_version)
        body.setdefault("kind", kind.kind)
        if not kind.namespaced:
            return _resource(kind)(body), None
        in_body = (body.get("metadata") or {}).get("namespace")
        if namespace and in_body and namespace != in_body:
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match "
                                              "the namespace sent on the request")
        return _resource(kind)(body), namespace or in_body

    def create(self, kind: Kind, obj: Mapping[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """Create ``obj``; :class:`Conflict` (reason ``AlreadyExists``) when the name is taken."""
        instance, ns = self._instance(kind, obj, namespace)
        if self._lean is not None:
            if kind.namespaced and not ns:
                ns = self._generic.namespace  # lightkube's default: the configuration's namespace
            return self._lean_post(kind.path(ns), _plain(instance))
        return self._call(lambda: _plain(self._client.create(instance, namespace=ns)))

    def replace(self, kind: Kind, obj: Mapping[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """PUT ``obj``; :class:`Conflict` when its ``metadata.resourceVersion`` is no longer current."""
        instance, ns = self._instance(kind, obj, namespace)
        return self._call(lambda: _plain(self._client.replace(instance, namespace=ns)))

    def patch(self, kind: Kind, name: str, patch: Mapping[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """Apply a JSON merge patch (RFC 7386) and return the result."""
        return self._call(lambda: _plain(self._client.patch(
            _resource(kind), name, dict(patch), namespace=self._ns(kind, namespace),
            patch_type=PatchType.MERGE)))

    def apply(self, kind: Kind, obj: Mapping[str, Any], *, field_manager: str, force: bool = False,
              namespace: str | None = None) -> dict[str, Any]:
        """Server-side apply ``obj`` as ``field_manager`` (creates it when absent)."""
        instance, ns = self._instance(kind, obj, namespace)
        return self._call(lambda: _plain(self._client.apply(instance, namespace=ns, field_manager=field_manager,
                                                            force=force)))

    def delete(self, kind: Kind, name: str, *, namespace: str | None = None) -> None:
        """Delete one object; :class:`NotFound` when absent."""
        self._call(lambda: self._client.delete(_resource(kind), name, namespace=self._ns(kind, namespace)))

    def bind(self, namespace: str, name: str, node: str, *, uid: str | None = None,
             annotations: Mapping[str, str] | None = None) -> None:
        """POST the pod's Binding (with ``annotations``, which the server sets on the pod);
        :class:`Conflict` when it is bound already or ``uid`` differs."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        if self._lean is not None:
            self._lean_post(_BINDING_PATH.format(namespace=namespace, name=name), body)
            return
        self._call(lambda: self._client.create(_PodBinding(body), name=name, namespace=namespace))

    def set_pod_condition(self, namespace: str, name: str, condition: Mapping[str, Any]) -> dict[str, Any]:
        """PATCH ``pods/<name>/status`` with a strategic merge patch: conditions merge by ``type``."""
        patch = {"status": {"conditions": [dict(condition)]}}
        return self._call(lambda: _plain(self._client.patch(_PodStatus, name, patch, namespace=namespace,
                                                            patch_type=PatchType.STRATEGIC)))
