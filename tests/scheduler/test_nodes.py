"""NodeSpec: real Node objects, taints and tolerations."""

import pytest

from toposched.errors import InputError
from toposched.scheduler.nodes import NodeSpec, untolerated_taint
from toposched.workload import Pod, Toleration

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "gpu-1", "labels": {"toposched.io/numa-policy": "single-numa-node"}},
    "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                        {"key": "soft", "effect": "PreferNoSchedule"}]},
    "status": {"allocatable": {"cpu": "95500m", "memory": "371Gi", "nvidia.com/gpu": "8", "pods": "110"}},
}


def test_parse_real_node():
    node = NodeSpec.from_dict(NODE)
    assert node.allocatable == {"cpu": 95500, "memory": 371 * 2**30, "nvidia.com/gpu": 8, "pods": 110}
    assert node.labels["toposched.io/numa-policy"] == "single-numa-node"
    assert [t.key for t in node.taints] == ["nvidia.com/gpu", "soft"]


def test_taints_and_tolerations():
    node = NodeSpec.from_dict(NODE)
    assert untolerated_taint(node, Pod("p")).key == "nvidia.com/gpu"
    assert untolerated_taint(node, Pod("p", tolerations=(Toleration("nvidia.com/gpu", "Exists"),))) is None
    assert untolerated_taint(node, Pod("p", tolerations=(Toleration("nvidia.com/gpu", "Equal", "absent"),))) is not None
    assert untolerated_taint(node, Pod("p", tolerations=(Toleration(operator="Exists"),))) is None


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"metadata": {}}, "metadata.name"),
        ({"status": {"allocatable": {"cpu": "-1"}}}, "status.allocatable.cpu"),
        ({"status": {"allocatable": {"cpu": "10000000000000"}}}, "status.allocatable.cpu"),  # 10^16 millicores
        ({"spec": {"taints": [{"effect": "NoSchedule"}]}}, "spec.taints[0].key"),
        ({"spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}, "spec.taints[0].effect"),
    ],
)
def test_bad_nodes(patch, field):
    with pytest.raises(InputError) as err:
        NodeSpec.from_dict(NODE | patch)
    assert err.value.field == field


def test_a_node_built_in_code_with_an_absurd_allocatable_is_refused():
    """Past 2^63 / 1000 of the unit an amount would overflow the scheduler's int64 arrays."""
    with pytest.raises(InputError, match="absurdly large") as err:
        NodeSpec("n1", allocatable={"memory": 10**20})
    assert err.value.field == "status.allocatable.memory" and "node n1" in str(err.value)
