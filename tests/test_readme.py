"""The README's examples run: each complete program, and its bot test under pytest.

A reader copies these first; an example that has rotted is worse than none.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
PROGRAMS = [block for block in BLOCKS if "asyncio.run(main())" in block]
BOT_TESTS = [block for block in BLOCKS if "\nasync def test_" in block]  # run under pytest


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCAPI_")}
    env["PYTHONWARNINGS"] = "error"  # an unclosed session in an example fails here too
    return env


def test_the_readme_has_the_examples_it_promises() -> None:
    text = "\n".join(PROGRAMS)
    for needle in ("asyncio.gather", "TaskGroup", "iter_orders", "iter_leaderboard", "testnet"):
        assert needle in text, needle
    tests = "\n".join(BOT_TESTS)
    for needle in ('.script("pool", Reply(503))', '.gate("pool")', "gate.arrived(3)", "Fault("):
        assert needle in tests, needle


@pytest.mark.parametrize("program", PROGRAMS, ids=[f"program-{i}" for i in range(len(PROGRAMS))])
def test_each_readme_program_runs(program: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "each example prints what it found"
    assert done.stderr == ""


class _Outcomes:
    """A pytest plugin that notes each test's outcome in the inner session."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[report.nodeid.rpartition("::")[2]] = report.outcome


def test_the_readme_bot_tests_pass_under_pytest(tmp_path: Path) -> None:
    """Each block of bot tests, as written, in a pytest session with only our plugin's help."""
    wanted: list[str] = []
    for index, block in enumerate(BOT_TESTS):
        (tmp_path / f"test_readme_bots_{index}.py").write_text(block, encoding="utf-8")
        wanted += re.findall(r"^async def (test_\w+)", block, re.MULTILINE)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
        "filterwarnings = error\n",
        encoding="utf-8",
    )
    outcomes = _Outcomes()
    ini = str(tmp_path / "pytest.ini")
    args = ["-q", "-p", "no:cacheprovider", "--import-mode=importlib", "-c", ini, str(tmp_path)]
    code = pytest.main([*args, "--rootdir", str(tmp_path)], plugins=[outcomes])
    assert outcomes.outcomes == dict.fromkeys(wanted, "passed")
    assert code == pytest.ExitCode.OK
    assert len(wanted) >= 4
