"""Does a report's node description agree with the report's own zones?

The zones are what every NFD consumer reads; the description is what toposched builds its
replica from. Both come from the same agent, so they must say the same thing about each NUMA
node: the same NUMA nodes, CPUs, memory, hugepages and device counts. A report whose two halves
disagree was corrupted or hand-edited, and the scheduler trusts neither half's details: the
node becomes count-only (see :meth:`toposched.scheduler.cluster.Cluster.update_report`).
"""

from __future__ import annotations

from toposched.errors import InputError
from toposched.kubelet.description import DESCRIPTION_ATTRIBUTE, NodeDescription
from toposched.kubelet.memory_manager import hugepage_resource_name
from toposched.topology.nrt import ZONE_TYPE_NODE, NodeResourceTopology, numa_id_of_zone, zone_name

__all__ = ["check_description_against_zones"]


def check_description_against_zones(description: NodeDescription, nrt: NodeResourceTopology) -> None:
    """Raise InputError (naming the report and the zone's field) where the description contradicts a Node zone.

    Compared per NUMA node: that a zone exists for every described NUMA node and no other;
    ``cpu`` capacity = the described CPUs; ``memory`` capacity = the described memory;
    ``hugepages-<size>`` capacity = pages x size; a device resource's capacity = the described
    devices of that resource on the node. A resource the zone leaves out is not compared
    (node-feature-discovery omits zero-CPU zones' ``cpu``).
    """
    machine = description.machine
    zones = {}
    for i, zone in enumerate(nrt.zones):
        if zone.type != ZONE_TYPE_NODE:
            continue
        try:
            zones[numa_id_of_zone(zone.name)] = (i, zone)
        except InputError as err:
            raise InputError(err.message, field=f"zones[{i}].name", source=nrt.origin) from None
    described = set(machine.numa_ids)
    if set(zones) != described:
        raise InputError(f"describes NUMA nodes {sorted(described)} but the zones are {sorted(zones)}",
                         field=f"{DESCRIPTION_ATTRIBUTE}.numa", source=nrt.origin)
    devices: dict[int, dict[str, int]] = {}
    for dev in description.devices:
        if dev.numa_id is not None:
            per = devices.setdefault(dev.numa_id, {})
            per[dev.resource] = per.get(dev.resource, 0) + 1
    for numa_id, (i, zone) in sorted(zones.items()):
        node = machine.numa(numa_id)
        expected = {"cpu": len(node.cpus) * 1000, "memory": node.memory_bytes}
        for size, count in node.hugepages.items():
            expected[hugepage_resource_name(size)] = size * count
        expected.update(devices.get(numa_id, {}))
        for j, res in enumerate(zone.resources):
            want = expected.get(res.name)
            if want is None and "/" in res.name:
                want = 0
            if want is not None and res.capacity != want:
                raise InputError(f"zone {zone_name(numa_id)} says {res.name} capacity {res.capacity} but the node "
                                 f"description gives {want}", field=f"zones[{i}].resources[{j}].capacity",
                                 source=nrt.origin)
