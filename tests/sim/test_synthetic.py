"""The seeded synthetic workload (toposched.sim.synthetic): determinism, validity, the ramp, saturation.

Shared-GPU pods are read back through Koordinator's request rules as toposched.devices.share
implements them (koordinator-sh/koordinator, pkg/scheduler/plugins/deviceshare/utils.go):
``gpu-core`` < 100 with an equal ``gpu-memory-ratio`` is one shared GPU.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.devices.share import GPU_CORE, GPU_MEMORY_RATIO, NVIDIA_GPU, pod_gpu_request
from toposched.errors import InputError
from toposched.kubelet import KubeletNode
from toposched.scheduler.intent import DEVICE_SCOPE_ANNOTATION, NUMA_POLICY_ANNOTATION
from toposched.sim.hardware import cluster_from_dict
from toposched.sim.model import SimPod
from toposched.sim.synthetic import (
    KIND_BEST_EFFORT,
    KIND_BURSTABLE,
    KIND_INFERENCE,
    KIND_LATENCY,
    KIND_TRAINING,
    POD_KINDS,
    RDMA_HCA,
    SyntheticConfig,
    expected_demand,
    generate_workload,
    ramp_past_saturation,
    saturation_rate,
)
from toposched.workload import BEST_EFFORT, BURSTABLE, GUARANTEED

GI = 2**30


def canonical(pods: list[SimPod]) -> list[tuple]:
    return [(p.pod, p.arrival, p.duration, p.owner, p.gpu_models) for p in pods]


def kind_of(pod: SimPod) -> str:
    return pod.pod.name.rsplit("-", 1)[0]


def check_valid(pods: list[SimPod], config: SyntheticConfig) -> None:
    """Every pod is what its kind promises, with valid quantities; arrivals sorted after the start."""
    assert len(pods) == config.pods
    assert len({p.pod.name for p in pods}) == len(pods)
    arrivals = [p.arrival for p in pods]
    assert arrivals == sorted(arrivals)
    assert all(a >= config.start for a in arrivals)
    for p in pods:
        kind = kind_of(p)
        assert kind in config.kinds
        assert p.owner is not None and p.owner.startswith(f"{kind}-")
        assert int(p.owner.rsplit("-", 1)[1]) < config.controllers
        assert p.duration is not None and p.duration > 0 and math.isfinite(p.duration)
        requests = p.pod.effective_requests()
        assert all(isinstance(v, int) and v >= 0 for v in requests.values())
        if kind == KIND_LATENCY:
            assert p.pod.qos_class == GUARANTEED
            assert requests["cpu"] % 1000 == 0 and requests["cpu"] > 0
            assert p.pod.annotations[NUMA_POLICY_ANNOTATION] == "single-numa-node"
        elif kind == KIND_TRAINING:
            assert p.pod.qos_class == GUARANTEED
            assert 1 <= requests[NVIDIA_GPU] <= 8 and requests[RDMA_HCA] >= 1
            assert requests["cpu"] == requests[NVIDIA_GPU] * config.training_cpus_per_gpu * 1000
        elif kind == KIND_INFERENCE:
            assert p.pod.qos_class == BURSTABLE
            assert 0 < requests[GPU_CORE] < 100 and requests[GPU_MEMORY_RATIO] == requests[GPU_CORE]
            request = pod_gpu_request(p.pod)
            assert request is not None and request.shared and request.count == 1
            assert request.milli_on(None) == requests[GPU_CORE] * 10
        elif kind == KIND_BURSTABLE:
            assert p.pod.qos_class == BURSTABLE
        else:
            assert p.pod.qos_class == BEST_EFFORT and not requests


def test_same_seed_same_pods_other_seed_other_pods() -> None:
    config = SyntheticConfig(pods=400)
    first = generate_workload(config, seed=7)
    assert canonical(first) == canonical(generate_workload(config, seed=7))
    assert canonical(first) == canonical(generate_workload(replace(config), seed=7))
    assert canonical(first) != canonical(generate_workload(config, seed=8))
    check_valid(first, config)


def test_default_mix_and_owners() -> None:
    config = SyntheticConfig()
    pods = generate_workload(config, seed=1)
    check_valid(pods, config)
    share = Counter(kind_of(p) for p in pods)
    total = sum(config.mix.values())
    for kind in POD_KINDS:
        assert abs(share[kind] / len(pods) - config.mix[kind] / total) < 0.03
    owners = {p.owner for p in pods}
    assert len(owners) == len(POD_KINDS) * config.controllers
    assert all(p.pod.labels["app"] == p.owner for p in pods)
    training = [p for p in pods if kind_of(p) == KIND_TRAINING]
    assert all(p.pod.annotations[DEVICE_SCOPE_ANNOTATION] == "pcie:preferred" for p in training)
    with_pages = sum(1 for p in pods if "hugepages-1Gi" in p.pod.effective_requests())
    latency = share[KIND_LATENCY]
    assert abs(with_pages / latency - config.latency_hugepages_fraction) < 0.05


def test_arrival_rate_ramps() -> None:
    config = SyntheticConfig(pods=4000, rate_start=1.0, rate_end=10.0)
    arrivals = [p.arrival for p in generate_workload(config, seed=3)]
    gaps = [arrivals[0]] + [b - a for a, b in pairwise(arrivals)]
    rates = [1.0 + 9.0 * i / 3999 for i in range(4000)]
    # Each gap is exponential at its pod's rate: gap x rate is Exp(1), of mean 1 (std 1/sqrt(4000)).
    assert abs(sum(g * r for g, r in zip(gaps, rates)) / 4000 - 1) < 0.06
    assert sum(gaps[:400]) > 5 * sum(gaps[-400:])


@settings(max_examples=25, deadline=None)
@given(
    pods=st.integers(0, 120),
    rate_start=st.floats(0.01, 50),
    rate_end=st.floats(0.01, 50),
    start=st.floats(0, 1e6),
    weights=st.lists(st.integers(0, 5), min_size=len(POD_KINDS), max_size=len(POD_KINDS)).filter(any),
    controllers=st.integers(1, 6),
    sigma=st.floats(0, 2.5),
    seed=st.integers(0, 2**32),
)
def test_any_valid_config_gives_valid_sorted_pods(pods: int, rate_start: float, rate_end: float, start: float,
                                                  weights: list[int], controllers: int, sigma: float, seed: int) -> None:
    config = SyntheticConfig(pods=pods, rate_start=rate_start, rate_end=rate_end, start=start,
                             mix=dict(zip(POD_KINDS, weights)), controllers=controllers, duration_sigma=sigma)
    generated = generate_workload(config, seed=seed)
    check_valid(generated, config)
    assert canonical(generated) == canonical(generate_workload(config, seed=seed))


def test_expected_demand_matches_the_generated_pods() -> None:
    config = SyntheticConfig(pods=8000)
    pods = generate_workload(config, seed=11)
    empirical = dict.fromkeys(("cpu", "memory", NVIDIA_GPU), 0.0)
    for p in pods:
        requests = p.pod.effective_requests()
        gpus = requests.get(NVIDIA_GPU, 0) + requests.get(GPU_CORE, 0) / 100
        for resource, value in (("cpu", requests.get("cpu", 0)), ("memory", requests.get("memory", 0)),
                                (NVIDIA_GPU, gpus)):
            empirical[resource] += value * p.duration / len(pods)
    expected = expected_demand(config)
    for resource, value in expected.items():
        assert abs(empirical[resource] / value - 1) < 0.12, resource


def test_saturation_rate_is_littles_law_on_the_binding_resource() -> None:
    nodes = cluster_from_dict({"nodes": [{"profile": "intel-snc", "count": 10}]})
    config = SyntheticConfig(mix={KIND_LATENCY: 1})
    allocatable = KubeletNode(nodes[0].machine, nodes[0].kubelet).allocatable
    demand = expected_demand(config)
    want = min(10 * allocatable["cpu"] / demand["cpu"], 10 * allocatable["memory"] / demand["memory"])
    assert saturation_rate(config, nodes) == pytest.approx(want)
    ramped = ramp_past_saturation(config, nodes, start=0.5, end=2.0)
    assert ramped.rate_start == pytest.approx(want / 2) and ramped.rate_end == pytest.approx(2 * want)
    assert replace(ramped, rate_start=config.rate_start, rate_end=config.rate_end) == config


def test_gpu_pods_saturate_on_gpus_and_need_gpu_nodes() -> None:
    nodes = cluster_from_dict({"nodes": [{"profile": "gpu-8x", "count": 2}, {"profile": "epyc-8numa", "count": 2}]})
    config = SyntheticConfig(mix={KIND_TRAINING: 1, KIND_INFERENCE: 1})
    assert saturation_rate(config, nodes) == pytest.approx(16 / expected_demand(config)[NVIDIA_GPU])
    cpu_only = cluster_from_dict({"nodes": [{"profile": "vm-2numa"}]})
    with pytest.raises(InputError, match="none of the resources"):
        saturation_rate(SyntheticConfig(mix={KIND_BEST_EFFORT: 1}), cpu_only)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"pods": -1}, "pods"),
        ({"pods": 2.5}, "pods"),
        ({"rate_start": 0}, "rate_start"),
        ({"rate_end": float("inf")}, "rate_end"),
        ({"mix": {"gaming": 1}}, "mix"),
        ({"mix": {KIND_LATENCY: 0}}, "mix"),
        ({"mix": {KIND_LATENCY: -1, KIND_BURSTABLE: 1}}, "mix.latency"),
        ({"duration_median": {KIND_LATENCY: 10}}, "duration_median"),
        ({"controllers": 0}, "controllers"),
        ({"latency_cpus_table": ()}, "latency_cpus_table"),
        ({"latency_cpus_table": ((0, 1),)}, "latency_cpus_table"),
        ({"training_gpus_table": ((2, 0),)}, "training_gpus_table"),
        ({"inference_gpu_percent_table": ((100, 1),)}, "inference_gpu_percent_table"),
        ({"latency_hugepages_fraction": 1.5}, "latency_hugepages_fraction"),
        ({"duration_sigma": -0.1}, "duration_sigma"),
    ],
)
def test_bad_configuration_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        SyntheticConfig(**kwargs)
    assert err.value.field == field
    assert err.value.source == "synthetic workload"


def test_default_config_is_the_documented_one() -> None:
    config = SyntheticConfig()
    assert config.pods == 3000 and config.kinds == POD_KINDS
    assert dict(config.mix) == {KIND_LATENCY: 35, KIND_TRAINING: 8, KIND_INFERENCE: 17, KIND_BURSTABLE: 25,
                                KIND_BEST_EFFORT: 15}
    assert generate_workload(SyntheticConfig(pods=0)) == []
