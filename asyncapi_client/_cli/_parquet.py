"""``--format parquet --output FILE``: ``orders --all`` or ``leaderboard --all`` as a file.

The walk goes through :meth:`Walk.to_parquet`: FILE appears only complete (written beside
it, then renamed). Interrupted by SIGINT (exit 130), SIGTERM (exit 143) or a failure
mid-walk (exit 1), it leaves neither FILE nor the file in progress behind, and says so in
one line on stderr. The walk's progress goes to stderr when that is a terminal.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Final

from asyncapi_client._errors import ApiError
from asyncapi_client._walks import Walk

from ._args import UsageError
from ._commands import Context, client_for
from ._render import ENTRIES, ORDERS, Kind, OutputWriteError, Progress

__all__ = ["check_usage"]


_WALKS: Final = ("orders", "leaderboard")


def check_usage(args: argparse.Namespace) -> None:
    """Refuse what a Parquet export cannot do, and point ``args.run`` at the export.

    Raises UsageError (exit 2): ``--output`` without ``--format parquet``; ``parquet`` on
    another command, without ``--all``, without ``--output``, or with ``--checkpoint``.
    """
    command = args.command
    output = getattr(args, "output", None)
    if args.format != "parquet":
        if output is not None:
            raise UsageError(f"{command}: --output FILE is for --format parquet")
        return
    if command not in _WALKS:
        raise UsageError(
            f"{command}: --format parquet is for orders --all and leaderboard --all only"
        )
    if not args.all:
        raise UsageError(f"{command}: --format parquet needs --all (it writes a whole walk)")
    if output is None:
        raise UsageError(f"{command}: --format parquet needs --output FILE")
    if args.checkpoint is not None:
        raise UsageError(
            f"{command}: --checkpoint cannot be combined with --format parquet "
            "(the file appears only once the walk is complete)"
        )
    args.run = _RUN[command]


async def _export_walk(ctx: Context, walk: Walk[Any], kind: Kind) -> int:
    from asyncapi_client import _export  # pyarrow and the export only when asked for

    args = ctx.args
    output: str = args.output
    progress = Progress(ctx.render.out, kind.noun)
    try:
        await _export.to_parquet(
            walk,
            output,
            rows_per_group=args.rows_per_group,
            decimal_scale=args.decimal_scale,
            on_rows=progress.update,
        )
    except asyncio.CancelledError:  # SIGINT or SIGTERM (see _signals.stoppable)
        progress.finish()
        raise asyncio.CancelledError(f"{output} was not written") from None
    except ApiError:
        progress.finish()
        raise
    except (OSError, ValueError) as exc:  # the file, or a value the file cannot hold
        progress.finish()
        detail = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        raise OutputWriteError(f"{output}: {detail}") from exc
    progress.finish()
    return 0


async def orders(ctx: Context) -> int:
    args = ctx.args
    async with client_for(ctx) as client:
        walk = client.iter_orders(
            args.address,
            market=args.market,
            status=args.status,
            side=args.side,
            page_size=args.limit,
        )
        return await _export_walk(ctx, walk, ORDERS)


async def leaderboard(ctx: Context) -> int:
    async with client_for(ctx) as client:
        walk = client.iter_leaderboard(page_size=ctx.args.limit)
        return await _export_walk(ctx, walk, ENTRIES)


_RUN: Final[dict[str, Callable[[Context], Coroutine[Any, Any, int]]]] = {
    "orders": orders,
    "leaderboard": leaderboard,
}
