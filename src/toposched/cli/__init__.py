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


# Commands live one per module and are registered here, after the app exists.
from toposched.cli.agent import agent  # noqa: E402
from toposched.cli.controller import controller  # noqa: E402
from toposched.cli.discover import discover  # noqa: E402
from toposched.cli.explain import explain  # noqa: E402
from toposched.cli.extender import extender  # noqa: E402
from toposched.cli.guard import one_line_errors  # noqa: E402
from toposched.cli.scheduler import scheduler  # noqa: E402
from toposched.cli.simulate import simulate  # noqa: E402

app.command("simulate")(one_line_errors("simulate")(simulate))
app.command("discover")(one_line_errors("discover")(discover))
app.command("explain")(one_line_errors("explain")(explain))
app.command("agent")(agent)
app.command("scheduler")(scheduler)
app.command("controller")(controller)
app.command("extender")(extender)


def main() -> None:
    """Entry point of the ``toposched`` console script."""
    app()
