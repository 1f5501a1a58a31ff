"""``toposched.kubelet`` against the real kubelet: the kubelet's own managers as a differential oracle.

Every case (tests/kubelet/oracle_cases.py) is played on the oracle (tests/oracle/kubelet, the
Topology, CPU, memory and device managers of the pinned Kubernetes release) and on
:class:`~toposched.kubelet.KubeletNode`; admissions, reasons, messages, each container's CPUs,
memory blocks and devices, and the CPU pool and memory manager state after every op must be
identical. 500 cases run in every test run; 20,000 with ``pytest -m slow
tests/kubelet/test_oracle.py``. A failing case is written to the oracle's failure file (named in
the assertion); shrunk ones are kept in tests/kubelet/oracle_regressions/ and replayed here.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.kubelet.oracle import Oracle, model_result, normalise
from tests.kubelet.oracle_cases import OPEN_DIVERGENCES, cases
from toposched.topology import CPUSet

_REPO = Path(__file__).resolve().parents[2]
REGRESSIONS = Path(__file__).with_name("oracle_regressions")
_FAILURES = Path(os.environ.get("TOPOSCHED_CACHE", Path.home() / ".cache" / "toposched")) / "kubelet-oracle-failures"


# Named rules: where the kubelet's answer is one of several Go's random map order allows, the
# part left to chance is masked on both sides (docs/kubelet/oracle.md explains each).
RULES = {
    # devicemanager allocateContainerResources ranges over container.Resources.Limits, a map: with
    # two device resources short, which one the error names is random.
    "device-shortage-names-any-resource": (
        re.compile(r"requested number of devices unavailable for \S+\. Requested: \d+, Available: \d+"),
        "requested number of devices unavailable for <one of the resources>",
    ),
}


# Rule misfit-names-any-extended-resource: noderesources fitsRequest checks pods, cpu, memory and
# ephemeral-storage in that order, then ranges over podRequest.ScalarResources, a map: with two
# extended resources (devices, hugepages) short, which one the reason names is random.
_IN_ORDER = ("OutOfpods", "OutOfcpu", "OutOfmemory", "OutOfephemeral-storage")


def apply_rules(result: dict) -> dict:
    """``result`` with the random parts of the kubelet's answers masked (see ``RULES``)."""
    for outcome in result.get("outcomes") or []:
        for pattern, mask in RULES.values():
            if "message" in outcome:
                outcome["message"] = pattern.sub(mask, outcome["message"])
        reason = outcome.get("reason", "")
        if reason.startswith("OutOf") and reason not in _IN_ORDER:
            outcome["reason"], outcome["message"] = "OutOf<an extended resource>", "<misfit-names-any-extended-resource>"
    return result


def first_double_assignment(case: dict, result: dict) -> int | None:
    """Rule uneven-topology-averages: the op after which the kubelet's own CPU state is one no correct
    kubelet reaches (a CPU given to two live containers, or exclusive and in the shared pool at once:
    its takeByTopology's integer averages on uneven machines, docs/kubelet/oracle.md); None when it
    never is. The model differs there on purpose, so the answers are compared up to that op only."""
    live: dict[str, set[int]] = {}
    for i, (op, outcome) in enumerate(zip(case["ops"], result.get("outcomes") or [])):
        shared = set(CPUSet.parse((outcome.get("state") or {}).get("defaultCpuSet") or ""))
        if "remove" in op:
            live.pop(op["remove"], None)
        elif outcome.get("admitted") and _admitted(op, outcome, live):
            return i
        if any(shared & held for held in live.values()):
            return i  # the shared pool holds a CPU a live container has exclusively
    return None


def _admitted(op: dict, outcome: dict, live: dict[str, set[int]]) -> bool:
    """Record an admitted pod's CPUs in ``live``; True when they meet another live pod's, or two of its
    app containers share one (init containers' CPUs are reused by design)."""
    containers = {name: set(CPUSet.parse(c.get("cpus") or "")) for name, c in (outcome.get("containers") or {}).items()}
    app = {c["name"] for c in op["admit"]["spec"].get("containers") or []}
    seen: set[int] = set()
    for name in app & set(containers):
        if containers[name] & seen:
            return True
        seen |= containers[name]
    cpus = set().union(*containers.values()) if containers else set()
    clash = any(cpus & held for held in live.values())
    live[op["admit"]["metadata"]["name"]] = cpus
    return clash


