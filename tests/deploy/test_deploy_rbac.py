"""Least privilege: each ServiceAccount is granted exactly the calls docs/install.md lists for its component.

Three things are held together:

1. the table "What each component may do" in docs/install.md (the documented calls);
2. what the RBAC manifests grant each ServiceAccount, expanded rule by rule (Kubernetes RBAC is
   additive: the union of the rules of every role bound to the account, a RoleBinding limiting
   its rules to its namespace, ``resourceNames`` to those names);
3. the KubeClient calls in each component's code (``client.<verb>(<KIND>`` and
   ``Reflector(client, <KIND>`` = list + watch), mapped to RBAC verbs as the API server
   authorizes them (replace = update, apply and merge patch = patch, bind = create on
   ``pods/binding``, set_pod_condition = patch on ``pods/status``). A call the code makes and the table lacks fails the test, so new calls
   cannot ship without their permission.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.deploy.deploy_manifests import INSTALL_DOC, REPO, objects
from toposched.kube.client import KINDS

SERVICE_ACCOUNTS = {"scheduler": "toposched-scheduler", "agent": "toposched-agent",
                    "controller": "toposched-controller", "extender": "toposched-extender"}
SOURCES = REPO / "src" / "toposched"
CODE = {
    "scheduler": ["kube/standalone.py", "kube/queue.py", "kube/leader.py", "kube/events.py", "kube/binding.py",
                  "kube/cluster_sync.py", "cli/scheduler.py"],
    "agent": ["kube/agent/*.py", "cli/agent.py"],
    "controller": ["kube/controller.py", "cli/controller.py"],
    "extender": ["kube/extender/*.py", "kube/binding.py", "cli/extender.py"],
}
#: Kubernetes' own roles the extender variant's kube-scheduler is bound to (not defined in deploy/).
BUILTIN_ROLES = {("ClusterRole", "system:kube-scheduler", None), ("ClusterRole", "system:volume-scheduler", None),
                 ("Role", "extension-apiserver-authentication-reader", "kube-system")}

Grant = tuple[str, str, str, str | None, str | None]  # group, resource, verb, namespace, name


def documented() -> dict[str, set[Grant]]:
    """The table of docs/install.md, expanded to one grant per verb."""
    text = INSTALL_DOC.read_text()
    start = text.index("| component | API group | resource | verbs | where |")
    out: dict[str, set[Grant]] = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        component, group, resource, verbs, where, _why = [cell.strip() for cell in line.strip("|").split("|")]
        namespace = name = None
        if where != "cluster":
            m = re.fullmatch(r"namespace (\S+?)(?:, name (\S+))?", where)
            assert m, f"unreadable scope {where!r}"
            namespace, name = m.groups()
        for verb in verbs.split(", "):
            out.setdefault(component, set()).add(("" if group == "core" else group, resource, verb, namespace, name))
    return out


def bindings_of(account: str, namespace: str = "toposched") -> list[dict]:
    """The RoleBindings and ClusterRoleBindings whose subjects include the ServiceAccount."""
    return [b for b in objects("ClusterRoleBinding") + objects("RoleBinding")
            if any(s["kind"] == "ServiceAccount" and s["name"] == account and s["namespace"] == namespace
                   for s in b.get("subjects", []))]


def _ref(binding: dict) -> tuple[str, str, str | None]:
    scope = None if binding["kind"] == "ClusterRoleBinding" else binding["metadata"]["namespace"]
    return binding["roleRef"]["kind"], binding["roleRef"]["name"], scope


def granted(account: str) -> set[Grant]:
    """Every grant the roles defined in deploy/ give the ServiceAccount (built-in roles aside)."""
    roles = {("ClusterRole", r["metadata"]["name"]): r for r in objects("ClusterRole")}
    roles |= {("Role", r["metadata"]["name"], r["metadata"]["namespace"]): r for r in objects("Role")}
    out: set[Grant] = set()
    for binding in bindings_of(account):
        if _ref(binding) in BUILTIN_ROLES:
            continue
        ref = binding["roleRef"]
        assert ref["apiGroup"] == "rbac.authorization.k8s.io"
        scope = None if binding["kind"] == "ClusterRoleBinding" else binding["metadata"]["namespace"]
        key = ("ClusterRole", ref["name"]) if ref["kind"] == "ClusterRole" else ("Role", ref["name"], scope)
        role = roles[key]
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        assert "*" not in (group, resource, verb), f"{role['metadata']['name']}: a wildcard"
                        for name in rule.get("resourceNames") or [None]:
                            out.add((group, resource, verb, scope, name))
    return out


_CONSTANTS = {"PODS": "Pod", "NODES": "Node", "EVENTS": "Event", "CONFIGMAPS": "ConfigMap", "LEASES": "Lease",
              "NRTS": "NodeResourceTopology", "DEVICES": "Device"}
_VERBS = {"list": ["list"], "watch": ["watch"], "get": ["get"], "create": ["create"], "replace": ["update"],
          "patch": ["patch"], "apply": ["patch"], "delete": ["delete"]}


def code_calls(component: str) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every KubeClient call found in the component's modules."""
    kinds = {const: next(k for k in KINDS if k.kind == kind) for const, kind in _CONSTANTS.items()}
    found: set[tuple[str, str, str]] = set()
    for pattern in CODE[component]:
        for path in sorted(SOURCES.glob(pattern)):
            text = Path(path).read_text()
            for verb, const in re.findall(r"client\.(\w+)\(\s*(PODS|NODES|EVENTS|CONFIGMAPS|LEASES|NRTS|DEVICES)\b", text):
                for rbac in _VERBS[verb]:
                    found.add((kinds[const].group, kinds[const].plural, rbac))
            for const in re.findall(r"Reflector\(\s*[\w.]+,\s*(PODS|NODES|EVENTS|CONFIGMAPS|LEASES|NRTS|DEVICES)\b", text):
                found |= {(kinds[const].group, kinds[const].plural, v) for v in ("list", "watch")}
            if re.search(r"client\.bind\(", text):
                found.add(("", "pods/binding", "create"))
            if re.search(r"client\.set_pod_condition\(", text):
                found.add(("", "pods/status", "patch"))
    return found


