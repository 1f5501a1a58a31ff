"""Topology Manager admission under the container and pod scopes, as upstream.

A model of ``scope.go``, ``scope_container.go``, ``scope_pod.go``, ``scope_none.go`` and the
manager in ``topology_manager.go``, over abstract hint providers (the CPU, memory and device
managers implement :class:`HintProvider`):

* **container scope** — for each container, init containers first and then app containers (in
  spec order, so restartable init containers ("sidecars") are admitted where they stand among
  the init containers), ask every provider for hints, merge them under the policy, refuse the
  pod with :class:`TopologyAffinityError` if the policy does not admit, otherwise record the
  hint and ask every provider to allocate the container;
* **pod scope** — ask every provider once for the pod's hints (the provider sizes the pod's
  effective request: the larger of the app containers plus sidecars and each init container
  plus the sidecars started before it, see ``Pod.effective_requests``), merge once, refuse or
  record that one hint for every container, then allocate container by container in the same
  order;
* **policy none** — no hints, no merge: every container is allocated in the same order.

Allocation stops at the first provider error; the error propagates as upstream's admission
result would carry it (see :meth:`TopologyManager.admit`). As upstream, containers allocated
before a failure stay allocated and recorded: undoing them is the caller's job.

:class:`MaskTopologyManager` decides the same way but lets providers hand over their hints as
int masks that it trusts, and asks them for single-NUMA hints only under single-numa-node:
the kubelet model's fast admission path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from toposched.errors import InputError, ToposchedError
from toposched.kubelet.fast_merge import _fast_best, fast_merge_hints, fast_preferred
from toposched.kubelet.hint_arrays import MaskHintArray
from toposched.kubelet.hints import TopologyHint
from toposched.kubelet.topology_manager import (
    POLICY_NONE,
    POLICY_RESTRICTED,
    POLICY_SINGLE_NUMA_NODE,
    Hint,
    MergeProblem,
    PolicyOptions,
    TopologyAffinityError,
    UnexpectedAdmissionError,
    _exhaustive_best,
    _filter_providers,
    _filter_single_numa,
    finish_merge,
    merge_hints,
    prepare_merge,
)

if TYPE_CHECKING:
    from toposched.workload import Container, Pod

__all__ = [
    "SCOPES",
    "SCOPE_CONTAINER",
    "SCOPE_POD",
    "HintProvider",
    "MaskTopologyManager",
    "TopologyManager",
    "admit_pod",
    "container_providers_hints",
    "pod_providers_hints",
]

SCOPE_CONTAINER = "container"
SCOPE_POD = "pod"
SCOPES = (SCOPE_CONTAINER, SCOPE_POD)

ProviderHints = Mapping[str, Sequence[TopologyHint] | None] | None
MergeFunction = Callable[..., tuple[TopologyHint, bool]]
# A merged hint, or where the policy certainly refuses it, a function computing it (see MaskTopologyManager._merge_lists).
MergedHint = TopologyHint | Callable[[], TopologyHint]


@runtime_checkable
class HintProvider(Protocol):
    """A resource manager the Topology Manager consults (upstream ``HintProvider``).

    The hint methods return ``None`` (no map), or ``{resource: [TopologyHint, ...] | None}``
    with ``None`` meaning "no preference" and ``[]`` "no possible affinity". ``allocate`` raises
    on failure; it may read the hint chosen for the container with
    :meth:`TopologyManager.get_affinity`.
    """

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints:
        """Hints for one container."""
        ...

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints:
        """Hints for the whole pod (pod scope)."""
        ...

    def allocate(self, pod: Pod, container: Container) -> None:
        """Allocate the container's resources after admission, or raise."""
        ...


def container_providers_hints(pod: Pod, container: Container, providers: Iterable[HintProvider]) -> list[ProviderHints]:
    """Every provider's answer for one container, in consultation order, exactly as returned."""
    return [provider.get_topology_hints(pod, container) for provider in providers]


def pod_providers_hints(pod: Pod, providers: Iterable[HintProvider]) -> list[ProviderHints]:
    """Every provider's answer for the whole pod, in consultation order, exactly as returned."""
    return [provider.get_pod_topology_hints(pod) for provider in providers]


def _pod_uid(pod: Pod | str) -> str:
    if isinstance(pod, str):
        return pod
    return pod.uid or pod.key


