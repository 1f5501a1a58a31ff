"""Shared test fixtures: where the real data of ../shared/data lives, and how to skip without it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TOPOSCHED_SHARED_DATA", _REPO.parent / "shared" / "data"))


def shared_path(*parts: str) -> Path:
    """A path under the shared real-data folder; skips the calling test when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data not available: {path} (the ../shared/data folder is absent in this clone)")
    return path


@pytest.fixture
def shared_data() -> Path:
    """The ../shared/data folder of real topologies, traces and Kubernetes objects."""
    return shared_path()
