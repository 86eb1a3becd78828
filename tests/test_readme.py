"""The README's examples run: each complete program, and its bot test under pytest.

A reader copies these first; an example that has rotted is worse than none.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import re
from pathlib import Path

import pytest

from tests._inner_pytest import run_suite

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
PROGRAMS = [block for block in BLOCKS if "asyncio.run(main())" in block]
BOT_TESTS = [block for block in BLOCKS if "\nasync def test_" in block]  # run under pytest


@pytest.fixture(autouse=True)
def _no_env_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples name their hosts; nothing in this process's environment may stand in."""
    for name in list(os.environ):
        if name.startswith("ASYNCAPI_"):
            monkeypatch.delenv(name)


def test_the_readme_has_the_examples_it_promises() -> None:
    text = "\n".join(PROGRAMS)
    for needle in ("asyncio.gather", "TaskGroup", "iter_orders", "iter_leaderboard", "testnet"):
        assert needle in text, needle
    tests = "\n".join(BOT_TESTS)
    for needle in ('.script("pool", Reply(503))', '.gate("pool")', "gate.arrived(3)", "Fault("):
        assert needle in tests, needle


@pytest.mark.parametrize("program", PROGRAMS, ids=[f"program-{i}" for i in range(len(PROGRAMS))])
def test_each_readme_program_runs(program: str) -> None:
    """Run as a script would be (``__main__``), in this process: warnings are errors here too."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        exec(compile(program, "README.md", "exec"), {"__name__": "__main__"})
    gc.collect()  # an unclosed session in an example warns now, and fails the test
    assert out.getvalue().strip(), "each example prints what it found"
    assert err.getvalue() == ""


def test_the_readme_bot_tests_pass_under_pytest(tmp_path: Path) -> None:
    """Each block of bot tests, as written, in a pytest session with only our plugin's help."""
    files = {f"test_readme_bots_{i}.py": block for i, block in enumerate(BOT_TESTS)}
    wanted = re.findall(r"^async def (test_\w+)", "\n".join(BOT_TESTS), re.MULTILINE)
    code, outcomes = run_suite(tmp_path, files)
    assert {name: o.outcome for name, o in outcomes.items()} == dict.fromkeys(wanted, "passed")
    assert code == pytest.ExitCode.OK
    assert len(wanted) >= 4
