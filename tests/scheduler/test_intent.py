"""Pod and node NUMA intent: every annotation form, Koordinator's own cases, bad input.

Koordinator's tables are restated in our words: ``apis/extension/numa_aware_test.go``
(TestGetNUMATopologySpec), ``pkg/scheduler/plugins/nodenumaresource/util_test.go``
(Test_mergeTopologyPolicy, and the pod half of Test_getCPUBindPolicy) and the PreFilter rules of
``plugin.go`` (how required/preferred/Default bind policies resolve, the default
``singleNUMANodeExclusive``). Their expected values carry over; their node-side CPU bind cases
(kubelet ``full-pcpus-only`` / node label ``FullPCPUsOnly``) belong to CPUOrchestration, not here.
"""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_path
from tests.kubelet.machines import machine
from toposched.errors import InputError
from toposched.kubelet.cpu_manager import StaticCPUPolicy
from toposched.scheduler.intent import (
    CPU_BIND_POLICY_ANNOTATION,
    DEVICE_SCOPE_ANNOTATION,
    KOORDINATOR_DEVICE_JOINT_ALLOCATE,
    KOORDINATOR_NUMA_POLICY_LABEL,
    KOORDINATOR_NUMA_TOPOLOGY_SPEC,
    KOORDINATOR_RESOURCE_SPEC,
    NUMA_POLICY_ANNOTATION,
    NUMA_POLICY_LABEL,
    REASON_POLICY_MISMATCH,
    SOURCE_DEFAULT,
    SOURCE_KOORDINATOR_LABEL,
    SOURCE_LABEL,
    SOURCE_NRT_ATTRIBUTES,
    SOURCE_NRT_POLICIES,
    DeviceScope,
    NodePolicy,
    PodIntent,
    effective_policy,
    node_topology_policy,
    pod_intent,
)
from toposched.scheduler.nrt_match import topology_manager_config
from toposched.scheduler.status import Code
from toposched.topology.nrt import NodeResourceTopology, load_nrts
from toposched.workload import Container, Pod

KOORD_NUMA = KOORDINATOR_NUMA_TOPOLOGY_SPEC
KOORD_RES = KOORDINATOR_RESOURCE_SPEC
KOORD_JOINT = KOORDINATOR_DEVICE_JOINT_ALLOCATE
GI = 2**30


def pod_with(annotations: dict[str, str], *, name: str = "web-0", namespace: str = "shop") -> Pod:
    whole = Container("app", {"cpu": 4000, "memory": GI}, {"cpu": 4000, "memory": GI})
    return Pod(name, namespace=namespace, containers=(whole,), annotations=annotations)


def nrt(*, attributes: dict[str, str] | None = None, policies: tuple[str, ...] = (), name: str = "n1",
        source: str | None = None) -> NodeResourceTopology:
    return NodeResourceTopology(name=name, zones=(), attributes=attributes or {}, top_level_policies=policies,
                                source=source)


# ---- the pod's NUMA policy -------------------------------------------------------------------

