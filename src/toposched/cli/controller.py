"""``toposched controller``: merge facts a node cannot see into NodeResourceTopology zone attributes."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import typer

from toposched.cli.cluster_common import KUBECONFIG, LOG_FORMAT, LOG_LEVEL, METRICS_ADDR, connect, fail, serving
from toposched.errors import InputError
from toposched.kube.controller import DEFAULT_CONFIGMAP_KEY, ConfigMapSource, Controller, HTTPSource

__all__ = ["controller"]


def controller(
    configmap: str = typer.Option(None, "--configmap", help="NAMESPACE/NAME of the ConfigMap holding the document"),
    key: str = typer.Option(DEFAULT_CONFIGMAP_KEY, "--key", help="the ConfigMap's data key"),
    url: str = typer.Option(None, "--url", help="an HTTP endpoint answering the document as JSON"),
    source_interval: float = typer.Option(30.0, "--source-interval", help="seconds between reads of the source"),
    kubeconfig: Path = KUBECONFIG,
    metrics_addr: str = METRICS_ADDR,
    log_format: str = LOG_FORMAT,
    log_level: str = LOG_LEVEL,
) -> None:
    """Keep NRT zone attributes (e.g. toposched.io/cpu-capacity) equal to a source document (docs/install.md, "The controller")."""
    try:
        if (configmap is None) == (url is None):
            raise InputError("give exactly one of --configmap NAMESPACE/NAME and --url URL", field="--configmap")
        if configmap is not None:
            namespace, sep, name = configmap.partition("/")
            if not sep or not namespace or not name:
                raise InputError(f"{configmap!r} is not NAMESPACE/NAME", field="--configmap")
        client = connect(kubeconfig, "toposched-controller")
        if configmap is not None:
            source = ConfigMapSource(client, namespace, name, key=key)
        else:
            source = HTTPSource(url, httpx.Client(timeout=10.0))
    except InputError as err:
        fail("controller", err)
    started: list[Controller] = []
    with serving(metrics_addr, log_format, log_level, ready=lambda: bool(started) and started[0].ready) as (metrics, stop):
        runner = Controller(client, source, clock=time.monotonic, source_interval=source_interval, metrics=metrics)
        started.append(runner)
        runner.run(stop)
