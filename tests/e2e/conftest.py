"""Fixtures of the end-to-end suite: one real control plane per session with deploy/ applied, a clean cluster per test.

``control_plane`` builds (``scripts/build-k8s.sh``, cached) and starts etcd and kube-apiserver,
then applies deploy/ as shipped: the namespace, the NodeResourceTopology CRD, every
ServiceAccount, role and binding (the standalone install's and the extender variant's), and the
ConfigMaps; not the Deployments and the DaemonSet, which nothing would run (no kubelet).
Without Go the whole suite skips, saying so.

``e2e`` (per test) gives the admin client for setting up, the ServiceAccount clients of the
components (exactly deploy/'s permissions), and removes every Node, NodeResourceTopology, pod,
Event and Lease the test left, so tests do not see each other's objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.controlplane import REPO, BuildUnavailable, ControlPlane, build_binaries
from toposched.cli.cluster_common import connect
from toposched.kube.client import EVENTS, LEASES, NODES, NRTS, PODS, Kind, KubeClient
from toposched.kube.lightkube_client import LightkubeClient
from toposched.manifests import load_objects

NAMESPACE = "toposched"
#: The namespace the tests' pods live in.
PODS_NAMESPACE = "e2e"

#: What deploy/ ships that the API server stores (workloads are left out: no kubelet runs them).
_KINDS = {
    ("v1", "Namespace"): Kind("", "v1", "Namespace", "namespaces", False),
    ("v1", "ServiceAccount"): Kind("", "v1", "ServiceAccount", "serviceaccounts", True),
    ("v1", "ConfigMap"): Kind("", "v1", "ConfigMap", "configmaps", True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
        Kind("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"):
        Kind("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"):
        Kind("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    ("rbac.authorization.k8s.io/v1", "Role"): Kind("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"):
        Kind("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
}
_WORKLOADS = {"Deployment", "DaemonSet"}
NAMESPACES = _KINDS[("v1", "Namespace")]


def deploy_objects() -> list[dict[str, Any]]:
    """deploy/'s objects in the order kustomize lists them, then the extender variant's RBAC."""
    import yaml

    files = [REPO / "deploy" / name for name in yaml.safe_load((REPO / "deploy" / "kustomization.yaml").read_text())["resources"]]
    files.append(REPO / "deploy" / "extender-variant" / "rbac.yaml")
    out = []
    for path in files:
        for _, obj in load_objects(path):
            if obj["kind"] in _WORKLOADS:
                continue
            if (obj["apiVersion"], obj["kind"]) not in _KINDS:
                raise AssertionError(f"{path}: {obj['kind']} is new in deploy/: teach tests/e2e/conftest.py to apply it")
            out.append(obj)
    return out


def apply_deploy(admin: KubeClient) -> None:
    """Server-side apply deploy/ as shipped, and wait until the CRD serves."""
    import time

    for obj in deploy_objects():
        admin.apply(_KINDS[(obj["apiVersion"], obj["kind"])], obj, field_manager="e2e-setup", force=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.list(NRTS)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory) -> Iterator[ControlPlane]:
    """The running control plane with deploy/ applied (skips the suite without Go)."""
    try:
        bin_dir = build_binaries()
    except BuildUnavailable as err:
        pytest.skip(f"no control plane: {err}")
    plane = ControlPlane(bin_dir, tmp_path_factory.mktemp("controlplane"))
    try:
        plane.start()
        admin = connect(plane.admin_kubeconfig(), "e2e-setup")
        apply_deploy(admin)
        admin.create(NAMESPACES, {"metadata": {"name": PODS_NAMESPACE}})
        admin.close()
        yield plane
    finally:
        plane.stop()


class E2E:
    """One test's view of the control plane: the admin client and the components' identities."""

    def __init__(self, plane: ControlPlane):
        self.plane = plane
        self.admin = connect(plane.admin_kubeconfig(), "e2e-setup")
        self._clients: list[LightkubeClient] = []

    def kubeconfig(self, service_account: str) -> Path:
        """A kubeconfig of the ServiceAccount ``toposched/<service_account>`` (a token from TokenRequest)."""
        return self.plane.service_account_kubeconfig(NAMESPACE, service_account)

    def client(self, service_account: str, field_manager: str) -> LightkubeClient:
        """A client that is the ServiceAccount ``toposched/<service_account>``, as the component's CLI builds it."""
        client = connect(self.kubeconfig(service_account), field_manager)
        self._clients.append(client)
        return client

    def clean(self) -> None:
        """Remove what tests create: pods (at once, no grace), Events, Leases, NRTs, Nodes."""
        raw = self.admin._client  # lightkube's client: deletion with gracePeriodSeconds=0
        from toposched.kube.lightkube_client import _resource

        for kind, namespace in ((PODS, PODS_NAMESPACE), (EVENTS, PODS_NAMESPACE), (LEASES, NAMESPACE),
                                (NRTS, None), (NODES, None)):
            raw.deletecollection(_resource(kind), namespace=namespace, grace_period=0)

    def close(self) -> None:
        """Close every client this test opened."""
        for client in self._clients:
            client.close()
        self.admin.close()


@pytest.fixture
def e2e(control_plane) -> Iterator[E2E]:
    """A clean cluster for one test; what it created is removed afterwards."""
    view = E2E(control_plane)
    view.clean()
    try:
        yield view
    finally:
        view.clean()
        view.close()
