"""The FGD paper's experiment: GPU allocation rate as the arrived workload grows past capacity.

Weng et al., "Beware of Fragmentation" (USENIX ATC '23), plot for each scheduler the share of
the cluster's GPUs that running pods hold against the GPUs the arrived pods asked for, with pods
that never leave (their simulator, github.com/hkust-adsl/kubernetes-scheduler-simulator). Here:

* pods arrive in creation order; none ever leaves, so there are no events and no clock, only a
  loop (the trace's creation times are kept as ``now`` for the scheduler);
* when the trace's pods ask for less than ``max_load`` percent of the cluster's GPUs, pods drawn
  uniformly from the trace (``random.Random(seed)``) follow until the next would pass it, as the
  paper's simulator inflates a workload (``TunePodsByNodeTotalResource``/``tuneUpPods``); a trace
  that asks for more is cut at its first pod that would pass it;
* every pod asking for GPUs asks through Koordinator's DeviceShare resources, whole GPUs as
  ``koordinator.sh/gpu-core`` = ``gpu-memory-ratio`` = 100 x N: the node then keeps one ledger of
  every GPU, as a Koordinator-managed GPU-sharing cluster does (with ``nvidia.com/gpu`` the
  kubelet's device manager, blind to shares, would hand out GPUs that hold shares);
* each pod is scheduled once. The cluster only fills up, so a pod that found no node would find
  none later; a pod its node refuses is counted and not re-created (no clock for a backoff);
* at every arrived-load step (``step`` percent of the GPU capacity, and ``max_load`` itself) the
  allocation rate is recorded: milli-GPUs held by running pods, fractional shares included, over
  the capacity; and the unallocated GPUs, capacity minus allocation.

The contenders are ``toposched`` with GPUShare's packing policy set to each of the paper's
policies (FGD's target workload is the trace's pods, ``TargetWorkload.from_tasks`` with the
paper's 95 % coverage), and ``default`` for reference. Ground truth is the simulator's
:class:`~toposched.sim.truth.NodeTruth`, as in the engine.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from toposched.devices.fgd import TargetWorkload, Task
from toposched.devices.share import GPU_CORE, GPU_MEMORY_RATIO, NVIDIA_GPU
from toposched.errors import InputError
from toposched.scheduler import Scheduler
from toposched.scheduler.plugins.gpu_share import GPUShare
from toposched.sim.contenders import REPORTS_AGENT, Contender, contender, node_report_of
from toposched.sim.engine import RunResult
from toposched.sim.fragmentation import TARGET_COVERAGE, ClusterGPUs, gpu_task
from toposched.sim.gpu_models import select_gpu_models
from toposched.sim.metrics import run_metrics
from toposched.sim.model import SimNode, SimPod
from toposched.sim.truth import NodeTruth
from toposched.workload import Container

__all__ = [
    "DEFAULT_FGD_SCHEDULERS",
    "FGD_COVERAGE",
    "FGD_POLICIES",
    "FGD_SCHEDULERS",
    "FGD_SEED",
    "PAPER_RATES",
    "fgd_arrivals",
    "fgd_contender",
    "GPU_PROFILE",
    "fgd_summary",
    "mean_metrics",
    "run_fgd_experiment",
    "run_fgd_seeds",
    "sharing_form",
]

#: toposched with GPUShare's packing policy set to each of the paper's policies.
FGD_POLICIES = {
    "toposched-fgd": "FGD",
    "toposched-bestfit": "BestFit",
    "toposched-dotprod": "DotProd",
    "toposched-gpupacking": "GpuPacking",
    "toposched-gpuclustering": "GpuClustering",
    "toposched-random": "Random",
}
#: The built-in GPU profile (toposched/data/profiles/gpu-fgd.yaml): FGD decides, the other scores break ties.
GPU_PROFILE = Path(str(resources.files("toposched") / "data" / "profiles" / "gpu-fgd.yaml"))
GPU_CONTENDER = "toposched-gpu"
FGD_SCHEDULERS = (*FGD_POLICIES, GPU_CONTENDER, "default")
DEFAULT_FGD_SCHEDULERS = ("toposched-fgd", "toposched-bestfit", "default")
#: The paper's published GPU allocation rates at 100 % arrived load on openb_pod_list_default.csv.
PAPER_RATES = {"FGD": 0.9523, "BestFit": 0.9286}
FGD_COVERAGE = TARGET_COVERAGE  # the share of the trace's pods the target workload's types cover (paper's runs)
FGD_SEED = 42  # the first seed of the paper's runs (tune seeds 42-51)
MAX_LOAD = 130
STEP = 5
_MILLI = 1000


def fgd_contender(name: str, *, seed: int = 0) -> Contender:
    """A contender of the experiment: ``toposched-<policy>`` (:data:`FGD_POLICIES`), ``toposched-gpu``
    (the built-in GPU profile, :data:`GPU_PROFILE`) or any built-in one.

    ``seed`` feeds the Random policy's draws.
    """
    if name == GPU_CONTENDER:
        return Contender(name, "gpu-fgd", GPU_PROFILE, reports=REPORTS_AGENT)
    policy = FGD_POLICIES.get(name)
    if policy is None:
        try:
            return contender(name)
        except InputError as err:
            raise InputError(f"{err.message}; for --fgd also: {', '.join((*FGD_POLICIES, GPU_CONTENDER))}",
                             field=err.field) from None
    return Contender(name, "toposched", reports=REPORTS_AGENT,
                     plugin_args={GPUShare.name: {"policy": policy, "seed": seed}})


def sharing_form(pod: SimPod, _cache: dict[int, Container] | None = None) -> SimPod:
    """The pod with whole ``nvidia.com/gpu`` GPUs asked as Koordinator shares of 100 % each (N GPUs:
    ``gpu-core`` = ``gpu-memory-ratio`` = 100 x N); a pod without them is returned as is."""
    if not any(NVIDIA_GPU in c.limits_or_requests for c in pod.pod.all_containers):
        return pod
    cache = {} if _cache is None else _cache

    def convert(c: Container) -> Container:
        count = c.limits_or_requests.get(NVIDIA_GPU, 0)
        if not count:
            return c
        if id(c) not in cache:  # containers are shared between pods of one shape: keep it so
            share = {GPU_CORE: 100 * count, GPU_MEMORY_RATIO: 100 * count}
            cache[id(c)] = dataclasses.replace(
                c, requests={k: v for k, v in c.requests.items() if k != NVIDIA_GPU},
                limits={**{k: v for k, v in c.limits.items() if k != NVIDIA_GPU}, **share})
        return cache[id(c)]

    spec = pod.pod
    spec = dataclasses.replace(spec, containers=tuple(convert(c) for c in spec.containers),
                               init_containers=tuple(convert(c) for c in spec.init_containers))
    return dataclasses.replace(pod, pod=spec)


def fgd_arrivals(pods: Sequence[SimPod], capacity_milli: int, *, max_load: int = MAX_LOAD,
                 seed: int = FGD_SEED, shuffle: bool = False) -> tuple[list[SimPod], int]:
    """The pods that arrive, in order, and how many of them are clones of trace pods.

    The trace's pods in creation order (stable; with ``shuffle``, in an order drawn from
    ``random.Random(seed)`` as the paper's runs do), in the sharing form, while the GPUs they
    ask for stay within ``max_load`` percent of ``capacity_milli``; then copies of pods drawn
    uniformly from the trace with the same ``random.Random``, named ``<pod>-tuned-<i>``, until
    the next draw would pass it. InputError when the cluster has no GPU or no pod asks for one.
    """
    if capacity_milli <= 0:
        raise InputError("the FGD experiment needs nodes with GPUs", field="nodes")
    cache: dict[int, Container] = {}
    trace = [sharing_form(p, cache) for p in sorted(pods, key=lambda p: p.arrival)]
    milli = [gpu_task(p).total_milli for p in trace]
    if not any(milli):
        raise InputError("the FGD experiment needs pods that ask for GPUs", field="pods")
    draw = random.Random(seed)
    last = trace[-1].arrival
    order = list(range(len(trace)))
    if shuffle:
        draw.shuffle(order)
    limit = max_load * capacity_milli  # compared with 100 x the arrived milli-GPUs: exact
    out: list[SimPod] = []
    arrived = 0
    for index in order:
        if 100 * (arrived + milli[index]) > limit:
            return out, 0
        out.append(trace[index] if not shuffle else dataclasses.replace(trace[index], arrival=float(len(out))))
        arrived += milli[index]
    if shuffle:
        last = float(len(out))
    clones = 0
    while True:
        index = draw.randrange(len(trace))
        if 100 * (arrived + milli[index]) > limit:
            return out, clones
        source = trace[index]
        name = f"{source.pod.name}-tuned-{clones}"
        pod = dataclasses.replace(source.pod, name=name, uid=name)
        out.append(dataclasses.replace(source, pod=pod, arrival=last,
                                       owner=f"job/{name}" if source.owner is not None else None))
        arrived += milli[index]
        clones += 1


def fgd_summary(metrics: dict[str, Any]) -> list[str]:
    """The experiment in a few lines of text: each scheduler's allocation rate at 100 % and at the
    highest arrived load, its unallocated GPUs there and its run time; then toposched-gpu's and
    toposched-fgd's rates at 100 % (means over the seeds of several runs) above the paper's
    published FGD and BestFit rates on the openb default trace."""
    scenario = metrics["scenario"]
    top = str(scenario["max_load"])
    recorded = next(iter(metrics["schedulers"].values()))["gpu_allocation_rate"]
    loads = [load for load in dict.fromkeys(("100", top)) if load in recorded]
    width = max(len(n) for n in metrics["schedulers"])
    lines = [f"GPU allocation rate by arrived load: {scenario['pods']:,} pods ({scenario['cloned_pods']:,} cloned), "
             f"{scenario['nodes']:,} nodes, {scenario['gpus']:,} GPUs",
             f"  {'scheduler':<{width}}" + "".join(f"{load + '%':>9}" for load in loads)
             + f"{'unallocated at ' + loads[-1] + '%':>22}{'run':>8}"]
    for name, values in metrics["schedulers"].items():
        rates = values["gpu_allocation_rate"]
        seconds = values.get("wall_seconds")
        lines.append(f"  {name:<{width}}" + "".join(f"{100 * rates[load]:>8.2f}%" for load in loads)
                     + f"{values['unallocated_gpus'][loads[-1]]:>17,.1f} GPUs"
                     + (f"{seconds:>7.1f}s" if seconds is not None else f"{'-':>8}"))
    seeds = scenario.get("seeds")
    over = f" (mean of seeds {seeds[0]}-{seeds[-1]})" if seeds else ""
    said = False
    for name, label in ((GPU_CONTENDER, "toposched-gpu (FGD decides)"), ("toposched-fgd", "toposched (FGD)")):
        fgd = metrics["schedulers"].get(name)
        if fgd is not None and "100" in fgd["gpu_allocation_rate"]:
            lines.append(f"{label} at 100% arrived load: {100 * fgd['gpu_allocation_rate']['100']:.2f}% of the GPUs{over}")
            said = True
    if said:
        lines.append(f"the FGD paper on openb_pod_list_default.csv: FGD {100 * PAPER_RATES['FGD']:.2f}%, "
                     f"BestFit {100 * PAPER_RATES['BestFit']:.2f}%")
    return lines


def _steps(max_load: int, step: int) -> list[int]:
    return sorted({*range(step, max_load + 1, step), max_load})


def run_fgd_experiment(
    nodes: Sequence[SimNode],
    pods: Sequence[SimPod],
    contenders: Sequence[Contender] | None = None,
    *,
    max_load: int = MAX_LOAD,
    step: int = STEP,
    seed: int = FGD_SEED,
    coverage: float = FGD_COVERAGE,
    shuffle: bool = False,
    random_ties: bool = True,
    name: str = "fgd",
    timer: Callable[[], float] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the experiment for every contender on the same arrivals (:func:`fgd_arrivals`); the metrics document.

    Each scheduler's object is :func:`~toposched.sim.metrics.run_metrics`' (without the
    timeline: there is no clock) plus ``gpu_allocation_rate`` and ``unallocated_gpus`` (arrived
    load percent as a string -> rate in [0, 1] / GPUs), ``allocated_gpus`` and ``arrived_gpus`` at
    the end, and ``wall_seconds`` (the whole run, null without ``timer``). ``progress(name,
    done, total)`` is called as pods arrive. Default contenders: :data:`DEFAULT_FGD_SCHEDULERS`.
    ``random_ties``: every contender's scheduler breaks ties between equally scored nodes by a
    draw from ``random.Random(seed)`` (``Scheduler.reseed``), as kube-scheduler and the paper's
    simulator do; else the lowest-numbered node wins them.
    """
    for label, value in (("max_load", max_load), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InputError(f"{value!r} is not a positive whole percent", field=label, source="fgd experiment")
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise InputError(f"node names repeat: {sorted({n for n in names if names.count(n) > 1})}", field="nodes",
                         source="fgd experiment")
    contenders = list(contenders) if contenders is not None else [fgd_contender(n, seed=seed)
                                                                   for n in DEFAULT_FGD_SCHEDULERS]
    capacity = _MILLI * sum(len(NodeTruth(n).gpus.devices) for n in nodes)
    arrivals, clones = fgd_arrivals(pods, capacity, max_load=max_load, seed=seed, shuffle=shuffle)
    nodes, arrivals = select_gpu_models(nodes, arrivals)
    milli = [gpu_task(p).total_milli for p in arrivals]
    target = [gpu_task(p) for p in pods]
    out: dict[str, Any] = {
        "scenario": {
            "name": name, "experiment": "fgd", "seed": seed, "nodes": len(nodes), "pods": len(arrivals),
            "trace_pods": len(arrivals) - clones, "cloned_pods": clones, "gpus": capacity // _MILLI,
            "order": "shuffled" if shuffle else "creation", "max_load": max_load, "step": step, "coverage": coverage,
            "ties": "random" if random_ties else "first",
        },
        "schedulers": {},
    }
    for c in contenders:
        report = (lambda done, total, label=c.name: progress(label, done, total)) if progress else None
        run = _Run(c, nodes, capacity, _steps(max_load, step), timer)
        if random_ties:
            run.scheduler.reseed(seed)
        run.set_target_workload(target, coverage)
        out["schedulers"][c.name] = run.execute(arrivals, milli, report)
    return out


def run_fgd_seeds(
    nodes: Sequence[SimNode],
    pods: Sequence[SimPod],
    contenders: Callable[[int], Sequence[Contender]],
    seeds: Sequence[int],
    *,
    progress: Callable[[str, int, int], None] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """:func:`run_fgd_experiment` once per seed (``contenders(seed)`` gives each run's), averaged
    (:func:`mean_metrics`): the paper's protocol is ``shuffle=True`` over seeds 42-51."""
    if not seeds:
        raise InputError("no seeds to run", field="seeds", source="fgd experiment")
    runs = []
    for seed in seeds:
        report = (lambda label, done, total, s=seed: progress(f"{label} {s}", done, total)) if progress else None
        runs.append(run_fgd_experiment(nodes, pods, contenders(seed), seed=seed, progress=report, **options))
    return mean_metrics(runs)


def mean_metrics(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' metrics documents (one per seed, same contenders) as one: every number the
    mean over the runs (rounded to 6 places; kept as it is where every run has it; null where any
    run has null), anything else the first run's; ``scenario.seed`` becomes ``scenario.seeds`` and each scheduler gains ``runs``,
    its allocation rate at 100 % and at the last load per seed. One run is returned as it is."""
    if len(runs) == 1:
        return runs[0]
    out = _mean(runs)
    seeds = [r["scenario"]["seed"] for r in runs]
    out["scenario"].pop("seed", None)
    out["scenario"]["seeds"] = seeds
    for name, values in out["schedulers"].items():
        loads = [load for load in dict.fromkeys(("100", str(out["scenario"]["max_load"])))
                 if load in values["gpu_allocation_rate"]]
        values["runs"] = {str(seed): {load: r["schedulers"][name]["gpu_allocation_rate"][load] for load in loads}
                          for seed, r in zip(seeds, runs)}
    return out


def _mean(values: Sequence[Any]) -> Any:
    first = values[0]
    if isinstance(first, dict):
        return {k: _mean([v.get(k) if isinstance(v, dict) else None for v in values]) for k in first}
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        if all(v == first for v in values):
            return first  # the same in every run (a count, a setting): kept as it is
        return round(sum(values) / len(values), 6)
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return None  # a number in some runs only
    return first


class _Run:
    """One contender through the arrivals."""

    def __init__(self, contender: Contender, nodes: Sequence[SimNode], capacity: int, steps: list[int],
                 timer: Callable[[], float] | None) -> None:
        self.started = timer() if timer is not None else 0.0
        self.contender = contender
        self.truths = truths = {n.name: NodeTruth(n) for n in nodes}
        self.capacity = capacity
        self.steps = steps
        self.timer = timer
        self.scheduler: Scheduler = contender.build(list(nodes), truths, 0.0)
        self.report_kind = contender.report_kind(self.scheduler.profile.exact)
        self.result = RunResult(contender.name, len(nodes))
        self.rates: dict[str, float] = {}
        self.unallocated: dict[str, float] = {}
        self.fragmented: dict[str, float] = {}
        self.allocated = 0
        self.gpu_pods = 0  # admitted pods holding GPUs
        self.gpu_pods_aligned = 0  # ... whose GPUs sit on the fewest NUMA nodes their count allows there
        self.gpus = ClusterGPUs(list(truths.values()), None)

    def set_target_workload(self, tasks: list[Task], coverage: float) -> None:
        """Measure fragmentation against this target workload, and give it to every GPUShare of the
        profile that packs by FGD."""
        self.gpus = ClusterGPUs(self.gpus.truths, TargetWorkload.from_tasks(tasks, coverage=coverage))
        plugins = {id(p): p for p in (*self.scheduler.profile.filters, *(p for p, _ in self.scheduler.profile.scores))}
        for plugin in plugins.values():
            if isinstance(plugin, GPUShare) and plugin.policy_name == "FGD":
                plugin.set_target_workload(tasks, coverage=coverage)

    def _record(self, load: int) -> None:
        self.rates[str(load)] = round(self.allocated / self.capacity, 6)
        self.unallocated[str(load)] = round((self.capacity - self.allocated) / _MILLI, 3)
        fragmented = self.gpus.measure()[1]
        if fragmented is not None:
            self.fragmented[str(load)] = round(fragmented / _MILLI, 3)

    def execute(self, arrivals: list[SimPod], milli: list[int],
                progress: Callable[[int, int], None] | None) -> dict[str, Any]:
        result, steps, scheduler = self.result, self.steps, self.scheduler
        reports = bool(self.report_kind)
        arrived = 0
        pending = 0  # index in steps of the next load to record
        elapsed = 0.0
        for sim_pod, m in zip(arrivals, milli):
            while pending < len(steps) and 100 * (arrived + m) > steps[pending] * self.capacity:
                self._record(steps[pending])
                pending += 1
            arrived += m
            result.arrived += 1
            pod, now = sim_pod.pod, sim_pod.arrival
            start = self.timer() if self.timer is not None else 0.0
            decision = scheduler.schedule(pod, now)
            if self.timer is not None:
                elapsed += self.timer() - start
            result.decisions += 1
            if decision.node is None:
                result.pending_end += 1
            else:
                self._bind(decision.node, decision.placement, sim_pod, m, now, reports)
            if progress is not None:
                progress(result.arrived, len(arrivals))
        for load in steps[pending:]:
            self._record(load)
        result.running_end = result.scheduled
        result.end_time = arrivals[-1].arrival if arrivals else 0.0
        result.scheduler_seconds = elapsed if self.timer is not None else None
        metrics = run_metrics(result)
        del metrics["timeline"]  # no clock: the figures by arrived load replace it
        wall = self.timer() - self.started if self.timer is not None else None
        metrics.update({
            "gpu_allocation_rate": self.rates,
            "unallocated_gpus": self.unallocated,
            "fragmented_gpus": self.fragmented or None,
            "gpu_fragmentation": self.fragmented[str(steps[-1])] if self.fragmented else None,
            "allocated_gpus": round(self.allocated / _MILLI, 3),
            "gpu_pods": self.gpu_pods,
            "gpu_numa_aligned_fraction": round(self.gpu_pods_aligned / self.gpu_pods, 6) if self.gpu_pods else None,
            "arrived_gpus": round(arrived / _MILLI, 3),
            "wall_seconds": None if wall is None else round(wall, 6),
        })
        return metrics

    def _count_alignment(self, truth: NodeTruth, placement: Any) -> None:
        """Count a GPU pod, and whether its GPUs sit on the fewest NUMA nodes that hold as many GPUs."""
        numa_of = {d.id: d.numa for d in truth.gpus.devices}
        held = {i for ids in (placement.devices().values() if placement is not None else ()) for i in ids
                if i in numa_of}
        if not held:
            return
        self.gpu_pods += 1
        per_numa = sorted(Counter(d.numa for d in truth.gpus.devices).values(), reverse=True)
        fewest = next(k for k in range(1, len(per_numa) + 1) if sum(per_numa[:k]) >= len(held))
        self.gpu_pods_aligned += len({numa_of[i] for i in held}) <= fewest

    def _bind(self, node: str, placement: Any, sim_pod: SimPod, m: int, now: float, reports: bool) -> None:
        """The node admits or refuses the pod; a refused pod is gone (nothing re-creates it here)."""
        result, pod = self.result, sim_pod.pod
        result.bound += 1
        truth = self.truths[node]
        outcome = truth.admit(pod, placement, now)
        if not outcome.admitted:
            result.rejected[outcome.reason] += 1
            result.abandoned += 1
            self.scheduler.unreserve(pod)
            return
        self.scheduler.bound(pod, now)
        if m:
            self._count_alignment(truth, placement)
        self.allocated += m
        result.scheduled += 1
        result.started.append(outcome.running)
        if reports:  # arrivals are far apart next to a 60 s report interval: the node has reported
            self.scheduler.cluster.update_report(node_report_of(truth, self.report_kind), now)
