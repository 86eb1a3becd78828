"""Running a test's part in a child made by ``os.fork()``, under a bound.

The child reports what it returned (JSON through a pipe) and leaves at once with
``os._exit``: no pytest, no atexit in the child. Past the bound, the child is killed by its
PID and the test fails.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

__all__ = ["CHILD_BOUND", "Outcome", "forking", "in_forked_child"]

#: A child has this long to do its part and end (seconds): a bound, never a pace.
CHILD_BOUND = 30.0

Outcome = dict[str, Any]


@contextmanager
def forking() -> Iterator[None]:
    """Python 3.12+ warns that forking a process with threads may deadlock the child: that
    is the case under test (the client's thread, the server's)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"This process .* is multi-threaded", DeprecationWarning)
        yield


def in_forked_child(work: Callable[[], Outcome]) -> Outcome:
    """Run ``work`` in a child made by ``os.fork()`` and return what it returned (or the
    error it raised, as ``{"error": ...}``); kill the child if it is not done in time."""
    read, write = os.pipe()
    with forking():
        pid = os.fork()
    if pid == 0:  # the child: report, then leave at once (no pytest, no atexit here)
        try:
            os.close(read)
            try:
                outcome = work()
            except BaseException as exc:
                outcome = {"error": f"{type(exc).__name__}: {exc}"}
            os.write(write, json.dumps(outcome).encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        reported: Outcome = json.loads(_read_all(read, pid))
        return reported
    finally:
        os.close(read)


def _read_all(fd: int, pid: int) -> bytes:
    """Everything the child writes to ``fd`` until it exits, within CHILD_BOUND."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + CHILD_BOUND
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(0.0, left))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child was still running after {CHILD_BOUND:g}s: killed")
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return b"".join(chunks)
