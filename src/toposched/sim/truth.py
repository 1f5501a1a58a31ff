"""A simulated node's ground truth: what really runs there, decided as the real node decides.

The kubelet's own predicates come first: a pod whose node selector the node's labels do not
match is rejected (``NodeAffinity``). On a kubelet-managed node the node's own kubelet model
admits or rejects every pod that is bound to it, choosing exact CPUs, memory and devices itself
(TopologyAffinityError and the other upstream reasons included). On an agent-managed node the kubelet only checks allocatable and
the toposched agent applies the scheduler's placement as given; the truth refuses a placement
that would give a CPU to two pods or over-commit a NUMA node's memory, so a scheduler bug shows
up as a rejection instead of silently corrupting the simulation. Shares of GPUs
(``koordinator.sh/gpu-core`` ...) go where the scheduler's ``device-allocated`` annotation says
(the node side enforces it, as koordlet does); without one the node picks the best-fitting GPU
itself, and a pod no GPU can take is rejected (``GPUShareError``).

Each admitted pod is recorded with the facts the metrics need: its node, its NUMA nodes, its
exclusive CPUs, whether it sits on the fewest NUMA nodes its aligned request could take on this
machine, and the NUMA distance it spans.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations

from toposched.devices import DeviceInventory
from toposched.devices.fgd import NodeView
from toposched.devices.koordinator import gpu_allocation, parse_device_allocated
from toposched.devices.share import (
    GPUAllocation,
    NodeGPUState,
    Refusal,
    inventory_gpus,
    koordlet_resources,
    pod_gpu_request,
)
from toposched.errors import InputError
from toposched.kubelet import KubeletNode
from toposched.kubelet.cpu_manager import pod_guaranteed_cpus
from toposched.kubelet.description import DescribedDevice
from toposched.names import (
    AGENT_PLACEMENT_ERROR,
    FINGERPRINT_ATTRIBUTE,
    GPU_SHARE_ERROR,
    NODE_AFFINITY_ERROR,
    PLACEMENT_ANNOTATION,
)
from toposched.node_report import node_report
from toposched.scheduler.fingerprint import pods_fingerprint
from toposched.scheduler.placement import Placement
from toposched.scheduler.plugins.gpu_share import DEVICE_ALLOCATED, gpus_held_whole, shares_gpu
from toposched.sim.model import CPU_ENFORCEMENT_AGENT, SimNode
from toposched.topology import CPUSet
from toposched.topology.nrt import NodeResourceTopology, parse_nrt
from toposched.workload import Pod

__all__ = ["NodeTruth", "Outcome", "RunningPod"]


@dataclass(frozen=True, slots=True)
class RunningPod:
    """A pod the node admitted, with the facts the metrics read."""

    pod: Pod
    node: str  # the node's name
    start: float
    numa_nodes: frozenset[int]
    cpus: CPUSet  # exclusive CPUs (empty: the shared pool)
    aligned: bool | None  # on the fewest NUMA nodes possible; None when the pod pins nothing
    spread_distance: float | None  # mean NUMA distance between its nodes when it spans several
    shares_core: bool  # one of its CPUs is an SMT sibling of another pod's exclusive CPU


@dataclass(frozen=True, slots=True)
class Outcome:
    """The node's answer to a bound pod."""

    admitted: bool
    reason: str = ""
    message: str = ""
    running: RunningPod | None = None


