"""Fragmentation-aware GPU packing: FGD and the baselines of "Beware of Fragmentation" (ATC'23).

Weng et al. schedule GPU-sharing workloads with *fragmentation gradient descent*: a node's GPU
fragmentation is measured against a *target workload* (task types with their popularity), and a
pod goes to the node and GPU whose choice increases that fragmentation least. The definitions
here follow the paper's simulator, github.com/hkust-adsl/kubernetes-scheduler-simulator:

- fragmentation: ``pkg/utils/frag.go`` (``NodeGpuShareFragAmount``, ``GetNodePodFrag``,
  ``GetGpuFragMilliByNodeResAndPodRes``, ``FragAmountSumExceptQ3``), target workload:
  ``GetTypicalPods`` there;
- FGD: ``pkg/simulator/plugin/fgd_score.go``; BestFit: ``best_fit_score.go``; DotProd:
  ``dot_product_score.go`` with the paper's settings (dimension ``merge``, norm ``max``);
  GpuPacking: ``gpu_packing_score.go``; GpuClustering: ``gpu_clustering_score.go``; Random:
  ``random_score.go``; GPU choice inside a node: ``open_gpu_share.go`` (``best``/``random``)
  and ``pkg/type/resource.go`` (``AllocateExclusiveGpuId``, ``Sub``);
- constants: ``pkg/type/open-gpu-share/utils/const.go``.

Units: CPU in millicores, memory in bytes, GPU in milli-GPU (1000 = one whole GPU). A node's
GPUs are a row of per-device free milli-GPU; padding beyond a node's GPU count is 0.

One extension: upstream ignores host memory (its ``PodResource.Memory`` is commented out). Here a
task that lacks memory on a node counts like one that lacks CPU. With every task's memory 0 the
results are upstream's exactly.

Every policy is deterministic; Random draws from the ``random.Random`` it is given.
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from toposched.errors import InputError

__all__ = [
    "FGD",
    "MAX_NODE_SCORE",
    "MAX_SPEC_CPU",
    "MAX_SPEC_GPU",
    "MILLI",
    "POLICY_NAMES",
    "BestFit",
    "DotProd",
    "GpuClustering",
    "GpuPacking",
    "NodeBatch",
    "NodeScores",
    "NodeView",
    "Policy",
    "RandomPolicy",
    "TargetWorkload",
    "Task",
    "feasible",
    "fragmentation",
    "make_policy",
    "node_fragmentation",
    "parse_gpu_spec",
]

MILLI = 1000  # one whole GPU, in milli-GPU
MAX_SPEC_CPU = 128_000  # upstream MaxSpecCpu: the largest node's CPU, normalises BestFit and DotProd
MAX_SPEC_GPU = 8_000  # upstream MaxSpecGpu: the largest node's GPUs (8), in milli-GPU
MAX_NODE_SCORE = 100

NO_GPU_TAG = "no-gpu"
SHARE_GPU_TAG = "share-gpu"
_EMPTY: Mapping[str, int] = MappingProxyType({})


def parse_gpu_spec(text: str) -> frozenset[str]:
    """The GPU models a trace ``gpu_spec`` allows (``"V100M16|V100M32"``); empty = any model."""
    return frozenset(part for part in str(text).split("|") if part)


@dataclass(frozen=True, slots=True)
class Task:
    """A pod as the policies see it: host request, GPU milli per GPU, GPU count, allowed models.

    As in upstream's ``PodResource``: ``num_gpu`` 0 means a CPU-only pod (``gpu_milli`` 0); a
    shared-GPU pod asks for one GPU with ``gpu_milli`` < 1000; trace pods asking for several
    GPUs take whole ones. Several partial GPUs (Koordinator's ``gpu.shared``) are allowed too.
    """

    cpu: int = 0
    memory: int = 0
    gpu_milli: int = 0
    num_gpu: int = 0
    gpu_models: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for name in ("cpu", "memory", "gpu_milli", "num_gpu"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise InputError(f"{value!r} is not a non-negative integer", field=f"task.{name}")
            object.__setattr__(self, name, int(value))
        object.__setattr__(self, "gpu_models", frozenset(self.gpu_models))
        if self.gpu_milli > MILLI:
            raise InputError(f"{self.gpu_milli} milli-GPU is more than one GPU", field="task.gpu_milli")
        if (self.num_gpu == 0) != (self.gpu_milli == 0):
            raise InputError(f"{self.num_gpu} GPUs of {self.gpu_milli} milli-GPU each is not a request",
                             field="task.num_gpu")

    @property
    def shared(self) -> bool:
        """Whether the task takes part of one GPU (upstream ``IsGpuShare``)."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def total_milli(self) -> int:
        """All the milli-GPU the task takes."""
        return self.gpu_milli * self.num_gpu

    @property
    def tag(self) -> str:
        """GpuClustering's affinity tag: ``no-gpu``, ``share-gpu`` (any partial GPU) or ``<n>-gpu``."""
        if self.num_gpu == 0:
            return NO_GPU_TAG
        return SHARE_GPU_TAG if self.gpu_milli < MILLI else f"{self.num_gpu}-gpu"

    def accessible(self, model: str) -> bool:
        """Whether a node with GPUs of ``model`` ("" = no GPUs) may host this task's GPUs."""
        if not self.gpu_models:
            return True
        return bool(model) and model in self.gpu_models

    def _sort_key(self) -> tuple[Any, ...]:
        return (self.cpu, self.gpu_milli, self.num_gpu, "|".join(sorted(self.gpu_models)), self.memory)


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node as the policies see it: free host resources, free milli-GPU per device, model.

    ``affinity`` counts the GPU pods on the node per :attr:`Task.tag` (only GpuClustering reads it).
    """

    cpu_free: int
    memory_free: int
    gpu_free: tuple[int, ...] = ()
    gpu_model: str = ""
    affinity: Mapping[str, int] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_free", tuple(int(v) for v in self.gpu_free))
        object.__setattr__(self, "affinity", MappingProxyType(dict(self.affinity)) if self.affinity else _EMPTY)


@dataclass(frozen=True, eq=False)
class NodeBatch:
    """Many nodes as NumPy arrays, one row per node, for scoring them all at once.

    ``gpu_free`` has one column per GPU of the largest node; a node with fewer GPUs has 0 in the
    columns beyond ``gpu_count``. Arrays are copied and made read-only.
    """

    cpu_free: np.ndarray
    memory_free: np.ndarray
    gpu_free: np.ndarray
    gpu_count: np.ndarray
    gpu_model: tuple[str, ...]
    affinity: tuple[Mapping[str, int], ...] = ()
    models: tuple[str, ...] = field(init=False)  # the distinct GPU models, first seen first
    model_index: np.ndarray = field(init=False)  # per node, its model's position in ``models``

    def __post_init__(self) -> None:
        n = len(self.gpu_model)
        for name in ("cpu_free", "memory_free", "gpu_count"):
            arr = np.array(getattr(self, name), dtype=np.int64).reshape(-1)
            if arr.shape != (n,):
                raise InputError(f"expected {n} values, got {arr.shape[0]}", field=f"nodes.{name}")
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        gpu = np.array(self.gpu_free, dtype=np.int64)
        if gpu.size == 0:
            gpu = np.zeros((n, 0), dtype=np.int64)
        if gpu.ndim != 2 or gpu.shape[0] != n:
            raise InputError(f"expected a ({n}, GPUs) array, got shape {gpu.shape}", field="nodes.gpu_free")
        if (gpu < 0).any() or (gpu > MILLI).any():
            raise InputError("free milli-GPU must lie in 0..1000", field="nodes.gpu_free")
        if (self.gpu_count < 0).any() or (self.gpu_count > gpu.shape[1]).any():
            raise InputError("a GPU count is negative or exceeds the columns of gpu_free", field="nodes.gpu_count")
        if (gpu[np.arange(gpu.shape[1])[None, :] >= self.gpu_count[:, None]] != 0).any():
            raise InputError("a node has free milli-GPU beyond its GPU count", field="nodes.gpu_free")
        gpu.setflags(write=False)
        object.__setattr__(self, "gpu_free", gpu)
        object.__setattr__(self, "gpu_model", tuple(str(m) for m in self.gpu_model))
        codes: dict[str, int] = {}
        index = np.array([codes.setdefault(m, len(codes)) for m in self.gpu_model], dtype=np.intp)
        index.setflags(write=False)
        object.__setattr__(self, "models", tuple(codes))
        object.__setattr__(self, "model_index", index)
        affinity = tuple(self.affinity) if self.affinity else tuple(_EMPTY for _ in range(n))
        if len(affinity) != n:
            raise InputError(f"expected {n} affinity maps, got {len(affinity)}", field="nodes.affinity")
        object.__setattr__(self, "affinity", affinity)

    def __len__(self) -> int:
        return len(self.gpu_model)

    @classmethod
    def from_checked(cls, cpu_free: np.ndarray, memory_free: np.ndarray, gpu_free: np.ndarray, gpu_count: np.ndarray,
                     gpu_model: tuple[str, ...], models: tuple[str, ...], model_index: np.ndarray) -> NodeBatch:
        """A batch of arrays that already hold what the checks of the constructor demand (int64,
        one row per node, free milli in 0..1000 and 0 beyond each node's GPUs; ``models`` in
        first-seen order and ``model_index`` into them), with no affinity: taken as they are, no
        copy and no check, for a caller that builds them from nodes it checked (the scheduler's
        GPU rows: ~0.25 ms saved a batch of 500 GPU servers). The arrays are made read-only."""
        batch = object.__new__(cls)
        for name, value in (("cpu_free", cpu_free), ("memory_free", memory_free), ("gpu_free", gpu_free),
                            ("gpu_count", gpu_count), ("model_index", model_index)):
            value.setflags(write=False)
            object.__setattr__(batch, name, value)
        object.__setattr__(batch, "gpu_model", gpu_model)
        object.__setattr__(batch, "models", models)
        object.__setattr__(batch, "affinity", (_EMPTY,) * len(gpu_model))
        return batch

    @classmethod
    def from_views(cls, views: Sequence[NodeView]) -> NodeBatch:
        """Stack single-node views into a batch (padding GPU rows with 0)."""
        width = max((len(v.gpu_free) for v in views), default=0)
        gpu = np.zeros((len(views), width), dtype=np.int64)
        for i, v in enumerate(views):
            gpu[i, : len(v.gpu_free)] = v.gpu_free
        return cls(
            cpu_free=np.array([v.cpu_free for v in views], dtype=np.int64),
            memory_free=np.array([v.memory_free for v in views], dtype=np.int64),
            gpu_free=gpu,
            gpu_count=np.array([len(v.gpu_free) for v in views], dtype=np.int64),
            gpu_model=tuple(v.gpu_model for v in views),
            affinity=tuple(v.affinity for v in views),
        )


class TargetWorkload:
    """Task types with their popularity: what the cluster is expected to run next.

    Type *i* has popularity ``weights[i] / scale``. :meth:`from_tasks` keeps the counts as
    weights and their sum as the scale, so sums stay exact integers and two states with equal
    fragmentation compare exactly equal. Popularities need not sum to 1 (upstream's own test
    tables do not); fragmentation is Σ popularity × unusable milli.
    """

    __slots__ = ("_access", "_g_cpu", "_g_mem", "_g_tasks", "_g_weights", "_group_milli", "_group_num",
                 "_group_start", "_scale", "_total_weight", "_weights", "tasks")

    def __init__(self, tasks: Sequence[Task], weights: Sequence[float], scale: float = 1.0):
        """Task types, their weights, and the scale dividing weights into popularities."""
        self.tasks: tuple[Task, ...] = tuple(tasks)
        w = np.array(weights, dtype=np.float64).reshape(-1)
        if len(self.tasks) == 0 or w.shape != (len(self.tasks),):
            raise InputError("a target workload needs one weight per task type and at least one type",
                             field="workload")
        if not np.isfinite(w).all() or (w < 0).any():
            raise InputError("weights must be finite and non-negative", field="workload.weights")
        if not (math.isfinite(scale) and scale > 0) or (w > scale).any():
            raise InputError(f"scale {scale} must be positive and no weight may exceed it (popularity > 1)",
                             field="workload.scale")
        self._weights = w
        self._scale = float(scale)
        self._total_weight = float(w.sum())
        # Only GPU types can use idle GPUs. They are kept grouped by (milli, GPUs): the GPU side of
        # fitting depends on the group alone, so per-node work is per group, not per type.
        order = sorted((i for i, t in enumerate(self.tasks) if t.num_gpu),
                       key=lambda i: (self.tasks[i].gpu_milli, self.tasks[i].num_gpu))
        groups = sorted({(self.tasks[i].gpu_milli, self.tasks[i].num_gpu) for i in order})
        self._g_tasks = tuple(self.tasks[i] for i in order)
        self._g_cpu = np.array([self.tasks[i].cpu for i in order], dtype=np.int64)
        self._g_mem = np.array([self.tasks[i].memory for i in order], dtype=np.int64)
        self._g_weights = w[order] if order else np.zeros(0)
        keys = [(self.tasks[i].gpu_milli, self.tasks[i].num_gpu) for i in order]
        self._group_start = np.array([keys.index(g) for g in groups], dtype=np.intp)
        # int32 is wide enough for milli-GPU and GPU counts, and halves the per-node work.
        self._group_milli = np.array([g[0] for g in groups], dtype=np.int32)
        self._group_num = np.array([g[1] for g in groups], dtype=np.int64)
        self._access: dict[str, np.ndarray] = {}

    @classmethod
    def from_tasks(cls, tasks: Iterable[Task], *, coverage: float = 1.0) -> TargetWorkload:
        """Count identical tasks; keep the most popular types covering ``coverage`` of all pods.

        As upstream's ``GetTypicalPods`` (step 1): types sorted by count (ties: larger request
        first), added one at a time until their pods reach ``coverage`` of the total; the kept
        counts are the weights. The paper's runs use ``coverage=0.95``.
        """
        if not 0 < coverage <= 1:
            raise InputError(f"coverage {coverage} is not in (0, 1]", field="workload.coverage")
        counts = Counter(tasks)
        if not counts:
            raise InputError("a target workload needs at least one task", field="workload")
        ordered = sorted(counts.items(), key=lambda kv: (kv[1], *kv[0]._sort_key()), reverse=True)
        total = sum(counts.values())
        kept: list[tuple[Task, int]] = []
        cum = 0
        for task, count in ordered:
            if cum >= coverage * total:
                break
            kept.append((task, count))
            cum += count
        return cls([t for t, _ in kept], [c for _, c in kept], scale=cum)

    @property
    def popularity(self) -> tuple[float, ...]:
        """Each type's share of the workload (sums to 1 when built by :meth:`from_tasks`)."""
        return tuple(float(v) for v in self._weights / self._scale)

    def _accessible(self, batch: NodeBatch) -> np.ndarray:
        """(nodes, GPU types): the type may use this node's GPU model."""
        rows = []
        for model in batch.models:
            acc = self._access.get(model)
            if acc is None:
                acc = np.array([t.accessible(model) for t in self._g_tasks], dtype=bool)
                self._access[model] = acc
            rows.append(acc)
        table = np.array(rows, dtype=bool).reshape(len(batch.models), len(self._g_tasks))
        return table[batch.model_index]

    def _host_weight(self, cpu: np.ndarray, mem: np.ndarray, access: np.ndarray) -> np.ndarray:
        """(nodes, groups): weight of the GPU types whose host request fits and whose model matches."""
        if not len(self._group_start):
            return np.zeros((len(cpu), 0))
        fits = (cpu[:, None] >= self._g_cpu[None, :]) & (mem[:, None] >= self._g_mem[None, :]) & access
        return np.add.reduceat(fits * self._g_weights[None, :], self._group_start, axis=1)

    def _gpu_counts(self, gpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(nodes, groups): GPUs with at least the group's milli free; free milli on the others."""
        g = gpu.astype(np.int32)[:, :, None]
        m = self._group_milli[None, None, :]
        return (g >= m).sum(axis=1, dtype=np.int32), (g * (g < m)).sum(axis=1, dtype=np.int32)

    def _frag(self, total: np.ndarray, weight: np.ndarray, ge: np.ndarray, lt: np.ndarray) -> np.ndarray:
        # A type fragments all idle GPU milli unless it fits whole (CPU, memory, GPUs): then only
        # the milli on GPUs too small for it (upstream Q3's Q2 part). Sum over types = total·Σw
        # minus, for fitting types, what they can use.
        usable = weight * (ge >= self._group_num) * (total[..., None] - lt)
        return (total * self._total_weight - usable.sum(axis=-1)) / self._scale


def _check_batch(batch: NodeBatch) -> None:
    if not isinstance(batch, NodeBatch):
        raise InputError(f"expected a NodeBatch, got {type(batch).__name__}", field="nodes")


def fragmentation(batch: NodeBatch, workload: TargetWorkload) -> np.ndarray:
    """Each node's expected GPU fragmentation w.r.t. the workload, in milli-GPU (float64).

    Upstream ``NodeGpuShareFragAmountScore``: Σ over task types of popularity × the node's idle
    milli-GPU the type cannot use — all of it when the type cannot run there (no GPUs of its
    model, not enough CPU/memory or GPUs, or a CPU-only type), else the milli on GPUs with less
    free than the type's milli.
    """
    _check_batch(batch)
    return _Frag(batch, workload).value


def node_fragmentation(view: NodeView, workload: TargetWorkload) -> float:
    """:func:`fragmentation` of one node."""
    return float(fragmentation(NodeBatch.from_views([view]), workload)[0])


def feasible_one(view: NodeView, task: Task) -> bool:
    """:func:`feasible` for one node, in plain Python."""
    if view.cpu_free < task.cpu or view.memory_free < task.memory:
        return False
    if not task.num_gpu:
        return True
    milli = task.gpu_milli
    return task.accessible(view.gpu_model) and sum(1 for g in view.gpu_free if g >= milli) >= task.num_gpu


def feasible(batch: NodeBatch, task: Task) -> np.ndarray:
    """Which nodes can take the task now: host resources, GPU model, enough GPUs with its milli free.

    The Filter of upstream's Open-Gpu-Share plugin plus the host-resource fit.
    """
    _check_batch(batch)
    ok = (batch.cpu_free >= task.cpu) & (batch.memory_free >= task.memory)
    if task.num_gpu:
        ok &= np.array([task.accessible(m) for m in batch.models], dtype=bool).reshape(-1)[batch.model_index]
        ok &= (batch.gpu_free >= task.gpu_milli).sum(axis=1) >= task.num_gpu
    return ok


@dataclass(frozen=True, eq=False)
class NodeScores:
    """A policy's 0–100 score per node; ``feasible`` marks the nodes that can take the pod at all."""

    scores: np.ndarray
    feasible: np.ndarray

    def best(self) -> int | None:
        """The feasible node with the highest score (lowest index among equals), or None."""
        idx = np.flatnonzero(self.feasible)
        if idx.size == 0:
            return None
        return int(idx[np.argmax(self.scores[idx])])


def _candidates(view: NodeView, task: Task, eligible: Sequence[bool] | None) -> list[int]:
    if eligible is None:
        return [i for i, v in enumerate(view.gpu_free) if v >= task.gpu_milli]
    if len(eligible) != len(view.gpu_free):
        raise InputError(f"{len(eligible)} eligibility flags for {len(view.gpu_free)} GPUs", field="eligible")
    return [i for i, ok in enumerate(eligible) if ok]


def _best_fit_gpu(view: NodeView, task: Task, eligible: Sequence[bool] | None) -> tuple[int, ...] | None:
    """Upstream's ``best`` GPU selection: the fitting GPUs with the least free milli, in device order
    among equals (``allocateGpuIdBasedOnBestFit``, and ``Sub`` for several GPUs). For whole GPUs
    that is the first free ones, upstream's ``AllocateExclusiveGpuId``."""
    if not task.num_gpu:
        return ()
    candidates = sorted(_candidates(view, task, eligible), key=lambda i: (view.gpu_free[i], i))
    return tuple(sorted(candidates[: task.num_gpu])) if len(candidates) >= task.num_gpu else None


def _go_div(a: np.ndarray, b: int) -> np.ndarray:
    """Go's integer division: truncates toward zero."""
    return np.sign(a) * (np.abs(a) // b)


class Policy(ABC):
    """A node score (many nodes at once) and a GPU choice inside the chosen node."""

    name: str = ""
    # Whether a node's score depends on the other nodes scored with it (a NormalizeScore step).
    normalizes: bool = False

    @abstractmethod
    def score(self, batch: NodeBatch, task: Task) -> NodeScores:
        """Score every node of the batch for the task; infeasible nodes score 0."""

    def raw_score(self, batch: NodeBatch, task: Task) -> NodeScores:
        """Each node's score before normalisation: it depends on that node alone.

        ``normalize`` over the feasible nodes' raw scores gives :meth:`score`'s values, so a
        caller that keeps raw scores per node can normalise over any set of nodes later.
        """
        return self.score(batch, task)

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        """The final scores of nodes that are all feasible, from their raw scores (identity unless ``normalizes``)."""
        return raw

    def raw_score_one(self, view: NodeView, task: Task) -> int:
        """:meth:`raw_score` of one node (0 where infeasible), for callers scoring a few nodes."""
        return int(self.raw_score(NodeBatch.from_views([view]), task).scores[0])

    def choose_gpus(self, view: NodeView, task: Task, eligible: Sequence[bool] | None = None) -> tuple[int, ...] | None:
        """Which GPUs of the node (indices into ``view.gpu_free``) the task gets; None when none fit.

        ``eligible`` (one flag per GPU) restricts the choice, e.g. to GPUs on the pod's NUMA
        nodes; it is trusted to name only GPUs that fit. The default is upstream's ``best``
        selection: the fitting GPU with the least free milli; whole GPUs in device order.
        """
        return _best_fit_gpu(view, task, eligible)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class FGD(Policy):
    """Fragmentation gradient descent: the node and GPU that least increase fragmentation.

    Score = ⌊sigmoid((F_before − F_after) / 1000) × 100⌋ (``fgd_score.go``). A shared pod tries
    every GPU with enough free milli and keeps the best (first on ties); other pods take GPUs as
    upstream's ``Sub`` does (fitting GPUs, least free first) — for whole GPUs, the first free ones.
    """

    name = "FGD"

    def __init__(self, workload: TargetWorkload):
        """A policy measuring fragmentation against ``workload``."""
        if not isinstance(workload, TargetWorkload):
            raise InputError("FGD needs a TargetWorkload", field="workload")
        self.workload = workload

    def score(self, batch: NodeBatch, task: Task) -> NodeScores:
        """FGD's score per node (for a shared pod, the score of its best GPU)."""
        ok = feasible(batch, task)
        if not (task.cpu or task.memory or task.num_gpu):
            return NodeScores(np.where(ok, MAX_NODE_SCORE, 0).astype(np.int64), ok)
        if task.shared:
            scores = self._shared_scores(batch, task, None).max(axis=1, initial=-1)
            return NodeScores(np.where(ok, scores, 0).astype(np.int64), ok)
        wl = self.workload
        before = _Frag(batch, wl)
        if task.num_gpu == 0 or task.gpu_milli == MILLI:
            # A CPU pod leaves the GPUs as they are; whole GPUs go from free to empty, which only
            # lowers every group's count of fitting GPUs.
            ge = before.ge - task.num_gpu
            total = before.total - task.total_milli
            weight = wl._host_weight(batch.cpu_free - task.cpu, batch.memory_free - task.memory, before.access)
            after = wl._frag(total, weight, ge, before.lt)
        else:
            after = _Frag(_subtract(batch, task), wl).value
        scores = _sigmoid_score(before.value - after)
        return NodeScores(np.where(ok, scores, 0).astype(np.int64), ok)

    def choose_gpus(self, view: NodeView, task: Task, eligible: Sequence[bool] | None = None) -> tuple[int, ...] | None:
        """The GPU whose use leaves the least fragmentation (shared); the first free ones (whole)."""
        if not task.shared:
            return super().choose_gpus(view, task, eligible)
        batch = NodeBatch.from_views([view])
        mask = None
        if eligible is not None:
            if len(eligible) != len(view.gpu_free):
                raise InputError(f"{len(eligible)} eligibility flags for {len(view.gpu_free)} GPUs", field="eligible")
            mask = np.array([eligible], dtype=bool).reshape(1, len(view.gpu_free))
        per_gpu = self._shared_scores(batch, task, mask)[0]
        if per_gpu.size == 0 or per_gpu.max() < 0:
            return None
        return (int(np.argmax(per_gpu)),)

    def _shared_scores(self, batch: NodeBatch, task: Task, eligible: np.ndarray | None) -> np.ndarray:
        """(nodes, GPUs): the score of putting the shared task on each GPU; -1 where it does not fit."""
        wl = self.workload
        d = task.gpu_milli
        before = _Frag(batch, wl)
        fits = batch.gpu_free >= d if eligible is None else eligible
        rows, cols = np.nonzero(fits)  # only the GPUs it could go to
        a = batch.gpu_free[rows, cols].astype(np.int32)[:, None]
        b = np.maximum(a - d, 0)  # an eligible GPU may be short by rounding of memory to milli
        m = wl._group_milli[None, :]
        # Only GPU g changes (a → a−d): adjust its node's per-group counts instead of recounting.
        ge = before.ge[rows] - (a >= m) + (b >= m)
        lt = before.lt[rows] - a * (a < m) + b * (b < m)
        weight = wl._host_weight(batch.cpu_free - task.cpu, batch.memory_free - task.memory, before.access)
        after = wl._frag(before.total[rows] - d, weight[rows], ge, lt)
        scores = np.full(fits.shape, -1, dtype=np.int64)
        scores[rows, cols] = _sigmoid_score(before.value[rows] - after)
        return scores


class _Frag:
    """A batch's fragmentation and the per-group counts it came from, for reuse in after-states."""

    __slots__ = ("access", "ge", "lt", "total", "value")

    def __init__(self, batch: NodeBatch, workload: TargetWorkload):
        self.total = batch.gpu_free.sum(axis=1)
        self.access = workload._accessible(batch)
        self.ge, self.lt = workload._gpu_counts(batch.gpu_free)
        weight = workload._host_weight(batch.cpu_free, batch.memory_free, self.access)
        self.value = workload._frag(self.total, weight, self.ge, self.lt)


def _sigmoid_score(delta: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-delta / 1000.0)) * MAX_NODE_SCORE).astype(np.int64)


