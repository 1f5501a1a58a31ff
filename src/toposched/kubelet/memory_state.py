"""The memory manager's state and the kubelet's ``memory_manager_state`` checkpoint file.

The types mirror upstream's ``pkg/kubelet/cm/memorymanager/state``: a :class:`MemoryTable` per
NUMA node and memory resource (``memory``, ``hugepages-<size>``), a :class:`NUMANodeState` per
NUMA node (its tables, how many memory blocks point at it, and the NUMA group — ``cells`` — it
belongs to), and the :class:`Block` list recorded per pod UID and container name.

The checkpoint is the JSON file the kubelet keeps at ``/var/lib/kubelet/memory_manager_state``.
Three layouts exist upstream and all three are read:

* v1 — ``policyName``, ``machineState``, ``entries``, ``checksum`` (every released kubelet);
* v2 — v1 plus ``podEntries`` (pod-level resource managers);
* v3 — a v2 object plus ``data`` (the authoritative v2 JSON as a string) and ``dataChecksum``.

The checksum is reproduced exactly: the kubelet hashes (FNV-1a, 32 bit) the go-spew ``%#v``
rendering of the checkpoint struct with its checksum field zeroed; ``dataChecksum`` is the same
hash of the ``data`` string. A zero checksum is accepted, as upstream does for files written by
its old backend. Files are written in v1 layout, or v2 when pod entries are present.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import Any

from toposched.errors import InputError

__all__ = [
    "Block",
    "ContainerBlocks",
    "MachineState",
    "MemoryManagerCheckpoint",
    "MemoryTable",
    "NUMANodeState",
    "checkpoint_checksum",
    "format_memory_state",
    "machine_states_equal",
    "parse_memory_state",
    "read_memory_state",
    "write_memory_state",
]

_UINT64 = 2**64
_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class MemoryTable:
    """One memory resource on one NUMA node, in bytes (upstream ``state.MemoryTable``).

    ``allocatable`` is ``total`` minus ``system_reserved`` (and, for ``memory``, minus the
    node's hugepages); ``reserved`` is what containers hold and ``free`` what is left of
    ``allocatable``.
    """

    total: int
    system_reserved: int
    allocatable: int
    reserved: int
    free: int


@dataclass(frozen=True, slots=True)
class NUMANodeState:
    """One NUMA node's memory tables, its assignment count and its NUMA group (``cells``).

    ``number_of_assignments`` counts memory blocks (one per container and resource) that use
    the node; ``cells`` lists the nodes of the group the node belongs to — the node alone
    while it is unused or used for single-NUMA allocations. ``None`` stands for a JSON null.
    """

    number_of_assignments: int
    memory_map: Mapping[str, MemoryTable] | None
    cells: tuple[int, ...] | None

    def __post_init__(self) -> None:
        if self.memory_map is not None:
            object.__setattr__(self, "memory_map", MappingProxyType(dict(self.memory_map)))
        if self.cells is not None:
            object.__setattr__(self, "cells", tuple(self.cells))

    def table(self, resource: str) -> MemoryTable | None:
        """The table of one resource, or None when the node has none."""
        return None if self.memory_map is None else self.memory_map.get(resource)

    def with_table(self, resource: str, table: MemoryTable) -> NUMANodeState:
        """A copy of this node state with one table replaced."""
        tables = dict(self.memory_map or {})
        tables[resource] = table
        return NUMANodeState(self.number_of_assignments, tables, self.cells)


@dataclass(frozen=True, slots=True)
class Block:
    """Memory of one resource held by a container on a NUMA set (upstream ``state.Block``)."""

    numa_affinity: tuple[int, ...] | None
    type: str
    size: int

    def __post_init__(self) -> None:
        if self.numa_affinity is not None:
            object.__setattr__(self, "numa_affinity", tuple(self.numa_affinity))


MachineState = Mapping[int, NUMANodeState]
# pod UID -> container name -> blocks; None at a level stands for a JSON null there.
ContainerBlocks = Mapping[str, Mapping[str, tuple[Block, ...] | None] | None]


def _freeze_entries(entries: ContainerBlocks | None) -> ContainerBlocks | None:
    if entries is None:
        return None
    out: dict[str, Mapping[str, tuple[Block, ...] | None] | None] = {}
    for pod, containers in entries.items():
        if containers is None:
            out[pod] = None
            continue
        out[pod] = MappingProxyType(
            {name: None if blocks is None else tuple(blocks) for name, blocks in containers.items()}
        )
    return MappingProxyType(out)


@dataclass(frozen=True, slots=True)
class MemoryManagerCheckpoint:
    """The content of a ``memory_manager_state`` file.

    ``version`` is the layout it was read from ("v1", "v2" or "v3"); ``checksum`` the value
    found in the file (0 when built in memory). ``machine_state=None`` is a JSON null.
    """

    policy_name: str
    machine_state: MachineState | None
    entries: ContainerBlocks | None = field(default_factory=lambda: _EMPTY)
    pod_entries: Mapping[str, tuple[Block, ...] | None] = field(default_factory=lambda: _EMPTY)
    checksum: int = 0
    version: str = "v1"

    def __post_init__(self) -> None:
        if self.machine_state is not None:
            object.__setattr__(self, "machine_state", MappingProxyType(dict(self.machine_state)))
        object.__setattr__(self, "entries", _freeze_entries(self.entries))
        object.__setattr__(
            self,
            "pod_entries",
            MappingProxyType({k: None if v is None else tuple(v) for k, v in self.pod_entries.items()}),
        )


# ---- upstream's state equality -----------------------------------------------------------


def machine_states_equal(a: MachineState, b: MachineState) -> bool:
    """Upstream ``areMachineStatesEqual``: the equality the kubelet checks a restored state with.

    Node sets, assignment counts, groups (order-insensitive), the resources of each node and
    their total/system-reserved/allocatable must match exactly; free and reserved must match
    summed over each node's group, because within a multi-NUMA group the kubelet does not keep
    which node a block's bytes came from.
    """
    if set(a) != set(b):
        return False
    for node_id, na in a.items():
        nb = b[node_id]
        if na.number_of_assignments != nb.number_of_assignments:
            return False
        if sorted(na.cells or ()) != sorted(nb.cells or ()):
            return False
        ma, mb = na.memory_map or {}, nb.memory_map or {}
        if set(ma) != set(mb):
            return False
        for resource, ta in ma.items():
            tb = mb[resource]
            if (ta.total, ta.system_reserved, ta.allocatable) != (tb.total, tb.system_reserved, tb.allocatable):
                return False
            group = na.cells or ()
            if any(n not in a or n not in b for n in group):
                return False
            sums = []
            for state in (a, b):
                free = reserved = 0
                for n in group:
                    t = state[n].table(resource)
                    if t is not None:
                        free += t.free
                        reserved += t.reserved
                sums.append((free, reserved))
            if sums[0] != sums[1]:
                return False
    return True


# ---- checksum: go-spew "%#v" with SortKeys, then FNV-1a 32 ---------------------------------


def _fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def _spew_ints(values: tuple[int, ...] | None) -> str:
    return "<nil>" if values is None else "[" + " ".join(str(v) for v in values) + "]"


def _spew_map(items: Mapping[Any, Any] | None, key: Callable[[Any], Any], render: Callable[[Any], str]) -> str:
    # Map keys and values are printed without their types; pointer values show as "<*>".
    if items is None:
        return "<nil>"
    return "map[" + " ".join(f"{k}:{render(items[k])}" for k in sorted(items, key=key)) + "]"


def _spew_table(t: MemoryTable) -> str:
    return (
        f"<*>{{TotalMemSize:(uint64){t.total} SystemReserved:(uint64){t.system_reserved} "
        f"Allocatable:(uint64){t.allocatable} Reserved:(uint64){t.reserved} Free:(uint64){t.free}}}"
    )


def _spew_node(n: NUMANodeState) -> str:
    tables = _spew_map(n.memory_map, str, _spew_table)
    return (
        f"<*>{{NumberOfAssignments:(int){n.number_of_assignments} "
        f"MemoryMap:(map[v1.ResourceName]*state.MemoryTable){tables} Cells:([]int){_spew_ints(n.cells)}}}"
    )


def _spew_block(b: Block) -> str:
    return f"{{NUMAAffinity:([]int){_spew_ints(b.numa_affinity)} Type:(v1.ResourceName){b.type} Size:(uint64){b.size}}}"


def _spew_blocks(blocks: tuple[Block, ...] | None) -> str:
    return "<nil>" if blocks is None else "[" + " ".join(_spew_block(b) for b in blocks) + "]"


def _spew_checkpoint(cp: MemoryManagerCheckpoint, type_name: str, with_pod_entries: bool) -> str:
    machine = _spew_map(cp.machine_state, int, _spew_node)
    entries = _spew_map(cp.entries, str, lambda containers: _spew_map(containers, str, _spew_blocks))
    text = (
        f"(*state.{type_name}){{PolicyName:(string){cp.policy_name} MachineState:(state.NUMANodeMap){machine} "
        f"Entries:(state.ContainerMemoryAssignments){entries}"
    )
    if with_pod_entries:
        pods = _spew_map(cp.pod_entries, str, lambda blocks: f"{{MemoryBlocks:([]state.Block){_spew_blocks(blocks)}}}")
        text += f" PodEntries:(state.PodMemoryAssignments){pods}"
    return text + " Checksum:(checksum.Checksum)0}"


_VARIANTS = {
    # v1 as written by every released kubelet, v1 as named by kubelets that also know v2, v2.
    "v1": ("MemoryManagerCheckpoint", False),
    "v1-named": ("MemoryManagerCheckpointV1", False),
    "v2": ("MemoryManagerCheckpoint", True),
}


def checkpoint_checksum(cp: MemoryManagerCheckpoint, variant: str = "v1") -> int:
    """The kubelet's checksum of a checkpoint in one layout ("v1", "v1-named" or "v2").

    Equal to upstream ``checksum.New`` of the checkpoint struct with its checksum zeroed.
    """
    if variant not in _VARIANTS:
        raise InputError(f"unknown checksum variant {variant!r}; expected one of {sorted(_VARIANTS)}", field="variant")
    type_name, with_pods = _VARIANTS[variant]
    return _fnv1a32(_spew_checkpoint(cp, type_name, with_pods).encode())


def _data_checksum(data: str) -> int:
    return _fnv1a32(("(string)" + data).encode())


# ---- reading ----------------------------------------------------------------------------


def _uint(value: Any, path: str, *, limit: int = _UINT64) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
        raise InputError(f"{value!r} is not a non-negative integer below {limit}", field=path)
    return value


def _mapping(value: Any, path: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError(f"expected an object, got {type(value).__name__}", field=path)
    return value


def _int_list(value: Any, path: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise InputError(f"expected a list of integers, got {type(value).__name__}", field=path)
    return tuple(_uint(v, f"{path}[{i}]", limit=2**63) for i, v in enumerate(value))


def _table(value: Any, path: str) -> MemoryTable:
    obj = _mapping(value, path)
    if obj is None:
        raise InputError("a memory table cannot be null", field=path)
    names = ("total", "systemReserved", "allocatable", "reserved", "free")
    return MemoryTable(*(_uint(obj.get(n, 0), f"{path}.{n}") for n in names))


def _node(value: Any, path: str) -> NUMANodeState:
    obj = _mapping(value, path)
    if obj is None:
        raise InputError("a NUMA node state cannot be null", field=path)
    tables = _mapping(obj.get("memoryMap"), f"{path}.memoryMap")
    return NUMANodeState(
        number_of_assignments=_uint(obj.get("numberOfAssignments", 0), f"{path}.numberOfAssignments", limit=2**63),
        memory_map=None if tables is None else {str(k): _table(v, f"{path}.memoryMap.{k}") for k, v in tables.items()},
        cells=_int_list(obj.get("cells"), f"{path}.cells"),
    )


def _blocks(value: Any, path: str) -> tuple[Block, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise InputError(f"expected a list of memory blocks, got {type(value).__name__}", field=path)
    out = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        obj = _mapping(item, where)
        if obj is None:
            raise InputError("a memory block cannot be null", field=where)
        kind = obj.get("type", "")
        if not isinstance(kind, str):
            raise InputError(f"expected a resource name, got {kind!r}", field=f"{where}.type")
        out.append(
            Block(
                _int_list(obj.get("numaAffinity"), f"{where}.numaAffinity"),
                kind,
                _uint(obj.get("size", 0), f"{where}.size"),
            )
        )
    return tuple(out)


def _machine_state(value: Any) -> dict[int, NUMANodeState] | None:
    obj = _mapping(value, "machineState")
    if obj is None:
        return None
    out = {}
    for key, node in obj.items():
        try:
            node_id = int(key, 10)
        except ValueError:
            raise InputError(f"NUMA node key {key!r} is not an integer", field="machineState") from None
        if node_id < 0:
            raise InputError(f"NUMA node key {key!r} is negative", field="machineState")
        out[node_id] = _node(node, f"machineState.{key}")
    return out


def _entries(value: Any) -> dict[str, dict[str, tuple[Block, ...] | None] | None] | None:
    obj = _mapping(value, "entries")
    if obj is None:
        return None
    out: dict[str, dict[str, tuple[Block, ...] | None] | None] = {}
    for pod, containers in obj.items():
        cobj = _mapping(containers, f"entries.{pod}")
        out[pod] = None if cobj is None else {c: _blocks(b, f"entries.{pod}.{c}") for c, b in cobj.items()}
    return out


def _pod_entries(value: Any) -> dict[str, tuple[Block, ...] | None]:
    obj = _mapping(value, "podEntries")
    out = {}
    for pod, entry in (obj or {}).items():
        eobj = _mapping(entry, f"podEntries.{pod}")
        if eobj is None:
            raise InputError("a pod entry cannot be null", field=f"podEntries.{pod}")
        out[pod] = _blocks(eobj.get("memoryBlocks"), f"podEntries.{pod}.memoryBlocks")
    return out


def _object(text: str | bytes, what: str) -> Mapping[str, Any]:
    try:
        obj = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{what} is not valid JSON: {exc}", field=what) from None
    if not isinstance(obj, Mapping):
        raise InputError(f"{what} must be a JSON object", field=what)
    return obj


def _content(obj: Mapping[str, Any], checksum: int, version: str) -> MemoryManagerCheckpoint:
    policy = obj.get("policyName") or ""
    if not isinstance(policy, str):
        raise InputError(f"expected a string, got {policy!r}", field="policyName")
    return MemoryManagerCheckpoint(
        policy_name=policy,
        machine_state=_machine_state(obj.get("machineState", {})),
        entries=_entries(obj.get("entries", {})),
        pod_entries=_pod_entries(obj.get("podEntries")),
        checksum=checksum,
        version=version,
    )


def parse_memory_state(
    text: str | bytes, *, source: str | None = None, policy_name: str | None = None
) -> MemoryManagerCheckpoint:
    """Parse and verify the content of a ``memory_manager_state`` file.

    Raises :class:`InputError` naming ``source`` and the field when the JSON is malformed, when
    the checksum does not match ("checkpoint is corrupted", as upstream) or when
    ``policy_name`` is given and differs from the file's policy (upstream's message).
    """
    where = source or "memory_manager_state"
    try:
        obj = _object(text, "checkpoint")
        checksum = _uint(obj.get("checksum", 0), "checksum", limit=2**32)
        if "data" in obj or "dataChecksum" in obj:
            data = obj.get("data", "")
            if not isinstance(data, str):
                raise InputError(f"expected a string, got {type(data).__name__}", field="data")
            expected = _uint(obj.get("dataChecksum", 0), "dataChecksum", limit=2**32)
            if not data:
                raise InputError("the v3 checkpoint has no data section", field="data")
            # Upstream decodes the data section before it checks the data checksum.
            content = _object(data, "data")
            if _data_checksum(data) != expected:
                raise InputError(
                    f"checkpoint is corrupted: dataChecksum {expected} differs from {_data_checksum(data)}",
                    field="dataChecksum",
                )
            cp = _content(content, checksum, "v3")
        else:
            cp = _content(obj, checksum, "v2" if "podEntries" in obj else "v1")
            if checksum and all(checkpoint_checksum(cp, v) != checksum for v in _VARIANTS):
                raise InputError(
                    f"checkpoint is corrupted: checksum {checksum} differs from {checkpoint_checksum(cp, 'v1')}",
                    field="checksum",
                )
        if policy_name is not None and cp.policy_name != policy_name:
            raise InputError(
                f'[memorymanager] configured policy "{policy_name}" differs from state checkpoint policy '
                f'"{cp.policy_name}"',
                field="policyName",
            )
        return cp
    except InputError as err:
        raise err.with_source(where) from None


def read_memory_state(path: str | PathLike[str], *, policy_name: str | None = None) -> MemoryManagerCheckpoint:
    """Read and verify a ``memory_manager_state`` file (see :func:`parse_memory_state`)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", source=str(p)) from None
    return parse_memory_state(raw, source=str(p), policy_name=policy_name)


