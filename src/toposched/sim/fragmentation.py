"""GPU fragmentation of a simulated cluster over a run, as the FGD paper measures it.

Weng et al. ("Beware of Fragmentation", ATC '23) call a node's idle GPU capacity fragmented for
a task type when that type cannot use it: all of it when the type does not fit the node at all
(GPU model, CPU, memory, too few GPUs with enough free), else the milli-GPU on GPUs with less
free than the type asks. A node's fragmentation is the popularity-weighted sum over the types of
a *target workload*; the cluster's is the sum over nodes
(:func:`toposched.devices.fgd.fragmentation`).

The target workload here is built from the pods of the run's workload that ask for GPUs (whole
or shares), counted by shape with their GPU model constraints, keeping the most popular shapes
that cover 95 % of them (the paper's popularity threshold, upstream's ``GetTypicalPods``). The
paper's runs also count CPU-only pods as types (``isInvolvedCpuPods``), which calls every idle
GPU fragmented in proportion to their share; its traces are mostly GPU pods, but a mixed
workload such as the bundled scenario's (nine in ten pods without a GPU) would then report
fragmentation that measures the mix, not the packing. GPU pods alone make the figure read
"idle milli-GPU that the GPU pods of this workload could not use".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from toposched.devices.fgd import MILLI, NodeBatch, NodeView, TargetWorkload, Task, fragmentation
from toposched.devices.share import pod_task
from toposched.errors import InputError
from toposched.sim.model import SimPod
from toposched.sim.truth import NodeTruth

__all__ = ["TARGET_COVERAGE", "ClusterGPUs", "gpu_target_workload", "gpu_task"]

TARGET_COVERAGE = 0.95  # the share of pods the target workload's shapes cover (the paper's threshold)


def gpu_task(pod: SimPod, *, gpu_memory: int | None = None) -> Task:
    """The pod as the packing policies see it, its GPU models from ``SimPod.gpu_models`` when it lists any.

    ``gpu_memory`` (bytes per GPU) turns a request of GPU memory in bytes into milli-GPU.
    """
    task = pod_task(pod.pod, gpu_memory=gpu_memory)
    return Task(task.cpu, task.memory, task.gpu_milli, task.num_gpu, frozenset(pod.gpu_models)) if pod.gpu_models \
        else task


def gpu_target_workload(pods: Iterable[SimPod], *, gpu_memory: int | None = None,
                        coverage: float = TARGET_COVERAGE) -> TargetWorkload | None:
    """The FGD target workload of the GPU pods among ``pods`` (see the module notes); None when no pod asks
    for a GPU. A pod whose GPU request cannot be read is left out (the scheduler refuses it anyway)."""
    tasks = []
    for pod in pods:
        try:
            task = gpu_task(pod, gpu_memory=gpu_memory)
        except InputError:
            continue
        if task.num_gpu:
            tasks.append(task)
    return TargetWorkload.from_tasks(tasks, coverage=coverage) if tasks else None


class ClusterGPUs:
    """The GPUs of a run's nodes: how much is allocated and how much of the rest is fragmented.

    Only nodes with GPUs are followed; a node is looked at again only when its pods changed
    since the last measurement, and all such nodes are measured in one vectorised call.
    """

    def __init__(self, truths: Sequence[NodeTruth], workload: TargetWorkload | None) -> None:
        """Follow the GPU nodes among ``truths``; fragmentation is measured against ``workload`` (None: not at all)."""
        self.truths = [t for t in truths if t.gpus.devices]
        self.workload = workload
        self.capacity = MILLI * sum(len(t.gpus.devices) for t in self.truths)  # milli-GPU
        self._seen = [-1] * len(self.truths)  # each node's version at its last measurement
        self._free = np.zeros(len(self.truths), dtype=np.int64)  # idle milli-GPU per node
        self._frag = np.zeros(len(self.truths), dtype=np.float64)  # fragmented milli-GPU per node

    def measure(self) -> tuple[int, float | None]:
        """(allocated milli-GPU, fragmented milli-GPU or None without a target workload), now."""
        changed = [i for i, t in enumerate(self.truths) if t.version != self._seen[i]]
        if changed:
            views: list[NodeView] = []
            for i in changed:
                truth = self.truths[i]
                self._seen[i] = truth.version
                views.append(truth.gpu_view())
                self._free[i] = sum(views[-1].gpu_free)
            if self.workload is not None:
                self._frag[changed] = fragmentation(NodeBatch.from_views(views), self.workload)
        allocated = self.capacity - int(self._free.sum())
        return allocated, float(self._frag.sum()) if self.workload is not None else None
