"""Shared GPUs: Koordinator's DeviceShare requests, and a per-node ledger of GPU shares.

Requests follow Koordinator's deviceshare plugin (koordinator-sh/koordinator,
``pkg/scheduler/plugins/deviceshare/utils.go``: ``ValidateDeviceRequest``,
``ConvertDeviceRequest``; ``devicehandler_gpu.go``: ``calcDesiredRequestsAndCountForGPU``):

- ``koordinator.sh/gpu-core``: percent of one GPU's compute (100 = a whole GPU);
- ``koordinator.sh/gpu-memory``: bytes of GPU memory; ``koordinator.sh/gpu-memory-ratio``:
  percent of one GPU's memory;
- ``koordinator.sh/gpu``: core and memory ratio at once; ``koordinator.sh/gpu.shared``: the
  number of GPUs a shared request spreads over;
- ``nvidia.com/gpu``, ``amd.com/gpu``, ``dcu.com/gpu``: whole GPUs (N → core and ratio N×100);
- the Alibaba GPU trace's form, pod annotations ``alibabacloud.com/gpu-milli`` (0–1000 of one
  GPU) and ``alibabacloud.com/gpu-count`` (as the FGD paper's simulator reads them).

Internally compute is in milli-GPU (1000 = one GPU, Koordinator's percent × 10, the trace's
unit) and memory in bytes; a memory ratio is kept in per-mille of the device's memory.

A request is *whole* when each of its GPUs gets the GPU's entire memory (Koordinator's
``isShared`` is false): such a request takes devices nobody uses, all their compute and memory.
Otherwise each of its ``count`` GPUs gives it a share. :class:`NodeGPUState` is an immutable
value: :meth:`NodeGPUState.choose` decides without changing anything, :meth:`NodeGPUState.take`
and :meth:`NodeGPUState.release` return new states, and release after take gives back an equal
state.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from toposched.devices.fgd import MILLI, BestFit, NodeView, Policy, Task, parse_gpu_spec
from toposched.devices.inventory import NodeDevice
from toposched.errors import InputError
from toposched.names import ALIBABA_GPU_COUNT, ALIBABA_GPU_MILLI, ALIBABA_GPU_MODEL, AMD_GPU, HYGON_DCU, NVIDIA_GPU
from toposched.names import KOORDINATOR_GPU as KOORD_GPU
from toposched.names import KOORDINATOR_GPU_CORE as GPU_CORE
from toposched.names import KOORDINATOR_GPU_MEMORY as GPU_MEMORY
from toposched.names import KOORDINATOR_GPU_MEMORY_RATIO as GPU_MEMORY_RATIO
from toposched.names import KOORDINATOR_GPU_SHARED as GPU_SHARED
from toposched.quantity import format_bytes
from toposched.topology.model import Device, DeviceKind
from toposched.workload.pod import Pod

__all__ = [
    "ALIBABA_GPU_COUNT",
    "ALIBABA_GPU_MILLI",
    "ALIBABA_GPU_MODEL",
    "AMD_GPU",
    "DEFAULT_GPU_MEMORY",
    "GPU_CORE",
    "GPU_MEMORY",
    "GPU_MEMORY_RATIO",
    "GPU_MODEL_MEMORY",
    "GPU_SHARED",
    "HYGON_DCU",
    "KOORD_GPU",
    "MAX_GPUS",
    "NVIDIA_GPU",
    "DeviceShare",
    "GPUAllocation",
    "GPUDevice",
    "GPURequest",
    "GPUResource",
    "Host",
    "NodeGPUState",
    "Refusal",
    "convert_device_request",
    "gpu_request",
    "inventory_gpus",
    "koordlet_resources",
    "per_gpu_request",
    "pod_gpu_request",
    "pod_task",
    "validate_device_request",
]


MAX_GPUS = 1024  # more GPUs than any node carries: a request beyond it is absurd
_MAX_GPU_MEMORY = 2**50  # 1 PiB on one GPU is absurd
_UNLIMITED = 2**62  # host resources when the caller does not know them

# Bytes per GPU of the models in the FGD paper's traces (the simulator's MapGpuTypeMemoryMiB,
# pkg/type/open-gpu-share/utils/const.go; its comments give the exact bytes). G2 and G3 are
# undisclosed: their memory is not known.
GPU_MODEL_MEMORY: Mapping[str, int] = MappingProxyType({
    "P4": 7980711936,
    "2080": 11554258944,
    "1080": 11720982528,
    "M40": 12004098048,
    "T4": 15842934784,
    "V100M16": 16944988160,
    "P100": 17070817280,
    "A10": 23835181056,
    "3090": 25446842368,
    "V100M32": 34089205760,
    "A100": 85198045184,
})


class GPUResource(enum.IntFlag):
    """Koordinator's bit per GPU resource name (same bit values as upstream's constants)."""

    NVIDIA_GPU = 1 << 0
    AMD_GPU = 1 << 1
    HYGON_DCU = 1 << 2
    KOORD_GPU = 1 << 4
    GPU_SHARED = 1 << 5
    GPU_CORE = 1 << 6
    GPU_MEMORY = 1 << 7
    GPU_MEMORY_RATIO = 1 << 8


_FLAGS: Mapping[str, GPUResource] = MappingProxyType({
    NVIDIA_GPU: GPUResource.NVIDIA_GPU,
    AMD_GPU: GPUResource.AMD_GPU,
    HYGON_DCU: GPUResource.HYGON_DCU,
    KOORD_GPU: GPUResource.KOORD_GPU,
    GPU_SHARED: GPUResource.GPU_SHARED,
    GPU_CORE: GPUResource.GPU_CORE,
    GPU_MEMORY: GPUResource.GPU_MEMORY,
    GPU_MEMORY_RATIO: GPUResource.GPU_MEMORY_RATIO,
})
_WHOLE_DEVICE = {NVIDIA_GPU: GPUResource.NVIDIA_GPU, AMD_GPU: GPUResource.AMD_GPU, HYGON_DCU: GPUResource.HYGON_DCU}


Problem = tuple[str, str]  # (resource, what is wrong)


def _percentage_problem(name: str, value: int) -> Problem | None:
    """Upstream ``ValidatePercentageResource``: above 100 only whole multiples of 100."""
    if value > 100 and value % 100:
        return name, f"{value} is above 100 but not a multiple of 100 (whole GPUs)"
    return None


def _check_percentages(req: Mapping[str, int]) -> Problem | None:
    for name in (GPU_CORE, GPU_MEMORY_RATIO):
        if name in req and (problem := _percentage_problem(name, req[name])):
            return problem
    return None


def _check_shared(req: Mapping[str, int]) -> Problem | None:
    """Upstream ``ValidDeviceResourceCombinationsGPUShared``."""
    shared = req[GPU_SHARED]
    for name in (GPU_CORE, GPU_MEMORY_RATIO):
        if name in req:
            if req[name] % shared:
                return name, f"{req[name]} is not a multiple of {GPU_SHARED} {shared}"
            if req[name] // shared > 100:
                return name, f"{req[name]} over {GPU_SHARED} {shared} GPUs is more than 100 per GPU"
    return None


def _always(_: Mapping[str, int]) -> Problem | None:
    return None


_R = GPUResource
_VALID: Mapping[GPUResource, Callable[[Mapping[str, int]], Problem | None]] = MappingProxyType({
    _R.NVIDIA_GPU: _always,
    _R.AMD_GPU: _always,
    _R.HYGON_DCU: _always,
    _R.KOORD_GPU: _always,
    _R.GPU_MEMORY: _check_percentages,
    _R.GPU_MEMORY_RATIO: _check_percentages,
    _R.GPU_CORE | _R.GPU_MEMORY: _check_percentages,
    _R.GPU_CORE | _R.GPU_MEMORY_RATIO: _check_percentages,
    _R.GPU_SHARED | _R.GPU_MEMORY: _check_shared,
    _R.GPU_SHARED | _R.GPU_MEMORY_RATIO: _check_shared,
    _R.GPU_SHARED | _R.GPU_CORE | _R.GPU_MEMORY: _check_shared,
    _R.GPU_SHARED | _R.GPU_CORE | _R.GPU_MEMORY_RATIO: _check_shared,
})


def _gpu_part(requests: Mapping[str, int], source: str | None) -> dict[str, int]:
    """The non-zero GPU resources of a request (upstream masks and removes zeros first)."""
    out = {}
    for name, value in requests.items():
        if name not in _FLAGS:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{value!r} is not an integer quantity", field=name, source=source)
        if value < 0:
            raise InputError(f"a negative share ({value}) is not a request", field=name, source=source)
        if value:
            out[name] = value
    return out


def validate_device_request(requests: Mapping[str, int], *, source: str | None = None) -> GPUResource:
    """Koordinator's ``ValidateDeviceRequest`` for GPUs: the combination of GPU resources asked for.

    Refuses (InputError naming ``source`` and the resource) an empty request, a negative value,
    ``koordinator.sh/gpu``, ``gpu-core`` or ``gpu-memory-ratio`` above 100 and not a multiple
    of 100, a combination upstream does not accept (e.g. ``nvidia.com/gpu`` with ``gpu-core``,
    or ``gpu-core`` alone), and ``gpu.shared`` that does not divide core/ratio into ≤ 100 each.
    """
    req = _gpu_part(requests, source)
    if not req:
        raise InputError("the request names no GPU resource", field="resources", source=source)
    combination = _R(0)
    for name in sorted(req):
        combination |= _FLAGS[name]
    check = _VALID.get(combination)
    if check is None:
        raise InputError(f"Koordinator does not accept the GPU resource combination {sorted(req)}",
                         field=",".join(sorted(req)), source=source)
    problem = _percentage_problem(KOORD_GPU, req[KOORD_GPU]) if KOORD_GPU in req else check(req)
    if problem:
        raise InputError(problem[1], field=problem[0], source=source)
    return combination


def convert_device_request(requests: Mapping[str, int], combination: GPUResource) -> dict[str, int]:
    """Koordinator's ``ConvertDeviceRequest``: the request in gpu-core/-memory/-memory-ratio terms.

    Whole-device counts N become core and ratio N×100; ``koordinator.sh/gpu`` X becomes core and
    ratio X; the others keep their resources. An unknown combination converts to ``{}``.
    """
    req = {k: v for k, v in requests.items() if k in _FLAGS and v}
    for name, flag in _WHOLE_DEVICE.items():
        if combination == flag:
            return {GPU_CORE: req[name] * 100, GPU_MEMORY_RATIO: req[name] * 100}
    if combination == _R.KOORD_GPU:
        return {GPU_CORE: req[KOORD_GPU], GPU_MEMORY_RATIO: req[KOORD_GPU]}
    if combination not in _VALID:
        return {}
    return {name: req[name] for name in (GPU_SHARED, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO) if name in req}


def per_gpu_request(converted: Mapping[str, int]) -> tuple[dict[str, int], int, bool]:
    """Koordinator's ``calcDesiredRequestsAndCountForGPU``: (request per GPU, GPUs, shared).

    The GPU count is ``gpu.shared`` if given, else ratio/100 for a ratio above 100 that is a
    multiple of 100, else 1; core, ratio and memory are divided by it (integer division). The
    request is shared when the ratio per GPU is below 100 or memory is asked in bytes.
    """
    count = 1
    if converted.get(GPU_SHARED, 0) > 0:
        count = converted[GPU_SHARED]
    elif converted.get(GPU_MEMORY_RATIO, 0) > 100 and converted[GPU_MEMORY_RATIO] % 100 == 0:
        count = converted[GPU_MEMORY_RATIO] // 100
    per: dict[str, int] = {}
    shared = False
    if GPU_CORE in converted:
        per[GPU_CORE] = converted[GPU_CORE] // count
    if GPU_MEMORY_RATIO in converted:
        per[GPU_MEMORY_RATIO] = converted[GPU_MEMORY_RATIO] // count
        shared = per[GPU_MEMORY_RATIO] < 100
    elif GPU_MEMORY in converted:
        per[GPU_MEMORY] = converted[GPU_MEMORY] // count
        shared = True
    return per, count, shared


@dataclass(frozen=True, slots=True)
class GPURequest:
    """What a pod asks of GPUs, per GPU: ``count`` GPUs, each giving it this share.

    ``core`` is milli-GPU of compute (None when the request names no compute); memory is either
    ``memory_ratio`` (per-mille of the device's memory) or ``memory_bytes``. ``shared`` is
    Koordinator's ``isShared``: false means each GPU is taken whole.
    """

    count: int
    core: int | None
    memory_ratio: int | None
    memory_bytes: int | None
    shared: bool

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MAX_GPUS:
            raise InputError(f"{self.count} GPUs is not a real request (1..{MAX_GPUS})", field="gpu.count")
        if self.core is not None and not 0 <= self.core <= MILLI:
            raise InputError(f"{self.core} milli-GPU of compute per GPU is not within one GPU", field="gpu.core")
        if (self.memory_ratio is None) == (self.memory_bytes is None):
            raise InputError("a GPU request names its memory either as a ratio or in bytes", field="gpu.memory")
        if self.memory_ratio is not None and not 0 < self.memory_ratio <= MILLI:
            raise InputError(f"{self.memory_ratio}‰ of a GPU's memory is not within one GPU", field="gpu.memory")
        if self.memory_bytes is not None and not 0 < self.memory_bytes <= _MAX_GPU_MEMORY:
            raise InputError(f"{self.memory_bytes} bytes of GPU memory per GPU is absurd", field="gpu.memory")
        if not self.shared and self.memory_ratio != MILLI:
            raise InputError("only a request for each GPU's whole memory takes GPUs whole", field="gpu.shared")

    @property
    def whole(self) -> bool:
        """Whether each GPU is taken whole (all compute, all memory, nobody else on it)."""
        return not self.shared

    def memory_on(self, device_memory: int) -> int:
        """Bytes this request takes on a GPU with ``device_memory`` bytes (Koordinator's rounding down)."""
        if self.memory_bytes is not None:
            return self.memory_bytes
        return device_memory * self.memory_ratio // MILLI

    def milli_on(self, device_memory: int | None = None) -> int:
        """The request per GPU as one milli-GPU number for the packing policies: max(compute, memory).

        Memory in bytes is rounded up to per-mille of ``device_memory``, which it then needs.
        """
        if self.whole:
            return MILLI
        if self.memory_ratio is not None:
            return max(self.core or 0, self.memory_ratio)
        if device_memory is None:
            raise InputError("GPU memory asked in bytes needs the GPU's memory to compare shares", field=GPU_MEMORY)
        memory = -(-self.memory_on(device_memory) * MILLI // device_memory)
        return max(1, min(MILLI, max(self.core or 0, memory)))

    def describe(self) -> str:
        """The request per GPU in words, e.g. ``2 whole GPUs`` or ``1 GPU with 50% compute and 4Gi``."""
        if self.whole:
            return f"{self.count} whole GPU{'s' if self.count > 1 else ''}"
        parts = []
        if self.core:
            parts.append(f"{self.core / 10:g}% compute")
        parts.append(format_bytes(self.memory_bytes) if self.memory_bytes is not None
                     else f"{self.memory_ratio / 10:g}% memory")
        return f"{self.count} GPU{'s' if self.count > 1 else ''} with {' and '.join(parts)} each"

    @classmethod
    def from_trace(cls, num_gpu: int, gpu_milli: int, *, source: str | None = None) -> GPURequest | None:
        """The Alibaba trace's request: ``num_gpu`` GPUs of ``gpu_milli`` (0–1000) each; None for none.

        Compute and memory shares are both ``gpu_milli`` (the simulator's one GPU dimension). As
        upstream, several GPUs are whole ones; ``gpu_milli`` 0 asks for no GPU.
        """
        for name, value in (("num_gpu", num_gpu), ("gpu_milli", gpu_milli)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(f"{value!r} is not a non-negative integer", field=name, source=source)
        if gpu_milli > MILLI:
            raise InputError(f"{gpu_milli} milli-GPU is more than one GPU", field="gpu_milli", source=source)
        if gpu_milli == 0:
            return None
        if num_gpu == 0:
            raise InputError(f"{gpu_milli} milli-GPU on 0 GPUs is inconsistent", field="num_gpu", source=source)
        if num_gpu > 1 and gpu_milli != MILLI:
            raise InputError(f"{num_gpu} GPUs of {gpu_milli} milli-GPU: several GPUs are whole ones in the trace",
                             field="gpu_milli", source=source)
        return cls(num_gpu, gpu_milli, gpu_milli, None, gpu_milli < MILLI)


def gpu_request(requests: Mapping[str, int], *, source: str | None = None) -> GPURequest | None:
    """The GPU request of a container's or pod's resources (canonical ints); None when there is none.

    Validation, conversion and the per-GPU split are Koordinator's. Beyond upstream, a request
    whose per-GPU compute or memory ratio exceeds one GPU (e.g. ``gpu-core: 200`` with
    ``gpu-memory: 64Gi``, which upstream accepts but can never place) is refused as inconsistent,
    as are absurd sizes.
    """
    if not _gpu_part(requests, source):
        return None
    combination = validate_device_request(requests, source=source)
    per, count, shared = per_gpu_request(convert_device_request(requests, combination))
    for name in (GPU_CORE, GPU_MEMORY_RATIO):
        if per.get(name, 0) > 100:
            raise InputError(f"{per[name]} per GPU (over {count} GPU{'s' if count > 1 else ''}) is more than one GPU: "
                             "ask whole GPUs with gpu-core and gpu-memory-ratio both multiples of 100",
                             field=name, source=source)
    if count > MAX_GPUS:
        raise InputError(f"{count} GPUs is more than any node has", field=",".join(sorted(_gpu_part(requests, source))),
                         source=source)
    try:
        return GPURequest(
            count=count,
            core=per[GPU_CORE] * 10 if GPU_CORE in per else None,
            memory_ratio=per[GPU_MEMORY_RATIO] * 10 if GPU_MEMORY_RATIO in per else None,
            memory_bytes=per.get(GPU_MEMORY),
            shared=shared,
        )
    except InputError as err:
        raise err.with_source(source) from None


def _trace_annotation(pod: Pod, name: str, source: str) -> int | None:
    text = pod.annotations.get(name)
    if text is None:
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        raise InputError(f"{text!r} is not an integer", field=f"metadata.annotations.{name}", source=source) from None
    return value


def pod_gpu_request(pod: Pod) -> GPURequest | None:
    """The pod's GPU request: Koordinator/device-plugin resources of the pod request, or the trace's
    ``alibabacloud.com/gpu-milli``/``gpu-count`` annotations; None when it asks for no GPU.

    The pod request is ``Pod.effective_requests`` (upstream's ``resource.PodRequests``). Asking in
    both forms at once is refused as ambiguous.
    """
    source = f"pod {pod.key}"
    koord = gpu_request(pod.effective_requests(), source=source)
    milli = _trace_annotation(pod, ALIBABA_GPU_MILLI, source)
    count = _trace_annotation(pod, ALIBABA_GPU_COUNT, source)
    if milli is None and count is None:
        return koord
    trace = GPURequest.from_trace(1 if count is None else count, 0 if milli is None else milli, source=source)
    if koord is not None and trace is not None:
        raise InputError("asks for GPUs both in resources and in alibabacloud.com annotations",
                         field=f"metadata.annotations.{ALIBABA_GPU_MILLI}", source=source)
    return trace or koord


def pod_task(pod: Pod, *, gpu_memory: int | None = None) -> Task:
    """The pod as the packing policies see it (:class:`~toposched.devices.fgd.Task`).

    CPU and memory come from the pod request, GPUs from :func:`pod_gpu_request`, allowed models
    from the ``alibabacloud.com/gpu-card-model`` annotation (``A|B``). A request of GPU memory in
    bytes needs ``gpu_memory`` (the node model's bytes per GPU) to become milli-GPU.
    """
    requests = pod.effective_requests()
    request = pod_gpu_request(pod)
    milli, count = 0, 0
    if request is not None:
        try:
            milli, count = request.milli_on(gpu_memory), request.count
        except InputError as err:
            raise err.with_source(f"pod {pod.key}") from None
    return Task(cpu=requests.get("cpu", 0), memory=requests.get("memory", 0), gpu_milli=milli, num_gpu=count,
                gpu_models=parse_gpu_spec(pod.annotations.get(ALIBABA_GPU_MODEL, "")))


@dataclass(frozen=True, slots=True)
class GPUDevice:
    """One GPU of a node: its ID (as the device plugin or inventory names it), memory, NUMA node."""

    id: str
    memory: int
    numa: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InputError(f"{self.id!r} is not a device ID", field="gpu.id")
        if isinstance(self.memory, bool) or not isinstance(self.memory, int) or not 0 < self.memory <= _MAX_GPU_MEMORY:
            raise InputError(f"{self.memory!r} is not a GPU's memory in bytes", field=f"gpu[{self.id}].memory")


@dataclass(frozen=True, slots=True)
class DeviceShare:
    """What one GPU gives an allocation: compute in milli-GPU and memory in bytes."""

    device: str
    minor: int
    core: int
    memory: int
    whole: bool


@dataclass(frozen=True, slots=True)
class GPUAllocation:
    """The GPUs a request got on one node, in device order."""

    request: GPURequest
    shares: tuple[DeviceShare, ...]

    @property
    def devices(self) -> tuple[str, ...]:
        """The device IDs, in device order."""
        return tuple(s.device for s in self.shares)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a node cannot give the request (for Status reasons and ``toposched explain``)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Host:
    """What a packing policy knows of the node besides its GPUs, and of the pod besides its GPUs.

    Free CPU (millicores) and memory (bytes) on the node, the pod's CPU and memory request, and
    the GPU pods on the node per :attr:`~toposched.devices.fgd.Task.tag` (GpuClustering).
    """

    cpu_free: int = _UNLIMITED
    memory_free: int = _UNLIMITED
    pod_cpu: int = 0
    pod_memory: int = 0
    affinity: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


_DEFAULT_POLICY = BestFit()


@dataclass(frozen=True, slots=True)
class NodeGPUState:
    """A node's GPUs and what is used of each: compute in milli-GPU, memory in bytes.

    ``devices`` are in the node's device order (the inventory's order, PCI address order for a
    machine); a GPU's *minor* is its position there. ``model`` names the GPU model ("" when
    unknown) for the policies' model constraints.
    """

    devices: tuple[GPUDevice, ...]
    model: str = ""
    used_core: tuple[int, ...] = ()
    used_memory: tuple[int, ...] = ()
    _index: Mapping[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        devices = tuple(self.devices)
        n = len(devices)
        used_core = tuple(self.used_core) or (0,) * n
        used_memory = tuple(self.used_memory) or (0,) * n
        if len(used_core) != n or len(used_memory) != n:
            raise InputError(f"usage is given for {len(used_core)}/{len(used_memory)} of {n} GPUs", field="gpus.used")
        index = {d.id: i for i, d in enumerate(devices)}
        if len(index) != n:
            raise InputError("GPU device IDs repeat", field="gpus.id")
        for d, core, mem in zip(devices, used_core, used_memory):
            if not 0 <= core <= MILLI or not 0 <= mem <= d.memory:
                raise InputError(f"GPU {d.id} is used beyond its capacity ({core} milli, {mem} bytes)",
                                 field=f"gpus[{d.id}].used")
        object.__setattr__(self, "devices", devices)
        object.__setattr__(self, "used_core", used_core)
        object.__setattr__(self, "used_memory", used_memory)
        object.__setattr__(self, "_index", MappingProxyType(index))

    @classmethod
    def from_devices(cls, devices: Iterable[Device], *, default_memory: int, model: str = "") -> NodeGPUState:
        """A free state from a machine's devices: its GPUs, in the order given, named by PCI address.

        A GPU whose memory the topology does not know gets ``default_memory`` bytes.
        """
        gpus = [d for d in devices if d.kind == DeviceKind.GPU]
        return cls(tuple(GPUDevice(d.address, d.memory_bytes or default_memory, d.numa_id) for d in gpus), model)

    @classmethod
    def uniform(cls, count: int, memory: int, *, model: str = "", prefix: str = "gpu") -> NodeGPUState:
        """A free node with ``count`` identical GPUs named ``<prefix>0`` … (e.g. a trace node)."""
        return cls(tuple(GPUDevice(f"{prefix}{i}", memory) for i in range(count)), model)

    def minor(self, device: str) -> int:
        """The minor number of a GPU: its position in the node's device order."""
        try:
            return self._index[device]
        except KeyError:
            raise InputError(f"no GPU {device!r} on this node", field="device") from None

    def free_core(self, i: int) -> int:
        """Free compute of GPU ``i`` in milli-GPU."""
        return MILLI - self.used_core[i]

    def free_memory(self, i: int) -> int:
        """Free memory of GPU ``i`` in bytes."""
        return self.devices[i].memory - self.used_memory[i]

    def free_milli(self) -> tuple[int, ...]:
        """Each GPU's free share as one milli-GPU number (the scarcer of compute and memory)."""
        return tuple(min(MILLI - core, (d.memory - memory) * MILLI // d.memory)
                     for d, core, memory in zip(self.devices, self.used_core, self.used_memory))

    def is_free(self, i: int) -> bool:
        """Whether nothing of GPU ``i`` is used."""
        return self.used_core[i] == 0 and self.used_memory[i] == 0

    def fits(self, i: int, request: GPURequest) -> bool:
        """Whether GPU ``i`` can give the request its share (or, for a whole request, is unused)."""
        if request.whole:
            return self.is_free(i)
        return self.free_core(i) >= (request.core or 0) and self.free_memory(i) >= request.memory_on(self.devices[i].memory)

    def count_fitting(self, request: GPURequest, excluded: Collection[str] = ()) -> int:
        """How many GPUs not in ``excluded`` (device IDs) :meth:`fits` the request."""
        rows = zip(self.devices, self.used_core, self.used_memory)
        if request.whole:
            return sum(1 for d, core, memory in rows if not core and not memory and d.id not in excluded)
        need = request.core or 0
        return sum(1 for d, core, memory in rows
                   if MILLI - core >= need and d.memory - memory >= request.memory_on(d.memory) and d.id not in excluded)

    def _candidate_indices(self, candidates: Iterable[str] | None) -> set[int]:
        if candidates is None:
            return set(range(len(self.devices)))
        if isinstance(candidates, str):
            raise InputError("candidates must be a collection of device IDs, not one string", field="candidates")
        out = set()
        for device in candidates:
            if device not in self._index:
                raise InputError(f"candidate {device!r} is not a GPU of this node", field="candidates")
            out.add(self._index[device])
        return out

    def choose(self, request: GPURequest, *, candidates: Iterable[str] | None = None, policy: Policy | None = None,
               host: Host | None = None, tie_order: Sequence[int] | None = None) -> GPUAllocation | Refusal:
        """Which GPUs the request would get, without changing anything; or why it cannot.

        Only ``candidates`` (device IDs, e.g. the GPUs on the pod's NUMA nodes; default all) are
        considered. A whole request needs ``count`` unused GPUs; a shared one ``count`` GPUs with
        its compute and memory free. Among those ``policy`` (default upstream's ``best``) picks;
        ``host`` gives it the node's free CPU/memory and the pod's (default: plenty, none).
        ``tie_order`` (every GPU's index once) is the order in which the policy meets the GPUs,
        so among GPUs it rates equal it takes the first there (default: device order).
        """
        allowed = self._candidate_indices(candidates)
        eligible = [i in allowed and self.fits(i, request) for i in range(len(self.devices))]
        fitting = sum(eligible)
        if fitting < request.count:
            return self.too_few(request, fitting, len(allowed))
        host = host or Host()
        view = NodeView(host.cpu_free, host.memory_free, self.free_milli(), self.model, host.affinity)
        smallest = min(self.devices[i].memory for i, ok in enumerate(eligible) if ok)
        task = Task(cpu=host.pod_cpu, memory=host.pod_memory, gpu_milli=request.milli_on(smallest), num_gpu=request.count)
        policy = policy or _DEFAULT_POLICY
        if tie_order is None:
            def pick(allowed: list[bool]) -> tuple[int, ...] | None:
                return policy.choose_gpus(view, task, allowed)
        else:
            order = list(tie_order)
            if sorted(order) != list(range(len(self.devices))):
                raise InputError(f"tie order {order} does not name each of the {len(self.devices)} GPUs once",
                                 field="tie_order")
            free = view.gpu_free
            seen = replace(view, gpu_free=tuple(free[i] for i in order))

            def pick(allowed: list[bool]) -> tuple[int, ...] | None:
                got = policy.choose_gpus(seen, task, [allowed[i] for i in order])
                return None if got is None else tuple(order[i] for i in got)
        chosen = pick(eligible)
        if chosen is not None and request.count > 1:
            chosen = self._on_one_numa_node(chosen, eligible, request.count, pick)
        if chosen is None:
            return Refusal(f"the {policy.name} policy found no GPUs for {request.describe()}")
        picked = sorted(set(chosen))
        if len(picked) != request.count or any(not (0 <= i < len(eligible) and eligible[i]) for i in picked):
            raise InputError(f"policy {policy!r} chose GPUs {list(chosen)} that the request cannot use", field="policy")
        return GPUAllocation(request, tuple(self._share(i, request) for i in picked))

    def _on_one_numa_node(self, chosen: tuple[int, ...], eligible: list[bool], count: int,
                          pick: Callable[[list[bool]], tuple[int, ...] | None]) -> tuple[int, ...]:
        """A multi-GPU choice spread over several NUMA nodes, taken again on one where one NUMA node
        has ``count`` eligible GPUs: the one with the fewest that suffice (lowest id on ties), so
        that a NUMA node with more stays whole for larger pods. The policy picks inside it. GPUs
        on one NUMA node share its PCIe root complex and memory; the kubelet's device manager
        aligns a multi-GPU request the same way. Kept as chosen where GPUs lack NUMA ids."""
        numa = [d.numa for d in self.devices]
        if len({numa[i] for i in chosen}) == 1 or any(numa[i] is None for i, ok in enumerate(eligible) if ok):
            return chosen
        per_numa = Counter(numa[i] for i, ok in enumerate(eligible) if ok)
        enough = sorted((n, node) for node, n in per_numa.items() if n >= count)
        if not enough:
            return chosen
        node = enough[0][1]
        again = pick([ok and numa[i] == node for i, ok in enumerate(eligible)])
        return chosen if again is None else again

    @staticmethod
    def too_few(request: GPURequest, fitting: int, candidates: int) -> Refusal:
        """:meth:`choose`'s refusal when only ``fitting`` of ``candidates`` GPUs fit (fewer than requested)."""
        if not candidates:
            return Refusal(f"needs {request.describe()}; no candidate GPUs")
        verb = ("is" if fitting == 1 else "are") if request.whole else ("has" if fitting == 1 else "have")
        state = "free" if request.whole else "that free"
        return Refusal(f"needs {request.describe()}; {fitting} of {candidates} candidate GPUs {verb} {state}")

    def _share(self, i: int, request: GPURequest) -> DeviceShare:
        device = self.devices[i]
        if request.whole:
            return DeviceShare(device.id, i, MILLI, device.memory, True)
        return DeviceShare(device.id, i, request.core or 0, request.memory_on(device.memory), False)

    def take(self, allocation: GPUAllocation, *, source: str | None = None) -> NodeGPUState:
        """The state with the allocation's shares used; InputError (naming ``source``) if they do not fit.

        Rebuilding a ledger from annotations goes through here, so an over-committed or foreign
        allocation is refused rather than recorded.
        """
        core, memory = list(self.used_core), list(self.used_memory)
        seen: set[int] = set()
        for share in allocation.shares:
            i = self._share_index(share, seen, source)
            if share.whole and not self.is_free(i):
                raise InputError(f"GPU {share.device} is not free for a whole-GPU allocation", field="gpu", source=source)
            core[i] += share.core
            memory[i] += share.memory
            if core[i] > MILLI or memory[i] > self.devices[i].memory:
                raise InputError(f"GPU {share.device} would be used beyond its compute or memory", field="gpu",
                                 source=source)
        return NodeGPUState(self.devices, self.model, tuple(core), tuple(memory))

    def release(self, allocation: GPUAllocation, *, source: str | None = None) -> NodeGPUState:
        """The state without the allocation's shares; InputError if the node does not hold them."""
        core, memory = list(self.used_core), list(self.used_memory)
        seen: set[int] = set()
        for share in allocation.shares:
            i = self._share_index(share, seen, source)
            core[i] -= share.core
            memory[i] -= share.memory
            if core[i] < 0 or memory[i] < 0:
                raise InputError(f"GPU {share.device} does not hold this allocation", field="gpu", source=source)
        return NodeGPUState(self.devices, self.model, tuple(core), tuple(memory))

    def _share_index(self, share: DeviceShare, seen: set[int], source: str | None) -> int:
        i = self._index.get(share.device)
        if i is None or i != share.minor:
            raise InputError(f"GPU {share.device} (minor {share.minor}) is not on this node", field="gpu", source=source)
        if i in seen:
            raise InputError(f"GPU {share.device} appears twice in one allocation", field="gpu", source=source)
        if share.core < 0 or share.memory < 0:
            raise InputError(f"a negative share of GPU {share.device}", field="gpu", source=source)
        seen.add(i)
        return i

    def allocate(self, request: GPURequest, *, candidates: Iterable[str] | None = None, policy: Policy | None = None,
                 host: Host | None = None) -> tuple[NodeGPUState, GPUAllocation] | Refusal:
        """:meth:`choose` then :meth:`take`: the new state and the allocation, or the refusal."""
        chosen = self.choose(request, candidates=candidates, policy=policy, host=host)
        if isinstance(chosen, Refusal):
            return chosen
        return self.take(chosen), chosen


DEFAULT_GPU_MEMORY = 16 * 2**30  # a GPU whose memory neither the topology nor its model tells


def inventory_gpus(inventory: Iterable[NodeDevice], *, default_memory: int = DEFAULT_GPU_MEMORY) -> tuple[GPUDevice, ...]:
    """The GPUs of a node's device inventory (``NodeDevice`` values), in its order, with their memory.

    Memory comes from the topology, else from the GPU model (:data:`GPU_MODEL_MEMORY`), else
    ``default_memory``.
    """
    return tuple(GPUDevice(d.id, d.memory_bytes or GPU_MODEL_MEMORY.get(d.model or "", default_memory), d.numa_id)
                 for d in inventory if d.kind == DeviceKind.GPU)


def koordlet_resources(gpus: Iterable[GPUDevice]) -> dict[str, int]:
    """The node-level GPU-share resources koordlet reports for these GPUs (none without GPUs)."""
    gpus = tuple(gpus)
    if not gpus:
        return {}
    return {GPU_CORE: 100 * len(gpus), GPU_MEMORY_RATIO: 100 * len(gpus), GPU_MEMORY: sum(g.memory for g in gpus)}
