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

from toposched.errors import InputError

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
API_VERSION = "kubescheduler.config.k8s.io/v1"
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
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
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


def _fail(message: str, path: str) -> InputError:
    return InputError(message, field=path)


def _check_fields(obj: Mapping[str, Any], known: tuple[str, ...], path: str) -> None:
    for key in obj:
        if key not in known:
            where = f"{path}.{key}" if path else str(key)
            raise _fail(f'unknown field "{key}"', where)


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(f"expected an object, got {type(value).__name__}", path)
    return value


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _fail(f"expected a string, got {type(value).__name__} {value!r}", path)
    return value


def _int64(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(f"expected an integer, got {type(value).__name__} {value!r}", path)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise _fail(f"{value} does not fit a 64-bit integer", path)
    return value


def _enum(value: Any, allowed: tuple[str, ...], path: str, what: str) -> str:
    text = _string(value, path)
    if text not in allowed:
        raise _fail(f'Invalid value: "{text}": invalid {what} (one of {", ".join(allowed)})', path)
    return text


def _decode(obj: Mapping[str, Any] | None) -> NodeResourceTopologyMatchArgs:
    if obj is None:
        return NodeResourceTopologyMatchArgs()
    obj = _mapping(obj, "args")
    if "args" in obj and "scoringStrategy" not in obj:
        _check_fields(obj, ("name", "args"), "")
        name = obj.get("name")
        if name != PLUGIN_NAME:
            raise _fail(f"the pluginConfig entry is for {name!r}, not {PLUGIN_NAME}", "name")
        return _decode(obj["args"])
    _check_fields(
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
        raise _fail(f"apiVersion {obj['apiVersion']!r} is not {API_VERSION}", "apiVersion")
    if obj.get("kind") is not None and obj["kind"] != KIND:
        raise _fail(f"kind {obj['kind']!r} is not {KIND}", "kind")

    strategy = ScoringStrategy()
    if obj.get("scoringStrategy") is not None:
        strategy = _scoring_strategy(_mapping(obj["scoringStrategy"], "scoringStrategy"))
    period = 0
    if obj.get("cacheResyncPeriodSeconds") is not None:
        period = _int64(obj["cacheResyncPeriodSeconds"], "cacheResyncPeriodSeconds")
    discard = obj.get("discardReservedNodes", False)
    if discard is None:
        discard = False
    if not isinstance(discard, bool):
        raise _fail(f"expected true or false, got {discard!r}", "discardReservedNodes")
    cache = NodeResourceTopologyCache()
    if obj.get("cache") is not None:
        cache = _cache(_mapping(obj["cache"], "cache"))
    preemption = "Disabled"
    if obj.get("preemptionMode") is not None:
        preemption = _enum(obj["preemptionMode"], _PREEMPTION_MODES, "preemptionMode", "PreemptionMode")
    return NodeResourceTopologyMatchArgs(strategy, period, discard, cache, preemption)


def _scoring_strategy(obj: Mapping[str, Any]) -> ScoringStrategy:
    _check_fields(obj, ("type", "resources"), "scoringStrategy")
    # A scoringStrategy given without a type keeps the empty type, which validation refuses.
    kind = obj.get("type") or ""
    kind = _string(kind, "scoringStrategy.type")
    if kind not in SCORING_STRATEGY_TYPES:
        raise _fail(f'Invalid value: "{kind}": invalid ScoringStrategyType', "scoringStrategy.type")
    resources = []
    raw = obj.get("resources")
    if raw is not None and not isinstance(raw, list):
        raise _fail(f"expected a list, got {type(raw).__name__}", "scoringStrategy.resources")
    for i, item in enumerate(raw or []):
        path = f"scoringStrategy.resources[{i}]"
        item = _mapping(item, path)
        _check_fields(item, ("name", "weight"), path)
        name = _string(item.get("name", ""), f"{path}.name")
        weight = item.get("weight")
        weight = _int64(weight, f"{path}.weight") if weight is not None else 0
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
    _check_fields(obj, tuple(name for name, _, _ in fields), "cache")
    defaults = NodeResourceTopologyCache()
    values = []
    for (name, allowed, what), default in zip(
        fields, (defaults.foreign_pods_detect, defaults.resync_method, defaults.informer_mode, defaults.resync_scope)
    ):
        raw = obj.get(name)
        values.append(default if raw is None else _enum(raw, allowed, f"cache.{name}", what))
    return NodeResourceTopologyCache(*values)
