"""``NodeResourceTopologyMatch`` Filter: the semantics of kubernetes-sigs/scheduler-plugins' plugin.

A pure model of ``pkg/noderesourcetopology`` (``filter.go``, ``numaresources.go``,
``pluginhelpers.go``, ``nodeconfig/topologymanager.go``) of scheduler-plugins, quirks included,
so that a cluster migrating from that plugin gets the same decisions. The Score side lives in
:mod:`toposched.scheduler.nrt_match_score`; the plugin args in
:mod:`toposched.scheduler.nrt_match_args`. docs/scheduler/nrt-match.md lists every quirk and the
upstream commit each file was read at.

The node's ``NodeResourceTopology`` is read as upstream reads it: only zones of type ``Node``
named ``node-<N>`` count (their ``available`` quantities), the kubelet's policy and scope come
from the deprecated ``topologyPolicies`` list and then from the ``topologyManagerPolicy`` /
``topologyManagerScope`` attributes, and only ``single-numa-node`` nodes are filtered. This module
holds no cache: a missing report (``nrt is None``) lets the node pass, as upstream's passthrough
cache does.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from toposched.kubelet.scope import SCOPE_CONTAINER, SCOPE_POD
from toposched.kubelet.topology_manager import (
    POLICY_BEST_EFFORT,
    POLICY_NONE,
    POLICY_RESTRICTED,
    POLICY_SINGLE_NUMA_NODE,
)
from toposched.names import TOPOLOGY_MANAGER_POLICY_ATTRIBUTE, TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE
from toposched.quantity import format_bytes, format_cpu
from toposched.scheduler.nrt_match_args import PLUGIN_NAME
from toposched.scheduler.status import Status
from toposched.topology.nrt import ZONE_TYPE_NODE, NodeResourceTopology
from toposched.workload import BEST_EFFORT, GUARANTEED, Pod

__all__ = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "NUMAZone",
    "PLUGIN_NAME",
    "REASON_CANNOT_ALIGN_CONTAINER",
    "REASON_CANNOT_ALIGN_INIT_CONTAINER",
    "REASON_CANNOT_ALIGN_POD",
    "REASON_INCONSISTENT_ACCOUNTING",
    "TopologyManagerConfig",
    "is_host_level_resource",
    "is_native_resource",
    "is_numa_affine_resource",
    "is_valid_policy",
    "is_valid_scope",
    "node_level_resources",
    "nrt_filter",
    "numa_zones",
    "topology_manager_config",
    "upstream_effective_request",
]

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0

REASON_CANNOT_ALIGN_INIT_CONTAINER = "cannot align init container"
REASON_CANNOT_ALIGN_CONTAINER = "cannot align container"
REASON_CANNOT_ALIGN_POD = "cannot align pod"
REASON_INCONSISTENT_ACCOUNTING = "inconsistent resource accounting"

# Upstream sizes its NUMA-id lookup table with 64 slots and skips ids above 64 (so id 64 itself
# overflows the table: see _UpstreamPanic).
_MAX_NUMA_ID = 64
# The NUMA id upstream's filter reports when nothing fits (Topology Manager's historical limit).
_HIGHEST_NUMA_ID = 8
_ALL_NUMA_BITS = (1 << 64) - 1

_HUGEPAGES_PREFIX = "hugepages-"
_DEFAULT_NAMESPACE_PREFIX = "kubernetes.io/"
_REQUESTS_PREFIX = "requests."
_ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"
# NodeInfo.Allocatable always carries these four, even at zero (scheduler-plugins' util.ResourceList).
_ALWAYS_AT_NODE_LEVEL = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})
_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})

_ZONE_ID = re.compile(r"node-([+-]?[0-9]+)")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_EMPTY: Mapping[int, int] = MappingProxyType({})

# The deprecated top-level ``topologyPolicies`` values and the (policy, scope) each stands for.
_DEPRECATED_POLICIES = {
    "SingleNUMANodePodLevel": (POLICY_SINGLE_NUMA_NODE, SCOPE_POD),
    "SingleNUMANodeContainerLevel": (POLICY_SINGLE_NUMA_NODE, SCOPE_CONTAINER),
    "BestEffortPodLevel": (POLICY_BEST_EFFORT, SCOPE_POD),
    "BestEffortContainerLevel": (POLICY_BEST_EFFORT, SCOPE_CONTAINER),
    "RestrictedPodLevel": (POLICY_RESTRICTED, SCOPE_POD),
    "RestrictedContainerLevel": (POLICY_RESTRICTED, SCOPE_CONTAINER),
}
_VALID_POLICIES = (POLICY_NONE, POLICY_BEST_EFFORT, POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE)
_VALID_SCOPES = (SCOPE_CONTAINER, SCOPE_POD)


class _UpstreamPanic(Exception):
    """An input on which upstream's Go code indexes out of range and panics.

    The message is the Go runtime's. The entry points turn it into an Error status: the
    scheduling cycle fails for the pod, which is the closest a pure function gets to a crash.
    """


# ---- the kubelet configuration the NRT advertises --------------------------------------------


@dataclass(frozen=True, slots=True)
class TopologyManagerConfig:
    """The node's Topology Manager policy and scope as upstream's ``nodeconfig`` derives them."""

    policy: str = POLICY_NONE
    scope: str = SCOPE_CONTAINER


def is_valid_policy(policy: str) -> bool:
    """Whether ``policy`` is one of the kubelet's policy names, spelled exactly."""
    return policy in _VALID_POLICIES


