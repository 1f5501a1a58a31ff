"""The distribute-cpus-across-numa search: the compiled form against the Python form.

``toposched.kubelet.numa_distribution.best_combination`` runs the compiled search when the
extension is built and the Python form otherwise; upstream's test table for
``takeByTopologyNUMADistributed`` is in test_cpu_assignment.py (it runs whichever form is built).
Here the two forms must give the same combination and remainder subset, floating-point ties
included, for any free counts, group size, combination size and socket layout.
"""

from __future__ import annotations

import random
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.kubelet import numa_distribution
from toposched.kubelet.cpu_assignment import take_by_topology
from toposched.topology import CPUSet, Machine

needs_compiled = pytest.mark.skipif(numa_distribution.compiled is None,
                                    reason="the _numa_distribution extension is not built (no C compiler at install)")


def python_form(free: list[int], count: int, group: int, k: int, sockets: list[int] | None):
    return numa_distribution._best_combination(list(free), count, group, k, sockets)


@st.composite
def searches(draw: st.DrawFn) -> tuple[list[int], int, int, int, list[int] | None]:
    n = draw(st.integers(1, 9))
    # Few distinct free counts: ties between splits (equal balances) are the case that orders matter for.
    free = draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 6, 8, 11, 16]), min_size=n, max_size=n))
    group = draw(st.sampled_from([1, 1, 2, 3, 4]))
    count = group * draw(st.integers(0, max(1, sum(free) // group + 1)))
    k = draw(st.integers(1, n + 1))
    sockets = None
    if draw(st.booleans()):
        sockets = [1 << draw(st.integers(0, 2)) | (draw(st.sampled_from([0, 0, 0, 2])) if i % 3 == 0 else 0)
                   for i in range(n)]
    return free, count, group, k, sockets


@needs_compiled
@settings(max_examples=600, deadline=None)
@given(searches())
def test_compiled_search_equals_the_python_form(case: tuple[list[int], int, int, int, list[int] | None]) -> None:
    free, count, group, k, sockets = case
    compiled = numa_distribution.compiled.best_combination(list(free), count, group, k, sockets)  # type: ignore[union-attr]
    assert compiled == python_form(free, count, group, k, sockets)


def sixteen_numa_machine() -> Machine:
    """16 NUMA nodes of 4 two-thread cores, 8 per socket: a request can be split thousands of ways."""
    rows = [{"cpu": c + t * 64, "core": c, "socket": c // 32, "numa": c // 4} for t in range(2) for c in range(64)]
    return Machine.from_cpu_table(rows)


@needs_compiled
def test_both_forms_take_the_same_cpus_on_a_sixteen_numa_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = sixteen_numa_machine()
    rnd = random.Random(3)
    cases = []
    for _ in range(60):
        share = rnd.choice((0.5, 0.8, 1.0))
        available = CPUSet([c.id for c in machine.cpus if rnd.random() < share])
        cases.append((available, rnd.choice([2, 4, 6, 12, 16, 24, 30]), rnd.choice([1, 2]), rnd.random() < 0.3))

    def take_all() -> list[object]:
        out: list[object] = []
        for available, count, group, by_socket in cases:
            try:
                out.append(take_by_topology(machine, available, count, distribute=True, cpu_group_size=group,
                                            align_by_socket=by_socket))
            except Exception as err:  # noqa: BLE001 - the error's text is compared too
                out.append(f"{type(err).__name__}: {err}")
        return out

    compiled = take_all()
    monkeypatch.setattr(numa_distribution, "compiled", None)
    assert compiled == take_all()
    assert any(isinstance(result, CPUSet) and len(result) >= 12 for result in compiled)


@needs_compiled
@pytest.mark.parametrize(("args", "error"), [
    (([1] * 65, 1, 1, 1, None), ValueError),
    (([1, -1], 1, 1, 1, None), ValueError),
    (([1, 2], 1, 0, 1, None), ValueError),
    (([1, 2], 1, 1, 0, None), ValueError),
    (([1, 2], 1, 1, 1, [1]), ValueError),
    (((1, 2), 1, 1, 1, None), TypeError),
])
def test_the_compiled_search_refuses_what_it_cannot_represent(args: tuple, error: type) -> None:
    with pytest.raises(error):
        numa_distribution.compiled.best_combination(*args)  # type: ignore[union-attr]


@pytest.mark.parametrize("compiled", [True, False])
def test_a_k_or_group_below_one_is_refused_by_either_form(compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not compiled:
        monkeypatch.setattr(numa_distribution, "compiled", None)
    for k, group in ((0, 1), (1, 0)):
        with pytest.raises(ValueError):
            numa_distribution.best_combination([2, 2], 0, group, k, None)


def test_more_numa_nodes_than_the_extension_holds_run_the_python_form() -> None:
    free = [2] * 70
    assert numa_distribution.best_combination(free, 4, 2, 2, None) == ((0, 1), None)


# ---- the combination as upstream's slices keep it ------------------------------------------------


class _GoSlice:
    """A Go ``[]int``: a window (length, capacity) on a backing list other slices may share."""

    def __init__(self, backing: list[int], length: int) -> None:
        self.backing, self.length = backing, length

    def append(self, value: int) -> _GoSlice:
        cap = len(self.backing)
        if self.length < cap:  # room left: written in place, the backing shared
            self.backing[self.length] = value
            return _GoSlice(self.backing, self.length + 1)
        grown = [0] * max(1, 2 * cap)  # Go doubles small int slices: 1, 2, 4, 8, ... (size classes)
        grown[:self.length] = self.backing[:self.length]
        grown[self.length] = value
        return _GoSlice(grown, self.length + 1)

    def values(self) -> tuple[int, ...]:
        return tuple(self.backing[:self.length])


def _go_iterate(n: int, k: int, visit) -> None:
    """Upstream ``iterateCombinations`` over ``range(n)``: ``visit`` gets each combination as a slice
    and returns True to break."""
    def helper(k: int, start: int, accum: _GoSlice) -> bool:
        if k == 0:
            return visit(accum)
        return any(helper(k - 1, i + 1, accum.append(i)) for i in range(start, n - k + 1))  # stops at a break
    helper(k, 0, _GoSlice([], 0))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))), st.data())
def test_the_kept_combination_is_what_go_slices_hold(nk, data):
    """_overwritten against Go's append, simulated: keep the slice of one combination, let the search
    go on (to its end, or to a break some combinations later) and read the slice at the end."""
    n, k = nk
    every = list(combinations(range(n), k))
    chosen = data.draw(st.integers(0, len(every) - 1))
    stop = data.draw(st.one_of(st.none(), st.integers(chosen + 1, len(every)).filter(lambda s: s < len(every))))
    kept, seen = [], []

    def visit(accum: _GoSlice) -> bool:
        seen.append(accum.values())
        if len(seen) - 1 == chosen:
            kept.append(accum)
        return stop is not None and len(seen) - 1 == stop

    _go_iterate(n, k, visit)
    assert seen == every[:None if stop is None else stop + 1]  # upstream's order is lexicographic
    last = every[stop] if stop is not None else None
    assert numa_distribution._overwritten(every[chosen], last, n) == kept[0].values()


def test_distributed_cpus_come_from_the_combination_go_keeps():
    """The case the kubelet oracle found: six NUMA nodes of one CPU on three sockets, CPU 0 taken, four
    CPUs spread: every four of the NUMA nodes 1-5 balance alike, the search keeps the first, {1,2,3,4},
    and the next one, {1,2,3,5}, overwrites its last node. The kubelet takes CPUs 1, 2, 3 and 5."""
    rows = [{"cpu": c, "core": c, "socket": c // 2, "numa": c} for c in range(6)]
    machine = Machine.from_cpu_table(rows, memory_per_numa=2**32,
                                     distances={a: {b: 10 if a == b else 11 for b in range(6)} for a in range(6)})
    for built in (numa_distribution.compiled, None):
        saved, numa_distribution.compiled = numa_distribution.compiled, built
        try:
            assert take_by_topology(machine, CPUSet([1, 2, 3, 4, 5]), 4, distribute=True) == CPUSet([1, 2, 3, 5])
        finally:
            numa_distribution.compiled = saved
