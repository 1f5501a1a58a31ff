"""Every name toposched shares with the outside world: annotations, labels, NodeResourceTopology
attributes, API groups, resource names and admission reasons.

Each is spelled once, here, at the bottom layer, so every module that reads or writes one (the
agent, the scheduler, the simulator, the cluster adapters) names the same constant. The values
are the wire format: changing one breaks every cluster that already holds objects carrying it.
Tests that check the wire format spell the literal strings on purpose.
"""

from __future__ import annotations

# ---- prefixes ------------------------------------------------------------------------------

#: toposched's own annotation and label prefix.
TOPOSCHED_PREFIX = "toposched.io/"
#: Koordinator's scheduling annotations (``scheduling.koordinator.sh/...``).
KOORDINATOR_SCHEDULING_PREFIX = "scheduling.koordinator.sh/"
#: Koordinator's extended resources (``koordinator.sh/gpu-core``, ...).
KOORDINATOR_RESOURCE_PREFIX = "koordinator.sh/"

# ---- API groups ----------------------------------------------------------------------------

#: NodeResourceTopology's group (node-feature-discovery / noderesourcetopology-api).
NRT_API_GROUP = "topology.node.k8s.io"
#: Koordinator's group of scheduling objects (koordlet's ``Device``).
KOORDINATOR_SCHEDULING_GROUP = "scheduling.koordinator.sh"
#: kube-scheduler's configuration files and plugin args (``KubeSchedulerConfiguration``, ``...Args``).
KUBE_SCHEDULER_CONFIG_API_VERSION = "kubescheduler.config.k8s.io/v1"

# ---- pod annotations and labels a user writes ---------------------------------------------

NUMA_POLICY_ANNOTATION = "toposched.io/numa-policy"
NUMA_POLICY_LABEL = "toposched.io/numa-policy"
CPU_BIND_POLICY_ANNOTATION = "toposched.io/cpu-bind-policy"
DEVICE_SCOPE_ANNOTATION = "toposched.io/device-scope"
KOORDINATOR_NUMA_TOPOLOGY_SPEC = "scheduling.koordinator.sh/numa-topology-spec"
KOORDINATOR_RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"
KOORDINATOR_DEVICE_JOINT_ALLOCATE = "scheduling.koordinator.sh/device-joint-allocate"
KOORDINATOR_QOS_LABEL = "koordinator.sh/qosClass"

# ---- pod annotations the scheduler writes --------------------------------------------------

#: The exact placement (cpuset, NUMA nodes, memory, device ids) bound with the pod.
PLACEMENT_ANNOTATION = "toposched.io/placement"
#: Koordinator's record of the CPUs and NUMA nodes a pod was given.
KOORDINATOR_RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
#: Koordinator's record of the devices a pod was given.
KOORDINATOR_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
#: The simulator's marker of a trace pod's phase.
TRACE_PHASE_ANNOTATION = "toposched.io/trace-phase"

# ---- node labels ---------------------------------------------------------------------------

#: Who pins a pod's CPUs on the node: the kubelet (default) or toposched's agent.
CPU_ENFORCEMENT_LABEL = "toposched.io/cpu-enforcement"
#: Who picks a pod's device ids on the node: the kubelet (default) or toposched's agent.
DEVICE_ENFORCEMENT_LABEL = "toposched.io/device-enforcement"
GPU_MODEL_LABEL = "toposched.io/gpu-model"
#: The label prefix of the simulator's GPU-model groups (``gpu-products.toposched.io/<models>``).
GPU_PRODUCTS_LABEL_PREFIX = "gpu-products.toposched.io/"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: The failure-zone labels kube-scheduler groups nodes by (the deprecated beta names first, as upstream reads them).
ZONE_LABELS = ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone")
REGION_LABELS = ("failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region")
KOORDINATOR_NUMA_POLICY_LABEL = "node.koordinator.sh/numa-topology-policy"
KOORDINATOR_CPU_BIND_POLICY_LABEL = "node.koordinator.sh/cpu-bind-policy"

