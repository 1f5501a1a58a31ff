"""The kubelet settings that decide topology: policies, options, reservations.

Read from a real ``KubeletConfiguration`` (kubelet.config.k8s.io/v1beta1) object or built
directly. Names and defaults follow the kubelet's own: Topology Manager policy ``none`` and
scope ``container``, CPU manager policy ``none``, memory manager policy ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from toposched.errors import InputError
from toposched.quantity import canonical_units, check_amount
from toposched.topology import CPUSet

__all__ = [
    "CPU_MANAGER_OPTIONS",
    "CPU_MANAGER_POLICIES",
    "KubeletConfig",
    "MEMORY_MANAGER_POLICIES",
    "TOPOLOGY_MANAGER_OPTIONS",
    "TOPOLOGY_MANAGER_POLICIES",
    "TOPOLOGY_MANAGER_SCOPES",
]

TOPOLOGY_MANAGER_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_MANAGER_SCOPES = ("container", "pod")
TOPOLOGY_MANAGER_OPTIONS = ("prefer-closest-numa-nodes", "max-allowable-numa-nodes")
CPU_MANAGER_POLICIES = ("none", "static")
CPU_MANAGER_OPTIONS = (
    "full-pcpus-only",
    "distribute-cpus-across-numa",
    "align-by-socket",
    "distribute-cpus-across-cores",
    "strict-cpu-reservation",
    "prefer-align-cpus-by-uncorecache",
)
MEMORY_MANAGER_POLICIES = ("None", "Static")

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True)
class KubeletConfig:
    """The topology-relevant part of a kubelet's configuration, validated.

    ``reserved_memory`` maps NUMA id to {resource: bytes} (the kubelet's ``reservedMemory``);
    ``kube_reserved``/``system_reserved`` map resource to canonical units; ``eviction_memory``
    is the ``evictionHard`` ``memory.available`` threshold in bytes.
    """

    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"
    topology_manager_options: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    cpu_manager_policy: str = "none"
    cpu_manager_options: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    reserved_system_cpus: CPUSet | None = None
    kube_reserved: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    system_reserved: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    eviction_memory: int = 100 * 2**20
    memory_manager_policy: str = "None"
    reserved_memory: Mapping[int, Mapping[str, int]] = field(default_factory=lambda: _EMPTY)
    max_pods: int = 110

    def __post_init__(self) -> None:
        _choice(self.topology_manager_policy, TOPOLOGY_MANAGER_POLICIES, "topologyManagerPolicy")
        _choice(self.topology_manager_scope, TOPOLOGY_MANAGER_SCOPES, "topologyManagerScope")
        _choice(self.cpu_manager_policy, CPU_MANAGER_POLICIES, "cpuManagerPolicy")
        _choice(self.memory_manager_policy, MEMORY_MANAGER_POLICIES, "memoryManagerPolicy")
        for name in self.topology_manager_options:
            _choice(name, TOPOLOGY_MANAGER_OPTIONS, "topologyManagerPolicyOptions")
        for name in self.cpu_manager_options:
            _choice(name, CPU_MANAGER_OPTIONS, "cpuManagerPolicyOptions")
        if self.cpu_manager_options and self.cpu_manager_policy != "static":
            raise InputError("policy options need cpuManagerPolicy static", field="cpuManagerPolicyOptions")
        if self.max_pods <= 0:
            raise InputError(f"maxPods {self.max_pods} must be positive", field="maxPods")
        # Built in code the amounts skip from_dict's parsing: negative or absurd ones are refused here
        # (upstream's parseResourceList: "resource quantity ... cannot be negative").
        for name, amounts in (("kubeReserved", self.kube_reserved), ("systemReserved", self.system_reserved)):
            for resource, value in amounts.items():
                check_amount(value, field=f"{name}.{resource}")
        check_amount(self.eviction_memory, field="evictionHard.memory.available")
        for numa, limits in self.reserved_memory.items():
            for resource, value in limits.items():
                check_amount(value, field=f"reservedMemory[{numa}].limits.{resource}")
        for key in ("topology_manager_options", "cpu_manager_options", "kube_reserved", "system_reserved"):
            object.__setattr__(self, key, MappingProxyType(dict(getattr(self, key))))
        object.__setattr__(
            self, "reserved_memory", MappingProxyType({int(k): MappingProxyType(dict(v)) for k, v in self.reserved_memory.items()})
        )

    @property
    def reserved_cpu_millis(self) -> int:
        """CPU held back from pods: kube-reserved + system-reserved, in millicores."""
        return self.kube_reserved.get("cpu", 0) + self.system_reserved.get("cpu", 0)

    @property
    def reserved_memory_bytes(self) -> int:
        """Memory held back from pods: kube-reserved + system-reserved + the hard eviction threshold."""
        return self.kube_reserved.get("memory", 0) + self.system_reserved.get("memory", 0) + self.eviction_memory

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], source: str | None = None) -> KubeletConfig:
        """Read a ``KubeletConfiguration`` object (the kubelet's ``--config`` file, parsed).

        Unknown fields are ignored; malformed topology fields raise :class:`InputError`, and so does
        what the kubelet refuses to start with: the static CPU manager with no CPU reserved. (A
        configuration built in code is not held to that: tests and benchmarks build such kubelets.)
        """
        try:
            if not isinstance(obj, Mapping):
                raise InputError("a KubeletConfiguration must be a mapping")
            reserved = obj.get("reservedSystemCPUs")
            if reserved is not None and not isinstance(reserved, str):
                raise InputError(f"expected a cpuset string like \"0,64\", got {reserved!r}", field="reservedSystemCPUs")
            eviction = _str_map(obj.get("evictionHard"), "evictionHard").get("memory.available")
            config = cls(
                topology_manager_policy=obj.get("topologyManagerPolicy", "none"),
                topology_manager_scope=obj.get("topologyManagerScope", "container"),
                topology_manager_options=_str_map(obj.get("topologyManagerPolicyOptions"), "topologyManagerPolicyOptions"),
                cpu_manager_policy=obj.get("cpuManagerPolicy", "none"),
                cpu_manager_options=_str_map(obj.get("cpuManagerPolicyOptions"), "cpuManagerPolicyOptions"),
                reserved_system_cpus=_cpuset(reserved, "reservedSystemCPUs") if reserved else None,
                kube_reserved=_quantities(obj.get("kubeReserved"), "kubeReserved"),
                system_reserved=_quantities(obj.get("systemReserved"), "systemReserved"),
                eviction_memory=100 * 2**20 if eviction is None else _eviction(eviction),
                memory_manager_policy=obj.get("memoryManagerPolicy", "None"),
                reserved_memory=_reserved_memory(obj.get("reservedMemory")),
                max_pods=_count(obj.get("maxPods", 110), "maxPods"),
            )
            if config.cpu_manager_policy == "static" and not config.reserved_cpu_millis and not config.reserved_system_cpus:
                # The kubelet refuses to start (cpumanager.NewManager): with nothing reserved, exclusive
                # CPUs could empty the shared pool that every other container runs on.
                raise InputError("the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than "
                                 "zero (or reservedSystemCPUs)", field="cpuManagerPolicy")
            return config
        except InputError as err:
            raise err.with_source(source or "KubeletConfiguration") from None


def _cpuset(text: str, field_name: str) -> CPUSet:
    try:
        return CPUSet.parse(text)
    except InputError as err:
        raise InputError(err.message, field=field_name) from None


def _choice(value: str, allowed: tuple[str, ...], field_name: str) -> None:
    if value not in allowed:
        raise InputError(f"unknown value {value!r}; expected one of {', '.join(allowed)}", field=field_name)


def _str_map(value: Any, field_name: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError("expected a mapping", field=field_name)
    return {str(k): str(v) for k, v in value.items()}


def _count(value: Any, field_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"expected a non-negative integer, got {value!r}", field=field_name)
    return value


def _quantities(value: Any, field_name: str) -> dict[str, int]:
    return {k: canonical_units(k, v, field=f"{field_name}.{k}") for k, v in _str_map(value, field_name).items()}


def _eviction(value: str) -> int:
    if str(value).endswith("%"):
        raise InputError("percentage thresholds are not modelled; give a quantity", field="evictionHard.memory.available")
    return canonical_units("memory", value, field="evictionHard.memory.available")


def _reserved_memory(value: Any) -> dict[int, dict[str, int]]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise InputError("expected a list of {numaNode, limits}", field="reservedMemory")
    out: dict[int, dict[str, int]] = {}
    for i, item in enumerate(value):
        where = f"reservedMemory[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("numaNode"), int) or item["numaNode"] < 0:
            raise InputError("needs a non-negative integer numaNode", field=f"{where}.numaNode")
        limits = _quantities(item.get("limits"), f"{where}.limits")
        out.setdefault(item["numaNode"], {}).update(limits)
    return out
