"""``toposched discover``: read a machine's topology and print it (table, JSON, YAML or NRT)."""

from __future__ import annotations

import json
import platform
import shutil
from enum import StrEnum
from pathlib import Path

import typer
import yaml
from rich.console import Console

from toposched.errors import InputError, ToposchedError
from toposched.inputs import check_dns_subdomain
from toposched.kubelet.config import KubeletConfig
from toposched.topology.cpuset import CPUSet
from toposched.topology.model import Machine

__all__ = ["OutputFormat", "discover"]


class OutputFormat(StrEnum):
    """What ``discover`` prints."""

    TABLE = "table"
    JSON = "json"
    YAML = "yaml"
    NRT = "nrt"


def discover(
    sysfs: Path | None = typer.Option(None, "--sysfs", metavar="ROOT",
                                         help="Read a sysfs tree under ROOT (a snapshot or /)."),
    hwloc: Path | None = typer.Option(None, "--hwloc", metavar="FILE",
                                         help="Read an hwloc XML export (lstopo --of xml)."),
    nrt: Path | None = typer.Option(None, "--nrt", metavar="FILE",
                                       help="Read a NodeResourceTopology object (YAML or JSON)."),
    output: OutputFormat = typer.Option(OutputFormat.TABLE, "-o", "--output", case_sensitive=False,
                                        help="table, json (the full model), yaml, or nrt (for kubectl apply)."),
    node_name: str | None = typer.Option(None, "--node-name",
                                            help="Node name for -o nrt (default: the machine's host name)."),
    policy: str = typer.Option("none", "--policy",
                               help="Topology Manager policy written into -o nrt."),
    scope: str = typer.Option("container", "--scope", help="Topology Manager scope written into -o nrt."),
    cpu_manager_policy: str = typer.Option("static", "--cpu-manager-policy",
                                           help="CPU manager policy written into -o nrt (static or none)."),
    reserved_cpus: str | None = typer.Option(
        None, "--reserved-cpus", metavar="CPUSET",
        help="CPUs the kubelet keeps for the system (its --reserved-cpus) written into -o nrt with the static "
             "CPU manager, which needs some (default: the threads of the first core)."),
    kubelet_config: Path | None = typer.Option(
        None, "--kubelet-config", metavar="FILE",
        help="A KubeletConfiguration file for -o nrt (its policies, options and reservations; "
             "overrides --policy, --scope, --cpu-manager-policy and --reserved-cpus)."),
) -> None:
    """Discover the hardware topology (by default of this machine, from /sys) and print it.

    ``-o nrt`` prints exactly what the toposched agent would publish for this machine with no
    pod running: NFD's zones with device counts, and the node description (CPU ids, cores,
    reserved CPUs, kubelet settings, devices with ids and PCIe locality).
    """
    try:
        machine, local = _read(sysfs, hwloc, nrt)
        config = _kubelet_config(kubelet_config, policy, scope, cpu_manager_policy, reserved_cpus, machine) \
            if output is OutputFormat.NRT else None
        typer.echo(_render(machine, output, node_name, config, local), nl=False)
    except (ToposchedError, OSError) as exc:
        typer.echo(f"toposched discover: {_one_line(exc)}", err=True)
        raise typer.Exit(code=1) from None


def _read(sysfs: Path | None, hwloc: Path | None, nrt: Path | None) -> tuple[Machine, bool]:
    chosen = [flag for flag, value in (("--sysfs", sysfs), ("--hwloc", hwloc), ("--nrt", nrt)) if value is not None]
    if len(chosen) > 1:
        raise InputError(f"give at most one of --sysfs, --hwloc, --nrt (got {' and '.join(chosen)})")
    if hwloc is not None:
        _must_exist(hwloc, is_dir=False)
        from toposched.topology.hwloc import read_hwloc_xml

        return read_hwloc_xml(hwloc), False
    if nrt is not None:
        _must_exist(nrt, is_dir=False)
        from toposched.topology.nrt import load_nrts, machine_from_nrt

        objects = load_nrts(nrt)
        if len(objects) != 1:
            names = ", ".join(o.name for o in objects)
            raise InputError(f"holds {len(objects)} NodeResourceTopology objects ({names}); give a file with one",
                             source=str(nrt))
        return machine_from_nrt(objects[0]), False
    root = sysfs if sysfs is not None else Path("/")
    _must_exist(root, is_dir=True)
    from toposched.topology.sysfs import read_sysfs

    return read_sysfs(root), sysfs is None


