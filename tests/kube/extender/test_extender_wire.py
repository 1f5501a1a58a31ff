"""The extender's wire models read and write what Go's encoding/json does with extender/v1's types.

Reference: kubernetes/kubernetes staging/src/k8s.io/kube-scheduler/extender/v1/types.go (no json
tags, so keys are the Go field names; ``Nodes``/``NodeNames``/``Pod`` are pointers, the failure
maps, victim lists and the priority list are not). encoding/json matches a key to a field
exactly or else case-insensitively, ignores unknown keys, decodes ``null`` into a slice or map as
nil (empty), and encodes a nil slice or map as ``null``, which the models never emit.
"""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.kube.extender.wire import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    ExtenderPreemptionResult,
    HostPriority,
    HostPriorityList,
    MetaPod,
    MetaVictims,
    NodeList,
    dump,
)


def test_keys_match_case_insensitively_and_unknown_keys_are_ignored():
    args = ExtenderArgs.model_validate({"pod": {"metadata": {"name": "p"}}, "NODENAMES": ["a"], "Extra": 1})
    assert args.pod == {"metadata": {"name": "p"}} and args.node_names == ["a"] and args.nodes is None
    binding = ExtenderBindingArgs.model_validate({"podName": "p", "podNamespace": "ns", "podUID": "u", "node": "n"})
    assert (binding.pod_name, binding.pod_namespace, binding.pod_uid, binding.node) == ("p", "ns", "u", "n")


def test_null_slices_and_maps_decode_as_empty():
    args = ExtenderArgs.model_validate({"Pod": None, "Nodes": {"metadata": None, "items": None}, "NodeNames": None})
    assert args.candidate_names() == [] and args.nodes.items == []
    result = ExtenderFilterResult.model_validate({"NodeNames": None, "FailedNodes": None,
                                                  "FailedAndUnresolvableNodes": None, "Error": None})
    assert result.failed_nodes == {} and result.failed_and_unresolvable_nodes == {} and result.error == ""
    preempt = ExtenderPreemptionArgs.model_validate(
        {"NodeNameToMetaVictims": {"n": {"Pods": None, "NumPDBViolations": 1}, "m": None}})
    assert preempt.victims() == {"n": ([], 1), "m": ([], 0)}
    assert HostPriorityList.model_validate(None).root == []


def test_pods_and_nodes_keep_every_field():
    node = {"metadata": {"name": "a"}, "status": {"somethingNew": [1, 2]}}
    pod = {"metadata": {"name": "p", "managedFields": [{"manager": "x"}]}, "spec": {"futureField": True}}
    args = ExtenderArgs.model_validate({"Pod": pod, "Nodes": {"kind": "NodeList", "items": [node]}})
    assert args.pod == pod and args.nodes.items == [node]
    assert json.loads(dump(args.nodes.only({"a"}))) == {"kind": "NodeList", "metadata": {}, "items": [node]}


def test_victims_come_by_uid_from_either_map():
    args = ExtenderPreemptionArgs.model_validate({
        "NodeNameToVictims": {"n1": {"Pods": [{"metadata": {"uid": "u1"}}, {"metadata": {"uid": "u2"}}],
                                     "NumPDBViolations": 3}},
        "NodeNameToMetaVictims": None,
    })
    assert args.victims() == {"n1": (["u1", "u2"], 3)}


def test_answers_have_gos_shape():
    assert json.loads(dump(ExtenderFilterResult())) == {
        "Nodes": None, "NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}
    assert dump(HostPriorityList([])) == "[]"
    assert json.loads(dump(HostPriorityList([HostPriority(Host="a", Score=10)]))) == [{"Host": "a", "Score": 10}]
    assert json.loads(dump(ExtenderBindingResult())) == {"Error": ""}
    assert json.loads(dump(ExtenderPreemptionResult())) == {"NodeNameToMetaVictims": {}}
    victims = MetaVictims(Pods=[MetaPod(UID="u")], NumPDBViolations=2)
    assert json.loads(dump(ExtenderPreemptionResult(NodeNameToMetaVictims={"n": victims}))) == {
        "NodeNameToMetaVictims": {"n": {"Pods": [{"UID": "u"}], "NumPDBViolations": 2}}}
    assert json.loads(dump(NodeList.model_validate({"items": None}))) == {"metadata": {}, "items": []}


names = st.lists(st.sampled_from(["a", "b", "c", "node-1", "n.example.com"]), unique=True)
maybe_map = st.none() | st.dictionaries(st.sampled_from(["a", "b", "c"]), st.text(max_size=20))


@settings(max_examples=60, deadline=None)
@given(node_names=st.none() | names, failed=maybe_map, unresolvable=maybe_map,
       error=st.none() | st.text(max_size=10), items=st.none() | st.lists(st.fixed_dictionaries({
           "metadata": st.fixed_dictionaries({"name": st.sampled_from(["a", "b"])})}), max_size=3))
def test_a_filter_answer_read_back_from_any_go_encoding_never_emits_null_where_go_ranges(
        node_names, failed, unresolvable, error, items):
    raw = {"NodeNames": node_names, "FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable,
           "Error": error, "Nodes": None if items is None else {"items": items}}
    out = json.loads(dump(ExtenderFilterResult.model_validate(raw)))
    assert isinstance(out["FailedNodes"], dict) and isinstance(out["FailedAndUnresolvableNodes"], dict)
    assert isinstance(out["Error"], str)
    assert out["NodeNames"] == node_names  # a pointer: null stays null, a list stays the list
    assert out["Nodes"] is None if items is None else out["Nodes"]["items"] == items
    assert ExtenderFilterResult.model_validate(out) == ExtenderFilterResult.model_validate(raw)  # round trip
