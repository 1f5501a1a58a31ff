"""Simulated nodes' hardware: bundled profiles, real hwloc/sysfs files, and a cluster spec.

A *profile* is a named machine shape with a KubeletConfiguration that suits it, shipped in
``toposched/data/sim/profiles.yaml``: ``intel-snc``, ``epyc-8numa``, ``gpu-8x``, ``vm-2numa``
(docs/sim/inputs.md has the table and where the numbers come from). Nodes can also come from
any hwloc XML export or sysfs tree, with a KubeletConfiguration given or derived from the
machine (:func:`default_kubelet_configuration`).

A *cluster spec* is a small YAML file listing groups of nodes::

    nodes:
      - {profile: epyc-8numa, count: 40, topologyManagerPolicy: restricted, cpuEnforcement: agent}
      - {hwloc: g4dnmetal.xml, count: 2}

Nodes are named ``node-0001``, ``node-0002``, ... in file order. Device resources (which
device is ``nvidia.com/gpu``, ``rdma/hca``, ...) come from the device resource map of
:mod:`toposched.devices.resources`, through :func:`device_plugins`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources as package_files
from pathlib import Path
from types import MappingProxyType
from typing import Any

from toposched.decoding import check_fields, expect_list, expect_mapping
from toposched.devices.inventory import DeviceInventory
from toposched.devices.resources import DeviceResourceMap
from toposched.devices.share import GPU_MODEL_MEMORY
from toposched.errors import InputError
from toposched.kubelet import KubeletConfig, KubeletNode
from toposched.manifests import decode_documents, read_text
from toposched.names import HOSTNAME_LABEL
from toposched.quantity import canonical_units
from toposched.scheduler.nodes import Taint
from toposched.sim.limits import MAX_SIM_NODES
from toposched.sim.model import (
    CPU_ENFORCEMENT_AGENT,
    CPU_ENFORCEMENT_KUBELET,
    GPU_MODEL_LABEL,
    GPU_PRODUCT_LABEL,
    SimNode,
)
from toposched.topology import Device, DeviceKind, LogicalCPU, Machine, NUMANode
from toposched.topology.cpuset import CPUSet
from toposched.topology.hwloc import read_hwloc_xml
from toposched.topology.sysfs import read_sysfs

__all__ = [
    "CPU_ENFORCEMENTS",
    "KUBELET_CONFIGURATION_KEYS",
    "PROFILES_FILE",
    "SIBLINGS_ADJACENT",
    "SIBLINGS_SPLIT",
    "DevicePluginTable",
    "HardwareProfile",
    "build_machine",
    "check_kubelet",
    "cluster_from_dict",
    "default_kubelet_configuration",
    "device_plugins",
    "load_cluster",
    "load_hardware_profile",
    "node_from_hwloc",
    "node_from_sysfs",
    "profile_names",
    "profile_node",
    "sim_node",
]

#: Where the profiles ship, relative to the ``toposched`` package.
PROFILES_FILE = "data/sim/profiles.yaml"
#: Thread numbering of x86 bare metal: cpu ``c`` and ``c + cores`` are siblings.
SIBLINGS_SPLIT = "split"
#: Thread numbering of QEMU/KVM guests: a core's threads have consecutive ids.
SIBLINGS_ADJACENT = "adjacent"
CPU_ENFORCEMENTS = (CPU_ENFORCEMENT_KUBELET, CPU_ENFORCEMENT_AGENT)
#: The KubeletConfiguration fields a cluster spec entry may override (those KubeletConfig reads).
KUBELET_CONFIGURATION_KEYS = (
    "cpuManagerPolicy",
    "cpuManagerPolicyOptions",
    "evictionHard",
    "kubeReserved",
    "maxPods",
    "memoryManagerPolicy",
    "reservedMemory",
    "reservedSystemCPUs",
    "systemReserved",
    "topologyManagerPolicy",
    "topologyManagerPolicyOptions",
    "topologyManagerScope",
)

DevicePluginTable = Mapping[str, tuple[tuple[str, tuple[int, ...] | None], ...]]

_PROFILE_KEYS = frozenset({
    "description", "sockets", "numaPerSocket", "coresPerNuma", "threadsPerCore", "siblings", "memoryPerNuma",
    "hugepagesPerNuma", "distances", "gpuModel", "devices", "kubelet",
})
_DEVICE_KEYS = frozenset({"address", "kind", "numa", "vendor", "device", "class", "pciePath", "name", "model"})
_SOURCE_KEYS = ("profile", "hwloc", "sysfs")
_ENTRY_KEYS = frozenset({*_SOURCE_KEYS, "count", "kubeletConfig", "cpuEnforcement", "labels", "taints", "gpuModel",
                         *KUBELET_CONFIGURATION_KEYS})
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


# ---- machines from a shape ---------------------------------------------------------------------


def build_machine(
    numa_cores: Sequence[int],
    *,
    sockets: int = 1,
    threads_per_core: int = 2,
    siblings: str = SIBLINGS_SPLIT,
    memory: int | Sequence[int] = 0,
    hugepages: Mapping[int, int] | None = None,
    distances: tuple[int, int, int] = (10, 11, 21),
    devices: Iterable[Device] = (),
) -> Machine:
    """A machine with NUMA nodes ``0..len(numa_cores)-1`` holding that many cores each.

    NUMA nodes are spread evenly over ``sockets`` in order (their count must divide evenly).
    Logical CPU ids follow ``siblings``: ``split`` numbers the first thread of every core,
    then every second thread (x86 bare metal), ``adjacent`` gives a core's threads
    consecutive ids (QEMU). A core's id is its lowest CPU id. ``memory`` is bytes per NUMA
    node (one value for all, or one each), ``hugepages`` maps page size in bytes to pages per
    NUMA node, ``distances`` is (local, same socket, other socket). Bad shapes raise InputError.
    """
    count = len(numa_cores)
    for name, value in (("sockets", sockets), ("threads_per_core", threads_per_core), ("numa nodes", count)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{value!r} is not a positive integer", field=name)
    if count % sockets:
        raise InputError(f"{count} NUMA nodes do not spread evenly over {sockets} sockets", field="sockets")
    if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in numa_cores):
        raise InputError(f"cores per NUMA node {list(numa_cores)} must be non-negative integers", field="cores")
    if siblings not in (SIBLINGS_SPLIT, SIBLINGS_ADJACENT):
        raise InputError(f"unknown value {siblings!r}; expected {SIBLINGS_SPLIT} or {SIBLINGS_ADJACENT}",
                         field="siblings")
    per_node = [memory] * count if isinstance(memory, int) else list(memory)
    if len(per_node) != count:
        raise InputError(f"{len(per_node)} memory sizes for {count} NUMA nodes", field="memory")
    total_cores = sum(numa_cores)
    numa_per_socket = count // sockets
    cpus = []
    core = 0
    for numa, cores in enumerate(numa_cores):
        for _ in range(cores):
            for thread in range(threads_per_core):
                if siblings == SIBLINGS_SPLIT:
                    cpu, core_id = core + thread * total_cores, core
                else:
                    cpu, core_id = core * threads_per_core + thread, core * threads_per_core
                cpus.append(LogicalCPU(cpu, core_id, numa // numa_per_socket, numa))
            core += 1
    local, near, far = distances
    nodes = []
    for numa in range(count):
        row = {other: local if other == numa else near if other // numa_per_socket == numa // numa_per_socket else far
               for other in range(count)}
        nodes.append(NUMANode(
            numa,
            CPUSet(c.id for c in cpus if c.numa_id == numa),
            memory_bytes=per_node[numa],
            hugepages=dict(hugepages or {}),
            distances=row,
        ))
    return Machine(tuple(cpus), tuple(nodes), tuple(devices))


# ---- device resources ----------------------------------------------------------------------------


def device_plugins(machine: Machine, resource_map: DeviceResourceMap | None = None) -> DevicePluginTable | None:
    """The kubelet's device-plugin table for a machine: ``{resource: ((device id, (NUMA id,) or None), ...)}``.

    Devices become resources by ``resource_map`` (default: the shipped device resource map,
    e.g. NVIDIA GPUs ``nvidia.com/gpu``, Mellanox HCAs ``rdma/hca``); a device's id is its
    PCI address. None when the machine has no device resource.
    """
    table = DeviceInventory.from_machine(machine, resource_map).device_plugins()
    if not table:
        return None
    return MappingProxyType({
        resource: tuple((dev_id, None if numa is None else tuple(numa)) for dev_id, numa in devices)
        for resource, devices in table.items()
    })


# ---- profiles ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class HardwareProfile:
    """A bundled hardware profile: the machine, its KubeletConfiguration and its device plugins.

    ``kubelet_configuration`` is the KubeletConfiguration mapping as written in the profile
    file (overrides are merged into it); ``kubelet`` is that configuration parsed.
    """

    name: str
    description: str
    machine: Machine
    kubelet_configuration: Mapping[str, Any]
    kubelet: KubeletConfig
    device_plugins: DevicePluginTable | None
    gpu_model: str | None = None


def profile_names() -> tuple[str, ...]:
    """The names of the bundled profiles, in file order."""
    return tuple(_profile_table())


def load_hardware_profile(name: str) -> HardwareProfile:
    """The bundled profile with this name; InputError listing the known names otherwise.

    The result is shared between calls (everything in it is immutable).
    """
    table = _profile_table()
    if name not in table:
        raise InputError(f"unknown profile {name!r}; known: {', '.join(table)}", field="profile")
    return _profile(name)


#: The name :func:`load_hardware_profile` had before the scheduler's ``load_profile`` claimed the
#: word; benchmarks written against it keep working.
load_profile = load_hardware_profile


def profile_node(
    name: str,
    node_name: str,
    *,
    overrides: Mapping[str, Any] | None = None,
    cpu_enforcement: str = CPU_ENFORCEMENT_KUBELET,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
) -> SimNode:
    """A node of a bundled profile; ``overrides`` replace KubeletConfiguration fields of the profile's.

    InputError when the overridden configuration is one the kubelet refuses on the profile's machine.
    """
    profile = load_hardware_profile(name)
    config = profile.kubelet
    if overrides:
        config = _merged_kubelet(profile.kubelet_configuration, overrides, f"profile {name}")
        check_kubelet(profile.machine, config, profile.device_plugins)
    return sim_node(node_name, profile.machine, config, plugins=profile.device_plugins, gpu_model=profile.gpu_model,
                    profile=name, cpu_enforcement=cpu_enforcement, labels=labels, taints=taints)


def _profile_table() -> Mapping[str, Any]:
    return _profile_data()[1]


@functools.cache
def _profile_data() -> tuple[str, Mapping[str, Any]]:
    source = f"toposched/{PROFILES_FILE}"
    text = (package_files.files("toposched") / PROFILES_FILE).read_text(encoding="utf-8")
    documents = decode_documents(text, source)
    if len(documents) != 1 or not isinstance(documents[0], Mapping):
        raise InputError("expected one mapping of profile name to profile", source=source)
    return source, MappingProxyType(dict(documents[0]))


@functools.cache
def _profile(name: str) -> HardwareProfile:
    source, table = _profile_data()
    try:
        return _parse_profile(name, table[name], f"{source}: {name}")
    except InputError as err:
        raise err.with_source(f"{source}: {name}") from None


def _parse_profile(name: str, raw: Any, source: str) -> HardwareProfile:
    if not isinstance(raw, Mapping):
        raise InputError("a profile must be a mapping")
    check_fields(raw, sorted(_PROFILE_KEYS), "")
    per_socket = _positive(raw.get("numaPerSocket"), "numaPerSocket")
    sockets = _positive(raw.get("sockets"), "sockets")
    hugepages = {
        canonical_units("memory", size, field=f"hugepagesPerNuma.{size}"): _count(pages, f"hugepagesPerNuma.{size}")
        for size, pages in expect_mapping(raw.get("hugepagesPerNuma"), "hugepagesPerNuma", none_is_empty=True).items()
    }
    dist = expect_mapping(raw.get("distances"), "distances", none_is_empty=True)
    distances = (_positive(dist.get("local"), "distances.local"), _positive(dist.get("sameSocket"), "distances.sameSocket"),
                 _positive(dist.get("otherSocket"), "distances.otherSocket"))
    raw_devices = expect_list(raw.get("devices"), "devices", none_is_empty=True)
    devices = [_parse_device(d, f"devices[{i}]") for i, d in enumerate(raw_devices)]
    machine = build_machine(
        [_positive(raw.get("coresPerNuma"), "coresPerNuma")] * (sockets * per_socket),
        sockets=sockets,
        threads_per_core=_positive(raw.get("threadsPerCore"), "threadsPerCore"),
        siblings=str(raw.get("siblings", SIBLINGS_SPLIT)),
        memory=canonical_units("memory", raw.get("memoryPerNuma", 0), field="memoryPerNuma"),
        hugepages=hugepages,
        distances=distances,
        devices=devices,
    )
    configuration = MappingProxyType(dict(expect_mapping(raw.get("kubelet"), "kubelet", none_is_empty=True)))
    kubelet = KubeletConfig.from_dict(configuration, source=source)
    plugins = device_plugins(machine)
    gpu_model = raw.get("gpuModel")
    check_kubelet(machine, kubelet, plugins)
    return HardwareProfile(name, " ".join(str(raw.get("description", "")).split()), machine, configuration, kubelet, plugins,
                   None if gpu_model is None else str(gpu_model))


def _parse_device(raw: Any, where: str) -> Device:
    if not isinstance(raw, Mapping):
        raise InputError("a device must be a mapping", field=where)
    check_fields(raw, sorted(_DEVICE_KEYS), where)
    try:
        kind = DeviceKind(raw.get("kind", "other"))
    except ValueError:
        raise InputError(f"unknown device kind {raw.get('kind')!r}", field=f"{where}.kind") from None
    model = raw.get("model")
    memory = None
    if model is not None:
        if model not in GPU_MODEL_MEMORY:
            raise InputError(f"unknown GPU model {model!r}; known: {', '.join(GPU_MODEL_MEMORY)}", field=f"{where}.model")
        memory = GPU_MODEL_MEMORY[model]
    return Device(
        address=str(raw.get("address", "")),
        kind=kind,
        numa_id=None if raw.get("numa") is None else _count(raw["numa"], f"{where}.numa"),
        vendor_id=_hex(raw.get("vendor"), f"{where}.vendor"),
        device_id=_hex(raw.get("device"), f"{where}.device"),
        class_code=_hex(raw.get("class"), f"{where}.class"),
        pcie_path=tuple(str(p) for p in expect_list(raw.get("pciePath"), f"{where}.pciePath", none_is_empty=True)),
        name=raw.get("name"),
        memory_bytes=memory,
        attributes={"device_name": str(model)} if model is not None else {},
    )


# ---- nodes from real files -----------------------------------------------------------------------


def default_kubelet_configuration(machine: Machine, plugins: DevicePluginTable | None = None) -> dict[str, Any]:
    """The KubeletConfiguration given to a node read from a file when none is given.

    The static CPU manager with the first core's threads reserved for the system, the
    ``single-numa-node`` Topology Manager policy, or ``restricted`` when the node has device
    resources (so a pod asking more devices than one NUMA node holds is still admitted where
    no single NUMA node could do better), container scope, no memory manager.
    """
    first = machine.siblings(machine.cpus[0].id) if machine.cpus else CPUSet()
    config: dict[str, Any] = {
        "cpuManagerPolicy": "static",
        "topologyManagerPolicy": "restricted" if plugins else "single-numa-node",
        "topologyManagerScope": "container",
    }
    if first:
        config["reservedSystemCPUs"] = str(first)
    return config


def node_from_hwloc(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    kubelet: KubeletConfig | None = None,
    cpu_enforcement: str = CPU_ENFORCEMENT_KUBELET,
    gpu_model: str | None = None,
    resource_map: DeviceResourceMap | None = None,
) -> SimNode:
    """A node whose hardware is an hwloc XML file; its kubelet is ``kubelet`` or the default for it.

    The node is named ``name``, else the machine's hostname, else the file's stem.
    ``gpu_model`` sets the node's GPU model label. Bad files raise InputError naming them.
    """
    machine = read_hwloc_xml(path)
    return _file_node(machine, name or machine.hostname or Path(path).stem, f"hwloc:{os.fspath(path)}", kubelet,
                      cpu_enforcement, gpu_model, resource_map, os.fspath(path))


def node_from_sysfs(
    root: str | os.PathLike[str],
    *,
    name: str | None = None,
    kubelet: KubeletConfig | None = None,
    cpu_enforcement: str = CPU_ENFORCEMENT_KUBELET,
    gpu_model: str | None = None,
    resource_map: DeviceResourceMap | None = None,
) -> SimNode:
    """A node whose hardware is a sysfs tree under ``root``; otherwise as :func:`node_from_hwloc`."""
    machine = read_sysfs(root)
    return _file_node(machine, name or machine.hostname or Path(root).name, f"sysfs:{os.fspath(root)}", kubelet,
                      cpu_enforcement, gpu_model, resource_map, os.fspath(root))


def _file_node(machine: Machine, name: str, profile: str, kubelet: KubeletConfig | None, cpu_enforcement: str,
               gpu_model: str | None, resource_map: DeviceResourceMap | None, source: str) -> SimNode:
    plugins = device_plugins(machine, resource_map)
    try:
        config = kubelet or KubeletConfig.from_dict(default_kubelet_configuration(machine, plugins))
        check_kubelet(machine, config, plugins)
    except InputError as err:
        raise err.with_source(source) from None
    return sim_node(name, machine, config, plugins=plugins, gpu_model=gpu_model, profile=profile,
                    cpu_enforcement=cpu_enforcement)


def sim_node(
    name: str,
    machine: Machine,
    kubelet: KubeletConfig,
    *,
    plugins: DevicePluginTable | None = None,
    gpu_model: str | None = None,
    profile: str = "",
    cpu_enforcement: str = CPU_ENFORCEMENT_KUBELET,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
) -> SimNode:
    """A :class:`SimNode` with the hostname label, and the GPU model labels when ``gpu_model`` is given
    (``nvidia.com/gpu.product`` and ``toposched.io/gpu-model``)."""
    _check_enforcement(cpu_enforcement)
    all_labels = {HOSTNAME_LABEL: name, **(labels or {})}
    if gpu_model:
        all_labels[GPU_PRODUCT_LABEL] = all_labels[GPU_MODEL_LABEL] = gpu_model
    return SimNode(name, machine, kubelet, labels=all_labels, taints=tuple(taints), cpu_enforcement=cpu_enforcement,
                   device_plugins=plugins, gpu_model=gpu_model or None, profile=profile)


def _check_enforcement(value: str) -> None:
    if value not in CPU_ENFORCEMENTS:
        raise InputError(f"unknown value {value!r}; expected one of {', '.join(CPU_ENFORCEMENTS)}",
                         field="cpuEnforcement")


def check_kubelet(machine: Machine, config: KubeletConfig, plugins: DevicePluginTable | None = None) -> None:
    """Start a kubelet model on the machine once: InputError when the kubelet would refuse to start."""
    KubeletNode(machine, config, device_plugins={r: list(d) for r, d in (plugins or {}).items()})


# ---- cluster spec --------------------------------------------------------------------------------


def load_cluster(path: str | os.PathLike[str]) -> list[SimNode]:
    """Read a cluster spec file (YAML or JSON, format in docs/sim/inputs.md) into its nodes.

    Relative hwloc/sysfs/kubeletConfig paths are read relative to the spec's directory. Every
    entry's kubelet configuration is checked once against its machine at load; bad input
    raises InputError naming the file and the entry (``nodes[2].count``).
    """
    source = os.fspath(path)
    documents = decode_documents(read_text(source), source)
    if len(documents) != 1:
        raise InputError(f"expected one document, found {len(documents)}", source=source)
    return cluster_from_dict(documents[0], source=source, base_dir=Path(source).parent)


def cluster_from_dict(data: Any, *, source: str = "<cluster spec>", base_dir: str | os.PathLike[str] = ".") -> list[SimNode]:
    """The nodes of a decoded cluster spec ``{"nodes": [entry, ...]}``, named ``node-0001`` on.

    Each entry names one source of hardware (``profile``, ``hwloc`` or ``sysfs``) and may give
    ``count`` (default 1), ``kubeletConfig`` (a KubeletConfiguration file replacing the
    default), KubeletConfiguration fields to override (``topologyManagerPolicy``, ...),
    ``cpuEnforcement`` (``kubelet``/``agent``), ``labels``, ``taints`` and ``gpuModel``. Nodes of
    one entry share one machine and configuration (all immutable).
    """
    if not isinstance(data, Mapping) or set(data) != {"nodes"} or not isinstance(data["nodes"], list):
        raise InputError("expected a mapping with one key, nodes, holding a list of node groups", field="nodes",
                         source=source)
    groups = []
    for i, entry in enumerate(data["nodes"]):
        where = f"nodes[{i}]"
        try:
            groups.append(_parse_entry(entry, where, Path(base_dir)))
        except InputError as err:
            raise _in_entry(err, where, source) from None
    total = sum(count for count, _ in groups)
    if total > MAX_SIM_NODES:
        raise InputError(f"{total:,} nodes in all: more than {MAX_SIM_NODES:,} (the limit)", field="nodes",
                         source=source)
    width = max(4, len(str(total)))
    nodes = []
    for count, make in groups:
        for _ in range(count):
            nodes.append(make(f"node-{len(nodes) + 1:0{width}d}"))
    return nodes


def _in_entry(err: InputError, where: str, source: str) -> InputError:
    """The error as one of the spec file's entry: a file it came from stays in the message."""
    inner = err.source if err.source not in (None, where) else None
    message = f"{inner}: {err.message}" if inner else err.message
    field = f"{where}.{err.field}" if err.field else where
    return InputError(message, field=field, source=source)


