"""A fake Kubernetes API server for the unit tests: a :class:`MemoryClient` served over real HTTP in the API server's wire format.

It exists so the real client library (lightkube) can be tested end to end without a cluster:
REST paths per :class:`Kind`, List objects with ``metadata.resourceVersion``, chunked watch
streams of ``{"type", "object"}`` lines (a too-old version gives an ``ERROR`` event carrying a
410 ``Status``, as kube-apiserver sends), merge patch and server-side apply, the pod
``binding`` subresource, its ``status`` subresource for conditions, and refusals as ``Status`` objects. docs/kube/api.md lists what it
does not support.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.kube.memory_client import MemoryClient
from toposched.kube.client import KINDS, PODS, ApiError, Gone, Kind

__all__ = ["FakeApiServer", "status_object"]

log = logging.getLogger(__name__)

_VERSION_INFO = {
    "major": "1", "minor": "30", "gitVersion": "v1.30.0-toposched-fake", "gitCommit": "", "gitTreeState": "clean",
    "buildDate": "1970-01-01T00:00:00Z", "goVersion": "", "compiler": "", "platform": "linux/amd64",
}
_MERGE_PATCH = "application/merge-patch+json"
_APPLY_PATCH = "application/apply-patch+yaml"
_STRATEGIC_PATCH = "application/strategic-merge-patch+json"


def status_object(error: ApiError, kind: Kind | None = None, name: str | None = None) -> dict[str, Any]:
    """The ``Status`` object the API server sends for ``error``."""
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": error.message, "reason": error.reason, "code": error.code}
    if kind is not None:
        details: dict[str, Any] = {"kind": kind.plural}
        if kind.group:
            details["group"] = kind.group
        if name:
            details["name"] = name
        status["details"] = details
    return status


def _success(kind: Kind, name: str, code: int = 200) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": kind.plural}
    if kind.group:
        details["group"] = kind.group
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code,
            "details": details}


@dataclass(frozen=True)
class _Target:
    """A parsed resource path: the kind, the namespace (None: all), the object name and subresource."""

    kind: Kind
    namespace: str | None
    name: str | None
    subresource: str | None


_BY_PATH = {(k.group, k.version, k.plural): k for k in KINDS}


def _route(path: str) -> _Target | None:
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    kind = _BY_PATH.get((group, version, rest[0]))
    if kind is None or (namespace is not None and not kind.namespaced):
        return None
    return _Target(kind, namespace, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None)


def _discovery(path: str) -> dict[str, Any] | None:
    """The discovery documents (``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>/<version>``) for our kinds."""
    parts = [p for p in path.split("/") if p]
    if parts == ["version"]:
        return _VERSION_INFO
    if parts == ["api"]:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if parts == ["apis"]:
        groups: dict[str, list[str]] = {}
        for kind in KINDS:
            if kind.group:
                groups.setdefault(kind.group, []).append(kind.version)
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
             "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}} for g, vs in groups.items()]}
    if parts == ["api", "v1"] or (len(parts) == 3 and parts[0] == "apis"):
        group, version = ("", "v1") if parts[0] == "api" else (parts[1], parts[2])
        kinds = [k for k in KINDS if (k.group, k.version) == (group, version)]
        if not kinds:
            return None
        resources = [{"name": k.plural, "singularName": k.kind.lower(), "namespaced": k.namespaced, "kind": k.kind,
                      "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]} for k in kinds]
        if group == "" and version == "v1":
            resources.append({"name": "pods/binding", "singularName": "", "namespaced": True, "kind": "Binding",
                              "verbs": ["create"]})
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": kinds[0].api_version,
                "resources": resources}
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's algorithm meets the
        # client's delayed ACK and every request waits ~40 ms.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("fake api server: " + format, *args)

    # -- plumbing -----------------------------------------------------------------------------

    def _query(self) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query, keep_blank_values=True).items()}

    def _send_json(self, code: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, error: ApiError, target: _Target | None = None) -> None:
        self._send_json(error.code, status_object(error, target.kind if target else None,
                                                  target.name if target else None))

    def _body(self) -> Any:
        raw = self._raw
        content_type = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        try:
            if content_type == _APPLY_PATCH:
                return yaml.safe_load(raw.decode() or "null")
            return json.loads(raw or b"null")
        except (ValueError, yaml.YAMLError) as exc:
            raise ApiError(400, "BadRequest", f"the request body is not valid: {exc}") from None

    def _manager(self, query: Mapping[str, str]) -> str:
        """``fieldManager``, else the user agent's product name, as the API server defaults it."""
        return query.get("fieldManager") or (self.headers.get("User-Agent") or "unknown").split("/")[0]

    def _dispatch(self, method: str) -> None:
        # Read the whole body first: on a kept-alive connection an unread body would corrupt the next request.
        length = int(self.headers.get("Content-Length") or 0)
        self._raw = self.rfile.read(length) if length else b""
        path = urlsplit(self.path).path
        if method == "GET":
            document = _discovery(path)
            if document is not None:
                self._send_json(200, document)
                return
            if path in ("/healthz", "/readyz", "/livez"):
                self._send_text(200, "ok")
                return
        target = _route(path)
        if target is None:
            self._send_error(ApiError(404, "NotFound", "the server could not find the requested resource"))
            return
        query = self._query()
        try:
            if "dryRun" in query:
                raise ApiError(400, "BadRequest", "dryRun is not supported by the fake API server")
            handler = getattr(self, f"_{method.lower()}_{'object' if target.name else 'collection'}", None)
            if handler is None:
                raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on {path}")
            handler(target, query)
        except ApiError as error:
            self._send_error(error, target)

    def _send_text(self, code: int, text: str) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")

    def do_PATCH(self) -> None:  # noqa: N802
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    # -- verbs --------------------------------------------------------------------------------

    def _get_collection(self, target: _Target, query: Mapping[str, str]) -> None:
        store = self.server.store
        selectors = {"namespace": target.namespace, "label_selector": query.get("labelSelector") or None,
                     "field_selector": query.get("fieldSelector") or None}
        if query.get("watch") in ("1", "true", "True"):
            self._watch(target, query, selectors)
            return
        listed = store.list(target.kind, **selectors)
        items = []
        for item in listed.items:
            # The API server leaves apiVersion and kind to the List, not to each item.
            item.pop("apiVersion", None)
            item.pop("kind", None)
            items.append(item)
        self._send_json(200, {"kind": f"{target.kind.kind}List", "apiVersion": target.kind.api_version,
                              "metadata": {"resourceVersion": listed.resource_version}, "items": items})

    def _watch(self, target: _Target, query: Mapping[str, str], selectors: dict[str, Any]) -> None:
        timeout = query.get("timeoutSeconds")
        try:
            timeout_seconds = int(timeout) if timeout else None
        except ValueError:
            raise ApiError(400, "BadRequest", f"invalid timeoutSeconds {timeout!r}") from None
        store = self.server.store
        try:
            stream: Iterator[Any] | None = store.watch(target.kind, resource_version=query.get("resourceVersion", ""),
                                                       timeout_seconds=timeout_seconds, **selectors)
            expired: Gone | None = None
        except Gone as error:
            stream, expired = None, error
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if expired is not None:
                self._chunk({"type": "ERROR", "object": status_object(expired)})
            else:
                assert stream is not None
                try:
                    for event in stream:
                        self._chunk({"type": event.type, "object": event.object})
                except Gone as error:
                    self._chunk({"type": "ERROR", "object": status_object(error)})
                finally:
                    stream.close()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _chunk(self, event: Mapping[str, Any]) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _post_collection(self, target: _Target, query: Mapping[str, str]) -> None:
        body = self._body()
        created = self.server.store.create(target.kind, body, namespace=target.namespace,
                                           field_manager=self._manager(query))
        self._send_json(201, created)

    def _get_object(self, target: _Target, query: Mapping[str, str]) -> None:
        if target.subresource is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        assert target.name is not None
        self._send_json(200, self.server.store.get(target.kind, target.name, namespace=target.namespace))

    def _put_object(self, target: _Target, query: Mapping[str, str]) -> None:
        if target.subresource is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        body = self._body()
        if not isinstance(body, Mapping) or (body.get("metadata") or {}).get("name") != target.name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        replaced = self.server.store.replace(target.kind, body, namespace=target.namespace,
                                             field_manager=self._manager(query))
        self._send_json(200, replaced)

    def _delete_object(self, target: _Target, query: Mapping[str, str]) -> None:
        if target.subresource is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        assert target.name is not None
        self.server.store.delete(target.kind, target.name, namespace=target.namespace)
        self._send_json(200, _success(target.kind, target.name))

    def _patch_object(self, target: _Target, query: Mapping[str, str]) -> None:
        if target.kind == PODS and target.subresource == "status":
            self._patch_pod_conditions(target)
            return
        if target.subresource is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        assert target.name is not None
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if content_type not in (_MERGE_PATCH, _APPLY_PATCH):
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format - accepted media types include: "
                           f"{_MERGE_PATCH}, {_APPLY_PATCH}")
        body = self._body()
        if not isinstance(body, Mapping):
            raise ApiError(400, "BadRequest", "the patch must be an object")
        store = self.server.store
        if content_type == _MERGE_PATCH:
            result = store.patch(target.kind, target.name, body, namespace=target.namespace,
                                 field_manager=self._manager(query))
            self._send_json(200, result)
            return
        if (body.get("metadata") or {}).get("name") not in (None, target.name):
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        applied = dict(body, metadata={**(body.get("metadata") or {}), "name": target.name})
        existed = store.contains(target.kind, target.name, namespace=target.namespace)
        result = store.apply(target.kind, applied, field_manager=query.get("fieldManager", ""),
                             force=query.get("force") in ("1", "true", "True"), namespace=target.namespace)
        self._send_json(200 if existed else 201, result)

    def _patch_pod_conditions(self, target: _Target) -> None:
        """A strategic merge patch of ``status.conditions`` only (what ``set_pod_condition`` sends)."""
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        body = self._body()
        conditions = ((body or {}).get("status") or {}).get("conditions") if isinstance(body, Mapping) else None
        if content_type != _STRATEGIC_PATCH or not isinstance(conditions, list) or set(body) != {"status"}:
            raise ApiError(415, "UnsupportedMediaType", "the fake API server takes only a strategic merge patch "
                                                        "of status.conditions on pods/status")
        store = self.server.store
        namespace = target.namespace or store.default_namespace
        assert target.name is not None
        result = store.get(PODS, target.name, namespace=namespace)
        for condition in conditions:
            result = store.set_pod_condition(namespace, target.name, condition)
        self._send_json(200, result)

    def _post_object(self, target: _Target, query: Mapping[str, str]) -> None:
        if target.kind != PODS or target.subresource != "binding":
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        assert target.name is not None
        body = self._body()
        if not isinstance(body, Mapping):
            raise ApiError(400, "BadRequest", "a Binding must be an object")
        meta = body.get("metadata") or {}
        node = (body.get("target") or {}).get("name")
        if meta.get("name") not in (None, target.name):
            raise ApiError(400, "BadRequest", "the name of the binding does not match the pod's name")
        if not node:
            raise ApiError(422, "Invalid", "Binding is invalid: target.name: Required value")
        self.server.store.bind(target.namespace or self.server.store.default_namespace, target.name, node,
                               uid=meta.get("uid"), annotations=meta.get("annotations"))
        self._send_json(201, _success(PODS, target.name, code=201))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], store: MemoryClient):
        super().__init__(address, _Handler)
        self.store = store


class FakeApiServer:
    """Serves ``store`` over HTTP on ``host`` (an ephemeral port unless ``port`` is given), in a background thread.

    Use as a context manager (or :meth:`start` / :meth:`stop`); :attr:`url` is the base URL to
    give a client. Stopping ends the store's open watch streams.
    """

    def __init__(self, store: MemoryClient, *, host: str = "127.0.0.1", port: int = 0):
        self.store = store
        self._address = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server."""
        if self._server is None:
            raise RuntimeError("the fake API server is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeApiServer:
        """Bind the port and serve in a daemon thread; returns self."""
        if self._server is not None:
            raise RuntimeError("the fake API server is running already")
        self._server = _Server(self._address, self.store)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-api-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the watch streams, stop serving and release the port."""
        if self._server is None:
            return
        self.store.close_watches()
        self._server.shutdown()
        self._server.server_close()
        assert self._thread is not None
        self._thread.join()
        self._server = self._thread = None

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
