"""The compiled row loops give what their NumPy forms give, bit for bit, and refuse arrays they cannot read.

Each loop of ``_rowloops.c`` is run on random arrays (row counts from 0 to a few hundred, values
across the whole int64 range where the loop allows it, arrays strided as the node table's views
and gathers are) against its NumPy form, which runs with ``rowloops.compiled`` set to None. The
NodeResourcesFit score is also checked against upstream's formula in Python integers, over
amounts beyond 2**52 where the float division would no longer be exact.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from toposched.scheduler import rowloops
from toposched.scheduler.plugins.numa import AlignedRequest, _containers_in_turn, zones_hold_requests
from toposched.scheduler.plugins.scarcity import ScarcityScore, after_zone_totals, held_rows, row_losses
from toposched.workload import Container, Pod

compiled = rowloops.compiled
needs_compiled = pytest.mark.skipif(compiled is None, reason="the _rowloops extension was not built (no C compiler)")
SETTINGS = {"deadline": None, "derandomize": True, "max_examples": 150,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


@contextmanager
def numpy_forms() -> Iterator[None]:
    """The plugins' loops run their NumPy forms inside (``rowloops.compiled`` None)."""
    saved = rowloops.compiled
    rowloops.compiled = None
    try:
        yield
    finally:
        rowloops.compiled = saved


def _strided(array: np.ndarray, spare: int) -> np.ndarray:
    """``array`` as a view of a larger array along its last axis (the table's views end at the row count)."""
    big = np.zeros((*array.shape[:-1], array.shape[-1] + spare), dtype=array.dtype)
    big[..., :array.shape[-1]] = array
    return big[..., :array.shape[-1]]


def _gathered(array: np.ndarray) -> np.ndarray:
    """``array`` laid out as fancy indexing of a strided view lays it out: the rows axis not contiguous."""
    return np.asfortranarray(array)


# ---- ScarcityScore ------------------------------------------------------------------------------

