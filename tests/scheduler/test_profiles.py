"""Profiles read from a KubeSchedulerConfiguration v1, against kube-scheduler's own tables.

Upstream facts restated here (kubernetes/kubernetes):
- ``pkg/scheduler/apis/config/v1/default_plugins_test.go`` ``TestMergePlugins`` (merge_plugin_set),
- ``pkg/scheduler/apis/config/testing/defaults/defaults.go`` ``ExpandedPluginsV1`` (what an empty
  profile expands to, and so which points each default plugin implements),
- ``pkg/scheduler/framework/runtime/framework_test.go`` ``TestNewFrameworkMultiPointExpansion``,
  ``TestNewFrameworkErrors`` and ``TestInitFrameworkWithScorePlugins``,
- ``pkg/scheduler/apis/config/validation/validation_test.go`` (the rows about profiles),
- ``validation_pluginargs_test.go`` ``TestValidateFitArgs``, ``TestValidate{Least,Most}Allocated
  ScoringStrategy``, ``TestValidateRequestedToCapacityRatioScoringStrategy`` and
  ``TestValidateNodeResourcesBalancedAllocationArgs``.
Rows about the queue (queueSort, preEnqueue) are left out: toposched has no queue.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.errors import InputError
from toposched.scheduler.nrt_match_args import NodeResourceTopologyMatchArgs, ResourceSpec
from toposched.scheduler.nrt_match_args import ScoringStrategy as NRTScoringStrategy
from toposched.scheduler.plugin_args import (
    CPUOrchestrationArgs,
    FitScoringStrategy,
    GPUShareArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    ScarcityScoreArgs,
    UtilizationShapePoint,
)
from toposched.scheduler.profiles import (
    BUILTIN_PROFILES,
    EXTENSION_POINTS,
    PluginRef,
    ProfileConfig,
    SchedulerConfig,
    builtin_profile,
    load_scheduler_config,
    merge_plugin_set,
)

HEADER = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}

# The registry the framework will pass: our plugins and the points each implements. Upstream's
# plugins of the same name implement the same points (ExpandedPluginsV1).
TOPOSCHED_REGISTRY = {
    "NodeUnschedulable": {"filter"},
    "TaintToleration": {"filter", "preScore", "score"},
    "NodeAffinity": {"preFilter", "filter", "preScore", "score"},
    "NodeResourcesFit": {"preFilter", "filter", "preScore", "score"},
    "NodeResourcesBalancedAllocation": {"preScore", "score"},
    "NodeResourceTopologyMatch": {"filter", "score"},
    "NUMAAlignment": {"preFilter", "filter", "reserve"},
    "CPUOrchestration": {"filter", "reserve", "preBind"},
    "ZoneCapacity": {"filter"},
    "DeviceLocality": {"preFilter", "filter", "score"},
    "GPUShare": {"preFilter", "filter", "score", "reserve"},
    "NUMAScore": {"preScore", "score"},
    "ScarcityScore": {"postFilter", "score", "reserve"},
    "DefaultBinder": {"bind"},
}

# ExpandedPluginsV1: the expansion of upstream's default multiPoint set, point by point.
UPSTREAM_EXPANDED = {
    "preFilter": [
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
    ],
    "filter": [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
    ],
    "postFilter": ["DefaultPreemption"],
    "preScore": [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
    ],
    "score": [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("VolumeBinding", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
    ],
    "reserve": ["VolumeBinding"],
    "permit": [],
    "preBind": ["VolumeBinding"],
    "bind": ["DefaultBinder"],
    "postBind": [],
}


def _registry_from_expansion(expanded):
    registry: dict[str, set[str]] = {}
    for point, plugins in expanded.items():
        for plugin in plugins:
            name = plugin[0] if isinstance(plugin, tuple) else plugin
            registry.setdefault(name, set()).add(point)
    return registry


UPSTREAM_REGISTRY = _registry_from_expansion(UPSTREAM_EXPANDED)


def load(profiles=None, registry=TOPOSCHED_REGISTRY, **top):
    doc = dict(HEADER, **top)
    if profiles is not None:
        doc["profiles"] = profiles
    return load_scheduler_config(yaml.safe_dump(doc, sort_keys=False), known_plugins=registry, source="sched.yaml")


def load_error(profiles=None, registry=TOPOSCHED_REGISTRY, **top) -> InputError:
    with pytest.raises(InputError) as err:
        load(profiles, registry, **top)
    assert err.value.source == "sched.yaml"
    assert str(err.value).startswith("sched.yaml: ")
    return err.value


def as_table(profile: ProfileConfig) -> dict:
    """The profile as {point: [name, ...]} with (name, weight) at score, empty points left out."""
    table = {}
    for point in EXTENSION_POINTS:
        refs = profile.plugins[point]
        if refs:
            table[point] = [(r.name, r.weight) if point == "score" else r.name for r in refs]
    return table


def plugins_named(*names):
    return [{"name": n} for n in names]


# --------------------------------------------------------------------------------------------
# Upstream defaults


def test_an_empty_profile_expands_to_upstreams_default_set():
    profile = load(registry=UPSTREAM_REGISTRY).profiles[0]
    assert profile.scheduler_name == "default-scheduler"
    expected = {point: plugins for point, plugins in UPSTREAM_EXPANDED.items() if plugins}
    assert as_table(profile) == expected
    assert profile.percentage_of_nodes_to_score == 0


def test_upstream_defaults_we_do_not_implement_are_dropped():
    profile = load([{}]).profiles[0]
    assert as_table(profile) == {
        "preFilter": ["NodeAffinity", "NodeResourcesFit"],
        "filter": ["NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit"],
        "preScore": ["TaintToleration", "NodeAffinity", "NodeResourcesFit", "NodeResourcesBalancedAllocation"],
        "score": [
            ("TaintToleration", 3),
            ("NodeAffinity", 2),
            ("NodeResourcesFit", 1),
            ("NodeResourcesBalancedAllocation", 1),
        ],
        "bind": ["DefaultBinder"],
    }
    # Upstream appends default args for its in-tree plugins; so do our parsers.
    assert profile.args("NodeResourcesFit") == NodeResourcesFitArgs()
    assert profile.args("NodeResourcesBalancedAllocation") == NodeResourcesBalancedAllocationArgs()
    assert profile.args("TaintToleration") is None


def test_scheduler_plugins_documented_example_loads_as_upstream_would_run_it():
    # pkg/noderesourcetopology/README.md's config, written as v1: it relies on the defaults.
    text = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: "/etc/kubernetes/scheduler.conf"
profiles:
- schedulerName: topo-aware-scheduler
  plugins:
    filter:
      enabled:
      - name: NodeResourceTopologyMatch
    score:
      enabled:
      - name: NodeResourceTopologyMatch
  pluginConfig:
  - name: NodeResourceTopologyMatch
    args:
      scoringStrategy:
        type: "LeastAllocated"
  - name: PodTopologySpread
    args:
      defaultingType: List
"""
    profile = load_scheduler_config(text, known_plugins=TOPOSCHED_REGISTRY).profile("topo-aware-scheduler")
    assert profile.enabled("filter") == (
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "NodeResourceTopologyMatch",
    )
    assert profile.plugins["score"] == (
        PluginRef("TaintToleration", 3),
        PluginRef("NodeAffinity", 2),
        PluginRef("NodeResourcesFit", 1),
        PluginRef("NodeResourcesBalancedAllocation", 1),
        PluginRef("NodeResourceTopologyMatch", 1),
    )
    assert profile.args("NodeResourceTopologyMatch") == NodeResourceTopologyMatchArgs()
    assert profile.args("PodTopologySpread") is None  # args of an upstream default we do not have


