"""SyncClient: the async client behind blocking calls, line by line of the contract.

The fake exchange runs ``in_thread()`` (its own loop in a thread), as it would for a user's
sync code; the tests themselves are plain functions. Gates hold requests at the server so
that "in flight" is a fact the server reports, never a sleep.
"""

from __future__ import annotations

import _thread
import asyncio
import gc
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import pytest

from asyncapi_client import (
    Checkpoint,
    Client,
    LeaderboardEntry,
    Network,
    NotFoundError,
    Order,
    OrdersPage,
    Response,
    RetryEvent,
    ServerError,
    SyncClient,
    SyncWalk,
    Walk,
)
from asyncapi_client._sync import _Call, _cancel
from asyncapi_client.testing import FakeExchange, FakeServer, Fault, Reply

T = TypeVar("T")

#: Every wait of these tests is bounded by this (seconds); none paces them.
BOUND = 30.0


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with FakeServer(FakeExchange.generate(seed=26, users=3, pools=8)).in_thread() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _fresh(server: FakeServer) -> Iterator[None]:
    server.requests.clear()
    yield
    # a request a gate held ends in its own test: let go late, it would take the next test's
    # scripted reply (seen under load: a walk's 503 answered a closed walk's request)
    wait_for(server, lambda: server.in_flight == 0)
    server.clear_faults()
    server.clear_scripts()


@pytest.fixture
def client(server: FakeServer) -> Iterator[SyncClient]:
    with SyncClient(base_url=server.base_url, testnet_base_url=server.testnet_base_url) as c:
        yield c


def pool_ids(server: FakeServer) -> list[str]:
    return list(server.exchange.pools)


def a_user(server: FakeServer) -> str:
    return next(iter(server.exchange.users))


def wait_for(server: FakeServer, condition: Callable[[], bool]) -> None:
    """Block until ``condition()`` holds, checked whenever a request arrives or ends."""
    asyncio.run(server.wait_until(condition, timeout=BOUND))


def in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``target`` in a new thread; the list gets its result or the exception it raised."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(target())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def private_tasks(client: SyncClient) -> set[asyncio.Task[Any]]:
    """The tasks on the client's own loop, apart from the one asking."""

    async def tasks() -> set[asyncio.Task[Any]]:
        return asyncio.all_tasks() - {asyncio.current_task()}

    return client._run(tasks())


async def async_results(server: FakeServer) -> dict[str, Any]:
    """What the async Client answers, for comparison."""
    async with Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url) as c:
        user = a_user(server)
        token = server.exchange.tokens[0]["address"]
        return {
            "tokens": await c.tokens(),
            "token_markets": await c.token_markets(token),
            "pool": await c.pool(pool_ids(server)[0]),
            "user": await c.user(user),
            "orders": await c.orders(user, limit=7, status="filled"),
            "leaderboard": await c.leaderboard(page=2, limit=10),
            "iter_orders": [o async for o in c.iter_orders(user, page_size=40)],
            "iter_order_pages": [p async for p in c.iter_order_pages(user, page_size=40)],
            "iter_leaderboard": [e async for e in c.iter_leaderboard(page_size=30)],
            "iter_leaderboard_pages": [
                p async for p in c.iter_leaderboard_pages(page_size=30, concurrency=2)
            ],
        }


# --- same operations, streams, types and errors as Client --------------------------------------


def test_the_six_operations_and_four_streams_answer_as_the_async_client(
    server: FakeServer, client: SyncClient
) -> None:
    expected = asyncio.run(async_results(server))
    user = a_user(server)
    token = server.exchange.tokens[0]["address"]
    got: dict[str, Any] = {
        "tokens": client.tokens(),
        "token_markets": client.token_markets(token),
        "pool": client.pool(pool_ids(server)[0]),
        "user": client.user(user),
        "orders": client.orders(user, limit=7, status="filled"),
        "leaderboard": client.leaderboard(page=2, limit=10),
        "iter_orders": list(client.iter_orders(user, page_size=40)),
        "iter_order_pages": list(client.iter_order_pages(user, page_size=40)),
        "iter_leaderboard": list(client.iter_leaderboard(page_size=30)),
        "iter_leaderboard_pages": list(client.iter_leaderboard_pages(page_size=30, concurrency=2)),
    }
    assert got == expected
    assert len(got["iter_orders"]) == len(server.exchange.orders[user]) > 40
    assert len(got["iter_leaderboard"]) == len(server.exchange.leaderboard) > 30


