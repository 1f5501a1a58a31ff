"""Fixtures for the kubelet model's tests: the kubelet oracle, built once per run."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubelet.oracle import Oracle

_REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def kubelet_oracle() -> Iterator[Oracle]:
    """A running kubelet oracle (scripts/build-kubelet-oracle.sh builds it, cached between runs).

    Skips when there is no Go toolchain or no root; fails when the build fails.
    """
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain on PATH: the kubelet oracle (tests/oracle/kubelet) cannot be built")
    if os.geteuid() != 0:
        pytest.skip("the kubelet oracle needs root: it gives the device manager's fixed directory a private mount namespace")
    build = subprocess.run(
        ["bash", str(_REPO / "scripts" / "build-kubelet-oracle.sh")], capture_output=True, text=True, check=False
    )
    if build.returncode == 3:
        pytest.skip(build.stderr.strip())
    assert build.returncode == 0, f"building the kubelet oracle failed:\n{build.stderr}"
    oracle = Oracle(build.stdout.strip().splitlines()[-1])
    yield oracle
    oracle.close()
