"""Label and field selectors in the API server's string syntax, parsed and matched against dict objects.

Label selectors accept equality terms (``app=web``, ``app==web``, ``app!=web``), existence
(``app``, ``!app``) and the set forms ``app in (a,b)`` / ``app notin (a,b)``. Field selectors
accept equality terms on the fields the API server indexes for each kind (a missing field reads
as ``""``, so ``spec.nodeName=`` selects unbound pods). Malformed selectors and unsupported
fields raise a 400 ``BadRequest`` :class:`ApiError`, as the API server answers them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from toposched.kube.client import EVENTS, NODES, PODS, ApiError, Kind

__all__ = ["FIELD_LABELS", "Selector", "field_value", "parse_field_selector", "parse_label_selector"]

Selector = Callable[[Mapping[str, Any]], bool]

_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_SET_TERM = re.compile(r"^([^\s!=(),]+)\s+(in|notin)\s*\((.*)\)$")

#: Field labels each kind can be selected by (the subset of the API server's we need, per kind).
FIELD_LABELS: dict[Kind, frozenset[str]] = {
    PODS: frozenset(_COMMON_FIELDS + (
        "spec.nodeName", "spec.schedulerName", "spec.restartPolicy", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
    )),
    NODES: frozenset(_COMMON_FIELDS + ("spec.unschedulable",)),
    EVENTS: frozenset(_COMMON_FIELDS + (
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
        "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
        "reason", "reportingComponent", "source", "type",
    )),
}


def _bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def field_value(obj: Mapping[str, Any], dotted: str) -> str:
    """The string the API server compares for field ``dotted`` of ``obj``: ``""`` when absent.

    Booleans read as ``true``/``false`` (as in ``spec.unschedulable=true``); ``source`` on an
    Event is its ``source.component``.
    """
    if dotted == "source":
        dotted = "source.component"
    value: Any = obj
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside ``( )`` of a set term."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t.strip() for t in terms if t.strip()]


def _equality(term: str) -> tuple[str, str, str] | None:
    """``(key, op, value)`` of an ``=``/``==``/``!=`` term, or None when the term has none of them."""
    for op in ("!=", "==", "="):
        if op in term:
            key, value = term.split(op, 1)
            return key.strip(), "!=" if op == "!=" else "=", value.strip()
    return None


def parse_label_selector(selector: str | None) -> Selector:
    """A predicate over objects that is True when their ``metadata.labels`` match ``selector``."""
    if not selector:
        return lambda obj: True
    checks: list[Callable[[Mapping[str, str]], bool]] = []
    for term in _split_terms(selector):
        set_term = _SET_TERM.match(term)
        if set_term:
            key, op, inner = set_term.groups()
            values = frozenset(v.strip() for v in inner.split(",") if v.strip())
            if op == "in":
                checks.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                checks.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
            continue
        eq = _equality(term)
        if eq is not None:
            key, op, value = eq
            if not key:
                raise _bad_request(f"unable to parse requirement: {term!r}: empty key")
            if op == "=":
                checks.append(lambda labels, k=key, v=value: labels.get(k) == v)
            else:
                checks.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif term.startswith("!"):
            absent = term[1:].strip()
            checks.append(lambda labels, k=absent: k not in labels)
        elif " " in term:
            raise _bad_request(f"unable to parse requirement: {term!r}")
        else:
            checks.append(lambda labels, k=term: k in labels)

    def matches(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(check(labels) for check in checks)

    return matches


def parse_field_selector(kind: Kind, selector: str | None) -> Selector:
    """A predicate over objects of ``kind`` that is True when they match the field ``selector``."""
    if not selector:
        return lambda obj: True
    allowed = FIELD_LABELS.get(kind, frozenset(_COMMON_FIELDS))
    terms: list[tuple[str, str, str]] = []
    for term in _split_terms(selector):
        eq = _equality(term)
        if eq is None:
            raise _bad_request(f"invalid field selector: {term!r}: expected an =, == or != term")
        if eq[0] not in allowed:
            raise _bad_request(f"field label not supported: {eq[0]}")
        terms.append(eq)

    def matches(obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, key) == value) == (op == "=") for key, op, value in terms)

    return matches
