"""The typed args of every toposched plugin that takes args, decoded strictly from ``pluginConfig``.

Each args type is a frozen dataclass, defaulted and validated on construction, with
``from_dict(obj, source)`` decoding a ``pluginConfig[].args`` object strictly (an unknown field
is an error, as kube-scheduler decodes) and :func:`plugin_args` turning whatever a plugin is
handed (its args object from a profile, or a plain mapping from a caller) into that type.
Errors are :class:`InputError` naming the field: relative to the args object from
``from_dict`` (``load_scheduler_config`` puts the file and ``profiles[i].pluginConfig[j].args``
in front), ``<plugin>.args.<field>`` from :func:`plugin_args`.

Upstream's in-tree types (``NodeResourcesFitArgs``, ``NodeResourcesBalancedAllocationArgs``)
are decoded and validated as kube-scheduler does; scheduler-plugins' ``NodeResourceTopologyMatchArgs``
lives in :mod:`toposched.scheduler.nrt_match_args`; the rest are toposched's own plugins'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from toposched.decoding import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    check_fields,
    expect_list,
    expect_mapping,
    integer,
    invalid,
    join,
    one_of,
    string,
    string_list,
)
from toposched.devices.fgd import POLICY_NAMES
from toposched.devices.share import DEFAULT_GPU_MEMORY
from toposched.errors import InputError
from toposched.inputs import qualified_name_problems
from toposched.names import KUBE_SCHEDULER_CONFIG_API_VERSION as API_VERSION
from toposched.quantity import canonical_units
from toposched.scheduler.intent import FULL_PCPUS, SPREAD_BY_PCPUS
from toposched.scheduler.nrt_match_args import NodeResourceTopologyMatchArgs, ResourceSpec

__all__ = [
    "API_VERSION",
    "DEFAULT_ARGS_PARSERS",
    "LEAST_ALLOCATED",
    "MOST_ALLOCATED",
    "NUMA_ALLOCATE_STRATEGIES",
    "REQUESTED_TO_CAPACITY_RATIO",
    "CPUOrchestrationArgs",
    "FitScoringStrategy",
    "GPUShareArgs",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFitArgs",
    "ScarcityScoreArgs",
    "UtilizationShapePoint",
    "plugin_args",
]



def _type_meta(obj: Mapping[str, Any], kind: str, path: str) -> None:
    """Check an args object's optional ``apiVersion``/``kind``."""
    version = obj.get("apiVersion")
    if version is not None and version != API_VERSION:
        raise invalid(f'apiVersion "{version}" is not {API_VERSION}', join(path, "apiVersion"))
    given = obj.get("kind")
    if given is not None and given != kind:
        raise invalid(f'kind "{given}" is not {kind}', join(path, "kind"))


# --------------------------------------------------------------------------------------------
# NodeResourcesFitArgs and NodeResourcesBalancedAllocationArgs (upstream's in-tree arg types)

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
_FIT_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
_MAX_RESOURCE_WEIGHT = 100
_MAX_UTILIZATION = 100
_MAX_CUSTOM_PRIORITY_SCORE = 10
_DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


@dataclass(frozen=True, slots=True)
class UtilizationShapePoint:
    """One point of RequestedToCapacityRatio's piecewise-linear shape: utilization % -> score 0..10."""

    utilization: int
    score: int


@dataclass(frozen=True, slots=True)
class FitScoringStrategy:
    """NodeResourcesFit's ``scoringStrategy``.

    ``requested_to_capacity_ratio`` is the shape of ``requestedToCapacityRatio`` (``None`` when
    that object is absent, ``()`` when it is present without points).
    """

    type: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = _DEFAULT_RESOURCES
    requested_to_capacity_ratio: tuple[UtilizationShapePoint, ...] | None = None


@dataclass(frozen=True, slots=True)
class NodeResourcesFitArgs:
    """Upstream's ``NodeResourcesFitArgs``, defaulted; ``NodeResourcesFitArgs()`` is upstream's default.

    Constructing one validates it as ``ValidateNodeResourcesFitArgs`` does and raises
    :class:`InputError` naming the field (relative to the args object) on the first problem.
    """

    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()
    scoring_strategy: FitScoringStrategy | None = field(default_factory=FitScoringStrategy)

    def __post_init__(self) -> None:
        _validate_fit_args(self)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any] | None, source: str | None = None) -> NodeResourcesFitArgs:
        """Decode (strictly), default (``SetDefaults_NodeResourcesFitArgs``) and validate the args object.

        ``None`` gives the defaults: LeastAllocated with cpu and memory weighing 1. A resource
        weight of 0 or left out becomes 1. Raises :class:`InputError` naming ``source`` and the
        field.
        """
        try:
            return _decode_fit_args(obj)
        except InputError as err:
            raise err.with_source(source or "NodeResourcesFitArgs") from None