def test_a_default_reconfigured_in_multipoint_keeps_its_place_with_the_new_weight():
    profile = load([{"plugins": {"multiPoint": {"enabled": [{"name": "NodeResourcesFit", "weight": 7}]}}}]).profiles[0]
    assert [(r.name, r.weight) for r in profile.plugins["score"]] == [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 7),
        ("NodeResourcesBalancedAllocation", 1),
    ]


def test_multipoint_disabled_default_is_left_out_everywhere():
    profile = load([{"plugins": {"multiPoint": {"disabled": [{"name": "TaintToleration"}]}}}]).profiles[0]
    assert all("TaintToleration" not in profile.enabled(p) for p in EXTENSION_POINTS)
    assert "NodeAffinity" in profile.enabled("filter")


# --------------------------------------------------------------------------------------------
# mergePluginSet: TestMergePlugins


def refs(*items):
    return tuple(PluginRef(i) if isinstance(i, str) else PluginRef(*i) for i in items)


MERGE_CASES = [
    (
        "AppendCustomPlugin",
        ["DefaultPlugin1", "DefaultPlugin2"],
        ["CustomPlugin"],
        [],
        ["DefaultPlugin1", "DefaultPlugin2", "CustomPlugin"],
    ),
    (
        "InsertAfterDefaultPlugins2",
        ["DefaultPlugin1", "DefaultPlugin2"],
        ["CustomPlugin", "DefaultPlugin2"],
        ["DefaultPlugin2"],
        ["DefaultPlugin1", "CustomPlugin", "DefaultPlugin2"],
    ),
    (
        "InsertBeforeAllPlugins",
        ["DefaultPlugin1", "DefaultPlugin2"],
        ["CustomPlugin", "DefaultPlugin1", "DefaultPlugin2"],
        ["*"],
        ["CustomPlugin", "DefaultPlugin1", "DefaultPlugin2"],
    ),
    (
        "ReorderDefaultPlugins",
        ["DefaultPlugin1", "DefaultPlugin2"],
        ["DefaultPlugin2", "DefaultPlugin1"],
        ["*"],
        ["DefaultPlugin2", "DefaultPlugin1"],
    ),
    ("ApplyNilCustomPlugin", ["DefaultPlugin1", "DefaultPlugin2"], [], [], ["DefaultPlugin1", "DefaultPlugin2"]),
    (
        "CustomPluginOverrideDefaultPlugin",
        ["Plugin1", "Plugin2", "Plugin3"],
        [("Plugin1", 2), ("Plugin3", 3)],
        [],
        [("Plugin1", 2), "Plugin2", ("Plugin3", 3)],
    ),
    (
        "OrderPreserveAfterOverride",
        ["Plugin1", "Plugin2", "Plugin3"],
        [("Plugin2", 2), ("Plugin1", 1)],
        [],
        [("Plugin1", 1), ("Plugin2", 2), "Plugin3"],
    ),
    (
        "RepeatedCustomPlugin",
        ["Plugin1", "Plugin2", "Plugin3"],
        ["Plugin1", ("Plugin2", 2), "Plugin3", ("Plugin2", 4)],
        [],
        ["Plugin1", ("Plugin2", 4), "Plugin3", ("Plugin2", 2)],
    ),
    (
        "Append custom MultiPoint plugin",
        ["DefaultPlugin1", "DefaultPlugin2"],
        ["CustomPlugin"],
        [],
        ["DefaultPlugin1", "DefaultPlugin2", "CustomPlugin"],
    ),
    (
        "Append disabled Multipoint plugins",
        ["DefaultPlugin1", "DefaultPlugin2"],
        ["CustomPlugin", "CustomPlugin2"],
        ["DefaultPlugin2"],
        ["DefaultPlugin1", "CustomPlugin", "CustomPlugin2"],
    ),
    (
        "override default MultiPoint plugins with custom value",
        ["DefaultPlugin"],
        [("DefaultPlugin", 5)],
        [],
        [("DefaultPlugin", 5)],
    ),
    (
        "disabled MultiPoint plugin in default set",
        ["DefaultPlugin"],
        ["CustomPlugin"],
        ["DefaultPlugin2"],
        ["DefaultPlugin", "CustomPlugin"],
    ),
    ("multipoint with only disabled gets merged", ["DefaultPlugin"], [], ["DefaultPlugin"], []),
]


@pytest.mark.parametrize(
    ("defaults", "enabled", "disabled", "expected"), [c[1:] for c in MERGE_CASES], ids=[c[0] for c in MERGE_CASES]
)
def test_merge_plugin_set_matches_upstream(defaults, enabled, disabled, expected):
    assert merge_plugin_set(refs(*defaults), refs(*enabled), disabled) == refs(*expected)


# --------------------------------------------------------------------------------------------
# expandMultiPointPlugins: TestNewFrameworkMultiPointExpansion

ALL_POINTS = set(EXTENSION_POINTS)
FRAMEWORK_REGISTRY = {
    "testPlugin": ALL_POINTS,
    "scorePlugin1": {"preScore", "score"},
    "scorePlugin2": {"score"},
    "scoreWithNormalizePlugin1": {"score"},
    "bindPlugin": {"bind"},
}
EVERY_POINT_TEST_PLUGIN = {p: ["testPlugin"] for p in EXTENSION_POINTS}


def with_points(base, **changes):
    table = dict(base)
    table.update(changes)
    return {p: v for p, v in table.items() if v}


