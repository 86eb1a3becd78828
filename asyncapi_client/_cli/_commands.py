"""The commands: each asks the Client one thing and hands the answer to the renderer."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from asyncapi_client._checkpoint import Checkpoint
from asyncapi_client._client import Client
from asyncapi_client._limiters import LocalLimiter, unlimited_until_told
from asyncapi_client._models import LeaderboardEntry, LeaderboardPage, Order, OrdersPage
from asyncapi_client._network import HostConfigError, Hosts, Network
from asyncapi_client._retry import RetryEvent
from asyncapi_client._walks import Walk

from ._args import PROG, UsageError
from ._checkpoint import CheckpointFile
from ._render import ENTRIES, MARKETS, ORDERS, POOL, TOKENS, USER, Kind, Progress, Renderer

__all__ = [
    "Context",
    "StartWalk",
    "addresses",
    "board_walks",
    "client_for",
    "first_walk",
    "leaderboard",
    "limit_lines",
    "markets",
    "order_walks",
    "orders",
    "pool",
    "resumed_walk",
    "tokens",
    "user",
]

P = TypeVar("P")

EXIT_OK = 0

#: What the command line calls each host's setting.
_OPTIONS: Mapping[Network, str] = {
    Network.MAINNET: "--base-url",
    Network.TESTNET: "--testnet-base-url",
}


@attrs.define
class Context:
    """What a command works with: its arguments, the renderer, and the environment.

    ``on_retry`` (when retries are shown) is handed to the Client: one line per retry.
    ``limiter`` is every Client's of the run: what it learned of the limits is shown by
    ``--verbose`` at the end.
    """

    args: argparse.Namespace
    render: Renderer
    environ: Mapping[str, str]
    on_retry: Callable[[RetryEvent], None] | None = None
    limiter: LocalLimiter = attrs.field(factory=unlimited_until_told)


def client_for(ctx: Context, needs: Network | None = None) -> Client:
    """A Client from the options, after checking that the host the command needs is set.

    Errors name the command line's options (``--base-url``), not the Python arguments.
    """
    args = ctx.args
    network: Network = args.network or Network.MAINNET
    try:
        hosts = Hosts.resolve(args.base_url, args.testnet_base_url, ctx.environ)
        hosts.base(needs or network)
    except HostConfigError as exc:
        raise UsageError(exc.describe(_OPTIONS[exc.network])) from None
    return Client(
        network,
        base_url=hosts.mainnet,
        testnet_base_url=hosts.testnet,
        timeout=args.timeout,
        deadline=args.deadline,
        max_retries=args.max_retries,
        on_retry=ctx.on_retry,
        limiter=ctx.limiter,
    )


async def limit_lines(limiter: LocalLimiter) -> list[str]:
    """What ``--verbose`` says at the end of a run of the rate limit each network's
    answers advertised (a line a network; none for a network that advertised none)."""
    lines = []
    for network in Network:
        status = await limiter.status(network)
        if status.source is None:
            continue
        left = "?" if status.remaining is None else str(status.remaining)
        of = "" if status.limit is None else f" of {status.limit}"
        resets = "" if status.reset is None else f", resets in {status.reset:.1f} s"
        lines.append(
            f"rate limit [{network.value}]: {left}{of} requests left{resets} "
            "(from the server's rate-limit headers)"
        )
    return lines


async def tokens(ctx: Context) -> int:
    async with client_for(ctx) as client:
        found = await client.tokens(search=ctx.args.search)
    ctx.render.records(TOKENS, found)
    return EXIT_OK


async def markets(ctx: Context) -> int:
    # Only an explicit --network overrides the test-network default of this operation.
    network = ctx.args.network
    async with client_for(ctx, network or Network.TESTNET) as client:
        found = await client.token_markets(ctx.args.token, network=network)
    ctx.render.records(MARKETS, found)
    return EXIT_OK


async def pool(ctx: Context) -> int:
    async with client_for(ctx) as client:
        found = await client.pool(ctx.args.pool_id)
    ctx.render.record(POOL, found)
    return EXIT_OK


async def user(ctx: Context) -> int:
    async with client_for(ctx) as client:
        found = await client.user(ctx.args.address)
    ctx.render.record(USER, found)
    return EXIT_OK


def addresses(ctx: Context) -> list[str]:
    """The users ``orders`` was given: one, or with ``--all`` several, each once."""
    args = ctx.args
    given: list[str] = args.addresses
    if len(given) > 1 and not args.all:
        raise UsageError("orders: several addresses need --all (one page is of one user)")
    twice = [address for i, address in enumerate(given) if address in given[:i]]
    if twice:
        raise UsageError(f"orders: ADDRESS {twice[0]} is given twice")
    return given


#: Makes the walk of one of a command's walks: ``resume`` is a checkpoint's text, or None.
StartWalk = Callable[[str | None], Walk[Any]]


def order_walks(ctx: Context, client: Client) -> list[StartWalk]:
    """One walk of orders for each address, in order, made only when its turn comes."""
    args = ctx.args
    filters: dict[str, Any] = {"market": args.market, "status": args.status, "side": args.side}

    def walk_of(address: str) -> StartWalk:
        def start(resume: str | None) -> Walk[Order]:
            return client.iter_orders(address, page_size=args.page_size, resume=resume, **filters)

        return start

    return [walk_of(address) for address in addresses(ctx)]


def board_walks(ctx: Context, client: Client) -> list[StartWalk]:
    def start(resume: str | None) -> Walk[LeaderboardEntry]:
        return client.iter_leaderboard(page_size=ctx.args.page_size, resume=resume)

    return [start]


async def orders(ctx: Context) -> int:
    args = ctx.args
    filters: dict[str, Any] = {"market": args.market, "status": args.status, "side": args.side}
    if args.all and args.cursor is not None:
        raise UsageError("orders: --cursor cannot be combined with --all")
    users = addresses(ctx)
    _check_checkpoint_use(ctx, "orders")
    async with client_for(ctx) as client:
        if args.checkpoint is not None:
            await checkpointed(ctx, order_walks(ctx, client), ORDERS, users)
            return EXIT_OK
        if args.all:

            async def pages() -> AsyncIterator[OrdersPage]:
                for user in users:
                    walk = client.iter_order_pages(user, page_size=args.page_size, **filters)
                    async with contextlib.aclosing(walk):
                        async for page in walk:
                            yield page

            await stream(ctx, pages(), _orders_of, ORDERS)
            return EXIT_OK
        page = await client.orders(users[0], limit=args.page_size, cursor=args.cursor, **filters)
    ctx.render.page(ORDERS, page, page.orders)
    return EXIT_OK


async def leaderboard(ctx: Context) -> int:
    args = ctx.args
    if args.all and args.page is not None:
        raise UsageError("leaderboard: --page cannot be combined with --all")
    _check_checkpoint_use(ctx, "leaderboard")
    async with client_for(ctx) as client:
        if args.checkpoint is not None:
            await checkpointed(ctx, board_walks(ctx, client), ENTRIES)
            return EXIT_OK
        if args.all:
            pages = client.iter_leaderboard_pages(page_size=args.page_size)
            await stream(ctx, pages, _entries_of, ENTRIES)
            return EXIT_OK
        page = await client.leaderboard(page=args.page, limit=args.page_size)
    ctx.render.page(ENTRIES, page, page.leaderboard)
    return EXIT_OK


def _check_checkpoint_use(ctx: Context, command: str) -> None:
    args = ctx.args
    if args.checkpoint is None:
        return
    if not args.all:
        raise UsageError(f"{command}: --checkpoint needs --all")
    if ctx.render.name == "json":
        raise UsageError(
            f"{command}: --checkpoint needs --format jsonl, csv or table (or parquet with "
            "--output): one JSON array cannot be continued by a second run"
        )


def resumed_walk(store: CheckpointFile, saved: str, users: Sequence[str] | None) -> int:
    """Which of the command's walks the saved checkpoint is in: its user's place among
    ``users`` (orders), or 0 (the leaderboard's one walk)."""
    if users is None:
        return 0
    try:
        address = Checkpoint.from_json(saved).address
    except ValueError as exc:
        raise UsageError(f"--checkpoint {store.path}: {exc}") from None
    if address not in users:
        raise UsageError(
            f"--checkpoint {store.path}: it is the checkpoint of a walk of {address}, "
            "which is not among the ADDRESS arguments"
        )
    return users.index(address)


def first_walk(store: CheckpointFile, start: StartWalk, saved: str | None) -> Walk[Any]:
    """The walk the run begins with, resumed from ``saved``: a checkpoint of another walk
    (other filters, operation or network) is a usage error."""
    try:
        return start(saved)
    except ValueError as exc:
        if saved is None:
            raise
        raise UsageError(f"--checkpoint {store.path}: {exc}") from None


async def checkpointed(
    ctx: Context, walks: Sequence[StartWalk], kind: Kind, users: Sequence[str] | None = None
) -> None:
    """Walk item by item, each walk in turn; after each item is written and flushed, save
    the checkpoint (and at the start of each next walk, that walk's start).

    A saved checkpoint is resumed (and stderr says so); the file goes when the walk is done.
    """
    store = CheckpointFile(ctx.args.checkpoint)
    saved = store.load()
    store.check_writable()
    first = 0 if saved is None else resumed_walk(store, saved, users)
    walk = first_walk(store, walks[first], saved)
    out = ctx.render.out
    if saved is not None:
        out.stderr.write(f"{PROG}: resuming the walk from the checkpoint in {store.path}\n")
        out.stderr.flush()
    progress = Progress(out, kind.noun)
    writer = ctx.render.walk(kind, continued=saved is not None)
    try:
        for index in range(first, len(walks)):
            if index > first:
                walk = walks[index](None)
                store.save(walk.checkpoint.to_json())
            async with contextlib.aclosing(walk):
                async for item in walk:
                    progress.before_output()
                    writer.add([item])
                    out.flush()
                    store.save(walk.checkpoint.to_json())
                    progress.update(writer.count)
    except BaseException:
        writer.stop()
        progress.finish()
        raise
    progress.before_output()
    writer.end()
    out.flush()
    store.remove()
    progress.finish()


def _orders_of(page: OrdersPage) -> Sequence[object]:
    return page.orders


def _entries_of(page: LeaderboardPage) -> Sequence[object]:
    return page.leaderboard


async def stream(
    ctx: Context, pages: AsyncIterator[P], items_of: Callable[[P], Sequence[object]], kind: Kind
) -> None:
    """Write a walk as it arrives, page after page, flushed after each."""
    out = ctx.render.out
    progress = Progress(out, kind.noun)
    writer = ctx.render.walk(kind)
    pages_seen = 0
    try:
        async for page in pages:
            batch = items_of(page)
            pages_seen += 1
            progress.before_output()
            writer.add(batch)
            out.flush()
            progress.update(writer.count, pages_seen)
    except BaseException:
        writer.stop()  # a signal (a cancellation here) or a failure: what was written parses
        progress.finish()  # end the line, so an error message starts on a fresh one
        raise
    finally:
        aclose = getattr(pages, "aclose", None)
        if aclose is not None:
            await aclose()
    progress.before_output()
    writer.end()
    out.flush()
    progress.finish()
