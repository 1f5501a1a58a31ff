"""Hypothesis strategies shared by the scheduler's property tests: machines, kubelets, pods.

* :func:`machines` — 1 to 8 NUMA nodes on 1 or 2 sockets, 1 to 4 cores per NUMA node, SMT 1 or
  2 (CPU ids numbered as Linux does: thread ``t`` of core ``c`` is CPU ``c + t * cores``),
  memory, optional 2Mi hugepages, optional SLIT-like distances, GPUs on some NUMA nodes and
  sometimes one GPU without NUMA affinity.
* :func:`kubelet_configs` — every Topology Manager policy and scope, sometimes with
  ``prefer-closest-numa-nodes``; the static CPU manager
  (reserved CPUs as a list, as a fractional or whole count, or none; sometimes
  ``full-pcpus-only`` or ``distribute-cpus-across-numa``) or the ``none`` one; the memory
  manager ``Static`` (with reserved memory that adds up as the kubelet demands) or ``None``;
  sometimes a small ``maxPods``.
* :func:`pods` — Guaranteed, Burstable and BestEffort pods of 1-3 app containers, with init
  containers and sidecars, integer and fractional CPUs, memory, hugepages, GPUs and sometimes
  a ``toposched.io/numa-policy`` annotation.
* :func:`node_shapes` — a machine, a configuration for it and its device plugins, with
  :meth:`NodeShape.kubelet` to build a fresh kubelet of that node.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from hypothesis import strategies as st

from toposched.kubelet import KubeletConfig, KubeletNode, fast_merge_hints, merge_hints
from toposched.kubelet.config import TOPOLOGY_MANAGER_POLICIES, TOPOLOGY_MANAGER_SCOPES
from toposched.scheduler.cluster import Cluster
from toposched.scheduler.nodes import NodeSpec
from toposched.topology import CPUSet, Device, DeviceKind, LogicalCPU, Machine, NUMANode
from toposched.workload import Container, Pod

__all__ = [
    "GI",
    "GPU",
    "HUGEPAGES_2MI",
    "MI",
    "NodeShape",
    "comparable_state",
    "describe_pod",
    "kubelet_configs",
    "machines",
    "node_shapes",
    "pods",
]

MI = 2**20
GI = 2**30
GPU = "nvidia.com/gpu"
HUGEPAGES_2MI = "hugepages-2Mi"
NUMA_POLICY_ANNOTATION = "toposched.io/numa-policy"
# The exhaustive upstream merge visits every combination of every provider's hints: fine up to
# 4 NUMA nodes, seconds per pod at 8. Above this, kubelets are built with the fast merge, which
# the kubelet's own properties (tests/kubelet/test_fast_merge.py) hold to the same decisions.
UPSTREAM_MERGE_MAX_NUMA = 4

# Strategies built once: hypothesis validates a strategy on first use, which is costly per draw.
_BOOL = st.booleans()
_SOCKET_COUNTS = {numa: st.sampled_from([s for s in (1, 2) if numa % s == 0]) for numa in range(1, 9)}
_THREADS = st.sampled_from((1, 2))
_SAME_SOCKET_DISTANCE = st.sampled_from((11, 12))
_OTHER_SOCKET_DISTANCE = st.sampled_from((20, 21, 32))
# A NUMA node is one integer: its memory, its 2Mi hugepages and its GPUs (see _digits).
_NUMA_MEMORY_CHOICES = (4 * GI, 2 * GI, 8 * GI)
_NUMA_HUGEPAGE_CHOICES = (0, 0, 64, 256)
_NUMA_RADICES = (len(_NUMA_MEMORY_CHOICES), len(_NUMA_HUGEPAGE_CHOICES), 3)
_NUMA_CODE = st.integers(0, math.prod(_NUMA_RADICES) - 1)
_CPU_POLICY = st.sampled_from(("static", "static", "static", "none"))
_RESERVATION = st.sampled_from(("list", "count", "none"))
_RESERVED_MILLIS = st.sampled_from((500, 1000, 1500, 2000))
_CPU_OPTIONS = st.sampled_from(({}, {}, {"full-pcpus-only": "true"}, {"distribute-cpus-across-numa": "true"}))
_MEMORY_POLICY = st.sampled_from(("None", "Static"))
_SYSTEM_RESERVED = st.sampled_from((256 * MI, 512 * MI))
_TM_POLICY = st.sampled_from(TOPOLOGY_MANAGER_POLICIES)
_TM_SCOPE = st.sampled_from(TOPOLOGY_MANAGER_SCOPES)
_TM_OPTIONS = st.sampled_from(({}, {}, {"prefer-closest-numa-nodes": "true"}))
_MAX_PODS = st.sampled_from((110, 110, 110, 3))
_ONE_IN_SIX = st.integers(0, 5)
_QOS = st.sampled_from(("Guaranteed", "Guaranteed", "Burstable", "BestEffort"))
_APPS = st.integers(1, 3)
_INITS = st.sampled_from((0, 0, 0, 1, 2))


@st.composite
def machines(draw: st.DrawFn, *, min_numa: int = 1, max_numa: int = 8, max_cores_per_numa: int = 4) -> Machine:
    """A machine of ``min_numa``..``max_numa`` NUMA nodes, 1 or 2 sockets, SMT 1 or 2, with GPUs."""
    numa = draw(st.integers(min_numa, max_numa))
    sockets = draw(_SOCKET_COUNTS[numa])
    per_socket = numa // sockets
    cores = draw(st.integers(1, max_cores_per_numa))
    threads = draw(_THREADS)
    total = numa * cores
    cpus = [
        LogicalCPU(id=c + t * total, core_id=c, socket_id=(c // cores) // per_socket, numa_id=c // cores)
        for t in range(threads)
        for c in range(total)
    ]
    with_distances = draw(_BOOL)
    remote_same_socket = draw(_SAME_SOCKET_DISTANCE) if with_distances and per_socket > 1 else 0
    remote_other_socket = draw(_OTHER_SOCKET_DISTANCE) if with_distances and sockets > 1 else 0
    nodes = []
    gpus_per_numa = []
    for n in range(numa):
        memory_i, pages_i, gpus_i = _digits(draw(_NUMA_CODE), _NUMA_RADICES)
        memory, pages = _NUMA_MEMORY_CHOICES[memory_i], _NUMA_HUGEPAGE_CHOICES[pages_i]
        gpus_per_numa.append(gpus_i)
        distances = {}
        if with_distances:
            for m in range(numa):
                if m == n:
                    distances[m] = 10
                elif m // per_socket == n // per_socket:
                    distances[m] = remote_same_socket
                else:
                    distances[m] = remote_other_socket
        nodes.append(
            NUMANode(
                n,
                CPUSet(c.id for c in cpus if c.numa_id == n),
                memory_bytes=memory,
                hugepages={2 * MI: pages} if pages else {},
                distances=distances,
            )
        )
    unaligned = int(draw(_BOOL)) if any(gpus_per_numa) else 0
    devices = []
    for n, count in enumerate(gpus_per_numa):
        for _ in range(count):
            devices.append(Device(f"GPU-{len(devices)}", DeviceKind.GPU, n, attributes={"resource": GPU}))
    for _ in range(unaligned):
        devices.append(Device(f"GPU-{len(devices)}", DeviceKind.GPU, None, attributes={"resource": GPU}))
    return Machine(tuple(cpus), tuple(nodes), tuple(devices))


def device_plugins(machine: Machine) -> dict[str, tuple[tuple[str, tuple[int, ...] | None], ...]]:
    """The device plugins of a machine: each device with a ``resource`` attribute, with its NUMA node."""
    out: dict[str, list[tuple[str, tuple[int, ...] | None]]] = {}
    for d in machine.devices:
        resource = d.attributes.get("resource")
        if resource:
            out.setdefault(resource, []).append((d.address, None if d.numa_id is None else (d.numa_id,)))
    return {r: tuple(devs) for r, devs in out.items()}


@st.composite
def kubelet_configs(draw: st.DrawFn, machine: Machine) -> KubeletConfig:
    """A kubelet configuration the kubelet would start with on ``machine``."""
    online = sorted(machine.online)
    cpu_policy = draw(_CPU_POLICY)
    reserved_cpus = None
    kube_reserved: dict[str, int] = {}
    cpu_options: dict[str, str] = {}
    how = draw(_RESERVATION)
    if how == "list" and len(online) > 1:
        reserved_cpus = CPUSet(draw(st.lists(st.sampled_from(online), min_size=1, max_size=2, unique=True)))
    elif how == "count":
        millis = draw(_RESERVED_MILLIS)
        if millis < len(online) * 1000:
            kube_reserved["cpu"] = millis
    if cpu_policy == "static":
        cpu_options = draw(_CPU_OPTIONS)
    memory_policy = draw(_MEMORY_POLICY)
    eviction = 100 * MI
    system_reserved: dict[str, int] = {}
    reserved_memory: dict[int, dict[str, int]] = {}
    if memory_policy == "Static":
        system = draw(_SYSTEM_RESERVED)
        system_reserved["memory"] = system
        # The kubelet demands that reservedMemory over all NUMA nodes equals system + kube
        # reserved + the hard eviction threshold; spread it over the first NUMA nodes.
        total = system + eviction
        spread = draw(st.integers(1, len(machine.numa_ids)))
        share, rest = divmod(total, spread)
        for i, numa_id in enumerate(machine.numa_ids[:spread]):
            reserved_memory[numa_id] = {"memory": share + (rest if i == 0 else 0)}
    return KubeletConfig(
        topology_manager_policy=draw(_TM_POLICY),
        topology_manager_scope=draw(_TM_SCOPE),
        topology_manager_options=draw(_TM_OPTIONS),
        cpu_manager_policy=cpu_policy,
        cpu_manager_options=cpu_options,
        reserved_system_cpus=reserved_cpus,
        kube_reserved=kube_reserved,
        system_reserved=system_reserved,
        eviction_memory=eviction,
        memory_manager_policy=memory_policy,
        reserved_memory=reserved_memory,
        max_pods=draw(_MAX_PODS),
    )


@dataclass(frozen=True)
class NodeShape:
    """One node: its hardware, its kubelet's configuration and its device plugins."""

    machine: Machine
    config: KubeletConfig
    devices: Mapping[str, tuple[tuple[str, tuple[int, ...] | None], ...]]

    def kubelet(self, name: str = "node", *, reference: bool = True) -> KubeletNode:
        """A fresh kubelet of this node.

        ``reference``: the managers' upstream-shaped code (``exhaustive=True``) with the upstream
        hint merge (the fast merge on machines wider than ``UPSTREAM_MERGE_MAX_NUMA``); else the
        fast paths and the fast merge, as the scheduler's replicas run.
        """
        if not reference:
            return KubeletNode(self.machine, self.config, device_plugins=self.devices, name=name,
                               merge=fast_merge_hints)
        wide = len(self.machine.numa_ids) > UPSTREAM_MERGE_MAX_NUMA
        return KubeletNode(self.machine, self.config, device_plugins=self.devices, name=name,
                           merge=fast_merge_hints if wide else merge_hints, exhaustive=True)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))  # hypothesis prints falsifying examples with this

    def __repr__(self) -> str:
        m, c = self.machine, self.config
        gpus = {r: [(i, n) for i, n in devs] for r, devs in self.devices.items()}
        return (f"NodeShape(numa={len(m.numa_ids)}, sockets={len(m.sockets)}, cores={len(m.cores)}, "
                f"threads={m.threads_per_core}, memory={[n.memory_bytes // MI for n in m.numa_nodes]}Mi, "
                f"hugepages2Mi={[dict(n.hugepages).get(2 * MI, 0) for n in m.numa_nodes]}, "
                f"distances={[dict(n.distances) for n in m.numa_nodes] if m.numa_nodes[0].distances else None}, "
                f"devices={gpus}, policy={c.topology_manager_policy}/"
                f"{c.topology_manager_scope} {dict(c.topology_manager_options)}, cpu={c.cpu_manager_policy} {dict(c.cpu_manager_options)} "
                f"reserved={c.reserved_system_cpus} kube_reserved={dict(c.kube_reserved)}, "
                f"memory={c.memory_manager_policy} {dict(c.reserved_memory)}, max_pods={c.max_pods})")


