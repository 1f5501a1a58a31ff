"""The FGD paper's experiment (``toposched simulate --fgd``): GPU allocation rate by arrived load.

Upstream definitions checked here (github.com/hkust-adsl/kubernetes-scheduler-simulator):

* inflation to ``tune`` x the cluster's GPUs: ``pkg/simulator/simulator.go``
  (``TunePodsByNodeTotalResource``, ``tuneUpPods``: pods drawn uniformly from the trace, named
  ``<pod>-tuned-<i>``, appended until the next would pass the target);
* the allocation rate: ``experiments/analysis/merge_alloc_discrete_0920.py`` (``alloc_ratio`` =
  used milli-GPU / (GPUs x 1000), fractional shares counted; ``arrive_ratio`` likewise for the
  arrived pods);
* the paper's runs: ``experiments/run_scripts/generate_run_scripts.py`` (``-tune 1.3``, tune
  seeds from 42, policies Random, DotProd, GpuClustering, GpuPacking, BestFit, FGD).

The real-data test runs on every eighth node of ``openb_node_list_gpu_node.csv`` (152 nodes,
770 GPUs), where 130 % of the GPUs is reached by the first pods of the default trace in creation
order (deterministic), so that it takes seconds; the full run is measured by hand in
docs/sim/fgd.md.
"""

from __future__ import annotations

import csv
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.conftest import shared_path
from toposched.cli import app
from toposched.devices.share import GPU_CORE, GPU_MEMORY_RATIO, NVIDIA_GPU
from toposched.errors import InputError
from toposched.scheduler.plugins.gpu_share import GPUShare
from toposched.sim.contenders import Contender
from toposched.sim.fgd_experiment import (
    DEFAULT_FGD_SCHEDULERS,
    FGD_SCHEDULERS,
    fgd_arrivals,
    fgd_contender,
    fgd_summary,
    mean_metrics,
    run_fgd_experiment,
    run_fgd_seeds,
    sharing_form,
)
from toposched.sim.model import SimPod
from toposched.sim.nodes_csv import read_alibaba_nodes
from toposched.sim.traces import read_alibaba_pods
from toposched.sim.truth import NodeTruth
from toposched.workload import Container, Pod

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
# A node with 2 GPUs and one with 3; one 1-GPU pod, then two 2-GPU pods (5 GPUs asked, 5 held).
# BestFit puts the 1-GPU pod on the 2-GPU node (the tighter fit), which leaves room for one 2-GPU
# pod only. FGD sees that the 2-GPU node's last GPU could no longer serve the workload's 2-GPU
# pods (fragmentation grows by 1000 milli-GPU x their weight) while on the 3-GPU node it would
# not grow, so it goes there, and both 2-GPU pods fit: 100 % against 60 %.
SMALL_NODES = NODE_HEADER + "node-a,32000,131072,2,T4\nnode-b,32000,131072,3,T4\n"
SMALL_PODS = POD_HEADER + (
    "one-gpu,4000,8192,1,1000,,LS,Running,0,,0\n"
    "two-gpu-a,4000,8192,2,1000,,LS,Running,10,,10\n"
    "two-gpu-b,4000,8192,2,1000,,LS,Running,20,,20\n"
)
TRACE = ("traces", "alibaba-cluster-trace-gpu-v2023")


@pytest.fixture
def small(tmp_path):
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text(SMALL_NODES)
    pods.write_text(SMALL_PODS)
    return nodes, pods


