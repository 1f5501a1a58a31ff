"""deploy/ as the control-plane tests and benchmarks/e2e.py apply it: everything the API server stores, as shipped.

The namespace, the NodeResourceTopology CRD, every ServiceAccount, role and binding (the
standalone install's and the extender variant's) and the ConfigMaps; not the Deployments and
the DaemonSet, which nothing would run (no kubelet).
"""

from __future__ import annotations

import time
from typing import Any

import yaml

from tests.e2e.controlplane import REPO
from toposched.kube.client import NRTS, ApiError, Kind, KubeClient
from toposched.manifests import load_objects

#: The namespace deploy/ installs into.
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
    kustomization = yaml.safe_load((REPO / "deploy" / "kustomization.yaml").read_text())
    files = [REPO / "deploy" / name for name in kustomization["resources"]]
    files.append(REPO / "deploy" / "extender-variant" / "rbac.yaml")
    out = []
    for path in files:
        for _, obj in load_objects(path):
            if obj["kind"] in _WORKLOADS:
                continue
            if (obj["apiVersion"], obj["kind"]) not in _KINDS:
                raise AssertionError(f"{path}: {obj['kind']} is new in deploy/: teach tests/e2e/deploy.py to apply it")
            out.append(obj)
    return out


def apply_deploy(admin: KubeClient) -> None:
    """Server-side apply deploy/ as shipped, and wait until the CRD serves."""
    for obj in deploy_objects():
        admin.apply(_KINDS[(obj["apiVersion"], obj["kind"])], obj, field_manager="e2e-setup", force=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.list(NRTS)
            return
        except ApiError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