def is_valid_scope(scope: str) -> bool:
    """Whether ``scope`` is ``container`` or ``pod``, spelled exactly."""
    return scope in _VALID_SCOPES


def topology_manager_config(nrt: NodeResourceTopology) -> TopologyManagerConfig:
    """The policy and scope upstream reads from an NRT object.

    Defaults are ``none``/``container``. The first entry of the deprecated ``topologyPolicies``
    list is read first (the rest are ignored; an unknown or ``None`` entry changes nothing), then
    the ``topologyManagerPolicy`` and ``topologyManagerScope`` attributes override it when their
    values are valid (invalid values are ignored, not refused). Remembered per report, as
    :func:`numa_zones` is.
    """
    return _remembered(_CONFIG_SEEN, nrt, _topology_manager_config)


def _topology_manager_config(nrt: NodeResourceTopology) -> TopologyManagerConfig:
    policy, scope = POLICY_NONE, SCOPE_CONTAINER
    if nrt.top_level_policies:
        policy, scope = _DEPRECATED_POLICIES.get(nrt.top_level_policies[0], (policy, scope))
    for name, value in nrt.attributes.items():
        if name == TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE and is_valid_scope(value):
            scope = value
        elif name == TOPOLOGY_MANAGER_POLICY_ATTRIBUTE and is_valid_policy(value):
            policy = value
    return TopologyManagerConfig(policy, scope)


# ---- resource names ---------------------------------------------------------------------------


def is_native_resource(name: str) -> bool:
    """Kubernetes' ``IsNativeResource``: no domain, or a ``kubernetes.io/`` one."""
    return "/" not in name or _DEFAULT_NAMESPACE_PREFIX in name


def is_host_level_resource(name: str) -> bool:
    """Resources that may legitimately lack NUMA affinity: (ephemeral-)storage and non-native ones."""
    return name in ("ephemeral-storage", "storage") or not is_native_resource(name)


def is_numa_affine_resource(name: str) -> bool:
    """Resources that must come from NUMA nodes: cpu, memory and hugepages."""
    return name in ("cpu", "memory") or name.startswith(_HUGEPAGES_PREFIX)


def _is_qualified_name(value: str) -> bool:
    parts = value.split("/")
    if len(parts) > 2:
        return False
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            return False
    name = parts[-1]
    return 0 < len(name) <= 63 and _QUALIFIED_NAME.fullmatch(name) is not None


def _is_extended_resource(name: str) -> bool:
    if is_native_resource(name) or name.startswith(_REQUESTS_PREFIX):
        return False
    return _is_qualified_name(_REQUESTS_PREFIX + name)


