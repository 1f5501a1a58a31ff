"""deploy/: every manifest parses, is a known kind, hangs together, and runs the CLI with the agreed flags.

The agent's mounts are checked against what the agent reads by default
(``toposched.kube.agent.loop.Agent``: ``sysfs_root``, ``kubelet_dir``, ``cgroup_root``), the
scheduler's configuration against the built-in ``toposched`` profile, the controller's source
against its document format.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path, PurePosixPath

import pytest
import yaml

from tests.deploy.deploy_manifests import (
    DEPLOY,
    EXTENDER_CONFIG,
    IMAGE,
    INSTALL_DOC,
    KUBE_SCHEDULER_IMAGE,
    NAMESPACE,
    VARIANT,
    containers,
    documents,
    manifest_files,
    objects,
    one,
    toposched_container,
    workloads,
)
from toposched.kube.ops import parse_listen_address

KNOWN = {
    "v1": {"Namespace", "ServiceAccount", "ConfigMap", "Service"},
    "apps/v1": {"Deployment", "DaemonSet"},
    "rbac.authorization.k8s.io/v1": {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"},
    "apiextensions.k8s.io/v1": {"CustomResourceDefinition"},
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}

# The CLI as the lead wires it (task brief): each subcommand with the flags the manifests may use.
CLI_FLAGS = {
    "scheduler": {"--config", "--metrics-addr"},
    "agent": {"--node-name", "--metrics-addr"},
    "controller": {"--configmap", "--url", "--metrics-addr"},
    "extender": {"--listen", "--metrics-addr"},
}


def test_every_manifest_parses_and_is_a_known_kind():
    assert manifest_files(), "deploy/ has manifests"
    for path, doc in documents():
        assert isinstance(doc, dict), path
        assert doc.get("kind") in KNOWN.get(doc.get("apiVersion"), set()), f"{path}: {doc.get('apiVersion')} " \
                                                                           f"{doc.get('kind')}"
        meta = doc.get("metadata") or {}
        assert meta.get("name"), f"{path}: a {doc['kind']} without a name"
        if doc["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in meta, f"{path}: {doc['kind']} is cluster-scoped"
        elif doc["kind"] == "RoleBinding" and doc["roleRef"]["name"] == "extension-apiserver-authentication-reader":
            assert meta.get("namespace") == "kube-system", "that Role exists in kube-system only"
        else:
            assert meta.get("namespace") == NAMESPACE, f"{path}: {doc['kind']} {meta['name']}"


def test_names_are_unique_per_kind():
    seen = set()
    for doc in objects():
        key = (doc["kind"], doc["metadata"].get("namespace"), doc["metadata"]["name"])
        assert key not in seen, key
        seen.add(key)


@pytest.mark.parametrize("root", [DEPLOY, VARIANT], ids=["standalone", "extender-variant"])
def test_each_kustomization_lists_every_manifest_of_its_variant(root):
    kustomization = yaml.safe_load((root / "kustomization.yaml").read_text())
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert kustomization["kind"] == "Kustomization"
    listed = [root / r for r in kustomization["resources"]]
    assert all(p.is_file() for p in listed), [str(p) for p in listed if not p.is_file()]
    mine = [p for p in manifest_files() if (root == VARIANT) == (VARIANT in p.parents)]
    assert sorted(listed) == mine


def test_images_are_the_release_image():
    for workload in workloads():
        for c in containers(workload):
            if c["name"] == "kube-scheduler":
                assert c["image"].startswith(KUBE_SCHEDULER_IMAGE)
            else:
                assert c["image"] == IMAGE, f"{workload['metadata']['name']}/{c['name']}"
    assert IMAGE in INSTALL_DOC.read_text()


def test_selectors_service_accounts_and_config_maps_resolve():
    accounts = {sa["metadata"]["name"] for sa in objects("ServiceAccount")}
    maps = {cm["metadata"]["name"]: cm for cm in objects("ConfigMap")}
    for workload in workloads():
        name = workload["metadata"]["name"]
        template = workload["spec"]["template"]
        selector = workload["spec"]["selector"]["matchLabels"]
        assert selector.items() <= template["metadata"]["labels"].items(), name
        assert template["spec"]["serviceAccountName"] in accounts, name
        for volume in template["spec"].get("volumes", []):
            # The extender variant's configuration is made from helper B's file (test below).
            if "configMap" in volume and volume["configMap"]["name"] != "toposched-extender-config":
                assert volume["configMap"]["name"] in maps, f"{name}: {volume}"


def _args(workload: dict) -> tuple[str, dict[str, str]]:
    c = toposched_container(workload)
    sub, *rest = c["args"]
    assert len(rest) % 2 == 0, f"{sub}: flags come in --flag value pairs: {rest}"
    flags = dict(zip(rest[::2], rest[1::2]))
    assert len(flags) == len(rest) // 2, f"{sub}: a flag given twice"
    return sub, flags


@pytest.mark.parametrize("workload", workloads(), ids=lambda w: w["metadata"]["name"])
def test_commands_use_the_agreed_flags_and_ports(workload):
    sub, flags = _args(workload)
    assert set(flags) <= CLI_FLAGS[sub], f"{sub}: {set(flags) - CLI_FLAGS[sub]}"
    assert "--metrics-addr" in flags
    c = toposched_container(workload)
    host, port = parse_listen_address(flags["--metrics-addr"])
    assert host == "0.0.0.0"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports["metrics"] == port
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    defined = {e["name"] for e in c.get("env", [])}
    for value in c["args"]:
        for ref in re.findall(r"\$\((\w+)\)", value):
            assert ref in defined, f"{sub}: $({ref}) is not in env"
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_the_cli_accepts_the_manifests_flags():
    """Once the lead wires the commands, their --help must name every flag the manifests pass."""
    from typer.testing import CliRunner

    from toposched.cli import app

    runner = CliRunner()
    checked = 0
    for workload in workloads():
        sub, flags = _args(workload)
        result = runner.invoke(app, [sub, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
        if result.exit_code != 0:
            continue
        checked += 1
        for flag in flags:
            assert flag in result.output, f"toposched {sub} --help does not mention {flag}"
    if not checked:
        pytest.skip("the scheduler, agent and controller commands are not wired into the CLI yet")


def _mounts(workload: dict) -> dict[str, tuple[str, bool]]:
    """mountPath -> (host path, read-only) for the hostPath volumes of the workload's one container."""
    [c] = containers(workload)
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes", [])}
    out = {}
    for m in c.get("volumeMounts", []):
        volume = volumes[m["name"]]
        if "hostPath" in volume:
            out[m["mountPath"]] = (volume["hostPath"]["path"], bool(m.get("readOnly", False)))
    return out