class TopologyManager:
    """The kubelet's Topology Manager: policy, scope, hint providers and the chosen hints.

    Construction validates the configuration as upstream ``NewManager`` does (policy, scope,
    options, the ``max-allowable-numa-nodes`` limit, the distance matrix for
    ``prefer-closest-numa-nodes``) and raises one :class:`InputError` otherwise. ``merge`` is
    the merge function used (:func:`merge_hints`, upstream's exhaustive one, by default; the
    scheduler may pass :func:`~toposched.kubelet.fast_merge.fast_merge_hints`, which gives the
    same result).

    Chosen hints are recorded per pod UID (the pod's ``namespace/name`` when it has no UID) and
    container name, as upstream's store.
    """

    def __init__(
        self,
        numa_nodes: Iterable[int],
        *,
        policy: str = POLICY_NONE,
        scope: str = SCOPE_CONTAINER,
        options: Mapping[str, Any] | PolicyOptions | None = None,
        distances: Any = None,
        providers: Iterable[HintProvider] = (),
        feature_gates: Mapping[str, bool] | None = None,
        merge: MergeFunction = merge_hints,
    ) -> None:
        problem = prepare_merge(
            policy, numa_nodes, [], options=options, distances=distances, feature_gates=feature_gates
        )
        if scope not in SCOPES:
            raise InputError(f'unknown scope: "{scope}"', field="topologyManagerScope")
        self.policy = policy
        self.scope = scope
        self.options = problem.options
        self.numa_nodes = problem.numa_ids
        self._empty_problem = problem
        self._distances = distances
        self._feature_gates = feature_gates
        self._merge = merge
        self._providers: list[HintProvider] = []
        self._hints: dict[str, dict[str, TopologyHint]] = {}
        for provider in providers:
            self.add_hint_provider(provider)

    @property
    def providers(self) -> tuple[HintProvider, ...]:
        """The hint providers, in consultation order."""
        return tuple(self._providers)

    def add_hint_provider(self, provider: HintProvider) -> None:
        """Consult ``provider`` after the ones already added (upstream ``AddHintProvider``)."""
        missing = [
            f"{method}()"
            for method in ("get_topology_hints", "get_pod_topology_hints", "allocate")
            if not callable(getattr(provider, method, None))
        ]
        if missing:
            raise InputError(f"hint provider {provider!r} lacks {', '.join(missing)}", field="providers")
        self._providers.append(provider)

    def merge(self, providers_hints: Sequence[ProviderHints]) -> tuple[TopologyHint, bool]:
        """Merge the providers' answers under this manager's policy; returns (hint, admit)."""
        return self._merge(
            self.policy,
            self.numa_nodes,
            list(providers_hints),
            options=self.options,
            distances=self._distances,
            feature_gates=self._feature_gates,
        )

    def get_affinity(self, pod: Pod | str, container_name: str) -> TopologyHint:
        """The hint chosen for a container (upstream ``GetAffinity``); nil and not preferred if none.

        ``pod`` is a pod or its UID (``namespace/name`` for a pod without one).
        """
        return self._hints.get(_pod_uid(pod), {}).get(container_name, TopologyHint(None, False))

    def remove_container(self, pod: Pod | str, container_name: str) -> None:
        """Forget the hint recorded for one container (upstream ``RemoveContainer``)."""
        uid = _pod_uid(pod)
        hints = self._hints.get(uid)
        if hints is not None:
            hints.pop(container_name, None)
            if not hints:
                del self._hints[uid]

    def remove_pod(self, pod: Pod | str) -> None:
        """Forget every hint recorded for a pod."""
        self._hints.pop(_pod_uid(pod), None)

    def admit(self, pod: Pod) -> dict[str, TopologyHint]:
        """Admit ``pod`` as the kubelet's Topology Manager does; return the hint per container.

        The mapping lists init containers then app containers. Under the ``none`` policy every
        hint is ``TopologyHint(None, False)`` (nothing is recorded, as upstream's none scope).
        Raises :class:`TopologyAffinityError` when the policy refuses the merged hint (nothing
        of that container, or under the pod scope of the pod, is allocated). A provider's
        allocation error propagates unchanged when it carries an admission ``reason`` (such as
        :class:`TopologyAffinityError` or the CPU manager's SMT alignment error) or is an
        :class:`InputError`; any other :class:`ToposchedError` is wrapped in
        :class:`UnexpectedAdmissionError` with upstream's message.
        """
        containers = (*pod.init_containers, *pod.containers)
        if self.policy == POLICY_NONE:
            for container in containers:
                self._allocate(pod, container)
            return {c.name: TopologyHint(None, False) for c in containers}
        if self.scope == SCOPE_POD:
            return self._admit_pod_scope(pod, containers)
        return self._admit_container_scope(pod, containers)

    def _admit_container_scope(self, pod: Pod, containers: Sequence[Container]) -> dict[str, TopologyHint]:
        chosen: dict[str, TopologyHint] = {}
        for container in containers:
            hint, admit = self._container_merge(pod, container)
            if not admit:
                raise TopologyAffinityError(pod=pod.key, container=container.name, hint=hint)
            self._record(pod, container.name, hint)
            self._allocate(pod, container)
            chosen[container.name] = hint
        return chosen

    def _admit_pod_scope(self, pod: Pod, containers: Sequence[Container]) -> dict[str, TopologyHint]:
        hint, admit = self._pod_merge(pod)
        if not admit:
            raise TopologyAffinityError(pod=pod.key, container=None, hint=hint)
        chosen: dict[str, TopologyHint] = {}
        for container in containers:
            self._record(pod, container.name, hint)
            self._allocate(pod, container)
            chosen[container.name] = hint
        return chosen

    def _container_merge(self, pod: Pod, container: Container) -> tuple[MergedHint, bool]:
        return self.merge(container_providers_hints(pod, container, self._providers))

    def _pod_merge(self, pod: Pod) -> tuple[MergedHint, bool]:
        return self.merge(pod_providers_hints(pod, self._providers))

    def _record(self, pod: Pod, container_name: str, hint: TopologyHint) -> None:
        self._hints.setdefault(_pod_uid(pod), {})[container_name] = hint

    def _allocate(self, pod: Pod, container: Container) -> None:
        for provider in self._providers:
            try:
                provider.allocate(pod, container)
            except ToposchedError as err:
                if isinstance(err, InputError) or isinstance(getattr(err, "reason", None), str):
                    raise
                raise UnexpectedAdmissionError(err, pod=pod.key, container=container.name) from err


