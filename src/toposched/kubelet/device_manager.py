"""The kubelet's device manager: topology hints for device-plugin resources, and which devices a
container gets.

A faithful model of upstream ``pkg/kubelet/cm/devicemanager``:

* ``topology_hints.go`` — :func:`device_topology_hints` and :meth:`DeviceManager.get_topology_hints`
  / :meth:`DeviceManager.get_pod_topology_hints` (``GetTopologyHints``, ``GetPodTopologyHints``,
  ``generateDeviceTopologyHints`` with its ``minAffinitySize`` rule, ``getPodDeviceRequest``).
* ``manager.go`` — :func:`devices_to_allocate` (``devicesToAllocate``: reusable devices first, then
  the devices aligned with the container's hint, the plugin's ``GetPreferredAllocation`` where
  one is given, then unaligned devices, then devices without NUMA affinity), ``filterByAffinity``
  and ``Allocate`` with the init-container reuse rules.
* ``pod_devices.go`` — the per pod / container / resource record of allocated devices.

Devices are given as ``{resource: [(device_id, numa_ids | None), ...]}``. ``None`` is a device that
reports no topology (upstream ``Topology == nil``); an empty collection is a device whose
topology lists no NUMA node (``Topology.Nodes`` empty). Upstream treats the two alike except in
one place, the reusable-device check of hint generation, and so does this model.

Upstream iterates Go sets, whose order is random, so where upstream leaves the choice of device
open this model picks deterministically: within each of the aligned / unaligned / no-affinity
groups, devices follow upstream's NUMA-node ordering (nodes in the hint first, then other
nodes, each by ascending count of available devices, ties by NUMA id, then devices without
NUMA affinity), and within one NUMA node the order in which the devices were listed. The
plugin's preferred devices are taken in the order the plugin returned them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from toposched.errors import InputError, ToposchedError
from toposched.kubelet.hints import TopologyHint, iterate_masks, mask_of
from toposched.kubelet.topology_manager import numa_subsets

if TYPE_CHECKING:
    from toposched.topology import Machine
    from toposched.workload import Container, Pod

__all__ = [
    "DeviceAllocationError",
    "DeviceManager",
    "DeviceManagerState",
    "PreferredAllocation",
    "container_device_requests",
    "device_topology_hints",
    "devices_to_allocate",
    "filter_by_affinity",
    "pod_device_requests",
]

# The NUMA node upstream files devices without NUMA affinity under (``nodeWithoutTopology``).
_NO_TOPOLOGY = -1

DeviceTopology = frozenset[int] | None
"""A device's NUMA nodes; ``None`` when the device reports no topology."""

PreferredAllocation = Callable[[list[str], list[str], int], "Iterable[str] | None"]
"""A device plugin's ``GetPreferredAllocation``: ``(available, must_include, size) -> device ids``."""

_EMPTY_IDS: frozenset[str] = frozenset()


class DeviceAllocationError(ToposchedError):
    """The device manager cannot give a container its devices; the text is upstream's message."""

    def __init__(self, message: str, *, resource: str | None = None):
        super().__init__(message)
        self.message = message
        self.resource = resource


# --------------------------------------------------------------------------------------------
# Input checking


def _go_quote(text: str) -> str:
    """``%q`` of Go's fmt for the plain strings pod UIDs, container and resource names are."""
    return json.dumps(text, ensure_ascii=False)


def _check_count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{value!r} is not an integer device count", field=field)
    if value < 0:
        raise InputError(f"a device request cannot be negative, got {value}", field=field)
    return value


def _check_numa_nodes(numa_nodes: Iterable[int], field: str = "numa_nodes") -> tuple[int, ...]:
    if isinstance(numa_nodes, (str, bytes)) or not isinstance(numa_nodes, Iterable):
        raise InputError(f"expected a collection of NUMA ids, got {numa_nodes!r}", field=field)
    ids = list(numa_nodes)
    for n in ids:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InputError(f"{n!r} is not a NUMA node id (a non-negative integer)", field=field)
    if len(set(ids)) != len(ids):
        raise InputError(f"NUMA node ids repeat: {ids}", field=field)
    return tuple(sorted(ids))


def _check_topology(topology: Any, numa_ids: frozenset[int] | None, field: str) -> DeviceTopology:
    if topology is None:
        return None
    if isinstance(topology, bool):
        raise InputError(f"{topology!r} is not a NUMA id or a collection of NUMA ids", field=field)
    if isinstance(topology, int):
        ids: tuple[Any, ...] = (topology,)
    elif isinstance(topology, (str, bytes)) or not isinstance(topology, Iterable):
        raise InputError(f"{topology!r} is not a NUMA id or a collection of NUMA ids", field=field)
    else:
        ids = tuple(topology)
    for n in ids:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InputError(f"{n!r} is not a NUMA node id (a non-negative integer)", field=field)
        if numa_ids is not None and n not in numa_ids:
            raise InputError(f"NUMA node {n} is not one of the machine's NUMA nodes {sorted(numa_ids)}", field=field)
    return frozenset(ids)


def _check_device_table(entries: Any, numa_ids: frozenset[int] | None, field: str) -> dict[str, DeviceTopology]:
    """One resource's devices as ``{device_id: topology}``, in the order given."""
    if isinstance(entries, Mapping):
        items: Iterable[Any] = entries.items()
    elif isinstance(entries, (str, bytes)) or not isinstance(entries, Iterable):
        raise InputError(f"expected a list of (device_id, numa_ids) pairs, got {entries!r}", field=field)
    else:
        items = entries
    table: dict[str, DeviceTopology] = {}
    for i, entry in enumerate(items):
        try:
            device_id, topology = entry
        except (TypeError, ValueError):
            raise InputError(f"expected a (device_id, numa_ids) pair, got {entry!r}", field=f"{field}[{i}]") from None
        if not isinstance(device_id, str) or not device_id:
            raise InputError(f"{device_id!r} is not a device id (a non-empty string)", field=f"{field}[{i}]")
        if device_id in table:
            raise InputError(f"device {device_id!r} is listed twice", field=f"{field}[{i}]")
        table[device_id] = _check_topology(topology, numa_ids, f"{field}[{device_id}]")
    return table


