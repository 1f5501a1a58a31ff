"""``toposched scheduler``: the standalone secondary scheduler for pods with ``schedulerName: toposched``."""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from pathlib import Path

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
from toposched.kube.leader import LeaderElector
from toposched.kube.leader_config import LeaderElection
from toposched.kube.standalone import StandaloneScheduler
from toposched.manifests import decode_documents, read_text
from toposched.scheduler import Cluster, Scheduler
from toposched.scheduler.profile_setup import load_profile

__all__ = ["scheduler"]


def scheduler(
    config: Path = typer.Option(None, "--config", help="KubeSchedulerConfiguration file (default: the built-in toposched profile)"),
    profile: str = typer.Option(None, "--profile", help="which profile of the file (its schedulerName)"),
    leader_elect: bool = typer.Option(None, "--leader-elect/--no-leader-elect",
                                      help="elect one active replica with a Lease (default: the file's leaderElection, else on)"),
    lease_namespace: str = typer.Option(None, "--lease-namespace", envvar="POD_NAMESPACE",
                                        help="the Lease's namespace (default: the file's, else this pod's, else kube-system)"),
    lease_name: str = typer.Option(None, "--lease-name", help="the Lease's name (default: the file's, else toposched-scheduler)"),
    identity: str = typer.Option(None, "--identity", envvar="POD_NAME", help="this replica's name (default: host name)"),
    koordlet_devices: bool = typer.Option(False, "--koordlet-devices",
                                          help="read koordlet's Device objects (scheduling.koordinator.sh) as the "
                                               "device description of nodes whose reports have none"),
    kubeconfig: Path = KUBECONFIG,
    metrics_addr: str = METRICS_ADDR,
    log_format: str = LOG_FORMAT,
    log_level: str = LOG_LEVEL,
) -> None:
    """Schedule pods whose spec.schedulerName is the profile's name until SIGTERM (docs/kube/scheduler.md)."""
    me = identity or socket.gethostname()
    try:
        chosen = load_profile(profile, config)
        raw = decode_documents(read_text(config), str(config))[0] if config is not None else None
        election = LeaderElection.from_config(raw if isinstance(raw, dict) else None, str(config), namespace=lease_namespace)
        election = replace(election, leader_elect=election.leader_elect if leader_elect is None else leader_elect,
                           resource_name=lease_name or election.resource_name)
        client = connect(kubeconfig, "toposched-scheduler")
        elector = None
        if election.leader_elect:
            elector = LeaderElector(client, name=election.resource_name, namespace=election.resource_namespace,
                                    identity=me, clock=time.time, lease_duration=election.lease_duration,
                                    renew_deadline=election.renew_deadline, retry_period=election.retry_period)
    except InputError as err:
        fail("scheduler", err)
    core = Scheduler(Cluster(), chosen)
    started: list[StandaloneScheduler] = []
    with serving(metrics_addr, log_format, log_level, ready=lambda: bool(started) and started[0].sync.ready) as (metrics, stop):
        runner = StandaloneScheduler(client, core, scheduler_name=chosen.name, clock=time.time, sleep=time.sleep,
                                     identity=me, elector=elector, metrics=metrics, koordlet_devices=koordlet_devices)
        started.append(runner)
        runner.sync.on_ready = settle_heap
        runner.sync.on_rejection = lambda reason: metrics.admission_rejections.labels(reason=reason).inc()
        metrics.cache_report_age.set_function(lambda: oldest_report_age(core.cluster, time.time()))
        runner.run(stop, watch_timeout=10.0)  # a stop is noticed within one watch round
