"""What a pod and a node say about NUMA alignment: pure parsers for the NUMA plugins.

A pod states its wishes in annotations, ours (``toposched.io/...``) or Koordinator's
(``scheduling.koordinator.sh/...``); :func:`pod_intent` reads them once per scheduling cycle
into a :class:`PodIntent`, together with what the kubelet's static CPU policy will give the pod
(exclusive CPUs per container) and the pod's effective requests. A node states its policy in
its NodeResourceTopology report or in a label; :func:`node_topology_policy` reads it into a
:class:`NodePolicy`. :func:`effective_policy` applies Koordinator v1.5's compatibility rule to
the two and names the policy the scheduler must enforce on that node.

Koordinator's JSON annotations are decoded the way Go's ``encoding/json`` decodes them into
Koordinator's structs (unknown keys ignored, ``null`` leaves a field unset, keys matched
case-insensitively when no key matches exactly, the last of repeated keys wins); where Go would
silently accept a value Koordinator does not define (an unknown policy name), we refuse it.
docs/scheduler/annotations.md lists every annotation, the precedence and the rule.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toposched.devices.joint import DeviceScope
from toposched.errors import InputError
from toposched.kubelet.cpu_manager import guaranteed_cpus, pod_guaranteed_cpus
from toposched.kubelet.scope import SCOPE_CONTAINER, SCOPE_POD
from toposched.kubelet.topology_manager import (
    POLICIES,
    POLICY_BEST_EFFORT,
    POLICY_NONE,
    POLICY_RESTRICTED,
    POLICY_SINGLE_NUMA_NODE,
)
from toposched.names import (
    CPU_BIND_POLICY_ANNOTATION,
    DEVICE_SCOPE_ANNOTATION,
    KOORDINATOR_DEVICE_JOINT_ALLOCATE,
    KOORDINATOR_NUMA_POLICY_LABEL,
    KOORDINATOR_NUMA_TOPOLOGY_SPEC,
    KOORDINATOR_RESOURCE_SPEC,
    NUMA_POLICY_ANNOTATION,
    NUMA_POLICY_LABEL,
    TOPOLOGY_MANAGER_POLICY_ATTRIBUTE,
    TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE,
)
from toposched.scheduler.status import Status
from toposched.topology.nrt import NodeResourceTopology, detect_topology_policy
from toposched.workload import Pod

__all__ = [
    "CPU_BIND_POLICY_ANNOTATION",
    "DEVICE_SCOPE_ANNOTATION",
    "DeviceScope",
    "KOORDINATOR_DEVICE_JOINT_ALLOCATE",
    "KOORDINATOR_NUMA_POLICY_LABEL",
    "KOORDINATOR_NUMA_TOPOLOGY_SPEC",
    "KOORDINATOR_RESOURCE_SPEC",
    "NUMA_POLICY_ANNOTATION",
    "NUMA_POLICY_LABEL",
    "NodePolicy",
    "PodIntent",
    "REASON_POLICY_MISMATCH",
    "SOURCE_DEFAULT",
    "SOURCE_KUBELET_CONFIG",
    "SOURCE_KOORDINATOR_LABEL",
    "SOURCE_LABEL",
    "SOURCE_NRT_ATTRIBUTES",
    "SOURCE_NRT_POLICIES",
    "effective_policy",
    "node_topology_policy",
    "pod_intent",
]

# ---- names on the wire ---------------------------------------------------------------------


# Koordinator's ErrNotMatchNUMATopology, kept verbatim so aggregated reasons read as upstream's.
REASON_POLICY_MISMATCH = "node(s) NUMA Topology policy not match"

FULL_PCPUS = "FullPCPUs"
SPREAD_BY_PCPUS = "SpreadByPCPUs"
_BIND_DEFAULT = "Default"
_BIND_CONSTRAINED_BURST = "ConstrainedBurst"
_BIND_POLICIES = (FULL_PCPUS, SPREAD_BY_PCPUS)
_KOORDINATOR_BIND_POLICIES = ("", _BIND_DEFAULT, FULL_PCPUS, SPREAD_BY_PCPUS, _BIND_CONSTRAINED_BURST)

PCPU_LEVEL = "PCPULevel"
NUMA_NODE_LEVEL = "NUMANodeLevel"
_KOORDINATOR_EXCLUSIVE_POLICIES = {"": "", "None": "", PCPU_LEVEL: PCPU_LEVEL, NUMA_NODE_LEVEL: NUMA_NODE_LEVEL}

EXCLUSIVE_REQUIRED = "Required"
EXCLUSIVE_PREFERRED = "Preferred"
_NUMA_EXCLUSIVE = ("", EXCLUSIVE_REQUIRED, EXCLUSIVE_PREFERRED)

# Koordinator's NUMATopologyPolicy on a pod: "" is its "none".
_KOORDINATOR_POD_POLICIES = {
    "": "",
    "BestEffort": POLICY_BEST_EFFORT,
    "Restricted": POLICY_RESTRICTED,
    "SingleNUMANode": POLICY_SINGLE_NUMA_NODE,
}
# The node label also takes "None", as people write it.
_KOORDINATOR_NODE_POLICIES = {**_KOORDINATOR_POD_POLICIES, "None": POLICY_NONE, "": POLICY_NONE}

SCOPE_PCIE = "pcie"
SCOPE_NUMA = "numa"
SCOPE_NODE = "node"
_DEVICE_SCOPES = (SCOPE_PCIE, SCOPE_NUMA, SCOPE_NODE)
_STRENGTHS = {"required": True, "preferred": False}
_KOORDINATOR_DEVICE_TYPES = ("gpu", "rdma", "fpga")
_KOORDINATOR_SAME_PCIE = "SamePCIe"

SOURCE_NRT_ATTRIBUTES = "NodeResourceTopology attributes"
SOURCE_NRT_POLICIES = "NodeResourceTopology topologyPolicies"
SOURCE_LABEL = f"label {NUMA_POLICY_LABEL}"
SOURCE_KOORDINATOR_LABEL = f"label {KOORDINATOR_NUMA_POLICY_LABEL}"
SOURCE_DEFAULT = "default"
SOURCE_KUBELET_CONFIG = "kubelet configuration"  # the node's KubeletConfiguration, known directly

# The deprecated topologyPolicies values: the six NFD derives (inverted from
# detect_topology_policy), plus v1alpha1's level-less names, which predate the pod scope and so
# stand for the kubelet's default scope, container. "SingleNUMANode" is in no enum but is what
# noderesourcetopology-api's own example instance carries.
_DEPRECATED_POLICIES: dict[str, tuple[str, str]] = {
    detect_topology_policy(policy, scope): (policy, scope)
    for policy in (POLICY_BEST_EFFORT, POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE)
    for scope in (SCOPE_CONTAINER, SCOPE_POD)
}
_DEPRECATED_POLICIES.update({
    "None": (POLICY_NONE, SCOPE_CONTAINER),
    "BestEffort": (POLICY_BEST_EFFORT, SCOPE_CONTAINER),
    "Restricted": (POLICY_RESTRICTED, SCOPE_CONTAINER),
    "SingleNUMANode": (POLICY_SINGLE_NUMA_NODE, SCOPE_CONTAINER),
})
_SCOPES = (SCOPE_CONTAINER, SCOPE_POD)

_EMPTY: Mapping[str, int] = MappingProxyType({})


# ---- the values ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodIntent:
    """What a pod asks of NUMA alignment and CPU placement, read once per scheduling cycle.

    * ``numa_policy``: "" (nothing stated), ``none``, ``best-effort``, ``restricted`` or
      ``single-numa-node``; ``numa_policy_source`` is the annotation it came from ("" when none).
    * ``single_numa_exclusive``: Koordinator's ``singleNUMANodeExclusive`` as written ("",
      ``Required``, ``Preferred``); :attr:`numa_exclusive` applies Koordinator's default.
    * ``cpu_bind_policy``: "" (the scheduler's default applies), ``FullPCPUs`` or ``SpreadByPCPUs``;
      ``cpu_bind_required`` when the node must honour it or be filtered out.
    * ``cpu_exclusive_policy``: "", ``PCPULevel`` or ``NUMANodeLevel`` (always a preference).
    * ``exclusive_cpus``: per container (init containers and sidecars included), the exclusive
      CPUs the kubelet's static policy gives it; ``pod_exclusive_cpus`` the pod's peak of them.
    * ``requests``: the pod's effective requests in canonical units (cpu in millicores).
    """

    numa_policy: str = ""
    numa_policy_source: str = ""
    single_numa_exclusive: str = ""
    cpu_bind_policy: str = ""
    cpu_bind_required: bool = False
    cpu_bind_source: str = ""
    cpu_exclusive_policy: str = ""
    device_scope: DeviceScope | None = None
    exclusive_cpus: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    pod_exclusive_cpus: int = 0
    requests: Mapping[str, int] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "exclusive_cpus", MappingProxyType(dict(self.exclusive_cpus)))
        object.__setattr__(self, "requests", MappingProxyType(dict(self.requests)))

    @property
    def states_numa_policy(self) -> bool:
        """True when the pod asks for an alignment policy (anything but "" and ``none``)."""
        return self.numa_policy not in ("", POLICY_NONE)

    @property
    def numa_exclusive(self) -> str:
        """``singleNUMANodeExclusive`` as Koordinator's Filter applies it.

        Koordinator defaults it to ``Required`` when the pod states a NUMA policy and leaves it
        empty; a pod that states no policy keeps "" (nodes keep their earlier behaviour).
        """
        if not self.single_numa_exclusive and self.states_numa_policy:
            return EXCLUSIVE_REQUIRED
        return self.single_numa_exclusive


@dataclass(frozen=True, slots=True)
class NodePolicy:
    """A node's NUMA policy and scope, and where they were read (one of the ``SOURCE_*`` names)."""

    policy: str = POLICY_NONE
    scope: str = SCOPE_CONTAINER
    source: str = SOURCE_DEFAULT

    @property
    def from_kubelet(self) -> bool:
        """True when the node's report states the kubelet's own Topology Manager policy."""
        return self.source in (SOURCE_NRT_ATTRIBUTES, SOURCE_NRT_POLICIES, SOURCE_KUBELET_CONFIG)


# ---- Go's encoding/json, as far as Koordinator's structs need it ----------------------------


class _Object(list):
    """A JSON object kept as its (key, value) pairs in document order."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, _Object) else "array"


def _decode_struct(text: str, fields: Mapping[str, type], *, key: str, where: str) -> dict[str, Any]:
    """Decode ``text`` as Go's ``json.Unmarshal`` decodes it into a struct with these JSON fields.

    ``fields`` maps each JSON field name to ``str`` or ``list`` (a list of strings). Returns the
    fields the document sets. Unknown keys are ignored and ``null`` leaves a field unset (also
    at the top level); a key matches a field exactly or else case-insensitively; a repeated key
    keeps its last value. Anything else Go refuses raises InputError naming ``key`` and ``where``.
    """
    try:
        doc = json.loads(text, object_pairs_hook=_Object, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"not valid JSON: {exc}", field=key, source=where) from None
    if doc is None:
        return {}
    if not isinstance(doc, _Object):
        raise InputError(f"expected a JSON object, got {_json_kind(doc)}", field=key, source=where)
    folded = {name.casefold(): name for name in fields}
    out: dict[str, Any] = {}
    for name, value in doc:
        target = name if name in fields else folded.get(name.casefold())
        if target is None or value is None:
            continue
        if fields[target] is str:
            if not isinstance(value, str):
                raise InputError(f"{target} must be a string, got {_json_kind(value)}", field=key, source=where)
        elif not isinstance(value, list) or isinstance(value, _Object):
            raise InputError(f"{target} must be a list of strings, got {_json_kind(value)}", field=key, source=where)
        else:
            for item in value:
                if item is not None and not isinstance(item, str):
                    raise InputError(f"{target} must be a list of strings, got an element of type "
                                     f"{_json_kind(item)}", field=key, source=where)
            # Go leaves a null element at the zero value, the empty string.
            value = ["" if item is None else item for item in value]
        out[target] = value
    return out


def _one_of(value: str, allowed: Sequence[str], what: str, *, key: str, where: str) -> str:
    if value not in allowed:
        shown = ", ".join(repr(a) for a in allowed)
        raise InputError(f"{what} {value!r} is not one of {shown}", field=key, source=where)
    return value


# ---- the pod -------------------------------------------------------------------------------


def pod_intent(pod: Pod, *, default_cpu_bind_policy: str = FULL_PCPUS) -> PodIntent:
    """Read what ``pod`` asks of NUMA alignment, CPU binding and device locality.

    Ours (``toposched.io/...``) wins over Koordinator's annotation for the same wish; every
    annotation present is read and checked even when another one wins. ``default_cpu_bind_policy``
    is what Koordinator's ``requiredCPUBindPolicy: Default`` resolves to (its scheduler's
    ``defaultCPUBindPolicy``, ``FullPCPUs`` unless configured). A malformed annotation (bad JSON,
    a wrong type, an unknown policy name) raises InputError with ``field`` = the annotation key
    and ``source`` = ``pod <namespace>/<name>``. The pod itself is not changed.
    """
    where = f"pod {pod.key}"
    annotations = pod.annotations
    _one_of(default_cpu_bind_policy, _BIND_POLICIES, "default CPU bind policy", key="default_cpu_bind_policy",
            where="scheduler configuration")

    numa_policy, numa_source, exclusive = _numa_policy(annotations, where)
    bind, required, bind_source, cpu_exclusive = _cpu_bind(annotations, where, default_cpu_bind_policy)
    return PodIntent(
        numa_policy=numa_policy,
        numa_policy_source=numa_source,
        single_numa_exclusive=exclusive,
        cpu_bind_policy=bind,
        cpu_bind_required=required,
        cpu_bind_source=bind_source,
        cpu_exclusive_policy=cpu_exclusive,
        device_scope=_device_scope(annotations, where),
        exclusive_cpus={c.name: guaranteed_cpus(pod, c) for c in pod.all_containers},
        pod_exclusive_cpus=pod_guaranteed_cpus(pod),
        requests=pod.effective_requests(),
    )


def _numa_policy(annotations: Mapping[str, str], where: str) -> tuple[str, str, str]:
    policy, source, exclusive = "", "", ""
    key = KOORDINATOR_NUMA_TOPOLOGY_SPEC
    if key in annotations:
        spec = _decode_struct(annotations[key], {"numaTopologyPolicy": str, "singleNUMANodeExclusive": str},
                              key=key, where=where)
        named = _one_of(spec.get("numaTopologyPolicy", ""), tuple(_KOORDINATOR_POD_POLICIES), "numaTopologyPolicy",
                        key=key, where=where)
        policy = _KOORDINATOR_POD_POLICIES[named]
        source = key if policy else ""
        exclusive = _one_of(spec.get("singleNUMANodeExclusive", ""), _NUMA_EXCLUSIVE, "singleNUMANodeExclusive",
                            key=key, where=where)
    ours = annotations.get(NUMA_POLICY_ANNOTATION, "")
    if ours:
        policy = _one_of(ours, POLICIES, "NUMA policy", key=NUMA_POLICY_ANNOTATION, where=where)
        source = NUMA_POLICY_ANNOTATION
    return policy, source, exclusive


def _cpu_bind(annotations: Mapping[str, str], where: str, default: str) -> tuple[str, bool, str, str]:
    bind, required, source, exclusive = "", False, "", ""
    key = KOORDINATOR_RESOURCE_SPEC
    if key in annotations:
        spec = _decode_struct(
            annotations[key],
            {"requiredCPUBindPolicy": str, "preferredCPUBindPolicy": str, "preferredCPUExclusivePolicy": str},
            key=key, where=where,
        )
        wanted = _one_of(spec.get("requiredCPUBindPolicy", ""), _KOORDINATOR_BIND_POLICIES, "requiredCPUBindPolicy",
                         key=key, where=where)
        preferred = _one_of(spec.get("preferredCPUBindPolicy", ""), _KOORDINATOR_BIND_POLICIES,
                            "preferredCPUBindPolicy", key=key, where=where)
        named = _one_of(spec.get("preferredCPUExclusivePolicy", ""), tuple(_KOORDINATOR_EXCLUSIVE_POLICIES),
                        "preferredCPUExclusivePolicy", key=key, where=where)
        exclusive = _KOORDINATOR_EXCLUSIVE_POLICIES[named]
        if wanted == _BIND_DEFAULT:
            wanted = default
        if wanted:
            # A required policy replaces the preferred one; ConstrainedBurst binds no CPUs at all.
            bind = wanted if wanted in _BIND_POLICIES else ""
            required = bool(bind)
        elif preferred in _BIND_POLICIES:
            bind = preferred
        source = key if bind else ""
    ours = annotations.get(CPU_BIND_POLICY_ANNOTATION, "")
    if ours:
        bind = _one_of(ours, _BIND_POLICIES, "CPU bind policy", key=CPU_BIND_POLICY_ANNOTATION, where=where)
        required, source = True, CPU_BIND_POLICY_ANNOTATION
    return bind, required, source, exclusive


def _device_scope(annotations: Mapping[str, str], where: str) -> DeviceScope | None:
    scope: DeviceScope | None = None
    key = KOORDINATOR_DEVICE_JOINT_ALLOCATE
    if key in annotations:
        spec = _decode_struct(annotations[key], {"deviceTypes": list, "requiredScope": str}, key=key, where=where)
        types = spec.get("deviceTypes", [])
        for t in types:
            _one_of(t, _KOORDINATOR_DEVICE_TYPES, "device type", key=key, where=where)
        repeated = sorted({t for t in types if types.count(t) > 1})
        if repeated:
            raise InputError(f"deviceTypes repeats {', '.join(repeated)}", field=key, source=where)
        named = _one_of(spec.get("requiredScope", ""), ("", _KOORDINATOR_SAME_PCIE), "requiredScope",
                        key=key, where=where)
        # Without device types Koordinator allocates nothing jointly; without a required scope it
        # still prefers one PCIe switch, then one NUMA node, then the whole node.
        if types:
            scope = DeviceScope(SCOPE_PCIE, named == _KOORDINATOR_SAME_PCIE, tuple(types), key)
    ours = annotations.get(DEVICE_SCOPE_ANNOTATION, "")
    if ours:
        name, sep, strength = ours.partition(":")
        _one_of(name, _DEVICE_SCOPES, "device scope", key=DEVICE_SCOPE_ANNOTATION, where=where)
        if sep:
            _one_of(strength, tuple(_STRENGTHS), "device scope strength", key=DEVICE_SCOPE_ANNOTATION, where=where)
        scope = DeviceScope(name, _STRENGTHS[strength] if sep else True, (), DEVICE_SCOPE_ANNOTATION)
    return scope


# ---- the node ------------------------------------------------------------------------------


def node_topology_policy(
    nrt: NodeResourceTopology | None, node_labels: Mapping[str, str], *, node_name: str | None = None
) -> NodePolicy:
    """The NUMA policy and scope a node enforces, and where they were read.

    The kubelet's policy from the report comes first: the ``topologyManagerPolicy`` /
    ``topologyManagerScope`` attributes, else the first entry of the deprecated
    ``topologyPolicies`` list. When the report states no policy or ``none``, the node label
    ``toposched.io/numa-policy`` (scope container) applies, else Koordinator's label
    ``node.koordinator.sh/numa-topology-policy`` (scope pod, as Koordinator aligns whole pods),
    else the report's ``none``, else the default ``none``/``container``. Empty label values
    count as absent. An unknown policy, scope or label value raises InputError naming the
    report (``nrt.origin``) or ``node <name>`` and the field.
    """
    kubelet = _kubelet_policy(nrt) if nrt is not None else None
    if kubelet is not None and kubelet.policy != POLICY_NONE:
        return kubelet
    name = node_name or (nrt.name if nrt is not None else None)
    where = f"node {name}" if name else "node"
    ours = node_labels.get(NUMA_POLICY_LABEL, "")
    if ours:
        policy = _one_of(ours, POLICIES, "NUMA policy", key=NUMA_POLICY_LABEL, where=where)
        return NodePolicy(policy, SCOPE_CONTAINER, SOURCE_LABEL)
    koordinator = node_labels.get(KOORDINATOR_NUMA_POLICY_LABEL, "")
    if koordinator:
        named = _one_of(koordinator, tuple(k for k in _KOORDINATOR_NODE_POLICIES if k), "NUMA topology policy",
                        key=KOORDINATOR_NUMA_POLICY_LABEL, where=where)
        return NodePolicy(_KOORDINATOR_NODE_POLICIES[named], SCOPE_POD, SOURCE_KOORDINATOR_LABEL)
    return kubelet if kubelet is not None else NodePolicy()


def _kubelet_policy(nrt: NodeResourceTopology) -> NodePolicy | None:
    policy = scope = None
    source = SOURCE_NRT_POLICIES
    if nrt.top_level_policies:
        first = nrt.top_level_policies[0]
        if first not in _DEPRECATED_POLICIES:
            shown = ", ".join(sorted(_DEPRECATED_POLICIES))
            raise InputError(f"policy {first!r} is not one of {shown}", field="topologyPolicies[0]", source=nrt.origin)
        policy, scope = _DEPRECATED_POLICIES[first]
    attributes = nrt.attributes
    if TOPOLOGY_MANAGER_POLICY_ATTRIBUTE in attributes:
        policy = _one_of(attributes[TOPOLOGY_MANAGER_POLICY_ATTRIBUTE], POLICIES, "Topology Manager policy",
                         key=f"attributes.{TOPOLOGY_MANAGER_POLICY_ATTRIBUTE}", where=nrt.origin)
        source = SOURCE_NRT_ATTRIBUTES
    if TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE in attributes:
        scope = _one_of(attributes[TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE], _SCOPES, "Topology Manager scope",
                        key=f"attributes.{TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE}", where=nrt.origin)
    if policy is None:
        return None
    return NodePolicy(policy, scope or SCOPE_CONTAINER, source)


# ---- the rule ------------------------------------------------------------------------------


def effective_policy(intent: PodIntent, node: NodePolicy) -> tuple[str, Status | None]:
    """The NUMA policy the scheduler must enforce for this pod on this node, or a refusal.

    Koordinator v1.5's rule (``mergeTopologyPolicy``): the pod's and the node's policy must be
    equal unless one of them is empty (here: unstated or ``none``); the pod's policy, when it
    states one, is the one enforced, else the node's. On a mismatch the node can never take the
    pod: the result is ``("none", UnschedulableAndUnresolvable)`` with a reason naming both
    policies and where each was read. Otherwise the status is None.
    """
    pod_policy = intent.numa_policy if intent.states_numa_policy else ""
    node_policy = node.policy if node.policy != POLICY_NONE else ""
    if pod_policy and node_policy and pod_policy != node_policy:
        reason = (f"{REASON_POLICY_MISMATCH}: the pod asks for {pod_policy} ({intent.numa_policy_source}), "
                  f"the node enforces {node_policy} ({node.source})")
        return POLICY_NONE, Status.unresolvable(reason)
    return pod_policy or node_policy or POLICY_NONE, None