def _check_devices(
    devices: Any, numa_ids: frozenset[int] | None, field: str = "devices"
) -> dict[str, dict[str, DeviceTopology]]:
    if not isinstance(devices, Mapping):
        raise InputError(f"expected a mapping of resource name to devices, got {devices!r}", field=field)
    out: dict[str, dict[str, DeviceTopology]] = {}
    for resource, entries in devices.items():
        if not isinstance(resource, str) or not resource:
            raise InputError(f"{resource!r} is not a resource name", field=field)
        out[resource] = _check_device_table(entries, numa_ids, f"{field}[{resource}]")
    return out


def _check_ids(ids: Any, field: str) -> frozenset[str]:
    if ids is None:
        return _EMPTY_IDS
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise InputError(f"expected a collection of device ids, got {ids!r}", field=field)
    out = []
    for d in ids:
        if not isinstance(d, str) or not d:
            raise InputError(f"{d!r} is not a device id (a non-empty string)", field=field)
        out.append(d)
    return frozenset(out)


def _check_id_map(value: Any, field: str) -> dict[str, frozenset[str]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping of resource name to device ids, got {value!r}", field=field)
    return {str(r): _check_ids(ids, f"{field}[{r}]") for r, ids in value.items()}


def _check_requests(requests: Any, field: str = "requests") -> dict[str, int]:
    if not isinstance(requests, Mapping):
        raise InputError(f"expected a mapping of resource name to count, got {requests!r}", field=field)
    return {str(r): _check_count(n, f"{field}[{r}]") for r, n in requests.items()}


def _hint_nodes(hint: Any, numa_ids: frozenset[int] | None) -> frozenset[int] | None:
    """The hint's NUMA affinity (``None`` = upstream's nil affinity), checked against the machine."""
    if hint is None:
        return None
    if isinstance(hint, TopologyHint):
        nodes = hint.numa_nodes
    else:
        nodes = _check_topology(hint, None, "hint")
    if nodes is None:
        return None
    for n in nodes:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InputError(f"{n!r} is not a NUMA node id", field="hint")
        if numa_ids is not None and n not in numa_ids:
            raise InputError(
                f"the hint names NUMA node {n}, which the machine lacks (it has {sorted(numa_ids)})", field="hint"
            )
    return frozenset(nodes)


# --------------------------------------------------------------------------------------------
# The algorithms, on checked data


def _has_topology(table: Mapping[str, DeviceTopology]) -> bool:
    """``deviceHasTopologyAlignment``: some device of the resource names at least one NUMA node."""
    return any(t for t in table.values())


def _generate_hints(
    table: Mapping[str, DeviceTopology],
    available: Iterable[str],
    reusable: Iterable[str],
    request: int,
    numa_ids: Sequence[int],
) -> list[TopologyHint]:
    """``generateDeviceTopologyHints``: every NUMA set that can hold the request, narrowest preferred.

    ``minAffinitySize`` counts every device of the resource (healthy or not, free or not), so a
    request that would fit one NUMA node on an empty machine gets no preferred hint when the
    free devices force it across nodes.
    """
    masks = {d: mask_of(t) if t else 0 for d, t in table.items()}
    available = list(available)
    reusable = list(reusable)
    min_size = len(numa_ids)
    fitting: list[frozenset[int]] = []
    for nodes in iterate_masks(numa_ids):
        mask = mask_of(nodes)
        in_mask = sum(1 for m in masks.values() if m & mask)
        if in_mask >= request and len(nodes) < min_size:
            min_size = len(nodes)
        matching = 0
        reusable_fit = True
        for d in reusable:
            if table.get(d) is None:  # a device with no topology information is skipped
                continue
            if not masks[d] & mask:
                reusable_fit = False
                break
            matching += 1
        if not reusable_fit:
            continue
        matching += sum(1 for d in available if masks.get(d, 0) & mask)
        if matching >= request:
            fitting.append(nodes)
    return [TopologyHint(nodes, len(nodes) == min_size) for nodes in fitting]


def _resource_hints(
    table: Mapping[str, DeviceTopology],
    request: int,
    allocated: frozenset[str] | None,
    available: frozenset[str],
    reusable: frozenset[str],
    numa_ids: Sequence[int],
) -> list[TopologyHint] | None:
    """The hints of one resource, with upstream's three early answers (nil, regenerate, empty)."""
    if not _has_topology(table):
        return None
    numa_ids = _device_numa_ids(table, numa_ids)
    if allocated:
        if len(allocated) != request:
            return []
        return _generate_hints(table, _ordered(allocated, table), (), request, numa_ids)
    if len(available | reusable) < request:
        return []
    return _generate_hints(table, _ordered(available, table), _ordered(reusable, table), request, numa_ids)


MaskHint = tuple[int, bool]
"""A hint as ``(NUMA mask, preferred)``: bit n of the mask stands for NUMA node n."""


def _mask_hints(
    table: Mapping[str, DeviceTopology],
    available: Iterable[str],
    reusable: Iterable[str],
    request: int,
    numa_ids: tuple[int, ...],
    single_numa_only: bool,
) -> list[MaskHint]:
    """:func:`_generate_hints` on int masks: the same hints, in the same order.

    Devices become bits of an int (their position in ``table``); the devices touching each
    NUMA set are the union of its nodes' device bits, built for every set at once. With
    ``single_numa_only`` only the hints upstream's ``filterSingleNumaHints`` keeps are returned
    (preferred, one NUMA node wide).
    """
    position = {d: i for i, d in enumerate(table)}
    on_node = [0] * len(numa_ids)
    slot = {n: i for i, n in enumerate(numa_ids)}
    for d, topology in table.items():
        for n in topology or ():
            if n in slot:  # a node outside the machine's never meets one of its NUMA sets
                on_node[slot[n]] |= 1 << position[d]
    offered = 0
    for d in available:
        if d in position:
            offered |= 1 << position[d]
    # Reusable devices must all touch the set; one that reports no topology is skipped.
    required = 0
    for d in reusable:
        if table.get(d) is not None:
            required |= 1 << position[d]
    need = request - required.bit_count()
    if single_numa_only:
        if not any(devices.bit_count() >= request for devices in on_node):
            return []  # minAffinitySize is above one: no single-NUMA hint is preferred
        return [
            (1 << n, True)
            for n, devices in zip(numa_ids, on_node)
            if devices & required == required and (devices & offered).bit_count() >= need
        ]
    touching = [0]  # touching[positions]: the devices on any node of that set
    for devices in on_node:
        touching += [t | devices for t in touching]
    subsets = numa_subsets(numa_ids)
    min_size = next((w for p, _, w in subsets if touching[p].bit_count() >= request), len(numa_ids))
    return [
        (mask, width == min_size)
        for positions, mask, width in subsets
        if touching[positions] & required == required and (touching[positions] & offered).bit_count() >= need
    ]


def _resource_masks(
    table: Mapping[str, DeviceTopology],
    request: int,
    allocated: frozenset[str] | None,
    available: frozenset[str],
    reusable: frozenset[str],
    numa_ids: tuple[int, ...],
    single_numa_only: bool,
) -> list[MaskHint] | None:
    """:func:`_resource_hints` on int masks."""
    if not _has_topology(table):
        return None
    numa_ids = _device_numa_ids(table, numa_ids)
    if allocated:
        if len(allocated) != request:
            return []
        return _mask_hints(table, allocated, (), request, numa_ids, single_numa_only)
    if len(available | reusable) < request:
        return []
    return _mask_hints(table, available, reusable, request, numa_ids, single_numa_only)


def _device_numa_ids(table: Mapping[str, DeviceTopology], numa_ids: Sequence[int]) -> tuple[int, ...]:
    """Upstream ``deviceNUMANodes``: the machine's NUMA nodes that some device of the resource
    reports, ascending — hints are NUMA sets of these only (all the machine's when none reports one)."""
    known = set(numa_ids)
    nodes = sorted({n for topology in table.values() if topology for n in topology if n in known})
    return tuple(nodes) if nodes else tuple(numa_ids)


def _ordered(ids: Iterable[str], table: Mapping[str, DeviceTopology]) -> list[str]:
    """``ids`` in the order the resource's devices were listed; unknown ids after, sorted."""
    wanted = set(ids)
    known = [d for d in table if d in wanted]
    return known + sorted(wanted.difference(table))


def _filter_by_affinity(
    table: Mapping[str, DeviceTopology], available: Sequence[str], hint_nodes: frozenset[int] | None
) -> tuple[list[str], list[str], list[str]]:
    if not _has_topology(table) or hint_nodes is None:
        return [], [], list(available)
    per_node: dict[int, list[str]] = {}
    for d in available:
        topology = table.get(d)
        if not topology:
            per_node.setdefault(_NO_TOPOLOGY, []).append(d)
            continue
        for n in sorted(topology):
            per_node.setdefault(n, []).append(d)

    def rank(n: int) -> tuple[int, int, int]:
        if n in hint_nodes:
            return (0, len(per_node[n]), n)
        if n == _NO_TOPOLOGY:
            return (2, 0, 0)
        return (1, len(per_node[n]), n)

    nodes = sorted(per_node, key=rank)
    position = {n: i for i, n in enumerate(nodes)}
    first_node: dict[str, int] = {}
    for d in available:
        topology = table.get(d)
        first_node[d] = min(position[n] for n in topology) if topology else position[_NO_TOPOLOGY]
    order = {d: i for i, d in enumerate(available)}
    aligned: list[str] = []
    unaligned: list[str] = []
    no_affinity: list[str] = []
    for d in sorted(available, key=lambda d: (first_node[d], order[d])):
        n = nodes[first_node[d]]
        if n == _NO_TOPOLOGY:
            no_affinity.append(d)
        elif n in hint_nodes:
            aligned.append(d)
        else:
            unaligned.append(d)
    return aligned, unaligned, no_affinity


def _call_preferred(
    preferred: PreferredAllocation | None, available: list[str], must_include: list[str], size: int
) -> list[str]:
    if preferred is None:
        return []
    answer = preferred(list(available), list(must_include), size)
    if answer is None:
        return []
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
        raise InputError(f"GetPreferredAllocation must return device ids, got {answer!r}", field="preferred")
    return [d for d in answer if isinstance(d, str)]


def _devices_to_allocate(
    *,
    table: Mapping[str, DeviceTopology] | None,
    healthy: frozenset[str],
    in_use: frozenset[str],
    resource: str,
    required: int,
    hint_nodes: frozenset[int] | None,
    reusable: frozenset[str],
    container_devices: frozenset[str] | None,
    preferred: PreferredAllocation | None,
    pod_uid: str,
    container_name: str,
) -> list[str]:
    """``devicesToAllocate`` on checked data; returns the new devices in the order they were taken."""
    needed = required
    if container_devices is not None:
        needed -= len(container_devices)
        if needed != 0:
            raise DeviceAllocationError(
                f"pod {_go_quote(pod_uid)} container {_go_quote(container_name)} changed request for resource "
                f"{_go_quote(resource)} from {len(container_devices)} to {required}",
                resource=resource,
            )
    if table is None:
        raise DeviceAllocationError(f"cannot allocate unregistered device {resource}", resource=resource)
    if not healthy:
        raise DeviceAllocationError(
            f"no healthy devices present; cannot allocate unhealthy devices {resource}", resource=resource
        )
    if container_devices is not None and not container_devices <= healthy:
        raise DeviceAllocationError(
            f"previously allocated devices are no longer healthy; cannot allocate unhealthy devices {resource}",
            resource=resource,
        )
    if needed == 0:
        return []

    chosen: list[str] = []
    taken: set[str] = set()

    def take(pool: Iterable[str]) -> bool:
        nonlocal needed
        for d in pool:
            if d in taken:
                continue
            chosen.append(d)
            taken.add(d)
            needed -= 1
            if needed == 0:
                return True
        return False

    if take(_ordered(reusable, table)):
        return chosen
    available = [d for d in table if d in healthy and d not in in_use and d not in taken]
    if len(available) < needed:
        raise DeviceAllocationError(
            f"requested number of devices unavailable for {resource}. Requested: {needed}, Available: {len(available)}",
            resource=resource,
        )
    aligned, unaligned, no_affinity = _filter_by_affinity(table, available, hint_nodes)
    if needed < len(aligned):
        # Every remaining device can come from the aligned set: let the plugin choose among them.
        aligned_set = set(aligned)
        offer = _ordered(aligned_set | taken, table)
        answer = _call_preferred(preferred, offer, _ordered(taken, table), required)
        if take(d for d in answer if d in aligned_set):
            return chosen
        take(aligned)
        return chosen
    # Take every aligned device first, so the Topology Manager's alignment holds where it can.
    if take(aligned):
        return chosen
    available_set = set(available)
    offer = _ordered(available_set | taken, table)
    answer = _call_preferred(preferred, offer, _ordered(taken, table), required)
    if take(d for d in answer if d in available_set):
        return chosen
    if take(unaligned):
        return chosen
    take(no_affinity)
    return chosen


# --------------------------------------------------------------------------------------------
# Public functions


def device_topology_hints(
    devices: Mapping[str, Any],
    requests: Mapping[str, int],
    numa_nodes: Iterable[int],
    *,
    allocated: Mapping[str, Iterable[str]] | None = None,
    reusable: Mapping[str, Iterable[str]] | None = None,
    in_use: Mapping[str, Iterable[str]] | None = None,
    unhealthy: Mapping[str, Iterable[str]] | None = None,
) -> dict[str, list[TopologyHint] | None]:
    """The device manager's topology hints for one container (or one pod), as upstream computes them.

    ``devices`` lists every device of each resource, ``{resource: [(device_id, numa_ids | None)]}``;
    ``requests`` the device counts asked for; ``numa_nodes`` the machine's NUMA ids.
    ``allocated`` holds the devices already allocated to this container (or pod) per resource:
    hints are then regenerated from them, or ``[]`` when their number differs from the request.
    ``reusable`` holds devices freed by init containers that this container may reuse;
    ``in_use`` devices held by other containers; ``unhealthy`` devices the plugin reports
    unhealthy. Those three default to none.

    Only device-plugin resources get an entry (those in ``devices``, ``allocated`` or
    ``in_use``); other requested resources (cpu, memory, unknown names) are left out. An entry is
    ``None`` when no device of the resource reports a NUMA node (no preference), ``[]`` when the
    request cannot be met, otherwise every NUMA set that can hold the request, smallest first,
    preferred when its size is the narrowest any set of the resource's devices could fit.
    Bad input (a negative count, a NUMA id the machine lacks) raises :class:`InputError`.
    """
    numa_ids = _check_numa_nodes(numa_nodes)
    tables = _check_devices(devices, frozenset(numa_ids))
    wanted = _check_requests(requests)
    allocated_map = _check_id_map(allocated, "allocated")
    reusable_map = _check_id_map(reusable, "reusable")
    in_use_map = _check_id_map(in_use, "in_use")
    unhealthy_map = _check_id_map(unhealthy, "unhealthy")
    hints: dict[str, list[TopologyHint] | None] = {}
    for resource, count in wanted.items():
        if resource not in tables and resource not in allocated_map and resource not in in_use_map:
            continue
        table = tables.get(resource, {})
        reuse = reusable_map.get(resource, _EMPTY_IDS)
        healthy = frozenset(table).difference(unhealthy_map.get(resource, _EMPTY_IDS))
        available = healthy - in_use_map.get(resource, _EMPTY_IDS) - reuse
        hints[resource] = _resource_hints(table, count, allocated_map.get(resource), available, reuse, numa_ids)
    return hints


def filter_by_affinity(
    devices: Mapping[str, Any],
    resource: str,
    available: Iterable[str],
    hint: TopologyHint | Iterable[int] | None,
) -> tuple[list[str], list[str], list[str]]:
    """Upstream ``filterByAffinity``: split ``available`` into (aligned, unaligned, no-affinity).

    A device on several NUMA nodes goes to the group of its first node in upstream's node order
    (hint nodes, then other nodes, then no NUMA node). Everything is "no-affinity" when the hint
    has no NUMA affinity or no device of the resource reports topology. Each list is in the
    deterministic order described in the module docstring.
    """
    tables = _check_devices(devices, None)
    table = tables.get(resource, {})
    wanted = _check_ids(available, "available")
    return _filter_by_affinity(table, _ordered(wanted, table), _hint_nodes(hint, None))


def devices_to_allocate(
    devices: Mapping[str, Any],
    resource: str,
    count: int,
    hint: TopologyHint | Iterable[int] | None,
    *,
    allocated: Iterable[str] = (),
    reusable: Iterable[str] = (),
    preferred: PreferredAllocation | None = None,
    container_devices: Iterable[str] | None = None,
    unhealthy: Iterable[str] = (),
    numa_nodes: Iterable[int] | None = None,
    pod_uid: str = "",
    container_name: str = "",
) -> set[str]:
    """The devices upstream's ``devicesToAllocate`` gives a container for ``count`` of ``resource``.

    ``devices`` is ``{resource: [(device_id, numa_ids | None)]}``; ``hint`` the container's
    Topology Manager hint (``None`` or a nil affinity: no alignment wanted). ``allocated`` are
    the devices of the resource already in use (upstream's ``allocatedDevices``), ``reusable``
    the devices freed by init containers, taken first. ``preferred`` stands for the plugin's
    ``GetPreferredAllocation(available, must_include, size)``. ``container_devices`` are devices
    this container already holds (a restart): their number must equal ``count`` and nothing new
    is allocated. ``unhealthy`` devices are never picked.

    Order: reusable; then, if the rest fits in the aligned devices, the plugin's preferred
    devices among them, then aligned; otherwise all aligned, the plugin's preferred devices among
    the available ones, unaligned, no-affinity. Raises :class:`DeviceAllocationError` with
    upstream's message when the devices cannot be given, :class:`InputError` on bad input
    (negative count; with ``numa_nodes``, a hint or device naming a NUMA node the machine lacks).
    """
    numa_ids = frozenset(_check_numa_nodes(numa_nodes)) if numa_nodes is not None else None
    tables = _check_devices(devices, numa_ids)
    required = _check_count(count, "count")
    hint_nodes = _hint_nodes(hint, numa_ids)
    table = tables.get(resource)
    healthy = frozenset(table or ()).difference(_check_ids(unhealthy, "unhealthy"))
    previous = None if container_devices is None else _check_ids(container_devices, "container_devices")
    chosen = _devices_to_allocate(
        table=table,
        healthy=healthy,
        in_use=_check_ids(allocated, "allocated"),
        resource=resource,
        required=required,
        hint_nodes=hint_nodes,
        reusable=_check_ids(reusable, "reusable"),
        container_devices=previous,
        preferred=preferred,
        pod_uid=pod_uid,
        container_name=container_name,
    )
    return set(chosen)


def container_device_requests(container: Container, resources: Iterable[str] | None = None) -> dict[str, int]:
    """A container's device counts (upstream ``getContainerDeviceRequest``), optionally only ``resources``.

    Upstream reads the limits (requests equal limits for extended resources); a resource given
    only as a request is read from the request. A count that is not a non-negative integer
    raises :class:`InputError`.
    """
    keep = None if resources is None else set(resources)
    out: dict[str, int] = {}
    for r, n in container.limits_or_requests.items():
        if keep is None or r in keep:
            if type(n) is not int or n < 0:
                _check_count(n, f"{container.name}.limits.{r}")
            out[r] = n
    return out


def pod_device_requests(pod: Pod, resources: Iterable[str] | None = None) -> dict[str, int]:
    """The pod's device counts as upstream ``getPodDeviceRequest`` (``resource.PodLimits``) sums them.

    App containers and restartable init containers (sidecars) run together and add up; each
    regular init container runs next to the sidecars started before it; the pod needs the larger
    of the two. Without sidecars this is max(max of init containers, sum of app containers).
    """
    keep = None if resources is None else set(resources)

    def limits(c: Container) -> dict[str, int]:
        return container_device_requests(c, keep)

    total: dict[str, int] = {}
    for c in pod.containers:
        for r, n in limits(c).items():
            total[r] = total.get(r, 0) + n
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in pod.init_containers:
        own = limits(c)
        if _is_restartable(c):
            for r, n in own.items():
                total[r] = total.get(r, 0) + n
                sidecars[r] = sidecars.get(r, 0) + n
            running = dict(sidecars)
        else:
            running = dict(own)
            for r, n in sidecars.items():
                running[r] = running.get(r, 0) + n
        for r, n in running.items():
            if n > init_peak.get(r, 0):
                init_peak[r] = n
    for r, n in init_peak.items():
        if r not in total or n > total[r]:
            total[r] = n
    return total


def _is_restartable(container: Container) -> bool:
    return getattr(container, "restart_policy", None) == "Always"


# --------------------------------------------------------------------------------------------
# The stateful manager


def _freeze_nested(value: Mapping[str, Any], depth: int, leaf: Callable[[Any], Any]) -> Mapping[str, Any]:
    if depth == 0:
        return MappingProxyType({k: leaf(v) for k, v in value.items()})
    return MappingProxyType({k: _freeze_nested(v, depth - 1, leaf) for k, v in value.items()})


def _without_empty(reusable: Mapping[str, Mapping[str, Iterable[str]]]) -> dict[str, dict[str, Iterable[str]]]:
    """Reuse sets without their empty entries, and without the pods left with none."""
    kept = {uid: {r: ids for r, ids in sets.items() if ids} for uid, sets in reusable.items()}
    return {uid: sets for uid, sets in kept.items() if sets}


def _frozen_topology(topology: Any) -> DeviceTopology:
    return None if topology is None else frozenset(topology)


@dataclass(frozen=True, slots=True)
class DeviceManagerState:
    """A read-only snapshot of everything the device manager knows; equal snapshots, equal state.

    ``devices`` is ``{resource: {device_id: numa_ids | None}}`` in registration order,
    ``healthy`` the healthy device ids per resource, ``allocations``
    ``{pod_uid: {container: {resource: device_ids}}}`` (upstream ``podDevices``) and
    ``reusable`` ``{pod_uid: {resource: device_ids}}`` (upstream ``devicesToReuse``), holding only
    the devices a pod may reuse: upstream gives every pod it allocates for a reuse set, most of them
    empty, and an absent set reads the same to every reader (``reusable.get(uid, {})``), so empty
    sets are left out (most pods ask for no device and then change nothing here).
    """

    numa_nodes: tuple[int, ...]
    devices: Mapping[str, Mapping[str, DeviceTopology]]
    healthy: Mapping[str, frozenset[str]]
    allocations: Mapping[str, Mapping[str, Mapping[str, frozenset[str]]]]
    reusable: Mapping[str, Mapping[str, frozenset[str]]]

    def __post_init__(self) -> None:
        object.__setattr__(self, "numa_nodes", tuple(self.numa_nodes))
        object.__setattr__(self, "devices", _freeze_nested(self.devices, 1, _frozen_topology))
        object.__setattr__(self, "healthy", _freeze_nested(self.healthy, 0, frozenset))
        object.__setattr__(self, "allocations", _freeze_nested(self.allocations, 2, frozenset))
        object.__setattr__(self, "reusable", _freeze_nested(_without_empty(self.reusable), 1, frozenset))

    def _with(
        self,
        allocations: Mapping[str, Mapping[str, Mapping[str, frozenset[str]]]],
        reusable: Mapping[str, Mapping[str, frozenset[str]]],
    ) -> DeviceManagerState:
        # This state with other allocations and reusable sets that are already frozen: what did
        # not change is shared rather than copied again for every pod.
        state = object.__new__(DeviceManagerState)
        for name, value in (
            ("numa_nodes", self.numa_nodes),
            ("devices", self.devices),
            ("healthy", self.healthy),
            ("allocations", allocations),
            ("reusable", reusable),
        ):
            object.__setattr__(state, name, value)
        return state

    def in_use(self, resource: str) -> frozenset[str]:
        """Every device of ``resource`` held by some container (upstream ``allocatedDevices``)."""
        held: set[str] = set()
        for containers in self.allocations.values():
            for resources in containers.values():
                held.update(resources.get(resource, ()))
        return frozenset(held)

    def available(self, resource: str) -> frozenset[str]:
        """Healthy devices of ``resource`` no container holds."""
        return self.healthy.get(resource, _EMPTY_IDS) - self.in_use(resource)

    def container_devices(self, pod_uid: str, container: str, resource: str) -> frozenset[str] | None:
        """The container's devices of ``resource``; ``None`` when none were ever recorded."""
        return self.allocations.get(pod_uid, {}).get(container, {}).get(resource)

    def pod_devices(self, pod_uid: str, resource: str) -> frozenset[str]:
        """The devices of ``resource`` held by any container of the pod."""
        held: set[str] = set()
        for resources in self.allocations.get(pod_uid, {}).values():
            held.update(resources.get(resource, ()))
        return frozenset(held)


def _pod_uid(pod: Pod | str) -> str:
    if isinstance(pod, str):
        return pod
    return pod.uid or pod.key


class DeviceManager:
    """The device manager of one node: registered devices, their health, and who holds which.

    Methods mirror upstream's ``ManagerImpl``: :meth:`get_topology_hints`,
    :meth:`get_pod_topology_hints`, :meth:`allocate` (one container, with the init-container
    reuse rules), and :meth:`release` (upstream's garbage collection of a pod that is gone).
    Every operation either completes or raises and leaves the state as it was; :attr:`state`
    and :meth:`restore` take and put back snapshots.
    """

    def __init__(
        self,
        numa_nodes: Iterable[int],
        devices: Mapping[str, Any] | None = None,
        *,
        unhealthy: Mapping[str, Iterable[str]] | None = None,
        preferred: Mapping[str, PreferredAllocation] | None = None,
    ):
        numa_ids = _check_numa_nodes(numa_nodes)
        tables = _check_devices(devices or {}, frozenset(numa_ids))
        sick = _check_id_map(unhealthy, "unhealthy")
        healthy = {r: frozenset(t).difference(sick.get(r, _EMPTY_IDS)) for r, t in tables.items()}
        self._preferred = dict(preferred or {})
        self._state = DeviceManagerState(numa_ids, tables, healthy, {}, {})
        self._numa_set = (numa_ids, frozenset(numa_ids))  # the NUMA ids and the same as a set
        # available()/in_use() per resource and the resources some container holds, for the
        # allocations and healthy sets they were computed from (immutable, replaced on change,
        # so "is" tells whether they still hold).
        self._views: tuple[Any, Any, dict[tuple[str, str], frozenset[str]]] = (None, None, {})

    @classmethod
    def from_machine(
        cls,
        machine: Machine,
        resources: Mapping[str, Iterable[str]],
        *,
        unhealthy: Mapping[str, Iterable[str]] | None = None,
        preferred: Mapping[str, PreferredAllocation] | None = None,
    ) -> DeviceManager:
        """A manager for ``machine`` whose resources are machine devices named by address (or name).

        ``resources`` maps a resource name (``nvidia.com/gpu``) to the PCI addresses or names of
        the devices that advertise it; each device's NUMA node comes from the machine model.
        """
        by_key: dict[str, Any] = {}
        for dev in machine.devices:
            by_key.setdefault(dev.address, dev)
            if dev.name:
                by_key.setdefault(dev.name, dev)
        devices: dict[str, list[tuple[str, DeviceTopology]]] = {}
        for resource, keys in resources.items():
            entries = []
            for key in _check_ids(keys, f"resources[{resource}]"):
                dev = by_key.get(key)
                if dev is None:
                    raise InputError(f"the machine has no device {key!r}", field=f"resources[{resource}]")
                entries.append((key, None if dev.numa_id is None else frozenset([dev.numa_id])))
            devices[resource] = sorted(entries)
        return cls([n.id for n in machine.numa_nodes], devices, unhealthy=unhealthy, preferred=preferred)

    # ---- views

    @property
    def numa_nodes(self) -> tuple[int, ...]:
        """The machine's NUMA ids."""
        return self._state.numa_nodes

    @property
    def state(self) -> DeviceManagerState:
        """A snapshot of the whole state."""
        return self._state

    @property
    def resources(self) -> tuple[str, ...]:
        """The registered device-plugin resources."""
        return tuple(self._state.devices)

    def restore(self, state: DeviceManagerState) -> None:
        """Put back a snapshot taken from :attr:`state`."""
        if not isinstance(state, DeviceManagerState):
            raise InputError(f"expected a DeviceManagerState, got {type(state).__name__}", field="state")
        self._state = state

    def has_preferred_allocation(self, resource: str) -> bool:
        """Whether the resource's plugin answers ``GetPreferredAllocation`` (then which devices a
        container gets may depend on how many it asks for, beyond taking them in order)."""
        return resource in self._preferred

    def pick(self, resource: str, count: int, numa_nodes: Iterable[int]) -> list[str]:
        """The devices of ``resource`` a new container asking for ``count`` of them would be given
        under a Topology Manager hint naming ``numa_nodes`` (upstream ``devicesToAllocate``, the
        plugin's preferred allocation included), in the order taken; the state is unchanged.
        Raises :class:`DeviceAllocationError` where upstream would."""
        s = self._state
        return _devices_to_allocate(
            table=s.devices.get(resource),
            healthy=s.healthy.get(resource, _EMPTY_IDS),
            in_use=self.in_use(resource),
            resource=resource,
            required=_check_count(count, "count"),
            hint_nodes=frozenset(numa_nodes),
            reusable=_EMPTY_IDS,
            container_devices=None,
            preferred=self._preferred.get(resource),
            pod_uid="",
            container_name="",
        )

    def is_device_resource(self, resource: str) -> bool:
        """Upstream ``isDevicePluginResource``: registered, or held by some container."""
        s = self._state
        if resource in s.devices:
            return True
        known = self._views_of(s)
        held = known.get(("held", ""))
        if held is None:
            held = known["held", ""] = frozenset(
                r for containers in s.allocations.values() for devices in containers.values()
                for r, ids in devices.items() if ids)
        return resource in held

    def available(self, resource: str) -> frozenset[str]:
        """Healthy devices of ``resource`` no container holds."""
        return self._view("available", resource)

    def in_use(self, resource: str) -> frozenset[str]:
        """Devices of ``resource`` some container holds."""
        return self._view("in_use", resource)

    def _views_of(self, s: DeviceManagerState) -> dict[tuple[str, str], frozenset[str]]:
        """The memo of views for the state's allocations and healthy sets (emptied when they changed)."""
        allocations, healthy, known = self._views
        if allocations is not s.allocations or healthy is not s.healthy:
            known = {}
            self._views = (s.allocations, s.healthy, known)
        return known

    def _view(self, kind: str, resource: str) -> frozenset[str]:
        s = self._state
        known = self._views_of(s)
        ids = known.get((kind, resource))
        if ids is None:
            ids = known[kind, resource] = s.available(resource) if kind == "available" else s.in_use(resource)
        return ids

    def container_devices(self, pod: Pod | str, container: str) -> dict[str, frozenset[str]]:
        """The devices each resource gave this container."""
        return dict(self._state.allocations.get(_pod_uid(pod), {}).get(container, {}))

    def pod_devices(self, pod: Pod | str) -> dict[str, dict[str, frozenset[str]]]:
        """``{container: {resource: devices}}`` for the pod."""
        return {c: dict(r) for c, r in self._state.allocations.get(_pod_uid(pod), {}).items()}

    # ---- device plugin updates

    def update_devices(self, resource: str, devices: Any, *, unhealthy: Iterable[str] = ()) -> None:
        """A plugin's ListAndWatch update: ``resource`` now has exactly these devices.

        Allocations are kept, as upstream keeps them; a device that vanished or turned unhealthy
        stays held by its container until the pod is released.
        """
        if not isinstance(resource, str) or not resource:
            raise InputError(f"{resource!r} is not a resource name", field="resource")
        table = _check_device_table(devices, frozenset(self.numa_nodes), f"devices[{resource}]")
        healthy = frozenset(table).difference(_check_ids(unhealthy, "unhealthy"))
        s = self._state
        self._state = DeviceManagerState(
            s.numa_nodes, {**s.devices, resource: table}, {**s.healthy, resource: healthy}, s.allocations, s.reusable
        )

    # ---- hints

    def _device_requests(self, requests: Mapping[str, int]) -> dict[str, int]:
        if not self._state.devices and not self._state.allocations:
            return {}  # no plugin registered and nothing held: no resource is a device resource
        return {r: n for r, n in requests.items() if self.is_device_resource(r)}

    def _hints_for(
        self,
        requests: Mapping[str, int],
        allocated_of: Callable[[str], frozenset[str] | None],
        reuse: Mapping[str, frozenset[str]],
    ) -> dict[str, list[TopologyHint] | None]:
        s = self._state
        hints: dict[str, list[TopologyHint] | None] = {}
        for resource, count in self._device_requests(requests).items():
            table = s.devices.get(resource, {})
            reusable = reuse.get(resource, _EMPTY_IDS)
            available = s.available(resource) - reusable
            hints[resource] = _resource_hints(table, count, allocated_of(resource), available, reusable, s.numa_nodes)
        return hints

    def _masks_for(
        self,
        requests: Mapping[str, int],
        allocated_of: Callable[[str], frozenset[str] | None],
        reuse: Mapping[str, frozenset[str]],
        single_numa_only: bool,
    ) -> dict[str, list[MaskHint] | None]:
        s = self._state
        hints: dict[str, list[MaskHint] | None] = {}
        for resource, count in self._device_requests(requests).items():
            table = s.devices.get(resource, {})
            reusable = reuse.get(resource, _EMPTY_IDS)
            available = s.available(resource) - reusable
            hints[resource] = _resource_masks(
                table, count, allocated_of(resource), available, reusable, s.numa_nodes, single_numa_only
            )
        return hints

    def topology_masks(
        self, pod: Pod, container: Container | str, *, single_numa_only: bool = False
    ) -> dict[str, list[MaskHint] | None]:
        """:meth:`get_topology_hints` as ``(NUMA mask, preferred)`` pairs (bit n = NUMA node n), fast.

        The same hints in the same order. With ``single_numa_only`` only those upstream's
        single-numa-node policy keeps (preferred, one NUMA node wide) are listed, so a merge
        under that policy decides exactly as on the full lists.
        """
        cont = _resolve(pod, container)
        uid = _pod_uid(pod)
        requests = container_device_requests(cont)
        if not requests:
            return {}
        return self._masks_for(
            requests,
            lambda r: self._state.container_devices(uid, cont.name, r),
            self._state.reusable.get(uid, {}),
            single_numa_only,
        )

    def pod_topology_masks(self, pod: Pod, *, single_numa_only: bool = False) -> dict[str, list[MaskHint] | None]:
        """:meth:`get_pod_topology_hints` as ``(NUMA mask, preferred)`` pairs (see :meth:`topology_masks`)."""
        uid = _pod_uid(pod)
        requests = pod_device_requests(pod)
        if not requests:
            return {}
        return self._masks_for(requests, lambda r: self._state.pod_devices(uid, r), {}, single_numa_only)

    def get_topology_hints(self, pod: Pod, container: Container | str) -> dict[str, list[TopologyHint] | None]:
        """Upstream ``GetTopologyHints`` for one container (container scope).

        Devices freed by the pod's earlier init containers count as reusable; devices already
        given to this container regenerate their own hints.
        """
        cont = _resolve(pod, container)
        uid = _pod_uid(pod)
        requests = container_device_requests(cont)
        return self._hints_for(
            requests,
            lambda r: self._state.container_devices(uid, cont.name, r),
            self._state.reusable.get(uid, {}),
        )

    def get_pod_topology_hints(self, pod: Pod) -> dict[str, list[TopologyHint] | None]:
        """Upstream ``GetPodTopologyHints`` (pod scope), from the pod's aggregated device request."""
        uid = _pod_uid(pod)
        return self._hints_for(pod_device_requests(pod), lambda r: self._state.pod_devices(uid, r), {})

    # ---- allocation

    def allocate(
        self, pod: Pod, container: Container | str, hint: TopologyHint | Iterable[int] | None = None
    ) -> dict[str, frozenset[str]]:
        """Upstream ``Allocate`` for one container under its Topology Manager ``hint``.

        Containers must be allocated in the kubelet's order (init containers, then app
        containers). A regular init container's devices become reusable by the containers after
        it; a sidecar's and an app container's devices are taken out of the reusable set.
        Returns the container's devices per resource. On any error the state is unchanged.
        """
        nodes = self._state.numa_nodes
        if nodes != self._numa_set[0]:  # a restored state may come from another machine
            self._numa_set = (nodes, frozenset(nodes))
        hint_nodes = _hint_nodes(hint, self._numa_set[1])
        cont = _resolve(pod, container)
        uid = _pod_uid(pod)
        requests = self._device_requests(container_device_requests(cont))
        s = self._state
        # Only this container's devices and this pod's reusable set can change.
        pod_allocations = s.allocations.get(uid, {})
        if not requests and cont.name not in pod_allocations:
            return {}  # nothing to allocate and nothing held: nothing changes (no empty reuse set is kept)
        own = dict(pod_allocations.get(cont.name, {}))
        reuse = dict(s.reusable.get(uid, {}))
        chose = False
        for resource, count in requests.items():
            chosen = _devices_to_allocate(
                table=s.devices.get(resource),
                healthy=s.healthy.get(resource, _EMPTY_IDS),
                in_use=s.in_use(resource),
                resource=resource,
                required=count,
                hint_nodes=hint_nodes,
                reusable=reuse.get(resource, _EMPTY_IDS),
                container_devices=own.get(resource),
                preferred=self._preferred.get(resource),
                pod_uid=uid,
                container_name=cont.name,
            )
            if chosen:
                own[resource] = frozenset(chosen)
                chose = True
        init = next((c for c in pod.init_containers if c.name == cont.name), None)
        for resource, held in own.items():
            if init is not None and not _is_restartable(init):
                reuse[resource] = reuse.get(resource, _EMPTY_IDS) | held
            else:
                reuse[resource] = reuse.get(resource, _EMPTY_IDS) - held
        allocations = s.allocations
        if chose:
            containers = dict(pod_allocations)
            containers[cont.name] = MappingProxyType(dict(own))
            allocations = MappingProxyType({**s.allocations, uid: MappingProxyType(containers)})
        reuse = {r: ids for r, ids in reuse.items() if ids}
        reusable = s.reusable
        if reuse:
            reusable = MappingProxyType({**reusable, uid: MappingProxyType(reuse)})
        elif uid in reusable:
            reusable = MappingProxyType({k: v for k, v in reusable.items() if k != uid})
        self._state = s._with(allocations, reusable)
        return own

    def allocate_pod(
        self, pod: Pod, hint: TopologyHint | Mapping[str, TopologyHint | None] | None = None
    ) -> dict[str, dict[str, frozenset[str]]]:
        """Allocate every container of the pod in the kubelet's order, all or nothing.

        ``hint`` is one hint for every container (pod scope) or ``{container name: hint}``.
        """
        before = self._state
        try:
            for c in pod.all_containers:
                own_hint = hint.get(c.name) if isinstance(hint, Mapping) else hint
                self.allocate(pod, c, own_hint)
        except ToposchedError:
            self._state = before
            raise
        return self.pod_devices(pod)

    def reassign(self, pod: Pod | str, container: str, devices: Mapping[str, Iterable[str]]) -> None:
        """Give a container these device ids instead of the ones it holds (an agent enforces them).

        Per resource the count stays the same and every id must be healthy and held by no other
        container; otherwise InputError names the resource, and nothing changes.
        """
        uid = _pod_uid(pod)
        s = self._state
        containers = dict(s.allocations.get(uid, {}))
        own = dict(containers.get(container, {}))
        for resource, ids in devices.items():
            ids = frozenset(ids)
            held = own.get(resource, _EMPTY_IDS)
            where = f"container {container} of pod {uid}"
            if len(ids) != len(held):
                raise InputError(f"{len(ids)} {resource} given where the kubelet allocated {len(held)}",
                                 field=f"devices.{resource}", source=where)
            unknown = ids - s.healthy.get(resource, _EMPTY_IDS)
            if unknown:
                raise InputError(f"{resource} {sorted(unknown)[0]} is not a healthy device of the node",
                                 field=f"devices.{resource}", source=where)
            taken = ids & (s.in_use(resource) - held)
            if taken:
                raise InputError(f"{resource} {sorted(taken)[0]} is held by another container",
                                 field=f"devices.{resource}", source=where)
            own[resource] = ids
        containers[container] = MappingProxyType(own)
        self._state = s._with(MappingProxyType({**s.allocations, uid: MappingProxyType(containers)}), s.reusable)

    def release(self, pod: Pod | str) -> None:
        """Free every device the pod holds and forget its reusable set (a pod that is gone)."""
        uid = _pod_uid(pod)
        s = self._state
        if uid not in s.allocations and uid not in s.reusable:
            return
        # A map that does not change stays the same object: the views memoised on it (free and
        # in-use devices, the node's availability) hold, and most pods hold no device.
        allocations = s.allocations
        if uid in allocations:
            allocations = MappingProxyType({k: v for k, v in allocations.items() if k != uid})
        reusable = s.reusable
        if uid in reusable:
            reusable = MappingProxyType({k: v for k, v in reusable.items() if k != uid})
        self._state = s._with(allocations, reusable)


def _resolve(pod: Pod, container: Container | str) -> Container:
    if isinstance(container, str):
        try:
            return pod.container(container)
        except KeyError:
            raise InputError(
                f"the pod has no container {container!r}", field="container", source=f"pod {pod.key}"
            ) from None
    return container
