"""The ``cpu_manager_state`` checkpoint against upstream's test vectors (``state_checkpoint_test.go``).

The checksums below are upstream's own: files its tests accept must verify here, files it
calls corrupted must fail, and what this module writes must carry the checksum upstream writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.errors import InputError
from toposched.kubelet.cpu_state import (
    CPUManagerCheckpoint,
    checkpoint_checksum,
    data_checksum,
    dumps_checkpoint,
    loads_checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from toposched.topology import CPUSet

P = CPUSet.parse

V2_VALID = """{
    "policyName": "none",
    "defaultCPUSet": "1-3",
    "entries": {"pod": {"container1": "4-6", "container2": "1-3"}},
    "checksum": 3610638499
}"""


def test_restore_valid_v2_checkpoint() -> None:
    cp = loads_checkpoint(V2_VALID)
    assert cp.policy_name == "none"
    assert cp.default_cpuset == P("1-3")
    assert cp.entries == {"pod": {"container1": P("4-6"), "container2": P("1-3")}}
    assert cp.checksum == 3610638499


@pytest.mark.parametrize(
    ("text", "default", "entries"),
    [
        # Restore default CPU set (v2, no entries)
        ('{"policyName": "none", "defaultCPUSet": "4-6", "checksum": 354655845}', "4-6", {}),
        # v2 layout verified as newer kubelets do (struct with pod entries)
        ('{"policyName": "static", "defaultCPUSet": "7-9", "entries": {"pod": {"container1": "4-6", '
         '"container2": "1-3"}}, "checksum": 1942532442}', "7-9", {"pod": {"container1": "4-6", "container2": "1-3"}}),
        # v1 checksum on a file without entries: kubelets up to 1.3x accept it
        ('{"policyName": "none", "defaultCPUSet": "1-3", "checksum": 1694838852}', "1-3", {}),
        # A zero checksum is accepted unverified, as upstream.
        ('{"policyName": "none", "defaultCPUSet": "1-3", "checksum": 0}', "1-3", {}),
    ],
)
def test_accepted_checksums(text: str, default: str, entries: dict[str, dict[str, str]]) -> None:
    cp = loads_checkpoint(text)
    assert cp.default_cpuset == P(default)
    assert cp.entries == {p: {c: P(s) for c, s in cs.items()} for p, cs in entries.items()}


def test_v4_data_section_is_the_source_of_truth() -> None:
    # The outer (v2) part is deliberately corrupted in upstream's case: only data counts.
    text = json.dumps({
        "policyName": "other", "defaultCPUSet": "1-9", "checksum": 1234,
        "data": '{"policyName":"static","defaultCPUSet":"7-9","entries":{"pod":{"container1":"4-6","container2":"1-3"}}}',
        "dataChecksum": 1420829534,
    })
    cp = loads_checkpoint(text)
    assert cp.policy_name == "static"
    assert cp.default_cpuset == P("7-9")
    assert cp.entries == {"pod": {"container1": P("4-6"), "container2": P("1-3")}}


def test_v4_ignores_unknown_fields_in_data() -> None:
    text = json.dumps({"policyName": "other", "defaultCPUSet": "1-9", "checksum": 1234,
                       "data": '{"policyName":"none","defaultCPUSet":"4-6","unknownField":"value"}',
                       "dataChecksum": 3492408555})
    assert loads_checkpoint(text).default_cpuset == P("4-6")


def test_data_checksum_vectors() -> None:
    assert data_checksum('{"policyName":"none","defaultCPUSet":"4-6"}') == 657950972


def test_pod_entries_are_read() -> None:
    text = ('{"policyName": "static", "defaultCPUSet": "1-2", "entries": {"pod1": {"container1": "5-6", '
            '"container2": "3-4"}}, "podEntries": {"pod2": {"cpuSet": "7-9"}}, "checksum": 766259872}')
    cp = loads_checkpoint(text)
    assert cp.pod_entries == {"pod2": P("7-9")}
    assert cp.entries["pod1"]["container2"] == P("3-4")


CORRUPT = [
    ("invalid v2 checksum", '{"policyName": "none", "defaultCPUSet": "1-3", "entries": {"pod": {"container1": '
     '"4-6", "container2": "1-3"}}, "checksum": 1234}', "checksum"),
    ("invalid dataChecksum", json.dumps({
        "policyName": "static", "defaultCPUSet": "7-9", "checksum": 1942532442,
        "data": '{"policyName":"static","defaultCPUSet":"7-9","entries":{"pod":{"container1":"4-6",'
                '"container2":"1-3"}}}', "dataChecksum": 1234}), "dataChecksum"),
    ("data without dataChecksum", json.dumps({
        "policyName": "static", "defaultCPUSet": "7-9", "checksum": 1942532442,
        "data": '{"policyName":"static","defaultCPUSet":"7-9"}'}), "dataChecksum"),
    ("dataChecksum without data", json.dumps({
        "policyName": "static", "defaultCPUSet": "7-9", "checksum": 1942532442, "dataChecksum": 1234}),
     "dataChecksum"),
    ("invalid JSON", "{", "checkpoint"),
    ("v1 entries (migration)", '{"policyName": "static", "defaultCPUSet": "7-9", "entries": {"containerID1": '
     '"4-6", "containerID2": "1-3"}, "checksum": 2026311253}', "entries"),
    ("unparsable default CPU set", json.dumps({
        "policyName": "none", "defaultCPUSet": "7-9", "checksum": 98002435,
        "data": '{"policyName":"none","defaultCPUSet":"1.3"}', "dataChecksum": 3033143655}), "defaultCpuSet"),
    ("unparsable assignment entry", json.dumps({
        "policyName": "static", "defaultCPUSet": "1-3", "checksum": 1659543133,
        "data": '{"policyName":"static","defaultCPUSet":"1-3","entries":{"pod":{"container1":"4-6",'
                '"container2":"asd"}}}', "dataChecksum": 3794806925}), "entries.pod.container2"),
    ("policy name not a string", '{"policyName": 3, "defaultCpuSet": "1"}', "policyName"),
    ("checksum not a number", '{"policyName": "none", "defaultCpuSet": "1", "checksum": "x"}', "checksum"),
    ("entries not a mapping", '{"policyName": "none", "defaultCpuSet": "1", "entries": [1]}', "entries"),
]


@pytest.mark.parametrize(("text", "field"), [c[1:] for c in CORRUPT], ids=[c[0] for c in CORRUPT])
def test_malformed_files_raise_one_input_error(text: str, field: str) -> None:
    with pytest.raises(InputError) as info:
        loads_checkpoint(text, source="/var/lib/kubelet/cpu_manager_state")
    assert info.value.field == field
    assert info.value.source == "/var/lib/kubelet/cpu_manager_state"


def test_expected_policy_differs() -> None:
    text = json.dumps({"policyName": "static", "defaultCPUSet": "7-9", "checksum": 0,
                       "data": '{"policyName":"other","defaultCPUSet":"7-9"}',
                       "dataChecksum": data_checksum('{"policyName":"other","defaultCPUSet":"7-9"}')})
    with pytest.raises(InputError, match='configured policy "none" differs from state checkpoint policy "other"'):
        loads_checkpoint(text, expect_policy="none")


def test_verify_false_reads_a_bad_checksum() -> None:
    text = V2_VALID.replace("3610638499", "1234")
    assert loads_checkpoint(text, verify=False).checksum == 1234


def test_writes_what_the_kubelet_writes() -> None:
    cp = CPUManagerCheckpoint("none", P("1-3"), {"pod": {"container2": P("1-3"), "container1": P("4-6")}})
    assert dumps_checkpoint(cp) == ('{"policyName":"none","defaultCpuSet":"1-3","entries":{"pod":{"container1":"4-6",'
                                    '"container2":"1-3"}},"checksum":3610638499}')
    assert dumps_checkpoint(CPUManagerCheckpoint("none", P("4-6"))) == (
        '{"policyName":"none","defaultCpuSet":"4-6","checksum":354655845}')
    static = CPUManagerCheckpoint("static", P("7-9"), {"pod": {"container1": P("4-6"), "container2": P("1-3")}})
    assert json.loads(dumps_checkpoint(static, layout="v3"))["checksum"] == 1942532442


def test_checksum_versions() -> None:
    assert checkpoint_checksum("static", "7-9", {"containerID1": "4-6", "containerID2": "1-3"}, version=1) == 2026311253
    with pytest.raises(InputError):
        checkpoint_checksum("none", "", {}, version=9)


def test_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "cpu_manager_state"
    cp = CPUManagerCheckpoint("static", P("0-1,6-11"), {"uid-a": {"app": P("2-5")}})
    write_checkpoint(path, cp)
    again = read_checkpoint(path, expect_policy="static")
    assert (again.policy_name, again.default_cpuset, again.entries) == (cp.policy_name, cp.default_cpuset, cp.entries)
    assert again.checksum == cp.computed_checksum()


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        read_checkpoint(tmp_path / "absent")
    assert info.value.source == str(tmp_path / "absent")


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)
cpusets = st.frozensets(st.integers(0, 63), max_size=8).map(CPUSet)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["static", "none"]), cpusets, st.dictionaries(names, st.dictionaries(names, cpusets,
       min_size=1, max_size=3), max_size=3), st.sampled_from(["v2", "v3"]))
def test_written_checkpoints_read_back_verified(policy: str, default: CPUSet, entries: dict, layout: str) -> None:
    cp = CPUManagerCheckpoint(policy, default, entries)
    back = loads_checkpoint(dumps_checkpoint(cp, layout=layout))
    assert (back.policy_name, back.default_cpuset, back.entries) == (policy, default, entries)