# ---- NodeResourceTopology attributes and annotations ---------------------------------------

TOPOLOGY_MANAGER_POLICY_ATTRIBUTE = "topologyManagerPolicy"
TOPOLOGY_MANAGER_SCOPE_ATTRIBUTE = "topologyManagerScope"
CPU_MANAGER_POLICY_ATTRIBUTE = "cpuManagerPolicy"
MEMORY_MANAGER_POLICY_ATTRIBUTE = "memoryManagerPolicy"
#: The pods fingerprint: the NRT attribute (current) and the object annotation (legacy).
FINGERPRINT_ATTRIBUTE = "nodeTopologyPodsFingerprint"
FINGERPRINT_METHOD_ATTRIBUTE = "nodeTopologyPodsFingerprintMethod"
FINGERPRINT_ANNOTATION = "topology.node.k8s.io/fingerprint"
#: How the node chose the pods it fingerprinted (values of FINGERPRINT_METHOD_ATTRIBUTE).
FINGERPRINT_METHOD_ALL = "all"
FINGERPRINT_METHOD_WITH_EXCLUSIVE_RESOURCES = "with-exclusive-resources"
FINGERPRINT_METHOD_EXCLUDE_TERMINAL = "exclude-terminal"
#: The node description and the allocations toposched's agent publishes (docs/topology/description.md).
DESCRIPTION_ATTRIBUTE = "toposched.io/node-description"
ALLOCATIONS_ATTRIBUTE = "toposched.io/node-allocations"
#: A zone's CPU capacity as the zone-attributes controller sets it.
CPU_CAPACITY_ATTRIBUTE = "toposched.io/cpu-capacity"
#: On an NRT: the attributes the zone-attributes controller owns there.
CONTROLLER_ATTRIBUTES_ANNOTATION = "toposched.io/controller-attributes"

# ---- resource names ------------------------------------------------------------------------

NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
RDMA_HCA = "rdma/hca"
KOORDINATOR_GPU = "koordinator.sh/gpu"
KOORDINATOR_GPU_SHARED = "koordinator.sh/gpu.shared"
KOORDINATOR_GPU_CORE = "koordinator.sh/gpu-core"
KOORDINATOR_GPU_MEMORY = "koordinator.sh/gpu-memory"
KOORDINATOR_GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
KOORDINATOR_RDMA = "koordinator.sh/rdma"
HYGON_DCU = "dcu.com/gpu"
#: The Alibaba GPU-sharing trace's pod annotations (openb): a GPU share, a count, the card models.
ALIBABA_GPU_MILLI = "alibabacloud.com/gpu-milli"
ALIBABA_GPU_COUNT = "alibabacloud.com/gpu-count"
ALIBABA_GPU_MODEL = "alibabacloud.com/gpu-card-model"

# ---- what the standalone scheduler tells about a pod (Events, the PodScheduled condition) ---

SCHEDULED_EVENT_REASON = "Scheduled"
FAILED_SCHEDULING_EVENT_REASON = "FailedScheduling"
POD_SCHEDULED_CONDITION = "PodScheduled"
#: The PodScheduled=False condition's reason when no node fits.
UNSCHEDULABLE_CONDITION_REASON = "Unschedulable"

# ---- admission reasons (a pod's status.reason when its node refuses it) --------------------

TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
SMT_ALIGNMENT_ERROR = "SMTAlignmentError"
#: Not the kubelet's: what a GPU-sharing device plugin answers when no single GPU has room.
GPU_SHARE_ERROR = "GPUShareError"
#: The simulator's: the node's agent could not apply a placement the scheduler bound.
AGENT_PLACEMENT_ERROR = "AgentPlacementError"
#: The kubelet's: the node's labels do not match the pod's node selector.
NODE_AFFINITY_ERROR = "NodeAffinity"
