"""docs/guides/sync.md: every code block not marked as a fragment is a complete program that
runs against the embedded fake exchange, and leaves no thread behind."""

from __future__ import annotations

import contextlib
import gc
import io
import re
import threading
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "sync.md"
TEXT = GUIDE.read_text(encoding="utf-8")
BLOCKS = re.findall(r"(<!-- fragment -->\n)?```python\n(.*?)```", TEXT, re.DOTALL)
PROGRAMS = [code for fragment, code in BLOCKS if not fragment]


def test_the_guide_has_its_programs() -> None:
    assert len(BLOCKS) == 7
    assert len(PROGRAMS) == 4
    text = "\n".join(PROGRAMS)
    for needle in ("in_thread()", "with_response", "resume=", "ThreadPoolExecutor", "Fault("):
        assert needle in text, needle


@pytest.mark.parametrize("program", PROGRAMS, ids=[f"program-{i}" for i in range(len(PROGRAMS))])
def test_each_program_of_the_guide_runs(program: str) -> None:
    """Run as a script would be, in this process: warnings are errors, threads are counted."""
    before = set(threading.enumerate())
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        exec(compile(program, str(GUIDE), "exec"), {"__name__": "__main__"})
    gc.collect()  # a client left unclosed would warn now, and fail the test
    assert out.getvalue().strip(), "each program prints what it found"
    assert err.getvalue() == ""
    assert set(threading.enumerate()) == before