# (case, annotations, numa_policy, source, single_numa_exclusive as written, numa_exclusive applied)
NUMA_CASES = [
    ("nothing stated", {}, "", "", "", ""),
    ("ours: none", {NUMA_POLICY_ANNOTATION: "none"}, "none", NUMA_POLICY_ANNOTATION, "", ""),
    ("ours: best-effort", {NUMA_POLICY_ANNOTATION: "best-effort"}, "best-effort", NUMA_POLICY_ANNOTATION, "",
     "Required"),
    ("ours: restricted", {NUMA_POLICY_ANNOTATION: "restricted"}, "restricted", NUMA_POLICY_ANNOTATION, "",
     "Required"),
    ("ours: single-numa-node", {NUMA_POLICY_ANNOTATION: "single-numa-node"}, "single-numa-node",
     NUMA_POLICY_ANNOTATION, "", "Required"),
    ("ours: an empty value counts as absent", {NUMA_POLICY_ANNOTATION: ""}, "", "", "", ""),
    # Koordinator's TestGetNUMATopologySpec, case by case.
    ("koordinator: the legacy form keeps its policy", {KOORD_NUMA: '{"numaTopologyPolicy": "BestEffort"}'},
     "best-effort", KOORD_NUMA, "", "Required"),
    ("koordinator: numaAllocateStrategy alone states no policy",
     {KOORD_NUMA: '{"numaAllocateStrategy": "DistributeEvenly"}'}, "", "", "", ""),
    ("koordinator: Restricted", {KOORD_NUMA: '{"numaTopologyPolicy": "Restricted"}'}, "restricted", KOORD_NUMA,
     "", "Required"),
    ("koordinator: SingleNUMANode, Preferred",
     {KOORD_NUMA: '{"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": "Preferred"}'},
     "single-numa-node", KOORD_NUMA, "Preferred", "Preferred"),
    ("koordinator: SingleNUMANode, Required",
     {KOORD_NUMA: '{"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": "Required"}'},
     "single-numa-node", KOORD_NUMA, "Required", "Required"),
    ("koordinator: the empty policy is its none; exclusivity is not defaulted then",
     {KOORD_NUMA: '{"numaTopologyPolicy": ""}'}, "", "", "", ""),
    ("koordinator: exclusivity alone", {KOORD_NUMA: '{"singleNUMANodeExclusive": "Preferred"}'}, "", "",
     "Preferred", "Preferred"),
    ("koordinator: an empty object", {KOORD_NUMA: "{}"}, "", "", "", ""),
    ("koordinator: null leaves the defaults", {KOORD_NUMA: "null"}, "", "", "", ""),
    ("koordinator: a null field leaves it unset", {KOORD_NUMA: '{"numaTopologyPolicy": null}'}, "", "", "", ""),
    ("koordinator: keys match case-insensitively, as Go's decoder does",
     {KOORD_NUMA: '{"NUMATopologyPolicy": "Restricted", "singlenumanodeexclusive": "Preferred"}'},
     "restricted", KOORD_NUMA, "Preferred", "Preferred"),
    ("koordinator: the last of repeated keys wins",
     {KOORD_NUMA: '{"numaTopologyPolicy": "Restricted", "numaTopologyPolicy": "BestEffort"}'},
     "best-effort", KOORD_NUMA, "", "Required"),
    ("koordinator: an exact key and a folded one: the later one wins",
     {KOORD_NUMA: '{"numaTopologyPolicy": "Restricted", "NumaTopologyPolicy": "SingleNUMANode"}'},
     "single-numa-node", KOORD_NUMA, "", "Required"),
    ("koordinator: unknown keys of any type are ignored",
     {KOORD_NUMA: '{"numaTopologyPolicy": "BestEffort", "extra": [1, {"a": null}], "n": 3.5}'},
     "best-effort", KOORD_NUMA, "", "Required"),
    ("both: ours wins, Koordinator's exclusivity still applies",
     {NUMA_POLICY_ANNOTATION: "restricted",
      KOORD_NUMA: '{"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": "Preferred"}'},
     "restricted", NUMA_POLICY_ANNOTATION, "Preferred", "Preferred"),
    ("both: ours says none, so the pod states no policy",
     {NUMA_POLICY_ANNOTATION: "none", KOORD_NUMA: '{"numaTopologyPolicy": "SingleNUMANode"}'},
     "none", NUMA_POLICY_ANNOTATION, "", ""),
]


@pytest.mark.parametrize(("annotations", "policy", "source", "written", "applied"),
                         [c[1:] for c in NUMA_CASES], ids=[c[0] for c in NUMA_CASES])
def test_pod_numa_policy(annotations: dict[str, str], policy: str, source: str, written: str, applied: str) -> None:
    intent = pod_intent(pod_with(annotations))
    assert (intent.numa_policy, intent.numa_policy_source) == (policy, source)
    assert intent.single_numa_exclusive == written
    assert intent.numa_exclusive == applied
    assert intent.states_numa_policy == (policy not in ("", "none"))


# ---- CPU binding -------------------------------------------------------------------------------