def test_with_response_gives_the_whole_response(server: FakeServer, client: SyncClient) -> None:
    pid = pool_ids(server)[1]
    server.script("pool", Reply(503))
    client.set_testing(True)
    response = client.with_response.pool(pid)
    assert response.value == client.pool(pid)
    assert (response.status, response.attempts) == (200, 2)
    assert response.url == f"{server.base_url}/api/clob/pools/{pid}"
    assert response.headers["Content-Type"].startswith("application/json")
    page = client.with_response.orders(a_user(server), limit=3)
    assert isinstance(page.value, OrdersPage)
    assert len(page.value.orders) == 3


def test_with_response_offers_the_six_operations(server: FakeServer, client: SyncClient) -> None:
    user = a_user(server)
    token = server.exchange.tokens[0]["address"]
    plain_and_full: list[tuple[Any, Response[Any]]] = [
        (client.tokens(search="e"), client.with_response.tokens(search="e")),
        (client.token_markets(token), client.with_response.token_markets(token)),
        (client.pool(pool_ids(server)[2]), client.with_response.pool(pool_ids(server)[2])),
        (client.user(user), client.with_response.user(user)),
        (client.orders(user, limit=2), client.with_response.orders(user, limit=2)),
        (client.leaderboard(limit=4), client.with_response.leaderboard(limit=4)),
    ]
    for plain, full in plain_and_full:
        assert full.value == plain
        assert full.status == 200
    assert client.with_response.token_markets(token).network is Network.TESTNET
    assert client.network is Network.MAINNET


def test_errors_are_the_async_clients(server: FakeServer, client: SyncClient) -> None:
    with pytest.raises(NotFoundError) as missing:
        client.pool("no-such-pool")
    assert missing.value.status == 404
    server.set_fault("user", Fault(error_rate=1.0, error_status=502))
    client.set_testing(True, max_retries=2)
    with pytest.raises(ServerError, match="after 3 attempts") as failed:
        client.user(a_user(server))
    assert failed.value.attempts == 3
    # Invalid arguments: ValueError, before any request (streams: when made, as Client's).
    server.requests.clear()
    with pytest.raises(ValueError, match="pool_id"):
        client.pool("")
    with pytest.raises(ValueError, match="status"):
        client.orders(a_user(server), status="fillled")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="page_size"):
        client.iter_orders(a_user(server), page_size=0)
    with pytest.raises(ValueError, match="concurrency"):
        client.iter_leaderboard(concurrency=-1)
    assert server.requests == []


def test_a_stream_is_an_iterator_with_checkpoint_and_resume(
    server: FakeServer, client: SyncClient
) -> None:
    user = a_user(server)
    every = list(client.iter_orders(user, page_size=25))
    walk = client.iter_orders(user, page_size=25)
    assert isinstance(walk, SyncWalk)
    assert iter(walk) is walk
    assert walk.checkpoint.consumed == 0
    first = [next(walk) for _ in range(37)]
    point = walk.checkpoint
    walk.close()
    assert list(walk) == []  # closed: hands out nothing more, and keeps its checkpoint
    assert walk.checkpoint == point
    rest = list(client.iter_orders(user, page_size=25, resume=point.to_json()))
    assert first + rest == every
    # max_items, and page walks resumed from a checkpoint object
    assert list(client.iter_orders(user, page_size=25, max_items=5)) == every[:5]
    pages = client.iter_order_pages(user, page_size=25, resume=point)
    assert [o for p in pages for o in p.orders] == rest
    board = client.iter_leaderboard(page_size=20)
    with board:
        head = [next(board) for _ in range(45)]
        resumed: SyncWalk[LeaderboardEntry] = client.iter_leaderboard(
            page_size=20, resume=Checkpoint.from_json(board.checkpoint.to_json())
        )
    assert head + list(resumed) == list(client.iter_leaderboard(page_size=20))
    with pytest.raises(ValueError, match="checkpoint"):
        client.iter_leaderboard(page_size=20, resume=point)  # an orders checkpoint


