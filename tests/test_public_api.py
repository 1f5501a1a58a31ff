"""The public API that benchmarks (ours and held-out ones) and users call, pinned.

A change here is an API change: make it on purpose, say so in the commit, and update the pin.
Signatures are compared as ``inspect.signature`` prints them (annotations as written).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest

import toposched.devices
import toposched.kubelet
import toposched.scheduler
import toposched.sim.hardware
import toposched.topology
import toposched.workload
from toposched.scheduler.profile_setup import load_profile


def _resolve(dotted: str) -> object:
    """The object a dotted name names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise AssertionError(f"nothing importable in {dotted}")


SIGNATURES = {
    "toposched.scheduler.Cluster": (
        "(*, reflect_timeout: 'float' = 120.0, on_change: 'Callable[[str], None] | None' = None, "
        "resource_map: 'DeviceResourceMap | None' = None)"
    ),
    "toposched.scheduler.Cluster.set_node": (
        "(self, spec: 'NodeSpec', *, machine: 'Machine | None' = None, kubelet_config: 'KubeletConfig | None' = None, "
        "device_plugins: 'Mapping[str, Iterable[tuple[str, Iterable[int] | None]]] | None' = None) -> 'NodeRecord'"
    ),
    "toposched.scheduler.Cluster.update_report": "(self, nrt: 'NodeResourceTopology', now: 'float') -> 'None'",
    "toposched.scheduler.Cluster.remove_node": "(self, name: 'str') -> 'None'",
    "toposched.scheduler.Cluster.forget": "(self, pod: 'Pod | str', now: 'float | None' = None) -> 'None'",
    "toposched.scheduler.NodeSpec": (
        "(name: 'str', allocatable: 'Mapping[str, int]' = <factory>, labels: 'Mapping[str, str]' = <factory>, "
        "annotations: 'Mapping[str, str]' = <factory>, taints: 'tuple[Taint, ...]' = (), "
        "unschedulable: 'bool' = False) -> None"
    ),
    "toposched.scheduler.Scheduler": (
        "(cluster: 'Cluster', profile: 'Profile', *, max_exact_attempts: 'int' = 64, cache_size: 'int' = 512, "
        "few_rows: 'int' = 8, seed: 'int | None' = None) -> 'None'"
    ),
    "toposched.scheduler.Scheduler.schedule": "(self, pod: 'Pod', now: 'float') -> 'Decision'",
    "toposched.scheduler.Scheduler.bound": "(self, pod: 'Pod', now: 'float') -> 'None'",
    "toposched.scheduler.Scheduler.unreserve": "(self, pod: 'Pod') -> 'None'",
    "toposched.scheduler.load_profile": (
        "(name: 'str | None' = None, config: 'str | os.PathLike[str] | None' = None) -> 'Profile'"
    ),
    "toposched.sim.hardware.load_hardware_profile": "(name: 'str') -> 'HardwareProfile'",
    "toposched.workload.Pod": (
        "(name: 'str', namespace: 'str' = 'default', uid: 'str' = '', containers: 'tuple[Container, ...]' = (), "
        "init_containers: 'tuple[Container, ...]' = (), annotations: 'Mapping[str, str]' = <factory>, "
        "labels: 'Mapping[str, str]' = <factory>, node_name: 'str | None' = None, "
        "scheduler_name: 'str' = 'default-scheduler', priority: 'int' = 0, overhead: 'Mapping[str, int]' = <factory>, "
        "node_selector: 'Mapping[str, str]' = <factory>, tolerations: 'tuple[Toleration, ...]' = ()) -> None"
    ),
    "toposched.workload.Container": (
        "(name: 'str', requests: 'Mapping[str, int]' = <factory>, limits: 'Mapping[str, int]' = <factory>, "
        "restart_policy: 'str | None' = None) -> None"
    ),
    "toposched.topology.Machine.from_cpu_table": (
        "(rows: 'Iterable[Mapping[str, int]]', *, memory_per_numa: 'int | Mapping[int, int]' = 0, "
        "distances: 'Mapping[int, Mapping[int, int]] | None' = None, numa_ids: 'Iterable[int]' = ()) -> 'Machine'"
    ),
    "toposched.topology.NUMANode": (
        "(id: 'int', cpus: 'CPUSet' = CPUSet(''), memory_bytes: 'int' = 0, hugepages: 'Mapping[int, int]' = <factory>, "
        "distances: 'Mapping[int, int]' = <factory>, attributes: 'Mapping[str, str]' = <factory>) -> None"
    ),
    "toposched.topology.CPUSet": "(cpus: 'Iterable[int]' = ())",
    "toposched.kubelet.KubeletConfig": (
        "(topology_manager_policy: 'str' = 'none', topology_manager_scope: 'str' = 'container', "
        "topology_manager_options: 'Mapping[str, str]' = <factory>, cpu_manager_policy: 'str' = 'none', "
        "cpu_manager_options: 'Mapping[str, str]' = <factory>, reserved_system_cpus: 'CPUSet | None' = None, "
        "kube_reserved: 'Mapping[str, int]' = <factory>, system_reserved: 'Mapping[str, int]' = <factory>, "
        "eviction_memory: 'int' = 104857600, memory_manager_policy: 'str' = 'None', "
        "reserved_memory: 'Mapping[int, Mapping[str, int]]' = <factory>, max_pods: 'int' = 110) -> None"
    ),
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature(name: str) -> None:
    assert str(inspect.signature(_resolve(name))) == SIGNATURES[name]


def test_decision_fields() -> None:
    fields = [f.name for f in dataclasses.fields(toposched.scheduler.Decision)]
    assert fields == ["pod", "node", "placement", "status", "reasons", "nodes", "nominated"]


def test_load_profile_is_one_function_under_both_names() -> None:
    # benchmarks/scheduler.py imports it from profile_setup; the package exports the same function.
    assert toposched.scheduler.load_profile is load_profile
    # The old name of the hardware-profile loader, kept for benchmarks written against it.
    assert toposched.sim.hardware.load_profile is toposched.sim.hardware.load_hardware_profile


def test_load_profile_gives_what_scheduler_takes() -> None:
    cluster = toposched.scheduler.Cluster()
    rows = [{"cpu": c, "core": c, "socket": 0, "numa": 0} for c in range(4)]
    machine = toposched.topology.Machine.from_cpu_table(rows, memory_per_numa=8 * 2**30)
    cluster.set_node(toposched.scheduler.NodeSpec("n1"), machine=machine,
                     kubelet_config=toposched.kubelet.KubeletConfig(cpu_manager_policy="static"))
    scheduler = toposched.scheduler.Scheduler(cluster, load_profile("toposched"))
    pod = toposched.workload.Pod("p", uid="p", containers=(
        toposched.workload.Container("c", requests={"cpu": 1000, "memory": 2**30}),))
    decision = scheduler.schedule(pod, now=0.0)
    assert decision.node == "n1"
    scheduler.bound(pod, now=0.0)


EXPORTS = {
    toposched.scheduler: [
        "Cluster", "Code", "ContainerPlacement", "CycleState", "Decision", "NodeRecord", "NodeSpec", "Placement",
        "Profile", "Registry", "Scheduler", "Status", "Taint", "load_profile", "registry",
    ],
    toposched.topology: [
        "CPUSet", "Core", "Device", "DeviceKind", "LogicalCPU", "Machine", "NUMANode", "Socket", "classify_pci_class",
    ],
    toposched.workload: [
        "BEST_EFFORT", "BURSTABLE", "Container", "GUARANTEED", "Pod", "Toleration", "add_resources", "max_resources",
        "pods_from_objects",
    ],
    toposched.devices: [
        "DeviceChoice", "DeviceInventory", "DeviceResourceMap", "DeviceScope", "NodeDevice", "ResourceRule",
        "choose_devices", "load_resource_map", "pcie_switch",
    ],
    toposched.kubelet: [
        "Admission", "CPUAllocationError", "CPUManagerCheckpoint", "CPUState", "CPUTopology", "ContainerAllocation",
        "DeviceAllocationError", "DeviceManager", "DeviceManagerState", "HintProvider", "KubeletConfig", "KubeletNode",
        "MemoryAllocation", "MemoryManagerCheckpoint", "MemoryManagerError", "PolicyOptions", "SMTAlignmentError",
        "StaticCPUPolicy", "StaticMemoryPolicy", "StaticPolicyOptions", "TopologyAffinityError", "TopologyHint",
        "TopologyManager", "UnexpectedAdmissionError", "admit_pod", "container_device_requests", "cpu_topology_hints",
        "device_topology_hints", "devices_to_allocate", "dumps_checkpoint", "fast_merge_hints", "filter_by_affinity",
        "format_memory_state", "loads_checkpoint", "merge_hints", "numa_distances", "parse_memory_state",
        "parse_policy_options", "parse_static_policy_options", "pod_device_requests", "read_checkpoint",
        "read_memory_state", "take_by_topology", "write_checkpoint", "write_memory_state",
    ],
}


@pytest.mark.parametrize("package", list(EXPORTS), ids=lambda p: p.__name__)
def test_package_exports(package: object) -> None:
    assert sorted(package.__all__) == sorted(EXPORTS[package])
    for name in package.__all__:
        assert hasattr(package, name), f"{package.__name__}.__all__ names {name}, which it lacks"
