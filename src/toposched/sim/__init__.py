"""The discrete-event cluster simulator: schedulers side by side on the same nodes and workload."""

from toposched.sim.model import (
    CPU_ENFORCEMENT_AGENT,
    CPU_ENFORCEMENT_KUBELET,
    GPU_MODEL_LABEL,
    GPU_PRODUCT_LABEL,
    SimNode,
    SimPod,
)

__all__ = ["CPU_ENFORCEMENT_AGENT", "CPU_ENFORCEMENT_KUBELET", "GPU_MODEL_LABEL", "GPU_PRODUCT_LABEL", "SimNode", "SimPod"]
