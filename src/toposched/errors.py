"""Errors shared by every layer of toposched.

Bad input must produce one clear message naming where it came from (the file or object), the
field that is wrong and what is wrong with it. ``InputError`` carries those three parts so
callers at the edges (CLI, extender) can print them without a traceback.
"""

from __future__ import annotations

__all__ = ["InputError", "ToposchedError"]

_MAX_MESSAGE = 600


def _one_line(text: str) -> str:
    """``text`` with line breaks shown as ``\\n`` (hostile keys and values may hold them): errors are one line."""
    if "\n" not in text and "\r" not in text:
        return text
    return text.replace("\r", "\\r").replace("\n", "\\n")


class ToposchedError(Exception):
    """Base class of every error toposched raises on purpose."""


class InputError(ToposchedError, ValueError):
    """Input that cannot be accepted: names the source, the field and the problem.

    ``source`` is a file path or an object reference such as ``pod default/web-0``; it may be
    filled in later by the caller that knows it (see :meth:`with_source`).
    """

    def __init__(self, message: str, *, field: str | None = None, source: str | None = None):
        message = _one_line(message)
        field = None if field is None else _one_line(field)
        if len(message) > _MAX_MESSAGE:  # a hostile value quoted whole would flood the one line
            message = message[: _MAX_MESSAGE // 2 - 3] + " ... " + message[-(_MAX_MESSAGE // 2 - 2):]
        super().__init__(message)
        self.message = message
        self.field = field
        self.source = source

    def __setattr__(self, name: str, value: object) -> None:
        # Whatever a caller sets later (a file name, a field path) stays on one line too.
        if name in ("source", "field", "message") and isinstance(value, str):
            value = _one_line(value)
        super().__setattr__(name, value)

    def with_source(self, source: str) -> InputError:
        """Return this error with ``source`` set, unless a source is already known."""
        if self.source is None:
            self.source = source
        return self

    def __str__(self) -> str:
        parts = [p for p in (self.source, self.field) if p]
        prefix = ": ".join(parts)
        return f"{prefix}: {self.message}" if prefix else self.message
