"""The memory_manager_state checkpoint: upstream's checksum vectors, the three layouts, bad files.

Vectors: the v1/v2/v3 contents and checksums come from kubernetes' own
``memorymanager/state/state_checkpoint_test.go``; the two-NUMA file is the one a kubelet 1.29.2
wrote, quoted in kubernetes issue #128669.
"""

from __future__ import annotations

import json

import pytest

from toposched.errors import InputError
from toposched.kubelet.memory_state import (
    Block,
    MemoryManagerCheckpoint,
    MemoryTable,
    NUMANodeState,
    checkpoint_checksum,
    format_memory_state,
    machine_states_equal,
    parse_memory_state,
    read_memory_state,
    write_memory_state,
)

# A two-NUMA node exactly as a kubelet 1.29.2 wrote it (no pods yet).
KUBELET_1_29_FILE = (
    '{"policyName":"Static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"hugepages-1Gi":'
    '{"total":10737418240,"systemReserved":0,"allocatable":10737418240,"reserved":0,"free":10737418240},'
    '"hugepages-2Mi":{"total":0,"systemReserved":0,"allocatable":0,"reserved":0,"free":0},"memory":'
    '{"total":99759243264,"systemReserved":10538188800,"allocatable":78483636224,"reserved":0,"free":78483636224}},'
    '"cells":[0]},"1":{"numberOfAssignments":0,"memoryMap":{"hugepages-1Gi":{"total":10737418240,'
    '"systemReserved":0,"allocatable":10737418240,"reserved":0,"free":10737418240},"hugepages-2Mi":{"total":0,'
    '"systemReserved":0,"allocatable":0,"reserved":0,"free":0},"memory":{"total":99283886080,'
    '"systemReserved":1101004800,"allocatable":87445463040,"reserved":0,"free":87445463040}},"cells":[1]}},'
    '"checksum":2552710201}'
)

MACHINE_STATE_JSON = (
    '{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":2048,"systemReserved":512,'
    '"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}}'
)
ENTRIES_JSON = '{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}}'
POD_ENTRIES_JSON = '{"pod":{"memoryBlocks":[{"numaAffinity":[0],"type":"memory","size":512}]}}'
# The outer part of a v3 file that must be ignored in favour of its data section.
STALE_OUTER = (
    '"policyName":"other","machineState":{"0":{"numberOfAssignments":5,"memoryMap":{"memory":{"total":1024,'
    '"systemReserved":256,"allocatable":768,"reserved":256,"free":512}},"cells":[]}},'
    '"entries":{"pod":{"containerX":[{"numaAffinity":[0],"type":"memory","size":128}]}},"checksum":1234'
)


def v1(checksum: int) -> str:
    return (
        f'{{"policyName":"static","machineState":{MACHINE_STATE_JSON},"entries":{ENTRIES_JSON},"checksum":{checksum}}}'
    )


def v2(checksum: int) -> str:
    return (
        f'{{"policyName":"static","machineState":{MACHINE_STATE_JSON},"entries":{ENTRIES_JSON},'
        f'"podEntries":{POD_ENTRIES_JSON},"checksum":{checksum}}}'
    )


def v3(data: str, data_checksum: int | None) -> str:
    obj = json.loads("{" + STALE_OUTER + "}")
    obj["data"] = data
    if data_checksum is not None:
        obj["dataChecksum"] = data_checksum
    return json.dumps(obj)


DATA_V2 = f'{{"policyName":"static","machineState":{MACHINE_STATE_JSON},"entries":{ENTRIES_JSON},"podEntries":{POD_ENTRIES_JSON}}}'
DATA_V1 = f'{{"policyName":"static","machineState":{MACHINE_STATE_JSON},"entries":{ENTRIES_JSON}}}'
DATA_UNKNOWN = (
    f'{{"unknownField":"value","policyName":"static","machineState":{MACHINE_STATE_JSON},"entries":{ENTRIES_JSON}}}'
)

