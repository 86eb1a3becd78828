"""The environment of a worker process whose load or memory a test measures."""

from __future__ import annotations

import os

__all__ = ["worker_env"]

#: What coverage's subprocess patch hands a child so that it measures itself.
_COVERAGE = ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START")


def worker_env(**extra: str) -> dict[str, str]:
    """This process's environment with ``extra``, less coverage's measurement of the child:
    a worker that carries a load or whose memory is measured runs as a user's would (tracing
    slows it several times and grows its RSS); the code it runs is covered in-process by
    other tests."""
    env = {name: value for name, value in os.environ.items() if name not in _COVERAGE}
    env.update(extra)
    return env