EXPANSION_CASES = [
    (
        "plugin expansion",
        {"multiPoint": {"enabled": [{"name": "testPlugin", "weight": 5}]}},
        with_points(EVERY_POINT_TEST_PLUGIN, score=[("testPlugin", 5)]),
    ),
    (
        "disable MultiPoint plugin at some extension points",
        {
            "multiPoint": {"enabled": plugins_named("testPlugin")},
            "preScore": {"disabled": plugins_named("testPlugin")},
            "score": {"disabled": plugins_named("testPlugin")},
        },
        with_points(EVERY_POINT_TEST_PLUGIN, preScore=[], score=[]),
    ),
    (
        "Multiple MultiPoint plugins",
        {"multiPoint": {"enabled": plugins_named("testPlugin", "scorePlugin1")}},
        with_points(
            EVERY_POINT_TEST_PLUGIN,
            preScore=["testPlugin", "scorePlugin1"],
            score=[("testPlugin", 1), ("scorePlugin1", 1)],
        ),
    ),
    (
        "disable MultiPoint extension",
        {
            "multiPoint": {"enabled": plugins_named("testPlugin", "scorePlugin1")},
            "preScore": {"disabled": plugins_named("*")},
        },
        with_points(EVERY_POINT_TEST_PLUGIN, preScore=[], score=[("testPlugin", 1), ("scorePlugin1", 1)]),
    ),
    (
        "Reorder MultiPoint plugins (specified extension takes precedence)",
        {
            "multiPoint": {"enabled": plugins_named("scoreWithNormalizePlugin1", "testPlugin", "scorePlugin1")},
            "score": {"enabled": plugins_named("scorePlugin1", "testPlugin")},
        },
        with_points(
            EVERY_POINT_TEST_PLUGIN,
            preScore=["testPlugin", "scorePlugin1"],
            score=[("scorePlugin1", 1), ("testPlugin", 1), ("scoreWithNormalizePlugin1", 1)],
        ),
    ),
    (
        "Reorder MultiPoint plugins (specified extension only takes precedence when it exists in MultiPoint)",
        {
            "multiPoint": {"enabled": plugins_named("testPlugin", "scorePlugin1")},
            "score": {"enabled": plugins_named("scoreWithNormalizePlugin1", "scorePlugin1", "testPlugin")},
        },
        with_points(
            EVERY_POINT_TEST_PLUGIN,
            preScore=["testPlugin", "scorePlugin1"],
            score=[("scorePlugin1", 1), ("testPlugin", 1), ("scoreWithNormalizePlugin1", 1)],
        ),
    ),
    (
        "Override MultiPoint plugins weights",
        {
            "multiPoint": {"enabled": plugins_named("testPlugin", "scorePlugin1")},
            "score": {"enabled": [{"name": "scorePlugin1", "weight": 5}, {"name": "testPlugin", "weight": 3}]},
        },
        with_points(
            EVERY_POINT_TEST_PLUGIN,
            preScore=["testPlugin", "scorePlugin1"],
            score=[("scorePlugin1", 5), ("testPlugin", 3)],
        ),
    ),
    (
        "disable and enable MultiPoint plugins with '*'",
        {"multiPoint": {"enabled": plugins_named("bindPlugin", "scorePlugin1"), "disabled": plugins_named("*")}},
        {"preScore": ["scorePlugin1"], "score": [("scorePlugin1", 1)], "bind": ["bindPlugin"]},
    ),
    (
        "disable and enable MultiPoint plugin by name",
        {
            "multiPoint": {
                "enabled": plugins_named("bindPlugin", "scorePlugin1"),
                "disabled": plugins_named("scorePlugin1"),
            }
        },
        {"preScore": ["scorePlugin1"], "score": [("scorePlugin1", 1)], "bind": ["bindPlugin"]},
    ),
    (
        "Override MultiPoint plugins weights and avoid a plugin being loaded multiple times",
        {
            "multiPoint": {"enabled": plugins_named("testPlugin", "scorePlugin1")},
            "score": {
                "enabled": [
                    {"name": "scorePlugin1", "weight": 5},
                    {"name": "scorePlugin2", "weight": 5},
                    {"name": "testPlugin", "weight": 3},
                ]
            },
        },
        with_points(
            EVERY_POINT_TEST_PLUGIN,
            preScore=["testPlugin", "scorePlugin1"],
            score=[("scorePlugin1", 5), ("testPlugin", 3), ("scorePlugin2", 5)],
        ),
    ),
]


@pytest.mark.parametrize(("plugins", "expected"), [c[1:] for c in EXPANSION_CASES], ids=[c[0] for c in EXPANSION_CASES])
def test_multipoint_expansion_matches_upstream(plugins, expected):
    profile = load([{"schedulerName": "p", "plugins": plugins}], registry=FRAMEWORK_REGISTRY).profiles[0]
    assert as_table(profile) == expected


def test_a_point_plugin_disabled_there_is_not_an_override_and_goes_last():
    # expandMultiPointPlugins checks "disabled" before "already enabled at this point": the plugin
    # keeps its own entry but loses its place in front of the multiPoint plugins.
    plugins = {
        "multiPoint": {"enabled": plugins_named("scorePlugin1", "scoreWithNormalizePlugin1", "bindPlugin")},
        "score": {"enabled": plugins_named("scorePlugin1"), "disabled": plugins_named("scorePlugin1")},
    }
    profile = load([{"plugins": plugins}], registry=FRAMEWORK_REGISTRY).profiles[0]
    assert profile.enabled("score") == ("scoreWithNormalizePlugin1", "scorePlugin1")


def test_a_plugin_twice_in_multipoint_is_refused():
    # "Expect 'already registered' error"
    err = load_error(
        [{"plugins": {"multiPoint": {"enabled": plugins_named("testPlugin", "testPlugin")}}}],
        registry=FRAMEWORK_REGISTRY,
    )
    assert err.field == "profiles[0].plugins.multiPoint.enabled[1].name"
    assert "twice" in err.message


def test_a_plugin_twice_at_one_point_is_refused():
    # TestNewFrameworkErrors "duplicate plugin name"
    err = load_error(
        [
            {
                "plugins": {
                    "bind": {"enabled": plugins_named("bindPlugin")},
                    "preFilter": {"enabled": plugins_named("testPlugin", "testPlugin")},
                }
            }
        ],
        registry=FRAMEWORK_REGISTRY,
    )
    assert err.field == "profiles[0].plugins.preFilter.enabled[1].name"


def test_repeated_plugin_config_is_refused():
    # TestNewFrameworkErrors "duplicate plugin config", validation_test "duplicated-plugin-config"
    err = load_error(
        [
            {
                "plugins": {"multiPoint": {"enabled": plugins_named("testPlugin")}},
                "pluginConfig": [{"name": "testPlugin"}, {"name": "testPlugin"}],
            }
        ],
        registry=FRAMEWORK_REGISTRY,
    )
    assert err.field == "profiles[0].pluginConfig[1]"
    assert "Duplicate value" in err.message