# The GPU models a node may name: those whose memory is known, and the trace's undisclosed G1-G3.
KNOWN_GPU_MODELS = (*GPU_MODEL_MEMORY, "G1", "G2", "G3")


def _parse_entry(entry: Any, where: str, base_dir: Path) -> tuple[int, Any]:
    if not isinstance(entry, Mapping):
        raise InputError("a node group must be a mapping")
    check_fields(entry, sorted(_ENTRY_KEYS), "")
    given = [key for key in _SOURCE_KEYS if key in entry]
    if len(given) != 1:
        raise InputError(f"give exactly one of {', '.join(_SOURCE_KEYS)} (found {', '.join(given) or 'none'})")
    kind = given[0]
    count = _count(entry.get("count", 1), "count")
    if count > MAX_SIM_NODES:
        raise InputError(f"{count:,} nodes: more than {MAX_SIM_NODES:,} (the limit)", field="count")
    enforcement = str(entry.get("cpuEnforcement", CPU_ENFORCEMENT_KUBELET))
    _check_enforcement(enforcement)
    labels = {str(k): str(v) for k, v in expect_mapping(entry.get("labels"), "labels", none_is_empty=True).items()}
    raw_taints = expect_list(entry.get("taints"), "taints", none_is_empty=True)
    taints = tuple(_parse_taint(t, f"taints[{j}]") for j, t in enumerate(raw_taints))
    overrides = {key: entry[key] for key in KUBELET_CONFIGURATION_KEYS if key in entry}
    if kind == "profile":
        profile = load_hardware_profile(str(entry["profile"]))
        machine, plugins, label = profile.machine, profile.device_plugins, profile.name
        base: Mapping[str, Any] = profile.kubelet_configuration
        gpu_model = entry.get("gpuModel", profile.gpu_model)
    else:
        path = base_dir / str(entry[kind])
        machine = read_hwloc_xml(path) if kind == "hwloc" else read_sysfs(path)
        plugins = device_plugins(machine)
        label = f"{kind}:{entry[kind]}"
        base = default_kubelet_configuration(machine, plugins)
        gpu_model = entry.get("gpuModel")
    if gpu_model is not None and (not isinstance(gpu_model, str) or gpu_model not in KNOWN_GPU_MODELS):
        raise InputError(f"unknown GPU model {str(gpu_model)[:40]!r}; known: {', '.join(KNOWN_GPU_MODELS)}",
                         field="gpuModel")
    if "kubeletConfig" in entry:
        base = _kubelet_file(base_dir / str(entry["kubeletConfig"]))
    config = _merged_kubelet(base, overrides, where)
    try:
        check_kubelet(machine, config, plugins)
    except InputError as err:
        raise InputError(f"the kubelet refuses this configuration on this machine: {err.message}",
                         field=err.field) from None

    def make(name: str) -> SimNode:
        return sim_node(name, machine, config, plugins=plugins, gpu_model=None if gpu_model is None else str(gpu_model),
                        profile=label, cpu_enforcement=enforcement, labels=labels, taints=taints)

    return count, make


