"""Choosing the exact device ids a pod gets on one node, GPUs and RDMA NICs together.

:func:`choose_devices` is pure: it reads a :class:`~toposched.devices.inventory.DeviceInventory`,
the ids that are free, the NUMA nodes the pod may use and the pod's
:class:`DeviceScope` (read from its annotations by :mod:`toposched.scheduler.intent`), and returns a frozen :class:`DeviceChoice`:
ids per resource, the locality level the jointly placed devices achieve and the NUMA nodes
used, or the reason a node cannot take the request.

Semantics (docs/devices/inventory.md has the examples):

* Every chosen device is free and sits on an allowed NUMA node; a device whose NUMA node is
  unknown fits any NUMA set, as in Koordinator's deviceshare filter.
* The *joint group* is the requested resources of the scope's device types (Koordinator's
  ``deviceTypes``, the first type primary), or every requested resource when the scope names
  none or there is no scope (GPU resources then lead). Levels, tightest first:
  ``pcie`` -- for one resource, all its devices under one PCIe switch; for several, the set of
  switches of every secondary resource's devices equals the primary's, as Koordinator's
  ``validateJointAllocation`` compares PCIe ids (so 8 GPUs and 4 NICs over 4 switches, one NIC
  per GPU pair, are ``pcie``); ``numa`` -- the same with NUMA nodes; ``node`` -- anything.
  A required scope refuses choices looser than it; a preferred scope (and no scope) takes the
  tightest level any choice reaches. Unlike Koordinator, the secondary count is never raised
  to the number of the primary's switches: extended-resource requests are exact.
* Within a level, choices are ranked to pack: fewest NUMA nodes, fewest switches (a device
  directly on a root port counts as its own), the fewest free devices left in the switches
  touched, then in the NUMA nodes touched (the tightest fit, leaving whole switches and NUMA
  nodes free for larger requests), then the lowest ids (inventory order).
* Resources outside the joint group are packed the same way, each on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import combinations, combinations_with_replacement
from types import MappingProxyType
from typing import Any

from toposched.devices.inventory import LEVEL_NODE, LEVEL_NUMA, LEVEL_PCIE, LEVELS, DeviceInventory, NodeDevice
from toposched.errors import InputError
from toposched.topology.model import DeviceKind

__all__ = ["DEVICE_TYPE_KINDS", "DeviceChoice", "DeviceScope", "choose_devices"]

#: Koordinator's device types (``deviceTypes`` of ``device-joint-allocate``) as device kinds.
DEVICE_TYPE_KINDS: Mapping[str, frozenset[DeviceKind]] = MappingProxyType({
    "gpu": frozenset({DeviceKind.GPU}),
    "rdma": frozenset({DeviceKind.INFINIBAND, DeviceKind.NIC}),
    "fpga": frozenset({DeviceKind.ACCELERATOR}),
})



@dataclass(frozen=True, slots=True)
class DeviceScope:
    """Where a pod's devices must (``required``) or should sit together.

    ``scope`` is ``pcie`` (under one PCIe switch), ``numa`` (on one NUMA node) or ``node`` (anywhere
    on the node). ``device_types`` names Koordinator device types (``gpu``, ``rdma``, ``fpga``)
    grouped together, the first being the primary one; empty means every device the pod asks for.
    ``source`` names the annotation it was read from.
    """

    scope: str
    required: bool
    device_types: tuple[str, ...] = ()
    source: str = ""


_RANK = {level: i for i, level in enumerate(LEVELS)}
_EMPTY: Mapping[str, tuple[str, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class DeviceChoice:
    """The devices chosen for a request on one node, or why there are none.

    ``ids`` maps each requested resource (count > 0) to its device ids in inventory order;
    ``level`` is the locality the joint group achieves (``pcie``, ``numa`` or ``node``; None when
    refused or when the joint group is empty); ``joint`` lists the joint group's resources, primary
    first; ``numa_nodes`` are the known NUMA nodes of all chosen devices. ``reason`` is empty
    exactly when the choice stands.
    """

    ids: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _EMPTY)
    level: str | None = None
    joint: tuple[str, ...] = ()
    numa_nodes: frozenset[int] = frozenset()
    reason: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "ids", MappingProxyType(dict(self.ids)))

    @property
    def ok(self) -> bool:
        """True when devices were chosen (``reason`` is empty)."""
        return not self.reason

    @property
    def all_ids(self) -> frozenset[str]:
        """Every chosen id, whatever its resource."""
        return frozenset(i for ids in self.ids.values() for i in ids)


def _refusal(reason: str, joint: tuple[str, ...] = ()) -> DeviceChoice:
    return DeviceChoice(reason=reason, joint=joint)


# ---- the entry point -----------------------------------------------------------------------


def choose_devices(
    inventory: DeviceInventory,
    request: Mapping[str, int],
    free: Mapping[str, Iterable[str]] | None = None,
    *,
    numa_nodes: Iterable[int] | None = None,
    scope: DeviceScope | None = None,
) -> DeviceChoice:
    """Choose device ids for ``request`` (``{resource: count}``) on the node ``inventory`` describes.

    ``free`` maps a resource to the ids not in use (None: every device is free; a resource
    missing from a given mapping has none free). ``numa_nodes`` is the pod's NUMA set from the
    Topology Manager decision (None: any). ``scope`` is the pod's device scope (None: joint
    placement of every requested resource, preferred). Deterministic: the same inputs give the
    same choice. A request the node cannot meet -- a negative count, a resource the node has no
    device of, too few free devices on the allowed NUMA nodes, no choice within a required
    scope -- gives a :class:`DeviceChoice` with nothing chosen and a ``reason``. Malformed
    arguments (a count that is not an integer, an id ``free`` names that is not a device of
    that resource, a NUMA id that is not a non-negative integer, an unknown scope or device
    type) raise :class:`InputError`.
    """
    counts = _check_request(request)
    allowed = _check_numa_nodes(numa_nodes)
    free_ids = _check_free(inventory, free)
    scope_level, required, device_types = _check_scope(scope)

    problems = [f"{r}: a device count cannot be negative ({k})" for r, k in counts.items() if k < 0]
    problems += [f"the node has no {r} devices" for r, k in counts.items() if k > 0 and not inventory.of_resource(r)]
    if problems:
        return _refusal("; ".join(problems))
    wanted = {r: k for r, k in counts.items() if k > 0}
    where = _where(allowed)
    pools = {r: _Pool.of(inventory, r, free_ids, allowed) for r in wanted}
    short = [f"{len(pools[r].devices)} free {r}{where}, {k} requested" for r, k in wanted.items()
             if len(pools[r].devices) < k]
    if short:
        return _refusal("; ".join(short))

    group = _joint_group(inventory, wanted, device_types)
    if len(group) >= 2:
        levels = LEVELS[: _RANK[scope_level] + 1] if required else LEVELS
        searches = {LEVEL_PCIE: _joint_pcie, LEVEL_NUMA: _joint_numa, LEVEL_NODE: _joint_node}
        chosen = None
        for level in levels:
            chosen = searches[level]([pools[r] for r in group], [wanted[r] for r in group])
            if chosen is not None:
                break
        if chosen is None:
            return _refusal(_joint_reason(scope_level, group, wanted, where), group)
    else:
        chosen = {r: _pick_single(pools[r], wanted[r]) for r in group}
    level = _level_of(group, chosen) if group else None
    if required and level is not None and _RANK[level] > _RANK[scope_level]:
        return _refusal(_single_reason(scope_level, group[0], wanted[group[0]], where), group)
    for r in wanted:
        if r not in chosen:
            chosen[r] = _pick_single(pools[r], wanted[r])
    ids = {r: tuple(d.id for d in sorted(chosen[r], key=lambda d: inventory.position(d.id))) for r in sorted(wanted)}
    used = frozenset(d.numa_id for devs in chosen.values() for d in devs if d.numa_id is not None)
    return DeviceChoice(ids=ids, level=level, joint=group, numa_nodes=used)


# ---- checking the arguments ----------------------------------------------------------------


def _check_request(request: Any) -> dict[str, int]:
    if not isinstance(request, Mapping):
        raise InputError(f"expected {{resource: count}}, got {type(request).__name__}", field="request",
                         source="device request")
    out = {}
    for resource, count in request.items():
        if not isinstance(resource, str) or not resource:
            raise InputError(f"{resource!r} is not a resource name", field="request", source="device request")
        if isinstance(count, bool) or not isinstance(count, int):
            raise InputError(f"{count!r} is not an integer device count", field=f"request[{resource}]",
                             source="device request")
        out[resource] = count
    return out


def _check_numa_nodes(numa_nodes: Iterable[int] | None) -> frozenset[int] | None:
    if numa_nodes is None:
        return None
    if isinstance(numa_nodes, (str, bytes)) or not isinstance(numa_nodes, Iterable):
        raise InputError(f"expected NUMA node ids, got {numa_nodes!r}", field="numa_nodes", source="device request")
    ids = frozenset(numa_nodes)
    for n in ids:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InputError(f"{n!r} is not a NUMA node id", field="numa_nodes", source="device request")
    return ids


def _check_free(inventory: DeviceInventory, free: Mapping[str, Iterable[str]] | None) -> dict[str, set[str]] | None:
    if free is None:
        return None
    if not isinstance(free, Mapping):
        raise InputError(f"expected {{resource: free ids}}, got {type(free).__name__}", field="free",
                         source=inventory.source)
    out: dict[str, set[str]] = {}
    for resource, ids in free.items():
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise InputError(f"expected a collection of device ids, got {ids!r}", field=f"free[{resource}]",
                             source=inventory.source)
        known = out.setdefault(resource, set())
        for device_id in ids:
            dev = inventory.get(device_id) if isinstance(device_id, str) else None
            if dev is None or dev.resource != resource:
                raise InputError(f"{device_id!r} is not a {resource} device of the node", field=f"free[{resource}]",
                                 source=inventory.source)
            known.add(device_id)
    return out


def _check_scope(scope: Any) -> tuple[str, bool, tuple[str, ...]]:
    if scope is None:
        return LEVEL_PCIE, False, ()
    level, required, types = scope.scope, scope.required, tuple(scope.device_types)
    if level not in _RANK:
        raise InputError(f"device scope {level!r} is not one of {', '.join(LEVELS)}", field="scope",
                         source="device request")
    for t in types:
        if t not in DEVICE_TYPE_KINDS:
            raise InputError(f"device type {t!r} is not one of {', '.join(DEVICE_TYPE_KINDS)}",
                             field="scope.device_types", source="device request")
    return level, bool(required), types


def _where(allowed: frozenset[int] | None) -> str:
    if allowed is None:
        return ""
    if not allowed:
        return " on no NUMA node"
    if len(allowed) == 1:
        return f" on NUMA node {next(iter(allowed))}"
    return f" on NUMA nodes {','.join(str(n) for n in sorted(allowed))}"


def _joint_group(
    inventory: DeviceInventory, wanted: Mapping[str, int], device_types: tuple[str, ...]
) -> tuple[str, ...]:
    """The requested resources placed together, primary first."""
    kind = {r: inventory.of_resource(r)[0].kind for r in wanted}
    if not device_types:
        return tuple(sorted(wanted, key=lambda r: (kind[r] != DeviceKind.GPU, r)))
    group: list[str] = []
    for t in device_types:
        group += [r for r in sorted(wanted) if r not in group and kind[r] in DEVICE_TYPE_KINDS[t]]
    return tuple(group)


def _joint_reason(level: str, group: tuple[str, ...], wanted: Mapping[str, int], where: str) -> str:
    primary = f"{wanted[group[0]]} {group[0]}"
    others = " and ".join(f"a free {r}" if wanted[r] == 1 else f"{wanted[r]} free {r}" for r in group[1:])
    place = "under the same PCIe switch" if level == LEVEL_PCIE else "on the same NUMA node"
    return f"no {primary}{where} with {others} {place}"


def _single_reason(level: str, resource: str, count: int, where: str) -> str:
    place = "under one PCIe switch" if level == LEVEL_PCIE else "on one NUMA node"
    return f"no {count} free {resource} {place}{where}"


# ---- the free devices of one resource ------------------------------------------------------


class _Domain:
    """The free devices of one resource on one NUMA node (or of unknown NUMA node), by switch."""

    __slots__ = ("numa_id", "devices", "groups", "sizes", "loose", "_plans")

    def __init__(self, numa_id: int | None):
        self.numa_id = numa_id
        self.devices: list[NodeDevice] = []
        self.groups: list[list[NodeDevice]] = []  # per switch, switches in inventory order
        self.sizes: list[int] = []
        self.loose: list[NodeDevice] = []  # devices directly on a root port (no switch)
        self._plans: dict[int, tuple[int, int, tuple[int, ...], int]] = {}

    def plan(self, count: int) -> tuple[int, int, tuple[int, ...], int]:
        """The best way to take ``count`` devices: (switches touched, free left in them, switches, from loose).

        Fewest switches touched (a device on a root port counts as one), then the fewest free
        devices left in them, then the switches first in inventory order. Every set of switches
        is tried (one per multiset of sizes), devices on root ports filling up.
        """
        if count in self._plans:
            return self._plans[count]
        best: tuple[int, int, tuple[int, ...], int] | None = None
        sizes = self.sizes
        by_size: dict[int, list[int]] = {}
        for i, n in enumerate(sizes):
            by_size.setdefault(n, []).append(i)
        for size in range(0, min(len(sizes), count) + 1):
            if best is not None and size > best[0]:
                break  # touching more switches than the best choice touches in all cannot win
            for subset in _earliest_of_each_kind(list(by_size.values()), size):
                in_switches = sum(sizes[i] for i in subset)
                from_loose = max(0, count - in_switches)
                if from_loose > len(self.loose):
                    continue
                if from_loose == 0 and subset and in_switches - min(sizes[i] for i in subset) >= count:
                    continue  # a switch the request does not need
                key = (size + from_loose, in_switches - (count - from_loose), subset)
                if best is None or key < best[:3]:
                    best = (*key, from_loose)
        assert best is not None, "a domain is only asked for devices it holds"
        self._plans[count] = best
        return best

    def take(self, count: int, plan: tuple[int, int, tuple[int, ...], int], position: Any) -> list[NodeDevice]:
        """The devices a :meth:`plan` names: one per switch first, unless whole switches are taken."""
        _, _, subset, from_loose = plan
        groups = [self.groups[i] for i in subset]
        if from_loose:
            return [d for g in groups for d in g] + self.loose[:from_loose]
        return _fill(groups, count, position)


class _Pool:
    """The free devices of one resource on the allowed NUMA nodes, grouped by NUMA node and switch."""

    __slots__ = ("resource", "devices", "domains", "by_switch", "numa_sizes", "position")

    def __init__(self, resource: str, devices: list[NodeDevice], position: Any):
        self.resource = resource
        self.position = position
        self.devices = devices
        self.domains: dict[int | None, _Domain] = {}
        self.by_switch: dict[str, list[NodeDevice]] = {}
        switches: dict[int | None, dict[str, list[NodeDevice]]] = {}
        for d in devices:
            domain = self.domains.get(d.numa_id)
            if domain is None:
                domain = self.domains[d.numa_id] = _Domain(d.numa_id)
            domain.devices.append(d)
            if d.switch is None:
                domain.loose.append(d)
            else:
                self.by_switch.setdefault(d.switch, []).append(d)
                switches.setdefault(d.numa_id, {}).setdefault(d.switch, []).append(d)
        for numa_id, groups in switches.items():
            self.domains[numa_id].groups = list(groups.values())
            self.domains[numa_id].sizes = [len(g) for g in groups.values()]
        self.numa_sizes = {n: len(dom.devices) for n, dom in self.domains.items()}

    @classmethod
    def of(cls, inventory: DeviceInventory, resource: str, free: dict[str, set[str]] | None,
           allowed: frozenset[int] | None) -> _Pool:
        """The devices of ``resource`` that are free (all when ``free`` is None) and on an allowed NUMA node."""
        free_here = None if free is None else free.get(resource, set())
        devices = [
            d for d in inventory.of_resource(resource)
            if (free_here is None or d.id in free_here)
            and (allowed is None or d.numa_id is None or d.numa_id in allowed)
        ]
        return cls(resource, devices, inventory.position)


def _earliest_of_each_kind(kinds: list[list[int]], size: int) -> Iterator[tuple[int, ...]]:
    """Every way to pick ``size`` items from groups of interchangeable ones, once per multiset of groups.

    ``kinds`` lists item indices, interchangeable items together, each list ascending. For every
    multiset of kinds, the earliest items of each kind are yielded, sorted: of all sets with
    those kinds, the one first in inventory order.
    """
    for combo in combinations_with_replacement(range(len(kinds)), size):
        picked: list[int] = []
        for kind in set(combo):
            wanted = combo.count(kind)
            if wanted > len(kinds[kind]):
                break
            picked += kinds[kind][:wanted]
        else:
            yield tuple(sorted(picked))


def _fill(groups: list[list[NodeDevice]], count: int, position: Any) -> list[NodeDevice]:
    """``count`` devices from ``groups``, at least one from each: every group's first, then the lowest."""
    chosen = [g[0] for g in groups]
    rest = sorted((d for g in groups for d in g[1:]), key=lambda d: position(d.id))
    return chosen + rest[: count - len(groups)]