# ---- writing ----------------------------------------------------------------------------


def _json_table(t: MemoryTable) -> dict[str, int]:
    return {
        "total": t.total,
        "systemReserved": t.system_reserved,
        "allocatable": t.allocatable,
        "reserved": t.reserved,
        "free": t.free,
    }


def _json_blocks(blocks: tuple[Block, ...] | None) -> list[dict[str, Any]] | None:
    if blocks is None:
        return None
    return [
        {"numaAffinity": None if b.numa_affinity is None else list(b.numa_affinity), "type": b.type, "size": b.size}
        for b in blocks
    ]


def _go_sorted(items: Mapping[Any, Any]) -> list[tuple[str, Any]]:
    # encoding/json sorts map keys by their string form, so NUMA node "10" precedes "2".
    return sorted(((str(k), v) for k, v in items.items()), key=lambda kv: kv[0])


def format_memory_state(cp: MemoryManagerCheckpoint) -> str:
    """The checkpoint as the kubelet writes it: compact JSON, Go's key order, a fresh checksum.

    The layout is v1, or v2 when ``pod_entries`` is not empty; empty ``entries`` and
    ``podEntries`` are omitted like upstream's ``omitempty``.
    """
    with_pods = bool(cp.pod_entries)
    obj: dict[str, Any] = {"policyName": cp.policy_name}
    if cp.machine_state is None:
        obj["machineState"] = None
    else:
        obj["machineState"] = {
            key: {
                "numberOfAssignments": n.number_of_assignments,
                "memoryMap": None if n.memory_map is None else {r: _json_table(t) for r, t in _go_sorted(n.memory_map)},
                "cells": None if n.cells is None else list(n.cells),
            }
            for key, n in _go_sorted(cp.machine_state)
        }
    if cp.entries:
        obj["entries"] = {
            pod: None if containers is None else {c: _json_blocks(b) for c, b in _go_sorted(containers)}
            for pod, containers in _go_sorted(cp.entries)
        }
    if with_pods:
        obj["podEntries"] = {pod: {"memoryBlocks": _json_blocks(b)} for pod, b in _go_sorted(cp.pod_entries)}
    obj["checksum"] = checkpoint_checksum(cp, "v2" if with_pods else "v1")
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    # Go's encoder escapes these for HTML safety; match it byte for byte.
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def write_memory_state(path: str | PathLike[str], cp: MemoryManagerCheckpoint) -> None:
    """Write the checkpoint to ``path`` exactly as :func:`format_memory_state` renders it."""
    Path(path).write_text(format_memory_state(cp), encoding="utf-8")
