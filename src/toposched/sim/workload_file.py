"""Our own workload file: a YAML (or JSON) list of pods with arrival, run time and resources.

::

    pods:
      - name: web                  # with count > 1: web-0001, web-0002, ...
        count: 3                   # default 1
        arrival: 0                 # seconds of simulated time
        interval: 10               # seconds between the replicas' arrivals (default 0)
        duration: 600              # seconds of run time; omitted or null: runs to the end
        owner: web                 # the re-creating controller; default the name when count > 1
        requests: {cpu: "2", memory: 4Gi}
        limits: {cpu: "2", memory: 4Gi}
        annotations: {toposched.io/numa-policy: single-numa-node}

``requests``/``limits`` describe a single container named ``main``; ``containers`` (and
``initContainers``) give several, in the Kubernetes form (``name``, ``resources``,
``restartPolicy``). Also read: ``namespace``, ``uid``, ``labels``, ``priority``,
``nodeSelector``, ``tolerations``, ``schedulerName``, ``overhead`` (as in a pod spec) and
``gpuModels`` (the GPU models the pod may run on). The full format is in docs/sim/inputs.md.
:func:`dump_workload` writes pods back in this format; reading it gives equal pods.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from toposched.decoding import check_fields, expect_mapping
from toposched.errors import InputError
from toposched.manifests import decode_documents, read_text
from toposched.quantity import format_bytes, format_cpu
from toposched.sim.limits import MAX_HORIZON, MAX_SIM_PODS
from toposched.sim.model import SimPod
from toposched.workload import Container, Pod

__all__ = ["ENTRY_KEYS", "dump_workload", "read_workload", "workload_from_dict", "workload_to_dict", "write_workload"]

ENTRY_KEYS = (
    "name", "namespace", "uid", "count", "arrival", "interval", "duration", "owner", "gpuModels", "requests", "limits",
    "containers", "initContainers", "annotations", "labels", "priority", "nodeSelector", "tolerations",
    "schedulerName", "overhead",
)
_SHORTHAND = "main"  # the container that top-level requests/limits describe
_BYTE_RESOURCES = ("memory", "ephemeral-storage", "storage")
_DEFAULT_SCHEDULER = "default-scheduler"
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's when PyYAML was built with it: same output, faster


# ---- reading -------------------------------------------------------------------------------------


def read_workload(path: str | os.PathLike[str]) -> list[SimPod]:
    """The pods of a workload file, sorted by arrival (file order among equal arrivals).

    InputError naming the file and the entry's field (``pods[3].count``) on bad input.
    """
    source = os.fspath(path)
    documents = decode_documents(read_text(source), source)
    if len(documents) != 1:
        raise InputError(f"expected one document, found {len(documents)}", source=source)
    return workload_from_dict(documents[0], source=source)


def workload_from_dict(data: Any, *, source: str = "<workload>") -> list[SimPod]:
    """The pods of a decoded workload ``{"pods": [entry, ...]}``, sorted by arrival (stable)."""
    if not isinstance(data, Mapping) or set(data) != {"pods"} or not isinstance(data["pods"], list):
        raise InputError("expected a mapping with one key, pods, holding a list of pods", field="pods", source=source)
    pods: list[SimPod] = []
    seen: set[str] = set()
    for i, entry in enumerate(data["pods"]):
        where = f"pods[{i}]"
        try:
            for sim_pod in _entry(entry):
                if len(pods) >= MAX_SIM_PODS:
                    raise InputError(f"more than {MAX_SIM_PODS:,} pods (the limit)", field="count")
                if sim_pod.pod.key in seen:
                    raise InputError(f"pod {sim_pod.pod.key} is listed twice", field="name")
                seen.add(sim_pod.pod.key)
                pods.append(sim_pod)
        except InputError as err:
            field = f"{where}.{err.field}" if err.field else where
            raise InputError(err.message, field=field, source=source) from None
    pods.sort(key=lambda p: p.arrival)
    return pods


def _entry(entry: Any) -> list[SimPod]:
    entry = expect_mapping(entry, "")
    check_fields(entry, ENTRY_KEYS, "")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise InputError("a pod needs a name", field="name")
    count = entry.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InputError(f"{count!r} is not a positive integer", field="count")
    if count > MAX_SIM_PODS:
        raise InputError(f"{count:,} replicas: more than {MAX_SIM_PODS:,} pods (the limit)", field="count")
    arrival = _seconds(entry.get("arrival", 0), "arrival")
    interval = _seconds(entry.get("interval", 0), "interval")
    duration = None if entry.get("duration") is None else _seconds(entry["duration"], "duration")
    owner = entry.get("owner", name if count > 1 else None)
    if owner is not None and (not isinstance(owner, str) or not owner):
        raise InputError(f"{owner!r} is not a controller name", field="owner")
    models = entry.get("gpuModels", [])
    if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
        raise InputError("expected a list of GPU model names", field="gpuModels")
    from toposched.sim.hardware import KNOWN_GPU_MODELS

    for model in models:
        if model not in KNOWN_GPU_MODELS:
            raise InputError(f"unknown GPU model {model[:40]!r}; known: {', '.join(KNOWN_GPU_MODELS)}", field="gpuModels")
    if "containers" in entry and ("requests" in entry or "limits" in entry):
        raise InputError("give either requests/limits or containers, not both", field="containers")
    containers = entry.get("containers")
    if containers is None:
        containers = [{"name": _SHORTHAND, "resources": {"requests": entry.get("requests"), "limits": entry.get("limits")}}]
    spec = {
        "containers": containers,
        "initContainers": entry.get("initContainers"),
        "priority": entry.get("priority"),
        "nodeSelector": entry.get("nodeSelector"),
        "tolerations": entry.get("tolerations"),
        "schedulerName": entry.get("schedulerName"),
        "overhead": entry.get("overhead"),
    }
    out = []
    for k in range(count):
        pod_name = name if count == 1 else f"{name}-{k + 1:04d}"
        metadata = {
            "name": pod_name,
            "namespace": entry.get("namespace"),
            "uid": entry.get("uid") if count == 1 and entry.get("uid") else pod_name,
            "labels": entry.get("labels"),
            "annotations": entry.get("annotations"),
        }
        try:
            pod = Pod.from_dict({"metadata": metadata, "spec": spec}, source="")
        except InputError as err:
            raise InputError(err.message, field=err.field) from None
        out.append(SimPod(pod, arrival + k * interval, duration, owner=owner, gpu_models=tuple(models)))
    return out


def _seconds(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(f"{value!r:.40} is not a non-negative number of seconds", field=field)
    if value > MAX_HORIZON:
        raise InputError(f"{value!r:.40} seconds is above {MAX_HORIZON:g} (the limit)", field=field)
    return float(value)


# ---- writing -------------------------------------------------------------------------------------


def workload_to_dict(pods: Iterable[SimPod]) -> dict[str, Any]:
    """The workload-file form of ``pods``: one entry per pod (``count`` 1), defaults left out.

    Raises InputError for a pod already bound to a node (``node_name``), which the format does
    not express.
    """
    return {"pods": [_to_entry(p) for p in pods]}


def dump_workload(pods: Iterable[SimPod]) -> str:
    """``pods`` as workload-file YAML text."""
    return yaml.dump(workload_to_dict(pods), Dumper=_DUMPER, sort_keys=False, default_flow_style=None, width=120)


def write_workload(pods: Iterable[SimPod], path: str | os.PathLike[str]) -> None:
    """Write ``pods`` to a workload file at ``path`` (YAML)."""
    text = dump_workload(pods)
    source = os.fspath(path)
    try:
        with open(source, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise InputError(f"cannot write file: {exc.strerror or exc}", source=source) from None


def _to_entry(sim_pod: SimPod) -> dict[str, Any]:
    pod = sim_pod.pod
    if pod.node_name:
        raise InputError("a pod bound to a node cannot be written as a workload entry", field="spec.nodeName",
                         source=f"pod {pod.key}")
    entry: dict[str, Any] = {"name": pod.name}
    if pod.namespace != "default":
        entry["namespace"] = pod.namespace
    if pod.uid and pod.uid != pod.name:
        entry["uid"] = pod.uid
    entry["arrival"] = sim_pod.arrival
    if sim_pod.duration is not None:
        entry["duration"] = sim_pod.duration
    if sim_pod.owner is not None:
        entry["owner"] = sim_pod.owner
    if sim_pod.gpu_models:
        entry["gpuModels"] = list(sim_pod.gpu_models)
    if len(pod.containers) == 1 and not pod.init_containers and pod.containers[0].name == _SHORTHAND \
            and pod.containers[0].restart_policy is None:
        entry.update(_resources(pod.containers[0]))
    else:
        entry["containers"] = [_container(c) for c in pod.containers]
        if pod.init_containers:
            entry["initContainers"] = [_container(c) for c in pod.init_containers]
    for key, value in (("annotations", pod.annotations), ("labels", pod.labels), ("nodeSelector", pod.node_selector)):
        if value:
            entry[key] = dict(value)
    if pod.overhead:
        entry["overhead"] = _quantities(pod.overhead)
    if pod.priority:
        entry["priority"] = pod.priority
    if pod.scheduler_name != _DEFAULT_SCHEDULER:
        entry["schedulerName"] = pod.scheduler_name
    if pod.tolerations:
        entry["tolerations"] = [{"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
                                for t in pod.tolerations]
    return entry


def _container(container: Container) -> dict[str, Any]:
    out: dict[str, Any] = {"name": container.name}
    resources = _resources(container)
    if resources:
        out["resources"] = resources
    if container.restart_policy is not None:
        out["restartPolicy"] = container.restart_policy
    return out


def _resources(container: Container) -> dict[str, Any]:
    # A request equal to its limit is left out: the API server (and Container) default it back.
    requests = {k: v for k, v in container.requests.items() if container.limits.get(k) != v}
    out = {}
    if requests:
        out["requests"] = _quantities(requests)
    if container.limits:
        out["limits"] = _quantities(container.limits)
    return out


def _quantities(values: Mapping[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name == "cpu":
            out[name] = format_cpu(value)
        elif name in _BYTE_RESOURCES or name.startswith("hugepages-"):
            out[name] = format_bytes(value)
        else:
            out[name] = value
    return out
