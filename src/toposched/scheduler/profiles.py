"""Scheduler profiles read from a ``KubeSchedulerConfiguration`` (``kubescheduler.config.k8s.io/v1``).

Pure data and validation: the file is decoded strictly (an unknown field is an error, as in
kube-scheduler), defaulted as upstream's ``SetDefaults_KubeSchedulerConfiguration`` and
``mergePlugins`` do, expanded as the framework's ``expandMultiPointPlugins`` does and checked
against the plugins toposched registers. The result is one :class:`ProfileConfig` per profile:
for every extension point the plugins that run there, in order, with score weights and the
plugins' parsed args.

Our plugin registry replaces upstream's: ``known_plugins`` maps each plugin we have to the
extension points it implements. Upstream's default plugins (``multiPoint`` defaults of v1) take
part only where we implement them; the others are dropped without a word, so a file written for
kube-scheduler that relies on defaults still loads. A plugin a file names explicitly must exist.
See ``docs/scheduler/profiles.md``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from toposched.decoding import (
    INT32_MAX,
    INT32_MIN,
    check_fields,
    expect_list,
    expect_mapping,
    integer,
    invalid,
    join,
    kind_of,
    string,
)
from toposched.errors import InputError
from toposched.inputs import decode_documents, read_file_bytes
from toposched.names import KUBE_SCHEDULER_CONFIG_API_VERSION as API_VERSION
from toposched.scheduler.plugin_args import DEFAULT_ARGS_PARSERS

__all__ = [
    "API_VERSION",
    "BUILTIN_PROFILES",
    "DEFAULT_SCHEDULER_NAME",
    "EXTENSION_POINTS",
    "KIND",
    "MULTI_POINT",
    "REMOVED_PLUGINS",
    "UNMODELLED_POINTS",
    "UPSTREAM_DEFAULT_PLUGINS",
    "PluginRef",
    "ProfileConfig",
    "SchedulerConfig",
    "builtin_profile",
    "load_scheduler_config",
    "merge_plugin_set",
]

KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

#: The extension points a profile configures, in the order the framework runs them.
EXTENSION_POINTS = (
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
)
MULTI_POINT = "multiPoint"
#: kube-scheduler's queue-side points. toposched is handed one pod at a time and has no queue,
#: so these sets are decoded (a malformed one is still an error) and then ignored.
UNMODELLED_POINTS = ("preEnqueue", "queueSort")


@dataclass(frozen=True, slots=True)
class PluginRef:
    """A plugin enabled at an extension point, with its score weight.

    ``weight`` is ``None`` when not set. In a :class:`ProfileConfig` the refs at ``score``
    always carry their resolved weight (unset means 1) and the refs elsewhere carry ``None``:
    kube-scheduler uses weights only when scoring.
    """

    name: str
    weight: int | None = None


#: kube-scheduler v1's default plugins (``getDefaultPlugins``, all under ``multiPoint``) with the
#: ``DynamicResourceAllocation`` gate on, its default since Kubernetes 1.34.
UPSTREAM_DEFAULT_PLUGINS = (
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeUnschedulable"),
    PluginRef("NodeName"),
    PluginRef("TaintToleration", 3),
    PluginRef("NodeAffinity", 2),
    PluginRef("NodePorts"),
    PluginRef("NodeResourcesFit", 1),
    PluginRef("VolumeRestrictions"),
    PluginRef("NodeVolumeLimits"),
    PluginRef("VolumeBinding"),
    PluginRef("VolumeZone"),
    PluginRef("PodTopologySpread", 2),
    PluginRef("InterPodAffinity", 2),
    PluginRef("DynamicResources"),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("ImageLocality", 1),
    PluginRef("DefaultBinder"),
)
_UPSTREAM_DEFAULT_NAMES = frozenset(ref.name for ref in UPSTREAM_DEFAULT_PLUGINS)
#: Plugins kube-scheduler refuses in a v1 file (validation's ``invalidPluginsByVersion``).
REMOVED_PLUGINS = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")

_TEXT_SOURCE = "<KubeSchedulerConfiguration>"

_CONFIG_FIELDS = (
    "apiVersion",
    "kind",
    "parallelism",
    "leaderElection",
    "clientConnection",
    "enableProfiling",
    "enableContentionProfiling",
    "percentageOfNodesToScore",
    "percentageOfPlacementsToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "profiles",
    "extenders",
    "delayCacheUntilActive",
)
_PROFILE_FIELDS = (
    "schedulerName",
    "percentageOfNodesToScore",
    "percentageOfPlacementsToScore",
    "plugins",
    "pluginConfig",
)


# --------------------------------------------------------------------------------------------
# The decoded configuration


@dataclass(frozen=True, slots=True)
class ProfileConfig:
    """One scheduling profile, defaulted, expanded and validated.

    ``plugins`` has every name of :data:`EXTENSION_POINTS` as a key (an unused point maps to
    ``()``); ``plugin_args`` holds, for each enabled plugin that has args, its parsed args (the
    object the plugin's parser returned, defaults included) or, for a plugin without a parser,
    a read-only copy of the mapping given. ``percentage_of_nodes_to_score`` is the profile's
    value, else the configuration's, else 0 (upstream's adaptive sampling).
    """

    scheduler_name: str
    plugins: Mapping[str, tuple[PluginRef, ...]]
    plugin_args: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    percentage_of_nodes_to_score: int = 0

    def enabled(self, point: str) -> tuple[str, ...]:
        """The plugins that run at ``point``, in order. Raises ``KeyError`` for an unknown point."""
        return tuple(ref.name for ref in self.plugins[point])

    def score_weight(self, plugin: str) -> int:
        """The weight ``plugin``'s normalized score is multiplied by; ``KeyError`` if it does not score."""
        for ref in self.plugins["score"]:
            if ref.name == plugin:
                return ref.weight if ref.weight is not None else 1
        raise KeyError(plugin)

    def args(self, plugin: str) -> Any | None:
        """``plugin``'s parsed args, or ``None`` when it has none."""
        return self.plugin_args.get(plugin)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """All profiles of one KubeSchedulerConfiguration, in file order, scheduler names unique."""

    profiles: tuple[ProfileConfig, ...]
    source: str = _TEXT_SOURCE

    @property
    def scheduler_names(self) -> tuple[str, ...]:
        """The profiles' scheduler names, in file order."""
        return tuple(p.scheduler_name for p in self.profiles)

    def profile(self, scheduler_name: str) -> ProfileConfig:
        """The profile a pod with ``spec.schedulerName == scheduler_name`` is scheduled with.

        Raises :class:`InputError` naming the configuration and the names it has.
        """
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        raise InputError(
            f'no profile has schedulerName "{scheduler_name}" (profiles: {", ".join(self.scheduler_names)})',
            field="profiles",
            source=self.source,
        )


