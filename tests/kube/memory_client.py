"""An in-memory Kubernetes API server implementing :class:`toposched.kube.client.KubeClient`.

It keeps the API server's semantics that the adapters depend on: one global resourceVersion
bumped by every write, uids and creation timestamps, ``metadata.generation``, namespaced and
cluster-scoped kinds, label and field selectors, watches that replay from a resourceVersion and
then block for new changes, 410 Gone for versions older than the retained history (see
:meth:`MemoryClient.compact`), optimistic concurrency, JSON merge patch, server-side apply with
field ownership, and the Binding subresource. Writes that change nothing are no-ops (no new
resourceVersion, no watch event), as on the real server. Objects are copied in and out.

Differences from a real API server (documented in docs/kube/api.md): no status subresource (a
replace or patch may change ``status``), deletion is immediate (no grace period, no finalizers),
no admission, defaulting or validation beyond what is listed, and lists are atomic in
server-side apply.
"""

from __future__ import annotations

import bisect
import copy
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.kube.memory_managed_fields import Ownership
from tests.kube.memory_merge_patch import json_copy, merge_patch
from tests.kube.memory_selectors import Selector, parse_field_selector, parse_label_selector
from toposched.kube.client import PODS, ApiError, Conflict, Gone, Kind, NotFound, ObjectList, ServerError, WatchEvent

__all__ = ["VERBS", "MemoryClient"]

#: The verbs :meth:`MemoryClient.fail_next` and :attr:`MemoryClient.requests` know.
VERBS = ("list", "watch", "get", "create", "replace", "patch", "apply", "delete", "bind", "set_pod_condition")