@st.composite
def node_shapes(draw: st.DrawFn, *, max_numa: int = 8, max_cores_per_numa: int = 4) -> NodeShape:
    """A machine with a kubelet configuration for it and its device plugins."""
    machine = draw(machines(max_numa=max_numa, max_cores_per_numa=max_cores_per_numa))
    config = draw(kubelet_configs(machine))
    return NodeShape(machine, config, MappingProxyType(device_plugins(machine)))




def _digits(code: int, radices: tuple[int, ...]) -> list[int]:
    """``code`` in the mixed radix ``radices``, least significant first (0 decodes to all zeros)."""
    out = []
    for radix in radices:
        code, digit = divmod(code, radix)
        out.append(digit)
    return out


# A container is drawn as one integer decoded digit by digit, so that a pod costs a handful of
# draws (hypothesis spends far more time per draw than the scheduler spends per pod); each
# digit's 0 is the simplest choice, so shrinking the integer simplifies the container.
_CPU_CHOICES = (1000, 2000, 500, 3000, 4000, 100, 250, 1500, 2500)
_MEMORY_CHOICES = (256 * MI, 64 * MI, GI, 3 * GI)
_HUGEPAGE_CHOICES = (0, 0, 0, 0, 16 * 2 * MI, 128 * 2 * MI)
_GPU_CHOICES = (0, 0, 0, 1, 2)
# Burstable containers: (cpu request, memory request, cpu limit above the request).
_BURSTABLE_SHAPES = ((True, True, False), (False, True, False), (True, False, False), (True, True, True),
                     (True, False, True), (False, True, False))
