"""Strict decoding of parsed YAML or JSON (from :mod:`toposched.inputs`) into typed values.

Every configuration object toposched reads field by field (KubeSchedulerConfiguration, plugin
args, scenario files, hardware profiles, workload files, the device-to-resource map) goes
through these helpers, so one kind of mistake reads the same everywhere. Each checks one value
and returns it typed, or raises :class:`~toposched.errors.InputError` whose ``field`` is the
path given (``profiles[0].plugins.score.enabled[1].weight``) and which carries no source:
the caller adds its file or object with :meth:`InputError.with_source`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from toposched.errors import InputError

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "boolean",
    "check_fields",
    "expect_list",
    "expect_mapping",
    "integer",
    "invalid",
    "join",
    "kind_of",
    "one_of",
    "string",
    "string_list",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def invalid(message: str, path: str | None) -> InputError:
    """The InputError for a value at ``path`` (``""`` or None: the object itself) that ``message`` describes."""
    return InputError(message, field=path or None)


def kind_of(value: Any) -> str:
    """How a decoded value reads in an error: ``null``, ``boolean true``, ``number 5``,
    ``string "x"``, ``a list``, ``an object``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"number {value!r}"
    if isinstance(value, str):
        return f'string "{value[:80]}"'
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def join(path: str, child: str | None) -> str:
    """``path`` extended by a key (``a.b``) or an index (``a[0]``); either side may be empty."""
    if not child:
        return path
    if not path:
        return child
    return f"{path}{child}" if child.startswith("[") else f"{path}.{child}"


def expect_mapping(value: Any, path: str, *, none_is_empty: bool = False) -> Mapping[str, Any]:
    """``value`` if it is an object, else InputError ``expected an object, got ...`` at ``path``.

    With ``none_is_empty``, ``null`` (or a field left out) reads as the empty object.
    """
    if value is None and none_is_empty:
        return {}
    if not isinstance(value, Mapping):
        raise invalid(f"expected an object, got {kind_of(value)}", path)
    return value


def expect_list(value: Any, path: str, *, none_is_empty: bool = False) -> list[Any]:
    """``value`` if it is a list, else InputError ``expected a list, got ...`` at ``path``.

    With ``none_is_empty``, ``null`` (or a field left out) reads as the empty list.
    """
    if value is None and none_is_empty:
        return []
    if not isinstance(value, list):
        raise invalid(f"expected a list, got {kind_of(value)}", path)
    return value


def string(value: Any, path: str) -> str:
    """``value`` if it is a string, else InputError ``expected a string, got ...`` at ``path``."""
    if not isinstance(value, str):
        raise invalid(f"expected a string, got {kind_of(value)}", path)
    return value


def string_list(value: Any, path: str) -> tuple[str, ...]:
    """A list of strings as a tuple; ``None`` is the empty tuple. Each item is checked at ``path[i]``."""
    if value is None:
        return ()
    return tuple(string(item, f"{path}[{i}]") for i, item in enumerate(expect_list(value, path)))


def integer(value: Any, path: str, low: int = INT64_MIN, high: int = INT64_MAX) -> int:
    """``value`` if it is an integer (not a boolean) within ``[low, high]``, else InputError at ``path``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"expected an integer, got {kind_of(value)}", path)
    if not low <= value <= high:
        raise invalid(f"Invalid value: {value}: does not fit in [{low}, {high}]", path)
    return value


def boolean(value: Any, path: str) -> bool:
    """``value`` if it is ``true`` or ``false``, else InputError ``expected true or false`` at ``path``."""
    if not isinstance(value, bool):
        raise invalid(f"expected true or false, got {kind_of(value)}", path)
    return value


def one_of(value: Any, allowed: Iterable[str], path: str, what: str = "value") -> str:
    """``value`` if it is one of the strings ``allowed``, else InputError naming them at ``path``.

    ``what`` names the kind of value in the message (upstream's type name, e.g. ``PreemptionMode``).
    """
    allowed = tuple(allowed)
    text = string(value, path)
    if text not in allowed:
        raise invalid(f'Invalid value: "{text}": invalid {what} (one of {", ".join(allowed)})', path)
    return text


def check_fields(obj: Mapping[str, Any], known: Iterable[str], path: str) -> None:
    """Refuse the first key of ``obj`` not in ``known``: InputError ``unknown field "k"`` (the
    known ones listed) at ``path.k``, as kube-scheduler's strict decoding refuses it."""
    known = tuple(known)
    for key in obj:
        if key not in known:
            raise invalid(f'unknown field "{key}" (known: {", ".join(known)})', join(path, str(key)))
