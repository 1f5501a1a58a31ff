"""End to end against a real cluster: runs only with ``KUBECONFIG`` set (``pytest -m e2e``), read-only.

It checks that :class:`LightkubeClient` reaches the cluster the kubeconfig names, lists nodes
and watches them from the list's resourceVersion.
"""

from __future__ import annotations

import os

import pytest

from toposched.kube.client import NODES, PODS
from toposched.kube.lightkube_client import LightkubeClient

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.environ.get("KUBECONFIG"),
                       reason="no real cluster: set KUBECONFIG to a cluster's kubeconfig to run the e2e tests"),
]


@pytest.fixture
def cluster_client():
    client = LightkubeClient.from_environment()
    yield client
    client.close()


def test_lists_nodes(cluster_client):
    listed = cluster_client.list(NODES)
    assert listed.resource_version
    assert listed.items, "a cluster has at least one node"
    for node in listed.items:
        assert node["kind"] == "Node" and node["metadata"]["name"]


def test_watches_nodes_from_the_list_version(cluster_client):
    listed = cluster_client.list(NODES)
    for event in cluster_client.watch(NODES, resource_version=listed.resource_version, timeout_seconds=1):
        assert event.type in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")


def test_field_selector_for_unbound_pods(cluster_client):
    for pod in cluster_client.list(PODS, field_selector="spec.nodeName=").items:
        assert not pod["spec"].get("nodeName")
