"""The scheduling framework: one Protocol per extension point, typed cycle state, profiles.

As in kube-scheduler's framework, a plugin is an object with a ``name`` implementing any of the
extension points below; the runner (:mod:`toposched.scheduler.runner`) sorts a profile's plugins
by the Protocols they satisfy once, when it is built (no lookup per cycle).

* :class:`PreFilter` ``pre_filter(state, pod) -> Status`` — once per cycle; may write its keys.
  Skip (:meth:`~toposched.scheduler.status.Status.skip`) says the plugin's Filter has nothing to
  check for this pod: the runner records it under :data:`SKIPPED_FILTERS` and no form of that
  Filter runs this cycle (upstream's ``SkipFilterPlugins``).
* :class:`Filter` ``filter_all(state, pod, table, rows) -> (ok: bool[rows], reason)`` — the batch
  form over rows of the :class:`~toposched.scheduler.table.NodeTable`; ``reason`` is one string
  for every refused row, one per row, or :class:`RowReasons`. Each reason is a plain ``str``
  (Unschedulable) or a :class:`~toposched.scheduler.status.Refusal`, a ``str`` carrying the code
  the per-node ``filter`` gives that row (UnschedulableAndUnresolvable: it can never fit), so the
  code survives the batch path. A necessary condition is allowed
  when the plugin also confirms the chosen node after Reserve (NUMAAlignment).
  Optional derived forms: :class:`FewRowsFilter` ``filter_few(state, pod, table, rows) ->
  [reason or None]`` (the same verdicts and reasons, codes included, in plain Python, for a few
  changed rows) and :class:`NodeFilter` ``filter(state, pod, node) -> Status`` (one node, with its
  code and precise message: the reference semantics, and ``explain``).
  A plugin without a batch form (NodeResourceTopologyMatch) is run node by node.
  :class:`KeyedFilter` ``filter_key(state, pod)``: what of the pod the verdicts read, so they are
  kept per key for every row and recomputed only where a node changed (likewise :class:`KeyedScore`).
* :class:`PostFilter` ``post_filter(state, pod, reasons) -> (nominated node or None, Status)``.
* :class:`PreScore` ``pre_score(state, pod, rows) -> Status``.
* :class:`Score` ``score_all(state, pod, table, rows) -> int[rows]`` (0..``MAX_NODE_SCORE``);
  derived forms :class:`FewRowsScore` ``score_few`` and :class:`NodeScore` ``score(state, pod, node, table)``.
* :class:`NormalizeScore` ``normalize_scores(state, pod, raw) -> scores`` over the feasible rows;
  optionally :class:`NormalizesSome` ``normalizes(state, pod) -> bool`` (whether this pod's scores need it).
* :class:`Reserve` ``reserve(state, pod, node) -> Status`` and ``unreserve(state, pod, node)``.
* :class:`Confirm` ``confirm(state, pod, node, placement) -> Status`` — after the kubelet replica
  admitted the pod (post-Reserve); may write :data:`PLACEMENT_OVERRIDE` to replace the placement.
* :class:`PreBind` ``pre_bind(state, pod, node, placement) -> Status``; :class:`Bind`
  ``bind(state, pod, node, placement) -> requests``; :class:`PostBind` ``post_bind(state, pod, node)``.
* Lifecycle: :class:`Attach` ``attach(cluster, profile_name)`` once when the runner is built;
  :class:`Clock` ``advance(now) -> node names`` at the start of every cycle (the nodes whose
  answers changed with time alone).

A method set to ``None`` on a plugin class disables that point (a subclass opting out).

Two traits are declared as class attributes, each a Protocol of a ``Literal[True]`` flag that
:func:`implements` tests like any other point (a flag set to False is not declared):

* :class:`RowLocal` ``row_local = True`` — a filter or score plugin without a batch form whose
  per-node answer reads only that node's record and the pod, so the Scheduler may keep its
  answers per row and pod shape as it keeps batch forms' (NodeResourceTopologyMatch).
* :class:`ExactPlacement` ``exact_placement = True`` — a filter whose decision needs the exact
  placement: Reserve then goes through the node's kubelet replica (:attr:`Profile.exact`).

Cycle state is a :class:`CycleState` keyed by :class:`StateKey` objects; each key is defined
next to the plugin that writes it, and readers import that key.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np

from toposched.errors import InputError

if TYPE_CHECKING:
    from toposched.scheduler.cluster import Cluster, NodeRecord
    from toposched.scheduler.placement import Placement
    from toposched.scheduler.status import Status
    from toposched.scheduler.table import NodeTable
    from toposched.workload import Pod

__all__ = [
    "CLUSTER",
    "MAX_NODE_SCORE",
    "PLACEMENT_OVERRIDE",
    "SKIPPED_FILTERS",
    "Attach",
    "Bind",
    "Clock",
    "Confirm",
    "CycleState",
    "ExactPlacement",
    "FewRowsFilter",
    "FewRowsScore",
    "Filter",
    "KeyedFilter",
    "KeyedScore",
    "NodeFilter",
    "NodeScore",
    "NormalizeScore",
    "NormalizesSome",
    "PostBind",
    "PostFilter",
    "PreBind",
    "PreFilter",
    "PreScore",
    "Profile",
    "Registry",
    "Reserve",
    "RowLocal",
    "RowReasons",
    "Score",
    "StateKey",
    "implements",
    "registry",
]

MAX_NODE_SCORE = 100

T = TypeVar("T")


class StateKey(Generic[T]):
    """A typed :class:`CycleState` entry, owned by the plugin (or the framework) that writes it.

    Keys compare by identity: two keys with one name are two entries.
    """

    __slots__ = ("name", "owner")

    def __init__(self, name: str, owner: str) -> None:
        self.name = name
        self.owner = owner

    def __repr__(self) -> str:
        return f"StateKey({self.owner}/{self.name})"


class CycleState(dict):
    """Data plugins share within one scheduling cycle, keyed by :class:`StateKey`."""

    def __init__(self, cluster: Cluster | None = None) -> None:
        super().__init__()
        if cluster is not None:
            self[CLUSTER] = cluster

    def read(self, key: StateKey[T]) -> T | None:
        """The value written under ``key`` this cycle, or None."""
        return self.get(key)

    def write(self, key: StateKey[T], value: T) -> None:
        """Write ``value`` under ``key``."""
        self[key] = value

    @property
    def cluster(self) -> Cluster | None:
        """The cluster this cycle schedules onto (None in a bare state built by a test or helper)."""
        return self.get(CLUSTER)


# The framework's own keys. CLUSTER: the cluster the cycle runs on. PLACEMENT_OVERRIDE: where a
# confirm hook leaves the placement that replaces the replica's (the cpuset or device ids an
# agent enforces instead of the kubelet); later confirm hooks are given it instead of the
# replica's, and the runner applies it to the ledger before the Reserve plugins run.
CLUSTER: StateKey[Cluster] = StateKey("cluster", "framework")
PLACEMENT_OVERRIDE: StateKey[Placement] = StateKey("placement-override", "framework")
# The names of the plugins whose PreFilter returned Skip this cycle: their Filter does not run.
SKIPPED_FILTERS: StateKey[frozenset[str]] = StateKey("skipped-filters", "framework")


# ---- extension points --------------------------------------------------------------------------


@runtime_checkable
class PreFilter(Protocol):
    """Reads the pod once per cycle."""

    def pre_filter(self, state: CycleState, pod: Pod) -> Status: ...


@runtime_checkable
class Filter(Protocol):
    """The batch filter over table rows."""

    def filter_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> tuple[np.ndarray, Any]: ...


@runtime_checkable
class KeyedFilter(Protocol):
    """A batch filter whose verdict and reason on a row depend on that row and ``filter_key`` alone
    (None: no key for this pod); the runner then keeps its verdicts per key, updated at changed rows."""

    def filter_key(self, state: CycleState, pod: Pod) -> Hashable | None: ...


@runtime_checkable
class FewRowsFilter(Protocol):
    """The batch filter's verdicts for a few rows, in plain Python."""

    def filter_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[str | None]: ...


