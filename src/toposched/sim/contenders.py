"""The schedulers a simulation compares, and what each is allowed to know about the nodes.

* ``default``: kube-scheduler's topology-blind behaviour (NodeResourcesFit LeastAllocated plus
  BalancedAllocation); it sees Node objects only. The node's kubelet rejects what it cannot align.
* ``nrt-match``: scheduler-plugins' NodeResourceTopologyMatch as their documented example deploys
  it (toposched/data/sim/nrt-match.yaml): the plugin added to kube-scheduler's default plugins, so
  NodeResourcesFit (LeastAllocated) and BalancedAllocation keep scoring beside it. It sees Node
  objects and the NodeResourceTopology reports as published, so its NUMA view lags by up to one
  report interval. (The scheduler core's built-in ``nrt-match`` profile lets the plugin score
  alone; docs/sim/engine.md says why the simulator does not compare against that.)
* ``nrt-match-overreserve``: the same with scheduler-plugins' overreserve NRT cache
  (``cacheResyncPeriodSeconds: 5``, toposched/data/sim/nrt-match-overreserve.yaml); it sees what
  ``nrt-match`` sees.
* ``toposched``: our profile, fed what a real cluster running the toposched agent gives it: Node
  objects and each node's report as the agent publishes it (:meth:`NodeTruth.agent_report`: the
  agent's own code, through the NRT wire format), from which it builds its kubelet replicas; it
  keeps the ledger of its placements.
* ``toposched-nfd``: the same profile fed node-feature-discovery's reports (zones and counts, no
  node description): count-only replicas, so the comparison shows what the description buys.
* any KubeSchedulerConfiguration file: a profile that predicts exact placement is given what
  ``toposched`` is given; any other sees Node objects and NFD's reports, like ``nrt-match``.

No contender is ever handed a node's Machine or KubeletConfig: what it knows comes through
Node objects, reports and pod annotations, as on a real cluster.

A contender's ``plugin_args`` re-creates the named plugins of its profile with those args (in
place of the profile's own), e.g. ``{"GPUShare": {"policy": "FGD"}}``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from toposched.errors import InputError
from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.framework import Profile, registry
from toposched.scheduler.plugins.cpu_orchestration import CPU_ENFORCEMENT
from toposched.scheduler.profile_setup import load_profile
from toposched.sim.model import CPU_ENFORCEMENT_AGENT, SimNode
from toposched.sim.truth import NodeTruth
from toposched.topology.nrt import NodeResourceTopology

__all__ = ["BUILTIN_CONTENDERS", "REPORTS_AGENT", "REPORTS_NFD", "Contender", "contender", "contender_from_config",
           "node_report_of"]

BUILTIN_CONTENDERS = ("default", "nrt-match", "nrt-match-overreserve", "toposched", "toposched-nfd")
REPORTS_AGENT = "agent"  # the toposched agent's reports: zones plus the node description
REPORTS_NFD = "nfd"  # node-feature-discovery's reports: zones and counts only


@dataclass(frozen=True)
class Contender:
    """A scheduler under test: its profile and what it is told about the nodes."""

    name: str
    profile: str | None = None
    config: Path | None = None
    reports: str = ""  # which NodeResourceTopology reports reach it: REPORTS_AGENT, REPORTS_NFD or none
    plugin_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)  # plugin -> its args

    def build(self, nodes: list[SimNode], truths: dict[str, NodeTruth], now: float = 0.0) -> Scheduler:
        """A fresh scheduler with its own cluster view of ``nodes`` at time ``now``."""
        profile = _with_args(load_profile(self.profile, self.config), self.plugin_args)
        kind = self.report_kind(profile.exact)
        cluster = Cluster()
        for node in nodes:
            labels = dict(node.labels)
            if node.cpu_enforcement == CPU_ENFORCEMENT_AGENT:
                labels[CPU_ENFORCEMENT] = CPU_ENFORCEMENT_AGENT
            cluster.set_node(NodeSpec(node.name, allocatable=dict(truths[node.name].allocatable), labels=labels,
                                      taints=node.taints))
            if kind:
                cluster.update_report(node_report_of(truths[node.name], kind), now)
        return Scheduler(cluster, profile)

    def report_kind(self, exact: bool) -> str:
        """Which reports reach this contender ("" for none): its own choice, else (a configuration file)
        the agent's for a profile that predicts exact placement (``exact``) and NFD's for any other."""
        if self.reports or self.config is None:
            return self.reports
        return REPORTS_AGENT if exact else REPORTS_NFD


def node_report_of(truth: NodeTruth, kind: str) -> NodeResourceTopology:
    """A node's current report of the given kind (REPORTS_AGENT or REPORTS_NFD)."""
    return truth.agent_report() if kind == REPORTS_AGENT else truth.report()


def _with_args(profile: Profile, plugin_args: Mapping[str, Mapping[str, Any]]) -> Profile:
    """``profile`` with each named plugin re-created from its ``plugin_args`` at every point it sits."""
    for name, args in plugin_args.items():
        old = next((p for p in (*profile.filters, *(p for p, _ in profile.scores), *profile.reserves,
                                *profile.pre_filters) if p.name == name), None)
        if old is None:
            raise InputError(f"the profile has no plugin {name!r} to give args to", field=f"plugin_args.{name}",
                             source=f"profile {profile.name}")
        new = registry.create(name, args)

        def swap(item: Any, old: Any = old, new: Any = new) -> Any:
            if isinstance(item, tuple):  # (plugin, weight) of the score list
                return (new, item[1]) if item[0] is old else item
            return new if item is old else item

        for f in dataclasses.fields(profile):
            value = getattr(profile, f.name)
            setattr(profile, f.name, [swap(v) for v in value] if isinstance(value, list) else swap(value))
    return profile


def contender_from_config(config: str | Path, profile: str | None = None) -> Contender:
    """A contender running ``profile`` (default: the first) of a KubeSchedulerConfiguration file, named after it."""
    path = Path(config)
    if not path.is_file():
        raise InputError("no such file", field="config", source=str(path))
    return Contender(profile or path.stem, profile, path)


def _sim_config(file: str) -> Path:
    return Path(str(resources.files("toposched") / "data" / "sim" / file))


def contender(name: str) -> Contender:
    """A built-in contender by name (:data:`BUILTIN_CONTENDERS`)."""
    if name == "default":
        return Contender("default", "default")
    if name in ("nrt-match", "nrt-match-overreserve"):
        return Contender(name, name, _sim_config(f"{name}.yaml"), reports=REPORTS_NFD)
    if name == "toposched":
        return Contender("toposched", "toposched", reports=REPORTS_AGENT)
    if name == "toposched-nfd":
        return Contender("toposched-nfd", "toposched", reports=REPORTS_NFD)
    raise InputError(f"unknown scheduler {name!r}; built in: {', '.join(BUILTIN_CONTENDERS)} "
                     f"(or pass a KubeSchedulerConfiguration file)", field="schedulers")

