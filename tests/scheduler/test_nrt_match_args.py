"""NodeResourceTopologyMatchArgs: decoding, defaults and validation as scheduler-plugins does them.

Defaults restate upstream's ``SetDefaults_NodeResourceTopologyMatchArgs`` (and its defaults_test
case "empty config NodeResourceTopologyMatchArgs"); validation restates
``TestValidateNodeResourceTopologyMatchArgs`` (a valid type passes, an unknown one is refused with
``scoringStrategy.type: Invalid value:``) and the ``preemptionMode`` check.
"""

from __future__ import annotations

import pytest
import yaml

from toposched.errors import InputError
from toposched.scheduler.nrt_match_args import (
    BALANCED_ALLOCATION,
    LEAST_ALLOCATED,
    LEAST_NUMA_NODES,
    MOST_ALLOCATED,
    NodeResourceTopologyCache,
    NodeResourceTopologyMatchArgs,
    ResourceSpec,
    ScoringStrategy,
)

DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


@pytest.mark.parametrize("given", [None, {}, {"apiVersion": "kubescheduler.config.k8s.io/v1",
                                                "kind": "NodeResourceTopologyMatchArgs"}])
def test_empty_args_take_upstreams_defaults(given):
    args = NodeResourceTopologyMatchArgs.from_dict(given)
    assert args == NodeResourceTopologyMatchArgs()
    assert args.scoring_strategy == ScoringStrategy(LEAST_ALLOCATED, DEFAULT_RESOURCES)
    assert args.cache == NodeResourceTopologyCache("All", "Autodetect", "Dedicated", "All")
    assert (args.cache_resync_period_seconds, args.discard_reserved_nodes, args.preemption_mode) == (0, False,
                                                                                                    "Disabled")


@pytest.mark.parametrize("strategy", [MOST_ALLOCATED, BALANCED_ALLOCATION, LEAST_ALLOCATED, LEAST_NUMA_NODES])
def test_every_strategy_type_is_valid(strategy):
    args = NodeResourceTopologyMatchArgs.from_dict({"scoringStrategy": {"type": strategy}})
    assert args.scoring_strategy == ScoringStrategy(strategy, DEFAULT_RESOURCES)


@pytest.mark.parametrize(
    ("strategy", "shown"),
    [({"type": "not existent"}, '"not existent"'), ({"type": "leastallocated"}, '"leastallocated"'),
     ({}, '""'), ({"resources": [{"name": "cpu", "weight": 2}]}, '""')],
    ids=["unknown type", "wrong case", "strategy without type", "resources without type"],
)
def test_invalid_strategy_type_is_refused(strategy, shown):
    with pytest.raises(InputError) as err:
        NodeResourceTopologyMatchArgs.from_dict({"scoringStrategy": strategy}, source="sched.yaml")
    assert err.value.field == "scoringStrategy.type"
    assert f"scoringStrategy.type: Invalid value: {shown}: invalid ScoringStrategyType" in str(err.value)
    assert str(err.value).startswith("sched.yaml: ")


def test_resource_weights_are_defaulted_like_upstream():
    args = NodeResourceTopologyMatchArgs.from_dict({"scoringStrategy": {"type": MOST_ALLOCATED, "resources": [
        {"name": "cpu", "weight": 0}, {"name": "memory", "weight": 3}, {"name": "vendor/nic"},
        {"name": "hugepages-1Gi", "weight": -2}]}})
    assert args.scoring_strategy.resources == (
        ResourceSpec("cpu", 1), ResourceSpec("memory", 3), ResourceSpec("vendor/nic", 1),
        ResourceSpec("hugepages-1Gi", -2))
    assert [args.weight(r) for r in ("cpu", "memory", "vendor/nic", "hugepages-1Gi", "unlisted")] == [1, 3, 1, 1, 1]


def test_an_empty_resource_list_means_cpu_and_memory():
    args = NodeResourceTopologyMatchArgs.from_dict({"scoringStrategy": {"type": LEAST_NUMA_NODES, "resources": []}})
    assert args.scoring_strategy.resources == DEFAULT_RESOURCES


def test_a_repeated_resource_takes_its_last_weight():
    args = NodeResourceTopologyMatchArgs.from_dict({"scoringStrategy": {"type": MOST_ALLOCATED, "resources": [
        {"name": "cpu", "weight": 5}, {"name": "cpu", "weight": 2}]}})
    assert args.weight("cpu") == 2


def test_full_plugin_config_from_yaml():
    text = """
    pluginConfig:
    - name: NodeResourceTopologyMatch
      args:
        scoringStrategy:
          type: BalancedAllocation
          resources:
          - name: cpu
            weight: 2
        cacheResyncPeriodSeconds: 5
        discardReservedNodes: true
        cache:
          foreignPodsDetect: OnlyExclusiveResources
          informerMode: Shared
        preemptionMode: Enabled
    """
    entry = yaml.safe_load(text)["pluginConfig"][0]
    args = NodeResourceTopologyMatchArgs.from_dict(entry)
    assert args == NodeResourceTopologyMatchArgs(
        ScoringStrategy(BALANCED_ALLOCATION, (ResourceSpec("cpu", 2),)),
        5,
        True,
        NodeResourceTopologyCache("OnlyExclusiveResources", "Autodetect", "Shared", "All"),
        "Enabled",
    )
    assert NodeResourceTopologyMatchArgs.from_dict(entry["args"]) == args


