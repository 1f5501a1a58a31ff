"""Field ownership for server-side apply: which manager set which field, conflicts, and the merge.

A field is a path of map keys down to a leaf; lists are atomic (owned and replaced as a whole),
as for a list without merge keys in structured-merge-diff. Identity and server-set metadata
(``name``, ``namespace``, ``uid``, ``resourceVersion``, ...) are not owned by anyone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.kube.memory_merge_patch import json_copy

__all__ = ["FieldPath", "Owner", "Ownership", "fields_v1", "leaf_fields"]

FieldPath = tuple[str, ...]

_UNOWNED_TOP = frozenset({"apiVersion", "kind"})
_UNOWNED_META = frozenset({
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
    "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "generateName",
})


def leaf_fields(obj: Mapping[str, Any]) -> dict[FieldPath, Any]:
    """Every owned leaf field of ``obj`` and its value (a non-empty map is not a leaf, a list is)."""
    out: dict[FieldPath, Any] = {}

    def walk(value: Any, path: FieldPath) -> None:
        if isinstance(value, Mapping) and value:
            for key, sub in value.items():
                walk(sub, path + (key,))
        else:
            out[path] = value

    for key, value in obj.items():
        if key in _UNOWNED_TOP:
            continue
        if key == "metadata" and isinstance(value, Mapping):
            for mkey, mvalue in value.items():
                if mkey not in _UNOWNED_META:
                    walk(mvalue, ("metadata", mkey))
        else:
            walk(value, (key,))
    return out


def _get(obj: Any, path: FieldPath) -> Any:
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _set(obj: dict[str, Any], path: FieldPath, value: Any) -> None:
    for key in path[:-1]:
        child = obj.get(key)
        if not isinstance(child, dict):
            child = obj[key] = {}
        obj = child
    obj[path[-1]] = json_copy(value)


def _remove(obj: dict[str, Any], path: FieldPath) -> None:
    parents = []
    for key in path[:-1]:
        child = obj.get(key)
        if not isinstance(child, dict):
            return
        parents.append((obj, key))
        obj = child
    obj.pop(path[-1], None)
    # A map emptied by dropping its last applied field goes too, as apply leaves no empty husks.
    for parent, key in reversed(parents):
        if parent[key] or key == "metadata":
            break
        del parent[key]


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _overlaps(a: FieldPath, b: FieldPath) -> bool:
    short = min(len(a), len(b))
    return a[:short] == b[:short]


@dataclass
class Owner:
    """One entry of ``metadata.managedFields``: a manager, its operation, when it last wrote, what it owns."""

    manager: str
    operation: str  # "Apply" or "Update"
    time: str
    fields: set[FieldPath] = field(default_factory=set)


@dataclass
class Ownership:
    """All managers' fields of one object, updated by each write the way the API server's field manager does."""

    owners: list[Owner] = field(default_factory=list)

    def _owner(self, manager: str, operation: str, time: str) -> Owner:
        for owner in self.owners:
            if owner.manager == manager and owner.operation == operation:
                owner.time = time
                return owner
        owner = Owner(manager, operation, time)
        self.owners.append(owner)
        return owner

    def _drop_empty(self) -> None:
        self.owners = [o for o in self.owners if o.fields]

    def record_update(self, old: Mapping[str, Any] | None, new: Mapping[str, Any], manager: str, time: str) -> None:
        """A create/replace/patch by ``manager``: it takes every field it changed; removed fields lose their owners."""
        old_leaves = leaf_fields(old) if old is not None else {}
        new_leaves = leaf_fields(new)
        changed = {p for p, v in new_leaves.items() if old_leaves.get(p, _MISSING) != v}
        removed = set(old_leaves) - set(new_leaves)
        touched = changed | removed
        for owner in self.owners:
            owner.fields = {f for f in owner.fields if not any(_overlaps(f, t) for t in touched)}
        if changed:
            self._owner(manager, "Update", time).fields |= changed
        self._drop_empty()

    def _clashes(self, current: Mapping[str, Any], applied_leaves: Mapping[FieldPath, Any],
                 manager: str) -> list[tuple[Owner, FieldPath]]:
        """Fields of other managers that applying ``applied_leaves`` over ``current`` would change."""
        applied: dict[str, Any] = {}
        for path, value in applied_leaves.items():
            _set(applied, path, value)
        found: list[tuple[Owner, FieldPath]] = []
        for owner in self.owners:
            if owner.manager == manager:
                continue
            for owned in sorted(owner.fields):
                for path in applied_leaves:
                    if not _overlaps(owned, path):
                        continue
                    if len(owned) != len(path):
                        # One side holds a map where the other sets a key inside it: maps merge, no clash.
                        shorter, source = (owned, current) if len(owned) < len(path) else (path, applied)
                        if isinstance(_get(source, shorter), Mapping):
                            continue
                    longer = owned if len(owned) >= len(path) else path
                    if _get(current, longer) != _get(applied, longer):
                        found.append((owner, owned))
                        break
        return found

    def conflicts(self, current: Mapping[str, Any], applied: Mapping[str, Any], manager: str) -> list[tuple[str, str]]:
        """``(manager, ".field.path")`` for each field ``manager`` would change that another manager owns."""
        return [(owner.manager, "." + ".".join(owned))
                for owner, owned in self._clashes(current, leaf_fields(applied), manager)]

    def apply(self, current: Mapping[str, Any] | None, applied: Mapping[str, Any], manager: str, time: str,
              *, force: bool) -> dict[str, Any]:
        """The object after ``manager`` applies ``applied`` over ``current`` (conflicts checked by the caller).

        Fields the manager applied last time but not now are removed unless another manager owns
        them; with ``force`` the conflicting fields are taken from their other owners.
        """
        applied_leaves = leaf_fields(applied)
        result = json_copy(current) if current is not None else {}
        if force:
            for owner, owned in self._clashes(result, applied_leaves, manager):
                owner.fields.discard(owned)
        mine = self._owner(manager, "Apply", time)
        others = [o for o in self.owners if o is not mine]
        for dropped in sorted(mine.fields - set(applied_leaves), key=len, reverse=True):
            if not any(_overlaps(dropped, f) for o in others for f in o.fields) and \
                    not any(_overlaps(dropped, p) for p in applied_leaves):
                _remove(result, dropped)
        for path, value in applied_leaves.items():
            if value == {} and isinstance(_get(result, path), dict):
                continue  # an empty map applied keeps what others put in it
            _set(result, path, value)
        mine.fields = set(applied_leaves)
        self._drop_empty()
        return result

    def prune(self, obj: Mapping[str, Any]) -> None:
        """Forget owned fields that ``obj`` no longer has (e.g. after a write that does not track owners)."""
        for owner in self.owners:
            owner.fields = {f for f in owner.fields if _get(obj, f) is not _MISSING}
        self._drop_empty()

    def render(self, api_version: str) -> list[dict[str, Any]]:
        """The ``metadata.managedFields`` list, each entry's fields in the ``FieldsV1`` shape."""
        return [
            {"manager": o.manager, "operation": o.operation, "apiVersion": api_version, "time": o.time,
             "fieldsType": "FieldsV1", "fieldsV1": fields_v1(o.fields)}
            for o in self.owners
        ]


def fields_v1(paths: Iterable[FieldPath]) -> dict[str, Any]:
    """The ``FieldsV1`` encoding of a set of field paths: nested ``{"f:<key>": {...}}``, leaves ``{}``."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return root