def test_a_stream_fetches_ahead_and_close_ends_the_request_in_flight(
    server: FakeServer, client: SyncClient
) -> None:
    user = a_user(server)
    with server.gate("orders") as gate:
        gate.release(1)  # the first page only
        walk = client.iter_orders(user, page_size=10)
        order: Order = next(walk)
        gate.wait_arrived(2)  # page 2 asked for while the consumer holds page 1's first order
        assert server.in_flight == 1
        walk.close()
        wait_for(server, lambda: server.in_flight == 0)
        assert [r.cancelled for r in server.requests] == [False, True]
    assert order.user == user


def test_close_from_another_thread_ends_a_next_waiting_there(
    server: FakeServer, client: SyncClient
) -> None:
    walk = client.iter_leaderboard_pages(page_size=10, concurrency=1)
    with server.gate("leaderboard") as gate:
        thread, outcome = in_thread(lambda: list(walk))
        gate.wait_arrived(1)
        walk.close()
        thread.join(BOUND)
        assert outcome == [[]]  # the iteration ended, with nothing lost or raised
        wait_for(server, lambda: server.in_flight == 0)
        assert [r.cancelled for r in server.requests] == [True]
    walk.close()  # twice is fine


def test_checkpoint_while_another_thread_steps_the_walk(
    server: FakeServer, client: SyncClient
) -> None:
    walk = client.iter_order_pages(a_user(server), page_size=10)
    with server.gate("orders") as gate:
        gate.release(1)
        first = next(walk)
        gate.wait_arrived(2)
        thread, outcome = in_thread(lambda: next(walk))  # waits for the held page 2
        wait_for(server, lambda: walk._lock.locked())
        point = walk.checkpoint  # does not wait for that step
        assert (point.cursor, point.consumed) == (None, len(first.orders))
        gate.release()
        thread.join(BOUND)
    assert isinstance(outcome[0], OrdersPage)
    assert walk.checkpoint.cursor is not None
    walk.close()


def test_a_walk_closed_from_the_clients_own_thread_is_refused_and_stays_usable(
    server: FakeServer,
) -> None:
    refused: list[RuntimeError] = []
    walks: list[SyncWalk[Order]] = []
    made = threading.Event()  # the walk may fetch (and retry) before iter_orders returns

    def on_retry(event: RetryEvent) -> None:
        assert made.wait(BOUND)
        try:
            walks[0].close()
        except RuntimeError as exc:
            refused.append(exc)

    server.script("orders", Reply(503))
    with SyncClient(base_url=server.base_url, on_retry=on_retry) as client:
        client.set_testing(True)
        walks.append(client.iter_orders(a_user(server), page_size=10))
        made.set()
        first = next(walks[0])  # its first page was retried: on_retry tried to close it
        assert "own event loop thread" in str(refused[0])
        assert next(walks[0]) != first  # not closed: it goes on
        assert "SyncWalk of <Walk orders open" in repr(walks[0])
        walks[0].close()
        assert list(walks[0]) == []


def test_threads_share_one_walk_and_each_item_comes_once(
    server: FakeServer, client: SyncClient
) -> None:
    user = a_user(server)
    walk = client.iter_orders(user, page_size=7)
    threads = [in_thread(lambda: list(walk)) for _ in range(4)]
    for thread, _ in threads:
        thread.join(BOUND)
    got = [o.transaction_id for _, outcome in threads for o in outcome[0]]
    assert sorted(got) == sorted(o.transaction_id for o in client.iter_orders(user))


# --- many threads, running loops -----------------------------------------------------------------


def test_eight_threads_twenty_calls_each_at_once(server: FakeServer, client: SyncClient) -> None:
    pools = pool_ids(server)
    start = threading.Barrier(8)

    def worker(n: int) -> list[str]:
        start.wait(BOUND)
        return [client.pool(pools[n]).pool_id for _ in range(20)]

    with server.gate("pool") as gate:
        threads = [in_thread(lambda n=n: worker(n)) for n in range(8)]  # type: ignore[misc]
        gate.wait_arrived(8)  # the first call of every thread is in flight at the same time
        assert server.in_flight == 8
        gate.release()
        for thread, _ in threads:
            thread.join(BOUND)
    assert [outcome for _, outcome in threads] == [[[pools[n]] * 20] for n in range(8)]
    assert len(server.requests) == 160
    assert all(r.status == 200 for r in server.requests)


