"""What pods ask for: containers, requests and limits, QoS class, the effective pod request."""

from toposched.workload.pod import (
    BEST_EFFORT,
    BURSTABLE,
    GUARANTEED,
    Container,
    Pod,
    Toleration,
    add_resources,
    max_resources,
    pods_from_objects,
)

__all__ = [
    "BEST_EFFORT",
    "BURSTABLE",
    "Container",
    "GUARANTEED",
    "Pod",
    "Toleration",
    "add_resources",
    "max_resources",
    "pods_from_objects",
]
