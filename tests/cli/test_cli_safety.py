"""The command line's output is safe wherever it is written: run as a process with its
stdout piped or sent to a file, against a server whose names are hostile.

``csv``: a text cell a spreadsheet would run as a formula gets a leading ``'``, control and
bidirectional characters are escaped as in ``table``, numbers are written as they are.
``json``/``jsonl``: control and bidirectional characters as ``\\u`` escapes, the same data
once parsed.
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asyncapi_client._cli._render import csv_text
from asyncapi_client._cli._text import visible
from asyncapi_client.testing import FakeExchange, FakeServer, Reply
from tests._cli import subprocess_env

CLI = (sys.executable, "-m", "asyncapi_client")

#: A name as the server sends it -> its csv cell.
NAMES = {
    '=HYPERLINK("http://evil.example","click")': '\'=HYPERLINK("http://evil.example","click")',
    "+cmd|' /C calc'!A0": "'+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0": "'-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)": "'@SUM(1+1)",
    "\t=1+1": "'\\t=1+1",
    "\r=1+1": "'\\r=1+1",
    "a\x1b[31mred\x07\x00b\x7f\x9b": "a\\x1b[31mred\\x07\\x00b\\x7f\\x9b",
    "\u202eevil\u2066": "\\u202eevil\\u2066",
    "line\nbreak": "line\\nbreak",
    "x=1, -y": "x=1, -y",  # not at the start: as it is
}
#: Anything a terminal acts on, or a spreadsheet reads as a control: never written raw.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def token(n: int, name: str) -> dict[str, Any]:
    return {
        "address": f"0x{n:040x}",
        "name": name,
        "symbol": name,
        "decimals": 18,
        "totalSupply": "-12.50",
        "logoUri": None,
        "priceUsd": -1.5,
    }


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    tokens = [token(n, name) for n, name in enumerate(NAMES)]
    with FakeServer(FakeExchange.generate(seed=1)).in_thread() as server:
        server.script("tokens", Reply(json={"tokens": tokens}), repeat=True)
        yield server.base_url


def run(url: str, fmt: str, to_file: Path | None) -> str:
    """The CLI's stdout (as text) with it piped, or written to ``to_file``."""
    args = [*CLI, "--format", fmt, "tokens"]
    env = subprocess_env(ASYNCAPI_BASE_URL=url)
    if to_file is None:
        done = subprocess.run(args, env=env, capture_output=True, timeout=60, check=False)
        out = done.stdout
    else:
        with to_file.open("wb") as sink:
            done = subprocess.run(
                args, env=env, stdout=sink, stderr=subprocess.PIPE, timeout=60, check=False
            )
        out = to_file.read_bytes()
    assert (done.returncode, done.stderr) == (0, b"")
    return out.decode()


@pytest.fixture(params=["pipe", "file"])
def sink(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    return None if request.param == "pipe" else tmp_path / "out"


def test_csv_cells_are_safe_for_spreadsheets_and_terminals(url: str, sink: Path | None) -> None:
    out = run(url, "csv", sink)
    assert not RAW.search(out), RAW.findall(out)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [row["name"] for row in rows] == list(NAMES.values())
    assert [row["symbol"] for row in rows] == list(NAMES.values())
    for row in rows:  # numbers as they are: a negative one keeps its "-", no quote
        assert (row["priceUsd"], row["totalSupply"], row["decimals"]) == ("-1.5", "-12.50", "18")
        assert row["address"].startswith("0x")


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_json_escapes_controls_and_bidi_and_keeps_the_data(
    url: str, sink: Path | None, fmt: str
) -> None:
    out = run(url, fmt, sink)
    assert not RAW.search(out.replace("\n", "")), RAW.findall(out)
    assert "\\u202e" in out
    data = json.loads(out) if fmt == "json" else [json.loads(line) for line in out.splitlines()]
    assert [item["name"] for item in data] == list(NAMES)
    assert [item["totalSupply"] for item in data] == ["-12.50"] * len(NAMES)


@given(st.text(max_size=30))
def test_any_text_cell_is_escaped_and_quoted_exactly_when_it_could_run(text: str) -> None:
    cell = csv_text(text)
    assert not RAW.search(cell)
    assert cell.startswith("'") == text.startswith(("=", "+", "-", "@", "\t", "\r", "'"))
    assert (cell[1:] if text.startswith(("=", "+", "-", "@", "\t", "\r")) else cell) == visible(
        text
    )