# (case, annotations, cpu_bind_policy, required, source, cpu_exclusive_policy)
BIND_CASES = [
    ("nothing stated: the scheduler's default applies", {}, "", False, "", ""),
    ("ours: FullPCPUs is required", {CPU_BIND_POLICY_ANNOTATION: "FullPCPUs"}, "FullPCPUs", True,
     CPU_BIND_POLICY_ANNOTATION, ""),
    ("ours: SpreadByPCPUs is required", {CPU_BIND_POLICY_ANNOTATION: "SpreadByPCPUs"}, "SpreadByPCPUs", True,
     CPU_BIND_POLICY_ANNOTATION, ""),
    ("ours: an empty value counts as absent", {CPU_BIND_POLICY_ANNOTATION: ""}, "", False, "", ""),
    # Test_getCPUBindPolicy, the cases that depend on the pod alone.
    ("koordinator: the pod enables required FullPCPUs", {KOORD_RES: '{"requiredCPUBindPolicy": "FullPCPUs"}'},
     "FullPCPUs", True, KOORD_RES, ""),
    ("koordinator: the pod enables preferred FullPCPUs", {KOORD_RES: '{"preferredCPUBindPolicy": "FullPCPUs"}'},
     "FullPCPUs", False, KOORD_RES, ""),
    # PreFilter's resolution of the two fields.
    ("koordinator: preferred SpreadByPCPUs", {KOORD_RES: '{"preferredCPUBindPolicy": "SpreadByPCPUs"}'},
     "SpreadByPCPUs", False, KOORD_RES, ""),
    ("koordinator: preferred Default is the scheduler's default", {KOORD_RES: '{"preferredCPUBindPolicy": "Default"}'},
     "", False, "", ""),
    ("koordinator: required Default is the configured default, required",
     {KOORD_RES: '{"requiredCPUBindPolicy": "Default"}'}, "FullPCPUs", True, KOORD_RES, ""),
    ("koordinator: required replaces preferred",
     {KOORD_RES: '{"requiredCPUBindPolicy": "SpreadByPCPUs", "preferredCPUBindPolicy": "FullPCPUs"}'},
     "SpreadByPCPUs", True, KOORD_RES, ""),
    ("koordinator: required ConstrainedBurst binds no CPUs, whatever is preferred",
     {KOORD_RES: '{"requiredCPUBindPolicy": "ConstrainedBurst", "preferredCPUBindPolicy": "FullPCPUs"}'},
     "", False, "", ""),
    ("koordinator: preferred ConstrainedBurst binds no CPUs",
     {KOORD_RES: '{"preferredCPUBindPolicy": "ConstrainedBurst"}'}, "", False, "", ""),
    ("koordinator: exclusivity PCPULevel",
     {KOORD_RES: '{"preferredCPUBindPolicy": "FullPCPUs", "preferredCPUExclusivePolicy": "PCPULevel"}'},
     "FullPCPUs", False, KOORD_RES, "PCPULevel"),
    ("koordinator: exclusivity NUMANodeLevel", {KOORD_RES: '{"preferredCPUExclusivePolicy": "NUMANodeLevel"}'},
     "", False, "", "NUMANodeLevel"),
    ("koordinator: exclusivity None is none", {KOORD_RES: '{"preferredCPUExclusivePolicy": "None"}'},
     "", False, "", ""),
    ("koordinator: an empty object", {KOORD_RES: "{}"}, "", False, "", ""),
    ("koordinator: null", {KOORD_RES: "null"}, "", False, "", ""),
    ("both: ours wins and is required, Koordinator's exclusivity stays",
     {CPU_BIND_POLICY_ANNOTATION: "SpreadByPCPUs",
      KOORD_RES: '{"preferredCPUBindPolicy": "FullPCPUs", "preferredCPUExclusivePolicy": "PCPULevel"}'},
     "SpreadByPCPUs", True, CPU_BIND_POLICY_ANNOTATION, "PCPULevel"),
]


@pytest.mark.parametrize(("annotations", "bind", "required", "source", "exclusive"),
                         [c[1:] for c in BIND_CASES], ids=[c[0] for c in BIND_CASES])
def test_pod_cpu_bind(annotations: dict[str, str], bind: str, required: bool, source: str, exclusive: str) -> None:
    intent = pod_intent(pod_with(annotations))
    assert (intent.cpu_bind_policy, intent.cpu_bind_required, intent.cpu_bind_source) == (bind, required, source)
    assert intent.cpu_exclusive_policy == exclusive


def test_required_default_follows_the_configured_default() -> None:
    intent = pod_intent(pod_with({KOORD_RES: '{"requiredCPUBindPolicy": "Default"}'}),
                        default_cpu_bind_policy="SpreadByPCPUs")
    assert (intent.cpu_bind_policy, intent.cpu_bind_required) == ("SpreadByPCPUs", True)


def test_a_default_that_is_no_bind_policy_is_refused() -> None:
    with pytest.raises(InputError) as err:
        pod_intent(pod_with({}), default_cpu_bind_policy="Default")
    assert err.value.field == "default_cpu_bind_policy"


# ---- device scope ------------------------------------------------------------------------------

DEVICE_CASES = [
    ("nothing stated", {}, None),
    ("ours: pcie, required by default", {DEVICE_SCOPE_ANNOTATION: "pcie"},
     DeviceScope("pcie", True, (), DEVICE_SCOPE_ANNOTATION)),
    ("ours: numa:preferred", {DEVICE_SCOPE_ANNOTATION: "numa:preferred"},
     DeviceScope("numa", False, (), DEVICE_SCOPE_ANNOTATION)),
    ("ours: node:required", {DEVICE_SCOPE_ANNOTATION: "node:required"},
     DeviceScope("node", True, (), DEVICE_SCOPE_ANNOTATION)),
    ("ours: pcie:preferred", {DEVICE_SCOPE_ANNOTATION: "pcie:preferred"},
     DeviceScope("pcie", False, (), DEVICE_SCOPE_ANNOTATION)),
    ("ours: an empty value counts as absent", {DEVICE_SCOPE_ANNOTATION: ""}, None),
    ("koordinator: the proposal's forced same-PCIe example",
     {KOORD_JOINT: '{"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}'},
     DeviceScope("pcie", True, ("gpu", "rdma"), KOORD_JOINT)),
    ("koordinator: without requiredScope, same PCIe is only preferred",
     {KOORD_JOINT: '{"deviceTypes": ["gpu", "rdma"]}'}, DeviceScope("pcie", False, ("gpu", "rdma"), KOORD_JOINT)),
    ("koordinator: the order names the primary type", {KOORD_JOINT: '{"deviceTypes": ["rdma", "gpu", "fpga"]}'},
     DeviceScope("pcie", False, ("rdma", "gpu", "fpga"), KOORD_JOINT)),
    ("koordinator: no device types, no joint allocation", {KOORD_JOINT: '{"requiredScope": "SamePCIe"}'}, None),
    ("koordinator: an empty list of types", {KOORD_JOINT: '{"deviceTypes": []}'}, None),
    ("koordinator: null", {KOORD_JOINT: "null"}, None),
    ("both: ours wins", {DEVICE_SCOPE_ANNOTATION: "numa", KOORD_JOINT: '{"deviceTypes": ["gpu", "rdma"]}'},
     DeviceScope("numa", True, (), DEVICE_SCOPE_ANNOTATION)),
]


