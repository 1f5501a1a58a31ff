"""cpuset enforcement on fake cgroup trees: v1 and v2, systemd and cgroupfs drivers, and the safety rules.

Layouts follow the kubelet's cgroup naming (pkg/kubelet/cm/cgroup_manager_linux.go: the
systemd driver's ``kubepods-<qos>-pod<uid with _>.slice``, cgroupfs ``kubepods/<qos>/pod<uid>``)
and the runtimes' container cgroups (containerd ``cri-containerd-<id>.scope``, CRI-O
``crio-<id>.scope``, cri-dockerd ``docker-<id>.scope``); the v1 rule that a child's cpuset is a
subset of its parent's and the v2 ``cgroup.subtree_control`` delegation come from the kernel's
Documentation/admin-guide/cgroup-v1/cpusets.rst and cgroup-v2.rst.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.sysfs_tree import two_socket_smt, write_sysfs_tree
from tests.kube.agent.agent_fakes import (
    NODE,
    UID_A,
    UID_B,
    CgroupTree,
    container_id,
    make_pod,
    placement,
    read,
)
from toposched.kube.agent.cgroups import detect_layout, enforce_placements
from toposched.kubelet.cpu_state import CPUManagerCheckpoint
from toposched.topology import CPUSet
from toposched.topology.sysfs import read_sysfs

LAYOUTS = [(1, "systemd"), (1, "cgroupfs"), (2, "systemd"), (2, "cgroupfs")]


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    return read_sysfs(write_sysfs_tree(tmp_path_factory.mktemp("sysfs"), two_socket_smt()))


def enforce(tree, pods, machine, **kwargs):
    return enforce_placements(pods, node_name=NODE, machine=machine, cgroup_root=tree.root, **kwargs)


def writes(actions):
    return [(a.container, a.file, a.new) for a in actions if a.kind == "write"]


@pytest.mark.parametrize("version, driver", LAYOUTS)
@pytest.mark.parametrize("qos", ["guaranteed", "burstable", "besteffort"])
def test_writes_the_placement_and_then_holds_still(tmp_path, machine, version, driver, qos):
    tree = CgroupTree(tmp_path / "cg", version=version, driver=driver)
    pod = make_pod("web", UID_A, annotation=placement({"app": {"cpuset": "2-3,10-11", "numaNodes": [0]}}, numa=[0]))
    dirs = tree.add_pod(pod, qos=qos)
    actions = enforce(tree, [pod], machine)
    assert all(a.applied for a in actions if a.kind == "write")
    assert writes(actions)[-2:] == [("app", "cpuset.cpus", "2-3,10-11"), ("app", "cpuset.mems", "0")]
    assert (read(dirs["app"], "cpuset.cpus"), read(dirs["app"], "cpuset.mems")) == ("2-3,10-11", "0")
    assert enforce(tree, [pod], machine) == []


@pytest.mark.parametrize("version, driver", LAYOUTS)
def test_a_drifted_cpuset_is_rewritten(tmp_path, machine, version, driver):
    tree = CgroupTree(tmp_path / "cg", version=version, driver=driver)
    pod = make_pod("web", UID_A, annotation=placement({"app": {"cpuset": "4-5", "numaNodes": [1]}}))
    dirs = tree.add_pod(pod)
    enforce(tree, [pod], machine)
    (dirs["app"] / "cpuset.cpus").write_text("0-15\n")  # e.g. the runtime or the kubelet reset it
    actions = enforce(tree, [pod], machine)
    assert [(a.file, a.old, a.new) for a in actions] == [("cpuset.cpus", "0-15", "4-5")]
    assert read(dirs["app"], "cpuset.cpus") == "4-5"


@pytest.mark.parametrize("runtime", ["containerd", "cri-o", "docker"])
@pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
def test_container_runtimes(tmp_path, machine, runtime, driver):
    tree = CgroupTree(tmp_path / "cg", version=2, driver=driver)
    pod = make_pod("web", UID_A, runtime=runtime, annotation=placement({"app": {"cpuset": "6", "numaNodes": [1]}}))
    dirs = tree.add_pod(pod, runtime=runtime)
    enforce(tree, [pod], machine)
    assert read(dirs["app"], "cpuset.cpus") == "6"


def test_dry_run_writes_nothing(tmp_path, machine, caplog):
    tree = CgroupTree(tmp_path / "cg", version=1, driver="systemd")
    pod = make_pod("web", UID_A, annotation=placement({"app": {"cpuset": "2-3", "numaNodes": [0]}}))
    tree.add_pod(pod)
    before = tree.snapshot()
    with caplog.at_level(logging.INFO, logger="toposched.kube.agent.cgroups"):
        actions = enforce(tree, [pod], machine, dry_run=True)
    assert tree.snapshot() == before
    assert writes(actions) == [("app", "cpuset.cpus", "2-3"), ("app", "cpuset.mems", "0")]
    assert not any(a.applied for a in actions)
    assert "would write" in caplog.text


def test_v1_widens_the_pod_cgroup_first(tmp_path, machine):
    tree = CgroupTree(tmp_path / "cg", version=1, driver="cgroupfs")
    pod = make_pod("web", UID_A, annotation=placement({"app": {"cpuset": "4-7", "numaNodes": [1]}}))
    dirs = tree.add_pod(pod)
    pod_dir = dirs["app"].parent
    (pod_dir / "cpuset.cpus").write_text("0-3\n")
    (pod_dir / "cpuset.mems").write_text("0\n")
    (dirs["app"] / "cpuset.cpus").write_text("0-3\n")
    (dirs["app"] / "cpuset.mems").write_text("0\n")
    actions = enforce(tree, [pod], machine)
    assert [(a.container, a.file, a.old, a.new) for a in actions] == [
        (None, "cpuset.cpus", "0-3", "0-7"),
        (None, "cpuset.mems", "0", "0-1"),
        ("app", "cpuset.cpus", "0-3", "4-7"),
        ("app", "cpuset.mems", "0", "1"),
    ]
    assert read(pod_dir, "cpuset.cpus") == "0-7"


def test_v1_refuses_when_the_qos_parent_is_too_narrow(tmp_path, machine, caplog):
    tree = CgroupTree(tmp_path / "cg", version=1, driver="cgroupfs")
    pod = make_pod("web", UID_A, annotation=placement({"app": {"cpuset": "4-7", "numaNodes": [1]}}))
    dirs = tree.add_pod(pod)
    for d in (dirs["app"].parent.parent, dirs["app"].parent, dirs["app"]):
        (d / "cpuset.cpus").write_text("0-3\n")
    before = tree.snapshot()
    [action] = enforce(tree, [pod], machine)
    assert action.kind == "refuse" and "does not contain" in action.reason
    assert tree.snapshot() == before


def test_v2_needs_the_cpuset_controller_delegated(tmp_path, machine, caplog):
    tree = CgroupTree(tmp_path / "cg", version=2, driver="systemd")
    pod = make_pod("web", UID_A, annotation=placement({"app": {"cpuset": "2", "numaNodes": [0]}}))
    dirs = tree.add_pod(pod)
    (dirs["app"].parent / "cgroup.subtree_control").write_text("cpu memory pids\n")
    before = tree.snapshot()
    with caplog.at_level(logging.ERROR):
        [action] = enforce(tree, [pod], machine)
    assert action.kind == "refuse" and "cgroup.subtree_control" in action.reason
    assert tree.snapshot() == before
    assert "cpuset controller is not enabled" in caplog.text


def test_v2_pod_level_set_is_widened_only_when_it_is_set(tmp_path, machine):
    tree = CgroupTree(tmp_path / "cg", version=2, driver="systemd")
    pod = make_pod("web", UID_A, annotation=placement({"app": {"cpuset": "4-5", "numaNodes": [1]}}))
    dirs = tree.add_pod(pod)
    assert [a.container for a in enforce(tree, [pod], machine)] == ["app", "app"]  # empty = inherit
    (dirs["app"].parent / "cpuset.cpus").write_text("0-3\n")
    assert writes(enforce(tree, [pod], machine)) == [(None, "cpuset.cpus", "0-5")]


HOSTILE = [
    ("uid", {"uid": "../../../etc"}),
    ("uid", {"uid": "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f/../.."}),
    ("container id", {"cid": "containerd://../../../../etc/passwd"}),
    ("container id", {"cid": "containerd://" + "A" * 64}),
    ("cpuset", {"cpuset": "0-999999"}),
    ("cpuset", {"cpuset": "14-17"}),
    ("numa", {"numa": [7]}),
    ("json", {"raw": "{not json"}),
    ("container name", {"name": "../app"}),
    ("node", {"node": "worker-2"}),
]


@pytest.mark.parametrize("what, attack", HOSTILE, ids=[f"{w}-{i}" for i, (w, _) in enumerate(HOSTILE)])
@pytest.mark.parametrize("version", [1, 2])
def test_hostile_input_is_refused_with_an_error_and_nothing_written(tmp_path, machine, caplog, what, attack, version):
    tree = CgroupTree(tmp_path / "cg", version=version, driver="systemd")
    good_cid = container_id("web/app")
    tree.add_container(UID_A, good_cid)
    name = attack.get("name", "app")
    annotation = attack.get("raw") or placement(
        {name: {"cpuset": attack.get("cpuset", "2-3"), "numaNodes": attack.get("numa", [0])}},
        node=attack.get("node", NODE))
    pod = make_pod("web", attack.get("uid", UID_A), annotation=annotation, containers={name: good_cid})
    if "cid" in attack:
        pod["status"]["containerStatuses"][0]["containerID"] = attack["cid"]
    # A decoy outside the tree that traversal would reach.
    outside = tmp_path / "etc"
    outside.mkdir()
    (outside / "cpuset.cpus").write_text("untouched")
    before = tree.snapshot()
    with caplog.at_level(logging.ERROR, logger="toposched.kube.agent.cgroups"):
        actions = enforce(tree, [pod], machine)
    assert [a.kind for a in actions] == ["refuse"]
    assert tree.snapshot() == before
    assert (outside / "cpuset.cpus").read_text() == "untouched"
    assert "default/web" in caplog.text and "refuse" in caplog.text


def test_a_symlinked_cgroup_leading_outside_the_root_is_not_followed(tmp_path, machine):
    tree = CgroupTree(tmp_path / "cg", version=2, driver="cgroupfs")
    cid = container_id("web/app")
    pod_dir = tree.mkdir(tree.pod_dir(UID_A))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "cpuset.cpus").write_text("untouched")
    (outside / "cpuset.mems").write_text("untouched")
    os.symlink(outside, pod_dir / cid)
    pod = make_pod("web", UID_A, annotation=placement({"app": {"cpuset": "2", "numaNodes": [0]}}),
                   containers={"app": cid})
    [action] = enforce(tree, [pod], machine)
    assert action.kind == "skip" and "no cgroup" in action.reason
    assert (outside / "cpuset.cpus").read_text() == "untouched"


def test_a_symlinked_cpuset_file_is_not_written_through(tmp_path, machine):
    tree = CgroupTree(tmp_path / "cg", version=2, driver="systemd")
    pod = make_pod("web", UID_A, annotation=placement({"app": {"cpuset": "2", "numaNodes": [0]}}))
    app = tree.add_pod(pod)["app"]
    (app / "decoy").write_text("")
    (app / "cpuset.cpus").unlink()
    os.symlink(app / "decoy", app / "cpuset.cpus")
    actions = enforce(tree, [pod], machine)
    assert [a.kind for a in actions] == ["error"]  # O_NOFOLLOW; the pod's later writes are dropped
    assert (app / "decoy").read_text() == ""
    assert read(app, "cpuset.mems") == ""


def test_static_cpu_manager_assignments_are_respected(tmp_path, machine):
    tree = CgroupTree(tmp_path / "cg", version=1, driver="systemd")
    pinned = make_pod("pinned", UID_B, annotation=placement({"app": {"cpuset": "2-3", "numaNodes": [0]}}))
    pinned_dirs = tree.add_pod(pinned, qos="guaranteed")
    (pinned_dirs["app"] / "cpuset.cpus").write_text("2-3\n")
    state = CPUManagerCheckpoint("static", CPUSet.parse("0-1,4-15"), {UID_B: {"app": CPUSet.parse("2-3")}})
    # Another pod whose placement names CPUs the kubelet gave pod "pinned": refused.
    greedy = make_pod("greedy", UID_A, annotation=placement({"app": {"cpuset": "3-4", "numaNodes": [0]}}))
    tree.add_pod(greedy)
    before = tree.snapshot()
    actions = enforce(tree, [pinned, greedy], machine, cpu_state=state)
    assert [(a.pod, a.kind) for a in actions] == [("default/pinned", "skip"), ("default/greedy", "refuse")]
    assert actions[0].reason == "pinned by the kubelet's static CPU manager"
    assert "CPUs 3 belong to the kubelet's static CPU manager for another pod" in actions[1].reason
    assert tree.snapshot() == before


def test_a_shared_container_gets_its_numa_nodes_cpus_minus_exclusive_ones(tmp_path, machine):
    tree = CgroupTree(tmp_path / "cg", version=2, driver="systemd")
    state = CPUManagerCheckpoint("static", CPUSet.parse("0-1,3-15"), {UID_B: {"app": CPUSet([2])}})
    exclusive = make_pod("exclusive", "11111111-2222-4333-8444-555555555555",
                         annotation=placement({"app": {"cpuset": "9", "numaNodes": [0]}}))
    shared = make_pod("shared", UID_A, annotation=placement({"app": {"cpuset": "", "numaNodes": [0]}}, numa=[0]))
    tree.add_pod(exclusive)
    dirs = tree.add_pod(shared)
    enforce(tree, [exclusive, shared], machine, cpu_state=state)
    # NUMA 0 is 0-3,8-11; CPU 2 is the kubelet's, 9 is pod "exclusive"'s.
    assert read(dirs["app"], "cpuset.cpus") == "0-1,3,8,10-11"
    assert read(dirs["app"], "cpuset.mems") == "0"


def test_pods_that_are_not_ours_to_touch(tmp_path, machine):
    tree = CgroupTree(tmp_path / "cg", version=2, driver="systemd")
    note = placement({"app": {"cpuset": "2", "numaNodes": [0]}})
    pods = [
        make_pod("plain", UID_A),  # no placement
        make_pod("finished", UID_B, annotation=note, phase="Succeeded"),
        make_pod("other-node", "11111111-2222-4333-8444-555555555555", node="worker-2", annotation=note),
    ]
    for pod in pods:
        tree.add_pod(pod)
    before = tree.snapshot()
    assert enforce(tree, pods, machine) == []
    assert tree.snapshot() == before


def test_containers_not_started_or_without_a_cgroup_are_skipped(tmp_path, machine):
    tree = CgroupTree(tmp_path / "cg", version=2, driver="systemd")
    pod = make_pod("web", UID_A, annotation=placement({"app": {"cpuset": "2", "numaNodes": [0]},
                                                       "side": {"cpuset": "3", "numaNodes": [0]}}),
                   containers={"app": None, "side": container_id("side")})
    assert [a.reason for a in enforce(tree, [pod], machine)] == ["no pod cgroup on this node (yet)"]
    tree.mkdir(tree.pod_dir(UID_A))
    reasons = [a.reason for a in enforce(tree, [pod], machine)]
    assert reasons[0] == "the container has not started (no containerID)" and reasons[1].startswith("no cgroup")


def test_layout_detection(tmp_path):
    assert detect_layout(tmp_path) is None
    assert detect_layout(CgroupTree(tmp_path / "v1", version=1, driver="systemd").root).version == 1
    assert detect_layout(CgroupTree(tmp_path / "v2", version=2, driver="systemd").root).version == 2
    pod = make_pod("web", UID_A, annotation=placement({"app": {"cpuset": "2", "numaNodes": [0]}}))
    [action] = enforce_placements([pod], node_name=NODE, machine=None, cgroup_root=tmp_path / "none")
    assert action.kind == "refuse"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    version=st.sampled_from([1, 2]),
    wanted=st.sets(st.integers(0, 20), min_size=1, max_size=5),
    numa=st.sets(st.integers(0, 2), max_size=2),
    kubelet=st.sets(st.integers(0, 15), max_size=4),
)
def test_written_cpusets_are_the_placement_and_never_the_kubelets(machine, version, wanted, numa, kubelet):
    with tempfile.TemporaryDirectory() as tmp:
        tree = CgroupTree(Path(tmp) / "cg", version=version, driver="systemd")
        note = placement({"app": {"cpuset": str(CPUSet(wanted)), "numaNodes": sorted(numa)}})
        pod = make_pod("web", UID_A, annotation=note)
        app = tree.add_pod(pod)["app"]
        state = CPUManagerCheckpoint("static", CPUSet(), {UID_B: {"app": CPUSet(kubelet)}} if kubelet else {})
        before, mems_before = tree.snapshot(), read(app, "cpuset.mems")
        actions = enforce(tree, [pod], machine, cpu_state=state)
        ok = CPUSet(wanted) <= machine.online and not CPUSet(wanted) & CPUSet(kubelet) and numa <= {0, 1}
        if not ok:
            assert [a.kind for a in actions] == ["refuse"] and tree.snapshot() == before
            return
        assert {a.kind for a in actions} <= {"write"}
        assert CPUSet.parse(read(app, "cpuset.cpus")) == CPUSet(wanted)
        assert read(app, "cpuset.mems") == (str(CPUSet(numa)) if numa else mems_before)
        assert enforce(tree, [pod], machine, cpu_state=state) == []