def _validate_fit_args(args: NodeResourcesFitArgs) -> None:
    for i, name in enumerate(args.ignored_resources):
        problems = qualified_name_problems(name)
        if problems:
            raise invalid(f'Invalid value: "{name}": {"; ".join(problems)}', f"ignoredResources[{i}]")
    for i, group in enumerate(args.ignored_resource_groups):
        problems = ["resource group name can't contain '/'"] if "/" in group else []
        problems += qualified_name_problems(group)
        if problems:
            raise invalid(f'Invalid value: "{group}": {"; ".join(problems)}', f"ignoredResourceGroups[{i}]")
    strategy = args.scoring_strategy
    if strategy is None:
        raise invalid("Required value: ScoringStrategy field is required", "scoringStrategy")
    if strategy.type not in _FIT_STRATEGY_TYPES:
        supported = ", ".join(f'"{t}"' for t in sorted(_FIT_STRATEGY_TYPES))
        raise invalid(f'Unsupported value: "{strategy.type}": supported values: {supported}', "scoringStrategy.type")
    for i, resource in enumerate(strategy.resources):
        if not 0 < resource.weight <= _MAX_RESOURCE_WEIGHT:
            raise invalid(
                f"Invalid value: {resource.weight}: resource weight of {resource.name} not in valid range "
                f"(0, {_MAX_RESOURCE_WEIGHT}]",
                f"scoringStrategy.resources[{i}].weight",
            )
    ratio_path = "scoringStrategy.requestedToCapacityRatio"
    if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
        if strategy.requested_to_capacity_ratio is None:
            raise invalid("Required value: must be specified when type is RequestedToCapacityRatio", ratio_path)
        _validate_shape(strategy.requested_to_capacity_ratio, f"{ratio_path}.shape")
    elif strategy.requested_to_capacity_ratio is not None:
        raise invalid("Forbidden: must be nil when type is not RequestedToCapacityRatio", ratio_path)


def _validate_shape(shape: tuple[UtilizationShapePoint, ...], path: str) -> None:
    """Upstream's ``validateFunctionShape``: at least one point, utilization strictly rising in [0, 100],
    scores in [0, 10]."""
    if not shape:
        raise invalid("Required value: at least one point must be specified", path)
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            raise invalid(
                f"Invalid value: {shape[i].utilization}: utilization values must be sorted in increasing order",
                f"{path}[{i}].utilization",
            )
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= _MAX_UTILIZATION:
            raise invalid(
                f"Invalid value: {point.utilization}: not in valid range [0, {_MAX_UTILIZATION}]",
                f"{path}[{i}].utilization",
            )
        if not 0 <= point.score <= _MAX_CUSTOM_PRIORITY_SCORE:
            raise invalid(
                f"Invalid value: {point.score}: not in valid range [0, {_MAX_CUSTOM_PRIORITY_SCORE}]",
                f"{path}[{i}].score",
            )


def _resource_specs(value: Any, path: str) -> tuple[ResourceSpec, ...]:
    """``resources`` as upstream defaults them: empty means cpu and memory, a weight of 0 means 1."""
    specs = []
    for i, item in enumerate(expect_list(value, path) if value is not None else []):
        where = f"{path}[{i}]"
        item = expect_mapping(item, where)
        check_fields(item, ("name", "weight"), where)
        name = string(item.get("name", ""), f"{where}.name")
        weight = item.get("weight")
        weight = 0 if weight is None else integer(weight, f"{where}.weight", INT64_MIN, INT64_MAX)
        specs.append(ResourceSpec(name, weight or 1))
    return tuple(specs) or _DEFAULT_RESOURCES


