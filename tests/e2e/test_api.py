"""What the real API server does to toposched's requests: RBAC as deploy/ ships it, the Binding, pod status, the CRD.

Each claim here is one the fake API server (``tests/kube/fake_server.py``) cannot test: it
has no authorization (a missing permission is a 403 only here), no CRD schema (a malformed
report is a 422 only here, and unknown fields are pruned only here), and copies of Binding
annotations and strategic merge patches of pod status only as toposched itself believed them
to work.
"""

from __future__ import annotations

import pytest

from tests.deploy.test_deploy_rbac import SERVICE_ACCOUNTS, documented
from tests.e2e.conftest import NAMESPACE, PODS_NAMESPACE
from tests.e2e.objects import add_nodes, nrt_object, pod_object
from toposched.kube.binding import perform_binding
from toposched.kube.client import NRTS, PODS, ApiError
from toposched.scheduler import Placement
from toposched.scheduler.placement import PLACEMENT_ANNOTATION, ContainerPlacement
from toposched.scheduler.plugins.binder import binding_requests
from toposched.topology import CPUSet
from toposched.workload import Container, Pod

pytestmark = pytest.mark.controlplane

#: Verbs a component never needs on a resource it touches: each must be refused.
_NEVER = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


def _review(e2e, account: str, group: str, resource: str, verb: str, namespace: str | None,
            name: str | None) -> bool:
    """Whether the real authorizer lets ServiceAccount ``toposched/<account>`` do ``verb`` (SubjectAccessReview)."""
    resource, _, subresource = resource.partition("/")
    attributes = {"group": group, "resource": resource, "subresource": subresource, "verb": verb,
                  "namespace": namespace or "", "name": name or ""}
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": f"system:serviceaccount:{NAMESPACE}:{account}",
                     "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}",
                                "system:authenticated"],
                     "resourceAttributes": attributes}}
    with e2e.plane.admin_http() as http:
        response = http.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=body)
    response.raise_for_status()
    return bool(response.json()["status"].get("allowed"))


def test_each_component_authenticates_as_its_own_service_account(e2e):
    for account in SERVICE_ACCOUNTS.values():
        token = e2e.plane.service_account_token(NAMESPACE, account)
        with e2e.plane.admin_http(token) as http:
            review = http.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                               json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        assert review.json()["status"]["userInfo"]["username"] == f"system:serviceaccount:{NAMESPACE}:{account}"


@pytest.mark.parametrize("component", sorted(SERVICE_ACCOUNTS))
def test_the_real_authorizer_grants_exactly_the_documented_calls(e2e, component):
    """docs/install.md's table, asked of kube-apiserver's RBAC authorizer with deploy/'s roles applied."""
    account = SERVICE_ACCOUNTS[component]
    grants = documented()[component]
    for group, resource, verb, namespace, name in sorted(grants, key=str):
        assert _review(e2e, account, group, resource, verb, namespace or PODS_NAMESPACE, name), \
            f"{component} may not {verb} {resource} ({namespace or 'cluster'}, {name or 'any name'})"
    if component == "extender":
        return  # its pod's kube-scheduler also holds Kubernetes' own system:kube-scheduler role
    granted = {(g, r, v) for g, r, v, _, _ in grants}
    for group, resource in sorted({(g, r) for g, r, _ in granted}):
        for verb in _NEVER:
            if (group, resource, verb) in granted:
                continue
            assert not _review(e2e, account, group, resource, verb, PODS_NAMESPACE, None), \
                f"{component} may {verb} {resource}, which deploy/ should not grant"


def test_a_call_outside_the_role_is_a_403(e2e):
    """The fake API server would have taken this patch; the scheduler's role has no pods patch."""
    e2e.admin.create(PODS, pod_object("p", 1, namespace=PODS_NAMESPACE))
    scheduler = e2e.client("toposched-scheduler", "toposched-scheduler")
    with pytest.raises(ApiError) as refused:
        scheduler.patch(PODS, "p", {"metadata": {"labels": {"x": "y"}}}, namespace=PODS_NAMESPACE)
    assert refused.value.code == 403 and refused.value.reason == "Forbidden"
    assert 'cannot patch resource "pods"' in refused.value.message