@functools.lru_cache(maxsize=4096)
def _is_scalar_resource(name: str) -> bool:
    # The scheduler's NodeInfo keeps only these (besides cpu, memory, pods, ephemeral-storage).
    return (
        _is_extended_resource(name)
        or name.startswith(_HUGEPAGES_PREFIX)
        or _DEFAULT_NAMESPACE_PREFIX in name
        or name.startswith(_ATTACHABLE_VOLUMES_PREFIX)
    )


def node_level_resources(node_allocatable: Iterable[str]) -> frozenset[str]:
    """The resource names the scheduler's ``NodeInfo.Allocatable`` holds for a node.

    cpu, memory, pods and ephemeral-storage are always there (at zero if the node reports
    none); of the rest only "scalar" resources survive: extended resources (``domain/name``
    that makes a qualified name), ``hugepages-*``, ``*kubernetes.io/*`` and
    ``attachable-volumes-*``. An unprefixed name such as ``gpu`` or ``storage`` is dropped.
    """
    return _ALWAYS_AT_NODE_LEVEL | {name for name in node_allocatable if _is_scalar_resource(name)}


# ---- NUMA zones as upstream lists them ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NUMAZone:
    """One NUMA node as upstream's ``NUMANode``: its id, available resources and costs by NUMA id."""

    numa_id: int
    resources: Mapping[str, int]
    costs: Mapping[int, int] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "resources", MappingProxyType(dict(self.resources)))
        object.__setattr__(self, "costs", MappingProxyType(dict(self.costs)))


@functools.lru_cache(maxsize=4096)
def _numa_id(name: str) -> int | None:
    """noderesourcetopology-api's ``numanode.NameToID`` (Go ``strconv.Atoi`` after ``node-``)."""
    match = _ZONE_ID.fullmatch(name)
    if not match:
        return None
    value = int(match.group(1))
    if not _INT64_MIN <= value <= _INT64_MAX or value < 0:
        return None
    return value


def numa_zones(nrt: NodeResourceTopology) -> tuple[NUMAZone, ...]:
    """The NUMA list upstream builds from an NRT (``createNUMANodeList``), in object order.

    Only zones of type ``Node`` whose name parses as ``node-<id>`` with ``id <= 64`` count;
    the others are skipped. Resources are the zones' ``available`` quantities. Costs name
    their target the same way and keep only parseable targets up to 64. When two zones parse
    to the same id, both are listed and both take the costs of the last of them.

    An NRT is immutable, so the list is remembered for the last few thousand reports seen.
    """
    return _remembered(_ZONES_SEEN, nrt, _numa_zones)


_T = TypeVar("_T")

# id(nrt) -> (nrt, what was read of it); the NRT is kept so a reused id can never match another object.
_ZONES_SEEN: dict[int, tuple[NodeResourceTopology, tuple[NUMAZone, ...]]] = {}
_CONFIG_SEEN: dict[int, tuple[NodeResourceTopology, TopologyManagerConfig]] = {}


def _remembered(seen: dict[int, tuple[NodeResourceTopology, _T]], nrt: NodeResourceTopology,
                read: Callable[[NodeResourceTopology], _T]) -> _T:
    """``read(nrt)``, kept in ``seen`` for the last 4,096 reports (an NRT never changes)."""
    known = seen.get(id(nrt))
    if known is not None and known[0] is nrt:
        return known[1]
    value = read(nrt)
    if len(seen) >= 4096:
        seen.pop(next(iter(seen)))
    seen[id(nrt)] = (nrt, value)
    return value


