"""Reading the kubelet's configuration file and state directory.

The configuration is a kubeadm-style ``/var/lib/kubelet/config.yaml`` (the fields kubeadm
writes, plus the topology settings of the Kubernetes docs "Control Topology Management
Policies on a node", "Utilizing the NUMA-aware Memory Manager" and "Control CPU Management
Policies on the Node"); the eviction percentage follows the kubelet's ``GetThresholdQuantity``
(pkg/kubelet/eviction/api, capacity times the percentage, truncated).
"""

from __future__ import annotations

import pytest

from tests.kube.agent.agent_fakes import UID_A, write_kubelet_dir
from toposched.errors import InputError
from toposched.kube.agent.kubelet_files import (
    exclusive_cpus,
    read_cpu_state,
    read_kubelet_config,
    read_kubelet_files,
    read_memory_state_file,
)
from toposched.kubelet.cpu_state import CPUManagerCheckpoint, write_checkpoint
from toposched.topology import CPUSet

GiB, MiB = 1 << 30, 1 << 20


def test_reads_a_real_kubelet_configuration(tmp_path):
    files = read_kubelet_files(write_kubelet_dir(tmp_path))
    cfg = files.config
    assert files.cgroup_driver == "systemd"
    assert (cfg.cpu_manager_policy, cfg.topology_manager_policy, cfg.topology_manager_scope) == (
        "static", "single-numa-node", "pod")
    assert cfg.reserved_system_cpus == CPUSet([0, 8])
    assert cfg.kube_reserved == {"cpu": 500, "memory": GiB, "ephemeral-storage": GiB}
    assert cfg.system_reserved == {"cpu": 500, "memory": GiB}
    assert cfg.eviction_memory == 100 * MiB
    assert cfg.memory_manager_policy == "Static"
    assert cfg.reserved_memory == {0: {"memory": 1124 * MiB}, 1: {"memory": GiB}}
    assert files.cpu_state is None and files.memory_state is None


def test_defaults_when_the_file_sets_nothing_topological(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDomain: x\n")
    cfg, driver = read_kubelet_config(path)
    assert driver == "cgroupfs"
    assert (cfg.cpu_manager_policy, cfg.topology_manager_policy, cfg.memory_manager_policy) == ("none", "none", "None")


def test_a_percentage_eviction_threshold_is_a_share_of_the_node_memory(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("kind: KubeletConfiguration\nevictionHard:\n  memory.available: '5%'\n")
    cfg, _ = read_kubelet_config(path, memory_total=32 * GiB + 7)
    assert cfg.eviction_memory == int((32 * GiB + 7) * 0.05)
    with pytest.raises(InputError) as err:
        read_kubelet_config(path)
    assert str(path) in str(err.value) and "memory.available" in str(err.value)


@pytest.mark.parametrize(
    "text, field",
    [
        ("kind: Pod\n", "kind"),
        ("apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", "apiVersion"),
        ("kind: KubeletConfiguration\ncgroupDriver: openrc\n", "cgroupDriver"),
        ("kind: KubeletConfiguration\nmaxPods: lots\n", None),
        ("kind: KubeletConfiguration\nreservedSystemCPUs: 5\n", None),
        ("kind: KubeletConfiguration\ntopologyManagerPolicy: strict\n", "topologyManagerPolicy"),
        ("kind: KubeletConfiguration\nevictionHard: {memory.available: 'x%'}\n", "evictionHard.memory.available"),
        ("kind: [\n", None),
        ("- a\n- b\n", None),
    ],
)
def test_a_malformed_configuration_is_refused_naming_the_file(tmp_path, text, field):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_kubelet_config(path, memory_total=GiB)
    assert err.value.source == str(path)
    if field:
        assert err.value.field == field


def test_a_missing_configuration_is_an_error_but_missing_checkpoints_are_not(tmp_path):
    with pytest.raises(InputError) as err:
        read_kubelet_files(tmp_path)
    assert err.value.source == str(tmp_path / "config.yaml")
    assert read_cpu_state(tmp_path) is None
    assert read_memory_state_file(tmp_path) is None


def test_hand_written_cpu_manager_state(tmp_path):
    # As a kubelet writes it; checksum 0 is accepted unverified, as upstream accepts it.
    (tmp_path / "cpu_manager_state").write_text(
        '{"policyName":"static","defaultCpuSet":"0-1,6-15",'
        f'"entries":{{"{UID_A}":{{"app":"2-5"}}}},"checksum":0}}')
    state = read_cpu_state(tmp_path)
    assert state.policy_name == "static"
    assert exclusive_cpus(state) == {UID_A: {"app": CPUSet([2, 3, 4, 5])}}


def test_a_kubelet_written_checkpoint_is_verified(tmp_path):
    cp = CPUManagerCheckpoint("static", CPUSet.parse("0-3,8-15"), {UID_A: {"app": CPUSet.parse("4-7")}})
    write_checkpoint(tmp_path / "cpu_manager_state", cp)
    assert read_cpu_state(tmp_path).entries == cp.entries
    text = (tmp_path / "cpu_manager_state").read_text().replace("4-7", "4-6")
    (tmp_path / "cpu_manager_state").write_text(text)
    with pytest.raises(InputError) as err:
        read_cpu_state(tmp_path)
    assert err.value.source == str(tmp_path / "cpu_manager_state") and err.value.field == "checksum"


@pytest.mark.parametrize("name, text", [
    ("cpu_manager_state", "{not json"),
    ("cpu_manager_state", '{"policyName":"static","defaultCpuSet":"0-x","checksum":0}'),
    ("memory_manager_state", "[]"),
    ("memory_manager_state", '{"policyName":"Static","machineState":{"zero":{}},"checksum":0}'),
])
def test_malformed_checkpoints_are_refused_naming_the_file(tmp_path, name, text):
    write_kubelet_dir(tmp_path)
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as err:
        read_kubelet_files(tmp_path)
    assert err.value.source == str(tmp_path / name)


def test_pod_level_cpu_sets_count_as_exclusive(tmp_path):
    (tmp_path / "cpu_manager_state").write_text(
        '{"policyName":"static","defaultCpuSet":"0-5","podEntries":'
        f'{{"{UID_A}":{{"cpuSet":"6-7"}}}},"checksum":0}}')
    assert exclusive_cpus(read_cpu_state(tmp_path)) == {UID_A: {"": CPUSet([6, 7])}}