def check(oracle: Oracle, case: dict) -> None:
    """Assert that the model answers ``case`` exactly as the real kubelet does (the named rules aside)."""
    want = apply_rules(normalise(oracle.run(case)))
    got = apply_rules(normalise(model_result(case)))
    if "error" in want or "error" in got:
        # A kubelet that refuses to start: both must refuse (their wording differs by design).
        assert ("error" in want) == ("error" in got), _report(case, want, got) + f"\n errors: {want.get('error')} / {got.get('error')}"
        return
    cut = first_double_assignment(case, want)
    if cut is not None:
        # The rule: from this op on the kubelet's state is one a correct kubelet cannot reach.
        want["outcomes"], got["outcomes"] = want["outcomes"][:cut], got["outcomes"][:cut]
    if want != got:
        raise AssertionError(_report(case, want, got))


def _report(case: dict, want: dict, got: dict) -> str:
    _FAILURES.mkdir(parents=True, exist_ok=True)
    path = _FAILURES / "last.json"
    path.write_text(json.dumps(case, indent=1, sort_keys=True))
    for i, (w, g) in enumerate(zip(want.get("outcomes") or [], got.get("outcomes") or [])):
        if w != g:
            return (f"op {i} ({json.dumps(case['ops'][i])[:200]}) differs:\n kubelet: {json.dumps(w, sort_keys=True)}\n"
                    f" model:   {json.dumps(g, sort_keys=True)}\ncase written to {path}")
    return f"kubelet: {json.dumps(want)[:2000]}\nmodel: {json.dumps(got)[:2000]}\ncase written to {path}"


def test_the_oracle_pins_the_projects_kubernetes_release():
    pin = (_REPO / "tests" / "kubernetes-version").read_text().strip()
    go_mod = (_REPO / "tests" / "oracle" / "kubelet" / "go.mod").read_text()
    assert re.search(rf"^\s*(require\s+)?k8s\.io/kubernetes {re.escape(pin)}$", go_mod, re.M), pin
    staging = re.findall(r"^\s*k8s\.io/(\S+) => k8s\.io/\S+ (\S+)$", go_mod, re.M)
    assert staging and all(version == "v0" + pin[2:] for _, version in staging), staging


def _regressions() -> list:
    """Each kept case; one whose divergence is still open (its ``open`` field names the entry of
    ``OPEN_DIVERGENCES``) must still fail: a strict xfail turns red once the model is fixed."""
    params = []
    for path in sorted(REGRESSIONS.glob("*.json")):
        name = json.loads(path.read_text()).get("open")
        marks = [pytest.mark.xfail(strict=True, reason=f"open divergence {name}: {OPEN_DIVERGENCES[name]}")] if name else []
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


@pytest.mark.parametrize("path", _regressions())
def test_regression_cases_match_the_kubelet(kubelet_oracle, path):
    case = json.loads(path.read_text())
    case.pop("open", None)
    case.pop("rule", None)  # a case kept for a named rule: checked under it like any other
    check(kubelet_oracle, case)


@settings(max_examples=500, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=cases())
def test_500_random_cases_match_the_kubelet(kubelet_oracle, case):
    check(kubelet_oracle, case)


@pytest.fixture(scope="session")
def slow_selected(pytestconfig) -> None:
    """Skips unless the run selected the slow tests (``-m slow``): 20,000 cases take long."""
    if "slow" not in (pytestconfig.getoption("markexpr") or ""):
        pytest.skip("20,000 cases: run with `pytest -m slow tests/kubelet/test_oracle.py`")


@pytest.mark.slow
@settings(max_examples=20_000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=cases())
def test_20000_random_cases_match_the_kubelet(slow_selected, kubelet_oracle, case):
    check(kubelet_oracle, case)
