"""``toposched agent``: the node agent (a DaemonSet): publish the node's NRT, enforce placements' cpusets."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from toposched.cli.cluster_common import KUBECONFIG, LOG_FORMAT, LOG_LEVEL, METRICS_ADDR, connect, fail, serving
from toposched.errors import InputError
from toposched.inputs import check_dns_subdomain, check_number_range
from toposched.kube.agent.loop import FIELD_MANAGER, Agent, AgentStep
from toposched.kube.ops import Metrics

__all__ = ["agent"]


def agent(
    node_name: str = typer.Option(..., "--node-name", envvar="NODE_NAME", help="this node's name (downward API)"),
    sysfs_root: Path = typer.Option(Path("/"), "--sysfs-root", help="root under which sys/ is read"),
    kubelet_dir: Path = typer.Option(Path("/var/lib/kubelet"), "--kubelet-dir",
                                     help="the kubelet's directory (cpu_manager_state, memory_manager_state)"),
    kubelet_config: Path = typer.Option(None, "--kubelet-config", help="the kubelet's config file (default: KUBELET_DIR/config.yaml)"),
    cgroup_root: Path = typer.Option(Path("/sys/fs/cgroup"), "--cgroup-root"),
    interval: float = typer.Option(60.0, "--interval", help="seconds between publications of an unchanged report"),
    period: float = typer.Option(10.0, "--period", help="seconds between rounds (read, publish, reconcile)"),
    publish: bool = typer.Option(True, "--publish/--no-publish",
                                 help="--no-publish when node-feature-discovery publishes the NRTs"),
    enforce: bool = typer.Option(True, "--enforce/--no-enforce", help="write placements' cpusets into cgroups"),
    dry_run: bool = typer.Option(False, "--dry-run", help="one round that prints what it would write, and exit"),
    podresources_socket: str = typer.Option(
        "/var/lib/kubelet/pod-resources/kubelet.sock", "--podresources-socket",
        help="the kubelet's podresources gRPC socket (devices and who holds them); '' to describe devices "
             "from sysfs and the device-resource map instead"),
    kubeconfig: Path = KUBECONFIG,
    metrics_addr: str = METRICS_ADDR,
    log_format: str = LOG_FORMAT,
    log_level: str = LOG_LEVEL,
) -> None:
    """Run the node agent of NODE_NAME until SIGTERM (see docs/kube/agent.md)."""
    try:
        # What the flags say is checked before anything connects (docs/inputs.md).
        check_dns_subdomain(node_name, field="--node-name")
        check_number_range(interval, 1.0, 86400.0, field="--interval")
        check_number_range(period, 0.1, 86400.0, field="--period")
        client = connect(kubeconfig, FIELD_MANAGER)
        node_agent = Agent(client, node_name, sysfs_root=sysfs_root, kubelet_dir=kubelet_dir,
                           kubelet_config=kubelet_config, cgroup_root=cgroup_root, clock=time.monotonic,
                           interval=interval, period=period, dry_run=dry_run, publish=publish, enforce=enforce,
                           podresources_socket=podresources_socket or None)
    except InputError as err:
        fail("agent", err)
    if dry_run:
        result = node_agent.step()
        for action in result.actions:
            typer.echo(action.describe())
        if result.report is not None and publish:
            typer.echo(f"would publish NodeResourceTopology {node_name}")
        for error in result.errors:
            typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1 if result.errors else 0)
    steps = {"done": 0}
    with serving(metrics_addr, log_format, log_level, ready=lambda: steps["done"] > 0) as (metrics, stop):
        while not stop.is_set():
            _count(metrics, node_agent.step())
            steps["done"] += 1
            stop.wait(period)


def _count(metrics: Metrics, result: AgentStep) -> None:
    if result.published:
        metrics.nrt_publishes.inc()
    outcome = {"refuse": "refused", "error": "failed"}
    for action in result.actions:
        if action.kind == "write" and action.applied:
            metrics.agent_cgroup_writes.labels(result="written").inc()
        elif action.kind in outcome:
            metrics.agent_cgroup_writes.labels(result=outcome[action.kind]).inc()