@pytest.mark.parametrize(
    ("score", "field"),
    [
        (["notExist"], "profiles[0].plugins.score.enabled[0].name"),
        (["bindPlugin"], "profiles[0].plugins.score.enabled[0].name"),
        ([], None),
        (["scorePlugin1"], None),
        (["scoreWithNormalizePlugin1"], None),
    ],
    ids=[
        "score plugin not in registry",
        "plugin not implementing score",
        "empty score list",
        "plugin implementing score",
        "plugin implementing score and normalize",
    ],
)
def test_score_plugins_must_exist_and_implement_score(score, field):
    profiles = [
        {"plugins": {"bind": {"enabled": plugins_named("bindPlugin")}, "score": {"enabled": plugins_named(*score)}}}
    ]
    if field is None:
        profile = load(profiles, registry=FRAMEWORK_REGISTRY).profiles[0]
        assert profile.enabled("score") == tuple(score)
        assert all(profile.score_weight(name) == 1 for name in score)
    else:
        assert load_error(profiles, registry=FRAMEWORK_REGISTRY).field == field


# --------------------------------------------------------------------------------------------
# Our rules for names, points and weights


def test_an_explicitly_enabled_unknown_plugin_is_an_error_naming_the_field():
    err = load_error([{"plugins": {"score": {"enabled": [{"name": "NUMAScore"}, {"name": "NUMAScor"}]}}}])
    assert err.field == "profiles[0].plugins.score.enabled[1].name"
    assert 'unknown plugin "NUMAScor"' in err.message
    assert "NUMAScore" in err.message  # the known names are listed


@pytest.mark.parametrize("plugin", ["PodTopologySpread", "ImageLocality"])
def test_an_upstream_default_we_lack_cannot_be_enabled_explicitly(plugin):
    err = load_error([{"plugins": {"score": {"enabled": [{"name": plugin}]}}}])
    assert err.field == "profiles[0].plugins.score.enabled[0].name"
    assert "default plugins that toposched does not implement" in err.message


@pytest.mark.parametrize("plugin", ["AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"])
def test_plugins_removed_in_v1_are_refused(plugin):
    # validation_test's "bad-removed-plugins" rows, for v1's removed list
    err = load_error([{"plugins": {"filter": {"enabled": [{"name": plugin}]}}}])
    assert f'"{plugin}" was removed' in err.message
    err = load_error([{"pluginConfig": [{"name": plugin, "args": {}}]}])
    assert err.field == "profiles[0].pluginConfig[0].name"


def test_a_plugin_at_a_point_it_does_not_implement_is_refused():
    err = load_error([{"plugins": {"reserve": {"enabled": [{"name": "ZoneCapacity"}]}}}])
    assert err.field == "profiles[0].plugins.reserve.enabled[0].name"
    assert "does not implement reserve (it implements: filter)" in err.message


def test_disabling_an_unknown_name_is_refused_but_upstream_defaults_may_be_disabled():
    err = load_error([{"plugins": {"filter": {"disabled": [{"name": "TaintToleratoin"}]}}}])
    assert err.field == "profiles[0].plugins.filter.disabled[0].name"
    profile = load([{"plugins": {"multiPoint": {"disabled": plugins_named("ImageLocality", "PodTopologySpread")}}}])
    assert profile.profiles[0].enabled("bind") == ("DefaultBinder",)


@pytest.mark.parametrize(
    ("weight", "problem"),
    [
        (0, "a weight must be in [1, 2147483647]"),
        (-1, "a weight must be in [1, 2147483647]"),
        (2**31, "does not fit"),
        (True, "expected an integer"),
        ("5", "expected an integer"),
        (2.5, "expected an integer"),
    ],
)
def test_bad_weights_are_refused_with_the_field_path(weight, problem):
    err = load_error(
        [
            {
                "plugins": {
                    "score": {
                        "enabled": [{"name": "NUMAScore", "weight": 2}, {"name": "NodeResourcesFit", "weight": weight}]
                    }
                }
            }
        ]
    )
    assert err.field == "profiles[0].plugins.score.enabled[1].weight"
    assert problem in err.message


def test_weights_above_100_are_accepted_as_upstream_does():
    # kube-scheduler caps plugin weights only by their int32 type (MaxWeight belonged to the
    # removed Policy API; the (0, 100] range is for NodeResourcesFit's resource weights).
    profile = load([{"plugins": {"score": {"enabled": [{"name": "NUMAScore", "weight": 1000}]}}}]).profiles[0]
    assert profile.score_weight("NUMAScore") == 1000
    assert (
        load([{"plugins": {"score": {"enabled": [{"name": "NUMAScore", "weight": 2**31 - 1}]}}}])
        .profiles[0]
        .score_weight("NUMAScore")
        == 2**31 - 1
    )


def test_multipoint_weight_applies_at_score_and_a_score_entry_overrides_it():
    base = {
        "multiPoint": {
            "disabled": plugins_named("*"),
            "enabled": [{"name": "NUMAScore", "weight": 5}, {"name": "DefaultBinder"}],
        }
    }
    assert load([{"plugins": base}]).profiles[0].score_weight("NUMAScore") == 5
    # Upstream's getScoreWeights reads score's own entries first: an entry without a weight means 1.
    overridden = dict(base, score={"enabled": [{"name": "NUMAScore"}]})
    assert load([{"plugins": overridden}]).profiles[0].score_weight("NUMAScore") == 1
    # The PreScore half still comes through multiPoint.
    assert load([{"plugins": overridden}]).profiles[0].enabled("preScore") == ("NUMAScore",)


def test_disabled_star_at_score_leaves_only_scores_own_plugins():
    profile = load(
        [{"plugins": {"score": {"disabled": plugins_named("*"), "enabled": [{"name": "NUMAScore", "weight": 4}]}}}]
    ).profiles[0]
    assert profile.plugins["score"] == (PluginRef("NUMAScore", 4),)
    assert profile.enabled("filter") == ("NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit")
    with pytest.raises(KeyError):
        profile.score_weight("TaintToleration")


def test_a_profile_without_a_bind_plugin_is_refused():
    err = load_error([{"plugins": {"multiPoint": {"disabled": plugins_named("DefaultBinder")}}}])
    assert err.field == "profiles[0].plugins.bind"


def test_queue_points_are_read_and_ignored():
    profile = load(
        [
            {
                "plugins": {
                    "queueSort": {"enabled": plugins_named("PrioritySort")},
                    "preEnqueue": {"enabled": plugins_named("SchedulingGates")},
                }
            }
        ]
    ).profiles[0]
    assert set(profile.plugins) == set(EXTENSION_POINTS)
    err = load_error([{"plugins": {"queueSort": {"enabled": [{"weight": 1}]}}}])
    assert err.field == "profiles[0].plugins.queueSort.enabled[0].name"


def test_a_registry_naming_an_unknown_point_is_a_programming_error():
    with pytest.raises(ValueError, match="normalizeScore"):
        load_scheduler_config(yaml.safe_dump(HEADER), known_plugins={"X": {"normalizeScore"}})


# --------------------------------------------------------------------------------------------
# Profiles, names and percentages (validation_test rows)


