"""The discrete-event engine and the scenario runner: conservation, determinism, the schedulers compared."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from toposched.cli import app
from toposched.errors import InputError
from toposched.sim.contenders import contender, contender_from_config
from toposched.sim.engine import SimConfig, Simulation
from toposched.sim.hardware import cluster_from_dict
from toposched.sim.model import SimPod
from toposched.sim.scenario import Scenario, load_scenario, run_scenario
from toposched.sim.synthetic import SyntheticConfig, generate_workload, ramp_past_saturation
from toposched.workload import Pod

SMALL = """\
name: small
seed: 3
nodes:
  - {profile: epyc-8numa, count: 3}
  - {profile: vm-2numa, count: 4}
  - {profile: gpu-8x, count: 1}
workload:
  synthetic: {pods: 400}
  ramp: {start: 0.8, end: 3.0}
simulation: {reportInterval: 60, maxRecreations: 4}
schedulers: [toposched, default, nrt-match]
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Scenario:
    path = tmp_path_factory.mktemp("scenario") / "small.yaml"
    path.write_text(SMALL)
    return load_scenario(path)


@pytest.fixture(scope="module")
def results(small):
    out = {}
    for name in small.schedulers:
        out[name] = Simulation(small.nodes, small.pods, contender(name), small.config, check=True).run()
    return out


@pytest.mark.parametrize("name", ["toposched", "default", "nrt-match"])
def test_every_pod_ends_in_exactly_one_state_and_nothing_is_over_committed(results, name):
    # check=True asserted capacity and CPU ownership after every instant of the run.
    r = results[name]
    rejected = sum(r.rejected.values())
    assert r.arrived == 400
    assert r.arrived + r.recreated == r.scheduled + rejected + r.pending_end
    assert r.scheduled == r.running_end + r.finished
    assert rejected == r.recreated + r.abandoned
    assert r.bound == r.scheduled + rejected


def test_toposched_is_never_rejected_and_schedules_at_least_as_many_pods(results):
    assert not results["toposched"].rejected
    assert sum(results["default"].rejected.values()) > 0  # the kubelet refuses what default did not align
    for name in ("default", "nrt-match"):
        assert results["toposched"].scheduled >= results[name].scheduled


def test_a_run_is_a_pure_function_of_its_input(small):
    first = run_scenario(small)
    second = run_scenario(small)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert first["schedulers"]["toposched"]["decisions_per_second"] is None  # no timer: no wall-clock figures


def test_nodes_that_reject_re_create_pods_after_a_doubling_backoff():
    nodes = cluster_from_dict({"nodes": [{"profile": "vm-2numa", "count": 2}]})
    config = ramp_past_saturation(SyntheticConfig(pods=150, mix={"latency": 1}), nodes, start=2.0, end=4.0)
    pods = generate_workload(config, seed=5)
    result = Simulation(nodes, pods, contender("default"), SimConfig(max_recreations=2)).run()
    assert result.recreated > 0
    assert result.abandoned > 0  # after two replacements a controller gives up


BLIND = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: blind
  plugins:
    multiPoint:
      disabled: [{name: "*"}]
      enabled: [{name: NodeResourcesFit}, {name: DefaultBinder}]
"""


def test_a_controller_that_never_gives_up_keeps_backing_off_at_the_cap(tmp_path):
    # Every attempt is refused (the node's labels do not match the pod's selector, and this
    # profile does not look): past a thousand attempts the delay stays at maxBackoff.
    config = tmp_path / "blind.yaml"
    config.write_text(BLIND)
    nodes = cluster_from_dict({"nodes": [{"profile": "vm-2numa", "count": 1}]})
    pod = SimPod(Pod("stuck", uid="stuck", node_selector={"pool": "nowhere"}), 0.0, owner="rs/stuck")
    result = Simulation(nodes, [pod], contender_from_config(config),
                        SimConfig(backoff=10, max_backoff=300, horizon=400_000)).run()
    attempts, now = 0, 0.0
    while now <= 400_000:  # attempt k comes min(300, 10 * 2^k) seconds after attempt k - 1 failed
        now += min(300, 10 * 2 ** min(attempts, 10))
        attempts += 1
    assert result.rejected == {"NodeAffinity": attempts} and attempts > 1024
    assert result.recreated == attempts and result.scheduled == 0
    assert result.pending_end == 1  # the last replacement, still in its backoff at the horizon
    assert result.arrived + result.recreated == result.scheduled + attempts + result.pending_end


def test_bad_settings_and_duplicate_nodes_are_refused():
    with pytest.raises(InputError) as err:
        SimConfig(report_interval=0)
    assert err.value.field == "report_interval"
    nodes = cluster_from_dict({"nodes": [{"profile": "vm-2numa", "count": 1}]})
    with pytest.raises(InputError):
        Simulation(nodes + nodes, [], contender("toposched"))
    with pytest.raises(InputError) as err:
        contender("kube-magic")
    assert "toposched" in str(err.value)


def test_a_scenario_with_an_unknown_key_names_file_and_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(SMALL + "colour: blue\n")
    with pytest.raises(InputError) as err:
        load_scenario(path)
    assert err.value.field == "colour" and str(path) in str(err.value)


def test_simulate_writes_a_report_and_byte_identical_metrics_per_seed(tmp_path):
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL.replace("pods: 400", "pods: 150"))
    runner = CliRunner()
    outputs = []
    for folder in ("a", "b"):
        result = runner.invoke(app, ["simulate", "--scenario", str(scenario), "--report", str(tmp_path / folder),
                                     "--no-wall-clock"])
        assert result.exit_code == 0, result.output
        assert "rejected at admission" in result.output and "nrt-match" in result.output
        outputs.append((tmp_path / folder / "metrics.json").read_bytes())
        assert (tmp_path / folder / "report.html").stat().st_size > 10_000
    assert outputs[0] == outputs[1]
    metrics = json.loads(outputs[0])
    for name in ("toposched", "default", "nrt-match"):
        entry = metrics["schedulers"][name]
        for key in ("scheduled", "rejected_admission", "recreated", "pending_end", "aligned_fraction",
                    "decisions_per_second"):
            assert key in entry


def test_simulate_refuses_an_unknown_scheduler_with_a_clear_message(tmp_path):
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    result = CliRunner().invoke(app, ["simulate", "--scenario", str(scenario), "-s", "kube-magic",
                                      "--report", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert "unknown scheduler 'kube-magic'" in result.output