EXPECTED_NODE = NUMANodeState(0, {"memory": MemoryTable(2048, 512, 1536, 512, 1024)}, ())
EXPECTED_ENTRIES = {"pod": {"container1": (Block((0,), "memory", 512),)}}


# ---- upstream restore table -------------------------------------------------------------

RESTORE_CASES = [
    # (what upstream checks, file content, layout, pod entries expected)
    ("v1 file with its checksum", v1(4215593881), "v1", {}),
    ("v1 file with a zero checksum (old file backend)", v1(0), "v1", {}),
    ("v2 file with pod entries and its checksum", v2(1278640530), "v2", {"pod": (Block((0,), "memory", 512),)}),
    ("v2 file with a zero checksum", v2(0), "v2", {"pod": (Block((0,), "memory", 512),)}),
    (
        "v3 file: data section wins over a stale outer part",
        v3(DATA_V2, 637296054),
        "v3",
        {"pod": (Block((0,), "memory", 512),)},
    ),
    ("v3 file with a v1 data section", v3(DATA_V1, 1849615440), "v3", {}),
    ("v3 data section with an unknown field", v3(DATA_UNKNOWN, 2100279793), "v3", {}),
]


@pytest.mark.parametrize(
    ("case", "content", "version", "pod_entries"), RESTORE_CASES, ids=[c[0] for c in RESTORE_CASES]
)
def test_upstream_checkpoints_restore(case: str, content: str, version: str, pod_entries: dict) -> None:
    cp = parse_memory_state(content, policy_name="static")
    assert cp.version == version
    assert cp.policy_name == "static"
    assert dict(cp.machine_state) == {0: EXPECTED_NODE}
    assert {p: dict(c) for p, c in cp.entries.items()} == EXPECTED_ENTRIES
    assert dict(cp.pod_entries) == pod_entries


FAILING_CASES = [
    ("v1 file with a wrong checksum", v1(101010), "checkpoint is corrupted", "checksum"),
    ("v2 file with a wrong checksum", v2(101010), "checkpoint is corrupted", "checksum"),
    ("v3 file with a wrong dataChecksum", v3(DATA_V1, 1234), "checkpoint is corrupted", "dataChecksum"),
    ("v3 file without dataChecksum", v3(DATA_V1, None), "checkpoint is corrupted", "dataChecksum"),
    ("v3 file whose data is not JSON", v3("{", 1234), "not valid JSON", "data"),
    ("file that is not JSON", "{", "not valid JSON", "checkpoint"),
]


