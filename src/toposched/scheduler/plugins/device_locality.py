"""DeviceLocality: GPUs and RDMA NICs together, under one PCIe switch where the pod needs it.

A pod asking for devices (extended resources like ``nvidia.com/gpu``, ``rdma/hca``) may state
where they must sit together: ``toposched.io/device-scope`` (``pcie|numa|node``, ``:required``
or ``:preferred``) or Koordinator's ``scheduling.koordinator.sh/device-joint-allocate``.

* Filter: the node's free devices (its kubelet replica's view) admit a choice within a
  required scope, found by :func:`toposched.devices.choose_devices`; otherwise the node fails
  with the chooser's reason ("no 2 nvidia.com/gpu on one NUMA node with a free rdma/hca under
  the same PCIe switch").
* Score: the tightest locality the node can give (pcie > numa > node), then packing: nodes
  whose devices are already in use score higher, so whole switches and NUMA nodes stay free for
  larger requests.
* Confirm (after Reserve): on a node whose kubelet chooses device ids, the ids its replica
  actually gave the pod meet a required scope, else the node is refused. On a node whose agent
  enforces device ids (``toposched.io/device-enforcement: agent``) the ids are chosen here
  instead, per container within its NUMA nodes, packed and within the scope, and replace the
  replica's (with Koordinator's ``device-allocated`` for the agent to apply).

Pods without device requests pass every node and score 0: the plugin costs them nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from toposched.devices import DeviceChoice, DeviceInventory, choose_devices
from toposched.devices.inventory import LEVEL_NODE, LEVEL_NUMA, LEVEL_PCIE
from toposched.devices.joint import DEVICE_TYPE_KINDS
from toposched.devices.koordinator import DEVICE_ALLOCATED, format_device_allocated, whole_device_entries
from toposched.errors import InputError
from toposched.kubelet.device_manager import container_device_requests, pod_device_requests
from toposched.scheduler.cluster import NodeRecord
from toposched.scheduler.framework import MAX_NODE_SCORE, PLACEMENT_OVERRIDE, CycleState, StateKey, registry
from toposched.scheduler.intent import DeviceScope, pod_intent
from toposched.scheduler.placement import Placement
from toposched.scheduler.plugins.cpu_orchestration import ENFORCEMENT_AGENT, device_enforcement
from toposched.scheduler.plugins.gpu_share import gpus_with_shares, node_gpu_state
from toposched.scheduler.plugins.numa import POD_INTENT
from toposched.scheduler.status import Status
from toposched.scheduler.table import NodeTable
from toposched.workload import Pod

__all__ = ["DeviceLocality", "achieved_level", "free_devices"]

# DeviceLocality's PreFilter: the pod's device requests and its device scope.
_REQUEST: StateKey[tuple[dict[str, int], Any]] = StateKey("request", "DeviceLocality")

_LEVEL_SCORE = {LEVEL_PCIE: MAX_NODE_SCORE, LEVEL_NUMA: MAX_NODE_SCORE // 2, LEVEL_NODE: 0}
_MAX_CHOICES = 65536
_RANK = {LEVEL_PCIE: 0, LEVEL_NUMA: 1, LEVEL_NODE: 2}


def free_devices(node: NodeRecord, resources: Any) -> dict[str, frozenset[str]]:
    """The ids of each resource the node's kubelet replica has not given to a pod."""
    if node.model is None:
        return {}
    devices = node.model.devices
    return {r: devices.available(r) for r in resources if r in devices.resources}


def achieved_level(inventory: DeviceInventory, ids: Mapping[str, Any], joint: tuple[str, ...]) -> str:
    """How close the devices of ``joint`` resources sit: ``pcie``, ``numa`` or ``node``.

    The same comparison :func:`choose_devices` ranks by: every secondary resource's devices span
    exactly the primary's PCIe switches (``pcie``), else exactly its NUMA nodes (``numa``). A
    lone resource is ``pcie`` when its devices share one switch, ``numa`` when one NUMA node.
    """
    groups = [[inventory.device(i) for i in ids.get(r, ())] for r in joint if ids.get(r)]
    if not groups:
        return LEVEL_PCIE
    for level, key in ((LEVEL_PCIE, "switch"), (LEVEL_NUMA, "numa_id")):
        sets = [frozenset(getattr(d, key) for d in group) for group in groups]
        if any(None in s for s in sets):
            continue
        if len(sets) == 1 and len(sets[0]) == 1 or len(sets) > 1 and all(s == sets[0] for s in sets[1:]):
            return level
    return LEVEL_NODE


