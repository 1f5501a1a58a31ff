"""What a simulation runs on and runs: nodes (hardware + kubelet) and pods (with arrival and duration).

These are the simulator's inputs, produced by the hardware profiles, the node-list readers, the
synthetic workload generator and the trace loaders, and consumed by the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toposched.kubelet import KubeletConfig
from toposched.names import GPU_MODEL_LABEL, GPU_PRODUCT_LABEL
from toposched.scheduler.nodes import Taint
from toposched.topology import Machine
from toposched.workload import Pod

__all__ = ["CPU_ENFORCEMENT_AGENT", "CPU_ENFORCEMENT_KUBELET", "GPU_MODEL_LABEL", "GPU_PRODUCT_LABEL", "SimNode", "SimPod"]

CPU_ENFORCEMENT_KUBELET = "kubelet"
CPU_ENFORCEMENT_AGENT = "agent"
# Node label carrying the GPU model as NVIDIA's GPU feature discovery publishes it; pods that
# require a model select on it (toposched.sim.gpu_models).
# The same model under toposched's own key, which the GPUShare plugin reads for its packing policy.
_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True, eq=False)
class SimNode:
    """One simulated node: its hardware, its kubelet's configuration and how the scheduler sees it.

    ``cpu_enforcement`` says who decides exact CPUs: the node's kubelet (``kubelet``: the
    simulated kubelet admits or rejects with its own choice) or the toposched agent (``agent``:
    the scheduler's placement is applied as given). ``device_plugins`` lists the node's device
    IDs per extended resource with their NUMA nodes (the kubelet's device plugins); ``None``
    means the node has no device resources. ``profile`` names where the hardware came from.
    """

    name: str
    machine: Machine
    kubelet: KubeletConfig
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    taints: tuple[Taint, ...] = ()
    cpu_enforcement: str = CPU_ENFORCEMENT_KUBELET
    device_plugins: Mapping[str, tuple[tuple[str, tuple[int, ...] | None], ...]] | None = None
    gpu_model: str | None = None
    profile: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))


@dataclass(frozen=True, eq=False)
class SimPod:
    """One pod of a workload: when it arrives, how long it runs once started, who re-creates it.

    ``duration`` is seconds of simulated run time (None: runs until the simulation ends).
    ``owner`` names the controller (a ReplicaSet, a Job) that re-creates the pod after the
    node rejected it; None for a bare pod. ``gpu_models`` lists the GPU models the pod may run
    on (empty: any), as the trace's ``gpu_spec`` column gives them; the simulation turns them into
    a node selector on the pod (:func:`toposched.sim.gpu_models.select_gpu_models`).
    """

    pod: Pod
    arrival: float
    duration: float | None = None
    owner: str | None = None
    gpu_models: tuple[str, ...] = ()