@runtime_checkable
class NodeFilter(Protocol):
    """One node's verdict with its code (the reference semantics)."""

    def filter(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status: ...


@runtime_checkable
class PostFilter(Protocol):
    """When no node fits: may nominate one (preemption)."""

    def post_filter(self, state: CycleState, pod: Pod, reasons: Mapping[str, int]) -> tuple[str | None, Status]: ...


@runtime_checkable
class PreScore(Protocol):
    """Once before scoring the feasible rows."""

    def pre_score(self, state: CycleState, pod: Pod, rows: np.ndarray) -> Status: ...


@runtime_checkable
class Score(Protocol):
    """The batch score over table rows, 0..MAX_NODE_SCORE (raw for a NormalizeScore plugin)."""

    def score_all(self, state: CycleState, pod: Pod, table: NodeTable, rows: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class KeyedScore(Protocol):
    """A batch score whose value on a row depends on that row and ``score_key`` alone (None: no key)."""

    def score_key(self, state: CycleState, pod: Pod) -> Hashable | None: ...


@runtime_checkable
class FewRowsScore(Protocol):
    """The batch score for a few rows, in plain Python."""

    def score_few(self, state: CycleState, pod: Pod, table: NodeTable, rows: list[int]) -> list[int]: ...


@runtime_checkable
class NodeScore(Protocol):
    """One node's score (plugins without a batch form)."""

    def score(self, state: CycleState, pod: Pod, node: NodeRecord, table: NodeTable) -> int: ...


@runtime_checkable
class NormalizeScore(Protocol):
    """Raw scores normalized over the feasible rows, for the pods that need it."""

    def normalize_scores(self, state: CycleState, pod: Pod, raw: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class NormalizesSome(Protocol):
    """A NormalizeScore plugin that normalizes only some pods' scores (without it: every pod's)."""

    def normalizes(self, state: CycleState, pod: Pod) -> bool: ...


@runtime_checkable
class Reserve(Protocol):
    """Reserve and Unreserve (Unreserve gives back exactly what Reserve took)."""

    def reserve(self, state: CycleState, pod: Pod, node: NodeRecord) -> Status: ...

    def unreserve(self, state: CycleState, pod: Pod, node: NodeRecord) -> None: ...


@runtime_checkable
class Confirm(Protocol):
    """After the replica admitted the pod: accept its placement, refuse, or write PLACEMENT_OVERRIDE."""

    def confirm(self, state: CycleState, pod: Pod, node: NodeRecord, placement: Placement) -> Status: ...


@runtime_checkable
class PreBind(Protocol):
    """Before binding; a refusal makes the caller unreserve."""

    def pre_bind(self, state: CycleState, pod: Pod, node: NodeRecord, placement: Placement | None) -> Status: ...


@runtime_checkable
class Bind(Protocol):
    """The API requests that bind the pod."""

    def bind(self, state: CycleState, pod: Pod, node: NodeRecord, placement: Placement | None) -> list[dict[str, Any]]: ...


@runtime_checkable
class PostBind(Protocol):
    """After the binding went through."""

    def post_bind(self, state: CycleState, pod: Pod, node: NodeRecord) -> None: ...


@runtime_checkable
class Attach(Protocol):
    """Once, when the runner is built on a cluster."""

    def attach(self, cluster: Cluster, profile_name: str) -> None: ...


@runtime_checkable
class Clock(Protocol):
    """At the start of every cycle: the nodes whose answers changed with time alone."""

    def advance(self, now: float) -> Iterable[str]: ...


@runtime_checkable
class RowLocal(Protocol):
    """Declares (``row_local = True``) that the plugin's per-node filter and score answers for a node
    read only that node's record and the pod: a plugin without a batch form is then cached per row
    and pod shape like the batch forms. Batch forms are row-local by contract and need not declare it."""

    row_local: Literal[True]


@runtime_checkable
class ExactPlacement(Protocol):
    """Declares (``exact_placement = True``) that the filter decides or checks the exact placement
    (CPUs, NUMA nodes, devices): the profile's Reserve then admits the pod into the kubelet replica."""

    exact_placement: Literal[True]


# Per Protocol: its methods (None on a plugin: opted out) and its flags (declared only when True).
_MEMBERS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def implements(plugin: Any, point: type) -> bool:
    """Whether ``plugin`` implements the extension point or trait ``point`` (one of the Protocols
    above): it has the point's methods, none of them set to None (a subclass opting out), and the
    point's flags (:class:`RowLocal`, :class:`ExactPlacement`) set to True."""
    if not isinstance(plugin, point):
        return False
    members = _MEMBERS.get(point)
    if members is None:
        methods = tuple(n for n in vars(point) if not n.startswith("_") and callable(vars(point)[n]))
        flags = tuple(n for n in vars(point).get("__annotations__", {}) if not n.startswith("_"))
        members = _MEMBERS[point] = (methods, flags)
    methods, flags = members
    return all(getattr(plugin, n) is not None for n in methods) and all(getattr(plugin, n) is True for n in flags)


@dataclass(frozen=True)
class RowReasons(Sequence[str]):
    """A batch filter's reason per row, as codes into a few texts: row ``i`` reads ``texts[codes[i]]``.

    A sequence of the texts, row by row; the scheduler maps the codes without a Python loop over rows.
    A text may be a :class:`~toposched.scheduler.status.Refusal` (its Status code), so one text can
    appear twice, once per code.
    """

    codes: np.ndarray
    texts: Sequence[str]

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.texts[c] for c in self.codes[i].tolist()]
        return self.texts[int(self.codes[i])]


PluginFactory = Callable[[Any], Any]  # args: a mapping, or the object a profile's args parser returned


class Registry:
    """Plugins by name: a factory taking the plugin's args, and the extension points it implements."""

    # Per extension point, the methods any of which implements it (a filter or score plugin may
    # have its batch form only: the runner derives the others).
    _POINTS = {
        "preFilter": ("pre_filter",),
        "filter": ("filter_all", "filter"),
        "postFilter": ("post_filter",),
        "preScore": ("pre_score",),
        "score": ("score_all", "score"),
        "reserve": ("reserve",),
        "preBind": ("pre_bind",),
        "bind": ("bind",),
    }

    def __init__(self) -> None:
        self._factories: dict[str, tuple[PluginFactory, type]] = {}

    def register(self, cls: type, factory: PluginFactory | None = None) -> type:
        """Register a plugin class under its ``name`` (usable as a class decorator)."""
        self._factories[cls.name] = (factory or (lambda args: cls(args)), cls)
        return cls

    def names(self) -> list[str]:
        """Registered plugin names, sorted."""
        return sorted(self._factories)

    def points(self, name: str) -> set[str]:
        """The extension points (upstream's names: "filter", "score", ...) a plugin implements."""
        _, cls = self._factories[name]
        return {point for point, methods in self._POINTS.items()
                if any(getattr(cls, method, None) is not None for method in methods)}

    def known(self) -> dict[str, set[str]]:
        """Every plugin with its extension points."""
        return {name: self.points(name) for name in self._factories}

    def create(self, name: str, args: Any = None) -> Any:
        """A plugin instance; unknown names raise InputError."""
        if name not in self._factories:
            raise InputError(f"unknown plugin {name!r}; known: {', '.join(self.names())}", field="plugins")
        return self._factories[name][0](args or {})


registry = Registry()


@dataclass
class Profile:
    """A scheduler profile: plugin instances per extension point, and score weights."""

    name: str
    filters: list[Any] = field(default_factory=list)
    scores: list[tuple[Any, int]] = field(default_factory=list)
    reserves: list[Any] = field(default_factory=list)
    pre_filters: list[Any] = field(default_factory=list)
    post_filters: list[Any] = field(default_factory=list)
    pre_scores: list[Any] = field(default_factory=list)
    pre_binds: list[Any] = field(default_factory=list)
    binder: Any = None
    # kube-scheduler's percentageOfNodesToScore (see toposched.scheduler.sampling): 100 looks at
    # every node, 0 is upstream's adaptive share. A profile built in code looks at every node;
    # one read from a configuration file takes the file's value (upstream's default 0 if unset).
    percentage_of_nodes_to_score: int = 100

    @property
    def exact(self) -> bool:
        """True when a plugin decides exact placement: Reserve then goes through the node's kubelet replica.

        Profiles without such a plugin (the topology-blind default, scheduler-plugins' nrt-match)
        bind without predicting the kubelet, as their real counterparts do.
        """
        return any(implements(p, ExactPlacement) for p in self.filters)

    @classmethod
    def from_config(cls, config: Any, reg: Registry | None = None) -> Profile:
        """A profile from a :class:`~toposched.scheduler.profiles.ProfileConfig`: its filters, weighted scores and args."""
        reg = reg or registry
        args = {name: config.args(name) for name in config.plugin_args}
        profile = cls.build(
            config.scheduler_name,
            filters=list(config.enabled("filter")),
            scores=[(name, config.score_weight(name)) for name in config.enabled("score")],
            args=args,
            reg=reg,
        )
        binders = config.enabled("bind")
        if binders:
            profile.binder = reg.create(binders[0], args.get(binders[0]))
        profile.percentage_of_nodes_to_score = config.percentage_of_nodes_to_score
        return profile

    @classmethod
    def build(cls, name: str, *, filters: list[str], scores: list[tuple[str, int]],
              args: Mapping[str, Any] | None = None, reg: Registry | None = None) -> Profile:
        """Instantiate the named plugins once each; a plugin listed at several points is one object."""
        args = args or {}
        reg = reg or registry
        made: dict[str, Any] = {}

        def get(plugin: str) -> Any:
            if plugin not in made:
                made[plugin] = reg.create(plugin, args.get(plugin))
            return made[plugin]

        profile = cls(name)
        for plugin in filters:
            profile.filters.append(get(plugin))
        for plugin, weight in scores:
            profile.scores.append((get(plugin), weight))
        for plugin in made.values():
            for method, points in (("pre_filter", profile.pre_filters), ("post_filter", profile.post_filters),
                                   ("pre_score", profile.pre_scores), ("reserve", profile.reserves),
                                   ("pre_bind", profile.pre_binds)):
                if getattr(plugin, method, None) is not None:
                    points.append(plugin)
        return profile