def _spread(sizes: list[int], count: int) -> list[int]:
    """How many of ``count`` to take from each of several domains: one each, then the smallest filled first.

    Filling the domains with the fewest free devices first leaves the largest free block whole.
    """
    taken = [1] * len(sizes)
    left = count - len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: sizes[i]):
        more = min(sizes[i] - 1, left)
        taken[i] += more
        left -= more
    return taken


# ---- one resource --------------------------------------------------------------------------


def _pick_single(pool: _Pool, count: int) -> list[NodeDevice]:
    """The best ``count`` devices of one resource (the pool holds at least ``count``).

    Ranked by: level (one switch, one known NUMA node, else), NUMA domains touched, switches
    touched, free devices left in those switches, then in those NUMA domains; ties go to the
    domains and switches first in inventory order.
    """
    if count == 0:
        return []
    best: tuple[Any, ...] | None = None
    for domain in pool.domains.values():
        if len(domain.devices) < count:
            continue
        plan = domain.plan(count)
        rank = 0 if plan[0] == 1 else 1 if domain.numa_id is not None else 2
        key = (rank, 1, plan[0], plan[1], len(domain.devices) - count)
        if best is None or key < best[0]:
            best = (key, [(domain, count, plan)])
    domains = list(pool.domains.values())
    for size in range(2, len(domains) + 1):
        if best is not None:
            break
        for subset in combinations(domains, size):
            sizes = [len(d.devices) for d in subset]
            total = sum(sizes)
            if total < count or total - min(sizes) >= count:
                continue  # too few, or a NUMA domain the request does not need
            parts = [(d, take, d.plan(take)) for d, take in zip(subset, _spread(sizes, count))]
            key = (2, size, sum(p[2][0] for p in parts), sum(p[2][1] for p in parts), total - count)
            if best is None or key < best[0]:
                best = (key, parts)
    assert best is not None, "the pool holds at least the requested devices"
    return [d for domain, take, plan in best[1] for d in domain.take(take, plan, pool.position)]