def _must_exist(path: Path, *, is_dir: bool) -> None:
    if not path.exists():
        raise InputError("no such file or directory", source=str(path))
    if is_dir and not path.is_dir():
        raise InputError("is not a directory", source=str(path))
    if not is_dir and path.is_dir():
        raise InputError("is a directory, expected a file", source=str(path))


def _kubelet_config(path: Path | None, policy: str, scope: str, cpu_policy: str, reserved: str | None,
                    machine: Machine) -> KubeletConfig:
    """The kubelet configuration -o nrt describes: the file's, else the flags' (InputError naming the flag).

    The static CPU manager needs CPUs reserved (the kubelet refuses to start without), so the flags'
    configuration reserves ``reserved``, else the first core's threads, as the simulator does for a
    node read from a file."""
    if path is not None:
        _must_exist(path, is_dir=False)
        from toposched.kube.agent.kubelet_files import read_kubelet_config

        return read_kubelet_config(path, memory_total=sum(n.memory_bytes for n in machine.numa_nodes))[0]
    cpus = None
    if reserved is not None:
        try:
            cpus = CPUSet.parse(reserved)
        except InputError as err:
            raise InputError(err.message, field="--reserved-cpus") from None
        unknown = cpus - machine.online
        if unknown:
            raise InputError(f"CPUs {unknown} are not online CPUs of this machine (online: {machine.online})",
                             field="--reserved-cpus")
    elif cpu_policy == "static" and machine.cpus:
        cpus = machine.siblings(machine.cpus[0].id)
    try:
        return KubeletConfig(topology_manager_policy=policy, topology_manager_scope=scope, cpu_manager_policy=cpu_policy,
                             reserved_system_cpus=cpus or None)
    except InputError as err:
        flags = {"topologyManagerPolicy": "--policy", "topologyManagerScope": "--scope",
                 "cpuManagerPolicy": "--cpu-manager-policy"}
        raise InputError(err.message, field=flags.get(err.field or "", err.field)) from None


def _render(machine: Machine, output: OutputFormat, node_name: str | None, config: KubeletConfig | None,
            local: bool) -> str:
    if output is OutputFormat.JSON:
        return json.dumps(machine.to_dict(), indent=2) + "\n"
    if output is OutputFormat.YAML:
        return yaml.safe_dump(machine.to_dict(), sort_keys=False)
    if output is OutputFormat.NRT:
        from toposched.node_report import node_report

        name = node_name or machine.hostname or (platform.node() if local else None)
        if not name:
            raise InputError("the machine has no host name: give --node-name", field="--node-name")
        check_dns_subdomain(name, field="--node-name" if node_name else "host name (give --node-name)")
        assert config is not None
        return yaml.safe_dump(node_report(machine, config, node_name=name), sort_keys=False, width=2**20)
    from toposched.topology.render import render_machine

    console = Console(force_terminal=False, width=_width())
    with console.capture() as capture:
        console.print(render_machine(machine))
    return capture.get()


def _width() -> int:
    # Wide enough that distance rows and CPU lists of big machines stay on one line in pipes.
    return max(100, shutil.get_terminal_size((120, 24)).columns)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename is not None:
        text = f"{exc.filename}: {exc.strerror or exc}"
    else:
        text = str(exc)
    return " ".join(text.split())
