"""The standalone scheduler (``toposched scheduler``) against the real control plane, as its ServiceAccount.

It binds with the placement annotation, writes Events, marks a pod it cannot place
``PodScheduled=False`` (reason ``Unschedulable``), elects one leader among replicas with the
Lease deploy/ lets it use, and a replica killed mid-burst costs no CPU twice: the survivor
rebuilds the ledger from the annotations the API server holds.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import NAMESPACE, PODS_NAMESPACE
from tests.e2e.controlplane import REPO, free_port
from tests.e2e.objects import add_nodes, bound_pods, cpus_owned_twice, exact_cpus, placement_of, pod_object, wait_for
from toposched.kube.client import EVENTS, LEASES, PODS
from toposched.kube.leader import LeaderElector
from toposched.kube.standalone import StandaloneScheduler
from toposched.scheduler import Cluster, Scheduler
from toposched.scheduler.profile_setup import load_profile

pytestmark = pytest.mark.controlplane

LEASE = "toposched-scheduler"


def shipped_config(tmp_path: Path, *, lease_seconds: float) -> Path:
    """deploy/configmaps.yaml's scheduler configuration, with a shorter Lease so a failover takes seconds."""
    for document in yaml.safe_load_all((REPO / "deploy" / "configmaps.yaml").read_text()):
        if document and document["metadata"]["name"] == "toposched-scheduler-config":
            config = yaml.safe_load(document["data"]["scheduler-config.yaml"])
            break
    config["leaderElection"].update(leaseDuration=f"{lease_seconds}s", renewDeadline=f"{lease_seconds * 0.75}s",
                                    retryPeriod="0.5s")
    path = tmp_path / "scheduler-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_binds_with_placement_writes_events_and_marks_what_it_cannot_place(e2e):
    add_nodes(e2e.admin, ["n1", "n2"])
    for i in range(4):
        e2e.admin.create(PODS, pod_object(f"web-{i}", 2, namespace=PODS_NAMESPACE))
    e2e.admin.create(PODS, pod_object("huge", 64, namespace=PODS_NAMESPACE))
    e2e.admin.create(PODS, pod_object("not-ours", 1, namespace=PODS_NAMESPACE, scheduler="someone-else"))
    client = e2e.client("toposched-scheduler", "toposched-scheduler")
    elector = LeaderElector(client, name=LEASE, namespace=NAMESPACE, identity="replica-1", clock=time.time,
                            lease_duration=15, renew_deadline=10, retry_period=1)
    runner = StandaloneScheduler(client, Scheduler(Cluster(), load_profile("toposched")), clock=time.time,
                                 sleep=time.sleep, identity="replica-1", elector=elector)
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=(stop,), kwargs={"poll": 0.2, "watch_timeout": 2.0})
    thread.start()
    try:
        bound = wait_for("4 pods bound", lambda: len(bound_pods(e2e.admin, PODS_NAMESPACE)) == 4 and
                         bound_pods(e2e.admin, PODS_NAMESPACE))
        huge = wait_for("PodScheduled=False on the pod no node can take", lambda: [
            c for c in e2e.admin.get(PODS, "huge", namespace=PODS_NAMESPACE)["status"].get("conditions") or []
            if c["type"] == "PodScheduled"])
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert {p["metadata"]["name"] for p in bound} == {f"web-{i}" for i in range(4)}
    for pod in bound:
        assert placement_of(pod)["node"] == pod["spec"]["nodeName"] and exact_cpus(pod)
    assert cpus_owned_twice(bound) == {}
    [condition] = huge
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"].startswith("0/2 nodes are available: ")
    assert not e2e.admin.get(PODS, "not-ours", namespace=PODS_NAMESPACE)["spec"].get("nodeName")
    events = e2e.admin.list(EVENTS, namespace=PODS_NAMESPACE).items
    scheduled = {e["involvedObject"]["name"] for e in events if e["reason"] == "Scheduled"}
    assert scheduled == {f"web-{i}" for i in range(4)}
    [failed] = [e for e in events if e["reason"] == "FailedScheduling"]
    assert failed["involvedObject"]["name"] == "huge" and failed["message"] == condition["message"]
    assert failed["source"]["component"] == "toposched" and failed["type"] == "Warning"
    lease = e2e.admin.get(LEASES, LEASE, namespace=NAMESPACE)
    assert not lease["spec"].get("holderIdentity")  # given up at stop


def _replica(e2e, name: str, kubeconfig: Path, config: Path):
    argv = [sys.executable, "-c", "from toposched.cli import main; main()", "scheduler", "--config", str(config),
            "--kubeconfig", str(kubeconfig), "--identity", name, "--lease-namespace", NAMESPACE,
            "--metrics-addr", f"127.0.0.1:{free_port()}", "--log-format", "text"]
    return e2e.plane.spawn(f"toposched-scheduler-{name}", argv)


def _holder(e2e) -> str | None:
    try:
        return e2e.admin.get(LEASES, LEASE, namespace=NAMESPACE)["spec"].get("holderIdentity")
    except Exception:
        return None


def test_two_replicas_one_killed_mid_burst_bind_every_pod_once_and_no_cpu_twice(e2e, tmp_path):
    """4 nodes of 14 free CPUs (6 + 8 per NUMA node): exactly 28 two-CPU pods fit, aligned. Any CPU given twice
    (a ledger not rebuilt from the annotations) shows as an overlap, or as a pod left over."""
    nodes = [f"n{i}" for i in range(4)]
    add_nodes(e2e.admin, nodes)
    config = shipped_config(tmp_path, lease_seconds=4)
    kubeconfig = e2e.kubeconfig("toposched-scheduler")
    replicas = {name: _replica(e2e, name, kubeconfig, config) for name in ("a", "b")}
    try:
        leader = wait_for("a leader", lambda: _holder(e2e), timeout=60)
        for i in range(28):
            e2e.admin.create(PODS, pod_object(f"burst-{i:02d}", 2, namespace=PODS_NAMESPACE))
        wait_for("some pods bound", lambda: len(bound_pods(e2e.admin, PODS_NAMESPACE)) >= 6, timeout=60, interval=0.05)
        replicas[leader].kill(signal.SIGKILL)  # mid-burst: no lease release, bindings possibly in flight
        replicas[leader].popen.wait()
        survivor = next(name for name in replicas if name != leader)
        replicas[leader] = _replica(e2e, f"{leader}-restarted", kubeconfig, config)
        wait_for(f"{survivor} to lead", lambda: _holder(e2e) == survivor, timeout=60)
        bound = wait_for("all 28 pods bound", lambda: len(bound_pods(e2e.admin, PODS_NAMESPACE)) == 28 and
                         bound_pods(e2e.admin, PODS_NAMESPACE), timeout=120)
    finally:
        for process in replicas.values():
            process.stop()
    assert cpus_owned_twice(bound) == {}
    for pod in bound:
        placement = placement_of(pod)
        assert placement["node"] == pod["spec"]["nodeName"]
        assert len(placement["numaNodes"]) == 1 and exact_cpus(pod)  # aligned, exact CPUs
    per_node = {n: sum(1 for p in bound if p["spec"]["nodeName"] == n) for n in nodes}
    assert per_node == dict.fromkeys(nodes, 7)