_IDENTITY_META = ("name", "namespace", "uid", "creationTimestamp")


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _resource(kind: Kind) -> str:
    """How the API server names a resource in messages: ``pods``, ``leases.coordination.k8s.io``."""
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def _spec_part(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What ``metadata.generation`` tracks: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _sans_volatile(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` without its resourceVersion and managed-field timestamps, to detect a write that changes nothing."""
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta.pop("resourceVersion", None)
    meta["managedFields"] = [{k: v for k, v in e.items() if k != "time"} for e in meta.get("managedFields") or []]
    out["metadata"] = meta
    return out


@dataclass
class _Entry:
    obj: dict[str, Any]
    ownership: Ownership


@dataclass(frozen=True)
class _Change:
    rv: int
    type: str  # ADDED, MODIFIED or DELETED
    obj: dict[str, Any]  # never mutated once recorded
    prev: dict[str, Any] | None


@dataclass
class _Failure:
    verb: str
    kind: Kind
    error: ApiError
    remaining: int


@dataclass
class _KindState:
    objects: dict[tuple[str, str], _Entry] = field(default_factory=dict)
    history: list[_Change] = field(default_factory=list)
    floor: int = 0  # watches from a resourceVersion below this get 410 Gone


class MemoryClient:
    """A thread-safe in-memory API server; see the module docstring for the semantics it keeps.

    ``clock`` gives the seconds since the epoch for ``creationTimestamp`` and managed-field
    times. At least ``history_limit`` changes per kind are kept for watches to resume from.
    Writes without a field manager are recorded as ``field_manager``'s ``Update``.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time, history_limit: int = 10_000,
                 default_namespace: str = "default", field_manager: str = "toposched"):
        if history_limit < 1:
            raise ValueError("history_limit must be at least 1")
        self._clock = clock
        self._history_limit = history_limit
        self.default_namespace = default_namespace
        self.field_manager = field_manager
        self._cond = threading.Condition(threading.RLock())
        self._kinds: dict[Kind, _KindState] = {}
        # An empty etcd is at revision 1; starting there keeps "0" (watch from any version) out of lists.
        self._rv = 1
        self._compacted = 0  # the resourceVersion of the last compact()
        self._uids = 0
        self._generated_names = 0
        self._watch_epoch = 0
        self._failures: list[_Failure] = []
        #: Every call as ``(verb, kind, name)`` (name None for list and watch), in order.
        self.requests: list[tuple[str, Kind, str | None]] = []

    # -- test hooks ---------------------------------------------------------------------------

    def fail_next(self, verb: str, kind: Kind, error: ApiError, times: int = 1) -> None:
        """Make the next ``times`` calls of ``verb`` on ``kind`` raise ``error`` instead of running."""
        if verb not in VERBS:
            raise ValueError(f"unknown verb {verb!r}; expected one of {', '.join(VERBS)}")
        with self._cond:
            self._failures.append(_Failure(verb, kind, error, times))

    def compact(self) -> None:
        """Forget all history, like etcd compaction: watches from any older resourceVersion get 410 Gone."""
        with self._cond:
            self._compacted = self._rv
            for state in self._kinds.values():
                state.history.clear()
                state.floor = self._rv
            self._cond.notify_all()

    def close_watches(self) -> None:
        """End every open watch stream (as when the server closes connections); later watches work."""
        with self._cond:
            self._watch_epoch += 1
            self._cond.notify_all()

    def contains(self, kind: Kind, name: str, *, namespace: str | None = None) -> bool:
        """Whether the object exists (not logged in :attr:`requests`, never failed by :meth:`fail_next`)."""
        with self._cond:
            return (self._namespace(kind, namespace), name) in self._state(kind).objects

    @property
    def resource_version(self) -> str:
        """The current (latest) resourceVersion."""
        with self._cond:
            return str(self._rv)

    @property
    def events(self) -> list[tuple[Kind, WatchEvent]]:
        """The retained change history of all kinds in resourceVersion order, as unfiltered watch events."""
        with self._cond:
            changes = [(c.rv, kind, c) for kind, state in self._kinds.items() for c in state.history]
        changes.sort(key=lambda item: item[0])
        return [(kind, WatchEvent(c.type, json_copy(c.obj))) for _, kind, c in changes]

    # -- internals ----------------------------------------------------------------------------

    def _enter(self, verb: str, kind: Kind, name: str | None) -> None:
        """Log the call and raise an injected failure if one is due (caller holds the lock)."""
        self.requests.append((verb, kind, name))
        for failure in self._failures:
            if failure.verb == verb and failure.kind == kind:
                failure.remaining -= 1
                if failure.remaining <= 0:
                    self._failures.remove(failure)
                raise failure.error

    def _state(self, kind: Kind) -> _KindState:
        state = self._kinds.get(kind)
        if state is None:
            state = self._kinds[kind] = _KindState(floor=self._compacted)
        return state

    def _namespace(self, kind: Kind, namespace: str | None, obj: Mapping[str, Any] | None = None) -> str:
        """The namespace an object call acts in ("" for cluster-scoped kinds)."""
        if not kind.namespaced:
            return ""
        in_body = ((obj or {}).get("metadata") or {}).get("namespace")
        if namespace and in_body and namespace != in_body:
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match "
                                              "the namespace sent on the request")
        return namespace or in_body or self.default_namespace

    def _entry(self, kind: Kind, namespace: str, name: str) -> _Entry:
        entry = self._state(kind).objects.get((namespace, name))
        if entry is None:
            raise NotFound(f'{_resource(kind)} "{name}" not found')
        return entry

    @staticmethod
    def _body(obj: Any) -> dict[str, Any]:
        if not isinstance(obj, Mapping) or not isinstance(obj.get("metadata", {}), Mapping):
            raise ApiError(400, "BadRequest", "the object must be a mapping with a metadata mapping")
        body = json_copy(obj)
        body.setdefault("metadata", {})
        return body

    @staticmethod
    def _name(kind: Kind, body: Mapping[str, Any]) -> str:
        name = body["metadata"].get("name")
        if not name or not isinstance(name, str):
            raise ApiError(422, "Invalid", f"{kind.kind} is invalid: metadata.name: Required value: name is required")
        return name

    def _check_preconditions(self, kind: Kind, entry: _Entry, meta: Mapping[str, Any]) -> None:
        current = entry.obj["metadata"]
        name = current["name"]
        rv = meta.get("resourceVersion")
        if rv and rv != current["resourceVersion"]:
            raise Conflict(f'Operation cannot be fulfilled on {_resource(kind)} "{name}": the object has been '
                           "modified; please apply your changes to the latest version and try again")
        uid = meta.get("uid")
        if uid and uid != current["uid"]:
            raise Conflict(f"Precondition failed: UID in precondition: {uid}, UID in object meta: {current['uid']}")

    def _finish(self, kind: Kind, obj: dict[str, Any], namespace: str, old: Mapping[str, Any] | None) -> None:
        """Set identity, generation and defaults on a new version of an object."""
        meta = obj["metadata"]
        obj["apiVersion"] = kind.api_version
        obj["kind"] = kind.kind
        if kind.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if old is None:
            self._uids += 1
            meta["uid"] = str(uuid.UUID(int=self._uids))
            meta["creationTimestamp"] = _timestamp(self._clock())
            meta["generation"] = 1
        else:
            for key in _IDENTITY_META:
                if key in old["metadata"]:
                    meta[key] = old["metadata"][key]
            generation = old["metadata"].get("generation", 1)
            meta["generation"] = generation + 1 if _spec_part(obj) != _spec_part(old) else generation
        if kind == PODS:
            status = obj.get("status")
            if not isinstance(status, dict):
                status = obj["status"] = {}
            status.setdefault("phase", "Pending")

    def _commit(self, kind: Kind, change_type: str, obj: dict[str, Any], prev: dict[str, Any] | None,
                ownership: Ownership | None) -> dict[str, Any]:
        """Store ``obj`` (or remove it for DELETED) at a new resourceVersion and wake the watchers.

        Returns a copy for the caller; an update equal to ``prev`` is dropped as a no-op.
        """
        state = self._state(kind)
        meta = obj["metadata"]
        if ownership is not None:
            meta["managedFields"] = ownership.render(kind.api_version)
            if not meta["managedFields"]:
                del meta["managedFields"]
        if change_type == "MODIFIED" and prev is not None and _sans_volatile(obj) == _sans_volatile(prev):
            return json_copy(prev)
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        key = (meta.get("namespace", ""), meta["name"])
        if change_type == "DELETED":
            del state.objects[key]
        else:
            assert ownership is not None
            state.objects[key] = _Entry(obj, ownership)
        state.history.append(_Change(self._rv, change_type, obj, prev))
        if len(state.history) >= 2 * self._history_limit:
            dropped = len(state.history) - self._history_limit
            state.floor = max(state.floor, state.history[dropped - 1].rv)
            del state.history[:dropped]
        self._cond.notify_all()
        return json_copy(obj)

    def _now(self) -> str:
        return _timestamp(self._clock())

    # -- KubeClient ---------------------------------------------------------------------------

    def list(self, kind: Kind, *, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> ObjectList:
        """All matching objects, ordered by namespace and name, and the current resourceVersion."""
        with self._cond:
            self._enter("list", kind, None)
            match = self._matcher(kind, namespace, label_selector, field_selector)
            items = [json_copy(e.obj) for _, e in sorted(self._state(kind).objects.items()) if match(e.obj)]
            return ObjectList(items, str(self._rv))

    def _matcher(self, kind: Kind, namespace: str | None, label_selector: str | None,
                 field_selector: str | None) -> Selector:
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(kind, field_selector)
        if kind.namespaced and namespace:
            return lambda obj: obj["metadata"].get("namespace") == namespace and labels(obj) and fields(obj)
        return lambda obj: labels(obj) and fields(obj)

    def watch(self, kind: Kind, *, resource_version: str, namespace: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              timeout_seconds: float | None = None, allow_bookmarks: bool = False) -> Iterator[WatchEvent]:
        """Matching changes after ``resource_version``; blocks for new ones until the timeout or :meth:`close_watches`.

        ``allow_bookmarks`` is accepted and ignored: this store sends no bookmarks (a server may not).

        ``""`` or ``"0"`` starts with an ``ADDED`` event per existing object. An object that stops
        matching the selectors arrives as ``DELETED``, one that starts matching as ``ADDED``.
        Raises :class:`Gone` at once (or mid-stream, when the history moves past the stream)
        when the version is older than the retained history.
        """
        with self._cond:
            self._enter("watch", kind, None)
            match = self._matcher(kind, namespace, label_selector, field_selector)
            state = self._state(kind)
            initial: list[WatchEvent] = []
            if resource_version in ("", "0"):
                start = self._rv
                initial = [WatchEvent("ADDED", json_copy(e.obj))
                           for _, e in sorted(state.objects.items()) if match(e.obj)]
            else:
                try:
                    start = int(resource_version)
                except ValueError:
                    raise ApiError(400, "BadRequest", f"invalid resourceVersion {resource_version!r}") from None
                if start < state.floor:
                    raise Gone(f"too old resource version: {start} ({state.floor})")
            epoch = self._watch_epoch
        return self._stream(kind, match, start, initial, epoch, timeout_seconds)

    def _stream(self, kind: Kind, match: Selector, position: int, initial: list[WatchEvent], epoch: int,
                timeout_seconds: float | None) -> Iterator[WatchEvent]:
        yield from initial
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        while True:
            with self._cond:
                while True:
                    if self._watch_epoch != epoch:
                        return
                    state = self._state(kind)
                    if position < state.floor:
                        raise Gone(f"too old resource version: {position} ({state.floor})")
                    first = bisect.bisect_right(state.history, position, key=lambda c: c.rv)
                    batch = state.history[first:]
                    if batch:
                        break
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return
                    self._cond.wait(remaining)
                position = batch[-1].rv
                events = [e for e in (self._as_seen(c, match) for c in batch) if e is not None]
            yield from events

    @staticmethod
    def _as_seen(change: _Change, match: Selector) -> WatchEvent | None:
        """A change as a watcher with selector ``match`` sees it (the API server's watch-cache rule)."""
        now = change.type != "DELETED" and match(change.obj)
        before = change.prev is not None and match(change.prev)
        if now:
            return WatchEvent("MODIFIED" if before else "ADDED", json_copy(change.obj))
        if before:
            gone = json_copy(change.prev if change.type != "DELETED" else change.obj)
            gone["metadata"]["resourceVersion"] = str(change.rv)
            return WatchEvent("DELETED", gone)
        return None

    def get(self, kind: Kind, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """A copy of one object; :class:`NotFound` when absent."""
        with self._cond:
            self._enter("get", kind, name)
            return json_copy(self._entry(kind, self._namespace(kind, namespace), name).obj)

    def create(self, kind: Kind, obj: Mapping[str, Any], *, namespace: str | None = None,
               field_manager: str | None = None) -> dict[str, Any]:
        """Create ``obj`` (``metadata.generateName`` gets a suffix); :class:`Conflict` ``AlreadyExists`` when taken."""
        body = self._body(obj)
        with self._cond:
            meta = body["metadata"]
            if not meta.get("name") and meta.get("generateName"):
                self._generated_names += 1
                meta["name"] = f"{meta['generateName']}{self._generated_names:05x}"
            name = self._name(kind, body)
            self._enter("create", kind, name)
            ns = self._namespace(kind, namespace, body)
            if meta.get("resourceVersion"):
                # etcd3 storage refuses this with a plain error, which the API server answers as a 500.
                raise ServerError("resourceVersion should not be set on objects to be created")
            if (ns, name) in self._state(kind).objects:
                raise Conflict(f'{_resource(kind)} "{name}" already exists', reason="AlreadyExists")
            meta.pop("managedFields", None)
            self._finish(kind, body, ns, None)
            ownership = Ownership()
            ownership.record_update(None, body, field_manager or self.field_manager, self._now())
            return self._commit(kind, "ADDED", body, None, ownership)

    def replace(self, kind: Kind, obj: Mapping[str, Any], *, namespace: str | None = None,
                field_manager: str | None = None) -> dict[str, Any]:
        """Replace an existing object; :class:`Conflict` when its ``resourceVersion`` or ``uid`` is stale."""
        body = self._body(obj)
        with self._cond:
            name = self._name(kind, body)
            self._enter("replace", kind, name)
            ns = self._namespace(kind, namespace, body)
            entry = self._entry(kind, ns, name)
            self._check_preconditions(kind, entry, body["metadata"])
            return self._update(kind, entry, body, ns, field_manager)

    def _update(self, kind: Kind, entry: _Entry, body: dict[str, Any], ns: str,
                field_manager: str | None) -> dict[str, Any]:
        body["metadata"].pop("managedFields", None)
        self._finish(kind, body, ns, entry.obj)
        ownership = copy.deepcopy(entry.ownership)
        ownership.record_update(entry.obj, body, field_manager or self.field_manager, self._now())
        return self._commit(kind, "MODIFIED", body, entry.obj, ownership)

    def patch(self, kind: Kind, name: str, patch: Mapping[str, Any], *, namespace: str | None = None,
              field_manager: str | None = None) -> dict[str, Any]:
        """Apply a JSON merge patch; a ``metadata.resourceVersion`` in the patch must be current."""
        if not isinstance(patch, Mapping):
            raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
        with self._cond:
            self._enter("patch", kind, name)
            ns = self._namespace(kind, namespace)
            entry = self._entry(kind, ns, name)
            patch_meta = patch.get("metadata")
            self._check_preconditions(kind, entry, patch_meta if isinstance(patch_meta, Mapping) else {})
            body = merge_patch(entry.obj, patch)
            if not isinstance(body.get("metadata"), dict):
                body["metadata"] = {}
            body["metadata"]["name"] = name
            return self._update(kind, entry, body, ns, field_manager)

    def apply(self, kind: Kind, obj: Mapping[str, Any], *, field_manager: str, force: bool = False,
              namespace: str | None = None) -> dict[str, Any]:
        """Server-side apply: create when absent, else merge the applied fields as ``field_manager``.

        :class:`Conflict` when a field another manager owns would change and ``force`` is False;
        with ``force`` the manager takes those fields over. Fields it applied before and leaves
        out now are removed unless another manager owns them.
        """
        if not field_manager:
            raise ApiError(422, "Invalid", "PatchOptions.meta.k8s.io is invalid: fieldManager: Required value")
        body = self._body(obj)
        with self._cond:
            name = self._name(kind, body)
            self._enter("apply", kind, name)
            ns = self._namespace(kind, namespace, body)
            entry = self._state(kind).objects.get((ns, name))
            if entry is None:
                if body["metadata"].get("resourceVersion"):
                    raise ServerError("resourceVersion should not be set on objects to be created")
                ownership = Ownership()
                created = ownership.apply(None, body, field_manager, self._now(), force=force)
                created.setdefault("metadata", {})["name"] = name
                self._finish(kind, created, ns, None)
                return self._commit(kind, "ADDED", created, None, ownership)
            self._check_preconditions(kind, entry, body["metadata"])
            ownership = copy.deepcopy(entry.ownership)
            conflicts = ownership.conflicts(entry.obj, body, field_manager)
            if conflicts and not force:
                listed = "\n".join(f'- conflict with "{manager}": {path}' for manager, path in conflicts)
                raise Conflict(f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}:"
                               f"\n{listed}")
            merged = ownership.apply(entry.obj, body, field_manager, self._now(), force=force)
            self._finish(kind, merged, ns, entry.obj)
            return self._commit(kind, "MODIFIED", merged, entry.obj, ownership)

    def delete(self, kind: Kind, name: str, *, namespace: str | None = None) -> None:
        """Delete one object at once (no grace period); :class:`NotFound` when absent."""
        with self._cond:
            self._enter("delete", kind, name)
            entry = self._entry(kind, self._namespace(kind, namespace), name)
            gone = json_copy(entry.obj)
            self._commit(kind, "DELETED", gone, entry.obj, None)

    def bind(self, namespace: str, name: str, node: str, *, uid: str | None = None,
             annotations: Mapping[str, str] | None = None) -> None:
        """Bind the pod to ``node`` (sets ``spec.nodeName``, the ``PodScheduled`` condition and ``annotations``).

        :class:`NotFound` for a missing pod; :class:`Conflict` when ``uid`` differs or the pod
        is assigned already.
        """
        with self._cond:
            self._enter("bind", PODS, name)
            entry = self._entry(PODS, namespace, name)
            self._check_preconditions(PODS, entry, {"uid": uid} if uid else {})
            bound = entry.obj.get("spec", {}).get("nodeName")
            if bound:
                raise Conflict(f'pod {name} is already assigned to node "{bound}"')
            pod = json_copy(entry.obj)
            pod.setdefault("spec", {})["nodeName"] = node
            if annotations:
                pod["metadata"]["annotations"] = {**(pod["metadata"].get("annotations") or {}), **annotations}
            conditions = [c for c in pod["status"].get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                               "lastTransitionTime": self._now()})
            pod["status"]["conditions"] = conditions
            ownership = copy.deepcopy(entry.ownership)
            ownership.prune(pod)
            self._commit(PODS, "MODIFIED", pod, entry.obj, ownership)

    def set_pod_condition(self, namespace: str, name: str, condition: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the pod's condition of ``condition["type"]`` (the others stay); :class:`NotFound` when absent."""
        with self._cond:
            self._enter("set_pod_condition", PODS, name)
            entry = self._entry(PODS, namespace, name)
            pod = json_copy(entry.obj)
            status = pod.setdefault("status", {})
            kept = [c for c in status.get("conditions") or [] if c.get("type") != condition.get("type")]
            status["conditions"] = [*kept, json_copy(dict(condition))]
            if pod == entry.obj:
                return json_copy(entry.obj)
            return self._commit(PODS, "MODIFIED", pod, entry.obj, copy.deepcopy(entry.ownership))