def test_the_binding_sets_node_annotations_and_condition_in_one_write(e2e):
    """kube-apiserver's pods/binding copies the Binding's annotations onto the pod: toposched binds in one request."""
    add_nodes(e2e.admin, ["n1"])
    created = e2e.admin.create(PODS, pod_object("web", 2, namespace=PODS_NAMESPACE))
    pod = Pod("web", namespace=PODS_NAMESPACE, uid=created["metadata"]["uid"], containers=(Container("c"),))
    placement = Placement("n1", numa_nodes=frozenset({0}),
                          containers={"c": ContainerPlacement(cpuset=CPUSet([2, 3]), numa_nodes=frozenset({0}))})
    scheduler = e2e.client("toposched-scheduler", "toposched-scheduler")
    requests = binding_requests(pod, "n1", placement)
    assert len(requests) == 1
    perform_binding(scheduler, requests)
    perform_binding(scheduler, requests)  # a retry after a lost answer: a 409 that counts as success
    bound = e2e.admin.get(PODS, "web", namespace=PODS_NAMESPACE)
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["metadata"]["annotations"][PLACEMENT_ANNOTATION] == placement.annotations()[PLACEMENT_ANNOTATION]
    [condition] = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert condition["status"] == "True"
    assert int(bound["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


def test_a_binding_with_a_stale_uid_is_a_conflict(e2e):
    add_nodes(e2e.admin, ["n1"])
    e2e.admin.create(PODS, pod_object("web", 1, namespace=PODS_NAMESPACE))
    scheduler = e2e.client("toposched-scheduler", "toposched-scheduler")
    with pytest.raises(ApiError) as refused:
        scheduler.bind(PODS_NAMESPACE, "web", "n1", uid="00000000-0000-0000-0000-000000000000")
    assert refused.value.code == 409
    assert not e2e.admin.get(PODS, "web", namespace=PODS_NAMESPACE)["spec"].get("nodeName")


def test_the_pod_condition_merges_by_type_through_the_status_subresource(e2e):
    e2e.admin.create(PODS, pod_object("big", 64, namespace=PODS_NAMESPACE))
    other = {"type": "example.com/Gate", "status": "True", "lastProbeTime": None,
             "lastTransitionTime": "2026-01-01T00:00:00Z"}
    e2e.admin.set_pod_condition(PODS_NAMESPACE, "big", other)
    scheduler = e2e.client("toposched-scheduler", "toposched-scheduler")
    ours = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available",
            "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:01Z"}
    result = scheduler.set_pod_condition(PODS_NAMESPACE, "big", ours)
    conditions = {c["type"]: c for c in result["status"]["conditions"]}
    assert conditions["example.com/Gate"]["status"] == "True"  # left alone
    assert conditions["PodScheduled"]["reason"] == "Unschedulable"
    agent = e2e.client("toposched-agent", "toposched-agent")
    with pytest.raises(ApiError) as refused:  # only the scheduler may
        agent.set_pod_condition(PODS_NAMESPACE, "big", ours)
    assert refused.value.code == 403


def test_the_crd_refuses_a_malformed_report_with_a_422_naming_the_field(e2e):
    agent = e2e.client("toposched-agent", "toposched-agent")
    report = nrt_object("n1")
    report["zones"][0]["resources"][0]["capacity"] = "lots"
    with pytest.raises(ApiError) as refused:
        agent.apply(NRTS, report, field_manager="toposched-agent", force=True)
    assert refused.value.code == 422 and refused.value.reason == "Invalid"
    assert "zones[0].resources[0].capacity" in refused.value.message
    with pytest.raises(ApiError) as missing:
        agent.apply(NRTS, {**nrt_object("n1"), "zones": [{"type": "Node"}]}, field_manager="toposched-agent",
                    force=True)
    assert missing.value.code == 422 and "zones[0].name: Required value" in missing.value.message


def test_an_unknown_field_fails_an_apply_and_is_pruned_from_an_update(e2e):
    """Server-side apply builds a typed object from the CRD's schema: a field it lacks fails the whole apply
    (kube-apiserver answers 500 "failed to create typed patch object"). A create or update prunes it instead."""
    agent = e2e.client("toposched-agent", "toposched-agent")
    report = nrt_object("n1")
    report["zones"][0]["surprise"] = "dropped"
    with pytest.raises(ApiError) as refused:
        agent.apply(NRTS, report, field_manager="toposched-agent", force=True)
    assert refused.value.code == 500 and "field not declared in schema" in refused.value.message
    assert ".zones" in refused.value.message and "surprise" in refused.value.message
    stored = e2e.admin.create(NRTS, report)
    assert stored["zones"] == nrt_object("n1")["zones"]  # "surprise" pruned, the rest as sent
