"""Scenarios: nodes, a workload and the simulation settings, run for several schedulers side by side.

A scenario file (YAML) has four keys, all optional except ``nodes``::

    name: mixed-cluster
    seed: 1
    nodes:                      # a cluster spec (docs/sim/inputs.md), or {file: nodes.csv}
      - {profile: epyc-8numa, count: 40}
    workload:                   # synthetic generator fields, a ramp, or {file: pods.csv|pods.yaml}
      synthetic: {pods: 4000}
      ramp: {start: 0.5, end: 2.0}
    simulation: {reportInterval: 60, retryInterval: 10, backoff: 10, maxBackoff: 300}
    schedulers: [toposched, default, nrt-match, nrt-match-overreserve]

The bundled default (``toposched simulate`` with no arguments) is ``data/sim/default-scenario.yaml``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from toposched.decoding import check_fields
from toposched.errors import InputError
from toposched.inputs import check_int_range, check_number_range, is_regular_file
from toposched.manifests import decode_documents, read_text
from toposched.sim.contenders import BUILTIN_CONTENDERS, Contender, contender
from toposched.sim.engine import SimConfig, Simulation
from toposched.sim.hardware import cluster_from_dict, load_cluster
from toposched.sim.limits import (
    MAX_HORIZON,
    MAX_INTERVAL,
    MAX_RECREATIONS,
    MAX_SEED,
    MAX_SIM_NODES,
    MAX_SIM_PODS,
    MIN_INTERVAL,
)
from toposched.sim.metrics import run_metrics
from toposched.sim.model import SimNode, SimPod
from toposched.sim.nodes_csv import load_nodes
from toposched.sim.synthetic import SyntheticConfig, generate_workload, ramp_past_saturation
from toposched.sim.traces import read_alibaba_pods
from toposched.sim.workload_file import read_workload

__all__ = ["DEFAULT_SCENARIO", "Scenario", "check_nodes", "check_pods", "load_pods", "load_scenario", "run_scenario",
           "sim_config"]

DEFAULT_SCENARIO = "default-scenario.yaml"
_SIM_KEYS = {"reportInterval": "report_interval", "reportOnEvents": "report_on_events", "backoff": "backoff",
             "maxBackoff": "max_backoff", "retryInterval": "retry_interval", "sampleInterval": "sample_interval",
             "horizon": "horizon", "maxRecreations": "max_recreations"}
_KEYS = {"name", "seed", "nodes", "workload", "simulation", "schedulers"}
# Sources the parts of a scenario name in their errors (not files): the file's name goes before them.
_PART_LABELS = {"nodes", "synthetic workload", "simulation config"}


@dataclass(frozen=True)
class Scenario:
    """Everything a comparison runs on: nodes, pods, settings, and the schedulers to compare."""

    name: str
    nodes: tuple[SimNode, ...]
    pods: tuple[SimPod, ...]
    config: SimConfig = field(default_factory=SimConfig)
    schedulers: tuple[str, ...] = BUILTIN_CONTENDERS
    seed: int | None = None

    def facts(self) -> dict[str, Any]:
        """The scenario's summary for ``metrics.json``."""
        return {"name": self.name, "seed": self.seed, "nodes": len(self.nodes), "pods": len(self.pods),
                "report_interval": self.config.report_interval, "retry_interval": self.config.retry_interval,
                "backoff": self.config.backoff, "max_recreations": self.config.max_recreations,
                "horizon": self.config.horizon}


def load_pods(path: str | os.PathLike[str]) -> list[SimPod]:
    """Pods from a file: the Alibaba GPU trace (``openb_pod_list_*.csv``) or our workload format (YAML/CSV).

    Refused past :data:`~toposched.sim.limits.MAX_SIM_PODS` pods.
    """
    header = ""
    if is_regular_file(Path(path)):
        with open(path, encoding="utf-8", errors="replace") as f:
            header = f.readline(200)
    pods = read_alibaba_pods(path) if header.startswith("name,cpu_milli") else read_workload(path)
    try:
        check_pods(pods, "pods")
    except InputError as err:
        raise err.with_source(os.fspath(path)) from None
    return pods


def load_nodes_file(path: str | os.PathLike[str]) -> list[SimNode]:
    """Nodes from a file: a cluster spec (YAML) or a node list (CSV)."""
    nodes = load_nodes(path) if str(path).endswith(".csv") else load_cluster(path)
    try:
        check_nodes(nodes, "nodes")
    except InputError as err:
        raise err.with_source(os.fspath(path)) from None
    return nodes


def load_scenario(path: str | os.PathLike[str] | None = None, *, seed: int | None = None) -> Scenario:
    """A scenario file, or the bundled default when ``path`` is None; ``seed`` overrides the file's."""
    if path is None:
        source = f"toposched/data/sim/{DEFAULT_SCENARIO}"
        text = resources.files("toposched").joinpath("data", "sim", DEFAULT_SCENARIO).read_text(encoding="utf-8")
        base = Path(".")
    else:
        source = os.fspath(path)
        text = read_text(source)  # a regular file under the size cap (toposched.inputs)
        base = Path(path).parent
    documents = decode_documents(text, source)
    if len(documents) != 1 or not isinstance(documents[0], Mapping):
        raise InputError("expected one mapping", source=source)
    raw = documents[0]
    try:
        return _scenario(raw, base, seed, Path(source).stem)
    except InputError as err:
        if err.source in _PART_LABELS:  # a part of this file, not another file: name the file too
            err.source = f"{source}: {err.source}"
        raise err.with_source(source) from None


