"""Running the command line in this process: ``main(argv, stdout=, stderr=, environ=)``.

A server the CLI talks to runs on its own event loop in a thread (the fake's
``FakeServer.in_thread()``), because ``main`` runs its own loop in the calling thread, as it
does for a user.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from asyncapi_client._cli import main


@attrs.frozen
class Run:
    """One finished CLI run."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def jsonl(self) -> list[Any]:
        return [json.loads(line) for line in self.stdout.splitlines()]

    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    def ok(self) -> Run:
        """Itself, after checking it exited 0 and kept stderr empty (no terminal: no progress)."""
        assert self.returncode == 0, (self.args, self.returncode, self.stderr)
        assert self.stderr == "", (self.args, self.stderr)
        return self

    def one_line_error(self, status: int) -> str:
        """The error line, after checking the run failed with ``status`` and one line only."""
        assert self.returncode == status, (self.args, self.returncode, self.stderr)
        assert "Traceback" not in self.stderr, self.stderr
        assert self.stderr.count("\n") == 1, self.stderr
        assert self.stderr.startswith("asyncapi-client: error: "), self.stderr
        return self.stderr.rstrip("\n")


class Terminal(io.StringIO):
    """A text stream that says it is a terminal (for what the CLI does on a tty)."""

    def __init__(self, columns: int = 100) -> None:
        super().__init__()
        self.columns = columns

    def isatty(self) -> bool:
        return True


def cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    stdout: io.StringIO | None = None,
    stderr: io.StringIO | None = None,
) -> Run:
    """``main(args)`` in this process with its own streams and environment (default: empty)."""
    out = io.StringIO() if stdout is None else stdout
    err = io.StringIO() if stderr is None else stderr
    status = main(list(args), stdout=out, stderr=err, environ=dict(env or {}))
    return Run(tuple(args), status, out.getvalue(), err.getvalue())


def hosts(base_url: str, testnet_base_url: str | None = None) -> dict[str, str]:
    """The environment that points the CLI at a server."""
    env = {"ASYNCAPI_BASE_URL": base_url}
    if testnet_base_url is not None:
        env["ASYNCAPI_TESTNET_BASE_URL"] = testnet_base_url
    return env


def subprocess_env(**extra: str) -> dict[str, str]:
    """This process's environment without ASYNCAPI_* variables, plus ``extra``.

    PYTHONUNBUFFERED is dropped too: a user's stdout is buffered, so streaming must flush.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ASYNCAPI_") and k != "PYTHONUNBUFFERED"
    }
    env.update(extra)
    return env


def project(wire: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {key: wire.get(key) for key in keys}
