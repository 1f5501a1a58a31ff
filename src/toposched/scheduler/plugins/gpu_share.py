"""GPUShare: shares of GPUs (Koordinator's DeviceShare protocol), NUMA-aligned and packed.

A pod asks for a share of a GPU with ``koordinator.sh/gpu-core`` (percent of one GPU's compute),
``koordinator.sh/gpu-memory`` / ``koordinator.sh/gpu-memory-ratio``, Koordinator's combined
``koordinator.sh/gpu``, or the Alibaba trace's ``alibabacloud.com/gpu-milli`` annotation; a
request of 100 or more takes whole GPUs. The kubelet does not know these resources (on a node
they are reported by koordlet or our agent); the scheduler decides which GPU gives each share and
writes it in Koordinator's ``scheduling.koordinator.sh/device-allocated`` annotation, which the
node side enforces.

The node's GPUs are its inventory's GPU devices (memory from the topology, else from the GPU
model, else ``defaultGPUMemory``). GPUs the kubelet gave whole to ``nvidia.com/gpu`` pods are
not shared, and a whole-GPU pod whose kubelet would pick a GPU that holds shares is refused at
Reserve; the filter refuses it beforehand where that is certain: too few GPUs free of shares,
or, on kubelets that align devices to one NUMA node, a shared GPU in the kubelet's pick on every
NUMA node that could be the pod's hint (one with the GPUs and whatever else of the pod is aligned
there free: :func:`aligned_picks`, :meth:`GPUShare._hint_sets`), or on the lowest of them where
those NUMA nodes are known exactly. Which GPU a share takes, and how
nodes are scored, is the packing policy of the FGD paper (ATC'23, "Beware of Fragmentation"):
``FGD`` (with a target workload), ``BestFit`` (default), ``DotProd``, ``GpuPacking``,
``GpuClustering`` or ``Random`` (seeded) -- args ``{policy: ..., seed: ..., defaultGPUMemory:
...}``. Shares sit on the NUMA nodes the pod's CPUs and memory were aligned to when it has any.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from toposched.devices.fgd import MILLI, NodeView, Policy, TargetWorkload, Task, make_policy
from toposched.devices.inventory import NodeDevice
from toposched.devices.koordinator import DEVICE_ALLOCATED, format_device_allocated, gpu_entries
from toposched.devices.share import (
    ALIBABA_GPU_MILLI,
    DEFAULT_GPU_MEMORY,
    GPUAllocation,
    Host,
    NodeGPUState,
    Refusal,
    inventory_gpus,
    pod_gpu_request,
)
from toposched.errors import InputError
from toposched.kubelet import DeviceManager, KubeletNode
from toposched.names import GPU_MODEL_LABEL, KOORDINATOR_GPU
from toposched.scheduler.cluster import Cluster, NodeRecord
from toposched.scheduler.framework import MAX_NODE_SCORE, CycleState, RowReasons, StateKey, registry
from toposched.scheduler.placement import ContainerPlacement, Placement
from toposched.scheduler.plugin_args import GPUShareArgs, plugin_args
from toposched.scheduler.plugins.gpu_rows import GPURows, RowGPUs
from toposched.scheduler.plugins.node_cache import NodeCache
from toposched.scheduler.plugins.numa import aligned_request, aligning_manager, aligns
from toposched.scheduler.status import Status
from toposched.scheduler.table import POLICY_CODES, NodeTable, first_true, take_rows
from toposched.topology.model import DeviceKind
from toposched.workload import Pod

__all__ = ["DEVICE_ALLOCATED", "GPUShare", "aligned_picks", "free_by_numa", "gpus_held_whole", "gpus_with_shares",
           "node_gpu_state", "shares_gpu"]

# GPUShare's cycle state: the pod's share request (None for a pod without shares), its requests of
# whole devices, the pod as the packing policies see it per smallest GPU size, the share chosen
# at confirm for Reserve to record (node, allocation), whether one container asks for the whole
# devices, and what of the pod and that container the kubelet aligns (see _aligned_wants).
_SHARE_REQUEST: StateKey[Any] = StateKey("request", "GPUShare")
_WHOLE: StateKey[tuple[tuple[str, int], ...]] = StateKey("whole", "GPUShare")
_TASKS: StateKey[dict[int, Any]] = StateKey("tasks", "GPUShare")
_CHOICE: StateKey[tuple[str, Any]] = StateKey("choice", "GPUShare")
_ONE_HOLDER: StateKey[bool] = StateKey("one holder", "GPUShare")
_ALIGNED_WANTS: StateKey[tuple[dict[str, int], dict[str, int], bool]] = StateKey("aligned wants", "GPUShare")
_ONE_NODE_POLICIES = frozenset({"restricted", "single-numa-node"})  # the kubelet then aligns devices to one NUMA node
_DENSE_KEYS = 1 << 16  # _pairs_seen counts keys below this in a table
_ONE_NODE_CODES = sorted(POLICY_CODES[p] for p in _ONE_NODE_POLICIES)  # the same, as the table's policy column holds them


_SHARE_PREFIX = KOORDINATOR_GPU
_NO_GPUS = RowGPUs("", (), (), (), (), (), {}, {})  # the row of a node without GPUs


def shares_gpu(pod: Pod) -> bool:
    """Whether the pod asks for GPUs through the sharing protocol (the scheduler then picks the GPUs)."""
    if ALIBABA_GPU_MILLI in pod.annotations:
        return True
    return any(r.startswith(_SHARE_PREFIX) for c in pod.all_containers for r in c.limits_or_requests)


def node_gpu_state(node: NodeRecord, default_memory: int = DEFAULT_GPU_MEMORY) -> NodeGPUState:
    """The node's GPUs with every share the ledger holds there taken.

    Remembered per node until the set of shares there changes (a reserve or a pod leaving).
    """
    key = _state_key(node, default_memory)
    known = _STATES.get(id(node))
    if known is not None and known[0] == key and known[1]() is node and _still_held(node, known[2]):
        return known[3]
    gpus = inventory_gpus(node.inventory, default_memory=default_memory) if node.inventory is not None else ()
    state = NodeGPUState(gpus, key[2])
    held = _held(node)
    for uid, allocation in held.items():
        state = state.take(allocation, source=f"pod {node.pods[uid].pod.key}")
    _remember_state(node, key, held, state)
    return state


def _state_key(node: NodeRecord, default_memory: int) -> tuple:
    """What a node's GPU state is computed from besides the shares it holds: its hardware and settings."""
    return (id(node.inventory), default_memory, node.spec.labels.get(GPU_MODEL_LABEL, ""))


