"""Enforcement: write each placed container's ``cpuset.cpus`` and ``cpuset.mems`` into its cgroup.

For every pod bound to this node whose ``toposched.io/placement`` annotation names this node,
the container cgroups are found from the pod UID and the container IDs in the pod's status,
under either cgroup driver and either cgroup version (docs/kube/agent.md shows the layouts):

* cgroup v2 (``<root>/cgroup.controllers`` exists): the files sit in the container's directory
  under ``<root>``; the ``cpuset`` controller must be enabled in every ancestor's
  ``cgroup.subtree_control`` (never toggled here; a pod whose path lacks it is refused);
* cgroup v1: the same relative paths under ``<root>/cpuset``.

Pod directories, systemd driver: ``kubepods.slice/kubepods-pod<uid_>.slice`` (Guaranteed),
``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice``,
``kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid_>.slice`` (``uid_`` is
the UID with ``-`` replaced by ``_``), containers ``cri-containerd-<id>.scope``,
``crio-<id>.scope`` or ``docker-<id>.scope``. cgroupfs driver: ``kubepods/pod<uid>``,
``kubepods/burstable/pod<uid>``, ``kubepods/besteffort/pod<uid>``, containers ``<id>``
(``crio-<id>`` for CRI-O).

Safety rules, checked before anything is written for a pod (a refusal is logged as an error and
nothing is written for that pod): the UID and container IDs must have their usual shape; names
must be DNS labels; every path read or written must resolve inside the cgroup root; the cpuset
must name online CPUs of this machine and NUMA nodes with memory; no CPU the kubelet's static
CPU manager holds for another pod may appear. Containers the static CPU manager pinned itself
are left alone. Files are opened for writing without creating them and without following a
symbolic link.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from toposched.errors import InputError
from toposched.kube.agent.kubelet_files import exclusive_cpus
from toposched.kubelet.cpu_state import CPUManagerCheckpoint
from toposched.node_report import active_pods
from toposched.scheduler.placement import PLACEMENT_ANNOTATION, Placement
from toposched.topology import CPUSet
from toposched.topology.model import Machine

__all__ = [
    "CPUS_FILE",
    "CgroupAction",
    "CgroupLayout",
    "MEMS_FILE",
    "apply_actions",
    "detect_layout",
    "enforce_placements",
    "plan_enforcement",
]

log = logging.getLogger(__name__)

CPUS_FILE = "cpuset.cpus"
MEMS_FILE = "cpuset.mems"
_SUBTREE_CONTROL = "cgroup.subtree_control"

# Pod UIDs are RFC 4122 UUIDs; static pods carry the 32-hex hash the kubelet gives them.
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")
_CONTAINER_ID = re.compile(r"(containerd|cri-o|docker)://([0-9a-f]{64})")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# Runtime -> (systemd scope prefix, cgroupfs directory prefix).
_RUNTIME_NAMES = {"containerd": ("cri-containerd-", ""), "cri-o": ("crio-", "crio-"), "docker": ("docker-", "")}
_QOS_LEVELS = ("", "burstable", "besteffort")  # "" is Guaranteed: directly under kubepods


@dataclass(frozen=True)
class CgroupLayout:
    """Where cpuset files live: cgroup ``version`` 1 or 2 and the ``base`` directory kubepods is under."""

    version: int
    base: Path


@dataclass(frozen=True)
class CgroupAction:
    """One thing enforcement did or would do.

    ``kind`` is ``write`` (``path``/``file`` from ``old`` to ``new``; ``applied`` once written),
    ``refuse`` (nothing written for the pod: ``reason``), ``skip`` (this container or pod left
    alone: ``reason``) or ``error`` (a write failed: ``reason``; the pod's later writes were not tried).
    """

    pod: str
    container: str | None
    kind: str
    path: str | None = None
    file: str | None = None
    old: str | None = None
    new: str | None = None
    reason: str | None = None
    applied: bool = False

    def describe(self) -> str:
        """One line for logs and ``--dry-run`` output."""
        who = f"{self.pod}/{self.container}" if self.container else self.pod
        if self.kind == "write":
            return f"{who}: {self.path}/{self.file}: {self.old!r} -> {self.new!r}"
        return f"{who}: {self.kind}: {self.reason}"


def detect_layout(cgroup_root: str | Path) -> CgroupLayout | None:
    """The cgroup layout under ``cgroup_root``: v2 when it holds ``cgroup.controllers``, v1 when it
    has a ``cpuset`` hierarchy, None when neither (nothing can be enforced)."""
    root = Path(cgroup_root)
    if (root / "cgroup.controllers").is_file():
        return CgroupLayout(2, root)
    if (root / "cpuset").is_dir():
        return CgroupLayout(1, root / "cpuset")
    return None


class _Refused(Exception):
    """A pod must not be touched; the message says why."""


def _pod_ref(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"


def _inside(root: Path, path: Path) -> bool:
    real_root = os.path.realpath(root)
    return os.path.commonpath([real_root, os.path.realpath(path)]) == real_root


def _pod_dirs(uid: str) -> list[Path]:
    under = uid.replace("-", "_")
    out = []
    for qos in _QOS_LEVELS:
        if qos:
            out.append(Path("kubepods.slice", f"kubepods-{qos}.slice", f"kubepods-{qos}-pod{under}.slice"))
            out.append(Path("kubepods", qos, f"pod{uid}"))
        else:
            out.append(Path("kubepods.slice", f"kubepods-pod{under}.slice"))
            out.append(Path("kubepods", f"pod{uid}"))
    return out


def _container_dir_name(runtime: str, container_id: str, systemd: bool) -> str:
    scope, plain = _RUNTIME_NAMES[runtime]
    return f"{scope}{container_id}.scope" if systemd else f"{plain}{container_id}"


def _read_set(path: Path, file: str) -> CPUSet:
    target = path / file
    if not target.is_file() or not _inside(path, target):
        raise _Refused(f"{target} is missing or not a regular file inside the cgroup")
    try:
        return CPUSet.parse(target.read_text())
    except (OSError, InputError) as exc:
        raise _Refused(f"cannot read {target}: {exc}") from None


def _container_ids(pod: Mapping[str, Any]) -> dict[str, tuple[str, str] | None]:
    """Container name -> (runtime, id), or None while it has no container yet; refuses odd shapes."""
    status = pod.get("status") or {}
    out: dict[str, tuple[str, str] | None] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for entry in status.get(key) or ():
            if not isinstance(entry, Mapping):
                continue
            name, raw = entry.get("name"), entry.get("containerID")
            if not isinstance(name, str) or not _DNS_LABEL.fullmatch(name):
                raise _Refused(f"container name {name!r} in the status is not a DNS label")
            if not raw:
                out[name] = None
                continue
            match = _CONTAINER_ID.fullmatch(raw) if isinstance(raw, str) else None
            if match is None:
                raise _Refused(f"container {name}: containerID {raw!r} is not <runtime>://<64 hex digits>")
            out[name] = (match.group(1), match.group(2))
    return out


def _check_placement(placement: Placement, machine: Machine) -> None:
    for name, c in placement.containers.items():
        if not _DNS_LABEL.fullmatch(name):
            raise _Refused(f"container name {name!r} in the placement is not a DNS label")
        missing = c.cpuset - machine.online
        if missing:
            raise _Refused(f"container {name}: cpuset {c.cpuset} names CPUs {missing} "
                           "this machine does not have online")
    for numa in placement.numa_nodes.union(*(c.numa_nodes for c in placement.containers.values())):
        if not machine.has_numa(numa):
            raise _Refused(f"NUMA node {numa} does not exist on this machine")
        if not machine.numa(numa).memory_bytes:
            raise _Refused(f"NUMA node {numa} has no memory to bind to")


def _numa_cpus(machine: Machine, numa: Iterable[int]) -> CPUSet:
    mask = 0
    for n in numa:
        mask |= machine.numa(n).cpus.mask
    return CPUSet.from_mask(mask)


@dataclass
class _Node:
    """What planning needs to know about the node besides the pod at hand."""

    name: str
    machine: Machine
    layout: CgroupLayout
    kubelet_cpus: dict[str, dict[str, CPUSet]]  # pod uid -> container ("" = pod level) -> exclusive CPUs
    placed: dict[str, CPUSet]  # pod uid -> exclusive CPUs its placement holds
    systemd: bool | None


def _other_kubelet_cpus(node: _Node, uid: str) -> CPUSet:
    mask = 0
    for other, containers in node.kubelet_cpus.items():
        if other != uid:
            for cpus in containers.values():
                mask |= cpus.mask
    return CPUSet.from_mask(mask)


def _find_pod_dir(node: _Node, uid: str) -> Path | None:
    base = node.layout.base
    found = []
    for rel in _pod_dirs(uid):
        systemd = rel.parts[0] == "kubepods.slice"
        if node.systemd is not None and systemd != node.systemd:
            continue
        path = base / rel
        if path.is_dir() and _inside(base, path):
            found.append(path)
    if len(found) > 1:
        raise _Refused(f"pod UID {uid} has several cgroups: {', '.join(map(str, found))}")
    return found[0] if found else None


def _check_v2_controllers(base: Path, container_dir: Path) -> None:
    """Every ancestor of the container's cgroup, from the root down, must delegate ``cpuset``."""
    rel = container_dir.relative_to(base)
    current = base
    for part in rel.parts:
        control = current / _SUBTREE_CONTROL
        try:
            enabled = control.read_text().split()
        except OSError:
            enabled = []
        if "cpuset" not in enabled:
            raise _Refused(f"the cpuset controller is not enabled in {control}")
        current = current / part


def _plan_pod(pod: Mapping[str, Any], node: _Node) -> list[CgroupAction]:
    ref = _pod_ref(pod)
    meta = pod.get("metadata") or {}
    try:
        placement = Placement.from_annotation(meta["annotations"][PLACEMENT_ANNOTATION], source=f"pod {ref}")
    except InputError as err:
        raise _Refused(str(err)) from None
    if placement.node != node.name:
        raise _Refused(f"the placement names node {placement.node!r}, but the pod is bound to {node.name!r}")
    uid = meta.get("uid")
    if not isinstance(uid, str) or not _UID.fullmatch(uid):
        raise _Refused(f"pod UID {uid!r} is not a UUID")
    _check_placement(placement, node.machine)
    ids = _container_ids(pod)
    own_kubelet = node.kubelet_cpus.get(uid, {})
    if "" in own_kubelet:
        return [CgroupAction(ref, None, "skip", reason="the kubelet's static CPU manager pinned the whole pod")]
    others = _other_kubelet_cpus(node, uid)
    for name, c in sorted(placement.containers.items()):
        clash = c.cpuset & others
        if clash:
            raise _Refused(f"container {name}: CPUs {clash} belong to the kubelet's static CPU manager for another pod")

    pod_dir = _find_pod_dir(node, uid)
    if pod_dir is None:
        return [CgroupAction(ref, None, "skip", reason="no pod cgroup on this node (yet)")]
    systemd = pod_dir.name.endswith(".slice")
    # Exclusive CPUs other containers hold (kubelet pins, other toposched placements, this pod's
    # own exclusive containers): a container placed on NUMA nodes without exclusive CPUs shares the rest.
    held = others.mask
    for cpus in own_kubelet.values():
        held |= cpus.mask
    for other_uid, cpus in node.placed.items():
        if other_uid != uid:
            held |= cpus.mask
    held |= placement.cpuset.mask

    actions: list[CgroupAction] = []
    targets: list[tuple[str, Path, CPUSet, CPUSet | None]] = []
    for name, c in sorted(placement.containers.items()):
        if name in own_kubelet:
            actions.append(CgroupAction(ref, name, "skip", reason="pinned by the kubelet's static CPU manager"))
            continue
        numa = c.numa_nodes or placement.numa_nodes
        if c.cpuset:
            cpus = c.cpuset
        elif numa:
            cpus = _numa_cpus(node.machine, numa) - CPUSet.from_mask(held)
            if not cpus:
                raise _Refused(f"container {name}: no CPU of NUMA nodes {sorted(numa)} is left to share")
        else:
            actions.append(CgroupAction(ref, name, "skip", reason="the placement names no CPUs and no NUMA nodes"))
            continue
        found = ids.get(name)
        if found is None:
            actions.append(CgroupAction(ref, name, "skip", reason="the container has not started (no containerID)"))
            continue
        directory = pod_dir / _container_dir_name(*found, systemd)
        if not directory.is_dir() or not _inside(pod_dir, directory):
            actions.append(CgroupAction(ref, name, "skip", reason=f"no cgroup {directory}"))
            continue
        if node.layout.version == 2:
            _check_v2_controllers(node.layout.base, directory)
        targets.append((name, directory, cpus, CPUSet(numa) if numa else None))
    if not targets:
        return actions

    want_cpus = CPUSet.from_mask(_union(t[2] for t in targets))
    want_mems = CPUSet.from_mask(_union(t[3] for t in targets if t[3] is not None))
    writes: list[CgroupAction] = []
    # Order: the pod cgroup first, then its containers. cgroup v1 refuses a child cpuset that is
    # not a subset of its parent's, so the pod level is widened (never narrowed: other
    # containers of the pod, and the sandbox, may use the rest) before a container may use the
    # new CPUs. cgroup v2 has no such rule and an empty pod-level file means "inherit
    # everything", which already contains any container's set.
    for file, want in ((CPUS_FILE, want_cpus), (MEMS_FILE, want_mems)):
        if not want:
            continue
        current = _read_set(pod_dir, file)
        if node.layout.version == 2 and not current:
            continue
        if not want <= current:
            new = current | want
            if node.layout.version == 1:
                parent = _read_set(pod_dir.parent, file)
                if not new <= parent:
                    raise _Refused(f"{pod_dir.parent}/{file} ({parent}) does not contain {new}")
            writes.append(CgroupAction(ref, None, "write", str(pod_dir), file, str(current), str(new)))
    for name, directory, cpus, mems in targets:
        for file, want in ((CPUS_FILE, cpus), (MEMS_FILE, mems)):
            if want is None:
                continue
            current = _read_set(directory, file)
            if current != want:
                writes.append(CgroupAction(ref, name, "write", str(directory), file, str(current), str(want)))
    return actions + writes


def _union(sets: Iterable[CPUSet]) -> int:
    mask = 0
    for s in sets:
        mask |= s.mask
    return mask


def plan_enforcement(
    pods: Iterable[Mapping[str, Any]],
    *,
    node_name: str,
    machine: Machine,
    cgroup_root: str | Path,
    cpu_state: CPUManagerCheckpoint | None = None,
    cgroup_driver: str | None = None,
) -> list[CgroupAction]:
    """The writes that would make every placed container's cgroup match its placement, and every refusal.

    Reads the cgroup tree, writes nothing. Considers the active pods bound to ``node_name``
    that carry a ``toposched.io/placement`` annotation; ``cpu_state`` is the kubelet's CPU
    manager checkpoint (None: nothing is pinned by the kubelet). ``cgroup_driver``
    (``systemd``/``cgroupfs``) limits the layouts searched; None searches both. Files already
    holding the wanted set produce no action. Pods whose writes are planned come in the order
    given; within a pod, pod-level writes precede container writes.
    """
    layout = detect_layout(cgroup_root)
    pods = [p for p in active_pods(pods, node_name)
            if isinstance(((p.get("metadata") or {}).get("annotations") or {}).get(PLACEMENT_ANNOTATION), str)]
    if not pods:
        return []
    if layout is None:
        reason = f"no cgroup v1 cpuset or v2 hierarchy at {cgroup_root}"
        return [CgroupAction(_pod_ref(p), None, "refuse", reason=reason) for p in pods]
    placed: dict[str, CPUSet] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        try:
            placement = Placement.from_annotation(meta["annotations"][PLACEMENT_ANNOTATION])
        except InputError:
            continue
        if placement.node == node_name and isinstance(meta.get("uid"), str):
            placed[meta["uid"]] = placement.cpuset
    systemd = None if cgroup_driver is None else cgroup_driver == "systemd"
    node = _Node(node_name, machine, layout, exclusive_cpus(cpu_state), placed, systemd)
    actions: list[CgroupAction] = []
    for pod in pods:
        try:
            actions.extend(_plan_pod(pod, node))
        except _Refused as refusal:
            actions.append(CgroupAction(_pod_ref(pod), None, "refuse", reason=str(refusal)))
    return actions


def _write(path: str, file: str, value: str) -> None:
    # No O_CREAT: a cgroup file that is not there is not ours to make. O_NOFOLLOW: never write
    # through a symbolic link planted in place of the file. O_TRUNC, as a shell's ">" opens it
    # (kernfs ignores it; it keeps a plain file, e.g. in a test tree, from keeping a longer tail).
    fd = os.open(os.path.join(path, file), os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def apply_actions(actions: Iterable[CgroupAction]) -> list[CgroupAction]:
    """Perform the ``write`` actions in order; returns every action, writes marked ``applied``.

    A failed write becomes an ``error`` action and the same pod's later writes are dropped (in
    cgroup v1 they would depend on it).
    """
    out: list[CgroupAction] = []
    failed: set[str] = set()
    for action in actions:
        if action.kind != "write":
            out.append(action)
            continue
        if action.pod in failed:
            continue
        try:
            _write(action.path or "", action.file or "", action.new or "")
        except OSError as exc:
            failed.add(action.pod)
            reason = f"writing {action.path}/{action.file}: {exc.strerror or exc}"
            out.append(replace(action, kind="error", reason=reason))
            continue
        out.append(replace(action, applied=True))
    return out


def enforce_placements(
    pods: Iterable[Mapping[str, Any]],
    *,
    node_name: str,
    machine: Machine,
    cgroup_root: str | Path = "/sys/fs/cgroup",
    cpu_state: CPUManagerCheckpoint | None = None,
    cgroup_driver: str | None = None,
    dry_run: bool = False,
) -> list[CgroupAction]:
    """Plan (:func:`plan_enforcement`) and, unless ``dry_run``, perform the writes; log every action.

    Refusals and failed writes are logged as errors, writes (or, in a dry run, planned writes)
    as info. Returns the actions; with ``dry_run`` nothing is written and no action is ``applied``.
    """
    planned = plan_enforcement(pods, node_name=node_name, machine=machine, cgroup_root=cgroup_root,
                               cpu_state=cpu_state, cgroup_driver=cgroup_driver)
    actions = planned if dry_run else apply_actions(planned)
    for action in actions:
        if action.kind in ("refuse", "error"):
            log.error("cpuset enforcement: %s", action.describe())
        elif action.kind == "write":
            log.info("%s cpuset: %s", "would write" if dry_run else "wrote", action.describe())
        else:
            log.debug("cpuset enforcement: %s", action.describe())
    return actions
