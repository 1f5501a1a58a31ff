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

from toposched.errors import InputError
from toposched.manifests import decode_documents
from toposched.sim.contenders import BUILTIN_CONTENDERS, Contender, contender
from toposched.sim.engine import SimConfig, Simulation
from toposched.sim.hardware import cluster_from_dict, load_cluster
from toposched.sim.metrics import run_metrics
from toposched.sim.model import SimNode, SimPod
from toposched.sim.nodes_csv import load_nodes
from toposched.sim.synthetic import SyntheticConfig, generate_workload, ramp_past_saturation
from toposched.sim.traces import read_alibaba_pods
from toposched.sim.workload_file import read_workload

__all__ = ["DEFAULT_SCENARIO", "Scenario", "load_scenario", "load_pods", "run_scenario"]

DEFAULT_SCENARIO = "default-scenario.yaml"
_SIM_KEYS = {"reportInterval": "report_interval", "reportOnEvents": "report_on_events", "backoff": "backoff",
             "maxBackoff": "max_backoff", "retryInterval": "retry_interval", "sampleInterval": "sample_interval",
             "horizon": "horizon", "maxRecreations": "max_recreations"}
_KEYS = {"name", "seed", "nodes", "workload", "simulation", "schedulers"}


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
    """Pods from a file: the Alibaba GPU trace (``openb_pod_list_*.csv``) or our workload format (YAML/CSV)."""
    header = ""
    if Path(path).is_file():
        with open(path, encoding="utf-8", errors="replace") as f:
            header = f.readline()
    if header.startswith("name,cpu_milli"):
        return read_alibaba_pods(path)
    return read_workload(path)


def load_nodes_file(path: str | os.PathLike[str]) -> list[SimNode]:
    """Nodes from a file: a cluster spec (YAML) or a node list (CSV)."""
    if str(path).endswith(".csv"):
        return load_nodes(path)
    return load_cluster(path)


def load_scenario(path: str | os.PathLike[str] | None = None, *, seed: int | None = None) -> Scenario:
    """A scenario file, or the bundled default when ``path`` is None; ``seed`` overrides the file's."""
    if path is None:
        source = f"toposched/data/sim/{DEFAULT_SCENARIO}"
        text = resources.files("toposched").joinpath("data", "sim", DEFAULT_SCENARIO).read_text(encoding="utf-8")
        base = Path(".")
    else:
        source = os.fspath(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as err:
            raise InputError(f"cannot read: {err.strerror}", source=source) from None
        base = Path(path).parent
    documents = decode_documents(text, source)
    if len(documents) != 1 or not isinstance(documents[0], Mapping):
        raise InputError("expected one mapping", source=source)
    raw = documents[0]
    try:
        return _scenario(raw, base, seed, Path(source).stem)
    except InputError as err:
        raise err.with_source(source) from None


def _scenario(raw: Mapping[str, Any], base: Path, seed: int | None, default_name: str) -> Scenario:
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise InputError(f"unknown keys {unknown}; known: {', '.join(sorted(_KEYS))}", field=unknown[0])
    if "nodes" not in raw:
        raise InputError("a scenario needs nodes", field="nodes")
    if seed is None:
        seed = raw.get("seed", 1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"{seed!r} is not an integer", field="seed")
    nodes_raw = raw["nodes"]
    if isinstance(nodes_raw, Mapping) and set(nodes_raw) == {"file"}:
        nodes = load_nodes_file(base / str(nodes_raw["file"]))
    else:
        nodes = cluster_from_dict({"nodes": nodes_raw}, source="nodes", base_dir=base)
    pods = _workload(raw.get("workload") or {"synthetic": {}}, nodes, base, seed)
    sim = raw.get("simulation") or {}
    if not isinstance(sim, Mapping):
        raise InputError("expected a mapping", field="simulation")
    bad = sorted(set(sim) - set(_SIM_KEYS))
    if bad:
        raise InputError(f"unknown settings {bad}; known: {', '.join(sorted(_SIM_KEYS))}", field=f"simulation.{bad[0]}")
    config = SimConfig(**{_SIM_KEYS[k]: v for k, v in sim.items()})
    schedulers = raw.get("schedulers") or list(BUILTIN_CONTENDERS)
    if not isinstance(schedulers, list) or not all(isinstance(s, str) for s in schedulers):
        raise InputError("expected a list of scheduler names", field="schedulers")
    for name in schedulers:
        contender(name)  # an unknown name fails here, before anything runs
    return Scenario(str(raw.get("name", default_name)), tuple(nodes), tuple(pods), config, tuple(schedulers), seed)


def _workload(raw: Any, nodes: Sequence[SimNode], base: Path, seed: int) -> list[SimPod]:
    if not isinstance(raw, Mapping):
        raise InputError("expected a mapping", field="workload")
    if "file" in raw:
        return load_pods(base / str(raw["file"]))
    unknown = sorted(set(raw) - {"synthetic", "ramp"})
    if unknown:
        raise InputError(f"unknown keys {unknown}; known: file, ramp, synthetic", field=f"workload.{unknown[0]}")
    fields = dict(raw.get("synthetic") or {})
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
