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
BOT_TESTS = [block for block in BLOCKS if "\nasync def test_" in block]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCAPI_")}
    env["PYTHONWARNINGS"] = "error"  # an unclosed session in an example fails here too
    return env


def test_the_readme_has_the_examples_it_promises() -> None:
    text = "\n".join(PROGRAMS)
    for needle in ("asyncio.gather", "TaskGroup", "iter_orders", "iter_leaderboard", "testnet"):
        assert needle in text, needle
    assert len(BOT_TESTS) == 1


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


def test_the_readme_bot_test_passes_under_pytest(tmp_path: Path) -> None:
    (tmp_path / "test_bot.py").write_text(BOT_TESTS[0], encoding="utf-8")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
        "filterwarnings = error\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=_env(),
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
