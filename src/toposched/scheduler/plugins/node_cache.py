"""What a plugin reads from a node's objects, kept per node name until those objects change or the node leaves."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

__all__ = ["NodeCache"]

T = TypeVar("T")

_SLACK = 64  # departed names tolerated beyond a quarter of the cluster's size before a sweep


class NodeCache(Generic[T]):
    """Per node name: a value read from some of the node's objects (its report, replica, spec...).

    :meth:`read` answers from the cache while the node's objects are the very ones the value was
    read from (compared by identity: the cluster replaces an object when the node changes), and
    reads afresh otherwise. :meth:`forget_departed` drops the names of nodes that left the
    cluster once they could be many: on a cluster whose nodes come and go (autoscaling, spot
    instances, node names that are never reused) the cache would otherwise keep every departed
    node's values, and with them objects as large as its kubelet replica, for ever.
    """

    def __init__(self) -> None:
        self._values: dict[str, tuple[tuple[Any, ...], T]] = {}

    def read(self, name: str, sources: tuple[Any, ...], compute: Callable[[], T]) -> T:
        """The value for ``name`` read from ``sources``: the kept one if it was read from these very
        objects, else ``compute()`` (then kept)."""
        kept = self._values.get(name)
        if kept is not None and len(kept[0]) == len(sources) and all(map(operator.is_, kept[0], sources)):
            return kept[1]
        value = compute()
        self._values[name] = (sources, value)
        return value

    def forget_departed(self, nodes: Mapping[str, Any]) -> None:
        """Drop the names not in ``nodes`` when the cache holds more than a quarter (and a few) more
        names than ``nodes`` has: a constant check per call, and a sweep only after that many new
        names, so the cache never holds much more than the nodes there are."""
        if len(self._values) <= len(nodes) + max(_SLACK, len(nodes) // 4):
            return
        for name in [n for n in self._values if n not in nodes]:
            del self._values[name]

    def __len__(self) -> int:
        return len(self._values)
