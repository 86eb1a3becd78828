"""``watch orders|pool|leaderboard``: a watch's changes as they come, one line each.

A change counts as handled once its line is written and flushed: the line is written, stdout
flushed, and only then is the watch asked for the next change. A stop (SIGINT, SIGTERM, a
failure) closes the watch with the state saved; a change taken but not yet written stays
unhandled there, so a run started again on the same ``--state`` delivers it.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
from collections.abc import Callable
from typing import Any, Final

from asyncapi_client._client import Client
from asyncapi_client._decode import camel
from asyncapi_client._models import LeaderboardEntry, Order, Pool
from asyncapi_client._watches import (
    FileWatchState,
    LeaderboardChange,
    OrderChange,
    PoolChange,
    Watch,
    WatchState,
)

from ._args import UsageError
from ._commands import Context, client_for
from ._render import ORDERS, Kind
from ._table import Column
from ._text import dumps, plain

__all__ = ["BOARD_CHANGES", "ORDER_CHANGES", "POOL_CHANGES", "watch"]

EXIT_OK: Final = 0
#: A ``--state`` starting with one of these is a fleet's Redis, not a file.
REDIS_SCHEMES: Final = ("redis://", "rediss://", "unix://")


# --- one line per change ------------------------------------------------------------------


def _digest(*values: object) -> str:
    """16 hex digits fixed by ``values`` (their JSON as the command line writes it)."""
    return hashlib.sha256(dumps(plain(list(values)))).hexdigest()[:16]


def order_line(change: OrderChange) -> dict[str, Any]:
    """``kind``, ``key``, the order's wire fields, and ``previous`` when there was one."""
    line: dict[str, Any] = {"kind": change.kind, "key": change.key, **plain(change.order)}
    if change.previous is not None:
        line["previous"] = plain(change.previous)
    return line


def pool_key(change: PoolChange) -> str:
    """``POOL_ID|DIGEST``: the digest of the states before and after, so a change delivered
    again has the same key and two different changes have different ones."""
    return f"{change.pool.pool_id}|{_digest(change.previous, change.pool)}"


def pool_line(change: PoolChange) -> dict[str, Any]:
    """``kind`` ("updated"), ``key``, the pool's wire fields, ``changed`` (the wire names of
    the fields that moved) and ``previous``."""
    return {
        "kind": "updated",
        "key": pool_key(change),
        **plain(change.pool),
        "changed": sorted(camel(name) for name in change.changed),
        "previous": plain(change.previous),
    }


def board_key(change: LeaderboardChange) -> str:
    """``leaderboard|DIGEST``: the digest of the top before and after."""
    return f"leaderboard|{_digest(list(change.previous), list(change.entries))}"


def board_line(change: LeaderboardChange) -> dict[str, Any]:
    """``kind`` ("updated"), ``key``, the addresses that ``entered``, ``left`` and ``moved``,
    and the top's ``entries`` now and ``previous``ly (leaderboard entries' wire fields)."""
    return {
        "kind": "updated",
        "key": board_key(change),
        "entered": sorted(change.entered),
        "left": sorted(change.left),
        "moved": sorted(change.moved),
        "entries": plain(list(change.entries)),
        "previous": plain(list(change.previous)),
    }


def _of_order(get: Callable[[Order], object]) -> Callable[[OrderChange], object]:
    """An orders table column's getter, for an order change."""
    return lambda change: get(change.order)


def _first(entries: tuple[LeaderboardEntry, ...]) -> str | None:
    return entries[0].address if entries else None


ORDER_CHANGES: Final = Kind(
    "changes",
    Order,
    (
        Column("change", lambda c: c.kind),
        *(Column(col.header, _of_order(col.get), col.kind) for col in ORDERS.columns),
    ),
    line=order_line,
    lead=("kind", "key"),
    trail=("previous",),
)
POOL_CHANGES: Final = Kind(
    "changes",
    Pool,
    (
        Column("change", lambda c: "updated"),
        Column("pool", lambda c: c.pool.pool_id, "id"),
        Column("changed", lambda c: ", ".join(sorted(camel(n) for n in c.changed))),
        Column("price", lambda c: c.pool.price, "number"),
        Column("change 24h", lambda c: c.pool.price_change_24h, "number"),
        Column("volume 24h", lambda c: c.pool.volume_24h, "number"),
        Column("tvl", lambda c: c.pool.tvl, "number"),
    ),
    line=pool_line,
    lead=("kind", "key"),
    trail=("changed", "previous"),
)
BOARD_CHANGES: Final = Kind(
    "changes",
    LeaderboardChange,
    (
        Column("change", lambda c: "updated"),
        Column("entered", lambda c: len(c.entered), "number"),
        Column("left", lambda c: len(c.left), "number"),
        Column("moved", lambda c: len(c.moved), "number"),
        Column("ranks", lambda c: len(c.entries), "number"),
        Column("first", lambda c: _first(c.entries), "id"),
    ),
    line=board_line,
    lead=("kind", "key"),
)


