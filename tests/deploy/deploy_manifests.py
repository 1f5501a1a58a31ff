"""Reading deploy/ for the deploy tests: every manifest document, by file, kind and name."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
INSTALL_DOC = REPO / "docs" / "install.md"
IMAGE = "ghcr.io/toposched/toposched:0.1.0"
KUBE_SCHEDULER_IMAGE = "registry.k8s.io/kube-scheduler:"
VARIANT = DEPLOY / "extender-variant"
#: helper B's KubeSchedulerConfiguration for the extender variant.
EXTENDER_CONFIG = DEPLOY / "extender" / "scheduler-config.yaml"
NAMESPACE = "toposched"


def manifest_files() -> list[Path]:
    """Our manifests: every YAML file under deploy/ except the kustomization and helper B's deploy/extender/."""
    return sorted(p for p in DEPLOY.rglob("*.yaml")
                  if p.name != "kustomization.yaml" and DEPLOY / "extender" not in p.parents)


@functools.cache
def documents() -> tuple[tuple[Path, dict[str, Any]], ...]:
    """(file, object) for every non-empty document of every manifest file."""
    out = []
    for path in manifest_files():
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                out.append((path, doc))
    return tuple(out)


def objects(kind: str | None = None) -> list[dict[str, Any]]:
    """Every manifest object, or those of one kind."""
    return [doc for _, doc in documents() if kind is None or doc.get("kind") == kind]


def one(kind: str, name: str) -> dict[str, Any]:
    """The one object of this kind and name."""
    [found] = [o for o in objects(kind) if o["metadata"]["name"] == name]
    return found


def workloads() -> list[dict[str, Any]]:
    """The Deployments and DaemonSets."""
    return objects("Deployment") + objects("DaemonSet")


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    """The containers of a workload's pod template."""
    return workload["spec"]["template"]["spec"]["containers"]


def toposched_container(workload: dict[str, Any]) -> dict[str, Any]:
    """The one container of a workload that runs the toposched command."""
    [c] = [c for c in containers(workload) if c.get("command") == ["toposched"]]
    return c
