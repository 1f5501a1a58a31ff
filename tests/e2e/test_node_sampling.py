"""percentageOfNodesToScore on the real kube-scheduler and on toposched's model of it, side by side.

kube-scheduler (upstream defaults: no percentage set, so the adaptive share, 100 of these 150
nodes) runs with ``parallelism: 1``, the one worker whose search toposched reproduces exactly.
Three nodes are larger than the rest, so LeastAllocated ranks them first with no tie: which of
them a pod gets depends only on which nodes the search looked at, that is on the node tree's
order (zones interleaved) and on where the previous search stopped. Each pod is deleted once
bound, so every cycle sees the same free capacity, and asks for a little more memory than the
one before: kube-scheduler's OpportunisticBatching (beta, on since 1.35) would otherwise hand a
pod identical to the previous one that pod's next-best node, without a search, when it comes
within 500 ms; toposched does not model it (docs/scheduler/design.md, "How many nodes").
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import PODS_NAMESPACE
from tests.e2e.controlplane import KUBE_SCHEDULER_TOKEN
from tests.e2e.objects import node_object, pod_object, register_node, wait_for
from toposched.kube.client import PODS
from toposched.scheduler import Cluster, NodeSpec, Scheduler
from toposched.scheduler.profile_setup import load_profile
from toposched.workload import Container, Pod

pytestmark = pytest.mark.controlplane

GI = 2**30
ZONE = "topology.kubernetes.io/zone"
# CPUs of the three large nodes; every other node has 16. In the node tree's order (100 nodes of
# zone a and 50 of zone b interleaved: n000 n100 n001 n101 ... n049 n149 n050 ... n099) they sit
# at positions 120 (n070), 61 (n130) and 10 (n005).
LARGE = {"n070": 1000, "n130": 200, "n005": 100}
PODS_TO_PLACE = 6


def _nodes() -> list[tuple[str, int, dict[str, str]]]:
    return [(f"n{i:03d}", LARGE.get(f"n{i:03d}", 16), {ZONE: "a" if i < 100 else "b"}) for i in range(150)]


def _modelled() -> list[str]:
    """The nodes toposched's ``default`` profile (kube-scheduler's, percentage unset) chooses."""
    cluster = Cluster()
    for name, cpus, labels in _nodes():
        cluster.set_node(NodeSpec(name, allocatable={"cpu": cpus * 1000, "memory": 64 * GI, "pods": 110}, labels=labels))
    scheduler = Scheduler(cluster, load_profile("default"))
    chosen = []
    for i in range(PODS_TO_PLACE):
        resources = {"cpu": 8000, "memory": GI + i * 2**20}
        pod = Pod(f"p{i}", uid=f"p{i}", containers=(Container("c", requests=resources, limits=resources),))
        decision = scheduler.schedule(pod, now=float(i))
        chosen.append(decision.node)
        scheduler.bound(pod, now=float(i))
        cluster.forget(pod, float(i))  # deleted, as the test deletes it from the API server
    return chosen


def test_kube_scheduler_takes_turns_over_its_nodes_as_the_model_does(e2e):
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "parallelism": 1, "leaderElection": {"leaderElect": False},
              "profiles": [{"schedulerName": "default-scheduler"}]}
    kubeconfig = e2e.plane.kubeconfig("system-kube-scheduler", KUBE_SCHEDULER_TOKEN)
    scheduler = e2e.plane.start_kube_scheduler(config, kubeconfig, name="kube-scheduler-sampling",
                                               verbosity=4)  # "Handlers synced" is logged at 4
    chosen = []
    try:
        # The nodes come after kube-scheduler has started watching, one by one: its node tree takes
        # them in that order. (Nodes that exist when it starts arrive in no set order.)
        wait_for("kube-scheduler's informers to sync", lambda: "Handlers synced" in scheduler.log.read_text(), timeout=60)
        for name, cpus, labels in _nodes():
            register_node(e2e.admin, node_object(name, cpus=cpus, labels=labels))
        wait_for("kube-scheduler to know every node", lambda: scheduler.log.read_text().count(
            "Added node to NodeTree") == len(_nodes()), timeout=60)
        for i in range(PODS_TO_PLACE):
            name = f"p{i}"
            e2e.admin.create(PODS, pod_object(name, 8, namespace=PODS_NAMESPACE, scheduler="default-scheduler",
                                              memory=f"{1024 + i}Mi"))
            pod = wait_for(f"{name} bound by kube-scheduler", lambda name=name: (
                e2e.admin.get(PODS, name, namespace=PODS_NAMESPACE)["spec"].get("nodeName")), timeout=60)
            chosen.append(pod)
            with e2e.plane.admin_http() as http:  # no kubelet: delete at once, no grace period
                http.delete(f"/api/v1/namespaces/{PODS_NAMESPACE}/pods/{name}",
                            params={"gracePeriodSeconds": 0}).raise_for_status()
            wait_for(f"{name} gone", lambda name=name: not any(
                p["metadata"]["name"] == name for p in e2e.admin.list(PODS, namespace=PODS_NAMESPACE).items), timeout=30)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{scheduler.tail(30)}") from None
    finally:
        scheduler.stop()
    # The search for 100 feasible nodes starts at positions 0, 100, 50, 0, ...: the first window
    # holds n130 and n005, the next two hold n070. Looking at every node would give n070 each time.
    assert chosen == _modelled() == ["n130", "n070", "n070"] * (PODS_TO_PLACE // 3)