def _check_document(metrics, loads=("100", "130")):
    gpus = metrics["scenario"]["gpus"]
    for name, values in metrics["schedulers"].items():
        rates = values["gpu_allocation_rate"]
        for load in loads:
            assert load in rates, (name, load)
        points = sorted((float(k), v) for k, v in rates.items())
        assert all(0 <= v <= 1 for _, v in points)
        assert all(a[1] <= b[1] for a, b in zip(points, points[1:])), name  # pods never leave
        assert all(v <= load / 100 + 1e-9 for load, v in points), name  # nothing runs that did not arrive
        for load, rate in rates.items():
            assert values["unallocated_gpus"][load] == pytest.approx(gpus * (1 - rate), abs=1e-3)
        rejected = values["rejected_admission"]
        assert values["arrived"] == values["scheduled"] + rejected + values["pending_end"]
        assert values["bound"] == values["scheduled"] + rejected
        assert values["abandoned"] == rejected and values["recreated"] == 0
        assert values["running_end"] == values["scheduled"] and values["finished"] == 0


# ---- the synthetic case -----------------------------------------------------------------------------


def test_fgd_keeps_room_for_the_workload_where_bestfit_fragments(small):
    nodes, pods = read_alibaba_nodes(small[0]), read_alibaba_pods(small[1])
    metrics = run_fgd_experiment(nodes, pods, [fgd_contender(n) for n in ("toposched-fgd", "toposched-bestfit")],
                                 max_load=100)
    fgd, bestfit = metrics["schedulers"]["toposched-fgd"], metrics["schedulers"]["toposched-bestfit"]
    assert fgd["gpu_allocation_rate"]["100"] == 1.0 and fgd["unallocated_gpus"]["100"] == 0.0
    assert bestfit["gpu_allocation_rate"]["100"] == 0.6 and bestfit["unallocated_gpus"]["100"] == 2.0
    assert bestfit["pending_end"] == 1 and fgd["pending_end"] == 0
    # The load steps see the pods as they arrive: 1 GPU of 5 is 20 %, then 60 %, then 100 %.
    assert fgd["gpu_allocation_rate"]["15"] == 0.0 and fgd["gpu_allocation_rate"]["20"] == 0.2
    assert bestfit["gpu_allocation_rate"]["95"] == 0.6
    _check_document(metrics, loads=("20", "100"))


def test_every_scheduler_of_the_experiment_runs_and_the_document_adds_up(small):
    nodes, pods = read_alibaba_nodes(small[0]), read_alibaba_pods(small[1])
    metrics = run_fgd_experiment(nodes, pods, [fgd_contender(n) for n in FGD_SCHEDULERS])
    assert list(metrics["schedulers"]) == list(FGD_SCHEDULERS)
    assert metrics["scenario"]["gpus"] == 5 and metrics["scenario"]["max_load"] == 130
    _check_document(metrics)
    for values in metrics["schedulers"].values():
        assert "timeline" not in values and values["wall_seconds"] is None


def test_contenders_carry_their_packing_policy_into_every_point_of_the_profile(small):
    nodes = read_alibaba_nodes(small[0])
    truths = {n.name: NodeTruth(n) for n in nodes}
    scheduler = fgd_contender("toposched-gpupacking").build(nodes, truths)
    shares = {id(p): p for p in (*scheduler.profile.filters, *(p for p, _ in scheduler.profile.scores),
                                 *scheduler.profile.reserves, *scheduler.profile.pre_filters)
              if isinstance(p, GPUShare)}
    assert len(shares) == 1 and next(iter(shares.values())).policy_name == "GpuPacking"
    with pytest.raises(InputError, match="toposched-fgd"):
        fgd_contender("kube-magic")
    bad = Contender("x", "default", plugin_args={"GPUShare": {"policy": "FGD"}})
    with pytest.raises(InputError, match="no plugin 'GPUShare'") as err:
        bad.build(nodes, truths)
    assert err.value.field == "plugin_args.GPUShare"


def _cpu_only(name: str = "cpu-only") -> SimPod:
    return SimPod(Pod(name, containers=(Container("main", requests={"cpu": 1000}),)), 0.0)