# ---- resources placed together -------------------------------------------------------------


def _joint_pcie(pools: list[_Pool], counts: list[int]) -> dict[str, list[NodeDevice]] | None:
    """Every resource on the same set of switches, each switch holding at least one of each.

    Ranked by NUMA domains touched, switches touched, free devices left in those switches, then
    in those NUMA domains; ties go to the switches first in inventory order. Sets of switches on
    one NUMA domain are tried first: when one fits, no wider set can rank better.
    """
    common = set(pools[0].by_switch)
    for pool in pools[1:]:
        common &= set(pool.by_switch)
    position = pools[0].position
    switches = sorted(common, key=lambda s: position(pools[0].by_switch[s][0].id))
    domains: dict[frozenset[int | None], list[int]] = {}
    for i, s in enumerate(switches):
        domains.setdefault(frozenset(d.numa_id for p in pools for d in p.by_switch[s]), []).append(i)
    one_domain = [members for nodes, members in domains.items() if len(nodes) == 1]
    best = None
    for members in one_domain:
        found = _best_switches(pools, counts, switches, members)
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    if best is None:
        best = _best_switches(pools, counts, switches, list(range(len(switches))))
    if best is None:
        return None
    return {p.resource: _fill([p.by_switch[switches[i]] for i in best[1]], k, position)
            for p, k in zip(pools, counts)}