def _subtract(batch: NodeBatch, task: Task) -> NodeBatch:
    """Upstream ``NodeResource.Sub``: the host request, and GPUs taken least-free-first (stable)."""
    gpu = batch.gpu_free.copy()
    if task.num_gpu and gpu.shape[1]:
        order = np.argsort(gpu, axis=1, kind="stable")
        ordered = np.take_along_axis(gpu, order, axis=1)
        fits = ordered >= task.gpu_milli
        take = fits & (np.cumsum(fits, axis=1) <= task.num_gpu)
        ordered = ordered - take * task.gpu_milli
        np.put_along_axis(gpu, order, ordered, axis=1)
    return NodeBatch(
        cpu_free=batch.cpu_free - task.cpu,
        memory_free=batch.memory_free - task.memory,
        gpu_free=gpu,
        gpu_count=batch.gpu_count,
        gpu_model=batch.gpu_model,
        affinity=batch.affinity,
    )


class BestFit(Policy):
    """Least leftover CPU and GPU after placement (``best_fit_score.go``), min–max normalised.

    Raw score ⌊(1 − ½·(cpu_free − cpu)/128000 − ½·(gpu_free − gpu)/8000) × 100⌋, then upstream's
    NormalizeScore over the feasible nodes (all equal → 0).
    """

    name = "BestFit"
    normalizes = True

    def score(self, batch: NodeBatch, task: Task) -> NodeScores:
        """BestFit's normalised score per node."""
        raw = self.raw_score(batch, task)
        return NodeScores(_normalize(raw.scores, raw.feasible), raw.feasible)

    def raw_score(self, batch: NodeBatch, task: Task) -> NodeScores:
        """The score before min–max normalisation (0 where infeasible)."""
        ok = feasible(batch, task)
        s = (batch.cpu_free - task.cpu) / MAX_SPEC_CPU * 0.5
        s = s + (batch.gpu_free.sum(axis=1) - task.total_milli) / MAX_SPEC_GPU * 0.5
        raw = np.trunc((1.0 - s) * MAX_NODE_SCORE).astype(np.int64)
        return NodeScores(np.where(ok, raw, 0), ok)

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        """Upstream NormalizeScore over the given (feasible) nodes."""
        return _normalize(np.asarray(raw, dtype=np.int64), np.ones(len(raw), dtype=bool))

    def raw_score_one(self, view: NodeView, task: Task) -> int:
        """:meth:`raw_score` of one node in plain Python (the same float arithmetic, so the same value)."""
        if not feasible_one(view, task):
            return 0
        s = (view.cpu_free - task.cpu) / MAX_SPEC_CPU * 0.5
        s = s + (sum(view.gpu_free) - task.total_milli) / MAX_SPEC_GPU * 0.5
        return int(math.trunc((1.0 - s) * MAX_NODE_SCORE))