def test_whole_gpus_are_asked_as_koordinator_shares_of_a_whole_gpu(small):
    whole = read_alibaba_pods(small[1])[1]
    converted = sharing_form(whole)
    container = converted.pod.containers[0]
    assert NVIDIA_GPU not in container.limits and NVIDIA_GPU not in container.requests
    assert container.limits[GPU_CORE] == container.limits[GPU_MEMORY_RATIO] == 200
    assert container.requests["cpu"] == 4000 and container.requests["memory"] == 8192 * 2**20
    assert converted.pod.name == whole.pod.name and converted.arrival == whole.arrival
    cpu_only = _cpu_only()
    assert sharing_form(cpu_only) is cpu_only


def test_arrivals_follow_the_trace_then_seeded_clones_up_to_the_load(small):
    pods = read_alibaba_pods(small[1])
    capacity = 2_000  # 2 GPUs: the trace (5 GPUs) is cut at the first pod that would pass 130 %
    cut, clones = fgd_arrivals(pods, capacity)
    assert [p.pod.name for p in cut] == ["one-gpu"] and clones == 0
    grown, clones = fgd_arrivals(pods, 10_000, max_load=130, seed=7)
    assert [p.pod.name for p in grown[:3]] == ["one-gpu", "two-gpu-a", "two-gpu-b"]
    assert clones == len(grown) - 3 and all("-tuned-" in p.pod.name for p in grown[3:])
    asked = sum(2 if p.pod.name.startswith("two-gpu") else 1 for p in grown)  # GPUs
    assert 12 <= asked <= 13  # within 130 % of 10 GPUs, and the draw that stopped it (<= 2 GPUs) would pass
    again, _ = fgd_arrivals(pods, 10_000, max_load=130, seed=7)
    assert [p.pod.name for p in again] == [p.pod.name for p in grown]
    shuffled, _ = fgd_arrivals(pods, 10_000, seed=7, shuffle=True)
    assert sorted(p.pod.name for p in shuffled[:3]) == ["one-gpu", "two-gpu-a", "two-gpu-b"]
    with pytest.raises(InputError, match="nodes with GPUs"):
        fgd_arrivals(pods, 0)
    with pytest.raises(InputError, match="pods that ask for GPUs"):
        fgd_arrivals([_cpu_only()], 1000)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(1, 16), st.sampled_from([0, 1, 2, 4]), st.sampled_from([100, 250, 500, 1000])),
                min_size=1, max_size=12),
       st.sampled_from(["toposched-fgd", "toposched-bestfit", "toposched-random", "default"]))
def test_allocation_never_exceeds_arrivals_or_capacity_and_never_drops(tmp_path_factory, rows, name):
    folder = tmp_path_factory.mktemp("fgd")
    lines = [f"p{i},{cpu * 1000},1024,{gpus},{milli if gpus == 1 else 1000 if gpus else 0},,LS,Running,{i},,{i}"
             for i, (cpu, gpus, milli) in enumerate(rows)]
    if not any(g for _, g, _ in rows):
        lines.append(f"p{len(rows)},1000,1024,1,500,,LS,Running,{len(rows)},,{len(rows)}")
    (folder / "pods.csv").write_text(POD_HEADER + "\n".join(lines) + "\n")
    (folder / "nodes.csv").write_text(SMALL_NODES)
    nodes, pods = read_alibaba_nodes(folder / "nodes.csv"), read_alibaba_pods(folder / "pods.csv")
    metrics = run_fgd_experiment(nodes, pods, [fgd_contender(name, seed=3)], seed=3)
    _check_document(metrics)
    assert metrics["schedulers"][name]["allocated_gpus"] <= metrics["scenario"]["gpus"]


def test_same_input_gives_identical_metrics(small):
    nodes, pods = read_alibaba_nodes(small[0]), read_alibaba_pods(small[1])
    runs = [json.dumps(run_fgd_experiment(nodes, pods, [fgd_contender(n, seed=5) for n in FGD_SCHEDULERS], seed=5),
                       sort_keys=True) for _ in range(2)]
    assert runs[0] == runs[1]


# ---- the command ------------------------------------------------------------------------------------


