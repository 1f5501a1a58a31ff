"""The scheduler extender's wire format: Go's JSON encoding of ``k8s.io/kube-scheduler/extender/v1``.

The Go types have no json tags, so their keys are the Go field names (``Pod``, ``NodeNames``,
``FailedAndUnresolvableNodes``, ``Host``, ``Score``, ``NodeNameToMetaVictims``, ``UID``, ...).
Reading follows ``encoding/json``: a key matches its field exactly or, failing that, ignoring
case; unknown keys are ignored; ``null`` for a slice or map field leaves it empty. Pods and nodes
stay plain dicts with every field they came with (``Pod.from_dict`` and ``NodeSpec.from_dict``
read them later, and a filter answer echoes the given Node objects unchanged).

Writing follows what kube-scheduler reads. Go encodes a nil slice or map as ``null`` and an
empty one as ``[]``/``{}``; these models always emit ``[]``/``{}`` for the slices and maps
kube-scheduler ranges over (``FailedNodes``, ``FailedAndUnresolvableNodes``, ``Pods`` of victims,
``NodeNameToMetaVictims``, a node list's ``items``, the prioritize list itself). ``Nodes`` and
``NodeNames`` are pointers in Go: the form the request used is emitted (``[]`` when no node
passes, because kube-scheduler with ``nodeCacheCapable`` reads ``NodeNames`` only when it is
not ``null``), the other one is ``null`` exactly as Go encodes a nil pointer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator, model_validator

from toposched.errors import InputError

__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "MIN_EXTENDER_PRIORITY",
    "ExtenderArgs",
    "ExtenderBindingArgs",
    "ExtenderBindingResult",
    "ExtenderFilterResult",
    "ExtenderPreemptionArgs",
    "ExtenderPreemptionResult",
    "HostPriority",
    "HostPriorityList",
    "MetaPod",
    "MetaVictims",
    "NodeList",
    "Victims",
    "dump",
]

# extenderv1.MinExtenderPriority / MaxExtenderPriority: the range of a prioritize score.
MIN_EXTENDER_PRIORITY = 0
MAX_EXTENDER_PRIORITY = 10


class _GoStruct(BaseModel):
    """A Go struct without json tags: PascalCase keys, matched case-insensitively on input."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _fold_keys(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        aliases = {(f.alias or name).lower(): f.alias or name for name, f in cls.model_fields.items()}
        # encoding/json: each key goes to the field it names exactly or, else, ignoring case; a
        # later key for the same field overwrites an earlier one.
        return {aliases.get(k.lower(), k) if isinstance(k, str) else k: v for k, v in data.items()}


def _none_to(empty: Any) -> Any:
    """A ``mode="before"`` validator body: ``null`` decodes to the empty value, as Go leaves a nil slice/map."""

    def convert(cls: Any, value: Any) -> Any:
        return empty() if value is None else value

    return classmethod(convert)


class NodeList(BaseModel):
    """``v1.NodeList``: the Node objects (kept whole), and any ``metadata``/``kind``/``apiVersion`` given."""

    model_config = ConfigDict(extra="allow")

    metadata: dict[str, Any] = Field(default_factory=dict)
    items: list[dict[str, Any]] = Field(default_factory=list)

    _null_metadata = field_validator("metadata", mode="before")(_none_to(dict))
    _null_items = field_validator("items", mode="before")(_none_to(list))

    def names(self) -> list[str]:
        """The nodes' names, in order; InputError for a node without ``metadata.name``."""
        out = []
        for i, node in enumerate(self.items):
            meta = node.get("metadata")
            name = meta.get("name") if isinstance(meta, Mapping) else None
            if not isinstance(name, str) or not name:
                raise InputError("a node has no name", field=f"Nodes.items[{i}].metadata.name",
                                 source="extender request")
            out.append(name)
        return out

    def only(self, names: set[str]) -> NodeList:
        """The same list holding only the named nodes, in their order, each once."""
        kept: dict[str, dict[str, Any]] = {}
        for node in self.items:
            name = (node.get("metadata") or {}).get("name")
            if name in names:
                kept.setdefault(name, node)
        return self.model_copy(update={"items": list(kept.values())})


class ExtenderArgs(_GoStruct):
    """``ExtenderArgs``: the pod and its candidate nodes, as Node objects or (nodeCacheCapable) names."""

    pod: dict[str, Any] | None = Field(default=None, alias="Pod")
    nodes: NodeList | None = Field(default=None, alias="Nodes")
    node_names: list[str] | None = Field(default=None, alias="NodeNames")

    def candidate_names(self) -> list[str]:
        """The candidate nodes' names in the order given: ``NodeNames`` if set, else the names in ``Nodes``."""
        if self.node_names is not None:
            return list(self.node_names)
        if self.nodes is not None:
            return self.nodes.names()
        return []