def _best_switches(pools: list[_Pool], counts: list[int], switches: list[str],
                   members: list[int]) -> tuple[tuple[Any, ...], tuple[int, ...]] | None:
    """The best set of the switches ``members`` (indices into ``switches``) for :func:`_joint_pcie`."""
    sizes = [{i: len(p.by_switch[switches[i]]) for i in members} for p in pools]
    numa = {i: frozenset(d.numa_id for p in pools for d in p.by_switch[switches[i]]) for i in members}
    kinds: dict[tuple[Any, ...], list[int]] = {}
    for i in members:  # switches with the same free counts on the same NUMA nodes are interchangeable
        kinds.setdefault((tuple(s[i] for s in sizes), numa[i]), []).append(i)
    total = sum(counts)
    best: tuple[tuple[Any, ...], tuple[int, ...]] | None = None
    for size in range(1, min(min(counts), len(members)) + 1):
        if best is not None and best[0][0] == 1:
            break  # more switches on one NUMA domain cannot beat fewer
        if any(sum(sorted(s.values(), reverse=True)[:size]) < k for s, k in zip(sizes, counts)):
            continue
        for subset in _earliest_of_each_kind(list(kinds.values()), size):
            held = [sum(s[i] for i in subset) for s in sizes]
            if any(n < k for n, k in zip(held, counts)):
                continue
            nodes = frozenset().union(*(numa[i] for i in subset))
            numa_left = sum(sum(p.numa_sizes.get(n, 0) for n in nodes) for p in pools) - total
            key = (len(nodes), size, sum(held) - total, numa_left, subset)
            if best is None or key < best[0]:
                best = (key, subset)
    return best