# --------------------------------------------------------------------------------------------
# Plugin sets: upstream's mergePluginSet and expandMultiPointPlugins


@dataclass(frozen=True, slots=True)
class _Entry:
    """A plugin as configured, with where in the file it came from (``None``: upstream's defaults)."""

    ref: PluginRef
    path: str | None = None

    @property
    def name(self) -> str:
        return self.ref.name


def _merge(defaults: Sequence[_Entry], enabled: Sequence[_Entry], disabled: set[str]) -> list[_Entry]:
    if "*" in disabled:
        return list(enabled)
    last_index = {entry.name: i for i, entry in enumerate(enabled)}
    replaced: set[int] = set()
    merged: list[_Entry] = []
    for default in defaults:
        if default.name in disabled:
            continue
        i = last_index.get(default.name)
        if i is None:
            merged.append(default)
        else:
            # A default re-configured by the user takes the user's entry, in the default's place.
            merged.append(enabled[i])
            replaced.add(i)
    merged.extend(entry for i, entry in enumerate(enabled) if i not in replaced)
    return merged


def merge_plugin_set(
    defaults: Sequence[PluginRef], enabled: Sequence[PluginRef], disabled: Iterable[str]
) -> tuple[PluginRef, ...]:
    """Upstream's ``mergePluginSet``: the enabled list of one plugin set after defaults are merged in.

    Defaults come first, minus the disabled ones (all of them for ``"*"``); a default the user
    enables again is replaced in place by the user's entry (its last one); the user's other
    entries follow in their order, repeats included (they are refused later, per point).
    """
    merged = _merge([_Entry(r) for r in defaults], [_Entry(r) for r in enabled], set(disabled))
    return tuple(entry.ref for entry in merged)