def test_a_call_or_a_walk_from_inside_asyncio_run_is_refused(server: FakeServer) -> None:
    pid = pool_ids(server)[0]

    async def main() -> list[str]:
        # A running loop on this thread: a call would block it; refused, the client usable
        refused = []
        with SyncClient(base_url=server.base_url) as client:
            for attempt in (lambda: client.pool(pid), lambda: next(client.iter_orders("0xa"))):
                try:
                    attempt()
                except RuntimeError as exc:
                    refused.append(str(exc))
        return refused

    refused = asyncio.run(main())
    assert len(refused) == 2
    assert all("running event loop" in text and "async Client" in text for text in refused)


def test_a_call_from_an_on_retry_callback_is_refused_not_deadlocked(server: FakeServer) -> None:
    seen: list[BaseException] = []
    holder: list[SyncClient] = []

    def on_retry(event: RetryEvent) -> None:
        try:
            holder[0].pool(pool_ids(server)[0])
        except RuntimeError as exc:
            seen.append(exc)
        try:
            holder[0].close()
        except RuntimeError as exc:
            seen.append(exc)

    server.script("tokens", Reply(503))
    with SyncClient(base_url=server.base_url, on_retry=on_retry) as client:
        holder.append(client)
        client.set_testing(True)
        assert client.tokens()
    assert [str(e).split(" (")[0] for e in seen] == [
        "a SyncClient cannot be called from its own event loop thread",
        "a SyncClient cannot be closed from its own event loop thread",
    ]


# --- KeyboardInterrupt and other exceptions in the waiting thread ----------------------------


class Alarm(Exception):
    """What a signal handler of the user's raises."""


def _raise_alarm(signum: int, frame: object) -> None:
    raise Alarm("the handler's own exception")


def _signal(signum: signal.Signals) -> None:
    """A real signal to the main thread: it interrupts a blocked wait at once (EINTR)."""
    signal.pthread_kill(threading.main_thread().ident or 0, signum)


def _flag(signum: signal.Signals) -> None:
    """The signal's Python flag only, as when a signal lands just before the wait begins (or
    on Windows): nothing interrupts the wait, the caller must look by itself."""
    _thread.interrupt_main(signum)


@pytest.mark.parametrize(
    ("signum", "handler", "raised", "deliver"),
    [
        (signal.SIGINT, signal.default_int_handler, KeyboardInterrupt, _signal),
        (signal.SIGUSR1, _raise_alarm, Alarm, _signal),
        (signal.SIGINT, signal.default_int_handler, KeyboardInterrupt, _flag),
    ],
    ids=["KeyboardInterrupt", "handler-exception", "KeyboardInterrupt-without-EINTR"],
)
def test_an_interrupted_call_ends_its_request_before_it_propagates(
    server: FakeServer,
    signum: signal.Signals,
    handler: Callable[[int, Any], None],
    raised: type[BaseException],
    deliver: Callable[[signal.Signals], None],
) -> None:
    assert threading.current_thread() is threading.main_thread()  # where signals land
    before = set(threading.enumerate())
    client = SyncClient(base_url=server.base_url, timeout=3 * BOUND)
    previous = signal.signal(signum, handler)
    try:
        with server.gate("pool") as gate:

            def interrupt() -> None:
                gate.wait_arrived(1)  # the request is at the server, which stalls it
                deliver(signum)
                try:  # a call that missed the interruption would end with its answer
                    wait_for(server, lambda: server.requests[0].cancelled)
                finally:
                    gate.release()

            helper = threading.Thread(target=interrupt)
            helper.start()
            with pytest.raises(raised):
                client.pool(pool_ids(server)[0])
            helper.join(BOUND)
            assert private_tasks(client) == set()  # the call's task has ended
            wait_for(server, lambda: server.in_flight == 0)
            (request,) = server.requests
            assert request.cancelled  # the server saw the client go away
            assert request.status is None
        # The client goes on working, then closes: no thread of its own is left.
        assert client.pool(pool_ids(server)[0]).pool_id == pool_ids(server)[0]
    finally:
        signal.signal(signum, previous)
        client.close()
    assert set(threading.enumerate()) == before


