"""The podresources client against a real gRPC server on a unix socket serving the kubelet's v1 API."""

from __future__ import annotations

import ast
import socket
import time
from pathlib import Path

import grpc
import pytest

from tests.kube.agent.podresources_fakes import GPU, VF, FakeKubelet, GiB, devices, memory, topo
from toposched.errors import InputError
from toposched.kube.agent.podresources import (
    AllocatableResources,
    ContainerResources,
    DeviceAssignment,
    MemoryAssignment,
    PodResources,
    PodResourcesClient,
    PodResourcesGetUnsupported,
    PodResourcesSnapshot,
    PodResourcesUnavailable,
    read_podresources,
)
from toposched.kube.agent.podresources import api_pb2 as pb

TRAIN = PodResources(
    namespace="ml",
    name="train-0",
    containers=(
        ContainerResources(
            name="trainer",
            cpu_ids=(2, 3, 4, 5, 50, 51, 52, 53),
            devices=(DeviceAssignment("nvidia.com/gpu", tuple(GPU[:2]), (0,)),
                     DeviceAssignment("intel.com/sriov_netdevice", (VF[0],), (0,))),
            memory=(MemoryAssignment("memory", 8 * GiB, (0,)), MemoryAssignment("hugepages-1Gi", 2 * GiB, (0,))),
        ),
        ContainerResources(name="sidecar", cpu_ids=(), devices=(), memory=()),
    ),
)
SPREAD = PodResources(
    namespace="ml",
    name="spread-0",
    containers=(ContainerResources(
        name="main", cpu_ids=(), memory=(),
        devices=(DeviceAssignment("nvidia.com/gpu", (GPU[2],), (0,)), DeviceAssignment("nvidia.com/gpu", (GPU[3],), (1,))),
    ),),
)
COREDNS = PodResources(
    namespace="kube-system", name="coredns-5d78c9869d-x2x7q",
    containers=(ContainerResources(name="coredns", cpu_ids=(), devices=(), memory=()),),
)
ALLOCATABLE = AllocatableResources(
    devices=(
        DeviceAssignment("nvidia.com/gpu", (GPU[0],), (0,)), DeviceAssignment("nvidia.com/gpu", (GPU[1],), (0,)),
        DeviceAssignment("nvidia.com/gpu", (GPU[2],), (1,)), DeviceAssignment("nvidia.com/gpu", (GPU[3],), (1,)),
        DeviceAssignment("intel.com/sriov_netdevice", (VF[0],), (0,)),
        DeviceAssignment("intel.com/sriov_netdevice", (VF[1],), (0,)),
        DeviceAssignment("intel.com/sriov_netdevice", (VF[2],), (1,)),
    ),
    cpu_ids=tuple(c for c in range(96) if c not in (0, 1, 48, 49)),
    memory=(MemoryAssignment("memory", 180 * GiB, (0,)), MemoryAssignment("memory", 188 * GiB, (1,)),
            MemoryAssignment("hugepages-1Gi", 16 * GiB, (0,)), MemoryAssignment("hugepages-1Gi", 16 * GiB, (1,))),
)


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "kubelet.sock"


@pytest.fixture
def kubelet(sock: Path):
    with FakeKubelet(sock) as server:
        yield server


def test_list_gives_every_pod_as_values(kubelet: FakeKubelet) -> None:
    with PodResourcesClient(str(kubelet.socket)) as client:
        assert client.list() == (TRAIN, SPREAD, COREDNS)


def test_allocatable_gives_devices_cpus_and_memory_with_numa(kubelet: FakeKubelet) -> None:
    with PodResourcesClient(str(kubelet.socket)) as client:
        assert client.allocatable() == ALLOCATABLE


def test_pod_level_allocation_is_carried(kubelet: FakeKubelet) -> None:
    kubelet.pods[0].cpu_ids.extend([3, 2])
    kubelet.pods[0].memory.append(memory("memory", 8 * GiB, 0))
    with PodResourcesClient(str(kubelet.socket)) as client:
        pod = client.list()[0]
    assert pod.cpu_ids == (2, 3) and pod.memory == (MemoryAssignment("memory", 8 * GiB, (0,)),)


def test_get_gives_one_pod_or_none(kubelet: FakeKubelet) -> None:
    with PodResourcesClient(str(kubelet.socket)) as client:
        assert client.get("ml", "spread-0") == SPREAD
        assert client.get("ml", "gone-0") is None


