"""``demo`` and ``serve-fake``: the embedded fake exchange, offline, on loopback."""

from __future__ import annotations

import asyncio
import errno
import signal
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from asyncapi_client._client import Client
from asyncapi_client._models import LeaderboardEntry, Order, OrderStatus, Pool, Token
from asyncapi_client._network import ENV_VARS, Network

from ._args import UsageError
from ._render import ENTRIES, ORDERS, Output
from ._table import number
from ._text import decimal_text

if TYPE_CHECKING:
    from asyncapi_client.testing import FakeExchange, Fault

    from ._commands import Context

__all__ = ["demo", "serve_fake"]

EXIT_OK = 0
DEMO_SEED = 7


def _ms(start: float) -> str:
    return f"{(time.perf_counter() - start) * 1000:,.0f} ms"


async def demo(ctx: Context) -> int:
    """What a bot does, against the fake: a fan-out, a filtered cursor walk, a board walk."""
    from asyncapi_client.testing import FakeExchange, FakeServer

    out = ctx.render.out
    started = time.perf_counter()
    exchange = FakeExchange.generate(seed=DEMO_SEED)
    async with FakeServer(exchange, host="127.0.0.1", port=0, testnet_port=0) as server:
        out.write_lines(
            [
                "asyncapi-client demo: the real Client against the fake exchange "
                f"(seed {DEMO_SEED}), over loopback sockets, offline",
                f"  mainnet {server.base_url}   testnet {server.testnet_base_url}",
                "",
            ]
        )
        out.flush()
        async with Client(
            base_url=server.base_url, testnet_base_url=server.testnet_base_url
        ) as client:
            await _demo(client, exchange, out)
    out.write_lines(["", f"done in {time.perf_counter() - started:.2f} s"])
    out.flush()
    return EXIT_OK


async def _demo(client: Client, exchange: FakeExchange, out: Output) -> None:
    # 1. A concurrent fan-out: everything a bot needs at start-up, in one TaskGroup.
    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        tokens_task = group.create_task(client.tokens())
        pool_tasks = [group.create_task(client.pool(p)) for p in list(exchange.pools)[:6]]
        user_tasks = [group.create_task(client.user(a)) for a in list(exchange.users)[:4]]
        market_tasks = [
            group.create_task(client.token_markets(t)) for t in list(exchange.markets)[:3]
        ]
    fan_out = _ms(start)
    tokens = tokens_task.result()
    pools = [task.result() for task in pool_tasks]
    markets = sum(len(task.result()) for task in market_tasks)

    # 2. A full cursor walk of one user's orders, with a filter and a page size.
    status, page_size = OrderStatus.FILLED, 25
    owner = max(
        exchange.orders, key=lambda a: sum(o["status"] == status.value for o in exchange.orders[a])
    )
    start = time.perf_counter()
    walked: list[Order] = []
    order_pages = 0
    async for page in client.iter_order_pages(owner, status=status, page_size=page_size):
        order_pages += 1
        walked.extend(page.orders)
    walk_time = _ms(start)

    # 3. A full leaderboard walk: page 1, then the rest concurrently, in page order.
    concurrency, board_size = 4, 50
    start = time.perf_counter()
    entries: list[LeaderboardEntry] = []
    board_pages = 0
    async for board in client.iter_leaderboard_pages(page_size=board_size, concurrency=concurrency):
        board_pages += 1
        entries.extend(board.leaderboard)
    board_time = _ms(start)

    requests = 1 + len(pools) + len(user_tasks) + len(market_tasks)
    indent = " " * len("cursor walk:  ")
    out.write_lines(
        [
            f"fan-out:      1 token list ({len(tokens)} tokens), {len(pools)} pools, "
            f"{len(user_tasks)} users, {len(market_tasks)} market lists in {fan_out}",
            f"{indent}{requests} requests at once in an asyncio.TaskGroup ({markets} markets)",
            f"cursor walk:  {len(walked):,} {status.value} orders of {owner} in "
            f"{order_pages} pages of up to {page_size}, {walk_time}",
            f"leaderboard:  {len(entries):,} entries in {board_pages} pages "
            f"(concurrency {concurrency}), {board_time}",
            "",
            "examples, decimals exactly as the server sent them:",
            *_examples(out, tokens, walked, pools, entries),
        ]
    )
    out.flush()


