"""The kubelet oracle's cases, run on both sides: the real kubelet managers and ``toposched.kubelet``.

A case is one JSON object, the oracle's input (``tests/oracle/kubelet/case.go``): the machine as
cAdvisor's ``MachineInfo``, a ``KubeletConfiguration`` subset, devices per resource with their
NUMA nodes, and a list of ops (``{"admit": <pod manifest>}`` or ``{"remove": <uid>}``). Both
sides answer in the oracle's output shape (``Result`` in case.go), so the answers compare as
plain data. :class:`Oracle` keeps one oracle process and feeds it JSON lines;
:func:`model_result` plays a case on :class:`~toposched.kubelet.KubeletNode`.
"""

from __future__ import annotations

import json
import select
import subprocess
from collections.abc import Mapping
from typing import Any

from toposched.errors import ToposchedError
from toposched.kubelet import KubeletConfig, KubeletNode
from toposched.topology import CPUSet, LogicalCPU, Machine, NUMANode
from toposched.workload import Pod

Case = dict[str, Any]
Result = dict[str, Any]


class Oracle:
    """One running oracle binary; :meth:`run` sends a case and returns its answer."""

    def __init__(self, binary: str) -> None:
        self._proc = subprocess.Popen(
            [binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )

    def run(self, case: Case, timeout: float = 60.0) -> Result:
        """The real kubelet's answer to ``case``; ``TimeoutError`` (and the oracle ended) past ``timeout`` seconds."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(case, separators=(",", ":")) + "\n")
        self._proc.stdin.flush()
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        if not ready:
            self._proc.kill()
            raise TimeoutError(f"the kubelet oracle took more than {timeout} s on one case")
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the kubelet oracle exited with {self._proc.wait()}")
        return json.loads(line)

    def close(self) -> None:
        """End the oracle process."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait(timeout=30)


# ---- the model's side ------------------------------------------------------------------------


def machine_of(info: Mapping[str, Any]) -> Machine:
    """The :class:`Machine` toposched would read for this cAdvisor ``MachineInfo``.

    A core's id is its lowest thread id (the kubelet's ``getUniqueCoreID``); its uncore cache is
    its first ``uncore_caches`` entry, 0 without one (the kubelet's ``CPUDetails``).
    """
    cpus = []
    nodes = []
    for node in info["topology"]:
        ids = []
        for core in node["cores"]:
            caches = core.get("uncore_caches") or []
            cache_id = caches[0]["id"] if caches else 0
            for thread in core["thread_ids"]:
                cpus.append(LogicalCPU(thread, min(core["thread_ids"]), core["socket_id"], node["node_id"], cache_id=cache_id))
                ids.append(thread)
        hugepages = {hp["page_size"] * 1024: hp["num_pages"] for hp in node.get("hugepages") or []}
        distances = {other["node_id"]: d for other, d in zip(info["topology"], node.get("distances") or [])}
        nodes.append(NUMANode(node["node_id"], CPUSet(ids), memory_bytes=node["memory"], hugepages=hugepages, distances=distances))
    return Machine(tuple(cpus), tuple(nodes))


def config_of(cfg: Mapping[str, Any]) -> KubeletConfig:
    """The :class:`KubeletConfig` of the case's configuration (same field names as the kubelet's)."""
    obj = dict(cfg)
    obj["reservedMemory"] = [{"numaNode": r["numaNode"], "limits": r["limits"]} for r in cfg.get("reservedMemory") or []]
    return KubeletConfig.from_dict(obj)


def model_result(case: Case) -> Result:
    """``toposched.kubelet``'s answer to ``case``, in the oracle's output shape."""
    try:
        node = KubeletNode(
            machine_of(case["machine"]),
            config_of(case["config"]),
            device_plugins={r: [(d["id"], d["numa"]) for d in devs] for r, devs in (case.get("devices") or {}).items()},
            preferred_allocation={r: listing_preference([d["id"] for d in devs]) for r, devs in (case.get("devices") or {}).items()},
        )
    except ToposchedError as err:
        return {"error": str(err), "outcomes": []}
    outcomes = []
    for op in case["ops"]:
        if "admit" in op:
            pod = Pod.from_dict(op["admit"])
            admission = node.admit(pod)
            if admission.admitted:
                uid = pod.uid
                containers = {c.name: _container(node, uid, c.name) for c in pod.all_containers}
                outcomes.append({"admitted": True, "containers": containers, "state": _state(node)})
            else:
                outcomes.append({"admitted": False, "reason": admission.reason, "message": admission.message, "state": _state(node)})
        else:
            node.release(op["remove"])
            outcomes.append({"state": _state(node)})
    return {"outcomes": outcomes}


def listing_preference(listing: list[str]) -> Any:
    """The oracle's stub plugin's ``GetPreferredAllocation`` (plugin.go): the devices that must
    be included, then the available ones in listing order, ``size`` in all."""
    rank = {d: i for i, d in enumerate(listing)}

    def preferred(available: list[str], must_include: list[str], size: int) -> list[str]:
        rest = sorted((d for d in available if d not in must_include), key=rank.__getitem__)
        return list(must_include) + rest[: max(0, size - len(must_include))]

    return preferred


def _container(node: KubeletNode, uid: str, name: str) -> dict[str, Any]:
    cpus = node.cpu.state.get(uid, name) if node.cpu is not None else None
    blocks: list[dict[str, Any]] = []
    if node.memory is not None:
        entries = node.memory.checkpoint().entries or {}
        for b in (entries.get(uid) or {}).get(name) or ():
            blocks.append({"numa": list(b.numa_affinity or ()), "type": b.type, "size": b.size})
    admission = node.admissions[uid]
    devices = {r: sorted(ids) for r, ids in admission.containers[name].devices.items() if ids}
    return {"cpus": str(cpus) if cpus else "", "memory": blocks, "devices": devices}


def _state(node: KubeletNode) -> dict[str, Any]:
    out: dict[str, Any] = {"defaultCpuSet": str(node.cpu.state.default_cpuset) if node.cpu is not None else ""}
    if node.memory is not None:
        memory = {}
        for numa_id, s in (node.memory.checkpoint().machine_state or {}).items():
            tables = {r: [t.total, t.system_reserved, t.allocatable, t.reserved, t.free] for r, t in (s.memory_map or {}).items()}
            memory[str(numa_id)] = {"assignments": s.number_of_assignments, "cells": list(s.cells or ()), "tables": tables}
        out["memory"] = memory
    return out


def normalise(result: Result) -> Result:
    """``result`` with JSON's quirks evened out: absent fields and empty ones read the same."""
    out = json.loads(json.dumps(result))
    for o in out.get("outcomes") or []:
        o.setdefault("state", {}).setdefault("defaultCpuSet", "")
        if not o["state"].get("memory"):
            o["state"].pop("memory", None)
        for c in (o.get("containers") or {}).values():
            c.setdefault("cpus", "")
            c["memory"] = sorted(c.get("memory") or [], key=lambda b: (b["type"], b["numa"]))
            c["devices"] = c.get("devices") or {}
    return out
