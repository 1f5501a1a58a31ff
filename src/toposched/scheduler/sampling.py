"""Which nodes a cycle looks at: ``percentageOfNodesToScore`` and kube-scheduler's node order.

kube-scheduler does not filter every node of a large cluster. It checks nodes one after another
and stops once it has found :func:`num_feasible_nodes_to_find` feasible ones; only those are
scored. The nodes are checked in the order of its node tree (:class:`NodeTree`: zones
interleaved), starting where the previous cycle stopped, so that every node gets its turn
(``nextStartNodeIndex``). A profile's ``percentageOfNodesToScore`` sets how many: 100 means
every node, 0 (the default) upstream's adaptive share, from 50% of a small cluster down to 5%
of a very large one, never fewer than 100 nodes.

toposched's own profile sets 100: exact placement is worth looking at every node, and the
vectorised evaluation makes it affordable. The baselines that stand for kube-scheduler and
scheduler-plugins keep upstream's default, so the simulator compares against what they do.
"""

from __future__ import annotations

from collections.abc import Mapping

from toposched.names import REGION_LABELS, ZONE_LABELS

__all__ = ["MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND", "MIN_FEASIBLE_NODES_TO_FIND", "NodeTree",
           "num_feasible_nodes_to_find", "zone_key"]

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(percentage: int, all_nodes: int) -> int:
    """How many feasible nodes end the search among ``all_nodes`` (upstream ``numFeasibleNodesToFind``).

    Every node when there are fewer than 100; else ``percentage`` of them (0: ``50 - all_nodes /
    125`` percent, at least 5), at least 100. A result of ``all_nodes`` or more means every node
    is looked at.
    """
    if all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return all_nodes
    if percentage == 0:
        percentage = max(50 - all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def zone_key(labels: Mapping[str, str]) -> str:
    """The failure zone a node belongs to, as upstream ``GetZoneKey`` names it ("" for none).

    The deprecated ``failure-domain.beta`` labels win over the ``topology.kubernetes.io`` ones;
    region and zone are joined with a NUL so that no pair of names can collide.
    """
    zone = next((labels[key] for key in ZONE_LABELS if key in labels), "")
    region = next((labels[key] for key in REGION_LABELS if key in labels), "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


class NodeTree:
    """kube-scheduler's node tree: node names grouped by zone, listed with the zones interleaved.

    Zones keep the order in which their first node came; a zone whose last node leaves is
    forgotten (it goes to the end if a node brings it back). Within a zone, nodes keep the order
    in which they came. :meth:`names` takes the first node of every zone, then the second of
    every zone, and so on, so that a search that stops early still sees every zone.
    """

    def __init__(self) -> None:
        self._zones: dict[str, list[str]] = {}  # in the order the zones came
        self._zone_of: dict[str, str] = {}
        self._listed: list[str] | None = None

    def add(self, name: str, zone: str) -> None:
        """Put ``name`` last in ``zone``, or move it there if its zone changed (a node whose zone
        is unchanged keeps its place, as upstream ``updateNode`` does)."""
        known = self._zone_of.get(name)
        if known == zone:
            return
        if known is not None:
            self.remove(name)
        self._zones.setdefault(zone, []).append(name)
        self._zone_of[name] = zone
        self._listed = None

    def remove(self, name: str) -> None:
        """Take ``name`` out of the tree (nothing if it is not there)."""
        zone = self._zone_of.pop(name, None)
        if zone is None:
            return
        members = self._zones[zone]
        members.remove(name)
        if not members:
            del self._zones[zone]
        self._listed = None

    def names(self) -> list[str]:
        """Every node, zones interleaved (upstream ``nodeTree.list``); the same list until the tree changes."""
        if self._listed is None:
            listed: list[str] = []
            zones = list(self._zones.values())
            depth = max((len(members) for members in zones), default=0)
            for i in range(depth):
                listed.extend(members[i] for members in zones if i < len(members))
            self._listed = listed
        return self._listed
