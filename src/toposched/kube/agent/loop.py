"""The node agent's loop: re-read the node, publish its NodeResourceTopology, reconcile cpusets.

Each :meth:`Agent.step` reads sysfs, the kubelet's files and the pods bound to the node (a list
with field selector ``spec.nodeName=<node>``); publishes the report by server-side apply (field
manager ``toposched-agent``) when it differs from the last one published or ``interval``
seconds have passed since; and rewrites every placed container's cpuset that drifted from its
placement. Bad input or a refused API call is logged and retried at the next step; it never
stops enforcement for reasons that do not concern it (a kubelet configuration the report
cannot use does not stop cpusets being enforced, but an unreadable CPU manager checkpoint does:
the agent would no longer know which CPUs the kubelet owns).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toposched.errors import InputError
from toposched.kube.agent.cgroups import CgroupAction, enforce_placements
from toposched.kube.agent.device_ids import match_device, read_nvidia_uuids
from toposched.kube.agent.kubelet_files import (
    CONFIG_FILE,
    DEFAULT_KUBELET_DIR,
    read_cpu_state,
    read_kubelet_config,
    read_memory_state_file,
)
from toposched.kube.agent.podresources import DEFAULT_SOCKET, PodResourcesUnavailable, read_podresources
from toposched.kube.client import NRTS, PODS, ApiError, KubeClient, NotFound
from toposched.kube.controller import keep_controller_attributes
from toposched.kubelet.description import DescribedDevice
from toposched.node_report import node_report
from toposched.topology.model import Machine
from toposched.topology.sysfs import read_sysfs

__all__ = ["Agent", "AgentStep", "FIELD_MANAGER"]

log = logging.getLogger(__name__)

FIELD_MANAGER = "toposched-agent"


@dataclass
class AgentStep:
    """What one step did: the report it built (None when it could not), whether it was applied,
    the cgroup actions, and the errors it logged."""

    report: dict[str, Any] | None = None
    published: bool = False
    actions: list[CgroupAction] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Agent:
    """The node agent of one node.

    ``publish=False`` is the coexistence mode with node-feature-discovery (NFD publishes the
    NodeResourceTopology; the agent only enforces). ``enforce=False`` only publishes.
    ``dry_run`` writes nothing anywhere (no cgroup file, no API object): the step's result and
    the logs say what would have been written. ``period`` is the pause between steps in
    :meth:`run`; ``interval`` is how often an unchanged report is applied again. ``clock``
    returns seconds (monotonic); nothing here sleeps except :meth:`run` on its ``stop`` event.
    """

    def __init__(
        self,
        client: KubeClient,
        node_name: str,
        *,
        sysfs_root: str | Path = "/",
        kubelet_dir: str | Path = DEFAULT_KUBELET_DIR,
        kubelet_config: str | Path | None = None,
        cgroup_root: str | Path = "/sys/fs/cgroup",
        clock: Callable[[], float] = time.monotonic,
        interval: float = 60.0,
        period: float = 10.0,
        dry_run: bool = False,
        publish: bool = True,
        enforce: bool = True,
        podresources_socket: str | Path | None = DEFAULT_SOCKET,
        host_root: str | Path = "/",
    ) -> None:
        if not node_name:
            raise InputError("a node name is required", field="node_name")
        if interval <= 0 or period <= 0:
            raise InputError("interval and period must be positive", field="interval")
        self.client = client
        self.node_name = node_name
        self.sysfs_root = Path(sysfs_root)
        self.kubelet_dir = Path(kubelet_dir)
        self.kubelet_config = Path(kubelet_config) if kubelet_config else self.kubelet_dir / CONFIG_FILE
        self.cgroup_root = Path(cgroup_root)
        self.clock = clock
        self.interval = interval
        self.period = period
        self.dry_run = dry_run
        self.publish = publish
        self.enforce = enforce
        self.podresources_socket = str(podresources_socket) if podresources_socket else None
        self.host_root = Path(host_root)
        self._published: dict[str, Any] | None = None
        self._published_at: float | None = None
        self._said_no_podresources = False

    def _fail(self, result: AgentStep, what: str, err: Exception) -> None:
        message = f"{what}: {err}"
        log.error("%s", message)
        result.errors.append(message)

    def step(self) -> AgentStep:
        """One round: read, publish when due, enforce (see the module notes).

        Never raises for bad input or API refusals: they are logged and listed in ``errors``.
        """
        result = AgentStep()
        now = self.clock()
        try:
            machine = read_sysfs(self.sysfs_root)
        except InputError as err:
            self._fail(result, "cannot read the machine", err)
            return result
        try:
            pods: list[dict[str, Any]] | None = self.client.list(
                PODS, field_selector=f"spec.nodeName={self.node_name}").items
        except ApiError as err:
            self._fail(result, "cannot list the node's pods", err)
            pods = None
        try:
            cpu_state = read_cpu_state(self.kubelet_dir)
            cpu_ok = True
        except InputError as err:
            self._fail(result, "cannot read the CPU manager checkpoint", err)
            cpu_state, cpu_ok = None, False
        memory_total = sum(n.memory_bytes for n in machine.numa_nodes)
        try:
            config, driver = read_kubelet_config(self.kubelet_config, memory_total=memory_total)
        except InputError as err:
            self._fail(result, "cannot read the kubelet configuration", err)
            config, driver = None, None

        if self.publish and config is not None and pods is not None and cpu_ok:
            devices, assignments = self._devices(result, machine, pods)
            try:
                result.report = node_report(machine, config, node_name=self.node_name, cpu_state=cpu_state,
                                            memory_state=read_memory_state_file(self.kubelet_dir), pods=pods,
                                            devices=devices, device_assignments=assignments)
            except InputError as err:
                self._fail(result, "cannot build the NodeResourceTopology", err)
            if result.report is not None:
                result.published = self._publish(result, result.report, now)

        if self.enforce and pods is not None and cpu_ok:
            result.actions = enforce_placements(
                pods, node_name=self.node_name, machine=machine, cgroup_root=self.cgroup_root,
                cpu_state=cpu_state, cgroup_driver=driver, dry_run=self.dry_run)
        return result

    def _devices(self, result: AgentStep, machine: Machine, pods: list[dict[str, Any]]
                 ) -> tuple[list[DescribedDevice] | None, dict[str, dict[str, dict[str, list[str]]]] | None]:
        """The devices the kubelet hands out and who holds which, from its podresources API.

        Each device keeps the id its plugin gives it; the PCI device behind it (PCIe path, model,
        memory) is found by :func:`match_device`; an id that matches none keeps the NUMA node the
        API reports and no PCIe locality. Without the socket (or with ``podresources_socket``
        None) this says so once and returns ``(None, None)``: the report then describes the
        devices from sysfs and the resource map, and takes assignments from the placements.
        """
        if self.podresources_socket is None:
            return None, None
        try:
            snapshot = read_podresources(self.podresources_socket)
            uuids = read_nvidia_uuids(self.host_root)
        except PodResourcesUnavailable as err:
            if not self._said_no_podresources:
                log.warning("the kubelet's podresources API cannot be read (%s); devices are published from sysfs "
                            "and the device-resource map, their assignments from placements", err)
                self._said_no_podresources = True
            return None, None
        except InputError as err:
            self._fail(result, "cannot read the kubelet's podresources answer", err)
            return None, None
        self._said_no_podresources = False
        devices = []
        for entry in snapshot.allocatable.devices:
            for device_id in entry.ids:
                found = match_device(device_id, machine, uuids)
                numa = entry.numa_ids[0] if len(entry.numa_ids) == 1 else (found.numa_id if found else None)
                if found is None:
                    devices.append(DescribedDevice(entry.resource, device_id, numa))
                else:
                    devices.append(DescribedDevice(entry.resource, device_id, numa, found.address, found.pcie_path,
                                                   found.attributes.get("device_name") or found.name,
                                                   found.memory_bytes, found.kind))
        uids = {((p.get("metadata") or {}).get("namespace", "default"), (p.get("metadata") or {}).get("name")):
                (p.get("metadata") or {}).get("uid") for p in pods}
        assignments: dict[str, dict[str, dict[str, list[str]]]] = {}
        for pod in snapshot.pods:
            uid = uids.get((pod.namespace, pod.name)) or f"{pod.namespace}/{pod.name}"
            for container in pod.containers:
                for entry in container.devices:
                    held = assignments.setdefault(uid, {}).setdefault(container.name, {})
                    held.setdefault(entry.resource, []).extend(entry.ids)
        return devices, assignments

    def _publish(self, result: AgentStep, report: dict[str, Any], now: float) -> bool:
        due = (self._published != report or self._published_at is None
               or now - self._published_at >= self.interval)
        if not due:
            return False
        if self.dry_run:
            log.info("would apply NodeResourceTopology %s", self.node_name)
            return False
        try:
            try:
                current = self.client.get(NRTS, self.node_name)
            except NotFound:
                current = None
            # force: the agent is the one writer of its node's report; it takes over fields a
            # previous publisher (e.g. node-feature-discovery before it was switched off) owned.
            # ``zones`` is an atomic list, so the controller's zone attributes are carried over.
            self.client.apply(NRTS, keep_controller_attributes(report, current), field_manager=FIELD_MANAGER,
                              force=True)
        except ApiError as err:
            self._fail(result, "cannot apply the NodeResourceTopology", err)
            return False
        self._published, self._published_at = report, now
        log.info("applied NodeResourceTopology %s", self.node_name)
        return True

    def run(self, stop: threading.Event) -> None:
        """Step every ``period`` seconds until ``stop`` is set (checked between steps and while waiting)."""
        while not stop.is_set():
            self.step()
            stop.wait(self.period)
