"""Gates on the fake server: hold requests, count what is in flight, release them, no sleeps."""

from __future__ import annotations

import asyncio

import pytest

from asyncapi_client import Client, NotFoundError
from asyncapi_client.testing import FakeExchange, FakeServer, Gate, Reply


def pools(server: FakeServer, count: int) -> list[str]:
    return list(server.exchange.pools)[:count]


@pytest.mark.fake_exchange(seed=3, pools=5)
async def test_a_gate_holds_until_released_and_counts_in_flight(
    fake_server: FakeServer, fake_client: Client
) -> None:
    ids = pools(fake_server, 3)
    async with fake_server.gate("pool") as gate:
        calls = asyncio.gather(*(fake_client.pool(i) for i in ids))
        await gate.arrived(3)
        assert (gate.arrivals, gate.held) == (3, 3)
        assert fake_server.in_flight == 3
        assert [r.status for r in fake_server.requests] == [None, None, None]
        assert not calls.done()
        assert await fake_client.tokens()  # other operations pass
        gate.release()
        result = await calls
    assert [p.pool_id for p in result] == ids
    assert (fake_server.in_flight, fake_server.max_in_flight) == (0, 4)  # 3 held + tokens
    records = [r for r in fake_server.requests if r.operation == "pool"]
    latest_arrival = max(r.time for r in records)
    assert all(r.answered_at is not None and r.answered_at >= latest_arrival for r in records)


@pytest.mark.fake_exchange(seed=3, pools=5)
async def test_release_a_count_lets_that_many_go_in_order(
    fake_server: FakeServer, fake_client: Client
) -> None:
    ids = pools(fake_server, 4)
    with fake_server.gate("pool") as gate:
        tasks = []
        for n, pool_id in enumerate(ids, 1):  # one by one: the arrival order is known
            tasks.append(asyncio.ensure_future(fake_client.pool(pool_id)))
            await gate.arrived(n)
        gate.release(1)
        first = await tasks[0]
        assert first.pool_id == ids[0]
        assert [t.done() for t in tasks[1:]] == [False, False, False]
        gate.release(5)  # three held, and two more allowed through when they come
        await asyncio.gather(*tasks[1:])
        assert (await fake_client.pool(ids[0])).pool_id == ids[0]
        assert (await fake_client.pool(ids[1])).pool_id == ids[1]
        fifth = asyncio.ensure_future(fake_client.pool(ids[2]))
        await gate.arrived(7)
        assert gate.held == 1
        states = [gate.is_open]
    states.append(gate.is_open)
    assert states == [False, True]  # leaving the block opened it
    assert (await fifth).pool_id == ids[2]
    assert fake_server.max_in_flight == 4


async def test_arrived_counts_from_the_gate_and_returns_at_once_if_done(
    fake_server: FakeServer, fake_client: Client
) -> None:
    await fake_client.tokens()
    async with fake_server.gate() as gate:  # "*": every operation
        await gate.arrived(0)
        task = asyncio.ensure_future(fake_client.leaderboard())
        await gate.arrived(1)
        await gate.arrived(1)
        gate.release()
        await task
    assert gate.arrivals == 1


async def test_arrived_times_out_saying_how_many_came(fake_server: FakeServer) -> None:
    async with fake_server.gate("user") as gate:
        with pytest.raises(TimeoutError, match=r"gate on 'user': 0 of 2 requests arrived"):
            await gate.arrived(2, timeout=0.01)


async def test_an_operation_gate_wins_over_star(
    fake_server: FakeServer, fake_client: Client
) -> None:
    with fake_server.gate("*") as star, fake_server.gate("tokens") as tokens:
        task = asyncio.ensure_future(fake_client.tokens())
        await tokens.arrived(1)
        assert star.arrivals == 0
        tokens.release()
        await task


async def test_a_gate_works_with_scripts_and_unknown_ids(
    fake_server: FakeServer, fake_client: Client
) -> None:
    """The script is picked on arrival; the gate then holds the scripted answer too."""
    fake_client.set_testing(True, max_retries=0)
    fake_server.script("pool", Reply(404))
    async with fake_server.gate("pool") as gate:
        task = asyncio.ensure_future(fake_client.pool("anything"))
        await gate.arrived(1)
        assert fake_server.pending_replies("pool") == 0
        gate.release()
        with pytest.raises(NotFoundError):
            await task