def test_get_other_failure_is_not_an_absent_pod(kubelet: FakeKubelet) -> None:
    kubelet.fail = (grpc.StatusCode.UNKNOWN, "container ml/train-0 not found in checkpoint")
    with PodResourcesClient(str(kubelet.socket)) as client, pytest.raises(PodResourcesUnavailable):
        client.get("ml", "train-0")


def test_get_unimplemented_says_so_distinctly(sock: Path) -> None:
    with FakeKubelet(sock, serve_get=False), PodResourcesClient(str(sock)) as client:
        with pytest.raises(PodResourcesGetUnsupported) as caught:
            client.get("ml", "train-0")
        assert caught.value.code is grpc.StatusCode.UNIMPLEMENTED
        assert str(sock) in str(caught.value) and "UNIMPLEMENTED" in str(caught.value)
        assert client.list()[0] == TRAIN  # List still works


def test_read_podresources_takes_one_snapshot(kubelet: FakeKubelet) -> None:
    snapshot = read_podresources(str(kubelet.socket), timeout=2.0)
    assert snapshot == PodResourcesSnapshot(pods=(TRAIN, SPREAD, COREDNS), allocatable=ALLOCATABLE)


def test_missing_socket_names_it(sock: Path) -> None:
    with pytest.raises(PodResourcesUnavailable) as caught:
        read_podresources(str(sock))
    assert str(sock) in str(caught.value) and "no such socket" in str(caught.value)
    assert caught.value.code is None and caught.value.socket_path == str(sock)


def test_stale_socket_nobody_listening_fails_fast(sock: Path) -> None:
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(sock))  # bound, never listening: what a dead kubelet leaves behind
    try:
        start = time.monotonic()
        with PodResourcesClient(str(sock), timeout=5.0) as client, pytest.raises(PodResourcesUnavailable) as caught:
            client.list()
        assert time.monotonic() - start < 3.0
        assert caught.value.code is grpc.StatusCode.UNAVAILABLE and str(sock) in str(caught.value)
    finally:
        stale.close()


def test_hanging_kubelet_costs_the_deadline_only(kubelet: FakeKubelet) -> None:
    kubelet.hang = True
    start = time.monotonic()
    with PodResourcesClient(str(kubelet.socket), timeout=0.05) as client, pytest.raises(PodResourcesUnavailable) as caught:
        client.allocatable()
    assert time.monotonic() - start < 2.0
    assert caught.value.code is grpc.StatusCode.DEADLINE_EXCEEDED


def test_failed_call_gives_code_and_details(kubelet: FakeKubelet) -> None:
    kubelet.fail = (grpc.StatusCode.INTERNAL, "checkpoint corrupt")
    with PodResourcesClient(str(kubelet.socket)) as client, pytest.raises(PodResourcesUnavailable) as caught:
        client.list()
    assert str(caught.value) == f"{kubelet.socket}: INTERNAL: checkpoint corrupt"
    assert caught.value.code is grpc.StatusCode.INTERNAL


def _break_numa(k: FakeKubelet) -> None:
    k.pods[0].containers[0].devices[0].topology.nodes[0].ID = -1


def _break_resource(k: FakeKubelet) -> None:
    k.pods[1].containers[0].devices[1].resource_name = ""


def _break_cpu(k: FakeKubelet) -> None:
    k.pods[0].containers[0].cpu_ids[1] = -3


def _break_device_id(k: FakeKubelet) -> None:
    k.pods[0].containers[0].devices.append(devices("nvidia.com/gpu", ["GPU-x", ""], 0))


def _break_container_name(k: FakeKubelet) -> None:
    k.pods[2].containers[0].name = ""


@pytest.mark.parametrize(("breaks", "field"), [
    (_break_numa, "ListPodResourcesResponse.pod_resources[0].containers[0].devices[0].topology.nodes[0].ID"),
    (_break_resource, "ListPodResourcesResponse.pod_resources[1].containers[0].devices[1].resource_name"),
    (_break_cpu, "ListPodResourcesResponse.pod_resources[0].containers[0].cpu_ids[1]"),
    (_break_device_id, "ListPodResourcesResponse.pod_resources[0].containers[0].devices[2].device_ids[1]"),
    (_break_container_name, "ListPodResourcesResponse.pod_resources[2].containers[0].name"),
])
def test_malformed_list_names_socket_and_field(kubelet: FakeKubelet, breaks, field: str) -> None:
    breaks(kubelet)
    with PodResourcesClient(str(kubelet.socket)) as client, pytest.raises(InputError) as caught:
        client.list()
    assert caught.value.source == str(kubelet.socket) and caught.value.field == field
    assert str(caught.value).startswith(f"{kubelet.socket}: {field}: ")


