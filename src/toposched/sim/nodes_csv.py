"""Node lists as CSV: the Alibaba GPU trace's ``openb_node_list_*.csv`` and our own simple format.

The trace gives each node's totals only (``sn,cpu_milli,memory_mib,gpu,model``); a NUMA layout
is derived from them by one documented rule (:func:`trace_machine`, docs/sim/inputs.md):

* 2 NUMA nodes, one per socket, when the node has at least 2 GPUs or at least 64 logical
  CPUs; else 1 (never more NUMA nodes than cores);
* SMT2 (2 threads per core) when the CPU count is even, else 1 thread per core;
* cores, memory and GPUs split evenly over the NUMA nodes, a remainder going to the lowest ids;
* NUMA distances 10 local and 21 remote (a common 2-socket SLIT); no hugepages;
* every GPU on a root port of its own (the trace says nothing of PCIe switches), an NVIDIA
  device (``nvidia.com/gpu``) whose memory is the model's (``GPU_MODEL_MEMORY``; unknown for
  the undisclosed ``G1``/``G2``/``G3`` unless given).

Trace nodes get the kubelet of :func:`trace_kubelet`: allocatable equal to the trace's
capacity, as in the trace authors' own node objects. Any bad row raises InputError whose
source is ``<file>:<line>`` (1-based, the header is line 1) and whose field is the column.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from toposched.devices.share import GPU_MODEL_MEMORY
from toposched.errors import InputError
from toposched.inputs import check_dns_subdomain, read_file_text
from toposched.kubelet import KubeletConfig
from toposched.quantity import canonical_units, format_bytes
from toposched.sim.hardware import (
    CPU_ENFORCEMENTS,
    build_machine,
    check_kubelet,
    default_kubelet_configuration,
    device_plugins,
    load_cluster,
    sim_node,
)
from toposched.sim.limits import MAX_SIM_NODES
from toposched.sim.model import CPU_ENFORCEMENT_KUBELET, SimNode
from toposched.topology import Device, DeviceKind, Machine
from toposched.topology.hwloc import MAX_PUS
from toposched.topology.nrt import MAX_DEVICES_PER_ZONE_RESOURCE

__all__ = [
    "ALIBABA_NODE_COLUMNS",
    "GPU_MODELS",
    "NODE_CSV_COLUMNS",
    "NODE_CSV_REQUIRED",
    "TRACE_NODE_PROFILE",
    "TWO_NUMA_MIN_CPUS",
    "UNDISCLOSED_GPU_MODELS",
    "cell_int",
    "csv_rows",
    "load_nodes",
    "read_alibaba_nodes",
    "read_node_csv",
    "trace_kubelet",
    "trace_machine",
]

ALIBABA_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
#: GPU models the trace names without disclosing them (upstream README: "G1, G2, G3 are undisclosed").
UNDISCLOSED_GPU_MODELS = ("G1", "G2", "G3")
#: Every GPU model a node list or a pod's ``gpu_spec`` may name.
GPU_MODELS = tuple(GPU_MODEL_MEMORY) + UNDISCLOSED_GPU_MODELS
#: A trace node with at least this many logical CPUs is a 2-socket machine.
TWO_NUMA_MIN_CPUS = 64
TRACE_NODE_PROFILE = "alibaba-openb"
#: Our node CSV: every column, and the ones a file must have.
NODE_CSV_COLUMNS = (
    "name", "cpus", "memory", "count", "numa", "sockets", "threads_per_core", "gpus", "gpu_model", "rdma_nics",
    "hugepages_1Gi", "hugepages_2Mi", "topology_manager_policy", "topology_manager_scope", "cpu_enforcement",
)
NODE_CSV_REQUIRED = ("name", "cpus", "memory")

_MIB = 2**20
_GIB = 2**30
_NVIDIA, _GPU_CLASS = 0x10DE, 0x030200
_MELLANOX, _CONNECTX6, _INFINIBAND_CLASS = 0x15B3, 0x101B, 0x020700
_REMOTE_DISTANCE = 21
_SAME_SOCKET_DISTANCE = 11
_MAX_DEVICES = 119  # one root port (two bus numbers) per device, from bus 0x10 to 0xff
_MAX_PODS_TRACE = 1001  # the pods capacity of the trace authors' node objects


# ---- the layout rule -----------------------------------------------------------------------------


def trace_machine(
    cpus: int,
    memory: int,
    *,
    gpus: int = 0,
    gpu_model: str | None = None,
    numa: int | None = None,
    sockets: int | None = None,
    threads_per_core: int | None = None,
    rdma_nics: int = 0,
    hugepages: Mapping[int, int] | None = None,
    gpu_memory: Mapping[str, int] | None = None,
) -> Machine:
    """A machine with these totals, laid out by the module's rule where a shape is not given.

    ``cpus`` are logical CPUs, ``memory`` bytes; ``numa``, ``sockets``, ``threads_per_core``
    override the rule (sockets default to one per NUMA node up to 2, then 2 when the count is
    even). ``rdma_nics`` adds ConnectX-6 HCAs spread like the GPUs; ``hugepages`` is page size
    -> pages per NUMA node; ``gpu_memory`` adds or replaces bytes per GPU model. InputError
    for shapes that do not divide (e.g. an odd CPU count with 2 threads per core).
    """
    threads = threads_per_core if threads_per_core is not None else 2 if cpus % 2 == 0 else 1
    if threads < 1 or cpus <= 0 or cpus % threads:
        raise InputError(f"{cpus} CPUs are not a positive multiple of {threads} threads per core", field="cpus")
    cores = cpus // threads
    if numa is None:
        numa = min(2 if gpus >= 2 or cpus >= TWO_NUMA_MIN_CPUS else 1, cores)
    if numa < 1:
        raise InputError(f"{numa} NUMA nodes: a machine needs at least one", field="numa")
    if sockets is None:
        sockets = numa if numa <= 2 else 2 if numa % 2 == 0 else 1
    devices: list[Device] = []
    if gpus:
        memory_table = {**GPU_MODEL_MEMORY, **(gpu_memory or {})}
        if gpu_model not in GPU_MODELS and gpu_model not in memory_table:
            raise InputError(f"unknown GPU model {gpu_model!r}; known: {', '.join(GPU_MODELS)}", field="model")
        devices += _devices(DeviceKind.GPU, _spread(gpus, numa), len(devices), vendor=_NVIDIA, class_code=_GPU_CLASS,
                            memory=memory_table.get(str(gpu_model)), model=gpu_model)
    if rdma_nics:
        devices += _devices(DeviceKind.INFINIBAND, _spread(rdma_nics, numa), len(devices), vendor=_MELLANOX,
                            device_id=_CONNECTX6, class_code=_INFINIBAND_CLASS)
    return build_machine(
        _spread(cores, numa),
        sockets=sockets,
        threads_per_core=threads,
        memory=_spread(memory, numa),
        hugepages=hugepages,
        distances=(10, _SAME_SOCKET_DISTANCE, _REMOTE_DISTANCE),
        devices=devices,
    )


def trace_kubelet() -> KubeletConfig:
    """The kubelet of a trace node: allocatable = the trace's capacity (nothing reserved, no
    eviction threshold, 1001 pods as in the trace authors' Node objects), no CPU/memory/
    Topology manager: the cluster the FGD paper simulated."""
    return KubeletConfig(eviction_memory=0, max_pods=_MAX_PODS_TRACE)


def _spread(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal integers, the larger ones first."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _devices(kind: DeviceKind, per_numa: list[int], first: int, *, vendor: int, class_code: int,
             device_id: int | None = None, memory: int | None = None, model: str | None = None) -> list[Device]:
    out = []
    index = first
    for numa, count in enumerate(per_numa):
        for _ in range(count):
            if index >= _MAX_DEVICES:
                raise InputError(f"more than {_MAX_DEVICES} devices on one node", field="gpus")
            bridge = 0x10 + 2 * index
            out.append(Device(
                address=f"0000:{bridge + 1:02x}:00.0",
                kind=kind,
                numa_id=numa,
                vendor_id=vendor,
                device_id=device_id,
                class_code=class_code,
                pcie_path=(f"pci0000:{bridge:02x}", f"0000:{bridge:02x}:00.0"),
                memory_bytes=memory,
                attributes={"device_name": model} if model else {},
            ))
            index += 1
    return out


# ---- the Alibaba node list -----------------------------------------------------------------------


def read_alibaba_nodes(
    path: str | os.PathLike[str],
    *,
    kubelet: KubeletConfig | None = None,
    cpu_enforcement: str = CPU_ENFORCEMENT_KUBELET,
    gpu_memory: Mapping[str, int] | None = None,
) -> list[SimNode]:
    """The nodes of an Alibaba ``openb_node_list_*.csv``, in file order, named by ``sn``.

    Layout by :func:`trace_machine`; kubelet ``kubelet`` or :func:`trace_kubelet`; GPU nodes
    carry their model as ``SimNode.gpu_model`` and the labels ``nvidia.com/gpu.product`` and
    ``toposched.io/gpu-model``.
    Nodes of the same totals share one (immutable) machine.
    """
    config = kubelet or trace_kubelet()
    machines: dict[tuple[int, int, int, str], tuple[Machine, Any]] = {}
    nodes: list[SimNode] = []
    names: set[str] = set()
    for where, row in csv_rows(path, ALIBABA_NODE_COLUMNS, ALIBABA_NODE_COLUMNS):
        try:
            name = _name(row["sn"], names, "sn")
            check_dns_subdomain(name, field="sn")
            cpu_milli = cell_int(row["cpu_milli"], "cpu_milli")
            if cpu_milli == 0 or cpu_milli % 1000:
                raise InputError(f"{cpu_milli} is not a positive whole number of CPUs in millicores", field="cpu_milli")
            if cpu_milli > MAX_PUS * 1000:
                raise InputError(f"{cpu_milli // 1000:,} CPUs: more than {MAX_PUS:,} in one machine (the limit)",
                                 field="cpu_milli")
            memory = cell_int(row["memory_mib"], "memory_mib") * _MIB
            gpus = cell_int(row["gpu"], "gpu")
            if gpus > MAX_DEVICES_PER_ZONE_RESOURCE:
                raise InputError(f"{gpus:,} GPUs: more than {MAX_DEVICES_PER_ZONE_RESOURCE:,} (the limit)", field="gpu")
            model = row["model"].strip()
            if gpus and model not in GPU_MODELS:
                raise InputError(f"unknown GPU model {model!r}; known: {', '.join(GPU_MODELS)}", field="model")
            if not gpus and model:
                raise InputError(f"names GPU model {model!r} but the node has no GPU", field="model")
            key = (cpu_milli, memory, gpus, model)
            if key not in machines:
                machine = trace_machine(cpu_milli // 1000, memory, gpus=gpus, gpu_model=model or None,
                                        gpu_memory=gpu_memory)
                machines[key] = (machine, device_plugins(machine))
            machine, plugins = machines[key]
            nodes.append(sim_node(name, machine, config, plugins=plugins, gpu_model=model or None,
                                  profile=TRACE_NODE_PROFILE, cpu_enforcement=cpu_enforcement))
        except InputError as err:
            raise err.with_source(where) from None
    return nodes


# ---- our node CSV --------------------------------------------------------------------------------


def read_node_csv(path: str | os.PathLike[str], *, gpu_memory: Mapping[str, int] | None = None) -> list[SimNode]:
    """The nodes of our node CSV (columns in docs/sim/inputs.md), in file order.

    A row with ``count`` N > 1 gives nodes ``<name>-0001`` ... ``<name>-N``. Empty optional
    cells take the layout rule of :func:`trace_machine` and the kubelet of
    :func:`~toposched.sim.hardware.default_kubelet_configuration`; the policy columns override
    it. Each row's configuration is checked once against its machine.
    """
    nodes: list[SimNode] = []
    names: set[str] = set()
    for where, row in csv_rows(path, NODE_CSV_COLUMNS, NODE_CSV_REQUIRED):
        try:
            name = row["name"].strip()
            if not name:
                raise InputError("a node needs a name", field="name")
            check_dns_subdomain(name, field="name")
            cpus = cell_int(row["cpus"], "cpus")
            if cpus > MAX_PUS:
                raise InputError(f"{cpus:,} CPUs: more than {MAX_PUS:,} in one machine (the limit)", field="cpus")
            if not row["memory"].strip():
                raise InputError("the memory is empty", field="memory")
            memory = canonical_units("memory", row["memory"].strip(), field="memory")
            count = _optional(row, "count", 1)
            gpus = _optional(row, "gpus", 0)
            model = (row.get("gpu_model") or "").strip() or None
            if gpus and model is None:
                raise InputError("a node with GPUs needs a gpu_model", field="gpu_model")
            hugepages = {size: pages for size, column in ((_GIB, "hugepages_1Gi"), (2 * _MIB, "hugepages_2Mi"))
                         if (pages := _optional(row, column, 0))}
            if sum(size * pages for size, pages in hugepages.items()) > memory:
                raise InputError(f"the hugepages ({', '.join(f'{p:,} x {format_bytes(z)}' for z, p in hugepages.items())}) "
                                 f"need more than the node's memory {format_bytes(memory)}",
                                 field="hugepages_1Gi" if _GIB in hugepages else "hugepages_2Mi")
            for column, limit in (("count", MAX_SIM_NODES), ("gpus", MAX_DEVICES_PER_ZONE_RESOURCE),
                                  ("rdma_nics", MAX_DEVICES_PER_ZONE_RESOURCE)):
                if _optional(row, column, 0) > limit:
                    raise InputError(f"{_optional(row, column, 0):,} is above {limit:,} (the limit)", field=column)
            machine = trace_machine(
                cpus, memory, gpus=gpus, gpu_model=model, numa=_optional(row, "numa", None),
                sockets=_optional(row, "sockets", None), threads_per_core=_optional(row, "threads_per_core", None),
                rdma_nics=_optional(row, "rdma_nics", 0), hugepages=hugepages, gpu_memory=gpu_memory,
            )
            plugins = device_plugins(machine)
            configuration = default_kubelet_configuration(machine, plugins)
            for column, key in (("topology_manager_policy", "topologyManagerPolicy"),
                                ("topology_manager_scope", "topologyManagerScope")):
                if (row.get(column) or "").strip():
                    configuration[key] = row[column].strip()
            config = KubeletConfig.from_dict(configuration, source=where)
            check_kubelet(machine, config, plugins)
            enforcement = (row.get("cpu_enforcement") or "").strip() or CPU_ENFORCEMENT_KUBELET
            if enforcement not in CPU_ENFORCEMENTS:
                raise InputError(f"unknown value {enforcement!r}; expected one of {', '.join(CPU_ENFORCEMENTS)}",
                                 field="cpu_enforcement")
            node_names = [name] if count == 1 else [f"{name}-{i:04d}" for i in range(1, count + 1)]
            for node_name in node_names:
                _name(node_name, names, "name")
                nodes.append(sim_node(node_name, machine, config, plugins=plugins, gpu_model=model,
                                      profile=f"csv:{Path(path).name}", cpu_enforcement=enforcement))
        except InputError as err:
            raise err.with_source(where) from None
    return nodes


def load_nodes(path: str | os.PathLike[str]) -> list[SimNode]:
    """Nodes from any node file: an Alibaba node list or our node CSV (``.csv``, told apart by
    their header), else a cluster spec (YAML/JSON, :func:`~toposched.sim.hardware.load_cluster`)."""
    if Path(path).suffix.lower() != ".csv":
        return load_cluster(path)
    header = _header(path)
    if set(header) == set(ALIBABA_NODE_COLUMNS):
        return read_alibaba_nodes(path)
    return read_node_csv(path)


# ---- CSV plumbing (shared with the trace loader) --------------------------------------------------------------------------------


def _header(path: str | os.PathLike[str]) -> list[str]:
    for _, row in _csv_lines(path, header_only=True):
        return row
    return []


def _csv_lines(path: str | os.PathLike[str], *, header_only: bool = False) -> Iterator[tuple[int, list[str]]]:
    source = os.fspath(path)
    text = read_file_text(source)  # a regular file under the size cap (toposched.inputs)
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        for row in reader:
            yield reader.line_num, row
            if header_only:
                return
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", source=source) from None


def csv_rows(path: str | os.PathLike[str], known: Iterable[str], required: Iterable[str]) -> Iterator[tuple[str, dict[str, str]]]:
    """``(<file>:<line>, {column: cell})`` for every non-blank data row of a CSV file with a header.

    InputError (source ``<file>:1``) for a column not in ``known``, a repeated column or a
    missing ``required`` one; (source ``<file>:<line>``) for a row with the wrong cell count.
    """
    source = os.fspath(path)
    lines = _csv_lines(path)
    first = next(lines, None)
    if first is None:
        raise InputError("the file is empty; expected a header row", source=source)
    header = [h.strip() for h in first[1]]
    known_set = set(known)
    for column in header:
        if column not in known_set:
            raise InputError(f"unknown column {column!r}; known: {', '.join(known)}", field=column, source=f"{source}:1")
    if len(set(header)) != len(header):
        raise InputError(f"columns repeat: {header}", field="header", source=f"{source}:1")
    for column in required:
        if column not in header:
            raise InputError(f"the column {column!r} is missing", field=column, source=f"{source}:1")
    for line, cells in lines:
        if not any(c.strip() for c in cells):
            continue
        where = f"{source}:{line}"
        if len(cells) != len(header):
            raise InputError(f"{len(cells)} cells for {len(header)} columns", source=where)
        yield where, dict(zip(header, cells))


# The largest integer a cell may hold (15 digits): far above any count, millicore or MiB figure.
MAX_CELL_INT = 10**15 - 1


def cell_int(text: str, field: str) -> int:
    """A CSV cell holding a non-negative integer up to :data:`MAX_CELL_INT`; InputError naming ``field`` otherwise."""
    value = text.strip()
    if not value.lstrip("+").isascii() or not value.lstrip("+").isdigit():
        if value.startswith("-") and value[1:].isdigit():
            raise InputError(f"{value[:40]} is negative", field=field)
        raise InputError(f"{value[:40]!r} is not a non-negative integer", field=field)
    if len(value.lstrip("+").lstrip("0")) > 15:
        raise InputError(f"{value[:20]}... is above {MAX_CELL_INT:,} (the limit)", field=field)
    return int(value)


def _optional(row: Mapping[str, str], column: str, default: Any) -> Any:
    text = (row.get(column) or "").strip()
    return default if not text else cell_int(text, column)


def _name(name: str, seen: set[str], field: str) -> str:
    name = name.strip()
    if not name:
        raise InputError("the name is empty", field=field)
    if name in seen:
        raise InputError(f"node {name!r} is listed twice", field=field)
    seen.add(name)
    return name
