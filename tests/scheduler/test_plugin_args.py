"""The typed args of toposched's own plugins: defaults, strict decoding, errors that name the field."""

from __future__ import annotations

import pytest

from toposched.errors import InputError
from toposched.scheduler import registry
from toposched.scheduler.plugin_args import (
    DEFAULT_ARGS_PARSERS,
    CPUOrchestrationArgs,
    GPUShareArgs,
    ScarcityScoreArgs,
    plugin_args,
)
from toposched.scheduler.profiles import load_scheduler_config

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: toposched
  plugins:
    multiPoint:
      enabled: [{name: CPUOrchestration}, {name: GPUShare}, {name: ScarcityScore}, {name: DefaultBinder}]
  pluginConfig:
  - name: CPUOrchestration
    args: {defaultCPUBindPolicy: FullPCPUs, numaAllocateStrategy: LeastAllocated}
  - name: GPUShare
    args: {policy: Random, seed: 7, defaultGPUMemory: 32Gi}
  - name: ScarcityScore
    args: {window: 50}
"""


def test_every_plugin_that_takes_args_has_a_parser():
    for name in ("NodeResourcesFit", "NodeResourcesBalancedAllocation", "NodeResourceTopologyMatch",
                 "CPUOrchestration", "GPUShare", "ScarcityScore"):
        assert name in DEFAULT_ARGS_PARSERS


def test_a_profile_carries_the_typed_args_and_the_plugins_take_them():
    profile = load_scheduler_config(CONFIG, known_plugins=registry.known()).profiles[0]
    assert profile.args("CPUOrchestration") == CPUOrchestrationArgs("FullPCPUs", "LeastAllocated")
    assert profile.args("GPUShare") == GPUShareArgs("Random", 7, 32 * 2**30)
    assert profile.args("ScarcityScore") == ScarcityScoreArgs(window=50)
    cpu = registry.create("CPUOrchestration", profile.args("CPUOrchestration"))
    assert (cpu.default_policy, cpu.strategy) == ("FullPCPUs", "LeastAllocated")
    gpu = registry.create("GPUShare", profile.args("GPUShare"))
    assert (gpu.policy_name, gpu.seed, gpu.default_memory) == ("Random", 7, 32 * 2**30)
    assert registry.create("ScarcityScore", profile.args("ScarcityScore")).window == 50


@pytest.mark.parametrize(("plugin", "args", "field"), [
    ("CPUOrchestration", {"defaultCPUBindPolicy": "Full"}, "args.defaultCPUBindPolicy"),
    ("GPUShare", {"policy": "Tightest"}, "args.policy"),
    ("GPUShare", {"defaultGPUMemory": "lots"}, "args.defaultGPUMemory"),
    ("ScarcityScore", {"shapes": 0}, "args.shapes"),
    ("ScarcityScore", {"windows": 5}, "args.windows"),
])
def test_bad_args_in_a_file_name_the_file_the_profile_and_the_field(plugin, args, field):
    text = CONFIG.split("  pluginConfig:")[0] + f"  pluginConfig:\n  - name: {plugin}\n    args: {args}\n"
    with pytest.raises(InputError) as err:
        load_scheduler_config(text, known_plugins=registry.known(), source="sched.yaml")
    assert err.value.source == "sched.yaml"
    assert err.value.field == f"profiles[0].pluginConfig[0].{field}"


@pytest.mark.parametrize(("kind", "args", "field"), [
    (CPUOrchestrationArgs, {"numaAllocateStrategy": "Packed"}, "CPUOrchestration.args.numaAllocateStrategy"),
    (GPUShareArgs, {"seed": "x"}, "GPUShare.args.seed"),
    (ScarcityScoreArgs, {"epoch": True}, "ScarcityScore.args.epoch"),
    (ScarcityScoreArgs, [1], "ScarcityScore.args"),
])
def test_a_plain_mapping_is_decoded_with_the_plugin_named(kind, args, field):
    plugin = kind.__name__.removesuffix("Args")
    with pytest.raises(InputError) as err:
        plugin_args(kind, args, plugin)
    assert err.value.field == field


def test_defaults_are_the_plugins_defaults():
    assert plugin_args(CPUOrchestrationArgs, None, "CPUOrchestration") == CPUOrchestrationArgs("", "MostAllocated")
    assert plugin_args(GPUShareArgs, {}, "GPUShare") == GPUShareArgs("BestFit", 0, 16 * 2**30)
    assert plugin_args(ScarcityScoreArgs, {}, "ScarcityScore") == ScarcityScoreArgs(200, 25, 4)
    typed = ScarcityScoreArgs(window=9)
    assert plugin_args(ScarcityScoreArgs, typed, "ScarcityScore") is typed
