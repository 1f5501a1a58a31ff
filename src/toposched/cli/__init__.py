"""The ``toposched`` command line."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="toposched",
    help="Topology-aware scheduling for Kubernetes: discover, explain, simulate, run.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Topology-aware scheduling for Kubernetes."""


def main() -> None:
    """Entry point of the ``toposched`` console script."""
    app()
