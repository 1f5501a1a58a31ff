"""toposched explain: the JSON contract, the table, and one-line errors."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from toposched.cli import app
from toposched.topology import Machine
from toposched.topology.nrt import dump_nrt, nrt_from_machine

GI = 2**30
runner = CliRunner()


@pytest.fixture
def files(tmp_path):
    rows = [{"cpu": c + t * 16, "core": c, "socket": c // 8, "numa": c // 8} for t in range(2) for c in range(16)]
    m = Machine.from_cpu_table(rows, memory_per_numa=32 * GI, distances={0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}})
    reports = [
        dump_nrt(nrt_from_machine(m, node_name="worker-a", policy="single-numa-node", available={0: {"cpu": 2000}, 1: {"cpu": 3000}})),
        dump_nrt(nrt_from_machine(m, node_name="worker-b", policy="single-numa-node")),
    ]
    (tmp_path / "nrt.yaml").write_text(yaml.safe_dump_all(reports))
    nodes = {"apiVersion": "v1", "kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": n}, "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"}}}
        for n in ("worker-a", "worker-b", "worker-c")]}
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump(nodes))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
           "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "4", "memory": "4Gi"}}}]}}
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod))
    return tmp_path


def run(files, *args):
    return runner.invoke(app, ["explain", "--pod", str(files / "pod.yaml"), "--node", str(files / "nodes.yaml"),
                               "--nrt", str(files / "nrt.yaml"), *args])


def test_json_contract_for_nrt_match(files):
    result = run(files, "--profile", "nrt-match", "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out) >= {"pod", "nodes", "selected", "placement"}
    by_name = {n["name"]: n for n in out["nodes"]}
    assert list(by_name) == ["worker-a", "worker-b", "worker-c"]
    assert by_name["worker-a"]["filter"]["code"] == "Unschedulable"
    assert by_name["worker-a"]["score"] is None
    assert by_name["worker-b"]["filter"] == {"code": "Success", "message": ""}
    assert isinstance(by_name["worker-b"]["score"], int) and "NodeResourceTopologyMatch" in by_name["worker-b"]["plugins"]
    assert out["selected"] == "worker-b"


def test_table_says_where_and_why(files):
    result = run(files, "--profile", "nrt-match")
    assert result.exit_code == 0, result.output
    assert "selected: worker-b" in result.stdout and "cannot align" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--profile", "no-such"], 'no built-in profile "no-such"'),
        (["-o", "xml"], "expected table or json"),
    ],
)
def test_errors_are_one_line(files, args, message):
    result = run(files, *args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_bad_pod_file_names_the_file(files):
    (files / "pod.yaml").write_text("kind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, resources: {limits: {cpu: '-1'}}}]}\n")
    result = run(files, "--profile", "nrt-match")
    assert result.exit_code == 1
    assert "pod.yaml" in result.output and "spec.containers[0].resources.limits.cpu" in result.output
