"""``KubeletNode``: one node's kubelet, as a model that admits and releases pods.

It composes the pieces as the kubelet's container manager does: the predicate admission
(does the pod fit the node's allocatable at all), then the Topology Manager with its hint
providers consulted in the kubelet's order (device manager, CPU manager, memory manager), each
of which allocates once the merged hint is admitted. The result is the exact allocation
(exclusive cpuset, memory per NUMA node, device IDs per container) or the rejection with the
reason and message the kubelet would put on the pod.

A rejected admission gives back everything the pod was given; as in the kubelet, which drops a
refused pod's memory blocks as stale state, a multi-NUMA group's bytes may come back to other
nodes of the group than they came from. The simulator uses this as a node's
ground truth; the scheduler uses the same class to predict a kubelet-managed node.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toposched.errors import InputError, ToposchedError
from toposched.kubelet.config import KubeletConfig
from toposched.kubelet.cpu_manager import SMTAlignmentError, StaticCPUPolicy
from toposched.kubelet.device_manager import DeviceManager, PreferredAllocation
from toposched.kubelet.hints import TopologyHint
from toposched.kubelet.memory_manager import MemoryManagerError, StaticMemoryPolicy, hugepage_resource_name
from toposched.kubelet.scope import MaskTopologyManager, TopologyManager
from toposched.kubelet.topology_manager import (
    ARRAY_SUBSETS_FROM,
    TopologyAffinityError,
    UnexpectedAdmissionError,
    merge_hints,
    numa_distances,
)
from toposched.topology import CPUSet, Machine
from toposched.topology.nrt import ZONE_TYPE_NODE, NodeResourceTopology, nrt_from_machine
from toposched.topology.nrt import numa_id_of_zone as numa_zone_id
from toposched.workload import GUARANTEED, Container, Pod, add_resources
from toposched.workload.pod import subtract_resources

__all__ = ["Admission", "ContainerAllocation", "DevicePlugins", "KubeletNode"]

DevicePlugins = Mapping[str, Iterable[tuple[str, Iterable[int] | None]]]
_EMPTY: Mapping[Any, Any] = MappingProxyType({})
_NO_CPUS = CPUSet()
_NO_HINT = TopologyHint(None, False)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Keep Python's cyclic garbage collector from running inside the block.

    An admission on a machine with many NUMA nodes lists every NUMA set per hint provider: tens
    of thousands of ``(mask, preferred)`` tuples that reference counting frees when it ends and
    that no cycle can hold. Allocating them makes the collector walk the scheduler's young heap
    again and again (measured on the wide benchmark mix: a 16-NUMA admission took 0.18 s with
    the collector running, 0.06 s paused).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclass(frozen=True, slots=True)
class ContainerAllocation:
    """What the kubelet gave one container.

    ``cpuset`` is the exclusive CPUs (empty when the container runs on the shared pool);
    ``hint`` is the Topology Manager's chosen affinity; ``memory`` maps NUMA id to
    {resource: bytes} pinned by the memory manager; ``devices`` maps resource to device IDs.
    """

    cpuset: CPUSet = CPUSet()
    hint: TopologyHint = TopologyHint(None, False)
    memory: Mapping[int, Mapping[str, int]] = field(default_factory=lambda: _EMPTY)
    devices: Mapping[str, frozenset[str]] = field(default_factory=lambda: _EMPTY)

    @property
    def exclusive(self) -> bool:
        """True when the container holds CPUs of its own."""
        return bool(self.cpuset)


@dataclass(frozen=True, slots=True)
class Admission:
    """The kubelet's answer to a pod: admitted with allocations, or rejected with reason and message."""

    pod: str
    admitted: bool
    reason: str = ""
    message: str = ""
    containers: Mapping[str, ContainerAllocation] = field(default_factory=lambda: _EMPTY)

    def numa_nodes(self) -> frozenset[int]:
        """Every NUMA node the pod's exclusive CPUs, pinned memory and hints touch."""
        nodes: set[int] = set()
        for c in self.containers.values():
            nodes.update(c.memory)
            if c.hint.numa_nodes is not None and (c.cpuset or c.memory or c.devices):
                nodes.update(c.hint.numa_nodes)
        return frozenset(nodes)