def _scenario(raw: Mapping[str, Any], base: Path, seed: int | None, default_name: str) -> Scenario:
    check_fields(raw, sorted(_KEYS), "")
    if "nodes" not in raw:
        raise InputError("a scenario needs nodes", field="nodes")
    if seed is None:
        seed = raw.get("seed", 1)
    check_int_range(seed, 0, MAX_SEED, field="seed")
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not name or len(name) > 253:
        raise InputError(f"{name!r:.60} is not a name (a string of 1 to 253 characters)", field="name")
    sim = raw.get("simulation") or {}
    if not isinstance(sim, Mapping):
        raise InputError(f"expected a mapping, got {type(sim).__name__}", field="simulation")
    bad = sorted(set(sim) - set(_SIM_KEYS))
    if bad:
        raise InputError(f"unknown settings {bad}; known: {', '.join(sorted(_SIM_KEYS))}", field=f"simulation.{bad[0]}")
    config = sim_config({_SIM_KEYS[k]: v for k, v in sim.items()}, {v: f"simulation.{k}" for k, v in _SIM_KEYS.items()})
    nodes_raw = raw["nodes"]
    if isinstance(nodes_raw, Mapping) and set(nodes_raw) == {"file"}:
        nodes = load_nodes_file(base / _file_name(nodes_raw["file"], "nodes.file"))
    else:
        nodes = cluster_from_dict({"nodes": nodes_raw}, source="nodes", base_dir=base)
    check_nodes(nodes, "nodes")
    pods = _workload(raw.get("workload") or {"synthetic": {}}, nodes, base, seed)
    check_pods(pods, "workload")
    schedulers = raw.get("schedulers") or list(BUILTIN_CONTENDERS)
    if not isinstance(schedulers, list) or not all(isinstance(s, str) for s in schedulers):
        raise InputError("expected a list of scheduler names", field="schedulers")
    for name in schedulers:
        contender(name)  # an unknown name fails here, before anything runs
    return Scenario(name, tuple(nodes), tuple(pods), config, tuple(schedulers), seed)


def _file_name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"{value!r:.60} is not a file name", field=field)
    return value


def check_nodes(nodes: Sequence[SimNode], field: str) -> None:
    """Refuse a cluster with no node or more than :data:`MAX_SIM_NODES` (InputError naming ``field``)."""
    if not nodes:
        raise InputError("no nodes: a simulation needs at least one", field=field)
    if len(nodes) > MAX_SIM_NODES:
        raise InputError(f"{len(nodes):,} nodes: more than {MAX_SIM_NODES:,} (the limit)", field=field)


def check_pods(pods: Sequence[SimPod], field: str) -> None:
    """Refuse a workload of more than :data:`MAX_SIM_PODS` pods (InputError naming ``field``)."""
    if len(pods) > MAX_SIM_PODS:
        raise InputError(f"{len(pods):,} pods: more than {MAX_SIM_PODS:,} (the limit)", field=field)


def sim_config(values: Mapping[str, Any], names: Mapping[str, str] | None = None) -> SimConfig:
    """A :class:`SimConfig` from its fields, each checked against :mod:`toposched.sim.limits` first.

    ``names`` maps a field to the name errors use for it (``simulation.reportInterval``, ``--report-interval``).
    """
    names = names or {}
    for key, value in values.items():
        field = names.get(key, key)
        if key in ("report_interval", "backoff", "max_backoff", "retry_interval", "sample_interval"):
            check_number_range(value, MIN_INTERVAL, MAX_INTERVAL, field=field)
        elif key == "horizon" and value is not None:
            check_number_range(value, 0, MAX_HORIZON, field=field, low_open=True)
        elif key == "max_recreations" and value is not None:
            check_int_range(value, 0, MAX_RECREATIONS, field=field)
        elif key == "report_on_events" and not isinstance(value, bool):
            raise InputError(f"{value!r:.40} is not true or false", field=field)
    return SimConfig(**values)


def _workload(raw: Any, nodes: Sequence[SimNode], base: Path, seed: int) -> list[SimPod]:
    if not isinstance(raw, Mapping):
        raise InputError("expected a mapping", field="workload")
    if "file" in raw:
        return load_pods(base / _file_name(raw["file"], "workload.file"))
    check_fields(raw, ("file", "ramp", "synthetic"), "workload")
    synthetic = raw.get("synthetic") or {}
    if not isinstance(synthetic, Mapping):
        raise InputError(f"expected a mapping, got {type(synthetic).__name__}", field="workload.synthetic")
    fields = dict(synthetic)
    try:
        config = SyntheticConfig(**fields)
    except TypeError as err:
        raise InputError(str(err), field="workload.synthetic") from None
    ramp = raw.get("ramp")
    if ramp is not None:
        if not isinstance(ramp, Mapping) or set(ramp) - {"start", "end"}:
            raise InputError("expected {start, end} multiples of the saturation rate", field="workload.ramp")
        config = ramp_past_saturation(config, nodes, **ramp)
    return generate_workload(config, seed=seed)


def run_scenario(scenario: Scenario, contenders: Sequence[Contender] | None = None, *,
                 timer: Callable[[], float] | None = None,
                 progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Run every scheduler on the same input; the metrics document (``metrics.json``)."""
    contenders = list(contenders) if contenders is not None else [contender(n) for n in scenario.schedulers]
    out: dict[str, Any] = {"scenario": scenario.facts(), "schedulers": {}}
    for c in contenders:
        report = (lambda done, total, name=c.name: progress(name, done, total)) if progress else None
        result = Simulation(scenario.nodes, scenario.pods, c, scenario.config, timer=timer).run(report)
        out["schedulers"][c.name] = run_metrics(result)
    return out
