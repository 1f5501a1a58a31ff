"""End-to-end throughput on the real control plane: kube-scheduler's default profile against ``toposched scheduler``.

The same Node objects and NodeResourceTopologies (``--nodes``, 2 NUMA nodes x 4 two-thread
cores, CPUs 0 and 8 reserved, single-numa-node) and ``--pods`` pending Guaranteed pods of one
CPU go into the real kube-apiserver (tests/kubernetes-version, built by scripts/build-k8s.sh),
and each scheduler, started once the pods exist, binds them all; nothing runs the pods (no
kubelet), binding is the end. Per scheduler: seconds from its start until every pod is bound,
pods/s over that time, seconds until its first bind (start-up: listing the cluster), pods/s
from the first bind to the last, its peak RSS (VmHWM) and CPU time, and the CPU time
kube-apiserver and etcd spent meanwhile (on a 2-core machine the three share the cores). ``ratio`` is toposched's pods/s over
kube-scheduler's.

    python benchmarks/e2e.py --nodes 5000 --pods 10000 --json OUT.json

Both schedulers meet the same API server: priority and fairness is off (otherwise
kube-scheduler's own user would be served at a higher priority level than a ServiceAccount) and
the in-flight limits are raised (2,000, 1,000 mutating) so neither is answered 429 in a burst,
and kube-scheduler's client may send 5,000 requests/s (its default of 50 would cap it, as
kube-scheduler's own scheduler_perf benchmark also lifts). kube-scheduler runs as
``system:kube-scheduler`` with the default profile; toposched as its ServiceAccount with
deploy/'s RBAC and its built-in profile, no leader election, logging warnings only; each
records its Scheduled Events.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import write_json  # noqa: E402
from tests.e2e.controlplane import (  # noqa: E402
    KUBE_SCHEDULER_TOKEN,
    KUBERNETES_VERSION,
    ControlPlane,
    Process,
    build_binaries,
    free_port,
)
from tests.e2e.deploy import NAMESPACE, NAMESPACES, apply_deploy  # noqa: E402
from tests.e2e.objects import cpus_owned_twice, node_object, nrt_object, pod_object, register_node  # noqa: E402
from toposched.cli.cluster_common import connect  # noqa: E402
from toposched.kube.client import NRTS, PODS, ApiError, Gone, KubeClient  # noqa: E402
from toposched.kube.lightkube_client import LightkubeClient  # noqa: E402

BENCH_NAMESPACE = "bench"
WORKERS = 16


def create_all(client: KubeClient, make: Any, count: int) -> float:
    """Create ``count`` objects with ``make(i)`` from a thread pool; the seconds it took."""
    started = time.monotonic()
    with ThreadPoolExecutor(WORKERS) as pool:
        for _ in pool.map(make, range(count)):
            pass
    return time.monotonic() - started


class BindWatch:
    """Counts the benchmark namespace's pods as they get a node (one watch, reconnected when it ends)."""

    def __init__(self, client: KubeClient):
        self.client = client
        self.bound: dict[str, float] = {}
        self.stop = threading.Event()
        self.changed = threading.Condition()
        listed = client.list(PODS, namespace=BENCH_NAMESPACE)
        self._version = listed.resource_version
        self._note(listed.items)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _note(self, pods: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        with self.changed:
            for pod in pods:
                if pod["spec"].get("nodeName"):
                    self.bound.setdefault(pod["metadata"]["name"], now)
            self.changed.notify_all()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                for event in self.client.watch(PODS, namespace=BENCH_NAMESPACE, resource_version=self._version,
                                               timeout_seconds=5):
                    self._version = event.object.get("metadata", {}).get("resourceVersion", self._version)
                    if event.type in ("ADDED", "MODIFIED"):
                        self._note([event.object])
            except Gone:
                listed = self.client.list(PODS, namespace=BENCH_NAMESPACE)
                self._version = listed.resource_version
                self._note(listed.items)
            except ApiError as err:  # e.g. 429 while the server is saturated: watch again shortly
                print(f"bench watch: {err}; retrying", file=sys.stderr)
                self.stop.wait(0.5)

    def wait(self, count: int, timeout: float, process: Process) -> None:
        """Until ``count`` pods are bound; fail when ``timeout`` passes or the scheduler exits."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.bound) < count:
                if not process.running:
                    raise RuntimeError(f"{process.name} exited:\n{process.tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{len(self.bound)}/{count} pods bound after {timeout} s:\n{process.tail()}")
                self.changed.wait(1.0)


def cpu_seconds(process: Process) -> float:
    """CPU time (user + system) the process has used so far, in seconds."""
    fields = Path(f"/proc/{process.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def api_requests(plane: ControlPlane) -> dict[str, float]:
    """kube-apiserver's request counts so far (``apiserver_request_total``) by verb and resource, e.g. ``POST pods/binding``."""
    with plane.admin_http() as http:
        text = http.get("/metrics").text
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(part.split("=", 1) for part in line[line.index("{") + 1:line.rindex("}")].split(","))
        labels = {k: v.strip('"') for k, v in labels.items()}
        resource = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
        key = f"{labels.get('verb', '')} {resource}"
        counts[key] = counts.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def peak_rss_mib(process: Process) -> float:
    """The process's peak resident memory (VmHWM), in MiB."""
    for line in Path(f"/proc/{process.popen.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_one(plane: ControlPlane, admin: LightkubeClient, name: str, pods: int, start: Any,
            timeout: float) -> dict[str, Any]:
    """Create the pods for scheduler ``name``, start it, time it to the last bind, then delete the pods."""
    scheduler_name = "default-scheduler" if name == "kube-scheduler" else "toposched"
    created = create_all(admin, lambda i: admin.create(PODS, pod_object(
        f"pod-{i:05d}", 1, namespace=BENCH_NAMESPACE, scheduler=scheduler_name)), pods)
    print(f"{name}: {pods} pending pods created in {created:.1f} s", file=sys.stderr)
    watch = BindWatch(admin)
    servers = {"kube-apiserver": plane.apiserver, "etcd": plane.etcd}
    servers_before = {k: cpu_seconds(p) for k, p in servers.items()}
    requests_before = api_requests(plane)
    t0 = time.monotonic()
    process = start()
    try:
        watch.wait(pods, timeout, process)
        t_end = time.monotonic()
        rss, cpu = peak_rss_mib(process), cpu_seconds(process)
        servers_cpu = {k: cpu_seconds(p) - servers_before[k] for k, p in servers.items()}
        requests = {k: v - requests_before.get(k, 0.0) for k, v in api_requests(plane).items()}
    finally:
        process.stop()
        watch.stop.set()
    first = min(watch.bound.values())
    listed = admin.list(PODS, namespace=BENCH_NAMESPACE).items
    figures = {
        "pods": pods,
        "seconds_to_all_bound": round(t_end - t0, 2),
        "pods_per_second": round(pods / (t_end - t0), 1),
        "startup_seconds": round(first - t0, 2),
        "pods_per_second_after_first_bind": round(pods / max(t_end - first, 1e-9), 1),
        "peak_rss_mib": round(rss, 1),
        "cpu_seconds": round(cpu, 1),
        **{f"{k}_cpu_seconds": round(v, 1) for k, v in servers_cpu.items()},
        # what reached the API server meanwhile (the benchmark's own watch included), by verb and resource
        "api_requests": {k: int(v) for k, v in sorted(requests.items()) if v >= 1},
    }
    if name == "toposched":
        figures["cpus_owned_twice"] = sum(len(v) for v in cpus_owned_twice(listed).values())
        figures["pods_without_placement"] = sum(
            1 for p in listed if "toposched.io/placement" not in (p["metadata"].get("annotations") or {}))
    print(f"{name}: {json.dumps(figures)}", file=sys.stderr)
    return figures


def clear_pods(plane: ControlPlane, admin: KubeClient) -> None:
    """Delete the benchmark's pods and wait until they are gone (a 504 only means the server is still at it)."""
    try:
        plane.delete_all(PODS.path(BENCH_NAMESPACE))
    except httpx.HTTPStatusError as err:
        if err.response.status_code != 504:
            raise
    while admin.list(PODS, namespace=BENCH_NAMESPACE).items:
        time.sleep(2)


def main() -> None:
    """Parse the arguments, run both schedulers on one control plane, print and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one scheduler may take")
    parser.add_argument("--only", choices=["kube-scheduler", "toposched"], help="run one scheduler")
    args = parser.parse_args()

    bin_dir = build_binaries()
    workdir = Path(tempfile.mkdtemp(prefix="toposched-bench-e2e-"))
    plane = ControlPlane(bin_dir, workdir)
    try:
        plane.start(extra_apiserver_args=["--enable-priority-and-fairness=false", "--max-requests-inflight=2000",
                                          "--max-mutating-requests-inflight=1000"])
        admin = connect(plane.admin_kubeconfig(), "bench-setup")
        apply_deploy(admin)
        admin.create(NAMESPACES, {"metadata": {"name": BENCH_NAMESPACE}})

        def add_node(i: int) -> None:
            register_node(admin, node_object(f"node-{i:05d}"))
            admin.create(NRTS, nrt_object(f"node-{i:05d}"))

        took = create_all(admin, add_node, args.nodes)
        print(f"{args.nodes} Nodes and NodeResourceTopologies created in {took:.1f} s", file=sys.stderr)

        kube_config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                       "leaderElection": {"leaderElect": False},
                       "clientConnection": {"qps": 5000, "burst": 5000}}
        kube_kubeconfig = plane.kubeconfig("system-kube-scheduler", KUBE_SCHEDULER_TOKEN)
        topo_kubeconfig = plane.service_account_kubeconfig(NAMESPACE, "toposched-scheduler")
        starters = {
            "kube-scheduler": lambda: plane.start_kube_scheduler(kube_config, kube_kubeconfig, verbosity=0),
            "toposched": lambda: plane.spawn("toposched-scheduler", [
                sys.executable, "-c", "from toposched.cli import main; main()", "scheduler", "--no-leader-elect",
                "--kubeconfig", str(topo_kubeconfig), "--metrics-addr", f"127.0.0.1:{free_port()}",
                "--log-format", "text", "--log-level", "WARNING"]),
        }
        results: dict[str, Any] = {}
        for name, start in starters.items():
            if args.only in (None, name):
                if results:
                    clear_pods(plane, admin)
                results[name] = run_one(plane, admin, name, args.pods, start, args.timeout)
    finally:
        plane.stop()
    figures: dict[str, Any] = {"kubernetes": KUBERNETES_VERSION, "nodes": args.nodes, "pods": args.pods,
                               "cpus": os.cpu_count(), **results}
    if len(results) == 2:
        figures["ratio"] = round(results["toposched"]["pods_per_second"]
                                 / results["kube-scheduler"]["pods_per_second"], 3)
    print(json.dumps(figures, indent=2, sort_keys=True))
    write_json(args.json, figures)


if __name__ == "__main__":
    main()
