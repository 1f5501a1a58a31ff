"""The CLI's last line of defence: whatever a command raises, the user sees one line, never a traceback.

Bad input is an :class:`~toposched.errors.InputError` that the commands print themselves. What
reaches :func:`one_line_errors` is either an operating-system refusal (a file that cannot be
written, a full disk), exhaustion (memory, nesting), or a bug; each is printed as one line on
stderr with exit code 1 (70 for a bug, so tests and scripts can tell them apart).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click
import typer

from toposched.errors import ToposchedError
from toposched.inputs import one_line

__all__ = ["INTERNAL_ERROR_EXIT", "one_line_errors"]

INTERNAL_ERROR_EXIT = 70  # sysexits' EX_SOFTWARE

F = TypeVar("F", bound=Callable[..., Any])


def one_line_errors(command: str) -> Callable[[F], F]:
    """Wrap a command so any exception ends it with one line ``toposched <command>: ...`` on stderr."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (typer.Exit, typer.Abort, click.exceptions.Exit, click.exceptions.Abort, click.ClickException,
                    KeyboardInterrupt):
                raise
            except ToposchedError as exc:
                typer.echo(f"toposched {command}: {one_line(str(exc))}", err=True)
                raise typer.Exit(1) from None
            except OSError as exc:
                where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
                typer.echo(f"toposched {command}: {where}{exc.strerror or one_line(str(exc))}", err=True)
                raise typer.Exit(1) from None
            except MemoryError:
                typer.echo(f"toposched {command}: out of memory: the input is too large", err=True)
                raise typer.Exit(1) from None
            except RecursionError:
                typer.echo(f"toposched {command}: the input is nested too deeply", err=True)
                raise typer.Exit(1) from None
            except Exception as exc:  # a bug: still one line, with a distinct exit code
                typer.echo(f"toposched {command}: internal error ({type(exc).__name__}: "
                           f"{one_line(str(exc))[:300]}); please report it", err=True)
                raise typer.Exit(INTERNAL_ERROR_EXIT) from None

        return run  # type: ignore[return-value]

    return wrap