def test_several_profiles_need_unique_names():
    two = [{"schedulerName": "me", "plugins": {"score": {"disabled": plugins_named("*")}}}, {"schedulerName": "other"}]
    config = load(two)
    assert config.scheduler_names == ("me", "other")
    assert config.profile("me").plugins["score"] == ()
    # "scheduler-name-not-set"
    assert load_error([two[0], {}]).field == "profiles[1].schedulerName"
    assert load_error([two[0], {"schedulerName": ""}]).field == "profiles[1].schedulerName"
    # "repeated-scheduler-name"
    err = load_error([{"schedulerName": "other"}, {"schedulerName": "other"}])
    assert err.field == "profiles[1].schedulerName"
    assert 'Duplicate value: "other" (also profiles[0])' in err.message


def test_a_lone_profile_is_named_default_scheduler():
    assert load([{}]).scheduler_names == ("default-scheduler",)
    assert load([]).scheduler_names == ("default-scheduler",)


@pytest.mark.parametrize(
    ("top", "profile", "expected"),
    [
        (None, None, 0),
        (35, None, 35),
        (35, 100, 100),
        (None, 0, 0),
        (50, 0, 0),
    ],
)
def test_percentage_of_nodes_to_score_profile_overrides_global(top, profile, expected):
    raw = {} if profile is None else {"percentageOfNodesToScore": profile}
    extra = {} if top is None else {"percentageOfNodesToScore": top}
    assert load([raw], **extra).profiles[0].percentage_of_nodes_to_score == expected


@pytest.mark.parametrize("value", [101, -1])
def test_percentage_of_nodes_to_score_out_of_range_is_refused(value):
    # "bad-percentage-of-nodes-to-score"
    assert load_error(percentageOfNodesToScore=value).field == "percentageOfNodesToScore"
    assert load_error([{"percentageOfNodesToScore": value}]).field == "profiles[0].percentageOfNodesToScore"


def test_unknown_profile_lookup_names_the_profiles():
    config = load([{"schedulerName": "a"}, {"schedulerName": "b"}])
    with pytest.raises(InputError, match='no profile has schedulerName "c" \\(profiles: a, b\\)'):
        config.profile("c")


def test_the_fields_we_do_not_use_are_accepted():
    config = load(
        [{"schedulerName": "x"}],
        parallelism=8,
        leaderElection={"leaderElect": False},
        clientConnection={"kubeconfig": "/k"},
        extenders=[{"urlPrefix": "http://e"}],
        podInitialBackoffSeconds=1,
        podMaxBackoffSeconds=10,
        enableProfiling=True,
    )
    assert isinstance(config, SchedulerConfig)


# --------------------------------------------------------------------------------------------
# pluginConfig and the args parser hook


def test_args_parsers_plug_in_and_their_errors_get_the_full_path():
    seen = []

    def numa_score_args(args):
        seen.append(args)
        if args.get("mode") not in (None, "pack", "spread"):
            raise InputError("mode must be pack or spread", field="mode")
        return ("parsed", args.get("mode", "pack"))

    profiles = [
        {
            "plugins": {"score": {"enabled": [{"name": "NUMAScore"}]}},
            "pluginConfig": [{"name": "NUMAScore", "args": {"mode": "spread"}}],
        }
    ]
    doc = yaml.safe_dump(dict(HEADER, profiles=profiles))
    profile = load_scheduler_config(
        doc, known_plugins=TOPOSCHED_REGISTRY, args_parsers={"NUMAScore": numa_score_args}
    ).profiles[0]
    assert profile.args("NUMAScore") == ("parsed", "spread")
    # The defaults' parsers stay in force for the others.
    assert profile.args("NodeResourcesFit") == NodeResourcesFitArgs()
    profiles[0]["pluginConfig"][0]["args"]["mode"] = "random"
    with pytest.raises(InputError) as err:
        load_scheduler_config(
            yaml.safe_dump(dict(HEADER, profiles=profiles)),
            known_plugins=TOPOSCHED_REGISTRY,
            args_parsers={"NUMAScore": numa_score_args},
            source="cfg.yaml",
        )
    assert err.value.field == "profiles[0].pluginConfig[0].args.mode"
    assert str(err.value) == "cfg.yaml: profiles[0].pluginConfig[0].args.mode: mode must be pack or spread"


def test_nrt_args_errors_carry_the_file_and_path():
    err = load_error(
        [
            {
                "pluginConfig": [
                    {"name": "NodeResourcesFit"},
                    {"name": "NodeResourceTopologyMatch", "args": {"scoringStrategy": {"type": "Bogus"}}},
                ]
            }
        ]
    )
    assert err.field == "profiles[0].pluginConfig[1].args.scoringStrategy.type"


def test_args_of_a_plugin_without_parser_are_kept_read_only():
    profile = load(
        [
            {
                "plugins": {"multiPoint": {"enabled": plugins_named("ZoneCapacity")}},
                "pluginConfig": [{"name": "ZoneCapacity", "args": {"attribute": "x", "list": [1]}}],
            }
        ]
    ).profiles[0]
    args = profile.args("ZoneCapacity")
    assert args == {"attribute": "x", "list": [1]}
    with pytest.raises(TypeError):
        args["attribute"] = "y"


def test_args_of_a_plugin_not_enabled_are_validated_but_not_kept():
    profile = load(
        [
            {
                "pluginConfig": [
                    {"name": "NodeResourceTopologyMatch", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
                ]
            }
        ]
    ).profiles[0]
    assert profile.args("NodeResourceTopologyMatch") is None
    assert (
        load_error([{"pluginConfig": [{"name": "NodeResourceTopologyMatch", "args": {"x": 1}}]}]).field
        == "profiles[0].pluginConfig[0].args.x"
    )


def test_plugin_config_for_an_unknown_plugin_is_refused():
    err = load_error([{"pluginConfig": [{"name": "NodeResourceTopologyMach", "args": {}}]}])
    assert err.field == "profiles[0].pluginConfig[0].name"


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"args": {}}, "profiles[0].pluginConfig[0].name"),
        ({"name": "NodeResourcesFit", "args": [1]}, "profiles[0].pluginConfig[0].args"),
        ({"name": "NodeResourcesFit", "argz": {}}, "profiles[0].pluginConfig[0].argz"),
    ],
)
def test_malformed_plugin_config_entries(entry, field):
    assert load_error([{"pluginConfig": [entry]}]).field == field