def _decode_fit_args(obj: Mapping[str, Any] | None) -> NodeResourcesFitArgs:
    if obj is None:
        return NodeResourcesFitArgs()
    obj = expect_mapping(obj, "")
    check_fields(obj, ("apiVersion", "kind", "ignoredResources", "ignoredResourceGroups", "scoringStrategy"), "")
    _type_meta(obj, "NodeResourcesFitArgs", "")
    ignored = string_list(obj.get("ignoredResources"), "ignoredResources")
    groups = string_list(obj.get("ignoredResourceGroups"), "ignoredResourceGroups")
    raw = obj.get("scoringStrategy")
    if raw is None:
        return NodeResourcesFitArgs(ignored, groups)
    raw = expect_mapping(raw, "scoringStrategy")
    check_fields(raw, ("type", "resources", "requestedToCapacityRatio"), "scoringStrategy")
    kind = string(raw.get("type") or "", "scoringStrategy.type")
    resources_ = _resource_specs(raw.get("resources"), "scoringStrategy.resources")
    shape = None
    ratio = raw.get("requestedToCapacityRatio")
    if ratio is not None:
        where = "scoringStrategy.requestedToCapacityRatio"
        ratio = expect_mapping(ratio, where)
        check_fields(ratio, ("shape",), where)
        points = []
        raw_shape = ratio.get("shape")
        for i, point in enumerate(expect_list(raw_shape, f"{where}.shape") if raw_shape is not None else []):
            at = f"{where}.shape[{i}]"
            point = expect_mapping(point, at)
            check_fields(point, ("utilization", "score"), at)
            points.append(
                UtilizationShapePoint(
                    integer(point.get("utilization", 0), f"{at}.utilization", INT32_MIN, INT32_MAX),
                    integer(point.get("score", 0), f"{at}.score", INT32_MIN, INT32_MAX),
                )
            )
        shape = tuple(points)
    return NodeResourcesFitArgs(ignored, groups, FitScoringStrategy(kind, resources_, shape))


@dataclass(frozen=True, slots=True)
class NodeResourcesBalancedAllocationArgs:
    """Upstream's ``NodeResourcesBalancedAllocationArgs``: the resources balanced, each weighing exactly 1.

    Constructing one validates it as ``ValidateNodeResourcesBalancedAllocationArgs`` does (no
    resource twice, every weight 1) and raises :class:`InputError` on the first problem.
    """

    resources: tuple[ResourceSpec, ...] = _DEFAULT_RESOURCES

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for i, resource in enumerate(self.resources):
            if resource.name in seen:
                raise invalid(f'Duplicate value: "{resource.name}"', f"resources[{i}].name")
            seen.add(resource.name)
            if resource.weight != 1:
                raise invalid(f"Invalid value: {resource.weight}: must be 1", f"resources[{i}].weight")

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any] | None, source: str | None = None) -> NodeResourcesBalancedAllocationArgs:
        """Decode (strictly), default (empty means cpu and memory, weight 0 means 1) and validate."""
        try:
            if obj is None:
                return cls()
            obj = expect_mapping(obj, "")
            check_fields(obj, ("apiVersion", "kind", "resources"), "")
            _type_meta(obj, "NodeResourcesBalancedAllocationArgs", "")
            return cls(_resource_specs(obj.get("resources"), "resources"))
        except InputError as err:
            raise err.with_source(source or "NodeResourcesBalancedAllocationArgs") from None


# --------------------------------------------------------------------------------------------
# toposched's own plugins

#: CPUOrchestration's ``numaAllocateStrategy`` values (Koordinator's NUMA allocate strategies).
NUMA_ALLOCATE_STRATEGIES = (MOST_ALLOCATED, LEAST_ALLOCATED)
_CPU_BIND_POLICIES = ("", FULL_PCPUS, SPREAD_BY_PCPUS)


@dataclass(frozen=True, slots=True)
class CPUOrchestrationArgs:
    """CPUOrchestration's args: the bind policy for pods that state none, and how NUMA nodes are filled.

    ``default_cpu_bind_policy`` (``defaultCPUBindPolicy``) is ``""`` (none), ``FullPCPUs`` or
    ``SpreadByPCPUs``; ``numa_allocate_strategy`` (``numaAllocateStrategy``) is
    ``MostAllocated`` (default) or ``LeastAllocated``.
    """

    default_cpu_bind_policy: str = ""
    numa_allocate_strategy: str = MOST_ALLOCATED

    def __post_init__(self) -> None:
        one_of(self.default_cpu_bind_policy, _CPU_BIND_POLICIES, "defaultCPUBindPolicy", "CPUBindPolicy")
        one_of(self.numa_allocate_strategy, NUMA_ALLOCATE_STRATEGIES, "numaAllocateStrategy", "NUMAAllocateStrategy")

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any] | None, source: str | None = None) -> CPUOrchestrationArgs:
        """Decode (strictly) and validate; ``None`` or ``{}`` gives the defaults."""
        try:
            obj = expect_mapping(obj if obj is not None else {}, "")
            check_fields(obj, ("defaultCPUBindPolicy", "numaAllocateStrategy"), "")
            return cls(obj.get("defaultCPUBindPolicy", ""), obj.get("numaAllocateStrategy", MOST_ALLOCATED))
        except InputError as err:
            raise err.with_source(source or "CPUOrchestrationArgs") from None


