"""``toposched simulate``: the bundled scenario's story, and what is (and is not) the same per seed.

Issue 6, "How it is checked": the default scenario shows in one run that toposched has no
admission rejections, default many, nrt-match (60 s reports) some under the burst and
nrt-match-overreserve fewer, and that toposched schedules at least as many pods as each baseline;
the same seed gives byte-identical metrics.json (with --no-wall-clock: the wall-clock figures are
the only ones that differ between runs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toposched.cli import app
from toposched.sim.metrics import WALL_CLOCK_KEYS

SMALL = """\
name: small
seed: 3
nodes:
  - {profile: epyc-8numa, count: 2}
  - {profile: vm-2numa, count: 3}
  - {profile: gpu-8x, count: 1}
workload:
  synthetic: {pods: 80}
  ramp: {start: 0.8, end: 3.0}
simulation: {reportInterval: 60, maxRecreations: 3}
schedulers: [toposched, default, nrt-match]
"""
BASELINES = ("default", "nrt-match", "nrt-match-overreserve")


def _simulate(tmp_path: Path, folder: str, *args: str) -> dict:
    result = CliRunner().invoke(app, ["simulate", "--report", str(tmp_path / folder), *args])
    assert result.exit_code == 0, result.output
    return json.loads((tmp_path / folder / "metrics.json").read_text())


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(SMALL)
    return path


def test_without_the_wall_clock_the_same_seed_gives_the_same_bytes(tmp_path, small):
    for folder in ("a", "b"):
        _simulate(tmp_path, folder, "--scenario", str(small), "--no-wall-clock")
    for name in ("metrics.json", "report.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert all(run[key] is None for run in metrics["schedulers"].values() for key in WALL_CLOCK_KEYS if key in run)


def test_with_the_wall_clock_only_the_wall_clock_figures_differ(tmp_path, small):
    first = _simulate(tmp_path, "a", "--scenario", str(small))
    second = _simulate(tmp_path, "b", "--scenario", str(small))
    for metrics in (first, second):
        for run in metrics["schedulers"].values():
            assert run["decisions_per_second"] > 0 and run["scheduler_seconds"] > 0
            for key in WALL_CLOCK_KEYS:
                run.pop(key, None)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_a_different_seed_gives_a_different_run(tmp_path, small):
    first = _simulate(tmp_path, "a", "--scenario", str(small), "--no-wall-clock")
    other = _simulate(tmp_path, "b", "--scenario", str(small), "--no-wall-clock", "--seed", "4")
    assert other["scenario"]["seed"] == 4
    assert first["schedulers"]["default"]["timeline"] != other["schedulers"]["default"]["timeline"]


def test_the_help_says_how_to_get_byte_identical_output():
    result = CliRunner().invoke(app, ["simulate", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--no-wall-clock" in text and "byte-identical" in text and "decisions_per_second" in text


@pytest.mark.slow
def test_the_bundled_scenario_tells_the_whole_story_in_one_run(tmp_path):
    result = CliRunner().invoke(app, ["simulate", "--report", str(tmp_path / "out"), "--no-wall-clock"])
    assert result.exit_code == 0, result.output
    assert f"report: {tmp_path / 'out' / 'report.html'}" in " ".join(result.output.split())
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    runs = metrics["schedulers"]
    assert sorted(runs) == sorted(["toposched", "toposched-nfd", *BASELINES])
    assert metrics["scenario"]["report_interval"] == 60
    topo = runs["toposched"]
    assert topo["rejected_admission"] == 0
    # Fed node-feature-discovery's counts only, toposched assumes what it cannot see the safe way:
    # still no rejection, but the GPU-share pods find no node (no GPU memory is known).
    counts_only = runs["toposched-nfd"]
    assert counts_only["rejected_admission"] == 0 and counts_only["pending_end"] > 0
    # Given-up pods count in the waits the same way for everyone, and toposched waits least of all.
    for name in BASELINES:
        assert topo["wait_mean"] <= runs[name]["wait_mean"] and topo["wait_p95"] <= runs[name]["wait_p95"], name
    assert runs["default"]["waits_censored"] == runs["default"]["abandoned"] > 0
    assert runs["default"]["rejected_admission"] >= 0.1 * runs["default"]["arrived"]  # many
    stale = runs["nrt-match"]
    assert stale["rejections"].get("TopologyAffinityError", 0) > 0  # some, from the 60 s old report
    assert runs["nrt-match-overreserve"]["rejected_admission"] < stale["rejected_admission"]
    for name in BASELINES:
        assert topo["scheduled"] >= runs[name]["scheduled"], name
    for name, run in runs.items():  # every pod ends in exactly one state
        assert run["arrived"] + run["recreated"] == run["scheduled"] + run["rejected_admission"] + run["pending_end"]
        assert run["rejected_admission"] == run["recreated"] + run["abandoned"]
        assert run["gpu_fragmentation_mean"] is not None, name
    # The burst: the rejections of the stale report happen while pods still arrive.
    timeline = stale["timeline"]
    assert timeline["rejected"][len(timeline["rejected"]) // 2] == stale["rejected_admission"]
