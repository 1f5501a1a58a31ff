"""The static checks run with the tests: the layer contract (import-linter) and ruff.

Both tools come with the ``test`` extra; their settings live in ``pyproject.toml``
(docs/development.md). A failure prints the tool's own report.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    """The tool installed next to this interpreter (the venv's), else the one on PATH; skip if neither."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]' brings it)")
    return found


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_layers_of_the_architecture_hold() -> None:
    result = _run(_tool("lint-imports"), "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_finds_nothing() -> None:
    result = _run(_tool("ruff"), "check", "--no-cache", "--output-format", "concise", "src", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr
