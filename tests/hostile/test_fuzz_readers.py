"""Fuzzing the readers with hypothesis: whatever the input, a reader returns or raises InputError (issue 19).

Readers: YAML/JSON text, sysfs trees, hwloc XML, NodeResourceTopology objects, Pod and Node
objects, scenarios, node and pod CSVs. Each test runs a few dozen examples in the normal run; with
``TOPOSCHED_FUZZ_SECONDS=N`` (and ``-m slow``) the ``slow`` variants run each reader for about N
seconds (``scripts/fuzz.sh`` runs them for a few minutes each).
"""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.sysfs_tree import two_socket_smt, write_sysfs_tree
from tests.hostile.corpus import GOOD_NODE, GOOD_POD, SMALL_SCENARIO, good_nrt
from toposched.errors import InputError
from toposched.inputs import decode_documents

FUZZ_SECONDS = float(os.environ.get("TOPOSCHED_FUZZ_SECONDS", "0"))
QUICK = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
LONG = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
long_run = pytest.mark.skipif(FUZZ_SECONDS <= 0, reason="set TOPOSCHED_FUZZ_SECONDS to fuzz for longer")

# ---- values a hostile document is made of -------------------------------------------------------------

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.sampled_from(["1e400", "-1", "0.5", "100m", "4Gi", "9" * 60, ".inf", "nan", "1e-9", "", " ", "a/b", "c p u",
                     "single-numa-node", "none", "node-0", "node-99", "cpu", "memory", "nvidia.com/gpu"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    """``base`` with one to three of its values (at any depth) replaced or deleted."""
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        target = obj
        for key in path[:-1]:
            target = target[key]
        if draw(st.booleans()) and isinstance(target, dict):
            del target[path[-1]]
        else:
            target[path[-1]] = draw(VALUES)
    return obj


def only_input_errors(fn, *args: Any) -> None:
    """Call ``fn``; success or InputError (one line) are fine, anything else fails the test."""
    try:
        fn(*args)
    except InputError as err:
        text = str(err)
        assert "\n" not in text and len(text) < 2000, text
    except RecursionError:
        pytest.fail("RecursionError")


# ---- the readers under test ---------------------------------------------------------------------------


def read_text_documents(text: str) -> None:
    decode_documents(text, "fuzz.yaml")


def read_pod(obj: Any) -> None:
    from toposched.scheduler.intent import pod_intent
    from toposched.workload import Pod

    pod = Pod.from_dict(obj, "fuzz.yaml")
    pod_intent(pod)
    pod.effective_requests()


def read_node(obj: Any) -> None:
    from toposched.scheduler import NodeSpec

    NodeSpec.from_dict(obj, "fuzz.yaml")


def read_nrt(obj: Any) -> None:
    from toposched.topology.nrt import machine_from_nrt, parse_nrt

    nrt = parse_nrt(obj, "fuzz.yaml")
    machine_from_nrt(nrt)


def read_scenario(obj: Any) -> None:
    from toposched.sim.scenario import load_scenario

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.yaml"
        path.write_text(yaml.safe_dump(obj))
        load_scenario(path)


def read_csv(text: str, kind: str) -> None:
    from toposched.sim.nodes_csv import load_nodes
    from toposched.sim.scenario import load_pods

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{kind}.csv"
        path.write_text(text)
        (load_nodes if kind == "nodes" else load_pods)(path)


def read_hwloc(data: bytes) -> None:
    from toposched.topology.hwloc import read_hwloc_xml

    read_hwloc_xml(data)


SYSFS_FILES = [
    "sys/devices/system/cpu/online", "sys/devices/system/cpu/possible", "sys/devices/system/cpu/present",
    "sys/devices/system/cpu/cpu0/topology/core_id", "sys/devices/system/cpu/cpu0/topology/physical_package_id",
    "sys/devices/system/cpu/cpu0/topology/thread_siblings_list", "sys/devices/system/cpu/cpu1/online",
    "sys/devices/system/node/online", "sys/devices/system/node/node0/cpulist", "sys/devices/system/node/node0/distance",
    "sys/devices/system/node/node0/meminfo", "sys/devices/system/node/node1/distance",
    "sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages",
]
SYSFS_TEXT = st.one_of(st.text(max_size=40), st.sampled_from(["0-99999999", "-1", "0-3,8-11", "10 21 99999999999",
                                                              "Node 0 MemTotal: 99999999999999999999 kB", "", "\x00",
                                                              "0-1,1-0", "4294967296"]))


def read_sysfs_with(changes: list[tuple[str, str]]) -> None:
    from toposched.topology.sysfs import read_sysfs

    with tempfile.TemporaryDirectory() as d:
        root = write_sysfs_tree(Path(d), two_socket_smt())
        for rel, text in changes:
            path = root / rel
            if path.exists() and path.is_file():
                path.write_text(text)
        read_sysfs(root)


def _hwloc_base() -> bytes:
    from tests.topology.test_hwloc import two_socket_gpu_nic

    return two_socket_gpu_nic()


@st.composite
def hwloc_documents(draw: st.DrawFn) -> bytes:
    """The hwloc test machine with some attribute values replaced, or its bytes cut or flipped."""
    import re

    data = _hwloc_base().decode()
    attrs = list(re.finditer(r'="([^"]*)"', data))
    for _ in range(draw(st.integers(1, 4))):
        m = draw(st.sampled_from(attrs))
        value = draw(st.one_of(st.text(alphabet="0123456789abcdefx,-. ", max_size=30),
                               st.sampled_from(["0xffffffff," * 50, "-1", "99999999999999999999", "", "0x0"])))
        data = data[:m.start(1)] + value.replace('"', "") + data[m.end(1):]
        attrs = list(re.finditer(r'="([^"]*)"', data))
    raw = data.encode()
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(raw)))
        raw = raw[:cut]
    return raw


# ---- quick variants (every run) ---------------------------------------------------------------------

@QUICK
@given(st.text(max_size=300))
def test_fuzz_yaml_text(text: str) -> None:
    only_input_errors(read_text_documents, text)


@QUICK
@given(mutated(GOOD_POD))
def test_fuzz_pod_objects(obj: Any) -> None:
    only_input_errors(read_pod, obj)


@QUICK
@given(mutated(GOOD_NODE))
def test_fuzz_node_objects(obj: Any) -> None:
    only_input_errors(read_node, obj)


@QUICK
@given(mutated(good_nrt()))
def test_fuzz_nrt_objects(obj: Any) -> None:
    only_input_errors(read_nrt, obj)


@settings(QUICK, max_examples=15)
@given(mutated(SMALL_SCENARIO))
def test_fuzz_scenarios(obj: Any) -> None:
    obj.setdefault("workload", {}) if isinstance(obj, dict) else None
    only_input_errors(read_scenario, obj)


@QUICK
@given(st.lists(st.lists(st.one_of(st.text(max_size=8), st.integers(-5, 10**20).map(str),
                                   st.sampled_from(["inf", "nan", "1e400", "V100", "G1", ""])),
                         min_size=0, max_size=6), max_size=4),
       st.sampled_from(["nodes", "pods"]))
def test_fuzz_csv(rows: list[list[str]], kind: str) -> None:
    header = ("sn,cpu_milli,memory_mib,gpu,model" if kind == "nodes" else
              "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
              "scheduled_time")
    text = header + "\n" + "\n".join(",".join(r) for r in rows) + "\n"
    only_input_errors(read_csv, text, kind)


@settings(QUICK, max_examples=8)  # each example writes a whole sysfs tree
@given(st.lists(st.tuples(st.sampled_from(SYSFS_FILES), SYSFS_TEXT), min_size=1, max_size=3))
def test_fuzz_sysfs(changes: list[tuple[str, str]]) -> None:
    only_input_errors(read_sysfs_with, changes)


@QUICK
@given(hwloc_documents())
def test_fuzz_hwloc(data: bytes) -> None:
    only_input_errors(read_hwloc, data)


# ---- long variants (TOPOSCHED_FUZZ_SECONDS, marked slow) ----------------------------------------------

def _for_a_while(test, strategy, call) -> None:
    """Run ``call`` on examples of ``strategy`` for about FUZZ_SECONDS."""
    import time

    deadline = time.monotonic() + FUZZ_SECONDS

    @LONG
    @given(strategy)
    def run(value: Any) -> None:
        call(value)

    while time.monotonic() < deadline:  # rounds of 200 fresh random examples until the time is up
        run()


LONG_CASES = {
    "yaml": (st.text(max_size=2000), lambda v: only_input_errors(read_text_documents, v)),
    "pod": (mutated(GOOD_POD), lambda v: only_input_errors(read_pod, v)),
    "node": (mutated(GOOD_NODE), lambda v: only_input_errors(read_node, v)),
    "nrt": (mutated(good_nrt()), lambda v: only_input_errors(read_nrt, v)),
    "scenario": (mutated(SMALL_SCENARIO), lambda v: only_input_errors(read_scenario, v)),
    "sysfs": (st.lists(st.tuples(st.sampled_from(SYSFS_FILES), SYSFS_TEXT), min_size=1, max_size=4),
              lambda v: only_input_errors(read_sysfs_with, v)),
    "hwloc": (hwloc_documents(), lambda v: only_input_errors(read_hwloc, v)),
    "csv": (st.lists(st.lists(st.text(max_size=10), max_size=6), max_size=6).map(
        lambda rows: "sn,cpu_milli,memory_mib,gpu,model\n" + "\n".join(",".join(r) for r in rows)),
        lambda v: only_input_errors(read_csv, v, "nodes")),
}


@pytest.mark.slow
@long_run
@pytest.mark.parametrize("reader", sorted(LONG_CASES))
def test_fuzz_reader_for_minutes(reader: str) -> None:
    strategy, call = LONG_CASES[reader]
    _for_a_while(reader, strategy, call)
