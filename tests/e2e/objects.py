"""Objects the end-to-end tests put into the API server: Nodes, their NodeResourceTopology, pods; and what they check.

The nodes are the kind a kubelet would register (capacity and allocatable in status, Ready);
their reports are what the agent publishes (:func:`toposched.node_report.node_report`, node
description included, so the schedulers place exact CPUs) for a 2-NUMA, 2-threads-per-core
machine whose kubelet runs the static CPU manager under ``single-numa-node`` with CPUs 0 and
``numa * cores`` (one core's two threads) reserved.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from toposched.kube.client import NODES, NRTS, PODS, KubeClient
from toposched.kubelet.config import KubeletConfig
from toposched.node_report import node_report
from toposched.scheduler.placement import PLACEMENT_ANNOTATION
from toposched.topology import CPUSet, Machine

GI = 2**30
T = TypeVar("T")


def machine(numa: int = 2, cores: int = 4) -> Machine:
    """``numa`` NUMA nodes of ``cores`` cores, two threads each: ``2 * numa * cores`` CPUs."""
    total = numa * cores
    rows = [{"cpu": c + t * total, "core": c, "socket": c // cores, "numa": c // cores}
            for t in range(2) for c in range(total)]
    return Machine.from_cpu_table(rows, memory_per_numa=32 * GI,
                                  distances={a: {b: 10 if a == b else 21 for b in range(numa)} for a in range(numa)})


def node_object(name: str, cpus: int = 16, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Node as a kubelet registers it, Ready."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}, "spec": {},
            "status": {"capacity": {"cpu": str(cpus), "memory": "64Gi", "pods": "110"},
                       "allocatable": {"cpu": str(cpus), "memory": "64Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def register_node(admin: KubeClient, node: dict[str, Any]) -> dict[str, Any]:
    """Create the Node, then lift the ``node.kubernetes.io/not-ready`` taint as the node lifecycle controller would.

    kube-apiserver's TaintNodesByCondition admission taints every new Node; without
    kube-controller-manager nothing would remove the taint, and no scheduler would place a pod there.
    """
    created = admin.create(NODES, node)
    return admin.patch(NODES, created["metadata"]["name"], {"spec": {"taints": None}})


def nrt_object(name: str, numa: int = 2, cores: int = 4) -> dict[str, Any]:
    """The NodeResourceTopology the node's agent publishes while no pod runs there."""
    config = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                           reserved_system_cpus=CPUSet([0, numa * cores]))
    return node_report(machine(numa, cores), config, node_name=name)


def add_nodes(admin: KubeClient, names: Iterable[str], numa: int = 2, cores: int = 4) -> None:
    """Create each Node and its report (as the admin: the kubelet and the agent are not under test here)."""
    for name in names:
        register_node(admin, node_object(name, cpus=2 * numa * cores))
        admin.create(NRTS, nrt_object(name, numa, cores))


def pod_object(name: str, cpus: int | str, *, namespace: str, scheduler: str = "toposched",
               memory: str = "1Gi", **spec: Any) -> dict[str, Any]:
    """A Guaranteed pod of one container asking for ``cpus`` CPUs, for ``scheduler``."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedulerName": scheduler, **spec,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"limits": {"cpu": str(cpus), "memory": memory}}}]}}


def placement_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's ``toposched.io/placement`` annotation, decoded (None without one)."""
    text = (pod["metadata"].get("annotations") or {}).get(PLACEMENT_ANNOTATION)
    return json.loads(text) if text else None


def exact_cpus(pod: dict[str, Any]) -> bool:
    """Whether the pod's placement names CPUs for every container (an exact placement, not a count-only one)."""
    placement = placement_of(pod)
    return placement is not None and all(c.get("cpuset") for c in placement["containers"].values())


def cpus_owned_twice(pods: Iterable[dict[str, Any]]) -> dict[str, list[int]]:
    """Per node, every CPU that the placements of two bound pods both name (empty: no double allocation)."""
    seen: dict[str, dict[int, str]] = {}
    twice: dict[str, list[int]] = {}
    for pod in pods:
        node, placement = pod["spec"].get("nodeName"), placement_of(pod)
        if not node or placement is None:
            continue
        for container in placement["containers"].values():
            for cpu in CPUSet.parse(container.get("cpuset", "")):
                owner = seen.setdefault(node, {}).setdefault(cpu, pod["metadata"]["name"])
                if owner != pod["metadata"]["name"]:
                    twice.setdefault(node, []).append(cpu)
    return twice


def wait_for(what: str, probe: Callable[[], T], timeout: float = 60.0, interval: float = 0.2) -> T:
    """Call ``probe`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {value!r})")
        time.sleep(interval)


def bound_pods(client: KubeClient, namespace: str) -> list[dict[str, Any]]:
    """The namespace's pods that have a node."""
    return [p for p in client.list(PODS, namespace=namespace).items if p["spec"].get("nodeName")]
