"""Every Python block of the README and the docs site runs, as a reader would run it.

A reader copies these first; an example that has rotted is worse than none. Each ```python
block of README.md and docs/**/*.md is one of three kinds, and nothing else:

- a block containing ``def test_``: a bot's tests, run under pytest with only our plugin's
  help; every test in it must pass;
- a block preceded by a line ``<!-- fragment -->``: a piece of a program, not run;
- anything else: a complete program, run as a script (``python file.py``, warnings are
  errors) against the embedded fake exchange. It must exit 0, print something and write
  nothing to stderr; when the block is followed by ``<!-- output -->`` and a ```text block,
  it must print exactly that.

Pages added later are picked up as they are: nothing here lists them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import pytest

from tests._inner_pytest import run_suite

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<info>[^\n`]*)\n"
    r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
FRAGMENT = "<!-- fragment -->"
OUTPUT = "<!-- output -->"


def _shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


@attrs.frozen
class Block:
    """One fenced Python block of a page, with what the page says around it."""

    page: Path
    line: int  # of the opening fence, from 1
    code: str
    fragment: bool
    output: str | None  # the ```text block after <!-- output -->, if any

    @property
    def where(self) -> str:
        return f"{_shown(self.page)}:{self.line}"

    @property
    def kind(self) -> str:
        if self.fragment:
            return "fragment"
        return "tests" if re.search(r"^\s*(async )?def test_", self.code, re.M) else "program"


def _blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    fences = list(FENCE.finditer(text))
    found = []
    for index, fence in enumerate(fences):
        if fence["info"].strip().split(" ")[0] not in ("python", "py", "python3"):
            continue
        before = text[: fence.start()].rstrip().rpartition("\n")[2].strip()
        following = fences[index + 1] if index + 1 < len(fences) else None
        between = text[fence.end() : following.start() if following else len(text)]
        output = None
        if OUTPUT in between:
            misplaced = f"{_shown(page)}: {OUTPUT} goes between a block and its ```text"
            assert between.strip() == OUTPUT, misplaced
            assert following is not None, misplaced
            assert following["info"].strip() == "text", misplaced
            output = textwrap.dedent(following["body"])
        found.append(
            Block(
                page=page,
                line=text.count("\n", 0, fence.start()) + 1,
                code=textwrap.dedent(fence["body"]),
                fragment=before == FRAGMENT,
                output=output,
            )
        )
    return found


BLOCKS = [block for page in PAGES for block in _blocks(page)]
PROGRAMS = [block for block in BLOCKS if block.kind == "program"]
BOT_TESTS = [block for block in BLOCKS if block.kind == "tests"]


def _environment() -> dict[str, str]:
    """This process's environment, less our hosts (the examples name their own) and coverage
    (an example is the reader's program, not a measure of the library)."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ASYNCAPI_", "COVERAGE_"))
    }


def test_every_page_has_the_examples_it_promises() -> None:
    assert PROGRAMS, "no program found: the parser or the pages broke"
    text = "\n".join(block.code for block in PROGRAMS)
    for needle in ("asyncio.gather", "TaskGroup", "iter_orders", "iter_leaderboard", "testnet"):
        assert needle in text, needle
    for needle in ("resume=", "with_response", "on_retry", "set_fault"):
        assert needle in text, needle
    tests = "\n".join(block.code for block in BOT_TESTS)
    for needle in ('.script("pool", Reply(503))', '.gate("pool")', "gate.arrived(3)", "Fault("):
        assert needle in tests, needle
    readme = [block for block in BLOCKS if block.page.name == "README.md"]
    assert [block.kind for block in readme].count("program") >= 1, "the README's quickstart"


@pytest.mark.parametrize("program", PROGRAMS, ids=[block.where for block in PROGRAMS])
def test_each_program_runs_against_the_fake(program: Block, tmp_path: Path) -> None:
    """Run as a reader would (``python example.py``), in a process of its own."""
    script = tmp_path / "example.py"
    script.write_text(program.code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        cwd=tmp_path,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{program.where} failed:\n{done.stderr}"
    assert done.stderr == "", f"{program.where} wrote to stderr:\n{done.stderr}"
    assert done.stdout.strip(), f"{program.where} printed nothing"
    if program.output is not None:
        assert done.stdout == program.output, f"{program.where} printed another output"


@pytest.mark.parametrize("block", BOT_TESTS, ids=[block.where for block in BOT_TESTS])
def test_each_block_of_bot_tests_passes_under_pytest(block: Block, tmp_path: Path) -> None:
    """The block as written, in a pytest session of its own with only our plugin's help."""
    wanted = re.findall(r"^\s*(?:async )?def (test_\w+)", block.code, re.MULTILINE)
    code, outcomes = run_suite(tmp_path, {"test_example.py": block.code})
    found = {name: outcome.outcome for name, outcome in outcomes.items()}
    details = "\n".join(o.text for o in outcomes.values() if o.outcome != "passed")
    assert found == dict.fromkeys(wanted, "passed"), f"{block.where}:\n{details}"
    assert code == pytest.ExitCode.OK


def test_the_readme_is_a_front_door() -> None:
    """At most 250 lines, and every relative link in it leads to a file of the repository."""
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\((?!https?://|#|mailto:)([^)#\s]+)(?:#[^)]*)?\)", text)
    assert links, "the README links into the docs"
    for link in links:
        assert (ROOT / link).exists(), link


def test_the_parser_tells_the_three_kinds_apart(tmp_path: Path) -> None:
    """A fragment is skipped only with its marker; an output block is attached to its program."""
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n<!-- fragment -->\n```python\nclient.pool(x)\n```\n\n"
        "```python\nprint(1)\n```\n\n<!-- output -->\n```text\n1\n```\n\n"
        "- a list item:\n\n    ```python\n    async def test_x(): ...\n    ```\n\n"
        "<!-- fragment -->\n\nA paragraph in between.\n\n```py\nmissing()\n```\n",
        encoding="utf-8",
    )
    blocks = _blocks(page)
    assert [(b.kind, b.output) for b in blocks] == [
        ("fragment", None),
        ("program", "1\n"),
        ("tests", None),
        ("program", None),  # the marker must be right above the block: this one runs
    ]
    assert blocks[2].code == "async def test_x(): ...\n"