def _normalize(raw: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Upstream NormalizeScore (plugin_utils.go): integer min–max to 0..100 over the scored nodes."""
    out = np.zeros_like(raw)
    if not ok.any():
        return out
    hi, lo = raw[ok].max(), raw[ok].min()
    if hi != lo:
        out[ok] = (raw[ok] - lo) * MAX_NODE_SCORE // (hi - lo)
    return out


class DotProd(Policy):
    """Tetris-style alignment of node free and pod request (``dot_product_score.go``).

    The paper's setting: CPU and all GPUs as two dimensions (``merge``), each divided by the
    largest node (``max``); score ⌊(1 − (node·pod)/2) × 100⌋. GPUs inside the node: ``best``.
    """

    name = "DotProd"

    def score(self, batch: NodeBatch, task: Task) -> NodeScores:
        """DotProd's score per node (0 where the node lacks the CPU)."""
        ok = feasible(batch, task)
        node_cpu = batch.cpu_free / MAX_SPEC_CPU
        node_gpu = batch.gpu_free.sum(axis=1) / MAX_SPEC_GPU
        dot = node_cpu * (task.cpu / MAX_SPEC_CPU) + node_gpu * (task.total_milli / MAX_SPEC_GPU)
        raw = (MAX_NODE_SCORE * (1.0 - dot / 2)).astype(np.int64)
        raw = np.where(batch.cpu_free >= task.cpu, raw, 0)
        return NodeScores(np.where(ok, raw, 0).astype(np.int64), ok)


class GpuPacking(Policy):
    """Prefer shared GPUs, then free GPUs on used nodes, then empty nodes (``gpu_packing_score.go``).

    Shared GPUs: max(100 − Σ ⌊free·100/1000⌋ / 10, 50); free GPUs on a used node: max(50 − used
    free GPUs, 33); a node whose GPUs are all free: max(33 − free GPUs, free GPUs). CPU pods: 0.
    """

    name = "GpuPacking"

    def score(self, batch: NodeBatch, task: Task) -> NodeScores:
        """GpuPacking's score per node."""
        ok = feasible(batch, task)
        n = len(batch)
        if not task.num_gpu:
            return NodeScores(np.zeros(n, dtype=np.int64), ok)
        gpu = batch.gpu_free
        fully_free = (gpu == MILLI).sum(axis=1)
        ordered = np.sort(gpu, axis=1, kind="stable")
        fits = ordered >= task.gpu_milli
        take = fits & (np.cumsum(fits, axis=1) <= task.num_gpu)
        free_used = (take & (ordered == MILLI)).sum(axis=1)
        shared_free = (take * (ordered * 100 // MILLI)).sum(axis=1)
        scores = np.where(
            fully_free == batch.gpu_count,
            np.maximum(MAX_NODE_SCORE // 3 - fully_free, fully_free),
            np.where(free_used > 0,
                     np.maximum(MAX_NODE_SCORE // 2 - free_used, MAX_NODE_SCORE // 3),
                     np.maximum(MAX_NODE_SCORE - shared_free // 10, MAX_NODE_SCORE // 2)),
        )
        return NodeScores(np.where(ok, scores, 0).astype(np.int64), ok)


class GpuClustering(Policy):
    """Keep pods of one GPU shape together (``gpu_clustering_score.go``).

    Base ⌊25·(8000 − free milli)/8000⌋ (Go division), plus 75 when the node holds only pods of
    the pod's tag, 50 when it holds that tag among others, 25 when it holds no GPU pods, 0
    otherwise. CPU pods: 0. Reads ``NodeBatch.affinity``.
    """

    name = "GpuClustering"

    def score(self, batch: NodeBatch, task: Task) -> NodeScores:
        """GpuClustering's score per node."""
        ok = feasible(batch, task)
        n = len(batch)
        if not task.num_gpu:
            return NodeScores(np.zeros(n, dtype=np.int64), ok)
        base = _go_div(MAX_NODE_SCORE // 4 * (MAX_SPEC_GPU - batch.gpu_free.sum(axis=1)), MAX_SPEC_GPU)
        tag = task.tag
        bonus = np.empty(n, dtype=np.int64)
        for i, aff in enumerate(batch.affinity):
            tags = sum(1 for v in aff.values() if v > 0)
            if aff.get(tag, 0) > 0:
                bonus[i] = MAX_NODE_SCORE * 3 // 4 if tags == 1 else MAX_NODE_SCORE * 2 // 4
            else:
                bonus[i] = MAX_NODE_SCORE // 4 if tags == 0 else 0
        return NodeScores(np.where(ok, base + bonus, 0).astype(np.int64), ok)


class RandomPolicy(Policy):
    """One feasible node at random scores 100 (``random_score.go``); a random fitting GPU inside it.

    Draws come from the ``random.Random`` given, so a seed fixes every choice.
    """

    name = "Random"
    normalizes = True

    def __init__(self, rng: random.Random):
        """A policy drawing from ``rng``."""
        if not isinstance(rng, random.Random):
            raise InputError("Random needs a random.Random", field="rng")
        self.rng = rng

    def score(self, batch: NodeBatch, task: Task) -> NodeScores:
        """100 for one feasible node drawn uniformly, 0 elsewhere."""
        ok = feasible(batch, task)
        scores = np.zeros(len(batch), dtype=np.int64)
        idx = np.flatnonzero(ok)
        if idx.size:
            scores[idx[self.rng.randrange(idx.size)]] = MAX_NODE_SCORE
        return NodeScores(scores, ok)

    def raw_score(self, batch: NodeBatch, task: Task) -> NodeScores:
        """0 everywhere: the draw happens in :meth:`normalize`, over every feasible node at once."""
        return NodeScores(np.zeros(len(batch), dtype=np.int64), feasible(batch, task))

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        """100 for one of the given nodes drawn uniformly, 0 for the others."""
        scores = np.zeros(len(raw), dtype=np.int64)
        if len(raw):
            scores[self.rng.randrange(len(raw))] = MAX_NODE_SCORE
        return scores

    def choose_gpus(self, view: NodeView, task: Task, eligible: Sequence[bool] | None = None) -> tuple[int, ...] | None:
        """Upstream ``allocateGpuIdBasedOnRandomFit``: reservoir-sample a fitting GPU; whole GPUs in order."""
        if not task.shared:
            return super().choose_gpus(view, task, eligible)
        chosen = None
        for seen, i in enumerate(_candidates(view, task, eligible), start=1):
            if self.rng.randrange(seen) == 0:
                chosen = i
        return None if chosen is None else (chosen,)

    def __repr__(self) -> str:
        return "RandomPolicy(rng)"


POLICY_NAMES = ("FGD", "BestFit", "DotProd", "GpuPacking", "GpuClustering", "Random")


def make_policy(name: str, *, workload: TargetWorkload | None = None, seed: int | None = None) -> Policy:
    """A policy by its paper name; FGD needs ``workload``, Random a ``seed``."""
    if name == "FGD":
        if workload is None:
            raise InputError("FGD needs a target workload", field="policy")
        return FGD(workload)
    if name == "Random":
        if seed is None:
            raise InputError("Random needs a seed", field="policy")
        return RandomPolicy(random.Random(seed))
    simple = {"BestFit": BestFit, "DotProd": DotProd, "GpuPacking": GpuPacking, "GpuClustering": GpuClustering}
    if name not in simple:
        raise InputError(f"unknown policy {name!r}; expected one of {', '.join(POLICY_NAMES)}", field="policy")
    return simple[name]()

