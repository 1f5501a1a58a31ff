"""Our workload file format (toposched.sim.workload_file): reading, errors, and round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_path
from toposched.errors import InputError
from toposched.sim.hardware import KNOWN_GPU_MODELS
from toposched.sim.model import SimPod
from toposched.sim.synthetic import SyntheticConfig, generate_workload
from toposched.sim.traces import read_alibaba_pods
from toposched.sim.workload_file import (
    dump_workload,
    read_workload,
    workload_from_dict,
    workload_to_dict,
    write_workload,
)
from toposched.workload import BURSTABLE, GUARANTEED, Container, Pod, Toleration

GI = 2**30
MI = 2**20

EXAMPLE = """\
pods:
  - name: web
    count: 3
    arrival: 10
    interval: 5
    duration: 600
    requests: {cpu: "2", memory: 4Gi}
    limits: {cpu: "2", memory: 4Gi}
    annotations: {toposched.io/numa-policy: single-numa-node}
  - name: batch
    arrival: 0
    requests: {cpu: 500m, memory: 512Mi}
  - name: train
    namespace: ml
    arrival: 12.5
    owner: job/train
    gpuModels: [A100]
    containers:
      - name: trainer
        resources:
          limits: {cpu: 16, memory: 128Gi, nvidia.com/gpu: 2, rdma/hca: 1}
    initContainers:
      - {name: fetch, resources: {requests: {cpu: "1"}}}
      - {name: proxy, restartPolicy: Always, resources: {requests: {cpu: 100m}}}
    tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
    nodeSelector: {toposched.io/gpu-model: A100}
    priority: 100
