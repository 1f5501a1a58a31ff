"""The cluster commands end to end: real processes and the real client against the fake API server over HTTP."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from typer.testing import CliRunner

from tests.fixtures.sysfs_tree import two_socket_smt, write_sysfs_tree
from tests.kube.agent.agent_fakes import NODE, CgroupTree, make_pod, placement, write_kubelet_dir
from tests.kube.test_standalone import add_nodes, add_pods
from toposched.cli import app
from toposched.kube.client import LEASES, NRTS, PODS


def kubeconfig(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "me", "user": {}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me", "namespace": "default"}}],
    }))
    return path


def test_agent_dry_run_prints_the_cpuset_writes_and_writes_nothing(tmp_path, fake_server):
    sysfs = write_sysfs_tree(tmp_path / "sysfs", two_socket_smt())
    kubelet = write_kubelet_dir(tmp_path / "kubelet")
    tree = CgroupTree(tmp_path / "cgroup", version=2, driver="systemd")
    created = fake_server.store.create(PODS, make_pod("web", "", annotation=placement({"app": {"cpuset": "4-5", "numaNodes": [1]}})))
    app_dir = tree.add_pod(created)["app"]
    before = (app_dir / "cpuset.cpus").read_text()
    result = CliRunner().invoke(app, [
        "agent", "--node-name", NODE, "--sysfs-root", str(sysfs), "--kubelet-dir", str(kubelet),
        "--cgroup-root", str(tree.root), "--kubeconfig", str(kubeconfig(tmp_path, fake_server.url)), "--dry-run",
    ])
    assert result.exit_code == 0, result.output
    assert "cpuset.cpus" in result.output and "'4-5'" in result.output
    assert f"would publish NodeResourceTopology {NODE}" in result.output
    assert (app_dir / "cpuset.cpus").read_text() == before
    assert not fake_server.store.contains(NRTS, NODE)


def test_the_cluster_commands_refuse_bad_options_with_one_line():
    runner = CliRunner()
    result = runner.invoke(app, ["controller", "--configmap", "no-slash"])
    assert result.exit_code == 2 and "NAMESPACE/NAME" in result.output
    result = runner.invoke(app, ["scheduler", "--config", "/nonexistent/config.yaml", "--kubeconfig", "/dev/null"])
    assert result.exit_code == 2 and "/nonexistent/config.yaml" in result.output


_LOADED = """
import atexit, sys
heavy = ("toposched.cli.", "toposched.sim", "fastapi", "uvicorn", "matplotlib")
atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith(heavy))))
sys.argv = ["toposched", *sys.argv[1:]]
from toposched.cli import main
main()
"""


def test_a_command_loads_its_own_module_and_not_the_others():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def loaded(*argv: str) -> list[str]:
        out = subprocess.run([sys.executable, "-c", _LOADED, *argv], capture_output=True, text=True, env=env, timeout=120)
        return ast.literal_eval(out.stdout.strip().splitlines()[-1])  # the list printed at exit

    # The node agent runs on every node: neither the simulator nor the extender's web stack.
    assert loaded("agent", "--help") == ["toposched.cli.agent", "toposched.cli.cluster_common"]
    assert loaded("scheduler", "--help") == ["toposched.cli.cluster_common", "toposched.cli.scheduler"]
    assert loaded("discover", "--help") == ["toposched.cli.discover", "toposched.cli.guard"]
    everything = loaded("--help")  # the overview lists every command
    assert {f"toposched.cli.{name}" for name in ("agent", "controller", "discover", "explain", "extender",
                                                  "scheduler", "simulate")} <= set(everything)


def test_python_dash_m_runs_the_same_command_line():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-m", "toposched", "discover", "--help"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0 and "--reserved-cpus" in out.stdout
    out = subprocess.run([sys.executable, "-m", "toposched", "no-such-command"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 2 and "no-such-command" in out.stderr


def test_the_scheduler_process_binds_pending_pods_and_stops_on_sigterm(tmp_path, fake_server):
    store = fake_server.store
    add_nodes(store, "n1", "n2")
    add_pods(store, [f"p{i}" for i in range(4)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from toposched.cli import main; main()", "scheduler",
         "--kubeconfig", str(kubeconfig(tmp_path, fake_server.url)), "--metrics-addr", "127.0.0.1:0",
         "--lease-namespace", "default", "--lease-name", "toposched", "--identity", "replica-a", "--log-format", "text"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pods = store.list(PODS).items
            if all(p["spec"].get("nodeName") for p in pods):
                break
            time.sleep(0.1)
        assert all(p["spec"].get("nodeName") for p in pods), "pods were not bound"
        assert all("toposched.io/placement" in p["metadata"]["annotations"] for p in pods)
        assert store.get(LEASES, "toposched", namespace="default")["spec"]["holderIdentity"] == "replica-a"
    finally:
        proc.send_signal(signal.SIGTERM)
        store.close_watches()
        output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, output
    assert not store.get(LEASES, "toposched", namespace="default")["spec"].get("holderIdentity"), "lease not released"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_extender_process_answers_kube_scheduler_and_binds(tmp_path, fake_server):
    import httpx

    store = fake_server.store
    add_nodes(store, "n1", "n2")
    pod = add_pods(store, ["web"], cpus=3)[0]
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from toposched.cli import main; main()", "extender", "--listen", f"127.0.0.1:{port}",
         "--kubeconfig", str(kubeconfig(tmp_path, fake_server.url)), "--metrics-addr", "127.0.0.1:0",
         "--log-format", "text"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        args = {"Pod": pod, "Nodes": None, "NodeNames": ["n1", "n2", "ghost"]}
        answer = httpx.post(f"{base}/filter", json=args).json()
        assert sorted(answer["NodeNames"]) == ["n1", "n2"] and "ghost" in answer["FailedNodes"]
        scores = httpx.post(f"{base}/prioritize", json={**args, "NodeNames": answer["NodeNames"]}).json()
        best = max(scores, key=lambda h: h["Score"])["Host"]
        meta = pod["metadata"]
        bind = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": best}
        assert httpx.post(f"{base}/bind", json=bind).json() == {"Error": ""}
        bound = store.get(PODS, meta["name"], namespace=meta["namespace"])
        assert bound["spec"]["nodeName"] == best and "toposched.io/placement" in bound["metadata"]["annotations"]
    finally:
        proc.send_signal(signal.SIGTERM)
        store.close_watches()
        output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, output


def test_report_age_is_that_of_the_oldest_report():
    from tests.kube.test_standalone import nrt_obj
    from toposched.cli.cluster_common import oldest_report_age
    from toposched.scheduler import Cluster
    from toposched.topology.nrt import parse_nrt

    cluster = Cluster()
    assert oldest_report_age(cluster, 100.0) == 0.0
    cluster.update_report(parse_nrt(nrt_obj("a")), now=10.0)
    cluster.update_report(parse_nrt(nrt_obj("b")), now=40.0)
    assert oldest_report_age(cluster, 100.0) == 90.0
