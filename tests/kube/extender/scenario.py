"""A small cluster for the extender tests, built as tests/scheduler/test_scheduler.py builds its clusters.

Nodes (2 NUMA nodes x 4 cores x 2 threads, single-numa-node, static CPU manager, CPU 0 reserved):

* ``a``: empty.
* ``b``: holds a 4-CPU and a 5-CPU pod, one per NUMA node: 3 CPUs left on each, so a 4-CPU
  Guaranteed pod fits the node's totals but no single NUMA node (Unschedulable).
* ``c``: cordoned in toposched's view (UnschedulableAndUnresolvable).
* ``f``: holds a 2-CPU pod: feasible, and fuller than ``a`` (the profile packs: MostAllocated).
* ``g``: a 5-CPU and a 1-CPU pod fill NUMA node 0, a 5-CPU pod leaves 3 CPUs on NUMA node 1:
  evicting the two 1-CPU pods frees 5 CPUs on the node but at most 3 on one NUMA node.
* ``h``: empty, but its kubelet runs the best-effort Topology Manager policy: a pod that asks
  for single-numa-node by annotation can never go there (UnschedulableAndUnresolvable).

``d`` is a name kube-scheduler may send that toposched's cache does not know.

Pods live in a :class:`MemoryClient`, created in a fixed order so their UIDs (which the golden
requests carry) are ``00000000-0000-0000-0000-00000000000N``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient

from tests.kube.memory_client import MemoryClient
from toposched.kube.client import PODS
from toposched.kube.extender import ExtenderService, create_app
from toposched.kubelet import KubeletConfig
from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.profile_setup import load_profile
from toposched.topology import CPUSet, Machine
from toposched.workload import Pod

GI = 2**30
TTL = 30.0
CONFIG = KubeletConfig(topology_manager_policy="single-numa-node", cpu_manager_policy="static",
                       reserved_system_cpus=CPUSet([0]))
BEST_EFFORT = KubeletConfig(topology_manager_policy="best-effort", cpu_manager_policy="static",
                            reserved_system_cpus=CPUSet([0]))


def machine(numa: int = 2, cores: int = 4, threads: int = 2) -> Machine:
    total = numa * cores
    rows = [{"cpu": c + t * total, "core": c, "socket": c // cores, "numa": c // cores}
            for t in range(threads) for c in range(total)]
    return Machine.from_cpu_table(rows, memory_per_numa=32 * GI,
                                  distances={a: {b: 10 if a == b else 21 for b in range(numa)} for a in range(numa)})


def node_object(name: str, *, unschedulable: bool = False) -> dict[str, Any]:
    """A Node as the API server returns it (with fields toposched does not read)."""
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": f"node-uid-{name}",
            "resourceVersion": "4711",
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": "10.244.1.0/24", "unschedulable": unschedulable},
        "status": {
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "allocatable": {"cpu": "15", "memory": "60Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "lastHeartbeatTime": "2024-05-01T10:05:00Z"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "nodeInfo": {"kubeletVersion": "v1.31.0", "architecture": "amd64"},
        },
    }


def pod_object(name: str, cpus: int, *, uid: str = "", node: str = "", annotations: dict[str, str] | None = None,
               scheduler: str = "toposched") -> dict[str, Any]:
    """A Guaranteed pod as kube-scheduler sends it: defaulted by the API server, with fields toposched ignores."""
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid,
            "creationTimestamp": "2024-05-01T10:10:00Z",
            "labels": {"app": name.split("-")[0]},
            "annotations": annotations or {},
            "managedFields": [{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                               "time": "2024-05-01T10:10:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:spec": {"f:containers": {}}}}],
        },
        "spec": {
            "containers": [{
                "name": "app",
                "image": "registry.example/app:1.0",
                "resources": {"limits": {"cpu": str(cpus), "memory": "2Gi"},
                              "requests": {"cpu": str(cpus), "memory": "2Gi"}},
                "terminationMessagePath": "/dev/termination-log",
                "imagePullPolicy": "IfNotPresent",
            }],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "nodeName": node,
            "securityContext": {},
            "schedulerName": scheduler,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "aFieldFromAFutureKubernetes": {"enabled": True},
        },
        "status": {"phase": "Pending", "qosClass": "Guaranteed"},
    }


def uid(n: int) -> str:
    """The UID MemoryClient gives the n-th object created."""
    return f"00000000-0000-0000-0000-{n:012x}"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class World:
    """The cluster, its scheduler, the in-memory API server, the service and an HTTP client for the app."""

    scheduler: Scheduler
    client: MemoryClient
    clock: Clock
    service: ExtenderService
    http: TestClient
    ready: list[bool]

    @property
    def cluster(self) -> Cluster:
        return self.scheduler.cluster

    def post(self, verb: str, body: Any) -> Any:
        """POST ``body`` to ``/<verb>``; returns the decoded JSON answer (status 200 required)."""
        response = self.http.post(f"/{verb}", json=body)
        assert response.status_code == 200, response.text
        return response.json()

    def pod(self, name: str) -> dict[str, Any]:
        """The pod's current object in the API server."""
        return self.client.get(PODS, name, namespace="default")

    def request_pod(self, name: str) -> dict[str, Any]:
        """The pod as kube-scheduler sends it in a request: its object without ``spec.nodeName``."""
        obj = copy.deepcopy(self.pod(name))
        obj["spec"].pop("nodeName", None)
        return obj


# Pods created in the API server, in this order (their UIDs follow it).
PENDING = (("web-0", 4), ("web-1", 4), ("wide-0", 9), ("small-0", 1), ("pinned-0", 2))
ANNOTATIONS = {"pinned-0": {"toposched.io/numa-policy": "single-numa-node"}}


def build(*, nodes: tuple[str, ...] = ("a", "b", "c", "f", "g", "h"), url_prefix: str = "") -> World:
    """The scenario's cluster, fed straight into a Cluster, with the pending pods in a MemoryClient."""
    cluster = Cluster()
    for name in nodes:
        spec = NodeSpec.from_dict(node_object(name, unschedulable=name == "c"))
        cluster.set_node(spec, machine=machine(), kubelet_config=BEST_EFFORT if name == "h" else CONFIG)
    occupants = {"b": (("db-0", 4), ("db-1", 5)), "f": (("cache-0", 2),),
                 "g": (("batch-0", 5), ("tiny-0", 1), ("batch-1", 5), ("tiny-1", 1))}
    for node, pods in occupants.items():
        if node in nodes:
            for name, cpus in pods:
                cluster.add_bound_pod(Pod.from_dict(pod_object(name, cpus, uid=f"uid-{name}", node=node)), node, 0.0)
    client = MemoryClient(clock=lambda: 1_700_000_000.0)
    for name, cpus in PENDING:
        client.create(PODS, pod_object(name, cpus, annotations=ANNOTATIONS.get(name)), namespace="default")
    scheduler = Scheduler(cluster, load_profile("toposched"))
    clock = Clock()
    service = ExtenderService(scheduler, clock=clock, client=client, reservation_ttl=TTL)
    ready = [True]
    app = create_app(service, ready=lambda: ready[0], url_prefix=url_prefix)
    return World(scheduler, client, clock, service, TestClient(app), ready)
