"""The commands: each asks the Client one thing and hands the answer to the renderer."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from asyncapi_client._client import Client
from asyncapi_client._models import LeaderboardEntry, LeaderboardPage, Order, OrdersPage
from asyncapi_client._network import HostConfigError, Hosts, Network
from asyncapi_client._retry import RetryEvent
from asyncapi_client._walks import Walk

from ._args import PROG, UsageError
from ._checkpoint import CheckpointFile
from ._render import ENTRIES, MARKETS, ORDERS, POOL, TOKENS, USER, Kind, Progress, Renderer

__all__ = ["Context", "client_for", "leaderboard", "markets", "orders", "pool", "tokens", "user"]

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
    """

    args: argparse.Namespace
    render: Renderer
    environ: Mapping[str, str]
    on_retry: Callable[[RetryEvent], None] | None = None


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
    )


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


async def orders(ctx: Context) -> int:
    args = ctx.args
    filters: dict[str, Any] = {"market": args.market, "status": args.status, "side": args.side}
    if args.all and args.cursor is not None:
        raise UsageError("orders: --cursor cannot be combined with --all")
    _check_checkpoint_use(ctx, "orders")
    async with client_for(ctx) as client:
        if args.checkpoint is not None:

            def walk(resume: str | None) -> Walk[Order]:
                return client.iter_orders(
                    args.address, page_size=args.limit, resume=resume, **filters
                )

            await checkpointed(ctx, walk, ORDERS)
            return EXIT_OK
        if args.all:
            pages = client.iter_order_pages(args.address, page_size=args.limit, **filters)
            await stream(ctx, pages, _orders_of, ORDERS)
            return EXIT_OK
        page = await client.orders(args.address, limit=args.limit, cursor=args.cursor, **filters)
    ctx.render.page(ORDERS, page, page.orders)
    return EXIT_OK


async def leaderboard(ctx: Context) -> int:
    args = ctx.args
    if args.all and args.page is not None:
        raise UsageError("leaderboard: --page cannot be combined with --all")
    _check_checkpoint_use(ctx, "leaderboard")
    async with client_for(ctx) as client:
        if args.checkpoint is not None:

            def walk(resume: str | None) -> Walk[LeaderboardEntry]:
                return client.iter_leaderboard(page_size=args.limit, resume=resume)

            await checkpointed(ctx, walk, ENTRIES)
            return EXIT_OK
        if args.all:
            pages = client.iter_leaderboard_pages(page_size=args.limit)
            await stream(ctx, pages, _entries_of, ENTRIES)
            return EXIT_OK
        page = await client.leaderboard(page=args.page, limit=args.limit)
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
            f"{command}: --checkpoint needs --format jsonl, csv or table "
            "(one JSON array cannot be continued by a second run)"
        )


async def checkpointed(ctx: Context, start: Callable[[str | None], Walk[Any]], kind: Kind) -> None:
    """Walk item by item; after each item is written and flushed, save the checkpoint.

    A saved checkpoint is resumed (and stderr says so); the file goes when the walk is done.
    """
    store = CheckpointFile(ctx.args.checkpoint)
    saved = store.load()
    store.check_writable()
    try:
        walk = start(saved)
    except ValueError as exc:
        if saved is None:
            raise
        raise UsageError(f"--checkpoint {store.path}: {exc}") from None
    out = ctx.render.out
    if saved is not None:
        out.stderr.write(f"{PROG}: resuming the walk from the checkpoint in {store.path}\n")
        out.stderr.flush()
    progress = Progress(out, kind.noun)
    writer = ctx.render.walk(kind, continued=saved is not None)
    try:
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