def test_node_resources_fit_args_from_the_file():
    profile = load(
        [
            {
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "apiVersion": "kubescheduler.config.k8s.io/v1",
                            "kind": "NodeResourcesFitArgs",
                            "ignoredResources": ["example.com/foo"],
                            "ignoredResourceGroups": ["example.org"],
                            "scoringStrategy": {
                                "type": "RequestedToCapacityRatio",
                                "resources": [{"name": "cpu", "weight": 0}, {"name": "nvidia.com/gpu", "weight": 3}],
                                "requestedToCapacityRatio": {
                                    "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
                                },
                            },
                        },
                    }
                ]
            }
        ]
    ).profiles[0]
    assert profile.args("NodeResourcesFit") == NodeResourcesFitArgs(
        ("example.com/foo",),
        ("example.org",),
        FitScoringStrategy(
            "RequestedToCapacityRatio",
            (ResourceSpec("cpu", 1), ResourceSpec("nvidia.com/gpu", 3)),
            (UtilizationShapePoint(0, 0), UtilizationShapePoint(100, 10)),
        ),
    )


# --------------------------------------------------------------------------------------------
# NodeResourcesFitArgs (TestValidateFitArgs and the scoring strategy tables)


def test_fit_args_defaults_are_upstreams():
    expected = NodeResourcesFitArgs(
        (), (), FitScoringStrategy("LeastAllocated", (ResourceSpec("cpu", 1), ResourceSpec("memory", 1)))
    )
    assert NodeResourcesFitArgs() == expected
    assert NodeResourcesFitArgs.from_dict(None) == expected
    assert NodeResourcesFitArgs.from_dict({}) == expected
    assert NodeResourcesFitArgs.from_dict(
        {"scoringStrategy": {"type": "MostAllocated", "resources": []}}
    ) == NodeResourcesFitArgs(scoring_strategy=FitScoringStrategy("MostAllocated"))


@pytest.mark.parametrize(
    ("kwargs", "expect", "field"),
    [
        (
            {"ignored_resources": ("longvalue" + "a" * 64,)},
            "name part must be no more than 63 characters",
            "ignoredResources[0]",
        ),
        ({"ignored_resources": ("example.com/",)}, "name part must be non-empty", "ignoredResources[0]"),
        (
            {"ignored_resources": ("example.com/aaa/bbb",)},
            "a qualified name must consist of alphanumeric characters",
            "ignoredResources[0]",
        ),
        ({"ignored_resources": ("example.com",)}, None, None),
        ({"ignored_resource_groups": ("example.com",)}, None, None),
        ({"ignored_resource_groups": ("example.com/",)}, "name part must be non-empty", "ignoredResourceGroups[0]"),
        (
            {"ignored_resource_groups": ("a" * 64,)},
            "name part must be no more than 63 characters",
            "ignoredResourceGroups[0]",
        ),
        (
            {"ignored_resource_groups": ("example.com/aa",)},
            "resource group name can't contain '/'",
            "ignoredResourceGroups[0]",
        ),
        ({"scoring_strategy": None}, "ScoringStrategy field is required", "scoringStrategy"),
    ],
    ids=[
        "IgnoredResources: too long value",
        "IgnoredResources: name is empty",
        "IgnoredResources: name has too many slash",
        "IgnoredResources: valid args",
        "IgnoredResourceGroups: valid args",
        "IgnoredResourceGroups: illegal args",
        "IgnoredResourceGroups: name is too long",
        "IgnoredResourceGroups: name cannot be contain slash",
        "ScoringStrategy: field is required",
    ],
)
def test_validate_fit_args(kwargs, expect, field):
    if expect is None:
        NodeResourcesFitArgs(**kwargs)
        return
    with pytest.raises(InputError) as err:
        NodeResourcesFitArgs(**kwargs)
    assert expect in err.value.message
    assert err.value.field == field


def weights(*pairs):
    return tuple(ResourceSpec(n, w) for n, w in pairs)


RESOURCE_WEIGHT_CASES = [
    ("default config", None, None),
    ("multi valid resources", weights(("cpu", 1), ("memory", 10)), None),
    ("weight less than min", weights(("cpu", 0)), "scoringStrategy.resources[0].weight"),
    ("weight greater than max", weights(("cpu", 101)), "scoringStrategy.resources[0].weight"),
    # Upstream reports both; we report the first.
    ("multi invalid resources", weights(("cpu", 0), ("memory", 101)), "scoringStrategy.resources[0].weight"),
]


@pytest.mark.parametrize("strategy_type", ["LeastAllocated", "MostAllocated"])
@pytest.mark.parametrize(
    ("resources", "field"), [c[1:] for c in RESOURCE_WEIGHT_CASES], ids=[c[0] for c in RESOURCE_WEIGHT_CASES]
)
def test_validate_allocated_scoring_strategies(strategy_type, resources, field):
    # Upstream's "default config" row has no resources at all: validation alone accepts that.
    strategy = FitScoringStrategy(strategy_type, resources if resources is not None else ())
    if field is None:
        assert NodeResourcesFitArgs(scoring_strategy=strategy).scoring_strategy == strategy
        return
    with pytest.raises(InputError) as err:
        NodeResourcesFitArgs(scoring_strategy=strategy)
    assert err.value.field == field
    assert "not in valid range (0, 100]" in err.value.message


def shape(*points):
    return tuple(UtilizationShapePoint(u, s) for u, s in points)


DEFAULT_SHAPE = shape((30, 3))
RTCR_CASES = [
    ("no shapes", (), None, "scoringStrategy.requestedToCapacityRatio.shape", "at least one point"),
    (
        "weight greater than max",
        DEFAULT_SHAPE,
        weights(("cpu", 101)),
        "scoringStrategy.resources[0].weight",
        "(0, 100]",
    ),
    ("weight less than min", DEFAULT_SHAPE, weights(("cpu", 0)), "scoringStrategy.resources[0].weight", "(0, 100]"),
    ("valid shapes", DEFAULT_SHAPE, None, None, None),
    (
        "utilization less than min",
        shape((-1, 3)),
        None,
        "scoringStrategy.requestedToCapacityRatio.shape[0].utilization",
        "[0, 100]",
    ),
    (
        "utilization greater than max",
        shape((101, 3)),
        None,
        "scoringStrategy.requestedToCapacityRatio.shape[0].utilization",
        "[0, 100]",
    ),
    (
        "duplicated utilization values",
        shape((10, 3), (10, 3)),
        None,
        "scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
        "sorted in increasing order",
    ),
    ("increasing utilization values", shape((10, 3), (20, 3), (30, 3)), None, None, None),
    (
        "non-increasing utilization values",
        shape((10, 3), (20, 3), (15, 3)),
        None,
        "scoringStrategy.requestedToCapacityRatio.shape[2].utilization",
        "sorted in increasing order",
    ),
    (
        "score less than min",
        shape((10, -1)),
        None,
        "scoringStrategy.requestedToCapacityRatio.shape[0].score",
        "[0, 10]",
    ),
    (
        "score greater than max",
        shape((10, 11)),
        None,
        "scoringStrategy.requestedToCapacityRatio.shape[0].score",
        "[0, 10]",
    ),
]