class KubeletNode:
    """A node's kubelet: machine + configuration + the pods it admitted.

    ``device_plugins`` maps a device resource (``nvidia.com/gpu``) to its devices as
    ``(device id, NUMA ids or None)``. ``extended_resources`` are node-level extended resources
    another agent reports (koordlet's ``koordinator.sh/gpu-core``): counted against allocatable
    at admission, never aligned. ``preferred_allocation`` maps a device resource to its plugin's
    ``GetPreferredAllocation`` (see :class:`DeviceManager`); without one the plugin has none.
    ``merge`` is the hint merge; the scheduler may pass :func:`~toposched.kubelet.fast_merge.fast_merge_hints`, which decides the same.
    Construction validates the configuration against the machine as the kubelet does at start
    and raises :class:`InputError` otherwise.

    Admission takes fast paths that decide exactly as the kubelet's own loops: the managers
    hand their hints to the Topology Manager as int masks (:class:`MaskTopologyManager`),
    computed from per-machine tables instead of visiting every NUMA set, and under the
    single-numa-node policy only the single-NUMA hints that policy reads are generated.
    ``exhaustive=True`` runs the managers' upstream-shaped code instead (every NUMA set,
    ``TopologyHint`` lists checked and merged by ``merge``): the reference the fast paths are
    tested against.
    """

    def __init__(
        self,
        machine: Machine,
        config: KubeletConfig | None = None,
        *,
        device_plugins: DevicePlugins | None = None,
        extended_resources: Mapping[str, int] | None = None,
        preferred_allocation: Mapping[str, PreferredAllocation] | None = None,
        name: str = "node",
        merge: Any = merge_hints,
        exhaustive: bool = False,
    ) -> None:
        self.machine = machine
        self._many_numa = len(machine.numa_ids) >= ARRAY_SUBSETS_FROM  # see _collector_paused
        self.extended_resources = dict(extended_resources or {})
        for resource, value in self.extended_resources.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(f"{value!r} is not a non-negative quantity", field=f"extendedResources.{resource}")
        self.config = config or KubeletConfig()
        self.name = name
        self.exhaustive = exhaustive
        cfg = self.config
        reserved_cpus = cfg.reserved_system_cpus
        if reserved_cpus is not None:
            missing = reserved_cpus - machine.online
            if missing:
                raise InputError(f"reserved CPUs {missing} are not online CPUs of the machine", field="reservedSystemCPUs")
        self.reserved_cpu_millis = len(reserved_cpus) * 1000 if reserved_cpus else cfg.reserved_cpu_millis
        manager = TopologyManager if exhaustive else MaskTopologyManager
        prefer_closest = cfg.topology_manager_options.get("prefer-closest-numa-nodes")
        self.topology_manager = manager(
            machine.numa_ids,
            policy=cfg.topology_manager_policy,
            scope=cfg.topology_manager_scope,
            options=dict(cfg.topology_manager_options),
            distances=numa_distances(machine) if prefer_closest else None,
            merge=merge,
        )
        self.devices = DeviceManager(
            machine.numa_ids, {r: list(d) for r, d in (device_plugins or {}).items()}, preferred=preferred_allocation
        )
        self.cpu: StaticCPUPolicy | None = None
        if cfg.cpu_manager_policy == "static":
            self.cpu = StaticCPUPolicy(
                machine,
                reserved_cpus=reserved_cpus,
                num_reserved=math.ceil(self.reserved_cpu_millis / 1000),
                options=dict(cfg.cpu_manager_options),
                topology_manager_policy=cfg.topology_manager_policy,
                affinity=self.topology_manager,
            )
        self.memory: StaticMemoryPolicy | None = None
        if cfg.memory_manager_policy == "Static":
            self.memory = StaticMemoryPolicy.from_config(machine, cfg)
        self._results: dict[str, dict[str, Any]] = {}
        providers = [_DeviceProvider(self)]
        if self.cpu is not None:
            providers.append(_CPUProvider(self))
        if self.memory is not None:
            providers.append(_MemoryProvider(self))
        for provider in providers:
            self.topology_manager.add_hint_provider(provider)
        self.allocatable = self._allocatable()
        self.pods: dict[str, Pod] = {}
        self.admissions: dict[str, Admission] = {}
        self._latest: tuple[str, Any, dict[str, int]] | None = None  # the latest admission, for unadmit
        self._mutations = 0  # bumped when the Static memory manager's blocks may move (memoises available())
        self._available: tuple[tuple[Any, ...], dict[int, dict[str, int]]] | None = None
        self._capacity: dict[int, dict[str, int]] | None = None  # see zone_capacity
        self._zones = []  # (NUMA id, CPU mask, hugepages and regular memory when not pinned by a memory manager)
        for node in machine.numa_nodes:
            regular = {hugepage_resource_name(size): size * count for size, count in node.hugepages.items()}
            regular["memory"] = node.memory_bytes - sum(size * count for size, count in node.hugepages.items())
            self._zones.append((node.id, node.cpus.mask, regular))
        self._requested: dict[str, int] = {}

    # ---- node-level capacity -------------------------------------------------------------------

    def _allocatable(self) -> dict[str, int]:
        cfg = self.config
        hugepages: dict[str, int] = {}
        total_memory = 0
        for node in self.machine.numa_nodes:
            total_memory += node.memory_bytes
            for size, count in node.hugepages.items():
                name = hugepage_resource_name(size)
                hugepages[name] = hugepages.get(name, 0) + size * count
        # Pages set aside as hugepages are not regular memory (the kubelet subtracts them).
        regular = total_memory - sum(hugepages.values())
        out = {
            "cpu": max(0, len(self.machine.online) * 1000 - self.reserved_cpu_millis),
            "memory": max(0, regular - cfg.reserved_memory_bytes),
            "pods": cfg.max_pods,
        }
        for name, value in hugepages.items():
            out[name] = max(0, value - cfg.kube_reserved.get(name, 0) - cfg.system_reserved.get(name, 0))
        for resource in self.devices.resources:
            out[resource] = len(self.devices.state.healthy.get(resource, ()))
        out.update(self.extended_resources)
        return out

    @property
    def requested(self) -> Mapping[str, int]:
        """The sum of the admitted pods' requests (and their count under ``pods``)."""
        return MappingProxyType(self._requested)

    # ---- admission -------------------------------------------------------------------------------

    def admit(self, pod: Pod, *, trial: bool = False) -> Admission:
        """Admit ``pod`` as the kubelet would, or reject it with upstream's reason (and give back what it was given).

        The kubelet's admit handlers run in its order: the container manager's (the Topology
        Manager, whose providers allocate) before the predicate handler (requests against
        allocatable), so a pod both would refuse gets the Topology Manager's reason (upstream
        ``NewMainKubelet`` appends ``GetAllocateResourcesPodAdmitHandler`` before
        ``NewPredicateAdmitHandler``). Reasons: ``TopologyAffinityError``, ``SMTAlignmentError``,
        ``UnexpectedAdmissionError`` (a manager could not allocate), ``OutOf<resource>`` (the
        node's allocatable). Admitting a pod that is already admitted returns its first admission.

        A refused pod is forgotten as the kubelet forgets it (:meth:`_refuse`), which may leave
        the node in a state other than the one before. With ``trial=True`` (a scheduler asking
        whether the node would admit a pod it has not been sent) a refusal leaves the node
        exactly as it was: the real node never sees that pod.
        """
        uid = _uid(pod)
        if uid in self.admissions:
            return self.admissions[uid]
        requests = pod.effective_requests()
        unknown = [r for r in requests if r.startswith("hugepages-") and requests[r] and r not in self.allocatable]
        if unknown:
            # A page size this machine has no pages of: the node's allocatable lacks it (the
            # memory manager is never asked about a resource the machine does not have).
            return self._misfit(pod, requests)  # type: ignore[return-value]
        snapshot = self._snapshot(uid)
        self._results[uid] = {}
        unpinned = self.pins_nothing(pod)
        try:
            hints = self._admit_unpinned(pod) if unpinned else None
            if hints is None and self._many_numa:
                with _collector_paused():
                    hints = self.topology_manager.admit(pod)
            elif hints is None:
                hints = self.topology_manager.admit(pod)
        except (TopologyAffinityError, SMTAlignmentError, UnexpectedAdmissionError) as err:
            self._refuse(snapshot, uid, trial)
            return Admission(pod.key, False, err.reason, str(err))
        except InputError:
            self._restore(snapshot, uid)
            raise
        except ToposchedError as err:
            self._refuse(snapshot, uid, trial)
            wrapped = UnexpectedAdmissionError(err, pod=pod.key)
            return Admission(pod.key, False, wrapped.reason, str(wrapped))
        misfit = self._misfit(pod, requests)
        if misfit is not None:
            self._refuse(snapshot, uid, trial)
            return misfit
        results = self._results.pop(uid)
        containers = {}
        for c in pod.all_containers:
            got = results.get(c.name, _EMPTY)
            containers[c.name] = ContainerAllocation(
                cpuset=got.get("cpu", _NO_CPUS),
                hint=hints.get(c.name, _NO_HINT),
                memory=MappingProxyType({n: MappingProxyType(dict(r)) for n, r in got.get("memory", _EMPTY).items()}),
                devices=MappingProxyType(dict(got.get("devices", _EMPTY))),
            )
        admission = Admission(pod.key, True, containers=MappingProxyType(containers))
        self._mutations += not unpinned  # such a pod moves no memory: available() stands
        self._latest = (uid, snapshot, dict(self._requested))
        self.pods[uid] = pod
        self.admissions[uid] = admission
        add_resources(self._requested, requests)
        self._requested["pods"] = self._requested.get("pods", 0) + 1
        return admission

    def _admit_unpinned(self, pod: Pod) -> dict[str, TopologyHint] | None:
        """The Topology Manager's hints for a pod that pins nothing, without asking the managers for hints.

        A Burstable or BestEffort pod asking for no device resource gets no exclusive CPUs (the
        static CPU manager serves Guaranteed pods only), no pinned memory (nor does the Static
        memory manager) and no devices: every manager has no preference, so the merge is known
        (:meth:`MaskTopologyManager.admit_unpinned`). The caller checks :meth:`pins_nothing`; None
        when the Topology Manager has no such path or it does not apply.
        """
        admit_unpinned = getattr(self.topology_manager, "admit_unpinned", None)
        return None if admit_unpinned is None else admit_unpinned(pod)

    def _holds_memory(self, uid: str) -> bool:
        """Whether the Static memory manager holds blocks for the pod (releasing it then moves memory)."""
        return self.memory is not None and self.memory.holds(uid)

    def pins_nothing(self, pod: Pod) -> bool:
        """Whether no manager can give ``pod`` anything of its own: it is not Guaranteed (the static
        CPU manager and the Static memory manager serve Guaranteed pods only) and asks for no device
        resource. Admitting such a pod leaves :meth:`available` as it was."""
        if pod.qos_class == GUARANTEED:
            return False
        devices = self.devices
        return not any(devices.is_device_resource(r) for c in pod.all_containers for r in c.limits_or_requests)

    def _misfit(self, pod: Pod, effective_requests: Mapping[str, int]) -> Admission | None:
        """The kubelet's predicate admission: requests against allocatable, upstream's wording.

        The first resource short is reported, in upstream ``fitsRequest``'s order: pods, cpu,
        memory, ephemeral-storage, then the others (a Go map there, so in random order; sorted here).
        """
        requests = dict(effective_requests)
        requests["pods"] = 1
        for resource in sorted(requests, key=_FIT_ORDER):
            want = requests[resource]
            if want == 0 and resource != "pods":
                continue
            capacity = self.allocatable.get(resource)
            used = self._requested.get(resource, 0)
            if capacity is None:
                if resource in ("cpu", "memory", "ephemeral-storage") or "/" not in resource and not resource.startswith("hugepages-"):
                    continue
                capacity = 0
            if used + want > capacity:
                return Admission(
                    pod.key,
                    False,
                    f"OutOf{resource}",
                    f"Node didn't have enough resource: {resource}, requested: {want}, used: {used}, capacity: {capacity}",
                )
        return None

    def unadmit(self, pod: Pod | str) -> None:
        """Undo an admission as if it had never happened (the scheduler's Unreserve).

        Exact when the pod is the node's latest admission and nothing was released since: the
        state from just before it is put back. Otherwise the pod is released as the kubelet
        releases a pod (whose memory manager may hand a multi-NUMA group's bytes back to other
        nodes of the group than they came from, as upstream does).
        """
        uid = pod if isinstance(pod, str) else _uid(pod)
        latest = self._latest
        if latest is None or latest[0] != uid or uid not in self.pods:
            self.release(uid)
            return
        _, snapshot, requested = latest
        self._mutations += self._holds_memory(uid)
        self._restore(snapshot, uid)
        del self.pods[uid]
        del self.admissions[uid]
        self._requested = requested
        self._latest = None

    def release(self, pod: Pod | str) -> None:
        """Forget a pod that finished or was deleted: every CPU, memory block and device it held comes back."""
        uid = pod if isinstance(pod, str) else _uid(pod)
        known = self.pods.pop(uid, None)
        if known is None:
            return
        self._latest = None
        self._mutations += self._holds_memory(uid)
        self.admissions.pop(uid, None)
        if self.cpu is not None:
            self.cpu.release_pod(uid)
        if self.memory is not None:
            self.memory.release(uid)
        self.devices.release(uid)
        self.topology_manager.remove_pod(uid)
        self._requested["pods"] -= 1
        self._requested = subtract_resources(self._requested, known.effective_requests())

    # ---- state snapshots -------------------------------------------------------------------------

    def _snapshot(self, uid: str) -> tuple[Any, Any, Any]:
        memory = None
        if self.memory is not None:
            # The fast path keeps only what an admission of this pod can change (not every pod's blocks).
            memory = self.memory.checkpoint() if self.exhaustive else self.memory._save(uid)
        return (self.cpu.state if self.cpu is not None else None, memory, self.devices.state)

    def _refuse(self, snapshot: tuple[Any, Any, Any], uid: str, trial: bool) -> None:
        """Forget what a refused pod was given, as the kubelet does (on a ``trial``, as if never asked).

        Devices come back as they were. CPUs and memory blocks are not put back as they were:
        the kubelet drops a refused pod's assignments as stale state (``removeStaleState`` ->
        each manager's ``RemoveContainer``). The CPU manager unions the containers' CPUs into the
        shared pool, so a CPU its takeByTopology took wrongly (a reserved one, on an uneven
        machine) lands in the pool; the memory manager hands a multi-NUMA group's bytes back
        node by node in the group's order. Either state may differ from the one before.
        """
        if trial:
            self._restore(snapshot, uid)
            return
        if self.memory is not None:
            self.memory.release(uid)
            self._mutations += 1  # the memory state may have moved: available() recomputes
        if self.cpu is not None:
            self.cpu.release_pod(uid)
        self._restore(snapshot, uid, memory=False, cpu=False)

    def _restore(self, snapshot: tuple[Any, Any, Any], uid: str, *, memory: bool = True, cpu: bool = True) -> None:
        """Put the node back as it was at ``snapshot`` (the memory and CPU managers' too, unless told not to)."""
        cpu_state, saved, devices = snapshot
        if cpu and self.cpu is not None:
            self.cpu.restore(cpu_state)
            self.cpu.release_pod(uid)  # forgets the reusable-CPU bookkeeping of the refused pod
            self.cpu.restore(cpu_state)
        if memory and self.memory is not None and not self.exhaustive:
            self.memory._undo(uid, saved)
        elif memory and self.memory is not None:
            self.memory.restore(saved, validate=False)
            self.memory.release(uid)
            self.memory.restore(saved, validate=False)
        self.devices.restore(devices)
        self.topology_manager.remove_pod(uid)
        self._results.pop(uid, None)

    def state(self) -> tuple[Any, ...]:
        """A comparable snapshot of everything the node holds (for checks that release restores it)."""
        cpu = self.cpu.state if self.cpu is not None else None
        memory = self.memory.checkpoint() if self.memory is not None else None
        return (cpu, memory, self.devices.state, tuple(sorted(self._requested.items())), tuple(sorted(self.pods)))

    # ---- views -----------------------------------------------------------------------------------

    def available(self) -> dict[int, dict[str, int]]:
        """What each NUMA zone can still give, as node-feature-discovery reports it.

        ``cpu`` (millicores): the zone's CPUs that are neither reserved nor exclusively held;
        ``memory`` and ``hugepages-<size>`` (bytes): free per the memory manager when it is
        ``Static``, else the zone's allocatable; device resources: free healthy devices on
        the zone.
        """
        cpu_state = self.cpu.state if self.cpu is not None else None
        state = self.devices.state
        # What the answer is computed from: the CPU manager's and the device manager's state
        # objects are immutable and replaced on change, so "is" tells whether they changed (a
        # pod that pins nothing leaves them, and the answer, as they were); the memory
        # manager's state is mutable, so any admission or release recomputes.
        key = (cpu_state, state.allocations, state.healthy, self._mutations if self.memory is not None else 0)
        cached = self._available
        if cached is not None:
            known = cached[0]
            if known[0] is key[0] and known[1] is key[1] and known[2] is key[2] and known[3] == key[3]:
                return {n: dict(z) for n, z in cached[1].items()}
        out: dict[int, dict[str, int]] = {}
        if self.cpu is not None:
            free = (self.cpu.available_cpus() - self.cpu.reserved_cpus).mask
        else:
            free = (self.machine.online - (self.config.reserved_system_cpus or CPUSet())).mask
        memory_free = self.memory.available() if self.memory is not None else None
        for numa_id, cpu_mask, regular in self._zones:
            zone: dict[str, int] = {}
            if cpu_mask:
                zone["cpu"] = (cpu_mask & free).bit_count() * 1000
            if memory_free is not None:
                zone.update(memory_free.get(numa_id, {}))
            else:
                zone.update(regular)
            out[numa_id] = zone
        for resource in self.devices.resources:
            for numa_id in self.machine.numa_ids:
                out[numa_id].setdefault(resource, 0)
            for device in self.devices.available(resource):  # memoised while the allocations stand
                topology = state.devices[resource].get(device)
                if topology is not None and len(topology) == 1:
                    out[next(iter(topology))][resource] += 1
        self._available = (key, out)
        return {n: dict(z) for n, z in out.items()}

    def zone_capacity(self) -> dict[int, dict[str, int]]:
        """Per NUMA zone and resource, what upstream's ``minAffinitySize`` counts there: the zone's CPUs
        (millicores, all of them) under the static CPU manager, its allocatable memory and hugepages
        under the Static memory manager, and every device of a resource (healthy or not) whose NUMA
        nodes include the zone. A request that some zone's capacity holds has single zones as its
        preferred hints. CPUs are left out when the ``align-by-socket`` option lets a wider,
        socket-aligned set be preferred too. Fixed by the hardware and configuration: computed once.
        """
        if self._capacity is None:
            out: dict[int, dict[str, int]] = {n: {} for n in self.machine.numa_ids}
            if self.cpu is not None and not self.cpu.options.align_by_socket:
                for numa_id, cpu_mask, _ in self._zones:
                    if cpu_mask:
                        out[numa_id]["cpu"] = cpu_mask.bit_count() * 1000
            if self.memory is not None:
                for numa_id, tables in self.memory.allocatable().items():
                    out[numa_id].update(tables)
            for resource, devices in self.devices.state.devices.items():
                for topology in devices.values():
                    for numa_id in topology or ():
                        if numa_id in out:
                            out[numa_id][resource] = out[numa_id].get(resource, 0) + 1
            self._capacity = out
        return {n: dict(z) for n, z in self._capacity.items()}

    def largest_zone_cpus(self) -> int:
        """The most CPUs one NUMA zone has (millicores, all of them) under the static CPU manager,
        whatever its options; 0 without one. Upstream's CPU ``minAffinitySize`` counts these
        (``CPUsInNUMANodes``), ``align-by-socket`` or not, so no CPU hint is narrower than the
        fewest zones of this size that hold a request."""
        if self.cpu is None:
            return 0
        return max((cpu_mask.bit_count() * 1000 for _, cpu_mask, _ in self._zones), default=0)

    def device_counts(self) -> dict[str, dict[int, int]]:
        """Healthy devices per resource per NUMA zone (devices without one NUMA node are not counted)."""
        state = self.devices.state
        out: dict[str, dict[int, int]] = {}
        for resource in self.devices.resources:
            per_zone = out.setdefault(resource, {})
            for device in state.healthy.get(resource, ()):
                topology = state.devices[resource].get(device)
                if topology is not None and len(topology) == 1:
                    numa_id = next(iter(topology))
                    per_zone[numa_id] = per_zone.get(numa_id, 0) + 1
        return out

    def to_nrt(self) -> NodeResourceTopology:
        """This node's NodeResourceTopology report, with current availability.

        Availability is given for exactly the resources each zone publishes (node-feature-
        discovery leaves out, e.g., ``cpu`` on a zone whose CPUs are all reserved).
        """
        reserved = self.cpu.reserved_cpus if self.cpu is not None else (self.config.reserved_system_cpus or CPUSet())
        # NFD takes allocatable memory from the kubelet's podresources GetAllocatableResources,
        # which leaves out what the Static memory manager reserves on each NUMA node.
        allocatable: dict[int, dict[str, int]] = {}
        if self.memory is not None:
            for node in self.machine.numa_nodes:
                held = self.memory.system_reserved.get(node.id, {})
                zone = {"memory": node.memory_bytes - held.get("memory", 0)} if node.memory_bytes else {}
                for size, count in node.hugepages.items():
                    name = hugepage_resource_name(size)
                    zone[name] = size * count - held.get(name, 0)
                allocatable[node.id] = zone
        shape = dict(node_name=self.name, policy=self.config.topology_manager_policy,
                     scope=self.config.topology_manager_scope, device_resources=self.device_counts(), reserved_cpus=reserved,
                     allocatable=allocatable)
        published = {numa_zone_id(z.name): {r.name for r in z.resources}
                     for z in nrt_from_machine(self.machine, **shape).zones if z.type == ZONE_TYPE_NODE}
        available = {n: {k: v for k, v in zone.items() if k in published.get(n, ())} for n, zone in self.available().items()}
        return nrt_from_machine(self.machine, available=available, **shape)


