"""``benchmarks/realistic.py --phases``: its timers change no decision, and its split by kind of pod adds up."""

from __future__ import annotations

import itertools

import pytest

from tests.scheduler.test_decisions_identical import _bench


def test_phase_timers_change_no_decision_and_the_kinds_add_up_to_the_whole() -> None:
    bench = _bench("realistic")
    ticks = itertools.count()
    clock = lambda: next(ticks) / 1000.0  # noqa: E731 - every reading one ms on: sums are exact multiples
    plain: list = []
    timed: list = []
    bench.run(40, 300, 3, per_node=3.0, record=plain)
    figures = bench.run(40, 300, 3, per_node=3.0, record=timed, phases=True, clock=clock)
    assert timed == plain
    per_kind = figures["phases_ms_per_pod_by_kind"]
    assert set(per_kind) == set(figures["by_kind"])
    pods = figures["pods"]
    for label, ms in figures["phases_ms_per_pod"].items():
        if label == "schedule (all of it)":
            continue
        split = sum(phases.get(label, 0.0) * figures["by_kind"][name]["pods"] for name, phases in per_kind.items())
        assert split == pytest.approx(ms * pods), label
    assert figures["phases_ms_per_pod"]["filter/NodeResourcesFit"] > 0