def _joint_numa(pools: list[_Pool], counts: list[int]) -> dict[str, list[NodeDevice]] | None:
    """Every resource on the same set of NUMA nodes, each node holding at least one of each.

    Fewest NUMA nodes first, then switches touched, free devices left in them, then in the NUMA
    nodes; ties go to the NUMA nodes first in inventory order.
    """
    common = {n for n in pools[0].domains if n is not None}
    for pool in pools[1:]:
        common &= set(pool.domains)
    nodes = sorted(common, key=lambda n: pools[0].position(pools[0].domains[n].devices[0].id))
    for size in range(1, min(min(counts), len(nodes)) + 1):
        best: tuple[tuple[int, ...], list[list[tuple[_Domain, int, Any]]]] | None = None
        for subset in combinations(nodes, size):
            sizes = [[len(p.domains[n].devices) for n in subset] for p in pools]
            if any(sum(s) < k for s, k in zip(sizes, counts)):
                continue
            parts = [
                [(p.domains[n], take, p.domains[n].plan(take)) for n, take in zip(subset, _spread(s, k))]
                for p, k, s in zip(pools, counts, sizes)
            ]
            flat = [part for per in parts for part in per]
            key = (sum(part[2][0] for part in flat), sum(part[2][1] for part in flat),
                   sum(sum(s) - k for s, k in zip(sizes, counts)))
            if best is None or key < best[0]:
                best = (key, parts)
        if best is not None:
            return {p.resource: [d for domain, take, plan in per for d in domain.take(take, plan, p.position)]
                    for p, per in zip(pools, best[1])}
    return None


