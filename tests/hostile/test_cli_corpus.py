"""Every hostile CLI case ends with one clear line on stderr: no traceback, no hang, no silent success (issue 19).

Each case runs in a forked child capped in time and address space (see :mod:`.harness`). A case
passes when the command exits 1 (or 2 for a usage error) with one stderr line that starts with
``toposched <command>:``, contains the words the case names (file, field, limit), and is not an
internal error; it took less than the time limit and did not run out of memory.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import typer.testing  # noqa: F401 - imported once here (not in a child), so each forked case starts warm

from tests.hostile.corpus import DEV_ZERO_LINK, FIFO, SPARSE_HUGE, Case, all_cases
from tests.hostile.harness import run_cli
from toposched.cli import app  # noqa: F401 - the whole command line built once here, so children start warm
from toposched.inputs import MAX_FILE_BYTES

CASES = all_cases()
WORKERS = min(2, os.cpu_count() or 1)  # cases run in forked children, this many at once
_PROGRESS = re.compile("[━╸╺]|\\d+/\\d+ +[-0-9:]")


def _materialise(case: Case, d: Path) -> list[str]:
    for name, content in case.files.items():
        path = d / name
        if content is FIFO:
            os.mkfifo(path)
        elif content is DEV_ZERO_LINK:
            path.symlink_to("/dev/zero")
        elif content is SPARSE_HUGE:
            with open(path, "wb") as fh:
                fh.truncate(MAX_FILE_BYTES + 1)
        elif content == "DIR":
            path.mkdir()
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    if case.setup is not None:
        case.setup(d)
    return [arg.replace("{d}", str(d)) for arg in case.argv]


def test_the_corpus_is_big_enough():
    assert len(CASES) >= 200
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    """Every selected case run once, two at a time (each in its own forked child): id -> (argv, outcome)."""
    selected = [item.callspec.params["case"] for item in request.session.items
                if getattr(item, "callspec", None) is not None and isinstance(item.callspec.params.get("case"), Case)]
    prepared = []
    for case in selected:
        folder = tmp_path_factory.mktemp("case")
        prepared.append((case, _materialise(case, folder)))
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = list(pool.map(lambda item: run_cli(item[1], item[0].stdin), prepared))
    return {case.id: (argv, outcome) for (case, argv), outcome in zip(prepared, results)}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_cli_input(case: Case, outcomes: dict[str, tuple]) -> None:
    argv, outcome = outcomes[case.id]
    assert outcome.killed is None, f"{case.id}: ended by {outcome.killed} after {outcome.seconds:.1f}s"
    assert outcome.exception is None, f"{case.id}: traceback\n{outcome.exception}"
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert outcome.exit_code not in (0, None), f"{case.id}: accepted (exit 0)\n{outcome.stdout[-2000:]}"
    assert outcome.exit_code in (1, 2), f"{case.id}: exit {outcome.exit_code}: {outcome.stderr}"
    assert "Traceback" not in outcome.stderr, outcome.stderr
    if outcome.exit_code == 1 or "Usage:" not in outcome.stderr:  # exit 2: the cluster commands' refusals too
        # The simulator's progress bars may precede the error on stderr; the error is the one last line.
        errors = [line for line in lines if line.startswith("toposched ") and not _PROGRESS.search(line)]
        assert len(errors) == 1, f"{case.id}: expected one error line on stderr, got:\n{outcome.stderr}"
        line = errors[0]
        assert lines[-1] == line, outcome.stderr
        assert line.startswith(f"toposched {argv[0]}: "), line
        assert "internal error" not in line and "out of memory" not in line, line
        for word in case.expect:
            assert word.lower() in line.lower(), f"{case.id}: {word!r} missing from: {line}"
        assert len(line) < 2000, line
