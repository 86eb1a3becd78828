"""A FakeServer served ``in_thread()`` never keeps the interpreter from exiting.

Each case runs a script in a new interpreter that starts a server in a thread and ends
without leaving the ``with`` block; the interpreter must exit on its own, cleanly.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The interpreter has this long to start, serve and exit (seconds): a bound, not a pace.
EXIT_BOUND = 30.0

START = """
from asyncapi_client import SyncClient
from asyncapi_client.testing import FakeExchange, FakeServer

served = FakeServer(FakeExchange.generate(seed=5, users=1, pools=2)).in_thread()
server = served.__enter__()
"""

CASES = {
    "never exited": "",
    "after requests, the client closed": """
with SyncClient(base_url=server.base_url) as client:
    assert client.tokens()
""",
    "a request held at the server": """
import socket
from urllib.parse import urlsplit
gate = server.gate("tokens")
address = urlsplit(server.base_url)
sock = socket.create_connection((address.hostname, address.port))
sock.sendall(b"GET /api/tokens HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
gate.wait_arrived(1, timeout=30.0)
sock.detach()  # left open: the OS closes it at exit
""",
    "ended by an exception": """
raise SystemExit(3)
""",
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_interpreter_exits_with_a_server_never_exited(case: str) -> None:
    script = START + textwrap.dedent(CASES[case])
    try:
        done = subprocess.run(
            [sys.executable, "-X", "dev", "-c", script],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=EXIT_BOUND,  # kills the child (by its PID) when the bound passes
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the interpreter did not exit within {EXIT_BOUND:g}s ({case})")
    expected = 3 if case == "ended by an exception" else 0
    assert done.returncode == expected, done.stderr
    # nothing ignored, no warning at exit ("Exception ignored in ...", ResourceWarning)
    assert "Exception ignored" not in done.stderr, done.stderr
    assert "Warning" not in done.stderr, done.stderr
