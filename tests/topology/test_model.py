"""The Machine model: derived sockets/cores and validation of contradictory input."""

import pytest

from toposched.errors import InputError
from toposched.topology import CPUSet, DeviceKind, LogicalCPU, Machine, NUMANode, classify_pci_class


def two_socket_smt() -> Machine:
    # 2 sockets x 1 NUMA x 2 cores x 2 threads; siblings are (n, n+4) as on Intel.
    rows = []
    for cpu in range(8):
        core = cpu % 4
        rows.append({"cpu": cpu, "core": core, "socket": core // 2, "numa": core // 2})
    return Machine.from_cpu_table(rows, memory_per_numa=1 << 30, distances={0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}})


def test_derived_structure():
    m = two_socket_smt()
    assert [str(s.cpus) for s in m.sockets] == ["0-1,4-5", "2-3,6-7"]
    assert [str(c.cpus) for c in m.cores] == ["0,4", "1,5", "2,6", "3,7"]
    assert m.threads_per_core == 2
    assert str(m.siblings(5)) == "1,5"
    assert m.distance(0, 1) == 21 and m.distance(1, 1) == 10
    assert str(m.cpus_in_numa([1])) == "2-3,6-7"
    assert m.numa_of(CPUSet([0, 3])) == frozenset({0, 1})
    d = m.to_dict()
    assert {"sockets", "numa_nodes", "cores", "cpus", "devices"} <= set(d)


def test_cpu_less_node_is_kept():
    m = Machine.from_cpu_table([{"cpu": 0, "core": 0, "socket": 0, "numa": 0}], numa_ids=[1])
    assert m.numa_ids == (0, 1)
    assert m.numa(1).cpu_less


def test_cpu_in_two_numa_nodes_is_an_error():
    cpus = (LogicalCPU(0, 0, 0, 0),)
    with pytest.raises(InputError, match="CPU 0 appears in NUMA node 0 and NUMA node 1"):
        Machine(cpus, (NUMANode(0, CPUSet([0])), NUMANode(1, CPUSet([0]))))


def test_incomplete_distance_row_is_an_error():
    cpus = (LogicalCPU(0, 0, 0, 0), LogicalCPU(1, 1, 0, 1))
    nodes = (NUMANode(0, CPUSet([0]), distances={0: 10}), NUMANode(1, CPUSet([1]), distances={0: 20, 1: 10}))
    with pytest.raises(InputError) as err:
        Machine(cpus, nodes)
    assert err.value.field == "numa_nodes[0].distances"


def test_negative_memory_is_an_error():
    with pytest.raises(InputError, match="negative"):
        Machine((LogicalCPU(0, 0, 0, 0),), (NUMANode(0, CPUSet([0]), memory_bytes=-1),))


@pytest.mark.parametrize(("node", "field"), [
    (NUMANode(0, CPUSet([0]), memory_bytes=10**20), "numa_nodes[0].memory_bytes"),
    (NUMANode(0, CPUSet([0]), memory_bytes=2**30, hugepages={2**30: 10**10}), f"numa_nodes[0].hugepages[{2**30}]"),
])
def test_absurd_memory_is_an_error(node, field):
    """Amounts no machine has would overflow the scheduler's int64 arrays: refused, naming the field."""
    with pytest.raises(InputError, match="absurdly large") as err:
        Machine((LogicalCPU(0, 0, 0, 0),), (node,))
    assert err.value.field == field


@pytest.mark.parametrize(
    ("code", "vendor", "kind"),
    [
        (0x030200, 0x10DE, DeviceKind.GPU),
        (0x030000, 0x10DE, DeviceKind.GPU),
        (0x030000, 0x102B, DeviceKind.OTHER),  # Matrox BMC VGA
        (0x038000, 0x1002, DeviceKind.GPU),
        (0x020000, 0x8086, DeviceKind.NIC),
        (0x020700, 0x15B3, DeviceKind.INFINIBAND),
        (0x0C0600, 0x15B3, DeviceKind.INFINIBAND),
        (0x010802, 0x144D, DeviceKind.NVME),
        (0x0B4000, 0x8086, DeviceKind.ACCELERATOR),
        (None, None, DeviceKind.OTHER),
    ],
)
def test_classify_pci_class(code, vendor, kind):
    assert classify_pci_class(code, vendor) == kind
