"""Fixtures for the cluster adapters: an in-memory API server, and the same store over real HTTP through lightkube.

``memory_client`` is a :class:`MemoryClient` with a fixed clock. ``fake_server`` serves a fresh
``MemoryClient`` (its ``.store``) on 127.0.0.1; ``http_client`` is a :class:`LightkubeClient`
talking to it, so a test can drive the client over HTTP and inspect or fault the store directly.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kube.memory_client import MemoryClient

#: The fixed time (seconds since the epoch) the fixtures' stores stamp objects with.
FIXED_NOW = 1_700_000_000.0


@pytest.fixture
def memory_client() -> MemoryClient:
    """An empty in-memory API server whose clock always reads :data:`FIXED_NOW`."""
    return MemoryClient(clock=lambda: FIXED_NOW)


@pytest.fixture
def fake_server() -> Iterator[FakeApiServer]:  # noqa: F821 - imported lazily below
    """A running :class:`FakeApiServer` over an empty store (``fake_server.store``); stopped after the test."""
    from tests.kube.fake_server import FakeApiServer

    store = MemoryClient(clock=lambda: FIXED_NOW)
    with FakeApiServer(store) as server:
        yield server
    store.close_watches()


@pytest.fixture
def http_client(fake_server) -> Iterator[LightkubeClient]:  # noqa: F821 - imported lazily below
    """A :class:`LightkubeClient` connected over HTTP to ``fake_server``."""
    from toposched.kube.lightkube_client import LightkubeClient

    client = LightkubeClient.from_url(fake_server.url)
    yield client
    client.close()
