"""The kubelet's files the node agent reads: its configuration and its resource managers' checkpoints.

Layout (the kubelet's defaults; ``kubelet_dir`` is its ``--root-dir``)::

    /var/lib/kubelet/config.yaml            KubeletConfiguration (kubelet.config.k8s.io/v1beta1)
    /var/lib/kubelet/cpu_manager_state      the CPU manager's checkpoint
    /var/lib/kubelet/memory_manager_state   the memory manager's checkpoint

A state file that does not exist means its manager runs policy ``none`` (the kubelet writes
the file at start under every policy, so a missing file is a kubelet that never ran one) and
holds nothing exclusively. A file that exists but cannot be read or is malformed raises
:class:`InputError` naming the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toposched.errors import InputError
from toposched.kubelet.config import KubeletConfig
from toposched.kubelet.cpu_state import CPUManagerCheckpoint, read_checkpoint
from toposched.kubelet.memory_state import MemoryManagerCheckpoint, read_memory_state
from toposched.manifests import decode_documents, read_text
from toposched.topology import CPUSet

__all__ = [
    "CONFIG_FILE",
    "CPU_STATE_FILE",
    "DEFAULT_KUBELET_DIR",
    "KUBELET_CONFIG_API_VERSION",
    "KubeletFiles",
    "MEMORY_STATE_FILE",
    "exclusive_cpus",
    "read_cpu_state",
    "read_kubelet_config",
    "read_kubelet_files",
    "read_memory_state_file",
]

DEFAULT_KUBELET_DIR = "/var/lib/kubelet"
CONFIG_FILE = "config.yaml"
CPU_STATE_FILE = "cpu_manager_state"
MEMORY_STATE_FILE = "memory_manager_state"
KUBELET_CONFIG_API_VERSION = "kubelet.config.k8s.io/v1beta1"
_KIND = "KubeletConfiguration"
_EVICTION_MEMORY = "memory.available"


@dataclass(frozen=True)
class KubeletFiles:
    """What the kubelet's files say: its configuration, its cgroup driver and both checkpoints.

    ``cpu_state``/``memory_state`` are None when the file does not exist; ``cgroup_driver`` is
    the configuration's ``cgroupDriver`` (``cgroupfs`` when unset, the kubelet's default).
    """

    config: KubeletConfig
    cgroup_driver: str = "cgroupfs"
    cpu_state: CPUManagerCheckpoint | None = None
    memory_state: MemoryManagerCheckpoint | None = None


def exclusive_cpus(state: CPUManagerCheckpoint | None) -> dict[str, dict[str, CPUSet]]:
    """``{pod uid: {container: cpus}}`` of a CPU manager checkpoint; pod-level sets under container ``""``."""
    if state is None:
        return {}
    out = {uid: dict(containers) for uid, containers in state.entries.items()}
    for uid, cpus in state.pod_entries.items():
        if cpus:
            out.setdefault(uid, {})[""] = cpus
    return out


def read_kubelet_config(path: str | Path, *, memory_total: int | None = None) -> tuple[KubeletConfig, str]:
    """The kubelet configuration file at ``path`` and its ``cgroupDriver``.

    The file is YAML or JSON holding one ``KubeletConfiguration``; a wrong ``kind`` or
    ``apiVersion`` is refused. A percentage ``evictionHard["memory.available"]`` (e.g. ``"5%"``)
    is turned into bytes of ``memory_total`` (the node's memory capacity) as the kubelet does;
    without ``memory_total`` it is refused. Every problem raises :class:`InputError` naming the file.
    """
    source = str(path)
    docs = decode_documents(read_text(path), source)
    if len(docs) != 1 or not isinstance(docs[0], Mapping):
        raise InputError("expected one KubeletConfiguration object", source=source)
    obj: dict[str, Any] = dict(docs[0])
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind is not None and kind != _KIND:
        raise InputError(f"kind {kind!r} is not {_KIND}", field="kind", source=source)
    if api_version is not None and api_version != KUBELET_CONFIG_API_VERSION:
        raise InputError(f"apiVersion {api_version!r} is not {KUBELET_CONFIG_API_VERSION}",
                         field="apiVersion", source=source)
    driver = obj.get("cgroupDriver", "cgroupfs")
    if driver not in ("cgroupfs", "systemd"):
        raise InputError(f"cgroupDriver {driver!r} is not cgroupfs or systemd", field="cgroupDriver", source=source)
    obj = _eviction_in_bytes(obj, memory_total, source)
    try:
        return KubeletConfig.from_dict(obj, source), driver
    except InputError:
        raise
    except (TypeError, ValueError, AttributeError) as exc:
        # from_dict lets a few wrongly typed fields through as Python errors (e.g. maxPods: "x").
        raise InputError(f"malformed configuration: {exc}", source=source) from None


def _eviction_in_bytes(obj: dict[str, Any], memory_total: int | None, source: str) -> dict[str, Any]:
    eviction = obj.get("evictionHard")
    if not isinstance(eviction, Mapping):
        return obj
    value = eviction.get(_EVICTION_MEMORY)
    if not isinstance(value, str) or not value.strip().endswith("%"):
        return obj
    field = f"evictionHard.{_EVICTION_MEMORY}"
    if memory_total is None:
        raise InputError("a percentage threshold needs the node's memory capacity", field=field, source=source)
    try:
        percent = float(value.strip()[:-1])
    except ValueError:
        raise InputError(f"{value!r} is not a percentage", field=field, source=source) from None
    if not 0 <= percent <= 100:
        raise InputError(f"{value!r} is not between 0% and 100%", field=field, source=source)
    # The kubelet's GetThresholdQuantity: capacity times the fraction, truncated to whole bytes.
    return {**obj, "evictionHard": {**eviction, _EVICTION_MEMORY: str(int(memory_total * percent / 100))}}


def read_cpu_state(kubelet_dir: str | Path = DEFAULT_KUBELET_DIR) -> CPUManagerCheckpoint | None:
    """The CPU manager checkpoint of ``kubelet_dir``, checksum verified; None when the file does not exist."""
    path = Path(kubelet_dir) / CPU_STATE_FILE
    if not path.exists():
        return None
    return read_checkpoint(path)


def read_memory_state_file(kubelet_dir: str | Path = DEFAULT_KUBELET_DIR) -> MemoryManagerCheckpoint | None:
    """The memory manager checkpoint of ``kubelet_dir``, checksum verified; None when the file does not exist."""
    path = Path(kubelet_dir) / MEMORY_STATE_FILE
    if not path.exists():
        return None
    return read_memory_state(path)


def read_kubelet_files(
    kubelet_dir: str | Path = DEFAULT_KUBELET_DIR,
    *,
    config_path: str | Path | None = None,
    memory_total: int | None = None,
) -> KubeletFiles:
    """The kubelet's configuration (``config_path``, default ``<kubelet_dir>/config.yaml``) and checkpoints.

    The configuration file must exist (the agent cannot guess the kubelet's policies);
    missing checkpoints read as None. ``memory_total`` resolves a percentage eviction threshold
    (see :func:`read_kubelet_config`). Raises :class:`InputError` naming the offending file.
    """
    config, driver = read_kubelet_config(config_path or Path(kubelet_dir) / CONFIG_FILE, memory_total=memory_total)
    return KubeletFiles(config, driver, read_cpu_state(kubelet_dir), read_memory_state_file(kubelet_dir))