def _numa_zones(nrt: NodeResourceTopology) -> tuple[NUMAZone, ...]:
    listed: list[tuple[int, Mapping[str, int]]] = []
    zone_of_id: dict[int, int] = {}
    for index, zone in enumerate(nrt.zones):
        if zone.type != ZONE_TYPE_NODE:
            continue
        numa_id = _numa_id(zone.name)
        if numa_id is None or numa_id > _MAX_NUMA_ID:
            continue
        if numa_id == _MAX_NUMA_ID:
            raise _UpstreamPanic(_index_panic(numa_id, _MAX_NUMA_ID))
        zone_of_id[numa_id] = index
        listed.append((numa_id, {res.name: res.available for res in zone.resources}))
    out = []
    for numa_id, resources in listed:
        costs: dict[int, int] = {}
        for target, value in nrt.zones[zone_of_id[numa_id]].costs.items():
            target_id = _numa_id(target)
            if target_id is not None and target_id <= _MAX_NUMA_ID:
                costs[target_id] = value
        out.append(NUMAZone(numa_id, resources, costs))
    return tuple(out)


def _index_panic(index: int, length: int) -> str:
    return f"runtime error: index out of range [{index}] with length {length}"


# ---- requests --------------------------------------------------------------------------------


def upstream_effective_request(pod: Pod) -> dict[str, int]:
    """scheduler-plugins' ``util.GetPodEffectiveRequest``: per resource, the larger of the sum
    of the app containers' requests and the largest init container request.

    Unlike :meth:`Pod.effective_requests` it treats restartable init containers (sidecars) as
    ordinary init containers and ignores pod overhead, as upstream does.
    """
    init: dict[str, int] = {}
    for c in pod.init_containers:
        for name, value in c.requests.items():
            if name not in init or value > init[name]:
                init[name] = value
    total: dict[str, int] = {}
    for c in pod.containers:
        for name, value in c.requests.items():
            total[name] = total.get(name, 0) + value
    for name, value in init.items():
        if name not in total or value > total[name]:
            total[name] = value
    return total


def _includes_non_native(pod: Pod) -> bool:
    return any(not is_native_resource(name) for c in pod.all_containers for name in c.requests)


def _resource_set_suitable(qos: str, resource: str, quantity: int, numa_quantity: int) -> bool:
    # Only Guaranteed pods get exclusive CPUs, NUMA-pinned memory and hugepages from the kubelet:
    # for every other pod those resources fit anywhere.
    if qos != GUARANTEED and is_numa_affine_resource(resource):
        return True
    return numa_quantity >= quantity


# ---- Filter ----------------------------------------------------------------------------------


def _available_in_any_numa(
    zones: Sequence[NUMAZone], requests: Mapping[str, int], qos: str, node_resources: frozenset[str]
) -> tuple[int, bool]:
    """Upstream ``resourcesAvailableInAnyNUMANodes``: whether one NUMA node fits every request,
    and the lowest such NUMA id (the one the kubelet's single-numa-node policy would pick)."""
    bitmask = _ALL_NUMA_BITS
    for resource, quantity in requests.items():
        if quantity == 0:
            continue
        if resource not in node_resources:
            return _HIGHEST_NUMA_ID, False
        has_numa_affinity = False
        resource_bits = 0
        for zone in zones:
            if resource not in zone.resources:
                continue
            has_numa_affinity = True
            if _resource_set_suitable(qos, resource, quantity, zone.resources[resource]):
                resource_bits |= 1 << zone.numa_id
        if not has_numa_affinity and is_host_level_resource(resource):
            continue
        bitmask &= resource_bits
        if not bitmask:
            return _HIGHEST_NUMA_ID, False
    return (bitmask & -bitmask).bit_length() - 1, True


def _format_quantity(resource: str, value: int) -> str:
    if resource == "cpu":
        return format_cpu(value)
    if resource in _BYTE_RESOURCES or resource.startswith(_HUGEPAGES_PREFIX):
        return format_bytes(value)
    return str(value)


