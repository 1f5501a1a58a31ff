"""Matching device plugin ids to the machine's PCI devices, and reading the NVIDIA driver's UUIDs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toposched.errors import InputError
from toposched.kube.agent.device_ids import match_device, normalize_pci_address, read_nvidia_uuids
from toposched.topology import CPUSet
from toposched.topology.model import Device, DeviceKind, LogicalCPU, Machine, NUMANode

GPU0 = Device("0000:1b:00.0", DeviceKind.GPU, numa_id=0, pcie_path=("pci0000:16", "0000:16:02.0", "0000:17:00.0"))
GPU1 = Device("0000:3d:00.0", DeviceKind.GPU, numa_id=0, pcie_path=("pci0000:3a", "0000:3a:02.0"))
VF = Device("0000:3b:02.1", DeviceKind.NIC, numa_id=0)
AMD = Device("0000:c1:00.0", DeviceKind.GPU, numa_id=1)
VMD = Device("10000:01:00.0", DeviceKind.NVME, numa_id=1)  # a domain wider than 4 digits (Intel VMD)
MACHINE = Machine(
    (LogicalCPU(0, 0, 0, 0), LogicalCPU(1, 1, 1, 1)),
    (NUMANode(0, CPUSet([0])), NUMANode(1, CPUSet([1]))),
    devices=(GPU0, GPU1, VF, AMD, VMD),
)
UUID0 = "GPU-0a2c4e6f-1b3d-4f5a-8c7e-9d0b1a2c3e4f"
UUID1 = "GPU-1b3d5f7a-2c4e-4a6b-9d8f-0e1c2b3d4f5a"

INFORMATION = """Model: \t\t NVIDIA A100-SXM4-80GB
IRQ:   \t\t 0
GPU UUID: \t {uuid}
Video BIOS: \t 92.00.45.00.06
Bus Type: \t PCIe
DMA Size: \t 47 bits
DMA Mask: \t 0x7fffffffffff
Bus Location: \t {address}
Device Minor: \t 0
GPU Firmware: \t 535.129.03
GPU Excluded:\t No
"""


def write_gpu(root: Path, address: str, uuid: str | None) -> Path:
    """``<root>/proc/driver/nvidia/gpus/<address>/information`` as the driver writes it (no UUID line: None)."""
    directory = root / "proc/driver/nvidia/gpus" / address
    directory.mkdir(parents=True)
    text = INFORMATION.format(uuid=uuid, address=address)
    if uuid is None:
        text = "".join(line + "\n" for line in text.splitlines() if not line.startswith("GPU UUID"))
    (directory / "information").write_text(text)
    return directory / "information"


@pytest.fixture
def uuids(tmp_path: Path) -> dict[str, str]:
    write_gpu(tmp_path, "0000:1b:00.0", UUID0)
    write_gpu(tmp_path, "0000:3d:00.0", UUID1)
    return read_nvidia_uuids(tmp_path)


def test_read_nvidia_uuids_maps_uuid_to_address(uuids: dict[str, str]) -> None:
    assert uuids == {UUID0: "0000:1b:00.0", UUID1: "0000:3d:00.0"}


@pytest.mark.parametrize(("device_id", "device"), [
    ("0000:3b:02.1", VF),        # SR-IOV network device plugin: the VF's address
    ("3b:02.1", VF),             # without the domain
    ("0000:C1:00.0", AMD),       # AMD GPU plugin: the GPU's address, any case
    ("10000:01:00.0", VMD),
    (UUID0, GPU0),               # NVIDIA: a GPU UUID
    (f"{UUID1}::3", GPU1),       # NVIDIA time-slicing replica 3 of a GPU
    (f"MIG-{UUID0}/7/0", GPU0),  # NVIDIA MIG, old id form carrying its parent GPU's UUID
])
def test_ids_that_name_a_device(uuids: dict[str, str], device_id: str, device: Device) -> None:
    assert match_device(device_id, MACHINE, uuids) is device


@pytest.mark.parametrize("device_id", [
    "0", "1",                                    # RDMA shared device plugin: opaque numbers
    "MIG-5c2b1a0f-3e4d-5b6a-8c7d-1f0e2d3c4b5a",  # MIG UUID the caller's map does not know
    "GPU-ffffffff-0000-0000-0000-000000000000",  # a GPU the driver does not list
    "0000:af:00.0",                              # an address this machine lacks
    "mlx5_core.sf.4",                            # an auxiliary (scalable function) device
    "card0-0",                                   # Intel GPU plugin
])
def test_opaque_or_foreign_ids_match_nothing(uuids: dict[str, str], device_id: str) -> None:
    assert match_device(device_id, MACHINE, uuids) is None


def test_mig_uuid_matches_when_the_map_knows_it(uuids: dict[str, str]) -> None:
    mig = "MIG-5c2b1a0f-3e4d-5b6a-8c7d-1f0e2d3c4b5a"
    assert match_device(mig, MACHINE, {**uuids, mig: "0000:3d:00.0"}) is GPU1


def test_normalize_pci_address() -> None:
    assert normalize_pci_address("3B:02.1") == "0000:3b:02.1"
    assert normalize_pci_address("0000:3b:02.8") is None  # functions are 0-7
    assert normalize_pci_address("GPU-0a2c") is None


def test_no_driver_directory_gives_nothing(tmp_path: Path) -> None:
    assert read_nvidia_uuids(tmp_path) == {}


def test_gpu_without_uuid_line_is_left_out(tmp_path: Path) -> None:
    write_gpu(tmp_path, "0000:1b:00.0", None)
    write_gpu(tmp_path, "0000:3d:00.0", UUID1)
    assert read_nvidia_uuids(tmp_path) == {UUID1: "0000:3d:00.0"}


def test_symlink_out_of_the_root_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_gpu(outside, "0000:1b:00.0", UUID0)
    root = tmp_path / "root"
    info = write_gpu(root, "0000:3d:00.0", UUID1)
    info.unlink()
    info.symlink_to(outside / "proc/driver/nvidia/gpus/0000:1b:00.0/information")
    (root / "proc/driver/nvidia/gpus/0000:af:00.0").symlink_to(outside / "proc/driver/nvidia/gpus/0000:1b:00.0")
    assert read_nvidia_uuids(root) == {}


def test_non_regular_file_is_not_read(tmp_path: Path) -> None:
    directory = tmp_path / "proc/driver/nvidia/gpus/0000:1b:00.0"
    directory.mkdir(parents=True)
    os.mkfifo(directory / "information")  # reading a FIFO would block
    assert read_nvidia_uuids(tmp_path) == {}


def test_duplicate_uuid_names_the_file(tmp_path: Path) -> None:
    write_gpu(tmp_path, "0000:1b:00.0", UUID0)
    second = write_gpu(tmp_path, "0000:3d:00.0", UUID0)
    with pytest.raises(InputError) as caught:
        read_nvidia_uuids(tmp_path)
    assert str(caught.value) == f"{second}: GPU UUID: {UUID0} is also listed for 0000:1b:00.0"


def test_directory_not_an_address_names_the_file(tmp_path: Path) -> None:
    info = write_gpu(tmp_path, "gpu0", UUID0)
    with pytest.raises(InputError) as caught:
        read_nvidia_uuids(tmp_path)
    assert str(caught.value) == f"{info}: address: directory name 'gpu0' is not a PCI address"


def test_unreadable_file_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = write_gpu(tmp_path, "0000:1b:00.0", UUID0)

    def refuse(self: Path, *args, **kwargs) -> str:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", refuse)  # root reads any file: refuse as an unprivileged agent would
    with pytest.raises(InputError) as caught:
        read_nvidia_uuids(tmp_path)
    assert str(caught.value) == f"{info}: cannot read: Permission denied"
