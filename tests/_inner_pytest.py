"""Run a small pytest session inside this one: how a bot's own suite would use our plugin.

In-process (``pytest.main``), so it costs no interpreter start-up and is measured by coverage.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import attrs
import pytest

__all__ = ["Outcome", "run_suite"]


@attrs.frozen
class Outcome:
    """How one test of the inner session ended, and its failure text if any."""

    outcome: str  # "passed", "failed", "skipped"
    when: str  # "setup", "call", "teardown"
    text: str


class _Collector:
    """A pytest plugin that notes the outcome of each test of the inner session."""

    def __init__(self) -> None:
        self.outcomes: dict[str, Outcome] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            name = report.nodeid.rpartition("::")[2]
            self.outcomes.setdefault(
                name, Outcome(report.outcome, report.when, report.longreprtext)
            )


def run_suite(
    where: Path,
    files: Mapping[str, str],
    *,
    ini: str = "asyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n",
    args: tuple[str, ...] = (),
    plugins: tuple[ModuleType | object, ...] = (),
) -> tuple[int, dict[str, Outcome]]:
    """Write ``files`` under ``where`` and run pytest on them; (exit code, outcome by test)."""
    for name, text in files.items():
        (where / name).write_text(text, encoding="utf-8")
    config = where / "pytest.ini"
    config.write_text(f"[pytest]\n{ini}filterwarnings = error\n", encoding="utf-8")
    collector = _Collector()
    options = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:xdist"]
    options += ["--import-mode=importlib", "-c", str(config)]
    try:
        code = pytest.main(
            [*options, "--rootdir", str(where), *args, str(where)], plugins=[*plugins, collector]
        )
    finally:  # the next inner session imports its own test modules, not these
        for name, module in list(sys.modules.items()):
            if Path(getattr(module, "__file__", None) or "/").is_relative_to(where):
                del sys.modules[name]
    return int(code), collector.outcomes
