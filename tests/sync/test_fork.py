"""A SyncClient in a child process forked after it was made: a fresh client there.

The child (``os.fork()``, or multiprocessing's ``fork`` start method) gets a thread, loop and
connections of its own at its first call, and ``close()`` there closes the child's; the
parent's client goes on working, before and after the child ends. Every child runs under a
bound: past it the test kills the child by its PID and fails.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from asyncapi_client import SyncClient
from asyncapi_client.testing import FakeExchange, FakeServer
from tests._fork import CHILD_BOUND, Outcome, forking, in_forked_child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")

ROOT = Path(__file__).resolve().parents[2]
#: The threads a SyncClient runs its loop on are named so.
LOOP_THREAD = "asyncapi-client-sync-"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with FakeServer(FakeExchange.generate(seed=33, users=2, pools=4)).in_thread() as srv:
        yield srv


def loop_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(LOOP_THREAD)]


def use_in_child(client: SyncClient, pool_id: str) -> Outcome:
    """What a child does with the client it inherited: call, look at its threads, close."""
    parents_threads = len(loop_threads())  # the parent's thread does not exist here
    pool = client.pool(pool_id)
    tokens = client.with_response.tokens()
    threads = loop_threads()
    client.close()
    try:
        client.pool(pool_id)
    except RuntimeError as exc:
        after_close = str(exc)
    else:
        after_close = "no error"
    return {
        "pool": pool.pool_id,
        "tokens": tokens.status,
        "threads_at_fork": parents_threads,
        "threads_in_use": len(threads),
        "closed": client.closed,
        "threads_after_close": sum(t.is_alive() for t in threads),
        "after_close": after_close,
    }


def check_child(outcome: Outcome, pool_id: str) -> None:
    assert "error" not in outcome, outcome["error"]
    assert outcome == {
        "pool": pool_id,
        "tokens": 200,
        "threads_at_fork": 0,  # only the forking thread survives a fork
        "threads_in_use": 1,  # the child's own loop thread
        "closed": True,
        "threads_after_close": 0,
        "after_close": "this SyncClient is closed; create a new one",
    }


def closed_in_child(client: SyncClient) -> Outcome:
    """What a child sees of a client closed before the fork: still closed."""
    try:
        client.tokens()
    except RuntimeError as exc:
        error = str(exc)
    else:
        error = "no error"
    client.close()  # twice is fine, here too
    return {"closed": client.closed, "error": error}


def test_a_client_made_before_os_fork_works_in_the_child_and_still_in_the_parent(
    server: FakeServer,
) -> None:
    pool_id = next(iter(server.exchange.pools))
    closed_before = SyncClient(base_url=server.base_url)
    closed_before.close()
    with SyncClient(base_url=server.base_url, timeout=10.0) as client:
        assert client.pool(pool_id).pool_id == pool_id  # a connection in the parent's pool
        outcome = in_forked_child(
            lambda: {**use_in_child(client, pool_id), "other": closed_in_child(closed_before)}
        )
        assert "error" not in outcome, outcome["error"]
        # a client closed before the fork is not brought back to life there
        assert outcome.pop("other") == {
            "closed": True,
            "error": "this SyncClient is closed; create a new one",
        }
        check_child(outcome, pool_id)
        # the parent's client, thread and connections were left alone
        assert not client.closed
        assert len(loop_threads()) == 1
        assert client.pool(pool_id).pool_id == pool_id
        assert client.with_response.tokens().status == 200


def _multiprocessing_child(
    client: SyncClient, pool_id: str, conn: multiprocessing.connection.Connection
) -> None:
    try:
        outcome = use_in_child(client, pool_id)
    except BaseException as exc:
        outcome = {"error": f"{type(exc).__name__}: {exc}"}
    conn.send(outcome)
    conn.close()


def test_a_client_made_before_a_fork_started_process_works_there(server: FakeServer) -> None:
    pool_id = next(iter(server.exchange.pools))
    context = multiprocessing.get_context("fork")
    with SyncClient(base_url=server.base_url, timeout=10.0) as client:
        assert client.pool(pool_id).pool_id == pool_id
        receiving, sending = context.Pipe(duplex=False)
        process = context.Process(target=_multiprocessing_child, args=(client, pool_id, sending))
        with forking():
            process.start()
        sending.close()
        try:
            if not receiving.poll(CHILD_BOUND):
                pytest.fail(f"the child process sent nothing within {CHILD_BOUND:g}s")
            outcome = receiving.recv()
            process.join(CHILD_BOUND)
            assert process.exitcode == 0
        finally:
            if process.is_alive():
                assert process.pid is not None
                os.kill(process.pid, signal.SIGKILL)
                process.join()
            receiving.close()
        check_child(outcome, pool_id)
        assert client.pool(pool_id).pool_id == pool_id
        assert not client.closed


def test_threads_of_the_child_calling_at_once_share_one_fresh_client(server: FakeServer) -> None:
    pools = list(server.exchange.pools)

    def several_threads() -> Outcome:
        got: list[str] = []
        errors: list[str] = []

        def call(pool_id: str) -> None:
            try:
                got.append(client.pool(pool_id).pool_id)
            except Exception as exc:
                errors.append(repr(exc))

        threads = [threading.Thread(target=call, args=(p,)) for p in pools * 2]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(CHILD_BOUND)
        made = len(loop_threads())
        client.close()
        return {"got": sorted(got), "errors": errors, "loop_threads": made}

    with SyncClient(base_url=server.base_url, timeout=10.0) as client:
        client.tokens()
        outcome = in_forked_child(several_threads)
        assert outcome == {"got": sorted(pools * 2), "errors": [], "loop_threads": 1}
        assert len(client.tokens()) > 0


def test_a_walk_begun_before_the_fork_is_refused_in_the_child_and_resumes_there(
    server: FakeServer,
) -> None:
    """A walk's requests and fetches ahead belong to the parent's loop: in the child, its
    next item is refused with a clear error, and its checkpoint begins a new walk there."""
    address = next(iter(server.exchange.users))
    with SyncClient(base_url=server.base_url, timeout=10.0) as client:
        every = [order.transaction_id for order in client.iter_orders(address, page_size=5)]
        assert len(every) > 10
        walk = client.iter_orders(address, page_size=5)
        first = [next(walk).transaction_id for _ in range(7)]

        def walk_child() -> Outcome:
            try:
                next(walk)
            except RuntimeError as exc:
                error = str(exc)
            else:
                error = "no error"
            walk.close()  # the parent's walk: nothing of it to end here
            rest = client.iter_orders(address, page_size=5, resume=walk.checkpoint)
            tail = [order.transaction_id for order in rest]
            client.close()
            return {"error": error, "tail": tail}

        with walk._lock:  # as if a thread of the parent were taking a step at the fork
            outcome = in_forked_child(walk_child)
        assert "began before the process was forked" in outcome["error"]
        assert first + outcome["tail"] == every
        # the parent's walk goes on where it stood
        assert first + [order.transaction_id for order in walk] == every


#: A script whose forked child uses the client, then exits the ordinary way: the
#: interpreter's exit (atexit, finalizers, collection) must leave the parent's alone too.
NORMAL_EXIT = """
import os, signal, sys
from asyncapi_client import SyncClient
from asyncapi_client.testing import FakeExchange, FakeServer
from tests._fork import CHILD_BOUND, Outcome, forking, in_forked_child

signal.alarm({bound})  # nothing here may hang
with FakeServer(FakeExchange.generate(seed=33, users=1, pools=2)).in_thread() as server:
    client = SyncClient(base_url=server.base_url, timeout=5.0, max_retries=0)
    pool_id = next(iter(server.exchange.pools))
    client.pool(pool_id)  # an open connection in the parent's pool
    pid = os.fork()
    if pid == 0:
        signal.alarm({bound})  # (an alarm is not inherited)
        client.pool(pool_id)
        sys.exit(0)  # the child's own client is collected unclosed, the parent's kept
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    for _ in range(3):  # the parent's pooled connection, and fresh ones, still answer
        client.pool(pool_id)
    assert len(server.requests) == 5, server.requests
    client.close()
print("parent ok")
"""


def test_a_child_that_exits_normally_leaves_the_parents_client_working() -> None:
    script = textwrap.dedent(NORMAL_EXIT.format(bound=int(CHILD_BOUND)))
    try:
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=CHILD_BOUND * 2,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the script did not end within {CHILD_BOUND * 2:g}s")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "parent ok\n", done.stderr