def _expand(
    point: str,
    specific: Sequence[_Entry],
    disabled: set[str],
    multi_point: Sequence[_Entry],
    registry: Mapping[str, frozenset[str]],
) -> list[_Entry]:
    """Upstream's ``expandMultiPointPlugins`` for one point: the point's own plugins that also come
    through multiPoint first (in the point's order), then the other multiPoint plugins that
    implement the point and are not disabled there, then the point's remaining plugins."""
    if "*" in disabled:
        return list(specific)
    specific_names = {entry.name for entry in specific}
    overridden: set[str] = set()
    from_multi: list[_Entry] = []
    for entry in multi_point:
        if point not in registry[entry.name] or entry.name in disabled:
            continue
        if entry.name in specific_names:
            overridden.add(entry.name)
            continue
        from_multi.append(entry)
    first = [e for e in specific if e.name in overridden]
    rest = [e for e in specific if e.name not in overridden]
    return first + from_multi + rest


# --------------------------------------------------------------------------------------------
# Reading the file


def _read(path_or_text: str | os.PathLike[str], source: str | None) -> tuple[str, str]:
    """The text and the name errors use: a path object, or a one-line string, names a file."""
    is_path = isinstance(path_or_text, os.PathLike) or (
        isinstance(path_or_text, str)
        and path_or_text.strip() != ""
        and "\n" not in path_or_text
        and not path_or_text.lstrip().startswith("{")
    )
    if not is_path:
        return str(path_or_text), source or _TEXT_SOURCE
    path = Path(path_or_text)
    where = source or str(path)
    try:
        data = read_file_bytes(path, source=where)  # a regular file under the size cap (toposched.inputs)
    except InputError as err:
        raise InputError(f"cannot read the file: {err.message.removeprefix('cannot read file: ')}", source=where) from None
    try:
        return data.decode("utf-8"), where
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text ({err.reason} at byte {err.start})", source=where) from None


def _parse(text: str, where: str) -> Any:
    """The one document of the file (YAML or JSON, through :mod:`toposched.inputs`), ``None`` if empty."""
    documents = decode_documents(text, where)
    if len(documents) > 1:
        raise InputError(f"a {KIND} file holds one document; this one has {len(documents)}", source=where)
    return documents[0] if documents else None


