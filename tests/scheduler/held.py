"""What NodeRecord keeps of its pods' exclusive CPUs, checked against the pods themselves."""

from __future__ import annotations

from toposched.scheduler import Cluster


def assert_held_cpus_match_the_ledger(cluster: Cluster) -> None:
    """Every node's ``held_cpus`` is the union of its pods' exclusive CPUs, and ``held_count`` their sum."""
    for name, record in cluster.nodes.items():
        masks = [e.placement.cpu_mask for e in record.pods.values() if e.placement is not None]
        union = 0
        for mask in masks:
            union |= mask
        assert record.held_cpus == union, f"{name}: held {record.held_cpus:#x}, the pods hold {union:#x}"
        assert record.held_count == sum(m.bit_count() for m in masks), name