class StepSpy(Generic[T]):
    """A walk that tells when a step begins (on the client's loop), then takes it."""

    def __init__(self, walk: Walk[T], stepping: threading.Event) -> None:
        self._inner = walk
        self._stepping = stepping

    async def __anext__(self) -> T:
        self._stepping.set()
        return await anext(self._inner)

    async def aclose(self) -> None:
        await self._inner.aclose()

    @property
    def checkpoint(self) -> Checkpoint:
        return self._inner.checkpoint


def test_an_interrupted_walk_ends_its_fetches(server: FakeServer) -> None:
    assert threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with (
            SyncClient(base_url=server.base_url) as client,
            server.gate("leaderboard") as gate,
        ):
            gate.release(1)
            walk = client.iter_leaderboard(page_size=10, concurrency=3)
            next(walk)
            gate.wait_arrived(4)  # three pages fetched ahead, held at the server
            for _ in range(9):
                next(walk)
            stepping = threading.Event()
            walk._walk = StepSpy(walk._walk, stepping)  # type: ignore[assignment]

            def interrupt() -> None:
                stepping.wait(BOUND)  # the next step runs on the loop: the caller waits
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

            helper = threading.Thread(target=interrupt)
            helper.start()
            with pytest.raises(KeyboardInterrupt):
                next(walk)  # waits for page 2, held at the gate
            helper.join(BOUND)
            assert private_tasks(client) == set()
            wait_for(server, lambda: server.in_flight == 0)
            assert [r.cancelled for r in server.requests] == [False, True, True, True]
            assert list(walk) == []  # the walk was closed by the interruption
            assert walk.checkpoint.consumed == 10  # still where the consumer stood
    finally:
        signal.signal(signal.SIGINT, previous)


async def _raise(exc: BaseException) -> None:
    raise exc


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)], ids=repr)
def test_a_call_whose_own_code_raises_keyboardinterrupt_leaves_the_loop_serving(
    server: FakeServer, client: SyncClient, exc: BaseException
) -> None:
    """asyncio lets KeyboardInterrupt and SystemExit out of its loop: the caller gets them,
    and the client's thread goes on serving the other calls."""
    with pytest.raises(type(exc)):
        client._run(_raise(exc))
    assert client.pool(pool_ids(server)[0]).pool_id == pool_ids(server)[0]


# --- close(), with, and collection ---------------------------------------------------------------


def test_close_ends_every_thread_and_connection(server: FakeServer) -> None:
    before = set(threading.enumerate())
    port = server.port
    # A host name: its resolution runs in the loop's executor, one more thread to end.
    with SyncClient(base_url=f"http://localhost:{port}") as client:
        assert client.tokens()
        assert set(threading.enumerate()) - before  # the loop's thread, the resolver's
        inner = client._target
        was_closed = client.closed
    assert not was_closed
    assert client.closed
    assert inner.closed
    assert set(threading.enumerate()) == before
    client.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        client.pool(pool_ids(server)[0])
    walk = client.iter_orders(a_user(server))
    with pytest.raises(RuntimeError, match="closed"):
        next(walk)
    walk.close()
    assert "closed" in repr(client)


def test_close_during_calls_of_other_threads(server: FakeServer) -> None:
    before = set(threading.enumerate())
    client = SyncClient(base_url=server.base_url)
    walk = client.iter_orders(a_user(server))
    with server.gate("pool") as gate, server.gate("orders") as orders_gate:
        call, call_outcome = in_thread(lambda: client.pool(pool_ids(server)[0]))
        stream, stream_outcome = in_thread(lambda: list(walk))
        gate.wait_arrived(1)
        orders_gate.wait_arrived(1)
        client.close()
        call.join(BOUND)
        stream.join(BOUND)
        wait_for(server, lambda: server.in_flight == 0)
        assert [r.cancelled for r in server.requests] == [True, True]
    for outcome in (call_outcome, stream_outcome):
        (error,) = outcome
        assert isinstance(error, RuntimeError)
        assert str(error) == "the SyncClient was closed during this call"
    walk.close()  # after the client: fine
    assert set(threading.enumerate()) == before


def test_a_client_dropped_unclosed_warns_and_stops_its_thread(server: FakeServer) -> None:
    before = set(threading.enumerate())
    client = SyncClient(base_url=server.base_url)
    assert client.pool(pool_ids(server)[0]).pool_id
    (thread,) = set(threading.enumerate()) - before
    inner = client._target
    with pytest.warns(ResourceWarning, match="without close"):
        del client  # no reference cycle: collected at once
    thread.join(BOUND)
    assert not thread.is_alive()
    assert inner.closed