class NodeTruth:
    """One simulated node: the kubelet model (kubelet-managed) or kubelet + agent (agent-managed)."""

    def __init__(self, node: SimNode) -> None:
        self.node = node
        self.agent = node.cpu_enforcement == CPU_ENFORCEMENT_AGENT
        config = node.kubelet
        if self.agent:
            # The agent owns cpusets: the kubelet runs without the static CPU manager and the
            # Topology Manager only aligns what it still manages (memory, devices).
            config = dataclasses.replace(config, cpu_manager_policy="none", cpu_manager_options={})
        plugins = {r: list(devs) for r, devs in (node.device_plugins or {}).items()}
        inventory = DeviceInventory.from_machine(node.machine)
        self.gpus = NodeGPUState(inventory_gpus(inventory), node.gpu_model or "")
        self.inventory = inventory
        self._shares: dict[str, GPUAllocation] = {}
        self.kubelet = KubeletNode(node.machine, config, device_plugins=plugins,
                                   extended_resources=koordlet_resources(self.gpus.devices), name=node.name)
        self.pods: dict[str, RunningPod] = {}
        self._owner: dict[int, str] = {}  # exclusive CPU -> pod uid
        self._agent_memory: dict[int, int] = {}  # agent-managed: NUMA id -> bytes placed there
        self._agent_pinned: dict[str, dict[int, int]] = {}  # agent-managed: pod uid -> NUMA id -> bytes
        self._report: tuple[int, NodeResourceTopology] | None = None
        self._agent_report: tuple[int, NodeResourceTopology] | None = None
        self._placements: dict[str, Placement] = {}  # pod uid -> the placement it was bound with
        self._devices = _described_devices(node, inventory)
        self._version = 0
        self._sibling_masks = {cpu.id: node.machine.siblings(cpu.id).mask for cpu in node.machine.cpus}
        self._distances = {n.id: n.distances for n in node.machine.numa_nodes}
        self._zone_capacity = {n.id: n.memory_bytes for n in node.machine.numa_nodes}

    # ---- admission ---------------------------------------------------------------------------

    def admit(self, pod: Pod, placement: Placement | None, now: float) -> Outcome:
        """Admit a pod bound here, as the node would; a rejection changes nothing.

        The kubelet's own predicates come first: a pod whose ``nodeSelector`` does not match the
        node's labels is rejected with upstream's reason ``NodeAffinity``.
        """
        labels = self.node.labels
        if any(labels.get(key) != value for key, value in pod.node_selector.items()):
            return Outcome(False, NODE_AFFINITY_ERROR, "Predicate NodeAffinity failed: node(s) didn't match Pod's node "
                                                  "affinity/selector")
        admission = self.kubelet.admit(pod)
        if not admission.admitted:
            return Outcome(False, admission.reason, admission.message)
        uid = pod.uid or pod.key
        if shares_gpu(pod):
            share = self._gpu_share(pod, placement)
            if isinstance(share, str):
                self.kubelet.release(uid)
                return Outcome(False, GPU_SHARE_ERROR, share)
            self.gpus = self.gpus.take(share)
            self._shares[uid] = share
        if self.agent:
            cpus, numa, refusal = self._agent_share(pod, placement)
            if refusal:
                self._release_share(uid)
                self.kubelet.release(uid)
                return Outcome(False, AGENT_PLACEMENT_ERROR, refusal)
        else:
            cpus = CPUSet.from_mask(_mask(c.cpuset for c in admission.containers.values()))
            numa = admission.numa_nodes()
        shares = any(self._owner.get(other) not in (None, uid)
                     for cpu in cpus for other in CPUSet.from_mask(self._sibling_masks[cpu]))
        for cpu in cpus:
            self._owner[cpu] = uid
        if self.agent and placement is not None:
            pinned = self._agent_pinned[uid] = {}
            for c in placement.containers.values():
                for n, resources in c.memory.items():
                    pinned[n] = pinned.get(n, 0) + resources.get("memory", 0)
                    self._agent_memory[n] = self._agent_memory.get(n, 0) + resources.get("memory", 0)
        running = RunningPod(pod, self.node.name, now, numa, cpus, self._aligned(pod, numa), self._spread(numa), shares)
        self.pods[uid] = running
        if placement is not None and placement.node == self.node.name:
            self._placements[uid] = placement
        self._version += 1
        return Outcome(True, running=running)

    def _gpu_share(self, pod: Pod, placement: Placement | None) -> GPUAllocation | str:
        """The GPUs a share pod gets: the scheduler's device-allocated choice, else the node's own best fit."""
        whole = gpus_held_whole(self.kubelet, self.inventory)
        source = f"pod {pod.key}"
        annotation = placement.extra_annotations.get(DEVICE_ALLOCATED) if placement is not None else None
        try:
            if annotation is not None:
                entries = parse_device_allocated(annotation, source=source).get("gpu", ())
                allocation = gpu_allocation(entries, self.gpus, source=source)
                if whole & set(allocation.devices):
                    return f"GPUs {sorted(whole & set(allocation.devices))} are held whole by other pods"
                self.gpus.take(allocation, source=source)  # refuses an over-committed share
                return allocation
            request = pod_gpu_request(pod)
        except InputError as err:
            return str(err)
        chosen = self.gpus.choose(request, candidates=[d.id for d in self.gpus.devices if d.id not in whole])
        return chosen.reason if isinstance(chosen, Refusal) else chosen

    def _release_share(self, uid: str) -> None:
        share = self._shares.pop(uid, None)
        if share is not None:
            self.gpus = self.gpus.release(share)

    def _agent_share(self, pod: Pod, placement: Placement | None) -> tuple[CPUSet, frozenset[int], str]:
        """The CPUs and NUMA nodes the agent gives a pod, or why it cannot."""
        if placement is None or placement.node != self.node.name:
            return CPUSet(), frozenset(), ""  # no placement: the pod runs on the shared pool
        cpus = placement.cpuset
        taken = [cpu for cpu in cpus if cpu in self._owner]
        if taken:
            return cpus, placement.numa_nodes, f"CPUs {CPUSet(taken)} already belong to another pod"
        for c in placement.containers.values():
            for n, resources in c.memory.items():
                want = self._agent_memory.get(n, 0) + resources.get("memory", 0)
                if want > self._zone_capacity.get(n, 0):
                    return cpus, placement.numa_nodes, f"NUMA node {n} memory over-committed"
        return cpus, placement.numa_nodes, ""

    def release(self, uid: str) -> RunningPod | None:
        """The pod finished or was deleted: its resources come back."""
        running = self.pods.pop(uid, None)
        if running is None:
            return None
        self.kubelet.release(uid)
        self._release_share(uid)
        self._placements.pop(uid, None)
        for cpu in running.cpus:
            self._owner.pop(cpu, None)
        for n, amount in self._agent_pinned.pop(uid, {}).items():
            self._agent_memory[n] -= amount
        self._version += 1
        return running

    # ---- facts for the metrics -----------------------------------------------------------------

    def _aligned(self, pod: Pod, numa: frozenset[int]) -> bool | None:
        cpus = pod_guaranteed_cpus(pod)
        if not cpus or not numa:
            return None
        return len(numa) <= self.fewest_numa_nodes(cpus)

    def fewest_numa_nodes(self, cpus: int) -> int:
        """The fewest NUMA nodes whose allocatable CPUs can hold ``cpus`` exclusive CPUs."""
        reserved = self.node.kubelet.reserved_system_cpus or CPUSet()
        sizes = sorted((len(n.cpus - reserved) for n in self.node.machine.numa_nodes if n.cpus), reverse=True)
        total = 0
        for count, size in enumerate(sizes, start=1):
            total += size
            if total >= cpus:
                return count
        return max(1, len(sizes))

    def _spread(self, numa: frozenset[int]) -> float | None:
        if len(numa) < 2:
            return None
        pairs = list(combinations(sorted(numa), 2))
        return sum(self._distances[a].get(b, 0) for a, b in pairs) / len(pairs)

    @property
    def version(self) -> int:
        """A number that changes whenever a pod is admitted or released here."""
        return self._version

    def gpu_view(self) -> NodeView:
        """The node as the GPU packing policies see it (:class:`~toposched.devices.fgd.NodeView`).

        Free CPU and memory are allocatable minus requested; each GPU's free milli-GPU is what its
        shares leave (the scarcer of compute and memory), 0 for a GPU the kubelet gave whole to a
        device-plugin pod; the model is the node's GPU model ("" when unknown).
        """
        allocatable, requested = self.allocatable, self.requested
        whole = gpus_held_whole(self.kubelet, self.inventory) if self.gpus.devices else set()
        free = [0 if d.id in whole else f for d, f in zip(self.gpus.devices, self.gpus.free_milli())]
        return NodeView(max(0, allocatable.get("cpu", 0) - requested.get("cpu", 0)),
                        max(0, allocatable.get("memory", 0) - requested.get("memory", 0)), tuple(free), self.gpus.model)

    # ---- what the node reports -----------------------------------------------------------------

    @property
    def requested(self) -> Mapping[str, int]:
        """The sum of the running pods' requests."""
        return self.kubelet.requested

    @property
    def allocatable(self) -> Mapping[str, int]:
        """What the node offers pods."""
        return self.kubelet.allocatable

    def agent_report(self) -> NodeResourceTopology:
        """The NodeResourceTopology the toposched agent publishes for this node, as the scheduler reads it.

        Built by the agent's own code (:func:`~toposched.node_report.node_report`) from what the
        agent reads on a real node: the machine, the kubelet's configuration and checkpoints, the
        device plugins' devices and assignments (the podresources API) and the pods bound here
        with their placements; then serialised to JSON and parsed back, as it crosses the API
        server. Cached until a pod is admitted or released.
        """
        if self._agent_report is not None and self._agent_report[0] == self._version:
            return self._agent_report[1]
        kubelet = self.kubelet
        assignments = {
            uid: {name: {r: sorted(ids) for r, ids in c.devices.items()} for name, c in admission.containers.items()
                  if c.devices}
            for uid, admission in kubelet.admissions.items()
        }
        pods = [_pod_object(r.pod, self.node.name, self._placements.get(uid)) for uid, r in self.pods.items()]
        obj = node_report(
            self.node.machine, kubelet.config, node_name=self.node.name,
            cpu_state=kubelet.cpu.to_checkpoint() if kubelet.cpu is not None else None,
            memory_state=kubelet.memory.checkpoint() if kubelet.memory is not None else None,
            pods=pods, devices=self._devices, device_assignments=assignments,
        )
        nrt = parse_nrt(json.loads(json.dumps(obj)), source=f"NodeResourceTopology {self.node.name}")
        self._agent_report = (self._version, nrt)
        return nrt

    def report(self) -> NodeResourceTopology:
        """The node's NodeResourceTopology as node-feature-discovery publishes it, with the pods fingerprint."""
        if self._report is not None and self._report[0] == self._version:
            return self._report[1]
        nrt = self.kubelet.to_nrt()
        fingerprint = pods_fingerprint((r.pod.namespace, r.pod.name) for r in self.pods.values())
        nrt = dataclasses.replace(nrt, attributes={**nrt.attributes, FINGERPRINT_ATTRIBUTE: fingerprint})
        self._report = (self._version, nrt)
        return nrt


def _described_devices(node: SimNode, inventory: DeviceInventory) -> tuple[DescribedDevice, ...]:
    """The node's device plugins' devices as its agent describes them: the plugin ids, with the PCIe
    locality, model and memory of the PCI device each id names."""
    out = []
    for resource, entries in sorted((node.device_plugins or {}).items()):
        for device_id, numa in entries:
            dev = inventory.get(device_id)
            numa_id = next(iter(numa), None) if numa else None
            if dev is None:
                out.append(DescribedDevice(resource, device_id, numa_id))
            else:
                out.append(DescribedDevice(resource, device_id, numa_id, dev.id, dev.pcie_path, dev.model,
                                           dev.memory_bytes, dev.kind))
    return tuple(out)


def _pod_object(pod: Pod, node: str, placement: Placement | None) -> dict:
    """The pod as the API server lists it to the node's agent: identity, node, phase and its placement."""
    meta: dict = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid or pod.key}
    if placement is not None:
        meta["annotations"] = {PLACEMENT_ANNOTATION: placement.to_annotation()}
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": "Running"}}


def _mask(cpusets) -> int:
    mask = 0
    for cpus in cpusets:
        mask |= cpus.mask
    return mask
