"""Feed watched Node, NodeResourceTopology and Pod objects into a scheduler's :class:`Cluster`.

The extender and the standalone scheduler see the cluster the same way: every Node becomes a
node record, every NRT a report (a report that cannot be read makes only its node unschedulable),
and every bound pod — ours, from before a restart, or another scheduler's ("foreign") — is
admitted into its node's kubelet replica. A bound pod that carries our ``toposched.io/placement``
annotation gets exactly the CPUs the annotation names, so after a restart the ledger is what it
was and no CPU is given twice. Unbound pods of our scheduler name are the pending ones.

The clock is passed in; nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from toposched.devices.koordlet_device import devices_from_koordlet
from toposched.errors import InputError
from toposched.kube.client import WatchEvent
from toposched.scheduler import NodeSpec, Placement, Scheduler
from toposched.scheduler.placement import PLACEMENT_ANNOTATION
from toposched.topology.nrt import parse_nrt
from toposched.workload import Pod

__all__ = ["ClusterSync", "pod_key"]

log = logging.getLogger(__name__)

_TERMINAL = ("Succeeded", "Failed")


def pod_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of a pod object (namespace ``default`` when absent)."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class ClusterSync:
    """Applies watch events and relists to ``scheduler.cluster``; keeps the pending pods of ``scheduler_name``.

    ``listeners`` are called as ``listener(kind, event_type, name)`` after each applied change
    (kind is ``"Node"``, ``"NodeResourceTopology"`` or ``"Pod"``), so a queue can retry pods
    that failed for want of room.
    """

    def __init__(self, scheduler: Scheduler, *, clock: Callable[[], float], scheduler_name: str = "toposched"):
        self.scheduler = scheduler
        self.cluster = scheduler.cluster
        self.clock = clock
        self.scheduler_name = scheduler_name
        self.listeners: list[Callable[[str, str, str], None]] = []
        self.invalid: dict[str, str] = {}  # pod key -> why its object could not be read
        self._pending: dict[str, Pod] = {}  # key -> unbound pod of our scheduler
        self._versions: dict[str, str] = {}  # key -> the resourceVersion its pending Pod was parsed from
        self._bound: dict[str, tuple[str, str]] = {}  # key -> (uid, node) of bound pods in the cluster
        self._waiting: dict[str, tuple[Pod, str, Placement | None]] = {}  # key -> bound pod whose node is unknown
        self._relisted: set[str] = set()
        # Called with the kubelet's reason (e.g. TopologyAffinityError) when a pod of our scheduler
        # name that was bound fails admission on its node; each pod is reported once.
        self.on_rejection: Callable[[str], None] | None = None
        self._rejected: set[str] = set()
        # Called once, when nodes, reports and pods have first each been listed in full.
        self.on_ready: Callable[[], None] | None = None

    @property
    def ready(self) -> bool:
        """True once nodes, reports and pods have each been listed in full."""
        return {"Node", "NodeResourceTopology", "Pod"} <= self._relisted

    def _listed(self, kind: str) -> None:
        was_ready = self.ready
        self._relisted.add(kind)
        if self.ready and not was_ready and self.on_ready is not None:
            self.on_ready()

    def parsed_pending(self, obj: Mapping[str, Any]) -> Pod | None:
        """The pending pod ``obj`` as parsed when it was seen, or None unless it was seen at this very
        version (same uid and resourceVersion): a scheduler need not parse the pod again."""
        key, meta = pod_key(obj), obj.get("metadata") or {}
        pod, version = self._pending.get(key), meta.get("resourceVersion")
        if pod is None or not version or self._versions.get(key) != version or pod.uid != (meta.get("uid") or ""):
            return None
        return pod

    def pending(self) -> list[Pod]:
        """Unbound pods of our scheduler name that are not reserved right now, oldest known first."""
        return [p for p in self._pending.values() if (p.uid or p.key) not in self.cluster.pod_node]

    # ---- nodes -------------------------------------------------------------------------------------

    def on_node(self, event: WatchEvent) -> None:
        """A Node was added, changed or deleted."""
        name = _name(event.object)
        if not name:
            log.error("ignoring a Node without metadata.name")
            return
        if event.type == "DELETED":
            self.cluster.remove_node(name)
            self._bound = {k: v for k, v in self._bound.items() if v[1] != name}
        elif event.type in ("ADDED", "MODIFIED"):
            try:
                spec = NodeSpec.from_dict(event.object)
            except InputError as err:
                log.error("node %s is unschedulable: %s", name, err)
                spec = NodeSpec(name, unschedulable=True)
            self.cluster.set_node(spec)
            self._place_waiting(name)
        else:
            return
        self._notify("Node", event.type, name)

    def relist_nodes(self, items: Iterable[Mapping[str, Any]]) -> None:
        """The complete set of Nodes: nodes not in it are gone."""
        items = list(items)
        names = {_name(o) for o in items}
        for gone in [n for n in self.cluster.nodes if n not in names]:
            self.on_node(WatchEvent("DELETED", {"metadata": {"name": gone}}))
        for obj in items:
            self.on_node(WatchEvent("ADDED", dict(obj)))
        self._listed("Node")

    # ---- reports -----------------------------------------------------------------------------------

    def on_nrt(self, event: WatchEvent) -> None:
        """A NodeResourceTopology was added, changed or deleted."""
        name = _name(event.object)
        if not name:
            log.error("ignoring a NodeResourceTopology without metadata.name")
            return
        if event.type == "DELETED":
            self.cluster.drop_report(name)
        elif event.type in ("ADDED", "MODIFIED"):
            try:
                nrt = parse_nrt(event.object, source=f"NodeResourceTopology {name}")
            except InputError as err:
                log.error("node %s is unschedulable until its report is fixed: %s", name, err)
                self.cluster.mark_broken(name, str(err))
            else:
                self.cluster.update_report(nrt, self.clock())
            self._place_waiting(name)
        else:
            return
        self._notify("NodeResourceTopology", event.type, name)

    def relist_nrts(self, items: Iterable[Mapping[str, Any]]) -> None:
        """The complete set of reports: nodes whose report is not in it lose their report."""
        items = list(items)
        names = {_name(o) for o in items}
        for record in list(self.cluster.nodes.values()):
            if record.nrt is not None and record.name not in names:
                self.on_nrt(WatchEvent("DELETED", {"metadata": {"name": record.name}}))
        for obj in items:
            self.on_nrt(WatchEvent("ADDED", dict(obj)))
        self._listed("NodeResourceTopology")

    # ---- koordlet's device descriptions --------------------------------------------------------------

    def on_device(self, event: WatchEvent) -> None:
        """koordlet's ``Device`` object of a node was added, changed or deleted.

        It describes the node's devices where the node's report does not (an NFD report): see
        :meth:`toposched.scheduler.cluster.Cluster.set_node_devices`. A malformed object is
        logged and forgotten; the node keeps what its report counts.
        """
        name = _name(event.object)
        if not name:
            log.error("ignoring a Device without metadata.name")
            return
        if event.type == "DELETED":
            self.cluster.set_node_devices(name, None)
        elif event.type in ("ADDED", "MODIFIED"):
            try:
                _, devices = devices_from_koordlet(event.object)
            except InputError as err:
                log.error("ignoring koordlet's devices of node %s: %s", name, err)
                devices = None
            self.cluster.set_node_devices(name, devices)
            self._place_waiting(name)
        else:
            return
        self._notify("Device", event.type, name)

    def relist_devices(self, items: Iterable[Mapping[str, Any]]) -> None:
        """The complete set of ``Device`` objects: nodes without one lose koordlet's description."""
        items = list(items)
        names = {_name(o) for o in items}
        for record in list(self.cluster.nodes.values()):
            if record.external_devices and record.name not in names:
                self.on_device(WatchEvent("DELETED", {"metadata": {"name": record.name}}))
        for obj in items:
            self.on_device(WatchEvent("ADDED", dict(obj)))

    # ---- pods --------------------------------------------------------------------------------------

    def on_pod(self, event: WatchEvent) -> None:
        """A Pod was added, changed or deleted."""
        obj = event.object
        key = pod_key(obj)
        if event.type == "DELETED":
            self._pod_gone(key)
        elif event.type in ("ADDED", "MODIFIED"):
            self._pod_seen(key, obj)
        else:
            return
        self._notify("Pod", event.type, key)

    def relist_pods(self, items: Iterable[Mapping[str, Any]]) -> None:
        """The complete set of pods: pods not in it are gone (pods we reserved but did not bind yet stay)."""
        items = list(items)
        keys = {pod_key(o) for o in items}
        for gone in [k for k in (*self._bound, *self._pending, *self._waiting, *self.invalid) if k not in keys]:
            self._pod_gone(gone)
        for obj in items:
            self.on_pod(WatchEvent("ADDED", dict(obj)))
        self._listed("Pod")

    def _pod_seen(self, key: str, obj: Mapping[str, Any]) -> None:
        spec = obj.get("spec") or {}
        node = spec.get("nodeName") or ""
        phase = (obj.get("status") or {}).get("phase") or "Pending"
        if phase in _TERMINAL:
            self._pod_gone(key)  # a finished pod holds nothing on its node
            self._note_rejection(obj, node, phase)
            return
        uid = str((obj.get("metadata") or {}).get("uid") or key)
        if node and self.cluster.pod_node.get(uid) == node:  # our own reservation (or a pod seen before) bound
            self._forget_pending(key)
            self.invalid.pop(key, None)
            self._bound[key] = (uid, node)
            return
        try:
            pod = Pod.from_dict(obj, source=f"pod {key}")
        except InputError as err:
            if node:
                log.error("bound pod %s cannot be read; its node may be over-committed: %s", key, err)
            self._pod_gone(key)
            if (spec.get("schedulerName") or "default-scheduler") == self.scheduler_name or node:
                self.invalid[key] = str(err)
            return
        self.invalid.pop(key, None)
        self._forget_pending(key)
        if not node:
            if (spec.get("schedulerName") or "default-scheduler") == self.scheduler_name:
                self._pending[key] = pod
                self._versions[key] = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            return
        known = self.cluster.pod_node.get(uid)
        if known is not None:
            self.cluster.forget(uid)  # bound elsewhere than we reserved: the API server's word wins
        placement = self._annotated_placement(key, pod, node)
        if node not in self.cluster.nodes:
            self._waiting[key] = (pod, node, placement)
            return
        self._add_bound(key, pod, node, placement)

    def _note_rejection(self, obj: Mapping[str, Any], node: str, phase: str) -> None:
        status, spec = obj.get("status") or {}, obj.get("spec") or {}
        uid = str((obj.get("metadata") or {}).get("uid") or pod_key(obj))
        reason = status.get("reason")
        if (phase == "Failed" and node and reason and uid not in self._rejected
                and (spec.get("schedulerName") or "default-scheduler") == self.scheduler_name
                and not any(c.get("state", {}).get("running") or c.get("state", {}).get("terminated")
                            for c in status.get("containerStatuses") or [] if isinstance(c, Mapping))):
            self._rejected.add(uid)
            if self.on_rejection is not None:
                self.on_rejection(str(reason))

    def _add_bound(self, key: str, pod: Pod, node: str, placement: Placement | None) -> None:
        uid = pod.uid or pod.key
        self.cluster.add_bound_pod(pod, node, self.clock())
        self._bound[key] = (uid, node)
        if placement is None or not (placement.cpuset or placement.devices()):
            return
        if not placement.cpuset:  # device ids only (an agent applies them): the replica's cpusets stay
            current = self.cluster.nodes[node].pods[uid].placement
            if current is None:
                return
            placement = dataclasses.replace(current, containers={
                name: dataclasses.replace(c, devices=placement.containers[name].devices)
                if name in placement.containers else c for name, c in current.containers.items()})
        taken = set()
        for other_uid, entry in self.cluster.nodes[node].pods.items():
            if other_uid != uid and entry.placement is not None:
                taken.update(entry.placement.cpuset)
        if taken & set(placement.cpuset):
            log.error("pod %s: placement annotation names CPUs another pod on %s holds; keeping the replica's choice",
                      key, node)
            return
        try:
            self.cluster.replace_placement(pod, placement)
        except InputError as err:
            log.error("pod %s: placement annotation not applied: %s", key, err)

    def _annotated_placement(self, key: str, pod: Pod, node: str) -> Placement | None:
        text = pod.annotations.get(PLACEMENT_ANNOTATION)
        if not text:
            return None
        try:
            placement = Placement.from_annotation(text, source=f"pod {key}")
        except InputError as err:
            log.error("ignoring the placement annotation: %s", err)
            return None
        if placement.node != node:
            log.error("pod %s: placement annotation is for node %s but the pod is bound to %s; ignoring it",
                      key, placement.node, node)
            return None
        return placement

    def _place_waiting(self, node: str) -> None:
        for key, (pod, on, placement) in list(self._waiting.items()):
            if on == node and node in self.cluster.nodes:
                del self._waiting[key]
                self._add_bound(key, pod, node, placement)

    def _forget_pending(self, key: str) -> Pod | None:
        self._versions.pop(key, None)
        return self._pending.pop(key, None)

    def _pod_gone(self, key: str) -> None:
        pending = self._forget_pending(key)
        if pending is not None and (pending.uid or pending.key) in self.cluster.pod_node:
            self.scheduler.unreserve(pending)  # deleted while reserved and not yet bound
        self._waiting.pop(key, None)
        self.invalid.pop(key, None)
        bound = self._bound.pop(key, None)
        if bound is not None:
            self.cluster.forget(bound[0], self.clock())

    def _notify(self, kind: str, event_type: str, name: str) -> None:
        for listener in self.listeners:
            listener(kind, event_type, name)
