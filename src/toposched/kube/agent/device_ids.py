"""Match a device plugin's device id to the PCI device it names on this machine.

Pure except :func:`read_nvidia_uuids`, which reads the NVIDIA driver's files under a root
directory (``/`` on a node, a fixture tree in tests). The rules, per device plugin, are in
docs/kube/podresources.md:

- an id that is a PCI address, with or without its domain (``0000:3b:02.1``, ``3b:02.1``;
  SR-IOV network device plugin, AMD GPU plugin), names the device at that address;
- an NVIDIA GPU UUID (``GPU-<uuid>``) names the GPU the driver reports that UUID for; a
  time-slicing replica (``GPU-<uuid>::<n>``) names the same GPU; a MIG device names its parent
  GPU when the id carries the parent's UUID (``MIG-GPU-<uuid>/<gi>/<ci>``) or when the caller's
  UUID map holds the MIG UUID itself;
- anything else (the RDMA shared device plugin's ``0``, ``1``, ...; NVIDIA's index ids;
  auxiliary-device names) is opaque and matches nothing.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from toposched.errors import InputError
from toposched.topology.model import Device, Machine

__all__ = ["NVIDIA_GPUS_DIR", "match_device", "normalize_pci_address", "read_nvidia_uuids"]

NVIDIA_GPUS_DIR = "proc/driver/nvidia/gpus"  # relative to the root; one directory per GPU, named by PCI address
_PCI_ADDRESS = re.compile(r"(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")
_REPLICA_SUFFIX = re.compile(r"::\d+$")  # NVIDIA time-slicing / MPS replicas: "<id>::<n>"
_OLD_MIG = re.compile(r"MIG-(GPU-[0-9a-fA-F-]+)/\d+/\d+")
_UUID_FIELD = "GPU UUID"


def normalize_pci_address(text: str) -> str | None:
    """``text`` as the kernel spells a PCI address (``0000:3b:02.1``: lower case, domain added), or None if it is none."""
    match = _PCI_ADDRESS.fullmatch(text.strip())
    if match is None:
        return None
    domain, bus, slot, function = match.groups()
    return f"{int(domain or '0', 16):04x}:{bus.lower()}:{slot.lower()}.{function}"


def match_device(device_id: str, machine: Machine, uuids: Mapping[str, str]) -> Device | None:
    """The device of ``machine`` that ``device_id`` names, or None when the id is opaque or names no device here.

    ``uuids`` maps NVIDIA UUIDs (``GPU-...``, and ``MIG-...`` where known) to PCI addresses,
    as :func:`read_nvidia_uuids` returns them.
    """
    device_id = _REPLICA_SUFFIX.sub("", device_id)
    address = normalize_pci_address(device_id)
    if address is None:
        old_mig = _OLD_MIG.fullmatch(device_id)
        uuid = old_mig.group(1) if old_mig else device_id
        known = uuids.get(uuid)
        address = normalize_pci_address(known) if known is not None else None
    if address is None:
        return None
    for device in machine.devices:
        if normalize_pci_address(device.address) == address:
            return device
    return None


def read_nvidia_uuids(root: Path) -> dict[str, str]:
    """GPU UUID -> PCI address for every GPU the NVIDIA driver lists under ``root``.

    Reads ``<root>/proc/driver/nvidia/gpus/<address>/information``, its ``GPU UUID:`` line.
    Only regular files inside ``root`` are read (a symlink leading out is skipped). No driver
    directory gives ``{}``; a GPU whose file has no UUID line is left out (its ids stay
    unmatched). An unreadable file, a directory name that is no PCI address or a UUID listed
    twice raises :class:`InputError` naming the file.
    """
    base = root / NVIDIA_GPUS_DIR
    if not base.is_dir():
        return {}
    real_root = root.resolve()
    uuids: dict[str, str] = {}
    for gpu_dir in sorted(base.iterdir()):
        info = gpu_dir / "information"
        real = info.resolve()
        if not real.is_relative_to(real_root) or not _is_regular(real):
            continue
        address = normalize_pci_address(gpu_dir.name)
        if address is None:
            raise InputError(f"directory name {gpu_dir.name!r} is not a PCI address", field="address",
                             source=str(info))
        uuid = _uuid_line(info)
        if uuid is None:
            continue
        if uuid in uuids:
            raise InputError(f"{uuid} is also listed for {uuids[uuid]}", field=_UUID_FIELD, source=str(info))
        uuids[uuid] = address
    return uuids


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _uuid_line(info: Path) -> str | None:
    try:
        text = info.read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", source=str(info)) from None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == _UUID_FIELD:
            value = value.strip()
            return value if value.startswith("GPU-") else None
    return None
