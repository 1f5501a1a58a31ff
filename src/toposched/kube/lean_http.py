"""A lean sender for the requests a scheduler makes most: the Binding and the Event per pod, and the big lists.

lightkube on httpx spends about 1.2 ms of Python per request (building the request and URL, the
auth flow, httpcore, h11); a scheduler sends two requests per pod, so at a few hundred pods/s that
alone takes most of the one core the GIL allows (and decoding a list of 5,000 reports through it
costs a second of start-up). :class:`LeanSender` sends the same request over
a kept-alive :mod:`http.client` connection in about a third of that, with the TLS context and
the ``Authorization`` header of the lightkube configuration it is built from. Each thread keeps
its own connection, so the bind and event workers send in parallel as client-go's requests share
one HTTP/2 connection.

A request that finds its kept-alive connection closed by the server (idle, or restarted) is sent
once more on a fresh connection. A 401 re-runs the configuration's auth flow (a
rotated service-account token is read again) and the request is sent once more with the new header.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any

import httpx2

from toposched.kube.client import ServerError

__all__ = ["LeanSender"]

_HANG_UPS = (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError)  # RemoteDisconnected is a ConnectionError


class LeanSender:
    """POSTs JSON to one API server; thread safe (a connection per thread).

    ``auth`` is the httpx ``Auth`` of the lightkube client (None: no credentials beyond the TLS
    context's client certificate), ``headers`` extra headers sent with every request.
    """

    def __init__(self, base_url: str, *, ssl_context: ssl.SSLContext | None, auth: httpx2.Auth | None,
                 timeout: float, headers: Mapping[str, str] | None = None):
        url = urllib.parse.urlsplit(base_url)
        self._https = url.scheme == "https"
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        self._ssl_context = ssl_context
        self._timeout = timeout
        self._headers = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
        self._auth = auth
        self._auth_lock = threading.Lock()
        self._auth_flow: Any = None
        self._authorization: str | None = None
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []
        self._connections_lock = threading.Lock()

    def post(self, path: str, body: Mapping[str, Any]) -> tuple[int, bytes]:
        """POST ``body`` as JSON to ``path``; the status code and the response body.

        Raises :class:`ServerError` (503) when the connection fails (the request may or may not
        have been performed, as with any lost response).
        """
        return self._authorized("POST", path, json.dumps(body, separators=(",", ":")).encode())

    def get(self, path: str) -> tuple[int, bytes]:
        """GET ``path`` (query included); the status code and the response body. :class:`ServerError` (503)
        when the connection fails."""
        return self._authorized("GET", path, None)

    def _authorized(self, method: str, path: str, data: bytes | None) -> tuple[int, bytes]:
        authorization = self._current_authorization()
        status, answer = self._send(method, path, data, authorization)
        if status == 401 and self._reauthorize(authorization):
            status, answer = self._send(method, path, data, self._current_authorization())
        return status, answer

    def close(self) -> None:
        """Close every thread's connection."""
        with self._connections_lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()

    def _send(self, method: str, path: str, data: bytes | None, authorization: str | None) -> tuple[int, bytes]:
        headers = dict(self._headers)
        if authorization:
            headers["Authorization"] = authorization
        for attempt in (1, 2):
            connection, reused = self._connection()
            try:
                connection.request(method, self._prefix + path, body=data, headers=headers)
                response = connection.getresponse()
                answer = response.read()
            except (OSError, http.client.HTTPException) as exc:
                connection.close()
                self._local.connection = None
                # A kept-alive connection the server closed (idle, or restarted) fails as a hang-up:
                # send once more on a new one. A Binding that did go through is then a 409 for the same
                # node, which the binder takes as success; any other failure is an unknown outcome.
                if reused and attempt == 1 and isinstance(exc, _HANG_UPS):
                    continue
                raise ServerError(f"connection to the API server failed: {exc}", code=503) from exc
            if response.will_close:
                connection.close()
                self._local.connection = None
            return response.status, answer
        raise AssertionError("unreachable")

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it has carried a request before."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            return connection, True
        if self._https:
            connection = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout,
                                                     context=self._ssl_context)
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        self._local.connection = connection
        with self._connections_lock:
            self._connections.append(connection)
        return connection, False

    def _current_authorization(self) -> str | None:
        """The ``Authorization`` header the auth flow gives (worked out once, again after a 401)."""
        if self._auth is None:
            return None
        with self._auth_lock:
            if self._auth_flow is None:
                self._authorization = self._start_flow()
            return self._authorization

    def _reauthorize(self, used: str | None) -> bool:
        """After a 401 answered to ``used``: whether the auth flow now gives another header to try."""
        if self._auth is None:
            return False
        with self._auth_lock:
            if self._authorization != used:  # another thread re-authorized meanwhile
                return True
            try:
                retried = self._auth_flow.send(httpx2.Response(401))
            except StopIteration:  # a fixed credential: the 401 stands
                return False
            self._start_flow()  # ready for the next 401
            self._authorization = retried.headers.get("Authorization")
            return self._authorization != used

    def _start_flow(self) -> str | None:
        """Start the auth flow on a placeholder request; the header it sets."""
        self._auth_flow = self._auth.sync_auth_flow(httpx2.Request("POST", "https://api.invalid/"))
        return next(self._auth_flow).headers.get("Authorization")
