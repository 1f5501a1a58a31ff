"""The compiled row loops, when this install has them, and the loops plugins share.

``compiled`` is the ``_rowloops`` extension module (built from ``_rowloops.c`` by ``pip install``
where a C compiler is found) or None. A plugin with a compiled loop calls it when ``compiled`` is
set and runs the loop's NumPy form otherwise: both decide the same, bit for bit (each pair is
tested against each other), so the extension changes speed only. Tests and benchmarks set
``compiled`` to None to run the NumPy forms. The loops several plugins use are here, each with
its NumPy form; a loop one plugin uses lives with the plugin.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

import numpy as np

__all__ = ["any_zone_holding", "compiled", "derive_rows", "first_true", "first_zone_holding", "short_bits", "take_rows"]

compiled: ModuleType | None
try:
    from toposched.scheduler import _rowloops as compiled
except ImportError:  # built without a C compiler: the NumPy forms run
    compiled = None


def first_zone_holding(valid: np.ndarray, frees: Sequence[np.ndarray], needs: Sequence[int | np.ndarray],
                       rows: np.ndarray | None = None) -> np.ndarray:
    """Per asked row: the first zone slot (the first axis) that is ``valid`` and where every
    ``frees[r]`` (zones x rows) is at least ``needs[r]`` (a number, or one per asked row); the number
    of zone slots where none is. ``rows``: the asked rows (the last axis), None for all. int64."""
    if compiled is not None:
        out = np.empty(valid.shape[1] if rows is None else len(rows), dtype=np.int64)
        compiled.first_zone_holding(valid, frees, needs, out, rows)
        return out
    return first_true(_holding(valid, frees, needs, rows)).astype(np.int64)


def any_zone_holding(valid: np.ndarray, frees: Sequence[np.ndarray], needs: Sequence[int | np.ndarray],
                     rows: np.ndarray | None = None) -> np.ndarray:
    """Per asked row: some zone slot is ``valid`` and holds every need (:func:`first_zone_holding`). bool."""
    if compiled is not None:
        return first_zone_holding(valid, frees, needs, rows) < len(valid)
    return _holding(valid, frees, needs, rows).any(axis=0)


def _holding(valid: np.ndarray, frees: Sequence[np.ndarray], needs: Sequence[int | np.ndarray],
             rows: np.ndarray | None) -> np.ndarray:
    if rows is not None:
        valid, frees = take_rows(valid, rows), [take_rows(free, rows) for free in frees]
    holds = valid
    for free, need in zip(frees, needs):
        fits = free >= need
        holds = fits & valid if holds is valid else np.logical_and(holds, fits, out=holds)
    return holds


def short_bits(arrays: Sequence[np.ndarray], least: Sequence[int], rows: np.ndarray | None = None) -> np.ndarray:
    """Per asked row, bit ``r`` set where ``arrays[r]`` (one value per row) is below the number
    ``least[r]``; 0 where the row has every amount. ``rows``: the asked rows, None for all. 1 to 63
    arrays. int64."""
    if not 0 < len(arrays) <= 63:
        raise ValueError(f"{len(arrays)} amounts to compare: 1 to 63 fit the bits of an int64")
    if compiled is not None:
        out = np.empty(len(arrays[0]) if rows is None else len(rows), dtype=np.int64)
        compiled.short_bits(arrays, least, out, rows)
        return out
    if rows is not None:
        arrays = [array.take(rows) for array in arrays]
    pattern = np.zeros(len(arrays[0]), dtype=np.int64)
    for bit, (array, floor) in enumerate(zip(arrays, least)):
        pattern |= (array < floor).astype(np.int64) << bit
    return pattern


def derive_rows(alloc: np.ndarray, used: np.ndarray, zfree: np.ndarray, free: np.ndarray, zmax: np.ndarray,
                zsum: np.ndarray, rows: np.ndarray | slice) -> None:
    """Write the node table's derived arrays at ``rows`` (the last axis): ``free = alloc - used``
    (resources x rows), and the largest and the sum over the zone slots of ``zfree`` (resources x
    zones x rows) into ``zmax`` and ``zsum``. One pass over the rows when compiled (a few rows change
    per pod, and the NumPy form's half-dozen gathers and scatters cost more than the sums)."""
    if compiled is not None and not isinstance(rows, slice) and zfree.shape[1] > 0:
        compiled.derive_rows(alloc, used, zfree, free, zmax, zsum, rows)
        return
    free[:, rows] = take_rows(alloc, rows) - take_rows(used, rows)
    zones = take_rows(zfree, rows)
    zmax[:, rows] = zones.max(axis=1)
    zsum[:, rows] = zones.sum(axis=1)


def take_rows(array: np.ndarray, rows: np.ndarray | slice) -> np.ndarray:
    """``array[..., rows]``: the given rows (last axis) of an array with the rows last; a new array,
    or a view for a slice of rows.

    On a C-contiguous array ``np.take`` along the last axis computes it at a quarter of the cost of
    fancy indexing once the array has two or more dimensions (4 x 5,000 int64: 9 µs against 43 µs).
    On any other array (the table's views end at the row count, not at the arrays' capacity)
    ``np.take`` would first copy the whole array, so fancy indexing is kept there."""
    if not isinstance(rows, slice) and array.flags.c_contiguous:
        return array.take(rows, axis=-1)
    return array[..., rows]


def first_true(mask: np.ndarray) -> np.ndarray:
    """Per column of a zones x rows mask, the first zone that is True, or the zone count where none is.

    ``mask.argmax(axis=0)`` walks the columns one by one (130 µs over 8 x 5,000); a product with the
    zones' offsets from the count, reduced along the rows, costs 11 µs."""
    zones = len(mask)
    dtype = np.int8 if zones < 128 else np.int32
    offsets = (np.arange(zones) - zones).astype(dtype)[:, None]  # -zones .. -1: the first True is the least
    return (mask.view(np.int8) * offsets).min(axis=0, initial=0) + zones
