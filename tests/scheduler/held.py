"""What NodeRecord keeps summed over its pods (exclusive CPUs, usage no report counts yet), checked against the pods."""

from __future__ import annotations

from toposched.scheduler import Cluster


def assert_node_sums_match_the_ledger(cluster: Cluster) -> None:
    """Every node's ``held_cpus`` is the union of its pods' exclusive CPUs and ``held_count`` their sum;
    its ``unreflected`` is the per-zone sum of the usage of its pods the last report does not count."""
    for name, record in cluster.nodes.items():
        masks = [e.placement.cpu_mask for e in record.pods.values() if e.placement is not None]
        union = 0
        for mask in masks:
            union |= mask
        assert record.held_cpus == union, f"{name}: held {record.held_cpus:#x}, the pods hold {union:#x}"
        assert record.held_count == sum(m.bit_count() for m in masks), name
        pending: dict[int, dict[str, int]] = {}
        for entry in record.pods.values():
            if entry.reflected:
                continue
            for numa_id, resources in entry.usage.items():
                for resource, value in resources.items():
                    zone = pending.setdefault(numa_id, {})
                    zone[resource] = zone.get(resource, 0) + value
        pending = {n: {r: v for r, v in z.items() if v} for n, z in pending.items()}
        pending = {n: z for n, z in pending.items() if z}
        assert record.unreflected == pending, f"{name}: kept {record.unreflected}, the unreflected pods took {pending}"
