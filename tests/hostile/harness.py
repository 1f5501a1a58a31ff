"""Run one CLI invocation in a forked child with a time limit and an address-space limit.

Each hostile case runs ``toposched <command> ...`` in-process through typer's CliRunner, but in
a child process forked from the test: the child's address space is capped (``RLIMIT_AS``: what
the parent maps now plus :data:`MEMORY_HEADROOM`), its CPU time to :data:`TIME_LIMIT` seconds
(``RLIMIT_CPU``), an alarm ends it after :data:`WALL_LIMIT` seconds (a case that blocks), and
the parent kills it if it still has not answered. So a case that hangs or eats
memory fails alone and fast, and it cannot disturb the next one.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import time
from dataclasses import dataclass

TIME_LIMIT = 20.0  # CPU seconds; cases take well under one
WALL_LIMIT = 120.0  # wall seconds: the backstop for a case that blocks
MEMORY_HEADROOM = 1536 * 2**20  # bytes of address space a case may add to the parent's


@dataclass
class Outcome:
    """What a case did: exit code, stdout, stderr, the exception's type (if any) and the seconds taken."""

    exit_code: int | None
    stdout: str
    stderr: str
    exception: str | None
    seconds: float  # CPU seconds the case used
    killed: str | None = None  # "timeout" or "memory" when the limits ended it


def _vm_size() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def run_cli(argv: list[str], stdin: bytes | None = None, *, time_limit: float = TIME_LIMIT) -> Outcome:
    """Run ``toposched argv`` in a forked, limited child; its outcome."""
    read_fd, write_fd = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            os.close(read_fd)
            resource.setrlimit(resource.RLIMIT_AS, (_vm_size() + MEMORY_HEADROOM, resource.RLIM_INFINITY))
            # CPU seconds, not wall seconds: the machine may be shared, a busy neighbour must not fail a case.
            resource.setrlimit(resource.RLIMIT_CPU, (int(time_limit), int(time_limit) + 2))
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(int(WALL_LIMIT))  # a case blocked without using the CPU (a FIFO) ends here
            from typer.testing import CliRunner

            from toposched.cli import app

            result = CliRunner().invoke(app, argv, input=stdin, catch_exceptions=True)
            exc = result.exception
            exc_name = None if exc is None or isinstance(exc, SystemExit) else type(exc).__name__
            if exc_name is not None:
                import traceback

                exc_name += ": " + "".join(traceback.format_exception(exc))[-2000:]
            payload = {"exit_code": result.exit_code, "stdout": result.stdout[-20000:],
                       "stderr": result.stderr[-20000:], "exception": exc_name}
        except MemoryError:
            payload = {"exit_code": None, "stdout": "", "stderr": "", "exception": "MemoryError (harness)"}
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            payload = {"exit_code": None, "stdout": "", "stderr": "", "exception": f"harness: {exc!r}"}
            code = 1
        try:
            os.write(write_fd, json.dumps(payload).encode())
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks = []
    deadline = start + WALL_LIMIT + 5
    killed = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            killed = "timeout"
            break
        ready, _, _ = select.select([read_fd], [], [], left)
        if ready:
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(read_fd)
    _, status, usage = os.wait4(pid, 0)
    seconds = usage.ru_utime + usage.ru_stime  # the case's own CPU time
    if os.WIFSIGNALED(status) and killed is None:
        killed = ("timeout" if os.WTERMSIG(status) in (signal.SIGALRM, signal.SIGXCPU, signal.SIGKILL)
                  else f"signal {os.WTERMSIG(status)}")
    if killed or not chunks:
        return Outcome(None, "", "", None, seconds, killed or "no answer")
    payload = json.loads(b"".join(chunks))
    if payload["exception"] and "MemoryError" in payload["exception"]:
        return Outcome(payload["exit_code"], payload["stdout"], payload["stderr"], payload["exception"], seconds, "memory")
    return Outcome(payload["exit_code"], payload["stdout"], payload["stderr"], payload["exception"], seconds)
