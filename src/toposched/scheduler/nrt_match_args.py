"""``NodeResourceTopologyMatchArgs``: the plugin's args in scheduler-plugins' own format.

The object a KubeSchedulerConfiguration carries under ``pluginConfig``::

    pluginConfig:
    - name: NodeResourceTopologyMatch
      args:
        scoringStrategy:
          type: MostAllocated            # LeastAllocated (default), BalancedAllocation, LeastNUMANodes
          resources:                     # per-resource weights; default cpu: 1, memory: 1
          - {name: cpu, weight: 1}
        cacheResyncPeriodSeconds: 5      # > 0 enables the overreserve cache
        discardReservedNodes: false
        cache: {foreignPodsDetect: All, resyncMethod: Autodetect, informerMode: Dedicated, resyncScope: All}
        preemptionMode: Disabled

It is decoded as kube-scheduler decodes it (strictly: an unknown field is an error), defaulted
as scheduler-plugins' ``SetDefaults_NodeResourceTopologyMatchArgs`` does and validated as its
``ValidateNodeResourceTopologyMatchArgs`` does (``scoringStrategy.type``, ``preemptionMode``).
The cache enums, which upstream does not validate, are checked too. Every problem raises one
:class:`InputError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toposched.decoding import boolean, check_fields, expect_list, expect_mapping, integer, one_of, string
from toposched.errors import InputError
from toposched.names import KUBE_SCHEDULER_CONFIG_API_VERSION as API_VERSION

__all__ = [
    "API_VERSION",
    "BALANCED_ALLOCATION",
    "KIND",
    "LEAST_ALLOCATED",
    "LEAST_NUMA_NODES",
    "MOST_ALLOCATED",
    "SCORING_STRATEGY_TYPES",
    "NodeResourceTopologyCache",
    "NodeResourceTopologyMatchArgs",
    "PLUGIN_NAME",
    "ResourceSpec",
    "ScoringStrategy",
]

PLUGIN_NAME = "NodeResourceTopologyMatch"
KIND = "NodeResourceTopologyMatchArgs"

MOST_ALLOCATED = "MostAllocated"
BALANCED_ALLOCATION = "BalancedAllocation"
LEAST_ALLOCATED = "LeastAllocated"
LEAST_NUMA_NODES = "LeastNUMANodes"
SCORING_STRATEGY_TYPES = (MOST_ALLOCATED, BALANCED_ALLOCATION, LEAST_ALLOCATED, LEAST_NUMA_NODES)

_FOREIGN_PODS_DETECT = ("None", "All", "OnlyExclusiveResources")
_RESYNC_METHODS = ("Autodetect", "All", "OnlyExclusiveResources")
_INFORMER_MODES = ("Shared", "Dedicated")
_RESYNC_SCOPES = ("All", "OnlyResources")
_PREEMPTION_MODES = ("Disabled", "Enabled")
_DEFAULT_WEIGHT = 1


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """A resource name and its weight in the allocation strategies."""

    name: str
    weight: int = _DEFAULT_WEIGHT


_DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    """How nodes are scored: the strategy type and per-resource weights."""

    type: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = _DEFAULT_RESOURCES


@dataclass(frozen=True, slots=True)
class NodeResourceTopologyCache:
    """The NRT cache tuning (used once the overreserve cache is enabled)."""

    foreign_pods_detect: str = "All"
    resync_method: str = "Autodetect"
    informer_mode: str = "Dedicated"
    resync_scope: str = "All"


@dataclass(frozen=True, slots=True)
class NodeResourceTopologyMatchArgs:
    """The plugin's args, defaulted. ``NodeResourceTopologyMatchArgs()`` is upstream's default."""

    scoring_strategy: ScoringStrategy = field(default_factory=ScoringStrategy)
    cache_resync_period_seconds: int = 0
    discard_reserved_nodes: bool = False
    cache: NodeResourceTopologyCache = field(default_factory=NodeResourceTopologyCache)
    preemption_mode: str = "Disabled"

    def weight(self, resource: str) -> int:
        """The weight of ``resource`` in the allocation strategies (upstream ``resourceToWeightMap.weight``).

        A resource the args do not list, or list with a weight below 1, weighs 1: every
        requested resource takes part in the score, listed or not.
        """
        found = None
        for spec in self.scoring_strategy.resources:
            if spec.name == resource:
                found = spec.weight
        if found is None or found < 1:
            return _DEFAULT_WEIGHT
        return found

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any] | None, source: str | None = None) -> NodeResourceTopologyMatchArgs:
        """Decode, default and validate the args object, or a whole ``pluginConfig`` entry
        (``{name: NodeResourceTopologyMatch, args: {...}}``). ``None`` gives the defaults.

        ``apiVersion`` and ``kind``, when present, must be ``kubescheduler.config.k8s.io/v1``
        and ``NodeResourceTopologyMatchArgs``. Raises :class:`InputError` naming ``source`` and
        the offending field.
        """
        try:
            return _decode(obj)
        except InputError as err:
            raise err.with_source(source or "NodeResourceTopologyMatchArgs") from None


def _decode(obj: Mapping[str, Any] | None) -> NodeResourceTopologyMatchArgs:
    if obj is None:
        return NodeResourceTopologyMatchArgs()
    obj = expect_mapping(obj, "args")
    if "args" in obj and "scoringStrategy" not in obj:
        check_fields(obj, ("name", "args"), "")
        name = obj.get("name")
        if name != PLUGIN_NAME:
            raise InputError(f"the pluginConfig entry is for {name!r}, not {PLUGIN_NAME}", field="name")
        return _decode(obj["args"])
    check_fields(
        obj,
        (
            "apiVersion",
            "kind",
            "scoringStrategy",
            "cacheResyncPeriodSeconds",
            "discardReservedNodes",
            "cache",
            "preemptionMode",
        ),
        "",
    )
    if obj.get("apiVersion") is not None and obj["apiVersion"] != API_VERSION:
        raise InputError(f"apiVersion {obj['apiVersion']!r} is not {API_VERSION}", field="apiVersion")
    if obj.get("kind") is not None and obj["kind"] != KIND:
        raise InputError(f"kind {obj['kind']!r} is not {KIND}", field="kind")

    strategy = ScoringStrategy()
    if obj.get("scoringStrategy") is not None:
        strategy = _scoring_strategy(expect_mapping(obj["scoringStrategy"], "scoringStrategy"))
    period = 0
    if obj.get("cacheResyncPeriodSeconds") is not None:
        period = integer(obj["cacheResyncPeriodSeconds"], "cacheResyncPeriodSeconds")
    discard = obj.get("discardReservedNodes")
    discard = False if discard is None else boolean(discard, "discardReservedNodes")
    cache = NodeResourceTopologyCache()
    if obj.get("cache") is not None:
        cache = _cache(expect_mapping(obj["cache"], "cache"))
    preemption = "Disabled"
    if obj.get("preemptionMode") is not None:
        preemption = one_of(obj["preemptionMode"], _PREEMPTION_MODES, "preemptionMode", "PreemptionMode")
    return NodeResourceTopologyMatchArgs(strategy, period, discard, cache, preemption)


def _scoring_strategy(obj: Mapping[str, Any]) -> ScoringStrategy:
    check_fields(obj, ("type", "resources"), "scoringStrategy")
    # A scoringStrategy given without a type keeps the empty type, which validation refuses.
    kind = obj.get("type") or ""
    kind = string(kind, "scoringStrategy.type")
    if kind not in SCORING_STRATEGY_TYPES:
        raise InputError(f'Invalid value: "{kind}": invalid ScoringStrategyType', field="scoringStrategy.type")
    resources = []
    raw = obj.get("resources")
    for i, item in enumerate(expect_list(raw, "scoringStrategy.resources") if raw is not None else []):
        path = f"scoringStrategy.resources[{i}]"
        item = expect_mapping(item, path)
        check_fields(item, ("name", "weight"), path)
        name = string(item.get("name", ""), f"{path}.name")
        weight = item.get("weight")
        weight = integer(weight, f"{path}.weight") if weight is not None else 0
        # Upstream defaults a zero weight to 1 and lets negative weights through; scoring then
        # treats any weight below 1 as 1.
        resources.append(ResourceSpec(name, weight or _DEFAULT_WEIGHT))
    return ScoringStrategy(kind, tuple(resources) or _DEFAULT_RESOURCES)


def _cache(obj: Mapping[str, Any]) -> NodeResourceTopologyCache:
    fields = (
        ("foreignPodsDetect", _FOREIGN_PODS_DETECT, "ForeignPodsDetectMode"),
        ("resyncMethod", _RESYNC_METHODS, "CacheResyncMethod"),
        ("informerMode", _INFORMER_MODES, "CacheInformerMode"),
        ("resyncScope", _RESYNC_SCOPES, "CacheResyncScope"),
    )
    check_fields(obj, tuple(name for name, _, _ in fields), "cache")
    defaults = NodeResourceTopologyCache()
    values = []
    for (name, allowed, what), default in zip(
        fields, (defaults.foreign_pods_detect, defaults.resync_method, defaults.informer_mode, defaults.resync_scope)
    ):
        raw = obj.get(name)
        values.append(default if raw is None else one_of(raw, allowed, f"cache.{name}", what))
    return NodeResourceTopologyCache(*values)