@pytest.mark.parametrize(("annotations", "expected"), [c[1:] for c in DEVICE_CASES], ids=[c[0] for c in DEVICE_CASES])
def test_pod_device_scope(annotations: dict[str, str], expected: DeviceScope | None) -> None:
    assert pod_intent(pod_with(annotations)).device_scope == expected


# ---- exclusive CPUs and requests ---------------------------------------------------------------


def guaranteed(name: str, milli: int, *, sidecar: bool = False, memory: int = GI) -> Container:
    resources = {"cpu": milli, "memory": memory}
    return Container(name, resources, resources, "Always" if sidecar else None)


# (case, init containers, app containers, per-container exclusive CPUs, the pod's peak)
EXCLUSIVE_CASES = [
    ("whole CPUs", (), (guaranteed("a", 2000), guaranteed("b", 3000)), {"a": 2, "b": 3}, 5),
    ("a fractional request shares the pool", (), (guaranteed("a", 1500), guaranteed("b", 1000)), {"a": 0, "b": 1}, 1),
    ("an init container alone", (guaranteed("init", 6000),), (guaranteed("a", 2000),), {"init": 6, "a": 2}, 6),
    ("a sidecar runs beside everything after it",
     (guaranteed("side", 2000, sidecar=True), guaranteed("init", 4000)), (guaranteed("a", 3000),),
     {"side": 2, "init": 4, "a": 3}, 6),
    ("a sidecar after the init containers", (guaranteed("init", 4000), guaranteed("side", 2000, sidecar=True)),
     (guaranteed("a", 3000),), {"init": 4, "side": 2, "a": 3}, 5),
]


@pytest.mark.parametrize(("init", "apps", "per_container", "peak"), [c[1:] for c in EXCLUSIVE_CASES],
                         ids=[c[0] for c in EXCLUSIVE_CASES])
def test_exclusive_cpus_as_the_kubelet_decides(init: tuple[Container, ...], apps: tuple[Container, ...],
                                                per_container: dict[str, int], peak: int) -> None:
    pod = Pod("p", uid="u", init_containers=init, containers=apps)
    intent = pod_intent(pod)
    assert dict(intent.exclusive_cpus) == per_container
    assert intent.pod_exclusive_cpus == peak
    assert dict(intent.requests) == pod.effective_requests()


def test_a_burstable_pod_gets_no_exclusive_cpus() -> None:
    pod = Pod("p", containers=(Container("a", {"cpu": 2000}, {"cpu": 4000}),))
    intent = pod_intent(pod)
    assert dict(intent.exclusive_cpus) == {"a": 0}
    assert intent.pod_exclusive_cpus == 0
    assert dict(intent.requests) == {"cpu": 2000}


@settings(max_examples=60, deadline=None)
@given(
    init=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1), st.booleans()), max_size=2),
    apps=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1)), min_size=1, max_size=2),
    half=st.sampled_from([0, 500]),
)
def test_exclusive_cpus_are_what_the_kubelet_allocates(init: list[tuple[int, int, bool]],
                                                       apps: list[tuple[int, int]], half: int) -> None:
    """Each container's count is the size of the cpuset the kubelet model's static policy gives it."""

    def make(name: str, cpus: int, burst: int, sidecar: bool = False) -> Container:
        requests = {"cpu": cpus * 1000 + half, "memory": GI}
        limits = {"cpu": cpus * 1000 + half + burst * 1000, "memory": GI}
        return Container(name, requests, limits, "Always" if sidecar else None)

    pod = Pod("p", uid="u",
              init_containers=tuple(make(f"i{k}", c, b, s) for k, (c, b, s) in enumerate(init)),
              containers=tuple(make(f"a{k}", c, b) for k, (c, b) in enumerate(apps)))
    intent = pod_intent(pod)
    kubelet = StaticCPUPolicy(machine("topoDualSocketHT"), num_reserved=0)
    for container in pod.all_containers:
        assert len(kubelet.allocate(pod, container)) == intent.exclusive_cpus[container.name]
    assert intent.pod_exclusive_cpus == kubelet.pod_guaranteed_cpus(pod)


# ---- bad pod input -----------------------------------------------------------------------------