class ExtenderFilterResult(_GoStruct):
    """``ExtenderFilterResult``: the nodes that pass (in the request's form) and why the others do not."""

    nodes: NodeList | None = Field(default=None, alias="Nodes")
    node_names: list[str] | None = Field(default=None, alias="NodeNames")
    failed_nodes: dict[str, str] = Field(default_factory=dict, alias="FailedNodes")
    failed_and_unresolvable_nodes: dict[str, str] = Field(default_factory=dict, alias="FailedAndUnresolvableNodes")
    error: str = Field(default="", alias="Error")

    _null_failed = field_validator("failed_nodes", "failed_and_unresolvable_nodes", mode="before")(_none_to(dict))
    _null_error = field_validator("error", mode="before")(_none_to(str))


class HostPriority(_GoStruct):
    """``HostPriority``: a node and its score, 0..``MAX_EXTENDER_PRIORITY``."""

    host: str = Field(alias="Host")
    score: int = Field(alias="Score")


class HostPriorityList(RootModel[list[HostPriority]]):
    """``HostPriorityList``: the prioritize answer, a JSON array (``[]`` when empty)."""

    root: list[HostPriority] = Field(default_factory=list)

    _null = field_validator("root", mode="before")(_none_to(list))


class ExtenderBindingArgs(_GoStruct):
    """``ExtenderBindingArgs``: which pod (name, namespace, UID) goes to which node."""

    pod_name: str = Field(default="", alias="PodName")
    pod_namespace: str = Field(default="", alias="PodNamespace")
    pod_uid: str = Field(default="", alias="PodUID")
    node: str = Field(default="", alias="Node")

    _null = field_validator("pod_name", "pod_namespace", "pod_uid", "node", mode="before")(_none_to(str))


class ExtenderBindingResult(_GoStruct):
    """``ExtenderBindingResult``: ``Error`` is empty on success."""

    error: str = Field(default="", alias="Error")

    _null = field_validator("error", mode="before")(_none_to(str))


class MetaPod(_GoStruct):
    """``MetaPod``: a pod named by its UID."""

    uid: str = Field(default="", alias="UID")

    _null = field_validator("uid", mode="before")(_none_to(str))


class Victims(_GoStruct):
    """``Victims``: whole pods to preempt on a node, and the PodDisruptionBudget violations that costs."""

    pods: list[dict[str, Any]] = Field(default_factory=list, alias="Pods")
    num_pdb_violations: int = Field(default=0, alias="NumPDBViolations")

    _null = field_validator("pods", mode="before")(_none_to(list))

    def uids(self) -> list[str]:
        """The victims' ``metadata.uid``, in order (empty strings for pods without one)."""
        return [str((p.get("metadata") or {}).get("uid") or "") for p in self.pods]


class MetaVictims(_GoStruct):
    """``MetaVictims``: the pods to preempt on a node, by UID, and the PDB violations."""

    pods: list[MetaPod] = Field(default_factory=list, alias="Pods")
    num_pdb_violations: int = Field(default=0, alias="NumPDBViolations")

    _null = field_validator("pods", mode="before")(_none_to(list))

    def uids(self) -> list[str]:
        """The victims' UIDs, in order."""
        return [p.uid for p in self.pods]


class ExtenderPreemptionArgs(_GoStruct):
    """``ExtenderPreemptionArgs``: the preemptor and kube-scheduler's victims per candidate node.

    kube-scheduler fills ``NodeNameToMetaVictims`` when the extender is ``nodeCacheCapable``,
    else ``NodeNameToVictims`` (whole pods).
    """

    pod: dict[str, Any] | None = Field(default=None, alias="Pod")
    node_name_to_victims: dict[str, Victims | None] | None = Field(default=None, alias="NodeNameToVictims")
    node_name_to_meta_victims: dict[str, MetaVictims | None] | None = Field(default=None, alias="NodeNameToMetaVictims")

    def victims(self) -> dict[str, tuple[list[str], int]]:
        """Per candidate node: the victims' UIDs and the PDB violations, from whichever map was sent."""
        out: dict[str, tuple[list[str], int]] = {}
        for name, v in (self.node_name_to_meta_victims or {}).items():
            out[name] = (v.uids(), v.num_pdb_violations) if v is not None else ([], 0)
        for name, w in (self.node_name_to_victims or {}).items():
            out.setdefault(name, (w.uids(), w.num_pdb_violations) if w is not None else ([], 0))
        return out


class ExtenderPreemptionResult(_GoStruct):
    """``ExtenderPreemptionResult``: the candidate nodes kept and their victims, always by UID."""

    node_name_to_meta_victims: dict[str, MetaVictims] = Field(default_factory=dict, alias="NodeNameToMetaVictims")

    _null = field_validator("node_name_to_meta_victims", mode="before")(_none_to(dict))


def dump(model: BaseModel) -> str:
    """The model as Go would encode it: keys by alias, every field present (nil pointers as ``null``)."""
    return model.model_dump_json(by_alias=True)
