"""Fixtures of the end-to-end suite: one real control plane per session with deploy/ applied, a clean cluster per test.

``control_plane`` builds (``scripts/build-k8s.sh``, cached) and starts etcd and kube-apiserver,
then applies deploy/ as shipped (:mod:`tests.e2e.deploy`). Without Go the whole suite skips,
saying so.

``e2e`` (per test) gives the admin client for setting up, the ServiceAccount clients of the
components (exactly deploy/'s permissions), and removes every Node, NodeResourceTopology, pod,
Event and Lease the test left, so tests do not see each other's objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.controlplane import KUBERNETES_VERSION, BuildUnavailable, ControlPlane, build_binaries
from tests.e2e.deploy import NAMESPACE, NAMESPACES, PODS_NAMESPACE, apply_deploy
from toposched.cli.cluster_common import connect
from toposched.kube.client import EVENTS, LEASES, NODES, NRTS, PODS
from toposched.kube.lightkube_client import LightkubeClient

__all__ = ["NAMESPACE", "PODS_NAMESPACE", "E2E"]

#: Where the session's control plane came from, for the summary line (None: it did not start).
_STARTED: dict[str, str] = {}


def pytest_terminal_summary(terminalreporter) -> None:
    """One line naming the Kubernetes version the control-plane tests ran against, and how they ended."""
    counts = {outcome: sum(1 for r in terminalreporter.stats.get(outcome, [])
                           if getattr(r, "when", "call") in ("call", "setup") and "tests/e2e/" in r.nodeid)
              for outcome in ("passed", "failed", "error", "skipped")}
    if not any(counts.values()):
        return
    where = f"binaries in {_STARTED['bin']}" if _STARTED else "not started"
    terminalreporter.write_line(
        f"control plane: Kubernetes {KUBERNETES_VERSION} ({where}): " + ", ".join(f"{n} {k}" for k, n in counts.items()))


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory) -> Iterator[ControlPlane]:
    """The running control plane with deploy/ applied (skips the suite without Go)."""
    try:
        bin_dir = build_binaries()
    except BuildUnavailable as err:
        pytest.skip(f"no control plane: {err}")
    plane = ControlPlane(bin_dir, tmp_path_factory.mktemp("controlplane"))
    _STARTED["bin"] = str(bin_dir)
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
        for kind, namespace in ((PODS, PODS_NAMESPACE), (EVENTS, PODS_NAMESPACE), (LEASES, NAMESPACE),
                                (NRTS, None), (NODES, None)):
            self.plane.delete_all(kind.path(namespace))

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
