"""``toposched explain``: why a pod would (not) be scheduled, node by node."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from toposched.errors import InputError
from toposched.inputs import read_stdin_text
from toposched.manifests import decode_documents, load_objects
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.intent import pod_intent
from toposched.scheduler.nodes import NodeSpec
from toposched.scheduler.profile_setup import load_profile
from toposched.scheduler.scheduler import Scheduler
from toposched.topology.nrt import load_nrts, parse_nrt
from toposched.workload import Pod

__all__ = ["explain", "explain_files"]


def explain_files(pod: Path, nodes: list[Path], nrts: list[Path], config: Path | None, profile: str | None) -> dict:
    """The explanation for the pod in ``pod`` against the nodes and reports in the files (the JSON shape)."""
    found = [(where, Pod.from_dict(obj, where)) for where, obj in load_objects(pod)
             if isinstance(obj, dict) and obj.get("kind", "Pod") == "Pod"]
    if not found:
        raise InputError("no Pod object in file", source=str(pod))
    try:
        pod_intent(found[0][1])  # the pod's own annotations must be readable, whatever the nodes say
    except InputError as err:
        raise InputError(str(err), source=found[0][0]) from None
    pods = [p for _, p in found]
    cluster = Cluster()
    for path in nodes:
        objects = load_objects(path, list_kinds=("NodeList",))
        if not any(isinstance(obj, dict) and obj.get("kind", "Node") == "Node" for _, obj in objects):
            raise InputError("no Node object in file", source=str(path))
        for where, obj in objects:
            if isinstance(obj, dict) and obj.get("kind", "Node") == "Node":
                spec = NodeSpec.from_dict(obj, where)
                if spec.name in cluster.nodes:
                    raise InputError(f"node {spec.name} is given twice", field="metadata.name", source=where)
                cluster.set_node(spec)
    for path in nrts:
        for report in _nrts(path):
            cluster.update_report(report, now=0.0)
    if not cluster.nodes:
        raise InputError("no nodes: give --node and/or --nrt files", field="--node")
    scheduler = Scheduler(cluster, load_profile(profile, config))
    return scheduler.explain(pods[0])


def _nrts(path: Path) -> list:
    """The reports of a file, or of standard input for ``-`` (``toposched discover -o nrt | toposched explain --nrt -``)."""
    if str(path) != "-":
        return load_nrts(path)
    source = "<stdin>"
    objects = []
    for obj in decode_documents(read_stdin_text(source=source), source):
        if isinstance(obj, dict) and obj.get("kind") in ("List", "NodeResourceTopologyList"):
            objects.extend(obj.get("items") or [])
        elif obj is not None:
            objects.append(obj)
    if not objects:
        raise InputError("no NodeResourceTopology object", source=source)
    return [parse_nrt(obj, source) for obj in objects]


def _table(result: dict) -> None:
    console = Console()
    table = Table(title=f"pod {result['pod']}")
    table.add_column("node")
    table.add_column("filter")
    table.add_column("why")
    table.add_column("score", justify="right")
    table.add_column("plugin scores")
    for node in result["nodes"]:
        code = node["filter"]["code"]
        style = "green" if code == "Success" else "red"
        plugins = ", ".join(f"{k}={v}" for k, v in node["plugins"].items())
        score = "" if node["score"] is None else str(node["score"])
        why = node["filter"]["message"]
        if node.get("refused"):
            why = f"at Reserve: {node['refused']}"
        elif node.get("devices"):
            why = "would take " + "; ".join(f"{r}: {', '.join(ids)}" for r, ids in node["devices"].items())
        name = node["name"] if node.get("view", "exact") == "exact" else f"{node['name']}\n({node['view']})"
        table.add_row(name, f"[{style}]{code}[/]", why, score, plugins)
    console.print(table)
    if result["selected"]:
        console.print(f"selected: [bold]{result['selected']}[/]")
        for name, c in (result["placement"] or {}).get("containers", {}).items():
            console.print(f"  {name}: cpuset {c['cpuset'] or '(shared pool)'}  NUMA {c['numaNodes']}  "
                          f"memory {c['memory']}  devices {c['devices']}")
    else:
        console.print(f"[bold red]pending[/]: {result['message']}")


def explain(
    pod: Path = typer.Option(..., "--pod", help="A Pod (YAML/JSON)."),
    node: list[Path] = typer.Option([], "--node", help="Node objects (one, several documents, or a List); repeatable."),
    nrt: list[Path] = typer.Option([], "--nrt", help="NodeResourceTopology objects ('-': standard input); repeatable. "
                                   "A node without one has no topology data."),
    config: Path | None = typer.Option(None, "--config", help="A KubeSchedulerConfiguration with the profile."),
    profile: str | None = typer.Option(None, "--profile",
                                       help="Profile (schedulerName): toposched, nrt-match, default, or one in --config."),
    output: str = typer.Option("table", "-o", "--output", help="table or json"),
) -> None:
    """Explain, node by node, whether and where a pod would be scheduled, and why not."""
    if output not in ("table", "json"):
        typer.echo(f"toposched explain: -o {output!r}: expected table or json", err=True)
        raise typer.Exit(2)
    try:
        result = explain_files(pod, node, nrt, config, profile)
    except InputError as err:
        typer.echo(f"toposched explain: {err}", err=True)
        raise typer.Exit(1) from None
    if output == "json":
        sys.stdout.write(json.dumps(result, indent=2, sort_keys=False) + "\n")
    else:
        _table(result)
