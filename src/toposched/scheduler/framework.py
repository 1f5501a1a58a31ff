"""The scheduling framework's shape: plugins per extension point, a per-cycle state, profiles.

A plugin is an object with a ``name`` and any of these methods (each extension point is one
small method, as in kube-scheduler's framework):

* ``pre_filter(state, pod) -> Status`` — once per cycle; may store data in ``state``.
* ``filter(state, pod, node: NodeRecord) -> Status`` — one node, the reference semantics.
* ``filter_all(state, pod, table, rows) -> (ok: bool[rows], reason)`` — optional vector form:
  the same verdict for the given rows at once, with one reason string or one per row (a necessary condition is allowed when the plugin's
  ``exact(...)`` confirms the chosen node, see NUMAAlignment).
* ``filter_few(state, pod, table, rows: list[int]) -> list[reason or None]`` — optional, the
  vector form's verdict and reason for a few rows in plain Python (None where a row passes); the
  scheduler uses it when only a few rows changed, where NumPy's fixed cost per call dominates.
  It must agree exactly with ``filter_all`` on the same rows.
* ``post_filter(state, pod, reasons) -> (nominated node or None, Status)`` — when no node fits.
* ``pre_score(state, pod, rows) -> Status`` — once, before scoring the feasible rows.
* ``score(state, pod, node, table) -> int`` and optional ``score_all(state, pod, table, rows) -> int[rows]``
  and ``score_few(state, pod, table, rows: list[int]) -> list[int]`` (``score_all`` for a few rows);
  optional ``normalize_scores(state, pod, scores) -> scores`` (NormalizeScore) over the feasible rows.
* ``reserve(state, pod, node) -> Status`` / ``unreserve(state, pod, node)``.
* ``pre_bind(state, pod, node, placement) -> Status``; ``bind(state, pod, node, placement) -> requests``.

Scores are 0..100 (``MAX_NODE_SCORE``) before the profile's weight is applied.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toposched.errors import InputError

__all__ = ["MAX_NODE_SCORE", "PLACEMENT_OVERRIDE_KEY", "CycleState", "Profile", "Registry", "RowReasons", "registry"]

MAX_NODE_SCORE = 100

# The CycleState key under which a confirm hook leaves the placement that replaces the replica's
# (the cpuset or device ids an agent enforces instead of the kubelet). Later confirm hooks are
# given it instead of the replica's, and the scheduler applies it to the ledger before Reserve.
PLACEMENT_OVERRIDE_KEY = "placement-override"


@dataclass(frozen=True)
class RowReasons(Sequence[str]):
    """A batch filter's reason per row, as codes into a few texts: row ``i`` reads ``texts[codes[i]]``.

    A sequence of the texts, row by row; the scheduler maps the codes without a Python loop over rows.
    """

    codes: np.ndarray
    texts: Sequence[str]

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.texts[c] for c in self.codes[i].tolist()]
        return self.texts[int(self.codes[i])]


class CycleState(dict):
    """Data plugins share within one scheduling cycle (keyed by plugin name)."""


PluginFactory = Callable[[Any], Any]  # args: a mapping, or the object a profile's args parser returned


class Registry:
    """Plugins by name: a factory taking the plugin's args, and the extension points it implements."""

    _POINTS = {
        "preFilter": "pre_filter",
        "filter": "filter",
        "postFilter": "post_filter",
        "preScore": "pre_score",
        "score": "score",
        "reserve": "reserve",
        "preBind": "pre_bind",
        "bind": "bind",
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
        return {point for point, method in self._POINTS.items() if getattr(cls, method, None) is not None}

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

    @property
    def exact(self) -> bool:
        """True when a plugin decides exact placement: Reserve then goes through the node's kubelet replica.

        Profiles without such a plugin (the topology-blind default, scheduler-plugins' nrt-match)
        bind without predicting the kubelet, as their real counterparts do.
        """
        return any(getattr(p, "exact_placement", False) for p in self.filters)

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