def _FIT_ORDER(resource: str) -> tuple[int, str]:
    return (_FIRST_CHECKED.get(resource, len(_FIRST_CHECKED)), resource)


_FIRST_CHECKED = {"pods": 0, "cpu": 1, "memory": 2, "ephemeral-storage": 3}


def _uid(pod: Pod) -> str:
    return pod.uid or pod.key


class _Provider:
    """Adapts one manager to the Topology Manager's provider calls and records what it allocated."""

    key = ""

    def __init__(self, node: KubeletNode) -> None:
        self.node = node

    def _record(self, pod: Pod, container: Container, value: Any) -> None:
        results = self.node._results.get(_uid(pod))
        if results is not None and value:
            results.setdefault(container.name, {})[self.key] = value

    def _hint(self, pod: Pod, container: Container) -> TopologyHint:
        return self.node.topology_manager.get_affinity(pod, container.name)


class _DeviceProvider(_Provider):
    key = "devices"

    def get_topology_hints(self, pod: Pod, container: Container) -> Any:
        return self.node.devices.get_topology_hints(pod, container)

    def get_pod_topology_hints(self, pod: Pod) -> Any:
        return self.node.devices.get_pod_topology_hints(pod)

    def topology_masks(self, pod: Pod, container: Container, *, single_numa_only: bool) -> Any:
        return self.node.devices.topology_masks(pod, container, single_numa_only=single_numa_only)

    def pod_topology_masks(self, pod: Pod, *, single_numa_only: bool) -> Any:
        return self.node.devices.pod_topology_masks(pod, single_numa_only=single_numa_only)

    def allocate(self, pod: Pod, container: Container) -> None:
        self._record(pod, container, self.node.devices.allocate(pod, container, self._hint(pod, container)))