def _covering(mounts: dict[str, tuple[str, bool]], path: str) -> tuple[str, str, bool]:
    """The deepest mount holding ``path``: (mountPath, host path, read-only)."""
    best = max((m for m in mounts if PurePosixPath(path) == PurePosixPath(m) or PurePosixPath(m) in
                PurePosixPath(path).parents), key=len, default=None)
    assert best is not None, f"{path} is not mounted from the host"
    return best, *mounts[best]


def test_the_agent_daemonset_mounts_what_the_agent_reads_and_writes():
    from toposched.kube.agent.loop import Agent

    ds = one("DaemonSet", "toposched-agent")
    defaults = {name: p.default for name, p in inspect.signature(Agent.__init__).parameters.items()}
    mounts = _mounts(ds)
    sysfs = str(PurePosixPath(str(defaults["sysfs_root"])) / "sys")
    where, host, read_only = _covering(mounts, sysfs + "/devices/system/node")
    assert (host, read_only) == (where, True), "sysfs from the host, read-only"
    where, host, read_only = _covering(mounts, str(defaults["kubelet_dir"]) + "/cpu_manager_state")
    assert (host, read_only) == (where, True), "the kubelet's state, read-only"
    where, host, read_only = _covering(mounts, str(defaults["cgroup_root"]) + "/kubepods.slice/cpuset.cpus")
    assert (host, read_only) == (where, False), "cgroups, read-write"
    assert set(mounts) == {"/sys", "/var/lib/kubelet", "/sys/fs/cgroup"}, "nothing else from the host"
    [c] = containers(ds)
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    security = c["securityContext"]
    assert security["privileged"] is False and "add" not in security["capabilities"]
    assert not ds["spec"]["template"]["spec"].get("hostNetwork") and not ds["spec"]["template"]["spec"].get("hostPID")
    assert {"operator": "Exists"} in ds["spec"]["template"]["spec"]["tolerations"]
    resources = c["resources"]
    assert resources["requests"] != resources.get("limits"), "Burstable, never exclusive CPUs"


