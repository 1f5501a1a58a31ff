"""The leaderElection block of a KubeSchedulerConfiguration (kube-scheduler's defaults, Go durations)."""

from pathlib import Path

import pytest
import yaml

from toposched.errors import InputError
from toposched.kube.leader_config import LeaderElection, parse_go_duration


@pytest.mark.parametrize("text, seconds", [("15s", 15), ("1m30s", 90), ("500ms", 0.5), ("1h", 3600), ("2.5s", 2.5)])
def test_go_durations(text, seconds):
    assert parse_go_duration(text, "f", "s") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "15 s", "s", 15, "1d"])
def test_bad_durations_name_the_field(text):
    with pytest.raises(InputError) as err:
        parse_go_duration(text, "leaderElection.leaseDuration", "cfg.yaml")
    assert "leaderElection.leaseDuration" in str(err.value) and "cfg.yaml" in str(err.value)


def test_the_block_overrides_the_defaults_and_the_pod_namespace_fills_in():
    assert LeaderElection.from_config(None, "x", namespace="toposched").resource_namespace == "toposched"
    got = LeaderElection.from_config({"leaderElection": {"leaderElect": True, "resourceLock": "leases",
                                                         "resourceName": "ts", "resourceNamespace": "ops",
                                                         "leaseDuration": "20s", "renewDeadline": "15s",
                                                         "retryPeriod": "3s"}}, "x", namespace="toposched")
    assert (got.resource_namespace, got.resource_name, got.lease_duration, got.renew_deadline, got.retry_period) == \
        ("ops", "ts", 20, 15, 3)


def test_other_locks_are_refused():
    with pytest.raises(InputError, match="resourceLock"):
        LeaderElection.from_config({"leaderElection": {"resourceLock": "endpoints"}}, "cfg.yaml")


def test_the_shipped_configmap_matches_its_rbac():
    docs = list(yaml.safe_load_all(Path(__file__).parents[2].joinpath("deploy/configmaps.yaml").read_text()))
    config_maps = [d for d in docs if d and d.get("kind") == "ConfigMap"]
    texts = [v for d in config_maps for k, v in (d.get("data") or {}).items() if "KubeSchedulerConfiguration" in v]
    assert texts, "no KubeSchedulerConfiguration in deploy/configmaps.yaml"
    election = LeaderElection.from_config(yaml.safe_load(texts[0]), "deploy/configmaps.yaml")
    assert (election.resource_namespace, election.resource_name) == ("toposched", "toposched-scheduler")
