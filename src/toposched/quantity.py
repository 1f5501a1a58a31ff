"""Kubernetes resource quantities ("100m", "4Gi", "1e3", "2") as exact numbers.

Parsing follows apimachinery's ``resource.Quantity`` grammar: a signed decimal number followed
by a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal suffix (n u m "" k M G T P E) or a decimal
exponent (e3, E-2). Values are exact :class:`fractions.Fraction` so nothing rounds silently;
:func:`canonical_units` turns a request into the integers the rest of toposched computes with.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

from toposched.errors import InputError

__all__ = ["MAX_QUANTITY", "canonical_units", "check_amount", "format_bytes", "format_cpu", "parse_quantity"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_GRAMMAR = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
# apimachinery keeps a quantity's milli-value in an int64: anything at or above 2^63 milli-units
# (about 9.2e15 of the base unit, 8 PiB of memory) is refused, as no request or capacity is that big.
_ABSURD = Fraction(2**63, 1000)
# The same bound on an amount as toposched counts it (millicores, bytes, devices): the first whole amount
# whose milli-value an int64 cannot hold. No request or capacity reaches it, and below it the sums over
# a node's containers (up to a thousand) stay within NumPy's int64.
MAX_QUANTITY = -(-(2**63) // 1000)
# The longest quantity text read: Kubernetes' own quantities are far shorter.
_MAX_TEXT = 64


def check_amount(value: object, *, field: str, source: str | None = None) -> int:
    """``value`` when it is an amount as toposched counts one (an int, at least 0, below
    :data:`MAX_QUANTITY`); else an InputError naming ``field`` (and ``source``)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InputError(f"{value!r} is not a non-negative integer", field=field, source=source)
    if value >= MAX_QUANTITY:
        raise InputError(f"{value!r} is absurdly large (limit: 2^63 / 1000 of the unit, as for a quantity read "
                         "from a manifest)", field=field, source=source)
    return value


def parse_quantity(value: str | int | float, *, field: str | None = None) -> Fraction:
    """Parse a quantity into an exact Fraction; raise InputError quoting it when it is not one.

    Negative, non-finite and absurdly large (≥ 2^63 milli-units, as apimachinery's int64) values
    are refused: no request or capacity is either.
    """
    if isinstance(value, bool):
        raise InputError(f"quantity {value!r} is not a number", field=field)
    if isinstance(value, int):
        if value.bit_length() > 64:
            raise InputError("quantity of more than 19 digits is absurdly large (limit: 2^63 milli-units)", field=field)
        number = Fraction(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"quantity {value!r} is not a finite number", field=field)
        number = Fraction(str(value))
    elif isinstance(value, str):
        if len(value) > _MAX_TEXT:
            raise InputError(f"quantity {value[:20]!r}... is longer than {_MAX_TEXT} characters (the limit)", field=field)
        number = _parse_text(value.strip(), field)
    else:
        raise InputError(f"quantity {value!r} is not a string or number", field=field)
    if number < 0:
        raise InputError(f"quantity {value!r} is negative", field=field)
    if number >= _ABSURD:
        raise InputError(f"quantity {value!r} is absurdly large (limit: 2^63 milli-units)", field=field)
    return number


def _parse_text(text: str, field: str | None) -> Fraction:
    match = _GRAMMAR.match(text)
    if not match:
        raise InputError(f"quantity {text!r} is not a number with an optional unit", field=field)
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exp = _EXPONENT.match(suffix)
    if exp:
        power = int(exp.group(1))
        if abs(power) > 30:
            raise InputError(f"quantity {text!r} has an absurd exponent", field=field)
        return number * Fraction(10) ** power
    raise InputError(f"quantity {text!r} has an unknown unit {suffix!r}", field=field)


def canonical_units(resource: str, value: str | int | float, *, field: str | None = None) -> int:
    """A quantity in the integer unit toposched uses for this resource.

    ``cpu`` becomes millicores (rounded up, as the kubelet rounds a request up to 1m);
    everything else (memory, hugepages-*, ephemeral-storage, extended resources) becomes a
    whole number, rounded up like apimachinery's ``Value()``. The result is bounded as
    :func:`check_amount` bounds amounts: a CPU quantity the parser keeps may be past it in millicores.
    """
    if type(value) in (str, int):
        # The same few quantities fill a cluster's reports and pods: their values are remembered.
        try:
            return _remembered_units(resource, value)
        except InputError:
            pass  # said again below, naming the field
    return _units(resource, value, field or resource)


@functools.lru_cache(maxsize=8192, typed=True)
def _remembered_units(resource: str, value: str | int) -> int:
    return _units(resource, value, resource)


def _units(resource: str, value: str | int | float, field: str) -> int:
    q = parse_quantity(value, field=field)
    if resource == "cpu":
        q *= 1000
    whole = -(-q.numerator // q.denominator)
    return check_amount(int(whole), field=field)


def format_cpu(millis: int) -> str:
    """Millicores as a quantity string: whole CPUs as "4", others as "1500m"."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_bytes(value: int) -> str:
    """Bytes as the shortest exact binary quantity ("4Gi", "512Mi", "1000")."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if value and value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)
