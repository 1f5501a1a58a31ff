"""The extender's HTTP server: kube-scheduler POSTs each verb to ``<urlPrefix>/<verb>`` with a JSON body.

Routes: ``POST {prefix}/filter``, ``{prefix}/prioritize``, ``{prefix}/bind``, ``{prefix}/preempt``
(the verbs the KubeSchedulerConfiguration names, under its ``urlPrefix``), and ``GET /healthz``
(the process answers) and ``GET /readyz`` (toposched's view of the cluster is synced).

kube-scheduler takes any status but 200 as the extender failing (``failed <verb> with extender
at URL ..., code N``) and otherwise decodes the body. So a body that cannot be read, or a call
before the cluster view is synced, is answered 200 with ``Error`` set where the verb's result has
that field (filter, bind: the text then appears in kube-scheduler's log and the pod's events),
and with 400 / 503 where it has not (prioritize, preempt; kube-scheduler ignores a failed
prioritize and fails the preemption attempt). A request that makes toposched fail in any other way
is answered the same way (never 500), logged with its traceback, and the server keeps serving;
bodies over :data:`MAX_REQUEST_BYTES` are not read.

With ``metrics``, every verb call is counted in ``toposched_extender_requests_total{verb,code}``
(``code``: the HTTP status) and timed, by the service's clock, in
``toposched_extender_request_duration_seconds{verb}``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from fastapi import FastAPI, Request, Response
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from toposched.inputs import one_line
from toposched.kube.extender.service import ExtenderService
from toposched.kube.extender.wire import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    dump,
)
from toposched.kube.ops import Metrics

__all__ = ["MAX_REQUEST_BYTES", "NOT_READY", "create_app"]

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 2**20
"""The largest request body read (64 MiB: 5,000 full Node objects fit); larger ones are refused (413, or Error)."""

NOT_READY = "toposched's view of the cluster is not synced yet"

_Args = TypeVar("_Args", bound=BaseModel)


def _json(model: BaseModel) -> Response:
    return Response(content=dump(model), media_type="application/json")


def _read(model: type[_Args], body: bytes) -> _Args | str:
    """The request body as ``model``, or why it cannot be read (one line, at most a few hundred characters)."""
    if len(body) > MAX_REQUEST_BYTES:
        return f"the request body is {len(body):,} bytes, larger than the limit of {MAX_REQUEST_BYTES:,}"
    try:
        return model.model_validate_json(body)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in err.errors()[:5])
        return one_line(f"cannot read the {model.__name__}: {problems}")[:1000]
    except (ValueError, RecursionError) as err:  # e.g. an integer longer than Python converts
        return one_line(f"cannot read the {model.__name__}: {err}")[:1000]


async def _body(request: Request) -> bytes | None:
    """The request body, or None when it is larger than :data:`MAX_REQUEST_BYTES` (read no further)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
        return None
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > MAX_REQUEST_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


_TOO_LARGE = f"the request body is larger than the limit of {MAX_REQUEST_BYTES:,} bytes"


def create_app(service: ExtenderService, *, ready: Callable[[], bool], url_prefix: str = "",
               metrics: Metrics | None = None) -> FastAPI:
    """A FastAPI app serving ``service`` under ``url_prefix`` (e.g. ``/toposched``), with /healthz and /readyz.

    ``ready`` says whether the service's cluster view is synced (e.g. ``lambda: sync.ready``);
    until it is, every verb is refused as the module docstring describes. ``metrics`` (optional)
    records each call.
    """
    prefix = "/" + url_prefix.strip("/") if url_prefix.strip("/") else ""
    app = FastAPI(title="toposched scheduler extender", docs_url=None, redoc_url=None, openapi_url=None)

    def verb(name: str) -> Callable[[Callable[[Request], Awaitable[Response]]], None]:
        """Register ``handler`` as ``POST {prefix}/{name}``, counted and timed when there are metrics."""

        def register(handler: Callable[[Request], Awaitable[Response]]) -> None:
            async def endpoint(request: Request) -> Response:
                start = service.clock()
                try:
                    response = await handler(request)
                except Exception as err:  # a bug met by some request: answer it as refused, keep serving
                    log.error("extender %s failed", name, exc_info=err)
                    text = one_line(f"toposched could not process the request: {type(err).__name__}: {err}")[:1000]
                    if name in ("filter", "bind"):
                        result = ExtenderFilterResult(Error=text) if name == "filter" else ExtenderBindingResult(Error=text)
                        response = _json(result)
                    else:
                        response = Response(text, status_code=400, media_type="text/plain")
                if metrics is not None:
                    metrics.extender_requests.labels(verb=name, code=str(response.status_code)).inc()
                    metrics.extender_request_duration.labels(verb=name).observe(max(0.0, service.clock() - start))
                return response

            app.add_api_route(f"{prefix}/{name}", endpoint, methods=["POST"], name=name)

        return register

    @verb("filter")
    async def filter_(request: Request) -> Response:
        body = await _body(request)
        args = _read(ExtenderArgs, body) if body is not None else _TOO_LARGE
        if isinstance(args, str):
            return _json(ExtenderFilterResult(Error=args))
        if not ready():
            return _json(ExtenderFilterResult(Error=NOT_READY))
        return _json(await run_in_threadpool(service.filter, args))

    @verb("prioritize")
    async def prioritize(request: Request) -> Response:
        body = await _body(request)
        args = _read(ExtenderArgs, body) if body is not None else _TOO_LARGE
        if isinstance(args, str):
            return Response(args, status_code=400 if body is not None else 413, media_type="text/plain")
        if not ready():
            return Response(NOT_READY, status_code=503, media_type="text/plain")
        return _json(await run_in_threadpool(service.prioritize, args))

    @verb("bind")
    async def bind(request: Request) -> Response:
        body = await _body(request)
        args = _read(ExtenderBindingArgs, body) if body is not None else _TOO_LARGE
        if isinstance(args, str):
            return _json(ExtenderBindingResult(Error=args))
        if not ready():
            return _json(ExtenderBindingResult(Error=NOT_READY))
        return _json(await run_in_threadpool(service.bind, args))

    @verb("preempt")
    async def preempt(request: Request) -> Response:
        body = await _body(request)
        args = _read(ExtenderPreemptionArgs, body) if body is not None else _TOO_LARGE
        if isinstance(args, str):
            return Response(args, status_code=400 if body is not None else 413, media_type="text/plain")
        if not ready():
            return Response(NOT_READY, status_code=503, media_type="text/plain")
        return _json(await run_in_threadpool(service.preempt, args))

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response("ok", media_type="text/plain")

    @app.get("/readyz")
    async def readyz() -> Response:
        if ready():
            return Response("ok", media_type="text/plain")
        return Response(NOT_READY, status_code=503, media_type="text/plain")

    return app