BAD_ARGS = [
    ("unknown top-level field", {"scoringStrategyy": {}}, "scoringStrategyy", "unknown field"),
    ("unknown strategy field", {"scoringStrategy": {"type": MOST_ALLOCATED, "weights": []}},
     "scoringStrategy.weights", "unknown field"),
    ("unknown resource field", {"scoringStrategy": {"type": MOST_ALLOCATED, "resources": [{"name": "cpu", "w": 1}]}},
     "scoringStrategy.resources[0].w", "unknown field"),
    ("weight as text", {"scoringStrategy": {"type": MOST_ALLOCATED, "resources": [{"name": "cpu", "weight": "2"}]}},
     "scoringStrategy.resources[0].weight", "expected an integer"),
    ("weight beyond int64", {"scoringStrategy": {"type": MOST_ALLOCATED, "resources": [
        {"name": "cpu", "weight": 2**63}]}}, "scoringStrategy.resources[0].weight", "does not fit"),
    ("resources not a list", {"scoringStrategy": {"type": MOST_ALLOCATED, "resources": {"cpu": 1}}},
     "scoringStrategy.resources", "expected a list"),
    ("resource name not text", {"scoringStrategy": {"type": MOST_ALLOCATED, "resources": [{"name": 5}]}},
     "scoringStrategy.resources[0].name", "expected a string"),
    ("strategy not an object", {"scoringStrategy": "MostAllocated"}, "scoringStrategy", "expected an object"),
    ("type not text", {"scoringStrategy": {"type": 3}}, "scoringStrategy.type", "expected a string"),
    ("resync period as text", {"cacheResyncPeriodSeconds": "5"}, "cacheResyncPeriodSeconds", "expected an integer"),
    ("resync period as bool", {"cacheResyncPeriodSeconds": True}, "cacheResyncPeriodSeconds", "expected an integer"),
    ("discard as text", {"discardReservedNodes": "yes"}, "discardReservedNodes", "true or false"),
    ("preemption mode", {"preemptionMode": "Sometimes"}, "preemptionMode",
     'Invalid value: "Sometimes": invalid PreemptionMode'),
    ("foreign pods mode", {"cache": {"foreignPodsDetect": "Some"}}, "cache.foreignPodsDetect",
     "invalid ForeignPodsDetectMode"),
    ("resync method", {"cache": {"resyncMethod": "Never"}}, "cache.resyncMethod", "invalid CacheResyncMethod"),
    ("informer mode", {"cache": {"informerMode": "shared"}}, "cache.informerMode", "invalid CacheInformerMode"),
    ("resync scope", {"cache": {"resyncScope": "Everything"}}, "cache.resyncScope", "invalid CacheResyncScope"),
    ("unknown cache field", {"cache": {"resyncPeriod": 5}}, "cache.resyncPeriod", "unknown field"),
    ("wrong apiVersion", {"apiVersion": "kubescheduler.config.k8s.io/v1beta1"}, "apiVersion", "is not"),
    ("wrong kind", {"kind": "NodeResourcesFitArgs"}, "kind", "is not"),
    ("args not an object", ["MostAllocated"], "args", "expected an object"),
    ("entry for another plugin", {"name": "NodeResourcesFit", "args": {}}, "name", "not NodeResourceTopologyMatch"),
    ("entry with extra keys", {"name": "NodeResourceTopologyMatch", "args": {}, "weight": 1}, "weight",
     "unknown field"),
]


@pytest.mark.parametrize(("given", "field", "message"), [c[1:] for c in BAD_ARGS], ids=[c[0] for c in BAD_ARGS])
def test_bad_args_raise_one_input_error_naming_the_field(given, field, message):
    with pytest.raises(InputError) as err:
        NodeResourceTopologyMatchArgs.from_dict(given, source="config.yaml")
    assert err.value.field == field
    assert message in err.value.message
    assert err.value.source == "config.yaml"


def test_errors_name_the_args_when_no_source_is_given():
    with pytest.raises(InputError) as err:
        NodeResourceTopologyMatchArgs.from_dict({"preemptionMode": "x"})
    assert err.value.source == "NodeResourceTopologyMatchArgs"


def test_nulls_mean_unset():
    args = NodeResourceTopologyMatchArgs.from_dict({
        "scoringStrategy": None, "cacheResyncPeriodSeconds": None, "discardReservedNodes": None, "cache": None,
        "preemptionMode": None})
    assert args == NodeResourceTopologyMatchArgs()


def test_negative_resync_period_is_accepted_and_kept():
    # Upstream does not validate it; any period <= 0 selects the passthrough cache.
    assert NodeResourceTopologyMatchArgs.from_dict({"cacheResyncPeriodSeconds": -3}).cache_resync_period_seconds == -3
