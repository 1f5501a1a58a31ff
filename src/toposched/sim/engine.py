"""The discrete-event engine: one scheduler, one cluster of simulated nodes, one workload.

Simulated time only; nothing here reads a clock except the optional ``timer`` the caller passes
to measure the scheduler's own wall time. Events at the same instant are handled in a fixed
order (departures, node reports, arrivals, retries) and then one scheduling pass runs, so a run
is a pure function of its inputs.

The flow of a pod: it arrives (created by its controller) and joins the scheduling queue; a
scheduling pass gives it a node (the scheduler reserves and binds at once); the node admits it
(the ground truth may still reject it, e.g. ``TopologyAffinityError`` when the scheduler did not
predict the kubelet) and it runs for its duration, then departs. A rejected pod is deleted and,
when it has an owner, re-created after a backoff that doubles per attempt, like a ReplicaSet
replacing a failed pod. A pod that finds no node waits; pods of one shape wait in one line and
only its head is retried, when the cluster changed and at most every ``retry_interval``.

Before the run, each pod's GPU models become a node selector the schedulers see
(:mod:`toposched.sim.gpu_models`). Samples of the time series also measure the GPUs themselves:
the milli-GPU held (whole GPUs and shares) and the FGD paper's fragmentation of the idle rest
against the GPU pods of the workload (:mod:`toposched.sim.fragmentation`).
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toposched.devices.fgd import MILLI
from toposched.errors import InputError
from toposched.names import NVIDIA_GPU
from toposched.scheduler import Scheduler
from toposched.sim.contenders import Contender, node_report_of
from toposched.sim.fragmentation import ClusterGPUs, gpu_target_workload
from toposched.sim.gpu_models import select_gpu_models
from toposched.sim.model import SimNode, SimPod
from toposched.sim.truth import NodeTruth, RunningPod
from toposched.workload import Pod

__all__ = ["RunResult", "SimConfig", "Simulation"]

_DEPART, _REPORT, _ARRIVE, _RETRY, _SAMPLE = range(5)
MAX_SAMPLES = 1000


@dataclass(frozen=True)
class SimConfig:
    """How the simulated cluster behaves.

    ``report_interval``: seconds between NodeResourceTopology publications (node-feature-
    discovery's default is 60 s); ``report_on_events`` also publishes a node's report right after
    a pod starts or ends there. ``backoff``/``max_backoff``: the controller's re-creation delay
    after a rejection (doubling per attempt). ``retry_interval``: how often waiting pods are
    retried at most. ``sample_interval``: spacing of the time series (stretched so a run keeps
    at most about :data:`MAX_SAMPLES` points). ``horizon``: simulated
    seconds after which the run stops (None: when nothing is left to happen).
    ``max_recreations``: how often a controller replaces one rejected pod before giving up (a
    Job's ``backoffLimit``; None: forever, like a ReplicaSet).
    """

    report_interval: float = 60.0
    report_on_events: bool = False
    backoff: float = 10.0
    max_backoff: float = 300.0
    retry_interval: float = 10.0
    sample_interval: float = 60.0
    horizon: float | None = None
    max_recreations: int | None = None

    def __post_init__(self) -> None:
        for name in ("report_interval", "backoff", "max_backoff", "retry_interval", "sample_interval"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise InputError(f"{value!r} must be a positive number of seconds", field=name, source="simulation config")
        if self.max_recreations is not None and (isinstance(self.max_recreations, bool)
                                                 or not isinstance(self.max_recreations, int) or self.max_recreations < 0):
            raise InputError(f"{self.max_recreations!r} must be a non-negative integer", field="max_recreations",
                             source="simulation config")
        if self.horizon is not None and not self.horizon > 0:
            raise InputError(f"{self.horizon!r} must be a positive number of seconds", field="horizon", source="simulation config")


@dataclass
class RunResult:
    """What happened in one run: counts, per-pod facts and time series (see :mod:`toposched.sim.metrics`)."""

    scheduler: str
    nodes: int
    arrived: int = 0
    decisions: int = 0
    bound: int = 0
    scheduled: int = 0
    rejected: Counter = field(default_factory=Counter)  # reason -> pods the node refused
    recreated: int = 0
    abandoned: int = 0  # rejected pods nobody re-creates (no owner, or the controller gave up)
    finished: int = 0
    running_end: int = 0
    pending_end: int = 0
    started: list[RunningPod] = field(default_factory=list)
    # Per workload pod that started: seconds since it arrived; per pod given up or still waiting at
    # the end: seconds until then (censored: a lower bound of its wait), counted the same for every scheduler.
    waits: list[float] = field(default_factory=list)
    censored: int = 0  # how many of ``waits`` are censored
    gpu_waits: dict[int, list[float]] = field(default_factory=dict)  # whole GPUs asked -> those pods' waits
    samples: list[dict[str, Any]] = field(default_factory=list)
    scheduler_seconds: float | None = None
    end_time: float = 0.0


@dataclass
class _Instance:
    """One pod object: the workload's pod, or a controller's re-creation of it."""

    source: SimPod
    pod: Pod
    attempt: int
    node: str | None = None


class Simulation:
    """One scheduler run over a workload on simulated nodes."""

    def __init__(self, nodes: Sequence[SimNode], pods: Sequence[SimPod], contender: Contender,
                 config: SimConfig | None = None, *, timer: Callable[[], float] | None = None,
                 check: bool = False) -> None:
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise InputError(f"node names repeat: {dupes}", field="nodes", source="simulation")
        # A pod's GPU models become a node selector, and the nodes the labels it selects on.
        self.nodes, selected = select_gpu_models(nodes, pods)
        self.pods = sorted(selected, key=lambda p: p.arrival)
        self.contender = contender
        self.config = config or SimConfig()
        self.timer = timer
        self.check = check

    def run(self, progress: Callable[[int, int], None] | None = None) -> RunResult:
        """Run to the end; ``progress(done, total)`` is called as pods arrive."""
        return _Run(self, progress).execute()


class _Run:
    def __init__(self, sim: Simulation, progress: Callable[[int, int], None] | None) -> None:
        self.sim = sim
        self.config = sim.config
        self.progress = progress
        self.truths = {n.name: NodeTruth(n) for n in sim.nodes}
        self.scheduler: Scheduler = sim.contender.build(sim.nodes, self.truths, 0.0)
        self.report_kind = sim.contender.report_kind(self.scheduler.profile.exact)
        self.reports = bool(self.report_kind)
        self.result = RunResult(sim.contender.name, len(sim.nodes))
        self.events: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self.waiting: OrderedDict[Any, deque[_Instance]] = OrderedDict()  # shape -> pods in arrival order
        self.blocked: set[Any] = set()  # shapes whose head found no node since the last change
        self.changed = False
        self.last_retry = float("-inf")
        self.running: dict[str, _Instance] = {}
        self.now = 0.0
        self.elapsed = 0.0
        self.pending_events = 0  # arrivals, departures and re-creations still in the queue
        self.delivered: dict[str, Any] = {}  # node -> the last report the scheduler was given
        self.unreported: set[str] = set()  # nodes whose state changed since their last report
        self.sample_interval = self.config.sample_interval
        self.capacity: Counter = Counter()
        for truth in self.truths.values():
            self.capacity.update({k: v for k, v in truth.allocatable.items() if k != "pods"})
        self.used: Counter = Counter()  # what running pods request, cluster-wide
        self.gpus = ClusterGPUs([self.truths[n.name] for n in sim.nodes], self._target_workload())

    def _target_workload(self):
        """The GPU pods of the workload that arrive before the horizon, as FGD's target workload."""
        horizon = self.config.horizon
        memory = min((d.memory for t in self.truths.values() for d in t.gpus.devices), default=None)
        return gpu_target_workload((p for p in self.sim.pods if horizon is None or p.arrival <= horizon),
                                   gpu_memory=memory)

    def push(self, time: float, kind: int, data: Any = None) -> None:
        self._seq += 1
        self.pending_events += kind in (_DEPART, _ARRIVE, _RETRY)
        heapq.heappush(self.events, (time, kind, self._seq, data))

    def execute(self) -> RunResult:
        for sim_pod in self.sim.pods:
            self.push(sim_pod.arrival, _ARRIVE, _Instance(sim_pod, sim_pod.pod, 0))
        total = len(self.sim.pods)
        if self.reports:
            self.push(self.config.report_interval, _REPORT)
        span = self.sim.pods[-1].arrival if self.sim.pods else 0.0
        self.sample_interval = max(self.config.sample_interval, span / MAX_SAMPLES)
        self.push(0.0, _SAMPLE)
        horizon = self.config.horizon
        while self.events:
            time = self.events[0][0]
            if horizon is not None and time > horizon:
                break
            if not self.pending_events and not (self.waiting and self.changed):
                break  # only periodic reports and samples are left, and they change nothing
            self.now = time
            while self.events and self.events[0][0] == time:
                _, kind, _, data = heapq.heappop(self.events)
                self.pending_events -= kind in (_DEPART, _ARRIVE, _RETRY)
                self._handle(kind, data)
            self._schedule_pass()
            if self.sim.check:
                self._check()
            if self.progress is not None:
                self.progress(self.result.arrived, total)
        self._sample()
        r = self.result
        r.end_time = self.now
        r.running_end = len(self.running)
        # Replacements still in their backoff when a horizon stops the run wait too.
        r.pending_end = sum(len(q) for q in self.waiting.values()) + sum(1 for e in self.events if e[1] == _RETRY)
        for line in self.waiting.values():
            for waiting in line:
                self._waited(waiting, self.now, censored=True)
        for event in self.events:
            if event[1] == _RETRY:
                self._waited(event[3], self.now, censored=True)
        r.scheduler_seconds = self.elapsed if self.sim.timer is not None else None
        return r

    # ---- events --------------------------------------------------------------------------------

    def _handle(self, kind: int, data: Any) -> None:
        if kind == _ARRIVE:
            self.result.arrived += data.attempt == 0
            self._enqueue(data)
        elif kind == _RETRY:
            self._enqueue(data)
        elif kind == _DEPART:
            self._depart(data)
        elif kind == _REPORT:
            changed, self.unreported = self.unreported, set()
            self._publish(self.truths[name] for name in sorted(changed))
            self.push(self.now + self.config.report_interval, _REPORT)
        elif kind == _SAMPLE:
            self._sample()
            self.push(self.now + self.sample_interval, _SAMPLE)

    def _enqueue(self, instance: _Instance) -> None:
        key = self.scheduler.shape(instance.pod)
        if key is None:
            key = ("pod", instance.pod.uid or instance.pod.key)
        self.waiting.setdefault(key, deque()).append(instance)

    def _depart(self, instance: _Instance) -> None:
        uid = instance.pod.uid or instance.pod.key
        if self.running.pop(uid, None) is None:
            return
        truth = self.truths[instance.node]
        truth.release(uid)
        self.used.subtract(instance.pod.effective_requests())
        self.unreported.add(instance.node)
        self.scheduler.cluster.forget(instance.pod, self.now)
        self.result.finished += 1
        self.changed = True
        if self.config.report_on_events and self.reports:
            self._publish([truth])

    def _publish(self, truths) -> None:
        """Deliver the reports that changed since the scheduler last got them."""
        cluster = self.scheduler.cluster
        for truth in truths:
            nrt = node_report_of(truth, self.report_kind)
            if self.delivered.get(truth.node.name) is not nrt:
                self.delivered[truth.node.name] = nrt
                cluster.update_report(nrt, self.now)
                self.changed = True

    # ---- scheduling ----------------------------------------------------------------------------

    def _schedule_pass(self) -> None:
        retry = self.changed and self.now - self.last_retry >= self.config.retry_interval
        if retry:
            self.blocked.clear()
            self.changed = False
            self.last_retry = self.now
        for key in list(self.waiting):
            if key in self.blocked:
                continue
            line = self.waiting[key]
            while line:
                if not self._try(line[0]):
                    self.blocked.add(key)
                    break
                line.popleft()
            if not line:
                del self.waiting[key]
                self.blocked.discard(key)

    def _try(self, instance: _Instance) -> bool:
        """One scheduling cycle for the pod; False when it found no node (it keeps waiting)."""
        pod = instance.pod
        start = self.sim.timer() if self.sim.timer is not None else 0.0
        decision = self.scheduler.schedule(pod, self.now)
        if self.sim.timer is not None:
            self.elapsed += self.sim.timer() - start
        self.result.decisions += 1
        if decision.node is None:
            return False
        self.result.bound += 1
        truth = self.truths[decision.node]
        outcome = truth.admit(pod, decision.placement, self.now)
        if not outcome.admitted:
            self.result.rejected[outcome.reason] += 1
            self.scheduler.unreserve(pod)  # the failed pod is deleted; the scheduler forgets it
            self._recreate(instance)
            return True
        self.scheduler.bound(pod, self.now)
        self.used.update(pod.effective_requests())
        self.unreported.add(decision.node)
        instance.node = decision.node
        self.running[pod.uid or pod.key] = instance
        self.result.scheduled += 1
        self.result.started.append(outcome.running)
        self._waited(instance, self.now)
        if instance.source.duration is not None:
            self.push(self.now + instance.source.duration, _DEPART, instance)
        if self.config.report_on_events and self.reports:
            self._publish([truth])
        return True

    def _waited(self, instance: _Instance, until: float, *, censored: bool = False) -> None:
        """Record how long a workload pod waited: until it started, or (censored) until it was given up or the run ended."""
        wait = until - instance.source.arrival
        self.result.waits.append(wait)
        self.result.censored += censored
        gpus = instance.source.pod.effective_requests().get(NVIDIA_GPU, 0)
        if gpus:
            self.result.gpu_waits.setdefault(gpus, []).append(wait)

    def _recreate(self, instance: _Instance) -> None:
        limit = self.config.max_recreations
        if instance.source.owner is None or (limit is not None and instance.attempt >= limit):
            self.result.abandoned += 1
            self._waited(instance, self.now, censored=True)
            return
        attempt = instance.attempt + 1
        base = instance.source.pod
        pod = dataclasses.replace(base, name=f"{base.name}-{attempt}", uid=f"{base.uid or base.key}-{attempt}")
        # The exponent is capped: the delay reached max_backoff long before, and 2.0 ** 1024 overflows.
        delay = min(self.config.max_backoff, self.config.backoff * 2.0 ** min(attempt - 1, 60))
        self.result.recreated += 1
        self.push(self.now + delay, _RETRY, _Instance(instance.source, pod, attempt))

    # ---- observation ---------------------------------------------------------------------------

    def _sample(self) -> None:
        capacity, used = self.capacity, self.used
        gpu_allocated, fragmented = self.gpus.measure()
        self.result.samples.append({
            "time": self.now,
            "allocated": {k: used.get(k, 0) / capacity[k] for k in sorted(capacity) if capacity[k]},
            "gpu": gpu_allocated / self.gpus.capacity if self.gpus.capacity else 0.0,
            "gpu_fragmentation": None if fragmented is None else fragmented / MILLI,
            "running": len(self.running),
            "pending": sum(len(q) for q in self.waiting.values()),
            "rejected": sum(self.result.rejected.values()),
        })

    def _check(self) -> None:
        """Conservation, checked after every instant when asked: nothing over capacity, no CPU owned twice."""
        for name, truth in self.truths.items():
            for resource, value in truth.requested.items():
                if value > truth.allocatable.get(resource, value):
                    raise AssertionError(f"node {name}: {resource} requested {value} > allocatable {truth.allocatable[resource]}")
            seen: set[int] = set()
            for running in truth.pods.values():
                overlap = seen.intersection(running.cpus)
                if overlap:
                    raise AssertionError(f"node {name}: CPUs {sorted(overlap)} owned twice")
                seen.update(running.cpus)