BAD_POD_CASES = [
    (NUMA_POLICY_ANNOTATION, "SingleNUMANode", "not one of"),
    (NUMA_POLICY_ANNOTATION, "Single-NUMA-Node", "not one of"),
    (NUMA_POLICY_ANNOTATION, "strict", "not one of"),
    (KOORD_NUMA, "{", "not valid JSON"),
    (KOORD_NUMA, "", "not valid JSON"),
    (KOORD_NUMA, "{} trailing", "not valid JSON"),
    (KOORD_NUMA, '{"numaTopologyPolicy": NaN}', "not valid JSON"),
    (KOORD_NUMA, '{"ignored": Infinity}', "not valid JSON"),
    (KOORD_NUMA, "[]", "expected a JSON object, got array"),
    (KOORD_NUMA, '"SingleNUMANode"', "expected a JSON object, got string"),
    (KOORD_NUMA, "3", "expected a JSON object, got number"),
    (KOORD_NUMA, '{"numaTopologyPolicy": 1}', "must be a string, got number"),
    (KOORD_NUMA, '{"numaTopologyPolicy": ["Restricted"]}', "must be a string, got array"),
    (KOORD_NUMA, '{"numaTopologyPolicy": "single-numa-node"}', "not one of"),
    (KOORD_NUMA, '{"numaTopologyPolicy": "None"}', "not one of"),
    (KOORD_NUMA, '{"singleNUMANodeExclusive": "required"}', "not one of"),
    (KOORD_NUMA, '{"singleNUMANodeExclusive": true}', "must be a string, got boolean"),
    (CPU_BIND_POLICY_ANNOTATION, "Default", "not one of"),
    (CPU_BIND_POLICY_ANNOTATION, "ConstrainedBurst", "not one of"),
    (CPU_BIND_POLICY_ANNOTATION, "fullpcpus", "not one of"),
    (KOORD_RES, "not json", "not valid JSON"),
    (KOORD_RES, '{"requiredCPUBindPolicy": "fullpcpus"}', "not one of"),
    (KOORD_RES, '{"preferredCPUBindPolicy": true}', "must be a string, got boolean"),
    (KOORD_RES, '{"preferredCPUBindPolicy": {"a": 1}}', "must be a string, got object"),
    (KOORD_RES, '{"preferredCPUExclusivePolicy": "CoreLevel"}', "not one of"),
    (KOORD_JOINT, '{"deviceTypes": "gpu"}', "must be a list of strings, got string"),
    (KOORD_JOINT, '{"deviceTypes": {"gpu": 1}}', "must be a list of strings, got object"),
    (KOORD_JOINT, '{"deviceTypes": ["gpu", 1]}', "element of type number"),
    (KOORD_JOINT, '{"deviceTypes": ["gpu", null]}', "not one of"),
    (KOORD_JOINT, '{"deviceTypes": ["npu"]}', "not one of"),
    (KOORD_JOINT, '{"deviceTypes": ["gpu", "rdma", "gpu"]}', "repeats gpu"),
    (KOORD_JOINT, '{"deviceTypes": ["gpu"], "requiredScope": "SameNUMA"}', "not one of"),
    (DEVICE_SCOPE_ANNOTATION, "pci", "not one of"),
    (DEVICE_SCOPE_ANNOTATION, "PCIe", "not one of"),
    (DEVICE_SCOPE_ANNOTATION, "pcie:", "not one of"),
    (DEVICE_SCOPE_ANNOTATION, "pcie:must", "not one of"),
    (DEVICE_SCOPE_ANNOTATION, "numa:preferred:x", "not one of"),
]


@pytest.mark.parametrize(("key", "value", "message"), BAD_POD_CASES,
                         ids=[f"{k}={v!r}" for k, v, _ in BAD_POD_CASES])
def test_a_malformed_annotation_names_the_pod_and_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        pod_intent(pod_with({key: value}))
    assert err.value.field == key
    assert err.value.source == "pod shop/web-0"
    assert message in err.value.message
    assert str(err.value).startswith(f"pod shop/web-0: {key}: ")


def test_a_malformed_annotation_is_refused_even_when_ours_wins() -> None:
    with pytest.raises(InputError) as err:
        pod_intent(pod_with({NUMA_POLICY_ANNOTATION: "restricted", KOORD_NUMA: "{"}))
    assert err.value.field == KOORD_NUMA


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=8)
    | st.sampled_from(["SingleNUMANode", "Restricted", "BestEffort", "FullPCPUs", "Default", "gpu", "rdma",
                       "SamePCIe", "Required", "PCPULevel"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["numaTopologyPolicy", "singleNUMANodeExclusive", "requiredCPUBindPolicy",
                        "preferredCPUBindPolicy", "preferredCPUExclusivePolicy", "deviceTypes", "requiredScope",
                        "other"]), inner, max_size=4),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from([KOORD_NUMA, KOORD_RES, KOORD_JOINT, NUMA_POLICY_ANNOTATION, CPU_BIND_POLICY_ANNOTATION,
                            DEVICE_SCOPE_ANNOTATION]),
       value=_json_values.map(json.dumps) | st.text(max_size=20))