"""


def canonical(pods: list[SimPod]) -> list[tuple]:
    return [(p.pod, p.arrival, p.duration, p.owner, p.gpu_models) for p in pods]


def test_read_example(tmp_path: Path) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(EXAMPLE)
    pods = read_workload(path)
    assert [p.pod.name for p in pods] == ["batch", "web-0001", "train", "web-0002", "web-0003"]
    batch, web1, train, web2, web3 = pods
    assert (batch.arrival, batch.duration, batch.owner) == (0.0, None, None)
    assert batch.pod.qos_class == BURSTABLE and batch.pod.effective_requests() == {"cpu": 500, "memory": 512 * MI}
    assert [w.arrival for w in (web1, web2, web3)] == [10.0, 15.0, 20.0]
    assert all(w.owner == "web" and w.duration == 600.0 and w.pod.qos_class == GUARANTEED for w in (web1, web2, web3))
    assert web1.pod.uid == "web-0001" and web1.pod.containers[0].name == "main"
    assert web1.pod.annotations == {"toposched.io/numa-policy": "single-numa-node"}
    assert train.pod.key == "ml/train" and train.owner == "job/train" and train.gpu_models == ("A100",)
    assert train.pod.qos_class == BURSTABLE  # the init containers ask CPU without limits
    assert train.pod.effective_requests()["nvidia.com/gpu"] == 2
    assert [c.name for c in train.pod.init_containers] == ["fetch", "proxy"]
    assert train.pod.init_containers[1].is_sidecar
    assert train.pod.tolerations == (Toleration("gpu", "Exists", "", "NoSchedule"),)
    assert train.pod.priority == 100 and train.pod.node_selector == {"toposched.io/gpu-model": "A100"}


def test_round_trip_of_the_example_and_json(tmp_path: Path) -> None:
    pods = workload_from_dict(yaml.safe_load(EXAMPLE))
    path = tmp_path / "out.yaml"
    write_workload(pods, path)
    assert canonical(read_workload(path)) == canonical(pods)
    as_json = tmp_path / "out.json"
    as_json.write_text(json.dumps(workload_to_dict(pods)))
    assert canonical(read_workload(as_json)) == canonical(pods)


def test_round_trip_of_synthetic_pods() -> None:
    pods = generate_workload(SyntheticConfig(pods=500), seed=5)
    assert canonical(workload_from_dict(yaml.safe_load(dump_workload(pods)))) == canonical(pods)


def test_round_trip_of_trace_pods() -> None:
    pods = read_alibaba_pods(shared_path("traces", "alibaba-cluster-trace-gpu-v2023", "openb_pod_list_gpuspec33.csv"))
    sample = pods[::40]
    assert canonical(workload_from_dict(yaml.safe_load(dump_workload(sample)))) == canonical(sample)


def test_written_form_is_compact() -> None:
    pod = SimPod(Pod("web", uid="web", containers=(Container("main", limits={"cpu": 1500, "memory": 3 * GI}),)),
                 arrival=1.0)
    assert workload_to_dict([pod]) == {"pods": [{"name": "web", "arrival": 1.0,
                                                 "limits": {"cpu": "1500m", "memory": "3Gi"}}]}


_names = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12).filter(
    lambda s: s[0] != "-" and s[-1] != "-")
_OVERCOMMITTED = st.dictionaries(st.sampled_from(["cpu", "memory", "ephemeral-storage"]), st.integers(0, 2**40),
                                 max_size=3)
# Extended resources and hugepages cannot be overcommitted (the API server wants request == limit; whole pages).
_EXACT = st.dictionaries(st.sampled_from(["hugepages-2Mi", "nvidia.com/gpu", "koordinator.sh/gpu-core"]),
                         st.integers(0, 2**20), max_size=2).map(
    lambda d: {k: v * 2**21 if k.startswith("hugepages-") else v for k, v in d.items()})


@st.composite
def _container(draw: st.DrawFn, name: str, restart_policy: str | None = None) -> Container:
    """A container as the API server accepts it: requests at most the limits, exact resources given as limits."""
    requests = draw(_OVERCOMMITTED)
    limits = {k: v + draw(st.integers(0, 2**20)) for k, v in requests.items() if draw(st.booleans())}
    limits.update(draw(_EXACT))
    return Container(name, requests=requests, limits=limits, restart_policy=restart_policy)


@st.composite
def sim_pods(draw: st.DrawFn) -> list[SimPod]:
    names = draw(st.lists(_names, min_size=0, max_size=6, unique=True))
    out = []
    for name in names:
        containers = tuple(
            draw(_container(cname))
            for cname in draw(st.lists(st.sampled_from(["main", "a", "b"]), min_size=1, max_size=2, unique=True))
        )
        init = tuple(draw(_container(f"init-{i}", draw(st.sampled_from([None, "Always"]))))
                     for i in range(draw(st.integers(0, 2))))
        pod = Pod(name, namespace=draw(st.sampled_from(["default", "ml"])), uid=draw(st.sampled_from([name, "u-" + name])),
                  containers=containers, init_containers=init,
                  annotations=draw(st.dictionaries(st.sampled_from(["a", "toposched.io/numa-policy"]), _names, max_size=2)),
                  labels=draw(st.dictionaries(st.sampled_from(["app", "tier"]), _names, max_size=2)),
                  priority=draw(st.integers(-10, 10)))
        out.append(SimPod(pod, arrival=draw(st.floats(0, 1e7)), duration=draw(st.none() | st.floats(0, 1e7)),
                          owner=draw(st.none() | _names),
                          gpu_models=tuple(draw(st.lists(st.sampled_from(KNOWN_GPU_MODELS), max_size=2, unique=True)))))
    return sorted(out, key=lambda p: p.arrival)


@settings(max_examples=40, deadline=None)
@given(pods=sim_pods())
def test_round_trip_property(pods: list[SimPod]) -> None:
    assert canonical(workload_from_dict(yaml.safe_load(dump_workload(pods)))) == canonical(pods)


@pytest.mark.parametrize(
    ("entry", "field", "message"),
    [
        ({"name": "a", "colour": "red"}, "pods[0].colour", "unknown field"),
        ({"arrival": 1}, "pods[0].name", "needs a name"),
        ({"name": "a", "count": 0}, "pods[0].count", "not a positive integer"),
        ({"name": "a", "count": "2"}, "pods[0].count", "not a positive integer"),
        ({"name": "a", "arrival": -1}, "pods[0].arrival", "non-negative number"),
        ({"name": "a", "duration": "1h"}, "pods[0].duration", "non-negative number"),
        ({"name": "a", "owner": ""}, "pods[0].owner", "not a controller name"),
        ({"name": "a", "gpuModels": "T4"}, "pods[0].gpuModels", "list of GPU model"),
        ({"name": "a", "requests": {"cpu": "2x"}}, "pods[0].spec.containers[0].resources.requests.cpu", "unknown unit"),
        ({"name": "a", "requests": {"cpu": 1}, "containers": []}, "pods[0].containers", "not both"),
        ({"name": "a", "containers": [{"resources": {}}]}, "pods[0].spec.containers[0].name", "needs a name"),
    ],
)
def test_bad_entries_name_the_file_and_field(entry: dict, field: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        workload_from_dict({"pods": [entry]}, source="w.yaml")
    assert err.value.source == "w.yaml"
    assert err.value.field == field


def test_repeated_names_and_bad_documents(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="listed twice") as err:
        workload_from_dict({"pods": [{"name": "a", "count": 2}, {"name": "a-0002"}]}, source="w.yaml")
    assert err.value.field == "pods[1].name"
    with pytest.raises(InputError, match="one key, pods"):
        workload_from_dict([{"name": "a"}])
    path = tmp_path / "two.yaml"
    path.write_text("pods: []\n---\npods: []\n")
    with pytest.raises(InputError, match="one document") as err:
        read_workload(path)
    assert err.value.source == str(path)


def test_a_bound_pod_is_not_written() -> None:
    with pytest.raises(InputError, match="bound to a node"):
        dump_workload([SimPod(Pod("a", node_name="n1"), 0.0)])