# --- the state ----------------------------------------------------------------------------


def _redis_state(url: str, name: str | None, consumer: str | None) -> WatchState:
    """A fleet's ``RedisWatchState`` (the ``redis`` extra; made where the fleet is built)."""
    if name is None or consumer is None:
        raise UsageError("watch: --state with a Redis URL needs --name and --consumer")
    try:
        fleet = importlib.import_module("asyncapi_client.fleet")
    except ImportError as exc:
        raise UsageError(
            f"watch: --state {url}: a Redis state needs the redis extra "
            f"(pip install 'asyncapi-client[redis]'): {exc}"
        ) from None
    make = getattr(fleet, "RedisWatchState", None)
    if make is None:
        raise UsageError(f"watch: --state {url}: this version has no Redis watch state")
    try:
        state: WatchState = make(url, name=name, consumer=consumer)
    except ValueError as exc:
        raise UsageError(f"watch: --state {url}: {exc}") from None
    return state


def make_state(args: Any) -> WatchState | None:
    """The watch's state from ``--state`` (a file, or a Redis URL with ``--name`` and
    ``--consumer``); None without ``--state``."""
    given: str | None = args.state
    if given is not None and given.startswith(REDIS_SCHEMES):
        return _redis_state(given, args.name, args.consumer)
    if args.name is not None or args.consumer is not None:
        raise UsageError("watch: --name and --consumer are for --state with a Redis URL")
    if given is None:
        return None
    if not given:
        raise UsageError("watch: --state FILE: the name is empty")
    return FileWatchState(given)


async def _close_state(state: WatchState | None) -> None:
    aclose = getattr(state, "aclose", None)
    if aclose is not None:
        await aclose()


# --- the command --------------------------------------------------------------------------


def _start(args: Any, client: Client, state: WatchState | None) -> tuple[Watch[Any], Kind]:
    """The watch the arguments ask for, and the kind of its lines."""
    if args.watch == "orders":
        orders = client.watch_orders(
            args.address,
            market=args.market,
            side=args.side,
            interval=args.interval,
            state=state,
            initial=args.initial,
        )
        return orders, ORDER_CHANGES
    if args.watch == "pool":
        return client.watch_pool(args.pool_id, interval=args.interval, state=state), POOL_CHANGES
    board = client.watch_leaderboard(top=args.top, interval=args.interval, state=state)
    return board, BOARD_CHANGES


def _stopped(state: WatchState | None, args: Any) -> str:
    """What a stop leaves behind, for the line on stderr."""
    if state is None:
        return "the watch stopped (no --state: a new run starts from a new baseline)"
    return f"the watch stopped; its state is saved in {args.state}: run it again to go on"


async def follow(ctx: Context, watch: Watch[Any], kind: Kind) -> None:
    """Write each change as it comes, flushed before the next is asked for; on any stop,
    close the watch so that only a change not yet written stays unhandled."""
    out = ctx.render.out
    writer = ctx.render.walk(kind)
    in_hand = False
    try:
        async for change in watch:
            in_hand = True
            writer.add([change])
            out.flush()
            in_hand = False
    except BaseException:
        writer.stop()
        await (watch._abandon() if in_hand else watch.aclose())
        raise
    await watch.aclose()  # pragma: no cover - a watch ends only with an error


async def watch(ctx: Context) -> int:
    """``watch orders|pool|leaderboard``: every change from now on, until stopped."""
    args = ctx.args
    state = make_state(args)
    try:
        async with client_for(ctx) as client:
            changes, kind = _start(args, client, state)
            try:
                await follow(ctx, changes, kind)
            except asyncio.CancelledError:
                raise asyncio.CancelledError(_stopped(state, args)) from None
    finally:
        await _close_state(state)
    return EXIT_OK
