"""What the long-running commands (agent, scheduler, extender, controller) share: options, client, ops server."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from toposched.errors import InputError
from toposched.kube.lightkube_client import LightkubeClient
from toposched.kube.ops import (
    Metrics,
    OpsServer,
    Registry,
    configure_logging,
    freeze_heap,
    parse_listen_address,
    shutdown_event,
)
from toposched.scheduler import Cluster

__all__ = ["KUBECONFIG", "LOG_FORMAT", "LOG_LEVEL", "METRICS_ADDR", "connect", "fail", "oldest_report_age", "serving",
           "settle_heap"]

log = logging.getLogger(__name__)

KUBECONFIG = typer.Option(None, "--kubeconfig", help="kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
METRICS_ADDR = typer.Option("0.0.0.0:9090", "--metrics-addr", help="where /metrics, /healthz and /readyz are served")
LOG_FORMAT = typer.Option("json", "--log-format", help="json or text")
LOG_LEVEL = typer.Option("INFO", "--log-level", help="DEBUG, INFO, WARNING or ERROR")


def fail(command: str, err: Exception) -> None:
    """Print one line naming what is wrong and exit with status 2."""
    typer.echo(f"toposched {command}: {err}", err=True)
    raise typer.Exit(2)


def connect(kubeconfig: Path | None, field_manager: str) -> LightkubeClient:
    """A client for the cluster: ``kubeconfig`` when given, else in-cluster or kubectl's default."""
    import lightkube

    try:
        if kubeconfig is None:
            return LightkubeClient.from_environment(field_manager=field_manager)
        config = lightkube.KubeConfig.from_file(str(kubeconfig))
    except Exception as err:  # lightkube raises several kinds for a configuration it cannot use
        where = str(kubeconfig) if kubeconfig else "in-cluster, $KUBECONFIG or ~/.kube/config"
        raise InputError(f"no usable cluster configuration: {err}", field="--kubeconfig", source=where) from None
    return LightkubeClient(lightkube.Client(config, field_manager=field_manager))


@contextmanager
def serving(metrics_addr: str, log_format: str, log_level: str, ready: Callable[[], bool]) -> Iterator[tuple[Metrics, threading.Event]]:
    """Logging configured, the ops server up, SIGTERM/SIGINT wired to the returned stop event."""
    configure_logging(log_format, log_level)
    host, port = parse_listen_address(metrics_addr)
    registry = Registry()
    metrics = Metrics.register(registry)
    stop = shutdown_event()
    with OpsServer(registry, ready=ready, host=host, port=port):
        yield metrics, stop
    log.info("stopped")


def oldest_report_age(cluster: Cluster, now: float) -> float:
    """Seconds since the oldest node report the cluster holds was taken (0 without reports)."""
    try:
        times = [r.report_time for r in list(cluster.nodes.values()) if r.report_time is not None]
    except RuntimeError:  # the nodes changed under us (another thread): the next scrape will tell
        return 0.0
    return max(0.0, now - min(times)) if times else 0.0


def settle_heap() -> None:
    """Freeze the heap once the cluster is listed (see ``freeze_heap``), and log how much was frozen."""
    log.info("cluster listed in full; %d long-lived objects moved out of the garbage collector's sight", freeze_heap())