def test_any_annotation_value_is_read_or_refused_with_one_input_error(key: str, value: str) -> None:
    try:
        intent = pod_intent(pod_with({key: value}))
    except InputError as err:
        assert err.field == key and err.source == "pod shop/web-0"
    else:
        assert isinstance(intent, PodIntent)


def test_a_real_pod_manifest() -> None:
    manifest = yaml.safe_load("""
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: ml
  annotations:
    toposched.io/numa-policy: single-numa-node
    scheduling.koordinator.sh/resource-spec: '{"preferredCPUBindPolicy": "SpreadByPCPUs"}'
    scheduling.koordinator.sh/device-joint-allocate: |-
      {
        "deviceTypes": ["gpu","rdma"],
        "requiredScope": "SamePCIe"
      }
spec:
  containers:
  - name: main
    resources:
      limits: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "4"}
""")
    intent = pod_intent(Pod.from_dict(manifest))
    assert intent.numa_policy == "single-numa-node"
    assert (intent.cpu_bind_policy, intent.cpu_bind_required) == ("SpreadByPCPUs", False)
    assert intent.device_scope == DeviceScope("pcie", True, ("gpu", "rdma"), KOORD_JOINT)
    assert dict(intent.exclusive_cpus) == {"main": 8}
    assert dict(intent.requests) == {"cpu": 8000, "memory": 32 * GI, "nvidia.com/gpu": 4}


# ---- the node's policy -------------------------------------------------------------------------

SINGLE, RESTRICTED, BEST_EFFORT, NONE = "single-numa-node", "restricted", "best-effort", "none"

# (case, nrt or None, node labels, expected NodePolicy)
NODE_CASES = [
    ("no report, no label", None, {}, NodePolicy(NONE, "container", SOURCE_DEFAULT)),
    ("attributes: policy and scope", nrt(attributes={"topologyManagerPolicy": SINGLE, "topologyManagerScope": "pod"}),
     {}, NodePolicy(SINGLE, "pod", SOURCE_NRT_ATTRIBUTES)),
    ("attributes: policy alone, scope container", nrt(attributes={"topologyManagerPolicy": RESTRICTED}), {},
     NodePolicy(RESTRICTED, "container", SOURCE_NRT_ATTRIBUTES)),
    ("attributes override the deprecated list",
     nrt(attributes={"topologyManagerPolicy": BEST_EFFORT}, policies=("SingleNUMANodePodLevel",)), {},
     NodePolicy(BEST_EFFORT, "pod", SOURCE_NRT_ATTRIBUTES)),
    ("a scope attribute refines the list's policy",
     nrt(attributes={"topologyManagerScope": "pod"}, policies=("RestrictedContainerLevel",)), {},
     NodePolicy(RESTRICTED, "pod", SOURCE_NRT_POLICIES)),
    ("a scope attribute alone states no policy", nrt(attributes={"topologyManagerScope": "pod"}), {},
     NodePolicy(NONE, "container", SOURCE_DEFAULT)),
    ("only the first list entry counts", nrt(policies=("BestEffortPodLevel", "SingleNUMANodeContainerLevel")), {},
     NodePolicy(BEST_EFFORT, "pod", SOURCE_NRT_POLICIES)),
    ("the kubelet's policy beats the labels",
     nrt(attributes={"topologyManagerPolicy": SINGLE}),
     {NUMA_POLICY_LABEL: BEST_EFFORT, KOORDINATOR_NUMA_POLICY_LABEL: "Restricted"},
     NodePolicy(SINGLE, "container", SOURCE_NRT_ATTRIBUTES)),
    ("a kubelet with none leaves the node to our label",
     nrt(attributes={"topologyManagerPolicy": NONE, "topologyManagerScope": "pod"}), {NUMA_POLICY_LABEL: RESTRICTED},
     NodePolicy(RESTRICTED, "container", SOURCE_LABEL)),
    ("a list entry None leaves the node to Koordinator's label", nrt(policies=("None",)),
     {KOORDINATOR_NUMA_POLICY_LABEL: "SingleNUMANode"}, NodePolicy(SINGLE, "pod", SOURCE_KOORDINATOR_LABEL)),
    ("the report's none when no label speaks", nrt(attributes={"topologyManagerPolicy": NONE}), {},
     NodePolicy(NONE, "container", SOURCE_NRT_ATTRIBUTES)),
    ("our label without a report", None, {NUMA_POLICY_LABEL: SINGLE}, NodePolicy(SINGLE, "container", SOURCE_LABEL)),
    ("our label beats Koordinator's", None, {NUMA_POLICY_LABEL: NONE, KOORDINATOR_NUMA_POLICY_LABEL: "Restricted"},
     NodePolicy(NONE, "container", SOURCE_LABEL)),
    ("Koordinator's Restricted", None, {KOORDINATOR_NUMA_POLICY_LABEL: "Restricted"},
     NodePolicy(RESTRICTED, "pod", SOURCE_KOORDINATOR_LABEL)),
    ("Koordinator's BestEffort", None, {KOORDINATOR_NUMA_POLICY_LABEL: "BestEffort"},
     NodePolicy(BEST_EFFORT, "pod", SOURCE_KOORDINATOR_LABEL)),
    ("Koordinator's None", None, {KOORDINATOR_NUMA_POLICY_LABEL: "None"},
     NodePolicy(NONE, "pod", SOURCE_KOORDINATOR_LABEL)),
    ("empty label values count as absent", None, {NUMA_POLICY_LABEL: "", KOORDINATOR_NUMA_POLICY_LABEL: ""},
     NodePolicy(NONE, "container", SOURCE_DEFAULT)),
]

