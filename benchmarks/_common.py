"""Helpers shared by the benchmark scripts: timing, peak memory, JSON output."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def time_call(fn: Callable[[], Any], repeat: int) -> dict[str, float]:
    """Run ``fn`` ``repeat`` times and return min/median/max wall time in milliseconds."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return {"min_ms": min(samples), "median_ms": statistics.median(samples), "max_ms": max(samples)}


def callgrind_instrument(on: bool) -> None:
    """Switch callgrind's instrumentation of this process on or off (a benchmark run under
    ``valgrind --tool=callgrind --instr-atstart=no``), so its instruction count covers the timed
    loop only; nothing happens outside callgrind."""
    try:
        subprocess.run(["callgrind_control", "--instr=" + ("on" if on else "off"), str(os.getpid())],
                       check=False, capture_output=True)
    except FileNotFoundError as err:
        raise SystemExit("--callgrind needs valgrind's callgrind_control on PATH") from err


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_json(path: str | None, figures: dict[str, Any]) -> None:
    """Write ``figures`` to ``path`` as indented JSON (nothing when path is None)."""
    if path:
        Path(path).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
        print(f"wrote {path}", file=sys.stderr)
