"""``NodeTable``: the cluster as NumPy arrays, so filters and scores run over every node at once.

Rows are nodes, in the order they were first seen; the rows of removed nodes are dropped once
there are many of them, the others keeping their order (:meth:`NodeTable.refresh`). Node-level
arrays hold allocatable, requested and free per resource; zone-level arrays hold, per node and
NUMA zone, what the zone can still give (from :meth:`Cluster.zone_available`, i.e. the replica
capped by the corrected report). A change to a node marks its row dirty; :meth:`refresh` rebuilds
only dirty rows, so the cost of keeping the table current is proportional to what changed, not to
the cluster's size, and :meth:`changed_since` tells a cache which rows it must recompute.

Every array is stored resource-major with the rows as its last axis (``alloc[resource, row]``,
``zfree[resource, zone, row]``): a plugin's read of one resource (:meth:`free`, :meth:`zone_free`,
...) is a view with its rows contiguous, not a copy, and a reduction over the zones runs along
the rows. The derived arrays (free, most and sum over the zones) are brought up to date at the
changed rows on their first read after a refresh; the largest zone capacity is written with the
capacity.

What the node-level filters read of a node's spec is kept as ids per row, rewritten only when the
node's spec object changes: for every label key a nodeSelector has asked about, the row's value
(:meth:`labels_match`), and which of the distinct sets of NoSchedule/NoExecute taints the node has
(``taint_class``, into :attr:`taint_sets`), so a selector is a few array comparisons and
tolerations are judged once per taint set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from toposched.scheduler import rowloops
from toposched.scheduler.cluster import Cluster, NodeRecord
from toposched.scheduler.nodes import NodeSpec, Taint
from toposched.scheduler.rowloops import first_true, take_rows

__all__ = ["POLICY_CODES", "NodeTable", "RowValues", "first_true", "grown", "take_rows"]


DEFAULT_MAX_PODS = 110
POLICY_CODES = {"none": 0, "best-effort": 1, "restricted": 2, "single-numa-node": 3}


@dataclass(frozen=True, slots=True)
class RowValues:
    """One row of the table as plain Python values, for plugins judging a few rows without NumPy.

    ``alloc``/``used`` are indexed by :meth:`NodeTable.resource_column`; ``zfree`` has
    ``max_zones`` lists (the table's zone slots when the row was read: they grow to the node with
    the most NUMA nodes) indexed by :meth:`NodeTable.zone_column` (all zeros in invalid slots),
    ``zvalid``, ``zsplit`` and ``zheld`` one bool per slot (:meth:`NodeTable.zone_split`,
    :meth:`NodeTable.zone_held`); the flags are the table's columns of the same names.
    """

    alloc: list[int]
    used: list[int]
    zfree: list[list[int]]
    zcap: list[list[int]]
    zvalid: list[bool]
    zsplit: list[bool]
    zheld: list[bool]
    policy: int
    pod_scope: bool
    cpu_static: bool
    mem_static: bool
    topology: bool
    schedulable: bool
    live: bool
    cpu_widest: int


class NodeTable:
    """Vectorised node state kept in step with a :class:`Cluster`."""

    def __init__(self, cluster: Cluster, *, max_zones: int = 8) -> None:
        self.cluster = cluster
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.resources: list[str] = ["cpu", "memory", "pods"]
        self.zone_resources: list[str] = ["cpu", "memory"]
        self._resource_index = {r: i for i, r in enumerate(self.resources)}
        self._zone_index = {r: i for i, r in enumerate(self.zone_resources)}
        self.max_zones = max_zones
        self._capacity = 0
        # Resource-major, rows last (module notes); free, zmax and zsum are derived on read (_derive).
        self._alloc = np.zeros((3, 0), dtype=np.int64)
        self._divisor = np.zeros((3, 0), dtype=np.float64)  # max(alloc, 1) as a float: what the fit scores divide by
        self._used = np.zeros((3, 0), dtype=np.int64)
        self._free = np.zeros((3, 0), dtype=np.int64)
        self._zfree = np.zeros((2, max_zones, 0), dtype=np.int64)
        self._zcap = np.zeros((2, max_zones, 0), dtype=np.int64)  # per zone, what minAffinitySize counts (KubeletNode.zone_capacity)
        self._zmax = np.zeros((2, 0), dtype=np.int64)
        self._zcapmax = np.zeros((2, 0), dtype=np.int64)
        self._zsum = np.zeros((2, 0), dtype=np.int64)
        self._zvalid = np.zeros((max_zones, 0), dtype=bool)
        # Per zone, the Static memory manager's groups (False on other nodes): the zone belongs to a
        # multi-NUMA group (its one-node set is no valid memory hint), or holds a single-NUMA
        # allocation (no multi-NUMA set may include it). See zone_split and zone_held.
        self._zsplit = np.zeros((max_zones, 0), dtype=bool)
        self._zheld = np.zeros((max_zones, 0), dtype=bool)
        self._mgroups = np.zeros(0, dtype=np.int8)  # per row: 1 if some zone is split, 2 if some zone is held (or both)
        self._policy = np.zeros(0, dtype=np.int8)
        self._pod_scope = np.zeros(0, dtype=bool)
        self._cpu_static = np.zeros(0, dtype=bool)
        # Per row: the CPUs of its largest zone under the static CPU manager, whatever its options
        # (zone_capacity leaves CPUs out under align-by-socket); see largest_zone_cpus.
        self._cpu_widest = np.zeros(0, dtype=np.int64)
        self._mem_static = np.zeros(0, dtype=bool)
        self._topology = np.zeros(0, dtype=bool)
        self._schedulable = np.zeros(0, dtype=bool)
        self._live = np.zeros(0, dtype=bool)
        # Rows in the order they were rebuilt; stamps index it, so "what changed since" costs
        # what changed, not the table's size. The oldest half is dropped as it grows.
        self._changes: list[int] = []
        self._changes_dropped = 0
        self._since_at = -1  # the stamp _since's answers are for
        self._since: dict[int, np.ndarray] = {}  # stamp -> changed_since(stamp), as of _since_at
        # Per row, which of the distinct NoSchedule/NoExecute taint sets its node has (0: none), so a
        # pod's tolerations are judged once per set, not once per tainted node.
        self._taint_class = np.zeros(0, dtype=np.int32)
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_ids: dict[tuple[Taint, ...], int] = {(): 0}
        # Labels: per label key a pod's nodeSelector asked about, each row's value as an id (-1:
        # no such label), kept in step when a node's labels change (selectors compare whole arrays).
        self._specs: dict[int, NodeSpec] = {}  # row -> the node spec its taint class and labels were written from
        self._label_columns: dict[str, np.ndarray] = {}
        self._label_ids: dict[str, dict[str, int]] = {}
        self._values: dict[int, RowValues] = {}  # row_values() of rows unchanged since they were read
        # Per row, what its columns were last written from: (allocatable objects, requests,
        # zones); a refresh rewrites only the parts whose source differs.
        self._sources: dict[int, tuple[tuple[object, object], dict[str, int], dict[int, dict[str, int]] | None]] = {}
        self._live_count = 0
        # Read-only views handed out, per (array, resource column): valid until an array is replaced or a row added.
        self._views: dict[tuple[str, int], np.ndarray] = {}
        self._derived_at = -1  # the stamp free, zmax and zsum are current at (see _derive)
        self._all_rows = np.arange(0)
        self._dirty: set[str] = set(cluster.nodes)
        cluster.subscribe(self.mark_dirty)
        # Rows of removed nodes tolerated (or a quarter of the live rows, when that is more) before
        # the table drops them and renumbers the rest (see _compact); ``layout`` counts renumberings.
        self.dead_rows_kept = _DEAD_ROWS_KEPT
        self.layout = 0

    # ---- views (length = number of rows) ---------------------------------------------------------

    @property
    def size(self) -> int:
        """Number of rows: the live nodes and the dead rows of removed ones not yet dropped (:meth:`refresh`)."""
        return len(self.names)

    @property
    def live_count(self) -> int:
        """Number of rows whose node exists (as of the last :meth:`refresh`)."""
        return self._live_count

    def view(self, name: str) -> np.ndarray:
        """One of the arrays, trimmed to the rows (its last axis): ``alloc``, ``used``, ``free``
        (resources x rows), ``zfree``, ``zcap`` (resources x zones x rows), ``zvalid`` (zones x
        rows), the per-row flags; read-only, and current as of the last :meth:`refresh`."""
        array = self._views.get((name, -1))
        if array is None or name in _DERIVED:
            return self._view(name, -1)
        return array

    def _view(self, name: str, col: int) -> np.ndarray:
        """``view(name)``, or its column ``col`` along the first axis (-1: the whole array)."""
        if name in _DERIVED and self._derived_at != self.stamp:
            self._derive()
        array = self._views.get((name, col))
        if array is None:
            whole = getattr(self, "_" + name)
            array = whole[..., : self.size] if col < 0 else whole[col, ..., : self.size]
            array.flags.writeable = False
            self._views[(name, col)] = array
        return array

    def all_rows(self) -> np.ndarray:
        """Every row, in order (read-only; the same array until the table grows): pass it as ``rows``
        and :meth:`pick` returns whole arrays without gathering them."""
        size = self.size
        if len(self._all_rows) != size:
            self._all_rows = np.arange(size)
            self._all_rows.flags.writeable = False
        return self._all_rows

    def pick(self, array: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``array[..., rows]`` (along the last axis) for an array over every row; ``array`` itself when
        ``rows`` is :meth:`all_rows` (a 5,000-row gather costs 4 µs, and a pod's plugins make dozens).
        The arrays this table gives are read-only, so what ``pick`` returns may be too."""
        if rows is self._all_rows:
            return array
        return take_rows(array, rows)

    def zone_free_at(self, resource: str, zones: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``zone_free(resource)[zones, rows]``: one zone slot per row, read through the flat index of the
        contiguous array behind the view (half the cost of indexing the view with two arrays)."""
        block = self._zfree[self.zone_column(resource)]
        return block.take(zones * block.shape[1] + rows)

    def row_values(self, row: int) -> RowValues:
        """Row ``row`` as plain Python values (read once per change of the row).

        Resolve columns (:meth:`resource_column`, :meth:`zone_column`) before reading: adding a
        column replaces the arrays and these values.
        """
        values = self._values.get(row)
        if values is None:
            values = self._values[row] = RowValues(
                self._alloc[:, row].tolist(), self._used[:, row].tolist(), self._zfree[:, :, row].T.tolist(),
                self._zcap[:, :, row].T.tolist(), self._zvalid[:, row].tolist(), self._zsplit[:, row].tolist(),
                self._zheld[:, row].tolist(), int(self._policy[row]), bool(self._pod_scope[row]),
                bool(self._cpu_static[row]), bool(self._mem_static[row]), bool(self._topology[row]),
                bool(self._schedulable[row]), bool(self._live[row]), int(self._cpu_widest[row]))
        return values

    def _derive(self) -> None:
        """Bring ``free``, ``zmax`` and ``zsum`` up to date at the rows rebuilt since they last were, all
        resources at once: on the first read after a refresh, so a cycle that reads none of them
        (a pod shape whose cached rows are judged row by row) pays nothing."""
        rows: np.ndarray | slice | None = self.changed_since(self._derived_at)
        if rows is None:
            rows = slice(0, self.size)
        if not isinstance(rows, slice) and not len(rows):
            self._derived_at = self.stamp
            return
        rowloops.derive_rows(self._alloc, self._used, self._zfree, self._free, self._zmax, self._zsum, rows)
        self._derived_at = self.stamp

    # ---- per-resource arrays (views: rows contiguous, current as of the last refresh) -----------

    def free(self, resource: str) -> np.ndarray:
        """Per row: allocatable minus requested of ``resource`` (``alloc - used`` of its column)."""
        return self._view("free", self.resource_column(resource))

    def allocatable(self, resource: str) -> np.ndarray:
        """Per row: the node's allocatable ``resource`` (one contiguous column of ``alloc``)."""
        return self._view("alloc", self.resource_column(resource))

    def divisor(self, resource: str) -> np.ndarray:
        """Per row: the node's allocatable ``resource``, at least 1, as a float (what the fit scores
        divide by; exact below 2**53). Kept with the allocatable, so a score does not convert it per pod."""
        return self._view("divisor", self.resource_column(resource))

    def requested(self, resource: str) -> np.ndarray:
        """Per row: what the node's pods request of ``resource`` (one contiguous column of ``used``)."""
        return self._view("used", self.resource_column(resource))

    def zone_free(self, resource: str) -> np.ndarray:
        """Per zone slot and row (zones x rows, zone-major): what the zone can still give of ``resource``
        (0 in invalid slots). Zone-major so a reduction over the zones runs along contiguous rows
        (over 5,000 rows, ``any`` across 8 zones costs 2 µs this way and 70 µs row-major)."""
        return self._view("zfree", self.zone_column(resource))

    def zone_capacity(self, resource: str) -> np.ndarray:
        """Per zone slot and row (zones x rows, zone-major): what the kubelet's ``minAffinitySize`` counts
        of ``resource`` in the zone (:meth:`KubeletNode.zone_capacity`; 0 where it counts nothing). A
        request some zone's capacity holds has one-zone sets as its only preferred hints."""
        return self._view("zcap", self.zone_column(resource))

    def zone_capacity_max(self, resource: str) -> np.ndarray:
        """Per row: the largest of :meth:`zone_capacity` over the node's zones (a node's capacity changes
        with its hardware or kubelet only)."""
        return self._view("zcapmax", self.zone_column(resource))

    def zone_valid(self) -> np.ndarray:
        """Per zone slot and row (zones x rows, zone-major): whether the slot is one of the node's NUMA zones."""
        return self._view("zvalid", -1)

    def zone_split(self) -> np.ndarray:
        """Per zone slot and row (zones x rows): the zone belongs to a multi-NUMA memory group of the
        node's Static memory manager, so no single-NUMA memory allocation may use it (upstream
        ``calculateHints``); False on nodes without one."""
        return self._view("zsplit", -1)

    def zone_held(self) -> np.ndarray:
        """Per zone slot and row (zones x rows): the zone holds single-NUMA allocations of the node's
        Static memory manager, so no multi-NUMA memory allocation may include it (upstream
        ``calculateHints``); False on nodes without one."""
        return self._view("zheld", -1)

    def memory_groups(self) -> np.ndarray:
        """Per row: bit 0 set where some zone is in a multi-NUMA memory group (:meth:`zone_split`), bit 1
        where some zone holds single-NUMA allocations (:meth:`zone_held`)."""
        return self._view("mgroups", -1)

    def zone_max(self, resource: str) -> np.ndarray:
        """Per row: the most any one zone can still give of ``resource``."""
        return self._view("zmax", self.zone_column(resource))

    def zone_sum(self, resource: str) -> np.ndarray:
        """Per row: what the node's zones can still give of ``resource`` together."""
        return self._view("zsum", self.zone_column(resource))

    def resource_column(self, resource: str) -> int:
        """The node-level column of a resource, adding the column if it is new."""
        index = self._resource_index.get(resource)
        if index is None:
            index = self._resource_index[resource] = len(self.resources)
            self.resources.append(resource)
            self._alloc, self._used, self._free, self._divisor = (
                _with_column(a) for a in (self._alloc, self._used, self._free, self._divisor))
            self._views.clear()
            self._values.clear()
            self._sources.clear()
            self._dirty.update(self.names)
        return index

    def zone_column(self, resource: str) -> int:
        """The zone-level column of a resource, adding it if it is new."""
        index = self._zone_index.get(resource)
        if index is None:
            index = self._zone_index[resource] = len(self.zone_resources)
            self.zone_resources.append(resource)
            self._zfree, self._zcap, self._zcapmax, self._zmax, self._zsum = (
                _with_column(a) for a in (self._zfree, self._zcap, self._zcapmax, self._zmax, self._zsum))
            self._views.clear()
            self._values.clear()
            self._sources.clear()
            self._dirty.update(self.names)
        return index

    @property
    def stamp(self) -> int:
        """A counter of row rebuilds; pass it to :meth:`changed_since` later."""
        return self._changes_dropped + len(self._changes)

    def changed_since(self, stamp: int) -> np.ndarray | None:
        """Rows rebuilt since ``stamp`` (sorted, unique), or None when that is too long ago to tell."""
        start = stamp - self._changes_dropped
        if start < 0:
            return None
        # Every cache asks after each refresh, most of them from the same stamp: answered once per stamp pair.
        now = self.stamp
        if self._since_at != now:
            self._since_at, self._since = now, {}
        rows = self._since.get(stamp)
        if rows is None:
            rows = self._since[stamp] = np.array(sorted(set(self._changes[start:])), dtype=np.int64)
            rows.flags.writeable = False  # shared by every caller
        return rows

    def mark_dirty(self, name: str) -> None:
        """Note that a node changed; its row is rebuilt at the next :meth:`refresh`."""
        self._dirty.add(name)

    # ---- refresh ---------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Bring every dirty row up to date with the cluster."""
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        for name in sorted(dirty):
            self._refresh_row(name)
        if self._dirty:  # new columns appeared while refreshing: fill them for every row
            self.refresh()
        if len(self._changes) > max(4096, 4 * self.size):
            half = len(self._changes) // 2
            del self._changes[:half]
            self._changes_dropped += half
        if self.size - self._live_count > max(self.dead_rows_kept, self._live_count // 4):
            self._compact()

    def _compact(self) -> None:
        """Drop the rows of removed nodes and renumber the others, keeping their order.

        Without this a cluster whose nodes come and go (autoscaling, spot instances) would grow
        the table, and with it every pod's work, without bound. The live rows keep their relative
        order, so "the lowest row" among equally scored nodes is the same node as before. Every
        earlier stamp becomes too old (:meth:`changed_since` answers None), so each cache keyed by
        row rebuilds; :attr:`layout` is bumped for those that key rows by other means.
        """
        keep = np.flatnonzero(self._live[: self.size])
        renumber = {int(old): new for new, old in enumerate(keep.tolist())}
        for name in _ROW_ARRAYS:
            old = getattr(self, name)
            array = np.zeros_like(old)
            array[..., : len(keep)] = old[..., keep]
            setattr(self, name, array)
        for key, column in self._label_columns.items():
            array = np.full_like(column, -1)
            array[: len(keep)] = column[keep]
            self._label_columns[key] = array
        self.names = [self.names[row] for row in keep.tolist()]
        self.index = {name: row for row, name in enumerate(self.names)}
        self._specs = {renumber[row]: spec for row, spec in self._specs.items() if row in renumber}
        self._sources = {renumber[row]: source for row, source in self._sources.items() if row in renumber}
        self._forget_layout()

    def _forget_layout(self) -> None:
        """After the arrays changed shape or row numbers: every earlier stamp becomes too old
        (:meth:`changed_since` answers None, so each cache keyed by row rebuilds) and :attr:`layout`
        is bumped for those that key rows by other means."""
        self._values.clear()
        self._views.clear()
        self._changes_dropped, self._changes = self.stamp + 1, []
        self._since_at, self._since = -1, {}
        self.layout += 1

    def _fit_zones(self, count: int) -> None:
        """Give every zone array at least ``count`` zone slots, so a node with more NUMA nodes than
        the table had slots for is read whole (a zone left out would make the zone checks refuse
        pods that one of its NUMA nodes holds). The rows already written keep their zones in the
        first slots, the new ones invalid; caches shaped by the slots rebuild (:meth:`_forget_layout`)."""
        if count <= self.max_zones:
            return
        self._zfree, self._zcap = (grown(a, count, axis=1) for a in (self._zfree, self._zcap))
        self._zvalid, self._zsplit, self._zheld = (grown(a, count, False, axis=0) for a in (self._zvalid, self._zsplit, self._zheld))
        self.max_zones = count
        self._forget_layout()

    def _row(self, name: str) -> int:
        row = self.index.get(name)
        if row is None:
            row = len(self.names)
            if row >= self._capacity:
                self._grow(max(64, 2 * self._capacity))
            self.names.append(name)
            self.index[name] = row
            self._views.clear()  # the views end at the old row count
        return row

    def _grow(self, capacity: int) -> None:
        extra = capacity - self._capacity
        for name in _ROW_ARRAYS:
            old = getattr(self, name)
            setattr(self, name, np.concatenate([old, np.zeros(old.shape[:-1] + (extra,), old.dtype)], axis=-1))
        for key, column in self._label_columns.items():
            self._label_columns[key] = np.concatenate([column, np.full(extra, -1, dtype=column.dtype)])
        self._capacity = capacity
        self._views.clear()

    def _refresh_row(self, name: str) -> None:
        record = self.cluster.nodes.get(name)
        if record is None:
            if name in self.index:
                row = self.index[name]
                self._changes.append(row)
                self._values.pop(row, None)
                self._sources.pop(row, None)
                self._live_count -= bool(self._live[row])
                self._live[row] = self._schedulable[row] = False
                self._index_spec(row, None)
            return
        row = self._row(name)
        self._changes.append(row)
        self._values.pop(row, None)
        self._live_count += not self._live[row]
        self._live[row] = True
        if self._specs.get(row) is not record.spec:
            self._index_spec(row, record.spec)
        model = record.model
        if model is not None:
            self._fit_zones(len(model.machine.numa_nodes))
        # Only what changed is rewritten (a pod's reservation changes its node's requests, and
        # its zones only when it pins something). Adding a column forgets every row's sources.
        known = self._sources.get(row)
        allocatable = (record.spec.allocatable, model.allocatable if model is not None else None)
        requested = dict(record.requested)
        zones = self.cluster.zone_available(name) if model is not None else None
        if known is None or known[0][0] is not allocatable[0] or known[0][1] is not allocatable[1]:
            self._write_allocatable(row, record)
            self._write_capacity(row, model.zone_capacity() if model is not None else {})
            self._cpu_widest[row] = model.largest_zone_cpus() if model is not None else 0
        if known is None or known[1] != requested:
            self._used[:, row] = 0
            index = self._resource_index
            for resource, value in requested.items():
                col = index[resource] if resource in index else self.resource_column(resource)
                self._used[col, row] = value  # indexed after resolving: adding a column replaces the arrays
        if known is None or known[2] != zones:
            self._write_zones(row, zones, known[2] if known is not None else None)
        self._write_memory_groups(row, model.memory.machine_state if model is not None and model.memory is not None
                                  else None)
        self._sources[row] = (allocatable, requested, zones)
        self._schedulable[row] = not record.spec.unschedulable and not record.broken
        self._topology[row] = model is not None
        if model is None:
            self._policy[row] = 0
            return
        self._policy[row] = POLICY_CODES[record.policy]
        self._pod_scope[row] = record.scope == "pod"
        self._cpu_static[row] = model.cpu is not None
        self._mem_static[row] = model.memory is not None

    # ---- labels ----------------------------------------------------------------------------------

    def labels_match(self, selector: Mapping[str, str]) -> np.ndarray:
        """Per row, whether its node's labels hold every ``key: value`` of ``selector`` (a dead row's
        do not); current as of the last :meth:`refresh`."""
        ok = np.ones(self.size, dtype=bool)
        for key, value in selector.items():
            column = self._label_columns.get(key)
            if column is None:
                column = self._label_columns[key] = np.full(self._capacity, -1, dtype=np.int32)
                ids = self._label_ids.setdefault(key, {})
                for row, spec in self._specs.items():
                    if key in spec.labels:
                        column[row] = ids.setdefault(spec.labels[key], len(ids))
            wanted = self._label_ids[key].get(value)
            if wanted is None:
                return np.zeros(self.size, dtype=bool)
            ok &= column[: self.size] == wanted
        return ok

    def _index_spec(self, row: int, spec: NodeSpec | None) -> None:
        """Write ``row``'s taint class and its value of every label key asked about so far (None: the node is gone)."""
        labels: Mapping[str, str] = {}
        if spec is None:
            self._specs.pop(row, None)
            self._taint_class[row] = 0
        else:
            self._specs[row] = spec
            labels = spec.labels
            taints = tuple(t for t in spec.taints if t.effect != "PreferNoSchedule")
            taint_class = self._taint_ids.get(taints)
            if taint_class is None:
                taint_class = self._taint_ids[taints] = len(self.taint_sets)
                self.taint_sets.append(taints)
            self._taint_class[row] = taint_class
        for key, column in self._label_columns.items():
            value = labels.get(key)
            if value is None:
                column[row] = -1
            else:
                ids = self._label_ids[key]
                column[row] = ids.setdefault(value, len(ids))

    def _write_allocatable(self, row: int, record: NodeRecord) -> None:
        model = record.model
        values = dict(record.spec.allocatable)
        values.setdefault("pods", DEFAULT_MAX_PODS)  # the kubelet's default maxPods
        if model is not None and not record.spec.allocatable:  # a node known only by its report: the replica's
            values.update(model.allocatable)
            values["pods"] = model.allocatable.get("pods", DEFAULT_MAX_PODS)
        cols = [self.resource_column(resource) for resource in values]  # before indexing: adding a column replaces the arrays
        self._alloc[:, row] = 0
        for col, value in zip(cols, values.values()):
            self._alloc[col, row] = value
        self._divisor[:, row] = np.maximum(self._alloc[:, row], 1)

    def _write_capacity(self, row: int, capacity: dict[int, dict[str, int]]) -> None:
        """Write the row's zone capacities (its NUMA zones in the order :meth:`_write_zones` gives them slots)."""
        for zone in capacity.values():
            for resource in zone:
                self.zone_column(resource)  # before indexing: adding a column replaces the arrays
        self._zcap[:, :, row] = 0
        for slot, numa_id in enumerate(sorted(capacity)[: self.max_zones]):
            for resource, value in capacity[numa_id].items():
                self._zcap[self._zone_index[resource], slot, row] = value
        self._zcapmax[:, row] = self._zcap[:, :, row].max(axis=1)

    def _write_memory_groups(self, row: int, state: Mapping[int, object] | None) -> None:
        """Write the row's zones' memory groups from a Static memory manager's machine state (None:
        no such manager), in the slots :meth:`_write_zones` gives the NUMA zones."""
        self._zsplit[:, row] = False
        self._zheld[:, row] = False
        self._mgroups[row] = 0
        if state is None:
            return
        for slot, numa_id in enumerate(sorted(state)[: self.max_zones]):
            node = state[numa_id]
            cells = node.cells or ()  # type: ignore[attr-defined]
            if len(cells) > 1:
                self._zsplit[slot, row] = True
                self._mgroups[row] |= 1
            elif node.number_of_assignments > 0:  # type: ignore[attr-defined]
                self._zheld[slot, row] = True
                self._mgroups[row] |= 2

    def _write_zones(self, row: int, zones: dict[int, dict[str, int]] | None,
                     before: dict[int, dict[str, int]] | None) -> None:
        """Write the row's zones; with the same NUMA zones as ``before`` (what the row holds), only the changed ones."""
        same_zones = zones is not None and before is not None and zones.keys() == before.keys()
        if not same_zones:
            self._zvalid[:, row] = False
            self._zfree[:, :, row] = 0
        for slot, numa_id in enumerate(sorted(zones or {})[: self.max_zones]):
            zone = zones[numa_id]  # type: ignore[index]
            if same_zones:
                if zone == before[numa_id]:  # type: ignore[index]
                    continue
                self._zfree[:, slot, row] = 0
            self._zvalid[slot, row] = True
            index = self._zone_index
            for resource, value in zone.items():
                col = index[resource] if resource in index else self.zone_column(resource)
                self._zfree[col, slot, row] = value  # indexed after resolving: adding a column replaces the arrays


def grown(array: np.ndarray, size: int, fill: object = 0, axis: int = -1) -> np.ndarray:
    """``array`` (rows along ``axis``, the last by default) with rows added up to ``size``, filled
    with ``fill``; the same array when it has them. For a cache over the table's rows when nodes
    joined: the new rows are among :meth:`NodeTable.changed_since`, so only they need computing."""
    missing = size - array.shape[axis]
    if missing <= 0:
        return array
    shape = list(array.shape)
    shape[axis] = missing
    return np.concatenate([array, np.full(shape, fill, dtype=array.dtype)], axis=axis)


def grown_in_place(array: np.ndarray, size: int, fill: object = 0, axis: int = -1) -> np.ndarray:
    """:func:`grown` for an array that only its holder keeps and grows: the result is a view of a
    larger array, so that the next rows added are a wider view of it, not a copy of every row.

    Nodes join one at a time (autoscaling, replacements); at 5,000 nodes copying a cache's arrays
    on each join cost the next pod up to 0.7 ms a cache. The arrays grow by half again when full.
    The holder must replace its array by the result and keep no other view of it to grow.
    """
    have = array.shape[axis]
    if have >= size:
        return array
    base = array.base
    at = axis % array.ndim
    if (isinstance(base, np.ndarray) and base.ndim == array.ndim and base.shape[at] >= size
            and base.shape[:at] + base.shape[at + 1:] == array.shape[:at] + array.shape[at + 1:]
            and base.strides == array.strides
            and base.__array_interface__["data"][0] == array.__array_interface__["data"][0]):
        wider = base[(slice(None),) * at + (slice(0, size),)]
    else:
        shape = list(array.shape)
        shape[at] = max(size, have + have // 2)
        base = np.empty(shape, dtype=array.dtype)
        wider = base[(slice(None),) * at + (slice(0, size),)]
        wider[(slice(None),) * at + (slice(0, have),)] = array
    wider[(slice(None),) * at + (slice(have, size),)] = fill
    return wider


_ROW_ARRAYS = ("_alloc", "_divisor", "_used", "_free", "_zfree", "_zcap", "_zcapmax", "_zmax", "_zsum", "_zvalid", "_zsplit", "_zheld",
               "_mgroups", "_policy", "_pod_scope", "_cpu_static", "_cpu_widest", "_mem_static", "_topology", "_schedulable", "_live",
               "_taint_class")
_DEAD_ROWS_KEPT = 64
_DERIVED = frozenset(("free", "zmax", "zsum"))  # arrays computed from others at the rows that changed (_derive)


def _with_column(array: np.ndarray) -> np.ndarray:
    """``array`` with one more resource (its first axis), zeros in every row."""
    return np.concatenate([array, np.zeros((1,) + array.shape[1:], dtype=array.dtype)])
