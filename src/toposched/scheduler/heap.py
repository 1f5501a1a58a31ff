"""The Python heap of a process that schedules, in transparent huge pages.

A scheduler keeps a few hundred MiB of small Python objects (nodes, kubelet replicas, pods,
caches) and every cycle reaches into many of them, most out of the CPU caches by then: at 5,000
nodes much of a cycle's time is TLB misses. CPython's small-object allocator takes 1 MiB arenas
from the system, each its own mapping of 4 KiB pages; :func:`use_huge_pages` makes it take them
from large mappings advised ``MADV_HUGEPAGE`` (the compiled ``_hugearenas``), which the kernel
backs with 2 MiB pages where transparent huge pages are enabled ("madvise" or "always" in
``/sys/kernel/mm/transparent_hugepage/enabled``). Measured on the realistic benchmark at 5,000
nodes: about 7% more pods a second, the same peak RSS (docs/scheduler/design.md, Twenty-fifth pass).

Importing :mod:`toposched.scheduler` calls it once. Set ``TOPOSCHED_HUGE_PAGES=0`` to keep
Python's own arenas. Nothing else changes: objects, their addresses' reuse and what is decided
are the same; arenas a process frees are kept for reuse (the first 32), the pages of the rest
given back to the kernel.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["ENV", "heap_stats", "use_huge_pages"]

ENV = "TOPOSCHED_HUGE_PAGES"
_ARENA_BYTES = 1 << 20 if sys.maxsize > 2**32 else 1 << 18  # pymalloc's arena: 1 MiB on 64-bit CPython >= 3.10


def use_huge_pages() -> bool:
    """Take Python's small-object arenas from huge-page regions from now on; True when they are
    (Linux, the extension built, and ``TOPOSCHED_HUGE_PAGES`` not ``0``). Calling again is harmless."""
    if os.environ.get(ENV, "1").strip() == "0":
        return False
    try:
        from toposched.scheduler import _hugearenas
    except ImportError:  # built without a C compiler
        return False
    return bool(_hugearenas.install(_ARENA_BYTES))


def heap_stats() -> dict[str, Any]:
    """What the huge-page arenas serve: ``installed``, ``arena_bytes``, ``arenas`` in use,
    ``free_arenas`` kept for reuse, ``reserved_bytes`` of address space (all 0 when not installed)."""
    try:
        from toposched.scheduler import _hugearenas
    except ImportError:
        return {"installed": False, "arena_bytes": 0, "arenas": 0, "free_arenas": 0, "reserved_bytes": 0}
    return dict(_hugearenas.stats())
