"""GPU model constraints (a trace pod's ``gpu_spec``) as node selectors every contender obeys.

The node label is the one NVIDIA's GPU feature discovery publishes, ``nvidia.com/gpu.product``
(NVIDIA/gpu-feature-discovery, README "Generated Labels"). The kubelet's own admission check of
a node selector, and its reason ``NodeAffinity``, are upstream's (kubernetes/kubernetes,
pkg/kubelet/lifecycle/predicate.go: ``generalFilter`` runs the scheduler's ``AdmissionCheck``,
whose node-affinity failure is reported under the predicate name ``NodeAffinity``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sim.test_engine import BLIND
from toposched.errors import InputError
from toposched.names import GPU_PRODUCTS_LABEL_PREFIX
from toposched.sim.contenders import BUILTIN_CONTENDERS, contender, contender_from_config
from toposched.sim.engine import SimConfig, Simulation
from toposched.sim.gpu_models import gpu_models_selector, select_gpu_models
from toposched.sim.hardware import profile_node
from toposched.sim.model import GPU_MODEL_LABEL, GPU_PRODUCT_LABEL, SimPod
from toposched.sim.nodes_csv import GPU_MODELS, read_alibaba_nodes
from toposched.sim.traces import read_alibaba_pods
from toposched.workload import Container, Pod

NODES = """sn,cpu_milli,memory_mib,gpu,model
t4-a,64000,262144,8,T4
t4-b,64000,262144,8,T4
p100-a,64000,262144,8,P100
v16-a,64000,262144,8,V100M16
v32-a,64000,262144,8,V100M32
cpu-a,32000,131072,0,
"""
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


def _pods_csv() -> str:
    rows = []
    specs = ["T4", "V100M16|V100M32", "P100|T4", "", "A10"]  # A10: no such node in the cluster
    for i in range(20):  # whole GPUs: a share pod's GPU is chosen by GPUShare, which default lacks
        rows.append(f"p{i:02d},2000,4096,1,1000,{specs[i % len(specs)]},LS,Running,{i},,")
    return POD_HEADER + "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> tuple[list, list[SimPod]]:
    folder = tmp_path_factory.mktemp("trace")
    (folder / "nodes.csv").write_text(NODES)
    (folder / "pods.csv").write_text(_pods_csv())
    return read_alibaba_nodes(folder / "nodes.csv"), read_alibaba_pods(folder / "pods.csv")


def test_trace_nodes_carry_the_gpu_feature_discovery_label(trace):
    nodes, _ = trace
    by_name = {n.name: n for n in nodes}
    assert by_name["t4-a"].labels[GPU_PRODUCT_LABEL] == "T4"
    assert by_name["v32-a"].labels[GPU_PRODUCT_LABEL] == "V100M32"
    assert by_name["t4-a"].labels[GPU_MODEL_LABEL] == "T4"  # what GPUShare's packing reads
    assert GPU_PRODUCT_LABEL not in by_name["cpu-a"].labels
    assert profile_node("gpu-8x", "g1").labels[GPU_PRODUCT_LABEL] == "A100"  # a profile's model too


def test_one_model_is_the_product_label_and_several_are_one_label_per_set():
    assert gpu_models_selector(()) == {}
    assert gpu_models_selector(["T4"]) == {GPU_PRODUCT_LABEL: "T4"}
    assert gpu_models_selector(["V100M32", "V100M16", "V100M16"]) == {f"{GPU_PRODUCTS_LABEL_PREFIX}V100M16.V100M32": "true"}
    assert gpu_models_selector(["P100", "T4"]) == gpu_models_selector(["T4", "P100"])


def test_a_set_that_cannot_be_a_label_name_gets_a_digest():
    key, = gpu_models_selector(["RTX 4090", "T4"])
    assert key.startswith(GPU_PRODUCTS_LABEL_PREFIX + "sha256-")
    everything, = gpu_models_selector(list(GPU_MODELS) + ["H100-SXM5-80GB"])  # too long for a label name
    assert len(everything.split("/", 1)[1]) <= 63


@settings(max_examples=60, deadline=None)
@given(node_models=st.lists(st.sampled_from(["T4", "P100", "V100M16", "V100M32", "A10", ""]), min_size=1, max_size=8),
       pod_models=st.lists(st.frozensets(st.sampled_from(["T4", "P100", "V100M16", "V100M32", "A10", "G2"]),
                                         max_size=4), min_size=1, max_size=6))
def test_a_node_matches_a_pods_selector_exactly_when_its_model_is_allowed(trace, node_models, pod_models):
    base = trace[0][0]
    nodes = [base.__class__(f"n{i}", base.machine, base.kubelet, labels={GPU_PRODUCT_LABEL: m} if m else {},
                            gpu_model=m or None) for i, m in enumerate(node_models)]
    pods = [SimPod(Pod(f"p{i}", uid=f"p{i}"), float(i), gpu_models=tuple(sorted(models)))
            for i, models in enumerate(pod_models)]
    labelled, selected = select_gpu_models(nodes, pods)
    for sim_pod in selected:
        for node in labelled:
            matches = all(node.labels.get(k) == v for k, v in sim_pod.pod.node_selector.items())
            allowed = not sim_pod.gpu_models or node.gpu_model in sim_pod.gpu_models
            assert matches == allowed, (node.gpu_model, sim_pod.gpu_models, sim_pod.pod.node_selector)


def test_nodes_and_pods_without_constraints_are_left_as_they_are(trace):
    nodes, pods = trace
    plain = [p for p in pods if not p.gpu_models]
    labelled, selected = select_gpu_models(nodes, plain)
    assert all(a is b for a, b in zip(labelled, nodes)) and all(a is b for a, b in zip(selected, plain))


def test_a_pod_whose_own_selector_contradicts_its_models_is_refused():
    pod = SimPod(Pod("x", uid="x", node_selector={GPU_PRODUCT_LABEL: "T4"}), 0.0, gpu_models=("P100",))
    with pytest.raises(InputError) as err:
        select_gpu_models([], [pod])
    assert err.value.source == "pod default/x" and err.value.field == "nodeSelector"
    agreeing = SimPod(Pod("y", uid="y", node_selector={GPU_PRODUCT_LABEL: "T4"}), 0.0, gpu_models=("T4",))
    assert select_gpu_models([], [agreeing])[1][0].pod.node_selector == {GPU_PRODUCT_LABEL: "T4"}


@pytest.mark.parametrize("name", BUILTIN_CONTENDERS)
def test_every_contender_places_constrained_pods_only_on_their_models(trace, name):
    nodes, pods = trace
    result = Simulation(nodes, pods, contender(name), SimConfig(max_recreations=3), check=True).run()
    model = {n.name: n.gpu_model for n in nodes}
    by_name = {p.pod.name: p for p in pods}
    for running in result.started:
        allowed = by_name[running.pod.name].gpu_models
        if allowed:
            assert model[running.node] in allowed, (running.pod.name, running.node, allowed)
    # Pods that allow only A10 find no node anywhere: they wait, and no node ever refuses them.
    assert result.pending_end == sum(1 for p in pods if p.gpu_models == ("A10",))
    assert "NodeAffinity" not in result.rejected


def test_the_node_refuses_a_pod_whose_selector_it_does_not_match(trace, tmp_path: Path):
    # A profile without NodeAffinity binds where it likes; the kubelet's own check refuses the pod.
    config = tmp_path / "blind.yaml"
    config.write_text(BLIND)
    nodes, _ = trace
    pods = [SimPod(Pod(f"t4-only-{i}", uid=f"t4-only-{i}", containers=(Container("main", requests={"cpu": 1000}),)),
                   float(i), gpu_models=("T4",)) for i in range(6)]
    result = Simulation(nodes, pods, contender_from_config(config), SimConfig(max_recreations=0)).run()
    assert result.rejected["NodeAffinity"] > 0
    model = {n.name: n.gpu_model for n in nodes}
    assert all(model[r.node] == "T4" for r in result.started)