def _examples(
    out: Output,
    tokens: Sequence[Token],
    orders: Sequence[Order],
    pools: Sequence[Pool],
    entries: Sequence[LeaderboardEntry],
) -> list[str]:
    """A few of the decoded resources: a token, a pool, orders and the top of the board."""
    lines: list[str] = []
    if tokens:
        token = max(tokens, key=lambda t: len(decimal_text(t.total_supply)))
        lines.append(
            f"  token {token.symbol}: totalSupply {decimal_text(token.total_supply)} "
            f"({token.decimals} decimals)"
        )
    if pools:
        pool = pools[0]
        lines.append(
            f"  pool {pool.base_token.symbol}/{pool.quote_token.symbol}: price "
            f"{number(pool.price)}, tvl {number(pool.tvl)}, volume 24h {number(pool.volume_24h)}"
        )
    for records, kind in ((orders[:3], ORDERS), (entries[:3], ENTRIES)):
        if records:
            lines += ["", *(f"  {line}" for line in out.table(kind.columns).lines(records))]
    return lines


def faults_from(specs: Sequence[tuple[str, str, Any]], latency: float | None) -> dict[str, Fault]:
    """One Fault per operation from ``--fault OP:FIELD=VALUE`` specs and ``--latency``."""
    from asyncapi_client.testing import Fault

    fields: dict[str, dict[str, Any]] = {}
    for operation, name, value in specs:
        fields.setdefault(operation, {})[name] = value
    if latency is not None:
        fields.setdefault("*", {})
        for values in fields.values():
            values.setdefault("latency", latency)
    faults: dict[str, Fault] = {}
    for operation, values in fields.items():
        try:
            faults[operation] = Fault(**values)
        except ValueError as exc:  # each field was checked; a combination may still fail
            raise UsageError(f"--fault {operation}: {exc}") from None
    return faults


def _describe(fault: Fault) -> str:
    import attrs

    from asyncapi_client.testing import Fault

    default = Fault()
    changed = [
        f"{field.name}={getattr(fault, field.name)}"
        for field in attrs.fields(Fault)
        if getattr(fault, field.name) != getattr(default, field.name)
    ]
    return ", ".join(changed) or "none"


async def serve_fake(ctx: Context) -> int:
    """Serve the fake exchange until SIGINT or SIGTERM."""
    from asyncapi_client.testing import FakeExchange, FakeServer

    args, out = ctx.args, ctx.render.out
    faults = faults_from(args.fault, args.latency)
    exchange = FakeExchange.generate(seed=args.seed)
    server = FakeServer(exchange, host="127.0.0.1", port=args.port, testnet_port=args.testnet_port)
    for operation, fault in faults.items():
        server.set_fault(operation, fault)
    try:
        await server.start()
    except OSError as exc:
        await server.close()
        busy = exc.errno == errno.EADDRINUSE
        reason = "the port is already in use" if busy else (exc.strerror or str(exc))
        ports = " or ".join(str(p) for p in {args.port, args.testnet_port} if p) or "any port"
        raise UsageError(f"serve-fake: cannot listen on 127.0.0.1 port {ports}: {reason}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover - platform
            continue
        installed.append(signum)
    try:
        pool_id = next(iter(exchange.pools))
        address = max(exchange.orders, key=lambda a: len(exchange.orders[a]), default="")
        token = next(iter(exchange.markets), "")
        lines = [
            f"fake exchange (seed {args.seed}) serving until interrupted (Ctrl-C)",
            f"mainnet: {server.base_url}",
            f"testnet: {server.testnet_base_url}",
            f"export {ENV_VARS[Network.MAINNET]}={server.base_url}",
            f"export {ENV_VARS[Network.TESTNET]}={server.testnet_base_url}",
            f"try: asyncapi-client pool {pool_id}   asyncapi-client orders {address} --all   "
            f"asyncapi-client markets {token}",
        ]
        lines += [f"fault on {op}: {_describe(fault)}" for op, fault in faults.items()]
        out.write_lines(lines)
        out.flush()
        await stop.wait()
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
        await server.close()
    return EXIT_OK
