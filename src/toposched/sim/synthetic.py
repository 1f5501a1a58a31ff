"""A seeded synthetic workload: a mix of pod kinds arriving faster and faster.

Five kinds of pod (:data:`POD_KINDS`), each owned by one of a few controllers per kind:

* ``latency``: Guaranteed, whole CPUs, ``toposched.io/numa-policy: single-numa-node``, some
  with 1 GiB hugepages -- the pods a topology-blind scheduler gets rejected at the kubelet;
* ``training``: Guaranteed, 1-8 whole GPUs (``nvidia.com/gpu``) with CPUs, memory and RDMA
  HCAs (``rdma/hca``) in proportion, preferring GPUs and HCAs under one PCIe switch;
* ``inference``: Burstable, a share of one GPU as Koordinator's ``koordinator.sh/gpu-core``
  (< 100) with the same ``koordinator.sh/gpu-memory-ratio``;
* ``burstable``: CPU and memory requests with limits twice as large;
* ``besteffort``: no requests at all.

GPU pods (``training`` and ``inference``) tolerate the taint ``nvidia.com/gpu:NoSchedule`` that GPU
node pools commonly carry to keep other pods off their CPUs (Kubernetes' ExtendedResourceToleration
admission plugin adds that toleration to pods asking for ``nvidia.com/gpu``; share pods are given it
the same way).

Arrivals are a Poisson process whose rate ramps linearly, pod by pod, from ``rate_start`` to
``rate_end`` (:func:`ramp_past_saturation` sets them around a cluster's saturation rate); run
times are lognormal around a per-kind median. Everything is drawn from one
``random.Random(seed)``: the same configuration and seed give the same pods.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from toposched.devices.share import GPU_CORE, GPU_MEMORY_RATIO, NVIDIA_GPU
from toposched.errors import InputError
from toposched.kubelet import KubeletNode
from toposched.names import RDMA_HCA
from toposched.scheduler.intent import DEVICE_SCOPE_ANNOTATION, NUMA_POLICY_ANNOTATION
from toposched.sim.limits import MAX_HORIZON, MAX_SIM_PODS
from toposched.sim.model import SimNode, SimPod
from toposched.workload import Container, Pod, Toleration

__all__ = [
    "KIND_BEST_EFFORT",
    "KIND_BURSTABLE",
    "KIND_INFERENCE",
    "KIND_LATENCY",
    "KIND_TRAINING",
    "GPU_TOLERATION",
    "POD_KINDS",
    "RDMA_HCA",
    "SyntheticConfig",
    "expected_demand",
    "generate_workload",
    "ramp_past_saturation",
    "saturation_rate",
]

KIND_LATENCY = "latency"
KIND_TRAINING = "training"
KIND_INFERENCE = "inference"
KIND_BURSTABLE = "burstable"
KIND_BEST_EFFORT = "besteffort"
POD_KINDS = (KIND_LATENCY, KIND_TRAINING, KIND_INFERENCE, KIND_BURSTABLE, KIND_BEST_EFFORT)
#: The toleration of GPU pods: GPU nodes tainted ``nvidia.com/gpu:NoSchedule`` take only pods that have it.
GPU_TOLERATION = Toleration(NVIDIA_GPU, "Exists", effect="NoSchedule")

_SOURCE = "synthetic workload"
_GIB = 2**30
_MIB = 2**20
_HUGEPAGES_1GI = "hugepages-1Gi"
# Resources whose expected demand decides saturation; GPU shares count as fractions of a GPU.
_SATURATING = ("cpu", "memory", NVIDIA_GPU)

Table = tuple[tuple[int, float], ...]  # (value, weight) pairs


def _frozen(mapping: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class SyntheticConfig:
    """What to generate; every field has a documented default (docs/sim/inputs.md).

    ``*_table`` fields are ``((value, weight), ...)``: a value is drawn with probability
    proportional to its weight. Memory is in GiB or MiB as the field name says, CPU in whole
    CPUs or millicores likewise. Construction checks every field and raises InputError naming it.
    """

    pods: int = 3000
    rate_start: float = 0.5  # pods per second at the first arrival
    rate_end: float = 5.0  # pods per second at the last arrival
    start: float = 0.0  # simulated time the arrivals count from
    mix: Mapping[str, float] = field(default_factory=lambda: _frozen({
        KIND_LATENCY: 35, KIND_TRAINING: 8, KIND_INFERENCE: 17, KIND_BURSTABLE: 25, KIND_BEST_EFFORT: 15}))
    duration_median: Mapping[str, float] = field(default_factory=lambda: _frozen({
        KIND_LATENCY: 900, KIND_TRAINING: 3600, KIND_INFERENCE: 1800, KIND_BURSTABLE: 600, KIND_BEST_EFFORT: 300}))
    duration_sigma: float = 1.0  # of the run time's logarithm
    controllers: int = 4  # owners per kind
    namespace: str = "default"
    latency_cpus_table: Table = ((1, 25), (2, 30), (4, 25), (8, 15), (16, 5))
    latency_memory_per_cpu_gib_table: Table = ((2, 50), (4, 50))
    latency_hugepages_fraction: float = 0.2  # of latency pods that also ask 1 GiB hugepages
    latency_hugepages_gib_table: Table = ((1, 40), (2, 40), (4, 20))
    training_gpus_table: Table = ((1, 35), (2, 30), (4, 20), (8, 15))
    training_cpus_per_gpu: int = 12  # 8 GPUs then ask more CPUs than one NUMA node of gpu-8x holds
    training_memory_per_gpu_gib: int = 64
    training_gpus_per_hca: int = 2
    training_device_scope: str = "pcie:preferred"  # the toposched.io/device-scope annotation; "" for none
    inference_gpu_percent_table: Table = ((10, 20), (20, 25), (25, 25), (50, 30))
    inference_cpu_millis_table: Table = ((1000, 40), (2000, 40), (4000, 20))
    inference_memory_gib_table: Table = ((4, 50), (8, 35), (16, 15))
    burstable_cpu_millis_table: Table = ((250, 30), (500, 35), (1000, 25), (2000, 10))
    burstable_memory_mib_table: Table = ((256, 25), (512, 35), (1024, 25), (4096, 15))

    def __post_init__(self) -> None:
        try:
            self._check()
        except InputError as err:
            raise err.with_source(_SOURCE) from None
        for name in ("mix", "duration_median"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        for f in self.__dataclass_fields__:
            if f.endswith("_table"):
                object.__setattr__(self, f, tuple((v, w) for v, w in getattr(self, f)))

    def _check(self) -> None:
        _int_at_least(self.pods, 0, "pods")
        _at_most(self.pods, MAX_SIM_PODS, "pods")
        _int_at_least(self.controllers, 1, "controllers")
        _at_most(self.controllers, _MAX_CONTROLLERS, "controllers")
        for name in ("training_cpus_per_gpu", "training_memory_per_gpu_gib", "training_gpus_per_hca"):
            _int_at_least(getattr(self, name), 1, name)
            _at_most(getattr(self, name), _MAX_TABLE_VALUE, name)
        for name in ("rate_start", "rate_end"):
            _positive(getattr(self, name), name)
            if not _MIN_RATE <= getattr(self, name) <= _MAX_RATE:
                raise InputError(f"{getattr(self, name)!r} pods/s is out of range [{_MIN_RATE:g}, {_MAX_RATE:g}] "
                                 "(the limit)", field=name)
        _non_negative(self.start, "start")
        _at_most(self.start, MAX_HORIZON, "start")
        _non_negative(self.duration_sigma, "duration_sigma")
        _at_most(self.duration_sigma, _MAX_SIGMA, "duration_sigma")
        if not isinstance(self.namespace, str):
            raise InputError(f"{self.namespace!r:.40} is not a string", field="namespace")
        for name in ("latency_hugepages_fraction",):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise InputError(f"{value!r} is not a fraction in [0, 1]", field=name)
        unknown = sorted(set(self.mix) - set(POD_KINDS))
        if unknown:
            raise InputError(f"unknown pod kinds {unknown}; known: {', '.join(POD_KINDS)}", field="mix")
        for kind, weight in self.mix.items():
            _non_negative(weight, f"mix.{kind}")
            _at_most(weight, _MAX_WEIGHT, f"mix.{kind}")
        if not sum(self.mix.values()) > 0:
            raise InputError("the weights add up to 0: no pod kind can be drawn", field="mix")
        for kind in self.kinds:
            if kind not in self.duration_median:
                raise InputError(f"no median run time for {kind} pods", field="duration_median")
            _positive(self.duration_median[kind], f"duration_median.{kind}")
            _at_most(self.duration_median[kind], MAX_HORIZON, f"duration_median.{kind}")
        for name in self.__dataclass_fields__:
            if name.endswith("_table"):
                _check_table(getattr(self, name), name)
        for percent, _ in self.inference_gpu_percent_table:
            if not 1 <= percent <= 99:
                raise InputError(f"{percent} is not a share of one GPU (1-99 percent)", field="inference_gpu_percent_table")
        if not isinstance(self.training_device_scope, str):
            raise InputError(f"{self.training_device_scope!r} is not a string", field="training_device_scope")

    @property
    def kinds(self) -> tuple[str, ...]:
        """The pod kinds with a positive weight, in :data:`POD_KINDS` order."""
        return tuple(k for k in POD_KINDS if self.mix.get(k, 0) > 0)


def generate_workload(config: SyntheticConfig | None = None, *, seed: int = 0) -> list[SimPod]:
    """``config.pods`` pods sorted by arrival, drawn from ``random.Random(seed)``.

    Pods are named ``<kind>-<index>`` (index in arrival order, zero-padded), their uid the
    name; owners are ``<kind>-<j>`` for ``j < config.controllers``. Deterministic: equal
    configurations and seeds give equal lists.
    """
    config = config or SyntheticConfig()
    rnd = random.Random(seed)
    kinds = config.kinds
    weights = [config.mix[k] for k in kinds]
    width = max(5, len(str(max(config.pods - 1, 0))))
    span = max(config.pods - 1, 1)
    now = config.start
    out = []
    for i in range(config.pods):
        rate = config.rate_start + (config.rate_end - config.rate_start) * i / span
        now += rnd.expovariate(rate)
        kind = rnd.choices(kinds, weights)[0]
        owner = f"{kind}-{rnd.randrange(config.controllers)}"
        containers, annotations = _shape(kind, config, rnd)
        duration = rnd.lognormvariate(math.log(config.duration_median[kind]), config.duration_sigma)
        name = f"{kind}-{i:0{width}d}"
        tolerations = (GPU_TOLERATION,) if kind in (KIND_TRAINING, KIND_INFERENCE) else ()
        pod = Pod(name, namespace=config.namespace, uid=name, containers=containers, annotations=annotations,
                  labels={"app": owner}, tolerations=tolerations)
        out.append(SimPod(pod, now, duration, owner=owner))
    return out


def _draw(table: Table, rnd: random.Random) -> int:
    return rnd.choices([v for v, _ in table], [w for _, w in table])[0]


def _shape(kind: str, config: SyntheticConfig, rnd: random.Random) -> tuple[tuple[Container, ...], dict[str, str]]:
    """One pod's containers and annotations for its kind."""
    if kind == KIND_LATENCY:
        cpus = _draw(config.latency_cpus_table, rnd)
        limits = {"cpu": cpus * 1000, "memory": cpus * _draw(config.latency_memory_per_cpu_gib_table, rnd) * _GIB}
        if rnd.random() < config.latency_hugepages_fraction:
            limits[_HUGEPAGES_1GI] = _draw(config.latency_hugepages_gib_table, rnd) * _GIB
        return (Container("main", limits=limits),), {NUMA_POLICY_ANNOTATION: "single-numa-node"}
    if kind == KIND_TRAINING:
        gpus = _draw(config.training_gpus_table, rnd)
        limits = {
            "cpu": gpus * config.training_cpus_per_gpu * 1000,
            "memory": gpus * config.training_memory_per_gpu_gib * _GIB,
            NVIDIA_GPU: gpus,
            RDMA_HCA: -(-gpus // config.training_gpus_per_hca),
        }
        scope = {DEVICE_SCOPE_ANNOTATION: config.training_device_scope} if config.training_device_scope else {}
        return (Container("main", limits=limits),), scope
    if kind == KIND_INFERENCE:
        percent = _draw(config.inference_gpu_percent_table, rnd)
        cpu = _draw(config.inference_cpu_millis_table, rnd)
        memory = _draw(config.inference_memory_gib_table, rnd) * _GIB
        container = Container("main", requests={"cpu": cpu, "memory": memory},
                              limits={"cpu": 2 * cpu, "memory": memory, GPU_CORE: percent, GPU_MEMORY_RATIO: percent})
        return (container,), {}
    if kind == KIND_BURSTABLE:
        cpu = _draw(config.burstable_cpu_millis_table, rnd)
        memory = _draw(config.burstable_memory_mib_table, rnd) * _MIB
        return (Container("main", requests={"cpu": cpu, "memory": memory},
                          limits={"cpu": 2 * cpu, "memory": 2 * memory}),), {}
    return (Container("main"),), {}


# ---- load relative to a cluster ------------------------------------------------------------------


def expected_demand(config: SyntheticConfig) -> dict[str, float]:
    """Expected resource-seconds one generated pod asks for, per resource (cpu in millicore-seconds,
    memory in byte-seconds, ``nvidia.com/gpu`` in GPU-seconds with shares as fractions).

    Exact expectations of the configured tables and lognormal run times (mean = median x
    exp(sigma^2 / 2)), weighted by the mix.
    """
    total_weight = sum(config.mix[k] for k in config.kinds)
    stretch = math.exp(config.duration_sigma ** 2 / 2)
    out = dict.fromkeys(_SATURATING, 0.0)
    for kind in config.kinds:
        share = config.mix[kind] / total_weight * config.duration_median[kind] * stretch
        for resource, value in _mean_request(kind, config).items():
            out[resource] += share * value
    return out


def _mean(table: Table) -> float:
    return sum(v * w for v, w in table) / sum(w for _, w in table)


def _mean_request(kind: str, config: SyntheticConfig) -> dict[str, float]:
    if kind == KIND_LATENCY:
        cpus = _mean(config.latency_cpus_table)
        return {"cpu": cpus * 1000, "memory": cpus * _mean(config.latency_memory_per_cpu_gib_table) * _GIB}
    if kind == KIND_TRAINING:
        gpus = _mean(config.training_gpus_table)
        return {"cpu": gpus * config.training_cpus_per_gpu * 1000,
                "memory": gpus * config.training_memory_per_gpu_gib * _GIB, NVIDIA_GPU: gpus}
    if kind == KIND_INFERENCE:
        return {"cpu": _mean(config.inference_cpu_millis_table), "memory": _mean(config.inference_memory_gib_table) * _GIB,
                NVIDIA_GPU: _mean(config.inference_gpu_percent_table) / 100}
    if kind == KIND_BURSTABLE:
        return {"cpu": _mean(config.burstable_cpu_millis_table), "memory": _mean(config.burstable_memory_mib_table) * _MIB}
    return {}


def saturation_rate(config: SyntheticConfig, nodes: Sequence[SimNode]) -> float:
    """The arrival rate (pods/s) at which the cluster's binding resource is fully asked for.

    By Little's law, pods arriving at rate r keep r x E[request x run time] of each resource
    asked; the saturation rate is the smallest capacity / E[request x run time] over CPU,
    memory and GPUs, capacity being the nodes' allocatable as their kubelets compute it.
    Resources the cluster lacks are skipped (pods asking them never run). InputError when no
    resource the mix asks for exists in the cluster.
    """
    capacity = dict.fromkeys(_SATURATING, 0)
    seen: dict[tuple[int, int, int], Mapping[str, int]] = {}
    for node in nodes:
        key = (id(node.machine), id(node.kubelet), id(node.device_plugins))
        if key not in seen:
            plugins = {r: list(d) for r, d in (node.device_plugins or {}).items()}
            seen[key] = KubeletNode(node.machine, node.kubelet, device_plugins=plugins).allocatable
        for resource in _SATURATING:
            capacity[resource] += seen[key].get(resource, 0)
    demand = expected_demand(config)
    rates = [capacity[r] / demand[r] for r in _SATURATING if demand[r] > 0 and capacity[r] > 0]
    if not rates:
        raise InputError("the cluster has none of the resources the workload asks for", field="nodes", source=_SOURCE)
    return min(rates)


def ramp_past_saturation(config: SyntheticConfig, nodes: Sequence[SimNode], *, start: float = 0.5,
                         end: float = 2.0) -> SyntheticConfig:
    """``config`` with its arrival rate ramping from ``start`` to ``end`` times the cluster's saturation rate."""
    for name, value in (("ramp.start", start), ("ramp.end", end)):
        _positive(value, name)
        _at_most(value, _MAX_RAMP, name)
    rate = saturation_rate(config, nodes)
    return replace(config, rate_start=start * rate, rate_end=end * rate)


# ---- checks --------------------------------------------------------------------------------------


# Bounds on the generator's parameters (with toposched.sim.limits): far above any sensible
# setting, low enough that a draw never overflows or runs away.
_MAX_CONTROLLERS = 100_000
_MAX_TABLE_VALUE = 1_000_000
_MAX_WEIGHT = 1e9
_MIN_RATE, _MAX_RATE = 1e-3, 1e5  # pods per second
_MAX_RAMP = 100.0  # multiples of the saturation rate
_MAX_SIGMA = 10.0  # of a log-normal run time: e^(10*4) is already beyond any horizon


def _at_most(value: Any, high: float, name: str) -> None:
    if value > high:
        raise InputError(f"{value!r:.40} is above {high:,g} (the limit)", field=name)


def _int_at_least(value: Any, low: int, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"{value!r} is not an integer of at least {low}", field=name)


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{value!r} is not a finite number", field=name)
    return float(value)


def _positive(value: Any, name: str) -> None:
    if _number(value, name) <= 0:
        raise InputError(f"{value!r} is not positive", field=name)


def _non_negative(value: Any, name: str) -> None:
    if _number(value, name) < 0:
        raise InputError(f"{value!r} is negative", field=name)


def _check_table(table: Any, name: str) -> None:
    if not isinstance(table, Sequence) or not table:
        raise InputError("expected a non-empty sequence of (value, weight) pairs", field=name)
    for entry in table:
        if not isinstance(entry, Sequence) or len(entry) != 2:
            raise InputError(f"{entry!r} is not a (value, weight) pair", field=name)
        _int_at_least(entry[0], 1, name)
        _at_most(entry[0], _MAX_TABLE_VALUE, name)
        _non_negative(entry[1], name)
        _at_most(entry[1], _MAX_WEIGHT, name)
    if not sum(w for _, w in table) > 0:
        raise InputError("the weights add up to 0", field=name)