@pytest.mark.parametrize("component", sorted(SERVICE_ACCOUNTS))
def test_rbac_grants_exactly_the_documented_calls(component):
    assert granted(SERVICE_ACCOUNTS[component]) == documented()[component]


@pytest.mark.parametrize("component", sorted(SERVICE_ACCOUNTS))
def test_every_call_in_the_code_is_documented(component):
    calls = code_calls(component)
    assert calls, f"no API call found for {component}: the scan is broken"
    allowed = {(g, r, v) for g, r, v, _, _ in documented()[component]}
    assert calls <= allowed, f"{component} calls {sorted(calls - allowed)} without a documented permission"


def test_the_scan_sees_the_calls_it_should():
    """Not vacuous: the controller's calls are exactly these."""
    assert code_calls("controller") == {
        ("topology.node.k8s.io", "noderesourcetopologies", v) for v in ("get", "list", "watch", "patch")
    } | {("", "configmaps", "get")}


def test_documented_verbs_beyond_the_code_are_explained():
    """Documented permissions the code scan cannot see: an apply that creates the agent's NRT is
    authorized as create; the extender variant's Lease is kube-scheduler's, and its caches may be
    set up where the scan does not look (the CLI wiring)."""
    extras = {c: {(g, r, v) for g, r, v, _, _ in documented()[c]} - code_calls(c) for c in SERVICE_ACCOUNTS}
    assert extras["scheduler"] == set() and extras["controller"] == set()
    assert extras["agent"] == {("topology.node.k8s.io", "noderesourcetopologies", "create")}
    lease = {("coordination.k8s.io", "leases", v) for v in ("create", "get", "update")}
    caches = {(g, r, v) for g, r in (("", "pods"), ("", "nodes"), ("topology.node.k8s.io", "noderesourcetopologies"))
              for v in ("list", "watch")}
    assert lease <= extras["extender"] <= lease | caches


def test_only_the_extender_variant_binds_builtin_roles_and_exactly_kube_schedulers():
    for component, account in SERVICE_ACCOUNTS.items():
        builtin = {_ref(b) for b in bindings_of(account)} & BUILTIN_ROLES
        assert builtin == (BUILTIN_ROLES if component == "extender" else set()), component