class _CPUProvider(_Provider):
    key = "cpu"

    def get_topology_hints(self, pod: Pod, container: Container) -> Any:
        return self.node.cpu.get_topology_hints(pod, container)  # type: ignore[union-attr]

    def get_pod_topology_hints(self, pod: Pod) -> Any:
        return self.node.cpu.get_pod_topology_hints(pod)  # type: ignore[union-attr]

    def topology_masks(self, pod: Pod, container: Container, *, single_numa_only: bool) -> Any:
        return self.node.cpu.topology_masks(pod, container, single_numa_only=single_numa_only)  # type: ignore[union-attr]

    def pod_topology_masks(self, pod: Pod, *, single_numa_only: bool) -> Any:
        return self.node.cpu.pod_topology_masks(pod, single_numa_only=single_numa_only)  # type: ignore[union-attr]

    def allocate(self, pod: Pod, container: Container) -> None:
        self._record(pod, container, self.node.cpu.allocate(pod, container))  # type: ignore[union-attr]


class _MemoryProvider(_Provider):
    key = "memory"

    def get_topology_hints(self, pod: Pod, container: Container) -> Any:
        return self.node.memory.get_topology_hints(pod, container)  # type: ignore[union-attr]

    def get_pod_topology_hints(self, pod: Pod) -> Any:
        return self.node.memory.get_pod_topology_hints(pod)  # type: ignore[union-attr]

    def topology_masks(self, pod: Pod, container: Container, *, single_numa_only: bool) -> Any:
        return self.node.memory.topology_masks(pod, container, single_numa_only=single_numa_only)  # type: ignore[union-attr]

    def pod_topology_masks(self, pod: Pod, *, single_numa_only: bool) -> Any:
        return self.node.memory.pod_topology_masks(pod, single_numa_only=single_numa_only)  # type: ignore[union-attr]

    def allocate(self, pod: Pod, container: Container) -> None:
        try:
            result = self.node.memory.allocate(pod, container, self._hint(pod, container))  # type: ignore[union-attr]
        except MemoryManagerError as err:
            # The memory manager's errors are plain errors upstream: the admission reports them as unexpected.
            raise UnexpectedAdmissionError(err, pod=pod.key, container=container.name) from err
        per_numa = {n: dict(r) for n, r in result.numa_memory.items()}
        for block in result.blocks:
            nodes = block.numa_affinity or ()
            booked = sum(per_numa.get(n, {}).get(block.type, 0) for n in nodes)
            if nodes and block.size > booked:
                # Reused init-container memory was not moved by this call; it lies on the block's first node.
                first = per_numa.setdefault(nodes[0], {})
                first[block.type] = first.get(block.type, 0) + block.size - booked
        self._record(pod, container, per_numa)