_CONTAINER_RADICES = (len(_CPU_CHOICES), len(_MEMORY_CHOICES), len(_HUGEPAGE_CHOICES), len(_GPU_CHOICES),
                      len(_BURSTABLE_SHAPES))
_CONTAINER_CODE = st.integers(0, math.prod(_CONTAINER_RADICES) - 1)


def _container(code: int, name: str, qos: str, *, gpus: bool, sidecar: bool = False) -> Container:
    cpu_i, memory_i, hugepages_i, gpu_i, shape_i = _digits(code, _CONTAINER_RADICES)
    cpu, memory = _CPU_CHOICES[cpu_i], _MEMORY_CHOICES[memory_i]
    extra: dict[str, int] = {}
    if _HUGEPAGE_CHOICES[hugepages_i]:
        extra[HUGEPAGES_2MI] = _HUGEPAGE_CHOICES[hugepages_i]
    if gpus and _GPU_CHOICES[gpu_i]:
        extra[GPU] = _GPU_CHOICES[gpu_i]
    restart = "Always" if sidecar else None
    if qos == "Guaranteed":
        return Container(name, limits={"cpu": cpu, "memory": memory, **extra}, restart_policy=restart)
    if qos == "Burstable":
        with_cpu, with_memory, cpu_limit = _BURSTABLE_SHAPES[shape_i]
        requests = dict(extra)
        limits = dict(extra)
        if with_cpu:
            requests["cpu"] = cpu
        if with_memory:
            requests["memory"] = memory
        if cpu_limit:
            limits["cpu"] = cpu + 1000
        return Container(name, requests=requests, limits=limits, restart_policy=restart)
    return Container(name, limits=extra, restart_policy=restart)  # BestEffort: no cpu or memory


