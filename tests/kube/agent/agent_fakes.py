"""Fakes for the node agent's tests: pods as the API server returns them, a cgroup tree, a kubelet directory.

The cgroup tree has the layout the kubelet and the container runtimes create (see
docs/kube/agent.md): cgroup v2 with ``cgroup.controllers`` at the root and
``cgroup.subtree_control`` in every inner directory, or cgroup v1 with a ``cpuset``
hierarchy whose children start with their parent's cpus and mems; the systemd driver's
``kubepods.slice/...pod<uid_>.slice/cri-containerd-<id>.scope`` or the cgroupfs driver's
``kubepods/<qos>/pod<uid>/<id>``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from toposched.scheduler.placement import PLACEMENT_ANNOTATION

NODE = "worker-1"
UID_A = "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f"
UID_B = "0b9d8c7e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"

_SCOPE = {"containerd": "cri-containerd-", "cri-o": "crio-", "docker": "docker-"}
_PLAIN = {"containerd": "", "cri-o": "crio-", "docker": ""}


def container_id(name: str) -> str:
    """A 64-hex container id derived from ``name``."""
    return hashlib.sha256(name.encode()).hexdigest()


def placement(containers: dict[str, dict[str, Any]], *, node: str = NODE, numa: list[int] | None = None) -> str:
    """A ``toposched.io/placement`` annotation value."""
    return json.dumps({"node": node, "numaNodes": numa or [], "containers": containers})


def make_pod(
    name: str,
    uid: str,
    *,
    node: str = NODE,
    annotation: str | None = None,
    containers: dict[str, str | None] | None = None,
    runtime: str = "containerd",
    phase: str = "Running",
    namespace: str = "default",
) -> dict[str, Any]:
    """A bound pod; ``containers`` maps name to container id (None: not started yet)."""
    containers = containers if containers is not None else {"app": container_id(f"{name}/app")}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
    if annotation is not None:
        meta["annotations"] = {PLACEMENT_ANNOTATION: annotation}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": c, "image": "busybox"} for c in containers]},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {"name": c, "containerID": f"{runtime}://{cid}" if cid else "", "ready": bool(cid)}
                for c, cid in containers.items()
            ],
        },
    }


class CgroupTree:
    """A fake cgroup filesystem under ``root`` (v1 or v2, systemd or cgroupfs) for a 16-CPU, 2-NUMA node."""

    def __init__(self, root: Path, *, version: int, driver: str, cpus: str = "0-15", mems: str = "0-1"):
        self.root = root
        self.version = version
        self.systemd = driver == "systemd"
        self.cpus, self.mems = cpus, mems
        root.mkdir(parents=True, exist_ok=True)
        if version == 2:
            (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
            (root / "cgroup.subtree_control").write_text("cpuset cpu io memory pids\n")
            self.base = root
        else:
            self.base = root / "cpuset"
            self.base.mkdir()
            self._files(self.base, cpus, mems)

    def _files(self, path: Path, cpus: str, mems: str) -> None:
        if self.version == 2:
            (path / "cpuset.cpus").write_text("\n")
            (path / "cpuset.mems").write_text("\n")
            (path / "cpuset.cpus.effective").write_text(f"{self.cpus}\n")
            (path / "cgroup.subtree_control").write_text("cpuset cpu memory pids\n")
        else:
            (path / "cpuset.cpus").write_text(f"{cpus}\n")
            (path / "cpuset.mems").write_text(f"{mems}\n")
        (path / "cgroup.procs").write_text("")

    def mkdir(self, path: Path) -> Path:
        """Create ``path`` and its missing parents as cgroups, children starting with their parent's sets (v1)."""
        missing = []
        p = path
        while not p.exists():
            missing.append(p)
            p = p.parent
        for d in reversed(missing):
            d.mkdir()
            parent_cpus = (d.parent / "cpuset.cpus").read_text().strip() if self.version == 1 else ""
            parent_mems = (d.parent / "cpuset.mems").read_text().strip() if self.version == 1 else ""
            self._files(d, parent_cpus, parent_mems)
        return path

    def pod_dir(self, uid: str, qos: str = "burstable") -> Path:
        """The pod's cgroup directory (``qos`` is guaranteed, burstable or besteffort)."""
        under = uid.replace("-", "_")
        if self.systemd:
            if qos == "guaranteed":
                return self.base / "kubepods.slice" / f"kubepods-pod{under}.slice"
            return self.base / "kubepods.slice" / f"kubepods-{qos}.slice" / f"kubepods-{qos}-pod{under}.slice"
        if qos == "guaranteed":
            return self.base / "kubepods" / f"pod{uid}"
        return self.base / "kubepods" / qos / f"pod{uid}"

    def add_container(self, uid: str, cid: str, *, qos: str = "burstable", runtime: str = "containerd") -> Path:
        """Create the pod's and one container's cgroups; returns the container directory."""
        pod = self.mkdir(self.pod_dir(uid, qos))
        name = f"{_SCOPE[runtime]}{cid}.scope" if self.systemd else f"{_PLAIN[runtime]}{cid}"
        return self.mkdir(pod / name)

    def add_pod(self, pod: dict[str, Any], *, qos: str = "burstable", runtime: str = "containerd") -> dict[str, Path]:
        """Cgroups for every started container of ``pod`` (from :func:`make_pod`): name -> directory."""
        out = {}
        for status in pod["status"]["containerStatuses"]:
            if status["containerID"]:
                cid = status["containerID"].split("://", 1)[1]
                out[status["name"]] = self.add_container(pod["metadata"]["uid"], cid, qos=qos, runtime=runtime)
        return out

    def snapshot(self) -> dict[str, str]:
        """Every file under the root and its content, to prove that nothing was written."""
        return {str(p.relative_to(self.root)): p.read_text() for p in sorted(self.root.rglob("*")) if p.is_file()}


def read(path: Path, file: str) -> str:
    """A cgroup file's content without the newline."""
    return (path / file).read_text().strip()


KUBELET_CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
cgroupDriver: {driver}
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cpuManagerPolicy: {cpu_policy}
cpuManagerReconcilePeriod: 10s
topologyManagerPolicy: single-numa-node
topologyManagerScope: pod
reservedSystemCPUs: "0,8"
kubeReserved:
  cpu: 500m
  memory: 1Gi
  ephemeral-storage: 1Gi
systemReserved:
  cpu: 500m
  memory: 1Gi
evictionHard:
  memory.available: 100Mi
  nodefs.available: 10%
memoryManagerPolicy: {memory_policy}
reservedMemory:
- numaNode: 0
  limits:
    memory: 1124Mi
- numaNode: 1
  limits:
    memory: 1Gi
staticPodPath: /etc/kubernetes/manifests
"""


def write_kubelet_dir(path: Path, *, driver: str = "systemd", cpu_policy: str = "static",
                      memory_policy: str = "Static") -> Path:
    """A kubelet root directory holding a kubeadm-style config.yaml with topology settings (no checkpoints)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.yaml").write_text(
        KUBELET_CONFIG.format(driver=driver, cpu_policy=cpu_policy, memory_policy=memory_policy))
    return path
