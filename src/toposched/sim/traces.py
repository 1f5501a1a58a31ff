"""The Alibaba GPU cluster trace's pod lists (``openb_pod_list_*.csv``) as simulated pods.

Columns: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli`` (all files) and
``gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`` (all but the
``multigpu*`` variants). Each row becomes one pod with one container; the mapping (written
down with its reasons in docs/sim/inputs.md):

* ``cpu_milli`` is the CPU in millicores, ``memory_mib`` the memory in MiB (0: none asked);
* GPUs: ``num_gpu`` whole GPUs (``gpu_milli`` 1000) as ``nvidia.com/gpu``; a share of one GPU
  (``num_gpu`` 1, ``gpu_milli`` < 1000) as Koordinator's ``koordinator.sh/gpu-core`` and
  ``koordinator.sh/gpu-memory-ratio``, both ``gpu_milli / 10`` percent rounded up;
* QoS: classes in ``guaranteed`` (default: the trace's ``Guaranteed``) are written as
  Kubernetes Guaranteed pods (limits = requests); ``LS``, ``BE`` and ``Burstable`` as requests
  without CPU/memory limits (Kubernetes Burstable), ``LS``/``BE`` labelled
  ``koordinator.sh/qosClass``;
* ``gpu_spec`` (models joined by ``|``) becomes ``SimPod.gpu_models``;
* arrival is ``creation_time``; the run time is ``deletion_time - scheduled_time``, or
  ``deletion_time - creation_time`` for pods the trace never scheduled (``Pending``). Every
  phase is kept, each row is an arrival; the phase is the ``toposched.io/trace-phase``
  annotation. Files without times arrive one per second in file order and never leave.

Pods come back sorted by arrival (file order among equal arrivals). Bad rows raise
InputError whose source is ``<file>:<line>`` and whose field is the column.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable

from toposched.devices.share import GPU_CORE, GPU_MEMORY_RATIO, NVIDIA_GPU, GPURequest
from toposched.errors import InputError
from toposched.inputs import check_dns_subdomain
from toposched.names import KOORDINATOR_QOS_LABEL, TRACE_PHASE_ANNOTATION
from toposched.sim.limits import MAX_HORIZON
from toposched.sim.model import SimPod
from toposched.sim.nodes_csv import GPU_MODELS, cell_int, csv_rows
from toposched.workload import Container, Pod

__all__ = [
    "ALIBABA_POD_COLUMNS",
    "ALIBABA_POD_REQUIRED",
    "KOORDINATOR_QOS_LABEL",
    "TRACE_PHASES",
    "TRACE_PHASE_ANNOTATION",
    "TRACE_QOS_CLASSES",
    "read_alibaba_pods",
]

ALIBABA_POD_COLUMNS = (
    "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase", "creation_time",
    "deletion_time", "scheduled_time",
)
ALIBABA_POD_REQUIRED = ALIBABA_POD_COLUMNS[:5]
TRACE_QOS_CLASSES = ("LS", "BE", "Burstable", "Guaranteed")
TRACE_PHASES = ("Running", "Succeeded", "Failed", "Pending")
#: Koordinator's pod label for its QoS classes; set for the trace's LS and BE pods.

_KOORDINATOR_CLASSES = ("LS", "BE")
_MIB = 2**20
_TIME_COLUMNS = ("creation_time", "deletion_time", "scheduled_time")
_NUMBER = re.compile(r"\d+(\.\d*)?|\.\d+")


def read_alibaba_pods(
    path: str | os.PathLike[str],
    *,
    namespace: str = "default",
    guaranteed: Iterable[str] = ("Guaranteed",),
    owned: bool = True,
) -> list[SimPod]:
    """The pods of an Alibaba ``openb_pod_list_*.csv``, sorted by arrival (stable).

    Pods are named as in the trace (their uid too). With ``owned`` each pod's owner is
    ``job/<name>``, the controller that re-creates it after a node rejected it (the trace does
    not say which pods share a controller); without, pods are bare. ``guaranteed`` lists the
    trace QoS classes written as Kubernetes Guaranteed pods.
    """
    source = os.fspath(path)
    as_guaranteed = frozenset(guaranteed)
    unknown = sorted(as_guaranteed - set(TRACE_QOS_CLASSES))
    if unknown:
        raise InputError(f"unknown trace QoS classes {unknown}; known: {', '.join(TRACE_QOS_CLASSES)}",
                         field="guaranteed", source=source)
    pods: list[SimPod] = []
    names: set[str] = set()
    containers: dict[tuple[bool, int, int, tuple[tuple[str, int], ...]], Container] = {}
    for index, (where, row) in enumerate(csv_rows(path, ALIBABA_POD_COLUMNS, ALIBABA_POD_REQUIRED)):
        try:
            pods.append(_pod(row, index, namespace, as_guaranteed, owned, names, containers))
        except InputError as err:
            raise err.with_source(where) from None
    pods.sort(key=lambda p: p.arrival)
    return pods


def _pod(row: dict[str, str], index: int, namespace: str, as_guaranteed: frozenset[str], owned: bool,
         names: set[str], containers: dict[tuple[bool, int, int, tuple[tuple[str, int], ...]], Container]) -> SimPod:
    name = row["name"].strip()
    if not name:
        raise InputError("the pod has no name", field="name")
    check_dns_subdomain(name, field="name")
    if name in names:
        raise InputError(f"pod {name!r} is listed twice", field="name")
    names.add(name)
    cpu = cell_int(row["cpu_milli"], "cpu_milli")
    memory = cell_int(row["memory_mib"], "memory_mib") * _MIB
    request = GPURequest.from_trace(cell_int(row["num_gpu"], "num_gpu"), cell_int(row["gpu_milli"], "gpu_milli"))
    devices: dict[str, int] = {}
    if request is not None and request.shared:
        percent = math.ceil(request.core / 10)  # type: ignore[operator]
        devices = {GPU_CORE: percent, GPU_MEMORY_RATIO: percent}
    elif request is not None:
        devices = {NVIDIA_GPU: request.count}
    qos = row.get("qos", "").strip()
    if "qos" in row and qos not in TRACE_QOS_CLASSES:
        raise InputError(f"unknown QoS class {qos!r}; known: {', '.join(TRACE_QOS_CLASSES)}", field="qos")
    # Containers are immutable: pods of one shape share one (most trace pods repeat a few shapes).
    key = (qos in as_guaranteed, cpu, memory, tuple(devices.items()))
    container = containers.get(key)
    if container is None:
        host = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
        if key[0]:
            container = Container("main", limits={**host, **devices})
        else:
            container = Container("main", requests=host, limits=devices)
        containers[key] = container
    labels = {KOORDINATOR_QOS_LABEL: qos} if qos in _KOORDINATOR_CLASSES else {}
    annotations = {}
    if "pod_phase" in row:
        phase = row["pod_phase"].strip()
        if phase not in TRACE_PHASES:
            raise InputError(f"unknown phase {phase!r}; known: {', '.join(TRACE_PHASES)}", field="pod_phase")
        annotations[TRACE_PHASE_ANNOTATION] = phase
    arrival, duration = _times(row, index)
    pod = Pod(name, namespace=namespace, uid=name, containers=(container,), labels=labels, annotations=annotations)
    return SimPod(pod, arrival, duration, owner=f"job/{name}" if owned else None, gpu_models=_models(row))


def _models(row: dict[str, str]) -> tuple[str, ...]:
    models = tuple(dict.fromkeys(part.strip() for part in row.get("gpu_spec", "").split("|") if part.strip()))
    for model in models:
        if model not in GPU_MODELS:
            raise InputError(f"unknown GPU model {model!r}; known: {', '.join(GPU_MODELS)}", field="gpu_spec")
    return models


def _times(row: dict[str, str], index: int) -> tuple[float, float | None]:
    """(arrival, run time): creation, then deletion minus scheduling (or creation when never scheduled)."""
    if "creation_time" not in row:
        return float(index), None
    created = _time(row, "creation_time")
    if created is None:
        raise InputError("the creation time is empty", field="creation_time")
    deleted = _time(row, "deletion_time")
    scheduled = _time(row, "scheduled_time")
    start = created if scheduled is None else scheduled
    if start < created:
        raise InputError(f"scheduled at {scheduled:g}, before its creation at {created:g}", field="scheduled_time")
    if deleted is None:
        return created, None
    if deleted < start:
        raise InputError(f"deleted at {deleted:g}, before it started at {start:g}", field="deletion_time")
    return created, deleted - start


def _time(row: dict[str, str], column: str) -> float | None:
    if column not in row:
        return None
    text = row[column].strip()
    if not text:
        return None
    if not _NUMBER.fullmatch(text):
        if text.startswith("-"):
            raise InputError(f"{text[:40]} is negative", field=column)
        raise InputError(f"{text[:40]!r} is not a number of seconds", field=column)
    value = float(text)
    if not value <= MAX_HORIZON:
        raise InputError(f"{text[:40]} seconds is above {MAX_HORIZON:g} (the limit)", field=column)
    return value