@pytest.mark.parametrize(
    ("points", "resources", "field", "problem"), [c[1:] for c in RTCR_CASES], ids=[c[0] for c in RTCR_CASES]
)
def test_validate_requested_to_capacity_ratio(points, resources, field, problem):
    strategy = FitScoringStrategy("RequestedToCapacityRatio", resources or (), points)
    if field is None:
        NodeResourcesFitArgs(scoring_strategy=strategy)
        return
    with pytest.raises(InputError) as err:
        NodeResourcesFitArgs(scoring_strategy=strategy)
    assert err.value.field == field
    assert problem in err.value.message


@pytest.mark.parametrize(
    ("raw", "field", "problem"),
    [
        (
            {"scoringStrategy": {"type": "Balanced"}},
            "scoringStrategy.type",
            (
                'Unsupported value: "Balanced": supported values: "LeastAllocated", "MostAllocated", '
                '"RequestedToCapacityRatio"'
            ),
        ),
        ({"scoringStrategy": {}}, "scoringStrategy.type", 'Unsupported value: ""'),
        (
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            "scoringStrategy.requestedToCapacityRatio",
            "must be specified",
        ),
        (
            {"scoringStrategy": {"type": "MostAllocated", "requestedToCapacityRatio": {"shape": []}}},
            "scoringStrategy.requestedToCapacityRatio",
            "must be nil",
        ),
        (
            {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": -1}]}},
            "scoringStrategy.resources[0].weight",
            "(0, 100]",
        ),
        (
            {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "wieght": 2}]}},
            "scoringStrategy.resources[0].wieght",
            "unknown field",
        ),
        ({"ignoredResources": "cpu"}, "ignoredResources", "expected a list"),
        ({"kind": "NodeResourcesFitArgz"}, "kind", "is not NodeResourcesFitArgs"),
        ({"apiVersion": "kubescheduler.config.k8s.io/v1beta3"}, "apiVersion", "is not kubescheduler.config.k8s.io/v1"),
    ],
)
def test_fit_args_decoding_errors(raw, field, problem):
    with pytest.raises(InputError) as err:
        NodeResourcesFitArgs.from_dict(raw, source="fit")
    assert err.value.field == field
    assert problem in err.value.message
    assert err.value.source == "fit"


# --------------------------------------------------------------------------------------------
# NodeResourcesBalancedAllocationArgs (TestValidateNodeResourcesBalancedAllocationArgs)


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        (weights(("cpu", 1), ("memory", 1)), None),
        (weights(("cpu", 2), ("memory", 1)), "resources[0].weight"),
        (weights(("cpu", 1), ("cpu", 1)), "resources[1].name"),
    ],
    ids=["valid config", "invalid config", "repeated resources"],
)
def test_validate_balanced_allocation_args(resources, field):
    if field is None:
        assert NodeResourcesBalancedAllocationArgs(resources).resources == resources
        return
    with pytest.raises(InputError) as err:
        NodeResourcesBalancedAllocationArgs(resources)
    assert err.value.field == field


def test_balanced_allocation_args_defaults():
    assert (
        NodeResourcesBalancedAllocationArgs.from_dict({"resources": [{"name": "cpu"}, {"name": "memory"}]})
        == NodeResourcesBalancedAllocationArgs()
    )
    assert NodeResourcesBalancedAllocationArgs.from_dict({}).resources == weights(("cpu", 1), ("memory", 1))


# --------------------------------------------------------------------------------------------
# The document itself


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("", None, "the document is empty"),
        ("- a\n- b\n", None, "expected a KubeSchedulerConfiguration object, got a list"),
        ("kind: KubeSchedulerConfiguration\n", "apiVersion", "Required value"),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
            "apiVersion",
            '"kubescheduler.config.k8s.io/v1beta3" is not supported',
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeletConfiguration\n",
            "kind",
            '"KubeletConfiguration" is not supported',
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofile: []\n",
            "profile",
            'unknown field "profile"',
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: {}\n",
            "profiles",
            "expected a list",
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugin: {}\n",
            "profiles[0].plugin",
            'unknown field "plugin"',
        ),
        (
            (
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n"
                "    scores: {}\n"
            ),
            "profiles[0].plugins.scores",
            'unknown field "scores"',
        ),
        (
            (
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n"
                "    score:\n      enabled: NUMAScore\n"
            ),
            "profiles[0].plugins.score.enabled",
            "expected a list",
        ),
        (
            (
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n"
                "    score:\n      enabled:\n      - name: 5\n"
            ),
            "profiles[0].plugins.score.enabled[0].name",
            "expected a string",
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: [a]\n",
            "profiles[0].schedulerName",
            "expected a string",
        ),
        ("apiVersion: v1\nkind: [unclosed\n", None, "invalid YAML"),
        (
            (
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n"
                "    score: {}\n    score: {}\n"
            ),
            None,
            "key 'score' repeats in a mapping (line 6)",
        ),
    ],
)
def test_bad_documents_raise_one_clear_error(text, field, problem):
    with pytest.raises(InputError) as err:
        load_scheduler_config(text, known_plugins=TOPOSCHED_REGISTRY, source="bad.yaml")
    assert err.value.field == field
    assert problem in err.value.message
    assert err.value.source == "bad.yaml"


def test_reads_a_file_by_path_and_names_it_in_errors(tmp_path: Path):
    good = tmp_path / "sched.yaml"
    good.write_text(yaml.safe_dump(dict(HEADER, profiles=[{"schedulerName": "x"}])))
    for named in (good, str(good)):
        config = load_scheduler_config(named, known_plugins=TOPOSCHED_REGISTRY)
        assert config.scheduler_names == ("x",)
        assert config.source == str(good)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(dict(HEADER, profiles=[{"plugins": {"score": {"enabled": [{"name": "Nope"}]}}}])))
    with pytest.raises(InputError) as err:
        load_scheduler_config(bad, known_plugins=TOPOSCHED_REGISTRY)
    assert str(err.value).startswith(f"{bad}: profiles[0].plugins.score.enabled[0].name: unknown plugin")
    with pytest.raises(InputError, match="cannot read the file"):
        load_scheduler_config(tmp_path / "missing.yaml", known_plugins=TOPOSCHED_REGISTRY)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="not UTF-8"):
        load_scheduler_config(binary, known_plugins=TOPOSCHED_REGISTRY)


def test_json_text_is_read_too():
    text = '{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}'
    assert load_scheduler_config(text, known_plugins=TOPOSCHED_REGISTRY).scheduler_names == ("default-scheduler",)


# --------------------------------------------------------------------------------------------
# Built-in profiles