def _kubelet_file(path: Path) -> Mapping[str, Any]:
    source = str(path)
    documents = decode_documents(read_text(source), source)
    if len(documents) != 1 or not isinstance(documents[0], Mapping):
        raise InputError("expected one KubeletConfiguration mapping", source=source)
    return documents[0]


def _merged_kubelet(base: Mapping[str, Any], overrides: Mapping[str, Any], source: str) -> KubeletConfig:
    return KubeletConfig.from_dict({**base, **overrides}, source=source)


def _parse_taint(raw: Any, where: str) -> Taint:
    if not isinstance(raw, Mapping) or "key" not in raw:
        raise InputError("a taint needs a key", field=where)
    check_fields(raw, ("effect", "key", "value"), where)
    effect = str(raw.get("effect", "NoSchedule"))
    if effect not in _TAINT_EFFECTS:
        raise InputError(f"unknown effect {effect!r}; expected one of {', '.join(_TAINT_EFFECTS)}", field=f"{where}.effect")
    return Taint(str(raw["key"]), str(raw.get("value", "")), effect)


# ---- small parsers -------------------------------------------------------------------------------


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{value!r} is not a non-negative integer", field=field)
    return value


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{value!r} is not a positive integer", field=field)
    return value


def _hex(value: Any, field: str) -> int | None:
    if value is None:
        return None
    try:
        return int(str(value), 16)
    except ValueError:
        raise InputError(f"{value!r} is not a hex number", field=field) from None
