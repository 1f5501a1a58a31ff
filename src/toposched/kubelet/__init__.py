"""A faithful model of the kubelet's node-level decisions (Topology, CPU, memory, device managers)."""

from toposched.kubelet.hints import TopologyHint

__all__ = sorted(["TopologyHint"])