def test_malformed_allocatable_names_socket_and_field(kubelet: FakeKubelet) -> None:
    kubelet.allocatable.memory.append(pb.ContainerMemory(memory_type="memory", size=GiB, topology=topo(0, -2)))
    with pytest.raises(InputError) as caught:
        read_podresources(str(kubelet.socket))
    assert str(caught.value) == (f"{kubelet.socket}: AllocatableResourcesResponse.memory[4].topology.nodes[1].ID: "
                                 "negative NUMA node id -2")


def test_device_without_topology_has_no_numa_ids(kubelet: FakeKubelet) -> None:
    kubelet.allocatable.devices.append(pb.ContainerDevices(resource_name="rdma/hca_shared", device_ids=["0", "1"]))
    with PodResourcesClient(str(kubelet.socket)) as client:
        assert client.allocatable().devices[-1] == DeviceAssignment("rdma/hca_shared", ("0", "1"), ())


def test_proto_is_wire_compatible_with_the_kubelet() -> None:
    """Names and numbers upstream's api.proto (k8s.io/kubelet podresources/v1) gives; the wire depends on them."""
    service = pb.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert service.full_name == "v1.PodResourcesLister"
    assert {m.name: (m.input_type.full_name, m.output_type.full_name) for m in service.methods} == {
        "List": ("v1.ListPodResourcesRequest", "v1.ListPodResourcesResponse"),
        "GetAllocatableResources": ("v1.AllocatableResourcesRequest", "v1.AllocatableResourcesResponse"),
        "Get": ("v1.GetPodResourcesRequest", "v1.GetPodResourcesResponse"),
    }
    upstream = {
        "AllocatableResourcesRequest": {},
        "AllocatableResourcesResponse": {"devices": 1, "cpu_ids": 2, "memory": 3},
        "ListPodResourcesRequest": {},
        "ListPodResourcesResponse": {"pod_resources": 1},
        "PodResources": {"name": 1, "namespace": 2, "containers": 3, "cpu_ids": 4, "memory": 5},
        "ContainerResources": {"name": 1, "devices": 2, "cpu_ids": 3, "memory": 4, "dynamic_resources": 5},
        "ContainerMemory": {"memory_type": 1, "size": 2, "topology": 3},
        "ContainerDevices": {"resource_name": 1, "device_ids": 2, "topology": 3},
        "TopologyInfo": {"nodes": 1},
        "NUMANode": {"ID": 1},
        "DynamicResource": {"claim_name": 2, "claim_namespace": 3, "claim_resources": 4},
        "ClaimResource": {"cdi_devices": 1, "driver_name": 2, "pool_name": 3, "device_name": 4, "share_id": 5},
        "CDIDevice": {"name": 1},
        "GetPodResourcesRequest": {"pod_name": 1, "pod_namespace": 2},
        "GetPodResourcesResponse": {"pod_resources": 1},
    }
    assert {name: {f.name: f.number for f in m.fields} for name, m in pb.DESCRIPTOR.message_types_by_name.items()} \
        == upstream


def test_generated_code_matches_the_proto(tmp_path: Path) -> None:
    """api_pb2.py holds the descriptor protoc makes from api.proto now (run where grpcio-tools is installed)."""
    protoc = pytest.importorskip("grpc_tools.protoc")
    src = Path(pb.__file__).parents[4]
    rel = "toposched/kube/agent/podresources/api.proto"
    assert protoc.main(["protoc", f"-I{src}", f"--python_out={tmp_path}", str(src / rel)]) == 0
    fresh = (tmp_path / rel).with_name("api_pb2.py").read_text()
    line = next(line for line in fresh.splitlines() if "AddSerializedFile(" in line)
    serialized = ast.literal_eval(line.split("AddSerializedFile(", 1)[1].removesuffix(")"))
    assert serialized == pb.DESCRIPTOR.serialized_pb