@st.composite
def pods(draw: st.DrawFn, name: str = "pod", *, gpus: bool = True, annotations: bool = True) -> Pod:
    """A pod named (and uid'd) ``name``: Guaranteed, Burstable or BestEffort, 1-3 app containers, maybe
    init containers and sidecars, maybe hugepages and GPUs, maybe a ``toposched.io/numa-policy``."""
    qos = draw(_QOS)
    apps = draw(_APPS)
    inits = draw(_INITS)
    init_containers = tuple(
        _container(draw(_CONTAINER_CODE), f"init{i}", qos, gpus=gpus, sidecar=draw(_BOOL)) for i in range(inits)
    )
    containers = tuple(_container(draw(_CONTAINER_CODE), f"app{i}", qos, gpus=gpus) for i in range(apps))
    notes = {}
    if annotations and draw(_ONE_IN_SIX) == 0:
        notes[NUMA_POLICY_ANNOTATION] = draw(_TM_POLICY)
    return Pod(name, uid=name, containers=containers, init_containers=init_containers, annotations=notes)


def comparable_state(kubelet: KubeletNode) -> tuple[Any, ...]:
    """``kubelet.state()`` with the memory of each multi-NUMA group summed over the group.

    The memory manager releases a block from its group's nodes in ascending order, not from the
    nodes it was taken from (upstream's ``RemoveContainer``; docs/kubelet/memory-manager.md), so
    admitting then releasing a pod may move bytes between the nodes of a group. Everything else
    (CPUs, devices, counts, groups, blocks, per-group sums, requests, pods) must come back exactly.
    """
    cpu, memory, devices, requested, pods = kubelet.state()
    if memory is None or not memory.machine_state:
        return cpu, memory, devices, requested, pods
    state = memory.machine_state
    nodes = {}
    for numa_id, node in sorted(state.items()):
        cells = tuple(node.cells or (numa_id,))
        tables = {}
        for resource, table in sorted((node.memory_map or {}).items()):
            members = [state[c].memory_map[resource] for c in cells if resource in (state[c].memory_map or {})]
            tables[resource] = (table.total, table.system_reserved, table.allocatable,
                                sum(t.reserved for t in members), sum(t.free for t in members))
        nodes[numa_id] = (node.number_of_assignments, cells, tables)
    return cpu, nodes, memory.entries, memory.pod_entries, devices, requested, pods


