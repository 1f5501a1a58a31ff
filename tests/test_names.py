"""The wire names pinned: a value changed here breaks every cluster already holding objects with it."""

from __future__ import annotations

import toposched.names

# Spelled out on purpose: this table is the wire format, not a copy of the module.
WIRE = {
    "TOPOSCHED_PREFIX": "toposched.io/",
    "KOORDINATOR_SCHEDULING_PREFIX": "scheduling.koordinator.sh/",
    "KOORDINATOR_RESOURCE_PREFIX": "koordinator.sh/",
    "NRT_API_GROUP": "topology.node.k8s.io",
    "KOORDINATOR_SCHEDULING_GROUP": "scheduling.koordinator.sh",
    "KUBE_SCHEDULER_CONFIG_API_VERSION": "kubescheduler.config.k8s.io/v1",
    "NUMA_POLICY_ANNOTATION": "toposched.io/numa-policy",
    "NUMA_POLICY_LABEL": "toposched.io/numa-policy",
    "CPU_BIND_POLICY_ANNOTATION": "toposched.io/cpu-bind-policy",
    "DEVICE_SCOPE_ANNOTATION": "toposched.io/device-scope",
    "KOORDINATOR_NUMA_TOPOLOGY_SPEC": "scheduling.koordinator.sh/numa-topology-spec",
    "KOORDINATOR_RESOURCE_SPEC": "scheduling.koordinator.sh/resource-spec",
    "KOORDINATOR_DEVICE_JOINT_ALLOCATE": "scheduling.koordinator.sh/device-joint-allocate",
    "KOORDINATOR_QOS_LABEL": "koordinator.sh/qosClass",
    "PLACEMENT_ANNOTATION": "toposched.io/placement",
    "KOORDINATOR_RESOURCE_STATUS": "scheduling.koordinator.sh/resource-status",
    "KOORDINATOR_DEVICE_ALLOCATED": "scheduling.koordinator.sh/device-allocated",
    "TRACE_PHASE_ANNOTATION": "toposched.io/trace-phase",
    "CPU_ENFORCEMENT_LABEL": "toposched.io/cpu-enforcement",
    "DEVICE_ENFORCEMENT_LABEL": "toposched.io/device-enforcement",
    "GPU_MODEL_LABEL": "toposched.io/gpu-model",
    "GPU_PRODUCTS_LABEL_PREFIX": "gpu-products.toposched.io/",
    "GPU_PRODUCT_LABEL": "nvidia.com/gpu.product",
    "HOSTNAME_LABEL": "kubernetes.io/hostname",
    "KOORDINATOR_NUMA_POLICY_LABEL": "node.koordinator.sh/numa-topology-policy",
    "KOORDINATOR_CPU_BIND_POLICY_LABEL": "node.koordinator.sh/cpu-bind-policy",
    "TOPOLOGY_MANAGER_POLICY_ATTRIBUTE": "topologyManagerPolicy",
    "TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE": "topologyManagerScope",
    "CPU_MANAGER_POLICY_ATTRIBUTE": "cpuManagerPolicy",
    "MEMORY_MANAGER_POLICY_ATTRIBUTE": "memoryManagerPolicy",
    "FINGERPRINT_ATTRIBUTE": "nodeTopologyPodsFingerprint",
    "FINGERPRINT_METHOD_ATTRIBUTE": "nodeTopologyPodsFingerprintMethod",
    "FINGERPRINT_ANNOTATION": "topology.node.k8s.io/fingerprint",
    "FINGERPRINT_METHOD_ALL": "all",
    "FINGERPRINT_METHOD_WITH_EXCLUSIVE_RESOURCES": "with-exclusive-resources",
    "FINGERPRINT_METHOD_EXCLUDE_TERMINAL": "exclude-terminal",
    "DESCRIPTION_ATTRIBUTE": "toposched.io/node-description",
    "ALLOCATIONS_ATTRIBUTE": "toposched.io/node-allocations",
    "CPU_CAPACITY_ATTRIBUTE": "toposched.io/cpu-capacity",
    "CONTROLLER_ATTRIBUTES_ANNOTATION": "toposched.io/controller-attributes",
    "NVIDIA_GPU": "nvidia.com/gpu",
    "AMD_GPU": "amd.com/gpu",
    "RDMA_HCA": "rdma/hca",
    "KOORDINATOR_GPU": "koordinator.sh/gpu",
    "KOORDINATOR_GPU_SHARED": "koordinator.sh/gpu.shared",
    "KOORDINATOR_GPU_CORE": "koordinator.sh/gpu-core",
    "KOORDINATOR_GPU_MEMORY": "koordinator.sh/gpu-memory",
    "KOORDINATOR_GPU_MEMORY_RATIO": "koordinator.sh/gpu-memory-ratio",
    "KOORDINATOR_RDMA": "koordinator.sh/rdma",
    "HYGON_DCU": "dcu.com/gpu",
    "ALIBABA_GPU_MILLI": "alibabacloud.com/gpu-milli",
    "ALIBABA_GPU_COUNT": "alibabacloud.com/gpu-count",
    "ALIBABA_GPU_MODEL": "alibabacloud.com/gpu-card-model",
    "TOPOLOGY_AFFINITY_ERROR": "TopologyAffinityError",
    "UNEXPECTED_ADMISSION_ERROR": "UnexpectedAdmissionError",
    "SMT_ALIGNMENT_ERROR": "SMTAlignmentError",
    "GPU_SHARE_ERROR": "GPUShareError",
    "AGENT_PLACEMENT_ERROR": "AgentPlacementError",
    "NODE_AFFINITY_ERROR": "NodeAffinity",
}


def test_every_wire_name_keeps_its_value() -> None:
    names = {k: v for k, v in vars(toposched.names).items() if k.isupper()}
    assert names == WIRE
