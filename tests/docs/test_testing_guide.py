"""The testing guide shows the configuration its example tests need, and they pass with it.

A reader copies the guide's tests into a project of their own; without pytest-asyncio's auto
mode every ``async def`` test there fails. So the guide shows the ``pyproject.toml`` lines,
and this runs the guide's tests under exactly those lines (and shows they are needed).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests._inner_pytest import run_suite

GUIDE = Path(__file__).resolve().parent.parent.parent / "docs" / "guides" / "testing.md"
TEXT = GUIDE.read_text(encoding="utf-8")
TESTS = [
    code
    for code in re.findall(r"^```python\n(.*?)^```", TEXT, re.MULTILINE | re.DOTALL)
    if re.search(r"^async def test_", code, re.MULTILINE)
]


def shown_options() -> dict[str, str]:
    """``[tool.pytest.ini_options]`` of the guide's ``toml`` block."""
    for block in re.findall(r"^```toml\n(.*?)^```", TEXT, re.MULTILINE | re.DOTALL):
        options = tomllib.loads(block).get("tool", {}).get("pytest", {}).get("ini_options")
        if options is not None:
            return {str(key): str(value) for key, value in options.items()}
    pytest.fail("the testing guide shows no [tool.pytest.ini_options] for pyproject.toml")


def _ini(options: dict[str, str]) -> str:
    return "".join(f"{key} = {value}\n" for key, value in options.items())


def test_the_guide_shows_auto_mode() -> None:
    assert shown_options().get("asyncio_mode") == "auto"


@pytest.mark.parametrize("code", TESTS, ids=[f"block {n}" for n in range(1, len(TESTS) + 1)])
def test_the_guides_tests_pass_under_the_lines_it_shows(code: str, tmp_path: Path) -> None:
    wanted = re.findall(r"^async def (test_\w+)", code, re.MULTILINE)
    status, outcomes = run_suite(tmp_path, {"test_guide.py": code}, ini=_ini(shown_options()))
    found = {name: outcome.outcome for name, outcome in outcomes.items()}
    details = "\n".join(o.text for o in outcomes.values() if o.outcome != "passed")
    assert found == dict.fromkeys(wanted, "passed"), details
    assert status == pytest.ExitCode.OK


def test_without_auto_mode_the_guides_tests_do_not_run(tmp_path: Path) -> None:
    """The lines are needed: in pytest-asyncio's strict mode the same tests fail."""
    options = shown_options() | {"asyncio_mode": "strict"}
    status, outcomes = run_suite(tmp_path, {"test_guide.py": TESTS[0]}, ini=_ini(options))
    assert outcomes
    assert all(outcome.outcome != "passed" for outcome in outcomes.values())
    assert status != pytest.ExitCode.OK
