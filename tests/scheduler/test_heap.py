"""The scheduler's Python heap in huge-page arenas (toposched.scheduler.heap): installed on import,
arenas reused, opt-out honoured, and the memory really in huge pages where the host gives them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import toposched.scheduler  # noqa: F401  (installs the arenas)
from toposched.scheduler.heap import ENV, heap_stats

LINUX = sys.platform.startswith("linux")
try:
    from toposched.scheduler import _hugearenas  # noqa: F401
    BUILT = True
except ImportError:
    BUILT = False
needs_arenas = pytest.mark.skipif(not (LINUX and BUILT), reason="huge-page arenas need Linux and the built extension")


@needs_arenas
def test_importing_the_scheduler_installs_the_arenas_and_they_serve_pythons_objects() -> None:
    """In this (busy) process: new objects take arenas from the allocator, and give them back when
    freed. (How many are free before depends on the tests run before: the exact reuse is checked
    in a fresh process below.)"""
    if os.environ.get(ENV, "1").strip() == "0":
        pytest.skip(f"{ENV}=0 in this environment")
    before = heap_stats()
    assert before["installed"] and before["arena_bytes"] == (1 << 20 if sys.maxsize > 2**32 else 1 << 18)
    held = [(i, str(i)) for i in range(300_000)]  # ~40 MB of small objects: 30 arenas or more
    grown = heap_stats()
    assert grown["arenas"] > before["arenas"] + 10
    assert held[123_456] == (123_456, "123456")  # the objects are sound
    del held
    assert heap_stats()["arenas"] < grown["arenas"] - 10


def _run(code: str, env: dict[str, str]) -> str:
    src = str(Path(toposched.scheduler.__file__).parents[1])
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": src, **env},
                          check=True, capture_output=True, text=True, timeout=120).stdout


@needs_arenas
def test_the_opt_out_keeps_pythons_own_arenas() -> None:
    code = "import toposched.scheduler; from toposched.scheduler.heap import heap_stats; print(heap_stats()['installed'])"
    assert _run(code, {ENV: "0"}).strip() == "False"
    assert _run(code, {ENV: "1"}).strip() == "True"


@needs_arenas
def test_rounds_of_allocating_and_freeing_reuse_the_same_regions() -> None:
    """A process that grows and shrinks its heap again and again reserves no more than its peak:
    freed arenas serve the next objects."""
    code = """
import toposched.scheduler
from toposched.scheduler.heap import heap_stats
peaks, free = [], []
for round in range(4):
    held = [{"i": i, "s": str(i)} for i in range(200_000)]
    assert held[-1] == {"i": 199_999, "s": "199999"}
    peaks.append(heap_stats()["reserved_bytes"])
    del held
    free.append(heap_stats()["free_arenas"])
print(peaks[0] == peaks[-1], free[0] > 10)
"""
    assert _run(code, {ENV: "1"}).split() == ["True", "True"]


@needs_arenas
def test_the_arenas_are_in_huge_pages_where_the_host_gives_them() -> None:
    enabled = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not enabled.exists() or "[never]" in enabled.read_text():
        pytest.skip("transparent huge pages are off on this host")
    code = """
import os, mmap
from pathlib import Path
def huge():
    for line in Path(f"/proc/{os.getpid()}/smaps_rollup").read_text().splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0
control = mmap.mmap(-1, 8 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
control.madvise(mmap.MADV_HUGEPAGE)
before = huge()
for i in range(0, 8 << 20, 4096):
    control[i] = 1
host_gives = huge() > before
import toposched.scheduler
before = huge()
held = [(i, str(i)) for i in range(500_000)]
print(host_gives, huge() - before)
"""
    host_gives, gained = _run(code, {ENV: "1"}).split()
    if host_gives != "True":
        pytest.skip("the host gave no huge page to a madvised mapping (none free?)")
    assert int(gained) >= 16 * 1024  # of ~60 MB of objects, at least 16 MiB in huge pages
