"""Placement annotations: our toposched.io/placement and Koordinator's resource-status."""

import json

import pytest

from toposched.errors import InputError
from toposched.scheduler.placement import ContainerPlacement, Placement
from toposched.topology import CPUSet

GI = 2**30


def placement() -> Placement:
    return Placement(
        "n1",
        frozenset({0}),
        {
            "app": ContainerPlacement(CPUSet.parse("2-5"), frozenset({0}), {0: {"memory": 4 * GI}},
                                      {"nvidia.com/gpu": ("GPU-b", "GPU-a")}),
            "sidecar": ContainerPlacement(numa_nodes=frozenset({0}), cpu_millis=500),
        },
    )


def test_annotation_shape_matches_design():
    obj = json.loads(placement().to_annotation())
    assert obj == {
        "node": "n1",
        "numaNodes": [0],
        "containers": {
            "app": {"cpuset": "2-5", "numaNodes": [0], "memory": {"0": "4Gi"}, "devices": {"nvidia.com/gpu": ["GPU-a", "GPU-b"]}},
            "sidecar": {"cpuset": "", "numaNodes": [0], "memory": {}, "devices": {}},
        },
    }


def test_round_trip():
    p = placement()
    back = Placement.from_annotation(p.to_annotation())
    assert back.node == p.node and back.numa_nodes == p.numa_nodes
    assert back.containers["app"].cpuset == p.containers["app"].cpuset
    assert back.containers["app"].memory == {0: {"memory": 4 * GI}}
    assert back.containers["app"].devices == {"nvidia.com/gpu": ("GPU-a", "GPU-b")}


def test_hugepages_round_trip():
    memory = {1: {"memory": GI, "hugepages-2Mi": 2**21 * 4}}
    p = Placement("n", frozenset({1}), {"c": ContainerPlacement(CPUSet([4]), frozenset({1}), memory)})
    assert Placement.from_annotation(p.to_annotation()).containers["c"].memory == {1: {"memory": GI, "hugepages-2Mi": 2**23}}


def test_koordinator_resource_status():
    obj = json.loads(placement().to_koordinator_resource_status())
    assert obj == {"cpuset": "2-5", "numaNodeResources": [{"node": 0, "resources": {"cpu": "500m", "memory": "4Gi"}}]}


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{", "toposched.io/placement"),
        ('{"containers": {}}', "node"),
        ('{"node": "n", "containers": {"c": {"cpuset": "0-999999"}}}', "cpuset"),
        ('{"node": "n", "containers": {"c": {"cpuset": "0-8192"}}}', "containers.c.cpuset"),
        ('{"node": "n", "containers": {"c": {"numaNodes": [-1]}}}', "containers.c.numaNodes"),
        ('{"node": "n", "containers": {"c": {"memory": {"0": "-4Gi"}}}}', "containers.c.memory.0"),
        ('{"node": "n", "containers": {"c": {"devices": {"nvidia.com/gpu": [""]}}}}', "containers.c.devices.nvidia.com/gpu"),
        ('{"node": "n", "containers": ["x"]}', "containers"),
    ],
)
def test_malformed_annotations_are_refused(text, field):
    with pytest.raises(InputError) as err:
        Placement.from_annotation(text, source="pod default/p")
    assert err.value.field == field and str(err.value).startswith("pod default/p: ")
