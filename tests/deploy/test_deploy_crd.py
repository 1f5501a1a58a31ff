"""deploy/crd: the NodeResourceTopology CRD as noderesourcetopology-api publishes it, accepting what toposched writes.

Upstream: github.com/k8stopologyawareschedwg/noderesourcetopology-api ``manifests/crd.yaml``
(the copy in ``../shared/data/k8s-objects/noderesourcetopology/noderesourcetopology-api/``):
our file must have the same names, scope, versions and schemas (descriptions aside). The
v1alpha2 schema must accept the objects ``toposched.topology.nrt.dump_nrt`` writes (the agent's
reports) and the same objects after the controller merged zone attributes into them.
"""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import pytest
import yaml

from tests.conftest import shared_path
from tests.deploy.deploy_manifests import DEPLOY
from tests.kube.memory_client import MemoryClient
from toposched.kube.client import NRTS
from toposched.kube.controller import Controller, parse_zone_attributes
from toposched.topology import CPUSet, Device, DeviceKind, Machine
from toposched.topology.nrt import dump_nrt, nrt_from_machine

CRD = DEPLOY / "crd" / "noderesourcetopologies.yaml"


def crd() -> dict:
    [doc] = [d for d in yaml.safe_load_all(CRD.read_text()) if d]
    return doc


def schema(version: str) -> dict:
    [v] = [v for v in crd()["spec"]["versions"] if v["name"] == version]
    return v["schema"]["openAPIV3Schema"]


def _without_descriptions(value):
    if isinstance(value, dict):
        return {k: _without_descriptions(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [_without_descriptions(v) for v in value]
    return value


def test_names_scope_and_versions():
    doc = crd()
    assert doc["apiVersion"] == "apiextensions.k8s.io/v1" and doc["kind"] == "CustomResourceDefinition"
    spec = doc["spec"]
    assert doc["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"
    assert (spec["group"], spec["names"]["plural"], spec["names"]["kind"], spec["scope"]) == (
        NRTS.group, NRTS.plural, NRTS.kind, "Cluster")
    assert [(v["name"], v["served"], v["storage"]) for v in spec["versions"]] == [
        ("v1alpha1", True, False), ("v1alpha2", True, True)]


def test_same_schema_as_upstream():
    upstream_path = shared_path("k8s-objects", "noderesourcetopology", "noderesourcetopology-api", "crd.yaml")
    upstream = yaml.safe_load(upstream_path.read_text())
    ours = crd()
    assert {k: v for k, v in ours["spec"].items() if k != "versions"} == \
        {k: v for k, v in upstream["spec"].items() if k != "versions"}
    for mine, theirs in zip(ours["spec"]["versions"], upstream["spec"]["versions"], strict=True):
        assert (mine["name"], mine["served"], mine["storage"]) == (theirs["name"], theirs["served"], theirs["storage"])
        assert _without_descriptions(mine["schema"]) == _without_descriptions(theirs["schema"])


def test_lists_are_atomic_so_the_controller_must_write_whole_zones():
    """What docs/install.md and the controller rely on: no list-type markers anywhere in the schema."""
    assert "x-kubernetes-list-type" not in json.dumps(crd())


def _machines() -> dict[str, Machine]:
    """A two-socket host with GPUs and hugepages-free memory, and one with a CPU-less memory node."""
    rows = [{"cpu": c, "core": c % 8, "socket": (c % 8) // 4, "numa": (c % 8) // 4} for c in range(16)]
    gpus = Machine.from_cpu_table(rows, memory_per_numa=64 << 30, distances={0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}})
    gpus = dataclasses.replace(gpus, devices=tuple(
        Device(f"0000:{bus:02x}:00.0", DeviceKind.GPU, bus % 2, attributes={"resource": "nvidia.com/gpu"})
        for bus in (0x3B, 0x5E, 0xD8)))
    rows = [{"cpu": c, "core": c, "socket": 0, "numa": c // 4} for c in range(8)]
    memory_only = Machine.from_cpu_table(rows, memory_per_numa=16 << 30, numa_ids=[2])
    return {"worker-gpu": gpus, "worker-cxl": memory_only}


def _reports() -> dict[str, dict]:
    return {name: json.loads(json.dumps(dump_nrt(nrt_from_machine(
        machine, node_name=name, policy="single-numa-node", scope="pod", reserved_cpus=CPUSet([0])))))
        for name, machine in _machines().items()}


def test_accepts_what_toposched_writes_and_what_the_controller_merges():
    memory_client = MemoryClient(clock=lambda: 1_700_000_000.0)
    validator = jsonschema.Draft7Validator(schema("v1alpha2"))
    reports = _reports()
    assert any(r["name"] == "nvidia.com/gpu" for z in reports["worker-gpu"]["zones"] for r in z["resources"])
    for obj in reports.values():
        validator.validate(obj)
        memory_client.apply(NRTS, obj, field_manager="toposched-agent", force=True)
    document = {obj["metadata"]["name"]: {"node-0": {"toposched.io/cpu-capacity": "3500m"}}
                for obj in reports.values()}

    class Source:
        description = "test"

        def read(self):
            return parse_zone_attributes(document, source="test")

    Controller(memory_client, Source(), clock=lambda: 0.0, sleep=lambda s: None).step()
    for obj in memory_client.list(NRTS).items:
        assert obj["zones"][0]["attributes"][-1] == {"name": "toposched.io/cpu-capacity", "value": "3500m"}
        validator.validate({k: v for k, v in obj.items() if k != "metadata"} | {"metadata": {}})


def test_the_schema_check_is_not_vacuous():
    validator = jsonschema.Draft7Validator(schema("v1alpha2"))
    obj = _reports()["worker-gpu"]
    bad = json.loads(json.dumps(obj))
    bad["zones"][0]["resources"][0]["capacity"] = "lots"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)
    bad = json.loads(json.dumps(obj))
    bad["zones"][0]["attributes"] = [{"name": "x", "value": 3}]
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)
    validator.validate(obj)
