"""``toposched extender``: the scheduler extender kube-scheduler calls (filter, prioritize, bind, preempt)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from toposched.cli.cluster_common import (
    KUBECONFIG,
    LOG_FORMAT,
    LOG_LEVEL,
    METRICS_ADDR,
    connect,
    fail,
    oldest_report_age,
    serving,
    settle_heap,
)
from toposched.errors import InputError
from toposched.kube.client import DEVICES, NODES, NRTS, PODS
from toposched.kube.cluster_sync import ClusterSync
from toposched.kube.extender.service import ExtenderService
from toposched.kube.informer import Reflector
from toposched.kube.ops import parse_listen_address
from toposched.scheduler import Cluster, Scheduler
from toposched.scheduler.profile_setup import load_profile

__all__ = ["extender"]


def _locked(lock: threading.RLock, handler: Callable[[Any], None]) -> Callable[[Any], None]:
    def run(arg: Any) -> None:
        with lock:
            handler(arg)
    return run


def extender(
    listen: str = typer.Option("127.0.0.1:8888", "--listen", help="HOST:PORT kube-scheduler calls (its urlPrefix)"),
    url_prefix: str = typer.Option("", "--url-prefix", help="path prefix of the verbs, e.g. /toposched"),
    config: Path = typer.Option(None, "--config", help="KubeSchedulerConfiguration with the profile to judge by"),
    profile: str = typer.Option(None, "--profile", help="which profile of the file (default: the built-in toposched)"),
    reservation_ttl: float = typer.Option(30.0, "--reservation-ttl",
                                          help="seconds a placement chosen at filter time waits for bind"),
    koordlet_devices: bool = typer.Option(False, "--koordlet-devices",
                                          help="read koordlet's Device objects (scheduling.koordinator.sh) as the "
                                               "device description of nodes whose reports have none"),
    kubeconfig: Path = KUBECONFIG,
    metrics_addr: str = METRICS_ADDR,
    log_format: str = LOG_FORMAT,
    log_level: str = LOG_LEVEL,
) -> None:
    """Serve kube-scheduler's extender protocol until SIGTERM (docs/kube/extender.md)."""
    # FastAPI and uvicorn load only for this command: the other commands start faster without them.
    import uvicorn

    from toposched.kube.extender.app import create_app

    try:
        host, port = parse_listen_address(listen)
        chosen = load_profile(profile, config)
        client = connect(kubeconfig, "toposched-extender")
    except InputError as err:
        fail("extender", err)
    clock = time.monotonic  # one clock for the reservations and the reports' ages
    scheduler_core = Scheduler(Cluster(), chosen)
    service = ExtenderService(scheduler_core, clock=clock, client=client, reservation_ttl=reservation_ttl)
    sync = ClusterSync(scheduler_core, clock=clock, scheduler_name=chosen.name)
    lock = service.lock
    reflectors = [
        Reflector(client, NODES, _locked(lock, sync.on_node), _locked(lock, sync.relist_nodes)),
        Reflector(client, NRTS, _locked(lock, sync.on_nrt), _locked(lock, sync.relist_nrts)),
        Reflector(client, PODS, _locked(lock, sync.on_pod), _locked(lock, sync.relist_pods)),
    ]
    if koordlet_devices:
        reflectors.append(Reflector(client, DEVICES, _locked(lock, sync.on_device), _locked(lock, sync.relist_devices)))
    with serving(metrics_addr, log_format, log_level, ready=lambda: sync.ready) as (metrics, stop):
        sync.on_ready = settle_heap
        sync.on_rejection = lambda reason: metrics.admission_rejections.labels(reason=reason).inc()
        metrics.cache_report_age.set_function(lambda: oldest_report_age(scheduler_core.cluster, clock()))
        threads = [threading.Thread(target=r.run, args=(stop,), kwargs={"watch_timeout": 10.0}, daemon=True,
                                    name=f"reflector-{r.kind.plural}") for r in reflectors]
        for thread in threads:
            thread.start()
        app = create_app(service, ready=lambda: sync.ready, url_prefix=url_prefix, metrics=metrics)
        # uvicorn handles SIGTERM/SIGINT itself while it serves: it finishes the calls in flight and returns.
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False)).run()
        stop.set()
        for thread in threads:
            thread.join(timeout=12)
