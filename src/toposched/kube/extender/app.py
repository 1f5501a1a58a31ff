"""The extender's HTTP server: kube-scheduler POSTs each verb to ``<urlPrefix>/<verb>`` with a JSON body.

Routes: ``POST {prefix}/filter``, ``{prefix}/prioritize``, ``{prefix}/bind``, ``{prefix}/preempt``
(the verbs the KubeSchedulerConfiguration names, under its ``urlPrefix``), and ``GET /healthz``
(the process answers) and ``GET /readyz`` (toposched's view of the cluster is synced).

kube-scheduler takes any status but 200 as the extender failing (``failed <verb> with extender
at URL ..., code N``) and otherwise decodes the body. So a body that cannot be read, or a call
before the cluster view is synced, is answered 200 with ``Error`` set where the verb's result has
that field (filter, bind: the text then appears in kube-scheduler's log and the pod's events),
and with 400 / 503 where it has not (prioritize, preempt; kube-scheduler ignores a failed
prioritize and fails the preemption attempt).

With ``metrics``, every verb call is counted in ``toposched_extender_requests_total{verb,code}``
(``code``: the HTTP status) and timed, by the service's clock, in
``toposched_extender_request_duration_seconds{verb}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from fastapi import FastAPI, Request, Response
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

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

__all__ = ["NOT_READY", "create_app"]

NOT_READY = "toposched's view of the cluster is not synced yet"

_Args = TypeVar("_Args", bound=BaseModel)


def _json(model: BaseModel) -> Response:
    return Response(content=dump(model), media_type="application/json")


def _read(model: type[_Args], body: bytes) -> _Args | str:
    """The request body as ``model``, or why it cannot be read."""
    try:
        return model.model_validate_json(body)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in err.errors())
        return f"cannot read the {model.__name__}: {problems}"


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
                response = await handler(request)
                if metrics is not None:
                    metrics.extender_requests.labels(verb=name, code=str(response.status_code)).inc()
                    metrics.extender_request_duration.labels(verb=name).observe(max(0.0, service.clock() - start))
                return response

            app.add_api_route(f"{prefix}/{name}", endpoint, methods=["POST"], name=name)

        return register

    @verb("filter")
    async def filter_(request: Request) -> Response:
        args = _read(ExtenderArgs, await request.body())
        if isinstance(args, str):
            return _json(ExtenderFilterResult(Error=args))
        if not ready():
            return _json(ExtenderFilterResult(Error=NOT_READY))
        return _json(await run_in_threadpool(service.filter, args))

    @verb("prioritize")
    async def prioritize(request: Request) -> Response:
        args = _read(ExtenderArgs, await request.body())
        if isinstance(args, str):
            return Response(args, status_code=400, media_type="text/plain")
        if not ready():
            return Response(NOT_READY, status_code=503, media_type="text/plain")
        return _json(await run_in_threadpool(service.prioritize, args))

    @verb("bind")
    async def bind(request: Request) -> Response:
        args = _read(ExtenderBindingArgs, await request.body())
        if isinstance(args, str):
            return _json(ExtenderBindingResult(Error=args))
        if not ready():
            return _json(ExtenderBindingResult(Error=NOT_READY))
        return _json(await run_in_threadpool(service.bind, args))

    @verb("preempt")
    async def preempt(request: Request) -> Response:
        args = _read(ExtenderPreemptionArgs, await request.body())
        if isinstance(args, str):
            return Response(args, status_code=400, media_type="text/plain")
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
