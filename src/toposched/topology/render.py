"""A readable summary of a :class:`Machine` as rich tables (``toposched discover -o table``)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from toposched.quantity import format_bytes
from toposched.topology.model import Machine

__all__ = ["human_bytes", "render_machine"]

_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def human_bytes(value: int) -> str:
    """Bytes for people: "64 GiB" when exact, "187.6 GiB" (one decimal) otherwise, "512 B" when small."""
    for unit, size in _UNITS:
        if value >= size:
            whole, rest = divmod(value, size)
            return f"{whole} {unit}" if rest == 0 else f"{value / size:.1f} {unit}"
    return f"{value} B"


def _hugepages(pages: dict[int, int]) -> str:
    return ", ".join(f"{count}×{format_bytes(size)}" for size, count in sorted(pages.items())) or "-"


def render_machine(machine: Machine) -> Group:
    """A summary line and tables: sockets, NUMA nodes (CPUs, memory, hugepages, distances), devices.

    Shows SMT as threads per core (machine-wide and per socket), memory-only NUMA nodes as
    such, offline CPUs, and the devices grouped by NUMA node (those without one last).
    """
    parts: list[object] = [_summary(machine), _sockets(machine), _numa_nodes(machine)]
    if machine.devices:
        parts.append(_devices(machine))
    return Group(*parts)


def _summary(machine: Machine) -> Text:
    memory_only = sum(1 for n in machine.numa_nodes if n.cpu_less)
    numa = f"{len(machine.numa_nodes)}" + (f" ({memory_only} memory-only)" if memory_only else "")
    offline = f", {len(machine.offline_cpus)} offline ({machine.offline_cpus})" if machine.offline_cpus else ""
    total_memory = sum(n.memory_bytes for n in machine.numa_nodes)
    fields = [
        ("host", machine.hostname or "-"),
        ("sockets", str(len(machine.sockets))),
        ("NUMA nodes", numa),
        ("cores", str(len(machine.cores))),
        ("CPUs", f"{len(machine.cpus)} online{offline}"),
        ("SMT", f"{machine.threads_per_core} thread(s) per core"),
        ("memory", human_bytes(total_memory)),
        ("devices", str(len(machine.devices))),
    ]
    text = Text()
    for i, (label, value) in enumerate(fields):
        if i:
            text.append("  ")
        text.append(f"{label}: ", style="bold")
        text.append(value)
    return text


def _sockets(machine: Machine) -> Table:
    table = Table(title="Sockets", title_justify="left")
    for column in ("socket", "CPUs", "cores", "threads/core", "NUMA nodes", "dies"):
        table.add_column(column)
    for s in machine.sockets:
        threads = max(len(machine.core(c).cpus) for c in s.core_ids)
        table.add_row(
            str(s.id),
            str(s.cpus),
            str(len(s.core_ids)),
            str(threads),
            ",".join(map(str, s.numa_ids)),
            ",".join(map(str, s.die_ids)) or "-",
        )
    return table


def _numa_nodes(machine: Machine) -> Table:
    table = Table(title="NUMA nodes", title_justify="left")
    for column in ("NUMA", "CPUs", "#CPUs", "cores", "memory", "hugepages", "distances", "attributes"):
        table.add_column(column)
    cores_per_numa: dict[int, int] = {}
    for core in machine.cores:
        cores_per_numa[core.numa_id] = cores_per_numa.get(core.numa_id, 0) + 1
    for n in machine.numa_nodes:
        distances = " ".join(str(n.distances[m]) for m in machine.numa_ids) if n.distances else "-"
        attributes = ", ".join(f"{k}={v}" for k, v in n.attributes.items()) or "-"
        table.add_row(
            str(n.id),
            str(n.cpus) if n.cpus else "(memory only)",
            str(len(n.cpus)),
            str(cores_per_numa.get(n.id, 0)),
            human_bytes(n.memory_bytes),
            _hugepages(dict(n.hugepages)),
            distances,
            attributes,
        )
    return table


def _devices(machine: Machine) -> Table:
    table = Table(title="Devices by NUMA node", title_justify="left")
    for column in ("NUMA", "kind", "address", "vendor:device", "name"):
        table.add_column(column)
    ordered = sorted(machine.devices, key=lambda d: (d.numa_id is None, d.numa_id or 0))
    for d in ordered:
        ids = f"{d.vendor_id:04x}:{d.device_id:04x}" if d.vendor_id is not None and d.device_id is not None else "-"
        table.add_row("-" if d.numa_id is None else str(d.numa_id), d.kind.value, d.address, ids, d.name or "-")
    return table