def test_builtin_toposched_profile_has_exactly_its_plugins():
    profile = builtin_profile("toposched", known_plugins=TOPOSCHED_REGISTRY)
    assert profile.scheduler_name == "toposched"
    assert profile.percentage_of_nodes_to_score == 100
    assert as_table(profile) == {
        "preFilter": ["NodeAffinity", "NodeResourcesFit", "NUMAAlignment", "DeviceLocality", "GPUShare"],
        "filter": [
            "NodeUnschedulable",
            "TaintToleration",
            "NodeAffinity",
            "NodeResourcesFit",
            "NUMAAlignment",
            "CPUOrchestration",
            "ZoneCapacity",
            "DeviceLocality",
            "GPUShare",
        ],
        "postFilter": ["ScarcityScore"],
        "preScore": ["NodeResourcesFit", "NUMAScore"],
        "score": [("NUMAScore", 5), ("DeviceLocality", 3), ("GPUShare", 3), ("ScarcityScore", 2), ("NodeResourcesFit", 1)],
        "reserve": ["NUMAAlignment", "CPUOrchestration", "GPUShare", "ScarcityScore"],
        "preBind": ["CPUOrchestration"],
        "bind": ["DefaultBinder"],
    }
    assert profile.args("NodeResourcesFit") == NodeResourcesFitArgs(
        scoring_strategy=FitScoringStrategy("MostAllocated", weights(("cpu", 1), ("memory", 1)))
    )
    # The plugins with typed args get them defaulted, as upstream appends default args.
    assert set(profile.plugin_args) == {"NodeResourcesFit", "CPUOrchestration", "GPUShare", "ScarcityScore"}
    assert profile.args("CPUOrchestration") == CPUOrchestrationArgs()
    assert profile.args("GPUShare") == GPUShareArgs()
    assert profile.args("ScarcityScore") == ScarcityScoreArgs()


def test_builtin_nrt_match_profile_has_exactly_its_plugins():
    profile = builtin_profile("nrt-match", known_plugins=TOPOSCHED_REGISTRY)
    assert profile.scheduler_name == "nrt-match"
    assert profile.percentage_of_nodes_to_score == 0
    assert as_table(profile) == {
        "preFilter": ["NodeAffinity", "NodeResourcesFit"],
        "filter": [
            "NodeUnschedulable",
            "TaintToleration",
            "NodeAffinity",
            "NodeResourcesFit",
            "NodeResourceTopologyMatch",
        ],
        "score": [("NodeResourceTopologyMatch", 1)],
        "bind": ["DefaultBinder"],
    }
    nrt_args = profile.args("NodeResourceTopologyMatch")
    assert nrt_args == NodeResourceTopologyMatchArgs(
        scoring_strategy=NRTScoringStrategy("LeastAllocated", weights(("cpu", 1), ("memory", 1)))
    )
    assert profile.args("NodeResourcesFit") == NodeResourcesFitArgs()


def test_builtin_default_profile_is_topology_blind_kube_scheduler():
    profile = builtin_profile("default", known_plugins=TOPOSCHED_REGISTRY)
    assert profile.scheduler_name == "default-scheduler"
    assert as_table(profile) == {
        "preFilter": ["NodeAffinity", "NodeResourcesFit"],
        "filter": ["NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodeResourcesFit"],
        "preScore": ["TaintToleration", "NodeAffinity", "NodeResourcesFit", "NodeResourcesBalancedAllocation"],
        "score": [
            ("TaintToleration", 3),
            ("NodeAffinity", 2),
            ("NodeResourcesFit", 1),
            ("NodeResourcesBalancedAllocation", 1),
        ],
        "bind": ["DefaultBinder"],
    }
    assert profile.args("NodeResourcesFit").scoring_strategy.type == "LeastAllocated"
    assert profile.args("NodeResourcesBalancedAllocation") == NodeResourcesBalancedAllocationArgs()


def test_builtin_profiles_with_a_registry_missing_a_plugin():
    without_balanced = {k: v for k, v in TOPOSCHED_REGISTRY.items() if k != "NodeResourcesBalancedAllocation"}
    assert builtin_profile("toposched", known_plugins=without_balanced).scheduler_name == "toposched"
    with pytest.raises(InputError) as err:
        builtin_profile("default", known_plugins=without_balanced)
    assert err.value.source == "built-in profile default (toposched/data/profiles/default.yaml)"
    assert err.value.field == "profiles[0].plugins.multiPoint.enabled[4].name"


def test_unknown_builtin_profile():
    with pytest.raises(InputError, match='no built-in profile "fastest" \\(built-in: toposched, nrt-match, default\\)'):
        builtin_profile("fastest", known_plugins=TOPOSCHED_REGISTRY)
    assert BUILTIN_PROFILES == ("toposched", "nrt-match", "default")


# --------------------------------------------------------------------------------------------
# Properties of the expansion

PLUGIN_NAMES = ["A", "B", "C", "D", "Bind"]


@st.composite
def registries_and_profiles(draw):
    registry = {name: set(draw(st.sets(st.sampled_from(EXTENSION_POINTS)))) for name in PLUGIN_NAMES}
    registry["Bind"] = {"bind"}
    multi = draw(st.lists(st.sampled_from(PLUGIN_NAMES), unique=True))
    if "Bind" not in multi:
        multi.append("Bind")
    plugins = {"multiPoint": {"enabled": plugins_named(*multi)}}
    for point in EXTENSION_POINTS:
        own = [n for n in draw(st.lists(st.sampled_from(PLUGIN_NAMES[:-1]), unique=True)) if point in registry[n]]
        disabled = draw(st.lists(st.sampled_from([*PLUGIN_NAMES[:-1], "*"]), unique=True, max_size=2))
        if point == "bind":
            disabled = [d for d in disabled if d != "*"]
        plugins[point] = {"enabled": plugins_named(*own), "disabled": plugins_named(*disabled)}
    return registry, plugins


@settings(max_examples=60, deadline=None)
@given(registries_and_profiles())
def test_expansion_places_each_plugin_exactly_where_the_config_asks(case):
    registry, plugins = case
    profile = load([{"schedulerName": "p", "plugins": plugins}], registry=registry).profiles[0]
    multi = [e["name"] for e in plugins["multiPoint"]["enabled"]]
    for point in EXTENSION_POINTS:
        names = profile.enabled(point)
        own = [e["name"] for e in plugins[point]["enabled"]]
        disabled = {e["name"] for e in plugins[point]["disabled"]}
        assert len(names) == len(set(names))
        assert all(point in registry[n] for n in names)
        expected = set(own)
        if "*" not in disabled:
            expected |= {n for n in multi if point in registry[n] and n not in disabled}
        assert set(names) == expected
        # Upstream's order: the point's own plugins that also come through multiPoint (and are not
        # disabled there), then the multiPoint-only ones in multiPoint order, then the point's
        # other own plugins.
        if "*" in disabled:
            assert list(names) == own
        else:
            overridden = [n for n in own if n in multi and n not in disabled]
            rest = [n for n in own if n not in overridden]
            middle = [n for n in multi if n in expected and n not in own]
            assert list(names) == overridden + middle + rest