@pytest.mark.parametrize(("case", "content", "message", "field"), FAILING_CASES, ids=[c[0] for c in FAILING_CASES])
def test_upstream_corrupted_checkpoints_refused(case: str, content: str, message: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        parse_memory_state(content, source="/var/lib/kubelet/memory_manager_state")
    assert message in err.value.message
    assert err.value.field == field
    assert err.value.source == "/var/lib/kubelet/memory_manager_state"


def test_v3_without_data_section_refused() -> None:
    content = json.dumps({**json.loads("{" + STALE_OUTER + "}"), "dataChecksum": 1234})
    with pytest.raises(InputError) as err:
        parse_memory_state(content)
    assert err.value.field == "data"


def test_policy_name_mismatch_uses_upstream_message() -> None:
    with pytest.raises(InputError) as err:
        parse_memory_state(v3(DATA_V2, 637296054), policy_name="none")
    assert err.value.message == '[memorymanager] configured policy "none" differs from state checkpoint policy "static"'
    assert err.value.field == "policyName"


# ---- checksum and writing ----------------------------------------------------------------


def test_real_kubelet_file_round_trips_byte_for_byte() -> None:
    cp = parse_memory_state(KUBELET_1_29_FILE)
    assert cp.checksum == 2552710201
    assert checkpoint_checksum(cp) == 2552710201
    assert format_memory_state(cp) == KUBELET_1_29_FILE


@pytest.mark.parametrize(
    ("content", "variant", "expected"),
    [(v1(0), "v1", 4215593881), (v2(0), "v2", 1278640530), (KUBELET_1_29_FILE, "v1", 2552710201)],
)
def test_checksum_variants_match_upstream(content: str, variant: str, expected: int) -> None:
    assert checkpoint_checksum(parse_memory_state(content), variant) == expected


def test_unknown_checksum_variant_is_an_input_error() -> None:
    with pytest.raises(InputError) as err:
        checkpoint_checksum(parse_memory_state(v1(0)), "v9")
    assert err.value.field == "variant"


def test_write_then_read(tmp_path) -> None:
    cp = MemoryManagerCheckpoint(
        "Static",
        {
            2: NUMANodeState(1, {"memory": MemoryTable(8, 1, 7, 3, 4)}, (2,)),
            10: NUMANodeState(
                0, {"memory": MemoryTable(8, 1, 7, 0, 7), "hugepages-2Mi": MemoryTable(4, 0, 4, 0, 4)}, (10,)
            ),
        },
        {"uid-1": {"app": (Block((2,), "memory", 3),)}},
    )
    path = tmp_path / "memory_manager_state"
    write_memory_state(path, cp)
    text = path.read_text()
    # Go orders map keys as strings ("10" before "2") and writes no trailing newline.
    assert text.index('"10"') < text.index('"2"')
    assert text.index('"hugepages-2Mi"') < text.index('"memory"')
    assert not text.endswith("\n")
    back = read_memory_state(path, policy_name="Static")
    assert back.checksum == checkpoint_checksum(cp)
    assert dict(back.machine_state) == dict(cp.machine_state)
    assert {p: dict(c) for p, c in back.entries.items()} == {"uid-1": {"app": (Block((2,), "memory", 3),)}}


def test_empty_entries_are_omitted_and_pod_entries_select_v2() -> None:
    node = {0: NUMANodeState(0, {"memory": MemoryTable(2, 1, 1, 0, 1)}, (0,))}
    assert "entries" not in format_memory_state(MemoryManagerCheckpoint("Static", node))
    cp = MemoryManagerCheckpoint("Static", node, pod_entries={"p": (Block((0,), "memory", 1),)})
    text = format_memory_state(cp)
    assert '"podEntries":{"p":{"memoryBlocks":' in text
    assert json.loads(text)["checksum"] == checkpoint_checksum(cp, "v2")


def test_nulls_survive_a_round_trip() -> None:
    content = ('{"policyName":"Static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":null,"cells":null}},'
               '"entries":{"p":{"c":null}},"checksum":0}')
    cp = parse_memory_state(content)
    assert cp.machine_state[0] == NUMANodeState(0, None, None)
    again = parse_memory_state(format_memory_state(cp))
    assert again.machine_state[0] == NUMANodeState(0, None, None)
    assert dict(again.entries["p"]) == {"c": None}


def test_html_characters_escaped_like_go() -> None:
    cp = MemoryManagerCheckpoint("Static", {}, {"a<b>&": {"c": ()}})
    text = format_memory_state(cp)
    assert "\\u003c" in text and "\\u003e" in text and "\\u0026" in text
    assert parse_memory_state(text).entries.keys() == {"a<b>&"}


# ---- malformed files -----------------------------------------------------------------------

MALFORMED = [
    ("[]", "checkpoint"),
    ('{"policyName":3,"machineState":{},"checksum":0}', "policyName"),
    ('{"policyName":"Static","machineState":[],"checksum":0}', "machineState"),
    ('{"policyName":"Static","machineState":{"x":{}},"checksum":0}', "machineState"),
    ('{"policyName":"Static","machineState":{"-1":{}},"checksum":0}', "machineState"),
    ('{"policyName":"Static","machineState":{"0":null},"checksum":0}', "machineState.0"),
    (
        '{"policyName":"Static","machineState":{"0":{"memoryMap":{"memory":{"total":-1}}}},"checksum":0}',
        "machineState.0.memoryMap.memory.total",
    ),
    (
        '{"policyName":"Static","machineState":{"0":{"memoryMap":{"memory":{"free":"1Gi"}}}},"checksum":0}',
        "machineState.0.memoryMap.memory.free",
    ),
    (
        '{"policyName":"Static","machineState":{"0":{"memoryMap":{"memory":null}}},"checksum":0}',
        "machineState.0.memoryMap.memory",
    ),
    ('{"policyName":"Static","machineState":{"0":{"cells":"0"}},"checksum":0}', "machineState.0.cells"),
    (
        '{"policyName":"Static","machineState":{"0":{"numberOfAssignments":1.5}},"checksum":0}',
        "machineState.0.numberOfAssignments",
    ),
    (
        '{"policyName":"Static","machineState":{},"entries":{"p":{"c":[{"size":-5}]}},"checksum":0}',
        "entries.p.c[0].size",
    ),
    (
        '{"policyName":"Static","machineState":{},"entries":{"p":{"c":[{"type":7}]}},"checksum":0}',
        "entries.p.c[0].type",
    ),
    ('{"policyName":"Static","machineState":{},"entries":{"p":{"c":[null]}},"checksum":0}', "entries.p.c[0]"),
    ('{"policyName":"Static","machineState":{},"entries":{"p":[]},"checksum":0}', "entries.p"),
    ('{"policyName":"Static","machineState":{},"podEntries":{"p":null},"checksum":0}', "podEntries.p"),
    ('{"policyName":"Static","machineState":{},"checksum":-1}', "checksum"),
    ('{"policyName":"Static","machineState":{},"data":5,"dataChecksum":0}', "data"),
]


@pytest.mark.parametrize(("content", "field"), MALFORMED)
def test_malformed_files_name_the_file_and_field(tmp_path, content: str, field: str) -> None:
    path = tmp_path / "memory_manager_state"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        read_memory_state(path)
    assert err.value.field == field
    assert err.value.source == str(path)
    assert str(path) in str(err.value)


def test_missing_file_is_an_input_error(tmp_path) -> None:
    with pytest.raises(InputError) as err:
        read_memory_state(tmp_path / "absent")
    assert err.value.source == str(tmp_path / "absent")


# ---- upstream's state equality ----------------------------------------------------------------


def _pair(free0: int, free1: int, cells: tuple[int, ...]) -> dict[int, NUMANodeState]:
    return {
        n: NUMANodeState(2, {"memory": MemoryTable(10, 2, 8, 8 - free, free)}, cells)
        for n, free in ((0, free0), (1, free1))
    }


def test_states_equal_compares_free_and_reserved_per_group() -> None:
    # Within a group only the sums count: 2+6 and 6+2 free are the same group state.
    assert machine_states_equal(_pair(2, 6, (0, 1)), _pair(6, 2, (1, 0)))
    assert not machine_states_equal(_pair(2, 6, (0, 1)), _pair(2, 5, (0, 1)))
    # Single-node groups compare node by node.
    assert not machine_states_equal(_pair(2, 6, (0,)), _pair(6, 2, (0,)))


def test_states_equal_checks_nodes_counts_and_tables() -> None:
    base = _pair(2, 6, (0, 1))
    assert not machine_states_equal(base, {0: base[0]})
    assert not machine_states_equal(base, {**base, 1: NUMANodeState(3, base[1].memory_map, (0, 1))})
    assert not machine_states_equal(base, {**base, 1: base[1].with_table("hugepages-2Mi", MemoryTable(0, 0, 0, 0, 0))})
    changed = base[1].with_table("memory", MemoryTable(11, 2, 9, 3, 6))
    assert not machine_states_equal(base, {**base, 1: changed})
    # A group naming a node that does not exist never matches, not even itself.
    dangling = {0: NUMANodeState(1, {"memory": MemoryTable(2, 0, 2, 1, 1)}, (0, 7))}
    assert not machine_states_equal(dangling, dangling)
