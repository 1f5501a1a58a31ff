"""The nrt-match-overreserve contender: scheduler-plugins' overreserve cache against the stale report.

Upstream's claim for the cache (kubernetes-sigs/scheduler-plugins
``pkg/noderesourcetopology/cache/docs/NUMA-aware-scheduler-side-reserve-plugin.md``): with NRT
updates that lag, the pessimistic per-zone accounting prevents TopologyAffinityError "at the
cost of leaving pods pending longer". A burst of single-NUMA pods on large NUMA machines, with
reports every 60 s, shows both sides.
"""

from __future__ import annotations

import pytest

from toposched.sim.contenders import BUILTIN_CONTENDERS, contender
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
    return runs


def test_overreserve_has_fewer_admission_rejections_than_the_stale_report(burst):
    stale, cached = burst["nrt-match"], burst["nrt-match-overreserve"]
    assert stale.rejected["TopologyAffinityError"] > 0
    assert sum(cached.rejected.values()) < sum(stale.rejected.values())
    assert cached.rejected["TopologyAffinityError"] < stale.rejected["TopologyAffinityError"]


@pytest.mark.parametrize("name", ["nrt-match", "nrt-match-overreserve"])
def test_every_pod_ends_in_exactly_one_state(burst, name):
    r = burst[name]  # check=True asserted capacity and CPU ownership after every instant
    rejected = sum(r.rejected.values())
    assert r.arrived + r.recreated == r.scheduled + rejected + r.pending_end
    assert r.scheduled == r.running_end + r.finished


def test_the_contender_is_built_in_and_runs_scheduler_plugins_documented_cache_args():
    assert "nrt-match-overreserve" in BUILTIN_CONTENDERS
    c = contender("nrt-match-overreserve")
    assert c.wants_reports and not c.knows_hardware
    nodes = cluster_from_dict({"nodes": [{"profile": "vm-2numa", "count": 1}]})
    sched = c.build(nodes, {n.name: NodeTruth(n) for n in nodes})
    plugin = next(p for p in sched.profile.filters if p.name == "NodeResourceTopologyMatch")
    assert plugin.args.cache_resync_period_seconds == 5
    assert plugin.cache is not None and plugin.cache.strategy == "overreserve"
    assert plugin.args.scoring_strategy.type == "LeastAllocated"