def describe_pod(pod: Pod) -> str:
    """A one-line account of a pod for failure reports: QoS, containers with requests, annotations."""
    def one(c: Container) -> str:
        kind = "sidecar " if c.is_sidecar else ""
        return f"{kind}{c.name}{dict(c.requests)}"

    inits = ", ".join(one(c) for c in pod.init_containers)
    apps = ", ".join(one(c) for c in pod.containers)
    return f"{pod.name} {pod.qos_class} init=[{inits}] app=[{apps}] {dict(pod.annotations)}"


def memory_group_cluster() -> Cluster:
    """A cluster of one node where a bound pod's memory spans a multi-NUMA group.

    Two NUMA nodes of 4 GiB, 356 MiB reserved on node 0, Static memory manager. A bound pod of
    5 GiB spans both (3.65 GiB from node 0, 1.35 GiB from node 1), so the next Guaranteed pod's
    memory can only come from node 1, and releasing it the kubelet's way would hand it to node 0.
    """
    machine = Machine.from_cpu_table([{"cpu": c, "core": c, "socket": 0, "numa": c // 2} for c in range(4)],
                                     memory_per_numa=4 * GI)
    config = KubeletConfig(memory_manager_policy="Static", system_reserved={"memory": 256 * MI},
                           eviction_memory=100 * MI, reserved_memory={0: {"memory": 356 * MI}})
    cluster = Cluster()
    cluster.set_node(NodeSpec("n"), machine=machine, kubelet_config=config)
    cluster.add_bound_pod(memory_pod("big", 5 * GI), "n", now=0)
    return cluster


def memory_pod(name: str, memory: int) -> Pod:
    """A Guaranteed pod of 1 CPU and ``memory`` bytes."""
    return Pod(name, uid=name, containers=(Container("c", limits={"cpu": 1000, "memory": memory}),))