def _subtract_from_numa(
    zones: list[NUMAZone], numa_id: int, qos: str, requests: Mapping[str, int]
) -> str | None:
    """Upstream ``subtractResourcesFromNUMANodeList``; returns the error text upstream would."""
    for i, zone in enumerate(zones):
        if zone.numa_id != numa_id:
            continue
        left = dict(zone.resources)
        for resource, quantity in requests.items():
            if qos != GUARANTEED and is_numa_affine_resource(resource):
                continue
            if quantity == 0 or resource not in left:
                continue
            if left[resource] - quantity < 0:
                return (
                    f"resource {json.dumps(resource)} request {_format_quantity(resource, quantity)} exceeds "
                    f"NUMA {numa_id} availability {_format_quantity(resource, left[resource])}"
                )
            left[resource] -= quantity
        zones[i] = NUMAZone(zone.numa_id, left, zone.costs)
    return None


def _container_level(pod: Pod, zones: Sequence[NUMAZone], node_resources: frozenset[str]) -> Status:
    qos = pod.qos_class
    remaining = list(zones)
    # Init containers run one after the other before the app containers: each must fit alone,
    # and none of them consumes what the app containers will get.
    for container in pod.init_containers:
        _, fits = _available_in_any_numa(remaining, container.requests, qos, node_resources)
        if not fits:
            return Status.unschedulable(REASON_CANNOT_ALIGN_INIT_CONTAINER, plugin=PLUGIN_NAME)
    for container in pod.containers:
        numa_id, fits = _available_in_any_numa(remaining, container.requests, qos, node_resources)
        if not fits:
            return Status.unschedulable(REASON_CANNOT_ALIGN_CONTAINER, plugin=PLUGIN_NAME)
        problem = _subtract_from_numa(remaining, numa_id, qos, container.requests)
        if problem is not None:
            return Status.error(REASON_INCONSISTENT_ACCOUNTING, problem, plugin=PLUGIN_NAME)
    return Status.success()


def _pod_level(pod: Pod, zones: Sequence[NUMAZone], node_resources: frozenset[str]) -> Status:
    _, fits = _available_in_any_numa(zones, upstream_effective_request(pod), pod.qos_class, node_resources)
    if not fits:
        return Status.unschedulable(REASON_CANNOT_ALIGN_POD, plugin=PLUGIN_NAME)
    return Status.success()


def nrt_filter(
    pod: Pod,
    nrt: NodeResourceTopology | None,
    *,
    node_allocatable: Mapping[str, int] | Iterable[str] | None = None,
) -> Status:
    """The plugin's Filter verdict for ``pod`` on the node that ``nrt`` describes.

    * A BestEffort pod that requests no non-native resource passes, and so does any pod on a
      node without a report (``nrt is None``) or whose policy is not ``single-numa-node``.
    * Container scope: each init container must fit one NUMA node on its own, then each app
      container must fit one NUMA node after the earlier app containers were taken from the
      lowest-numbered NUMA node that fitted them. Pod scope: upstream's effective pod request
      must fit one NUMA node.
    * A request fits a NUMA node when every non-zero resource does: it must exist at node
      level; a host-level resource (ephemeral-storage, storage, extended resources) that no
      NUMA zone reports is satisfied at node level; for non-Guaranteed pods cpu, memory and
      hugepages always fit; everything else needs ``available >= request`` in that zone.

    ``node_allocatable`` is the node's allocatable resources (only their names matter); when
    omitted the names reported by the NRT's zones stand in for it. Returns Success,
    Unschedulable with upstream's reason ("cannot align init container", "cannot align
    container", "cannot align pod"), or Error where upstream reports inconsistent accounting
    or would panic.
    """
    if pod.qos_class == BEST_EFFORT and not _includes_non_native(pod):
        return Status.success()
    if nrt is None:
        return Status.success()
    conf = topology_manager_config(nrt)
    if conf.policy != POLICY_SINGLE_NUMA_NODE:
        return Status.success()
    if node_allocatable is None:
        node_allocatable = [res.name for zone in nrt.zones for res in zone.resources]
    node_resources = node_level_resources(node_allocatable)
    try:
        zones = numa_zones(nrt)
    except _UpstreamPanic as panic:
        return Status.error(str(panic), plugin=PLUGIN_NAME)
    if conf.scope == SCOPE_POD:
        return _pod_level(pod, zones, node_resources)
    return _container_level(pod, zones, node_resources)