def test_a_client_collected_on_its_own_thread_stops_without_waiting_for_itself(
    server: FakeServer,
) -> None:
    before = set(threading.enumerate())
    holder = [SyncClient(base_url=server.base_url)]
    run = holder[0]._runner.run  # the runner's, holding no reference to the client
    (thread,) = set(threading.enumerate()) - before

    async def drop() -> None:
        holder.clear()  # the last reference goes on the client's own thread

    with pytest.warns(ResourceWarning, match="without close"):
        run(drop())
    thread.join(BOUND)
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        run(drop())


def test_a_call_that_reaches_the_loop_after_close_began_does_not_start(
    server: FakeServer,
) -> None:
    """The race between a call being handed over and close(): the call is told, never lost."""
    client = SyncClient(base_url=server.base_url)
    runner = client._runner
    started: list[bool] = []

    async def work() -> None:
        started.append(True)

    held, busy = threading.Event(), threading.Event()

    def hold() -> None:  # keeps the loop busy while the race is set up
        busy.set()
        held.wait(BOUND)

    try:
        runner.loop.call_soon_threadsafe(hold)
        assert busy.wait(BOUND)
        with runner._lock:  # hand a call over, then close() begins: in that order
            call = _Call(work())
            runner.loop.call_soon_threadsafe(runner._begin, call)
            runner._stopping = True
            runner.loop.call_soon_threadsafe(runner.loop.stop)
        held.set()
        assert call.done.acquire(timeout=BOUND)
        assert isinstance(call.error, RuntimeError)
        assert "closed" in str(call.error)
    finally:
        held.set()
        client.close()
    assert started == []
    # An interruption that came before the hand-over: the call is ended where it stands.
    late = _Call(work())
    _cancel(late)
    assert late.finished
    assert late.done.acquire(blocking=False)
    _cancel(late)  # finished: nothing more to do
    assert started == []


def test_a_walk_keeps_its_client_alive(server: FakeServer) -> None:
    walk = SyncClient(base_url=server.base_url).iter_orders(a_user(server), page_size=50)
    gc.collect()
    assert len(list(walk)) == len(server.exchange.orders[a_user(server)])
    responses = SyncClient(base_url=server.base_url).with_response
    gc.collect()
    assert responses.pool(pool_ids(server)[0]).status == 200
    with pytest.warns(ResourceWarning):
        del walk, responses


def test_bad_arguments_raise_and_leave_no_thread(server: FakeServer) -> None:
    before = set(threading.enumerate())
    with pytest.raises(ValueError, match="max_retries"):
        SyncClient(base_url=server.base_url, max_retries=-1)
    with pytest.raises(ValueError, match="timeout"):
        SyncClient(base_url=server.base_url, timeout=0)

    async def with_a_session() -> None:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            with pytest.raises(ValueError, match="session= cannot be used with a SyncClient"):
                SyncClient(base_url=server.base_url, session=session)

    asyncio.run(with_a_session())
    assert set(threading.enumerate()) == before


# --- the testing helpers: a sync script against the threaded fake --------------------------------


def cheapest_pool(base_url: str, pool_ids: list[str]) -> tuple[str, float]:
    """A user's script, written without async: the pool with the lowest price."""
    with SyncClient(base_url=base_url) as client:
        pools = [client.pool(pool_id) for pool_id in pool_ids]
    best = min(pools, key=lambda pool: pool.price)
    return best.pool_id, best.price


def test_a_sync_script_against_the_threaded_fake() -> None:
    exchange = FakeExchange.generate(seed=3, pools=5)
    with FakeServer(exchange).in_thread() as fake:
        pool_id, price = cheapest_pool(fake.base_url, list(exchange.pools))
        assert [r.operation for r in fake.requests] == ["pool"] * 5
        fake.set_fault("pool", Fault(error_rate=1.0, error_status=500))
        with SyncClient(base_url=fake.base_url) as client:
            client.set_testing(True, max_retries=0)  # fail at once, no back-off
            with pytest.raises(ServerError):
                client.pool(pool_id)
    assert price == min(pool["price"] for pool in exchange.pools.values())
    assert exchange.pools[pool_id]["price"] == price