def _check_registry(known_plugins: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    registry = {}
    for name, points in known_plugins.items():
        points = frozenset(points)
        unknown = points - set(EXTENSION_POINTS)
        if unknown:
            raise ValueError(f"plugin {name} is registered at unknown extension points {sorted(unknown)}")
        registry[name] = points
    return registry


def load_scheduler_config(
    path_or_text: str | os.PathLike[str],
    *,
    known_plugins: Mapping[str, Iterable[str]],
    args_parsers: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
    source: str | None = None,
) -> SchedulerConfig:
    """Read a ``kubescheduler.config.k8s.io/v1`` KubeSchedulerConfiguration into its profiles.

    ``path_or_text`` is a path (a ``PathLike``, or a one-line string) or the YAML/JSON text
    itself; ``source`` overrides the name errors carry (default: the path, or
    ``<KubeSchedulerConfiguration>`` for text). ``known_plugins`` maps each registered plugin
    to the extension points it implements (a ``ValueError`` if it names a point not in
    :data:`EXTENSION_POINTS`). ``args_parsers`` maps a plugin name to a callable turning its
    ``pluginConfig`` args (a mapping, ``{}`` when none are given) into a parsed object; it is
    merged over :data:`DEFAULT_ARGS_PARSERS` and a parser signals bad args with an
    :class:`InputError` whose field is relative to the args object.

    Every problem raises one :class:`InputError` naming the source and the field path, e.g.
    ``profiles[0].plugins.score.enabled[1].weight``; nothing half-built is returned.
    """
    registry = _check_registry(known_plugins)
    parsers = {**DEFAULT_ARGS_PARSERS, **(args_parsers or {})}
    text, where = _read(path_or_text, source)
    try:
        return _decode_config(_parse(text, where), registry, parsers, where)
    except InputError as err:
        raise err.with_source(where) from None


def _decode_config(
    doc: Any, registry: Mapping[str, frozenset[str]], parsers: Mapping[str, Callable[..., Any]], where: str
) -> SchedulerConfig:
    if doc is None:
        raise invalid(f"the document is empty; expected a {KIND}", None)
    if not isinstance(doc, Mapping):
        raise invalid(f"expected a {KIND} object, got {kind_of(doc)}", None)
    if doc.get("apiVersion") != API_VERSION:
        given = doc.get("apiVersion")
        message = "Required value" if given is None else f'"{given}" is not supported'
        raise invalid(f"{message}: toposched reads {API_VERSION}", "apiVersion")
    if doc.get("kind") != KIND:
        given = doc.get("kind")
        message = "Required value" if given is None else f'"{given}" is not supported'
        raise invalid(f"{message}: expected {KIND}", "kind")
    check_fields(doc, _CONFIG_FIELDS, "")
    global_percentage = _percentage(doc.get("percentageOfNodesToScore"), "percentageOfNodesToScore")

    raw_profiles = doc.get("profiles")
    raw_profiles = [] if raw_profiles is None else expect_list(raw_profiles, "profiles")
    if not raw_profiles:
        raw_profiles = [{}]
    profiles: list[ProfileConfig] = []
    first_seen: dict[str, int] = {}
    for i, raw in enumerate(raw_profiles):
        path = f"profiles[{i}]"
        raw = expect_mapping(raw, path)
        # Upstream names a lone profile without a schedulerName "default-scheduler"; with several
        # profiles every one must be named.
        default_name = DEFAULT_SCHEDULER_NAME if len(raw_profiles) == 1 else None
        profile = _decode_profile(raw, path, default_name, global_percentage, registry, parsers)
        if profile.scheduler_name in first_seen:
            raise invalid(
                f'Duplicate value: "{profile.scheduler_name}" (also profiles[{first_seen[profile.scheduler_name]}])',
                f"{path}.schedulerName",
            )
        first_seen[profile.scheduler_name] = i
        profiles.append(profile)
    return SchedulerConfig(tuple(profiles), where)


def _percentage(value: Any, path: str) -> int | None:
    if value is None:
        return None
    value = integer(value, path, INT32_MIN, INT32_MAX)
    if not 0 <= value <= 100:
        raise invalid(f"Invalid value: {value}: not in valid range [0-100]", path)
    return value


@dataclass(frozen=True, slots=True)
class _PluginSet:
    enabled: tuple[_Entry, ...]
    disabled: tuple[_Entry, ...]

    @property
    def disabled_names(self) -> set[str]:
        return {entry.name for entry in self.disabled}


def _decode_plugin_set(raw: Any, path: str) -> _PluginSet:
    if raw is None:
        return _PluginSet((), ())
    raw = expect_mapping(raw, path)
    check_fields(raw, ("enabled", "disabled"), path)
    enabled = []
    raw_enabled = raw.get("enabled")
    for j, item in enumerate(expect_list(raw_enabled, f"{path}.enabled") if raw_enabled is not None else []):
        at = f"{path}.enabled[{j}]"
        name, weight = _plugin(item, at)
        if weight is not None and not 1 <= weight <= INT32_MAX:
            raise invalid(
                f"Invalid value: {weight}: a weight must be in [1, {INT32_MAX}] (to turn a plugin's "
                "score off, disable it at score)",
                f"{at}.weight",
            )
        enabled.append(_Entry(PluginRef(name, weight), at))
    disabled = []
    raw_disabled = raw.get("disabled")
    for j, item in enumerate(expect_list(raw_disabled, f"{path}.disabled") if raw_disabled is not None else []):
        at = f"{path}.disabled[{j}]"
        name, _ = _plugin(item, at)
        disabled.append(_Entry(PluginRef(name), at))
    return _PluginSet(tuple(enabled), tuple(disabled))


def _plugin(item: Any, path: str) -> tuple[str, int | None]:
    item = expect_mapping(item, path)
    check_fields(item, ("name", "weight"), path)
    name = string(item.get("name"), f"{path}.name") if "name" in item else ""
    if not name:
        raise invalid("Required value: a plugin needs a name", f"{path}.name")
    weight = item.get("weight")
    if weight is not None:
        weight = integer(weight, f"{path}.weight", INT32_MIN, INT32_MAX)
    return name, weight


def _unknown_plugin(name: str, registry: Mapping[str, frozenset[str]]) -> str:
    if name in REMOVED_PLUGINS:
        return f'plugin "{name}" was removed from kube-scheduler and is invalid in {API_VERSION}'
    if name in _UPSTREAM_DEFAULT_NAMES:
        return (
            f'plugin "{name}" is one of kube-scheduler\'s default plugins that toposched does not implement '
            f"(toposched has: {', '.join(sorted(registry))})"
        )
    return f'unknown plugin "{name}" (toposched has: {", ".join(sorted(registry))})'


def _decode_profile(
    raw: Mapping[str, Any],
    path: str,
    default_name: str | None,
    global_percentage: int | None,
    registry: Mapping[str, frozenset[str]],
    parsers: Mapping[str, Callable[..., Any]],
) -> ProfileConfig:
    check_fields(raw, _PROFILE_FIELDS, path)
    name = raw.get("schedulerName")
    if name is None:
        name = default_name
    if name is None or name == "":
        raise invalid(
            "Required value: every profile needs a schedulerName when there are several", f"{path}.schedulerName"
        )
    name = string(name, f"{path}.schedulerName")
    percentage = _percentage(raw.get("percentageOfNodesToScore"), f"{path}.percentageOfNodesToScore")
    if percentage is None:
        percentage = global_percentage if global_percentage is not None else 0

    plugins_path = f"{path}.plugins"
    raw_plugins = raw.get("plugins")
    raw_plugins = {} if raw_plugins is None else expect_mapping(raw_plugins, plugins_path)
    check_fields(raw_plugins, (*EXTENSION_POINTS, MULTI_POINT, *UNMODELLED_POINTS), plugins_path)
    sets = {
        point: _decode_plugin_set(raw_plugins.get(point), f"{plugins_path}.{point}")
        for point in (*EXTENSION_POINTS, MULTI_POINT, *UNMODELLED_POINTS)
    }
    for point in (*EXTENSION_POINTS, MULTI_POINT):
        for entry in sets[point].disabled:
            if entry.name != "*" and entry.name not in registry and entry.name not in _UPSTREAM_DEFAULT_NAMES:
                raise invalid(_unknown_plugin(entry.name, registry), f"{entry.path}.name")

    # Upstream's defaults that toposched does not implement are dropped here, silently.
    defaults = [_Entry(ref) for ref in UPSTREAM_DEFAULT_PLUGINS if ref.name in registry]
    multi_point = _merge(defaults, sets[MULTI_POINT].enabled, sets[MULTI_POINT].disabled_names)
    seen: set[str] = set()
    for entry in multi_point:
        if entry.name not in registry:
            raise invalid(_unknown_plugin(entry.name, registry), f"{entry.path}.name")
        if entry.name in seen:
            raise invalid(f'plugin "{entry.name}" is enabled twice in multiPoint', f"{entry.path}.name")
        seen.add(entry.name)

    expanded: dict[str, tuple[PluginRef, ...]] = {}
    for point in EXTENSION_POINTS:
        specific = sets[point].enabled
        seen = set()
        for entry in specific:
            if entry.name not in registry:
                raise invalid(_unknown_plugin(entry.name, registry), f"{entry.path}.name")
            if point not in registry[entry.name]:
                implements = ", ".join(p for p in EXTENSION_POINTS if p in registry[entry.name]) or "none"
                raise invalid(
                    f'plugin "{entry.name}" does not implement {point} (it implements: {implements})',
                    f"{entry.path}.name",
                )
            if entry.name in seen:
                raise invalid(f'plugin "{entry.name}" is enabled twice at {point}', f"{entry.path}.name")
            seen.add(entry.name)
        entries = _expand(point, specific, sets[point].disabled_names, multi_point, registry)
        if point == "score":
            expanded[point] = tuple(PluginRef(e.name, e.ref.weight if e.ref.weight is not None else 1) for e in entries)
        else:
            expanded[point] = tuple(PluginRef(e.name) for e in entries)
    if not expanded["bind"]:
        raise invalid("at least one bind plugin is needed", f"{plugins_path}.bind")

    enabled_names = {ref.name for refs in expanded.values() for ref in refs} | {e.name for e in multi_point}
    plugin_args = _plugin_config(raw.get("pluginConfig"), path, enabled_names, registry, parsers)
    return ProfileConfig(name, MappingProxyType(expanded), MappingProxyType(plugin_args), percentage)


def _plugin_config(
    raw: Any,
    path: str,
    enabled: set[str],
    registry: Mapping[str, frozenset[str]],
    parsers: Mapping[str, Callable[..., Any]],
) -> dict[str, Any]:
    """Parse ``pluginConfig``; the result holds args for the enabled plugins only, parsers' defaults
    included for enabled plugins given no args (upstream appends default args the same way)."""
    explicit: dict[str, Any] = {}
    first_seen: dict[str, int] = {}
    for j, item in enumerate(expect_list(raw, f"{path}.pluginConfig") if raw is not None else []):
        at = f"{path}.pluginConfig[{j}]"
        item = expect_mapping(item, at)
        check_fields(item, ("name", "args"), at)
        name = string(item.get("name"), f"{at}.name") if "name" in item else ""
        if not name:
            raise invalid("Required value: a pluginConfig entry needs the plugin's name", f"{at}.name")
        if name in first_seen:
            raise invalid(f'Duplicate value: "{name}" (also pluginConfig[{first_seen[name]}])', at)
        first_seen[name] = j
        args = item.get("args")
        if args is not None:
            args = expect_mapping(args, f"{at}.args")
        if name not in registry:
            if name in _UPSTREAM_DEFAULT_NAMES:
                continue
            raise invalid(_unknown_plugin(name, registry), f"{at}.name")
        explicit[name] = _parse_args(name, args, f"{at}.args", parsers)
    result: dict[str, Any] = {}
    for name in sorted(enabled):
        if name in explicit:
            result[name] = explicit[name]
        elif name in parsers:
            result[name] = _parse_args(name, None, f"{path}.pluginConfig", parsers)
    return result


def _parse_args(name: str, args: Mapping[str, Any] | None, path: str, parsers: Mapping[str, Callable[..., Any]]) -> Any:
    parser = parsers.get(name)
    if parser is None:
        return MappingProxyType(copy.deepcopy(dict(args or {})))
    try:
        return parser(dict(args or {}))
    except InputError as err:
        raise InputError(err.message, field=join(path, err.field)) from None


# --------------------------------------------------------------------------------------------
# Built-in profiles

#: Names of the profiles shipped in ``toposched/data/profiles/<name>.yaml``.
BUILTIN_PROFILES = ("toposched", "nrt-match", "default")


def builtin_profile(
    name: str,
    *,
    known_plugins: Mapping[str, Iterable[str]],
    args_parsers: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
) -> ProfileConfig:
    """The built-in profile ``name`` (see :data:`BUILTIN_PROFILES`), read from its shipped file.

    The files are ordinary KubeSchedulerConfigurations checked against ``known_plugins`` like
    any other; an unknown ``name`` raises :class:`InputError` listing the built-in names.
    """
    if name not in BUILTIN_PROFILES:
        raise InputError(
            f'no built-in profile "{name}" (built-in: {", ".join(BUILTIN_PROFILES)})',
            field="profile",
            source="built-in profiles",
        )
    text = (resources.files("toposched") / "data" / "profiles" / f"{name}.yaml").read_text(encoding="utf-8")
    config = load_scheduler_config(
        text,
        known_plugins=known_plugins,
        args_parsers=args_parsers,
        source=f"built-in profile {name} (toposched/data/profiles/{name}.yaml)",
    )
    return config.profiles[0]