def test_simulate_fgd_writes_byte_identical_metrics_and_a_report(small, tmp_path):
    outputs = []
    for folder in ("a", "b"):
        result = CliRunner().invoke(app, ["simulate", "--nodes", str(small[0]), "--pods", str(small[1]), "--fgd",
                                          "--report", str(tmp_path / folder), "--no-wall-clock"])
        assert result.exit_code == 0, result.output
        assert "GPU allocation rate by arrived load" in result.output
        outputs.append((tmp_path / folder / "metrics.json").read_bytes())
        assert "GPU allocation rate" in (tmp_path / folder / "report.html").read_text()
    assert outputs[0] == outputs[1]
    metrics = json.loads(outputs[0])
    assert set(metrics["schedulers"]) == set(DEFAULT_FGD_SCHEDULERS)
    assert metrics["schedulers"]["toposched-fgd"]["gpu_allocation_rate"]["100"] == 1.0


def test_simulate_fgd_names_the_file_and_row_of_a_negative_gpu_count(small, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text(SMALL_PODS + "broken,1000,1024,-2,1000,,LS,Running,30,,30\n")
    result = CliRunner().invoke(app, ["simulate", "--nodes", str(small[0]), "--pods", str(bad), "--fgd",
                                      "--report", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert f"{bad}:5" in result.output and "num_gpu" in result.output and "-2 is negative" in result.output
    assert not (tmp_path / "r").exists()


def test_simulate_fgd_refuses_an_unknown_scheduler_listing_the_experiment_s(small, tmp_path):
    result = CliRunner().invoke(app, ["simulate", "--nodes", str(small[0]), "--pods", str(small[1]), "--fgd",
                                      "-s", "kube-magic", "--report", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert "unknown scheduler 'kube-magic'" in result.output and "toposched-bestfit" in result.output


def test_simulate_fgd_shuffle_runs_several_seeds_and_reports_their_means(small, tmp_path):
    args = ["simulate", "--nodes", str(small[0]), "--pods", str(small[1]), "--fgd", "--shuffle", "--seed", "7",
            "--runs", "2", "-s", "toposched-gpu", "-s", "toposched-bestfit", "--no-wall-clock"]
    result = CliRunner().invoke(app, [*args, "--report", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert metrics["scenario"]["seeds"] == [7, 8] and "seed" not in metrics["scenario"]
    assert metrics["scenario"]["order"] == "shuffled" and metrics["scenario"]["ties"] == "random"
    nodes, pods = read_alibaba_nodes(small[0]), read_alibaba_pods(small[1])
    for name, values in metrics["schedulers"].items():
        one = [run_fgd_experiment(nodes, pods, [fgd_contender(name, seed=s)], seed=s, shuffle=True)["schedulers"][name]
               for s in (7, 8)]
        assert values["runs"] == {str(s): {"100": r["gpu_allocation_rate"]["100"], "130": r["gpu_allocation_rate"]["130"]}
                                  for s, r in zip((7, 8), one)}
        assert values["gpu_allocation_rate"]["100"] == pytest.approx(
            (one[0]["gpu_allocation_rate"]["100"] + one[1]["gpu_allocation_rate"]["100"]) / 2, abs=1e-6)
    said = " ".join(result.output.split())  # the console may wrap lines
    assert "toposched-gpu (FGD decides) at 100% arrived load: " in said
    assert "(mean of seeds 7-8)" in said and "95.23%" in said
    again = CliRunner().invoke(app, [*args, "--report", str(tmp_path / "b")])
    assert again.exit_code == 0
    assert (tmp_path / "a" / "metrics.json").read_bytes() == (tmp_path / "b" / "metrics.json").read_bytes()
    refused = CliRunner().invoke(app, ["simulate", "--shuffle", "--report", str(tmp_path / "c")])
    assert refused.exit_code == 1 and "--fgd" in refused.output


def test_mean_metrics_averages_numbers_and_keeps_the_rest():
    runs = [{"scenario": {"seed": s, "max_load": 130, "order": "shuffled"},
             "schedulers": {"x": {"gpu_allocation_rate": {"100": r, "130": r2}, "wall_seconds": w, "name": "x"}}}
            for s, r, r2, w in ((1, 0.5, 0.6, None), (2, 0.7, 0.8, 3.0))]
    out = mean_metrics(runs)
    assert out["scenario"] == {"seeds": [1, 2], "max_load": 130, "order": "shuffled"}
    x = out["schedulers"]["x"]
    assert x["gpu_allocation_rate"] == {"100": 0.6, "130": 0.7} and x["wall_seconds"] is None and x["name"] == "x"
    assert x["runs"] == {"1": {"100": 0.5, "130": 0.6}, "2": {"100": 0.7, "130": 0.8}}
    assert mean_metrics(runs[:1]) is runs[0]
    with pytest.raises(InputError):
        run_fgd_seeds([], [], lambda seed: [], [])


def test_gpu_pods_whose_gpus_sit_on_the_fewest_numa_nodes_are_counted(small):
    # node-a: 2 GPUs, one per NUMA node; node-b: 3 GPUs, 2 + 1. BestFit's 2-GPU pod on node-b
    # could take GPUs of both NUMA nodes; GPUShare gives it the two of NUMA node 0.
    nodes, pods = read_alibaba_nodes(small[0]), read_alibaba_pods(small[1])
    metrics = run_fgd_experiment(nodes, pods, [fgd_contender(n) for n in ("toposched-gpu", "toposched-bestfit")],
                                 max_load=100)
    gpu, bestfit = metrics["schedulers"]["toposched-gpu"], metrics["schedulers"]["toposched-bestfit"]
    assert (gpu["gpu_pods"], gpu["gpu_numa_aligned_fraction"]) == (3, 1.0)
    assert (bestfit["gpu_pods"], bestfit["gpu_numa_aligned_fraction"]) == (2, 1.0)


def test_random_ties_depend_on_the_seed_only(small):
    nodes, pods = read_alibaba_nodes(small[0]), read_alibaba_pods(small[1])
    first = run_fgd_experiment(nodes, pods, [fgd_contender("toposched-gpu")], random_ties=False)
    assert first["scenario"]["ties"] == "first"
    a, b = (json.dumps(run_fgd_experiment(nodes, pods, [fgd_contender("toposched-gpu", seed=3)], seed=3), sort_keys=True)
            for _ in range(2))
    assert a == b


# ---- the real trace ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.shared_data
def test_openb_default_trace_fgd_allocates_at_least_as_much_as_bestfit(tmp_path):
    folder = shared_path(*TRACE)
    with open(folder / "openb_node_list_gpu_node.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    subset = tmp_path / "openb_node_list_gpu_node_every8.csv"
    with open(subset, "w", newline="") as fh:
        csv.writer(fh).writerows([rows[0], *rows[1::8]])
    result = CliRunner().invoke(app, ["simulate", "--nodes", str(subset), "--pods",
                                      str(folder / "openb_pod_list_default.csv"), "--fgd", "-s", "toposched-fgd",
                                      "-s", "toposched-bestfit", "--report", str(tmp_path / "r"), "--no-wall-clock"])
    assert result.exit_code == 0, result.output
    assert "95.23%" in result.output and "92.86%" in result.output
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    scenario = metrics["scenario"]
    assert scenario["nodes"] == 152 and scenario["gpus"] == 770
    assert 0 < scenario["trace_pods"] < 8152 and scenario["cloned_pods"] == 0  # the trace's first pods
    _check_document(metrics)
    rates = {name: values["gpu_allocation_rate"] for name, values in metrics["schedulers"].items()}
    assert rates["toposched-fgd"]["100"] >= rates["toposched-bestfit"]["100"]
    assert fgd_summary(metrics)[-2].startswith("toposched (FGD) at 100% arrived load: ")