@registry.register
class DeviceLocality:
    """Devices of a pod placed together as its device scope asks (see the module notes)."""

    name = "DeviceLocality"

    def __init__(self, args: Mapping[str, Any]) -> None:
        # choose_devices is deterministic: its answers, by (inventory key, request, scope, free ids).
        self._choices: dict[tuple, DeviceChoice] = {}

    def pre_filter(self, state: CycleState, pod: Pod) -> Status:
        """Read the pod's device request and device scope once; Skip where the filter has nothing
        to check (no devices, or no required scope)."""
        request, scope = self._request(state, pod)
        if not request or scope is None or not scope.required:
            return Status.skip(self.name)
        return Status.success()

    def _request(self, state: CycleState, pod: Pod) -> tuple[dict[str, int], DeviceScope | None]:
        known = state.get(_REQUEST)
        if known is None:
            request = {r: n for r, n in pod_device_requests(pod).items() if n > 0 and "/" in r}
            intent = state.get(POD_INTENT) or pod_intent(pod)
            known = state[_REQUEST] = (request, intent.device_scope)
        return known

    def _choice(self, state: CycleState, pod: Pod, node: NodeRecord) -> DeviceChoice | None:
        request, scope = self._request(state, pod)
        if not request or node.inventory is None or node.model is None:
            return None
        if not any(node.inventory.of_resource(r) for r in request):
            return None  # devices the node does not describe (NodeResourcesFit judges their counts)
        free = free_devices(node, request)
        key = (node.inventory.key, tuple(request.items()), scope, tuple(free.get(r) for r in request))
        choice = self._choices.get(key)
        if choice is None:
            if len(self._choices) >= _MAX_CHOICES:
                self._choices.clear()
            choice = self._choices[key] = choose_devices(node.inventory, request, free, scope=scope)
        return choice

    def filter_key(self, state: CycleState, pod: Pod) -> Any:
        """The filter and score read the pod's device request and device scope, nothing else; no key
        for a pod without devices (its answers cost nothing)."""
        request, scope = self._request(state, pod)
        return (tuple(sorted(request.items())), scope) if request else None

    score_key = filter_key

    def filter(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status:
        """The node's free devices admit a choice within the pod's required scope.

        Without a required scope there is nothing to check here: the device counts per node and
        per NUMA node are NodeResourcesFit's and NUMAAlignment's.
        """
        scope = self._request(state, pod)[1]
        if scope is None or not scope.required:
            return Status.success()
        choice = self._choice(state, pod, node)
        if choice is None or choice.ok:
            return Status.success()
        return Status.unschedulable(choice.reason, plugin=self.name)

    def filter_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> tuple[np.ndarray, Any]:
        """Every row at once for pods without devices; node by node (only stale rows) otherwise."""
        request, scope = self._request(state, pod)
        if not request or scope is None or not scope.required:
            return np.ones(len(rows), dtype=bool), ""
        reasons = self.filter_few(state, pod, table, rows)
        return np.array([r is None for r in reasons], dtype=bool), [r or "" for r in reasons]

    def filter_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: Any) -> list[str | None]:
        """Per row: None where it passes, else the chooser's reason."""
        request, scope = self._request(state, pod)
        if not request or scope is None or not scope.required:
            return [None] * len(rows)
        out: list[str | None] = []
        for row in rows:
            node = table.cluster.nodes.get(table.names[row])
            status = self.filter(state, pod, node) if node is not None else None
            out.append(status.message if status is not None and not status.is_success else None)
        return out

    def score_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """Locality first (pcie > numa > node), then how busy the node's devices already are."""
        if not self._request(state, pod)[0]:
            return np.zeros(len(rows), dtype=np.int64)
        return np.array(self.score_few(state, pod, table, rows), dtype=np.int64)

    def score_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: Any) -> list[int]:
        """:meth:`score_all` as a list (the work is per node either way)."""
        request, scope = self._request(state, pod)
        if not request:
            return [0] * len(rows)
        out = []
        for row in rows:
            node = table.cluster.nodes.get(table.names[row])
            out.append(0 if node is None else self._score(state, pod, node, request, scope))
        return out

    def _score(self, state: CycleState, pod: Pod, node: NodeRecord, request: Mapping[str, int],
               scope: DeviceScope | None) -> int:
        if node.inventory is None or node.model is None:
            return 0
        total = sum(len(node.inventory.of_resource(r)) for r in request)
        if not total:
            return 0
        level = LEVEL_PCIE
        if scope is not None or len(request) > 1:  # locality only matters for a scope or devices together
            choice = self._choice(state, pod, node)
            if choice is None or not choice.ok:
                return 0
            level = choice.level or LEVEL_PCIE
        free = sum(len(ids) for ids in free_devices(node, request).values())
        used_after = min(1.0, (total - free + sum(request.values())) / total)
        return (_LEVEL_SCORE[level] + round(MAX_NODE_SCORE * used_after)) // 2

    def confirm(self, state: CycleState, pod: Pod, node: NodeRecord, placement: Placement) -> Status:
        """The pod's devices sit within its required scope.

        On a node whose devices the agent enforces (``toposched.io/device-enforcement: agent``)
        the devices are chosen here first (:meth:`_agent_devices`) and replace the kubelet
        replica's; elsewhere the replica's choice is what the pod will get.
        """
        request, scope = self._request(state, pod)
        if not request or node.inventory is None:
            return Status.success()
        try:
            agent = node.model is not None and device_enforcement(node) == ENFORCEMENT_AGENT
        except InputError as err:
            return Status.unresolvable(str(err), plugin=self.name)
        if agent:
            chosen = self._agent_devices(state, pod, node, placement, request, scope)
            if isinstance(chosen, Status):
                return chosen
            placement = chosen
        if scope is None or not scope.required:
            return Status.success()
        ids = {r: tuple(i for i in got if i in node.inventory) for r, got in placement.devices().items()}
        joint = self._joint(request, scope, node.inventory)
        level = achieved_level(node.inventory, ids, joint)
        if _RANK[level] > _RANK[scope.scope]:
            who = "the agent's choice gives" if agent else "the node's kubelet would give"
            return Status.unschedulable(
                f"{who} {', '.join(joint)} that sit together only at {level} level, not {scope.scope} as required",
                plugin=self.name)
        return Status.success()

    def _agent_devices(self, state: CycleState, pod: Pod, node: NodeRecord, placement: Placement,
                       request: Mapping[str, int], scope: DeviceScope | None) -> Placement | Status:
        """The placement with device ids chosen by :func:`choose_devices` for each container.

        Each container's devices come from its NUMA nodes (the Topology Manager's decision),
        among the ids no other pod holds and, for GPUs, that hold no shares; the choice packs
        (whole switches and NUMA nodes stay free) and meets the pod's scope. The replacement is
        left in ``state[PLACEMENT_OVERRIDE]`` with Koordinator's ``device-allocated`` for
        the node's agent (written even where the choice is the kubelet's: the agent applies
        what the pod says); a required scope no choice meets refuses the node.
        """
        inventory = node.inventory
        assert inventory is not None
        if any(any(container_device_requests(c, request).values()) for c in pod.init_containers):
            return placement  # the kubelet hands init containers' devices on to the app containers: keep its ids
        gpus = node_gpu_state(node)
        shared = gpus_with_shares(gpus)
        own = placement.devices()
        free = {r: (set(ids) | set(own.get(r, ()))) - shared for r, ids in free_devices(node, request).items()}
        containers = dict(placement.containers)
        for name, c in placement.containers.items():
            wanted = {r: len(ids) for r, ids in c.devices.items() if r in free and ids}
            if not wanted:
                continue
            choice = choose_devices(inventory, wanted, free, numa_nodes=c.numa_nodes or None, scope=scope)
            if not choice.ok:
                if scope is not None and scope.required:
                    return Status.unschedulable(f"{choice.reason} on container {name}'s NUMA nodes", plugin=self.name)
                for r in wanted:  # the kubelet's ids stand
                    free[r] -= set(c.devices[r])
                continue
            for r, ids in choice.ids.items():
                free[r] -= set(ids)
            if any(set(choice.ids[r]) != set(c.devices[r]) for r in wanted):
                devices = {**c.devices, **{r: tuple(sorted(choice.ids[r])) for r in wanted}}
                containers[name] = dataclasses.replace(c, devices=devices)
        chosen = [i for c in containers.values() for r, ids in c.devices.items() if r in free for i in ids]
        entries = whole_device_entries(inventory, chosen, gpus)
        if containers == placement.containers and not entries:
            return placement
        extra = dict(placement.extra_annotations)
        if entries:
            extra[DEVICE_ALLOCATED] = format_device_allocated(entries)
        replaced = dataclasses.replace(placement, containers=containers, extra_annotations=extra)
        state[PLACEMENT_OVERRIDE] = replaced
        return replaced

    def _joint(self, request: Mapping[str, int], scope: DeviceScope, inventory: DeviceInventory) -> tuple[str, ...]:
        if not scope.device_types:
            return tuple(sorted(request))
        kinds = [DEVICE_TYPE_KINDS.get(t, frozenset()) for t in scope.device_types]
        out = []
        for group in kinds:
            for r in sorted(request):
                devices = inventory.of_resource(r)
                if devices and devices[0].kind in group and r not in out:
                    out.append(r)
        return tuple(out)