@st.composite
def scarcity_inputs(draw: st.DrawFn) -> tuple:
    shapes = draw(st.integers(1, 5))
    rows = draw(st.integers(0, 300))
    seed = draw(st.integers(0, 2**32 - 1))
    rnd = np.random.default_rng(seed)
    need = rnd.integers(1, 5000, size=(2, shapes))
    free = rnd.integers(0, 60_000, size=(2, rows))
    if rows and draw(st.booleans()):  # amounts about the float quotients' bound: the exact loop takes them
        free.flat[rnd.integers(0, free.size, size=2)] = 2**51 + rnd.integers(-2, 2, size=2)
    totals = rnd.integers(0, 40, size=(shapes, rows))
    before = np.minimum(totals, np.minimum(free[0] // need[0][:, None], free[1] // need[1][:, None]))
    after_totals = np.maximum(totals - rnd.integers(0, 3, size=(shapes, rows)), 0)
    take = rnd.integers(0, 20_000, size=2)
    value = rnd.random(shapes) * draw(st.sampled_from([1e-6, 1.0, 1e3, 1e9]))
    able = rnd.random(rows) < 0.7
    return before, free, need, take, after_totals, value, able, draw(st.integers(0, 3))


@needs_compiled
@settings(**SETTINGS)
@given(scarcity_inputs())
def test_scarcity_losses_are_the_numpy_ones(inputs: tuple) -> None:
    *arrays, spare = inputs
    rows = len(arrays[-1])
    fast = row_losses(*(_strided(a, spare) if a.ndim >= 2 and a.shape[-1] == rows else a for a in arrays))
    with numpy_forms():
        slow = row_losses(*arrays)
    assert fast.dtype == slow.dtype == np.int64
    np.testing.assert_array_equal(fast, slow)


def test_scarcity_losses_round_half_to_even_as_numpy() -> None:
    """A loss of exactly k + 0.5 millionths rounds to the even neighbour, as ``np.round`` does."""
    before = np.array([[1, 1, 1, 1]])
    free = np.zeros((2, 4), dtype=np.int64)
    value = np.array([2.5e-6])  # one pod lost: 2.5 in fixed point
    out = row_losses(before, free, np.ones((2, 1), dtype=np.int64), np.zeros(2, dtype=np.int64),
                     np.zeros((1, 4), dtype=np.int64), value, np.ones(4, dtype=bool))
    assert out.tolist() == [round(2.5e-6 * 1e6)] * 4 == [2] * 4


def test_scarcity_losses_count_a_pod_taking_more_than_is_free_as_holding_none() -> None:
    """Where the pod takes more CPU than the row has free, the row holds no pod of any shape after it,
    however many its zones would hold: the loss is every pod it held."""
    before = np.array([[3, 0]])
    free = np.array([[2000, 2000], [10**9, 10**9]])
    out = row_losses(before, free, np.array([[500], [1]]), np.array([2500, 0]), np.array([[9, 9]]), np.array([1e-6]),
                     np.ones(2, dtype=bool))
    assert out.tolist() == [3, 0]


@needs_compiled
@settings(**SETTINGS)
@given(st.lists(st.one_of(st.integers(0, 10**6), st.integers(0, 2**63 - 1)), max_size=60), st.integers(0, 3))
def test_normalized_scarcity_scores_are_the_numpy_ones(values: list[int], spare: int) -> None:
    """ScarcityScore's min-max normalisation of raw losses (at least 0), compiled (float quotients for
    small spans, exact division beyond, NumPy's wrapping where the scaled differences overflow) and
    in NumPy."""
    plugin = ScarcityScore({})
    raw = np.array(values, dtype=np.int64)
    fast = plugin.normalize_scores(None, None, _strided(raw, spare))  # type: ignore[arg-type]
    with numpy_forms():
        slow = plugin.normalize_scores(None, None, raw)  # type: ignore[arg-type]
    assert fast.dtype == slow.dtype == np.int64
    np.testing.assert_array_equal(fast, slow)


@st.composite
def kept_rows_inputs(draw: st.DrawFn) -> tuple:
    rnd = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    columns, zones, size, spare = draw(st.integers(2, 5)), draw(st.integers(1, 8)), draw(st.integers(1, 120)), draw(st.integers(0, 4))
    shapes = draw(st.integers(1, 4))
    # Every row in order, the kept arrays as long as the table: the loop's plane-by-plane form, whose
    # float quotients hold for amounts in [0, 2**51) (it falls back to the row-by-row loop beyond).
    every = draw(st.booleans())
    low = 0 if every and draw(st.booleans()) else -3000  # negative: floored as NumPy does
    zfree = rnd.integers(low, 40_000, size=(columns, zones, size))
    free = rnd.integers(5 * low // 3, 200_000, size=(3, size))
    if draw(st.booleans()):  # amounts about the float quotients' bound
        zfree.flat[rnd.integers(0, zfree.size, size=3)] = 2**51 + rnd.integers(-2, 2, size=3)
        free.flat[rnd.integers(0, free.size, size=2)] = 2**51 + rnd.integers(-2, 2, size=2)
    zfree, free = _strided(zfree, spare), _strided(free, spare)
    zvalid = _strided(rnd.random((zones, size)) < 0.8, spare)
    rows = np.arange(size) if every else np.flatnonzero(rnd.random(size) < draw(st.sampled_from([0.05, 0.5, 1.0])))
    able = rnd.random(len(rows)) < 0.8
    union = np.sort(rnd.choice(columns, size=draw(st.integers(1, columns)), replace=False)).astype(np.int64)
    need = rnd.integers(1, 5000, size=(shapes, len(union)))
    ignored = rnd.random((shapes, len(union))) < 0.4
    ignored[:, 0] = False  # every shape needs some column (CPU and memory, in the plugin)
    need_cm = rnd.integers(1, 9000, size=(2, shapes))
    cm = rnd.choice(3, size=2, replace=False).astype(np.int64)
    width = size if every else size + spare
    kept = (rnd.integers(0, 9, size=(shapes, width)), rnd.integers(0, 9, size=(2, width)),
            rnd.integers(0, 9, size=(shapes, width)))
    return rows, zfree, zvalid, able, free, union, cm, need, ignored, need_cm, kept


@needs_compiled
@settings(**SETTINGS)
@given(kept_rows_inputs())
def test_kept_rows_are_the_numpy_ones(inputs: tuple) -> None:
    *arrays, kept = inputs
    fast = tuple(a.copy() for a in kept)
    held_rows(*arrays, fast)
    slow = tuple(a.copy() for a in kept)
    with numpy_forms():
        held_rows(*arrays, slow)
    for name, f, s in zip(("totals", "free", "holds"), fast, slow):
        np.testing.assert_array_equal(f, s, err_msg=name)


class _ZoneTable:
    """What :func:`after_zone_totals` reads of a NodeTable: zone columns by name, the zone arrays
    as views ending at the row count, and one zone slot per row read through the flat index."""

    def __init__(self, zfree: np.ndarray, zvalid: np.ndarray, size: int) -> None:
        self._zfree, self._zvalid, self.size = zfree, zvalid, size
        self.zone_resources = [f"r{c}" for c in range(len(zfree))]

    def view(self, name: str) -> np.ndarray:
        assert name == "zfree"
        return self._zfree[..., :self.size]

    def zone_valid(self) -> np.ndarray:
        return self._zvalid[..., :self.size]

    def zone_free_at(self, resource: str, zones: np.ndarray, rows: np.ndarray) -> np.ndarray:
        block = self._zfree[self.zone_resources.index(resource)]
        return block.take(zones * block.shape[1] + rows)


@st.composite
def zone_totals_inputs(draw: st.DrawFn) -> tuple:
    rnd = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    columns, zones, size, spare = draw(st.integers(2, 5)), draw(st.integers(1, 8)), draw(st.integers(1, 150)), draw(st.integers(0, 3))
    shapes = draw(st.integers(1, 4))
    # Amounts around 2**51 and beyond (the loop's float quotients stop there), below 0 at times (an
    # over-committed zone), and small ones whose needs divide them often (remainders at the edges).
    scale = draw(st.sampled_from([(0, 40_000), (-500, 500), (2**51 - 5000, 2**51 + 5000), (2**61, 2**62)]))
    zfree = rnd.integers(*scale, size=(columns, zones, size + spare))
    top_need = draw(st.sampled_from([4, 5000]))
    table = _ZoneTable(zfree, rnd.random((zones, size + spare)) < 0.8, size)
    union = sorted(rnd.choice(columns, size=draw(st.integers(1, columns)), replace=False).tolist())
    cols = [sorted({union[0], *rnd.choice(union, size=rnd.integers(1, len(union) + 1)).tolist()}) for _ in range(shapes)]
    union = sorted({c for shape in cols for c in shape})
    needs = [rnd.integers(1, top_need, size=len(shape)) for shape in cols]
    need = np.ones((shapes, len(union)), dtype=np.int64)
    ignored = np.ones((shapes, len(union)), dtype=bool)
    for k, (shape, shape_needs) in enumerate(zip(cols, needs)):
        for c, n in zip(shape, shape_needs.tolist()):
            need[k, union.index(c)], ignored[k, union.index(c)] = n, False
    requested = rnd.choice(columns, size=rnd.integers(1, columns + 1), replace=False).tolist()
    zone_request = {f"r{c}": int(rnd.integers(0, 20_000 if top_need > 4 else 9)) for c in requested}
    asked = np.flatnonzero(rnd.random(size) < 0.5) if draw(st.booleans()) else None
    n = size if asked is None else len(asked)
    totals = rnd.integers(0, 60, size=(shapes, n))
    firsts = rnd.integers(0, zones + 1, size=n)  # the zone count: no zone holds the request
    able = rnd.random(n) < 0.8
    return table, totals, cols, needs, (union, need, ignored), zone_request, firsts, able, asked


@needs_compiled
@settings(**SETTINGS)
@given(zone_totals_inputs())
def test_zone_totals_are_the_numpy_ones(inputs: tuple) -> None:
    fast = after_zone_totals(*inputs)
    with numpy_forms():
        slow = after_zone_totals(*inputs)
    np.testing.assert_array_equal(fast, slow)


@needs_compiled
def test_zone_totals_where_float_quotients_fall_short() -> None:
    """The compiled loop divides by a float product and corrects by the remainder: amounts where the
    product falls one short of the quotient (byte-sized needs, exact multiples) still give NumPy's answer."""
    rnd = np.random.default_rng(7)
    amounts, divisors = [], []
    while len(amounts) < 64:
        d = int(rnd.integers(2**30, 2**40))
        a = d * int(rnd.integers(1, 2**51 // d))
        if math.floor(a * (1.0 / d)) < a // d:  # Python's floats are the C loop's doubles
            amounts.append(a)
            divisors.append(d)
    for a, d in zip(amounts, divisors):
        zfree = np.array([[[a, a - 1, a + 1]]], dtype=np.int64)
        table = _ZoneTable(zfree, np.ones((1, 3), dtype=bool), 3)
        need, ignored = np.array([[d]], dtype=np.int64), np.zeros((1, 1), dtype=bool)
        for taken in (0, 1, d - 1, d, d + 1, 3 * d):
            inputs = (table, np.full((1, 3), 50, dtype=np.int64), [[0]], [need[0]], ([0], need, ignored), {"r0": taken},
                      np.zeros(3, dtype=np.int64), np.ones(3, dtype=bool), None)
            fast = after_zone_totals(*inputs)
            expected = [50 - (f // d - (f - taken) // d) for f in (a, a - 1, a + 1)]
            with numpy_forms():
                assert fast.tolist() == after_zone_totals(*inputs).tolist() == [expected]


# ---- zones holding a request ----------------------------------------------------------------------

@st.composite
def zone_inputs(draw: st.DrawFn) -> tuple:
    zones = draw(st.integers(1, 16))
    rows = draw(st.integers(0, 200))
    resources = draw(st.integers(0, 4))
    rnd = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    valid = rnd.random((zones, rows)) < 0.8
    frees = [rnd.integers(-5, 100, size=(zones, rows)) for _ in range(resources)]
    needs: list = []
    for _ in range(resources):
        kind = draw(st.sampled_from(["number", "rows", "any"]))
        if kind == "number":
            needs.append(draw(st.integers(-10, 120)))
        else:
            per_row = rnd.integers(0, 120, size=rows)
            if kind == "any":  # rows a resource is not aligned on need the least integer
                per_row[rnd.random(rows) < 0.5] = np.iinfo(np.int64).min
            needs.append(per_row)
    layout = draw(st.sampled_from(["contiguous", "strided", "gathered"]))
    asked = None
    if draw(st.booleans()):  # some rows asked, in order, the needs given per asked row
        asked = np.flatnonzero(rnd.random(rows) < 0.4)
        needs = [n if isinstance(n, int) else n[asked] for n in needs]
    return valid, frees, needs, layout, asked


@needs_compiled
@settings(**SETTINGS)
@given(zone_inputs())
def test_zones_holding_are_the_numpy_ones(inputs: tuple) -> None:
    valid, frees, needs, layout, asked = inputs
    laid = {"contiguous": lambda a: a, "strided": lambda a: _strided(a, 3), "gathered": _gathered}[layout]
    fast_first = rowloops.first_zone_holding(laid(valid), [laid(f) for f in frees], needs, asked)
    fast_any = rowloops.any_zone_holding(laid(valid), [laid(f) for f in frees], needs, asked)
    with numpy_forms():
        slow_first = rowloops.first_zone_holding(valid, frees, needs, asked)
        slow_any = rowloops.any_zone_holding(valid, frees, needs, asked)
    positions = range(valid.shape[1]) if asked is None else asked.tolist()
    expected = [next((z for z in range(len(valid)) if valid[z, row] and all(
        f[z, row] >= (n if isinstance(n, int) else n[j]) for f, n in zip(frees, needs))), len(valid))
        for j, row in enumerate(positions)]
    assert fast_first.tolist() == slow_first.tolist() == expected
    assert fast_any.tolist() == slow_any.tolist() == [z < len(valid) for z in expected]


# ---- NUMAAlignment: requests held by one zone -------------------------------------------------------

@st.composite
def request_inputs(draw: st.DrawFn) -> tuple:
    zones, rows = draw(st.sampled_from([1, 2, 2, 4, 8])), draw(st.integers(0, 200))
    # Memory and hugepages most often: the restricted rule judges them together.
    aligned_by = draw(st.lists(st.sampled_from(["cpu", "memory", "memory", "memory", ""]), min_size=0, max_size=4))
    rnd = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    top = draw(st.sampled_from([4, 12, 100]))  # small amounts: needs equal to capacities and free amounts often
    valid = rnd.random((zones, rows)) < 0.8
    caps = [rnd.integers(0, top, size=(zones, rows)) * (rnd.random((zones, rows)) < 0.9) for _ in aligned_by]
    frees = [cap - rnd.integers(0, top // 3, size=(zones, rows)) for cap in caps]  # below 0 at times, as over-commitment leaves
    widest = [cap.max(axis=0, initial=0) for cap in caps]
    needs = rnd.integers(0, top + 2, size=(draw(st.integers(0, 3)), len(aligned_by))) * (rnd.random((1, len(aligned_by))) < 0.8)
    cpu_static, mem_static = rnd.random(rows) < 0.7, rnd.random(rows) < 0.7
    asked = np.flatnonzero(rnd.random(rows) < draw(st.sampled_from([0.05, 0.5, 1.0])))
    return valid, frees, caps, widest, cpu_static, mem_static, aligned_by, needs, draw(st.booleans()), asked


def _request_held(row: int, inputs: tuple) -> bool:
    """The rule :func:`zones_hold_requests` states, one row at a time in Python integers."""
    valid, frees, caps, widest, cpu_static, mem_static, aligned_by, needs, restricted, _ = inputs
    exempt = [by == "cpu" and not cpu_static[row] or by == "memory" and not mem_static[row] for by in aligned_by]
    for want in needs.tolist():
        counted_in = set(range(len(want)))
        if restricted:
            memory = [r for r, by in enumerate(aligned_by) if by == "memory" and want[r]]
            kinds, counted_in = set(), set()
            for r, need in enumerate(want):
                if not need:
                    if not exempt[r]:
                        counted_in.add(r)
                    continue
                if r in memory and len(memory) > 1:
                    single = any(all(caps[m][z, row] >= want[m] for m in memory) for z in range(len(valid)))
                    counted = any(widest[m][row] > 0 for m in memory)
                else:
                    single, counted = widest[r][row] >= need, widest[r][row] > 0
                if counted and not exempt[r]:
                    kinds.add(single)
                    if single:
                        counted_in.add(r)
            if kinds == {True, False}:
                return False
        else:
            counted_in = {r for r in counted_in if not exempt[r]}
        if not any(valid[z, row] and all(frees[r][z, row] >= want[r] for r in counted_in) for z in range(len(valid))):
            return False
    return True


@needs_compiled
@settings(**SETTINGS)
@given(request_inputs())
def test_requests_held_by_one_zone_are_the_numpy_ones(inputs: tuple) -> None:
    fast = zones_hold_requests(*inputs)
    with numpy_forms():
        slow = zones_hold_requests(*inputs)
    assert fast.tolist() == slow.tolist() == [_request_held(row, inputs) for row in inputs[-1].tolist()]


class _WalkTable:
    """What :func:`_containers_in_turn` reads of a node table, random: free amounts and capacities per zone
    (some free amounts below 0, as over-commitment leaves them), valid slots, memory groups."""

    def __init__(self, names: list[str], zones: int, rows: int, rnd: np.random.Generator) -> None:
        self._cap = {n: rnd.integers(0, 9, size=(zones, rows)) * (2**30 if n != "cpu" else 1000) for n in names}
        self._free = {n: cap - rnd.integers(0, 4, size=(zones, rows)) * (2**30 if n != "cpu" else 1000)
                      for n, cap in self._cap.items()}
        self._valid = rnd.random((zones, rows)) < 0.9
        self._split = rnd.random((zones, rows)) < 0.15
        self._held = rnd.random((zones, rows)) < 0.3

    def zone_free(self, name: str) -> np.ndarray:
        return self._free[name]

    def zone_capacity(self, name: str) -> np.ndarray:
        return self._cap[name]

    def zone_capacity_max(self, name: str) -> np.ndarray:
        return self._cap[name].max(axis=0)

    def zone_valid(self) -> np.ndarray:
        return self._valid

    def zone_split(self) -> np.ndarray:
        return self._split

    def zone_held(self) -> np.ndarray:
        return self._held


@st.composite
def walks(draw: st.DrawFn) -> tuple:
    """A Guaranteed pod whose containers a container-scope kubelet places in turn, and random zones."""
    def container(name: str, restart: str | None = None) -> Container:
        limits = {"cpu": draw(st.sampled_from([500, 1000, 2000, 3000, 5000, 8000])),
                  "memory": draw(st.integers(1, 8)) * 2**30}
        if draw(st.booleans()):
            limits["hugepages-1Gi"] = draw(st.integers(1, 4)) * 2**30
        return Container(name, limits=limits, restart_policy=restart)
    inits = tuple(container(f"i{k}", draw(st.sampled_from([None, None, "Always"])))
                  for k in range(draw(st.integers(0, 2))))
    pod = Pod("p", uid="p", init_containers=inits,
              containers=tuple(container(f"c{k}") for k in range(draw(st.integers(1, 4)))))
    request = AlignedRequest(pod)
    assume(request.walk)
    rnd = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    zones, size = draw(st.integers(1, 4)), draw(st.integers(1, 60))
    table = _WalkTable(request.stacked[0], zones, size, rnd)
    rows = np.flatnonzero(rnd.random(size) < 0.7)
    restricted, lenient = draw(st.sampled_from([(False, False), (True, False), (False, True)]))
    if lenient:  # as _lenient_memory asks: no CPU aligned, memory aligned everywhere
        cpu_static, mem_static = np.zeros(len(rows), dtype=bool), np.ones(len(rows), dtype=bool)
    else:
        cpu_static, mem_static = rnd.random(len(rows)) < 0.8, rnd.random(len(rows)) < 0.8
    return table, rows, request, cpu_static, mem_static, restricted, lenient


@needs_compiled
@settings(**{**SETTINGS, "max_examples": 400})
@given(walks())
def test_containers_in_turn_are_the_numpy_ones(inputs: tuple) -> None:
    table, rows, request, cpu_static, mem_static, restricted, lenient = inputs
    fast = _containers_in_turn(table, rows, request, cpu_static, mem_static, restricted, lenient)
    with numpy_forms():
        slow = _containers_in_turn(table, rows, request, cpu_static, mem_static, restricted, lenient)
    assert fast.tolist() == slow.tolist()


# ---- the node table's derived arrays ------------------------------------------------------------------

@needs_compiled
@settings(**SETTINGS)
@given(st.integers(1, 5), st.integers(1, 4), st.integers(1, 9), st.integers(0, 120), st.sampled_from([2**20, 2**62]),
       st.integers(0, 2**32 - 1))
def test_derived_rows_are_the_numpy_ones(resources: int, zoned: int, zones: int, size: int, top: int, seed: int) -> None:
    rnd = np.random.default_rng(seed)
    alloc, used = (rnd.integers(-top, top, size=(resources, size + 3)) for _ in range(2))  # 2**62: differences wrap
    zfree = rnd.integers(-top, top, size=(zoned, zones, size + 3))
    rows = np.flatnonzero(rnd.random(size + 3) < 0.3)
    outputs = []
    for form in ("compiled", "numpy"):
        free, zmax, zsum = (np.full((n, size + 3), -7, dtype=np.int64) for n in (resources, zoned, zoned))
        with numpy_forms() if form == "numpy" else nullcontext():
            rowloops.derive_rows(alloc, used, zfree, free, zmax, zsum, rows)
        outputs.append((free, zmax, zsum))
    for fast, slow in zip(*outputs):
        np.testing.assert_array_equal(fast, slow)
    untouched = np.setdiff1d(np.arange(size + 3), rows)
    assert (outputs[0][0][:, untouched] == -7).all()


# ---- NodeResourcesFit -----------------------------------------------------------------------------

@needs_compiled
@settings(**SETTINGS)
@given(st.integers(0, 300), st.integers(1, 63), st.integers(0, 2**32 - 1))
def test_short_bits_are_the_numpy_ones(rows: int, count: int, seed: int) -> None:
    rnd = np.random.default_rng(seed)
    arrays = [rnd.integers(-50, 50, size=rows) for _ in range(count)]
    least = [int(v) for v in rnd.integers(-60, 60, size=count)]
    asked = np.flatnonzero(rnd.random(rows) < 0.5) if seed % 2 else None
    fast = rowloops.short_bits(arrays, least, asked)
    with numpy_forms():
        slow = rowloops.short_bits(arrays, least, asked)
    positions = range(rows) if asked is None else asked.tolist()
    expected = [sum(1 << r for r in range(count) if arrays[r][j] < least[r]) for j in positions]
    assert fast.dtype == slow.dtype == np.int64
    assert fast.tolist() == slow.tolist() == expected


def test_short_bits_refuse_more_amounts_than_bits() -> None:
    with pytest.raises(ValueError, match="1 to 63"):
        rowloops.short_bits([np.zeros(2, dtype=np.int64)] * 64, [0] * 64)


def _upstream_fit_score(most: bool, values: list[int], allocs: list[int], wants: list[int], weights: list[int]) -> int:
    total = 0
    for value, alloc, want, weight in zip(values, allocs, wants, weights):
        if alloc <= 0:
            continue  # nothing allocatable scores 0 (max(alloc, 1) divides a numerator of 0)
        if most:
            total += max(min(value + want, alloc), 0) * 100 // alloc * weight
        elif value - want >= 0:
            total += (value - want) * 100 // alloc * weight
    return total // sum(weights)


@needs_compiled
@settings(**SETTINGS)
@given(st.booleans(), st.integers(0, 100), st.lists(st.integers(1, 7), min_size=1, max_size=4),
       st.sampled_from([10**4, 2**40, 2**55]), st.integers(0, 2**32 - 1))
def test_fit_score_is_upstreams_formula(most: bool, rows: int, weights: list[int], scale: int, seed: int) -> None:
    """Exact also where amounts pass 2**52 and the float division would not be (the loop then divides integers)."""
    rnd = np.random.default_rng(seed)
    allocs = [rnd.integers(-2, scale, size=rows, dtype=np.int64) for _ in weights]
    values = [a - rnd.integers(0, scale, size=rows, dtype=np.int64) if not most  # free = alloc - used
              else rnd.integers(0, scale, size=rows, dtype=np.int64) for a in allocs]
    wants = [int(rnd.integers(0, scale // 4 + 1)) for _ in weights]
    asked = np.flatnonzero(rnd.random(rows) < 0.5) if seed % 2 else None
    positions = range(rows) if asked is None else asked.tolist()
    out = np.empty(len(positions), dtype=np.int64)
    compiled.fit_score(most, values, allocs, wants, weights, out, asked)  # type: ignore[union-attr]
    expected = [_upstream_fit_score(most, [int(v[j]) for v in values], [int(a[j]) for a in allocs], wants, weights)
                for j in positions]
    assert out.tolist() == expected


# ---- the framework ---------------------------------------------------------------------------------

@needs_compiled
@settings(**SETTINGS)
@given(st.integers(0, 200), st.booleans(), st.booleans(), st.integers(0, 2**32 - 1))
def test_refusals_are_booked_as_numpy_books_them(size: int, with_at: bool, with_codes: bool, seed: int) -> None:
    rnd = np.random.default_rng(seed)
    pending = np.flatnonzero(rnd.random(size) < 0.7)
    at = rnd.integers(0, 10_000, size=len(pending)) if with_at else None
    mask = rnd.random(len(pending)) < 0.6
    verdict = np.full(size, -1, dtype=np.int64)
    codes = rnd.integers(0, 5, size=len(pending)) if with_codes else None
    lut = rnd.integers(0, 50, size=5) if with_codes else None
    kept_pending = np.empty(len(pending), dtype=np.int64)
    kept_at = np.empty(len(pending), dtype=np.int64) if with_at else None
    kept = compiled.refuse(mask, pending, at, verdict, 7, codes, lut, kept_pending, kept_at)  # type: ignore[union-attr]
    expected = np.full(size, -1, dtype=np.int64)
    expected[pending[~mask]] = lut[codes[~mask]] if with_codes else 7
    assert verdict.tolist() == expected.tolist()
    assert kept_pending[:kept].tolist() == pending[mask].tolist()
    if with_at:
        assert kept_at[:kept].tolist() == at[mask].tolist()


# ---- bad input ------------------------------------------------------------------------------------

@needs_compiled
@pytest.mark.parametrize(("call", "message"), [
    (lambda: compiled.short_bits([np.zeros(3, dtype=np.int32)], [0], np.empty(3, dtype=np.int64)), "item type"),
    (lambda: compiled.short_bits([np.zeros(3, dtype=np.int64)], [0], np.empty(4, dtype=np.int64)), "shapes disagree"),
    (lambda: compiled.short_bits([np.zeros((2, 3), dtype=np.int64)], [0], np.empty(3, dtype=np.int64)), "dimensions"),
    (lambda: compiled.short_bits([np.zeros(6, dtype=np.int64)[::2]], [0], np.empty(3, dtype=np.int64)), "not contiguous"),
    (lambda: compiled.short_bits([np.zeros(3, dtype=np.int64)], [np.zeros(3, dtype=np.int64)],
                                 np.empty(3, dtype=np.int64)), "least amounts \\(numbers\\)"),
    (lambda: compiled.first_zone_holding(np.ones((2, 3), dtype=bool), [np.zeros((2, 4), dtype=np.int64)], [1],
                                         np.empty(3, dtype=np.int64)), "shapes disagree"),
    (lambda: compiled.first_zone_holding(np.ones((2, 3), dtype=bool), [], [1], np.empty(3, dtype=np.int64)),
     "as many needs"),
    (lambda: compiled.first_zone_holding(np.ones((2, 3), dtype=bool), [], [], np.empty(1, dtype=np.int64),
                                         np.array([3])), "not among the 3 rows"),
    (lambda: compiled.short_bits([np.zeros(3, dtype=np.int64)], [0], np.empty(2, dtype=np.int64), np.array([0, 1, 2])),
     "shapes disagree"),
    (lambda: compiled.fit_score(False, [np.zeros(3, dtype=np.int64)], [np.zeros(3, dtype=np.int64)], [1], [0],
                                np.empty(3, dtype=np.int64)), "weights positive"),
    (lambda: compiled.scarcity_loss(*[np.zeros((1, 3), dtype=np.int64)] * 8), "dimensions"),
    (lambda: compiled.scarcity_loss(np.zeros((1, 3), dtype=np.int64), np.zeros((2, 3), dtype=np.int64),
                                    np.zeros((2, 1), dtype=np.int64), np.zeros(2, dtype=np.int64),
                                    np.zeros((1, 3), dtype=np.int64), np.ones(1), np.ones(3, dtype=bool),
                                    np.empty(3, dtype=np.int64)), "each at least 1"),
    (lambda: compiled.zones_hold(np.ones((2, 3), dtype=bool), [np.zeros((2, 3), dtype=np.int64)], [], [],
                                 np.ones(3, dtype=bool), np.ones(3, dtype=bool), np.array([1]), np.ones((1, 1), dtype=np.int64),
                                 True, np.empty(3, dtype=bool)), "one per resource, with restricted"),
    (lambda: compiled.derive_rows(*[np.zeros((2, 3), dtype=np.int64)] * 2, np.zeros((1, 0, 3), dtype=np.int64),
                                  *[np.zeros((2, 3), dtype=np.int64)] * 3, np.array([0])), "one zone slot or more"),
    (lambda: compiled.zones_hold(np.ones((2, 3), dtype=bool), [np.zeros((2, 3), dtype=np.int64)], [], [],
                                 np.ones(3, dtype=bool), np.ones(3, dtype=bool), np.array([7]), np.ones((1, 1), dtype=np.int64),
                                 False, np.empty(3, dtype=bool)), "by: 0, 1 or 2"),
    (lambda: compiled.refuse(np.zeros(2, dtype=bool), np.array([0, 5]), None, np.zeros(3, dtype=np.int64), 1, None,
                             None, np.empty(2, dtype=np.int64), None), "positions within verdict"),
    (lambda: compiled.refuse(np.zeros(1, dtype=bool), np.array([0]), None, np.zeros(3, dtype=np.int64), 0,
                             np.array([4]), np.array([1, 2]), np.empty(1, dtype=np.int64), None), "codes within lut"),
    (lambda: compiled.scarcity_rows(np.array([5]), np.zeros((2, 1, 3), dtype=np.int64), np.ones((1, 3), dtype=bool),
                                    np.ones(1, dtype=bool), np.zeros((2, 3), dtype=np.int64), np.array([0]),
                                    np.array([0, 1]), np.ones((1, 1), dtype=np.int64), np.zeros((1, 1), dtype=bool),
                                    np.ones((2, 1), dtype=np.int64), *(np.zeros((1, 3), dtype=np.int64),
                                                                       np.zeros((2, 3), dtype=np.int64),
                                                                       np.zeros((1, 3), dtype=np.int64))),
     "rows within"),
])
def test_arrays_the_loops_cannot_read_are_refused(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


@needs_compiled
def test_outputs_must_be_writable() -> None:
    out = np.empty(3, dtype=np.int64)
    out.flags.writeable = False
    with pytest.raises(ValueError):
        compiled.short_bits([np.zeros(3, dtype=np.int64)], [0], out)  # type: ignore[union-attr]
