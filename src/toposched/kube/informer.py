"""Keeping a local view of one kind in step with the API server: list, then watch from the list's version.

The :class:`Reflector` does what client-go's reflector does: list once, hand the complete set to
``on_relist``, then watch from the list's resourceVersion and hand each change to ``on_event``,
remembering the last resourceVersion seen. Watches ask for bookmarks, as client-go's do: the
server then sends a quiet watch (a selector that matches little) its current resourceVersion now
and then, so the version to resume from stays inside the server's watch-cache window. A watch
that ends (server timeout, dropped connection) resumes from that version, so no change is missed
or delivered twice. A 410 Gone means the version is no longer in the server's history: list
again (the consumer gets the full set and drops what vanished meanwhile). A version the server
has not reached yet ("Too large resource version", a 504 after it waited for it; another
kube-apiserver whose cache lags, or a history restored from a backup) is retried from the same
version after the backoff; only when that keeps failing does it list again, so it neither gives
up on a lagging server's history nor waits forever for one that will never come. Other failures
wait out a :class:`Backoff` first.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from toposched.kube.client import ApiError, Gone, Kind, KubeClient, WatchEvent

__all__ = ["TOO_LARGE_RELIST_AFTER", "Backoff", "Reflector", "too_large_resource_version"]

log = logging.getLogger(__name__)

#: Consecutive "too large resource version" answers after which the Reflector lists again.
TOO_LARGE_RELIST_AFTER = 3


def too_large_resource_version(error: ApiError) -> bool:
    """Whether ``error`` is kube-apiserver's "Too large resource version" (504: it waited, and has not reached it)."""
    return error.code == 504 and "too large resource version" in error.message.lower()


class Backoff:
    """Exponential delays: ``initial``, times ``factor`` per failure, capped at ``maximum``; :meth:`reset` restarts."""

    def __init__(self, initial: float = 0.5, maximum: float = 30.0, factor: float = 2.0):
        if initial < 0 or maximum < initial or factor < 1:
            raise ValueError("Backoff needs 0 <= initial <= maximum and factor >= 1")
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self._next = initial

    def next(self) -> float:
        """The delay to wait before the next attempt; each call grows the following one."""
        delay = self._next
        self._next = min(self.maximum, self._next * self.factor)
        return delay

    def reset(self) -> None:
        """Start again from ``initial`` (after a success)."""
        self._next = self.initial


class Reflector:
    """List-and-watch of one kind, feeding ``on_event(WatchEvent)`` and ``on_relist(items)``.

    ``sleep(seconds)`` waits out the backoff; by default it waits on the stop event given to
    :meth:`run` (so stopping interrupts it). ``BOOKMARK`` events only move the resourceVersion;
    ``bookmarks=False`` does not ask for them.
    """

    def __init__(self, client: KubeClient, kind: Kind, on_event: Callable[[WatchEvent], Any],
                 on_relist: Callable[[list[dict[str, Any]]], Any], *, namespace: str | None = None,
                 field_selector: str | None = None, label_selector: str | None = None,
                 backoff: Backoff | None = None, sleep: Callable[[float], Any] | None = None,
                 bookmarks: bool = True):
        self.client = client
        self.kind = kind
        self.on_event = on_event
        self.on_relist = on_relist
        self.namespace = namespace
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.backoff = backoff if backoff is not None else Backoff()
        self._stop = threading.Event()
        self._sleep = sleep
        self.bookmarks = bookmarks
        self._resource_version: str | None = None
        self._too_large = 0  # consecutive "too large resource version" answers to the current version
        #: How many lists succeeded (the first one and every relist).
        self.lists = 0
        #: The last failure other than Gone, or None after a success.
        self.last_error: ApiError | None = None

    @property
    def resource_version(self) -> str | None:
        """The last resourceVersion seen (None until the first list, and after a Gone until the relist)."""
        return self._resource_version

    @property
    def synced(self) -> bool:
        """True once a list has been delivered."""
        return self.lists > 0

    def _selectors(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "label_selector": self.label_selector,
                "field_selector": self.field_selector}

    def _failed(self, error: ApiError, what: str) -> None:
        self.last_error = error
        delay = self.backoff.next()
        log.warning("%s of %s failed (%s); retrying in %.1f s", what, self.kind.plural, error, delay)
        (self._sleep or self._stop.wait)(delay)

    def step(self, timeout_seconds: float | None = None) -> None:
        """One round: list when there is no version to watch from, else one watch stream (at most ``timeout_seconds``).

        Returns after the list, when the stream ends, after a Gone (the next round lists) or
        after waiting out the backoff of a failure (the next round retries from the same version;
        after :data:`TOO_LARGE_RELIST_AFTER` "too large" answers in a row it lists instead).
        Exceptions raised by ``on_event`` or ``on_relist`` propagate to the caller.
        """
        if self._resource_version is None:
            try:
                listed = self.client.list(self.kind, **self._selectors())
            except ApiError as error:
                self._failed(error, "list")
                return
            self.on_relist(listed.items)
            self._resource_version = listed.resource_version
            self._too_large = 0
            self.lists += 1
            self.last_error = None
            self.backoff.reset()
            return
        try:
            for event in self.client.watch(self.kind, resource_version=self._resource_version,
                                           timeout_seconds=timeout_seconds, allow_bookmarks=self.bookmarks,
                                           **self._selectors()):
                version = (event.object.get("metadata") or {}).get("resourceVersion")
                if event.type != "BOOKMARK":
                    self.on_event(event)
                if version:
                    self._resource_version = version
                self._too_large = 0
                self.last_error = None
                self.backoff.reset()
        except Gone as error:
            log.info("watch of %s expired (%s); listing again", self.kind.plural, error)
            self._resource_version = None
        except ApiError as error:
            if too_large_resource_version(error):
                self._too_large += 1
                if self._too_large >= TOO_LARGE_RELIST_AFTER:
                    log.warning("the server keeps answering that resourceVersion %s of %s is in its future; "
                                "listing again", self._resource_version, self.kind.plural)
                    self._resource_version = None
            self._failed(error, "watch")

    def run(self, stop: threading.Event, *, watch_timeout: float = 30.0) -> None:
        """Call :meth:`step` until ``stop`` is set; each watch lasts at most ``watch_timeout`` seconds."""
        self._stop = stop
        while not stop.is_set():
            self.step(watch_timeout)
