"""The nrt-match contenders: scheduler-plugins' NodeResourceTopologyMatch on a stale report, and its
overreserve cache against that report.

Upstream's claim for the cache (kubernetes-sigs/scheduler-plugins
``pkg/noderesourcetopology/cache/docs/NUMA-aware-scheduler-side-reserve-plugin.md``): with NRT
updates that lag, the pessimistic per-zone accounting prevents TopologyAffinityError "at the
cost of leaving pods pending longer". A burst of single-NUMA pods on large NUMA machines, with
reports every 60 s, shows both sides; with a report after every pod event the plugin's filter
sees the truth and nothing is rejected, so the rejections come from the lag alone.

The contenders run the plugin as scheduler-plugins' documented example deploys it
(``manifests/noderesourcetopology/scheduler-config.yaml``): it is *enabled* at preFilter, filter
and score, which adds it to kube-scheduler's default plugins, so NodeResourcesFit (LeastAllocated)
and NodeResourcesBalancedAllocation keep scoring at weight 1 beside it.
"""

from __future__ import annotations

import pytest

from toposched.sim.contenders import BUILTIN_CONTENDERS, REPORTS_NFD, contender
from toposched.sim.engine import SimConfig, Simulation
from toposched.sim.hardware import cluster_from_dict
from toposched.sim.synthetic import SyntheticConfig, generate_workload, ramp_past_saturation
from toposched.sim.truth import NodeTruth


@pytest.fixture(scope="module")
def burst():
    nodes = cluster_from_dict({"nodes": [{"profile": "epyc-8numa", "count": 2}]})
    config = ramp_past_saturation(SyntheticConfig(pods=150, mix={"latency": 1}), nodes, start=1.0, end=4.0)
    pods = generate_workload(config, seed=2)
    runs = {}
    for name in ("nrt-match", "nrt-match-overreserve"):
        runs[name] = Simulation(nodes, pods, contender(name), SimConfig(report_interval=60, max_recreations=4),
                                check=True).run()
    runs["fresh"] = Simulation(nodes, pods, contender("nrt-match"),
                               SimConfig(report_interval=60, report_on_events=True, max_recreations=4)).run()
    return runs


def test_overreserve_has_fewer_admission_rejections_than_the_stale_report(burst):
    stale, cached = burst["nrt-match"], burst["nrt-match-overreserve"]
    assert stale.rejected["TopologyAffinityError"] > 0
    assert sum(cached.rejected.values()) < sum(stale.rejected.values())
    assert cached.rejected["TopologyAffinityError"] < stale.rejected["TopologyAffinityError"]


def test_nrt_match_is_rejected_only_because_its_report_lags(burst):
    assert burst["nrt-match"].rejected["TopologyAffinityError"] > 0
    assert not burst["fresh"].rejected  # a report after every pod event: the filter sees the truth


def test_overreserve_pays_for_it_with_waiting(burst):
    def mean_wait(run):
        return sum(run.waits) / len(run.waits)
    assert mean_wait(burst["nrt-match-overreserve"]) > mean_wait(burst["fresh"])


@pytest.mark.parametrize("name", ["nrt-match", "nrt-match-overreserve"])
def test_every_pod_ends_in_exactly_one_state(burst, name):
    r = burst[name]  # check=True asserted capacity and CPU ownership after every instant
    rejected = sum(r.rejected.values())
    assert r.arrived + r.recreated == r.scheduled + rejected + r.pending_end
    assert r.scheduled == r.running_end + r.finished


def test_the_contender_is_built_in_and_runs_scheduler_plugins_documented_cache_args():
    assert "nrt-match-overreserve" in BUILTIN_CONTENDERS
    c = contender("nrt-match-overreserve")
    assert c.report_kind(exact=False) == REPORTS_NFD
    nodes = cluster_from_dict({"nodes": [{"profile": "vm-2numa", "count": 1}]})
    sched = c.build(nodes, {n.name: NodeTruth(n) for n in nodes})
    plugin = next(p for p in sched.profile.filters if p.name == "NodeResourceTopologyMatch")
    assert plugin.args.cache_resync_period_seconds == 5
    assert plugin.cache is not None and plugin.cache.strategy == "overreserve"
    assert plugin.args.scoring_strategy.type == "LeastAllocated"


@pytest.mark.parametrize("name", ["nrt-match", "nrt-match-overreserve"])
def test_the_plugin_is_added_to_kube_schedulers_default_scorers(name):
    nodes = cluster_from_dict({"nodes": [{"profile": "vm-2numa", "count": 1}]})
    sched = contender(name).build(nodes, {n.name: NodeTruth(n) for n in nodes})
    scores = {p.name: (p, weight) for p, weight in sched.profile.scores}
    assert {n: w for n, (_, w) in scores.items()} == {
        "NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1, "NodeResourceTopologyMatch": 1}
    assert scores["NodeResourcesFit"][0].strategy == "LeastAllocated"
    nrt = scores["NodeResourceTopologyMatch"][0]
    assert (nrt.cache is not None) == (name == "nrt-match-overreserve")  # nrt-match: the report as published