async def test_closing_the_server_lets_held_requests_go() -> None:
    server = await FakeServer(FakeExchange.generate(seed=1, users=1, pools=1)).start()
    gate = server.gate("tokens")
    async with Client(base_url=server.base_url, max_retries=0) as client:
        task = asyncio.ensure_future(client.tokens())
        await gate.arrived(1)
        await server.close()  # does not hang on the held request
        await asyncio.gather(task, return_exceptions=True)
    assert gate.is_open
    with pytest.raises(RuntimeError, match="closed"):
        server.gate("tokens")


async def test_gate_arguments_are_checked(fake_server: FakeServer) -> None:
    with pytest.raises(ValueError, match="unknown operation"):
        fake_server.gate("pools")
    gate = fake_server.gate("pool")
    with pytest.raises(ValueError, match="already has a gate"):
        fake_server.gate("pool")
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="count"):
            await gate.arrived(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="count"):
            gate.release(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        await gate.arrived(1, timeout=0)
    gate.close()
    gate.close()
    assert isinstance(fake_server.gate("pool"), Gate)  # closed: the operation is free again
    assert "Gate 'pool'" in repr(gate)


async def test_an_open_gate_still_counts_arrivals(
    fake_server: FakeServer, fake_client: Client
) -> None:
    async with fake_server.gate("tokens") as gate:
        gate.release()
        assert await fake_client.tokens()
        await gate.arrived(1)
        assert (gate.arrivals, gate.held, gate.is_open) == (1, 0, True)


async def test_clearing_the_record_while_a_request_is_held(
    fake_server: FakeServer, fake_client: Client
) -> None:
    """The answered request's record goes where its arrival record is, or nowhere."""
    async with fake_server.gate("tokens") as gate:
        first = asyncio.ensure_future(fake_client.tokens())
        await gate.arrived(1)
        fake_server.requests.clear()  # the test forgets what came before
        await fake_client.leaderboard()
        second = asyncio.ensure_future(fake_client.tokens(search="a"))
        await gate.arrived(2)
        del fake_server.requests[0]  # the leaderboard: the held one moves down a place
        gate.release()
        await asyncio.gather(first, second)
    assert [(r.operation, r.query, r.status) for r in fake_server.requests] == [
        ("tokens", {"search": "a"}, 200)
    ]


# --- wait_until: any condition on the server's state, checked as requests come and go -------


async def test_wait_until_wakes_when_requests_arrive_and_are_answered(
    fake_server: FakeServer, fake_client: Client
) -> None:
    def answered() -> int:
        return sum(r.answered_at is not None for r in fake_server.requests)

    await fake_server.wait_until(lambda: True)  # true already: returns at once
    async with fake_server.gate("tokens") as gate:
        calls = asyncio.gather(fake_client.tokens(), fake_client.leaderboard())
        await fake_server.wait_until(lambda: len(fake_server.requests) == 2)
        await fake_server.wait_until(lambda: answered() == 1)  # the leaderboard, not held
        assert (fake_server.in_flight, gate.held) == (1, 1)
        gate.release()
        await fake_server.wait_until(lambda: fake_server.in_flight == 0)
        assert answered() == 2
        await calls


async def test_wait_until_times_out_saying_what_it_saw(fake_server: FakeServer) -> None:
    with pytest.raises(TimeoutError, match=r"within 0.01 s \(0 requests seen, 0 in flight\)"):
        await fake_server.wait_until(lambda: fake_server.in_flight == 1, timeout=0.01)
    with pytest.raises(TypeError, match="condition"):
        await fake_server.wait_until(True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        await fake_server.wait_until(lambda: True, timeout=-1)


async def test_a_client_that_goes_away_cancels_its_request_at_once(
    fake_server: FakeServer,
) -> None:
    """The held request ends when its client does, not when the gate would let it go."""
    async with fake_server.gate("tokens") as gate, Client(base_url=fake_server.base_url) as c:
        call = asyncio.ensure_future(c.tokens())
        await gate.arrived(1)
        call.cancel()  # the client closes the connection
        await fake_server.wait_until(lambda: fake_server.in_flight == 0)
        assert gate.held == 0
    [record] = fake_server.requests
    assert (record.status, record.cancelled, record.reply) == (None, True, None)
    assert record.answered_at is not None
    await asyncio.gather(call, return_exceptions=True)