# The merges whose choice among the normalised hint lists is known: (merge function, its choice).
_BEST_OF_MERGE: tuple[tuple[Any, Callable[[MergeProblem], Hint]], ...] = (
    (merge_hints, _exhaustive_best),
    (fast_merge_hints, _fast_best),
)
_NO_PREFERENCE: tuple[Hint, ...] = ((None, True),)
_NO_AFFINITY: tuple[Hint, ...] = ((None, False),)


class MaskTopologyManager(TopologyManager):
    """A :class:`TopologyManager` that lets its providers hand over hints as int masks; same decisions.

    A provider with ``topology_masks(pod, container, *, single_numa_only)`` and
    ``pod_topology_masks(pod, *, single_numa_only)`` (the kubelet's own managers) answers
    ``None`` or ``{resource: [(NUMA mask, preferred), ...] | None}`` (bit n is NUMA node n);
    those answers are trusted as they are, so no hint is converted or checked again. Under the
    single-numa-node policy providers are asked for the single-NUMA hints only, the only ones
    that policy's merge reads. Other providers are asked with the :class:`HintProvider`
    methods and checked as :func:`merge_hints` checks them.

    The merged hint is chosen as ``merge`` chooses (:func:`merge_hints` or
    :func:`~toposched.kubelet.fast_merge.fast_merge_hints`); with any other merge function
    every provider is asked for ``TopologyHint`` lists and the merge is called as in
    :class:`TopologyManager`.
    """

    def __init__(self, numa_nodes: Iterable[int], **kwargs: Any) -> None:
        super().__init__(numa_nodes, **kwargs)
        self._best = next((best for merge, best in _BEST_OF_MERGE if merge is self._merge), None)
        self._single_numa_only = self.policy == POLICY_SINGLE_NUMA_NODE
        self._unpinned: tuple[MergedHint, bool] | None = None  # the merge when no provider has a preference
        self._node_set = frozenset(self.numa_nodes)
        self._bits = {n: 1 << n for n in self.numa_nodes}

    def _normalised(self, answer: Any) -> list[tuple[Hint, ...]]:
        """Upstream ``filterProvidersHints`` on one trusted answer."""
        if not answer:
            return [_NO_PREFERENCE]
        out = []
        for hints in answer.values():
            if hints is None:
                out.append(_NO_PREFERENCE)
            elif not hints:
                out.append(_NO_AFFINITY)
            elif isinstance(hints, MaskHintArray):
                out.append(hints)  # kept as arrays for the fast merge (it reads as the tuple it stands for)
            else:
                out.append(tuple(hints))
        return out

    def _merge_lists(self, lists: list[tuple[Hint, ...]]) -> tuple[MergedHint, bool]:
        """The merged hint and whether the policy admits it. Where the fast merge finds no preferred
        hint under a policy that admits only preferred ones, the refusal is certain and the hint
        is handed over as a function computing it (:class:`TopologyAffinityError` calls it when
        read): the non-preferred search is the dearest part of a merge on a wide machine."""
        if self._single_numa_only:
            lists = _filter_single_numa(lists)
        template = self._empty_problem
        problem = MergeProblem(
            template.policy, template.numa_ids, template.default, tuple(lists), template.options, template.distances
        )
        assert self._best is not None
        best = self._best
        if best is _fast_best and problem.policy in (POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE):
            mask = fast_preferred(problem)
            if mask is None:
                return (lambda: finish_merge(problem, *best(problem))[0]), False
            return finish_merge(problem, mask, True)
        return finish_merge(problem, *best(problem))

    def _container_merge(self, pod: Pod, container: Container) -> tuple[MergedHint, bool]:
        if self._best is None:
            return super()._container_merge(pod, container)
        lists: list[tuple[Hint, ...]] = []
        for index, provider in enumerate(self._providers):
            masks = getattr(provider, "topology_masks", None)
            if masks is not None:
                lists.extend(self._normalised(masks(pod, container, single_numa_only=self._single_numa_only)))
            else:
                lists.extend(
                    _filter_providers([provider.get_topology_hints(pod, container)], self._node_set, self._bits, index)
                )
        return self._merge_lists(lists)

    def admit_unpinned(self, pod: Pod) -> dict[str, TopologyHint] | None:
        """:meth:`admit` for a pod the caller knows every provider has no preference for.

        Such a pod (one that pins no CPUs, memory or devices) gets the merge of "no preference"
        from every provider, for each container and for the pod alike: it is computed once and
        recorded, and the providers allocate in the kubelet's order, as :meth:`admit` does,
        without being asked for hints. None (ask :meth:`admit`) when a provider answers only
        through the generic hint calls, under the ``none`` policy (nothing to merge there), or
        when the policy would refuse that merge (:meth:`admit` then raises as upstream).
        """
        if self._best is None or self.policy == POLICY_NONE:
            return None
        if any(getattr(p, "topology_masks", None) is None for p in self._providers):
            return None
        if self._unpinned is None:
            self._unpinned = self._merge_lists([_NO_PREFERENCE] * len(self._providers))
        hint, admit = self._unpinned
        if not admit:
            return None
        chosen: dict[str, TopologyHint] = {}
        for container in (*pod.init_containers, *pod.containers):
            self._record(pod, container.name, hint)
            self._allocate(pod, container)
            chosen[container.name] = hint
        return chosen

    def _pod_merge(self, pod: Pod) -> tuple[MergedHint, bool]:
        if self._best is None:
            return super()._pod_merge(pod)
        lists: list[tuple[Hint, ...]] = []
        for index, provider in enumerate(self._providers):
            masks = getattr(provider, "pod_topology_masks", None)
            if masks is not None:
                lists.extend(self._normalised(masks(pod, single_numa_only=self._single_numa_only)))
            else:
                lists.extend(
                    _filter_providers([provider.get_pod_topology_hints(pod)], self._node_set, self._bits, index)
                )
        return self._merge_lists(lists)


def admit_pod(
    pod: Pod,
    providers: Iterable[HintProvider],
    *,
    policy: str,
    numa_nodes: Iterable[int],
    scope: str = SCOPE_CONTAINER,
    options: Mapping[str, Any] | PolicyOptions | None = None,
    distances: Any = None,
    feature_gates: Mapping[str, bool] | None = None,
    merge: MergeFunction = merge_hints,
) -> dict[str, TopologyHint]:
    """Admit one pod with a fresh :class:`TopologyManager`; the chosen hint per container.

    Same validation, order of calls and errors as :meth:`TopologyManager.admit`.
    """
    manager = TopologyManager(
        numa_nodes,
        policy=policy,
        scope=scope,
        options=options,
        distances=distances,
        providers=providers,
        feature_gates=feature_gates,
        merge=merge,
    )
    return manager.admit(pod)