def _joint_node(pools: list[_Pool], counts: list[int]) -> dict[str, list[NodeDevice]]:
    """The primary packed on its own; each secondary under the primary's switches, else on its NUMA nodes.

    Koordinator's joint allocation likewise places the primary first and sorts the secondary's
    devices by the primary's PCIe ids (``sortDeviceResourcesByPreferredPCIe``).
    """
    primary = _pick_single(pools[0], counts[0])
    switches = {d.switch for d in primary if d.switch is not None}
    nodes = {d.numa_id for d in primary if d.numa_id is not None}
    out = {pools[0].resource: primary}
    for pool, k in zip(pools[1:], counts[1:]):
        near = [d for d in pool.devices if d.switch in switches]
        if len(near) < k:
            near = [d for d in pool.devices if d.numa_id in nodes]
        narrowed = _Pool(pool.resource, near, pool.position) if len(near) >= k else pool
        out[pool.resource] = _pick_single(narrowed, k)
    return out


def _level_of(group: tuple[str, ...], chosen: Mapping[str, list[NodeDevice]]) -> str:
    """The tightest level the joint group's (non-empty) chosen devices satisfy."""
    if len(group) == 1:
        devices = chosen[group[0]]
        switches = {d.switch for d in devices}
        numa = {d.numa_id for d in devices}
        if len(devices) <= 1 or (len(switches) == 1 and None not in switches):
            return LEVEL_PCIE
        return LEVEL_NUMA if len(numa) == 1 and None not in numa else LEVEL_NODE
    for level, attr in ((LEVEL_PCIE, "switch"), (LEVEL_NUMA, "numa_id")):
        primary = {getattr(d, attr) for d in chosen[group[0]]}
        if None not in primary and all({getattr(d, attr) for d in chosen[r]} == primary for r in group[1:]):
            return level
    return LEVEL_NODE