def _scheduler_config() -> tuple[str, dict]:
    deployment = one("Deployment", "toposched-scheduler")
    _, flags = _args(deployment)
    path = PurePosixPath(flags["--config"])
    [c] = containers(deployment)
    [mount] = [m for m in c["volumeMounts"] if PurePosixPath(m["mountPath"]) == path.parent]
    [volume] = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    text = one("ConfigMap", volume["configMap"]["name"])["data"][path.name]
    return text, yaml.safe_load(text)


def test_the_scheduler_runs_two_replicas_with_leader_election_on_the_lease_rbac_allows():
    deployment = one("Deployment", "toposched-scheduler")
    assert deployment["spec"]["replicas"] == 2
    _, config = _scheduler_config()
    election = config["leaderElection"]
    assert election["leaderElect"] is True and election["resourceLock"] == "leases"
    assert election["resourceNamespace"] == NAMESPACE
    role = one("Role", "toposched-scheduler-leader-election")
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "resourceNames": [election["resourceName"]], "verbs": ["get", "update"]}]


def test_the_scheduler_configuration_is_the_builtin_toposched_profile():
    from toposched.scheduler import plugins  # noqa: F401  (registers the plugins)
    from toposched.scheduler.framework import registry
    from toposched.scheduler.profiles import builtin_profile, load_scheduler_config

    text, _ = _scheduler_config()
    known = registry.known()
    config = load_scheduler_config(text, known_plugins=known, source="configmaps.yaml")
    assert config.scheduler_names == ("toposched",)
    assert config.profile("toposched") == builtin_profile("toposched", known_plugins=known)


def test_the_controller_reads_the_configmap_it_may_read():
    from toposched.kube.controller import DEFAULT_CONFIGMAP_KEY, parse_zone_attributes

    _, flags = _args(one("Deployment", "toposched-controller"))
    namespace, name = flags["--configmap"].split("/")
    cm = one("ConfigMap", name)
    assert cm["metadata"]["namespace"] == namespace
    assert parse_zone_attributes(yaml.safe_load(cm["data"][DEFAULT_CONFIGMAP_KEY]), source=name) == {}
    role = one("Role", "toposched-controller-source")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [name],
                              "verbs": ["get"]}]
    # The example in the ConfigMap's comment is a valid document too.
    text = Path(DEPLOY / "configmaps.yaml").read_text()
    example = "\n".join(line[4:] for line in text.splitlines() if line.startswith("#   "))
    assert parse_zone_attributes(yaml.safe_load(example), source="example")["worker-1"]["node-0"]


def test_the_extender_variant_matches_its_kube_scheduler_configuration():
    """deploy/extender/scheduler-config.yaml (helper B) is what the variant's kube-scheduler reads."""
    config = yaml.safe_load(EXTENDER_CONFIG.read_text())
    deployment = one("Deployment", "toposched-extender")
    [scheduler] = [c for c in containers(deployment) if c["name"] == "kube-scheduler"]
    flags = dict(a.split("=", 1) for a in scheduler["command"][1:])
    config_path = PurePosixPath(flags["--config"])
    [mount] = [m for m in scheduler["volumeMounts"] if PurePosixPath(m["mountPath"]) == config_path.parent]
    [volume] = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    doc = INSTALL_DOC.read_text()
    assert (f"create configmap {volume['configMap']['name']} "
            f"--from-file={config_path.name}=deploy/extender/scheduler-config.yaml") in doc
    # The Lease: the file's name, this namespace (the flag overrides the file's namespace).
    election = config["leaderElection"]
    assert flags["--leader-elect-resource-namespace"] == NAMESPACE
    role = one("Role", "toposched-extender-leader-election")
    assert [r["resourceNames"] for r in role["rules"] if r.get("resourceNames")] == [[election["resourceName"]]]
    # kube-scheduler reaches the extender on localhost, where the extender listens.
    _, extender_flags = _args(deployment)
    [url] = [e["urlPrefix"] for e in config["extenders"]]
    host, port = parse_listen_address(extender_flags["--listen"])
    assert url == f"http://{host}:{port}" and host == "127.0.0.1"