def _held(node: NodeRecord) -> dict[str, Any]:
    """The shares the ledger holds on the node: pod uid -> its allocation, in the ledger's order."""
    return {uid: e.extras[GPUShare.name] for uid, e in node.pods.items() if GPUShare.name in e.extras}


def _still_held(node: NodeRecord, held: Mapping[str, Any]) -> bool:
    """Whether the node holds exactly the shares ``held`` (remembered with its state) still.

    Only :meth:`GPUShare.reserve` adds a share, and it remembers the node's new state with them
    all; so the remembered shares are all there is unless one left with its pod (or the pod's
    ledger entry was replaced). Checking those few is enough: no walk over the node's pods, of
    which a GPU server holds several times as many as other nodes.
    """
    pods = node.pods
    for uid, allocation in held.items():
        entry = pods.get(uid)
        if entry is None or entry.extras.get(GPUShare.name) is not allocation:
            return False
    return True


def _remember_state(node: NodeRecord, key: tuple, held: dict[str, Any], state: NodeGPUState) -> None:
    # The record is held weakly and its entry goes with it: a removed node's record (and the
    # replica it holds) must not outlive the node because its GPUs were once looked at.
    ident = id(node)
    _STATES[ident] = (key, weakref.ref(node, lambda _, ident=ident: _STATES.pop(ident, None)), held, state)


# id(node record) -> (hardware and settings, the record (weakly), the shares held, the state)
_STATES: dict[int, tuple[tuple, weakref.ref[NodeRecord], dict[str, Any], NodeGPUState]] = {}


def gpus_held_whole(kubelet: KubeletNode | None, inventory: Iterable[NodeDevice] | None) -> set[str]:
    """GPUs a node's kubelet has given whole to device-plugin pods (they cannot hold shares)."""
    if kubelet is None or inventory is None:
        return set()
    used: set[str] = set()
    devices = kubelet.devices
    for resource in _gpu_resources(inventory):
        if resource in devices.resources:
            used |= devices.in_use(resource)
    return used


def aligned_picks(manager: DeviceManager, resource: str, shared: frozenset[str]) -> tuple[tuple[int, ...], int]:
    """What a kubelet's device manager hands out of ``resource`` under a hint naming one NUMA node.

    First, per NUMA node of the manager in id order: bit ``n`` is set when the NUMA node has ``n``
    free devices of the resource and the devices the manager would give a container asking for
    ``n`` with that node as its hint
    (:meth:`~toposched.kubelet.device_manager.DeviceManager.pick`) hold none of ``shared``.
    Second: the most healthy devices one NUMA node has. A request up to that many has one-node
    device hints as its only preferred ones (upstream ``minAffinitySize`` is 1; counted here over
    healthy devices only, so never larger than upstream's count), and a kubelet enforcing
    ``restricted`` or ``single-numa-node`` then aligns the devices to one NUMA node with enough
    free ones: where no such node's pick is free of shares, the pod is refused at Reserve.
    """
    state = manager.state
    table = state.devices.get(resource, {})
    healthy = state.healthy.get(resource, frozenset())
    free = manager.available(resource)
    in_order = not manager.has_preferred_allocation(resource)
    by_numa = []
    most = 0
    for numa in sorted(state.numa_nodes):
        here = [d for d, nodes in table.items() if nodes and numa in nodes]
        most = max(most, sum(1 for d in here if d in healthy))
        count = sum(1 for d in here if d in free)
        bits = 0
        if in_order:  # without a plugin preference, the pick of n is the start of the pick of them all
            for n, device in enumerate(manager.pick(resource, count, (numa,)) if count else (), start=1):
                if device in shared:
                    break
                bits |= 1 << n
        else:
            for n in range(1, count + 1):
                if not shared.intersection(manager.pick(resource, n, (numa,))):
                    bits |= 1 << n
        by_numa.append(bits)
    return tuple(by_numa), most