# Every deprecated topologyPolicies value: the six NFD writes, and v1alpha1's level-less names.
DEPRECATED_CASES = [
    ("SingleNUMANodeContainerLevel", SINGLE, "container"),
    ("SingleNUMANodePodLevel", SINGLE, "pod"),
    ("RestrictedContainerLevel", RESTRICTED, "container"),
    ("RestrictedPodLevel", RESTRICTED, "pod"),
    ("BestEffortContainerLevel", BEST_EFFORT, "container"),
    ("BestEffortPodLevel", BEST_EFFORT, "pod"),
    ("Restricted", RESTRICTED, "container"),
    ("BestEffort", BEST_EFFORT, "container"),
    ("SingleNUMANode", SINGLE, "container"),
    ("None", NONE, "container"),
]


@pytest.mark.parametrize(("report", "labels", "expected"), [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_node_policy(report: NodeResourceTopology | None, labels: dict[str, str], expected: NodePolicy) -> None:
    got = node_topology_policy(report, labels)
    assert got == expected
    assert got.from_kubelet == (expected.source in (SOURCE_NRT_ATTRIBUTES, SOURCE_NRT_POLICIES))


@pytest.mark.parametrize(("value", "policy", "scope"), DEPRECATED_CASES, ids=[c[0] for c in DEPRECATED_CASES])
def test_deprecated_topology_policies(value: str, policy: str, scope: str) -> None:
    assert node_topology_policy(nrt(policies=(value,)), {}) == NodePolicy(policy, scope, SOURCE_NRT_POLICIES)


_POLICIES = [NONE, BEST_EFFORT, RESTRICTED, SINGLE]
_NFD_NAMES = ["SingleNUMANodeContainerLevel", "SingleNUMANodePodLevel", "RestrictedContainerLevel",
              "RestrictedPodLevel", "BestEffortContainerLevel", "BestEffortPodLevel", "None"]


@settings(max_examples=120, deadline=None)
@given(policy=st.none() | st.sampled_from(_POLICIES), scope=st.none() | st.sampled_from(["container", "pod"]),
       listed=st.lists(st.sampled_from(_NFD_NAMES), max_size=2))
def test_the_kubelet_policy_reads_as_scheduler_plugins_reads_it(policy: str | None, scope: str | None,
                                                                listed: list[str]) -> None:
    """On what NFD publishes, our reading of the report equals NodeResourceTopologyMatch's."""
    attributes = {k: v for k, v in (("topologyManagerPolicy", policy), ("topologyManagerScope", scope)) if v}
    report = nrt(attributes=attributes, policies=tuple(listed))
    ours = node_topology_policy(report, {})
    theirs = topology_manager_config(report)
    assert ours.policy == theirs.policy
    if ours.policy != NONE:
        assert ours.scope == theirs.scope


BAD_NODE_CASES = [
    ("attribute policy in Koordinator's spelling",
     nrt(attributes={"topologyManagerPolicy": "SingleNUMANode"}, source="a.yaml"), {},
     "attributes.topologyManagerPolicy", "a.yaml: NodeResourceTopology n1"),
    ("attribute scope socket", nrt(attributes={"topologyManagerPolicy": SINGLE, "topologyManagerScope": "socket"}),
     {}, "attributes.topologyManagerScope", "NodeResourceTopology n1"),
    ("an unknown list entry", nrt(policies=("Strict",)), {}, "topologyPolicies[0]", "NodeResourceTopology n1"),
    ("our label in Koordinator's spelling", None, {NUMA_POLICY_LABEL: "SingleNUMANode"}, NUMA_POLICY_LABEL,
     "node worker-3"),
    ("Koordinator's label in ours", None, {KOORDINATOR_NUMA_POLICY_LABEL: "single-numa-node"},
     KOORDINATOR_NUMA_POLICY_LABEL, "node worker-3"),
]


@pytest.mark.parametrize(("report", "labels", "field", "source"), [c[1:] for c in BAD_NODE_CASES],
                         ids=[c[0] for c in BAD_NODE_CASES])
def test_bad_node_input_names_the_object_and_field(report: NodeResourceTopology | None, labels: dict[str, str],
                                                   field: str, source: str) -> None:
    with pytest.raises(InputError) as err:
        node_topology_policy(report, labels, node_name="worker-3")
    assert (err.value.field, err.value.source) == (field, source)
    assert "not one of" in err.value.message


def test_a_label_error_names_the_report_node_when_no_name_is_given() -> None:
    with pytest.raises(InputError) as err:
        node_topology_policy(nrt(name="n7"), {NUMA_POLICY_LABEL: "tight"})
    assert err.value.source == "node n7"


@pytest.mark.shared_data
def test_real_reports_and_the_pod_they_were_written_for() -> None:
    """scheduler-plugins' example nodes and deployment, and noderesourcetopology-api's example."""
    base = shared_path("k8s-objects", "noderesourcetopology")
    for name in ("worker-node-A.yaml", "worker-node-B.yaml"):
        (report,) = load_nrts(base / "scheduler-plugins" / name)
        assert node_topology_policy(report, {}) == NodePolicy(SINGLE, "container", SOURCE_NRT_POLICIES)
    (example,) = load_nrts(base / "noderesourcetopology-api" / "crd-instance-example.yaml")
    assert node_topology_policy(example, {}) == NodePolicy(SINGLE, "container", SOURCE_NRT_POLICIES)

    deployment = yaml.safe_load((base / "scheduler-plugins" / "test-deployment.yaml").read_text())
    template = dict(deployment["spec"]["template"])
    template["metadata"] = {**template["metadata"], "name": deployment["metadata"]["name"]}
    intent = pod_intent(Pod.from_dict(template))
    assert (intent.numa_policy, intent.device_scope) == ("", None)
    assert dict(intent.exclusive_cpus) == {"test-deployment-1-container-1": 1}
    assert dict(intent.requests) == {"cpu": 1000, "memory": 100 * 2**20, "example.com/deviceA": 1,
                                     "example.com/deviceB": 1}
    assert effective_policy(intent, node_topology_policy(example, {})) == (SINGLE, None)


# ---- the compatibility rule --------------------------------------------------------------------


def intent_of(policy: str) -> PodIntent:
    return PodIntent(numa_policy=policy, numa_policy_source=NUMA_POLICY_ANNOTATION if policy else "")


# (case, pod policy, node policy, enforced policy, refused)
RULE_CASES = [
    # Koordinator's Test_mergeTopologyPolicy.
    ("no policy on the pod", "", RESTRICTED, RESTRICTED, False),
    ("the same policy on both", RESTRICTED, RESTRICTED, RESTRICTED, False),
    ("the pod's policy does not match the node's", BEST_EFFORT, RESTRICTED, NONE, True),
    # The rest of the rule.
    ("the pod's policy on a node without one", SINGLE, NONE, SINGLE, False),
    ("the pod says none: the node's policy holds", NONE, SINGLE, SINGLE, False),
    ("nothing anywhere", "", NONE, NONE, False),
    ("none on both", NONE, NONE, NONE, False),
    ("single-numa-node against restricted", SINGLE, RESTRICTED, NONE, True),
    ("restricted against single-numa-node", RESTRICTED, SINGLE, NONE, True),
]


@pytest.mark.parametrize(("pod_policy", "node_policy", "enforced", "refused"), [c[1:] for c in RULE_CASES],
                         ids=[c[0] for c in RULE_CASES])
def test_compatibility_rule(pod_policy: str, node_policy: str, enforced: str, refused: bool) -> None:
    policy, status = effective_policy(intent_of(pod_policy), NodePolicy(node_policy, "container", SOURCE_LABEL))
    assert policy == enforced
    if refused:
        assert status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.message.startswith(REASON_POLICY_MISMATCH)
    else:
        assert status is None


def test_a_mismatch_says_what_each_side_asked_and_where() -> None:
    intent = pod_intent(pod_with({KOORD_NUMA: '{"numaTopologyPolicy": "SingleNUMANode"}'}))
    node = node_topology_policy(nrt(attributes={"topologyManagerPolicy": BEST_EFFORT}), {})
    policy, status = effective_policy(intent, node)
    assert policy == NONE and status is not None
    assert status.reasons == (
        f"{REASON_POLICY_MISMATCH}: the pod asks for single-numa-node ({KOORD_NUMA}), "
        f"the node enforces best-effort ({SOURCE_NRT_ATTRIBUTES})",
    )
    assert status.with_plugin("NUMAAlignment").plugin == "NUMAAlignment"


@settings(max_examples=80, deadline=None)
@given(pod_policy=st.sampled_from(["", *_POLICIES]), node_policy=st.sampled_from(_POLICIES))
def test_the_rule_never_weakens_a_stated_policy(pod_policy: str, node_policy: str) -> None:
    policy, status = effective_policy(intent_of(pod_policy), NodePolicy(node_policy))
    if status is None:
        assert policy in {pod_policy, node_policy} - {""} or policy == NONE
        for stated in (pod_policy, node_policy):
            if stated not in ("", NONE):
                assert policy == stated
    else:
        assert pod_policy not in ("", NONE) and node_policy != NONE and pod_policy != node_policy
