"""The real kube-scheduler, configured with deploy/extender/scheduler-config.yaml, calling ``toposched extender``.

Both run as the ServiceAccount ``toposched-extender`` (the extender variant's pod: kube-scheduler
and the extender in one pod, one identity). Only what the test environment needs changes in the
shipped configuration: the extender's URL (a free loopback port instead of 8888) and the
kubeconfig; the verbs, weight, ignorable, nodeCacheCapable and the leader election stay as shipped.
"""

from __future__ import annotations

import sys

import httpx
import pytest
import yaml

from tests.e2e.conftest import NAMESPACE, PODS_NAMESPACE
from tests.e2e.controlplane import REPO, free_port
from tests.e2e.objects import add_nodes, bound_pods, cpus_owned_twice, exact_cpus, placement_of, pod_object, wait_for
from toposched.kube.client import PODS

pytestmark = pytest.mark.controlplane


def test_kube_scheduler_binds_where_the_extender_placed_with_the_annotation(e2e):
    add_nodes(e2e.admin, ["n1", "n2", "n3"])
    kubeconfig = e2e.kubeconfig("toposched-extender")
    port, ops = free_port(), free_port()
    extender = e2e.plane.spawn("toposched-extender", [
        sys.executable, "-c", "from toposched.cli import main; main()", "extender", "--listen", f"127.0.0.1:{port}",
        "--kubeconfig", str(kubeconfig), "--metrics-addr", f"127.0.0.1:{ops}", "--log-format", "text"])
    config = yaml.safe_load((REPO / "deploy" / "extender" / "scheduler-config.yaml").read_text())
    [entry] = config["extenders"]
    assert entry["urlPrefix"] == "http://127.0.0.1:8888"
    entry["urlPrefix"] = f"http://127.0.0.1:{port}"
    scheduler = None
    try:
        wait_for("the extender to list the cluster (/readyz)", lambda: _ready(ops), timeout=60)
        scheduler = e2e.plane.start_kube_scheduler(config, kubeconfig, name="kube-scheduler-extender")
        for i in range(12):
            e2e.admin.create(PODS, pod_object(f"app-{i:02d}", 2, namespace=PODS_NAMESPACE))
        e2e.admin.create(PODS, pod_object("huge", 64, namespace=PODS_NAMESPACE))
        bound = wait_for("12 pods bound by kube-scheduler", lambda: len(bound_pods(e2e.admin, PODS_NAMESPACE)) == 12
                         and bound_pods(e2e.admin, PODS_NAMESPACE), timeout=120)
        huge = wait_for("kube-scheduler's PodScheduled=False", lambda: [
            c for c in e2e.admin.get(PODS, "huge", namespace=PODS_NAMESPACE)["status"].get("conditions") or []
            if c["type"] == "PodScheduled" and c["status"] == "False"], timeout=60)
    except AssertionError as err:
        logs = "\n".join(p.tail(30) for p in (extender, scheduler) if p is not None)
        raise AssertionError(f"{err}\n{logs}") from None
    finally:
        for process in (scheduler, extender):
            if process is not None:
                process.stop()
    for pod in bound:
        placement = placement_of(pod)
        assert placement is not None, f"{pod['metadata']['name']} was bound without toposched's placement"
        assert placement["node"] == pod["spec"]["nodeName"] and len(placement["numaNodes"]) == 1 and exact_cpus(pod)
    assert cpus_owned_twice(bound) == {}
    assert huge[0]["reason"] == "Unschedulable"
    assert config["leaderElection"]["resourceNamespace"] == NAMESPACE  # the Lease deploy/ lets it hold


def _ready(port: int) -> bool:
    """Whether the extender's ops server answers /readyz (every kind listed)."""
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
