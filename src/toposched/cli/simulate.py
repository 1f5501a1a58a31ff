"""``toposched simulate``: schedulers side by side on the same simulated cluster and workload."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from toposched.errors import InputError
from toposched.inputs import check_int_range
from toposched.sim.contenders import contender, contender_from_config
from toposched.sim.fgd_experiment import (
    DEFAULT_FGD_SCHEDULERS,
    FGD_SEED,
    fgd_contender,
    fgd_summary,
    run_fgd_experiment,
    run_fgd_seeds,
)
from toposched.sim.limits import MAX_SEED
from toposched.sim.metrics import reason_meaning
from toposched.sim.scenario import Scenario, load_nodes_file, load_pods, load_scenario, run_scenario, sim_config

__all__ = ["simulate", "summary_table"]

DEFAULT_REPORT_DIR = Path("toposched-report")

# Rows of the terminal table: (label, key in a scheduler's metrics, how to show it). The rejection
# reasons follow "rejected at admission" (their meaning goes in the caption); rows whose figure no
# scheduler has are left out. Labels are short so four schedulers fit an 80-column terminal.
_ROWS: tuple[tuple[str, str, str], ...] = (
    ("pods scheduled", "scheduled", "int"),
    ("rejected at admission", "rejected_admission", "int"),
    ("re-created", "recreated", "int"),
    ("given up", "abandoned", "int"),
    ("pending at the end", "pending_end", "int"),
    ("wait to start: mean (s)", "wait_mean", "float"),
    ("wait to start: p95 (s)", "wait_p95", "float"),
    ("aligned to fewest NUMA", "aligned_fraction", "pct"),
    ("NUMA distance, multi-NUMA", "mean_numa_distance", "float"),
    ("sharing a core (SMT)", "smt_shared_pods", "int"),
    ("fragmented GPUs: mean", "gpu_fragmentation_mean", "gpus"),
    ("fragmented GPUs: end", "gpu_fragmentation", "gpus"),
    ("decisions/s (wall clock)", "decisions_per_second", "int"),
)
_FRAGMENTATION_NOTE = "fragmented GPUs: idle GPU capacity the workload's GPU pods could not use (FGD paper)"


def _cell(value: Any, kind: str) -> str:
    if value is None:
        return "—"
    if kind == "pct":
        return f"{100 * value:.1f}%"
    if kind == "float":
        return f"{value:.1f}"
    if kind == "gpus":
        return f"{value:.2f}"
    return f"{int(round(value)):,}"


def summary_table(metrics: dict[str, Any]) -> Table:
    """The comparison a person reads first: one column per scheduler, the admission rejections by
    reason under their total, and a caption saying what each reason means."""
    names = list(metrics["schedulers"])
    runs = [metrics["schedulers"][n] for n in names]
    scenario = metrics["scenario"]
    table = Table(title=f"{scenario['name']}: {scenario['pods']:,} pods on {scenario['nodes']:,} nodes",
                  box=box.SIMPLE_HEAD, caption_justify="left")
    table.add_column("", no_wrap=True)
    for name in names:
        table.add_column(name, justify="right", overflow="fold")
    reasons = sorted({r for run in runs for r in run.get("rejections", {})})
    notes = []
    for label, key, kind in _ROWS:
        if all(run.get(key) is None for run in runs) and key != "decisions_per_second":
            continue
        table.add_row(label, *(_cell(run.get(key), kind) for run in runs))
        if key == "rejected_admission":
            for reason in reasons:
                table.add_row(f"  {reason}", *(_cell(run.get("rejections", {}).get(reason, 0), "int") for run in runs))
                meaning = reason_meaning(reason)
                if meaning:
                    notes.append(f"{reason}: {meaning}")
        if key == "gpu_fragmentation_mean":
            notes.append(_FRAGMENTATION_NOTE)
    table.caption = "\n".join(notes) or None
    return table


def simulate(
    scenario: Path | None = typer.Option(None, "--scenario", help="A scenario file (YAML); default: the bundled one."),
    nodes: Path | None = typer.Option(None, "--nodes", help="Nodes instead of the scenario's: a cluster spec (YAML) "
                                      "or a node list (CSV, e.g. openb_node_list_gpu_node.csv)."),
    pods: Path | None = typer.Option(None, "--pods", help="Pods instead of the scenario's: the Alibaba GPU trace "
                                     "(openb_pod_list_*.csv) or a workload file (YAML/CSV)."),
    scheduler: list[str] = typer.Option([], "--scheduler", "-s", help="A built-in scheduler to compare "
                                        "(toposched, default, nrt-match, nrt-match-overreserve); repeatable. "
                                        "Default: the scenario's."),
    config: list[Path] = typer.Option([], "--config", help="A KubeSchedulerConfiguration to compare too; repeatable."),
    seed: int | None = typer.Option(None, "--seed", help="Seed of the synthetic workload (default: the scenario's); "
                                   "with --fgd also of the cloned pods and the Random policy (default 42)."),
    report_interval: float | None = typer.Option(None, "--report-interval", help="Seconds between node reports."),
    report: Path = typer.Option(DEFAULT_REPORT_DIR, "--report", help="Folder for report.html and metrics.json."),
    wall_clock: bool = typer.Option(True, "--wall-clock/--no-wall-clock", help="Time the schedulers on the wall "
                                    "clock (decisions per second). These figures (scheduler_seconds, "
                                    "decisions_per_second; wall_seconds with --fgd) are the only ones that change "
                                    "between runs of one seed: --no-wall-clock leaves them null, and metrics.json "
                                    "and report.html are then byte-identical for the same scenario and seed."),
    fgd: bool = typer.Option(False, "--fgd", help="Run the FGD paper's experiment instead (docs/sim/fgd.md): pods "
                             "arrive in order and never leave until they ask for 130% of the GPUs; GPU allocation "
                             "rate by arrived load. Schedulers: toposched-fgd, toposched-bestfit, toposched-dotprod, "
                             "toposched-gpupacking, toposched-gpuclustering, toposched-random, toposched-gpu, "
                             "default."),
    shuffle: bool = typer.Option(False, "--shuffle", help="With --fgd: pods arrive in an order shuffled with the "
                                 "seed, as in the paper's runs (default: creation order)."),
    runs: int = typer.Option(1, "--runs", min=1, help="With --fgd: run seeds SEED, SEED+1, ... (this many) and "
                             "report the means; the paper's protocol is --fgd --shuffle --seed 42 --runs 10."),
) -> None:
    """Compare schedulers on one simulated cluster and workload; write report.html and metrics.json.

    Without arguments: the bundled scenario, 200 nodes and 3,000 pods past saturation, four schedulers.

    Every figure but the wall-clock ones depends only on the scenario and the seed (--no-wall-clock).
    """
    console = Console(stderr=True)
    try:
        if seed is not None:
            check_int_range(seed, 0, MAX_SEED, field="--seed")
        _check_report_folder(report)
        loaded = _scenario(scenario, nodes, pods, seed, report_interval)
        fgd_seed = seed if seed is not None else FGD_SEED
        if (shuffle or runs > 1) and not fgd:
            raise InputError("--shuffle and --runs go with --fgd", field="--shuffle")

        def fgd_contenders(run_seed: int) -> list:
            return ([fgd_contender(name, seed=run_seed) for name in scheduler or DEFAULT_FGD_SCHEDULERS]
                    + [contender_from_config(path) for path in config])

        if fgd:
            contenders = fgd_contenders(fgd_seed)
        else:
            contenders = [contender(name) for name in scheduler or loaded.schedulers]
            contenders += [contender_from_config(path) for path in config]
        seeds = list(range(fgd_seed, fgd_seed + runs))
        labels = [f"{c.name} {s}" if runs > 1 else c.name for s in seeds for c in contenders]
        with Progress(TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=False) as bar:
            tasks = {label: bar.add_task(label, total=len(loaded.pods), start=False) for label in labels}

            def progress(name: str, done: int, total: int) -> None:
                if not bar.tasks[tasks[name]].started:
                    bar.start_task(tasks[name])
                bar.update(tasks[name], completed=done, total=total)

            timer = time.perf_counter if wall_clock else None
            if fgd and runs > 1:
                metrics = run_fgd_seeds(loaded.nodes, loaded.pods, fgd_contenders, seeds, shuffle=shuffle,
                                        name=loaded.name, timer=timer, progress=progress)
            elif fgd:
                metrics = run_fgd_experiment(loaded.nodes, loaded.pods, contenders, seed=fgd_seed, name=loaded.name,
                                             shuffle=shuffle, timer=timer, progress=progress)
            else:
                metrics = run_scenario(loaded, contenders, timer=timer, progress=progress)
            for task in tasks.values():
                bar.update(task, completed=bar.tasks[task].total)
        try:
            report.mkdir(parents=True, exist_ok=True)
            (report / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n",
                                                 encoding="utf-8")
            from toposched.sim.report import write_report  # matplotlib and Jinja2: only when a report is written

            page = write_report(metrics, report, source=str(report / "metrics.json"))
        except OSError as exc:
            raise InputError(f"cannot write the report: {exc.strerror or exc}", field="--report",
                             source=str(exc.filename or report)) from None
    except InputError as err:
        typer.echo(f"toposched simulate: {err}", err=True)
        raise typer.Exit(1) from None
    out = Console()
    out.print(summary_table(metrics))
    if fgd:
        out.print("\n".join(fgd_summary(metrics)), highlight=False)
    out.print(f"report: {page}\nmetrics: {report / 'metrics.json'}")


def _check_report_folder(report: Path) -> None:
    """Refuse, before anything runs, a --report that is not a folder or cannot be made or written."""
    if report.exists() and not report.is_dir():
        raise InputError("exists and is not a folder", field="--report", source=str(report))
    probe = report
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"cannot write under {probe}", field="--report", source=str(report))
    if str(probe).startswith(("/proc", "/sys")):
        raise InputError(f"{probe} is not a place for files", field="--report", source=str(report))


def _scenario(path: Path | None, nodes: Path | None, pods: Path | None, seed: int | None,
              report_interval: float | None) -> Scenario:
    loaded = load_scenario(path, seed=seed)
    if nodes is not None:
        loaded = dataclasses.replace(loaded, nodes=tuple(load_nodes_file(nodes)), name=nodes.stem)
    if pods is not None:
        loaded = dataclasses.replace(loaded, pods=tuple(load_pods(pods)), name=f"{loaded.name}+{pods.stem}")
    if report_interval is not None:
        fields = {f.name: getattr(loaded.config, f.name) for f in dataclasses.fields(loaded.config)}
        loaded = dataclasses.replace(loaded, config=sim_config({**fields, "report_interval": report_interval},
                                                               {"report_interval": "--report-interval"}))
    return loaded
