"""The ``toposched`` command line.

Each command lives in a module of its own, imported only when the command runs: the node agent
(a DaemonSet on every node) then loads neither the simulator nor the extender's web stack, and the
scheduler starts without them. ``toposched --help``, an unknown command and :data:`app` (for tests
and embedding) build the whole command line.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer

__all__ = ["COMMANDS", "app", "build_app", "main"]

# name -> (module, function, whether errors are shown as one line); in the order --help lists them.
COMMANDS: dict[str, tuple[str, str, bool]] = {
    "simulate": ("toposched.cli.simulate", "simulate", True),
    "discover": ("toposched.cli.discover", "discover", True),
    "explain": ("toposched.cli.explain", "explain", True),
    "agent": ("toposched.cli.agent", "agent", False),
    "scheduler": ("toposched.cli.scheduler", "scheduler", False),
    "controller": ("toposched.cli.controller", "controller", False),
    "extender": ("toposched.cli.extender", "extender", False),
}


def _root() -> None:
    """Topology-aware scheduling for Kubernetes."""


def build_app(only: str | None = None) -> typer.Typer:
    """The ``toposched`` command line with every command, or with command ``only`` alone (its module
    is the only one imported)."""
    built = typer.Typer(
        name="toposched",
        help="Topology-aware scheduling for Kubernetes: discover, explain, simulate, run.",
        no_args_is_help=True,
        add_completion=False,
    )
    built.callback()(_root)
    for name, (module, function, one_line) in COMMANDS.items():
        if only is not None and name != only:
            continue
        command = getattr(importlib.import_module(module), function)
        if one_line:
            from toposched.cli.guard import one_line_errors
            command = one_line_errors(name)(command)
        built.command(name)(command)
    return built


_full: typer.Typer | None = None


def __getattr__(name: str) -> Any:
    """``toposched.cli.app``: the whole command line, built on first use."""
    global _full
    if name == "app":
        if _full is None:
            _full = build_app()
        return _full
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Entry point of the ``toposched`` console script: builds only the command asked for."""
    asked = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    build_app(asked if asked in COMMANDS else None)()