@dataclass(frozen=True, slots=True)
class GPUShareArgs:
    """GPUShare's args: the packing policy, its seed (``Random``) and the memory of a GPU nothing describes.

    ``policy`` is one of the FGD paper's policies (``BestFit`` by default, ``FGD``, ``DotProd``,
    ``GpuPacking``, ``GpuClustering``, ``Random``); ``default_gpu_memory`` (``defaultGPUMemory``,
    a quantity in the file) is in bytes.
    """

    policy: str = "BestFit"
    seed: int = 0
    default_gpu_memory: int = DEFAULT_GPU_MEMORY

    def __post_init__(self) -> None:
        one_of(self.policy, POLICY_NAMES, "policy", "policy")
        integer(self.seed, "seed")
        if integer(self.default_gpu_memory, "defaultGPUMemory") <= 0:
            raise invalid(f"Invalid value: {self.default_gpu_memory}: must be more than 0 bytes", "defaultGPUMemory")

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any] | None, source: str | None = None) -> GPUShareArgs:
        """Decode (strictly) and validate; ``None`` or ``{}`` gives the defaults."""
        try:
            obj = expect_mapping(obj if obj is not None else {}, "")
            check_fields(obj, ("policy", "seed", "defaultGPUMemory"), "")
            memory = obj.get("defaultGPUMemory")
            memory = DEFAULT_GPU_MEMORY if memory is None else canonical_units("memory", memory, field="defaultGPUMemory")
            return cls(obj.get("policy", "BestFit"), obj.get("seed", 0), memory)
        except InputError as err:
            raise err.with_source(source or "GPUShareArgs") from None


_MAX_SCARCITY_COUNT = 100_000


@dataclass(frozen=True, slots=True)
class ScarcityScoreArgs:
    """ScarcityScore's args: how many recent pods it learns from (``window``), how often it
    re-plans (``epoch``, in pods) and how many demanding shapes it protects (``shapes``);
    each a positive integer up to 100,000."""

    window: int = 200
    epoch: int = 25
    shapes: int = 4

    def __post_init__(self) -> None:
        for name in ("window", "epoch", "shapes"):
            integer(getattr(self, name), name, 1, _MAX_SCARCITY_COUNT)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any] | None, source: str | None = None) -> ScarcityScoreArgs:
        """Decode (strictly) and validate; ``None`` or ``{}`` gives the defaults."""
        try:
            obj = expect_mapping(obj if obj is not None else {}, "")
            check_fields(obj, ("window", "epoch", "shapes"), "")
            defaults = cls()
            return cls(obj.get("window", defaults.window), obj.get("epoch", defaults.epoch),
                       obj.get("shapes", defaults.shapes))
        except InputError as err:
            raise err.with_source(source or "ScarcityScoreArgs") from None


# --------------------------------------------------------------------------------------------
# From what a plugin is handed

_Args = TypeVar("_Args")


def plugin_args(kind: type[_Args], args: Any, plugin: str) -> _Args:
    """``args`` as ``kind``: itself when already decoded (a profile's pluginConfig), else decoded
    from a mapping (``None`` or ``{}``: the defaults). Errors name ``<plugin>.args.<field>``."""
    if isinstance(args, kind):
        return args
    try:
        return kind.from_dict(args)  # type: ignore[attr-defined]
    except InputError as err:
        raise InputError(err.message, field=join(f"{plugin}.args", err.field)) from None


#: The args parsers ``load_scheduler_config`` uses unless given others for the same name.
DEFAULT_ARGS_PARSERS: Mapping[str, Callable[[Mapping[str, Any]], Any]] = MappingProxyType(
    {
        "NodeResourcesFit": NodeResourcesFitArgs.from_dict,
        "NodeResourcesBalancedAllocation": NodeResourcesBalancedAllocationArgs.from_dict,
        "NodeResourceTopologyMatch": NodeResourceTopologyMatchArgs.from_dict,
        "CPUOrchestration": CPUOrchestrationArgs.from_dict,
        "GPUShare": GPUShareArgs.from_dict,
        "ScarcityScore": ScarcityScoreArgs.from_dict,
    }
)