def free_by_numa(manager: DeviceManager) -> dict[str, tuple[int, ...]]:
    """Per resource the device manager serves, per NUMA node in id order: how many free devices a
    hint naming that node alone counts (upstream ``generateDeviceTopologyHints`` counts a device
    for a NUMA set when its NUMA nodes meet the set; devices without any count nowhere)."""
    state = manager.state
    numa_nodes = sorted(state.numa_nodes)
    out = {}
    for resource in manager.resources:
        table = state.devices.get(resource, {})
        counts = dict.fromkeys(numa_nodes, 0)
        for device in manager.available(resource):
            for numa in table.get(device) or ():
                if numa in counts:
                    counts[numa] += 1
        out[resource] = tuple(counts.values())
    return out


def _gpu_resources(inventory: Iterable[NodeDevice]) -> set[str] | tuple[str, ...]:
    """The resources an inventory's GPUs are served as (remembered per hardware model)."""
    key = getattr(inventory, "key", None)
    known = _GPU_RESOURCES.get(key) if key is not None else None
    if known is None:
        known = tuple(sorted({d.resource for d in inventory if d.kind == DeviceKind.GPU}))
        if key is not None:
            _GPU_RESOURCES[key] = known
    return known


_GPU_RESOURCES: dict[int, tuple[str, ...]] = {}  # DeviceInventory.key -> its GPUs' resources


def share_tie_order(gpus: NodeGPUState, kubelet: KubeletNode | None, inventory: Iterable[NodeDevice] | None) -> tuple[int, ...]:
    """The node's GPUs (indices into ``gpus.devices``) in the order shares should prefer them on a tie.

    The kubelet hands whole GPUs to ``nvidia.com/gpu`` pods in its device plugin's order (on the
    NUMA nodes the Topology Manager chose) and knows nothing of shares; a whole-GPU pod whose
    pick lands on a GPU holding shares is refused. So among GPUs a packing policy rates equal, a
    share takes first a GPU the kubelet does not serve, then the one it would hand out last.
    """
    position: dict[str, int] = {}
    if kubelet is not None and inventory is not None:
        tables = kubelet.devices.state.devices
        for resource in _gpu_resources(inventory):
            for i, device in enumerate(tables.get(resource, ())):
                position.setdefault(device, i)

    def rank(i: int) -> tuple[int, int]:
        served = position.get(gpus.devices[i].id)
        return (0, i) if served is None else (1, -served)

    return tuple(sorted(range(len(gpus.devices)), key=rank))


def gpus_with_shares(state: NodeGPUState) -> frozenset[str]:
    """The GPUs of a node's state that hold shares of some pod (compute or memory)."""
    return frozenset(d.id for d, core, memory in zip(state.devices, state.used_core, state.used_memory) if core or memory)


def _kubelet_gpus(node: NodeRecord) -> set[str]:
    return gpus_held_whole(node.model, node.inventory)


class _NodeGPUs:
    """A node's GPUs as the plugin reads them, each part computed when first read.

    ``state``: the GPUs with every share taken; ``busy``: the GPUs the node's kubelet gave
    whole (no shares there); ``free``: per GPU, its free share in milli-GPU (0 where busy);
    ``tie_order``: the GPUs the kubelet hands out last first (see :func:`share_tie_order`);
    ``shared``: the GPUs holding shares.
    """

    __slots__ = ("_node", "_default_memory", "_state", "_busy", "_free", "_tie_order", "_shared", "_views")

    def __init__(self, node: NodeRecord, default_memory: int) -> None:
        self._node, self._default_memory = node, default_memory
        self._state: NodeGPUState | None = None
        self._busy: frozenset[str] | None = None
        self._free: tuple[int, ...] | None = None
        self._tie_order: tuple[int, ...] | None = None
        self._shared: frozenset[str] | None = None
        self._views: dict[bool, tuple[NodeView, int] | None] = {}

    def view(self, gpu_less: bool) -> tuple[NodeView, int] | None:
        """The node as the packing policies see it, and its smallest GPU memory (see :meth:`GPUShare._view`)."""
        if gpu_less not in self._views:
            cpu, memory = _host_free(self._node)
            devices = self.state.devices
            if not devices:
                self._views[gpu_less] = (NodeView(cpu, memory), 0) if gpu_less else None
            else:
                self._views[gpu_less] = (NodeView(cpu, memory, self.free, self.state.model),
                                         0 if gpu_less else min(d.memory for d in devices))
        return self._views[gpu_less]

    @property
    def shared(self) -> frozenset[str]:
        """The GPUs holding shares of some pod (compute or memory)."""
        if self._shared is None:
            self._shared = gpus_with_shares(self.state)
        return self._shared

    @property
    def tie_order(self) -> tuple[int, ...]:
        if self._tie_order is None:
            self._tie_order = share_tie_order(self.state, self._node.model, self._node.inventory)
        return self._tie_order

    @property
    def state(self) -> NodeGPUState:
        if self._state is None:
            self._state = node_gpu_state(self._node, self._default_memory)
        return self._state

    @property
    def busy(self) -> frozenset[str]:
        if self._busy is None:
            self._busy = frozenset(_kubelet_gpus(self._node))
        return self._busy

    @property
    def free(self) -> tuple[int, ...]:
        if self._free is None:
            busy = self.busy
            self._free = tuple(0 if d.id in busy else f for d, f in zip(self.state.devices, self.state.free_milli()))
        return self._free


