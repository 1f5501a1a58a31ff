"""Events on pods (``core/v1`` Event), correlated the way client-go's ``tools/record`` does it.

kube-scheduler tells a pod's owner what happened through Events: ``FailedScheduling`` (Warning)
with the FitError text ("0/5 nodes are available: ...") and ``Scheduled`` (Normal) with
"Successfully assigned ns/name to node". A pod that stays unschedulable would produce one
Event per attempt; client-go's EventCorrelator keeps that in check, and so does this recorder:

- an Event identical to an earlier one (same source, object, type, reason and message) is not
  created again: the earlier Event gets ``count + 1`` and a new ``lastTimestamp`` (a merge patch;
  re-created when it was deleted meanwhile);
- from the 10th distinct message with the same source, object, type and reason within 10
  minutes, one Event "(combined from similar events): <latest message>" is kept up to date instead;
- each source and object may post a burst of 25 Events, then one per 5 minutes.

Recording never raises: an API failure is logged and the Event is dropped (Events are best effort).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from toposched.kube.client import EVENTS, ApiError, KubeClient, NotFound
from toposched.names import FAILED_SCHEDULING_EVENT_REASON, SCHEDULED_EVENT_REASON

__all__ = ["EventRecorder", "NORMAL", "WARNING", "event_time"]

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"

_CACHE_ENTRIES = 4096  # client-go's maxLruCacheEntries
_AGGREGATE_MAX_EVENTS = 10  # distinct messages before aggregation (defaultAggregateMaxEvents)
_AGGREGATE_INTERVAL = 600.0  # seconds (defaultAggregateIntervalInSeconds)
_SPAM_BURST = 25  # defaultSpamBurst
_SPAM_QPS = 1.0 / 300.0  # defaultSpamQPS
_COMBINED = "(combined from similar events): "


def event_time(seconds: float) -> str:
    """A ``metav1.Time`` in its wire form: RFC 3339 in UTC, whole seconds."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _LRU(OrderedDict):
    """A dict that forgets its least recently used keys beyond ``size``."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def touch(self, key: str, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)

    def look(self, key: str) -> Any:
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value


@dataclass
class _Bucket:
    tokens: float
    stamp: float


@dataclass
class _Aggregate:
    messages: set[str]
    last: float


@dataclass
class _Observation:
    count: int
    first_timestamp: str
    name: str
    resource_version: str


class EventRecorder:
    """Posts Events about objects (pods) through a KubeClient, counting and combining repeats."""

    def __init__(self, client: KubeClient, *, component: str = "toposched", clock: Callable[[], float],
                 host: str = "", instance: str = "") -> None:
        self.client = client
        self.component = component
        self.clock = clock
        self.host = host
        self.instance = instance
        self._lock = threading.Lock()
        self._buckets = _LRU(_CACHE_ENTRIES)
        self._aggregates = _LRU(_CACHE_ENTRIES)
        self._observed = _LRU(_CACHE_ENTRIES)

    # ---- what the scheduler records ----------------------------------------------------------------

    def failed_scheduling(self, pod: Mapping[str, Any], message: str) -> dict[str, Any] | None:
        """A Warning ``FailedScheduling`` on the pod with the scheduler's FitError text."""
        return self.event(pod, WARNING, FAILED_SCHEDULING_EVENT_REASON, message, action="Scheduling")

    def scheduled(self, pod: Mapping[str, Any], node: str) -> dict[str, Any] | None:
        """A Normal ``Scheduled`` on the pod: "Successfully assigned <namespace>/<name> to <node>"."""
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        return self.event(pod, NORMAL, SCHEDULED_EVENT_REASON, f"Successfully assigned {key} to {node}", action="Binding")

    # ---- the recorder --------------------------------------------------------------------------------

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, *,
              action: str = "") -> dict[str, Any] | None:
        """Record an Event about ``obj``; returns the Event as the server stored it, or None when not sent.

        Not sent: filtered as spam, or the API server refused (logged).
        """
        now = self.clock()
        event = self._new_event(obj, type_, reason, message, action, now)
        with self._lock:  # correlation only: the request goes out unlocked, as client-go's recorders send in parallel
            event, key = self._aggregate(event, now)
            event, update = self._observe(event, key)
            if self._spam(event, now):
                log.debug("event %s on %s dropped as spam", reason, event["involvedObject"].get("name"))
                return None
        try:
            stored = self._send(event, update)
        except ApiError as err:
            log.warning("cannot record event %s on %s/%s: %s", reason, event["metadata"]["namespace"],
                        event["involvedObject"].get("name"), err)
            return None
        with self._lock:
            self._observed.touch(key, _Observation(int(stored.get("count") or 1), stored.get("firstTimestamp", ""),
                                                   stored["metadata"]["name"],
                                                   str(stored["metadata"].get("resourceVersion") or "")))
        return stored

    def _new_event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, action: str,
                   now: float) -> dict[str, Any]:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        involved = {
            "kind": obj.get("kind") or "Pod",
            "namespace": namespace,
            "name": meta.get("name", ""),
            "uid": meta.get("uid", ""),
            "apiVersion": obj.get("apiVersion") or "v1",
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        stamp = event_time(now)
        source = {"component": self.component, **({"host": self.host} if self.host else {})}
        event = {
            "apiVersion": EVENTS.api_version,
            "kind": EVENTS.kind,
            "metadata": {"name": _event_name(involved["name"], now), "namespace": namespace},
            "involvedObject": {k: v for k, v in involved.items() if v},
            "reason": reason,
            "message": message,
            "type": type_,
            "source": source,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": self.instance or self.host,
        }
        if action:
            event["action"] = action
        return event

    def _aggregate(self, event: dict[str, Any], now: float) -> tuple[dict[str, Any], str]:
        """client-go's EventAggregator: the event to post and the key it is counted under."""
        similar = _key(event, with_message=False)
        record = self._aggregates.look(similar)
        if record is None or now - record.last > _AGGREGATE_INTERVAL:
            record = _Aggregate(set(), now)
        record.messages.add(event["message"])
        record.last = now
        self._aggregates.touch(similar, record)
        if len(record.messages) < _AGGREGATE_MAX_EVENTS:
            return event, _key(event, with_message=True)
        record.messages.pop()  # the set stays below the threshold's size, as upstream keeps it
        combined = {**event, "message": _COMBINED + event["message"]}
        return combined, similar

    def _observe(self, event: dict[str, Any], key: str) -> tuple[dict[str, Any], bool]:
        """client-go's eventLogger: a repeat takes the first one's name and counts up; True for a repeat."""
        seen = self._observed.look(key)
        if seen is None:
            self._observed.touch(key, _Observation(1, event["firstTimestamp"], event["metadata"]["name"], ""))
            return event, False
        repeat = {**event, "metadata": {**event["metadata"], "name": seen.name}, "count": seen.count + 1,
                  "firstTimestamp": seen.first_timestamp or event["firstTimestamp"]}
        self._observed.touch(key, _Observation(repeat["count"], repeat["firstTimestamp"], seen.name,
                                               seen.resource_version))
        return repeat, True

    def _spam(self, event: dict[str, Any], now: float) -> bool:
        """client-go's EventSourceObjectSpamFilter: a token bucket per source and object."""
        key = _key(event, with_message=False, with_reason=False)
        bucket = self._buckets.look(key)
        if bucket is None:
            bucket = _Bucket(float(_SPAM_BURST), now)
        bucket.tokens = min(float(_SPAM_BURST), bucket.tokens + (now - bucket.stamp) * _SPAM_QPS)
        bucket.stamp = now
        self._buckets.touch(key, bucket)
        if bucket.tokens < 1.0:
            return True
        bucket.tokens -= 1.0
        return False

    def _send(self, event: dict[str, Any], update: bool) -> dict[str, Any]:
        namespace = event["metadata"]["namespace"]
        if update:
            patch = {"count": event["count"], "lastTimestamp": event["lastTimestamp"], "message": event["message"]}
            try:
                return self.client.patch(EVENTS, event["metadata"]["name"], patch, namespace=namespace)
            except NotFound:
                pass  # deleted meanwhile (events expire after an hour): create it again
        return self.client.create(EVENTS, event, namespace=namespace)


def _event_name(object_name: str, now: float) -> str:
    """client-go's Event name: the object's name, a dot, the time in nanoseconds in hex."""
    return f"{object_name}.{int(round(now * 1e9)):x}"


def _key(event: Mapping[str, Any], *, with_message: bool, with_reason: bool = True) -> str:
    """The correlation keys: client-go's getEventKey (all), the aggregator's (no message), getSpamKey (no reason)."""
    source, involved = event["source"], event["involvedObject"]
    parts = [source.get("component", ""), source.get("host", ""), involved.get("kind", ""),
             involved.get("namespace", ""), involved.get("name", ""), involved.get("uid", ""),
             involved.get("apiVersion", "")]
    if with_reason:
        parts += [event["type"], event["reason"]]
    if with_message:
        parts.append(event["message"])
    return "\x00".join(parts)