class _NodeGPUsKept:
    """Each node's :class:`_NodeGPUs`, kept until the cluster says the node changed (or a share is reserved)."""

    def __init__(self, cluster: Cluster, default_memory: int) -> None:
        self.default_memory = default_memory
        self._known: dict[str, _NodeGPUs] = {}
        cluster.subscribe(self.forget)

    def forget(self, name: str) -> None:
        self._known.pop(name, None)

    def of(self, node: NodeRecord) -> _NodeGPUs:
        known = self._known.get(node.name)
        if known is None:
            known = self._known[node.name] = _NodeGPUs(node, self.default_memory)
        return known


@registry.register
class GPUShare:
    """Shares of GPUs placed by the scheduler (see the module notes)."""

    name = "GPUShare"

    def __init__(self, args: GPUShareArgs | Mapping[str, Any]) -> None:
        args = plugin_args(GPUShareArgs, args, self.name)
        self.policy_name = args.policy
        self.seed = args.seed
        self.default_memory = args.default_gpu_memory
        self.workload: TargetWorkload | None = None
        self.policy: Policy = make_policy(self.policy_name, seed=self.seed) if self.policy_name != "FGD" else None  # type: ignore[assignment]
        self._kept: weakref.WeakKeyDictionary[Cluster, _NodeGPUsKept] = weakref.WeakKeyDictionary()
        self._gpu_rows_kept: weakref.WeakKeyDictionary[NodeTable, GPURows] = weakref.WeakKeyDictionary()
        # node -> (the GPU state and kubelet device maps its row was read from, the row)
        self._row_facts: NodeCache[RowGPUs] = NodeCache()

    def set_target_workload(self, tasks: Sequence[Task], *, coverage: float = 1.0) -> None:
        """The pods FGD measures fragmentation against (the paper: the trace's typical pods)."""
        self.workload = TargetWorkload.from_tasks(tasks, coverage=coverage)
        if self.policy_name == "FGD":
            self.policy = make_policy("FGD", workload=self.workload)

    def _policy(self) -> Policy:
        if self.policy is None:
            raise InputError("the FGD policy needs a target workload (set_target_workload)", field=f"{self.name}.args.policy")
        return self.policy

    # ---- the request ---------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: Pod) -> Status:
        """Read the pod's GPU share request; malformed or inconsistent shares are unresolvable, and a
        pod asking for neither shares nor whole devices is Skip (the filter passes every node)."""
        try:
            request = self._request(state, pod)
        except InputError as err:
            return Status.unresolvable(str(err), plugin=self.name)
        if request is None and not self._whole(state, pod):
            return Status.skip(self.name)
        return Status.success()

    def _request(self, state: CycleState, pod: Pod) -> Any:
        if _SHARE_REQUEST not in state:
            state[_SHARE_REQUEST] = pod_gpu_request(pod) if shares_gpu(pod) else None
        return state[_SHARE_REQUEST]

    def _host(self, node: NodeRecord, pod: Pod) -> Host:
        requests = pod.effective_requests()
        return Host(*_host_free(node), requests.get("cpu", 0), requests.get("memory", 0))

    def _gpus(self, cluster: Cluster | None, node: NodeRecord) -> _NodeGPUs:
        """The node's GPUs, kept per cluster between changes of the node."""
        if cluster is None or cluster.nodes.get(node.name) is not node:
            return _NodeGPUs(node, self.default_memory)
        kept = self._kept.get(cluster)
        if kept is None:
            kept = self._kept[cluster] = _NodeGPUsKept(cluster, self.default_memory)
        return kept.of(node)

    def _choose(self, state: CycleState, pod: Pod, node: NodeRecord, numa: frozenset[int] = frozenset()) -> Any:
        request = self._request(state, pod)
        known = self._gpus(state.cluster, node)
        gpus, busy = known.state, known.busy
        candidates = [d.id for d in gpus.devices if d.id not in busy and (not numa or d.numa is None or d.numa in numa)]
        return gpus.choose(request, candidates=candidates, policy=self._policy(), host=self._host(node, pod),
                           tie_order=known.tie_order), gpus

    # ---- filter and score ----------------------------------------------------------------------

    def _whole(self, state: CycleState, pod: Pod) -> tuple[tuple[str, int], ...]:
        """The pod's requests of extended resources other than shares (whole GPUs among them)."""
        if _WHOLE not in state:
            state[_WHOLE] = tuple(sorted((r, n) for r, n in pod.effective_requests().items()
                                      if n > 0 and "/" in r and not r.startswith(_SHARE_PREFIX)))
        return state[_WHOLE]

    def _one_holder(self, state: CycleState, pod: Pod) -> bool:
        """Whether one app container asks for all the whole devices the pod asks for (no init
        container asks for any): the kubelet then gives it its devices from the NUMA node its
        Topology Manager aligned the pod to, in its own order, none reused from another container."""
        if _ONE_HOLDER not in state:
            names = {r for r, _ in self._whole(state, pod)}
            holders = [c for c in pod.all_containers if any(c.limits_or_requests.get(r, 0) > 0 for r in names)]
            state[_ONE_HOLDER] = len(holders) == 1 and all(holders[0] is not c for c in pod.init_containers)
        return state[_ONE_HOLDER]

    def filter_key(self, state: CycleState, pod: Pod) -> Any:
        """The filter reads the pod's share request and its whole-device requests; for a pod whose
        whole devices one container asks for, also what of the pod and that container the kubelet
        aligns to NUMA nodes."""
        whole = self._whole(state, pod)
        if not whole or not self._one_holder(state, pod):
            return self._request(state, pod), whole, False
        pod_wants, holder, alone = self._aligned_wants(state, pod)
        return (self._request(state, pod), whole, True, tuple(sorted(pod_wants.items())), tuple(sorted(holder.items())),
                alone)

    def _aligned_wants(self, state: CycleState, pod: Pod) -> tuple[dict[str, int], dict[str, int], bool]:
        """What the kubelet aligns of the pod (pod scope) and of the one container asking for its
        whole devices (container scope), as :class:`~toposched.scheduler.plugins.numa.AlignedRequest`
        says, and whether that container is the only one with anything to align; once per cycle."""
        if _ALIGNED_WANTS not in state:
            aligned = aligned_request(state, pod)
            names = [r for r, _ in self._whole(state, pod)]
            holder = next((c for c in aligned.containers if any(r in c for r in names)), {})
            state[_ALIGNED_WANTS] = (aligned.pod, holder, len(aligned.containers) == 1)
        return state[_ALIGNED_WANTS]

    def filter_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> tuple[np.ndarray, Any]:
        """Per row: enough of its GPUs not held whole by the kubelet have the share free; for a pod asking
        for whole GPUs, the kubelet would not hand out a GPU holding shares (see the module notes). From
        the rows' GPUs as arrays (:class:`GPURows`); the runner derives the few-rows and per-node forms."""
        request = self._request(state, pod)
        whole = self._whole(state, pod)
        if request is None and not whole:
            return np.ones(len(rows), dtype=bool), ""
        gpus = self._rows(table)
        texts = [""]
        codes = np.zeros(len(rows), dtype=np.int64)
        if request is None:
            # Per resource in order, the rows whose kubelet could hand out enough GPUs but not
            # enough without shares, then (on kubelets aligning them to one NUMA node) the rows
            # where every NUMA node's pick holds shares; a row's reason is its first such resource's.
            one_node = None
            if self._one_holder(state, pod):
                policy = table.pick(table.view("policy"), rows)
                one_node = np.logical_or.reduce([policy == code for code in _ONE_NODE_CODES])  # np.isin: 25x the time
            for resource, count in whole:
                if resource not in gpus.whole:
                    continue  # no node serves it as GPUs
                serves, free, clean, most, picks = gpus.whole[resource]
                serves, free, clean, most = serves[rows], free[rows], clean[rows], most[rows]
                enough = serves & (free >= count)
                refused = np.flatnonzero(enough & (clean < count) & (codes == 0))
                if len(refused):
                    seen, which = _pairs_seen(clean[refused], free[refused])
                    codes[refused] = len(texts) + which
                    texts += [_held_back(count, resource, c, f) for c, f in seen]
                if one_node is not None:
                    judged = np.flatnonzero(enough & one_node & (most >= count) & (codes == 0))
                    if len(judged):
                        at = rows[judged]
                        clean_pick = (picks[:, at] >> count) & 1 == 1  # zone slots x judged rows
                        hints, exact = self._hint_sets(state, pod, table, gpus, resource, count, at)
                        nowhere = ~(clean_pick & hints).any(axis=0)
                        # Where the hints are known exactly, the kubelet takes the lowest of them.
                        first = first_true(hints[:gpus.slots])
                        lowest = exact & (first < gpus.slots) & ~nowhere
                        lowest[lowest] = ~clean_pick[first[lowest], np.flatnonzero(lowest)]
                        for refused, text in ((judged[nowhere], _shared_pick(count, resource)),
                                              (judged[lowest], _lowest_pick(count, resource))):
                            if len(refused):
                                codes[refused] = len(texts)
                                texts.append(text)
        else:
            fitting, candidates = gpus.fitting(request, rows)
            # Rows whose node is gone are left to the filters that say so.
            refused = np.flatnonzero((fitting < request.count) & table.pick(table.view("live"), rows))
            if len(refused):
                seen, which = _pairs_seen(fitting[refused], candidates[refused])
                codes[refused] = 1 + which
                texts += [NodeGPUState.too_few(request, f, c).reason for f, c in seen]
        return codes == 0, RowReasons(codes, texts)

    def _hint_sets(self, state: CycleState, pod: Pod, table: NodeTable, gpus: GPURows, resource: str, count: int,
                   at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The NUMA nodes that can be the hint of a kubelet aligning the pod's devices to one NUMA
        node (zone slots and the slot beyond x rows ``at``), and per row whether they are exactly
        the ones it chooses from.

        That kubelet admits only a preferred merged hint, and a merged hint is preferred only where
        every provider's hint is preferred and all name the same NUMA nodes (upstream
        ``mergePermutation``). ``count`` of ``resource`` is a request one NUMA node's devices
        could hold, so its preferred hints are the NUMA nodes with that many free. So are those of
        each other aligned request (the pod's at pod scope, the devices' container's at container
        scope) that some zone's capacity holds: devices as the device manager counts them, CPUs and
        memory where their manager is static. Requests of a wider preferred width are left alone
        (the kubelet refuses those pods anyway).

        At pod scope without memory the Static memory manager aligns, these are exactly the NUMA
        nodes every provider prefers (the pod's hints are computed before any of it is placed; the
        memory manager's also depend on its groups), and the kubelet chooses the lowest of them
        (upstream ``compareHints``: of two preferred hints of one width, the lower mask).
        """
        pod_wants, holder, alone = self._aligned_wants(state, pod)
        pod_scope = table.pick(table.view("pod_scope"), at)
        slots = gpus.slots
        hints = gpus.devices[resource][:, at] >= count
        cpu_static, mem_static = table.pick(table.view("cpu_static"), at), table.pick(table.view("mem_static"), at)
        # A pod whose devices' container is the only one with anything to align is placed at
        # container scope as at pod scope: nothing of it is placed before that container.
        exact = pod_scope | alone
        if any(aligning_manager(name) == "memory" for name in pod_wants):
            exact &= ~mem_static
        for wants, scope in ((pod_wants, pod_scope), (holder, ~pod_scope)):
            if not scope.any():
                continue
            for name, amount in wants.items():
                if name == resource:
                    continue
                by = aligning_manager(name)
                aligned = scope & aligns(by, cpu_static, mem_static)  # devices: aligned on every such kubelet
                devices = None if by else gpus.devices.get(name)
                if name not in table.zone_resources or (not by and devices is None):
                    exact &= ~aligned  # no count per NUMA node to read
                    continue
                applies = aligned & (amount <= table.pick(table.zone_capacity_max(name), at))
                exact &= ~aligned | applies  # a wider preferred width (or align-by-socket's) is not read
                if not applies.any():
                    continue
                # The slot beyond the table's zones is not known for CPUs and memory: kept.
                free = take_rows(table.zone_free(name), at)[:slots] if by else devices[:, at]  # type: ignore[index]
                hints[: len(free)] &= (free >= amount) | ~applies[None, :]
        return hints, exact

    def _rows(self, table: NodeTable) -> GPURows:
        """Every row's GPUs as arrays, kept per table and brought up to date at the rows changed since."""
        kept = self._gpu_rows_kept.get(table)
        if kept is None:
            kept = self._gpu_rows_kept[table] = GPURows()
        return kept.update(table, lambda row: self._row_gpus(table, row))

    def _row_gpus(self, table: NodeTable, row: int) -> RowGPUs | None:
        """One row's GPUs as :meth:`filter_all` and the policies' views read them; None where the node is gone."""
        nodes = table.cluster.nodes
        node = nodes.get(table.names[row])
        if node is None:
            self._row_facts.forget_departed(nodes)
            return None
        if node.inventory is None or not _gpu_resources(node.inventory):
            return _NO_GPUS
        known = self._gpus(table.cluster, node)
        # What the answer is read from: the node's GPU state (replaced when its shares change) and
        # its kubelet's device allocations and healthy devices (immutable maps, replaced when they
        # change; the device manager's views are memoised on them too). A pod that touches neither
        # (most pods on a GPU server) leaves the answer as it was.
        gpus = known.state
        manager = node.model.devices if node.model is not None else None
        sources = (gpus, manager.state.allocations, manager.state.healthy) if manager is not None else (gpus, None, None)
        return self._row_facts.read(node.name, sources, lambda: _row_gpus(known, node, manager))

    def score_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """The packing policy's raw 0-100 score of each row's GPUs for the pod (pods without shares:
        FGD's score of the fragmentation they cause where FGD has a target workload, else 0).

        Raw: a row's score depends on that row alone (a request in bytes is measured against
        that node's smallest GPU); :meth:`normalize_scores` then normalises over every feasible
        node (BestFit's min-max, Random's draw), as NormalizeScore does.
        """
        request = self._request(state, pod)
        out = np.zeros(len(rows), dtype=np.int64)
        if not len(rows) or (request is None and not self._scores_gpu_less(state, pod)):
            # Every pod scored keeps the GPU rows current once a GPU pod has needed them, so the next
            # GPU pod reads the few rows changed since the last pod, not every row changed since the
            # last GPU pod (~13 at 5,000 nodes, 49 µs each on a GPU server: most of its filter's time).
            if table in self._gpu_rows_kept:
                self._rows(table)
            return out
        gpus = self._rows(table)
        if request is None:  # every row is scored, GPUs or not (smallest memory 0)
            groups = [(np.arange(len(rows)), 0)]
        else:  # the rows with GPUs, by their smallest GPU's memory (a request in bytes is measured against it)
            with_gpus = np.flatnonzero(gpus.count[rows] > 0)
            smallest = gpus.smallest[rows[with_gpus]]
            groups = [(with_gpus[smallest == memory], memory) for memory in np.unique(smallest).tolist()]
        policy = self._policy()
        for positions, memory in groups:
            scores = policy.raw_score(gpus.batch(table, rows[positions]), self._task(state, pod, memory))
            out[positions] = np.where(scores.feasible, np.clip(scores.scores, 0, MAX_NODE_SCORE), 0)
        return out

    def score_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[int]:
        """:meth:`score_all` node by node in plain Python where the policy has that form."""
        gpu_less = self._request(state, pod) is None
        if gpu_less and not self._scores_gpu_less(state, pod):
            return [0] * len(rows)
        policy = self._policy()
        out = []
        for row in rows:
            seen = self._view(table, row, gpu_less=gpu_less)
            if seen is None:
                out.append(0)
                continue
            score = policy.raw_score_one(seen[0], self._task(state, pod, seen[1]))
            out.append(min(max(score, 0), MAX_NODE_SCORE))
        return out

    def _scores_gpu_less(self, state: CycleState, pod: Pod) -> bool:
        """Whether a pod without shares is scored: under FGD with a target workload, by the GPU
        fragmentation its CPU and memory cause (as the paper's FGD scores CPU-only pods), unless
        it asks for whole GPUs through a device plugin (the kubelet picks those, not a policy)."""
        return self.policy_name == "FGD" and self.policy is not None and not self._whole(state, pod)

    def _view(self, table: NodeTable, row: int, *, gpu_less: bool = False) -> tuple[NodeView, int] | None:
        """A row's node as the packing policies see it, and its smallest GPU memory; None without GPUs.

        ``gpu_less``: for a pod without GPUs, every node has a view (no GPUs: an empty row, which
        FGD rates neutral, 50: nothing to fragment), and the memory is 0.
        """
        node = table.cluster.nodes.get(table.names[row])
        if node is None:
            return (NodeView(0, 0), 0) if gpu_less else None
        return self._gpus(table.cluster, node).view(gpu_less)

    def _task(self, state: CycleState, pod: Pod, smallest: int) -> Task:
        """The pod as the policies see it on a node whose smallest GPU has ``smallest`` bytes (kept per cycle)."""
        tasks = state.get(_TASKS)
        if tasks is None:
            tasks = state[_TASKS] = {}
        task = tasks.get(smallest)
        if task is None:
            request = self._request(state, pod)
            requests = pod.effective_requests()
            if request is None:  # a pod without GPUs (see _scores_gpu_less)
                task = tasks[smallest] = Task(cpu=requests.get("cpu", 0), memory=requests.get("memory", 0))
                return task
            task = tasks[smallest] = Task(cpu=requests.get("cpu", 0), memory=requests.get("memory", 0),
                                     gpu_milli=min(MILLI, request.milli_on(smallest)), num_gpu=request.count)
        return task

    def normalizes(self, state: CycleState, pod: Pod) -> bool:
        """Whether the pod's scores need :meth:`normalize_scores` (a share pod under BestFit or Random)."""
        return self._request(state, pod) is not None and self._policy().normalizes

    def normalize_scores(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        """NormalizeScore: the policy's normalisation over the raw scores of every feasible node."""
        if not self.normalizes(state, pod):
            return scores
        return self._policy().normalize(scores)

    # ---- reserve -------------------------------------------------------------------------------

    def confirm(self, state: CycleState, pod: Pod, node: NodeRecord, placement: Placement) -> Status:
        """A whole-GPU pod's kubelet must not pick a GPU that holds shares; a share pod must still fit aligned."""
        request = self._request(state, pod)
        if request is None:
            taken = {i for ids in placement.devices().values() for i in ids}
            if not taken:
                return Status.success()  # the common case: a pod without devices clashes with nothing
            clash = self._gpus(state.cluster, node).shared & taken
            if clash:
                return Status.unschedulable(f"the node's kubelet would hand out GPU {sorted(clash)[0]}, which holds "
                                            f"shares of other pods", plugin=self.name)
            return Status.success()
        choice, _ = self._choose(state, pod, node, placement.numa_nodes)
        if isinstance(choice, Refusal):
            return Status.unschedulable(f"{choice.reason} on the pod's NUMA nodes", plugin=self.name)
        state[_CHOICE] = (node.name, choice)
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node: NodeRecord) -> None:
        """Nothing to give back here: the share leaves with the pod's ledger entry (``Cluster.forget``)."""

    def reserve(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        """Record the share in the ledger and in the pod's placement (devices and device-allocated)."""
        chosen = state.pop(_CHOICE, None)
        if chosen is None or chosen[0] != node.name:
            return Status.success()
        allocation: GPUAllocation = chosen[1]
        entry = node.pods[pod.uid or pod.key]
        cluster = state.cluster
        before = self._gpus(cluster, node).state
        entry.extras[self.name] = allocation
        # The new state is the old one with this allocation taken (what node_gpu_state would
        # rebuild from every share on the node), remembered under the node's new key.
        after = before.take(allocation, source=f"pod {pod.key}")
        _remember_state(node, _state_key(node, self.default_memory), _held(node), after)
        kept = self._kept.get(cluster) if cluster is not None else None
        if kept is not None:
            kept.forget(node.name)  # the node's shares changed without the cluster knowing
        annotation = _device_allocated(allocation, tuple(after.devices[s.minor].memory for s in allocation.shares))
        entry.placement = _with_shares(entry.placement or Placement(node.name), pod, allocation, annotation)
        return Status.success()


def _pairs_seen(first: np.ndarray, second: np.ndarray) -> tuple[list[list[int]], np.ndarray]:
    """The distinct (first, second) pairs of two arrays of counts (not negative), in ascending order,
    and each position's index among them: ``np.unique(..., axis=1)`` without its cost (290 µs for
    150 pairs, against 60 µs for one key per pair, and ~10 µs counting the keys where they are small)."""
    span = int(second.max()) + 1
    combined = first * span + second
    if int(combined.max()) < _DENSE_KEYS:  # GPU counts: a table of the keys seen, not a sort
        seen = np.bincount(combined)
        keys = np.flatnonzero(seen)
        index = np.zeros(len(seen), dtype=np.int64)
        index[keys] = np.arange(len(keys))
        which = index.take(combined)
    else:
        keys, which = np.unique(combined, return_inverse=True)
    return np.stack([keys // span, keys % span], axis=1).tolist(), which.reshape(-1)


def _shared_pick(count: int, resource: str) -> str:
    """Why a whole-GPU pod is refused where the kubelet aligns devices to one NUMA node and each such node's pick holds shares."""
    return (f"needs {count} {resource}; on every NUMA node that could hold them, the kubelet would hand out a GPU that "
            f"holds shares of other pods")


def _lowest_pick(count: int, resource: str) -> str:
    """Why a whole-GPU pod is refused where the NUMA node its kubelet would align it to is known and its pick holds shares."""
    return (f"needs {count} {resource}; the kubelet would align the pod to the lowest NUMA node that can hold it, where "
            f"it would hand out a GPU that holds shares of other pods")


def _held_back(count: int, resource: str, clean: int, free: int) -> str:
    """Why a whole-GPU pod is refused where too few of the GPUs its kubelet could hand out hold no shares."""
    return f"needs {count} {resource}; only {clean} of the {free} GPUs the kubelet could hand out hold no shares of other pods"


@functools.lru_cache(maxsize=4096)
def _device_allocated(allocation: GPUAllocation, memories: tuple[int, ...]) -> str:
    """The ``device-allocated`` annotation of an allocation whose GPUs have these memories
    (remembered: pods of one shape on one hardware model get the same text)."""
    return format_device_allocated({"gpu": gpu_entries(allocation, memories)})


def _host_free(node: NodeRecord) -> tuple[int, int]:
    """The CPU and memory the node's pods leave of its allocatable (the packing policies' host view)."""
    allocatable = node.spec.allocatable or (node.model.allocatable if node.model else {})
    return (max(0, allocatable.get("cpu", 0) - node.requested.get("cpu", 0)),
            max(0, allocatable.get("memory", 0) - node.requested.get("memory", 0)))


def _with_shares(placement: Placement, pod: Pod, allocation: GPUAllocation, annotation: str) -> Placement:
    """The placement with the shared GPUs listed on the first container asking for a share."""
    name = next((c.name for c in pod.all_containers if any(r.startswith(_SHARE_PREFIX) for r in c.limits_or_requests)),
                pod.all_containers[0].name if pod.all_containers else None)
    containers = dict(placement.containers)
    if name is not None:
        current = containers.get(name) or ContainerPlacement()
        containers[name] = dataclasses.replace(current, devices={**current.devices, _SHARE_PREFIX: allocation.devices})
    return dataclasses.replace(placement, containers=containers,
                               extra_annotations={**placement.extra_annotations, DEVICE_ALLOCATED: annotation})


def _row_gpus(known: _NodeGPUs, node: NodeRecord, manager: Any) -> RowGPUs:
    """A GPU server's row as GPUShare reads it: its GPUs' shares and memory, the ones its kubelet
    holds whole (``manager``, the replica's device manager, if any) and what of each GPU
    resource the kubelet could still hand out."""
    gpus, busy = known.state, known.busy
    whole = {}
    one_node = manager is not None and node.policy in _ONE_NODE_POLICIES
    if manager is not None:
        for resource in _gpu_resources(node.inventory):
            if resource in manager.resources:
                free = manager.available(resource)
                by_numa, most = aligned_picks(manager, resource, known.shared) if one_node else ((), 0)
                whole[resource] = (len(free), len(free - known.shared), most, by_numa)
    return RowGPUs(gpus.model if gpus.devices else "", tuple(d.memory for d in gpus.devices),
                   gpus.used_core, gpus.used_memory, tuple(d.id in busy for d in gpus.devices),
                   known.free if gpus.devices else (), whole, free_by_numa(manager) if one_node else {})
